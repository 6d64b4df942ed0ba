//! Tests of the restated verbs on fake contexts, and of rdma-sys's broken
//! extended-context check.

use super::*;
use core::mem::MaybeUninit;
use rdma_sys::{ibv_cq_init_attr_ex, ibv_mw, ibv_mw_bind, ibv_mw_type, ibv_pd};

/// A zeroed `verbs_context` that libibverbs would call extended.
fn fake_extended() -> Box<verbs_context> {
    // SAFETY: `verbs_context` is a plain C struct of integers, nullable
    // function pointers (`Option<fn>`), raw pointers and an opaque
    // `pthread_mutex_t` byte array: the all-zero pattern is valid.
    let mut v: Box<verbs_context> = Box::new(unsafe { MaybeUninit::zeroed().assume_init() });
    v.sz = size_of::<verbs_context>();
    v.context.abi_compat = usize::MAX as *mut _;
    v
}

static XRCD_SENTINEL: u8 = 0;

unsafe extern "C" fn fake_open_xrcd(
    _: *mut ibv_context,
    _: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    (&raw const XRCD_SENTINEL).cast_mut().cast()
}

#[test]
fn extended_context_is_detected() {
    let mut v = fake_extended();
    v.open_xrcd = Some(fake_open_xrcd);
    let ctx = &raw mut v.context;
    // SAFETY: `ctx` is the `context` member of a live `verbs_context`
    // that we own, which is what `verbs_get_ctx` needs.
    assert_eq!(unsafe { verbs_get_ctx(ctx) }, Some(&raw mut *v));
    // SAFETY: live fake context; `fake_open_xrcd` ignores the attribute
    // pointer.
    let got = unsafe { ibv_open_xrcd(ctx, ptr::null_mut()) };
    assert_eq!(
        got.map(|p| p.as_ptr().cast::<u8>().cast_const()),
        Ok(&raw const XRCD_SENTINEL)
    );
}

#[test]
fn short_provider_struct_hides_the_op() {
    let mut v = fake_extended();
    v.open_xrcd = Some(fake_open_xrcd);
    // A provider whose verbs_context predates `open_xrcd`.
    v.sz = size_of::<verbs_context>() - offset_of!(verbs_context, open_xrcd) - 1;
    let ctx = &raw mut v.context;
    // SAFETY: live fake context; the op is reported missing, nothing is called.
    let got = unsafe { ibv_open_xrcd(ctx, ptr::null_mut()) };
    assert_eq!(got, Err(EOPNOTSUPP));
}

#[test]
fn rdma_sys_extended_context_check_is_broken() {
    // Documents why this module exists: rdma-sys compares abi_compat with
    // u32::MAX, so a context libibverbs marks extended is not seen as one.
    let mut v = fake_extended();
    v.open_xrcd = Some(fake_open_xrcd);
    let ctx = &raw mut v.context;
    // SAFETY: live fake context; rdma-sys does not call the op here.
    let got = unsafe { rdma_sys::ibv_open_xrcd(ctx, ptr::null_mut()) };
    assert_eq!(
        got, None,
        "rdma-sys fixed its abi_compat check; ffi::verbs may delegate to it again"
    );
}

unsafe extern "C" fn fake_poll(_: *mut ibv_cq, n: c_int, _: *mut ibv_wc) -> c_int {
    n - 1
}

#[test]
fn fast_path_calls_through_ops_and_refuses_null_entries() {
    let mut v = fake_extended();
    // SAFETY: `ibv_cq` is a plain C struct (pointers, integers, opaque
    // pthread byte arrays): all-zero is valid.
    let mut cq: ibv_cq = unsafe { MaybeUninit::zeroed().assume_init() };
    cq.context = &raw mut v.context;
    // SAFETY: live fake CQ and context; the NULL entry is not called.
    let got = unsafe { ibv_poll_cq(&mut cq, 4, ptr::null_mut()) };
    assert_eq!(got, -EOPNOTSUPP);
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_req_notify_cq(&mut cq, 0) }, EOPNOTSUPP);
    v.context.ops.poll_cq = Some(fake_poll);
    // SAFETY: live fake CQ; `fake_poll` does not touch `wc`.
    assert_eq!(unsafe { ibv_poll_cq(&mut cq, 4, ptr::null_mut()) }, 3);
}

unsafe extern "C" fn fake_bind(_: *mut ibv_qp, _: *mut ibv_mw, _: *mut ibv_mw_bind) -> c_int {
    7
}

#[test]
fn bind_mw_checks_what_the_header_checks_before_the_provider() {
    let mut v = fake_extended();
    /// # Safety
    /// All-zero bytes are a valid `T` (a plain C struct).
    unsafe fn z<T>() -> T {
        // SAFETY: the caller's contract.
        unsafe { MaybeUninit::zeroed().assume_init() }
    }
    // SAFETY: `ibv_pd`, `ibv_mr`, `ibv_mw` and `ibv_mw_bind` are plain C
    // structs of pointers and integers: all-zero is valid.
    let (mut pd, mut pd2, mut other, mut same, mut mw, mut bind): (
        ibv_pd,
        ibv_pd,
        rdma_sys::ibv_mr,
        rdma_sys::ibv_mr,
        ibv_mw,
        ibv_mw_bind,
    ) = unsafe { (z(), z(), z(), z(), z(), z()) };
    other.pd = &raw mut pd2;
    same.pd = &raw mut pd;
    mw.context = &raw mut v.context;
    mw.pd = &raw mut pd;
    mw.type_ = ibv_mw_type::IBV_MW_TYPE_2;
    let qp = ptr::null_mut();
    let call = |mw: &mut ibv_mw, bind: &mut ibv_mw_bind| {
        // SAFETY: live fake objects; a provider entry, when reached, is
        // `fake_bind`, which touches nothing.
        unsafe { ibv_bind_mw(qp, mw, bind) }
    };
    assert_eq!(call(&mut mw, &mut bind), 22, "type 2: EINVAL");
    mw.type_ = ibv_mw_type::IBV_MW_TYPE_1;
    bind.bind_info.length = 8;
    assert_eq!(call(&mut mw, &mut bind), 22, "length without MR");
    bind.bind_info.mr = &raw mut other;
    assert_eq!(call(&mut mw, &mut bind), 1, "other PD: EPERM");
    bind.bind_info.mr = &raw mut same;
    assert_eq!(call(&mut mw, &mut bind), EOPNOTSUPP, "no provider entry");
    v.context.ops.bind_mw = Some(fake_bind);
    assert_eq!(call(&mut mw, &mut bind), 7, "the provider's answer");
}

#[test]
fn missing_mw_and_cq_ex_entries_are_eopnotsupp() {
    let mut v = fake_extended();
    // SAFETY: all-zero `ibv_pd` and `ibv_cq_init_attr_ex` are valid.
    let (mut pd, mut attr): (ibv_pd, ibv_cq_init_attr_ex) = unsafe {
        (
            MaybeUninit::zeroed().assume_init(),
            MaybeUninit::zeroed().assume_init(),
        )
    };
    pd.context = &raw mut v.context;
    // SAFETY: live fake PD and context; the NULL op is not called.
    let mw = unsafe { ibv_alloc_mw(&mut pd, ibv_mw_type::IBV_MW_TYPE_1) };
    assert_eq!(mw.err(), Some(EOPNOTSUPP));
    // SAFETY: live fake context, valid attributes; nothing is called.
    let cq = unsafe { ibv_create_cq_ex(&raw mut v.context, &mut attr) };
    assert_eq!(cq.err(), Some(EOPNOTSUPP));
    attr.comp_mask = 1 << 2;
    // SAFETY: as above.
    let cq = unsafe { ibv_create_cq_ex(&raw mut v.context, &mut attr) };
    assert_eq!(
        cq.err(),
        Some(22),
        "comp_mask past IBV_CQ_INIT_ATTR_MASK_RESERVED: EINVAL"
    );
}

#[test]
fn xrc_srq_request_does_not_take_the_legacy_path() {
    let v = fake_extended();
    let mut ctx = v;
    // SAFETY: all-zero is a valid `ibv_srq_init_attr_ex` (pointers and integers).
    let mut attr: ibv_srq_init_attr_ex = unsafe { MaybeUninit::zeroed().assume_init() };
    attr.comp_mask = (ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_PD
        | ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_TYPE
        | ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_XRCD
        | ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_CQ)
        .0;
    attr.srq_type = ibv_srq_type::IBV_SRQT_XRC;
    // The fake provider has no create_srq_ex: the XRC request must be
    // refused, not turned into a basic SRQ by the legacy call.
    // SAFETY: live fake context and a valid attribute block; nothing is called.
    let got = unsafe { ibv_create_srq_ex(&raw mut ctx.context, &mut attr) };
    assert_eq!(got.err(), Some(EOPNOTSUPP));
}

unsafe extern "C" fn fake_to_dm(
    _: *mut rdma_sys::ibv_dm,
    offset: u64,
    _: *const core::ffi::c_void,
    length: usize,
) -> c_int {
    // The mlx5 rule, enough to see the errno come back as the result.
    if offset % 4 != 0 || length % 4 != 0 {
        22
    } else {
        0
    }
}

static DM_SENTINEL: u8 = 0;

unsafe extern "C" fn fake_alloc_dm(
    _: *mut ibv_context,
    _: *mut rdma_sys::ibv_alloc_dm_attr,
) -> *mut rdma_sys::ibv_dm {
    (&raw const DM_SENTINEL).cast_mut().cast()
}

#[test]
fn device_memory_calls_its_entries_and_refuses_missing_ones() {
    // Goal: the DM wrappers call the context's alloc_dm / reg_dm_mr /
    // free_dm entries and the DM's own copy pointers, give the provider's
    // errno back, and answer EOPNOTSUPP where an entry is missing (rdma-sys
    // would unwrap a missing copy pointer, and its extended-context check
    // never finds alloc_dm at all).
    let mut v = fake_extended();
    let ctx = &raw mut v.context;
    let mut attr = rdma_sys::ibv_alloc_dm_attr {
        length: 64,
        log_align_req: 0,
        comp_mask: 0,
    };
    // SAFETY: live fake context without the entry: nothing is called.
    assert_eq!(unsafe { ibv_alloc_dm(ctx, &mut attr) }, Err(EOPNOTSUPP));
    v.alloc_dm = Some(fake_alloc_dm);
    let ctx = &raw mut v.context;
    // SAFETY: live fake context; `fake_alloc_dm` ignores its arguments.
    let got = unsafe { ibv_alloc_dm(ctx, &mut attr) };
    assert_eq!(
        got.map(|p| p.as_ptr().cast::<u8>().cast_const()),
        Ok(&raw const DM_SENTINEL)
    );

    // SAFETY: `ibv_dm` is a plain C struct of a pointer, nullable function
    // pointers and integers: all-zero is valid.
    let mut dm: rdma_sys::ibv_dm = unsafe { MaybeUninit::zeroed().assume_init() };
    dm.context = ctx;
    let mut host = [0u8; 8];
    // SAFETY: a live fake DM without copy pointers: nothing is called.
    assert_eq!(unsafe { ibv_memcpy_to_dm(&mut dm, 0, &host) }, EOPNOTSUPP);
    // SAFETY: as above.
    let rc = unsafe { ibv_memcpy_from_dm(&mut host, &mut dm, 0) };
    assert_eq!(rc, EOPNOTSUPP);
    dm.memcpy_to_dm = Some(fake_to_dm);
    // SAFETY: a live fake DM; `fake_to_dm` reads nothing.
    assert_eq!(unsafe { ibv_memcpy_to_dm(&mut dm, 0, &host) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_memcpy_to_dm(&mut dm, 2, &host) }, 22);
    // SAFETY: the DM's context is the live fake one, without free_dm.
    assert_eq!(unsafe { ibv_free_dm(&mut dm) }, EOPNOTSUPP);
    // SAFETY: `ibv_pd` is a plain C struct: all-zero is valid.
    let mut pd: ibv_pd = unsafe { MaybeUninit::zeroed().assume_init() };
    pd.context = ctx;
    // SAFETY: live fake PD and DM of one fake context without reg_dm_mr.
    let got = unsafe { ibv_reg_dm_mr(&mut pd, &mut dm, 0, 8, 0x21) };
    assert_eq!(got, Err(EOPNOTSUPP));
}
