//! What entering ERR generates (data-path §3.1 flush rules, §4.2 row 19,
//! §5.1 ordering; qp-state-machine §7 "ERR").

use core::iter::FusedIterator;

use verbs_api::WcStatus;

/// A half-open range of WQE posting indices `[first, end)` (see
/// [`super::SqAccounting`] for the numbering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WqeRange {
    /// The oldest WQE in the range.
    pub first: u64,
    /// One past the newest.
    pub end: u64,
}

impl WqeRange {
    /// The WQEs `first..end` (empty when `end <= first`).
    pub const fn new(first: u64, end: u64) -> Self {
        Self { first, end }
    }

    /// How many WQEs.
    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.first)
    }

    /// No WQE.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a QP's receive WQEs live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecvSource {
    /// Its own receive queue; the range holds the WQEs posted and not yet
    /// consumed.
    Own(WqeRange),
    /// A shared receive queue (also XRC_RECV and DCT).
    Srq,
    /// No receive queue (XRC_SEND, DCI).
    None,
}

/// The queues of a QP entering ERR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushInput {
    /// Send WQEs not yet completed, in posting order: everything after the
    /// WQE whose error completion moved the QP to ERR (that one keeps its
    /// own status), including unsignalled ones; WRs that already finished
    /// successfully without a CQE are not in it.
    pub send: WqeRange,
    /// The receive side.
    pub recv: RecvSource,
}

/// One completion a flush generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushCompletion {
    /// The queue the WQE belongs to.
    pub queue: WorkQueue,
    /// Its posting index (the integrator maps it to `wr_id`).
    pub wqe_index: u64,
    /// Always `IBV_WC_WR_FLUSH_ERR`.
    pub status: WcStatus,
}

/// A QP's send or receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkQueue {
    /// The send queue.
    Send,
    /// The QP's own receive queue.
    Recv,
}

/// Everything entering ERR generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushPlan {
    /// Send WQEs to complete with `WR_FLUSH_ERR`, in posting order.
    pub send: WqeRange,
    /// Receive WQEs to complete with `WR_FLUSH_ERR`, in posting order
    /// (empty for SRQ-attached and RQ-less QPs).
    pub recv: WqeRange,
    /// Raise `IBV_EVENT_QP_LAST_WQE_REACHED` (SRQ-attached QPs).
    pub last_wqe_reached: bool,
}

impl FlushPlan {
    /// The flush completions: the send queue's in posting order, then the
    /// receive queue's in posting order (the two queues are not ordered
    /// against each other, §5.1, so this order is a choice).
    pub fn completions(&self) -> FlushCompletions {
        FlushCompletions {
            send: self.send,
            recv: self.recv,
        }
    }
}

/// Iterator over a [`FlushPlan`]'s completions; allocation-free.
#[derive(Clone, Debug)]
pub struct FlushCompletions {
    send: WqeRange,
    recv: WqeRange,
}

impl Iterator for FlushCompletions {
    type Item = FlushCompletion;

    fn next(&mut self) -> Option<FlushCompletion> {
        let (queue, range) = if !self.send.is_empty() {
            (WorkQueue::Send, &mut self.send)
        } else if !self.recv.is_empty() {
            (WorkQueue::Recv, &mut self.recv)
        } else {
            return None;
        };
        let wqe_index = range.first;
        range.first += 1;
        Some(FlushCompletion {
            queue,
            wqe_index,
            status: WcStatus::WrFlushErr,
        })
    }
}

impl FusedIterator for FlushCompletions {}

/// The completions and events of a QP entering ERR (qp-state-machine §7):
///
/// * every outstanding send WQE completes with `WR_FLUSH_ERR`, signalled or
///   not, in posting order (data-path §3.1; GUT-QP `PostSendErrConcurrent`);
/// * every receive WQE of its own RQ likewise (§3.1 "Receive WRs always
///   generate a CQE when … flushed");
/// * SRQ WQEs are **not** flushed: they stay for the other QPs (GUT
///   `SrqTest.QpFlush`);
/// * an SRQ-attached QP raises `IBV_EVENT_QP_LAST_WQE_REACHED`.
///
/// WRs posted while the QP stays in ERR are flushed at post time
/// ([`super::SendAdmission::Flush`], [`super::RecvAdmission::Flush`]).
pub const fn flush_plan(input: &FlushInput) -> FlushPlan {
    let (recv, last_wqe_reached) = match input.recv {
        RecvSource::Own(range) => (range, false),
        RecvSource::Srq => (WqeRange::new(0, 0), true),
        RecvSource::None => (WqeRange::new(0, 0), false),
    };
    FlushPlan {
        send: input.send,
        recv,
        last_wqe_reached,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_in_posting_order_per_queue_row_19() {
        // Goal: §4.2 row 19 / qp-state-machine §7: every outstanding send and
        // receive WQE completes WR_FLUSH_ERR in posting order per queue.
        // Method: send WQEs 5..8 and receive WQEs 10..12 outstanding.
        let plan = flush_plan(&FlushInput {
            send: WqeRange::new(5, 8),
            recv: RecvSource::Own(WqeRange::new(10, 12)),
        });
        assert!(!plan.last_wqe_reached);
        let got: Vec<(WorkQueue, u64, WcStatus)> = plan
            .completions()
            .map(|c| (c.queue, c.wqe_index, c.status))
            .collect();
        let f = WcStatus::WrFlushErr;
        assert_eq!(
            got,
            vec![
                (WorkQueue::Send, 5, f),
                (WorkQueue::Send, 6, f),
                (WorkQueue::Send, 7, f),
                (WorkQueue::Recv, 10, f),
                (WorkQueue::Recv, 11, f),
            ]
        );
    }

    #[test]
    fn srq_wqes_not_flushed_and_last_wqe_reached() {
        // Goal: qp-state-machine §7: SRQ WQEs are not flushed; SRQ-attached QPs
        // raise IBV_EVENT_QP_LAST_WQE_REACHED; RQ-less QPs raise nothing.
        // Method: an SRQ-attached QP with 2 send WQEs, and an RQ-less one.
        let srq = flush_plan(&FlushInput {
            send: WqeRange::new(0, 2),
            recv: RecvSource::Srq,
        });
        assert!(srq.last_wqe_reached);
        assert!(srq.recv.is_empty());
        assert_eq!(srq.completions().count(), 2);
        assert!(srq.completions().all(|c| c.queue == WorkQueue::Send));
        let dci = flush_plan(&FlushInput {
            send: WqeRange::new(3, 3),
            recv: RecvSource::None,
        });
        assert!(!dci.last_wqe_reached);
        assert_eq!(dci.completions().count(), 0);
    }
}
