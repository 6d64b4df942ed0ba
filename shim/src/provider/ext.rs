//! The extended verbs over the trait's extensions (issue #13 item 4):
//! `ibv_rereg_mr`, `ibv_resize_cq`, memory windows (the context's
//! `alloc_mw`/`dealloc_mw`/`bind_mw` ops), `ibv_query_ece`/`ibv_set_ece`.

use core::ffi::{c_int, c_void};

use backend_sim::*;
use verbs_api::*;

use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{
    self, c, handle_of, ret_int, ret_ptr, with, Fail, Obj, Res, Shim, SimRes,
};

/// `IBV_REREG_MR_ERR_INPUT`: bad arguments, nothing changed.
const REREG_ERR_INPUT: c_int = -1;
/// `IBV_REREG_MR_ERR_CMD`: the device refused, nothing changed (errno says why).
const REREG_ERR_CMD: c_int = -4;

export! { "IBVERBS_1.1" fn ibv_rereg_mr(mr: *mut c::ibv_mr, flags: c_int, pd: *mut c::ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> c_int {
    let r = with(|shim| -> Res<c_int> {
        let v = "ibv_rereg_mr";
        let h = handle_of!(shim, v, mr, Mr, "MR")?;
        let f = flags as u32;
        let known = c::IBV_REREG_MR_CHANGE_TRANSLATION | c::IBV_REREG_MR_CHANGE_PD | c::IBV_REREG_MR_CHANGE_ACCESS;
        let input = |why: &str| {
            crate::guard::log_err(v, libc::EINVAL, &why);
            set_errno(libc::EINVAL);
            Ok(REREG_ERR_INPUT)
        };
        // libibverbs' own input checks (libibverbs/verbs.c ibv_rereg_mr)
        // come before the provider's and answer IBV_REREG_MR_ERR_INPUT.
        if f & !known != 0 {
            return input(&format!("flags {flags:#x}: unknown bits"));
        }
        if f & c::IBV_REREG_MR_CHANGE_TRANSLATION != 0 && (addr.is_null() || length == 0) {
            return input("CHANGE_TRANSLATION with a NULL address or length 0");
        }
        if access != 0 && f & c::IBV_REREG_MR_CHANGE_ACCESS == 0 {
            return input(&format!("access {access:#x} without IBV_REREG_MR_CHANGE_ACCESS"));
        }
        if f == 0 {
            // Passed to the kernel, which refuses no flags
            // (ib_uverbs_rereg_mr): a command error.
            crate::guard::log_err(v, libc::EINVAL, &"flags 0: the kernel refuses an empty change");
            set_errno(libc::EINVAL);
            return Ok(REREG_ERR_CMD);
        }
        if f & c::IBV_REREG_MR_CHANGE_PD != 0 && pd.is_null() {
            return input("CHANGE_PD with a NULL pd");
        }
        let new_pd = if f & c::IBV_REREG_MR_CHANGE_PD != 0 { Some(handle_of!(shim, v, pd, Pd, "PD")?) } else { None };
        let info = shim.sim.mr_info(&h).at(v)?;
        let translation = f & c::IBV_REREG_MR_CHANGE_TRANSLATION != 0;
        let r = if translation {
            // The program's new buffer, named by its own address (the
            // iova libibverbs passes for ibv_rereg_mr is `addr`).
            let a = addr as usize;
            shim.sim.rereg_mr_app(h, ReregMrFlags(f), new_pd, (a as u64, a, length), AccessFlags(access as u32), || {
                Box::new(crate::appmem::AppMemory::new(a, length))
            })
        } else {
            let args = ReregMr::<SimVerbs> {
                flags: ReregMrFlags(f),
                pd: new_pd.as_ref(),
                length: info.length as usize,
                access: AccessFlags(access as u32),
            };
            shim.sim.rereg_mr(&h, &args)
        };
        if let Err(e) = r {
            let f = Fail::sim(v, &e);
            set_errno(f.errno);
            return Ok(REREG_ERR_CMD);
        }
        let info = shim.sim.mr_info(&h).at(v)?;
        // SAFETY: a live MR of ours; `pd` is live when CHANGE_PD was asked.
        unsafe {
            (*mr).lkey = info.lkey;
            (*mr).rkey = info.rkey;
            if translation {
                (*mr).addr = addr;
                (*mr).length = length;
            }
            if new_pd.is_some() {
                (*mr).pd = pd;
            }
        }
        Ok(0)
    });
    match r {
        Ok(rc) => rc,
        Err(f) => {
            set_errno(f.errno);
            REREG_ERR_INPUT
        }
    }
}}

export! { "IBVERBS_1.1" fn ibv_resize_cq(cq: *mut c::ibv_cq, cqe: c_int) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_resize_cq";
        let h = handle_of!(shim, v, cq, Cq, "CQ")?;
        if cqe <= 0 {
            return Err(Fail::new(v, libc::EINVAL, format!("cqe {cqe}")));
        }
        // What the NIC has completed by now is on the CQ (the world runs
        // lazily), so the check against queued completions is fair.
        crate::provider::events::settle(shim);
        shim.sim.resize_cq(&h, cqe as u32).at(v)?;
        let info = shim.sim.cq_info(&h).at(v)?;
        // SAFETY: a live CQ of ours; C reads cq->cqe without a call.
        unsafe { (*cq).cqe = info.cqe.min(i32::MAX as u32) as c_int };
        Ok(())
    }))
}}

// ------------------------------------------------------------ advise_mr

/// The context's `advise_mr` op (the inline `ibv_advise_mr`): 0 or a
/// positive errno.
pub(crate) unsafe extern "C" fn op_advise_mr(
    pd: *mut c::ibv_pd,
    advice: c::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut c::ibv_sge,
    num_sge: u32,
) -> c_int {
    crate::guard::catch("ibv_advise_mr", || {
        ret_int(with(|shim| {
            let v = "ibv_advise_mr";
            let p = handle_of!(shim, v, pd, Pd, "PD")?;
            if sg_list.is_null() && num_sge > 0 {
                return Err(Fail::new(v, libc::EINVAL, "sg_list is NULL"));
            }
            let sges: Vec<Sge> = if num_sge == 0 {
                Vec::new()
            } else {
                // SAFETY: non-NULL, and the caller's contract: `num_sge`
                // readable entries.
                unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) }
                    .iter()
                    .map(|s| Sge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey,
                    })
                    .collect()
            };
            shim.sim
                .advise_mr(&p, AdviseMrAdvice::from_raw(advice), flags, &sges)
                .at(v)
        }))
    })
}

// --------------------------------------------------------- memory windows

/// The context's `alloc_mw` op (the inline `ibv_alloc_mw`).
pub(crate) unsafe extern "C" fn op_alloc_mw(
    pd: *mut c::ibv_pd,
    type_: c::ibv_mw_type,
) -> *mut c::ibv_mw {
    crate::guard::catch("ibv_alloc_mw", || {
        ret_ptr(with(|shim| {
            let v = "ibv_alloc_mw";
            let p = handle_of!(shim, v, pd, Pd, "PD")?;
            let h = shim.sim.alloc_mw(&p, MwType::from_raw(type_)).at(v)?;
            let info = shim.sim.mw_info(&h).at(v)?;
            let mw = state::alloc_zeroed::<c::ibv_mw>();
            // SAFETY: just allocated; `pd` is a live PD of ours.
            unsafe {
                (*mw).context = (*pd).context;
                (*mw).pd = pd;
                (*mw).rkey = info.rkey;
                (*mw).handle = h.index();
                (*mw).type_ = type_;
            }
            shim.add(mw.cast(), Obj::Mw(h));
            Ok(mw)
        }))
    })
}

/// The context's `dealloc_mw` op.
pub(crate) unsafe extern "C" fn op_dealloc_mw(mw: *mut c::ibv_mw) -> c_int {
    crate::guard::catch("ibv_dealloc_mw", || {
        ret_int(with(|shim| {
            let v = "ibv_dealloc_mw";
            let h = handle_of!(shim, v, mw, Mw, "MW")?;
            shim.sim.dealloc_mw(&h).at(v)?;
            shim.objects.remove(&(mw as usize));
            // SAFETY: a live MW of ours, unregistered above, freed once.
            unsafe { state::free(mw) };
            Ok(())
        }))
    })
}

/// The MR handle a bind names (NULL: unbind).
fn bind_mr(shim: &Shim, v: &str, mr: *mut c::ibv_mr) -> Res<Option<MrHandle>> {
    if mr.is_null() {
        Ok(None)
    } else {
        handle_of!(shim, v, mr, Mr, "MR").map(Some)
    }
}

/// The context's `bind_mw` op (the inline `ibv_bind_mw`, type 1 windows).
pub(crate) unsafe extern "C" fn op_bind_mw(
    qp: *mut c::ibv_qp,
    mw: *mut c::ibv_mw,
    bind: *mut c::ibv_mw_bind,
) -> c_int {
    crate::guard::catch("ibv_bind_mw", || {
        ret_int(with(|shim| {
            let v = "ibv_bind_mw";
            let q = handle_of!(shim, v, qp, Qp, "QP")?;
            let w = handle_of!(shim, v, mw, Mw, "MW")?;
            if bind.is_null() {
                return Err(Fail::new(v, libc::EINVAL, "mw_bind is NULL"));
            }
            // SAFETY: non-NULL; the caller's struct.
            let b = unsafe { &*bind };
            let mr = bind_mr(shim, v, b.bind_info.mr)?;
            let args = MwBind::<SimVerbs> {
                wr_id: b.wr_id,
                send_flags: SendFlags(b.send_flags),
                bind_info: MwBindInfo {
                    mr: mr.as_ref(),
                    addr: b.bind_info.addr,
                    length: b.bind_info.length,
                    mw_access_flags: AccessFlags(b.bind_info.mw_access_flags),
                },
            };
            shim.sim.bind_mw(&q, &w, &args).at(v)?;
            let info = shim.sim.mw_info(&w).at(v)?;
            // SAFETY: a live MW of ours; ibv_bind_mw hands the new rkey back in mw->rkey.
            unsafe { (*mw).rkey = info.rkey };
            if state::any_channel(shim) {
                crate::provider::events::settle(shim);
            }
            Ok(())
        }))
    })
}

// ------------------------------------------------------------------- ECE

export! { "IBVERBS_1.10" fn ibv_query_ece(qp: *mut c::ibv_qp, ece: *mut c::ibv_ece) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_query_ece";
        let h = handle_of!(shim, v, qp, Qp, "QP")?;
        if ece.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "ece is NULL"));
        }
        let e = shim.sim.query_ece(&h).at(v)?;
        // SAFETY: non-NULL; the caller's struct.
        unsafe { ece.write(c::ibv_ece { vendor_id: e.vendor_id, options: e.options, comp_mask: e.comp_mask }) };
        Ok(())
    }))
}}

export! { "IBVERBS_1.10" fn ibv_set_ece(qp: *mut c::ibv_qp, ece: *mut c::ibv_ece) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_set_ece";
        let h = handle_of!(shim, v, qp, Qp, "QP")?;
        if ece.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "ece is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let c_ece = unsafe { &mut *ece };
        let mut e = Ece { vendor_id: c_ece.vendor_id, options: c_ece.options, comp_mask: c_ece.comp_mask };
        shim.sim.set_ece(&h, &mut e).at(v)?;
        c_ece.options = e.options;
        Ok(())
    }))
}}
