//! Work queues: fixed-capacity rings sized at creation, so posting never
//! allocates (perf.md: no allocation per work request).
//!
//! A ring keeps three counters over an endless sequence of work requests:
//! `head` (oldest slot not yet freed), `done` (oldest work request not yet
//! completed) and `tail` (next to post). `[head, done)` are completed but
//! still hold their slot until the CQE covering them is polled (mlx5 frees
//! SQ slots at poll time, data-path.md §1.2); `[done, tail)` are outstanding.

use verbs_api::{AtomicInfo, RdmaInfo, SendFlags, Sge, WcStatus, WrOpcode};

use crate::handles::AhHandle;

/// One posted send work request (its SGEs live in the ring's SGE array).
/// Every field is kept for the data path that executes it.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    pub(crate) opcode: WrOpcode,
    pub(crate) send_flags: SendFlags,
    pub(crate) imm_data: u32,
    pub(crate) rdma: RdmaInfo,
    pub(crate) atomic: AtomicInfo,
    pub(crate) ah: Option<AhHandle>,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
    pub(crate) remote_srqn: u32,
    pub(crate) num_sge: u32,
    /// Whether a successful completion produces a CQE.
    pub(crate) signaled: bool,
    /// Total bytes of the gather list.
    pub(crate) length: u64,
    /// Accepted at post time but completes with this status when it reaches
    /// the head of the queue (mlx5: opcode invalid for the QP type →
    /// `LOC_QP_OP_ERR`, data-path §1.2).
    pub(crate) deferred_error: Option<WcStatus>,
}

/// One posted receive work request.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) num_sge: u32,
    pub(crate) length: u64,
}

/// A ring of `capacity` work requests with up to `max_sge` SGEs each.
#[derive(Debug, Default)]
pub(crate) struct Ring<W> {
    wqes: Vec<W>,
    sges: Vec<Sge>,
    max_sge: u32,
    pub(crate) head: u64,
    pub(crate) done: u64,
    pub(crate) tail: u64,
}

impl<W: Copy + Default> Ring<W> {
    /// A ring for `capacity` requests of at most `max_sge` SGEs each.
    pub(crate) fn new(capacity: u32, max_sge: u32) -> Self {
        Self {
            wqes: vec![W::default(); capacity as usize],
            sges: vec![Sge::default(); capacity as usize * max_sge as usize],
            max_sge,
            head: 0,
            done: 0,
            tail: 0,
        }
    }

    #[allow(dead_code)] // for the data path
    pub(crate) fn capacity(&self) -> u32 {
        self.wqes.len() as u32
    }

    /// Slots in use (outstanding or completed but not yet freed).
    pub(crate) fn occupied(&self) -> u64 {
        self.tail - self.head
    }

    pub(crate) fn is_full(&self) -> bool {
        self.occupied() >= self.wqes.len() as u64
    }

    /// Outstanding (posted, not completed) requests.
    pub(crate) fn outstanding(&self) -> u64 {
        self.tail - self.done
    }

    fn slot(&self, seq: u64) -> usize {
        (seq % self.wqes.len() as u64) as usize
    }

    /// Appends a request; the caller has checked [`Ring::is_full`] and the SGE count.
    pub(crate) fn push(&mut self, wqe: W, sges: &[Sge]) -> u64 {
        debug_assert!(!self.is_full());
        debug_assert!(sges.len() <= self.max_sge as usize);
        let seq = self.tail;
        let slot = self.slot(seq);
        self.wqes[slot] = wqe;
        let base = slot * self.max_sge as usize;
        self.sges[base..base + sges.len()].copy_from_slice(sges);
        self.tail += 1;
        seq
    }

    /// The request with sequence number `seq` (must still hold its slot).
    pub(crate) fn get(&self, seq: u64) -> (&W, &[Sge], usize) {
        debug_assert!(seq >= self.head && seq < self.tail);
        let slot = self.slot(seq);
        let base = slot * self.max_sge as usize;
        (
            &self.wqes[slot],
            &self.sges[base..base + self.max_sge as usize],
            slot,
        )
    }

    /// A request whose slot was just freed (still readable until reused).
    pub(crate) fn get_freed(&self, seq: u64) -> (&W, &[Sge], usize) {
        let slot = self.slot(seq);
        let base = slot * self.max_sge as usize;
        (
            &self.wqes[slot],
            &self.sges[base..base + self.max_sge as usize],
            slot,
        )
    }

    /// Frees every slot up to and including `seq`; returns the freed range.
    pub(crate) fn free_through(&mut self, seq: u64) -> core::ops::Range<u64> {
        let from = self.head;
        let to = (seq + 1).min(self.done).max(self.head);
        self.head = to;
        from..to
    }

    /// Drops every request without completions (entering RESET, destroy).
    #[allow(dead_code)] // for the data path
    pub(crate) fn discard(&mut self) -> core::ops::Range<u64> {
        let r = self.head..self.tail;
        self.head = self.tail;
        self.done = self.tail;
        r
    }
}
