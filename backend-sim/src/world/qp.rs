//! Queue pairs: the object, its phase (R6), creation with capability
//! rounding, query, destroy, multicast attachment.

use verbs_api::{
    AtomicCap, Error, ErrorKind, Gid, QpAttr, QpAttrMask, QpCap, QpClass, QpCreateFlags,
    QpInitAttrEx, QpInitAttrMask, QpInitInfo, QpState, QpType, Result, SendOpsFlags, Sge, Verb,
};

use super::queues::{RecvWqe, Ring, SendWqe};
use super::srq::ring_size_minus_one;
use super::state::{AltPath, QpPhase, QueueKind};
use super::{busy, invalid, no_mem, unsupported, World};
use crate::handles::*;
use crate::profile::{DriverModel, Mlx5Limits};
use crate::trace::TraceEvent;
use crate::SimVerbs;

/// The multicast groups a UD QP is attached to: out of line, since most
/// QPs never attach one (8 bytes in the QP instead of a `Vec`'s 24).
/// (A boxed `Vec`, deliberately: a thin pointer, where a `Vec` or a boxed
/// slice would be 24 or 16 bytes in every QP.)
#[derive(Debug, Default)]
#[allow(clippy::box_collection)]
pub(crate) struct McastList(Option<Box<Vec<(Gid, u16)>>>);

impl McastList {
    fn groups(&self) -> &[(Gid, u16)] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    pub(crate) fn len(&self) -> usize {
        self.groups().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.groups().is_empty()
    }

    pub(crate) fn iter(&self) -> core::slice::Iter<'_, (Gid, u16)> {
        self.groups().iter()
    }

    fn push(&mut self, gid: Gid, lid: u16) {
        self.0.get_or_insert_with(Box::default).push((gid, lid));
    }

    fn remove(&mut self, pos: usize) {
        if let Some(v) = self.0.as_deref_mut() {
            v.remove(pos);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }

    /// Heap bytes the list owns.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.as_deref().map_or(0, |v| {
            size_of::<Vec<(Gid, u16)>>() + v.capacity() * size_of::<(Gid, u16)>()
        })
    }
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) ctx: ContextHandle,
    pub(crate) device: u32,
    pub(crate) pd: Option<PdHandle>,
    pub(crate) send_cq: Option<CqHandle>,
    pub(crate) recv_cq: Option<CqHandle>,
    pub(crate) srq: Option<SrqHandle>,
    pub(crate) qp_type: QpType,
    pub(crate) class: QpClass,
    pub(crate) qp_num: u32,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
    pub(crate) qp_context: u64,
    #[allow(dead_code)] // read by the data path (e.g. BLOCK_SELF_MCAST_LB)
    pub(crate) create_flags: QpCreateFlags,
    pub(crate) phase: QpPhase,
    /// The alternate path of the phase's [`Path`](super::state::Path) (`None` whenever the
    /// phase has no path; [`World::set_state`] clears it).
    pub(crate) alt: Option<Box<AltPath>>,
    pub(crate) mcast: McastList,
    pub(crate) sq: Ring<SendWqe>,
    pub(crate) rq: Ring<RecvWqe>,
    /// Requester execution state.
    pub(crate) tx: super::state::Tx,
    /// Responder execution state.
    pub(crate) rx: super::state::Rx,
    /// mlx5dv attributes: DC role, DC key, DCI streams, OOO (`world/dc.rs`).
    pub(crate) dv: super::state::DvQp,
}

/// `send_ops_flags` each type may ask for on mlx5 (rdma-core
/// `providers/mlx5/qp.c` `MLX5_SUPPORTED_SEND_OPS_FLAGS_*`, create-qp.md §3.3).
fn supported_send_ops(qp_type: QpType) -> SendOpsFlags {
    use SendOpsFlags as S;
    let uc = S::SEND
        | S::SEND_WITH_INV
        | S::SEND_WITH_IMM
        | S::RDMA_WRITE
        | S::RDMA_WRITE_WITH_IMM
        | S::LOCAL_INV
        | S::BIND_MW;
    match qp_type {
        QpType::Rc | QpType::XrcSend | QpType::XrcRecv | QpType::Driver => {
            uc | S::RDMA_READ | S::ATOMIC_CMP_AND_SWP | S::ATOMIC_FETCH_AND_ADD
        }
        QpType::Uc => uc,
        QpType::Ud => S::SEND | S::SEND_WITH_IMM,
        QpType::RawPacket => S::SEND | S::TSO,
        QpType::Unknown(_) => S::empty(),
    }
}

/// The ops mlx5 assumes when `send_ops_flags` is not given (`sq_overhead`).
fn default_send_ops(qp_type: QpType) -> SendOpsFlags {
    use SendOpsFlags as S;
    match qp_type {
        QpType::Ud => S::SEND | S::SEND_WITH_IMM | S::TSO,
        QpType::RawPacket => S::SEND | S::TSO,
        other => supported_send_ops(other),
    }
}

/// mlx5 send-WQE overhead in bytes (rdma-core `providers/mlx5/verbs.c`
/// `_sq_overhead`): the control segment or the largest per-operation segment
/// set (RDMA: ctrl+raddr = 32; atomic: ctrl+raddr+atomic = 48; bind/UMR:
/// ctrl + umr ctrl 48 + mkey context 64 + 64 = 192), plus the transport
/// segment (UD datagram 48, XRC 16, Ethernet 32).
pub(crate) fn mlx5_sq_overhead(qp_type: QpType, ops: SendOpsFlags) -> u32 {
    use SendOpsFlags as S;
    let mut size = 16;
    if ops.intersects(S::RDMA_WRITE | S::RDMA_WRITE_WITH_IMM | S::RDMA_READ) {
        size = size.max(16 + 16);
    }
    if ops.intersects(S::ATOMIC_CMP_AND_SWP | S::ATOMIC_FETCH_AND_ADD) {
        size = size.max(16 + 16 + 16);
    }
    if ops.intersects(S::BIND_MW | S::LOCAL_INV) {
        size = size.max(16 + 48 + 64 + 64);
    }
    size + match qp_type {
        QpType::Ud | QpType::Driver => 48,
        QpType::XrcSend | QpType::XrcRecv => 16,
        QpType::RawPacket => 32,
        _ => 0,
    }
}

fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// mlx5 capability maths (create-qp.md §4.2; rdma-core
/// `providers/mlx5/verbs.c` `mlx5_calc_send_wqe`, `mlx5_calc_sq_size`,
/// `mlx5_calc_rcv_wqe`, `mlx5_calc_rq_size`).
pub(crate) fn mlx5_caps(
    m: &Mlx5Limits,
    qp_type: QpType,
    ops: SendOpsFlags,
    tso_header: Option<u16>,
    req: QpCap,
    has_rq: bool,
) -> core::result::Result<QpCap, String> {
    let mut cap = req;
    let desc = u64::from(m.max_sq_desc_sz);
    if req.max_send_wr > 0 {
        let overhead = u64::from(mlx5_sq_overhead(qp_type, ops));
        let inl_size = if req.max_inline_data > 0 {
            overhead + align(4 + u64::from(req.max_inline_data), 16)
        } else {
            0
        };
        let mut size = overhead + tso_header.map_or(0, |t| align(u64::from(t), 16));
        let max_gather = desc.saturating_sub(size) / 16;
        if u64::from(req.max_send_sge) > max_gather {
            return Err(format!(
                "max_send_sge {} is above {max_gather}, what fits in a {desc}-byte send WQE after {size} bytes of segments",
                req.max_send_sge
            ));
        }
        size += 16 * u64::from(req.max_send_sge);
        let total = size.max(inl_size);
        if total > desc {
            return Err(format!(
                "a send WQE for max_inline_data {} needs {total} bytes, above max_sq_desc_sz {desc}",
                req.max_inline_data
            ));
        }
        let wqe = align(total, 64);
        // mlx5_calc_sq_size computes `wqe - overhead - 4` in C ints; with no
        // SGE and no inline data the WQE can be the overhead alone, where the
        // provider's result goes negative. Divergence from hardware: the
        // simulator reports 0 instead of a wrapped value.
        cap.max_inline_data = u32::try_from(wqe.saturating_sub(overhead + 4)).unwrap_or(u32::MAX);
        if u64::from(req.max_send_wr) > 0x7fff_ffff / desc {
            return Err(format!(
                "max_send_wr {} overflows the SQ size",
                req.max_send_wr
            ));
        }
        let wq = (u64::from(req.max_send_wr) * wqe).next_power_of_two();
        if wq / 64 > u64::from(m.max_send_wqebb) {
            return Err(format!(
                "max_send_wr {} needs {} send WQE basic blocks, above the device's {}",
                req.max_send_wr,
                wq / 64,
                m.max_send_wqebb
            ));
        }
        cap.max_send_wr = (wq / wqe) as u32;
    }
    if !has_rq || req.max_recv_wr == 0 {
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    } else {
        if req.max_recv_wr > m.max_recv_wr {
            return Err(format!(
                "max_recv_wr {} is above the device's {}",
                req.max_recv_wr, m.max_recv_wr
            ));
        }
        let size = 16 * u64::from(req.max_recv_sge.max(1));
        if size > u64::from(m.max_rq_desc_sz) {
            return Err(format!(
                "max_recv_sge {} needs a {size}-byte receive WQE, above max_rq_desc_sz {}",
                req.max_recv_sge, m.max_rq_desc_sz
            ));
        }
        let wqe = size.next_power_of_two();
        let wq = (u64::from(req.max_recv_wr).next_power_of_two() * wqe).max(64);
        cap.max_recv_wr = (wq / wqe) as u32;
        cap.max_recv_sge = (wqe / 16) as u32;
    }
    Ok(cap)
}

/// rxe capability checks and rounding (create-qp.md §4.3; torvalds/linux
/// `drivers/infiniband/sw/rxe/rxe_qp.c` `rxe_qp_chk_cap`,
/// `rxe_qp_init_req`, `rxe_qp_init_resp`, `rxe_queue.c`).
pub(crate) fn rxe_caps(
    max_qp_wr: u32,
    max_sge: u32,
    max_inline: u32,
    req: QpCap,
    has_rq: bool,
) -> core::result::Result<QpCap, String> {
    if req.max_send_wr > max_qp_wr {
        return Err(format!(
            "max_send_wr {} is above max_qp_wr {max_qp_wr}",
            req.max_send_wr
        ));
    }
    if req.max_send_sge > max_sge {
        return Err(format!(
            "max_send_sge {} is above max_sge {max_sge}",
            req.max_send_sge
        ));
    }
    if has_rq {
        if req.max_recv_wr > max_qp_wr {
            return Err(format!(
                "max_recv_wr {} is above max_qp_wr {max_qp_wr}",
                req.max_recv_wr
            ));
        }
        if req.max_recv_sge > max_sge {
            return Err(format!(
                "max_recv_sge {} is above max_sge {max_sge}",
                req.max_recv_sge
            ));
        }
    }
    if req.max_inline_data > max_inline {
        return Err(format!(
            "max_inline_data {} is above {max_inline}",
            req.max_inline_data
        ));
    }
    let wqe = (req.max_send_sge * 16).max(req.max_inline_data);
    let mut cap = QpCap {
        max_send_wr: ring_size_minus_one(req.max_send_wr),
        max_send_sge: wqe / 16,
        max_inline_data: wqe,
        max_recv_wr: 0,
        max_recv_sge: 0,
    };
    if has_rq {
        cap.max_recv_wr = ring_size_minus_one(req.max_recv_wr);
        cap.max_recv_sge = req.max_recv_sge;
    }
    Ok(cap)
}

impl World {
    /// `ibv_create_qp` / `ibv_create_qp_ex`: every rule of create-qp.md
    /// §2–§7; `attr.cap` is written back with the actual capabilities.
    ///
    /// `legacy_pd` is the `pd` argument of `ibv_create_qp` (then `attr.pd`
    /// and `attr.comp_mask` are ignored, the legacy struct has neither).
    pub(crate) fn create_qp(
        &mut self,
        ctx: ContextHandle,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
        legacy_pd: Option<PdHandle>,
        verb: Verb,
    ) -> Result<QpHandle> {
        self.create_qp_as(ctx, attr, legacy_pd, verb, None)
    }

    /// [`Self::create_qp`] with the DC role `mlx5dv_create_qp` already
    /// validated (`dc` is `Some` only for an `IBV_QPT_DRIVER` QP from there).
    pub(crate) fn create_qp_as(
        &mut self,
        ctx: ContextHandle,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
        legacy_pd: Option<PdHandle>,
        verb: Verb,
        dc: Option<verbs_api::DcType>,
    ) -> Result<QpHandle> {
        let v = verb;
        let c = self.ctx(ctx, v)?;
        let (device, process) = (c.device, c.process);
        let profile = &self.device(device).profile;
        let qp_type = attr.qp_type;
        let (comp_mask, pd) = match legacy_pd {
            Some(pd) => (QpInitAttrMask::PD, Some(pd)),
            None => (attr.comp_mask, attr.pd.copied()),
        };

        // libibverbs: the type and the comp_mask (U-CMDQP).
        let class = match qp_type {
            QpType::Unknown(t) => return Err(invalid(v, format!("unknown qp_type {t}"))),
            QpType::Driver if dc.is_some() => {
                QpClass::from_qp_type(qp_type, dc).ok_or_else(|| invalid(v, "unknown dc_type"))?
            }
            QpType::Driver => {
                return Err(invalid(
                    v,
                    "IBV_QPT_DRIVER QPs are made with mlx5dv_create_qp and DC attributes",
                ));
            }
            t => QpClass::from_qp_type(t, None).expect("non-driver types have a class"),
        };
        if comp_mask.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown comp_mask bits {:#x}", comp_mask.unknown_bits()),
            ));
        }
        if qp_type == QpType::XrcRecv {
            if !comp_mask.contains(QpInitAttrMask::XRCD) {
                return Err(invalid(v, "an XRC_RECV QP needs IBV_QP_INIT_ATTR_XRCD"));
            }
        } else if !comp_mask.contains(QpInitAttrMask::PD) || pd.is_none() {
            return Err(invalid(
                v,
                format!("a {qp_type} QP needs a PD (IBV_QP_INIT_ATTR_PD)"),
            ));
        }

        // Device support for the type (K-MLX5: EOPNOTSUPP; rxe: RC/UC/UD only).
        let type_ok = match profile.driver {
            DriverModel::Rxe => matches!(qp_type, QpType::Rc | QpType::Uc | QpType::Ud),
            DriverModel::Mlx5 => {
                !matches!(qp_type, QpType::XrcSend | QpType::XrcRecv) || profile.xrc
            }
        };
        if !type_ok {
            return Err(unsupported(
                v,
                format!("the {} device does not support {qp_type} QPs", profile.name),
            ));
        }

        // RSS receive QPs are not modelled; their argument rules still apply.
        if comp_mask.contains(QpInitAttrMask::IND_TABLE) {
            if attr.cap.max_recv_wr != 0
                || attr.cap.max_recv_sge != 0
                || attr.recv_cq.is_some()
                || attr.srq.is_some()
            {
                return Err(invalid(
                    v,
                    "an RSS QP (IND_TABLE) takes no receive caps, recv_cq or srq",
                ));
            }
            return Err(unsupported(
                v,
                "RSS QPs (IBV_QP_INIT_ATTR_IND_TABLE) are not modelled",
            ));
        }
        if comp_mask.contains(QpInitAttrMask::RX_HASH) {
            if comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
                return Err(invalid(v, "RX_HASH cannot be combined with SEND_OPS_FLAGS"));
            }
            return Err(unsupported(
                v,
                "RSS QPs (IBV_QP_INIT_ATTR_RX_HASH) are not modelled",
            ));
        }
        let tso_header = comp_mask
            .contains(QpInitAttrMask::MAX_TSO_HEADER)
            .then_some(attr.max_tso_header);
        if tso_header.is_some() && qp_type != QpType::RawPacket {
            return Err(invalid(
                v,
                "max_tso_header is only valid for RAW_PACKET QPs",
            ));
        }

        // create_flags (U-CMDQP, K-UVQP check_creation_flags, K-MLX5).
        let flags = if comp_mask.contains(QpInitAttrMask::CREATE_FLAGS) {
            attr.create_flags
        } else {
            QpCreateFlags::empty()
        };
        if flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown create_flags bits {:#x}", flags.unknown_bits()),
            ));
        }
        if !flags.is_empty() {
            if profile.driver == DriverModel::Rxe {
                return Err(unsupported(
                    v,
                    format!("rxe supports no create_flags (asked {flags})"),
                ));
            }
            if !matches!(qp_type, QpType::Ud | QpType::RawPacket) {
                return Err(invalid(
                    v,
                    format!("create_flags {flags} are not valid for {qp_type} QPs"),
                ));
            }
            if qp_type == QpType::Ud
                && flags.intersects(QpCreateFlags::SCATTER_FCS | QpCreateFlags::CVLAN_STRIPPING)
            {
                return Err(invalid(
                    v,
                    "SCATTER_FCS and CVLAN_STRIPPING are RAW_PACKET-only flags",
                ));
            }
            if qp_type != QpType::Ud && flags.contains(QpCreateFlags::SOURCE_QPN) {
                return Err(invalid(v, "SOURCE_QPN is supported only on UD QPs"));
            }
            let missing = flags.difference(profile.create_flags);
            if !missing.is_empty() {
                return Err(unsupported(
                    v,
                    format!(
                        "the {} device does not support create_flags {missing}",
                        profile.name
                    ),
                ));
            }
        }

        // send_ops_flags (libibverbs/man/ibv_wr_post.3.md; M5-QP).
        let ops = if comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
            let extra = attr.send_ops_flags.difference(supported_send_ops(qp_type));
            if !extra.is_empty() {
                return Err(unsupported(
                    v,
                    format!("send_ops_flags {extra} are not supported for {qp_type} QPs"),
                ));
            }
            let atomics = SendOpsFlags::ATOMIC_CMP_AND_SWP | SendOpsFlags::ATOMIC_FETCH_AND_ADD;
            if attr.send_ops_flags.intersects(atomics) && profile.attr.atomic_cap == AtomicCap::None
            {
                return Err(unsupported(
                    v,
                    "atomic send ops on a device without atomics",
                ));
            }
            attr.send_ops_flags
        } else {
            default_send_ops(qp_type)
        };

        // Objects per type (create-qp.md §5).
        let xrc_recv = qp_type == QpType::XrcRecv;
        if xrc_recv {
            if legacy_pd.is_some()
                || comp_mask.contains(QpInitAttrMask::PD)
                || attr.send_cq.is_some()
                || attr.recv_cq.is_some()
            {
                return Err(invalid(v, "an XRC_RECV QP takes no PD and no CQs"));
            }
            if let Some(s) = attr.srq {
                self.same_ctx(v, "SRQ", self.srq_ctx(*s, v)?, ctx)?;
                if self.xrc.srq_cq(*s).is_none() {
                    return Err(invalid(v, "a basic SRQ cannot be used with an XRC_RECV QP"));
                }
            }
            let xrcd = self.tgt_xrcd(ctx, attr.xrcd.copied(), v)?;
            return self.create_tgt_qp(ctx, device, xrcd, attr, v);
        }
        if attr.xrcd.is_some() && comp_mask.contains(QpInitAttrMask::XRCD) {
            return Err(invalid(
                v,
                format!("an xrcd is only valid for XRC_RECV QPs, not {qp_type}"),
            ));
        }
        let pd = pd.expect("checked above");
        self.same_ctx(v, "PD", self.pd(pd, v)?.ctx, ctx)?;
        let send_cq = match attr.send_cq {
            Some(cq) => Some(*cq),
            None => return Err(invalid(v, format!("a {qp_type} QP needs a send_cq"))),
        };
        let recv_cq = if qp_type == QpType::XrcSend {
            None
        } else {
            match attr.recv_cq {
                Some(cq) => Some(*cq),
                None => return Err(invalid(v, format!("a {qp_type} QP needs a recv_cq"))),
            }
        };
        for cq in [send_cq, recv_cq].into_iter().flatten() {
            self.same_ctx(v, "CQ", self.cq(cq, v)?.ctx, ctx)?;
        }
        let srq = attr.srq.copied();
        if class == QpClass::Dct && srq.is_none() {
            return Err(invalid(v, "a DCT needs an SRQ (K-MLX5 check_qp_attr)"));
        }
        if let Some(s) = srq {
            if qp_type == QpType::XrcSend {
                return Err(invalid(v, "an XRC_SEND QP cannot use an SRQ"));
            }
            self.same_ctx(v, "SRQ", self.srq_ctx(s, v)?, ctx)?;
        }
        if qp_type == QpType::RawPacket && !self.config.cap_net_raw {
            let _ = process;
            return Err(Error::new(
                v,
                ErrorKind::PermissionDenied,
                "RAW_PACKET QPs need CAP_NET_RAW",
            ));
        }

        // Capabilities (create-qp.md §4).
        let has_rq = srq.is_none() && qp_type != QpType::XrcSend && class != QpClass::Dci;
        let mut req = attr.cap;
        if class == QpClass::Dct {
            // A DCT has no send queue and receives through its SRQ: its
            // capabilities are unused (dc-and-mlx5dv.md §2.1).
            req = QpCap::default();
        }
        if qp_type == QpType::XrcSend {
            // libibverbs forces the receive caps of XRC_SEND to 0 (U-CMDQP).
            req.max_recv_wr = 0;
            req.max_recv_sge = 0;
        }
        let profile = &self.device(device).profile;
        let cap = match (profile.driver, profile.mlx5.as_ref()) {
            (DriverModel::Mlx5, Some(m)) => mlx5_caps(m, qp_type, ops, tso_header, req, has_rq),
            _ => rxe_caps(
                profile.attr.max_qp_wr,
                profile.attr.max_sge,
                profile.max_inline_data,
                req,
                has_rq,
            ),
        }
        .map_err(|m| invalid(v, m))?;
        if self.device(device).qp_count >= profile.attr.max_qp {
            return Err(no_mem(
                v,
                format!(
                    "the device already has max_qp = {} QPs",
                    profile.attr.max_qp
                ),
            ));
        }

        // Commit: nothing above changed the world.
        let srq_sges = srq
            .and_then(|s| self.srqs.get(s.index, s.generation))
            .map_or(0, |s| s.max_sge);
        let index = self.qps.next_index();
        let qp_num = self
            .alloc_qpn(device, index)
            .ok_or_else(|| no_mem(v, "no free QP number"))?;
        let qp = Qp {
            ctx,
            device,
            pd: Some(pd),
            send_cq,
            recv_cq,
            srq,
            qp_type,
            class,
            qp_num,
            cap,
            sq_sig_all: attr.sq_sig_all,
            qp_context: attr.qp_context,
            create_flags: flags,
            phase: QpPhase::Reset,
            alt: None,
            mcast: McastList::default(),
            sq: Ring::with_inline(cap.max_send_wr, cap.max_send_sge, cap.max_inline_data),
            rq: Ring::new(cap.max_recv_wr, cap.max_recv_sge),
            tx: super::state::Tx::default(),
            rx: super::state::Rx {
                srq_sges: vec![
                    Sge::default();
                    if class == QpClass::Dct {
                        0
                    } else {
                        srq_sges as usize
                    }
                ]
                .into_boxed_slice(),
                ..Default::default()
            },
            dv: super::state::DvQp::default(),
        };
        let h = QpHandle::from_parts(self.qps.insert(qp));
        debug_assert_eq!(h.index, index);
        self.devices[device as usize].qp_count += 1;
        self.pd_mut(pd, v)?.users += 1;
        for cq in [send_cq, recv_cq].into_iter().flatten() {
            self.cq_mut(cq, v)?.users += 1;
        }
        if let Some(s) = srq {
            self.srq_mut(s, v)?.users += 1;
        }
        self.ctx_mut(ctx, v)?.children += 1;
        attr.cap = cap;
        self.record(TraceEvent::QpCreated {
            device,
            qpn: qp_num,
            qp_type,
        });
        Ok(h)
    }

    /// The XRC_TGT part of `create_qp` (xrc.md §1.4): a real QP owned by
    /// the domain of `xrcd`, with no PD, CQ, SRQ or queue; the caller gets
    /// a handle to it (see `world/xrc.rs`).
    fn create_tgt_qp(
        &mut self,
        ctx: ContextHandle,
        device: u32,
        xrcd: XrcdHandle,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
        v: Verb,
    ) -> Result<QpHandle> {
        let profile = &self.device(device).profile;
        if self.device(device).qp_count >= profile.attr.max_qp {
            return Err(no_mem(
                v,
                format!(
                    "the device already has max_qp = {} QPs",
                    profile.attr.max_qp
                ),
            ));
        }
        let index = self.qps.next_index();
        let qp_num = self
            .alloc_qpn(device, index)
            .ok_or_else(|| no_mem(v, "no free QP number"))?;
        let cap = super::xrc::TGT_CAP;
        let qp = Qp {
            ctx,
            device,
            pd: None,
            send_cq: None,
            recv_cq: None,
            srq: None,
            qp_type: QpType::XrcRecv,
            class: QpClass::XrcTgt,
            qp_num,
            cap,
            sq_sig_all: false,
            qp_context: attr.qp_context,
            create_flags: QpCreateFlags::empty(),
            phase: QpPhase::Reset,
            alt: None,
            mcast: McastList::default(),
            sq: Ring::new(0, 0),
            rq: Ring::new(0, 0),
            tx: super::state::Tx::default(),
            rx: super::state::Rx {
                srq_sges: vec![
                    Sge::default();
                    self.device(device).profile.attr.max_srq_sge as usize
                ]
                .into_boxed_slice(),
                ..Default::default()
            },
            dv: super::state::DvQp::default(),
        };
        let real = QpHandle::from_parts(self.qps.insert(qp));
        debug_assert_eq!(real.index, index);
        self.devices[device as usize].qp_count += 1;
        self.ctx_mut(ctx, v)?.children += 1;
        attr.cap = cap;
        self.record(TraceEvent::QpCreated {
            device,
            qpn: qp_num,
            qp_type: QpType::XrcRecv,
        });
        Ok(self.tgt_created(real, ctx, xrcd, attr.qp_context))
    }

    /// `qp->qp_num`.
    pub fn qp_num(&self, qp: QpHandle) -> Result<u32> {
        let q = self.qp(qp, Verb::QueryQp)?;
        // A DCT gets its number at INIT->RTR (dc-and-mlx5dv.md §2.2).
        Ok(if q.class == QpClass::Dct && !q.dv.dct_created {
            0
        } else {
            q.qp_num
        })
    }

    /// The QP's current state (authoritative; what `ibv_query_qp` reports).
    pub fn qp_state(&self, qp: QpHandle) -> Result<QpState> {
        Ok(self.qp(qp, Verb::QueryQp)?.phase.state())
    }

    /// `ibv_query_qp`: every attribute set so far (0 for never-set ones) and
    /// the creation attributes with the actual capabilities. `mask` is a
    /// hint, as in C: everything is returned.
    pub fn query_qp(&self, qp: QpHandle, _mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        let q = self.qp(qp, Verb::QueryQp)?;
        let state = q.phase.state();
        if q.class == QpClass::Dct && state != QpState::ReadyToReceive {
            // mlx5_query_qp: a DCT is queried only once created (RTR).
            return Err(invalid(
                Verb::QueryQp,
                format!("ibv_query_qp on a DCT in {state}: only RTR can be queried"),
            ));
        }
        let mut a = QpAttr {
            qp_state: state,
            cur_qp_state: state,
            cap: q.cap,
            ..QpAttr::default()
        };
        let (bound, path, req) = q.phase.parts();
        if let Some(b) = bound {
            a.port_num = b.port_num;
            a.pkey_index = b.pkey_index;
            a.qkey = b.qkey;
            a.qp_access_flags = b.access;
        }
        if let Some(p) = path {
            a.ah_attr = p.ah;
            a.path_mtu = p.path_mtu;
            a.dest_qp_num = p.dest_qpn;
            a.rq_psn = p.rq_psn;
            a.max_dest_rd_atomic = p.max_dest_rd_atomic;
            a.min_rnr_timer = p.min_rnr_timer;
            a.path_mig_state = p.path_mig_state;
            if let Some(alt) = q.alt.as_deref() {
                a.alt_ah_attr = alt.ah;
                a.alt_pkey_index = alt.pkey_index;
                a.alt_port_num = alt.port_num;
                a.alt_timeout = alt.timeout;
            }
        }
        if let Some(r) = req {
            a.sq_psn = r.sq_psn;
            a.timeout = r.timeout;
            a.retry_cnt = r.retry_cnt;
            a.rnr_retry = r.rnr_retry;
            a.max_rd_atomic = r.max_rd_atomic;
            a.rate_limit = r.rate_limit;
            a.en_sqd_async_notify = u8::from(r.en_sqd_async_notify);
        }
        if let QpPhase::SendQueueDrain(.., draining) = q.phase {
            a.sq_draining = u8::from(draining);
        }
        let info = QpInitInfo {
            qp_type: q.qp_type,
            cap: q.cap,
            sq_sig_all: q.sq_sig_all,
            qp_context: q.qp_context,
            has_srq: q.srq.is_some(),
        };
        Ok((a, info))
    }

    /// `ibv_destroy_qp`: `EBUSY` while attached to a multicast group.
    /// Outstanding work requests are dropped without completions; on mlx5
    /// the QP's unpolled CQEs are removed from its CQs (`mlx5_destroy_qp`).
    ///
    /// # Divergence from hardware
    /// Unacknowledged async events of the QP do not block the destroy.
    pub fn destroy_qp(&mut self, qp: QpHandle) -> Result<()> {
        let v = Verb::DestroyQp;
        let q = self.qp(qp, v)?;
        if !q.mcast.is_empty() {
            return Err(busy(
                v,
                format!(
                    "the QP is still attached to {} multicast groups",
                    q.mcast.len()
                ),
            ));
        }
        let (ctx, device, qpn, pd, send_cq, recv_cq, srq) =
            (q.ctx, q.device, q.qp_num, q.pd, q.send_cq, q.recv_cq, q.srq);
        self.exec_on_destroy(qp);
        self.dc_on_destroy(qp);
        self.discard_queues(qp);
        if self.device(device).profile.driver == DriverModel::Mlx5 {
            for cq in [send_cq, recv_cq].into_iter().flatten() {
                self.clean_cq(cq, qp);
            }
        }
        self.qps.remove(qp.index, qp.generation);
        self.free_qpn(device, qpn);
        self.devices[device as usize].qp_count -= 1;
        if let Some(pd) = pd {
            if let Ok(p) = self.pd_mut(pd, v) {
                p.users -= 1;
            }
        }
        for cq in [send_cq, recv_cq].into_iter().flatten() {
            if let Ok(c) = self.cq_mut(cq, v) {
                c.users -= 1;
            }
        }
        if let Some(s) = srq {
            if let Ok(s) = self.srq_mut(s, v) {
                s.users -= 1;
            }
        }
        if let Ok(c) = self.ctx_mut(ctx, v) {
            c.children -= 1;
        }
        self.record(TraceEvent::QpDestroyed { device, qpn });
        Ok(())
    }

    /// Drops every posted request of both queues without completions and
    /// unpins their MRs (entering RESET, destroy).
    pub(crate) fn discard_queues(&mut self, qp: QpHandle) {
        for queue in [QueueKind::Send, QueueKind::Recv] {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                return;
            };
            let range = match queue {
                QueueKind::Send => {
                    let r = q.sq.head..q.sq.tail;
                    q.sq.done = q.sq.tail;
                    r
                }
                QueueKind::Recv => {
                    let r = q.rq.head..q.rq.tail;
                    q.rq.done = q.rq.tail;
                    r
                }
                QueueKind::Srq(_) => continue,
            };
            if let Some(last) = range.end.checked_sub(1) {
                if range.start <= last {
                    self.release_wqes(qp, queue, last);
                }
            }
        }
    }

    /// `ibv_attach_mcast`: UD QPs only; the GID must be multicast (ff00::/8);
    /// on InfiniBand the LID must be a multicast LID (0xc000..0xfffe).
    /// Attaching twice to the same group succeeds once (K-UVERBS).
    pub fn attach_mcast(&mut self, qp: QpHandle, gid: &Gid, lid: u16) -> Result<()> {
        let v = Verb::AttachMcast;
        let q = self.qp(qp, v)?;
        self.check_mcast(q, gid, lid, v)?;
        if q.mcast.iter().any(|(g, l)| g == gid && *l == lid) {
            return Ok(());
        }
        let max = self.device(q.device).profile.attr.max_mcast_qp_attach as usize;
        if q.mcast.len() >= max {
            return Err(no_mem(
                v,
                format!("the QP is already attached to max_mcast_qp_attach = {max} groups"),
            ));
        }
        self.qp_mut(qp, v)?.mcast.push(*gid, lid);
        Ok(())
    }

    /// `ibv_detach_mcast`: `EINVAL` for a group the QP is not attached to.
    pub fn detach_mcast(&mut self, qp: QpHandle, gid: &Gid, lid: u16) -> Result<()> {
        let v = Verb::DetachMcast;
        let q = self.qp_mut(qp, v)?;
        let Some(pos) = q.mcast.iter().position(|(g, l)| g == gid && *l == lid) else {
            return Err(invalid(
                v,
                format!("the QP is not attached to group {gid} lid {lid:#x}"),
            ));
        };
        q.mcast.remove(pos);
        Ok(())
    }

    fn check_mcast(&self, q: &Qp, gid: &Gid, lid: u16, v: Verb) -> Result<()> {
        if q.qp_type != QpType::Ud {
            return Err(invalid(
                v,
                format!("multicast needs a UD QP, not {}", q.qp_type),
            ));
        }
        if gid.0[0] != 0xff {
            return Err(invalid(v, format!("{gid} is not a multicast GID")));
        }
        let p = &self.device(q.device).profile;
        if p.port.link_layer == verbs_api::LinkLayer::Infiniband && !(0xc000..0xffff).contains(&lid)
        {
            return Err(invalid(
                v,
                format!("lid {lid:#x} is not a multicast LID (0xc000..0xfffe)"),
            ));
        }
        Ok(())
    }
}
