//! The fabric process (`verbsim fabric`): the one world of every process
//! that joins, served a call at a time over a Unix socket.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::dispatch::dispatch;
use super::family::random_token;
pub(crate) use super::family::{peer_cred, Family, Owned, Session};
pub use super::pace::Pace;
use super::pace::{advance, NEAR_NS};
use super::poller::{self, Poller, Token};
use super::rpc::Call;
use super::{Hello, MAX_FRAME, PROTOCOL};

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
    /// What the socket is watched for (0: not yet in the poll set).
    watching: u32,
    /// The doorbell in the poll set, if any.
    bell: Option<std::os::fd::RawFd>,
    /// The doorbell rang since it was last read.
    rung: bool,
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

/// The fabric's state besides the world: families and their connections.
struct Registry {
    /// What the loop waits on: the listener, sockets and doorbells.
    poll: Poller,
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
        // Out of the poll set before the descriptors close: the doorbell's
        // other end lives on in the process, and would keep it there.
        self.poll.remove(c.stream.as_raw_fd());
        if let Some(b) = c.bell {
            self.poll.remove(b);
        }
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
                    if let Some(b) = c.bell.take() {
                        self.poll.remove(b);
                    }
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
    use super::fast::Served;
    use super::serve_posts::serve_record;
    use super::sqring::Taken;
    let Client {
        posts,
        gone,
        pid,
        rung,
        ..
    } = c;
    let Some(ring) = posts.as_mut() else {
        return;
    };
    if std::mem::take(rung) {
        ring.clear_doorbell();
    }
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
                    Served::MalformedSrq(srq, why) => {
                        bad += 1;
                        first_bad.get_or_insert(format!(
                            "{srq:?}: {why} (the SRQ's context hears IBV_EVENT_SRQ_ERR)"
                        ));
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
    let mut reg = Registry {
        poll: Poller::new()?,
        clients: BTreeMap::new(),
        families: BTreeMap::new(),
        next_conn: 0,
        next_family: 0,
    };
    let mut joined = false;
    let mut idle_since = Instant::now();
    let mut stats = FabricStats::default();
    let wall_now = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    reg.poll
        .add(listener.as_raw_fd(), poller::READ, Token::Listener)?;
    loop {
        // Sleep until a call comes or the next event is due.
        let wall = wall_now();
        let timeout_ns = match (opts.pace, sim.world().next_event_ns()) {
            (Pace::Wall, Some(t)) => t.saturating_sub(wall).min(10_000_000),
            _ => 10_000_000,
        };
        let ids: Vec<u64> = reg.clients.keys().copied().collect();
        let mut posted_soon = false;
        for id in &ids {
            let Some(c) = reg.clients.get_mut(id) else {
                continue;
            };
            // A client with a reply still queued is not read further
            // (it reads its replies before it sends again).
            let want = if c.outbuf.is_empty() {
                poller::READ
            } else {
                poller::WRITE
            };
            if c.watching != want {
                let fd = c.stream.as_raw_fd();
                let r = if c.watching == 0 {
                    reg.poll.add(fd, want, Token::Socket(*id))
                } else {
                    reg.poll.modify(fd, want, Token::Socket(*id))
                };
                match r {
                    Ok(()) => c.watching = want,
                    Err(e) => refuse(c, &mut stats, &format!("to be watched ({e})")),
                }
            }
            // The doorbells too (a ring with records already waiting means
            // no sleep at all).
            if let Some(r) = &c.posts {
                posted_soon |= r.pending();
                let fd = r.doorbell.as_raw_fd();
                if c.bell != Some(fd) {
                    if let Some(old) = c.bell.take() {
                        reg.poll.remove(old);
                    }
                    if reg.poll.add(fd, poller::READ, Token::Doorbell(*id)).is_ok() {
                        c.bell = Some(fd);
                    }
                }
            }
        }
        let timeout_ns = if posted_soon || timeout_ns < NEAR_NS {
            0
        } else {
            timeout_ns
        };
        // What the world wrote lands before the fabric sleeps.
        super::memory::flush_all();
        let ready = reg.poll.wait(timeout_ns)?;
        // Awake: the processes may have changed their memory meanwhile.
        super::memory::new_epoch();
        let mut sockets: BTreeMap<u64, u32> = BTreeMap::new();
        let mut rung = BTreeSet::new();
        let mut listening = false;
        for (token, events) in ready {
            match token {
                Token::Listener => listening = true,
                Token::Socket(id) => {
                    sockets.insert(id, events);
                }
                Token::Doorbell(id) => {
                    rung.insert(id);
                }
            }
        }
        if listening {
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
                        watching: 0,
                        bell: None,
                        rung: false,
                    },
                );
                stats.sessions += 1;
                joined = true;
            }
        }
        // Read every ready socket first, and close the connections that
        // ended before the world moves on: a process that died is torn
        // down (its QPs destroyed) before anything more of it is sent.
        for (id, re) in sockets {
            let Some(c) = reg.clients.get_mut(&id) else {
                continue;
            };
            if re & poller::WRITE != 0 {
                c.flush();
            }
            if re & (poller::READ | poller::GONE) != 0 && c.outbuf.is_empty() {
                c.fill();
            }
        }
        for id in rung {
            if let Some(c) = reg.clients.get_mut(&id) {
                c.rung = true;
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

#[cfg(test)]
mod tests;
