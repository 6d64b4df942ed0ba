//! `rdma_establish` and CM multicast through the `Verbs` trait, with UD
//! multicast forwarding on the simulated fabric (docs/rdma-cm.md).
#![allow(missing_docs, unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use backend_sim::{
    device_ipv4, mcast_mgid, CmChannelHandle, CmConfig, CmIdHandle, CqHandle, DeviceProfile,
    MrHandle, QpHandle, SimConfig, SimVerbs, MLID_FIRST, RDMA_UDP_QKEY,
};
use verbs_api::errno::{EADDRINUSE, EADDRNOTAVAIL, EBUSY, EINVAL, ETIMEDOUT};
use verbs_api::*;

const PORT: u16 = 7480;

fn server_addr() -> SocketAddr {
    SocketAddr::from((device_ipv4(1), PORT))
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

/// The next event of `ch` (acknowledged), which must be `want`.
fn expect(sim: &mut SimVerbs, ch: &CmChannelHandle, want: CmEventType) -> CmEvent<SimVerbs> {
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

fn pending(sim: &SimVerbs, ch: &CmChannelHandle) -> usize {
    sim.world().cm_channel_pending(*ch).unwrap()
}

fn now(sim: &mut SimVerbs) -> u64 {
    match sim.sim_control(SimCommand::Now).unwrap() {
        SimReply::TimeNs(t) => t,
        other => panic!("{other:?}"),
    }
}

fn create_qp(sim: &mut SimVerbs, id: &CmIdHandle, qp_type: QpType) -> Result<QpHandle> {
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type,
        cap: caps(),
        ..QpInitAttrEx::default()
    };
    sim.rdma_create_qp(id, None, &mut attr)
}

fn param() -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

// ------------------------------------------------------------ establish

struct Conn {
    sim: SimVerbs,
    cch: CmChannelHandle,
    sch: CmChannelHandle,
    client: CmIdHandle,
    server: CmIdHandle,
}

/// A client without a QP connected up to CONNECT_RESPONSE; the server's
/// new id accepted with a QP.
fn connect_response(sim: SimVerbs) -> Conn {
    let mut sim = sim;
    let sch = sim.rdma_create_event_channel().unwrap();
    let listen = sim.rdma_create_id(&sch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&listen, server_addr()).unwrap();
    sim.rdma_listen(&listen, 4).unwrap();
    let cch = sim.rdma_create_event_channel().unwrap();
    let client = sim.rdma_create_id(&cch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_resolve_addr(&client, None, server_addr(), 100)
        .unwrap();
    expect(&mut sim, &cch, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&client, 100).unwrap();
    expect(&mut sim, &cch, CmEventType::RouteResolved);
    // The application's own QP, on the id's device and PD.
    let pd = sim.rdma_id_info(&client).unwrap().pd.unwrap();
    let ctx = sim.rdma_id_info(&client).unwrap().verbs.unwrap();
    let cq = sim
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 8,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut init = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: caps(),
        ..QpInitAttrEx::default()
    };
    let own = sim.create_qp(&pd, &mut init).unwrap();
    let qpn = sim.qp_num(&own).unwrap();
    let mut p = param();
    p.qp_num = qpn;
    sim.rdma_connect(&client, &p).unwrap();
    let req = expect(&mut sim, &sch, CmEventType::ConnectRequest);
    assert_eq!(req.conn.qp_num, qpn);
    create_qp(&mut sim, &req.id, QpType::Rc).unwrap();
    sim.rdma_accept(&req.id, &param()).unwrap();
    let rep = expect(&mut sim, &cch, CmEventType::ConnectResponse);
    assert_ne!(rep.conn.qp_num, 0);
    // The application moves its QP with the CM's attributes.
    for state in [QpState::Init, QpState::ReadyToReceive, QpState::ReadyToSend] {
        let (attr, mask) = sim.rdma_init_qp_attr(&client, state).unwrap();
        sim.modify_qp(&own, &attr, mask).unwrap();
    }
    Conn {
        sim,
        cch,
        sch,
        client,
        server: req.id,
    }
}

#[test]
fn establish_completes_the_passive_side() {
    let mut c = connect_response(SimVerbs::default());
    // Until rdma_establish the server waits: nothing queued for it.
    assert_eq!(pending(&c.sim, &c.sch), 0);
    c.sim.rdma_establish(&c.client).unwrap();
    expect(&mut c.sim, &c.sch, CmEventType::Established);
    // Confirming twice is a state error, as is any other state.
    let e = c.sim.rdma_establish(&c.client).unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaEstablish, EINVAL));
    // Both sides are connected: a disconnect goes through.
    c.sim.rdma_disconnect(&c.client).unwrap();
    expect(&mut c.sim, &c.sch, CmEventType::Disconnected);
    expect(&mut c.sim, &c.cch, CmEventType::Disconnected);
}

#[test]
fn establish_in_a_wrong_state_is_einval_and_changes_nothing() {
    let mut c = connect_response(SimVerbs::default());
    // The passive id (it has a QP, and it is no REP receiver).
    let e = c.sim.rdma_establish(&c.server).unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaEstablish, EINVAL));
    // An id with a QP (librdmacm confirms those itself).
    let ch = c.sim.rdma_create_event_channel().unwrap();
    let other = c.sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    let e = c.sim.rdma_establish(&other).unwrap_err();
    assert_eq!(e.errno(), EINVAL, "idle id: {e}");
    c.sim
        .rdma_bind_addr(&other, SocketAddr::from((device_ipv4(0), 0)))
        .unwrap();
    create_qp(&mut c.sim, &other, QpType::Rc).unwrap();
    let e = c.sim.rdma_establish(&other).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    assert!(e.message().contains("without a QP"), "{e}");
    // None of that touched the real connection.
    c.sim.rdma_establish(&c.client).unwrap();
    expect(&mut c.sim, &c.sch, CmEventType::Established);
    // A destroyed id.
    c.sim.rdma_destroy_qp(&other).unwrap();
    c.sim.rdma_destroy_id(&other).unwrap();
    let e = c.sim.rdma_establish(&other).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
}

#[test]
fn without_establish_the_passive_side_times_out() {
    let t = 1_000_000;
    let sim = SimVerbs::new(SimConfig {
        cm: CmConfig {
            response_timeout_ns: t,
            max_retries: 2,
            ..CmConfig::default()
        },
        ..SimConfig::default()
    });
    let mut c = connect_response(sim);
    let start = now(&mut c.sim);
    let ev = expect(&mut c.sim, &c.sch, CmEventType::Unreachable);
    assert_eq!(ev.status, -ETIMEDOUT);
    // The REP went out 3 times (first + 2 resends), each waiting `t`.
    let waited = now(&mut c.sim) - start;
    assert!(
        (2 * t..=3 * t).contains(&waited),
        "gave up after {waited} ns"
    );
    // The server's QP went to ERR; a late RTU changes nothing there.
    let sqp = c.sim.rdma_id_info(&c.server).unwrap().qp.unwrap();
    let st = c.sim.query_qp(&sqp, QpAttrMask::STATE).unwrap().0.qp_state;
    assert_eq!(st, QpState::Error);
    c.sim.rdma_establish(&c.client).unwrap();
    assert!(c.sim.rdma_get_cm_event(&c.sch).unwrap().is_none());
}

// ------------------------------------------------------------ multicast

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

fn group(ip: Ipv4Addr) -> SocketAddr {
    SocketAddr::from((ip, 0))
}

struct Member {
    ch: CmChannelHandle,
    id: CmIdHandle,
    qp: QpHandle,
    cq: CqHandle,
    mr: MrHandle,
}

/// A UDP id bound to device `dev` with its UD QP (RTS, Q_Key RDMA_UDP_QKEY)
/// and a receive buffer.
fn member(sim: &mut SimVerbs, dev: u32) -> Member {
    let ch = sim.rdma_create_event_channel().unwrap();
    let id = sim.rdma_create_id(&ch, 0, PortSpace::Udp).unwrap();
    sim.rdma_bind_addr(&id, SocketAddr::from((device_ipv4(dev), 0)))
        .unwrap();
    let qp = create_qp(sim, &id, QpType::Ud).unwrap();
    let info = sim.rdma_id_info(&id).unwrap();
    let pd = info.pd.unwrap();
    let mr = sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    Member {
        ch,
        id,
        qp,
        cq: info.recv_cq.unwrap(),
        mr,
    }
}

fn post_recv(sim: &mut SimVerbs, m: &Member, wr_id: u64) {
    let i = sim.mr_info(&m.mr).unwrap();
    let sge = [Sge {
        addr: i.addr,
        length: 1024,
        lkey: i.lkey,
    }];
    // SAFETY: the simulator owns the MR's bytes; it outlives the request.
    unsafe {
        sim.post_recv(
            &m.qp,
            &[RecvWr {
                wr_id,
                sg_list: &sge,
            }],
        )
    }
    .unwrap();
}

/// Sends `msg` from `m`'s QP to the group `ud` names; returns when the send
/// completed.
fn send_to_group(sim: &mut SimVerbs, m: &Member, ud: &UdParam, msg: &[u8]) {
    let pd = sim.rdma_id_info(&m.id).unwrap().pd.unwrap();
    let ah = sim.create_ah(&pd, &ud.ah_attr).unwrap();
    let i = sim.mr_info(&m.mr).unwrap();
    sim.mr_bytes_mut(&m.mr).unwrap()[2048..2048 + msg.len()].copy_from_slice(msg);
    let sge = [Sge {
        addr: i.addr + 2048,
        length: msg.len() as u32,
        lkey: i.lkey,
    }];
    // SAFETY: as in post_recv.
    unsafe {
        sim.post_send(
            &m.qp,
            &[SendWr {
                wr_id: 99,
                sg_list: &sge,
                send_flags: SendFlags::SIGNALED,
                ud: Some(UdInfo {
                    ah: &ah,
                    remote_qpn: ud.qp_num,
                    remote_qkey: ud.qkey,
                }),
                ..SendWr::default()
            }],
        )
    }
    .unwrap();
    let scq = sim.rdma_id_info(&m.id).unwrap().send_cq.unwrap();
    let mut wc = [Wc::default(); 1];
    for _ in 0..100 {
        if sim.poll_cq(&scq, &mut wc).unwrap() == 1 {
            break;
        }
        sim.sim_control(SimCommand::AdvanceNs(1_000)).unwrap();
    }
    assert_eq!((wc[0].wr_id, wc[0].status), (99, WcStatus::Success));
    sim.destroy_ah(&ah).unwrap();
}

/// What `m` received since: the payloads (after the 40-byte GRH) and the
/// GRH's destination GID.
fn received(sim: &mut SimVerbs, m: &Member) -> Vec<(Vec<u8>, [u8; 16])> {
    let mut out = Vec::new();
    let mut wc = [Wc::default(); 4];
    let n = sim.poll_cq(&m.cq, &mut wc).unwrap();
    for w in &wc[..n] {
        assert_eq!(w.status, WcStatus::Success);
        assert!(w.wc_flags.contains(WcFlags::GRH));
        let b = sim.mr_bytes(&m.mr).unwrap();
        let len = w.byte_len as usize - 40;
        let mut dgid = [0u8; 16];
        dgid.copy_from_slice(&b[24..40]);
        out.push((b[40..40 + len].to_vec(), dgid));
    }
    out
}

fn three_devices(cm: CmConfig) -> SimVerbs {
    SimVerbs::new(SimConfig {
        cm,
        ..SimConfig::with_devices(vec![DeviceProfile::connectx6(); 3])
    })
}

#[test]
fn mgid_mapping_follows_the_kernel() {
    let ib = LinkLayer::Infiniband;
    // IPv4 over IB, RDMA_PS_UDP: ff12:4001:ffff::0 + low 28 bits.
    let g = mcast_mgid(IpAddr::V4(GROUP), PortSpace::Udp, ib);
    assert_eq!(
        g.0,
        [0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x0f, 1, 2, 3]
    );
    // Without the RDMA CM signature (other port spaces): IPoIB's 401b.
    let g = mcast_mgid(IpAddr::V4(GROUP), PortSpace::Ipoib, ib);
    assert_eq!(g.0[2..4], [0x40, 0x1b]);
    // IPv6: ff12:6001:ffff + the address's last 10 bytes.
    let a: Ipv6Addr = "ff05::1:2:3".parse().unwrap();
    let g = mcast_mgid(IpAddr::V6(a), PortSpace::Udp, ib);
    assert_eq!(g.0[..6], [0xff, 0x12, 0x60, 0x01, 0xff, 0xff]);
    assert_eq!(g.0[6..], a.octets()[6..]);
    // An SA-assigned MGID stays as it is.
    let sa: Ipv6Addr = "ff12:a01b:ffff::42".parse().unwrap();
    assert_eq!(
        mcast_mgid(IpAddr::V6(sa), PortSpace::Udp, ib).0,
        sa.octets()
    );
    // RoCE: IPv4 as ff0e::ffff:a.b.c.d, IPv6 as it is.
    let g = mcast_mgid(IpAddr::V4(GROUP), PortSpace::Udp, LinkLayer::Ethernet);
    assert_eq!(
        g.0,
        [0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3]
    );
}

#[test]
fn join_event_carries_the_group_and_the_context() {
    let mut sim = three_devices(CmConfig::default());
    let m = member(&mut sim, 0);
    sim.rdma_join_multicast(&m.id, group(GROUP), 0xC0FF_EE00)
        .unwrap();
    let ev = expect(&mut sim, &m.ch, CmEventType::MulticastJoin);
    assert_eq!((ev.id, ev.status, ev.context), (m.id, 0, 0xC0FF_EE00));
    let ud = ev.ud.expect("param.ud");
    assert_eq!(ud.qp_num, 0x00FF_FFFF);
    assert_eq!(ud.qkey, RDMA_UDP_QKEY);
    assert_eq!(ud.ah_attr.dlid, MLID_FIRST);
    assert!(ud.ah_attr.is_global);
    assert_eq!(
        ud.ah_attr.grh.dgid,
        mcast_mgid(IpAddr::V4(GROUP), PortSpace::Udp, LinkLayer::Infiniband)
    );
    assert_eq!(ud.ah_attr.port_num, 1);
    // The id's QP is attached: destroying it is refused until it leaves.
    let e = sim.rdma_destroy_qp(&m.id).unwrap_err();
    assert_eq!(e.errno(), EBUSY);
    // Another id on another device joins the same group: same MLID; a
    // second group gets the next one.
    let n = member(&mut sim, 1);
    sim.rdma_join_multicast(&n.id, group(GROUP), 1).unwrap();
    let ev = expect(&mut sim, &n.ch, CmEventType::MulticastJoin);
    assert_eq!(ev.ud.unwrap().ah_attr.dlid, MLID_FIRST);
    sim.rdma_join_multicast(&n.id, group(Ipv4Addr::new(239, 9, 9, 9)), 2)
        .unwrap();
    let ev = expect(&mut sim, &n.ch, CmEventType::MulticastJoin);
    assert_eq!(
        (ev.ud.unwrap().ah_attr.dlid, ev.context),
        (MLID_FIRST + 1, 2)
    );
    // Leaving releases the QP.
    sim.rdma_leave_multicast(&m.id, group(GROUP)).unwrap();
    sim.rdma_destroy_qp(&m.id).unwrap();
    sim.rdma_destroy_id(&m.id).unwrap();
}

#[test]
fn a_multicast_send_reaches_every_member_and_no_one_else() {
    let mut sim = three_devices(CmConfig::default());
    let a = member(&mut sim, 0);
    let b = member(&mut sim, 1);
    let c = member(&mut sim, 2);
    let outsider = member(&mut sim, 1);
    let other_group = Ipv4Addr::new(239, 7, 7, 7);
    let mut ud = None;
    for (m, g) in [
        (&a, GROUP),
        (&b, GROUP),
        (&c, GROUP),
        (&outsider, other_group),
    ] {
        sim.rdma_join_multicast(&m.id, group(g), 0).unwrap();
        let ev = expect(&mut sim, &m.ch, CmEventType::MulticastJoin);
        if g == GROUP {
            ud = ev.ud;
        }
        post_recv(&mut sim, m, 1);
        post_recv(&mut sim, m, 2);
    }
    let ud = ud.unwrap();
    // A sends: B and C receive, and A itself (loopback, mlx5's default).
    send_to_group(&mut sim, &a, &ud, b"to the group");
    let mgid = ud.ah_attr.grh.dgid.0;
    for m in [&a, &b, &c] {
        assert_eq!(
            received(&mut sim, m),
            vec![(b"to the group".to_vec(), mgid)]
        );
    }
    assert!(received(&mut sim, &outsider).is_empty());
    // B leaves: the next send reaches A and C only.
    sim.rdma_leave_multicast(&b.id, group(GROUP)).unwrap();
    send_to_group(&mut sim, &c, &ud, b"second");
    assert!(received(&mut sim, &b).is_empty());
    for m in [&a, &c] {
        assert_eq!(received(&mut sim, m), vec![(b"second".to_vec(), mgid)]);
    }
    assert!(received(&mut sim, &outsider).is_empty());
}

#[test]
fn own_multicast_is_not_looped_back_when_configured() {
    let mut sim = three_devices(CmConfig {
        mcast_self_loopback: false,
        ..CmConfig::default()
    });
    let a = member(&mut sim, 0);
    let b = member(&mut sim, 1);
    let mut ud = None;
    for m in [&a, &b] {
        sim.rdma_join_multicast(&m.id, group(GROUP), 0).unwrap();
        ud = expect(&mut sim, &m.ch, CmEventType::MulticastJoin).ud;
        post_recv(&mut sim, m, 1);
    }
    send_to_group(&mut sim, &a, &ud.unwrap(), b"x");
    assert!(received(&mut sim, &a).is_empty());
    assert_eq!(received(&mut sim, &b).len(), 1);
}

#[test]
fn send_only_join_does_not_attach() {
    let mut sim = three_devices(CmConfig::default());
    let a = member(&mut sim, 0);
    let b = member(&mut sim, 1);
    let attr = JoinMcAttr {
        addr: group(GROUP),
        join_flags: McJoinFlag::SendOnlyFullMember,
    };
    sim.rdma_join_multicast_ex(&a.id, &attr, 5).unwrap();
    let ev = expect(&mut sim, &a.ch, CmEventType::MulticastJoin);
    assert_eq!(ev.context, 5);
    sim.rdma_join_multicast(&b.id, group(GROUP), 0).unwrap();
    expect(&mut sim, &b.ch, CmEventType::MulticastJoin);
    post_recv(&mut sim, &a, 1);
    post_recv(&mut sim, &b, 1);
    send_to_group(&mut sim, &a, &ev.ud.unwrap(), b"only b");
    assert!(received(&mut sim, &a).is_empty());
    assert_eq!(received(&mut sim, &b).len(), 1);
    // Not attached: its QP can go while it is still joined.
    sim.rdma_destroy_qp(&a.id).unwrap();
}

#[test]
fn leaving_before_the_event_drops_it() {
    let mut sim = three_devices(CmConfig::default());
    let a = member(&mut sim, 0);
    sim.rdma_join_multicast(&a.id, group(GROUP), 0).unwrap();
    sim.rdma_leave_multicast(&a.id, group(GROUP)).unwrap();
    assert!(sim.rdma_get_cm_event(&a.ch).unwrap().is_none());
    // Joined again later: a fresh event, and the group's MLID is reused
    // from the allocator (the old group is gone).
    sim.rdma_join_multicast(&a.id, group(GROUP), 0).unwrap();
    let ev = expect(&mut sim, &a.ch, CmEventType::MulticastJoin);
    assert_eq!(ev.ud.unwrap().ah_attr.dlid, MLID_FIRST + 1);
}

#[test]
fn multicast_errors() {
    let mut sim = three_devices(CmConfig::default());
    let a = member(&mut sim, 0);
    // Joining the same address twice.
    sim.rdma_join_multicast(&a.id, group(GROUP), 0).unwrap();
    let e = sim.rdma_join_multicast(&a.id, group(GROUP), 0).unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaJoinMulticast, EADDRINUSE));
    // Leaving a group not joined.
    let e = sim
        .rdma_leave_multicast(&a.id, group(Ipv4Addr::new(239, 0, 0, 9)))
        .unwrap_err();
    assert_eq!(
        (e.verb(), e.errno()),
        (Verb::RdmaLeaveMulticast, EADDRNOTAVAIL)
    );
    // Not a multicast address.
    let e = sim
        .rdma_join_multicast(&a.id, SocketAddr::from((device_ipv4(1), 0)), 0)
        .unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    // A connected port space.
    let ch = sim.rdma_create_event_channel().unwrap();
    let tcp = sim.rdma_create_id(&ch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&tcp, SocketAddr::from((device_ipv4(0), 0)))
        .unwrap();
    let e = sim.rdma_join_multicast(&tcp, group(GROUP), 0).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    // An idle id, and one bound to the wildcard (no device).
    let idle = sim.rdma_create_id(&ch, 0, PortSpace::Udp).unwrap();
    let e = sim.rdma_join_multicast(&idle, group(GROUP), 0).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    sim.rdma_bind_addr(&idle, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
        .unwrap();
    let e = sim.rdma_join_multicast(&idle, group(GROUP), 0).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    // An id without a QP joins (nothing to attach).
    let noqp = sim.rdma_create_id(&ch, 0, PortSpace::Udp).unwrap();
    sim.rdma_bind_addr(&noqp, SocketAddr::from((device_ipv4(2), 0)))
        .unwrap();
    sim.rdma_join_multicast(&noqp, group(GROUP), 3).unwrap();
    let ev = expect(&mut sim, &ch, CmEventType::MulticastJoin);
    assert_eq!((ev.id, ev.context), (noqp, 3));
    // The failed calls changed nothing: the first join's event comes.
    expect(&mut sim, &a.ch, CmEventType::MulticastJoin);
    // Destroying a joined id without a QP releases its groups.
    sim.rdma_destroy_id(&noqp).unwrap();
}
