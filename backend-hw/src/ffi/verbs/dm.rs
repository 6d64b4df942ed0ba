//! Device memory, restated from the header's inlines: `ibv_alloc_dm`,
//! `ibv_free_dm` and `ibv_reg_dm_mr` call provider entries of
//! `struct verbs_context`; `ibv_memcpy_to_dm` / `ibv_memcpy_from_dm` call the
//! function pointers of `struct ibv_dm` itself. rdma-sys has these as
//! inlines too, but they unwrap the pointers; these answer `EOPNOTSUPP`
//! for a missing one instead.

use core::ffi::{c_int, c_uint};
use core::mem::{offset_of, size_of};
use core::ptr::NonNull;

use rdma_sys::{ibv_alloc_dm_attr, ibv_context, ibv_dm, ibv_mr, ibv_pd, verbs_context};

use super::*;

/// `ibv_alloc_dm`: the provider's `alloc_dm` entry (`EOPNOTSUPP` without it).
///
/// # Safety
///
/// `context` is a live context; `attr` points to a valid attribute block.
pub(crate) unsafe fn ibv_alloc_dm(
    context: *mut ibv_context,
    attr: *mut ibv_alloc_dm_attr,
) -> Result<NonNull<ibv_dm>, i32> {
    match ctx_op!(context, alloc_dm) {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(context, attr) }),
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_free_dm`: the provider's `free_dm` entry. Returns 0 or a positive
/// errno.
///
/// # Safety
///
/// `dm` is a live DM of a live context, not used again after a 0 return.
/// (While MRs are registered on it the kernel refuses, `EBUSY`, and the DM
/// stays live.)
pub(crate) unsafe fn ibv_free_dm(dm: *mut ibv_dm) -> c_int {
    // SAFETY: `dm` is live (caller): a plain read of its context.
    let context = unsafe { (*dm).context };
    match ctx_op!(context, free_dm) {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => unsafe { f(dm) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_memcpy_to_dm(dm, offset, src, src.len())`. Returns 0 or a positive
/// errno (the provider checks the range and the 4-byte alignment).
///
/// # Safety
///
/// `dm` is a live DM.
pub(crate) unsafe fn ibv_memcpy_to_dm(dm: *mut ibv_dm, offset: u64, src: &[u8]) -> c_int {
    // SAFETY: `dm` is live (caller): a plain read of a field the provider set.
    match unsafe { (*dm).memcpy_to_dm } {
        // SAFETY: provider entry with this signature; `src` is readable for
        // its length for the whole call (a borrowed slice).
        Some(f) => unsafe { f(dm, offset, src.as_ptr().cast(), src.len()) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_memcpy_from_dm(dst, dm, offset, dst.len())`. Returns 0 or a
/// positive errno.
///
/// # Safety
///
/// `dm` is a live DM.
pub(crate) unsafe fn ibv_memcpy_from_dm(dst: &mut [u8], dm: *mut ibv_dm, offset: u64) -> c_int {
    // SAFETY: `dm` is live (caller): a plain read of a field the provider set.
    match unsafe { (*dm).memcpy_from_dm } {
        // SAFETY: provider entry with this signature; `dst` is writable for
        // its length for the whole call (an exclusive borrow) and the
        // provider writes at most that many bytes.
        Some(f) => unsafe { f(dst.as_mut_ptr().cast(), dm, offset, dst.len()) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_reg_dm_mr`: the provider's `reg_dm_mr` entry (`EOPNOTSUPP` without
/// it).
///
/// # Safety
///
/// `pd` and `dm` are live objects of one live context.
pub(crate) unsafe fn ibv_reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    offset: u64,
    length: usize,
    access: c_uint,
) -> Result<NonNull<ibv_mr>, i32> {
    // SAFETY: `pd` is live (caller): a plain read of its context.
    let context = unsafe { (*pd).context };
    match ctx_op!(context, reg_dm_mr) {
        // SAFETY: provider entry with this signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(pd, dm, offset, length, access) }),
        None => Err(EOPNOTSUPP),
    }
}
