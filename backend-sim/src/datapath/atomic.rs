//! Atomic operations on one 64-bit word (data-path §7).

use verbs_api::WrOpcode;

/// The two verbs atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`: if `*target == compare` then `*target = swap`.
    CompareAndSwap {
        /// `wr.atomic.compare_add`.
        compare: u64,
        /// `wr.atomic.swap`.
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`: `*target += add` (wrapping).
    FetchAndAdd {
        /// `wr.atomic.compare_add`.
        add: u64,
    },
}

impl AtomicOp {
    /// The operation of an atomic WR, from its `compare_add` and `swap`;
    /// `None` for other opcodes.
    pub const fn from_wr(op: WrOpcode, compare_add: u64, swap: u64) -> Option<Self> {
        match op {
            WrOpcode::AtomicCmpAndSwp => Some(Self::CompareAndSwap {
                compare: compare_add,
                swap,
            }),
            WrOpcode::AtomicFetchAndAdd => Some(Self::FetchAndAdd { add: compare_add }),
            _ => None,
        }
    }
}

/// Applies `op` to the 8 target bytes and returns the original value,
/// which the requester writes into its 8-byte local SGE (data-path §7:
/// "The original value is written to the local SGE").
///
/// The word is read and written **little-endian**: the MR bytes hold the
/// value as an x86-64 (or little-endian ARM) host stores a `u64`, which is
/// what verbs users read back, and the original value goes to the local
/// SGE the same way (`original.to_le_bytes()`). Big-endian is only the wire
/// format of the atomic ETH / AtomicAckETH (§7 "64-bit big-endian on the
/// wire"); a fabric that serialises them uses `to_be_bytes` there.
///
/// # Divergence from hardware
///
/// A real HCA computes on the big-endian wire value unless the device runs
/// in host-endianness atomic mode (what mlx5 configures when the firmware
/// supports it); the simulator always behaves as host-endian on a
/// little-endian host. Atomicity holds trivially: the simulator is single
/// threaded (real HCAs are atomic only against other atomics of the same
/// HCA, MAN-WR).
pub fn apply_atomic(op: AtomicOp, target: &mut [u8; 8]) -> u64 {
    let original = u64::from_le_bytes(*target);
    let new = match op {
        AtomicOp::CompareAndSwap { compare, swap } => {
            if original == compare {
                swap
            } else {
                original
            }
        }
        AtomicOp::FetchAndAdd { add } => original.wrapping_add(add),
    };
    *target = new.to_le_bytes();
    original
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_and_swap_section_7() {
        // Goal: §7: CMP_AND_SWP swaps only when equal and always returns the
        // original value.
        // Method: a matching and a mismatching compare on a little-endian word.
        let mut word = 5u64.to_le_bytes();
        let op = AtomicOp::from_wr(WrOpcode::AtomicCmpAndSwp, 5, 9).expect("atomic");
        assert_eq!(apply_atomic(op, &mut word), 5);
        assert_eq!(u64::from_le_bytes(word), 9);
        assert_eq!(apply_atomic(op, &mut word), 9, "compare 5 != 9: no swap");
        assert_eq!(u64::from_le_bytes(word), 9);
    }

    #[test]
    fn fetch_and_add_wraps_section_7() {
        // Goal: §7: FETCH_AND_ADD adds compare_add, returns the original,
        // wrapping at 2^64.
        // Method: add 3 to u64::MAX - 1.
        let mut word = (u64::MAX - 1).to_le_bytes();
        let op = AtomicOp::from_wr(WrOpcode::AtomicFetchAndAdd, 3, 0).expect("atomic");
        assert_eq!(apply_atomic(op, &mut word), u64::MAX - 1);
        assert_eq!(u64::from_le_bytes(word), 1);
        assert_eq!(AtomicOp::from_wr(WrOpcode::Send, 1, 1), None);
    }

    #[test]
    fn byte_order_is_little_endian_in_memory() {
        // Goal: the documented memory byte order: byte 0 is the least
        // significant byte.
        // Method: add 1 to a word whose bytes are [0xff, 0, ..].
        let mut word = [0xff, 0, 0, 0, 0, 0, 0, 0];
        let old = apply_atomic(AtomicOp::FetchAndAdd { add: 1 }, &mut word);
        assert_eq!(old, 0xff);
        assert_eq!(word, [0, 1, 0, 0, 0, 0, 0, 0]);
    }
}
