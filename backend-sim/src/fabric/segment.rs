//! Segmentation of a message into path-MTU packets.
//!
//! IBTA vol. 1 §9.5: a message longer than the path MTU is carried by a
//! FIRST packet, zero or more MIDDLE packets and a LAST packet, each but the
//! last holding exactly one MTU of payload; a message that fits in one
//! packet (including a zero-length one) is a single ONLY packet.

use core::fmt;
use core::iter::FusedIterator;

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentPosition {
    /// The first of several packets.
    First,
    /// Neither first nor last.
    Middle,
    /// The last of several packets.
    Last,
    /// The whole message in one packet.
    Only,
}

impl SegmentPosition {
    /// True for `First` and `Only`: the packet that starts a message.
    pub const fn starts_message(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// True for `Last` and `Only`: the packet that ends a message.
    pub const fn ends_message(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }

    /// The IBTA opcode-name suffix: `FIRST`, `MIDDLE`, `LAST`, `ONLY`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::First => "FIRST",
            Self::Middle => "MIDDLE",
            Self::Last => "LAST",
            Self::Only => "ONLY",
        }
    }
}

impl fmt::Display for SegmentPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One packet's share of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// Packet number within the message, from 0 (add it to the message's
    /// first PSN to get this packet's PSN).
    pub index: u32,
    /// Byte offset of the payload within the message.
    pub offset: u32,
    /// Payload bytes in this packet.
    pub len: u32,
    /// First, middle, last or only.
    pub position: SegmentPosition,
}

/// The number of packets a `msg_len`-byte message needs at `path_mtu`
/// (at least one: a zero-length message is one packet).
///
/// # Panics
///
/// If `path_mtu` is zero.
pub const fn packet_count(msg_len: u32, path_mtu: u32) -> u32 {
    assert!(path_mtu > 0, "path MTU of zero");
    if msg_len == 0 {
        1
    } else {
        msg_len.div_ceil(path_mtu)
    }
}

/// Splits a `msg_len`-byte message into packets of at most `path_mtu`
/// payload bytes, in order.
///
/// # Panics
///
/// If `path_mtu` is zero.
pub fn segment(msg_len: u32, path_mtu: u32) -> Segments {
    Segments {
        msg_len,
        path_mtu,
        next_index: 0,
        count: packet_count(msg_len, path_mtu),
    }
}

/// The iterator [`segment`] returns; allocation-free and exact-sized.
#[derive(Clone, Debug)]
pub struct Segments {
    msg_len: u32,
    path_mtu: u32,
    next_index: u32,
    count: u32,
}

impl Iterator for Segments {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.next_index >= self.count {
            return None;
        }
        let index = self.next_index;
        self.next_index += 1;
        let offset = index * self.path_mtu;
        let len = (self.msg_len - offset).min(self.path_mtu);
        let last = index + 1 == self.count;
        let position = match (index == 0, last) {
            (true, true) => SegmentPosition::Only,
            (true, false) => SegmentPosition::First,
            (false, true) => SegmentPosition::Last,
            (false, false) => SegmentPosition::Middle,
        };
        Some(Segment {
            index,
            offset,
            len,
            position,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.count - self.next_index) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Segments {}
impl FusedIterator for Segments {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the invariants every segmentation must satisfy.
    fn check(msg_len: u32, mtu: u32) -> Vec<Segment> {
        let segs: Vec<Segment> = segment(msg_len, mtu).collect();
        assert_eq!(segs.len() as u32, packet_count(msg_len, mtu));
        assert_eq!(segment(msg_len, mtu).len(), segs.len());
        let mut expected_offset = 0;
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(s.index, i as u32);
            assert_eq!(s.offset, expected_offset, "len {msg_len} mtu {mtu}");
            assert!(s.len <= mtu);
            if !s.position.ends_message() {
                assert_eq!(s.len, mtu, "only the last packet may be short");
            }
            assert_eq!(s.position.starts_message(), i == 0);
            assert_eq!(s.position.ends_message(), i + 1 == segs.len());
            expected_offset += s.len;
        }
        assert_eq!(expected_offset, msg_len);
        segs
    }

    #[test]
    fn segmentation_edges_at_every_mtu() {
        // Goal: 0, 1, MTU-1, MTU, MTU+1 and 64 KiB split correctly at every
        // IB MTU.
        // Method: for each (MTU, length) check the general invariants (offsets
        // contiguous, only the last packet short, positions right) and the
        // exact packet count and positions.
        for mtu in [256, 512, 1024, 2048, 4096] {
            let zero = check(0, mtu);
            assert_eq!(zero.len(), 1);
            assert_eq!((zero[0].len, zero[0].position), (0, SegmentPosition::Only));
            assert_eq!(check(1, mtu)[0].position, SegmentPosition::Only);
            assert_eq!(check(mtu - 1, mtu).len(), 1);
            let exact = check(mtu, mtu);
            assert_eq!((exact.len(), exact[0].len), (1, mtu));
            let over = check(mtu + 1, mtu);
            assert_eq!(over.len(), 2);
            assert_eq!(over[0].position, SegmentPosition::First);
            assert_eq!((over[1].position, over[1].len), (SegmentPosition::Last, 1));
            let big = check(64 * 1024, mtu);
            assert_eq!(big.len() as u32, 64 * 1024 / mtu);
            assert!(big[1..big.len() - 1]
                .iter()
                .all(|s| s.position == SegmentPosition::Middle));
        }
        // The largest message verbs allow (2^31 bytes) does not overflow.
        assert_eq!(packet_count(1 << 31, 256), 1 << 23);
        assert_eq!(segment(1 << 31, 4096).last().map(|s| s.len), Some(4096));
    }
}
