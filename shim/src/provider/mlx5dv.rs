//! The drop-in `libmlx5.so.1` (issue #14 item 1): mlx5 direct verbs over
//! the simulator's mlx5 model: `mlx5dv_is_supported`, `mlx5dv_open_device`,
//! `mlx5dv_query_device`, `mlx5dv_create_qp` (DCI, DCT, DCI streams,
//! `MLX5DV_QP_CREATE_OOO_DP` and the other modelled create flags),
//! `mlx5dv_qp_ex_from_ibv_qp_ex` with `mlx5dv_wr_set_dc_addr(_stream)`,
//! `mlx5dv_dci_stream_id_reset`, `mlx5dv_reserved_qpn_alloc`/`_dealloc`,
//! and `mlx5dv_create_cq` without mlx5 attributes. The rest of libmlx5 (DevX, steering, crypto, mkeys, VAR,
//! UAR, …) fails with `EOPNOTSUPP` (`stubs.rs`).

use core::ffi::{c_int, c_void};
use core::mem::size_of;

use verbs_api::*;

use crate::export::export;
use crate::provider::mlx5::device_is_mlx5;
use crate::provider::qpex::QpAlloc;
use crate::provider::state::{c, ret_int, ret_ptr, with, Fail, Obj, Res, SimRes};

/// `struct mlx5dv_context` as upstream rdma-core extends it past v44
/// (`max_dc_rd_atom`, `max_dc_init_rd_atom`, `reg_c0`, `ooo_recv_wrs_caps`):
/// written only when the caller asks for those fields in `comp_mask`,
/// which a caller can only do if it was compiled with them.
#[repr(C)]
#[derive(Default)]
struct ContextUpstream {
    base: c::mlx5dv_context,
    max_dc_rd_atom: u64,
    max_dc_init_rd_atom: u64,
    reg_c0: [u32; 2],
    ooo_recv_wrs_caps: [u32; 5],
}

const MASK_MAX_DC_RD_ATOM: u64 = 1 << 14;
const MASK_OOO_RECV_WRS: u64 = 1 << 16;

export! { "MLX5_1.8" fn mlx5dv_is_supported(device: *mut c::ibv_device) -> bool {
    with(|shim| device_is_mlx5(shim, device).unwrap_or(false))
}}

export! { "MLX5_1.7" fn mlx5dv_open_device(device: *mut c::ibv_device, attr: *mut c::mlx5dv_context_attr) -> *mut c::ibv_context {
    ret_ptr(with(|shim| {
        let v = "mlx5dv_open_device";
        match device_is_mlx5(shim, device) {
            None => return Err(Fail::bad_ptr(v, "device", device.cast())),
            Some(false) => return Err(Fail::new(v, libc::EOPNOTSUPP, "not an mlx5 device profile")),
            Some(true) => {}
        }
        if !attr.is_null() {
            // SAFETY: non-NULL; the caller's struct.
            let a = unsafe { &*attr };
            if a.flags & c::MLX5DV_CONTEXT_FLAGS_DEVX != 0 {
                return Err(Fail::new(v, libc::EOPNOTSUPP, "DevX is not modelled"));
            }
            if a.flags & !c::MLX5DV_CONTEXT_FLAGS_DEVX != 0 || a.comp_mask != 0 {
                return Err(Fail::new(v, libc::EOPNOTSUPP, "unknown mlx5dv_context_attr flags or comp_mask"));
            }
        }
        crate::provider::context::open_device(shim, device)
    }))
}}

export! { "MLX5_1.0" fn mlx5dv_query_device(context: *mut c::ibv_context, attrs_out: *mut c::mlx5dv_context) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_query_device";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        if attrs_out.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "attrs_out is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct, at least the v44 layout.
        let asked = unsafe { (*attrs_out).comp_mask };
        let r = shim.sim.mlx5dv_query_device(&ctx, Mlx5ContextMask(asked)).at(v)?;
        let mut o = ContextUpstream::default();
        o.base.version = r.version;
        o.base.flags = r.flags.bits();
        o.base.comp_mask = r.comp_mask.bits() & asked;
        o.base.dc_odp_caps = r.dc_odp_caps;
        o.base.dci_streams_caps.max_log_num_concurent = r.dci_streams_caps.max_log_num_concurent;
        o.base.dci_streams_caps.max_log_num_errored = r.dci_streams_caps.max_log_num_errored;
        o.max_dc_rd_atom = r.max_dc_rd_atom;
        o.max_dc_init_rd_atom = r.max_dc_init_rd_atom;
        o.ooo_recv_wrs_caps = [r.ooo_recv_wrs_caps.max_rc, r.ooo_recv_wrs_caps.max_xrc, r.ooo_recv_wrs_caps.max_dct, r.ooo_recv_wrs_caps.max_ud, r.ooo_recv_wrs_caps.max_uc];
        let upstream = asked & (MASK_MAX_DC_RD_ATOM | MASK_OOO_RECV_WRS | (1 << 15)) != 0;
        let n = if upstream { size_of::<ContextUpstream>() } else { size_of::<c::mlx5dv_context>() };
        // SAFETY: the caller's struct holds the v44 layout, and the
        // upstream tail when it asked for an upstream-only field.
        unsafe { core::ptr::copy_nonoverlapping((&o as *const ContextUpstream).cast::<u8>(), attrs_out.cast::<u8>(), n) };
        Ok(())
    }))
}}

export! { "MLX5_1.2" fn mlx5dv_set_context_attr(context: *mut c::ibv_context, type_: u32, attr: *mut c_void) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_set_context_attr";
        crate::provider::device::ctx_of(shim, v, context)?;
        // SAFETY: a live context of ours.
        if device_is_mlx5(shim, unsafe { (*context).device }) != Some(true) {
            return Err(Fail::new(v, libc::EOPNOTSUPP, "not an mlx5 device profile"));
        }
        match type_ {
            // Buffer allocators: taken and never called, as a parent
            // domain's are (the simulator keeps no queue buffers in the
            // program's memory).
            c::MLX5DV_CTX_ATTR_BUF_ALLOCATORS if attr.is_null() => Err(Fail::new(v, libc::EINVAL, "attr is NULL")),
            c::MLX5DV_CTX_ATTR_BUF_ALLOCATORS => Ok(()),
            t => Err(Fail::new(v, libc::EOPNOTSUPP, format!("context attribute type {t} is unknown to mlx5"))),
        }
    }))
}}

export! { "MLX5_1.4" fn mlx5dv_get_clock_info(context: *mut c::ibv_context, clock_info: *mut c::mlx5dv_clock_info) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_get_clock_info";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        if clock_info.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "clock_info is NULL"));
        }
        let i = shim.sim.mlx5dv_get_clock_info(&ctx).at(v)?;
        let out = c::mlx5dv_clock_info {
            nsec: i.nsec,
            last_cycles: i.last_cycles,
            frac: i.frac,
            mult: i.mult,
            shift: i.shift,
            mask: i.mask,
        };
        // SAFETY: non-NULL; the caller's `struct mlx5dv_clock_info`, which
        // the inline `mlx5dv_ts_to_ns` then reads.
        unsafe { clock_info.write(out) };
        Ok(())
    }))
}}

export! { "MLX5_1.19" fn _mlx5dv_query_port(context: *mut c::ibv_context, port_num: u32, info: *mut c_void, info_len: usize) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_query_port";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        let dev = shim.sim.context_device(ctx).at(v)? as usize;
        if !shim.sim.is_mlx5(dev) {
            return Err(Fail::new(v, libc::EOPNOTSUPP, "not an mlx5 device"));
        }
        let port = u8::try_from(port_num).map_err(|_| Fail::new(v, libc::EINVAL, format!("port {port_num}")))?;
        shim.sim.query_port(&ctx, port).map_err(|_| Fail::new(v, libc::EINVAL, format!("port {port_num} is not a port of the device")))?;
        if info.is_null() {
            return Err(Fail::new(v, libc::EFAULT, "info is NULL"));
        }
        // The kernel fills vport and e-switch fields only in switchdev
        // (e-switch offloads) or multiport mode; a simulated port is in
        // neither, so the answer is all zeroes (flags 0), as
        // MLX5_IB_METHOD_QUERY_PORT copies it, zero-filled to the
        // caller's length.
        // SAFETY: non-NULL; the caller's struct of `info_len` bytes (the
        // header's inline passes sizeof).
        unsafe { core::ptr::write_bytes(info.cast::<u8>(), 0, info_len) };
        Ok(())
    }))
}}

export! { "MLX5_1.3" fn mlx5dv_create_qp(context: *mut c::ibv_context, qp_attr: *mut c::ibv_qp_init_attr_ex, mlx5_qp_attr: *mut c::mlx5dv_qp_init_attr) -> *mut c::ibv_qp {
    ret_ptr(with(|shim| {
        let v = "mlx5dv_create_qp";
        if qp_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_attr is NULL"));
        }
        let dv = if mlx5_qp_attr.is_null() {
            Mlx5QpInitAttr::default()
        } else {
            // SAFETY: non-NULL; the caller's struct.
            let m = unsafe { &*mlx5_qp_attr };
            let dc_type = DcType::from_raw(m.dc_init_attr.dc_type);
            // SAFETY: plain-data union read as the member dc_type selects.
            let (key, streams) = unsafe { (m.dc_init_attr.__bindgen_anon_1.dct_access_key, m.dc_init_attr.__bindgen_anon_1.dci_streams) };
            Mlx5QpInitAttr {
                comp_mask: Mlx5QpInitAttrMask(m.comp_mask),
                create_flags: Mlx5QpCreateFlags(m.create_flags),
                dc_init_attr: DcInitAttr {
                    dc_type,
                    dct_access_key: if dc_type == DcType::Dct { key } else { 0 },
                    dci_streams: if dc_type == DcType::Dci {
                        DciStreams { log_num_concurent: streams.log_num_concurent, log_num_errored: streams.log_num_errored }
                    } else {
                        DciStreams::default()
                    },
                },
                send_ops_flags: Mlx5SendOpsFlags(m.send_ops_flags),
            }
        };
        // SAFETY: non-NULL; the caller's struct.
        crate::provider::qp::create_qp_dv(shim, v, context, unsafe { &mut *qp_attr }, Some(&dv))
    }))
}}

export! { "MLX5_1.10" fn mlx5dv_qp_ex_from_ibv_qp_ex(qp: *mut c::ibv_qp_ex) -> *mut c::mlx5dv_qp_ex {
    with(|shim| {
        if !matches!(shim.get(qp.cast::<c_void>()).map(|e| e.obj), Some(Obj::Qp(_))) {
            crate::guard::set_errno(libc::EINVAL);
            return core::ptr::null_mut();
        }
        // SAFETY: a live QP of ours is a QpAlloc; `ex` is its first field.
        unsafe { &raw mut (*qp.cast::<QpAlloc>()).dv }
    })
}}

export! { "MLX5_1.21" fn mlx5dv_dci_stream_id_reset(qp: *mut c::ibv_qp, stream_id: u16) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_dci_stream_id_reset";
        let h = crate::provider::state::handle_of!(shim, v, qp, Qp, "QP")?;
        shim.sim.mlx5dv_dci_stream_id_reset(&h, stream_id).at(v)
    }))
}}

export! { "MLX5_1.18" fn mlx5dv_reserved_qpn_alloc(ctx: *mut c::ibv_context, qpn: *mut u32) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_reserved_qpn_alloc";
        let c = crate::provider::device::ctx_of(shim, v, ctx)?;
        if qpn.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qpn is NULL"));
        }
        let n = shim.sim.mlx5dv_reserved_qpn_alloc(&c).at(v)?;
        // SAFETY: non-NULL; the caller's u32.
        unsafe { qpn.write(n) };
        Ok(())
    }))
}}

export! { "MLX5_1.18" fn mlx5dv_reserved_qpn_dealloc(ctx: *mut c::ibv_context, qpn: u32) -> c_int {
    ret_int(with(|shim| {
        let v = "mlx5dv_reserved_qpn_dealloc";
        let c = crate::provider::device::ctx_of(shim, v, ctx)?;
        shim.sim.mlx5dv_reserved_qpn_dealloc(&c, qpn).at(v)
    }))
}}

export! { "MLX5_1.1" fn mlx5dv_create_cq(context: *mut c::ibv_context, cq_attr: *mut c::ibv_cq_init_attr_ex, mlx5_cq_attr: *mut c::mlx5dv_cq_init_attr) -> *mut c::ibv_cq_ex {
    ret_ptr(with(|shim| -> Res<*mut c::ibv_cq_ex> {
        let v = "mlx5dv_create_cq";
        if cq_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "cq_attr is NULL"));
        }
        let mut sized = false;
        if !mlx5_cq_attr.is_null() {
            // SAFETY: non-NULL; the caller's struct.
            let d = unsafe { &*mlx5_cq_attr };
            check_dv_cq_attr(v, d)?;
            sized = d.comp_mask & u64::from(c::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE) != 0;
        }
        // SAFETY: non-NULL; the caller's struct.
        crate::provider::cqex::create_cq_sized(shim, v, context, unsafe { &*cq_attr }, true, sized)
    }))
}}

/// The checks mlx5's `create_cq` makes of `struct mlx5dv_cq_init_attr`
/// (rdma-core `providers/mlx5/verbs.c`): unknown `comp_mask` bits,
/// a CQE size other than 64 or 128, CQE compression (the simulated
/// devices report no `cqe_comp_caps`), unknown flags and 128-byte CQE
/// padding (no `CQE_128B_PAD` vendor cap) are `EINVAL`. A valid CQE size
/// is taken and changes nothing a program sees through the verbs: the
/// simulator has no CQE buffer format.
fn check_dv_cq_attr(v: &str, a: &c::mlx5dv_cq_init_attr) -> Res<()> {
    let known = u64::from(
        c::MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE
            | c::MLX5DV_CQ_INIT_ATTR_MASK_FLAGS
            | c::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE,
    );
    let mask = |bit: u32| a.comp_mask & u64::from(bit) != 0;
    if a.comp_mask & !known != 0 {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            format!("unknown comp_mask bits {:#x}", a.comp_mask & !known),
        ));
    }
    if mask(c::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE) && !matches!(a.cqe_size, 64 | 128) {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            format!("cqe_size {} is neither 64 nor 128", a.cqe_size),
        ));
    }
    if mask(c::MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE) {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "CQE compression: the device reports no cqe_comp_caps",
        ));
    }
    if mask(c::MLX5DV_CQ_INIT_ATTR_MASK_FLAGS) {
        if u64::from(a.flags) & !(u64::from(c::MLX5DV_CQ_INIT_ATTR_FLAGS_RESERVED) - 1) != 0 {
            return Err(Fail::new(
                v,
                libc::EINVAL,
                format!("unknown flags {:#x}", a.flags),
            ));
        }
        if u64::from(a.flags) & u64::from(c::MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD) != 0 {
            return Err(Fail::new(
                v,
                libc::EINVAL,
                "CQE padding: the device has no CQE_128B_PAD cap",
            ));
        }
    }
    Ok(())
}
