use super::*;
use crate::fabric::client::Remote;
use crate::fabric::engine::Engine;
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
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
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
