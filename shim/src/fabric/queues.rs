//! What this process keeps of the queues it shares with the fabric: each
//! CQ's ring or that it is polled by call, each QP's post-time snapshot
//! and queue counts, the submission ring, the MRs whose bytes an inline
//! request may be read from, and when a call makes the snapshots stale.
//! The client's connection holds one [`Queues`]; `fast` works them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use backend_sim::*;
use verbs_api::*;

use super::cqring::CqRing;
use super::extra::ExtraCall;
use super::rpc::Call;
use super::sqring::Submitter;

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

/// How a CQ is polled.
#[derive(Debug)]
pub(super) enum CqPoll {
    /// Through its ring.
    Ring(CqRing, Option<(WcExFlags, bool)>),
    /// By call (its ring would be too large).
    Call,
}

/// What the client knows of a QP it posts to through the ring: the
/// fabric's snapshot, and the queue counts it keeps itself since (each
/// request it writes adds to a tail; each completion it takes from a ring
/// frees through its sequence number, as the world does when polled).
#[derive(Debug, Clone, Copy)]
pub(super) struct QpFast {
    pub(super) snap: PostSnapshot,
    pub(super) sq_head: u64,
    pub(super) sq_tail: u64,
    pub(super) rq_head: u64,
    pub(super) rq_tail: u64,
}

/// What the client knows of an SRQ it posts to through the ring, as
/// [`QpFast`] for a QP's receive queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct SrqFast {
    pub(super) snap: SrqPostSnapshot,
    pub(super) head: u64,
    pub(super) tail: u64,
}

/// The queues of this process shared with the fabric.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    /// [`FORKS`] when these were made.
    forks: u64,
    pub(super) cqs: BTreeMap<CqHandle, CqPoll>,
    /// The submission ring, once the fabric gave one.
    pub(super) posts: Option<Submitter>,
    /// The fabric gave none (or it broke): post by call.
    pub(super) no_posts: bool,
    /// QPs whose snapshot is current.
    pub(super) qps: BTreeMap<QpHandle, QpFast>,
    /// SRQs whose snapshot is current.
    pub(super) srqs: BTreeMap<SrqHandle, SrqFast>,
    /// Address handles this process created and has not destroyed (a UD
    /// send naming one needs nothing more of the world at post time).
    pub(super) ahs: std::collections::BTreeSet<AhHandle>,
    /// MRs registered by this process whose bytes may be read here for an
    /// inline request: `(address, length)` (IOVA = address only).
    pub(crate) mrs: BTreeMap<MrHandle, (u64, u64)>,
}

impl Queues {
    /// Forgets what a parent mapped, in a forked child.
    pub(super) fn check_fork(&mut self) {
        let now = FORKS.load(Ordering::Relaxed);
        if now != self.forks {
            self.forks = now;
            self.cqs.clear();
            self.qps.clear();
            self.srqs.clear();
            self.ahs.clear();
            self.posts = None;
            self.no_posts = false;
        }
    }

    /// After a call that may change a QP's state or queues (or free
    /// requests the rings did not show): the snapshots are stale.
    pub(crate) fn forget_snapshots(&mut self) {
        self.qps.clear();
        self.srqs.clear();
    }

    /// Whether a send on a QP of snapshot `snap` naming the address
    /// handle `ah` (`wr.ud`) needs nothing of the world at post time: on
    /// a UD QP, an address handle this process holds; elsewhere, none.
    pub(super) fn addressed(&self, snap: &PostSnapshot, ah: Option<AhHandle>) -> bool {
        match ah {
            Some(a) => snap.ud && self.ahs.contains(&a),
            None => !snap.ud,
        }
    }

    /// Whether the range `[addr, addr + len)` lies in one MR of this
    /// process (where the world would find an inline request's bytes).
    pub(super) fn in_an_mr(&self, addr: u64, len: u64) -> bool {
        self.mrs
            .values()
            .any(|&(a, l)| addr >= a && addr.checked_add(len).is_some_and(|e| e <= a + l))
    }
}

/// Whether a call may change what a QP snapshot says (its state, its
/// queues' counts), so that posts after it need a new one.
pub(crate) fn stales_snapshots(call: &Call) -> bool {
    match call {
        Call::Extra(x) => !matches!(
            x,
            ExtraCall::AttachCq(..)
                | ExtraCall::AttachQp(_)
                | ExtraCall::AttachSrq(_)
                | ExtraCall::RegMr { .. }
                | ExtraCall::ContextDevice(_)
                | ExtraCall::IsMlx5(_)
                | ExtraCall::CompChannelPending(_)
                | ExtraCall::AsyncPending(_)
                | ExtraCall::CmChannelPending(_)
                | ExtraCall::GetAsyncEvent(_)
                | ExtraCall::AckAsyncEvent(_)
                | ExtraCall::QpOutOfOrder(_)
        ),
        Call::ReqNotifyCq(..)
        | Call::GetCqEvent(..)
        | Call::AckCqEvents(..)
        | Call::QueryPort(..)
        | Call::QueryDevice(..)
        | Call::QueryDeviceEx(..)
        | Call::QueryGid(..)
        | Call::QueryPkey(..)
        | Call::CqInfo(..)
        | Call::MrInfo(..)
        | Call::QpNum(..)
        | Call::QueryQp(..)
        | Call::CreateCq(..)
        | Call::CreateCqEx(..)
        | Call::AllocPd(..)
        | Call::DeregMr(..)
        | Call::CreateAh(..)
        | Call::DestroyAh(..) => false,
        _ => true,
    }
}
