//! Creating QPs: `ibv_create_qp`/`ibv_create_qp_ex` (every QP type, with
//! capability rounding) and the XRC_TGT QPs a domain owns.

use verbs_api::{
    AtomicCap, Error, ErrorKind, QpCap, QpClass, QpCreateFlags, QpInitAttrEx, QpInitAttrMask,
    QpType, Result, SendOpsFlags, Sge, Verb,
};

use crate::profile::DriverModel;
use crate::trace::TraceEvent;
use crate::world::queues::Ring;
use crate::world::state::QpPhase;
use crate::world::{invalid, no_mem, unsupported, World};
use crate::SimVerbs;

use super::*;

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
            let extra = attr
                .send_ops_flags
                .difference(supported_send_ops(profile, qp_type));
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
            tx: crate::world::state::Tx::default(),
            rx: crate::world::state::Rx {
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
            dv: crate::world::state::DvQp::default(),
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
    pub(super) fn create_tgt_qp(
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
        let cap = crate::world::xrc::TGT_CAP;
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
            tx: crate::world::state::Tx::default(),
            rx: crate::world::state::Rx {
                srq_sges: vec![
                    Sge::default();
                    self.device(device).profile.attr.max_srq_sge as usize
                ]
                .into_boxed_slice(),
                ..Default::default()
            },
            dv: crate::world::state::DvQp::default(),
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
}
