//! The shared fabric tried as a hostile neighbour and a faulty program
//! would try it, with several processes on one fabric: the fabric
//! (`verbsim-fabric`, built beside this test binary), this test process,
//! and helper processes that are this test binary run again in a role
//! ([`helper_process`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::client::Remote;
use super::engine::Engine;

mod faults;
mod isolation;
mod shmq;

/// The environment variable naming a helper process's role.
const ROLE: &str = "VERBSIM_HOSTILE_ROLE";
/// The environment variable naming the fabric's socket for a helper.
const SOCKET: &str = "VERBSIM_HOSTILE_SOCKET";

/// The worst round trip a busy pair may see while a client trickles a
/// frame (one byte every 1.5 s) beside it. Far above what a loaded 2-core
/// machine gives a round trip (milliseconds), far below one trickle
/// interval, which is what a fabric that waits for the trickler costs
/// (it cost 11.8 s before the fabric read without waiting).
const TRICKLE_BOUND: Duration = Duration::from_secs(1);

/// One fabric process in a directory of its own, stopped when dropped.
struct Fabric {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Fabric {
    fn start(tag: &str) -> Self {
        use std::os::unix::fs::DirBuilderExt;
        let dir =
            std::env::temp_dir().join(format!("verbsim-hostile-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        let socket = dir.join("fabric.sock");
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .unwrap()
            .join("verbsim-fabric");
        assert!(
            bin.is_file(),
            "{} is missing: `cargo test -p verbsim-shim` builds it",
            bin.display()
        );
        let log = std::fs::File::create(dir.join("fabric.log")).unwrap();
        let child = Command::new(bin)
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !socket.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the fabric never listened"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Self { child, dir, socket }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("fabric.log")).unwrap_or_default()
    }

    /// A client of this fabric. The socket file appears at `bind`, a
    /// moment before the fabric listens: a refused connection is tried
    /// again for a while, as the library does after starting a fabric.
    fn engine(&self) -> Engine {
        let t0 = Instant::now();
        loop {
            match Remote::connect(self.socket.clone(), None) {
                Ok(r) => return Engine::Remote(r),
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && t0.elapsed() < Duration::from_secs(20) =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("cannot connect to the fabric: {e}"),
            }
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A helper: this test binary again, running [`helper_process`] as `role`.
fn helper(role: &str, socket: &Path) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fabric::hostile::helper_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(SOCKET, socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

/// The next line of a helper that starts with `tag`, without it.
fn expect(out: &mut impl BufRead, tag: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the helper ended before saying {tag}"
        );
        // The harness may have begun the line ("test ... ").
        if let Some(at) = line.find(tag) {
            return line[at + tag.len()..].trim().to_owned();
        }
    }
}

/// Says a line to the process that started this helper (straight to the
/// stdout pipe: the test harness captures `println!`).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A context, PD, CQ, MR over `buf` and RC QP on device `dev`.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct End {
    ctx: ContextHandle,
    pd: PdHandle,
    cq: CqHandle,
    mr: MrHandle,
    qp: QpHandle,
    qpn: u32,
    lid: u16,
    addr: u64,
    lkey: u32,
    rkey: u32,
}

fn end(e: &mut Engine, dev: usize, buf: &mut [u8]) -> End {
    end_with(e, dev, buf, SendOpsFlags::empty(), false).0
}

/// [`end`] whose QP has the `ibv_wr_*` API with `ops` (when not empty),
/// and, with `srq`, receives from an SRQ of 16 requests made for it.
fn end_with(
    e: &mut Engine,
    dev: usize,
    buf: &mut [u8],
    ops: SendOpsFlags,
    srq: bool,
) -> (End, Option<SrqHandle>) {
    let ctx = e.open_device(dev, ProcessId(0)).unwrap();
    let pd = e.alloc_pd(&ctx).unwrap();
    let cq = e
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 64,
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
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            || unreachable!("the fabric reaches our memory by pid"),
        )
        .unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: 32,
            max_recv_wr: 32,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&pd),
        ..QpInitAttrEx::default()
    };
    if !ops.is_empty() {
        attr.comp_mask |= QpInitAttrMask::SEND_OPS_FLAGS;
        attr.send_ops_flags = ops;
    }
    let s = srq.then(|| {
        e.create_srq_ex(
            &ctx,
            &mut SrqInitAttrEx {
                attr: SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                },
                comp_mask: SrqInitAttrMask::PD,
                pd: Some(&pd),
                ..SrqInitAttrEx::default()
            },
        )
        .unwrap()
    });
    attr.srq = s.as_ref();
    let qp = e.create_qp_ex(&ctx, &mut attr).unwrap();
    let lid = e.query_port(&ctx, 1).unwrap().lid;
    let info = e.mr_info(&mr).unwrap();
    let end = End {
        ctx,
        pd,
        cq,
        mr,
        qp,
        qpn: e.qp_num(&qp).unwrap(),
        lid,
        addr: info.addr,
        lkey: info.lkey,
        rkey: info.rkey,
    };
    (end, s)
}

/// INIT, RTR, RTS towards `(peer_qpn, peer_lid)`.
fn to_rts(e: &mut Engine, qp: &QpHandle, peer_qpn: u32, peer_lid: u16) {
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qp_access_flags: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        ..QpAttr::default()
    };
    e.modify_qp(
        qp,
        &init,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .unwrap();
    let rtr = QpAttr {
        qp_state: QpState::ReadyToReceive,
        ah_attr: AhAttr {
            dlid: peer_lid,
            port_num: 1,
            ..AhAttr::default()
        },
        path_mtu: Mtu::Mtu1024,
        dest_qp_num: peer_qpn,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
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
        timeout: 10,
        retry_cnt: 3,
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

/// The bytes of the victim's device memory, which nobody else may read.
const SECRET: &[u8; 16] = b"victim's secret!";

/// Not a test by itself: the body of a helper process ([`helper`]).
#[test]
#[ignore = "a helper process of the hostile fabric tests, run by them"]
fn helper_process() {
    let (Ok(role), Some(socket)) = (std::env::var(ROLE), std::env::var_os(SOCKET)) else {
        return;
    };
    let socket = PathBuf::from(socket);
    match role.as_str() {
        "victim" => victim(&socket),
        "sender" => sender(&socket),
        "cm_victim" => cm_victim(&socket),
        other => panic!("unknown role {other}"),
    }
}

/// Makes objects, says their handles, and once told checks that they are
/// intact and that a forked child of its own reaches them.
fn victim(socket: &Path) {
    let mut e = Engine::Remote(Remote::connect(socket.to_owned(), None).unwrap());
    let mut buf = vec![0x5au8; 4096];
    let me = end(&mut e, 0, &mut buf);
    let dm = e
        .alloc_dm(
            &me.ctx,
            &AllocDmAttr {
                length: 64,
                ..AllocDmAttr::default()
            },
        )
        .ok();
    if let Some(dm) = &dm {
        e.memcpy_to_dm(dm, 0, SECRET).unwrap();
    }
    let info = e.mr_info(&me.mr).unwrap();
    say(&format!(
        "HANDLES {}",
        hex(&postcard::to_allocvec(&(me, dm)).unwrap())
    ));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(e.mr_info(&me.mr).unwrap(), info, "the MR changed");
    assert_eq!(e.qp_num(&me.qp).unwrap(), me.qpn, "the QP changed");
    if let Some(dm) = &dm {
        let mut back = [0u8; 16];
        e.memcpy_from_dm(dm, 0, &mut back).unwrap();
        assert_eq!(&back, SECRET, "the DM changed");
    }
    assert!(buf.iter().all(|&b| b == 0x5a), "the buffer changed");
    // A forked child uses its parent's objects (docs/drop-in.md): it
    // joins the parent's namespace with the token it inherited.
    // SAFETY: fork; the child only makes fabric calls and exits with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok =
            e.qp_num(&me.qp).ok() == Some(me.qpn) && e.mr_info(&me.mr).is_ok_and(|i| i == info);
        // SAFETY: _exit ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` lives.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    say(&format!("CHILD {}", libc::WEXITSTATUS(status)));
    say("INTACT ok");
}

/// What a process's rdma_cm made for its id on device 0: the context and
/// default PD, an MR registered in that PD, and the id's address.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct CmEnd {
    id: CmIdHandle,
    ctx: ContextHandle,
    pd: PdHandle,
    mr: MrHandle,
    addr: u64,
    lkey: u32,
}

/// An rdma_cm id bound to device 0's address, its context and default PD
/// (`id->verbs`, `id->pd`), and an MR over `buf` in that PD.
fn cm_end(e: &mut Engine, buf: &mut [u8]) -> CmEnd {
    let ch = e.rdma_create_event_channel().unwrap();
    let id = e.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    let local = std::net::SocketAddr::from((device_ipv4(0), 0));
    e.rdma_bind_addr(&id, local).unwrap();
    let info = e.rdma_id_info(&id).unwrap();
    let (ctx, pd) = (info.verbs.unwrap(), info.pd.unwrap());
    let addr = buf.as_mut_ptr() as usize;
    let mr = e
        .reg_mr_app(
            pd,
            addr as u64,
            addr,
            buf.len(),
            AccessFlags::LOCAL_WRITE,
            || unreachable!("the fabric reaches our memory by pid"),
        )
        .unwrap();
    let lkey = e.mr_info(&mr).unwrap().lkey;
    CmEnd {
        id,
        ctx,
        pd,
        mr,
        addr: addr as u64,
        lkey,
    }
}

/// Binds an rdma_cm id, registers an MR of 0xc3 bytes in the CM's default
/// PD, says their handles, and once told checks that they are intact.
fn cm_victim(socket: &Path) {
    let mut e = Engine::Remote(Remote::connect(socket.to_owned(), None).unwrap());
    let mut buf = vec![0xc3u8; 4096];
    let me = cm_end(&mut e, &mut buf);
    let info = e.mr_info(&me.mr).unwrap();
    say(&format!("CM {}", hex(&postcard::to_allocvec(&me).unwrap())));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(e.mr_info(&me.mr).unwrap(), info, "the MR changed");
    let i = e.rdma_id_info(&me.id).unwrap();
    assert_eq!((i.verbs, i.pd), (Some(me.ctx), Some(me.pd)));
    assert!(e.query_device(&me.ctx).is_ok(), "the CM context went");
    assert!(buf.iter().all(|&b| b == 0xc3), "the buffer changed");
    say("INTACT ok");
}

/// Connects an RC QP to the receiver (its QPN and LID on stdin) and sends
/// 4 KiB messages of 0x5a, eight in flight, until it is killed.
fn sender(socket: &Path) {
    let mut e = Engine::Remote(Remote::connect(socket.to_owned(), None).unwrap());
    let mut buf = vec![0x5au8; 4096];
    let me = end(&mut e, 0, &mut buf);
    say(&format!("PEER {} {}", me.qpn, me.lid));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut w = line.split_whitespace();
    let qpn: u32 = w.next().unwrap().parse().unwrap();
    let lid: u16 = w.next().unwrap().parse().unwrap();
    to_rts(&mut e, &me.qp, qpn, lid);
    say("READY");
    let sg = [Sge {
        addr: me.addr,
        length: 4096,
        lkey: me.lkey,
    }];
    let mut outstanding = 0;
    let mut wc = [Wc::default(); 8];
    loop {
        while outstanding < 8 {
            let wr = SendWr {
                wr_id: 1,
                sg_list: &sg,
                opcode: WrOpcode::Send,
                send_flags: SendFlags::SIGNALED,
                ..SendWr::default()
            };
            // SAFETY: `buf` outlives every request (this loop never ends).
            if unsafe { e.post_send(&me.qp, &[wr]) }.is_err() {
                break;
            }
            outstanding += 1;
        }
        let n = e.poll_cq(&me.cq, &mut wc).unwrap_or(0);
        if wc[..n].iter().any(|w| w.status != WcStatus::Success) {
            // The peer went away: stay quiet until killed.
            std::thread::sleep(Duration::from_secs(60));
        }
        outstanding -= n;
    }
}
