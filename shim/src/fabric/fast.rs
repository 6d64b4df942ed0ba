//! The data path over the shared fabric without a call per verb: the
//! client's side of the queues it shares with the fabric (completion
//! rings, `cqring`), and the calls that set them up.
//!
//! A CQ gets its ring on its first poll (one call, `AttachCq`, whose reply
//! carries the region); from then on `ibv_poll_cq` reads the ring. When
//! the fabric stops mirroring a CQ (resize, a QP's completions cleaned
//! out, a consumer count that made no sense) the next poll attaches anew.
//! A CQ whose ring would be too large is polled by call, as before.

use backend_sim::datapath::{
    check_post_recv, check_post_send, inline_carries_payload, RecvQueueView, SendAdmission,
    SendQueueView, SendWrView,
};
use backend_sim::*;
use serde::{Deserialize, Serialize};
use verbs_api::*;

use super::client::Remote;
use super::cqring::{capacity_for, ring_bytes, CqRing, RingMirror};
use super::extra::ExtraCall;
use super::family::Session;
use super::queues::{CqPoll, QpFast, Queues};
use super::rpc::Call;
use super::shm::Shm;
use super::sqring::{Receiver, Submitter, KIND_RECV, KIND_SEND};
use super::wire::{RecvWrW, SendWrW};

/// What the fabric says of a CQ's ring.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct RingInfo {
    /// Slots.
    capacity: u64,
    /// For an extended CQ: its `wc_flags` and whether its device has a
    /// completion clock.
    ex: Option<(WcExFlags, bool)>,
}

impl Remote {
    /// Polls `cq` through its ring (attaching it first when needed):
    /// `want` completions at most, each handed to `out`.
    fn poll_ring(
        &mut self,
        cq: CqHandle,
        verb: Verb,
        want: usize,
        mut out: impl FnMut(usize, &MirroredCqe, Option<(WcExFlags, bool)>),
    ) -> Result<Option<usize>> {
        for _ in 0..2 {
            {
                let mut guard = self.fast.borrow_mut();
                let q = &mut *guard;
                q.check_fork();
                match q.cqs.get_mut(&cq) {
                    Some(CqPoll::Ring(ring, ex)) => {
                        let ex = *ex;
                        let (qps, srqs) = (&mut q.qps, &mut q.srqs);
                        let polled = ring.poll(want, |i, e| {
                            out(i, e, ex);
                            match e.queue {
                                MirroredQueue::Send => {
                                    if let Some(f) = qps.get_mut(&e.qp) {
                                        f.sq_head = f.sq_head.max(e.seq + 1);
                                    }
                                }
                                MirroredQueue::Recv => {
                                    if let Some(f) = qps.get_mut(&e.qp) {
                                        f.rq_head = f.rq_head.max(e.seq + 1);
                                    }
                                }
                                MirroredQueue::Srq(s) => {
                                    if let Some(f) = srqs.get_mut(&s) {
                                        f.head = f.head.max(e.seq + 1);
                                    }
                                }
                            }
                        });
                        if let Some(n) = polled {
                            return Ok(Some(n));
                        }
                        // Detached: what it freed meanwhile is not known here.
                        q.cqs.remove(&cq);
                        q.forget_snapshots();
                    }
                    Some(CqPoll::Call) => return Ok(None),
                    None => {}
                }
            }
            let ex = verb == Verb::PollCqEx;
            let (info, fd) =
                self.call_fd::<Option<RingInfo>>(&Call::Extra(ExtraCall::AttachCq(cq, ex)))?;
            let poll = match (info, fd.into_iter().next()) {
                (Some(info), Some(fd)) => {
                    let bytes = ring_bytes(info.capacity).unwrap_or(0);
                    match Shm::map(&fd, bytes) {
                        Ok(shm) if bytes > 0 => {
                            CqPoll::Ring(CqRing::new(shm, info.capacity), info.ex)
                        }
                        _ => CqPoll::Call,
                    }
                }
                _ => CqPoll::Call,
            };
            self.fast.borrow_mut().cqs.insert(cq, poll);
        }
        Ok(None)
    }

    /// `ibv_poll_cq`: from the CQ's ring in shared memory, without a call.
    pub(crate) fn poll_cq(&mut self, cq: &CqHandle, wc: &mut [Wc]) -> Result<usize> {
        if wc.is_empty() {
            return self.poll_cq_by_call(cq, wc);
        }
        match self.poll_ring(*cq, Verb::PollCq, wc.len(), |i, e, _| wc[i] = e.wc)? {
            Some(n) => Ok(n),
            None => self.poll_cq_by_call(cq, wc),
        }
    }

    /// `ibv_start_poll` / `ibv_next_poll`: as [`Remote::poll_cq`], in the
    /// extended CQ's format.
    pub(crate) fn poll_cq_ex(&mut self, cq: &CqHandle, wc: &mut [WcEx]) -> Result<usize> {
        if wc.is_empty() {
            return self.poll_cq_ex_by_call(cq, wc);
        }
        let r = self.poll_ring(*cq, Verb::PollCqEx, wc.len(), |i, e, ex| {
            let (flags, clock) = ex.unwrap_or((WcExFlags::empty(), false));
            wc[i] = wc_ex_of(&e.wc, e.ts_ns, flags, clock);
        })?;
        match r {
            Some(n) => Ok(n),
            None => self.poll_cq_ex_by_call(cq, wc),
        }
    }

    /// `ibv_destroy_cq`: the ring goes with the CQ.
    pub(crate) fn destroy_cq(&mut self, cq: &CqHandle) -> Result<()> {
        self.destroy_cq_by_call(cq)?;
        self.fast.borrow_mut().cqs.remove(cq);
        Ok(())
    }

    /// `ibv_resize_cq`: the fabric makes a ring of the new size at the
    /// next poll.
    pub(crate) fn resize_cq(&mut self, cq: &CqHandle, cqe: u32) -> Result<()> {
        self.resize_cq_by_call(cq, cqe)?;
        self.fast.borrow_mut().cqs.remove(cq);
        Ok(())
    }

    /// The snapshot of `qp` for posting through the ring, fetched (with
    /// the ring itself the first time) when there is none; `None` when
    /// this QP, or this process, posts by call.
    pub(super) fn qp_fast(&mut self, qp: QpHandle) -> Option<QpFast> {
        {
            let mut q = self.fast.borrow_mut();
            if !q.may_post() {
                return None;
            }
            if let Some(f) = q.qps.get(&qp) {
                return Some(*f);
            }
        }
        let r = self.call_fd::<(PostSnapshot, bool)>(&Call::Extra(ExtraCall::AttachQp(qp)));
        let mut q = self.fast.borrow_mut();
        let ((snap, region), fds) = match r {
            Ok(x) => x,
            Err(_) => return None,
        };
        if !q.take_ring(region, fds) {
            return None;
        }
        let f = QpFast {
            snap,
            sq_tail: snap.sq_tail,
            sq_head: snap.sq_tail - u64::from(snap.send.outstanding),
            rq_tail: snap.rq_tail,
            rq_head: snap.rq_tail - u64::from(snap.recv.outstanding),
        };
        q.qps.insert(qp, f);
        Some(f)
    }
}

impl Queues {
    /// Whether this process may post through the ring now (it forgets a
    /// parent's ring in a forked child, and stops at a broken ring).
    pub(super) fn may_post(&mut self) -> bool {
        self.check_fork();
        if self.no_posts || self.posts.as_ref().is_some_and(Submitter::broken) {
            self.no_posts = true;
            return false;
        }
        true
    }

    /// After an attach call: maps the ring its reply brought (`region`,
    /// then `fds`: the region and the doorbell); whether there is a ring
    /// to post through.
    pub(super) fn take_ring(&mut self, region: bool, fds: Vec<std::os::fd::OwnedFd>) -> bool {
        let q = self;
        if region {
            let mut fds = fds.into_iter();
            let made = match (fds.next(), fds.next()) {
                (Some(mem), Some(bell)) => Shm::map(&mem, super::sqring::REGION)
                    .ok()
                    .map(|shm| Submitter::new(shm, bell)),
                _ => None,
            };
            match made {
                Some(s) => q.posts = Some(s),
                None => {
                    q.no_posts = true;
                    return false;
                }
            }
        }
        if q.posts.is_none() {
            q.no_posts = true;
            return false;
        }
        true
    }
}

impl Remote {
    /// Writes the longest head of `wrs` the post-time checks accept (the
    /// world's own rules, [`check_post_send`], on the snapshot and this
    /// process's counts) into the submission ring; how many went. The rest
    /// (from the first request refused, or one that needs the world to
    /// decide: DC, FLUSH, ATOMIC_WRITE, a window bind, inline bytes
    /// outside the process's MRs, an address handle this process does not
    /// hold) goes by call, where the world answers exactly as in process.
    fn ring_sends(&mut self, qp: QpHandle, wrs: &[SendWr<'_, SimVerbs>]) -> usize {
        let Some(f) = self.qp_fast(qp) else {
            return 0;
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
            return 0;
        }
        let mut q = self.fast.borrow_mut();
        let mut tail = f.sq_tail;
        let mut carried: Vec<Vec<u8>> = Vec::new();
        let mut n = 0;
        for wr in wrs {
            if !q.addressed(&f.snap, wr.ud.as_ref().map(|u| *u.ah))
                || wr.dc.is_some()
                || matches!(
                    wr.opcode,
                    WrOpcode::BindMw | WrOpcode::Flush | WrOpcode::AtomicWrite
                )
            {
                break;
            }
            let view = SendQueueView {
                outstanding: u32::try_from(tail - f.sq_head).unwrap_or(u32::MAX),
                ..f.snap.send
            };
            let Ok(admission) = check_post_send(&view, &SendWrView::of(wr), f.snap.flavor) else {
                break;
            };
            let inline = wr.send_flags.contains(SendFlags::INLINE)
                && inline_carries_payload(wr.opcode)
                && matches!(admission, SendAdmission::Execute | SendAdmission::Flush);
            let mut bytes = Vec::new();
            if inline {
                if !wr
                    .sg_list
                    .iter()
                    .all(|s| s.length == 0 || q.in_an_mr(s.addr, u64::from(s.length)))
                {
                    break;
                }
                for s in wr.sg_list {
                    let len = s.length as usize;
                    if len == 0 {
                        continue;
                    }
                    let at = bytes.len();
                    bytes.resize(at + len, 0);
                    // SAFETY: `[addr, addr + len)` lies in an MR this
                    // process registered (checked mapped then), as the
                    // in-process world would read it; copied now, at post
                    // time, as IBV_SEND_INLINE promises.
                    unsafe {
                        core::ptr::copy_nonoverlapping(
                            s.addr as usize as *const u8,
                            bytes[at..].as_mut_ptr(),
                            len,
                        );
                    }
                }
            }
            carried.push(bytes);
            tail += 1;
            n += 1;
        }
        if n == 0 {
            return 0;
        }
        let body = encode_record(&qp, &(SendWrW::list(&wrs[..n]), carried));
        let Some(sub) = q.posts.as_mut() else {
            return 0;
        };
        if !sub.submit(KIND_SEND, &body) {
            return 0;
        }
        if let Some(f) = q.qps.get_mut(&qp) {
            f.sq_tail = tail;
        }
        n
    }

    /// [`Remote::ring_sends`] for receive requests ([`check_post_recv`]).
    fn ring_recvs(&mut self, qp: QpHandle, wrs: &[RecvWr<'_>]) -> usize {
        let Some(f) = self.qp_fast(qp) else {
            return 0;
        };
        if f.snap.recv.state == QpState::Reset {
            return 0;
        }
        let mut q = self.fast.borrow_mut();
        let mut tail = f.rq_tail;
        let mut n = 0;
        for wr in wrs {
            let view = RecvQueueView {
                outstanding: u32::try_from(tail - f.rq_head).unwrap_or(u32::MAX),
                ..f.snap.recv
            };
            if check_post_recv(&view, wr.sg_list, f.snap.flavor).is_err() {
                break;
            }
            tail += 1;
            n += 1;
        }
        if n == 0 {
            return 0;
        }
        let body = encode_record(&qp, &RecvWrW::list(&wrs[..n]));
        let Some(sub) = q.posts.as_mut() else {
            return 0;
        };
        if !sub.submit(KIND_RECV, &body) {
            return 0;
        }
        if let Some(f) = q.qps.get_mut(&qp) {
            f.rq_tail = tail;
        }
        n
    }

    /// `ibv_post_send`: the requests the checks here accept go into the
    /// submission ring without waiting for the fabric; from the first
    /// one they do not, by call (`bad_wr` counted over the whole list).
    ///
    /// # Safety
    /// As the trait's method.
    pub(crate) unsafe fn post_send(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
    ) -> Result<()> {
        let k = self.ring_sends(*qp, wrs);
        if k == wrs.len() {
            return Ok(());
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.post_send_by_call(qp, &wrs[k..]) }.map_err(|e| shift_bad_wr(e, k))
    }

    /// `ibv_post_recv`, as [`Remote::post_send`].
    ///
    /// # Safety
    /// As the trait's method.
    pub(crate) unsafe fn post_recv(&mut self, qp: &QpHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let k = self.ring_recvs(*qp, wrs);
        if k == wrs.len() {
            return Ok(());
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.post_recv_by_call(qp, &wrs[k..]) }.map_err(|e| shift_bad_wr(e, k))
    }

    /// `ibv_create_ah`: a UD send naming it may go through the ring.
    pub(crate) fn create_ah(&mut self, pd: &PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        let ah = self.create_ah_by_call(pd, attr)?;
        self.fast.borrow_mut().ahs.insert(ah);
        Ok(ah)
    }

    /// `ibv_destroy_ah`: sends naming it go by call from now on (where
    /// the world refuses them).
    pub(crate) fn destroy_ah(&mut self, ah: &AhHandle) -> Result<()> {
        self.fast.borrow_mut().ahs.remove(ah);
        self.destroy_ah_by_call(ah)
    }

    /// `ibv_dereg_mr`: its bytes are no longer read here.
    pub(crate) fn dereg_mr(&mut self, mr: &MrHandle) -> Result<()> {
        self.fast.borrow_mut().mrs.remove(mr);
        self.dereg_mr_by_call(mr)
    }

    /// Writes a record into the submission ring as it is (tests write
    /// garbage); false when there is no ring or no room.
    #[cfg(test)]
    pub(crate) fn submit_raw(&self, kind: u32, body: &[u8]) -> bool {
        self.fast
            .borrow_mut()
            .posts
            .as_mut()
            .is_some_and(|p| p.submit(kind, body))
    }

    /// Runs `f` on the submission ring, if there is one (tests scribble on
    /// it).
    #[cfg(test)]
    pub(crate) fn with_posts<R>(&self, f: impl FnOnce(&Submitter) -> R) -> Option<R> {
        self.fast.borrow().posts.as_ref().map(f)
    }

    /// The ring of `cq`, if it is polled through one (tests scribble on it).
    #[cfg(test)]
    pub(crate) fn with_cq_ring<R>(&self, cq: CqHandle, f: impl FnOnce(&CqRing) -> R) -> Option<R> {
        match self.fast.borrow().cqs.get(&cq) {
            Some(CqPoll::Ring(r, _)) => Some(f(r)),
            _ => None,
        }
    }
}

/// The fabric's side of `AttachCq`: a ring for `cq` (the session's, checked
/// by the caller), its region passed with the reply; `None` when the ring
/// would be too large or cannot be made (the client polls by call).
pub(crate) fn attach_cq(
    sim: &mut SimVerbs,
    session: &mut Session<'_>,
    cq: CqHandle,
    ex: bool,
) -> Vec<u8> {
    use super::encode;
    let verb = if ex { Verb::PollCqEx } else { Verb::PollCq };
    let fmt = if ex {
        match sim.world().cq_ex_format(cq) {
            Ok(f) => Some(f),
            Err(e) => return encode(&Err::<Option<RingInfo>, _>(e)),
        }
    } else {
        None
    };
    let cqe = match Verbs::cq_info(sim, &cq) {
        Ok(i) => i.cqe,
        Err(e) => {
            return encode(&Err::<Option<RingInfo>, _>(Error::new(
                verb,
                e.kind(),
                e.message().to_owned(),
            )))
        }
    };
    let capacity = capacity_for(cqe);
    let Some(bytes) = ring_bytes(capacity) else {
        return encode(&Ok::<Option<RingInfo>, Error>(None));
    };
    let Ok((shm, fd)) = Shm::create(bytes) else {
        return encode(&Ok::<Option<RingInfo>, Error>(None));
    };
    if let Err(e) = sim
        .world_mut()
        .attach_cq_mirror(cq, Box::new(RingMirror::new(shm, capacity)))
    {
        return encode(&Err::<Option<RingInfo>, _>(e));
    }
    session.note_mirror(cq);
    session.pass_fd(fd);
    encode(&Ok::<Option<RingInfo>, Error>(Some(RingInfo {
        capacity,
        ex: fmt,
    })))
}

/// `e` with its `bad_wr` moved on by `k` (requests before it went through
/// the ring).
pub(super) fn shift_bad_wr(e: Error, k: usize) -> Error {
    match e.bad_wr() {
        Some(i) => e.with_bad_wr(i + k),
        None => e,
    }
}

/// A record's body: the queue's handle (a QP's, or an SRQ's), then the
/// requests.
pub(crate) fn encode_record<H: Serialize, T: Serialize>(queue: &H, what: &T) -> Vec<u8> {
    let mut b = super::encode(queue);
    b.extend_from_slice(&super::encode(what));
    b
}

/// The fabric's side of `AttachQp`: the QP's snapshot, and the
/// connection's submission ring with its doorbell the first time.
pub(crate) fn attach_qp(sim: &mut SimVerbs, session: &mut Session<'_>, qp: QpHandle) -> Vec<u8> {
    use super::encode;
    let snap = match sim.world().post_snapshot(qp) {
        Ok(s) => s,
        Err(e) => return encode(&Err::<(PostSnapshot, bool), _>(e)),
    };
    session.note_fast_qp(qp);
    match give_ring(session, Verb::PostSend) {
        Ok(region) => encode(&Ok::<_, Error>((snap, region))),
        Err(e) => encode(&Err::<(PostSnapshot, bool), _>(e)),
    }
}

/// The connection's submission ring with its doorbell, passed with the
/// reply, when it has none yet: whether it was.
pub(super) fn give_ring(session: &mut Session<'_>, verb: Verb) -> Result<bool> {
    if session.has_posts() {
        return Ok(false);
    }
    match Receiver::create() {
        Ok((r, fds)) => {
            session.set_posts(r);
            for fd in fds {
                session.pass_fd(fd);
            }
            Ok(true)
        }
        Err(e) => Err(Error::from_errno(
            verb,
            libc::ENOMEM,
            format!("no submission ring: {e}"),
        )),
    }
}

/// What serving one record did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Served {
    /// Posted.
    Posted,
    /// Malformed: its QP (the session's) went to ERR the way a NIC takes
    /// a malformed WQE; the reason.
    Malformed(QpHandle, String),
    /// Malformed receive requests for an SRQ (the session's): not queued,
    /// the SRQ's context hears `IBV_EVENT_SRQ_ERR`; the reason.
    MalformedSrq(SrqHandle, String),
    /// Not the session's QP, or no QP at all: dropped; the reason.
    Dropped(String),
}
