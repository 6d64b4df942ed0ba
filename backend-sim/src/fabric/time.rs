//! Virtual time: an instant and a duration, both whole nanoseconds.
//!
//! The simulator never reads a wall clock. Every input that depends on time
//! (a verb call, a packet send, a poll) is given the current [`SimInstant`]
//! by the caller, in the sans-IO manner, and every scheduled event carries
//! the instant at which it becomes due.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point on the simulator's virtual clock, in nanoseconds since the world
/// was created.
///
/// `u64` nanoseconds cover more than 580 years of virtual time, so overflow
/// is a bug, and arithmetic on instants panics on it in debug builds like
/// any integer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimInstant(pub u64);

/// A span of virtual time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(pub u64);

impl SimInstant {
    /// The instant the world starts at.
    pub const ZERO: Self = Self(0);

    /// The instant `ns` nanoseconds after the start.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(ns)
    }

    /// Nanoseconds since the start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is
    /// later.
    pub const fn saturating_duration_since(self, earlier: Self) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` on overflow.
    pub const fn checked_add(self, d: SimDuration) -> Option<Self> {
        match self.0.checked_add(d.0) {
            Some(ns) => Some(Self(ns)),
            None => None,
        }
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: Self = Self(0);

    /// `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(ns)
    }

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Self(us * 1_000)
    }

    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms * 1_000_000)
    }

    /// `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        Self(s * 1_000_000_000)
    }

    /// The duration in nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self * n`, saturating at the largest duration.
    pub const fn saturating_mul(self, n: u64) -> Self {
        Self(self.0.saturating_mul(n))
    }

    /// `self + other`, saturating at the largest duration.
    pub const fn saturating_add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

/// Saturates at the end of virtual time (`u64::MAX` ns, about 584 years):
/// an event scheduled past it (a delay fault of 2^64 - 1 ns, say) happens
/// at the last instant instead of wrapping or panicking.
impl Add<SimDuration> for SimInstant {
    type Output = Self;
    fn add(self, d: SimDuration) -> Self {
        Self(self.0.saturating_add(d.0))
    }
}

/// Saturating, as `+`.
impl AddAssign<SimDuration> for SimInstant {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

impl Sub for SimInstant {
    type Output = SimDuration;
    /// # Panics
    ///
    /// In debug builds, when `earlier` is after `self`.
    fn sub(self, earlier: Self) -> SimDuration {
        SimDuration(self.0 - earlier.0)
    }
}

/// Saturates at the largest duration.
impl Add for SimDuration {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        self.saturating_add(other)
    }
}

/// Saturating, as `+`.
impl AddAssign for SimDuration {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// Prints `<n>ns`: whole nanoseconds, so traces are exact and stable.
impl fmt::Display for SimInstant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// Prints `<n>ns`.
impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_constructors_scale_to_nanoseconds() {
        // Goal: each unit-suffixed constructor means what its name says.
        // Method: compare against the nanosecond count written out.
        assert_eq!(SimDuration::from_micros(3).as_nanos(), 3_000);
        assert_eq!(SimDuration::from_millis(2).as_nanos(), 2_000_000);
        assert_eq!(SimDuration::from_secs(1).as_nanos(), 1_000_000_000);
        let t = SimInstant::ZERO + SimDuration::from_micros(1);
        assert_eq!(t, SimInstant::from_nanos(1_000));
        assert_eq!(t - SimInstant::ZERO, SimDuration::from_nanos(1_000));
        assert_eq!(
            SimInstant::ZERO.saturating_duration_since(t),
            SimDuration::ZERO
        );
        assert_eq!(SimInstant(u64::MAX).checked_add(SimDuration(1)), None);
        assert_eq!(t.to_string(), "1000ns");
    }

    #[test]
    fn addition_saturates_at_the_end_of_virtual_time() {
        // Goal: a huge delay fault cannot overflow the clock (issue #12
        // item 10: debug builds panicked, release builds wrapped).
        let end = SimInstant(u64::MAX - 5) + SimDuration(u64::MAX);
        assert_eq!(end, SimInstant(u64::MAX));
        let mut t = SimInstant(10);
        t += SimDuration(u64::MAX);
        assert_eq!(t, SimInstant(u64::MAX));
        assert_eq!(
            SimDuration(u64::MAX) + SimDuration(1),
            SimDuration(u64::MAX)
        );
    }
}
