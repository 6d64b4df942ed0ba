//! CQ mirrors: a CQ whose completions are also written somewhere outside
//! the world, where a consumer takes them without calling the world (the
//! drop-in library's shared fabric keeps a ring in a client process's
//! memory that `ibv_poll_cq` reads, as a NIC writes CQEs into the CQ
//! buffer a provider polls).
//!
//! The world stays the authority on occupancy: an entry leaves the CQ (and
//! frees the work-queue slots it covers) only when the consumer's count
//! says it was taken, and that count is read whenever occupancy matters
//! (before every completion is written, so overrun is exactly as without a
//! mirror) and whenever the owner asks ([`World::sync_cq_mirror`]). While a
//! mirror is attached the entries `[taken, published)` of the mirror are
//! exactly the CQ's queued entries, in order. Whatever the world cannot
//! keep in step that way (entries cleaned out of the middle, a resize, an
//! in-world poll, destroy) detaches the mirror first; the consumer then
//! attaches a new one, which starts with the entries queued then.

use verbs_api::{Wc, WcEx, WcExFlags};

use super::state::{CqEntry, QueueKind};
use super::World;
use crate::handles::{CqHandle, QpHandle, SrqHandle};

/// Which work queue a mirrored completion frees slots of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MirroredQueue {
    /// The QP's send queue.
    Send,
    /// The QP's receive queue.
    Recv,
    /// A receive WQE of this SRQ.
    Srq(SrqHandle),
}

/// One completion as a mirror receives it: what `ibv_poll_cq` returns,
/// when it was written, and the work request it retires (a consumer that
/// checks queue occupancy at post time frees the slots through `seq` of
/// `queue` when it takes the entry, as the world does when it is polled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MirroredCqe {
    /// The work completion.
    pub wc: Wc,
    /// Virtual time (ns) the completion was written.
    pub ts_ns: u64,
    /// The QP it belongs to.
    pub qp: QpHandle,
    /// The queue whose slots it frees.
    pub queue: MirroredQueue,
    /// The work request's sequence number in that queue (slots through it
    /// are freed when the entry is taken).
    pub seq: u64,
}

/// Where a mirrored CQ's completions go.
pub trait CqMirror: std::fmt::Debug + Send {
    /// How many entries the consumer says it has taken since the mirror
    /// was attached. Not trusted: the world uses it only within
    /// `[taken so far, published]`.
    fn consumed(&self) -> u64;
    /// Writes the next completion (its index is the count published so
    /// far).
    fn publish(&mut self, cqe: &MirroredCqe);
    /// The world stops mirroring this CQ: the consumer must not take more
    /// from it, and attaches anew to go on.
    fn detach(&mut self);
}

/// An attached mirror and its counts.
#[derive(Debug)]
pub(crate) struct Mirror {
    sink: Box<dyn CqMirror>,
    published: u64,
    taken: u64,
}

/// The extended completion a CQ created with `flags` reports for `wc`
/// written at `ts_ns` (`clock`: the device has a completion clock, mlx5);
/// what `ibv_start_poll` / `ibv_next_poll` read.
pub fn wc_ex_of(wc: &Wc, ts_ns: u64, flags: WcExFlags, clock: bool) -> WcEx {
    let f = |x: WcExFlags| flags.contains(x);
    WcEx {
        wr_id: wc.wr_id,
        status: wc.status,
        opcode: wc.opcode,
        vendor_err: wc.vendor_err,
        wc_flags: wc.wc_flags,
        byte_len: f(WcExFlags::BYTE_LEN).then_some(wc.byte_len),
        imm_data: f(WcExFlags::IMM).then_some(wc.imm_data),
        qp_num: f(WcExFlags::QP_NUM).then_some(wc.qp_num),
        src_qp: f(WcExFlags::SRC_QP).then_some(wc.src_qp),
        slid: f(WcExFlags::SLID).then_some(wc.slid),
        sl: f(WcExFlags::SL).then_some(wc.sl),
        dlid_path_bits: f(WcExFlags::DLID_PATH_BITS).then_some(wc.dlid_path_bits),
        completion_timestamp: (clock && f(WcExFlags::COMPLETION_TIMESTAMP))
            .then(|| super::ext::ns_to_ticks(ts_ns) & super::ext::MLX5_TS_MASK),
        completion_wallclock_ns: None,
    }
}

impl World {
    /// The entry as a mirror receives it (with the opcode a poll would
    /// report).
    fn mirrored(&self, e: &CqEntry) -> MirroredCqe {
        let mut wc = e.wc;
        if !self.ext.raw_wqes.is_empty() && e.queue == QueueKind::Send {
            // The mark is dropped when the entry is taken (`sync_cq_mirror`).
            let raw = (e.qp.index, e.qp.generation, e.seq);
            if self.ext.raw_wqes.contains(&raw) && wc.status == verbs_api::WcStatus::Success {
                wc.opcode = verbs_api::WcOpcode::Driver2;
            }
        }
        MirroredCqe {
            wc,
            ts_ns: e.ts_ns,
            qp: e.qp,
            queue: match e.queue {
                QueueKind::Send => MirroredQueue::Send,
                QueueKind::Recv => MirroredQueue::Recv,
                QueueKind::Srq(s) => MirroredQueue::Srq(s),
            },
            seq: e.seq,
        }
    }

    /// Mirrors `cq` into `sink` from now on (replacing, and detaching, a
    /// mirror it had): the entries queued now are published first.
    ///
    /// # Errors
    /// `EINVAL` for a CQ that does not exist.
    pub fn attach_cq_mirror(
        &mut self,
        cq: CqHandle,
        sink: Box<dyn CqMirror>,
    ) -> verbs_api::Result<()> {
        self.cq(cq, verbs_api::Verb::PollCq)?;
        self.detach_cq_mirror(cq);
        let queued: Vec<CqEntry> = self
            .cqs
            .get(cq.index, cq.generation)
            .map(|c| c.entries.iter().copied().collect())
            .unwrap_or_default();
        let queued: Vec<MirroredCqe> = queued.iter().map(|e| self.mirrored(e)).collect();
        let mut m = Mirror {
            sink,
            published: 0,
            taken: 0,
        };
        for e in &queued {
            m.sink.publish(e);
            m.published += 1;
        }
        if let Some(c) = self.cqs.get_mut(cq.index, cq.generation) {
            c.mirror = Some(m);
        }
        Ok(())
    }

    /// Takes out of `cq` the entries its mirror's consumer has taken (the
    /// slots they cover are freed, as by a poll). Returns false when the
    /// consumer's count is impossible (behind what it took, or past what
    /// was published): nothing is taken then, and the mirror is detached.
    pub fn sync_cq_mirror(&mut self, cq: CqHandle) -> bool {
        let Some(c) = self.cqs.get_mut(cq.index, cq.generation) else {
            return true;
        };
        let Some(m) = c.mirror.as_mut() else {
            return true;
        };
        let said = m.sink.consumed();
        if said < m.taken || said > m.published {
            // A consumer that says what cannot be loses its mirror; the
            // entries stay queued for the next one.
            if let Some(mut m) = c.mirror.take() {
                m.sink.detach();
            }
            return false;
        }
        let n = (said - m.taken) as usize;
        m.taken = said;
        let n = n.min(c.entries.len());
        let taken: Vec<CqEntry> = c.entries.drain(..n).collect();
        for e in taken {
            if !self.ext.raw_wqes.is_empty() && e.queue == QueueKind::Send {
                let _ = self.raw_wqe_opcode(e.qp, e.seq, e.wc.status, e.wc.opcode);
            }
            self.release_wqes(e.qp, e.queue, e.seq);
        }
        true
    }

    /// Stops mirroring `cq` (its consumer's takings so far applied first).
    pub fn detach_cq_mirror(&mut self, cq: CqHandle) {
        self.sync_cq_mirror(cq);
        if let Some(c) = self.cqs.get_mut(cq.index, cq.generation) {
            if let Some(mut m) = c.mirror.take() {
                m.sink.detach();
            }
        }
    }

    /// Whether `cq` is mirrored.
    pub fn cq_mirrored(&self, cq: CqHandle) -> bool {
        self.cqs
            .get(cq.index, cq.generation)
            .is_some_and(|c| c.mirror.is_some())
    }

    /// Publishes the entry just queued at the back of `cq` to its mirror.
    pub(crate) fn publish_last(&mut self, cq: CqHandle) {
        let Some(e) = self
            .cqs
            .get(cq.index, cq.generation)
            .filter(|c| c.mirror.is_some())
            .and_then(|c| c.entries.back().copied())
        else {
            return;
        };
        let e = self.mirrored(&e);
        if let Some(m) = self
            .cqs
            .get_mut(cq.index, cq.generation)
            .and_then(|c| c.mirror.as_mut())
        {
            m.sink.publish(&e);
            m.published += 1;
        }
    }
}
