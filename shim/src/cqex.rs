//! Completion queues: `ibv_create_cq`, the `create_cq_ex` op, and the
//! extended polling (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`,
//! `ibv_wc_read_*`) the inline wrappers call through `struct ibv_cq_ex`.
//!
//! Every CQ is one [`CqAlloc`]: the `ibv_cq_ex` (whose first 128 bytes are
//! the `ibv_cq`) followed by the completion `start_poll`/`next_poll` made
//! current, which the `read_*` callbacks read without taking the lock.

use core::ffi::{c_int, c_void};

use backend_sim::*;
use verbs_api::*;

use crate::state::{c, ret_int, with, Fail, Obj, Res, Shim, SimRes};

/// The `wc_flags` `create_cq_ex` accepts: what a simulated completion carries.
const SUPPORTED_WC_FLAGS: u64 = (c::IBV_WC_EX_WITH_BYTE_LEN
    | c::IBV_WC_EX_WITH_IMM
    | c::IBV_WC_EX_WITH_QP_NUM
    | c::IBV_WC_EX_WITH_SRC_QP
    | c::IBV_WC_EX_WITH_SLID
    | c::IBV_WC_EX_WITH_SL
    | c::IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// One allocation per CQ.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CqAlloc {
    pub(crate) ex: c::ibv_cq_ex,
    /// The completion the extended poll is on.
    cur: Wc,
}

/// Creates a CQ from an `ibv_cq_init_attr_ex`.
pub(crate) fn create_cq(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &c::ibv_cq_init_attr_ex,
    ex: bool,
) -> Res<*mut c::ibv_cq_ex> {
    let ctx = crate::device::ctx_of(shim, v, context)?;
    if ex {
        let unknown = a.wc_flags & !SUPPORTED_WC_FLAGS;
        if unknown != 0 {
            return Err(Fail::new(v, libc::EOPNOTSUPP, format!("wc_flags {unknown:#x}: completion timestamps, CVLAN, flow tags and TM info are not modelled")));
        }
        let known = c::IBV_CQ_INIT_ATTR_MASK_FLAGS | c::IBV_CQ_INIT_ATTR_MASK_PD;
        if a.comp_mask & !known != 0 {
            return Err(Fail::new(
                v,
                libc::EINVAL,
                format!("unknown comp_mask bits {:#x}", a.comp_mask & !known),
            ));
        }
        if a.comp_mask & c::IBV_CQ_INIT_ATTR_MASK_PD != 0 {
            return Err(Fail::new(
                v,
                libc::EOPNOTSUPP,
                "parent domains are not modelled",
            ));
        }
        if a.comp_mask & c::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
            && a.flags & !c::IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
        {
            return Err(Fail::new(
                v,
                libc::EOPNOTSUPP,
                format!("create flags {:#x}", a.flags),
            ));
        }
    }
    // SAFETY: `context` is a live context of ours (ctx_of checked it).
    let vectors = unsafe { (*context).num_comp_vectors }.max(1) as u32;
    if a.comp_vector >= vectors {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            format!(
                "comp_vector {} is not below num_comp_vectors {vectors}",
                a.comp_vector
            ),
        ));
    }
    let channel = if a.channel.is_null() {
        None
    } else {
        match shim.get(a.channel.cast()).map(|e| e.obj) {
            Some(Obj::Channel(h)) => Some(h),
            _ => return Err(Fail::bad_ptr(v, "completion channel", a.channel.cast())),
        }
    };
    let init = CqInit::<SimVerbs> {
        cqe: a.cqe,
        cq_context: a.cq_context as u64,
        channel: channel.as_ref(),
        comp_vector: a.comp_vector,
    };
    let h = shim.sim.create_cq(&ctx, &init).at(v)?;
    let info = shim.sim.cq_info(&h).at(v)?;
    let q = Box::into_raw(Box::<CqAlloc>::default());
    // SAFETY: just allocated, not shared yet.
    let e = unsafe { &mut (*q).ex };
    e.context = context;
    e.channel = a.channel;
    e.cq_context = a.cq_context;
    e.handle = h.index();
    e.cqe = info.cqe.min(i32::MAX as u32) as c_int;
    e.start_poll = Some(start_poll);
    e.next_poll = Some(next_poll);
    e.end_poll = Some(end_poll);
    e.read_opcode = Some(read_opcode);
    e.read_vendor_err = Some(read_vendor_err);
    e.read_byte_len = Some(read_byte_len);
    e.read_imm_data = Some(read_imm_data);
    e.read_qp_num = Some(read_qp_num);
    e.read_src_qp = Some(read_src_qp);
    e.read_wc_flags = Some(read_wc_flags);
    e.read_slid = Some(read_slid);
    e.read_sl = Some(read_sl);
    e.read_dlid_path_bits = Some(read_dlid_path_bits);
    // Not requestable here (create refuses their wc_flags), but set so a
    // program that calls them anyway reads 0 instead of jumping to NULL.
    e.read_completion_ts = Some(read_zero_u64);
    e.read_completion_wallclock_ns = Some(read_zero_u64);
    e.read_cvlan = Some(read_zero_u16);
    e.read_flow_tag = Some(read_zero_u32);
    e.read_tm_info = Some(read_no_tm_info);
    let p = q.cast::<c::ibv_cq_ex>();
    shim.add(p.cast(), Obj::Cq(h));
    shim.cq_ptrs.insert(h, p as usize);
    Ok(p)
}

/// The `create_cq_ex` op (the inline `ibv_create_cq_ex`).
pub(crate) unsafe extern "C" fn op_create_cq_ex(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_cq_init_attr_ex,
) -> *mut c::ibv_cq_ex {
    crate::guard::catch("ibv_create_cq_ex", || {
        crate::state::ret_ptr(with(|shim| {
            if attr.is_null() {
                return Err(Fail::new(
                    "ibv_create_cq_ex",
                    libc::EINVAL,
                    "cq_attr is NULL",
                ));
            }
            // SAFETY: non-NULL; the caller's struct.
            create_cq(shim, "ibv_create_cq_ex", context, unsafe { &*attr }, true)
        }))
    })
}

/// Polls one completion into the allocation: 0, `ENOENT` when empty, or an errno.
fn poll_one(cq: *mut c::ibv_cq_ex, verb: &str) -> c_int {
    ret_int(with(|shim| {
        let h = match shim.get(cq.cast::<c_void>()).map(|e| e.obj) {
            Some(Obj::Cq(h)) => h,
            _ => return Err(Fail::bad_ptr(verb, "CQ", cq.cast())),
        };
        let mut wc = [Wc::default()];
        let n = shim.sim.poll_cq(&h, &mut wc).at(verb)?;
        if n == 0 {
            return Err(Fail {
                errno: libc::ENOENT,
            });
        }
        let q = cq.cast::<CqAlloc>();
        // SAFETY: a live CQ of ours is a CqAlloc; the app reads it only
        // between start_poll and end_poll, on this thread.
        unsafe {
            (*q).cur = wc[0];
            (*q).ex.wr_id = wc[0].wr_id;
            (*q).ex.status = wc[0].status.to_raw();
        }
        Ok(())
    }))
}

unsafe extern "C" fn start_poll(cq: *mut c::ibv_cq_ex, attr: *mut c::ibv_poll_cq_attr) -> c_int {
    crate::guard::catch("ibv_start_poll", || {
        // SAFETY: `attr` is the caller's struct or NULL.
        if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
            return libc::EINVAL;
        }
        poll_one(cq, "ibv_start_poll")
    })
}

unsafe extern "C" fn next_poll(cq: *mut c::ibv_cq_ex) -> c_int {
    crate::guard::catch("ibv_next_poll", || poll_one(cq, "ibv_next_poll"))
}

unsafe extern "C" fn end_poll(_cq: *mut c::ibv_cq_ex) {}

/// The current completion of a CQ the inline wrapper reached us through.
///
/// # Safety
/// `cq` is a live CQ of ours (it holds our function pointers).
unsafe fn cur<'a>(cq: *mut c::ibv_cq_ex) -> &'a Wc {
    // SAFETY: the caller's contract.
    unsafe { &(*cq.cast::<CqAlloc>()).cur }
}

unsafe extern "C" fn read_opcode(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.opcode.to_raw()
}
unsafe extern "C" fn read_vendor_err(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.vendor_err
}
unsafe extern "C" fn read_byte_len(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.byte_len
}
unsafe extern "C" fn read_imm_data(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.imm_data
}
unsafe extern "C" fn read_qp_num(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.qp_num
}
unsafe extern "C" fn read_src_qp(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.src_qp
}
unsafe extern "C" fn read_wc_flags(cq: *mut c::ibv_cq_ex) -> core::ffi::c_uint {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.wc_flags.bits()
}
unsafe extern "C" fn read_slid(cq: *mut c::ibv_cq_ex) -> u32 {
    // SAFETY: reached through this CQ's own table.
    u32::from(unsafe { cur(cq) }.slid)
}
unsafe extern "C" fn read_sl(cq: *mut c::ibv_cq_ex) -> u8 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.sl
}
unsafe extern "C" fn read_dlid_path_bits(cq: *mut c::ibv_cq_ex) -> u8 {
    // SAFETY: reached through this CQ's own table.
    unsafe { cur(cq) }.dlid_path_bits
}

unsafe extern "C" fn read_zero_u64(_cq: *mut c::ibv_cq_ex) -> u64 {
    0
}
unsafe extern "C" fn read_zero_u32(_cq: *mut c::ibv_cq_ex) -> u32 {
    0
}
unsafe extern "C" fn read_zero_u16(_cq: *mut c::ibv_cq_ex) -> u16 {
    0
}
unsafe extern "C" fn read_no_tm_info(_cq: *mut c::ibv_cq_ex, info: *mut c::ibv_wc_tm_info) {
    if !info.is_null() {
        // SAFETY: the caller's struct.
        unsafe { info.write(c::ibv_wc_tm_info::default()) };
    }
}
