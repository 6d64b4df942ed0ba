//! Shared set-up of every workload: an open device with a PD and a CQ, the
//! path to a peer port, and the attributes that walk an RC, UC or UD QP
//! from RESET to RTS.
//!
//! The attribute values are the ones perftest and the pyverbs helpers use
//! (port 1, P_Key index 0, GID index 0, `timeout` 14, `retry_cnt` 7,
//! `rnr_retry` 6, `min_rnr_timer` 12, PSNs 0, Q_Key [`QKEY`]), clamped to
//! the device's read and atomic limits, so they pass every range check of
//! `spec/qp-state-machine.md` §5.2 on either backend. Every transition uses
//! exactly the required attribute mask of its QP type (checked against the
//! transition table by the tests below).

use verbs_api::{
    AccessFlags, AhAttr, AtomicCap, CqInit, Error, ErrorKind, Gid, GlobalRoute, LinkLayer, Mtu,
    ProcessId, QpAttr, QpAttrMask, QpCap, QpInitAttrEx, QpState, QpType, Result, Verb, Verbs,
    QPF_GRH_REQUIRED,
};

/// The port every workload uses.
pub const PORT: u8 = 1;

/// The process every workload's contexts belong to.
pub const PROCESS: ProcessId = ProcessId(0);

/// RESET→INIT mask of an RC QP: exactly the required bits (spec §4.1).
pub const RC_INIT_MASK: QpAttrMask = QpAttrMask::STATE
    .union(QpAttrMask::PKEY_INDEX)
    .union(QpAttrMask::PORT)
    .union(QpAttrMask::ACCESS_FLAGS);

/// INIT→RTR mask of an RC QP: exactly the required bits (spec §4.3).
pub const RC_RTR_MASK: QpAttrMask = QpAttrMask::STATE
    .union(QpAttrMask::AV)
    .union(QpAttrMask::PATH_MTU)
    .union(QpAttrMask::DEST_QPN)
    .union(QpAttrMask::RQ_PSN)
    .union(QpAttrMask::MAX_DEST_RD_ATOMIC)
    .union(QpAttrMask::MIN_RNR_TIMER);

/// RTR→RTS mask of an RC QP: exactly the required bits (spec §4.4).
pub const RC_RTS_MASK: QpAttrMask = QpAttrMask::STATE
    .union(QpAttrMask::TIMEOUT)
    .union(QpAttrMask::RETRY_CNT)
    .union(QpAttrMask::RNR_RETRY)
    .union(QpAttrMask::SQ_PSN)
    .union(QpAttrMask::MAX_QP_RD_ATOMIC);

/// RESET→INIT mask of a UC QP: exactly the required bits.
pub const UC_INIT_MASK: QpAttrMask = RC_INIT_MASK;

/// INIT→RTR mask of a UC QP: exactly the required bits (no read/atomic or
/// RNR attributes: UC has neither).
pub const UC_RTR_MASK: QpAttrMask = QpAttrMask::STATE
    .union(QpAttrMask::AV)
    .union(QpAttrMask::PATH_MTU)
    .union(QpAttrMask::DEST_QPN)
    .union(QpAttrMask::RQ_PSN);

/// RTR→RTS mask of a UC QP: exactly the required bits (no retransmission
/// attributes: UC does not retransmit).
pub const UC_RTS_MASK: QpAttrMask = QpAttrMask::STATE.union(QpAttrMask::SQ_PSN);

/// RESET→INIT mask of a UD QP: exactly the required bits (a Q_Key instead
/// of access flags).
pub const UD_INIT_MASK: QpAttrMask = QpAttrMask::STATE
    .union(QpAttrMask::PKEY_INDEX)
    .union(QpAttrMask::PORT)
    .union(QpAttrMask::QKEY);

/// INIT→RTR mask of a UD QP: the state only.
pub const UD_RTR_MASK: QpAttrMask = QpAttrMask::STATE;

/// RTR→RTS mask of a UD QP: exactly the required bits.
pub const UD_RTS_MASK: QpAttrMask = QpAttrMask::STATE.union(QpAttrMask::SQ_PSN);

/// The Q_Key of every UD QP the workloads create (the value the
/// conformance scripts use).
pub const QKEY: u32 = 0x1111_1111;

/// Outstanding RDMA READ / atomic requests the workloads ask for (clamped to
/// the device's `max_qp_init_rd_atom` / `max_qp_rd_atom`).
pub const RD_ATOMIC_WANTED: u32 = 16;

/// What INIT→RTR needs to know about a port: its address and MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortPath {
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// GID index 0 of the port.
    pub gid: Gid,
    /// Whether address vectors to this port need a GRH (RoCE, or
    /// `IBV_QPF_GRH_REQUIRED`).
    pub grh_required: bool,
    /// The port's `active_mtu` (the path MTU the workloads use).
    pub active_mtu: Mtu,
}

impl PortPath {
    /// Queries port [`PORT`] of `ctx` (`ibv_query_port`, `ibv_query_gid`).
    ///
    /// # Errors
    /// Whatever `query_port` or `query_gid` returns.
    pub fn query<V: Verbs>(v: &mut V, ctx: &V::Context) -> Result<Self> {
        let port = v.query_port(ctx, PORT)?;
        let gid = v.query_gid(ctx, PORT, 0)?;
        let grh_required =
            port.flags & QPF_GRH_REQUIRED != 0 || port.link_layer == LinkLayer::Ethernet;
        let active_mtu = if port.active_mtu.bytes().is_some() {
            port.active_mtu
        } else {
            Mtu::Mtu1024
        };
        Ok(Self {
            lid: port.lid,
            gid,
            grh_required,
            active_mtu,
        })
    }

    /// An address vector from port [`PORT`] to this port.
    pub fn ah_attr(&self) -> AhAttr {
        AhAttr {
            grh: GlobalRoute {
                dgid: self.gid,
                flow_label: 0,
                sgid_index: 0,
                hop_limit: 64,
                traffic_class: 0,
            },
            dlid: self.lid,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            is_global: self.grh_required,
            port_num: PORT,
        }
    }
}

/// The device limits the QP attributes are clamped to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// `max_rd_atomic` to use: min([`RD_ATOMIC_WANTED`], `max_qp_init_rd_atom`).
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic` to use: min([`RD_ATOMIC_WANTED`], `max_qp_rd_atom`).
    pub max_dest_rd_atomic: u8,
    /// Whether the device does RDMA atomics (`atomic_cap` is not `NONE`).
    pub atomics: bool,
}

impl DeviceLimits {
    /// Reads the limits with `ibv_query_device`.
    ///
    /// # Errors
    /// Whatever `query_device` returns.
    pub fn query<V: Verbs>(v: &mut V, ctx: &V::Context) -> Result<Self> {
        let attr = v.query_device(ctx)?;
        let clamp = |max: u32| u8::try_from(RD_ATOMIC_WANTED.min(max)).unwrap_or(u8::MAX);
        Ok(Self {
            max_rd_atomic: clamp(attr.max_qp_init_rd_atom),
            max_dest_rd_atomic: clamp(attr.max_qp_rd_atom),
            atomics: !matches!(attr.atomic_cap, AtomicCap::None),
        })
    }

    /// The QP access flags a responder grants: remote write and read, and
    /// remote atomics when the device has them.
    pub fn qp_access(&self) -> AccessFlags {
        let rw = AccessFlags::REMOTE_WRITE.union(AccessFlags::REMOTE_READ);
        if self.atomics {
            rw.union(AccessFlags::REMOTE_ATOMIC)
        } else {
            rw
        }
    }
}

/// The attributes of every RC transition RESET→INIT→RTR→RTS (read through
/// [`RC_INIT_MASK`], [`RC_RTR_MASK`], [`RC_RTS_MASK`]), towards the QP
/// `dest_qp_num` behind `remote`. `qp_state` is left at RESET: set it per
/// call.
pub fn rc_attr(
    limits: &DeviceLimits,
    local: &PortPath,
    remote: &PortPath,
    dest_qp_num: u32,
) -> QpAttr {
    let path_mtu = if local.active_mtu.to_raw() <= remote.active_mtu.to_raw() {
        local.active_mtu
    } else {
        remote.active_mtu
    };
    QpAttr {
        qp_state: QpState::Reset,
        pkey_index: 0,
        port_num: PORT,
        qp_access_flags: limits.qp_access(),
        path_mtu,
        dest_qp_num,
        rq_psn: 0,
        sq_psn: 0,
        max_dest_rd_atomic: limits.max_dest_rd_atomic,
        max_rd_atomic: limits.max_rd_atomic,
        min_rnr_timer: 12,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 6,
        ah_attr: remote.ah_attr(),
        ..QpAttr::default()
    }
}

/// Walks `qp` RESET→INIT→RTR→RTS with the attributes of `attr` (its
/// `qp_state` is overwritten), using exactly the required masks.
///
/// # Errors
/// The first `modify_qp` that fails.
pub fn connect_rc<V: Verbs>(v: &mut V, qp: &V::Qp, attr: &mut QpAttr) -> Result<()> {
    attr.qp_state = QpState::Init;
    v.modify_qp(qp, attr, RC_INIT_MASK)?;
    attr.qp_state = QpState::ReadyToReceive;
    v.modify_qp(qp, attr, RC_RTR_MASK)?;
    attr.qp_state = QpState::ReadyToSend;
    v.modify_qp(qp, attr, RC_RTS_MASK)
}

/// The masks of RESET→INIT, INIT→RTR and RTR→RTS for `qp_type` (RC, UC or
/// UD), or `None` for another type.
pub fn connect_masks(qp_type: QpType) -> Option<[QpAttrMask; 3]> {
    match qp_type {
        QpType::Rc => Some([RC_INIT_MASK, RC_RTR_MASK, RC_RTS_MASK]),
        QpType::Uc => Some([UC_INIT_MASK, UC_RTR_MASK, UC_RTS_MASK]),
        QpType::Ud => Some([UD_INIT_MASK, UD_RTR_MASK, UD_RTS_MASK]),
        _ => None,
    }
}

/// Walks `qp`, of type `qp_type` (RC, UC or UD), RESET→INIT→RTR→RTS with
/// the attributes of `attr` (its `qp_state` is overwritten), using exactly
/// the required masks of that type ([`connect_masks`]). For UC the access
/// flags are cut down to `REMOTE_WRITE` (UC has no READ or atomics); for UD
/// `attr.qkey` is set to [`QKEY`] and `attr.dest_qp_num`, the path and the
/// retransmission attributes are not read.
///
/// # Errors
/// `EINVAL` ([`ErrorKind::InvalidArgument`]) for another QP type; otherwise
/// the first `modify_qp` that fails.
pub fn connect_qp<V: Verbs>(
    v: &mut V,
    qp: &V::Qp,
    qp_type: QpType,
    attr: &mut QpAttr,
) -> Result<()> {
    let Some([init, rtr, rts]) = connect_masks(qp_type) else {
        return Err(Error::new(
            Verb::ModifyQp,
            ErrorKind::InvalidArgument,
            format!("the workloads connect RC, UC and UD QPs, not {qp_type}"),
        ));
    };
    match qp_type {
        QpType::Uc => {
            attr.qp_access_flags = attr.qp_access_flags.intersection(AccessFlags::REMOTE_WRITE);
        }
        QpType::Ud => attr.qkey = QKEY,
        _ => {}
    }
    attr.qp_state = QpState::Init;
    v.modify_qp(qp, attr, init)?;
    attr.qp_state = QpState::ReadyToReceive;
    v.modify_qp(qp, attr, rtr)?;
    attr.qp_state = QpState::ReadyToSend;
    v.modify_qp(qp, attr, rts)
}

/// The device index a workload's responder uses: device 1 when the backend
/// has two devices, otherwise device 0 (loopback through one port).
///
/// # Errors
/// Whatever `get_device_list` returns.
pub fn peer_device_index<V: Verbs>(v: &mut V) -> Result<usize> {
    Ok(if v.get_device_list()?.len() >= 2 {
        1
    } else {
        0
    })
}

/// An open device with one PD and one CQ: what every workload side owns.
pub struct Endpoint<V: Verbs> {
    /// The device context.
    pub ctx: V::Context,
    /// The protection domain.
    pub pd: V::Pd,
    /// The CQ every QP of this side uses for sends and receives.
    pub cq: V::Cq,
    /// The path to this side's port.
    pub path: PortPath,
    /// The device's limits.
    pub limits: DeviceLimits,
}

impl<V: Verbs> Endpoint<V> {
    /// Opens device `device_index`, allocates a PD and a CQ of at least
    /// `cqe` entries, and queries port [`PORT`]. On error nothing is left
    /// behind.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn open(v: &mut V, device_index: usize, cqe: u32) -> Result<Self> {
        let ctx = v.open_device(device_index, PROCESS)?;
        match Self::open_in(v, &ctx, cqe) {
            Ok((pd, cq, path, limits)) => Ok(Self {
                ctx,
                pd,
                cq,
                path,
                limits,
            }),
            Err(e) => {
                // Best effort: the error that matters is the first one.
                let _ = v.close_device(&ctx);
                Err(e)
            }
        }
    }

    fn open_in(
        v: &mut V,
        ctx: &V::Context,
        cqe: u32,
    ) -> Result<(V::Pd, V::Cq, PortPath, DeviceLimits)> {
        let path = PortPath::query(v, ctx)?;
        let limits = DeviceLimits::query(v, ctx)?;
        let pd = v.alloc_pd(ctx)?;
        let cq = match v.create_cq(
            ctx,
            &CqInit {
                cqe,
                ..CqInit::default()
            },
        ) {
            Ok(cq) => cq,
            Err(e) => {
                let _ = v.dealloc_pd(&pd);
                return Err(e);
            }
        };
        Ok((pd, cq, path, limits))
    }

    /// Creates an RC QP on this side's PD with `cap`, both queues on the CQ.
    ///
    /// # Errors
    /// Whatever `create_qp` returns.
    pub fn create_rc_qp(&self, v: &mut V, cap: QpCap) -> Result<V::Qp> {
        self.create_qp(v, QpType::Rc, cap)
    }

    /// Creates a QP of `qp_type` on this side's PD with `cap`, both queues
    /// on the CQ.
    ///
    /// # Errors
    /// Whatever `create_qp` returns.
    pub fn create_qp(&self, v: &mut V, qp_type: QpType, cap: QpCap) -> Result<V::Qp> {
        let mut init = QpInitAttrEx::<'_, V> {
            send_cq: Some(&self.cq),
            recv_cq: Some(&self.cq),
            cap,
            qp_type,
            ..QpInitAttrEx::default()
        };
        v.create_qp(&self.pd, &mut init)
    }

    /// Destroys the CQ, deallocates the PD and closes the device, in that
    /// order. Every QP and MR of this side must be gone already; with one
    /// left behind, `dealloc_pd` fails with `EBUSY`, which is how the tests
    /// prove a workload leaks nothing.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn close(self, v: &mut V) -> Result<()> {
        v.destroy_cq(&self.cq)?;
        v.dealloc_pd(&self.pd)?;
        v.close_device(&self.ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_api::{transition_masks, QpClass, TableFlavor};

    #[test]
    fn connect_masks_are_exactly_the_required_bits() {
        // Goal: the workloads connect RC, UC and UD QPs with the minimal
        // legal masks on both table flavors. Method: compare each step with
        // the table's required bits + STATE.
        let steps = [
            (QpState::Reset, QpState::Init),
            (QpState::Init, QpState::ReadyToReceive),
            (QpState::ReadyToReceive, QpState::ReadyToSend),
        ];
        for (qp_type, class) in [
            (QpType::Rc, QpClass::Rc),
            (QpType::Uc, QpClass::Uc),
            (QpType::Ud, QpClass::Ud),
        ] {
            let masks = connect_masks(qp_type).expect("connectable");
            for flavor in TableFlavor::VALUES {
                for ((from, to), mask) in steps.into_iter().zip(masks) {
                    let m = transition_masks(class, from, to, *flavor).expect("legal");
                    assert_eq!(
                        m.required.union(QpAttrMask::STATE),
                        mask,
                        "{qp_type} {from}->{to} {flavor}"
                    );
                }
            }
        }
        assert_eq!(connect_masks(QpType::XrcSend), None);
    }
}
