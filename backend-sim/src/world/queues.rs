//! Work queues: fixed-capacity rings sized at creation, so posting never
//! allocates (perf.md: no allocation per work request).
//!
//! A ring keeps three counters over an endless sequence of work requests:
//! `head` (oldest slot not yet freed), `done` (oldest work request not yet
//! completed) and `tail` (next to post). `[head, done)` are completed but
//! still hold their slot until the CQE covering them is polled (mlx5 frees
//! SQ slots at poll time, data-path.md §1.2); `[done, tail)` are outstanding.

use verbs_api::{AtomicInfo, FlushInfo, RdmaInfo, SendFlags, Sge, WcStatus, WrOpcode};

use crate::handles::AhHandle;

/// Where a send work request is in its execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Exec {
    /// Posted, not transmitted (or rewound for retransmission).
    #[default]
    Queued,
    /// Transmitted; waiting for its ACK, response or (UD/UC) departure.
    Sent,
    /// Finished successfully; completes when every earlier one has.
    Done,
    /// Finished in error with this status; completes in order, then the
    /// QP leaves service.
    Failed(WcStatus),
}

/// One posted send work request (its SGEs live in the ring's SGE array,
/// inline bytes in the ring's inline array).
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
    #[allow(dead_code)] // read by XRC sends (issue #4)
    pub(crate) remote_srqn: u32,
    /// DCI: the DC key presented to the DCT (`mlx5dv_wr_set_dc_addr`).
    pub(crate) dc_key: u64,
    /// DCI: the stream (`mlx5dv_wr_set_dc_addr_stream`).
    pub(crate) stream: u16,
    /// FLUSH: placement type, level and length.
    pub(crate) flush: FlushInfo,
    pub(crate) num_sge: u32,
    /// Whether a successful completion produces a CQE.
    pub(crate) signaled: bool,
    /// Total bytes of the gather list.
    pub(crate) length: u64,
    /// Accepted at post time but completes with this status when it reaches
    /// the head of the queue (mlx5: opcode invalid for the QP type →
    /// `LOC_QP_OP_ERR`, data-path §1.2).
    pub(crate) deferred_error: Option<WcStatus>,
    /// Execution state (the executor's).
    pub(crate) exec: Exec,
    /// First PSN of the message (RC/UC), set at transmission.
    pub(crate) psn: u32,
    /// PSNs the message uses: its packets, or a READ's response packets.
    pub(crate) npkts: u32,
    /// READ: response packets received so far, in order.
    pub(crate) received: u32,
    /// The requester-local checks passed (not repeated on retransmission).
    pub(crate) checked: bool,
    /// Transmitted at least once (later transmissions are retries).
    pub(crate) transmitted: bool,
}

/// One posted receive work request.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) num_sge: u32,
    #[allow(dead_code)] // kept for traces and SRQ accounting
    pub(crate) length: u64,
}

/// A ring of `capacity` work requests with up to `max_sge` SGEs each.
///
/// The counters live in the ring itself (the data path reads them on every
/// step); the storage lives behind one pointer and is absent for a ring of
/// capacity 0, so a QP without a send or receive queue (a DCT, a DCI's RQ,
/// an SRQ-attached QP's RQ) pays 8 bytes for it, not a full set of slice
/// headers (`sim_dc_fanout`'s heap per DCT, perf.md).
#[derive(Debug, Default)]
pub(crate) struct Ring<W> {
    buf: Option<Box<RingBuf<W>>>,
    pub(crate) head: u64,
    pub(crate) done: u64,
    pub(crate) tail: u64,
}

/// The storage of a non-empty [`Ring`]. Boxed slices, not `Vec`s: a ring
/// never grows. The slices are sized at creation but allocated (and
/// filled) at the first push, so creating a QP that never posts (a QP
/// created, connected and destroyed; an idle one) neither allocates nor
/// initialises its slots (`sim_qp_lifecycle_rate`, perf.md); after that
/// first push nothing is allocated per work request.
#[derive(Debug)]
struct RingBuf<W> {
    /// The requests the ring holds at most (its slots, allocated at the
    /// first push, are this rounded up to a power of two).
    capacity: u32,
    wqes: Box<[W]>,
    sges: Box<[Sge]>,
    max_sge: u32,
    /// Inline data, `inline_max` bytes per slot (send queues only).
    inline: Box<[u8]>,
    inline_max: u32,
    /// The number of slots less one. Slots are the capacity rounded up to
    /// a power of two (as mlx5 rounds its rings), so a slot is the
    /// sequence number masked, with no division and no branch on every
    /// access; at most `capacity` requests hold slots at once, so the
    /// spare slots only widen the ring.
    mask: u64,
}

impl<W> Ring<W> {
    /// The storage; only called on a ring that holds requests (a ring of
    /// capacity 0 never does).
    #[inline(always)]
    fn buf(&self) -> &RingBuf<W> {
        self.buf
            .as_deref()
            .expect("a ring of capacity 0 holds no request")
    }

    #[inline]
    fn buf_mut(&mut self) -> &mut RingBuf<W> {
        self.buf
            .as_deref_mut()
            .expect("a ring of capacity 0 holds no request")
    }

    /// Heap bytes the ring owns (its storage; 0 at capacity 0, only the
    /// counters' box before the first push).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buf.as_deref().map_or(0, |b| {
            size_of::<RingBuf<W>>()
                + b.wqes.len() * size_of::<W>()
                + b.sges.len() * size_of::<Sge>()
                + b.inline.len()
        })
    }
}

impl<W: Copy + Default> RingBuf<W> {
    /// Allocates the slots (the first push).
    #[cold]
    #[inline(never)]
    fn allocate(&mut self) {
        let n = self.slots();
        self.wqes = vec![W::default(); n].into_boxed_slice();
        self.sges = vec![Sge::default(); n * self.max_sge as usize].into_boxed_slice();
        self.inline = vec![0; n * self.inline_max as usize].into_boxed_slice();
    }
}

impl<W> RingBuf<W> {
    /// How many slots the storage has (a power of two, at least the
    /// capacity).
    fn slots(&self) -> usize {
        (self.mask + 1) as usize
    }

    #[inline(always)]
    fn slot(&self, seq: u64) -> usize {
        (seq & self.mask) as usize
    }

    /// The request at `seq`'s slot, its SGE slots and the slot index.
    #[inline(always)]
    fn entry(&self, seq: u64) -> (&W, &[Sge], usize) {
        let slot = self.slot(seq);
        let n = self.max_sge as usize;
        let base = slot * n;
        (&self.wqes[slot], &self.sges[base..base + n], slot)
    }
}

impl<W: Copy + Default> Ring<W> {
    /// A ring for `capacity` requests of at most `max_sge` SGEs each.
    pub(crate) fn new(capacity: u32, max_sge: u32) -> Self {
        Self::with_inline(capacity, max_sge, 0)
    }

    /// A ring that also keeps up to `inline_max` inline bytes per request.
    pub(crate) fn with_inline(capacity: u32, max_sge: u32, inline_max: u32) -> Self {
        let buf = (capacity > 0).then(|| {
            Box::new(RingBuf {
                capacity,
                wqes: Box::default(),
                sges: Box::default(),
                max_sge,
                inline: Box::default(),
                inline_max,
                // In u64, so that no u32 capacity overflows.
                mask: u64::from(capacity).next_power_of_two() - 1,
            })
        });
        Self {
            buf,
            head: 0,
            done: 0,
            tail: 0,
        }
    }

    #[allow(dead_code)] // for sizing checks in tests
    pub(crate) fn capacity(&self) -> u32 {
        self.buf.as_deref().map_or(0, |b| b.capacity)
    }

    /// Slots in use (outstanding or completed but not yet freed).
    pub(crate) fn occupied(&self) -> u64 {
        self.tail - self.head
    }

    pub(crate) fn is_full(&self) -> bool {
        self.occupied() >= u64::from(self.capacity())
    }

    /// Outstanding (posted, not completed) requests.
    pub(crate) fn outstanding(&self) -> u64 {
        self.tail - self.done
    }

    /// Appends a request; the caller has checked [`Ring::is_full`] and the SGE count.
    #[inline]
    pub(crate) fn push(&mut self, wqe: W, sges: &[Sge]) -> u64 {
        debug_assert!(!self.is_full());
        let seq = self.tail;
        let b = self.buf_mut();
        if b.wqes.is_empty() {
            b.allocate();
        }
        debug_assert!(sges.len() <= b.max_sge as usize);
        let slot = b.slot(seq);
        b.wqes[slot] = wqe;
        let base = slot * b.max_sge as usize;
        b.sges[base..base + sges.len()].copy_from_slice(sges);
        self.tail += 1;
        seq
    }

    /// Appends a request to be written in its slot (the returned slot
    /// holds a stale request: the caller overwrites all of it), so a large
    /// request is built where it lives rather than moved there; the caller
    /// has checked [`Ring::is_full`] and the SGE count.
    #[inline]
    pub(crate) fn push_slot(&mut self, sges: &[Sge]) -> &mut W {
        debug_assert!(!self.is_full());
        let seq = self.tail;
        self.tail += 1;
        let b = self.buf_mut();
        if b.wqes.is_empty() {
            b.allocate();
        }
        debug_assert!(sges.len() <= b.max_sge as usize);
        let slot = b.slot(seq);
        let base = slot * b.max_sge as usize;
        // One SGE, the usual case, without a call to `memcpy`.
        match sges {
            [one] => b.sges[base] = *one,
            _ => b.sges[base..base + sges.len()].copy_from_slice(sges),
        }
        &mut b.wqes[slot]
    }

    /// The first request in `from..to` (each holding its slot) for which
    /// `pred` is false, or `to`: reads the slots in place, a run at a time
    /// up to the end of the ring, not one lookup each.
    #[inline]
    pub(crate) fn done_run(&self, from: u64, to: u64, pred: impl Fn(&W) -> bool) -> u64 {
        let mut seq = from;
        while seq < to {
            debug_assert!(seq >= self.head && seq < self.tail);
            let b = self.buf();
            let slot = b.slot(seq);
            let n = (to - seq).min((b.wqes.len() - slot) as u64) as usize;
            let taken = b.wqes[slot..slot + n]
                .iter()
                .position(|w| !pred(w))
                .unwrap_or(n);
            seq += taken as u64;
            if taken < n {
                break;
            }
        }
        seq
    }

    /// The request with sequence number `seq` (must still hold its slot).
    #[inline(always)]
    pub(crate) fn get(&self, seq: u64) -> (&W, &[Sge], usize) {
        debug_assert!(seq >= self.head && seq < self.tail);
        self.buf().entry(seq)
    }

    /// The request `seq` alone, without its SGEs (most callers need only
    /// the WQE; the SGE slice would cost its bounds check).
    #[inline(always)]
    pub(crate) fn wqe(&self, seq: u64) -> &W {
        debug_assert!(seq >= self.head && seq < self.tail);
        let b = self.buf();
        &b.wqes[b.slot(seq)]
    }

    /// The request `seq`, writable.
    #[inline]
    pub(crate) fn get_mut(&mut self, seq: u64) -> &mut W {
        let b = self.buf_mut();
        let slot = b.slot(seq);
        &mut b.wqes[slot]
    }

    /// Exchanges two outstanding requests and their SGEs (out-of-order
    /// receive-WQE consumption, `world/ooo.rs`).
    pub(crate) fn swap(&mut self, a: u64, b: u64) {
        let r = self.buf_mut();
        let (sa, sb) = (r.slot(a), r.slot(b));
        if sa == sb {
            return;
        }
        r.wqes.swap(sa, sb);
        let n = r.max_sge as usize;
        for i in 0..n {
            r.sges.swap(sa * n + i, sb * n + i);
        }
    }

    /// The inline bytes stored for request `seq` (the first `len`).
    #[inline]
    pub(crate) fn inline_bytes(&self, seq: u64, len: usize) -> &[u8] {
        let b = self.buf();
        let base = b.slot(seq) * b.inline_max as usize;
        &b.inline[base..base + len.min(b.inline_max as usize)]
    }

    /// The inline area of request `seq`, writable.
    pub(crate) fn inline_area_mut(&mut self, seq: u64) -> &mut [u8] {
        let b = self.buf_mut();
        let base = b.slot(seq) * b.inline_max as usize;
        &mut b.inline[base..base + b.inline_max as usize]
    }

    /// Each request of `range` with its SGE slots, in order: requests
    /// whose slots were just freed ([`Ring::free_through`]'s range; still
    /// readable until reused), read a run of slots at a time up to the end
    /// of the ring rather than one lookup each.
    #[inline]
    pub(crate) fn for_each_freed(
        &self,
        range: core::ops::Range<u64>,
        mut f: impl FnMut(&W, &[Sge]),
    ) {
        let mut seq = range.start;
        while seq < range.end {
            let b = self.buf();
            let slot = b.slot(seq);
            let n = (range.end - seq).min((b.wqes.len() - slot) as u64) as usize;
            let m = b.max_sge as usize;
            let wqes = &b.wqes[slot..slot + n];
            if m == 0 {
                wqes.iter().for_each(|w| f(w, &[]));
            } else {
                let sges = b.sges[slot * m..(slot + n) * m].chunks_exact(m);
                wqes.iter().zip(sges).for_each(|(w, s)| f(w, s));
            }
            seq += n as u64;
        }
    }

    /// Frees every slot up to and including `seq`; returns the freed range.
    pub(crate) fn free_through(&mut self, seq: u64) -> core::ops::Range<u64> {
        let from = self.head;
        let to = (seq + 1).min(self.done).max(self.head);
        self.head = to;
        from..to
    }

    /// Drops every request without completions (entering RESET, destroy).
    #[allow(dead_code)] // `discard_queues` releases slot by slot instead
    pub(crate) fn discard(&mut self) -> core::ops::Range<u64> {
        let r = self.head..self.tail;
        self.head = self.tail;
        self.done = self.tail;
        r
    }
}
