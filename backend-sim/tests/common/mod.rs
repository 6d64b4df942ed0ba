//! Shared fixtures for the backend-sim integration tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use backend_sim::{CqHandle, DeviceProfile, PdHandle, QpHandle, SimConfig, SimVerbs};
use verbs_api::*;

pub struct Fixture {
    pub sim: SimVerbs,
    pub ctx: <SimVerbs as Verbs>::Context,
    pub pd: PdHandle,
    pub cq: CqHandle,
}

pub fn fixture(profile: DeviceProfile) -> Fixture {
    let mut sim = SimVerbs::new(SimConfig::with_devices(vec![profile]));
    let ctx = sim.open_device(0, ProcessId(0)).unwrap();
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
    Fixture { sim, ctx, pd, cq }
}

pub fn cx6() -> Fixture {
    fixture(DeviceProfile::connectx6())
}

pub fn caps(send_wr: u32, recv_wr: u32, send_sge: u32, recv_sge: u32, inline: u32) -> QpCap {
    QpCap {
        max_send_wr: send_wr,
        max_recv_wr: recv_wr,
        max_send_sge: send_sge,
        max_recv_sge: recv_sge,
        max_inline_data: inline,
    }
}

impl Fixture {
    pub fn create(&mut self, qp_type: QpType, cap: QpCap) -> Result<(QpHandle, QpCap)> {
        let mut attr = QpInitAttrEx::<SimVerbs> {
            qp_type,
            send_cq: Some(&self.cq),
            recv_cq: Some(&self.cq),
            cap,
            ..QpInitAttrEx::default()
        };
        let qp = self.sim.create_qp(&self.pd, &mut attr)?;
        Ok((qp, attr.cap))
    }

    pub fn rc(&mut self) -> QpHandle {
        self.create(QpType::Rc, caps(16, 16, 1, 1, 0)).unwrap().0
    }

    pub fn state(&mut self, qp: QpHandle) -> QpState {
        self.sim
            .query_qp(&qp, QpAttrMask::STATE)
            .unwrap()
            .0
            .qp_state
    }

    pub fn query(&mut self, qp: QpHandle) -> QpAttr {
        self.sim.query_qp(&qp, QpAttrMask::STATE).unwrap().0
    }

    pub fn modify(&mut self, qp: QpHandle, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.sim.modify_qp(&qp, attr, mask)
    }

    pub fn av(&self) -> AhAttr {
        let global = self.sim.world().device_profile(0).unwrap().grh_required();
        AhAttr {
            dlid: 2,
            port_num: 1,
            is_global: global,
            ..AhAttr::default()
        }
    }

    pub fn goto_init(&mut self, qp: QpHandle) {
        let a = init_attr();
        self.modify(qp, &a, init_mask()).unwrap();
    }

    pub fn goto_rtr(&mut self, qp: QpHandle) {
        self.goto_init(qp);
        let a = self.rtr_attr();
        self.modify(qp, &a, rtr_mask()).unwrap();
    }

    pub fn goto_rts(&mut self, qp: QpHandle) {
        self.goto_rtr(qp);
        self.modify(qp, &rts_attr(), rts_mask()).unwrap();
    }

    pub fn rtr_attr(&self) -> QpAttr {
        QpAttr {
            qp_state: QpState::ReadyToReceive,
            ah_attr: self.av(),
            path_mtu: Mtu::Mtu1024,
            dest_qp_num: 0x123,
            rq_psn: 7,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            ..QpAttr::default()
        }
    }
}

pub fn init_attr() -> QpAttr {
    QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        pkey_index: 0,
        qp_access_flags: AccessFlags::REMOTE_WRITE,
        ..QpAttr::default()
    }
}

pub fn init_mask() -> QpAttrMask {
    QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS
}

pub fn rtr_mask() -> QpAttrMask {
    QpAttrMask::STATE
        | QpAttrMask::AV
        | QpAttrMask::PATH_MTU
        | QpAttrMask::DEST_QPN
        | QpAttrMask::RQ_PSN
        | QpAttrMask::MAX_DEST_RD_ATOMIC
        | QpAttrMask::MIN_RNR_TIMER
}

pub fn rts_attr() -> QpAttr {
    QpAttr {
        qp_state: QpState::ReadyToSend,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        sq_psn: 9,
        max_rd_atomic: 4,
        ..QpAttr::default()
    }
}

pub fn rts_mask() -> QpAttrMask {
    QpAttrMask::STATE
        | QpAttrMask::TIMEOUT
        | QpAttrMask::RETRY_CNT
        | QpAttrMask::RNR_RETRY
        | QpAttrMask::SQ_PSN
        | QpAttrMask::MAX_QP_RD_ATOMIC
}

pub fn state_only(s: QpState) -> QpAttr {
    QpAttr {
        qp_state: s,
        ..QpAttr::default()
    }
}

pub mod datapath;
