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

/// What a session owns, destroyed when its process leaves.
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
    let mut stats = FabricStats::default();
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
                stats.sessions += 1;
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
            let keep = serve_one(&mut sim, clients.get_mut(id).expect("listed"), &mut stats);
            if !keep {
                let c = clients.remove(id).expect("listed");
                let pid = c.session.pid;
                let n = c.session.close(&mut sim);
                stats.reclaimed += n as u64;
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
    Ok(stats)
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
fn serve_one(sim: &mut SimVerbs, c: &mut Client, stats: &mut FabricStats) -> bool {
    let frame = match read_frame(&mut c.stream) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return false,
        Err(e) => {
            stats.refused += 1;
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
            stats.refused += 1;
            eprintln!(
                "verbsim fabric: process {}: refused {} bytes that are no call ({e}); closing its session",
                c.session.pid,
                frame.len()
            );
            return false;
        }
    };
    stats.calls += 1;
    let reply = dispatch(sim, &mut c.session, call);
    write_frame(&mut c.stream, &reply).is_ok()
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
