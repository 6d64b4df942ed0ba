//! `rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)` (the kernel's
//! `rdma_set_ack_timeout`): the CM's RTS transition gives the id's QP that
//! `timeout` instead of `CmConfig::ack_timeout`; more than 5 bits is EINVAL.

#![allow(missing_docs)]

use std::net::SocketAddr;

use backend_sim::{device_ipv4, CmChannelHandle, CmIdHandle, SimVerbs};
use verbs_api::*;

fn event(sim: &mut SimVerbs, ch: &CmChannelHandle, want: CmEventType) -> CmIdHandle {
    let ev = sim.rdma_get_cm_event(ch).unwrap().expect("an event");
    assert_eq!(ev.event, want);
    let id = ev.id;
    sim.rdma_ack_cm_event(ev).unwrap();
    id
}

fn qp_attr() -> QpInitAttrEx<'static, SimVerbs> {
    QpInitAttrEx {
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        ..QpInitAttrEx::default()
    }
}

#[test]
fn the_ack_timeout_option_reaches_the_qp_at_rts() {
    let mut sim = SimVerbs::default();
    let default = sim.world().config().cm.ack_timeout;
    let sch = sim.rdma_create_event_channel().unwrap();
    let listen = sim.rdma_create_id(&sch, 0, PortSpace::Tcp).unwrap();
    let server = SocketAddr::from((device_ipv4(1), 7473));
    sim.rdma_bind_addr(&listen, server).unwrap();
    sim.rdma_listen(&listen, 4).unwrap();
    let cch = sim.rdma_create_event_channel().unwrap();
    let cid = sim.rdma_create_id(&cch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_resolve_addr(&cid, None, server, 2000).unwrap();
    event(&mut sim, &cch, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&cid, 2000).unwrap();
    event(&mut sim, &cch, CmEventType::RouteResolved);
    let cqp = sim.rdma_create_qp(&cid, None, &mut qp_attr()).unwrap();

    let e = sim.world_mut().rdma_set_ack_timeout(cid, 32).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL, "{e}");
    let t_client = if default == 21 { 20 } else { 21 };
    sim.world_mut().rdma_set_ack_timeout(cid, t_client).unwrap();
    sim.rdma_connect(
        &cid,
        &ConnParam {
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnParam::default()
        },
    )
    .unwrap();
    let sid = event(&mut sim, &sch, CmEventType::ConnectRequest);
    let sqp = sim.rdma_create_qp(&sid, None, &mut qp_attr()).unwrap();
    sim.rdma_accept(
        &sid,
        &ConnParam {
            responder_resources: 1,
            initiator_depth: 1,
            ..ConnParam::default()
        },
    )
    .unwrap();
    event(&mut sim, &cch, CmEventType::Established);
    event(&mut sim, &sch, CmEventType::Established);
    let (a, _) = sim
        .query_qp(&cqp, QpAttrMask::TIMEOUT | QpAttrMask::STATE)
        .unwrap();
    assert_eq!((a.qp_state, a.timeout), (QpState::ReadyToSend, t_client));
    let (b, _) = sim
        .query_qp(&sqp, QpAttrMask::TIMEOUT | QpAttrMask::STATE)
        .unwrap();
    assert_eq!(
        (b.qp_state, b.timeout),
        (QpState::ReadyToSend, default),
        "the server's id kept the default"
    );
}

/// A passive side that moves its own QP with `rdma_init_qp_attr` up to RTS
/// before `rdma_accept` (pyverbs' external-QP test) gets the send PSN its
/// REP then carries: the active side's `rq_psn` matches it.
#[test]
fn a_passive_rts_before_accept_uses_the_psn_of_its_rep() {
    let mut sim = SimVerbs::default();
    let sch = sim.rdma_create_event_channel().unwrap();
    let listen = sim.rdma_create_id(&sch, 0, PortSpace::Tcp).unwrap();
    let server = SocketAddr::from((device_ipv4(1), 7474));
    sim.rdma_bind_addr(&listen, server).unwrap();
    sim.rdma_listen(&listen, 4).unwrap();
    let cch = sim.rdma_create_event_channel().unwrap();
    let cid = sim.rdma_create_id(&cch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_resolve_addr(&cid, None, server, 2000).unwrap();
    event(&mut sim, &cch, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&cid, 2000).unwrap();
    event(&mut sim, &cch, CmEventType::RouteResolved);
    sim.rdma_connect(
        &cid,
        &ConnParam {
            qp_num: 0x1234,
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnParam::default()
        },
    )
    .unwrap();
    let sid = event(&mut sim, &sch, CmEventType::ConnectRequest);
    let (rts, mask) = sim.rdma_init_qp_attr(&sid, QpState::ReadyToSend).unwrap();
    assert!(mask.contains(QpAttrMask::SQ_PSN));
    let (again, _) = sim.rdma_init_qp_attr(&sid, QpState::ReadyToSend).unwrap();
    assert_eq!(again.sq_psn, rts.sq_psn, "asked twice, one PSN");
    sim.rdma_accept(
        &sid,
        &ConnParam {
            qp_num: 0x5678,
            responder_resources: 1,
            initiator_depth: 1,
            ..ConnParam::default()
        },
    )
    .unwrap();
    event(&mut sim, &cch, CmEventType::ConnectResponse);
    let (rtr, _) = sim
        .rdma_init_qp_attr(&cid, QpState::ReadyToReceive)
        .unwrap();
    assert_eq!(rtr.dest_qp_num, 0x5678);
    assert_eq!(
        rtr.rq_psn, rts.sq_psn,
        "the REP carried the PSN the passive QP sends with"
    );
}
