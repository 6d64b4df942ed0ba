//! The simulated connection manager through the `Verbs` trait: client and
//! server in one world (docs/rdma-cm.md; create-qp.md §10).
#![allow(missing_docs, unsafe_code)]

use std::net::SocketAddr;

use backend_sim::{
    device_ipv4, reject_reason, CmChannelHandle, CmConfig, CmIdHandle, CqHandle, DeviceProfile,
    MrHandle, QpHandle, SimConfig, SimVerbs, RDMA_UDP_QKEY,
};
use verbs_api::errno::{EADDRINUSE, EADDRNOTAVAIL, EBUSY, EINVAL, ETIMEDOUT};
use verbs_api::*;

const PORT: u16 = 7471;

fn server_addr() -> SocketAddr {
    SocketAddr::from((device_ipv4(1), PORT))
}

fn client_addr() -> SocketAddr {
    SocketAddr::from((device_ipv4(0), 0))
}

fn caps() -> QpCap {
    QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// Fetches the next event of `ch`, acknowledges it, checks its type.
fn expect_event(sim: &mut SimVerbs, ch: &CmChannelHandle, want: CmEventType) -> CmEvent<SimVerbs> {
    let ev = sim
        .rdma_get_cm_event(ch)
        .unwrap()
        .unwrap_or_else(|| panic!("expected {want}, got no event"));
    assert_eq!(ev.event, want, "status {}", ev.status);
    let copy = CmEvent {
        event: ev.event,
        id: ev.id,
        listen_id: ev.listen_id,
        status: ev.status,
        private_data: ev.private_data.clone(),
        conn: ev.conn.clone(),
        token: ev.token,
        ud: ev.ud,
        context: ev.context,
    };
    sim.rdma_ack_cm_event(ev).unwrap();
    copy
}

fn create_qp(sim: &mut SimVerbs, id: &CmIdHandle, qp_type: QpType) -> Result<QpHandle> {
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type,
        cap: caps(),
        ..QpInitAttrEx::default()
    };
    sim.rdma_create_qp(id, None, &mut attr)
}

struct Side {
    ch: CmChannelHandle,
    id: CmIdHandle,
}

struct Setup {
    sim: SimVerbs,
    client: Side,
    server: Side,
    listen: CmIdHandle,
}

/// Server listening on device 1, client with a resolved route from device 0.
fn setup(sim: SimVerbs, ps: PortSpace) -> Setup {
    let mut sim = sim;
    let sch = sim.rdma_create_event_channel().unwrap();
    let listen = sim.rdma_create_id(&sch, 0, ps).unwrap();
    sim.rdma_bind_addr(&listen, server_addr()).unwrap();
    sim.rdma_listen(&listen, 8).unwrap();
    let cch = sim.rdma_create_event_channel().unwrap();
    let cid = sim.rdma_create_id(&cch, 0, ps).unwrap();
    sim.rdma_resolve_addr(&cid, Some(client_addr()), server_addr(), 2000)
        .unwrap();
    expect_event(&mut sim, &cch, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&cid, 2000).unwrap();
    expect_event(&mut sim, &cch, CmEventType::RouteResolved);
    Setup {
        sim,
        client: Side { ch: cch, id: cid },
        server: Side {
            ch: sch,
            id: listen,
        },
        listen,
    }
}

fn param(data: &[u8]) -> ConnParam {
    ConnParam {
        private_data: data.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

/// Connects with QPs on both sides; the server's side is the new id.
fn established(ps: PortSpace, qp_type: QpType) -> Setup {
    let mut s = setup(SimVerbs::default(), ps);
    create_qp(&mut s.sim, &s.client.id, qp_type).unwrap();
    s.sim.rdma_connect(&s.client.id, &param(b"hello")).unwrap();
    let req = expect_event(&mut s.sim, &s.server.ch, CmEventType::ConnectRequest);
    assert_eq!(req.listen_id, Some(s.listen));
    let sid = req.id;
    create_qp(&mut s.sim, &sid, qp_type).unwrap();
    s.sim.rdma_accept(&sid, &param(b"welcome")).unwrap();
    expect_event(&mut s.sim, &s.client.ch, CmEventType::Established);
    if qp_type != QpType::Ud {
        expect_event(&mut s.sim, &s.server.ch, CmEventType::Established);
    }
    s.server.id = sid;
    s
}

fn info(sim: &mut SimVerbs, id: &CmIdHandle) -> CmIdInfo<SimVerbs> {
    sim.rdma_id_info(id).unwrap()
}

fn reg(sim: &mut SimVerbs, id: &CmIdHandle) -> MrHandle {
    let pd = info(sim, id).pd.unwrap();
    sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE).unwrap()
}

fn poll_one(sim: &mut SimVerbs, cq: &CqHandle) -> Wc {
    let mut wc = [Wc::default(); 1];
    assert_eq!(sim.poll_cq(cq, &mut wc).unwrap(), 1, "no completion");
    wc[0]
}

/// Sends `msg` from `from` to `to` (RC: connected QPs).
fn exchange(sim: &mut SimVerbs, from: &CmIdHandle, to: &CmIdHandle, msg: &[u8]) {
    let (fi, ti) = (info(sim, from), info(sim, to));
    let (src, dst) = (reg(sim, from), reg(sim, to));
    sim.mr_bytes_mut(&src).unwrap()[..msg.len()].copy_from_slice(msg);
    let (s, d) = (sim.mr_info(&src).unwrap(), sim.mr_info(&dst).unwrap());
    let rsge = [Sge {
        addr: d.addr,
        length: 4096,
        lkey: d.lkey,
    }];
    // SAFETY: the simulator owns every byte; the MR outlives the request.
    unsafe {
        sim.post_recv(
            &ti.qp.unwrap(),
            &[RecvWr {
                wr_id: 7,
                sg_list: &rsge,
            }],
        )
    }
    .unwrap();
    let ssge = [Sge {
        addr: s.addr,
        length: msg.len() as u32,
        lkey: s.lkey,
    }];
    // SAFETY: as above.
    unsafe {
        sim.post_send(
            &fi.qp.unwrap(),
            &[SendWr {
                wr_id: 9,
                sg_list: &ssge,
                send_flags: SendFlags::SIGNALED,
                ..SendWr::default()
            }],
        )
    }
    .unwrap();
    let wc = poll_one(sim, &fi.send_cq.unwrap());
    assert_eq!((wc.wr_id, wc.status), (9, WcStatus::Success));
    let wc = poll_one(sim, &ti.recv_cq.unwrap());
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (7, WcStatus::Success, msg.len() as u32)
    );
    assert_eq!(&sim.mr_bytes(&dst).unwrap()[..msg.len()], msg);
    sim.dereg_mr(&src).unwrap();
    sim.dereg_mr(&dst).unwrap();
}

fn qp_state(sim: &mut SimVerbs, id: &CmIdHandle) -> QpState {
    let qp = info(sim, id).qp.unwrap();
    sim.query_qp(&qp, QpAttrMask::STATE).unwrap().0.qp_state
}

#[test]
fn rc_client_server_exchange_disconnect_and_release() {
    let mut s = established(PortSpace::Tcp, QpType::Rc);
    let (c, sv) = (s.client.id, s.server.id);
    assert_eq!(qp_state(&mut s.sim, &c), QpState::ReadyToSend);
    assert_eq!(qp_state(&mut s.sim, &sv), QpState::ReadyToSend);
    // Automatic CQs and channels are exposed through the id.
    let ci = info(&mut s.sim, &c);
    assert!(ci.send_cq.is_some() && ci.recv_cq.is_some() && ci.send_cq != ci.recv_cq);
    assert!(ci.send_cq_channel.is_some() && ci.recv_cq_channel.is_some());
    assert_eq!(ci.addrs.peer, Some(server_addr()));
    assert_eq!(
        ci.addrs.local.unwrap().ip(),
        std::net::IpAddr::V4(device_ipv4(0))
    );

    exchange(&mut s.sim, &c, &sv, b"ping from the client");
    exchange(&mut s.sim, &sv, &c, b"pong from the server");

    // Disconnect: the client's QP goes to ERR, both sides see DISCONNECTED
    // and, after timewait, TIMEWAIT_EXIT.
    s.sim.rdma_disconnect(&c).unwrap();
    assert_eq!(qp_state(&mut s.sim, &c), QpState::Error);
    let t0 = s.sim.now_ns();
    expect_event(&mut s.sim, &s.server.ch, CmEventType::Disconnected);
    expect_event(&mut s.sim, &s.client.ch, CmEventType::Disconnected);
    s.sim.rdma_disconnect(&sv).unwrap();
    assert_eq!(qp_state(&mut s.sim, &sv), QpState::Error);
    expect_event(&mut s.sim, &s.client.ch, CmEventType::TimewaitExit);
    expect_event(&mut s.sim, &s.server.ch, CmEventType::TimewaitExit);
    assert!(s.sim.now_ns() - t0 >= CmConfig::default().timewait_ns);

    // Release: QPs, automatic CQs and channels, ids, the default PDs.
    let cq = ci.send_cq.unwrap();
    s.sim.rdma_destroy_qp(&c).unwrap();
    assert!(s.sim.cq_info(&cq).is_err(), "the automatic CQ is gone");
    s.sim.rdma_destroy_qp(&sv).unwrap();
    for id in [c, sv, s.listen] {
        s.sim.rdma_destroy_id(&id).unwrap();
    }
    assert_eq!(s.sim.world().cm_device_default_pd(0), None);
    assert_eq!(s.sim.world().cm_device_default_pd(1), None);
    assert_eq!(s.sim.world().cm_context_children(0), Some(0));
    assert_eq!(s.sim.world().cm_context_children(1), Some(0));
    s.sim.rdma_destroy_event_channel(&s.client.ch).unwrap();
    s.sim.rdma_destroy_event_channel(&s.server.ch).unwrap();
    assert_eq!(s.sim.world().qp_count(), 0);
}

#[test]
fn connect_request_and_established_carry_parameters() {
    let mut s = setup(SimVerbs::default(), PortSpace::Tcp);
    let cqp = create_qp(&mut s.sim, &s.client.id, QpType::Rc).unwrap();
    let cqpn = s.sim.qp_num(&cqp).unwrap();
    let mut p = param(&[0xab; 56]);
    p.responder_resources = 2;
    p.initiator_depth = 3;
    s.sim.rdma_connect(&s.client.id, &p).unwrap();
    let req = expect_event(&mut s.sim, &s.server.ch, CmEventType::ConnectRequest);
    // The CM swaps the two; the REQ's data area is 56 bytes for TCP.
    assert_eq!(
        (req.conn.responder_resources, req.conn.initiator_depth),
        (3, 2)
    );
    assert_eq!(req.conn.qp_num, cqpn);
    assert_eq!(req.private_data, vec![0xab; 56]);
    let sqp = create_qp(&mut s.sim, &req.id, QpType::Rc).unwrap();
    let sqpn = s.sim.qp_num(&sqp).unwrap();
    let mut a = param(b"ok");
    a.responder_resources = 3;
    a.initiator_depth = 2;
    s.sim.rdma_accept(&req.id, &a).unwrap();
    let est = expect_event(&mut s.sim, &s.client.ch, CmEventType::Established);
    assert_eq!(est.conn.qp_num, sqpn);
    assert_eq!(&est.private_data[..2], b"ok");
    assert_eq!(est.private_data.len(), 196, "REP data area, zero padded");
    assert!(est.private_data[2..].iter().all(|&b| b == 0));
    // The negotiated depths reach the QPs.
    let (ca, _) = s.sim.query_qp(&cqp, QpAttrMask::all_named()).unwrap();
    let (sa, _) = s.sim.query_qp(&sqp, QpAttrMask::all_named()).unwrap();
    assert_eq!((ca.max_rd_atomic, ca.max_dest_rd_atomic), (3, 2));
    assert_eq!((sa.max_rd_atomic, sa.max_dest_rd_atomic), (2, 3));
    assert_eq!((ca.dest_qp_num, sa.dest_qp_num), (sqpn, cqpn));
    assert_eq!(ca.sq_psn, sa.rq_psn);
    assert_eq!(sa.sq_psn, ca.rq_psn);
    assert!(ca
        .qp_access_flags
        .contains(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ));
}

#[test]
fn reject_with_private_data() {
    let mut s = setup(SimVerbs::default(), PortSpace::Tcp);
    create_qp(&mut s.sim, &s.client.id, QpType::Rc).unwrap();
    s.sim
        .rdma_connect(&s.client.id, &param(b"let me in"))
        .unwrap();
    let req = expect_event(&mut s.sim, &s.server.ch, CmEventType::ConnectRequest);
    assert_eq!(&req.private_data[..9], b"let me in");
    // Too much private data for a REJ: refused, nothing sent.
    let e = s.sim.rdma_reject(&req.id, &[1; 149]).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    s.sim.rdma_reject(&req.id, b"go away").unwrap();
    let rej = expect_event(&mut s.sim, &s.client.ch, CmEventType::Rejected);
    assert_eq!(rej.status, reject_reason::CONSUMER_DEFINED);
    assert_eq!(&rej.private_data[..7], b"go away");
    assert_eq!(rej.private_data.len(), 148);
    assert_eq!(qp_state(&mut s.sim, &s.client.id), QpState::Error);
    // The rejected request's id can only be destroyed now.
    assert_eq!(
        s.sim.rdma_accept(&req.id, &param(&[])).unwrap_err().errno(),
        EINVAL
    );
    s.sim.rdma_destroy_id(&req.id).unwrap();
}

#[test]
fn unpadded_private_data_when_configured() {
    let sim = SimVerbs::new(SimConfig {
        cm: CmConfig {
            pad_private_data: false,
            ..CmConfig::default()
        },
        ..SimConfig::default()
    });
    let mut s = setup(sim, PortSpace::Tcp);
    s.sim.rdma_connect(&s.client.id, &param(b"abc")).unwrap();
    let req = expect_event(&mut s.sim, &s.server.ch, CmEventType::ConnectRequest);
    assert_eq!(req.private_data, b"abc");
}

#[test]
fn no_listener_is_rejected_with_invalid_service_id() {
    let mut sim = SimVerbs::default();
    let ch = sim.rdma_create_event_channel().unwrap();
    let id = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_resolve_addr(&id, None, server_addr(), 2000)
        .unwrap();
    expect_event(&mut sim, &ch, CmEventType::AddrResolved);
    // Unbound source: the id takes the destination's device (loopback).
    assert_eq!(
        info(&mut sim, &id).addrs.local.unwrap().ip(),
        std::net::IpAddr::V4(device_ipv4(1))
    );
    sim.rdma_resolve_route(&id, 2000).unwrap();
    expect_event(&mut sim, &ch, CmEventType::RouteResolved);
    sim.rdma_connect(&id, &param(&[])).unwrap();
    let ev = expect_event(&mut sim, &ch, CmEventType::Rejected);
    assert_eq!(ev.status, reject_reason::INVALID_SERVICE_ID);
}

#[test]
fn unknown_address_times_out_in_virtual_time() {
    let mut sim = SimVerbs::default();
    let ch = sim.rdma_create_event_channel().unwrap();
    let id = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    let t0 = sim.now_ns();
    sim.rdma_resolve_addr(&id, None, "10.9.9.9:1".parse().unwrap(), 500)
        .unwrap();
    let ev = expect_event(&mut sim, &ch, CmEventType::AddrError);
    assert_eq!(ev.status, -ETIMEDOUT);
    assert_eq!(sim.now_ns() - t0, 500_000_000);
    assert!(sim.rdma_get_cm_event(&ch).unwrap().is_none());
    // Still bound; a second resolution may follow.
    sim.rdma_resolve_addr(&id, None, server_addr(), 500)
        .unwrap();
    expect_event(&mut sim, &ch, CmEventType::AddrResolved);
}

#[test]
fn link_down_connect_is_unreachable_after_the_retries() {
    let mut s = setup(SimVerbs::default(), PortSpace::Tcp);
    create_qp(&mut s.sim, &s.client.id, QpType::Rc).unwrap();
    s.sim
        .sim_control(SimCommand::Link {
            device: 1,
            port: 1,
            up: false,
        })
        .unwrap();
    let t0 = s.sim.now_ns();
    s.sim.rdma_connect(&s.client.id, &param(&[])).unwrap();
    let ev = expect_event(&mut s.sim, &s.client.ch, CmEventType::Unreachable);
    assert_eq!(ev.status, -ETIMEDOUT);
    let c = CmConfig::default();
    assert_eq!(
        s.sim.now_ns() - t0,
        c.response_timeout_ns * u64::from(c.max_retries + 1)
    );
    assert_eq!(qp_state(&mut s.sim, &s.client.id), QpState::Error);
    assert!(s.sim.rdma_get_cm_event(&s.server.ch).unwrap().is_none());
}

#[test]
fn ud_sidr_exchange() {
    let mut s = established(PortSpace::Udp, QpType::Ud);
    let (c, sv) = (s.client.id, s.server.id);
    assert_eq!(qp_state(&mut s.sim, &c), QpState::ReadyToSend);
    let sqp = info(&mut s.sim, &sv).qp.unwrap();
    let (a, _) = s.sim.query_qp(&sqp, QpAttrMask::all_named()).unwrap();
    assert_eq!(a.qkey, RDMA_UDP_QKEY);
    // A rejected SIDR request is UNREACHABLE with IB_SIDR_REJECT.
    let ch = s.client.ch;
    let id2 = s.sim.rdma_create_id(&ch, 0, PortSpace::Udp).unwrap();
    s.sim
        .rdma_resolve_addr(&id2, None, server_addr(), 100)
        .unwrap();
    expect_event(&mut s.sim, &ch, CmEventType::AddrResolved);
    s.sim.rdma_resolve_route(&id2, 100).unwrap();
    expect_event(&mut s.sim, &ch, CmEventType::RouteResolved);
    s.sim.rdma_connect(&id2, &param(&[])).unwrap();
    let req = expect_event(&mut s.sim, &s.server.ch, CmEventType::ConnectRequest);
    assert_eq!(req.private_data.len(), 180);
    s.sim.rdma_reject(&req.id, b"no").unwrap();
    let ev = expect_event(&mut s.sim, &ch, CmEventType::Unreachable);
    assert_eq!(ev.status, reject_reason::SIDR_REJECT);
}

#[test]
fn bad_input_changes_nothing() {
    let mut s = setup(SimVerbs::default(), PortSpace::Tcp);
    let c = s.client.id;
    let before = s.sim.world().cm_context_children(0).unwrap();
    let qps = s.sim.world().qp_count();

    // Unbound id.
    let idle = s
        .sim
        .rdma_create_id(&s.client.ch, 0, PortSpace::Tcp)
        .unwrap();
    let e = create_qp(&mut s.sim, &idle, QpType::Rc).unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaCreateQp, EINVAL));
    // Wildcard-bound: still no device.
    s.sim
        .rdma_bind_addr(&idle, "0.0.0.0:0".parse().unwrap())
        .unwrap();
    assert_eq!(
        create_qp(&mut s.sim, &idle, QpType::Rc)
            .unwrap_err()
            .errno(),
        EINVAL
    );

    // A PD of another device (and of another context of the same device).
    let other = s.sim.open_device(1, ProcessId(0)).unwrap();
    let pd1 = s.sim.alloc_pd(&other).unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        cap: caps(),
        ..QpInitAttrEx::default()
    };
    let e = s.sim.rdma_create_qp(&c, Some(&pd1), &mut attr).unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaCreateQp, EINVAL));
    // Impossible caps: the automatic CQs are rolled back.
    let mut attr = QpInitAttrEx::<SimVerbs> {
        cap: QpCap {
            max_send_wr: 1 << 30,
            ..caps()
        },
        ..QpInitAttrEx::default()
    };
    assert!(s.sim.rdma_create_qp(&c, None, &mut attr).is_err());
    assert_eq!(s.sim.world().cm_context_children(0), Some(before));
    assert_eq!(s.sim.world().qp_count(), qps);
    assert!(info(&mut s.sim, &c).qp.is_none());

    // A second QP on one id.
    create_qp(&mut s.sim, &c, QpType::Rc).unwrap();
    let after_one = s.sim.world().cm_context_children(0).unwrap();
    let e = create_qp(&mut s.sim, &c, QpType::Rc).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    assert_eq!(s.sim.world().cm_context_children(0), Some(after_one));
    assert_eq!(s.sim.world().qp_count(), qps + 1);
    // A UD QP on a TCP id.
    s.sim.rdma_destroy_qp(&c).unwrap();
    assert_eq!(
        create_qp(&mut s.sim, &c, QpType::Ud).unwrap_err().errno(),
        EINVAL
    );
    assert_eq!(s.sim.world().cm_context_children(0), Some(before));

    // The automatic objects belong to librdmacm.
    create_qp(&mut s.sim, &c, QpType::Rc).unwrap();
    let ci = info(&mut s.sim, &c);
    assert_eq!(
        s.sim.destroy_qp(&ci.qp.unwrap()).unwrap_err().errno(),
        EBUSY
    );
    assert_eq!(
        s.sim.destroy_cq(&ci.send_cq.unwrap()).unwrap_err().errno(),
        EBUSY
    );
    assert_eq!(
        s.sim.dealloc_pd(&ci.pd.unwrap()).unwrap_err().errno(),
        EBUSY
    );
    // destroy_id with a QP, destroy_event_channel with ids.
    assert_eq!(s.sim.rdma_destroy_id(&c).unwrap_err().errno(), EBUSY);
    assert_eq!(
        s.sim
            .rdma_destroy_event_channel(&s.client.ch)
            .unwrap_err()
            .errno(),
        EBUSY
    );
    s.sim.rdma_destroy_qp(&c).unwrap();
    assert_eq!(s.sim.rdma_destroy_qp(&c).unwrap_err().errno(), EINVAL);
}

#[test]
fn state_errors() {
    let mut sim = SimVerbs::default();
    let ch = sim.rdma_create_event_channel().unwrap();
    let id = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    // connect / route before resolution, accept / reject / disconnect on an idle id.
    assert_eq!(
        sim.rdma_connect(&id, &param(&[])).unwrap_err().errno(),
        EINVAL
    );
    assert_eq!(sim.rdma_resolve_route(&id, 10).unwrap_err().errno(), EINVAL);
    assert_eq!(
        sim.rdma_accept(&id, &param(&[])).unwrap_err().errno(),
        EINVAL
    );
    assert_eq!(sim.rdma_reject(&id, &[]).unwrap_err().errno(), EINVAL);
    assert_eq!(sim.rdma_disconnect(&id).unwrap_err().errno(), EINVAL);
    // An address no device owns; the id stays idle.
    let e = sim
        .rdma_bind_addr(&id, "192.168.1.1:5".parse().unwrap())
        .unwrap_err();
    assert_eq!(e.errno(), EADDRNOTAVAIL);
    sim.rdma_bind_addr(&id, server_addr()).unwrap();
    assert_eq!(
        sim.rdma_bind_addr(&id, server_addr()).unwrap_err().errno(),
        EINVAL,
        "bind twice"
    );
    let id2 = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    assert_eq!(
        sim.rdma_bind_addr(&id2, server_addr()).unwrap_err().errno(),
        EADDRINUSE
    );
    assert_eq!(
        sim.rdma_bind_addr(&id2, SocketAddr::from(([0, 0, 0, 0], PORT)))
            .unwrap_err()
            .errno(),
        EADDRNOTAVAIL
    );
    // Another port space does not conflict.
    let id3 = sim.rdma_create_id(&ch, 0, PortSpace::Ib).unwrap();
    sim.rdma_bind_addr(&id3, server_addr()).unwrap();
    // Resolving on a bound id is fine; doing it twice is not.
    sim.rdma_resolve_addr(&id2, None, server_addr(), 10)
        .unwrap();
    assert_eq!(
        sim.rdma_resolve_addr(&id2, None, server_addr(), 10)
            .unwrap_err()
            .errno(),
        EINVAL
    );
    sim.rdma_listen(&id, 4).unwrap();
    assert_eq!(sim.rdma_listen(&id, 4).unwrap_err().errno(), EINVAL);
    // Unacknowledged events block rdma_destroy_id.
    let ev = sim.rdma_get_cm_event(&ch).unwrap().unwrap();
    assert_eq!(ev.event, CmEventType::AddrResolved);
    assert_eq!(sim.rdma_destroy_id(&id2).unwrap_err().errno(), EBUSY);
    sim.rdma_ack_cm_event(ev).unwrap();
    sim.rdma_destroy_id(&id2).unwrap();
    // Too much private data on connect (56 bytes for TCP) / bad depths.
    let mut s = setup(SimVerbs::default(), PortSpace::Tcp);
    let e = s
        .sim
        .rdma_connect(&s.client.id, &param(&[0; 57]))
        .unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    let mut p = param(&[]);
    p.initiator_depth = 200;
    assert_eq!(
        s.sim.rdma_connect(&s.client.id, &p).unwrap_err().errno(),
        EINVAL
    );
    // Nothing was sent.
    assert!(s.sim.rdma_get_cm_event(&s.server.ch).unwrap().is_none());
}

#[test]
fn ephemeral_ports_are_sequential_and_skip_taken_ones() {
    let mut sim = SimVerbs::default();
    let ch = sim.rdma_create_event_channel().unwrap();
    let first = CmConfig::default().ephemeral_first;
    let a = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&a, SocketAddr::from((device_ipv4(0), first + 1)))
        .unwrap();
    let b = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&b, SocketAddr::from((device_ipv4(0), 0)))
        .unwrap();
    let c = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&c, SocketAddr::from((device_ipv4(0), 0)))
        .unwrap();
    let port = |sim: &mut SimVerbs, id| info(sim, id).addrs.local.unwrap().port();
    assert_eq!(port(&mut sim, &b), first);
    assert_eq!(port(&mut sim, &c), first + 2);
}

#[path = "rdma_cm/more.rs"]
mod more;

/// librdmacm opens each device, and allocates its default PD, in every
/// process: two processes of one world never share the CM's context or
/// default PD of a device, while the ids of one process do; the passive
/// side's new id is the listener's process's; one process's last id takes
/// only its own default PD with it.
#[test]
fn each_process_has_its_own_cm_context_and_default_pd() {
    let mut sim = SimVerbs::default();
    let (p1, p2) = (ProcessId(1), ProcessId(2));
    let ch1 = sim.world_mut().rdma_create_event_channel_of(p1);
    let ch2 = sim.world_mut().rdma_create_event_channel_of(p2);
    let listen = sim.rdma_create_id(&ch2, 0, PortSpace::Tcp).unwrap();
    let dst = SocketAddr::from((device_ipv4(0), PORT));
    sim.rdma_bind_addr(&listen, dst).unwrap();
    sim.rdma_listen(&listen, 4).unwrap();
    let a = sim.rdma_create_id(&ch1, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&a, client_addr()).unwrap();
    let a2 = sim.rdma_create_id(&ch1, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&a2, client_addr()).unwrap();
    let (ia, ia2, il) = (
        info(&mut sim, &a),
        info(&mut sim, &a2),
        info(&mut sim, &listen),
    );
    assert_ne!(ia.verbs, il.verbs, "two processes share the CM context");
    assert_ne!(ia.pd, il.pd, "two processes share the default PD");
    assert_eq!((ia2.verbs, ia2.pd), (ia.verbs, ia.pd), "one process's ids");
    assert_eq!(sim.world().cm_device_default_pd_of(p1, 0), ia.pd);
    assert_eq!(sim.world().cm_device_default_pd_of(p2, 0), il.pd);
    // The other process's default PD is not the id's context's.
    let mut attr = QpInitAttrEx::<SimVerbs> {
        cap: caps(),
        ..QpInitAttrEx::default()
    };
    let e = sim
        .rdma_create_qp(&a, il.pd.as_ref(), &mut attr)
        .unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaCreateQp, EINVAL));
    // Connect: the passive id uses the listener's process's objects.
    sim.rdma_resolve_addr(&a, None, dst, 2000).unwrap();
    expect_event(&mut sim, &ch1, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&a, 2000).unwrap();
    expect_event(&mut sim, &ch1, CmEventType::RouteResolved);
    create_qp(&mut sim, &a, QpType::Rc).unwrap();
    sim.rdma_connect(&a, &param(&[])).unwrap();
    let req = expect_event(&mut sim, &ch2, CmEventType::ConnectRequest);
    let inew = info(&mut sim, &req.id);
    assert_eq!((inew.verbs, inew.pd), (il.verbs, il.pd));
    // Process 1's ids go: its default PD with them, process 2's stays.
    sim.rdma_reject(&req.id, &[]).unwrap();
    expect_event(&mut sim, &ch1, CmEventType::Rejected);
    sim.rdma_destroy_qp(&a).unwrap();
    sim.rdma_destroy_id(&a).unwrap();
    sim.rdma_destroy_id(&a2).unwrap();
    assert_eq!(sim.world().cm_device_default_pd_of(p1, 0), None);
    assert_eq!(sim.world().cm_device_default_pd_of(p2, 0), il.pd);
    // Process 1 leaves: its CM context closes; process 2's, with ids
    // bound, stays.
    assert!(sim.world().cm_context_children_of(p1, 0).is_some());
    assert_eq!(sim.world_mut().cm_process_exit(p1), 1);
    assert_eq!(sim.world().cm_context_children_of(p1, 0), None);
    assert_eq!(sim.world_mut().cm_process_exit(p2), 0);
    assert!(sim.world().cm_context_children_of(p2, 0).is_some());
    assert!(sim.query_device(ia.verbs.as_ref().unwrap()).is_err());
}
