//! Two QPs on two simulated devices, connected, for the data-path tests:
//! setup, posting and draining completion queues through the `Verbs` trait.
#![allow(dead_code, unreachable_pub, missing_docs, unsafe_code)]

use backend_sim::{ContextHandle, CqHandle, MrHandle, PdHandle, QpHandle, SimConfig, SimVerbs};
use verbs_api::*;

/// One side of a pair: device `index` with its PD, CQ and QP.
#[derive(Clone, Copy, Debug)]
pub struct End {
    pub index: usize,
    pub ctx: ContextHandle,
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub qp: QpHandle,
    pub qpn: u32,
    /// Port 1's LID (0 on RoCE).
    pub lid: u16,
    /// Port 1's GID 0.
    pub gid: Gid,
    /// Whether an address vector to this device needs a GRH.
    pub grh: bool,
}

/// Two connected (or UD-ready) QPs: `a` on device 0, `b` on device 1.
pub struct Pair {
    pub sim: SimVerbs,
    pub a: End,
    pub b: End,
}

/// The RC connection attributes both QPs get (`a_sq_psn` is `a`'s send PSN
/// and `b`'s receive PSN, and the other way round).
#[derive(Clone, Copy, Debug)]
pub struct RcParams {
    pub path_mtu: Mtu,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub a_sq_psn: u32,
    pub b_sq_psn: u32,
    pub max_rd_atomic: u8,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
}

impl Default for RcParams {
    fn default() -> Self {
        Self {
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            a_sq_psn: 0,
            b_sq_psn: 0,
            max_rd_atomic: 4,
            max_send_wr: 64,
            max_recv_wr: 64,
        }
    }
}

/// Opens device `index` with a PD and a 256-entry CQ; the QP is filled in later.
pub fn open_end(
    sim: &mut SimVerbs,
    index: usize,
) -> (ContextHandle, PdHandle, CqHandle, u16, Gid, bool) {
    let ctx = sim.open_device(index, ProcessId(0)).unwrap();
    let pd = sim.alloc_pd(&ctx).unwrap();
    let cq = sim
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 256,
                ..CqInit::default()
            },
        )
        .unwrap();
    let port = sim.query_port(&ctx, 1).unwrap();
    let gid = sim.query_gid(&ctx, 1, 0).unwrap();
    let grh = sim.world().device_profile(index).unwrap().grh_required();
    (ctx, pd, cq, port.lid, gid, grh)
}

fn create(sim: &mut SimVerbs, index: usize, qp_type: QpType, send_wr: u32, recv_wr: u32) -> End {
    let (ctx, pd, cq, lid, gid, grh) = open_end(sim, index);
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: send_wr,
            max_recv_wr: recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    let qp = sim.create_qp(&pd, &mut attr).unwrap();
    let qpn = sim.qp_num(&qp).unwrap();
    End {
        index,
        ctx,
        pd,
        cq,
        qp,
        qpn,
        lid,
        gid,
        grh,
    }
}

/// An address vector that reaches port 1 of `peer`.
pub fn av_to(peer: &End) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: peer.gid,
            sgid_index: 0,
            hop_limit: 64,
            ..GlobalRoute::default()
        },
        dlid: peer.lid,
        is_global: peer.grh,
        port_num: 1,
        ..AhAttr::default()
    }
}

/// RESET→INIT→RTR for `me` towards `peer`, with exactly the masks the
/// transition table requires for RC.
pub fn rc_to_rtr(sim: &mut SimVerbs, me: &End, peer: &End, p: &RcParams, rq_psn: u32) {
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        pkey_index: 0,
        qp_access_flags: AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC,
        ..QpAttr::default()
    };
    sim.modify_qp(
        &me.qp,
        &init,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .unwrap();
    let rtr = QpAttr {
        qp_state: QpState::ReadyToReceive,
        ah_attr: av_to(peer),
        path_mtu: p.path_mtu,
        dest_qp_num: peer.qpn,
        rq_psn,
        max_dest_rd_atomic: p.max_rd_atomic,
        min_rnr_timer: p.min_rnr_timer,
        ..QpAttr::default()
    };
    sim.modify_qp(
        &me.qp,
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
}

pub fn rc_to_rts(sim: &mut SimVerbs, me: &End, p: &RcParams, sq_psn: u32) {
    let rts = QpAttr {
        qp_state: QpState::ReadyToSend,
        timeout: p.timeout,
        retry_cnt: p.retry_cnt,
        rnr_retry: p.rnr_retry,
        sq_psn,
        max_rd_atomic: p.max_rd_atomic,
        ..QpAttr::default()
    };
    sim.modify_qp(
        &me.qp,
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

/// Two RC QPs on devices 0 and 1 of a world built from `config`, both in RTS
/// and connected to each other with `p`.
pub fn rc_pair(config: SimConfig, p: &RcParams) -> Pair {
    let mut sim = SimVerbs::new(config);
    let a = create(&mut sim, 0, QpType::Rc, p.max_send_wr, p.max_recv_wr);
    let b = create(&mut sim, 1, QpType::Rc, p.max_send_wr, p.max_recv_wr);
    rc_to_rtr(&mut sim, &a, &b, p, p.b_sq_psn);
    rc_to_rtr(&mut sim, &b, &a, p, p.a_sq_psn);
    rc_to_rts(&mut sim, &a, p, p.a_sq_psn);
    rc_to_rts(&mut sim, &b, p, p.b_sq_psn);
    Pair { sim, a, b }
}

/// Two UD QPs on devices 0 and 1, in RTS, with Q_Keys `qkey_a` and `qkey_b`.
pub fn ud_pair(config: SimConfig, qkey_a: u32, qkey_b: u32) -> Pair {
    let mut sim = SimVerbs::new(config);
    let a = create(&mut sim, 0, QpType::Ud, 64, 64);
    let b = create(&mut sim, 1, QpType::Ud, 64, 64);
    for (end, qkey) in [(&a, qkey_a), (&b, qkey_b)] {
        let init = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            pkey_index: 0,
            qkey,
            ..QpAttr::default()
        };
        sim.modify_qp(
            &end.qp,
            &init,
            QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
        )
        .unwrap();
        sim.modify_qp(
            &end.qp,
            &QpAttr {
                qp_state: QpState::ReadyToReceive,
                ..QpAttr::default()
            },
            QpAttrMask::STATE,
        )
        .unwrap();
        sim.modify_qp(
            &end.qp,
            &QpAttr {
                qp_state: QpState::ReadyToSend,
                sq_psn: 0,
                ..QpAttr::default()
            },
            QpAttrMask::STATE | QpAttrMask::SQ_PSN,
        )
        .unwrap();
    }
    Pair { sim, a, b }
}

/// `ibv_post_send`.
pub fn post_send(sim: &mut SimVerbs, qp: QpHandle, wrs: &[SendWr<'_, SimVerbs>]) -> Result<()> {
    // SAFETY: the MRs named stay registered until the completions are
    // reaped; the simulator owns every byte and checks the rest.
    unsafe { sim.post_send(&qp, wrs) }
}

/// `ibv_post_recv`.
pub fn post_recv(sim: &mut SimVerbs, qp: QpHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
    // SAFETY: as for `post_send`.
    unsafe { sim.post_recv(&qp, wrs) }
}

/// Polls `cq` one completion at a time until it is empty with nothing left
/// to process (the simulator's `poll_cq` runs virtual time while the CQ is
/// empty), at most `max` completions.
pub fn drain(sim: &mut SimVerbs, cq: CqHandle, max: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut wc = [Wc::default()];
    while out.len() < max {
        if sim.poll_cq(&cq, &mut wc).unwrap() == 0 {
            break;
        }
        out.push(wc[0]);
    }
    out
}

/// An SGE over `len` bytes at `offset` of an MR with address `addr` and `lkey`.
pub fn sge(info: &MrInfo, offset: u64, len: u32) -> Sge {
    Sge {
        addr: info.addr + offset,
        length: len,
        lkey: info.lkey,
    }
}

/// Registers `len` bytes with every access a data-path test needs.
pub fn reg_all(sim: &mut SimVerbs, pd: PdHandle, len: usize) -> (MrHandle, MrInfo) {
    let mr = sim
        .reg_mr(
            &pd,
            len,
            AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
        )
        .unwrap();
    let info = sim.mr_info(&mr).unwrap();
    (mr, info)
}

/// Fails with a clear message when the simulator does not execute work
/// requests yet (`Capabilities::DATA_PATH`).
pub fn require_data_path(sim: &mut SimVerbs) {
    assert!(
        sim.capabilities().contains(Capabilities::DATA_PATH),
        "the simulator does not report Capabilities::DATA_PATH: work requests are not executed"
    );
}
