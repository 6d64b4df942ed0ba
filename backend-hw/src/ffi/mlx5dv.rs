//! Hand-written declarations for the part of `<infiniband/mlx5dv.h>` that
//! verbsim uses and that rdma-sys does not bind (rdma-sys's `bindings.h`
//! includes only `verbs.h`, `rdma_cma.h` and `rdma_verbs.h`).
//!
//! Everything here is checked against the C header by the layout tests in
//! `ffi/layout.rs` (size, alignment and the offset of every field).
//!
//! # The `mlx5dv_context` layout difference
//!
//! The installed header (rdma-core 44) ends `struct mlx5dv_context` with
//! `crypto_caps`. Newer rdma-core appends, in this order, `max_dc_rd_atom`,
//! `max_dc_init_rd_atom`, `reg_c0` and `ooo_recv_wrs_caps`, each guarded by a
//! new `comp_mask` bit (`1 << 14`, `1 << 15`, `1 << 16`). We declare the
//! *upstream* (larger) layout, which is a strict extension of the 44 one, so:
//!
//! * the buffer we hand to `mlx5dv_query_device` is never smaller than the
//!   one the installed library writes into (the layout test checks
//!   `size_of::<mlx5dv_context>() >= sizeof(struct mlx5dv_context)` and that
//!   every field of the installed header sits at the same offset);
//! * the library only stores a capability field when the caller asked for it
//!   in `comp_mask` *and* it knows that bit, and it reports what it stored by
//!   rewriting `comp_mask` (rdma-core 44 `providers/mlx5/mlx5.c`,
//!   `_mlx5dv_query_device`). A library that predates a field therefore never
//!   sets its bit. Callers zero the whole struct, request the bits they want,
//!   and read a field only if its bit is set in the returned `comp_mask`
//!   ([`Mlx5dvContext`] enforces that). On rdma-core 44 the upstream-only
//!   fields thus read as "not reported", never as stale memory.
//!
//! # `MLX5DV_QP_CREATE_OOO_DP`
//!
//! rdma-core 44 lacks the out-of-order data placement create flag. Upstream
//! gives it the value `1 << 7` in `enum mlx5dv_qp_create_flags`; we define it
//! with that value and let the library or the device refuse it (an older
//! library answers `EOPNOTSUPP`/`EINVAL` for an unknown create flag).

#![allow(non_camel_case_types)]
// C names, kept so the header can be grepped
// The DC work-request builders (`mlx5dv_qp_ex`, the restated inline helpers)
// are declared and tested but not yet called: DC posting is not wired (see
// the crate docs), so some items are unused for now.
#![allow(dead_code)]

use core::ffi::{c_int, c_void};

use rdma_sys::{ibv_ah, ibv_context, ibv_qp, ibv_qp_ex, ibv_qp_init_attr_ex, ibv_sge};

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------

/// `MLX5DV_CONTEXT_MASK_DCI_STREAMS`: ask for / report `dci_streams_caps`.
pub(crate) const MLX5DV_CONTEXT_MASK_DCI_STREAMS: u64 = 1 << 11;
/// `MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM` (upstream, not in rdma-core 44):
/// ask for / report `max_dc_rd_atom` and `max_dc_init_rd_atom`.
pub(crate) const MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM: u64 = 1 << 14;
/// `MLX5DV_CONTEXT_MASK_REG_C0` (upstream, not in rdma-core 44).
#[cfg(test)]
pub(crate) const MLX5DV_CONTEXT_MASK_REG_C0: u64 = 1 << 15;
/// `MLX5DV_CONTEXT_MASK_OOO_RECV_WRS` (upstream, not in rdma-core 44):
/// ask for / report `ooo_recv_wrs_caps`.
pub(crate) const MLX5DV_CONTEXT_MASK_OOO_RECV_WRS: u64 = 1 << 16;

/// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`: `create_flags` is valid.
pub(crate) const MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS: u64 = 1 << 0;
/// `MLX5DV_QP_INIT_ATTR_MASK_DC`: `dc_init_attr` is valid (a DCI or a DCT).
pub(crate) const MLX5DV_QP_INIT_ATTR_MASK_DC: u64 = 1 << 1;
/// `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`: `dc_init_attr.dci_streams` is valid.
pub(crate) const MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS: u64 = 1 << 3;

/// `MLX5DV_QP_CREATE_OOO_DP`: allow out-of-order data placement on this QP.
/// Not in rdma-core 44; value from upstream `providers/mlx5/mlx5dv.h`.
pub(crate) const MLX5DV_QP_CREATE_OOO_DP: u32 = 1 << 7;

/// `enum mlx5dv_dc_type` (a C enum with small positive values: `unsigned int`).
pub(crate) type mlx5dv_dc_type = u32;
/// `MLX5DV_DCTYPE_DCT`: the responder side of DC.
pub(crate) const MLX5DV_DCTYPE_DCT: mlx5dv_dc_type = 1;
/// `MLX5DV_DCTYPE_DCI`: the initiator side of DC.
pub(crate) const MLX5DV_DCTYPE_DCI: mlx5dv_dc_type = 2;

/// `struct mlx5dv_clock_info`: what `mlx5dv_get_clock_info` fills and the
/// inline `mlx5dv_ts_to_ns` reads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_clock_info {
    pub(crate) nsec: u64,
    pub(crate) last_cycles: u64,
    pub(crate) frac: u64,
    pub(crate) mult: u32,
    pub(crate) shift: u32,
    pub(crate) mask: u64,
}

// ---------------------------------------------------------------------------
// mlx5dv_context and its members
// ---------------------------------------------------------------------------

/// `struct mlx5dv_cqe_comp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_cqe_comp_caps {
    pub(crate) max_num: u32,
    pub(crate) supported_format: u32,
}

/// `struct mlx5dv_sw_parsing_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_sw_parsing_caps {
    pub(crate) sw_parsing_offloads: u32,
    pub(crate) supported_qpts: u32,
}

/// `struct mlx5dv_striding_rq_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_striding_rq_caps {
    pub(crate) min_single_stride_log_num_of_bytes: u32,
    pub(crate) max_single_stride_log_num_of_bytes: u32,
    pub(crate) min_single_wqe_log_num_of_strides: u32,
    pub(crate) max_single_wqe_log_num_of_strides: u32,
    pub(crate) supported_qpts: u32,
}

/// `struct mlx5dv_sig_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_sig_caps {
    pub(crate) block_size: u64,
    pub(crate) block_prot: u32,
    pub(crate) t10dif_bg: u16,
    pub(crate) crc_type: u16,
}

/// `struct mlx5dv_dci_streams_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct mlx5dv_dci_streams_caps {
    pub(crate) max_log_num_concurent: u8,
    pub(crate) max_log_num_errored: u8,
}

/// `struct mlx5dv_crypto_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_crypto_caps {
    pub(crate) failed_selftests: u16,
    pub(crate) crypto_engines: u8,
    pub(crate) wrapped_import_method: u8,
    pub(crate) log_max_num_deks: u8,
    pub(crate) flags: u32,
}

/// `struct mlx5dv_reg` (a `#define` for `struct mlx5_ib_uapi_reg`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_reg {
    pub(crate) value: u32,
    pub(crate) mask: u32,
}

/// `struct mlx5dv_ooo_recv_wrs_caps` (upstream only): per transport, the
/// largest receive queue that allows out-of-order WQE consumption.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct mlx5dv_ooo_recv_wrs_caps {
    pub(crate) max_rc: u32,
    pub(crate) max_xrc: u32,
    pub(crate) max_dct: u32,
    pub(crate) max_ud: u32,
    pub(crate) max_uc: u32,
}

/// `struct mlx5dv_context`, in its upstream layout (see the module docs for
/// why that is safe against the rdma-core 44 library).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct mlx5dv_context {
    pub(crate) version: u8,
    pub(crate) flags: u64,
    /// In: the capabilities asked for. Out: the ones the library filled.
    pub(crate) comp_mask: u64,
    pub(crate) cqe_comp_caps: mlx5dv_cqe_comp_caps,
    pub(crate) sw_parsing_caps: mlx5dv_sw_parsing_caps,
    pub(crate) striding_rq_caps: mlx5dv_striding_rq_caps,
    pub(crate) tunnel_offloads_caps: u32,
    pub(crate) max_dynamic_bfregs: u32,
    pub(crate) max_clock_info_update_nsec: u64,
    pub(crate) flow_action_flags: u32,
    pub(crate) dc_odp_caps: u32,
    pub(crate) hca_core_clock: *mut c_void,
    pub(crate) num_lag_ports: u8,
    pub(crate) sig_caps: mlx5dv_sig_caps,
    pub(crate) dci_streams_caps: mlx5dv_dci_streams_caps,
    pub(crate) max_wr_memcpy_length: usize,
    pub(crate) crypto_caps: mlx5dv_crypto_caps,
    // ---- end of the rdma-core 44 layout; upstream-only fields follow ----
    pub(crate) max_dc_rd_atom: u64,
    pub(crate) max_dc_init_rd_atom: u64,
    pub(crate) reg_c0: mlx5dv_reg,
    pub(crate) ooo_recv_wrs_caps: mlx5dv_ooo_recv_wrs_caps,
}

impl mlx5dv_context {
    /// An all-zero context whose `comp_mask` requests `mask`.
    pub(crate) fn request(mask: u64) -> Self {
        Self {
            version: 0,
            flags: 0,
            comp_mask: mask,
            cqe_comp_caps: Default::default(),
            sw_parsing_caps: Default::default(),
            striding_rq_caps: Default::default(),
            tunnel_offloads_caps: 0,
            max_dynamic_bfregs: 0,
            max_clock_info_update_nsec: 0,
            flow_action_flags: 0,
            dc_odp_caps: 0,
            hca_core_clock: core::ptr::null_mut(),
            num_lag_ports: 0,
            sig_caps: Default::default(),
            dci_streams_caps: Default::default(),
            max_wr_memcpy_length: 0,
            crypto_caps: Default::default(),
            max_dc_rd_atom: 0,
            max_dc_init_rd_atom: 0,
            reg_c0: Default::default(),
            ooo_recv_wrs_caps: Default::default(),
        }
    }
}

/// The capabilities verbsim reads from a filled [`mlx5dv_context`], each
/// `None` unless the library reported it in the returned `comp_mask`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mlx5dvContext {
    /// `flags` (always written by the library).
    pub(crate) flags: u64,
    /// `dci_streams_caps`, when `MLX5DV_CONTEXT_MASK_DCI_STREAMS` came back.
    pub(crate) dci_streams_caps: Option<mlx5dv_dci_streams_caps>,
    /// `(max_dc_rd_atom, max_dc_init_rd_atom)`, when
    /// `MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM` came back (never on rdma-core 44).
    pub(crate) max_dc_rd_atom: Option<(u64, u64)>,
    /// `ooo_recv_wrs_caps`, when `MLX5DV_CONTEXT_MASK_OOO_RECV_WRS` came back
    /// (never on rdma-core 44).
    pub(crate) ooo_recv_wrs_caps: Option<mlx5dv_ooo_recv_wrs_caps>,
}

impl Mlx5dvContext {
    /// The `comp_mask` to request before calling `mlx5dv_query_device`.
    pub(crate) const REQUEST: u64 = MLX5DV_CONTEXT_MASK_DCI_STREAMS
        | MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM
        | MLX5DV_CONTEXT_MASK_OOO_RECV_WRS;

    /// Reads the fields of `ctx` whose bit the library set in `comp_mask`,
    /// and nothing else.
    pub(crate) fn from_filled(ctx: &mlx5dv_context) -> Self {
        let got = ctx.comp_mask;
        Self {
            flags: ctx.flags,
            dci_streams_caps: (got & MLX5DV_CONTEXT_MASK_DCI_STREAMS != 0)
                .then_some(ctx.dci_streams_caps),
            max_dc_rd_atom: (got & MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM != 0)
                .then_some((ctx.max_dc_rd_atom, ctx.max_dc_init_rd_atom)),
            ooo_recv_wrs_caps: (got & MLX5DV_CONTEXT_MASK_OOO_RECV_WRS != 0)
                .then_some(ctx.ooo_recv_wrs_caps),
        }
    }
}

// ---------------------------------------------------------------------------
// QP creation
// ---------------------------------------------------------------------------

/// `struct mlx5dv_dci_streams`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct mlx5dv_dci_streams {
    pub(crate) log_num_concurent: u8,
    pub(crate) log_num_errored: u8,
}

/// The anonymous union inside `struct mlx5dv_dc_init_attr`: a DCT's access
/// key or a DCI's stream configuration.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union mlx5dv_dc_init_attr_u {
    pub(crate) dct_access_key: u64,
    pub(crate) dci_streams: mlx5dv_dci_streams,
}

/// `struct mlx5dv_dc_init_attr`. C spells the union anonymously; its members
/// are reached here through `u`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct mlx5dv_dc_init_attr {
    pub(crate) dc_type: mlx5dv_dc_type,
    pub(crate) u: mlx5dv_dc_init_attr_u,
}

/// `struct mlx5dv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct mlx5dv_qp_init_attr {
    pub(crate) comp_mask: u64,
    pub(crate) create_flags: u32,
    pub(crate) dc_init_attr: mlx5dv_dc_init_attr,
    pub(crate) send_ops_flags: u64,
}

impl mlx5dv_qp_init_attr {
    /// All fields zero: no optional attribute requested.
    pub(crate) fn zeroed() -> Self {
        Self {
            comp_mask: 0,
            create_flags: 0,
            dc_init_attr: mlx5dv_dc_init_attr {
                dc_type: 0,
                u: mlx5dv_dc_init_attr_u { dct_access_key: 0 },
            },
            send_ops_flags: 0,
        }
    }
}

// ---------------------------------------------------------------------------
// The extended QP's mlx5 function table
// ---------------------------------------------------------------------------

/// `struct mlx5dv_mkey` (only ever used behind a pointer here).
#[repr(C)]
pub(crate) struct mlx5dv_mkey {
    _opaque: [u8; 0],
}
/// `struct mlx5dv_mr_interleaved` (only ever used behind a pointer here).
#[repr(C)]
pub(crate) struct mlx5dv_mr_interleaved {
    _opaque: [u8; 0],
}
/// `struct mlx5dv_mkey_conf_attr` (only ever used behind a pointer here).
#[repr(C)]
pub(crate) struct mlx5dv_mkey_conf_attr {
    _opaque: [u8; 0],
}
/// `struct mlx5dv_sig_block_attr` (only ever used behind a pointer here).
#[repr(C)]
pub(crate) struct mlx5dv_sig_block_attr {
    _opaque: [u8; 0],
}
/// `struct mlx5dv_crypto_attr` (only ever used behind a pointer here).
#[repr(C)]
pub(crate) struct mlx5dv_crypto_attr {
    _opaque: [u8; 0],
}

/// `struct mlx5dv_qp_ex`: the provider's table of mlx5-specific work-request
/// builders for a QP created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`. Every
/// entry is nullable (`Option`), as the provider fills only the ones the QP
/// supports.
#[repr(C)]
#[allow(clippy::use_self)] // signatures spelled as in the C header
pub(crate) struct mlx5dv_qp_ex {
    pub(crate) comp_mask: u64,
    pub(crate) wr_set_dc_addr: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            ah: *mut ibv_ah,
            remote_dctn: u32,
            remote_dc_key: u64,
        ),
    >,
    pub(crate) wr_mr_interleaved: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            mkey: *mut mlx5dv_mkey,
            access_flags: u32,
            repeat_count: u32,
            num_interleaved: u16,
            data: *mut mlx5dv_mr_interleaved,
        ),
    >,
    pub(crate) wr_mr_list: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            mkey: *mut mlx5dv_mkey,
            access_flags: u32,
            num_sges: u16,
            sge: *mut ibv_sge,
        ),
    >,
    pub(crate) wr_mkey_configure: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            mkey: *mut mlx5dv_mkey,
            num_setters: u8,
            attr: *mut mlx5dv_mkey_conf_attr,
        ),
    >,
    pub(crate) wr_set_mkey_access_flags:
        Option<unsafe extern "C" fn(mqp: *mut mlx5dv_qp_ex, access_flags: u32)>,
    pub(crate) wr_set_mkey_layout_list:
        Option<unsafe extern "C" fn(mqp: *mut mlx5dv_qp_ex, num_sges: u16, sge: *const ibv_sge)>,
    pub(crate) wr_set_mkey_layout_interleaved: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            repeat_count: u32,
            num_interleaved: u16,
            data: *const mlx5dv_mr_interleaved,
        ),
    >,
    pub(crate) wr_set_mkey_sig_block:
        Option<unsafe extern "C" fn(mqp: *mut mlx5dv_qp_ex, attr: *const mlx5dv_sig_block_attr)>,
    pub(crate) wr_raw_wqe: Option<unsafe extern "C" fn(mqp: *mut mlx5dv_qp_ex, wqe: *const c_void)>,
    pub(crate) wr_set_dc_addr_stream: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            ah: *mut ibv_ah,
            remote_dctn: u32,
            remote_dc_key: u64,
            stream_id: u16,
        ),
    >,
    pub(crate) wr_memcpy: Option<
        unsafe extern "C" fn(
            mqp: *mut mlx5dv_qp_ex,
            dest_lkey: u32,
            dest_addr: u64,
            src_lkey: u32,
            src_addr: u64,
            length: usize,
        ),
    >,
    pub(crate) wr_set_mkey_crypto:
        Option<unsafe extern "C" fn(mqp: *mut mlx5dv_qp_ex, attr: *const mlx5dv_crypto_attr)>,
}

// ---------------------------------------------------------------------------
// Functions exported by libmlx5
// ---------------------------------------------------------------------------

#[link(name = "mlx5")]
extern "C" {
    /// `mlx5dv_create_qp` (MLX5_1.3). Returns NULL and sets `errno` on failure.
    pub(crate) fn mlx5dv_create_qp(
        context: *mut ibv_context,
        qp_attr: *mut ibv_qp_init_attr_ex,
        mlx5_qp_attr: *mut mlx5dv_qp_init_attr,
    ) -> *mut ibv_qp;

    /// `mlx5dv_qp_ex_from_ibv_qp_ex` (MLX5_1.10): the mlx5 table that lives
    /// next to an extended QP's generic one. Never fails for an mlx5 QP.
    pub(crate) fn mlx5dv_qp_ex_from_ibv_qp_ex(qp: *mut ibv_qp_ex) -> *mut mlx5dv_qp_ex;

    /// `mlx5dv_query_device` (MLX5_1.0). Returns 0 or a positive errno
    /// (`EOPNOTSUPP` for a non-mlx5 context); does not use `errno`.
    pub(crate) fn mlx5dv_query_device(
        ctx_in: *mut ibv_context,
        attrs_out: *mut mlx5dv_context,
    ) -> c_int;

    /// `mlx5dv_get_clock_info` (MLX5_1.4): the current parameters of the
    /// device's clock conversion. Returns 0 or a positive errno
    /// (`EOPNOTSUPP` for a non-mlx5 context, `EINVAL` when the kernel gave
    /// no clock info page); does not use `errno`.
    pub(crate) fn mlx5dv_get_clock_info(
        ctx_in: *mut ibv_context,
        clock_info: *mut mlx5dv_clock_info,
    ) -> c_int;

    /// `mlx5dv_dci_stream_id_reset` (MLX5_1.21): moves one errored stream of
    /// a DCI back to working order. Returns 0 or a positive errno.
    pub(crate) fn mlx5dv_dci_stream_id_reset(qp: *mut ibv_qp, stream_id: u16) -> c_int;

    /// `mlx5dv_reserved_qpn_alloc` (MLX5_1.18): reserves a device-unique QP
    /// number no QP uses (for `rdma_cm` external QPs). Returns 0 and writes
    /// `*qpn`, or a positive errno (`EOPNOTSUPP` for a non-mlx5 context or
    /// a device without the support).
    pub(crate) fn mlx5dv_reserved_qpn_alloc(ctx: *mut ibv_context, qpn: *mut u32) -> c_int;

    /// `mlx5dv_reserved_qpn_dealloc` (MLX5_1.18): releases a reserved
    /// number. Returns 0 or a positive errno (`EINVAL` for a number this
    /// context does not hold).
    pub(crate) fn mlx5dv_reserved_qpn_dealloc(ctx: *mut ibv_context, qpn: u32) -> c_int;
}

// ---------------------------------------------------------------------------
// The header's `static inline` helpers, restated
// ---------------------------------------------------------------------------

/// Sets the DC destination of the work request being built on a DCI:
/// the Rust form of the header's inline `mlx5dv_wr_set_dc_addr`, which calls
/// through `mqp->wr_set_dc_addr`.
///
/// Returns `false` (and does nothing) when the provider left the entry NULL,
/// where the C inline would jump to address zero.
///
/// # Safety
///
/// 1. `mqp` is the non-null table returned by [`mlx5dv_qp_ex_from_ibv_qp_ex`]
///    for a DCI that is still alive;
/// 2. a work request is open on that QP (between `ibv_wr_start` and
///    `ibv_wr_complete`/`ibv_wr_abort`) and its opcode has been set;
/// 3. `ah` is a live address handle of the QP's context;
/// 4. no other thread builds work requests on the same QP concurrently.
pub(crate) unsafe fn mlx5dv_wr_set_dc_addr(
    mqp: *mut mlx5dv_qp_ex,
    ah: *mut ibv_ah,
    remote_dctn: u32,
    remote_dc_key: u64,
) -> bool {
    // SAFETY: (1) `mqp` is non-null and points to a live table, so reading a
    // field is a valid read of initialised memory.
    let f = unsafe { (*mqp).wr_set_dc_addr };
    match f {
        Some(f) => {
            // SAFETY: the provider's function has exactly the C signature
            // declared above; its preconditions are the caller's (1)-(4):
            // live table, open WR, live AH, exclusive access.
            unsafe { f(mqp, ah, remote_dctn, remote_dc_key) };
            true
        }
        None => false,
    }
}

/// Like [`mlx5dv_wr_set_dc_addr`] with a DCI stream id: the Rust form of the
/// header's inline `mlx5dv_wr_set_dc_addr_stream`, which calls through
/// `mqp->wr_set_dc_addr_stream`.
///
/// Returns `false` (and does nothing) when the provider left the entry NULL.
///
/// # Safety
///
/// The same four obligations as [`mlx5dv_wr_set_dc_addr`]; in addition the
/// DCI was created with DCI streams and `stream_id` is below its
/// concurrency (the provider does not check it on the fast path).
pub(crate) unsafe fn mlx5dv_wr_set_dc_addr_stream(
    mqp: *mut mlx5dv_qp_ex,
    ah: *mut ibv_ah,
    remote_dctn: u32,
    remote_dc_key: u64,
    stream_id: u16,
) -> bool {
    // SAFETY: (1) `mqp` is non-null and points to a live table.
    let f = unsafe { (*mqp).wr_set_dc_addr_stream };
    match f {
        Some(f) => {
            // SAFETY: the provider's function has the declared C signature;
            // the caller guarantees a live table, an open WR, a live AH,
            // exclusive access and an in-range stream id.
            unsafe { f(mqp, ah, remote_dctn, remote_dc_key, stream_id) };
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_reads_only_reported_fields() {
        let mut ctx = mlx5dv_context::request(Mlx5dvContext::REQUEST);
        // What rdma-core 44 does: fill the DCI-streams caps it knows, leave
        // the upstream-only tail alone, and report only the bits it filled.
        ctx.dci_streams_caps = mlx5dv_dci_streams_caps {
            max_log_num_concurent: 4,
            max_log_num_errored: 3,
        };
        ctx.max_dc_rd_atom = 0xdead; // garbage the library did not write
        ctx.ooo_recv_wrs_caps.max_rc = 0xbeef;
        ctx.comp_mask = MLX5DV_CONTEXT_MASK_DCI_STREAMS;
        let caps = Mlx5dvContext::from_filled(&ctx);
        assert_eq!(
            caps.dci_streams_caps.map(|c| c.max_log_num_concurent),
            Some(4)
        );
        assert_eq!(caps.max_dc_rd_atom, None);
        assert_eq!(caps.ooo_recv_wrs_caps, None);

        ctx.comp_mask |= MLX5DV_CONTEXT_MASK_OOO_RECV_WRS | MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM;
        let caps = Mlx5dvContext::from_filled(&ctx);
        assert_eq!(caps.ooo_recv_wrs_caps.map(|c| c.max_rc), Some(0xbeef));
        assert_eq!(caps.max_dc_rd_atom, Some((0xdead, 0)));
    }

    #[test]
    fn request_zeroes_everything_but_the_mask() {
        let ctx = mlx5dv_context::request(7);
        assert_eq!(ctx.comp_mask, 7);
        assert_eq!(ctx.flags, 0);
        assert!(ctx.hca_core_clock.is_null());
        assert_eq!(ctx.ooo_recv_wrs_caps, mlx5dv_ooo_recv_wrs_caps::default());
    }

    unsafe extern "C" fn record_dc(mqp: *mut mlx5dv_qp_ex, _ah: *mut ibv_ah, dctn: u32, key: u64) {
        // SAFETY: the test passes a live, exclusively owned table.
        unsafe { (*mqp).comp_mask = u64::from(dctn) ^ key };
    }

    unsafe extern "C" fn record_dc_stream(
        mqp: *mut mlx5dv_qp_ex,
        _ah: *mut ibv_ah,
        dctn: u32,
        key: u64,
        s: u16,
    ) {
        // SAFETY: the test passes a live, exclusively owned table.
        unsafe { (*mqp).comp_mask = u64::from(dctn) ^ key ^ (u64::from(s) << 40) };
    }

    fn empty_table() -> mlx5dv_qp_ex {
        mlx5dv_qp_ex {
            comp_mask: 0,
            wr_set_dc_addr: None,
            wr_mr_interleaved: None,
            wr_mr_list: None,
            wr_mkey_configure: None,
            wr_set_mkey_access_flags: None,
            wr_set_mkey_layout_list: None,
            wr_set_mkey_layout_interleaved: None,
            wr_set_mkey_sig_block: None,
            wr_raw_wqe: None,
            wr_set_dc_addr_stream: None,
            wr_memcpy: None,
            wr_set_mkey_crypto: None,
        }
    }

    #[test]
    fn inline_helpers_call_through_the_table() {
        let mut t = empty_table();
        let ah = core::ptr::null_mut();
        // SAFETY: `t` is a live table we own; the entries are NULL, so
        // nothing is called and no WR or AH is needed.
        assert!(!unsafe { mlx5dv_wr_set_dc_addr(&mut t, ah, 1, 2) });
        // SAFETY: as above.
        assert!(!unsafe { mlx5dv_wr_set_dc_addr_stream(&mut t, ah, 1, 2, 3) });
        t.wr_set_dc_addr = Some(record_dc);
        t.wr_set_dc_addr_stream = Some(record_dc_stream);
        // SAFETY: `t` is live and exclusively ours; `record_dc` only writes
        // `comp_mask` and ignores the AH, so a null AH is fine for it.
        assert!(unsafe { mlx5dv_wr_set_dc_addr(&mut t, ah, 0x10, 0x01) });
        assert_eq!(t.comp_mask, 0x11);
        // SAFETY: as above, for `record_dc_stream`.
        assert!(unsafe { mlx5dv_wr_set_dc_addr_stream(&mut t, ah, 0x10, 0x01, 2) });
        assert_eq!(t.comp_mask, 0x11 | (2 << 40));
    }
}
