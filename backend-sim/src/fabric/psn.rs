//! Packet sequence numbers: 24 bits, compared modulo 2^24.
//!
//! IBTA vol. 1 §9.7.1 and §9.7.5 (requester and responder PSN checks): a PSN
//! is a 24-bit counter that wraps, and whether one PSN is "ahead of" another
//! is decided within half the number space: `a` is ahead of `b` when the
//! forward distance from `b` to `a`, modulo 2^24, is non-zero and less than
//! 2^23. The responder classifies an incoming PSN against its expected PSN
//! this way (duplicate = behind, sequence error = ahead).

use core::cmp::Ordering;
use core::fmt;

/// A 24-bit packet sequence number.
///
/// The stored value is always masked to 24 bits; arithmetic wraps at 2^24.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(u32);

impl Psn {
    /// The mask of the 24 bits a PSN has.
    pub const MASK: u32 = 0x00FF_FFFF;
    /// Half of the PSN space (2^23): the ahead/behind horizon.
    pub const HALF: u32 = 1 << 23;

    /// The PSN `value` modulo 2^24 (higher bits are discarded, as
    /// `ibv_modify_qp` does with `sq_psn`/`rq_psn`).
    pub const fn new(value: u32) -> Self {
        Self(value & Self::MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// The PSN after this one (wrapping from 0xFFFFFF to 0).
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// This PSN advanced by `n`, modulo 2^24.
    pub const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// This PSN moved back by `n`, modulo 2^24.
    pub const fn sub(self, n: u32) -> Self {
        Self::new(self.0.wrapping_sub(n))
    }

    /// The forward distance from `earlier` to `self`, modulo 2^24
    /// (`earlier.add(d) == self`).
    pub const fn distance_from(self, earlier: Self) -> u32 {
        self.0.wrapping_sub(earlier.0) & Self::MASK
    }

    /// True when `self` is strictly ahead of `other` within half the space.
    pub const fn is_ahead_of(self, other: Self) -> bool {
        let d = self.distance_from(other);
        d != 0 && d < Self::HALF
    }

    /// True when `self` is strictly behind `other` within half the space.
    pub const fn is_behind(self, other: Self) -> bool {
        other.is_ahead_of(self)
    }

    /// Orders `self` against `reference` on the circle: `Greater` when
    /// ahead, `Less` when behind, `Equal` when the same.
    ///
    /// The one PSN exactly 2^23 away is neither ahead nor behind by the
    /// rules above; it is reported as `Less` (treated as an old duplicate,
    /// the conservative choice for a responder). This is not a total order,
    /// so `Psn` does not implement `Ord`.
    pub const fn compare(self, reference: Self) -> Ordering {
        let d = self.distance_from(reference);
        if d == 0 {
            Ordering::Equal
        } else if d < Self::HALF {
            Ordering::Greater
        } else {
            Ordering::Less
        }
    }
}

/// Prints the PSN in decimal.
impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_arithmetic_wraps_at_24_bits() {
        // Goal: construction masks and arithmetic wraps modulo 2^24.
        // Method: step across the 0xFFFFFF -> 0 boundary both ways.
        assert_eq!(Psn::new(0x0100_0005).value(), 5);
        assert_eq!(Psn::new(Psn::MASK).next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), Psn::new(Psn::MASK));
        assert_eq!(Psn::new(Psn::MASK - 1).add(5), Psn::new(3));
        assert_eq!(Psn::new(3).distance_from(Psn::new(Psn::MASK - 1)), 5);
        assert_eq!(Psn::new(7).distance_from(Psn::new(7)), 0);
    }

    #[test]
    fn psn_comparison_uses_half_the_space() {
        // Goal: "ahead" is decided within 2^23 of the reference, across the
        // wrap, as IBTA 9.7 requires.
        // Method: a table of (psn, reference, expected ordering), including
        // wrap-around neighbours and the exact half-way point.
        let max = Psn::MASK;
        let half = Psn::HALF;
        let table = [
            (5, 5, Ordering::Equal),
            (6, 5, Ordering::Greater),
            (4, 5, Ordering::Less),
            (0, max, Ordering::Greater),
            (max, 0, Ordering::Less),
            (2, max - 2, Ordering::Greater),
            (half - 1, 0, Ordering::Greater),
            (half, 0, Ordering::Less),
            (half + 1, 0, Ordering::Less),
            (0, half + 1, Ordering::Greater),
            (10, 10 + half, Ordering::Less),
        ];
        for (psn, reference, expected) in table {
            let (p, r) = (Psn::new(psn), Psn::new(reference));
            assert_eq!(p.compare(r), expected, "{psn:#x} vs {reference:#x}");
            assert_eq!(p.is_ahead_of(r), expected == Ordering::Greater);
        }
        assert!(Psn::new(max).is_behind(Psn::new(0)));
        assert!(!Psn::new(0).is_behind(Psn::new(0)));
    }
}
