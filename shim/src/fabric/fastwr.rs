//! The rest of the posting verbs through the submission ring (`sqring`):
//! the `ibv_wr_*` batch (`ibv_wr_start` … `ibv_wr_complete`, the trait's
//! `post_wr`) and `ibv_post_srq_recv`, checked in the program's process
//! with the world's own rules as `fast` checks `ibv_post_send`.
//!
//! A batch is posted whole or not at all (mlx5 records the first
//! builder error and `ibv_wr_complete` returns it, posting nothing): when
//! every request passes the checks here it goes into the ring as one
//! record; when one does not (a full queue, too many SGEs, inline bytes
//! too long, a QP state that refuses, an opcode outside the QP's
//! `send_ops_flags`) or needs the world to decide (an address handle the
//! process does not hold, a window bind, a raw WQE, an XRC SRQ number),
//! the whole batch goes by
//! call and the world answers exactly as in process, so
//! `ibv_wr_complete` still returns its error at once and nothing of the
//! batch is posted. SRQ receives go as `ibv_post_recv` does: the longest
//! accepted head through the ring, the rest by call, `bad_wr` counted
//! over the whole list.

use backend_sim::datapath::{
    check_post_send, check_post_srq_recv, inline_carries_payload, send_wr_of_wr_ex, single_sge_of,
    SendAdmission, SendQueueView, SendWrView,
};
use backend_sim::*;
use verbs_api::*;

use super::client::Remote;
use super::extra::ExtraCall;
use super::family::{Owned, Session};
use super::fast::{encode_record, give_ring, shift_bad_wr, Served};
use super::queues::SrqFast;
use super::rpc::Call;
use super::sqring::{KIND_SRQ_RECV, KIND_WR};
use super::wire::{Handles, RecvWrW, WrExW};

/// Copies the bytes `sges` name out of this process's memory.
///
/// # Safety
/// Each non-empty `[addr, addr + length)` lies in memory this process
/// registered as an MR (checked mapped then) and still holds.
unsafe fn copy_inline(sges: &[Sge]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for s in sges {
        let len = s.length as usize;
        if len == 0 {
            continue;
        }
        let at = bytes.len();
        bytes.resize(at + len, 0);
        // SAFETY: the caller's contract: `[addr, addr + len)` is in an MR
        // this process registered, as the in-process world would read it;
        // copied now, at post time, as IBV_SEND_INLINE promises.
        unsafe {
            core::ptr::copy_nonoverlapping(
                s.addr as usize as *const u8,
                bytes[at..].as_mut_ptr(),
                len,
            );
        }
    }
    bytes
}

impl Remote {
    /// Writes the batch into the submission ring when every request of it
    /// passes the post-time checks here (the world's: `send_ops_flags`,
    /// [`check_post_send`] against the queue as it will be at each
    /// request's turn, inline bytes in the process's MRs); whether it did.
    fn ring_wr(&mut self, qp: QpHandle, batch: &[WrEx<'_, SimVerbs>]) -> bool {
        if batch.is_empty() {
            return false;
        }
        let Some(f) = self.qp_fast(qp) else {
            return false;
        };
        let Some(ops) = f.snap.send_ops else {
            return false;
        };
        if !(f.snap.plain || f.snap.ud)
            || !matches!(
                f.snap.send.state,
                QpState::ReadyToSend
                    | QpState::SendQueueDrain
                    | QpState::SendQueueError
                    | QpState::Error
            )
        {
            return false;
        }
        let mut q = self.fast.borrow_mut();
        let mut carried: Vec<Vec<u8>> = Vec::with_capacity(batch.len());
        let occupied = f.sq_tail - f.sq_head;
        for (i, w) in batch.iter().enumerate() {
            if w.raw_wqe
                || !q.addressed(&f.snap, w.ud.as_ref().map(|u| *u.ah))
                || w.xrc_srqn.is_some()
                || matches!(w.op, WrOp::BindMw { .. })
                || !ops.contains(w.op.send_op_flag())
            {
                return false;
            }
            let single = single_sge_of(w);
            let s = send_wr_of_wr_ex(w, &single);
            let view = SendQueueView {
                outstanding: u32::try_from(occupied + i as u64).unwrap_or(u32::MAX),
                ..f.snap.send
            };
            let Ok(admission) = check_post_send(&view, &SendWrView::of(&s), f.snap.flavor) else {
                return false;
            };
            let inline = s.send_flags.contains(SendFlags::INLINE);
            if inline
                && !s
                    .sg_list
                    .iter()
                    .all(|g| g.length == 0 || q.in_an_mr(g.addr, u64::from(g.length)))
            {
                return false;
            }
            let copy = inline
                && inline_carries_payload(s.opcode)
                && matches!(admission, SendAdmission::Execute | SendAdmission::Flush);
            carried.push(if copy {
                // SAFETY: every SGE was just found in an MR this process
                // registered (and has not deregistered).
                unsafe { copy_inline(s.sg_list) }
            } else {
                Vec::new()
            });
        }
        let body = encode_record(&qp, &(WrExW::list(batch), carried));
        let Some(sub) = q.posts.as_mut() else {
            return false;
        };
        if !sub.submit(KIND_WR, &body) {
            return false;
        }
        if let Some(f) = q.qps.get_mut(&qp) {
            f.sq_tail += batch.len() as u64;
        }
        true
    }

    /// `post_wr` (`ibv_wr_complete`): through the submission ring when the
    /// checks here pass the whole batch, else by call (where the world
    /// refuses it, or takes what needs it to decide).
    ///
    /// # Safety
    /// As the trait's method.
    pub(crate) unsafe fn post_wr(
        &mut self,
        qp: &QpHandle,
        batch: &[WrEx<'_, SimVerbs>],
    ) -> Result<()> {
        if self.ring_wr(*qp, batch) {
            return Ok(());
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.post_wr_by_call(qp, batch) }
    }

    /// The snapshot of `srq` for posting through the ring (fetched, with
    /// the ring itself the first time, when there is none); `None` when
    /// this SRQ, or this process, posts by call.
    fn srq_fast(&mut self, srq: SrqHandle) -> Option<SrqFast> {
        {
            let mut q = self.fast.borrow_mut();
            if !q.may_post() {
                return None;
            }
            if let Some(f) = q.srqs.get(&srq) {
                return Some(*f);
            }
        }
        let r = self.call_fd::<(SrqPostSnapshot, bool)>(&Call::Extra(ExtraCall::AttachSrq(srq)));
        let mut q = self.fast.borrow_mut();
        let ((snap, region), fds) = r.ok()?;
        if !q.take_ring(region, fds) {
            return None;
        }
        let f = SrqFast {
            snap,
            tail: snap.tail,
            head: snap.tail - u64::from(snap.outstanding),
        };
        q.srqs.insert(srq, f);
        Some(f)
    }

    /// Writes the longest head of `wrs` that [`check_post_srq_recv`]
    /// accepts (on the snapshot and this process's counts) into the
    /// submission ring; how many went.
    fn ring_srq_recvs(&mut self, srq: SrqHandle, wrs: &[RecvWr<'_>]) -> usize {
        let Some(f) = self.srq_fast(srq) else {
            return 0;
        };
        let mut q = self.fast.borrow_mut();
        let mut tail = f.tail;
        let mut n = 0;
        for wr in wrs {
            let outstanding = u32::try_from(tail - f.head).unwrap_or(u32::MAX);
            if check_post_srq_recv(f.snap.max_wr, f.snap.max_sge, outstanding, wr.sg_list).is_err()
            {
                break;
            }
            tail += 1;
            n += 1;
        }
        if n == 0 {
            return 0;
        }
        let body = encode_record(&srq, &RecvWrW::list(&wrs[..n]));
        let Some(sub) = q.posts.as_mut() else {
            return 0;
        };
        if !sub.submit(KIND_SRQ_RECV, &body) {
            return 0;
        }
        if let Some(f) = q.srqs.get_mut(&srq) {
            f.tail = tail;
        }
        n
    }

    /// `ibv_post_srq_recv`: the requests the checks here accept go into
    /// the submission ring; from the first one they do not, by call
    /// (`bad_wr` counted over the whole list).
    ///
    /// # Safety
    /// As the trait's method.
    pub(crate) unsafe fn post_srq_recv(
        &mut self,
        srq: &SrqHandle,
        wrs: &[RecvWr<'_>],
    ) -> Result<()> {
        let k = self.ring_srq_recvs(*srq, wrs);
        if k == wrs.len() && k > 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.post_srq_recv_by_call(srq, &wrs[k..]) }.map_err(|e| shift_bad_wr(e, k))
    }
}

/// The fabric's side of `AttachSrq`: the SRQ's snapshot, and the
/// connection's submission ring with its doorbell the first time.
pub(crate) fn attach_srq(sim: &mut SimVerbs, session: &mut Session<'_>, srq: SrqHandle) -> Vec<u8> {
    use super::encode;
    let snap = match sim.world().srq_post_snapshot(srq) {
        Ok(s) => s,
        Err(e) => return encode(&Err::<(SrqPostSnapshot, bool), _>(e)),
    };
    match give_ring(session, Verb::PostSrqRecv) {
        Ok(region) => encode(&Ok::<_, Error>((snap, region))),
        Err(e) => encode(&Err::<(SrqPostSnapshot, bool), _>(e)),
    }
}

/// Serves the requests of a [`KIND_WR`] record for `qp` (the session's,
/// checked by the caller): the world's `post_wr` with the inline bytes the
/// record carries. `Err` (the reason) when the record is malformed.
pub(super) fn serve_wr_body(
    sim: &mut SimVerbs,
    session: &mut Session<'_>,
    qp: QpHandle,
    rest: &[u8],
) -> std::result::Result<(), String> {
    let (wrs, carried) = postcard::from_bytes::<(Vec<WrExW>, Vec<Vec<u8>>)>(rest)
        .map_err(|e| format!("an ibv_wr_* batch that does not decode ({e})"))?;
    let mut hs = Vec::new();
    wrs.handles(&mut hs);
    session
        .check(Verb::PostWr, &hs)
        .map_err(|e| e.to_string())?;
    if carried.len() != wrs.len() {
        return Err(format!(
            "{} requests with {} inline buffers",
            wrs.len(),
            carried.len()
        ));
    }
    let views = WrExW::views(&wrs);
    let c: Vec<&[u8]> = carried.iter().map(Vec::as_slice).collect();
    sim.post_wr_carrying(&qp, &views, &c)
        .map_err(|e| e.to_string())
}

/// Serves a [`KIND_SRQ_RECV`] record: the SRQ must be the session's (else
/// the record is dropped); requests the world refuses make the record
/// malformed for that SRQ (`IBV_EVENT_SRQ_ERR` on its context, nothing of
/// the record queued beyond what the world took before the refusal).
pub(super) fn serve_srq_record(
    sim: &mut SimVerbs,
    session: &mut Session<'_>,
    body: &[u8],
) -> Served {
    let Ok((srq, rest)) = postcard::take_from_bytes::<SrqHandle>(body) else {
        return Served::Dropped(format!("a record of {} bytes naming no SRQ", body.len()));
    };
    if let Err(e) = session.check(Verb::PostSrqRecv, &[Owned::Srq(srq)]) {
        return Served::Dropped(e.to_string());
    }
    let r = match postcard::from_bytes::<Vec<RecvWrW>>(rest) {
        Ok(wrs) => {
            let views = RecvWrW::views(&wrs);
            // SAFETY: the simulator owns or copies every byte a request
            // names (the client's memory is reached by pid).
            unsafe { Verbs::post_srq_recv(sim, &srq, &views) }.map_err(|e| e.to_string())
        }
        Err(e) => Err(format!("SRQ receive requests that do not decode ({e})")),
    };
    match r {
        Ok(()) => Served::Posted,
        Err(why) => {
            sim.world_mut().malformed_srq_wqe(srq);
            Served::MalformedSrq(srq, why)
        }
    }
}
