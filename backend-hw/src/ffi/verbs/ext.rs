//! Extended CQs (`ibv_create_cq_ex`), the GID-table entry points and
//! memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`) and
//! `ibv_advise_mr`, restated.

use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use core::ptr::NonNull;

use rdma_sys::{
    ib_uverbs_advise_mr_advice, ibv_context, ibv_cq_ex, ibv_cq_init_attr_ex, ibv_gid_entry, ibv_mw,
    ibv_mw_bind, ibv_mw_type, ibv_pd, ibv_qp, ibv_sge, verbs_context,
};

use super::*;

/// `ibv_create_cq_ex`: the extended provider entry, after the header's
/// `comp_mask` check (`EINVAL` for bits at or past
/// `IBV_CQ_INIT_ATTR_MASK_RESERVED`); `EOPNOTSUPP` without the entry.
///
/// # Safety
///
/// `context` is a live context; `attr` is valid and its channel, if any,
/// a live channel of that context.
pub(crate) unsafe fn ibv_create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> Result<NonNull<ibv_cq_ex>, i32> {
    // SAFETY: valid `attr` (caller).
    if unsafe { (*attr).comp_mask } & !((1 << 2) - 1) != 0 {
        return Err(22); // EINVAL
    }
    match ctx_op!(context, create_cq_ex) {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(context, attr) }),
        None => Err(EOPNOTSUPP),
    }
}

// `ibv_query_gid_ex` and `ibv_query_gid_table` are header inlines over
// these exported symbols (IBVERBS_1.11), which rdma-sys does not bind.
extern "C" {
    /// `_ibv_query_gid_ex`: 0 or a positive errno.
    pub(crate) fn _ibv_query_gid_ex(
        context: *mut ibv_context,
        port_num: u32,
        gid_index: u32,
        entry: *mut ibv_gid_entry,
        flags: u32,
        entry_size: usize,
    ) -> c_int;
    /// `_ibv_query_gid_table`: the number of entries or a negative errno.
    pub(crate) fn _ibv_query_gid_table(
        context: *mut ibv_context,
        entries: *mut ibv_gid_entry,
        max_entries: usize,
        flags: u32,
        entry_size: usize,
    ) -> isize;
}

/// `ibv_dealloc_mw`: `mw->context->ops.dealloc_mw(mw)`. Returns 0 or a
/// positive errno (`EOPNOTSUPP` without an entry).
///
/// # Safety
///
/// `mw` is a live MW of a live context, not used after a 0 return.
pub(crate) unsafe fn ibv_dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: `mw` and its context are live (caller).
    match unsafe { (*(*mw).context).ops.dealloc_mw } {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => unsafe { f(mw) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_alloc_mw`: `pd->context->ops.alloc_mw(pd, type)`.
///
/// # Safety
///
/// `pd` is a live PD of a live context.
pub(crate) unsafe fn ibv_alloc_mw(
    pd: *mut ibv_pd,
    mw_type: ibv_mw_type::Type,
) -> Result<NonNull<ibv_mw>, i32> {
    // SAFETY: `pd` and its context are live (caller).
    match unsafe { (*(*pd).context).ops.alloc_mw } {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(pd, mw_type) }),
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_bind_mw` (the header's inline): the type, address and PD checks,
/// then `mw->context->ops.bind_mw(qp, mw, mw_bind)`. Returns 0 or a
/// positive errno.
///
/// # Safety
///
/// `qp` and `mw` are live objects of one live context; `bind` is valid and
/// its `mr`, if non-null, a live MR.
pub(crate) unsafe fn ibv_bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *mut ibv_mw_bind,
) -> c_int {
    // SAFETY: live objects and a valid `bind` (caller): plain reads.
    unsafe {
        if (*mw).type_ != ibv_mw_type::IBV_MW_TYPE_1 {
            return 22; // EINVAL
        }
        let info = &(*bind).bind_info;
        if info.mr.is_null() && (info.addr != 0 || info.length != 0) {
            return 22; // EINVAL
        }
        if !info.mr.is_null() && (*mw).pd != (*info.mr).pd {
            return 1; // EPERM
        }
        match (*(*mw).context).ops.bind_mw {
            Some(f) => f(qp, mw, bind),
            None => EOPNOTSUPP,
        }
    }
}

/// `ibv_advise_mr`: the provider's `advise_mr` entry, or `EOPNOTSUPP`
/// without one. Returns 0 or a positive errno.
///
/// # Safety
///
/// `pd` is a live PD of a live context; `sg_list` names `num_sge`
/// readable entries.
pub(crate) unsafe fn ibv_advise_mr(
    pd: *mut ibv_pd,
    advice: ib_uverbs_advise_mr_advice::Type,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    // SAFETY: `pd` is live (caller), so its context is.
    let context = unsafe { (*pd).context };
    match ctx_op!(context, advise_mr) {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => unsafe { f(pd, advice, flags, sg_list, num_sge) },
        None => EOPNOTSUPP,
    }
}
