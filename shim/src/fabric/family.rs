//! Who reaches what on the fabric: a process and the processes it forked
//! form one family with one object namespace (as the uverbs file a process
//! opens and its forked children inherit); every handle of every call is
//! checked against it. Also the identity checks: the peer's credentials
//! and the family's random token.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use backend_sim::*;
use verbs_api::*;

/// What a family of processes reaches, and what it destroys when the
/// process that made it leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Owned {
    Qp(QpHandle),
    CmId(CmIdHandle),
    Srq(SrqHandle),
    Ah(AhHandle),
    Mw(MwHandle),
    Mr(MrHandle),
    /// After the MRs that may be registered on it.
    Dm(DmHandle),
    Cq(CqHandle),
    Channel(CompChannelHandle),
    Pd(PdHandle),
    Xrcd(XrcdHandle),
    Context(ContextHandle),
    CmChannel(CmChannelHandle),
}

impl Owned {
    /// The handle's kind, as an error names it.
    pub(super) fn what(self) -> &'static str {
        match self {
            Self::Qp(_) => "QP",
            Self::CmId(_) => "rdma_cm id",
            Self::Srq(_) => "SRQ",
            Self::Ah(_) => "AH",
            Self::Mw(_) => "MW",
            Self::Mr(_) => "MR",
            Self::Dm(_) => "DM",
            Self::Cq(_) => "CQ",
            Self::Channel(_) => "completion channel",
            Self::Pd(_) => "PD",
            Self::Xrcd(_) => "XRCD",
            Self::Context(_) => "context",
            Self::CmChannel(_) => "rdma_cm event channel",
        }
    }
}

/// Who made an object: a connection (its objects go when it closes) or
/// the world itself (rdma_cm's device contexts, default PDs and automatic
/// CQs, reached through an id the family owns and destroyed with it).
type Maker = Option<u64>;

/// A process and the processes it forked: one object namespace, as the
/// uverbs file a process opens and its forked children inherit.
#[derive(Debug)]
pub(crate) struct Family {
    /// The secret a forked child presents to join (the parent's memory,
    /// inherited over fork; gone after exec, as an `O_CLOEXEC` fd).
    pub(super) token: [u8; 16],
    /// Connections in the family.
    pub(super) members: usize,
    /// The process id the world's contexts of this family carry.
    pub(super) process: ProcessId,
    /// Every object the family reaches, with its maker.
    pub(super) objects: BTreeMap<Owned, Maker>,
    /// Async events handed to the family, not yet acknowledged.
    pub(super) async_tokens: std::collections::BTreeSet<u64>,
    /// CQs of the family mirrored into a ring in shared memory.
    pub(super) mirrors: std::collections::BTreeSet<CqHandle>,
    /// QPs of the family posted to through a submission ring.
    pub(super) fast_qps: std::collections::BTreeSet<QpHandle>,
}

/// One connected process, as the fabric serves one call of it.
#[derive(Debug)]
pub(crate) struct Session<'a> {
    pub(super) pid: libc::pid_t,
    pub(super) conn: u64,
    pub(super) family: &'a mut Family,
    /// Raised by the process's memory when a copy from or to it failed:
    /// the process is gone (or unmapped what it registered).
    pub(super) gone: &'a Arc<AtomicBool>,
    /// Descriptors to pass with the reply (shared regions, a doorbell).
    pub(super) fd_out: Vec<std::os::fd::OwnedFd>,
    /// The connection's submission ring: whether it has one, and the one
    /// this call made.
    pub(super) has_posts: bool,
    pub(super) new_posts: Option<super::sqring::Receiver>,
}

impl Session<'_> {
    /// The process's pid (from the socket's peer credentials).
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }
    /// The process id the world gives this family's contexts.
    pub(crate) fn process(&self) -> ProcessId {
        self.family.process
    }
    /// The flag a failed copy of this process's memory raises.
    pub(crate) fn gone_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(self.gone)
    }
    /// Records an object the process created.
    pub(crate) fn own(&mut self, o: Owned) {
        self.family.objects.insert(o, Some(self.conn));
    }
    /// Records an object the world made for one the family owns (reached,
    /// destroyed with its owner by the world).
    pub(crate) fn adopt(&mut self, o: Owned) {
        self.family.objects.entry(o).or_insert(None);
    }
    /// Forgets an object the process destroyed.
    pub(crate) fn disown(&mut self, o: Owned) {
        self.family.objects.remove(&o);
    }
    /// Whether the family reaches `o`.
    pub(crate) fn reaches(&self, o: Owned) -> bool {
        self.family.objects.contains_key(&o)
    }
    /// `Ok` when the family reaches every handle in `hs`; otherwise what the
    /// kernel says of a handle not in the caller's uverbs file: `EINVAL`,
    /// as the simulator says of a stale handle (nothing about the object
    /// another process may have behind that number).
    pub(crate) fn check(&self, verb: Verb, hs: &[Owned]) -> Result<(), Error> {
        match hs.iter().find(|h| !self.reaches(**h)) {
            None => Ok(()),
            Some(h) => Err(Error::invalid(
                verb,
                format!("no such {} in this process ({h:?})", h.what()),
            )),
        }
    }
    /// Remembers that the family's CQ `cq` is mirrored into shared memory.
    pub(crate) fn note_mirror(&mut self, cq: CqHandle) {
        self.family.mirrors.insert(cq);
    }
    /// Passes `fd` with the reply to this call.
    pub(crate) fn pass_fd(&mut self, fd: std::os::fd::OwnedFd) {
        self.fd_out.push(fd);
    }
    /// Remembers that the family posts to `qp` through a submission ring.
    pub(crate) fn note_fast_qp(&mut self, qp: QpHandle) {
        self.family.fast_qps.insert(qp);
    }
    /// Whether the connection has a submission ring.
    pub(crate) fn has_posts(&self) -> bool {
        self.has_posts
    }
    /// Gives the connection the submission ring `r`.
    pub(crate) fn set_posts(&mut self, r: super::sqring::Receiver) {
        self.new_posts = Some(r);
        self.has_posts = true;
    }
    /// Remembers an async event handed to the family.
    pub(crate) fn note_async_token(&mut self, token: u64) {
        self.family.async_tokens.insert(token);
    }
    /// Whether the family was handed async event `token` (and forgets it).
    pub(crate) fn take_async_token(&mut self, token: u64) -> bool {
        self.family.async_tokens.remove(&token)
    }
}

impl Family {
    /// Applies what the family's processes took from their CQ rings to the
    /// world's CQs (freeing the work-queue slots those completions cover),
    /// before anything else of theirs is served; forgets CQs no longer
    /// mirrored.
    pub(super) fn sync_mirrors(&mut self, sim: &mut SimVerbs) {
        let w = sim.world_mut();
        self.mirrors.retain(|cq| {
            w.sync_cq_mirror(*cq);
            w.cq_mirrored(*cq)
        });
    }

    /// Destroys what connection `conn` made, as closing a uverbs file
    /// does: QPs first (peers' requests to them go unanswered; nothing more
    /// leaves on their behalf), then what they used, contexts last.
    pub(super) fn close(&mut self, conn: u64, sim: &mut SimVerbs) -> usize {
        let mine: Vec<Owned> = self
            .objects
            .iter()
            .filter(|(_, m)| **m == Some(conn))
            .map(|(o, _)| *o)
            .collect();
        for o in &mine {
            self.objects.remove(o);
            let _ = match *o {
                Owned::Qp(h) => sim.destroy_qp(&h),
                Owned::Srq(h) => sim.destroy_srq(&h),
                Owned::Ah(h) => sim.destroy_ah(&h),
                Owned::Mw(h) => sim.dealloc_mw(&h),
                Owned::Mr(h) => sim.dereg_mr(&h),
                Owned::Dm(h) => sim.free_dm(&h),
                Owned::Cq(h) => sim.destroy_cq(&h),
                Owned::Channel(h) => sim.destroy_comp_channel(&h),
                Owned::Pd(h) => sim.dealloc_pd(&h),
                Owned::Xrcd(h) => sim.close_xrcd(&h),
                Owned::Context(h) => sim.close_device(&h),
                Owned::CmId(h) => sim.rdma_destroy_id(&h),
                Owned::CmChannel(h) => sim.rdma_destroy_event_channel(&h),
            };
        }
        mine.len()
    }
}

/// The peer's credentials (SO_PEERCRED).
pub(crate) fn peer_cred(s: &UnixStream) -> Option<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live and sized for SO_PEERCRED.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred)
}

/// 16 bytes from the kernel's random source (a family's token).
pub(super) fn random_token() -> io::Result<[u8; 16]> {
    let mut t = [0u8; 16];
    let mut at = 0;
    while at < t.len() {
        // SAFETY: the pointer and length name the unfilled rest of `t`.
        let n = unsafe { libc::getrandom(t[at..].as_mut_ptr().cast(), t.len() - at, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        at += n as usize;
    }
    Ok(t)
}
