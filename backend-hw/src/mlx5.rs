//! The mlx5 direct verbs' bodies: `mlx5dv_query_device`,
//! `mlx5dv_create_qp` and `mlx5dv_reserved_qpn_alloc`/`_dealloc`.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::ptr::NonNull;
use std::sync::Arc;

use verbs_api::*;

use crate::errors::c_error;
use crate::ffi::verbs::last_errno;

use crate::backend::*;
use crate::convert::*;
use crate::handles::*;

impl HwVerbs {
    /// The body of `Verbs::mlx5dv_query_device`.
    pub(crate) fn mlx5dv_query_device_impl(
        &mut self,
        ctx: &HwContext,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        use crate::ffi::mlx5dv as dv;
        let (c, _) = self.ctx(ctx, Verb::Mlx5dvQueryDevice)?;
        let mut out = dv::mlx5dv_context::request(comp_mask.bits());
        // SAFETY: live context; `out` is at least as large as the installed
        // library's struct (layout test) and zeroed except `comp_mask`.
        let rc = unsafe { dv::mlx5dv_query_device(c, &mut out) };
        if rc != 0 {
            return Err(c_error(Verb::Mlx5dvQueryDevice, rc, "mlx5dv_query_device"));
        }
        let got = dv::Mlx5dvContext::from_filled(&out);
        let _ = dv::Mlx5dvContext::REQUEST;
        Ok(Mlx5Context {
            version: out.version,
            flags: Mlx5ContextFlags(got.flags),
            comp_mask: Mlx5ContextMask(out.comp_mask),
            dc_odp_caps: out.dc_odp_caps,
            dci_streams_caps: got
                .dci_streams_caps
                .map(|c| DciStreamsCaps {
                    max_log_num_concurent: c.max_log_num_concurent,
                    max_log_num_errored: c.max_log_num_errored,
                })
                .unwrap_or_default(),
            max_dc_rd_atom: got.max_dc_rd_atom.map_or(0, |(a, _)| a),
            max_dc_init_rd_atom: got.max_dc_rd_atom.map_or(0, |(_, b)| b),
            ooo_recv_wrs_caps: got
                .ooo_recv_wrs_caps
                .map(|c| OooRecvWrsCaps {
                    max_rc: c.max_rc,
                    max_xrc: c.max_xrc,
                    max_dct: c.max_dct,
                    max_ud: c.max_ud,
                    max_uc: c.max_uc,
                })
                .unwrap_or_default(),
        })
    }

    /// The body of `Verbs::mlx5dv_create_qp`.
    pub(crate) fn mlx5dv_create_qp_impl(
        &mut self,
        ctx: &HwContext,
        attr: &mut QpInitAttrEx<'_, Self>,
        mlx5_attr: &Mlx5QpInitAttr,
    ) -> Result<HwQp> {
        use crate::ffi::mlx5dv as dv;
        let verb = Verb::Mlx5dvCreateQp;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        let mut ex = self.qp_init_to_c(verb, attr)?;
        let mut m = dv::mlx5dv_qp_init_attr::zeroed();
        m.comp_mask = mlx5_attr.comp_mask.bits();
        m.create_flags = mlx5_attr.create_flags.bits();
        m.send_ops_flags = mlx5_attr.send_ops_flags.bits();
        m.dc_init_attr.dc_type = mlx5_attr.dc_init_attr.dc_type.to_raw();
        let is_dc = mlx5_attr.comp_mask.bits() & dv::MLX5DV_QP_INIT_ATTR_MASK_DC != 0;
        m.dc_init_attr.u =
            if mlx5_attr.comp_mask.bits() & dv::MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS != 0 {
                dv::mlx5dv_dc_init_attr_u {
                    dci_streams: dv::mlx5dv_dci_streams {
                        log_num_concurent: mlx5_attr.dc_init_attr.dci_streams.log_num_concurent,
                        log_num_errored: mlx5_attr.dc_init_attr.dci_streams.log_num_errored,
                    },
                }
            } else {
                dv::mlx5dv_dc_init_attr_u {
                    dct_access_key: mlx5_attr.dc_init_attr.dct_access_key,
                }
            };
        let _ = (
            dv::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
            dv::MLX5DV_QP_CREATE_OOO_DP,
        );
        // SAFETY: live context; `ex` names live objects of this context
        // (checked); `m` is a fully initialised mlx5 attribute block whose
        // layout matches the header (layout test).
        let q = unsafe { dv::mlx5dv_create_qp(c, &mut ex, &mut m) };
        let q = NonNull::new(q).ok_or_else(|| c_error(verb, last_errno(), "mlx5dv_create_qp"))?;
        attr.cap = cap_from_c(&ex.cap);
        let dc = is_dc.then_some(mlx5_attr.dc_init_attr.dc_type);
        Ok(self.make_qp(verb, q, &inner, attr, dc))
    }

    /// The body of `Verbs::mlx5dv_reserved_qpn_alloc`.
    pub(crate) fn mlx5dv_reserved_qpn_alloc_impl(&mut self, ctx: &HwContext) -> Result<u32> {
        let verb = Verb::Mlx5dvReservedQpnAlloc;
        let (c, _) = self.ctx(ctx, verb)?;
        let mut qpn = 0u32;
        // SAFETY: live context; `qpn` is a valid, writable u32 for the call.
        let rc = unsafe { crate::ffi::mlx5dv::mlx5dv_reserved_qpn_alloc(c, &mut qpn) };
        match rc {
            0 => Ok(qpn),
            rc => Err(c_error(verb, rc, "mlx5dv_reserved_qpn_alloc")),
        }
    }

    /// The body of `Verbs::mlx5dv_reserved_qpn_dealloc`.
    pub(crate) fn mlx5dv_reserved_qpn_dealloc_impl(
        &mut self,
        ctx: &HwContext,
        qpn: u32,
    ) -> Result<()> {
        let verb = Verb::Mlx5dvReservedQpnDealloc;
        let (c, _) = self.ctx(ctx, verb)?;
        // SAFETY: live context; the library checks `qpn` against the
        // numbers this context holds.
        match unsafe { crate::ffi::mlx5dv::mlx5dv_reserved_qpn_dealloc(c, qpn) } {
            0 => Ok(()),
            rc => Err(c_error(verb, rc, "mlx5dv_reserved_qpn_dealloc")),
        }
    }

    /// The body of `Verbs::mlx5dv_get_clock_info`.
    pub(crate) fn mlx5dv_get_clock_info_impl(&mut self, ctx: &HwContext) -> Result<ClockInfo> {
        let verb = Verb::Mlx5dvGetClockInfo;
        let (c, _) = self.ctx(ctx, verb)?;
        let mut out = crate::ffi::mlx5dv::mlx5dv_clock_info::default();
        // SAFETY: live context; `out` is a writable `struct
        // mlx5dv_clock_info` (layout-tested against the installed header).
        match unsafe { crate::ffi::mlx5dv::mlx5dv_get_clock_info(c, &mut out) } {
            0 => Ok(ClockInfo {
                nsec: out.nsec,
                last_cycles: out.last_cycles,
                frac: out.frac,
                mult: out.mult,
                shift: out.shift,
                mask: out.mask,
            }),
            rc => Err(c_error(verb, rc, "mlx5dv_get_clock_info")),
        }
    }
}
