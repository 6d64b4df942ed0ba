//! `ibv_import_device`, `ibv_import_pd`, `ibv_import_mr` (IBVERBS_1.10),
//! `ibv_import_dm` (IBVERBS_1.13) and their `unimport` counterparts:
//! further handles, in this process, on a context found by its command fd
//! and on PDs, MRs and DMs found by their handle numbers. The simulator's
//! objects are shared, as the kernel's are between a context and its
//! import.

use core::ffi::c_int;

use crate::export::export;
use crate::provider::state::{self, c, handle_of, ret_ptr, with, Fail, Obj, Res, SimRes};

/// The inode of an fd (`None` if it is not open).
fn inode(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: fstat writes into a live, zeroed struct stat.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: as above; any fd value is acceptable to fstat.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

export! { "IBVERBS_1.10" fn ibv_import_device(cmd_fd: c_int) -> *mut c::ibv_context {
    ret_ptr(with(|shim| {
        let v = "ibv_import_device";
        let want = inode(cmd_fd).ok_or_else(|| Fail::new(v, libc::EBADF, format!("fd {cmd_fd} is not open")))?;
        let found = shim.ctx_ptrs.iter().find_map(|(&h, &p)| {
            // SAFETY: a live context of ours.
            let fd = unsafe { (*(p as *mut c::ibv_context)).cmd_fd };
            (inode(fd) == Some(want)).then_some(h)
        });
        let h = found.ok_or_else(|| Fail::new(v, libc::EOPNOTSUPP, format!("fd {cmd_fd} is not the command fd of a context of this library")))?;
        crate::provider::context::wrap_context_fd(shim, v, h, Some(cmd_fd))
    }))
}}

export! { "IBVERBS_1.10" fn ibv_import_pd(context: *mut c::ibv_context, pd_handle: u32) -> *mut c::ibv_pd {
    ret_ptr(with(|shim| {
        let v = "ibv_import_pd";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        let found = shim.pd_ptrs.iter().find_map(|(&h, &p)| {
            // SAFETY: a live PD of ours.
            let pc = unsafe { (*(p as *mut c::ibv_pd)).context };
            (h.index() == pd_handle && crate::provider::device::ctx_of(shim, v, pc).ok() == Some(ctx)).then_some(h)
        });
        let h = found.ok_or_else(|| Fail::new(v, libc::EINVAL, format!("no PD with handle {pd_handle} on this context")))?;
        let pd = state::alloc_zeroed::<c::ibv_pd>();
        // SAFETY: just allocated.
        unsafe {
            (*pd).context = context;
            (*pd).handle = pd_handle;
        }
        shim.add(pd.cast(), Obj::Pd(h));
        shim.aliases.insert(pd as usize);
        Ok(pd)
    }))
}}

export! { "IBVERBS_1.10" fn ibv_unimport_pd(pd: *mut c::ibv_pd) {
    with(|shim| {
        if shim.aliases.remove(&(pd as usize)) {
            shim.objects.remove(&(pd as usize));
            // SAFETY: an imported PD handle of ours, unregistered above, freed once.
            unsafe { state::free(pd) };
        }
    })
}}

export! { "IBVERBS_1.10" fn ibv_import_mr(pd: *mut c::ibv_pd, mr_handle: u32) -> *mut c::ibv_mr {
    ret_ptr(with(|shim| -> Res<*mut c::ibv_mr> {
        let v = "ibv_import_mr";
        let p = handle_of!(shim, v, pd, Pd, "PD")?;
        let found = shim.objects.values().find_map(|e| match e.obj {
            Obj::Mr(m) if m.index() == mr_handle => Some(m),
            _ => None,
        });
        let m = found.ok_or_else(|| Fail::new(v, libc::EINVAL, format!("no MR with handle {mr_handle}")))?;
        let _ = p;
        let info = shim.sim.mr_info(&m).at(v)?;
        let mr = state::alloc_zeroed::<c::ibv_mr>();
        // SAFETY: just allocated; `pd` is a live PD of ours. The address
        // stays NULL: the kernel does not give it back on import.
        unsafe {
            (*mr).context = (*pd).context;
            (*mr).pd = pd;
            (*mr).length = info.length as usize;
            (*mr).handle = mr_handle;
            (*mr).lkey = info.lkey;
            (*mr).rkey = info.rkey;
        }
        shim.add(mr.cast(), Obj::Mr(m));
        shim.aliases.insert(mr as usize);
        Ok(mr)
    }))
}}

export! { "IBVERBS_1.10" fn ibv_unimport_mr(mr: *mut c::ibv_mr) {
    with(|shim| {
        if shim.aliases.remove(&(mr as usize)) {
            shim.objects.remove(&(mr as usize));
            // SAFETY: an imported MR handle of ours, unregistered above, freed once.
            unsafe { state::free(mr) };
        }
    })
}}

export! { "IBVERBS_1.13" fn ibv_import_dm(context: *mut c::ibv_context, dm_handle: u32) -> *mut c::ibv_dm {
    ret_ptr(with(|shim| {
        let v = "ibv_import_dm";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        let found = shim.objects.iter().find_map(|(&p, e)| match e.obj {
            Obj::Dm(h) if h.index() == dm_handle && !shim.aliases.contains(&p) => {
                // SAFETY: a live DM of ours.
                let dc = unsafe { (*(p as *mut c::ibv_dm)).context };
                (crate::provider::device::ctx_of(shim, v, dc).ok() == Some(ctx)).then_some((h, e.extra.dm_len))
            }
            _ => None,
        });
        let (h, len) = found.ok_or_else(|| Fail::new(v, libc::EINVAL, format!("no DM with handle {dm_handle} on this context")))?;
        let dm = state::alloc_zeroed::<c::ibv_dm>();
        // SAFETY: just allocated, not shared yet.
        unsafe {
            (*dm).context = context;
            (*dm).memcpy_to_dm = Some(crate::provider::dm::dm_memcpy_to);
            (*dm).memcpy_from_dm = Some(crate::provider::dm::dm_memcpy_from);
            (*dm).comp_mask = c::IBV_DM_MASK_HANDLE;
            (*dm).handle = dm_handle;
        }
        shim.add(dm.cast(), Obj::Dm(h));
        if let Some(e) = shim.get_mut(dm.cast()) {
            e.extra.dm_len = len;
        }
        shim.aliases.insert(dm as usize);
        Ok(dm)
    }))
}}

export! { "IBVERBS_1.13" fn ibv_unimport_dm(dm: *mut c::ibv_dm) {
    with(|shim| {
        if shim.aliases.remove(&(dm as usize)) {
            shim.objects.remove(&(dm as usize));
            // SAFETY: an imported DM handle of ours, unregistered above, freed once.
            unsafe { state::free(dm) };
        }
    })
}}
