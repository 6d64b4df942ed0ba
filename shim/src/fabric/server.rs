//! The fabric process (`verbsim fabric`): the one world of every process
//! that joins, served a call at a time over a Unix socket.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::rpc::{dispatch, Call};
use super::MAX_FRAME;

/// How virtual time relates to the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// Virtual time never runs ahead of the wall-clock time since the
    /// fabric started: timers (transport retry, RNR, CM) take their real
    /// duration, so a peer that is merely slow is not declared dead.
    Wall,
    /// Virtual time runs as fast as events allow (as in one process): the
    /// trace depends only on the order of the processes' calls, but a timer
    /// can expire while a peer process is still on its way.
    Virtual,
}

/// How the fabric runs.
#[derive(Clone, Debug)]
pub struct FabricOptions {
    /// The socket to listen on.
    pub socket: PathBuf,
    /// Exit once every process has left (after the first joined) and none
    /// has joined for [`FabricOptions::linger`].
    pub exit_when_idle: bool,
    /// How long an idle fabric waits for a new process before exiting.
    pub linger: Duration,
    /// Time's pace.
    pub pace: Pace,
    /// Where to write the trace when the fabric exits.
    pub trace: Option<PathBuf>,
}

/// What a fabric run saw, returned when it exits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Connections accepted (one per process, a forked child's own too).
    pub sessions: u64,
    /// Calls served.
    pub calls: u64,
    /// Connections closed for garbage: a frame that is too long, cut
    /// short, or not a call.
    pub refused: u64,
    /// Objects destroyed because their process left without doing so.
    pub reclaimed: u64,
}

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
    fn what(self) -> &'static str {
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
    token: [u8; 16],
    /// Connections in the family.
    members: usize,
    /// The process id the world's contexts of this family carry.
    process: ProcessId,
    /// Every object the family reaches, with its maker.
    objects: BTreeMap<Owned, Maker>,
    /// Async events handed to the family, not yet acknowledged.
    async_tokens: std::collections::BTreeSet<u64>,
    /// CQs of the family mirrored into a ring in shared memory.
    mirrors: std::collections::BTreeSet<CqHandle>,
    /// QPs of the family posted to through a submission ring.
    fast_qps: std::collections::BTreeSet<QpHandle>,
}

/// One connected process, as the fabric serves one call of it.
#[derive(Debug)]
pub(crate) struct Session<'a> {
    pid: libc::pid_t,
    conn: u64,
    family: &'a mut Family,
    /// Raised by the process's memory when a copy from or to it failed:
    /// the process is gone (or unmapped what it registered).
    gone: &'a Arc<AtomicBool>,
    /// Descriptors to pass with the reply (shared regions, a doorbell).
    fd_out: Vec<std::os::fd::OwnedFd>,
    /// The connection's submission ring: whether it has one, and the one
    /// this call made.
    has_posts: bool,
    new_posts: Option<super::sqring::Receiver>,
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
    fn sync_mirrors(&mut self, sim: &mut SimVerbs) {
        let w = sim.world_mut();
        self.mirrors.retain(|cq| {
            w.sync_cq_mirror(*cq);
            w.cq_mirrored(*cq)
        });
    }

    /// Destroys what connection `conn` made, as closing a uverbs file
    /// does: QPs first (peers' requests to them go unanswered; nothing more
    /// leaves on their behalf), then what they used, contexts last.
    fn close(&mut self, conn: u64, sim: &mut SimVerbs) -> usize {
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

/// The first frame a process sends: which family it belongs to.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Hello {
    /// [`PROTOCOL`].
    pub(crate) protocol: u32,
    /// The family token of the process this one was forked from, if any.
    pub(crate) family: Option<[u8; 16]>,
}

/// The wire protocol's version: a process and a fabric of different
/// builds refuse each other at the first frame.
pub(crate) const PROTOCOL: u32 = 2;

/// How long a frame may take to arrive once its first byte has, and a
/// reply to leave once it is ready: a client that trickles is dropped
/// after this, and never holds anyone else up meanwhile.
pub(crate) const FRAME_DEADLINE: Duration = Duration::from_secs(2);

/// The most a client's socket is read per turn of the loop, so one client
/// streaming a long frame shares the loop with the others.
const READ_TURN: usize = 1 << 20;

/// Where a connection stands.
#[derive(Debug)]
enum Stage {
    /// Connected; the first frame must be a [`Hello`].
    Greeting,
    /// A member of a family.
    Member(u64),
}

struct Client {
    stream: UnixStream,
    pid: libc::pid_t,
    stage: Stage,
    /// Bytes read and not yet served: frames, the last one maybe partial.
    inbuf: Vec<u8>,
    /// When the first byte of the frame at the head of `inbuf` arrived.
    frame_since: Option<Instant>,
    /// Reply bytes not yet written, and since when they wait.
    outbuf: Vec<u8>,
    out_since: Option<Instant>,
    /// Raised when a copy of the process's memory failed.
    gone: Arc<AtomicBool>,
    /// The peer hung up (or the socket failed).
    closed: bool,
    /// The process's submission ring, once it asked for one.
    posts: Option<super::sqring::Receiver>,
}

impl Client {
    /// A complete frame at the head of `inbuf`, if there is one: its
    /// length; `Err` for a length over [`MAX_FRAME`].
    fn frame_ready(&self) -> Result<Option<usize>, String> {
        let Some(head) = self.inbuf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > MAX_FRAME {
            return Err(format!("a frame of {len} bytes (at most {MAX_FRAME})"));
        }
        Ok((self.inbuf.len() >= 4 + len).then_some(len))
    }

    /// What is wrong with the bytes a connection left unserved when it
    /// closed, if anything: a length over the limit, a frame cut short, or
    /// a frame that is not what this stage expects.
    fn garbage(&self) -> Option<String> {
        let len = match self.frame_ready() {
            Err(why) => return Some(why),
            Ok(None) => {
                return Some(format!(
                    "a frame cut short ({} bytes of it)",
                    self.inbuf.len()
                ))
            }
            Ok(Some(len)) => len,
        };
        let frame = &self.inbuf[4..4 + len];
        match self.stage {
            Stage::Greeting => postcard::from_bytes::<Hello>(frame)
                .err()
                .map(|e| format!("a first frame that is no greeting ({e})")),
            Stage::Member(_) => postcard::from_bytes::<Call>(frame)
                .err()
                .map(|e| format!("{len} bytes that are no call ({e})")),
        }
    }

    /// Reads what the socket holds (up to [`READ_TURN`]) without waiting.
    fn fill(&mut self) {
        let mut chunk = [0u8; 64 * 1024];
        let mut got = 0usize;
        while got < READ_TURN {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => {
                    if self.inbuf.is_empty() {
                        self.frame_since = Some(Instant::now());
                    }
                    self.inbuf.extend_from_slice(&chunk[..n]);
                    got += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
        }
    }

    /// Writes what waits in `outbuf` without waiting.
    fn flush(&mut self) {
        while !self.outbuf.is_empty() {
            match self.stream.write(&self.outbuf) {
                Ok(0) => {
                    self.closed = true;
                    return;
                }
                Ok(n) => {
                    self.outbuf.drain(..n);
                    self.out_since = Some(Instant::now());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
        self.out_since = None;
    }

    /// Queues a reply frame with `fds` attached to its first byte. The
    /// client waits for this reply, so nothing is queued before it; if
    /// something is (or the descriptor cannot go), the reply goes without
    /// it and the client polls by call.
    fn reply_with_fds(&mut self, bytes: &[u8], fds: &[std::os::fd::OwnedFd]) {
        // What the world wrote lands before the process hears of it.
        super::memory::flush_all();
        if !self.outbuf.is_empty() {
            self.reply(bytes);
            return;
        }
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let mut frame = Vec::with_capacity(4 + bytes.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(bytes);
        let raw: Vec<_> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        match super::shm::send_with_fds(self.stream.as_raw_fd(), &frame, &raw) {
            Ok(n) => {
                self.outbuf.extend_from_slice(&frame[n..]);
                self.out_since = Some(Instant::now());
                self.flush();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.reply(bytes),
            Err(_) => self.closed = true,
        }
    }

    /// Queues a reply frame and writes what it can of it.
    fn reply(&mut self, bytes: &[u8]) {
        // What the world wrote lands before the process hears of it.
        super::memory::flush_all();
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        self.outbuf.extend_from_slice(&len.to_le_bytes());
        self.outbuf.extend_from_slice(bytes);
        self.out_since = Some(Instant::now());
        self.flush();
    }
}

/// Binds the socket: a live fabric there is `AddrInUse`; a stale socket
/// file (its fabric died) is replaced. The socket is made readable and
/// writable by its owner only (its directory should be the user's alone
/// too: see `verbsim exec --fabric`).
fn bind(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let l = match UnixListener::bind(path) {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            if UnixStream::connect(path).is_ok() {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)?
        }
        Err(e) => return Err(e),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
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
fn random_token() -> io::Result<[u8; 16]> {
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

/// The fabric's state besides the world: families and their connections.
#[derive(Default)]
struct Registry {
    clients: BTreeMap<u64, Client>,
    families: BTreeMap<u64, Family>,
    next_conn: u64,
    next_family: u64,
}

impl Registry {
    /// Closes connection `id`: destroys what it made and leaves its
    /// family (which ends with its last member).
    fn close(&mut self, id: u64, sim: &mut SimVerbs, stats: &mut FabricStats) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        let Stage::Member(f) = c.stage else {
            return;
        };
        let Some(fam) = self.families.get_mut(&f) else {
            return;
        };
        let n = fam.close(id, sim);
        fam.members -= 1;
        if fam.members == 0 {
            // The family's librdmacm is gone: so are the device contexts
            // and default PDs the CM opened for it.
            let process = fam.process;
            self.families.remove(&f);
            sim.world_mut().cm_process_exit(process);
        }
        stats.reclaimed += n as u64;
        if n > 0 {
            eprintln!(
                "verbsim fabric: process {} left; destroyed {n} objects it had not",
                c.pid
            );
        }
    }

    /// Serves the frame at the head of client `id`'s buffer (one: the
    /// loop turns to the others before this client's next).
    fn serve_frame(&mut self, id: u64, len: usize, sim: &mut SimVerbs, stats: &mut FabricStats) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let frame: Vec<u8> = c.inbuf.drain(..4 + len).skip(4).collect();
        c.frame_since = (!c.inbuf.is_empty()).then(Instant::now);
        match c.stage {
            Stage::Greeting => {
                let hello: Hello = match postcard::from_bytes(&frame) {
                    Ok(h) => h,
                    Err(e) => {
                        refuse(
                            c,
                            stats,
                            &format!("a first frame that is no greeting ({e})"),
                        );
                        return;
                    }
                };
                if hello.protocol != PROTOCOL {
                    let err = Error::from_errno(
                        Verb::OpenDevice,
                        libc::EPROTO,
                        format!(
                            "the fabric speaks protocol {PROTOCOL}, the library {}: run both from one build",
                            hello.protocol
                        ),
                    );
                    c.reply(&super::encode(&Err::<[u8; 16], _>(err)));
                    c.closed = true;
                    return;
                }
                let joined = hello
                    .family
                    .and_then(|t| self.families.iter().find(|(_, f)| f.token == t))
                    .map(|(k, _)| *k);
                let f = match joined {
                    Some(f) => f,
                    None => {
                        let token = match random_token() {
                            Ok(t) => t,
                            Err(e) => {
                                refuse(c, stats, &format!("no random token ({e})"));
                                return;
                            }
                        };
                        self.next_family += 1;
                        let f = self.next_family;
                        self.families.insert(
                            f,
                            Family {
                                token,
                                members: 0,
                                process: ProcessId(u32::try_from(f).unwrap_or(u32::MAX)),
                                objects: BTreeMap::new(),
                                async_tokens: Default::default(),
                                mirrors: Default::default(),
                                fast_qps: Default::default(),
                            },
                        );
                        f
                    }
                };
                let fam = self.families.get_mut(&f).expect("just found or made");
                fam.members += 1;
                c.stage = Stage::Member(f);
                c.reply(&super::encode(&Ok::<[u8; 16], Error>(fam.token)));
            }
            Stage::Member(f) => {
                let call: Call = match postcard::from_bytes(&frame) {
                    Ok(call) => call,
                    Err(e) => {
                        refuse(
                            c,
                            stats,
                            &format!("{} bytes that are no call ({e})", frame.len()),
                        );
                        return;
                    }
                };
                stats.calls += 1;
                let Some(family) = self.families.get_mut(&f) else {
                    c.closed = true;
                    return;
                };
                family.sync_mirrors(sim);
                // The process may have changed its memory before calling.
                super::memory::new_epoch();
                // What the process posted before this call reaches the
                // world first.
                drain_posts(c, id, family, sim);
                let mut session = Session {
                    pid: c.pid,
                    conn: id,
                    family,
                    gone: &c.gone,
                    fd_out: Vec::new(),
                    has_posts: c.posts.is_some(),
                    new_posts: None,
                };
                let reply = dispatch(sim, &mut session, call);
                let fds = std::mem::take(&mut session.fd_out);
                if let Some(r) = session.new_posts.take() {
                    c.posts = Some(r);
                }
                if fds.is_empty() {
                    c.reply(&reply);
                } else {
                    c.reply_with_fds(&reply, &fds);
                }
            }
        }
    }
}

/// Takes what connection `id` (of `family`) wrote into its submission
/// ring, in order, into the world. A record that is not what it should be
/// hurts only its own QP (see `sqring`); a broken ring, the family's QPs
/// that posted through it.
fn drain_posts(c: &mut Client, id: u64, family: &mut Family, sim: &mut SimVerbs) {
    use super::fast::{serve_record, Served};
    use super::sqring::Taken;
    let Client {
        posts, gone, pid, ..
    } = c;
    let Some(ring) = posts.as_mut() else {
        return;
    };
    ring.clear_doorbell();
    if !ring.pending() {
        return;
    }
    // The process wrote its buffers before it posted them.
    super::memory::new_epoch();
    let (mut bad, mut first_bad) = (0u64, None);
    loop {
        match ring.take() {
            Taken::Empty => break,
            Taken::Record(kind, body) => {
                // What the process took from its CQ rings before it wrote
                // this record (its consumer counts are read after the
                // record, so they are at least that far).
                family.sync_mirrors(sim);
                let mut session = Session {
                    pid: *pid,
                    conn: id,
                    family: &mut *family,
                    gone,
                    fd_out: Vec::new(),
                    has_posts: true,
                    new_posts: None,
                };
                match serve_record(sim, &mut session, kind, &body) {
                    Served::Posted => {}
                    Served::Malformed(qp, why) => {
                        bad += 1;
                        first_bad.get_or_insert(format!("{qp:?}: {why} (the QP goes to ERR)"));
                    }
                    Served::Dropped(why) => {
                        bad += 1;
                        first_bad.get_or_insert(format!("dropped: {why}"));
                    }
                }
            }
            Taken::Broken(why) => {
                eprintln!(
                    "verbsim fabric: process {pid}: its submission ring is broken ({why}); its QPs that posted through it go to ERR"
                );
                let qps: Vec<QpHandle> = family.fast_qps.iter().copied().collect();
                for qp in qps {
                    if family.objects.contains_key(&Owned::Qp(qp)) {
                        sim.world_mut().malformed_wqe(qp);
                    }
                }
                break;
            }
        }
    }
    if let Some(first) = first_bad {
        eprintln!("verbsim fabric: process {pid}: {bad} malformed work-request records; the first: {first}");
    }
}

/// Refuses a connection's garbage: logged, counted, the connection closed.
fn refuse(c: &mut Client, stats: &mut FabricStats, what: &str) {
    stats.refused += 1;
    eprintln!(
        "verbsim fabric: process {}: refused {what}; closing its session",
        c.pid
    );
    c.closed = true;
}

/// Runs the fabric until it is told to stop (`exit_when_idle`) or fails
/// to listen. The world's configuration comes from the environment, as
/// for the library (`VERBSIM_SEED`, `VERBSIM_DEVICES`, `VERBSIM_FAULTS`).
///
/// One thread serves every process: sockets are never read or written
/// with a wait, each connection keeps its own buffers, a frame must arrive
/// within `FRAME_DEADLINE` (2 s), and each turn serves at most one call per
/// process, so no process can hold up another's verbs.
pub fn serve(opts: &FabricOptions) -> io::Result<FabricStats> {
    let listener = bind(&opts.socket)?;
    listener.set_nonblocking(true)?;
    let mut config = crate::config::ShimConfig::from_env();
    config.sim.trace_enabled |= opts.trace.is_some();
    let mut sim = SimVerbs::new(config.sim.clone());
    for &(action, ppm) in &config.faults {
        let _ = sim.sim_control(SimCommand::Fault {
            scope: FaultScope::All,
            action,
            when: FaultWhen::RatePpm(ppm),
        });
    }
    // SAFETY: PR_SET_TIMERSLACK takes an integer: wake within 1 µs of a
    // deadline, as the NIC model's events are microseconds apart.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000, 0, 0, 0) };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    eprintln!(
        "verbsim fabric: listening on {} (seed {:#x}, pace {:?})",
        opts.socket.display(),
        config.sim.seed,
        opts.pace
    );
    let start = Instant::now();
    let mut reg = Registry::default();
    let mut joined = false;
    let mut idle_since = Instant::now();
    let mut stats = FabricStats::default();
    let wall_now = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    loop {
        // Sleep until a call comes or the next event is due.
        let wall = wall_now();
        let timeout_ns = match (opts.pace, sim.world().next_event_ns()) {
            (Pace::Wall, Some(t)) => t.saturating_sub(wall).min(10_000_000),
            _ => 10_000_000,
        };
        let mut fds = vec![libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ids: Vec<u64> = reg.clients.keys().copied().collect();
        let mut posted_soon = false;
        for id in &ids {
            let c = &reg.clients[id];
            // A client with a reply still queued is not read further
            // (it reads its replies before it sends again).
            let events = if c.outbuf.is_empty() {
                libc::POLLIN
            } else {
                libc::POLLOUT
            };
            fds.push(libc::pollfd {
                fd: c.stream.as_raw_fd(),
                events,
                revents: 0,
            });
        }
        // The doorbells, after the sockets (a ring with records already
        // waiting means no sleep at all).
        for id in &ids {
            let c = &reg.clients[id];
            if let Some(r) = &c.posts {
                posted_soon |= r.pending();
                fds.push(libc::pollfd {
                    fd: r.doorbell.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        let timeout_ns = if posted_soon || timeout_ns < NEAR_NS {
            0
        } else {
            timeout_ns
        };
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // What the world wrote lands before the fabric sleeps.
        super::memory::flush_all();
        // SAFETY: `fds` is a live array of `fds.len()` pollfds; `ts` lives.
        let n = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                core::ptr::null(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // Awake: the processes may have changed their memory meanwhile.
        super::memory::new_epoch();
        if fds[0].revents & libc::POLLIN != 0 {
            while let Ok((stream, _)) = listener.accept() {
                let Some(cred) = peer_cred(&stream) else {
                    stats.refused += 1;
                    eprintln!("verbsim fabric: refused a connection without peer credentials");
                    continue;
                };
                if cred.uid != me {
                    stats.refused += 1;
                    eprintln!(
                        "verbsim fabric: refused process {} of uid {} (this fabric serves uid {me} only)",
                        cred.pid, cred.uid
                    );
                    continue;
                }
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                reg.next_conn += 1;
                reg.clients.insert(
                    reg.next_conn,
                    Client {
                        stream,
                        pid: cred.pid,
                        stage: Stage::Greeting,
                        inbuf: Vec::new(),
                        frame_since: None,
                        outbuf: Vec::new(),
                        out_since: None,
                        gone: Arc::new(AtomicBool::new(false)),
                        closed: false,
                        posts: None,
                    },
                );
                stats.sessions += 1;
                joined = true;
            }
        }
        // Read every ready socket first, and close the connections that
        // ended before the world moves on: a process that died is torn
        // down (its QPs destroyed) before anything more of it is sent.
        for (k, id) in ids.iter().enumerate() {
            let re = fds[k + 1].revents;
            if re == 0 {
                continue;
            }
            let Some(c) = reg.clients.get_mut(id) else {
                continue;
            };
            if re & libc::POLLOUT != 0 {
                c.flush();
            }
            if re & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && c.outbuf.is_empty() {
                c.fill();
            }
        }
        let now = Instant::now();
        let ended: Vec<u64> = reg
            .clients
            .iter_mut()
            .filter_map(|(id, c)| {
                if c.frame_since.is_some_and(|t| now - t > FRAME_DEADLINE)
                    && !matches!(c.frame_ready(), Ok(Some(_)))
                {
                    refuse(c, &mut stats, "a frame that did not arrive in time");
                }
                if c.out_since.is_some_and(|t| now - t > FRAME_DEADLINE) {
                    refuse(c, &mut stats, "to wait longer for it to read its reply");
                }
                // A hung-up process's last frames are not served: what it
                // asked for dies with it (garbage among them is still
                // refused and logged).
                if c.closed && !c.inbuf.is_empty() {
                    if let Some(why) = c.garbage() {
                        refuse(c, &mut stats, &why);
                    }
                    c.inbuf.clear();
                }
                (c.closed || c.gone.load(Ordering::Relaxed)).then_some(*id)
            })
            .collect();
        for id in ended {
            reg.close(id, &mut sim, &mut stats);
            idle_since = Instant::now();
        }
        // What the processes posted, in connection order, before time moves.
        for id in &ids {
            let Some(c) = reg.clients.get_mut(id) else {
                continue;
            };
            if c.closed || c.posts.is_none() {
                continue;
            }
            let Stage::Member(f) = c.stage else {
                continue;
            };
            let Some(family) = reg.families.get_mut(&f) else {
                continue;
            };
            drain_posts(c, *id, family, &mut sim);
        }
        advance(&mut sim, opts.pace, wall_now());
        // One call per process per turn, in connection order.
        for id in &ids {
            let Some(c) = reg.clients.get_mut(id) else {
                continue;
            };
            if !c.outbuf.is_empty() || c.closed {
                continue;
            }
            match c.frame_ready() {
                Ok(None) => continue,
                Ok(Some(len)) => {
                    advance(&mut sim, opts.pace, wall_now());
                    reg.serve_frame(*id, len, &mut sim, &mut stats);
                }
                Err(why) => refuse(c, &mut stats, &why),
            }
            // A copy from a process that died fails; it is torn down at
            // once, before the world moves again.
            let ended: Vec<u64> = reg
                .clients
                .iter()
                .filter(|(_, c)| c.closed || c.gone.load(Ordering::Relaxed))
                .map(|(id, _)| *id)
                .collect();
            for id in ended {
                reg.close(id, &mut sim, &mut stats);
                idle_since = Instant::now();
            }
        }
        if opts.exit_when_idle
            && joined
            && reg.clients.is_empty()
            && idle_since.elapsed() > opts.linger
        {
            break;
        }
    }
    if let Some(path) = &opts.trace {
        if let Err(e) = std::fs::write(path, sim.trace().to_string()) {
            eprintln!(
                "verbsim fabric: cannot write the trace to {}: {e}",
                path.display()
            );
        }
    }
    let _ = std::fs::remove_file(&opts.socket);
    Ok(stats)
}

/// A timer closer than this (ns) is waited for without sleeping: the
/// world's events after a post are about a microsecond apart, and a sleep
/// that short costs a scheduler wake-up of tens of microseconds. The loop
/// polls its sockets without waiting until the event is due, and sleeps
/// otherwise (it never spins while idle: a spin that gave the CPU away
/// with `sched_yield` lost it for whole time slices to programs spinning
/// on their memory, as `ib_write_lat` does; 291 µs against 44 µs
/// measured).
const NEAR_NS: u64 = 20_000;

/// Moves virtual time to `wall` (pace `Wall`) or runs what is runnable
/// (pace `Virtual`), and caps verbs at that time.
fn advance(sim: &mut SimVerbs, pace: Pace, wall: u64) {
    let w = sim.world_mut();
    match pace {
        Pace::Wall => {
            w.set_time_limit(Some(wall.max(w.now_ns())));
            let now = w.now_ns();
            let _ = w.advance_ns(wall.saturating_sub(now));
        }
        Pace::Virtual => {
            w.set_time_limit(None);
            let _ = w.run_until_idle();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::client::Remote;
    use crate::fabric::rpc::Engine;
    use std::io::{Read, Write};

    fn start(name: &str) -> (PathBuf, std::thread::JoinHandle<io::Result<FabricStats>>) {
        let socket = std::env::temp_dir().join(format!(
            "verbsim-fabric-test-{name}-{}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&socket);
        let opts = FabricOptions {
            socket: socket.clone(),
            exit_when_idle: true,
            linger: Duration::from_millis(200),
            pace: Pace::Wall,
            trace: None,
        };
        let h = std::thread::spawn(move || serve(&opts));
        // UnixListener::bind binds and listens: the file means it listens.
        for _ in 0..400 {
            if socket.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (socket, h)
    }

    fn to_rts(e: &mut Engine, qp: &QpHandle, peer_qpn: u32, peer: &PortAttr) {
        let init = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            qp_access_flags: AccessFlags::REMOTE_WRITE,
            ..QpAttr::default()
        };
        e.modify_qp(
            qp,
            &init,
            QpAttrMask::STATE
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::PORT
                | QpAttrMask::ACCESS_FLAGS,
        )
        .unwrap();
        let rtr = QpAttr {
            qp_state: QpState::ReadyToReceive,
            ah_attr: AhAttr {
                dlid: peer.lid,
                port_num: 1,
                ..AhAttr::default()
            },
            path_mtu: Mtu::Mtu1024,
            dest_qp_num: peer_qpn,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ..QpAttr::default()
        };
        e.modify_qp(
            qp,
            &rtr,
            QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER,
        )
        .unwrap();
        let rts = QpAttr {
            qp_state: QpState::ReadyToSend,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
            ..QpAttr::default()
        };
        e.modify_qp(
            qp,
            &rts,
            QpAttrMask::STATE
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )
        .unwrap();
    }

    /// A WRITE between two QPs over the wire: the fabric reads the source
    /// buffer and places into the target buffer of the client's own memory
    /// (this process: process_vm_readv/writev on our own pid), the
    /// completion comes back, a leaving client's objects are reclaimed, and
    /// a frame that is no call is refused without harm.
    #[test]
    fn a_write_crosses_the_wire_and_leftovers_are_reclaimed() {
        let (socket, server) = start("write");
        let mut e = Engine::Remote(Remote::connect(socket.clone(), None).unwrap());
        let mut src = vec![0u8; 4096];
        let mut dst = vec![0u8; 4096];
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i % 241) as u8;
        }
        let mut ends = Vec::new();
        for (dev, buf) in [(0usize, &mut src), (1, &mut dst)] {
            let ctx = e.open_device(dev, ProcessId(1)).unwrap();
            let pd = e.alloc_pd(&ctx).unwrap();
            let cq = e
                .create_cq(
                    &ctx,
                    &CqInit {
                        cqe: 16,
                        ..CqInit::default()
                    },
                )
                .unwrap();
            let addr = buf.as_mut_ptr() as usize;
            let mr = e
                .reg_mr_app(
                    pd,
                    addr as u64,
                    addr,
                    buf.len(),
                    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
                    || unreachable!("the fabric reaches our memory by pid"),
                )
                .unwrap();
            let mut attr = QpInitAttrEx::<SimVerbs> {
                send_cq: Some(&cq),
                recv_cq: Some(&cq),
                cap: QpCap {
                    max_send_wr: 4,
                    max_recv_wr: 4,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
                qp_type: QpType::Rc,
                comp_mask: QpInitAttrMask::PD,
                pd: Some(&pd),
                ..QpInitAttrEx::default()
            };
            let qp = e.create_qp_ex(&ctx, &mut attr).unwrap();
            let port = e.query_port(&ctx, 1).unwrap();
            let info = e.mr_info(&mr).unwrap();
            ends.push((cq, qp, e.qp_num(&qp).unwrap(), port, info));
        }
        let (a, b) = (ends[0].clone(), ends[1].clone());
        to_rts(&mut e, &a.1, b.2, &b.3);
        to_rts(&mut e, &b.1, a.2, &a.3);
        let sg = [Sge {
            addr: a.4.addr + 16,
            length: 3000,
            lkey: a.4.lkey,
        }];
        let wr = SendWr {
            wr_id: 42,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: b.4.addr + 100,
                rkey: b.4.rkey,
            },
            ..SendWr::default()
        };
        // SAFETY: both buffers outlive the request (polled below).
        unsafe { e.post_send(&a.1, &[wr]) }.unwrap();
        let mut wc = [Wc::default(); 2];
        let t0 = Instant::now();
        let n = loop {
            let n = e.poll_cq(&a.0, &mut wc).unwrap();
            if n > 0 || t0.elapsed() > Duration::from_secs(10) {
                break n;
            }
        };
        assert_eq!(n, 1, "one completion within 10 s");
        assert_eq!((wc[0].wr_id, wc[0].status), (42, WcStatus::Success));
        assert_eq!(
            &dst[100..3100],
            &src[16..3016],
            "the WRITE landed in our memory"
        );
        assert!(dst[..100].iter().all(|&x| x == 0));
        drop(e); // leaves 2 contexts, 2 PDs, 2 CQs, 2 MRs, 2 QPs behind

        let mut junk = UnixStream::connect(&socket).unwrap();
        junk.write_all(&[8, 0, 0, 0, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee])
            .unwrap();
        let mut rest = Vec::new();
        let _ = junk.read_to_end(&mut rest);
        assert!(
            rest.is_empty(),
            "garbage gets no answer, only a closed socket"
        );
        drop(junk);

        let stats = server.join().unwrap().unwrap();
        assert_eq!(stats.sessions, 2);
        assert_eq!(stats.refused, 1);
        assert_eq!(stats.reclaimed, 10, "{stats:?}");
        assert!(
            !socket.exists(),
            "the fabric removes its socket when it exits"
        );
    }
}
