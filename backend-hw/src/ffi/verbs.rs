//! The `static inline` verbs of `<infiniband/verbs.h>` that verbsim calls,
//! each restated once in Rust with a `# Safety` note.
//!
//! rdma-sys 0.3 does ship Rust versions of these (`src/verbs.rs`), but they
//! cannot be used as they are:
//!
//! * **Extended verbs never work on 64-bit.** rdma-sys decides whether a
//!   context is extended by comparing `abi_compat` with `u32::MAX`, while
//!   libibverbs stores `UINTPTR_MAX` there (`__VERBS_ABI_IS_EXTENDED` in
//!   `verbs.h`, set in `libibverbs/device.c`). On x86-64 the test is always
//!   false, so its `ibv_open_xrcd`, `ibv_open_qp`, `ibv_create_qp_ex` (any
//!   mask other than plain PD), `ibv_create_srq_ex`, `ibv_get_srq_num`,
//!   `ibv_query_device_ex` and `___ibv_query_port` report `EOPNOTSUPP` or
//!   silently take the legacy path, and `ibv_close_xrcd` panics on an
//!   `unwrap` of `None`. The test `rdma_sys_extended_context_check_is_broken`
//!   below demonstrates it on a fake context.
//! * **`ibv_create_srq_ex` picks the wrong path.** Its condition differs from
//!   the C one, so an XRC SRQ request (`PD | TYPE | XRCD | CQ` with
//!   `IBV_SRQT_XRC`) is handed to the legacy `ibv_create_srq`, which creates
//!   a *basic* SRQ.
//! * **The fast-path verbs `unwrap()` the provider's function pointers**, so a
//!   provider that leaves one NULL panics inside a verb. Ours return
//!   `EOPNOTSUPP` instead.
//!
//! The functions that create an object return `Result<NonNull<T>, i32>`: the
//! error is the `errno` read immediately after the failing call (or the errno
//! the C inline would have set).

#![allow(non_snake_case)]

use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use core::ptr::{self, NonNull};

use rdma_sys::{
    _compat_ibv_port_attr, ibv_async_event_element_t, ibv_context, ibv_cq, ibv_create_qp,
    ibv_create_srq, ibv_device_attr_ex, ibv_port_attr, ibv_qp, ibv_qp_init_attr,
    ibv_qp_init_attr_ex, ibv_qp_init_attr_mask, ibv_qp_open_attr, ibv_query_device, ibv_recv_wr,
    ibv_send_wr, ibv_srq, ibv_srq_init_attr, ibv_srq_init_attr_ex, ibv_srq_init_attr_mask,
    ibv_srq_type, ibv_values_ex, ibv_wc, ibv_xrcd, ibv_xrcd_init_attr, verbs_context,
};

/// `EOPNOTSUPP` on Linux.
pub(crate) const EOPNOTSUPP: i32 = 95;
/// `ENOSYS` on Linux.
pub(crate) const ENOSYS: i32 = 38;

/// The calling thread's `errno`, read through `std` (no libc dependency).
/// Call it right after the failing C call, before anything that may
/// allocate or do I/O.
pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Converts a C "pointer, or NULL and `errno`" result. A NULL with
/// `errno == 0` (a provider that forgot to set it) is reported as `ENOMEM`,
/// the conventional "could not create" errno, so a failure never reads as
/// errno 0.
fn ptr_or_errno<T>(p: *mut T) -> Result<NonNull<T>, i32> {
    match NonNull::new(p) {
        Some(p) => Ok(p),
        None => {
            let e = last_errno();
            Err(if e == 0 { 12 } else { e })
        }
    }
}

/// The value libibverbs stores in `ibv_context::abi_compat` for an extended
/// (`verbs_context`) context: `__VERBS_ABI_IS_EXTENDED`, i.e. `UINTPTR_MAX`.
const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// Restates `verbs_get_ctx`: the `verbs_context` that embeds `ctx`, if `ctx`
/// is an extended context.
///
/// # Safety
///
/// `ctx` is non-null and points to a live `ibv_context` returned by
/// `ibv_open_device` (so that, when it is extended, it really is the last
/// member of a `verbs_context`).
unsafe fn verbs_get_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: `ctx` is live and non-null (caller), so reading a field is fine.
    let abi = unsafe { (*ctx).abi_compat } as usize;
    if abi != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    // SAFETY: an extended context is the `context` member of a
    // `verbs_context` (libibverbs allocates them together), so stepping back
    // by that member's offset stays inside the same allocation.
    Some(unsafe { ctx.byte_sub(offset_of!(verbs_context, context)) }.cast::<verbs_context>())
}

/// Restates `verbs_get_ctx_op(ctx, op)`: the provider's entry `op` of the
/// extended context, if the context is extended, the provider's
/// `verbs_context` is large enough to contain `op` (`sz` counts the bytes
/// from `op`'s position up to the end), and the entry is non-null.
macro_rules! ctx_op {
    ($ctx:expr, $op:ident) => {{
        // SAFETY: the enclosing function's contract makes `$ctx` a live,
        // non-null context from `ibv_open_device`.
        match unsafe { verbs_get_ctx($ctx) } {
            None => None,
            Some(vctx) => {
                // SAFETY: `vctx` points to the live `verbs_context` around
                // `$ctx`; `sz` sits right before `context`, which every
                // provider fills.
                let sz = unsafe { (*vctx).sz };
                if sz < size_of::<verbs_context>() - offset_of!(verbs_context, $op) {
                    None
                } else {
                    // SAFETY: `sz` says the provider's structure reaches `$op`.
                    unsafe { (*vctx).$op }
                }
            }
        }
    }};
}

// ---------------------------------------------------------------------------
// Fast path: calls through `ibv_context::ops`
// ---------------------------------------------------------------------------

/// `ibv_post_send`: `qp->context->ops.post_send(qp, wr, bad_wr)`.
///
/// Returns 0 or a positive errno (C convention; `errno` is not used).
///
/// # Safety
///
/// 1. `qp` is a live QP of a live context;
/// 2. `wr` heads a NULL-terminated chain of valid `ibv_send_wr`s whose
///    `sg_list` pointers name `num_sge` valid entries each;
/// 3. `bad_wr` is valid for one write;
/// 4. every byte range named by a (non-inline) SGE or remote address stays
///    valid and is not written by Rust until the completion is reaped
///    (the hardware reads/writes it asynchronously).
pub(crate) unsafe fn ibv_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: (1) `qp` and its `context` are live, so both reads are valid.
    let f = unsafe { (*(*qp).context).ops.post_send };
    match f {
        // SAFETY: the provider's entry has this C signature; (1)-(4) are
        // exactly the obligations `ibv_post_send` puts on its caller.
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => {
            // SAFETY: (3) `bad_wr` is valid for a write; C reports the first
            // request as the bad one when nothing was posted.
            unsafe { *bad_wr = wr };
            EOPNOTSUPP
        }
    }
}

/// `ibv_post_recv`: `qp->context->ops.post_recv(qp, wr, bad_wr)`.
///
/// # Safety
///
/// As [`ibv_post_send`], for a chain of `ibv_recv_wr`s: (1) live QP and
/// context, (2) valid NULL-terminated chain, (3) `bad_wr` writable, (4) the
/// receive buffers stay valid and untouched until their completions.
pub(crate) unsafe fn ibv_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: (1) `qp` and its `context` are live.
    let f = unsafe { (*(*qp).context).ops.post_recv };
    match f {
        // SAFETY: provider entry with this C signature; (1)-(4) discharge it.
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => {
            // SAFETY: (3) `bad_wr` is writable.
            unsafe { *bad_wr = wr };
            EOPNOTSUPP
        }
    }
}

/// `ibv_post_srq_recv`: `srq->context->ops.post_srq_recv(srq, wr, bad_wr)`.
///
/// # Safety
///
/// As [`ibv_post_recv`] with a live SRQ in place of the QP.
pub(crate) unsafe fn ibv_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: (1) `srq` and its `context` are live.
    let f = unsafe { (*(*srq).context).ops.post_srq_recv };
    match f {
        // SAFETY: provider entry with this C signature; the caller's
        // obligations are those of `ibv_post_srq_recv`.
        Some(f) => unsafe { f(srq, wr, bad_wr) },
        None => {
            // SAFETY: `bad_wr` is writable.
            unsafe { *bad_wr = wr };
            EOPNOTSUPP
        }
    }
}

/// `ibv_poll_cq`: `cq->context->ops.poll_cq(cq, num_entries, wc)`.
///
/// Returns the number of completions written (≥ 0) or a negative value on
/// error (C convention); `-EOPNOTSUPP` if the provider has no entry.
///
/// # Safety
///
/// 1. `cq` is a live CQ of a live context;
/// 2. `wc` is valid for writes of `num_entries` `ibv_wc`s;
/// 3. no other thread polls the same CQ concurrently (libibverbs CQs are
///    not internally locked for polling on every provider).
pub(crate) unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: (1) `cq` and its `context` are live.
    let f = unsafe { (*(*cq).context).ops.poll_cq };
    match f {
        // SAFETY: provider entry with this C signature; (1)-(3) are its contract.
        Some(f) => unsafe { f(cq, num_entries, wc) },
        None => -EOPNOTSUPP,
    }
}

/// `ibv_req_notify_cq`: `cq->context->ops.req_notify_cq(cq, solicited_only)`.
///
/// Returns 0 or a positive errno.
///
/// # Safety
///
/// `cq` is a live CQ of a live context, created with a completion channel.
pub(crate) unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: `cq` and its `context` are live.
    let f = unsafe { (*(*cq).context).ops.req_notify_cq };
    match f {
        // SAFETY: provider entry with this C signature on a live CQ.
        Some(f) => unsafe { f(cq, solicited_only) },
        None => EOPNOTSUPP,
    }
}

// ---------------------------------------------------------------------------
// Extended verbs: calls through `verbs_context`
// ---------------------------------------------------------------------------

/// `ibv_open_xrcd`.
///
/// # Safety
///
/// `context` is a live context from `ibv_open_device`; `attr` is valid for
/// reads and writes and its `fd` (if `IBV_XRCD_INIT_ATTR_FD` is set) is an
/// open file descriptor or -1.
pub(crate) unsafe fn ibv_open_xrcd(
    context: *mut ibv_context,
    attr: *mut ibv_xrcd_init_attr,
) -> Result<NonNull<ibv_xrcd>, i32> {
    match ctx_op!(context, open_xrcd) {
        // SAFETY: provider entry with this C signature; live context and a
        // valid attribute block (caller).
        Some(f) => ptr_or_errno(unsafe { f(context, attr) }),
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_close_xrcd`. Returns 0 or a positive errno.
///
/// # Safety
///
/// `xrcd` was returned by [`ibv_open_xrcd`], is not closed yet, and no QP or
/// SRQ created on it is still alive.
pub(crate) unsafe fn ibv_close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    // SAFETY: `xrcd` is live, so its `context` field is readable.
    let ctx = unsafe { (*xrcd).context };
    match ctx_op!(ctx, close_xrcd) {
        // SAFETY: provider entry with this C signature on a live XRCD whose
        // dependants are gone (caller).
        Some(f) => unsafe { f(xrcd) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_create_qp_ex`: the legacy `ibv_create_qp` when only the PD is given,
/// the provider's `create_qp_ex` otherwise.
///
/// # Safety
///
/// `context` is a live context; `attr` is valid for reads and writes, and
/// every object it names (PD, CQs, SRQ, XRCD) is live and belongs to
/// `context`.
pub(crate) unsafe fn ibv_create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> Result<NonNull<ibv_qp>, i32> {
    // SAFETY: `attr` is valid for reads (caller).
    let (mask, pd) = unsafe { ((*attr).comp_mask, (*attr).pd) };
    if mask == ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0 {
        // SAFETY: `ibv_qp_init_attr` is the leading part of
        // `ibv_qp_init_attr_ex` (same fields, same order; the layout test
        // checks the offsets), so the cast names valid memory; PD live.
        return ptr_or_errno(unsafe { ibv_create_qp(pd, attr.cast::<ibv_qp_init_attr>()) });
    }
    match ctx_op!(context, create_qp_ex) {
        // SAFETY: provider entry with this C signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(context, attr) }),
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_create_srq_ex`: the legacy `ibv_create_srq` for a basic SRQ that
/// names nothing but the PD (and possibly `IBV_SRQT_BASIC`), the provider's
/// `create_srq_ex` otherwise (XRC and tag-matching SRQs).
///
/// # Safety
///
/// `context` is a live context; `attr` is valid for reads and writes and
/// every object it names (PD, CQ, XRCD) is live and belongs to `context`.
pub(crate) unsafe fn ibv_create_srq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> Result<NonNull<ibv_srq>, i32> {
    // SAFETY: `attr` is valid for reads (caller).
    let (mask, srq_type, pd) = unsafe { ((*attr).comp_mask, (*attr).srq_type, (*attr).pd) };
    let pd_bit = ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_PD.0;
    let type_bit = ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_TYPE.0;
    let legacy = mask & !(pd_bit | type_bit) == 0
        && mask & pd_bit != 0
        && (mask & type_bit == 0 || srq_type == ibv_srq_type::IBV_SRQT_BASIC);
    if legacy {
        // SAFETY: `ibv_srq_init_attr` is the leading part of
        // `ibv_srq_init_attr_ex` (`srq_context`, `attr`; checked by the
        // layout test); the PD is live (caller).
        return ptr_or_errno(unsafe { ibv_create_srq(pd, attr.cast::<ibv_srq_init_attr>()) });
    }
    match ctx_op!(context, create_srq_ex) {
        // SAFETY: provider entry with this C signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(context, attr) }),
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_get_srq_num`. Returns the SRQ number or a positive errno.
///
/// # Safety
///
/// `srq` is a live SRQ of a live context.
pub(crate) unsafe fn ibv_get_srq_num(srq: *mut ibv_srq) -> Result<u32, i32> {
    // SAFETY: `srq` is live, so `context` is readable.
    let ctx = unsafe { (*srq).context };
    match ctx_op!(ctx, get_srq_num) {
        Some(f) => {
            let mut n = 0u32;
            // SAFETY: provider entry with this C signature; `n` is a valid
            // out-parameter for the duration of the call.
            match unsafe { f(srq, &mut n) } {
                0 => Ok(n),
                e => Err(e),
            }
        }
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_open_qp`: opens a handle on a shareable (XRC target) QP by number.
///
/// # Safety
///
/// `context` is a live context; `attr` is valid for reads and its `xrcd`
/// is a live XRCD of `context`.
pub(crate) unsafe fn ibv_open_qp(
    context: *mut ibv_context,
    attr: *mut ibv_qp_open_attr,
) -> Result<NonNull<ibv_qp>, i32> {
    match ctx_op!(context, open_qp) {
        // SAFETY: provider entry with this C signature; caller's contract.
        Some(f) => ptr_or_errno(unsafe { f(context, attr) }),
        None => Err(EOPNOTSUPP),
    }
}

/// `ibv_query_device_ex` with no input: the provider's `query_device_ex`,
/// falling back to the zero-filled legacy `ibv_query_device` when the
/// provider lacks it (`EOPNOTSUPP`/`ENOSYS`). Returns 0 or a positive errno.
///
/// # Safety
///
/// `context` is a live context; `attr` is valid for writes.
pub(crate) unsafe fn ibv_query_device_ex(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr_ex,
) -> c_int {
    if let Some(f) = ctx_op!(context, query_device_ex) {
        // SAFETY: provider entry with this C signature; NULL input is
        // allowed; `attr` is writable for `size_of` bytes (caller).
        let ret = unsafe { f(context, ptr::null(), attr, size_of::<ibv_device_attr_ex>()) };
        if ret != EOPNOTSUPP && ret != ENOSYS {
            return ret;
        }
    }
    // SAFETY: `attr` is valid for writes of one `ibv_device_attr_ex`, and
    // every field of that plain C struct is valid when all bytes are zero.
    unsafe { ptr::write_bytes(attr, 0, 1) };
    // SAFETY: live context; `orig_attr` is a field of the writable `attr`.
    unsafe { ibv_query_device(context, &raw mut (*attr).orig_attr) }
}

/// `ibv_query_rt_values_ex`: the provider's `query_rt_values`, or
/// `EOPNOTSUPP` when the provider has none (as the C inline answers).
/// Returns 0 or a positive errno.
///
/// # Safety
///
/// `context` is a live context; `values` is valid for reads and writes.
pub(crate) unsafe fn ibv_query_rt_values_ex(
    context: *mut ibv_context,
    values: *mut ibv_values_ex,
) -> c_int {
    match ctx_op!(context, query_rt_values) {
        // SAFETY: provider entry with this C signature; `values` is a
        // readable and writable `ibv_values_ex` (caller).
        Some(f) => unsafe { f(context, values) },
        None => EOPNOTSUPP,
    }
}

/// `ibv_query_port` (the header's `___ibv_query_port`): the extended
/// provider entry with the full `ibv_port_attr` size, or the compat symbol
/// that fills only the old leading part (the rest left zero).
/// Returns 0 or a positive errno.
///
/// # Safety
///
/// `context` is a live context; `attr` is valid for writes.
pub(crate) unsafe fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    if let Some(f) = ctx_op!(context, query_port) {
        // SAFETY: provider entry with this C signature; `attr` writable for
        // the size we pass (caller).
        return unsafe { f(context, port_num, attr, size_of::<ibv_port_attr>()) };
    }
    // SAFETY: `attr` is writable; all-zero is a valid `ibv_port_attr`.
    unsafe { ptr::write_bytes(attr, 0, 1) };
    // SAFETY: the compat attribute block is the leading part of
    // `ibv_port_attr` (the library's own cast), and `attr` is writable.
    unsafe { rdma_sys::ibv_query_port(context, port_num, attr.cast::<_compat_ibv_port_attr>()) }
}

// ---------------------------------------------------------------------------
// Async events: `struct ibv_async_event` with an integer event type
// ---------------------------------------------------------------------------

/// `struct ibv_async_event`, with `event_type` as the raw C integer.
///
/// rdma-sys declares `event_type` as a Rust `enum ibv_event_type`; a value
/// the enum lacks (a newer kernel's event type) would then be undefined
/// behaviour the moment Rust reads it. We hand libibverbs this struct
/// instead (same layout: the layout test compares it with the header) and
/// cast the pointer to rdma-sys's type only to call the exported function.
#[repr(C)]
pub(crate) struct ibv_async_event_raw {
    /// `element`: which member is valid depends on `event_type`
    /// (`crate::registry::element_kind`).
    pub(crate) element: ibv_async_event_element_t,
    /// `event_type`: a raw `enum ibv_event_type` value.
    pub(crate) event_type: u32,
}

impl ibv_async_event_raw {
    /// An event with a null element and type 0.
    pub(crate) fn empty() -> Self {
        Self {
            element: ibv_async_event_element_t {
                qp: ptr::null_mut(),
            },
            event_type: 0,
        }
    }
}

/// `ibv_get_async_event`: reads one event from the context's `async_fd`.
/// Returns 0, or -1 with `errno` set (`EAGAIN` when the descriptor is
/// non-blocking and no event is pending).
///
/// # Safety
///
/// 1. `context` is a live context from `ibv_open_device` (or librdmacm);
/// 2. `event` is valid for one write.
pub(crate) unsafe fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event_raw,
) -> c_int {
    // SAFETY: (1) live context; (2) writable event whose layout is that of
    // `struct ibv_async_event` (layout test). The cast only changes the
    // pointer's Rust type: no `ibv_event_type` value is ever read by Rust.
    unsafe { rdma_sys::ibv_get_async_event(context, event.cast()) }
}

/// `ibv_ack_async_event`: counts one event of `event->element`'s object as
/// handled (the object's destroy waits for that count).
///
/// # Safety
///
/// 1. `event` is readable and its `event_type` selects the union member
///    that holds a pointer to a *live* object (or a port number);
/// 2. that object has at least one event fetched and not yet acknowledged
///    (acknowledging more than were fetched makes its destroy wait forever).
pub(crate) unsafe fn ibv_ack_async_event(event: *mut ibv_async_event_raw) {
    // SAFETY: (1)-(2) are exactly the library's requirements; the cast only
    // changes the Rust type of the pointer (same layout, layout test).
    unsafe { rdma_sys::ibv_ack_async_event(event.cast()) }
}

// The extended-QP work-request builders (`ibv_wr_*`), extended CQs, GID
// entries and memory windows: declared after `ctx_op!`, which they use.
mod dm;
mod ext;
mod wr;

pub(crate) use dm::*;
pub(crate) use ext::*;
pub(crate) use wr::*;

#[cfg(test)]
mod tests;
