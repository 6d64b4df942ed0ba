//! Which check refused a remote access, kept for the requester's error
//! completion: the trace's completion event and the drop-in library's log
//! name it (a bad rkey, an access past the region's end and a missing
//! access flag all complete as `REM_ACCESS_ERR`).
//!
//! Nothing here runs on the success path: the cause is worked out again,
//! after a check has failed, by [`remote_cause`], and kept in a ring of
//! fixed size (no allocation). It is a function of the world's state, so
//! the trace stays deterministic.

use verbs_api::WcStatus;

use super::World;
use crate::datapath::protection::{remote_cause, AccessCause};
use crate::datapath::{MrLookup, RemoteRequest};
use crate::handles::QpHandle;

/// Refusals kept.
const KEPT: usize = 16;

/// The last [`KEPT`] refusals: (requester device, QP number, `wr_id`, cause).
#[derive(Clone, Debug, Default)]
pub(crate) struct CauseRing {
    slots: [Option<(u32, u32, u64, AccessCause)>; KEPT],
    next: usize,
}

impl CauseRing {
    fn push(&mut self, device: u32, qpn: u32, wr_id: u64, cause: AccessCause) {
        self.slots[self.next] = Some((device, qpn, wr_id, cause));
        self.next = (self.next + 1) % KEPT;
    }

    /// The newest cause kept for this request.
    pub(crate) fn find(&self, device: u32, qpn: u32, wr_id: u64) -> Option<AccessCause> {
        (0..KEPT)
            .map(|k| (self.next + KEPT - 1 - k) % KEPT)
            .filter_map(|i| self.slots[i])
            .find(|&(d, q, w, _)| (d, q, w) == (device, qpn, wr_id))
            .map(|(.., c)| c)
    }
}

/// Whether a completion with `status` can come from a refused remote access.
pub(crate) fn may_have_cause(status: WcStatus) -> bool {
    matches!(status, WcStatus::RemAccessErr | WcStatus::RemInvReqErr)
}

impl World {
    /// Records why responder `rq` refused the remote access `req` of the
    /// requester's work request at send-queue slot `cookie` of `requester`:
    /// the checks of `check_rkey` worked out again, one by one.
    #[cold]
    pub(super) fn note_access_cause(
        &mut self,
        rq: QpHandle,
        requester: QpHandle,
        cookie: u64,
        device: u32,
        req: &RemoteRequest,
    ) {
        let responder = self.responder_view(rq);
        let cause = match self.mw_target(device, req.rkey, Some(rq)) {
            Some(window) => remote_cause(req, window.map(|(view, ..)| view), &responder),
            None => {
                let mr = super::DevMrs {
                    mrs: &self.mrs,
                    device,
                }
                .by_rkey(req.rkey);
                remote_cause(req, mr, &responder)
            }
        };
        let (Some(cause), Some(s)) = (cause, self.qps.get(requester.index, requester.generation))
        else {
            return;
        };
        let key = (s.device, s.qp_num, s.sq.wqe(cookie).wr_id);
        self.access_causes.push(key.0, key.1, key.2, cause);
    }
}
