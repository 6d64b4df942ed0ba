//! Completion queues in shared memory: the fabric writes each completion
//! of a client's CQ into a ring the client maps, and `ibv_poll_cq` in the
//! client reads it without a system call, as a provider reads the CQ
//! buffer a NIC writes. The client's consumer count, in the same region,
//! is the doorbell record the fabric reads to take entries out of the
//! world's CQ ([`backend_sim::CqMirror`]), so the world's occupancy, and
//! with it overrun, stays what it is in one process.
//!
//! Layout (little-endian, offsets in bytes):
//!
//! | at | what | written by |
//! |---|---|---|
//! | 0 | producer: completions published | fabric |
//! | 8 | detached: non-zero once the fabric stopped mirroring | fabric |
//! | 64 | consumer: completions taken | client |
//! | 128 + i·[`SLOT`] | slot `i mod capacity`: `u32` length, postcard [`MirroredCqe`] | fabric |

use std::sync::atomic::Ordering;

use backend_sim::{CqMirror, MirroredCqe};

use super::shm::Shm;

/// Bytes of one slot.
pub(crate) const SLOT: usize = 128;
const PRODUCER: usize = 0;
const DETACHED: usize = 8;
const CONSUMER: usize = 64;
const SLOTS: usize = 128;

/// The largest ring the fabric makes; a CQ that needs more is polled by
/// call.
pub(crate) const MAX_RING_BYTES: usize = 64 << 20;

/// The bytes of a ring of `capacity` slots.
pub(crate) fn ring_bytes(capacity: u64) -> Option<usize> {
    let b = usize::try_from(capacity)
        .ok()?
        .checked_mul(SLOT)?
        .checked_add(SLOTS)?;
    (b <= MAX_RING_BYTES).then_some(b)
}

/// The slots a CQ of `cqe` entries needs: more than it can ever queue.
pub(crate) fn capacity_for(cqe: u32) -> u64 {
    (u64::from(cqe) + 1).next_power_of_two()
}

/// The fabric's side: the world publishes into it.
#[derive(Debug)]
pub(crate) struct RingMirror {
    shm: Shm,
    capacity: u64,
    published: u64,
}

impl RingMirror {
    /// A mirror writing into `shm` (of [`ring_bytes`]`(capacity)` bytes).
    pub(crate) fn new(shm: Shm, capacity: u64) -> Self {
        Self {
            shm,
            capacity,
            published: 0,
        }
    }
}

impl CqMirror for RingMirror {
    fn consumed(&self) -> u64 {
        self.shm.counter(CONSUMER).load(Ordering::Acquire)
    }

    fn publish(&mut self, cqe: &MirroredCqe) {
        // The data a completion reports lands before the completion shows.
        super::memory::flush_all();
        let mut buf = [0u8; SLOT];
        let len = postcard::to_slice(cqe, &mut buf[4..]).map_or(0, |b| b.len());
        buf[..4].copy_from_slice(&(len as u32).to_le_bytes());
        let at = SLOTS + (self.published % self.capacity) as usize * SLOT;
        self.shm.write(at, &buf[..4 + len]);
        self.published += 1;
        self.shm
            .counter(PRODUCER)
            .store(self.published, Ordering::Release);
    }

    fn detach(&mut self) {
        self.shm.counter(DETACHED).store(1, Ordering::Release);
    }
}

/// The client's side of one CQ's ring.
#[derive(Debug)]
pub(crate) struct CqRing {
    shm: Shm,
    capacity: u64,
    /// Entries taken (what the consumer count says).
    taken: u64,
    /// Consecutive polls that found the ring empty.
    empty_polls: u32,
}

/// How many empty polls in a row before the poller yields the CPU once:
/// a program spinning on an empty CQ leaves the fabric room to run on a
/// machine with fewer cores than busy processes, and an empty poll stays
/// a memory read (a `sched_yield` costs well under a microsecond, spread
/// over this many polls).
pub(crate) const YIELD_EVERY: u32 = 64;

impl CqRing {
    /// The client's view of a ring the fabric made.
    pub(crate) fn new(shm: Shm, capacity: u64) -> Self {
        Self {
            shm,
            capacity,
            taken: 0,
            empty_polls: 0,
        }
    }

    /// Takes up to `want` completions, handing each to `out` with its
    /// index; `None` once the fabric detached the ring (attach anew).
    pub(crate) fn poll(
        &mut self,
        want: usize,
        mut out: impl FnMut(usize, &MirroredCqe),
    ) -> Option<usize> {
        let produced = self.shm.counter(PRODUCER).load(Ordering::Acquire);
        if produced == self.taken {
            if self.shm.counter(DETACHED).load(Ordering::Acquire) != 0 {
                return None;
            }
            self.empty_polls += 1;
            if self.empty_polls >= YIELD_EVERY {
                self.empty_polls = 0;
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
            return Some(0);
        }
        self.empty_polls = 0;
        if self.shm.counter(DETACHED).load(Ordering::Acquire) != 0 {
            return None;
        }
        let ready = produced.saturating_sub(self.taken).min(self.capacity);
        let n = ready.min(want as u64) as usize;
        let mut buf = [0u8; SLOT];
        let mut got = 0;
        for i in 0..n {
            let at = SLOTS + ((self.taken + i as u64) % self.capacity) as usize * SLOT;
            self.shm.read(at, &mut buf);
            let len = (u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize).min(SLOT - 4);
            let Ok(cqe) = postcard::from_bytes::<MirroredCqe>(&buf[4..4 + len]) else {
                // Not what the fabric writes: stop here; with nothing
                // taken, attach anew (or poll by call) rather than stick.
                if got == 0 {
                    return None;
                }
                break;
            };
            out(got, &cqe);
            got += 1;
        }
        self.taken += got as u64;
        self.shm
            .counter(CONSUMER)
            .store(self.taken, Ordering::Release);
        Some(got)
    }

    /// The ring's region (for tests that scribble on it).
    #[cfg(test)]
    pub(crate) fn shm(&self) -> &Shm {
        &self.shm
    }
}

/// Offsets of the ring's counters, for tests that scribble on them.
#[cfg(test)]
pub(crate) mod layout {
    pub(crate) const PRODUCER: usize = super::PRODUCER;
    pub(crate) const CONSUMER: usize = super::CONSUMER;
    pub(crate) const DETACHED: usize = super::DETACHED;
}
