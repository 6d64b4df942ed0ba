//! `mlx5dv_query_device` and `mlx5dv_create_qp` (every field of
//! `mlx5dv_qp_init_attr`, the DC QP types and DCI streams).

use verbs_api::{
    DcType, DciStreamsCaps, Mlx5Context, Mlx5ContextFlags, Mlx5ContextMask, Mlx5QpCreateFlags,
    Mlx5QpInitAttr, Mlx5QpInitAttrMask, Mlx5SendOpsFlags, QpClass, QpInitAttrEx, QpInitAttrMask,
    QpType, Result, Verb,
};

use crate::handles::{ContextHandle, QpHandle};
use crate::profile::DriverModel;
use crate::world::state::DvQp;
use crate::world::{invalid, unsupported, World};
use crate::SimVerbs;

/// `send_ops_flags` (mlx5dv part) each QP class may ask for
/// (dc-and-mlx5dv.md §1.4).
pub(super) fn dv_send_ops_allowed(class: QpClass) -> Mlx5SendOpsFlags {
    use Mlx5SendOpsFlags as F;
    match class {
        QpClass::Rc => F::MR_INTERLEAVED | F::MR_LIST | F::MKEY_CONFIGURE | F::RAW_WQE | F::MEMCPY,
        QpClass::Dci => F::RAW_WQE | F::MEMCPY,
        QpClass::Uc | QpClass::XrcIni | QpClass::Ud | QpClass::RawPacket => F::RAW_WQE,
        _ => F::empty(),
    }
}

impl World {
    // --------------------------------------------------------------- verbs

    /// `mlx5dv_query_device`: the DC, DC ODP, DCI-stream and OOO
    /// capabilities of the device's profile; `comp_mask` on return says which fields were filled
    /// (OOO only when the profile supports it for some type). `EOPNOTSUPP`
    /// on a non-mlx5 (rxe) device.
    pub fn mlx5dv_query_device(
        &self,
        ctx: ContextHandle,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        let v = Verb::Mlx5dvQueryDevice;
        let device = self.ctx(ctx, v)?.device;
        let p = &self.device(device).profile;
        let Some(m) = p.mlx5.as_ref() else {
            return Err(unsupported(
                v,
                format!("the {} device is not an mlx5 device", p.name),
            ));
        };
        let mut out = Mlx5Context {
            version: 1,
            flags: Mlx5ContextFlags::CQE_V1,
            ..Mlx5Context::default()
        };
        let mut filled = Mlx5ContextMask::empty();
        if comp_mask.contains(Mlx5ContextMask::DCI_STREAMS) && m.dc {
            out.dci_streams_caps = m.dci_streams;
            filled |= Mlx5ContextMask::DCI_STREAMS;
        }
        if comp_mask.contains(Mlx5ContextMask::MAX_DC_RD_ATOM) && m.dc {
            out.max_dc_rd_atom = m.max_dc_rd_atom;
            out.max_dc_init_rd_atom = m.max_dc_init_rd_atom;
            filled |= Mlx5ContextMask::MAX_DC_RD_ATOM;
        }
        if comp_mask.contains(Mlx5ContextMask::DC_ODP_CAPS) && m.dc && p.odp {
            // IBV_ODP_SUPPORT_SEND | _WRITE | _READ | _ATOMIC | _SRQ_RECV:
            // a DCT receives through its SRQ (*estimate*, as the other
            // ODP capabilities, docs/divergence.md).
            out.dc_odp_caps = 1 | 4 | 8 | 16 | 32;
            filled |= Mlx5ContextMask::DC_ODP_CAPS;
        }
        let o = m.ooo_recv_wrs;
        let any_ooo = o.max_rc | o.max_xrc | o.max_dct | o.max_ud | o.max_uc != 0;
        if comp_mask.contains(Mlx5ContextMask::OOO_RECV_WRS) && any_ooo {
            out.ooo_recv_wrs_caps = o;
            filled |= Mlx5ContextMask::OOO_RECV_WRS;
        }
        out.comp_mask = filled;
        Ok(out)
    }

    /// `mlx5dv_create_qp`: the mlx5dv attribute rules of dc-and-mlx5dv.md
    /// §1–§3 and §5.2, then the generic creation of `ibv_create_qp_ex`.
    /// Nothing is created on error.
    pub fn mlx5dv_create_qp(
        &mut self,
        ctx: ContextHandle,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
        dv: &Mlx5QpInitAttr,
    ) -> Result<QpHandle> {
        let v = Verb::Mlx5dvCreateQp;
        let device = self.ctx(ctx, v)?.device;
        let p = &self.device(device).profile;
        let m = match (p.driver, p.mlx5) {
            (DriverModel::Mlx5, Some(m)) => m,
            _ => {
                return Err(unsupported(
                    v,
                    format!(
                        "mlx5dv_create_qp on the {} device, which is not mlx5",
                        p.name
                    ),
                ))
            }
        };
        let mask = dv.comp_mask;
        if mask.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown mlx5dv comp_mask bits {:#x}", mask.unknown_bits()),
            ));
        }
        // DC type selection (§1.3).
        let dc = if mask.contains(Mlx5QpInitAttrMask::DC) {
            if attr.qp_type != QpType::Driver {
                return Err(invalid(v, "DC QP must be of type IBV_QPT_DRIVER"));
            }
            match dv.dc_init_attr.dc_type {
                t @ (DcType::Dci | DcType::Dct) => Some(t),
                t => return Err(invalid(v, format!("unknown dc_type {t}"))),
            }
        } else {
            if attr.qp_type == QpType::Driver {
                return Err(invalid(
                    v,
                    "an IBV_QPT_DRIVER QP needs MLX5DV_QP_INIT_ATTR_MASK_DC",
                ));
            }
            None
        };
        if dc.is_some() && !m.dc {
            return Err(unsupported(
                v,
                format!("the {} device does not support DC", p.name),
            ));
        }
        let class = QpClass::from_qp_type(attr.qp_type, dc);
        let is_dct = dc == Some(DcType::Dct);
        let is_dci = dc == Some(DcType::Dci);

        // DCT argument rules (§2.1).
        if is_dct {
            let allowed = Mlx5QpInitAttrMask::DC | Mlx5QpInitAttrMask::QP_CREATE_FLAGS;
            if !allowed.contains(mask) {
                return Err(invalid(
                    v,
                    format!(
                        "a DCT takes only DC and QP_CREATE_FLAGS in the mlx5dv comp_mask (got {mask})"
                    ),
                ));
            }
            if attr.comp_mask != QpInitAttrMask::PD {
                return Err(invalid(
                    v,
                    format!(
                        "a DCT takes exactly IBV_QP_INIT_ATTR_PD in comp_mask (got {})",
                        attr.comp_mask
                    ),
                ));
            }
            if attr.srq.is_none() || attr.recv_cq.is_none() {
                return Err(invalid(v, "a DCT needs an SRQ and a recv_cq"));
            }
        }
        // DCI argument rules (§3.1).
        if is_dci && (attr.cap.max_recv_wr != 0 || attr.cap.max_recv_sge != 0) {
            return Err(invalid(
                v,
                "a DCI has no receive queue: max_recv_wr and max_recv_sge must be 0",
            ));
        }
        let streams = if mask.contains(Mlx5QpInitAttrMask::DCI_STREAMS) {
            if !is_dci {
                return Err(invalid(v, "DCI_STREAMS is only valid for a DCI"));
            }
            let s = dv.dc_init_attr.dci_streams;
            let caps: DciStreamsCaps = m.dci_streams;
            if caps.max_log_num_concurent == 0 {
                return Err(invalid(v, "the device does not support DCI streams"));
            }
            if s.log_num_concurent > caps.max_log_num_concurent {
                return Err(invalid(
                    v,
                    format!(
                        "log_num_concurent {} is above the device's {}",
                        s.log_num_concurent, caps.max_log_num_concurent
                    ),
                ));
            }
            if s.log_num_errored > caps.max_log_num_errored {
                return Err(invalid(
                    v,
                    format!(
                        "log_num_errored {} is above the device's {}",
                        s.log_num_errored, caps.max_log_num_errored
                    ),
                ));
            }
            Some(s)
        } else {
            None
        };

        // create_flags (§1.2, §5.2).
        let flags = if mask.contains(Mlx5QpInitAttrMask::QP_CREATE_FLAGS) {
            dv.create_flags
        } else {
            Mlx5QpCreateFlags::empty()
        };
        self.check_dv_create_flags(device, attr, class, flags)?;

        // send_ops_flags (§1.4).
        if mask.contains(Mlx5QpInitAttrMask::SEND_OPS_FLAGS) {
            let ops = dv.send_ops_flags;
            if ops.unknown_bits() != 0 {
                return Err(unsupported(
                    v,
                    format!(
                        "unknown mlx5dv send_ops_flags bits {:#x}",
                        ops.unknown_bits()
                    ),
                ));
            }
            let extra = class.map_or(ops, |c| ops.difference(dv_send_ops_allowed(c)));
            if !extra.is_empty() {
                return Err(unsupported(
                    v,
                    format!("mlx5dv send_ops_flags {extra} are not supported on this QP type"),
                ));
            }
            // MEMCPY needs the PD and the device's DMA MMO engine (the
            // provider's qp_init_wr_memcpy, after the per-type check).
            if ops.contains(Mlx5SendOpsFlags::MEMCPY) {
                if !attr.comp_mask.contains(QpInitAttrMask::PD) {
                    return Err(invalid(
                        v,
                        "MLX5DV_QP_EX_WITH_MEMCPY needs IBV_QP_INIT_ATTR_PD",
                    ));
                }
                let mmo = self.device(device).profile.mlx5.is_some_and(|m| m.dma_mmo);
                if !mmo {
                    return Err(unsupported(
                        v,
                        "MLX5DV_QP_EX_WITH_MEMCPY: the device has no DMA MMO engine (dma_mmo_sq/dma_mmo_qp)",
                    ));
                }
            }
        }

        let qp = self.create_qp_as(ctx, attr, None, v, dc)?;
        let q = self.qp_mut(qp, v)?;
        q.dv = DvQp {
            dct_key: if is_dct {
                dv.dc_init_attr.dct_access_key
            } else {
                0
            },
            streams,
            ooo: flags.contains(Mlx5QpCreateFlags::OOO_DP),
            ..DvQp::default()
        };
        Ok(qp)
    }

    /// The mlx5dv `create_flags` rules for the QP's class on `device`.
    pub(super) fn check_dv_create_flags(
        &self,
        device: u32,
        attr: &QpInitAttrEx<'_, SimVerbs>,
        class: Option<QpClass>,
        flags: Mlx5QpCreateFlags,
    ) -> Result<()> {
        use Mlx5QpCreateFlags as F;
        let v = Verb::Mlx5dvCreateQp;
        let p = &self.device(device).profile;
        if flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!(
                    "unknown mlx5dv create_flags bits {:#x}",
                    flags.unknown_bits()
                ),
            ));
        }
        if flags.contains(F::DISABLE_SCATTER_TO_CQE | F::ALLOW_SCATTER_TO_CQE) {
            return Err(invalid(
                v,
                "DISABLE_SCATTER_TO_CQE and ALLOW_SCATTER_TO_CQE exclude each other",
            ));
        }
        let raw = attr.qp_type == QpType::RawPacket;
        if class == Some(QpClass::Dct) {
            let refused = flags
                & (F::TUNNEL_OFFLOADS
                    | F::TIR_ALLOW_SELF_LOOPBACK_UC
                    | F::TIR_ALLOW_SELF_LOOPBACK_MC
                    | F::ALLOW_SCATTER_TO_CQE
                    | F::PACKET_BASED_CREDIT_MODE);
            if !refused.is_empty() {
                return Err(invalid(
                    v,
                    format!("create_flags {refused} are not valid for a DCT"),
                ));
            }
        } else {
            let raw_only = flags
                & (F::TUNNEL_OFFLOADS
                    | F::TIR_ALLOW_SELF_LOOPBACK_UC
                    | F::TIR_ALLOW_SELF_LOOPBACK_MC);
            if !raw_only.is_empty() && !raw {
                return Err(invalid(
                    v,
                    format!("create_flags {raw_only} are RAW_PACKET-only"),
                ));
            }
            if flags.contains(F::TUNNEL_OFFLOADS) {
                return Err(invalid(v, "the simulated device has no tunnel offloads"));
            }
            if flags.contains(F::PACKET_BASED_CREDIT_MODE) {
                if attr.qp_type != QpType::Rc {
                    return Err(invalid(v, "PACKET_BASED_CREDIT_MODE is RC-only"));
                }
                return Err(invalid(
                    v,
                    "the simulated device does not report MLX5DV_CONTEXT_FLAGS_PACKET_BASED_CREDIT_MODE",
                ));
            }
        }
        if flags.contains(F::SIG_PIPELINING) {
            return Err(unsupported(
                v,
                "SIG_PIPELINING needs SQD->RTS, which the mlx5 profile does not support",
            ));
        }
        if flags.contains(F::OOO_DP) {
            let o = p.mlx5.map(|m| m.ooo_recv_wrs).unwrap_or_default();
            // rdma-core is_qpt_ooo_sup: DRIVER -> max_dct for DCI and DCT.
            let cap = match attr.qp_type {
                QpType::Driver => o.max_dct,
                QpType::Rc => o.max_rc,
                QpType::XrcSend | QpType::XrcRecv => o.max_xrc,
                QpType::Uc => o.max_uc,
                QpType::Ud => o.max_ud,
                _ => 0,
            };
            if cap == 0 {
                return Err(unsupported(
                    v,
                    format!(
                        "the {} device does not support OOO_DP for {} QPs (no fallback)",
                        p.name, attr.qp_type
                    ),
                ));
            }
            let has_rq =
                matches!(attr.qp_type, QpType::Rc | QpType::Uc | QpType::Ud) && attr.srq.is_none();
            if has_rq && attr.cap.max_recv_wr > 1 && attr.cap.max_recv_wr > cap {
                return Err(invalid(
                    v,
                    format!(
                        "max_recv_wr {} is above the OOO limit {cap} for {} QPs",
                        attr.cap.max_recv_wr, attr.qp_type
                    ),
                ));
            }
        }
        Ok(())
    }
}
