//! Device memory: the context's `alloc_dm`, `free_dm` and `reg_dm_mr` ops
//! (the inline `ibv_alloc_dm`, `ibv_free_dm` and `ibv_reg_dm_mr` of
//! `verbs.h` call them through `struct verbs_context`), and the
//! `memcpy_to_dm` / `memcpy_from_dm` pointers of `struct ibv_dm` that the
//! inline `ibv_memcpy_to_dm` / `ibv_memcpy_from_dm` call.
//!
//! The DM's bytes live in the simulator (in this process or on the shared
//! fabric); the copy functions move the caller's bytes in and out, and MRs
//! registered on a DM are zero-based (`addr` NULL). The copy functions
//! return the errno itself (0 on success), as rdma-core's mlx5 provider
//! does, not -1.

use core::ffi::{c_int, c_uint, c_void};

use backend_sim::*;
use verbs_api::*;

use crate::export::export;
use crate::provider::state::{
    self, c, handle_of, ret_int, ret_ptr, with, Fail, Obj, Res, Shim, SimRes,
};

/// The context's `alloc_dm` op.
pub(crate) unsafe extern "C" fn op_alloc_dm(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_alloc_dm_attr,
) -> *mut c::ibv_dm {
    crate::guard::catch("ibv_alloc_dm", || {
        ret_ptr(with(|shim| {
            let v = "ibv_alloc_dm";
            let ctx = crate::provider::device::ctx_of(shim, v, context)?;
            if attr.is_null() {
                return Err(Fail::new(v, libc::EINVAL, "attr is NULL"));
            }
            // SAFETY: non-NULL; the caller's struct, read once.
            let a = unsafe { *attr };
            let want = AllocDmAttr {
                length: a.length as u64,
                log_align_req: a.log_align_req,
                comp_mask: a.comp_mask,
            };
            let h = shim.sim.alloc_dm(&ctx, &want).at(v)?;
            let dm = state::alloc_zeroed::<c::ibv_dm>();
            // SAFETY: just allocated, not shared yet.
            unsafe {
                (*dm).context = context;
                (*dm).memcpy_to_dm = Some(dm_memcpy_to);
                (*dm).memcpy_from_dm = Some(dm_memcpy_from);
                (*dm).comp_mask = c::IBV_DM_MASK_HANDLE;
                (*dm).handle = h.index();
            }
            shim.add(dm.cast(), Obj::Dm(h));
            if let Some(e) = shim.get_mut(dm.cast()) {
                e.extra.dm_len = want.length;
            }
            Ok(dm)
        }))
    })
}

/// The context's `free_dm` op.
pub(crate) unsafe extern "C" fn op_free_dm(dm: *mut c::ibv_dm) -> c_int {
    crate::guard::catch("ibv_free_dm", || {
        ret_int(with(|shim| {
            let v = "ibv_free_dm";
            let h = handle_of!(shim, v, dm, Dm, "DM")?;
            shim.sim.free_dm(&h).at(v)?;
            shim.objects.remove(&(dm as usize));
            // SAFETY: a live DM of ours, freed in the simulator above, freed once.
            unsafe { state::free(dm) };
            Ok(())
        }))
    })
}

/// The DM behind `dm` and whether `[offset, offset + length)` lies in it:
/// `EFAULT` past its end, before anything reads the caller's buffer.
fn dm_range(shim: &Shim, v: &str, dm: *mut c::ibv_dm, offset: u64, length: usize) -> Res<DmHandle> {
    let h = handle_of!(shim, v, dm, Dm, "DM")?;
    let len = shim.get(dm.cast()).map_or(0, |e| e.extra.dm_len);
    if offset
        .checked_add(length as u64)
        .is_none_or(|end| end > len)
    {
        return Err(Fail::new(
            v,
            libc::EFAULT,
            format!("offset {offset} + length {length} is past the device memory's {len} bytes"),
        ));
    }
    Ok(h)
}

/// `struct ibv_dm`'s `memcpy_to_dm` (the inline `ibv_memcpy_to_dm`).
pub(crate) unsafe extern "C" fn dm_memcpy_to(
    dm: *mut c::ibv_dm,
    dm_offset: u64,
    host_addr: *const c_void,
    length: usize,
) -> c_int {
    crate::guard::catch("ibv_memcpy_to_dm", || {
        ret_int(with(|shim| {
            let v = "ibv_memcpy_to_dm";
            let h = dm_range(shim, v, dm, dm_offset, length)?;
            if length > 0 && host_addr.is_null() {
                return Err(Fail::new(v, libc::EFAULT, "host_addr is NULL"));
            }
            let host: &[u8] = if length == 0 {
                &[]
            } else {
                // SAFETY: ibv_memcpy_to_dm's contract, as memcpy's: the
                // caller's `host_addr` is readable for `length` bytes (not
                // NULL, checked above), and nothing writes it during the
                // call. The range was checked against the DM first, so a
                // length no DM could hold never reaches here.
                unsafe { core::slice::from_raw_parts(host_addr.cast::<u8>(), length) }
            };
            shim.sim.memcpy_to_dm(&h, dm_offset, host).at(v)
        }))
    })
}

/// `struct ibv_dm`'s `memcpy_from_dm` (the inline `ibv_memcpy_from_dm`).
pub(crate) unsafe extern "C" fn dm_memcpy_from(
    host_addr: *mut c_void,
    dm: *mut c::ibv_dm,
    dm_offset: u64,
    length: usize,
) -> c_int {
    crate::guard::catch("ibv_memcpy_from_dm", || {
        ret_int(with(|shim| {
            let v = "ibv_memcpy_from_dm";
            let h = dm_range(shim, v, dm, dm_offset, length)?;
            if length > 0 && host_addr.is_null() {
                return Err(Fail::new(v, libc::EFAULT, "host_addr is NULL"));
            }
            let host: &mut [u8] = if length == 0 {
                &mut []
            } else {
                // SAFETY: ibv_memcpy_from_dm's contract, as memcpy's: the
                // caller's `host_addr` is writable for `length` bytes (not
                // NULL, checked above) and nothing else uses it during the
                // call. The range was checked against the DM first.
                unsafe { core::slice::from_raw_parts_mut(host_addr.cast::<u8>(), length) }
            };
            shim.sim.memcpy_from_dm(&h, dm_offset, host).at(v)
        }))
    })
}

/// The context's `reg_dm_mr` op: a zero-based MR on device memory.
pub(crate) unsafe extern "C" fn op_reg_dm_mr(
    pd: *mut c::ibv_pd,
    dm: *mut c::ibv_dm,
    dm_offset: u64,
    length: usize,
    access: c_uint,
) -> *mut c::ibv_mr {
    crate::guard::catch("ibv_reg_dm_mr", || {
        ret_ptr(with(|shim| {
            let v = "ibv_reg_dm_mr";
            let p = handle_of!(shim, v, pd, Pd, "PD")?;
            let d = handle_of!(shim, v, dm, Dm, "DM")?;
            let m = shim
                .sim
                .reg_dm_mr(&p, &d, dm_offset, length, AccessFlags(access))
                .at(v)?;
            let info = shim.sim.mr_info(&m).at(v)?;
            let mr = state::alloc_zeroed::<c::ibv_mr>();
            // SAFETY: just allocated, not shared yet; `pd` is a live PD of ours.
            unsafe {
                (*mr).context = (*pd).context;
                (*mr).pd = pd;
                (*mr).addr = core::ptr::null_mut();
                (*mr).length = length;
                (*mr).handle = m.index();
                (*mr).lkey = info.lkey;
                (*mr).rkey = info.rkey;
            }
            shim.add(mr.cast(), Obj::Mr(m));
            Ok(mr)
        }))
    })
}

export! { "MLX5_1.10" fn mlx5dv_alloc_dm(context: *mut c::ibv_context, dm_attr: *mut c::ibv_alloc_dm_attr, mlx5_dm_attr: *mut c::mlx5dv_alloc_dm_attr) -> *mut c::ibv_dm {
    // mlx5's checks first, then the same allocation as `ibv_alloc_dm`
    // (which mlx5 implements as a MEMIC mlx5dv_alloc_dm).
    let checked: Res<()> = with(|shim| {
        let v = "mlx5dv_alloc_dm";
        crate::provider::device::ctx_of(shim, v, context)?;
        // SAFETY: a live context of ours.
        let device = unsafe { (*context).device };
        if crate::provider::mlx5::device_is_mlx5(shim, device) != Some(true) {
            return Err(Fail::new(v, libc::EOPNOTSUPP, "not an mlx5 device profile"));
        }
        if dm_attr.is_null() || mlx5_dm_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "dm_attr or mlx5_dm_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's structs.
        let (a, m) = unsafe { (*dm_attr, *mlx5_dm_attr) };
        match m.type_ {
            c::MLX5_IB_UAPI_DM_TYPE_MEMIC => {}
            c::MLX5_IB_UAPI_DM_TYPE_STEERING_SW_ICM
            | c::MLX5_IB_UAPI_DM_TYPE_HEADER_MODIFY_SW_ICM
            | c::MLX5_IB_UAPI_DM_TYPE_HEADER_MODIFY_PATTERN_SW_ICM => {
                return Err(Fail::new(v, libc::EOPNOTSUPP, "steering and header-modify ICM memory are not modelled (MEMIC is)"));
            }
            t => return Err(Fail::new(v, libc::EOPNOTSUPP, format!("unknown device memory type {t}"))),
        }
        if a.comp_mask != 0 || m.comp_mask != 0 {
            return Err(Fail::new(v, libc::EINVAL, "comp_mask bits mlx5 does not know"));
        }
        Ok(())
    });
    match checked {
        // SAFETY: the caller's arguments, checked above.
        Ok(()) => unsafe { op_alloc_dm(context, dm_attr) },
        Err(f) => {
            crate::guard::set_errno(f.errno);
            core::ptr::null_mut()
        }
    }
}}
