//! `rdma_migrate_id`, `rdma_notify` and `rdma_reject_ece` through the
//! `Verbs` trait.
#![allow(missing_docs)]

use std::net::SocketAddr;

use backend_sim::{device_ipv4, CmChannelHandle, CmIdHandle, SimVerbs};
use verbs_api::errno::{EINVAL, EISCONN};
use verbs_api::*;

const PORT: u16 = 7490;

fn server_addr() -> SocketAddr {
    SocketAddr::from((device_ipv4(1), PORT))
}

/// The next event of `ch` (acknowledged), which must be `want`: its id
/// and status.
fn expect(sim: &mut SimVerbs, ch: &CmChannelHandle, want: CmEventType) -> (CmIdHandle, i32) {
    let ev = sim
        .rdma_get_cm_event(ch)
        .unwrap()
        .unwrap_or_else(|| panic!("expected {want}, got no event"));
    assert_eq!(ev.event, want, "status {}", ev.status);
    let out = (ev.id, ev.status);
    sim.rdma_ack_cm_event(ev).unwrap();
    out
}

fn nothing(sim: &mut SimVerbs, ch: &CmChannelHandle) {
    assert_eq!(sim.world().cm_channel_pending(*ch).unwrap(), 0);
}

fn param(qp_num: u32) -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num,
        ..ConnParam::default()
    }
}

fn rc_qp(sim: &mut SimVerbs, id: &CmIdHandle) {
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    sim.rdma_create_qp(id, None, &mut attr).unwrap();
}

/// A listener on `sch` and a client on `cch` with its route resolved.
fn listener_and_client(
    sim: &mut SimVerbs,
) -> (CmChannelHandle, CmIdHandle, CmChannelHandle, CmIdHandle) {
    let sch = sim.rdma_create_event_channel().unwrap();
    let listen = sim.rdma_create_id(&sch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_bind_addr(&listen, server_addr()).unwrap();
    sim.rdma_listen(&listen, 4).unwrap();
    let cch = sim.rdma_create_event_channel().unwrap();
    let client = sim.rdma_create_id(&cch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_resolve_addr(&client, None, server_addr(), 100)
        .unwrap();
    expect(sim, &cch, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&client, 100).unwrap();
    expect(sim, &cch, CmEventType::RouteResolved);
    (sch, listen, cch, client)
}

#[test]
fn a_migrated_listener_takes_its_queued_requests_and_their_ids_along() {
    // Goal: events queued before rdma_migrate_id, and the ids connection
    // requests brought, follow the listener to the new channel; the old
    // channel is left empty and free. Method: connect, migrate before
    // fetching the request, then finish the handshake on the new channel.
    let mut sim = SimVerbs::default();
    let (sch, listen, cch, client) = listener_and_client(&mut sim);
    rc_qp(&mut sim, &client);
    sim.rdma_connect(&client, &param(0)).unwrap();
    sim.sim_control(SimCommand::AdvanceNs(100_000)).unwrap();
    assert_eq!(
        sim.world().cm_channel_pending(sch).unwrap(),
        1,
        "the request waits on sch"
    );
    let lch = sim.rdma_create_event_channel().unwrap();
    sim.rdma_migrate_id(&listen, &lch).unwrap();
    nothing(&mut sim, &sch);
    let (server, _) = expect(&mut sim, &lch, CmEventType::ConnectRequest);
    rc_qp(&mut sim, &server);
    sim.rdma_accept(&server, &param(0)).unwrap();
    expect(&mut sim, &cch, CmEventType::Established);
    expect(&mut sim, &lch, CmEventType::Established);
    // No id is left on sch: it can go.
    sim.rdma_destroy_event_channel(&sch).unwrap();
    // A destroyed channel is not a target.
    let e = sim.rdma_migrate_id(&client, &sch).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
}

#[test]
fn comm_est_establishes_a_passive_side_waiting_for_its_rtu() {
    // Goal: rdma_notify(COMM_EST) on a passive id whose REP is answered by
    // no RTU yet (the active side has no QP and has not called
    // rdma_establish) gives ESTABLISHED at once; the RTU then adds nothing;
    // a second COMM_EST is EISCONN; other events and ids are EINVAL.
    let mut sim = SimVerbs::default();
    let (sch, listen, cch, client) = listener_and_client(&mut sim);
    sim.rdma_connect(&client, &param(0x123)).unwrap();
    let (server, _) = expect(&mut sim, &sch, CmEventType::ConnectRequest);
    rc_qp(&mut sim, &server);
    let e = sim
        .rdma_notify(&server, AsyncEventType::CommEst)
        .unwrap_err();
    assert_eq!(e.errno(), EINVAL, "no REP sent yet");
    sim.rdma_accept(&server, &param(0)).unwrap();
    expect(&mut sim, &cch, CmEventType::ConnectResponse);
    nothing(&mut sim, &sch);
    sim.rdma_notify(&server, AsyncEventType::CommEst).unwrap();
    expect(&mut sim, &sch, CmEventType::Established);
    sim.rdma_establish(&client).unwrap();
    nothing(&mut sim, &sch);
    let e = sim
        .rdma_notify(&server, AsyncEventType::CommEst)
        .unwrap_err();
    assert_eq!(e.errno(), EISCONN);
    let e = sim
        .rdma_notify(&server, AsyncEventType::QpFatal)
        .unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    let e = sim
        .rdma_notify(&listen, AsyncEventType::CommEst)
        .unwrap_err();
    assert_eq!(e.errno(), EINVAL);
}

#[test]
fn reject_ece_gives_the_active_side_reason_35() {
    // Goal: rdma_reject_ece answers the request with REJ reason
    // IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED (35), rdma_reject with 28.
    for (ece, reason) in [(true, 35), (false, 28)] {
        let mut sim = SimVerbs::default();
        let (sch, _listen, cch, client) = listener_and_client(&mut sim);
        rc_qp(&mut sim, &client);
        sim.rdma_connect(&client, &param(0)).unwrap();
        let (server, _) = expect(&mut sim, &sch, CmEventType::ConnectRequest);
        if ece {
            sim.rdma_reject_ece(&server, b"no").unwrap();
        } else {
            sim.rdma_reject(&server, b"no").unwrap();
        }
        let (_, status) = expect(&mut sim, &cch, CmEventType::Rejected);
        assert_eq!(status, reason);
    }
}
