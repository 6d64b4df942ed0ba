//! Parent domains (`ibv_alloc_parent_domain`, the context's
//! `alloc_parent_domain` op): a `struct ibv_pd` of their own that stands
//! for the protection domain they contain, wherever a PD is taken.
//!
//! What the mlx5 provider does (rdma-core `providers/mlx5/verbs.c`,
//! `mlx5_alloc_parent_domain`, `_mlx5_free_pd`, `mlx5_dealloc_parent_domain`;
//! `libibverbs/driver.h`, `ibv_check_alloc_parent_domain` and
//! `ibv_initialize_parent_domain`), restated:
//!
//! * the attribute's `pd` must be set (`EINVAL`); `comp_mask` may hold
//!   `ALLOCATORS`, `PD_CONTEXT` and `ALLOW_CC_UNPROTECTED_ALLOC`, anything
//!   else is `EINVAL`;
//! * the parent domain copies the contained PD's `context` and `handle`,
//!   and holds a reference on it: `ibv_dealloc_pd` of the contained PD is
//!   `EBUSY` while a parent domain names it;
//! * QPs and extended CQs made on the parent domain hold a reference on
//!   it: `ibv_dealloc_pd` of the parent domain is `EBUSY` until they go;
//! * an extended CQ's `parent_domain` (`IBV_CQ_INIT_ATTR_MASK_PD`) must be
//!   a parent domain (`EINVAL`).
//!
//! The simulator keeps no queue buffers in the program's memory, so the
//! custom allocators of `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS` are kept
//! but never called (docs/divergence.md). Thread domains are not modelled
//! (`ibv_alloc_td` is `EOPNOTSUPP`), so a non-NULL `td` is `EINVAL`.

use crate::provider::state::{self, c, ret_ptr, with, Fail, Obj, Res, Shim};

/// `comp_mask` bits of `struct ibv_parent_domain_init_attr` mlx5 accepts
/// (`ALLOCATORS`, `PD_CONTEXT`, `ALLOW_CC_UNPROTECTED_ALLOC`).
const KNOWN_COMP_MASK: u32 = 0b111;

/// The context's `alloc_parent_domain` op.
pub(crate) unsafe extern "C" fn op_alloc_parent_domain(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_parent_domain_init_attr,
) -> *mut c::ibv_pd {
    crate::guard::catch("ibv_alloc_parent_domain", || {
        ret_ptr(with(|shim| alloc(shim, context, attr)))
    })
}

fn alloc(
    shim: &mut Shim,
    context: *mut c::ibv_context,
    attr: *mut c::ibv_parent_domain_init_attr,
) -> Res<*mut c::ibv_pd> {
    let v = "ibv_alloc_parent_domain";
    let ctx = crate::provider::device::ctx_of(shim, v, context)?;
    // Only mlx5's provider has the op: rxe's leaves it to libibverbs'
    // default, which fails with EOPNOTSUPP (rdma-core providers/rxe/rxe.c
    // has no alloc_parent_domain; libibverbs/dummy_ops.c).
    let device = shim.sim.context_device(ctx).map_err(|e| Fail::sim(v, &e))?;
    if !shim.sim.is_mlx5(device as usize) {
        return Err(Fail::new(
            v,
            libc::EOPNOTSUPP,
            "the device's provider (rxe) has no parent domains",
        ));
    }
    if attr.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "attr is NULL"));
    }
    // SAFETY: non-NULL; the caller's struct.
    let a = unsafe { &*attr };
    if a.pd.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "attr->pd is NULL"));
    }
    let h = match shim.get(a.pd.cast()).map(|e| e.obj) {
        Some(Obj::Pd(h)) => h,
        _ => return Err(Fail::bad_ptr(v, "protection domain", a.pd.cast())),
    };
    // SAFETY: a live PD of ours.
    let (pd_context, handle) = unsafe { ((*a.pd).context, (*a.pd).handle) };
    if pd_context != context {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "attr->pd belongs to another context",
        ));
    }
    if a.comp_mask & !KNOWN_COMP_MASK != 0 {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            format!(
                "unknown comp_mask bits {:#x}",
                a.comp_mask & !KNOWN_COMP_MASK
            ),
        ));
    }
    if !a.td.is_null() {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "attr->td: thread domains are not modelled (ibv_alloc_td is EOPNOTSUPP)",
        ));
    }
    let p = state::alloc_zeroed::<c::ibv_pd>();
    // SAFETY: just allocated, not shared yet.
    unsafe {
        (*p).context = context;
        (*p).handle = handle;
    }
    shim.add(p.cast(), Obj::ParentDomain(h));
    shim.parents.insert(p as usize, a.pd as usize);
    Ok(p)
}

/// `ibv_dealloc_pd` of a parent domain: `None` when `pd` is not one.
pub(crate) fn dealloc(shim: &mut Shim, v: &str, pd: *mut c::ibv_pd) -> Option<Res<()>> {
    if !matches!(
        shim.get(pd.cast()).map(|e| e.obj),
        Some(Obj::ParentDomain(_))
    ) {
        return None;
    }
    let users = shim
        .parent_users
        .values()
        .filter(|&&p| p == pd as usize)
        .count();
    if users > 0 {
        return Some(Err(Fail::new(
            v,
            libc::EBUSY,
            format!("{users} QPs or CQs were created on this parent domain"),
        )));
    }
    shim.parents.remove(&(pd as usize));
    shim.objects.remove(&(pd as usize));
    // SAFETY: a live parent domain of ours, unregistered above, freed once.
    unsafe { state::free(pd) };
    Some(Ok(()))
}

/// `EBUSY` while a parent domain contains `pd`.
pub(crate) fn check_unused_pd(shim: &Shim, v: &str, pd: *mut c::ibv_pd) -> Res<()> {
    let n = shim.parents.values().filter(|&&p| p == pd as usize).count();
    if n > 0 {
        return Err(Fail::new(
            v,
            libc::EBUSY,
            format!("{n} parent domains contain this PD"),
        ));
    }
    Ok(())
}

/// Notes that the QP or CQ at `obj` was made on `pd`, if `pd` is a parent
/// domain.
pub(crate) fn note_user(shim: &mut Shim, obj: usize, pd: *mut c::ibv_pd) {
    if shim.parents.contains_key(&(pd as usize)) {
        shim.parent_users.insert(obj, pd as usize);
    }
}

/// The parent domain of an extended CQ's attributes
/// (`IBV_CQ_INIT_ATTR_MASK_PD`), checked: a parent domain of `context`.
pub(crate) fn cq_parent(
    shim: &Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &c::ibv_cq_init_attr_ex,
) -> Res<Option<*mut c::ibv_pd>> {
    if a.comp_mask & c::IBV_CQ_INIT_ATTR_MASK_PD == 0 {
        return Ok(None);
    }
    let p = a.parent_domain;
    if !matches!(
        shim.get(p.cast()).map(|e| e.obj),
        Some(Obj::ParentDomain(_))
    ) {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "IBV_CQ_INIT_ATTR_MASK_PD: parent_domain is not a parent domain",
        ));
    }
    // SAFETY: a live parent domain of ours.
    if unsafe { (*p).context } != context {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "parent_domain belongs to another context",
        ));
    }
    Ok(Some(p))
}
