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
use super::rpc::Engine;

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
    let qp = e.create_qp_ex(&ctx, &mut attr).unwrap();
    let lid = e.query_port(&ctx, 1).unwrap().lid;
    let info = e.mr_info(&mr).unwrap();
    End {
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
    }
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

/// Goal: a process reaches only its own objects (and its forked child its
/// parent's); a foreign or forged handle is EINVAL and reveals nothing;
/// garbage, huge lengths and truncated frames disturb nobody else.
/// Method: a victim process makes a context, PD, CQ, MR, QP and device
/// memory and tells us their handles; this process, a family of its own,
/// uses each handle in the verbs that read, change or destroy; then sends
/// garbage; then the victim checks that everything it has is intact and
/// that a child it forks still uses its objects.
#[test]
fn a_foreign_handle_is_refused_and_reveals_nothing() {
    let fabric = Fabric::start("handles");
    let (mut victim_proc, mut out) = helper("victim", &fabric.socket);
    let (v, dm): (End, Option<DmHandle>) =
        postcard::from_bytes(&unhex(&expect(&mut out, "HANDLES "))).unwrap();
    let mut e = fabric.engine();
    let einval = |r: Result<(), Error>, what: &str| {
        let err = r.expect_err(what);
        assert_eq!(err.errno(), libc::EINVAL, "{what}: {err}");
        assert!(
            !err.to_string().contains(&format!("{:#x}", v.addr)),
            "{what} revealed the victim's address: {err}"
        );
    };
    einval(e.mr_info(&v.mr).map(drop), "mr_info of a foreign MR");
    einval(e.qp_num(&v.qp).map(drop), "qp_num of a foreign QP");
    einval(
        e.query_qp(&v.qp, QpAttrMask::STATE).map(drop),
        "query_qp of a foreign QP",
    );
    einval(
        e.query_device(&v.ctx).map(drop),
        "query_device of a foreign context",
    );
    einval(
        e.alloc_pd(&v.ctx).map(drop),
        "alloc_pd on a foreign context",
    );
    let mut wc = [Wc::default(); 4];
    einval(
        e.poll_cq(&v.cq, &mut wc).map(drop),
        "poll_cq of a foreign CQ",
    );
    if let Some(dm) = &dm {
        let mut peek = [0u8; 16];
        einval(e.memcpy_from_dm(dm, 0, &mut peek), "reading foreign DM");
        assert_ne!(&peek, SECRET);
        einval(e.memcpy_to_dm(dm, 0, &[0; 16]), "writing foreign DM");
    }
    // A QP of ours put into the victim's PD and CQs (two numbers rewritten
    // on the wire): refused.
    let own_ctx = e.open_device(0, ProcessId(0)).unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&v.cq),
        recv_cq: Some(&v.cq),
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&v.pd),
        ..QpInitAttrEx::default()
    };
    einval(
        e.create_qp_ex(&own_ctx, &mut attr).map(drop),
        "a QP in a foreign PD",
    );
    let mut hole = [0u8; 64];
    let a = hole.as_mut_ptr() as usize;
    einval(
        e.reg_mr_app(
            v.pd,
            a as u64,
            a,
            64,
            AccessFlags::LOCAL_WRITE,
            || unreachable!(),
        )
        .map(drop),
        "an MR in a foreign PD",
    );
    let sg = [Sge {
        addr: v.addr,
        length: 64,
        lkey: v.lkey,
    }];
    let wr = SendWr {
        wr_id: 7,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        ..SendWr::default()
    };
    // SAFETY: the request is refused before anything is read.
    einval(
        unsafe { e.post_send(&v.qp, &[wr]) },
        "posting on a foreign QP",
    );
    einval(
        e.modify_qp(
            &v.qp,
            &QpAttr {
                qp_state: QpState::Error,
                ..QpAttr::default()
            },
            QpAttrMask::STATE,
        ),
        "modifying a foreign QP",
    );
    einval(e.dereg_mr(&v.mr), "deregistering a foreign MR");
    einval(e.destroy_qp(&v.qp), "destroying a foreign QP");
    einval(e.destroy_cq(&v.cq), "destroying a foreign CQ");
    einval(e.dealloc_pd(&v.pd), "freeing a foreign PD");
    einval(e.close_device(&v.ctx), "closing a foreign context");
    if let Some(dm) = &dm {
        einval(e.free_dm(dm), "freeing foreign DM");
    }
    // Forged handles: the neighbours of ours (what a salted (index,
    // generation) pair would let one guess) are refused the same way.
    let pd = e.alloc_pd(&own_ctx).unwrap();
    let forge = |index: u32, generation: u32| -> PdHandle {
        postcard::from_bytes(&postcard::to_allocvec(&(index, generation)).unwrap()).unwrap()
    };
    for forged in [
        forge(pd.index() + 1, pd.generation()),
        forge(v.pd.index(), v.pd.generation() ^ 1),
        forge(u32::MAX, 0),
    ] {
        einval(e.dealloc_pd(&forged), "a forged PD");
    }
    // Garbage: a huge length, a frame cut short, a frame that is no call,
    // a connection closed mid-greeting.
    for junk in [
        &b"\xff\xff\xff\x7fxxxxxxxx"[..],
        &b"\x40\x00\x00\x00\x01\x02"[..],
        &b"\x08\x00\x00\x00\xee\xee\xee\xee\xee\xee\xee\xee"[..],
        &b"\x01"[..],
    ] {
        let mut s = UnixStream::connect(&fabric.socket).unwrap();
        s.write_all(junk).unwrap();
        drop(s);
    }
    // Our own objects still work, and so do the victim's.
    assert!(e.query_device(&own_ctx).is_ok());
    let stdin = victim_proc.stdin.as_mut().unwrap();
    stdin.write_all(b"check\n").unwrap();
    assert_eq!(
        expect(&mut out, "CHILD "),
        "0",
        "the forked child reached its parent's objects"
    );
    assert_eq!(expect(&mut out, "INTACT "), "ok");
    assert!(victim_proc.wait().unwrap().success());
    let log = fabric.log();
    assert!(log.contains("refused a frame of 2147483647 bytes"), "{log}");
    assert!(
        log.contains("refused a first frame that is no greeting"),
        "{log}"
    );
}

/// Goal: rdma_cm's device context and default PD are each process's own,
/// as librdmacm opens the device in every process: another process on the
/// same device cannot reach them by handle, nor use an MR registered in
/// them by lkey. Method: a victim binds an rdma_cm id to device 0 and
/// registers an MR of 0xc3 bytes in the id's default PD; this process (a
/// family of its own) binds an id to the same device, checks that its
/// context and PD are others, uses the victim's handles, and SENDs from a
/// QP in its own CM PD naming the victim's lkey and address to a QP of its
/// own: the send fails with a protection error and no byte arrives.
#[test]
fn another_process_cannot_reach_rdma_cm_default_objects() {
    let fabric = Fabric::start("cm");
    let (mut victim_proc, mut out) = helper("cm_victim", &fabric.socket);
    let v: CmEnd = postcard::from_bytes(&unhex(&expect(&mut out, "CM "))).unwrap();
    let mut e = fabric.engine();
    let einval = |r: Result<(), Error>, what: &str| {
        let err = r.expect_err(what);
        assert_eq!(err.errno(), libc::EINVAL, "{what}: {err}");
    };
    let mut sbuf = vec![0u8; 4096];
    let me = cm_end(&mut e, &mut sbuf);
    assert_ne!(me.ctx, v.ctx, "the two processes share rdma_cm's context");
    assert_ne!(me.pd, v.pd, "the two processes share rdma_cm's default PD");
    einval(
        e.rdma_id_info(&v.id).map(drop),
        "rdma_id_info of a foreign id",
    );
    einval(
        e.query_device(&v.ctx).map(drop),
        "query_device of a foreign CM context",
    );
    einval(
        e.alloc_pd(&v.ctx).map(drop),
        "alloc_pd on a foreign CM context",
    );
    einval(e.mr_info(&v.mr).map(drop), "mr_info of a foreign MR");
    let mut hole = [0u8; 64];
    let a = hole.as_mut_ptr() as usize;
    einval(
        e.reg_mr_app(
            v.pd,
            a as u64,
            a,
            64,
            AccessFlags::LOCAL_WRITE,
            || unreachable!(),
        )
        .map(drop),
        "an MR in a foreign CM PD",
    );
    einval(e.dereg_mr(&v.mr), "deregistering a foreign MR");
    einval(e.dealloc_pd(&v.pd), "freeing a foreign CM PD");
    einval(e.close_device(&v.ctx), "closing a foreign CM context");
    // A QP in our own CM PD, connected to a QP of ours, sends naming the
    // victim's lkey and address.
    let cq = e
        .create_cq(
            &me.ctx,
            &CqInit {
                cqe: 16,
                ..CqInit::default()
            },
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
        pd: Some(&me.pd),
        ..QpInitAttrEx::default()
    };
    let qp = e.create_qp_ex(&me.ctx, &mut attr).unwrap();
    let qpn = e.qp_num(&qp).unwrap();
    let lid = e.query_port(&me.ctx, 1).unwrap().lid;
    let mut rbuf = vec![0u8; 4096];
    let r = end(&mut e, 0, &mut rbuf);
    to_rts(&mut e, &qp, r.qpn, r.lid);
    to_rts(&mut e, &r.qp, qpn, lid);
    let rsg = [Sge {
        addr: r.addr,
        length: 4096,
        lkey: r.lkey,
    }];
    // SAFETY: `rbuf` outlives the receive (checked below, then dropped).
    unsafe {
        e.post_recv(
            &r.qp,
            &[RecvWr {
                wr_id: 2,
                sg_list: &rsg,
            }],
        )
    }
    .unwrap();
    let sg = [Sge {
        addr: v.addr,
        length: 64,
        lkey: v.lkey,
    }];
    let wr = SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..SendWr::default()
    };
    // SAFETY: the request names memory of another process, which the
    // fabric never reads for us: the lkey is not in our QP's PD.
    unsafe { e.post_send(&qp, &[wr]) }.unwrap();
    let mut wc = [Wc::default(); 4];
    let t0 = Instant::now();
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no completion");
        let n = e.poll_cq(&cq, &mut wc).unwrap();
        got.extend(wc[..n].iter().filter(|w| w.wr_id == 1).copied());
    }
    assert_eq!(
        got[0].status,
        WcStatus::LocProtErr,
        "a SEND naming another process's lkey"
    );
    let n = e.poll_cq(&r.cq, &mut wc).unwrap();
    assert!(
        wc[..n].iter().all(|w| w.status != WcStatus::Success),
        "the receiver got a message"
    );
    assert!(
        rbuf.iter().all(|&b| b == 0),
        "the victim's bytes arrived in our buffer"
    );
    let stdin = victim_proc.stdin.as_mut().unwrap();
    stdin.write_all(b"check\n").unwrap();
    assert_eq!(expect(&mut out, "INTACT "), "ok");
    assert!(victim_proc.wait().unwrap().success());
}

/// Goal: `ibv_reg_mr` fails with EFAULT over memory that is not mapped,
/// or not writable when write access is asked, in process and over the
/// fabric, and nothing is registered. Method: map pages, unmap one, make
/// one read-only, and register ranges over each both ways.
#[test]
fn reg_mr_over_a_hole_is_efault() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: an anonymous private mapping, no address hint.
    let base = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            4 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let a = base as usize;
    // SAFETY: pages of our own mapping, just made.
    unsafe {
        assert_eq!(libc::munmap((a + page) as *mut _, page), 0);
        assert_eq!(
            libc::mprotect((a + 2 * page) as *mut _, page, libc::PROT_READ),
            0
        );
    }
    let fabric = Fabric::start("regmr");
    let local = Engine::Local(Box::new(SimVerbs::new(SimConfig::default())));
    for mut e in [local, fabric.engine()] {
        let where_ = if e.is_remote() {
            "fabric"
        } else {
            "in process"
        };
        let ctx = e.open_device(0, ProcessId(0)).unwrap();
        let pd = e.alloc_pd(&ctx).unwrap();
        let mut reg = |addr: usize, len: usize, access: AccessFlags| {
            e.reg_mr_app(pd, addr as u64, addr, len, access, || {
                Box::new(crate::appmem::AppMemory::new(addr, len))
            })
        };
        let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let efault = |r: Result<MrHandle, Error>, what: &str| {
            let err = r.expect_err(what);
            assert_eq!(err.errno(), libc::EFAULT, "{where_}: {what}: {err}");
        };
        assert!(reg(a, page, rw).is_ok(), "{where_}: a mapped page");
        efault(reg(a, 2 * page, rw), "a range over an unmapped page");
        efault(
            reg(a + page, 16, AccessFlags::REMOTE_READ),
            "an unmapped page",
        );
        efault(
            reg(a + 2 * page, page, rw),
            "write access to a read-only page",
        );
        efault(
            reg(a + 2 * page, page, AccessFlags::REMOTE_ATOMIC),
            "atomics on a read-only page",
        );
        assert!(
            reg(a + 2 * page, page, AccessFlags::REMOTE_READ).is_ok(),
            "{where_}: read access to a read-only page"
        );
        // A 1 GiB MR over a 64 KiB buffer.
        let small = vec![0u8; 64 << 10];
        efault(
            reg(small.as_ptr() as usize, 1 << 30, rw),
            "1 GiB over a 64 KiB buffer",
        );
        // ODP MRs are not pinned: they fault when reached, as the kernel's.
        assert!(
            reg(a + page, page, rw | AccessFlags::ON_DEMAND).is_ok(),
            "{where_}: an ODP MR over a hole registers"
        );
    }
    // SAFETY: unmapping what is left of our own mapping.
    unsafe { libc::munmap(base, 4 * page) };
}

/// Goal: a client that trickles a frame (its length, then a byte every
/// 1.5 s) does not hold up another pair's verbs. Method: two QPs of this
/// process connected to each other do WRITE round trips (post, poll until
/// the completion) for 5 s while another connection trickles; the worst
/// round trip stays under [`TRICKLE_BOUND`]; the trickler is dropped by
/// the frame deadline.
#[test]
fn a_trickling_client_does_not_stall_a_busy_pair() {
    let fabric = Fabric::start("trickle");
    let mut e = fabric.engine();
    let mut a_buf = vec![1u8; 4096];
    let mut b_buf = vec![0u8; 4096];
    let a = end(&mut e, 0, &mut a_buf);
    let b = end(&mut e, 1, &mut b_buf);
    to_rts(&mut e, &a.qp, b.qpn, b.lid);
    to_rts(&mut e, &b.qp, a.qpn, a.lid);
    let socket = fabric.socket.clone();
    let trickler = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&socket).unwrap();
        let t0 = Instant::now();
        let _ = s.write_all(&100u32.to_le_bytes());
        let mut sent = 0;
        while t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1500));
            if s.write_all(&[0]).is_err() {
                break;
            }
            sent += 1;
        }
        // The fabric closed the connection: reading gives EOF.
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let mut rest = [0u8; 16];
        (sent, s.read(&mut rest))
    });
    let sg = [Sge {
        addr: a.addr,
        length: 64,
        lkey: a.lkey,
    }];
    let t0 = Instant::now();
    let (mut worst, mut trips) = (Duration::ZERO, 0u32);
    let mut wc = [Wc::default(); 4];
    while t0.elapsed() < Duration::from_secs(5) {
        let wr = SendWr {
            wr_id: u64::from(trips),
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            ..SendWr::default()
        };
        let t = Instant::now();
        // SAFETY: both buffers outlive the request (polled below).
        unsafe { e.post_send(&a.qp, &[wr]) }.unwrap();
        loop {
            let n = e.poll_cq(&a.cq, &mut wc).unwrap();
            if n > 0 {
                assert_eq!(wc[0].status, WcStatus::Success);
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "a round trip never ended"
            );
        }
        worst = worst.max(t.elapsed());
        trips += 1;
    }
    let (sent, closed) = trickler.join().unwrap();
    eprintln!("{trips} round trips beside a trickler, the worst {worst:?}");
    assert!(trips > 10, "only {trips} round trips in 5 s");
    assert!(
        worst < TRICKLE_BOUND,
        "the worst round trip took {worst:?} (bound {TRICKLE_BOUND:?})"
    );
    assert!(
        sent <= 2,
        "the trickler was not dropped by the frame deadline"
    );
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert!(
        fabric.log().contains("did not arrive in time"),
        "{}",
        fabric.log()
    );
}

/// Goal: a sender killed mid-stream never yields a successful message
/// with made-up contents. Method: 20 times, a sender process streams
/// 4 KiB SENDs of 0x5a, eight in flight, to receives this process posts
/// slowly (so sends wait for them); the sender is killed; every receive
/// that completes successfully, before or after, must hold 0x5a only
/// (receive buffers are filled with 0xee before each post).
#[test]
fn a_killed_sender_never_yields_made_up_data() {
    let fabric = Fabric::start("kill");
    let mut e = fabric.engine();
    let (mut good, mut bad, mut failed) = (0u32, 0u32, 0u32);
    for run in 0..20u64 {
        let slots = 4usize;
        let mut buf = vec![0xeeu8; 4096 * slots];
        let me = end(&mut e, 1, &mut buf);
        let (mut child, mut out) = helper("sender", &fabric.socket);
        let peer = expect(&mut out, "PEER ");
        let mut w = peer.split_whitespace();
        let (qpn, lid): (u32, u16) = (
            w.next().unwrap().parse().unwrap(),
            w.next().unwrap().parse().unwrap(),
        );
        to_rts(&mut e, &me.qp, qpn, lid);
        writeln!(child.stdin.as_mut().unwrap(), "{} {}", me.qpn, me.lid).unwrap();
        expect(&mut out, "READY");
        let post = |e: &mut Engine, buf: &mut [u8], slot: usize| {
            buf[slot * 4096..(slot + 1) * 4096].fill(0xee);
            let sg = [Sge {
                addr: me.addr + (slot * 4096) as u64,
                length: 4096,
                lkey: me.lkey,
            }];
            // SAFETY: `buf` outlives the request (polled below).
            unsafe {
                e.post_recv(
                    &me.qp,
                    &[RecvWr {
                        wr_id: slot as u64,
                        sg_list: &sg,
                    }],
                )
            }
            .unwrap();
        };
        let kill_after = Duration::from_millis(50 + (run * 37) % 200);
        let t0 = Instant::now();
        let mut killed: Option<Instant> = None;
        let mut next = 0usize;
        let mut posted = 0usize;
        let mut wc = [Wc::default(); 4];
        loop {
            if killed.is_none() && t0.elapsed() > kill_after {
                let _ = child.kill();
                killed = Some(Instant::now());
            }
            if killed.is_some_and(|k| k.elapsed() > Duration::from_millis(400)) {
                break;
            }
            // One receive at a time, every 2 ms: the sends wait for them.
            if posted == 0 {
                post(&mut e, &mut buf, next);
                next = (next + 1) % slots;
                posted = 1;
            }
            std::thread::sleep(Duration::from_millis(2));
            let n = e.poll_cq(&me.cq, &mut wc).unwrap();
            for c in &wc[..n] {
                posted -= 1;
                if c.status == WcStatus::Success {
                    let s = c.wr_id as usize;
                    if buf[s * 4096..(s + 1) * 4096].iter().all(|&x| x == 0x5a) {
                        good += 1;
                    } else {
                        bad += 1;
                    }
                } else {
                    failed += 1;
                }
            }
        }
        let _ = child.wait();
        // The flushed receive (if any) comes with the QP's destruction.
        let _ = e.destroy_qp(&me.qp);
        let _ = e.dereg_mr(&me.mr);
    }
    eprintln!("{good} messages intact, {bad} made up, {failed} receives failed");
    assert!(good > 0, "no message got through at all");
    assert_eq!(bad, 0, "{bad} successful receives held made-up data");
}

/// Goal: a process of another uid is refused by the fabric (SO_PEERCRED),
/// and the library refuses a socket it does not own. Method (as root,
/// skipped otherwise): open the fabric's directory and socket to everyone,
/// fork a child that becomes uid 65534 and greets the fabric over a raw
/// socket: it gets no answer, only a closed connection, and the fabric
/// logs the refusal; then give the socket file to uid 65534 and connect
/// as the library does: refused before connecting.
#[test]
fn a_foreign_uid_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP a_foreign_uid_is_refused: needs root to become another uid");
        return;
    }
    let fabric = Fabric::start("uid");
    let open = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    open(&fabric.dir, 0o755);
    open(&fabric.socket, 0o666);
    let hello = super::encode(&super::server::Hello {
        protocol: super::server::PROTOCOL,
        family: None,
    });
    let mut frame = (hello.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&hello);
    let path = std::ffi::CString::new(fabric.socket.to_str().unwrap()).unwrap();
    let mut addr: libc::sockaddr_un =
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
        unsafe { core::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(path.as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: fork; the child makes only async-signal-safe calls (setgid,
    // setuid, socket, connect, write, read, _exit) on memory prepared
    // before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; every pointer names memory made before fork.
        let code = unsafe {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                10
            } else {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if fd < 0 || libc::connect(fd, (&raw const addr).cast(), len) != 0 {
                    11
                } else if libc::write(fd, frame.as_ptr().cast(), frame.len()) < 0 {
                    // The fabric closed the connection before the greeting
                    // was written (EPIPE, ECONNRESET): refused.
                    0
                } else {
                    let mut b = [0u8; 64];
                    match libc::read(fd, b.as_mut_ptr().cast(), b.len()) {
                        0 => 0,          // closed without a word: refused
                        n if n > 0 => 1, // answered: served
                        _ => 0,          // reset: refused
                    }
                }
            }
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` lives.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status));
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "the process of uid 65534 was served (1) or could not try (1x)"
    );
    let t0 = Instant::now();
    while !fabric.log().contains("of uid 65534") {
        assert!(t0.elapsed() < Duration::from_secs(10), "{}", fabric.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Our own process is still served.
    let mut e = fabric.engine();
    assert!(e.get_device_list().is_ok());
    // A socket file another user owns is refused before connecting.
    std::os::unix::fs::lchown(&fabric.socket, Some(65534), Some(65534)).unwrap();
    let err = Remote::connect(fabric.socket.clone(), None).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("uid 65534"), "{err}");
}
