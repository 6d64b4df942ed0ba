//! Completion queues: `ibv_create_cq`, the `create_cq_ex` op (through the
//! trait's `create_cq_ex`, with the `wc_flags` the simulator carries,
//! completion timestamps included), and the extended polling
//! (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`, `ibv_wc_read_*`) the
//! inline wrappers call through `struct ibv_cq_ex`.
//!
//! Every CQ is one [`CqAlloc`]: the `ibv_cq_ex` (whose first 128 bytes are
//! the `ibv_cq`) followed by the completion `start_poll`/`next_poll` made
//! current, which the `read_*` callbacks read without taking the lock.

use core::ffi::{c_int, c_void};

use backend_sim::*;
use verbs_api::*;

use crate::provider::state::{c, ret_int, with, Fail, Obj, Res, Shim, SimRes};

/// One allocation per CQ.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CqAlloc {
    pub(crate) ex: c::ibv_cq_ex,
    /// The completion the extended poll is on.
    cur: WcEx,
    /// Created through `create_cq_ex` (polled with `poll_cq_ex`).
    is_ex: bool,
}

/// A basic completion as the extended poll presents it (every field present).
fn wc_ex(w: &Wc) -> WcEx {
    WcEx {
        wr_id: w.wr_id,
        status: w.status,
        opcode: w.opcode,
        vendor_err: w.vendor_err,
        wc_flags: w.wc_flags,
        byte_len: Some(w.byte_len),
        imm_data: Some(w.imm_data),
        qp_num: Some(w.qp_num),
        src_qp: Some(w.src_qp),
        slid: Some(w.slid),
        sl: Some(w.sl),
        dlid_path_bits: Some(w.dlid_path_bits),
        completion_timestamp: None,
        completion_wallclock_ns: None,
    }
}

/// Creates a CQ from an `ibv_cq_init_attr_ex` (`ex`: through `create_cq_ex`).
pub(crate) fn create_cq(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &c::ibv_cq_init_attr_ex,
    ex: bool,
) -> Res<*mut c::ibv_cq_ex> {
    create_cq_sized(shim, v, context, a, ex, false)
}

/// [`create_cq`]; `sized`: `mlx5dv_create_cq` was given a CQE size, so
/// mlx5's `MLX5_CQE_SIZE` environment variable is not read.
pub(crate) fn create_cq_sized(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &c::ibv_cq_init_attr_ex,
    ex: bool,
    sized: bool,
) -> Res<*mut c::ibv_cq_ex> {
    let ctx = crate::provider::device::ctx_of(shim, v, context)?;
    crate::provider::mlx5::check_alloc_type(shim, v, ctx, "MLX_CQ_ALLOC_TYPE")?;
    if !sized {
        crate::provider::mlx5::check_cqe_size_env(shim, v, ctx)?;
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
    let h = if ex {
        let parent = crate::provider::parent::cq_parent(shim, v, context, a)?;
        let init = CqInitAttrEx::<SimVerbs> {
            cqe: a.cqe,
            cq_context: a.cq_context as u64,
            channel: channel.as_ref(),
            comp_vector: a.comp_vector,
            wc_flags: WcExFlags(a.wc_flags),
            // The parent domain is the library's: the CQ itself is made
            // without it (`cq_parent` checked it).
            comp_mask: CqInitAttrMask(a.comp_mask & !c::IBV_CQ_INIT_ATTR_MASK_PD),
            flags: CreateCqAttrFlags(a.flags),
        };
        let h = shim.sim.create_cq_ex(&ctx, &init).at(v)?;
        let cq = wrap_cq(shim, v, h, context, a.channel, a.cq_context, ex)?;
        if let Some(p) = parent {
            shim.parent_users.insert(cq as usize, p as usize);
        }
        return Ok(cq);
    } else {
        let init = CqInit::<SimVerbs> {
            cqe: a.cqe,
            cq_context: a.cq_context as u64,
            channel: channel.as_ref(),
            comp_vector: a.comp_vector,
        };
        shim.sim.create_cq(&ctx, &init).at(v)?
    };
    wrap_cq(shim, v, h, context, a.channel, a.cq_context, ex)
}

/// The C CQ of a simulator CQ: the one handed out already, or a new
/// [`CqAlloc`] (`is_ex`: polled with `poll_cq_ex`).
pub(crate) fn wrap_cq(
    shim: &mut Shim,
    v: &str,
    h: CqHandle,
    context: *mut c::ibv_context,
    channel: *mut c::ibv_comp_channel,
    cq_context: *mut c_void,
    is_ex: bool,
) -> Res<*mut c::ibv_cq_ex> {
    if let Some(&p) = shim.cq_ptrs.get(&h) {
        return Ok(p as *mut c::ibv_cq_ex);
    }
    let info = shim.sim.cq_info(&h).at(v)?;
    let q = Box::into_raw(Box::<CqAlloc>::default());
    // SAFETY: just allocated, not shared yet.
    let r = unsafe { &mut *q };
    r.is_ex = is_ex;
    let e = &mut r.ex;
    e.context = context;
    e.channel = channel;
    e.cq_context = cq_context;
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
    e.read_completion_ts = Some(read_completion_ts);
    e.read_completion_wallclock_ns = Some(read_completion_wallclock_ns);
    // CVLAN, flow tags and TM info are not modelled (create_cq_ex refuses
    // their wc_flags); set anyway so a program that calls them reads 0
    // instead of jumping to NULL.
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
        crate::provider::state::ret_ptr(with(|shim| {
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
        let q = cq.cast::<CqAlloc>();
        // SAFETY: a live CQ of ours is a CqAlloc.
        let is_ex = unsafe { (*q).is_ex };
        let cur = if is_ex {
            let mut wc = [WcEx::default()];
            let n = shim.sim.poll_cq_ex(&h, &mut wc).at(verb)?;
            (n > 0).then_some(wc[0])
        } else {
            let mut wc = [Wc::default()];
            let n = shim.sim.poll_cq(&h, &mut wc).at(verb)?;
            if n > 0 && wc[0].status != WcStatus::Success && crate::guard::logging() {
                let cause = shim.sim.completion_cause(&h, &wc[0]);
                crate::guard::log_wc_error(verb, &wc[0], cause);
            }
            (n > 0).then(|| wc_ex(&wc[0]))
        };
        let Some(cur) = cur else {
            return Err(Fail {
                errno: libc::ENOENT,
            });
        };
        // SAFETY: as above; the app reads it only between start_poll and
        // end_poll, on this thread.
        unsafe {
            (*q).ex.wr_id = cur.wr_id;
            (*q).ex.status = cur.status.to_raw();
            (*q).cur = cur;
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
unsafe fn cur<'a>(cq: *mut c::ibv_cq_ex) -> &'a WcEx {
    // SAFETY: the caller's contract.
    unsafe { &(*cq.cast::<CqAlloc>()).cur }
}

macro_rules! reader {
    ($name:ident -> $t:ty, |$w:ident| $e:expr) => {
        unsafe extern "C" fn $name(cq: *mut c::ibv_cq_ex) -> $t {
            // SAFETY: reached through this CQ's own table.
            let $w = unsafe { cur(cq) };
            $e
        }
    };
}

reader!(read_opcode -> u32, |w| w.opcode.to_raw());
reader!(read_vendor_err -> u32, |w| w.vendor_err);
reader!(read_byte_len -> u32, |w| w.byte_len.unwrap_or(0));
reader!(read_imm_data -> u32, |w| w.imm_data.unwrap_or(0));
reader!(read_qp_num -> u32, |w| w.qp_num.unwrap_or(0));
reader!(read_src_qp -> u32, |w| w.src_qp.unwrap_or(0));
reader!(read_wc_flags -> core::ffi::c_uint, |w| w.wc_flags.bits());
reader!(read_slid -> u32, |w| u32::from(w.slid.unwrap_or(0)));
reader!(read_sl -> u8, |w| w.sl.unwrap_or(0));
reader!(read_dlid_path_bits -> u8, |w| w.dlid_path_bits.unwrap_or(0));
reader!(read_completion_ts -> u64, |w| w.completion_timestamp.unwrap_or(0));
reader!(read_completion_wallclock_ns -> u64, |w| w.completion_wallclock_ns.unwrap_or(0));
reader!(read_zero_u32 -> u32, |_w| 0);
reader!(read_zero_u16 -> u16, |_w| 0);

unsafe extern "C" fn read_no_tm_info(_cq: *mut c::ibv_cq_ex, info: *mut c::ibv_wc_tm_info) {
    if !info.is_null() {
        // SAFETY: the caller's struct.
        unsafe { info.write(c::ibv_wc_tm_info::default()) };
    }
}
