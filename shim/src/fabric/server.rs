//! The fabric process (`verbsim fabric`): the one world of every process
//! that joins, served a call at a time over a Unix socket.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::rpc::{dispatch, Call};
use super::{read_frame, write_frame};

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

/// What a session owns, destroyed when its process leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Owned {
    Qp(QpHandle),
    CmId(CmIdHandle),
    Srq(SrqHandle),
    Ah(AhHandle),
    Mw(MwHandle),
    Mr(MrHandle),
    Cq(CqHandle),
    Channel(CompChannelHandle),
    Pd(PdHandle),
    Xrcd(XrcdHandle),
    Context(ContextHandle),
    CmChannel(CmChannelHandle),
}

/// One connected process.
#[derive(Debug)]
pub(crate) struct Session {
    pid: libc::pid_t,
    owned: Vec<Owned>,
}

impl Session {
    /// The process's pid (from the socket's peer credentials).
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }
    /// Records an object the process created.
    pub(crate) fn own(&mut self, o: Owned) {
        self.owned.push(o);
    }
    /// Forgets an object the process destroyed.
    pub(crate) fn disown(&mut self, o: Owned) {
        if let Some(i) = self.owned.iter().rposition(|x| *x == o) {
            self.owned.swap_remove(i);
        }
    }
    /// Destroys what the process left behind, as closing a uverbs file
    /// does: QPs first (so peers' requests to them go unanswered), then
    /// what they used, contexts last.
    fn close(mut self, sim: &mut SimVerbs) -> usize {
        self.owned.sort();
        let n = self.owned.len();
        for o in self.owned {
            let _ = match o {
                Owned::Qp(h) => sim.destroy_qp(&h),
                Owned::Srq(h) => sim.destroy_srq(&h),
                Owned::Ah(h) => sim.destroy_ah(&h),
                Owned::Mw(h) => sim.dealloc_mw(&h),
                Owned::Mr(h) => sim.dereg_mr(&h),
                Owned::Cq(h) => sim.destroy_cq(&h),
                Owned::Channel(h) => sim.destroy_comp_channel(&h),
                Owned::Pd(h) => sim.dealloc_pd(&h),
                Owned::Xrcd(h) => sim.close_xrcd(&h),
                Owned::Context(h) => sim.close_device(&h),
                Owned::CmId(h) => sim.rdma_destroy_id(&h),
                Owned::CmChannel(h) => sim.rdma_destroy_event_channel(&h),
            };
        }
        n
    }
}

struct Client {
    stream: UnixStream,
    session: Session,
}

/// Binds the socket: a live fabric there is `AddrInUse`; a stale socket
/// file (its fabric died) is replaced.
fn bind(path: &Path) -> io::Result<UnixListener> {
    match UnixListener::bind(path) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            if UnixStream::connect(path).is_ok() {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        Err(e) => Err(e),
    }
}

fn peer_pid(s: &UnixStream) -> Option<libc::pid_t> {
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
    (r == 0 && cred.pid > 0).then_some(cred.pid)
}

/// Runs the fabric until it is told to stop (`exit_when_idle`) or fails
/// to listen. The world's configuration comes from the environment, as
/// for the library (`VERBSIM_SEED`, `VERBSIM_DEVICES`, `VERBSIM_FAULTS`).
pub fn serve(opts: &FabricOptions) -> io::Result<()> {
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
    eprintln!(
        "verbsim fabric: listening on {} (seed {:#x}, pace {:?})",
        opts.socket.display(),
        config.sim.seed,
        opts.pace
    );
    let start = Instant::now();
    let mut clients: BTreeMap<u64, Client> = BTreeMap::new();
    let mut next_id = 0u64;
    let mut joined = false;
    let mut idle_since = Instant::now();
    loop {
        let wall = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        advance(&mut sim, opts.pace, wall);
        // Sleep until a call comes or the next event is due.
        let timeout_ns = match (opts.pace, sim.world().next_event_ns()) {
            (Pace::Wall, Some(t)) => t.saturating_sub(wall).min(10_000_000),
            _ => 10_000_000,
        };
        let mut fds = vec![libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ids: Vec<u64> = clients.keys().copied().collect();
        for id in &ids {
            fds.push(libc::pollfd {
                fd: clients[id].stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
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
        if fds[0].revents & libc::POLLIN != 0 {
            while let Ok((stream, _)) = listener.accept() {
                let Some(pid) = peer_pid(&stream) else {
                    eprintln!("verbsim fabric: refused a connection without peer credentials");
                    continue;
                };
                // A call is one frame the client writes at once: a client
                // that stalls mid-frame is dropped, never waited for.
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
                clients.insert(
                    next_id,
                    Client {
                        stream,
                        session: Session {
                            pid,
                            owned: Vec::new(),
                        },
                    },
                );
                next_id += 1;
                joined = true;
            }
        }
        for (k, id) in ids.iter().enumerate() {
            let re = fds[k + 1].revents;
            if re == 0 {
                continue;
            }
            let wall = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            advance(&mut sim, opts.pace, wall);
            let keep = serve_one(&mut sim, clients.get_mut(id).expect("listed"));
            if !keep {
                let c = clients.remove(id).expect("listed");
                let pid = c.session.pid;
                let n = c.session.close(&mut sim);
                if n > 0 {
                    eprintln!(
                        "verbsim fabric: process {pid} left; destroyed {n} objects it had not"
                    );
                }
                idle_since = Instant::now();
            }
        }
        if opts.exit_when_idle && joined && clients.is_empty() && idle_since.elapsed() > opts.linger
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
    Ok(())
}

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

/// Serves one call from `c`; false when the connection is done (closed,
/// broken, or garbage: refused and logged).
fn serve_one(sim: &mut SimVerbs, c: &mut Client) -> bool {
    let frame = match read_frame(&mut c.stream) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return false,
        Err(e) => {
            eprintln!(
                "verbsim fabric: process {}: refused a frame ({e}); closing its session",
                c.session.pid
            );
            return false;
        }
    };
    let call: Call = match postcard::from_bytes(&frame) {
        Ok(call) => call,
        Err(e) => {
            eprintln!(
                "verbsim fabric: process {}: refused {} bytes that are no call ({e}); closing its session",
                c.session.pid,
                frame.len()
            );
            return false;
        }
    };
    let reply = dispatch(sim, &mut c.session, call);
    write_frame(&mut c.stream, &reply).is_ok()
}
