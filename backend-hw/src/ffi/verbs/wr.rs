//! The extended-QP work-request builders (`ibv_wr_*`), restated.

use core::ffi::c_int;

use rdma_sys::{ibv_data_buf, ibv_mw, ibv_mw_bind_info, ibv_qp_ex, ibv_sge};

use super::*;

/// One opcode builder of `struct ibv_qp_ex`, with its arguments
/// (`imm_be` already in network byte order, as C takes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WrBuilder {
    /// `ibv_wr_rdma_write`.
    RdmaWrite { rkey: u32, addr: u64 },
    /// `ibv_wr_rdma_write_imm`.
    RdmaWriteImm { rkey: u32, addr: u64, imm_be: u32 },
    /// `ibv_wr_send`.
    Send,
    /// `ibv_wr_send_imm`.
    SendImm { imm_be: u32 },
    /// `ibv_wr_rdma_read`.
    RdmaRead { rkey: u32, addr: u64 },
    /// `ibv_wr_atomic_cmp_swp`.
    CmpSwp {
        rkey: u32,
        addr: u64,
        compare: u64,
        swap: u64,
    },
    /// `ibv_wr_atomic_fetch_add`.
    FetchAdd { rkey: u32, addr: u64, add: u64 },
    /// `ibv_wr_send_inv`.
    SendInv { rkey: u32 },
    /// `ibv_wr_local_inv`.
    LocalInv { rkey: u32 },
    /// `ibv_wr_bind_mw` (the MW and its bind info's MR must be live).
    BindMw {
        mw: *mut ibv_mw,
        rkey: u32,
        mr: *mut rdma_sys::ibv_mr,
        addr: u64,
        length: u64,
        access: u32,
    },
}

/// `true` when the provider filled the entry `b` needs (it fills only the
/// builders of the `send_ops_flags` the QP was created with).
///
/// # Safety
///
/// `qpx` is non-null and points to the live `ibv_qp_ex` of a live QP.
pub(crate) unsafe fn ibv_wr_has_builder(qpx: *mut ibv_qp_ex, b: &WrBuilder) -> bool {
    // SAFETY: `qpx` is live (caller), so reading its fields is valid.
    let q = unsafe { &*qpx };
    match b {
        WrBuilder::RdmaWrite { .. } => q.wr_rdma_write.is_some(),
        WrBuilder::RdmaWriteImm { .. } => q.wr_rdma_write_imm.is_some(),
        WrBuilder::Send => q.wr_send.is_some(),
        WrBuilder::SendImm { .. } => q.wr_send_imm.is_some(),
        WrBuilder::RdmaRead { .. } => q.wr_rdma_read.is_some(),
        WrBuilder::CmpSwp { .. } => q.wr_atomic_cmp_swp.is_some(),
        WrBuilder::FetchAdd { .. } => q.wr_atomic_fetch_add.is_some(),
        WrBuilder::SendInv { .. } => q.wr_send_inv.is_some(),
        WrBuilder::LocalInv { .. } => q.wr_local_inv.is_some(),
        WrBuilder::BindMw { .. } => q.wr_bind_mw.is_some(),
    }
}

/// The header's inline opcode builders (`ibv_wr_rdma_write`, …): start a
/// new work request with `qpx->wr_id` and `qpx->wr_flags`. Returns `false`
/// (doing nothing) when the provider left the entry NULL, where rdma-sys's
/// version would panic on `unwrap`.
///
/// # Safety
///
/// 1. `qpx` is the live `ibv_qp_ex` of a live QP;
/// 2. a batch is open on it (`ibv_wr_start` called, not yet completed or
///    aborted), and no other thread builds on it;
/// 3. `wr_id` and `wr_flags` of `*qpx` are set for this request.
pub(crate) unsafe fn ibv_wr_opcode(qpx: *mut ibv_qp_ex, b: &WrBuilder) -> bool {
    // SAFETY: (1) `qpx` is live; reading the entries is a plain read.
    let q = unsafe { &*qpx };
    // SAFETY: for every call below, the provider's entry has exactly the C
    // signature bindgen declared, and (1)-(3) are the obligations the
    // header's inline puts on its caller.
    unsafe {
        match *b {
            WrBuilder::RdmaWrite { rkey, addr } => match q.wr_rdma_write {
                Some(f) => f(qpx, rkey, addr),
                None => return false,
            },
            WrBuilder::RdmaWriteImm { rkey, addr, imm_be } => match q.wr_rdma_write_imm {
                Some(f) => f(qpx, rkey, addr, imm_be),
                None => return false,
            },
            WrBuilder::Send => match q.wr_send {
                Some(f) => f(qpx),
                None => return false,
            },
            WrBuilder::SendImm { imm_be } => match q.wr_send_imm {
                Some(f) => f(qpx, imm_be),
                None => return false,
            },
            WrBuilder::RdmaRead { rkey, addr } => match q.wr_rdma_read {
                Some(f) => f(qpx, rkey, addr),
                None => return false,
            },
            WrBuilder::CmpSwp {
                rkey,
                addr,
                compare,
                swap,
            } => match q.wr_atomic_cmp_swp {
                Some(f) => f(qpx, rkey, addr, compare, swap),
                None => return false,
            },
            WrBuilder::FetchAdd { rkey, addr, add } => match q.wr_atomic_fetch_add {
                Some(f) => f(qpx, rkey, addr, add),
                None => return false,
            },
            WrBuilder::SendInv { rkey } => match q.wr_send_inv {
                Some(f) => f(qpx, rkey),
                None => return false,
            },
            WrBuilder::LocalInv { rkey } => match q.wr_local_inv {
                Some(f) => f(qpx, rkey),
                None => return false,
            },
            WrBuilder::BindMw {
                mw,
                rkey,
                mr,
                addr,
                length,
                access,
            } => match q.wr_bind_mw {
                Some(f) => {
                    let info = ibv_mw_bind_info {
                        mr,
                        addr,
                        length,
                        mw_access_flags: access,
                    };
                    f(qpx, mw, rkey, &info);
                }
                None => return false,
            },
        }
    }
    true
}

/// `true` when the batch entries (`wr_start`, `wr_complete`, `wr_abort`)
/// and the data setter the requests need are all present.
///
/// # Safety
///
/// `qpx` is non-null and points to the live `ibv_qp_ex` of a live QP.
pub(crate) unsafe fn ibv_wr_has_batch_ops(qpx: *mut ibv_qp_ex, inline: bool) -> bool {
    // SAFETY: `qpx` is live (caller).
    let q = unsafe { &*qpx };
    let data = if inline {
        q.wr_set_inline_data_list.is_some()
    } else {
        q.wr_set_sge_list.is_some()
    };
    q.wr_start.is_some() && q.wr_complete.is_some() && q.wr_abort.is_some() && data
}

/// `ibv_wr_start`. Returns `false` if the provider has no entry.
///
/// # Safety
///
/// `qpx` is the live `ibv_qp_ex` of a live QP with no batch open, and no
/// other thread posts on it until the batch is completed or aborted.
pub(crate) unsafe fn ibv_wr_start(qpx: *mut ibv_qp_ex) -> bool {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_start } {
        Some(f) => {
            // SAFETY: provider entry with this signature; caller's contract.
            unsafe { f(qpx) };
            true
        }
        None => false,
    }
}

/// `ibv_wr_complete`: posts the whole batch, or (on error) none of it.
/// Returns 0 or a positive errno; `EOPNOTSUPP` without an entry.
///
/// # Safety
///
/// `qpx` is the live `ibv_qp_ex` of a live QP with a batch open; every
/// byte the batch's SGEs name is the caller's `post_send` contract.
pub(crate) unsafe fn ibv_wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_complete } {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => unsafe { f(qpx) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_wr_set_ud_addr`. Returns `false` without an entry.
///
/// # Safety
///
/// As [`ibv_wr_set_sge_list`], and `ah` is a live AH of the QP's context.
pub(crate) unsafe fn ibv_wr_set_ud_addr(
    qpx: *mut ibv_qp_ex,
    ah: *mut rdma_sys::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) -> bool {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_set_ud_addr } {
        Some(f) => {
            // SAFETY: provider entry with this signature; caller's contract.
            unsafe { f(qpx, ah, remote_qpn, remote_qkey) };
            true
        }
        None => false,
    }
}

/// `ibv_wr_set_xrc_srqn`. Returns `false` without an entry.
///
/// # Safety
///
/// As [`ibv_wr_set_sge_list`].
pub(crate) unsafe fn ibv_wr_set_xrc_srqn(qpx: *mut ibv_qp_ex, remote_srqn: u32) -> bool {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_set_xrc_srqn } {
        Some(f) => {
            // SAFETY: provider entry with this signature; caller's contract.
            unsafe { f(qpx, remote_srqn) };
            true
        }
        None => false,
    }
}

/// `ibv_wr_abort`: drops the open batch. Returns `false` without an entry.
///
/// # Safety
///
/// `qpx` is the live `ibv_qp_ex` of a live QP with a batch open.
pub(crate) unsafe fn ibv_wr_abort(qpx: *mut ibv_qp_ex) -> bool {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_abort } {
        Some(f) => {
            // SAFETY: provider entry with this signature; caller's contract.
            unsafe { f(qpx) };
            true
        }
        None => false,
    }
}

/// `ibv_wr_set_sge_list`. Returns `false` without an entry.
///
/// # Safety
///
/// As [`ibv_wr_opcode`] (1)-(2), an opcode has been set for the current
/// request, and `sg_list` names `num_sge` readable entries (the provider
/// copies them into the WQE before returning).
pub(crate) unsafe fn ibv_wr_set_sge_list(
    qpx: *mut ibv_qp_ex,
    num_sge: usize,
    sg_list: *const ibv_sge,
) -> bool {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_set_sge_list } {
        Some(f) => {
            // SAFETY: provider entry with this signature; caller's contract.
            unsafe { f(qpx, num_sge, sg_list) };
            true
        }
        None => false,
    }
}

/// `ibv_wr_set_inline_data_list`: copies the bytes into the WQE now.
/// Returns `false` without an entry.
///
/// # Safety
///
/// As [`ibv_wr_set_sge_list`], and every `buf_list[i].addr` names
/// `length` readable bytes.
pub(crate) unsafe fn ibv_wr_set_inline_data_list(
    qpx: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) -> bool {
    // SAFETY: `qpx` is live (caller).
    match unsafe { (*qpx).wr_set_inline_data_list } {
        Some(f) => {
            // SAFETY: provider entry with this signature; caller's contract.
            unsafe { f(qpx, num_buf, buf_list) };
            true
        }
        None => false,
    }
}
