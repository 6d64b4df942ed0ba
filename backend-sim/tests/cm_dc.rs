//! DC targets reached through rdma_cm (issue #18 item 8): the CM resolves
//! the path and exchanges QP numbers; the application's own DCI and DCT
//! (`mlx5dv_create_qp`) are moved with `rdma_init_qp_attr`'s attributes.

#![allow(missing_docs, unsafe_code)]

mod common;

use std::net::SocketAddr;

use backend_sim::{device_ipv4, CmChannelHandle, CmIdHandle, QpHandle, SimVerbs};
use common::datapath::{drain, reg_all, sge};
use verbs_api::errno::EINVAL;
use verbs_api::*;

const PORT: u16 = 7472;
const KEY: u64 = 0x5eed;

fn event(sim: &mut SimVerbs, ch: &CmChannelHandle, want: CmEventType) -> (CmIdHandle, ConnParam) {
    let ev = sim.rdma_get_cm_event(ch).unwrap().expect("an event");
    assert_eq!(ev.event, want, "status {}", ev.status);
    let out = (ev.id, ev.conn.clone());
    sim.rdma_ack_cm_event(ev).unwrap();
    out
}

fn dc_attr(dc_type: DcType) -> Mlx5QpInitAttr {
    let mut a = Mlx5QpInitAttr {
        comp_mask: Mlx5QpInitAttrMask::DC,
        ..Mlx5QpInitAttr::default()
    };
    a.dc_init_attr.dc_type = dc_type;
    a.dc_init_attr.dct_access_key = KEY;
    a
}

/// Moves `qp` to `state` with the id's attributes, keeping the mask bits
/// the DC QP type takes (as applications do with a DCI/DCT).
fn step(
    sim: &mut SimVerbs,
    id: &CmIdHandle,
    qp: &QpHandle,
    state: QpState,
    keep: QpAttrMask,
) -> QpAttr {
    let (attr, mask) = sim.rdma_init_qp_attr(id, state).unwrap();
    assert!(mask.contains(QpAttrMask::STATE), "{mask}");
    assert_eq!(attr.qp_state, state);
    sim.modify_qp(qp, &attr, mask.intersection(keep)).unwrap();
    attr
}

#[test]
fn dci_and_dct_connected_through_rdma_cm() {
    // Goal: an RDMA WRITE from a DCI to a DCT, both made with
    // mlx5dv_create_qp and brought up only with rdma_init_qp_attr's
    // attributes and the DC numbers exchanged by rdma_connect/accept.
    let mut sim = SimVerbs::default();
    let sch = sim.rdma_create_event_channel().unwrap();
    let listen = sim.rdma_create_id(&sch, 0, PortSpace::Tcp).unwrap();
    let server_addr = SocketAddr::from((device_ipv4(1), PORT));
    sim.rdma_bind_addr(&listen, server_addr).unwrap();
    sim.rdma_listen(&listen, 4).unwrap();
    let cch = sim.rdma_create_event_channel().unwrap();
    let cid = sim.rdma_create_id(&cch, 0, PortSpace::Tcp).unwrap();
    sim.rdma_resolve_addr(
        &cid,
        Some(SocketAddr::from((device_ipv4(0), 0))),
        server_addr,
        2000,
    )
    .unwrap();
    event(&mut sim, &cch, CmEventType::AddrResolved);
    sim.rdma_resolve_route(&cid, 2000).unwrap();
    event(&mut sim, &cch, CmEventType::RouteResolved);

    // Before a connection there is nothing to build RTR from.
    let e = sim
        .rdma_init_qp_attr(&cid, QpState::ReadyToReceive)
        .unwrap_err();
    assert_eq!((e.verb(), e.errno()), (Verb::RdmaInitQpAttr, EINVAL));
    let e = sim
        .rdma_init_qp_attr(&cid, QpState::SendQueueDrain)
        .unwrap_err();
    assert_eq!(e.errno(), EINVAL);

    // Client: a DCI on the id's device.
    let c0 = sim.rdma_id_info(&cid).unwrap().verbs.expect("bound");
    let pd0 = sim.alloc_pd(&c0).unwrap();
    let cq0 = sim
        .create_cq(
            &c0,
            &CqInit {
                cqe: 16,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut qa = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Driver,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&pd0),
        send_cq: Some(&cq0),
        recv_cq: Some(&cq0),
        cap: QpCap {
            max_send_wr: 8,
            max_send_sge: 1,
            ..QpCap::default()
        },
        ..QpInitAttrEx::default()
    };
    let dci = sim
        .mlx5dv_create_qp(&c0, &mut qa, &dc_attr(DcType::Dci))
        .unwrap();
    let dci_num = sim.qp_num(&dci).unwrap();
    sim.rdma_connect(
        &cid,
        &ConnParam {
            qp_num: dci_num,
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnParam::default()
        },
    )
    .unwrap();

    // Server: a DCT on the connecting id's device, its number in the REP.
    let (sid, req) = event(&mut sim, &sch, CmEventType::ConnectRequest);
    assert_eq!(req.qp_num, dci_num);
    let c1 = sim.rdma_id_info(&sid).unwrap().verbs.expect("bound");
    let pd1 = sim.alloc_pd(&c1).unwrap();
    let cq1 = sim
        .create_cq(
            &c1,
            &CqInit {
                cqe: 16,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut sa = SrqAttr {
        max_wr: 4,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = sim.create_srq(&pd1, &mut sa).unwrap();
    let mut ta = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Driver,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&pd1),
        send_cq: Some(&cq1),
        recv_cq: Some(&cq1),
        srq: Some(&srq),
        ..QpInitAttrEx::default()
    };
    let dct = sim
        .mlx5dv_create_qp(&c1, &mut ta, &dc_attr(DcType::Dct))
        .unwrap();
    use QpAttrMask as M;
    let init = step(
        &mut sim,
        &sid,
        &dct,
        QpState::Init,
        M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
    );
    assert!(init.qp_access_flags.contains(AccessFlags::REMOTE_WRITE));
    step(
        &mut sim,
        &sid,
        &dct,
        QpState::ReadyToReceive,
        M::STATE | M::AV | M::PATH_MTU | M::MIN_RNR_TIMER,
    );
    // mlx5 numbers a DCT when it reaches RTR.
    let dct_num = sim.qp_num(&dct).unwrap();
    assert_ne!(dct_num, 0);
    sim.rdma_accept(
        &sid,
        &ConnParam {
            qp_num: dct_num,
            responder_resources: 1,
            initiator_depth: 1,
            rnr_retry_count: 7,
            ..ConnParam::default()
        },
    )
    .unwrap();
    let (_, rep) = event(&mut sim, &cch, CmEventType::ConnectResponse);
    assert_eq!(rep.qp_num, dct_num);

    // Client: the DCI to RTS; the path of its RTR attributes becomes the AH.
    step(
        &mut sim,
        &cid,
        &dci,
        QpState::Init,
        M::STATE | M::PKEY_INDEX | M::PORT,
    );
    let rtr = step(
        &mut sim,
        &cid,
        &dci,
        QpState::ReadyToReceive,
        M::STATE | M::PATH_MTU,
    );
    let rts = step(
        &mut sim,
        &cid,
        &dci,
        QpState::ReadyToSend,
        M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
    );
    assert_eq!((rtr.dest_qp_num, rts.max_rd_atomic), (dct_num, 1));
    let ah = sim.create_ah(&pd0, &rtr.ah_attr).unwrap();

    let (src, si) = reg_all(&mut sim, pd0, 4096);
    let (_dst, di) = reg_all(&mut sim, pd1, 4096);
    sim.mr_bytes_mut(&src).unwrap()[..32].fill(0xd5);
    let s = [sge(&si, 0, 32)];
    let wr = SendWr::<SimVerbs> {
        wr_id: 9,
        sg_list: &s,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: di.addr + 64,
            rkey: di.rkey,
        },
        dc: Some(DcInfo {
            ah: &ah,
            remote_dctn: rep.qp_num,
            remote_dc_key: KEY,
            stream_id: 0,
        }),
        ..SendWr::default()
    };
    // SAFETY: both MRs outlive the request, drained below.
    unsafe { sim.post_send(&dci, &[wr]).unwrap() };
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let wcs = drain(&mut sim, cq0, 4);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (9, WcStatus::Success));
    let bytes = sim.mr_bytes(&_dst).unwrap();
    assert!(bytes[64..96].iter().all(|&b| b == 0xd5));
    assert!(bytes[..64].iter().all(|&b| b == 0));
}
