//! The data path over the shared fabric without a call per verb: the
//! client's side of the queues it shares with the fabric (completion
//! rings, `cqring`), and the calls that set them up.
//!
//! A CQ gets its ring on its first poll (one call, `AttachCq`, whose reply
//! carries the region); from then on `ibv_poll_cq` reads the ring. When
//! the fabric stops mirroring a CQ (resize, a QP's completions cleaned
//! out, a consumer count that made no sense) the next poll attaches anew.
//! A CQ whose ring would be too large is polled by call, as before.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use backend_sim::*;
use serde::{Deserialize, Serialize};
use verbs_api::*;

use super::client::Remote;
use super::cqring::{capacity_for, ring_bytes, CqRing, RingMirror};
use super::extra::ExtraCall;
use super::rpc::Call;
use super::server::Session;
use super::shm::Shm;

/// Bumped in a forked child: the rings mapped before the fork are the
/// parent's (the child attaches its own).
static FORKS: AtomicU64 = AtomicU64::new(0);

extern "C" fn forked_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// Registers [`forked_child`] once per process.
pub(crate) fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain extern "C" fn that only bumps an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

/// What the fabric says of a CQ's ring.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct RingInfo {
    /// Slots.
    capacity: u64,
    /// For an extended CQ: its `wc_flags` and whether its device has a
    /// completion clock.
    ex: Option<(WcExFlags, bool)>,
}

/// How a CQ is polled.
#[derive(Debug)]
enum CqPoll {
    /// Through its ring.
    Ring(CqRing, Option<(WcExFlags, bool)>),
    /// By call (its ring would be too large).
    Call,
}

/// The queues of this process shared with the fabric.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    /// [`FORKS`] when these were made.
    forks: u64,
    cqs: BTreeMap<CqHandle, CqPoll>,
}

impl Queues {
    /// Forgets what a parent mapped, in a forked child.
    fn check_fork(&mut self) {
        let now = FORKS.load(Ordering::Relaxed);
        if now != self.forks {
            self.forks = now;
            self.cqs.clear();
        }
    }
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
                let mut q = self.fast.borrow_mut();
                q.check_fork();
                match q.cqs.get_mut(&cq) {
                    Some(CqPoll::Ring(ring, ex)) => {
                        let ex = *ex;
                        if let Some(n) = ring.poll(want, |i, e| out(i, e, ex)) {
                            return Ok(Some(n));
                        }
                        q.cqs.remove(&cq);
                    }
                    Some(CqPoll::Call) => return Ok(None),
                    None => {}
                }
            }
            let ex = verb == Verb::PollCqEx;
            let (info, fd) =
                self.call_fd::<Option<RingInfo>>(&Call::Extra(ExtraCall::AttachCq(cq, ex)))?;
            let poll = match (info, fd) {
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
