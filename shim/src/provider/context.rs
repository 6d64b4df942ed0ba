//! Contexts as C sees them: the `verbs_context` handed out for each
//! simulator context, and the op table the inline wrappers of `verbs.h`
//! call through (the top of the provider: it names every module's ops).

use core::ffi::{c_int, c_void};

use backend_sim::ContextHandle;

use crate::export::export;
use crate::provider::device::{
    device_index, op_query_device_ex, op_query_port, ABI_IS_EXTENDED, PROCESS,
};
use crate::provider::objects::{op_close_xrcd, op_create_srq_ex, op_get_srq_num, op_open_xrcd};
use crate::provider::state::{self, c, with, Fail, Obj, Res, Shim, SimRes};

export! { "IBVERBS_1.1" fn ibv_open_device(device: *mut c::ibv_device) -> *mut c::ibv_context {
    state::ret_ptr(with(|shim| open_device(shim, device)))
}}

pub(crate) fn open_device(shim: &mut Shim, device: *mut c::ibv_device) -> Res<*mut c::ibv_context> {
    let v = "ibv_open_device";
    let index =
        device_index(shim, device).ok_or_else(|| Fail::bad_ptr(v, "device", device.cast()))?;
    let h = shim.sim.open_device(index, PROCESS).at(v)?;
    wrap_context(shim, v, h).inspect_err(|_| {
        let _ = shim.sim.close_device(&h);
    })
}

/// The C context of a simulator context: the one handed out already, or a
/// new `verbs_context` around it (librdmacm's own contexts reach C this way).
pub(crate) fn context_ptr(shim: &mut Shim, v: &str, h: ContextHandle) -> Res<*mut c::ibv_context> {
    match shim.ctx_ptrs.get(&h) {
        Some(&p) => Ok(p as *mut c::ibv_context),
        None => wrap_context(shim, v, h),
    }
}

/// Allocates the C `verbs_context` for a simulator context.
fn wrap_context(shim: &mut Shim, v: &str, h: ContextHandle) -> Res<*mut c::ibv_context> {
    wrap_context_fd(shim, v, h, None)
}

/// [`wrap_context`], with the command fd `ibv_import_device` was given
/// (the new context is then another handle on the same simulator context).
pub(crate) fn wrap_context_fd(
    shim: &mut Shim,
    v: &str,
    h: ContextHandle,
    imported: Option<c_int>,
) -> Res<*mut c::ibv_context> {
    let index = shim.sim.context_device(h).at(v)? as usize;
    let device = shim.devices.get(index).copied().unwrap_or(0) as *mut c::ibv_device;
    // The command fd is a memfd: a file of its own inode, so that
    // ibv_import_device can find the context from any dup of it.
    let cmd_fd = match imported {
        Some(fd) => fd,
        // SAFETY: memfd_create with a NUL-terminated name and no pointers out.
        None => unsafe { libc::memfd_create(c"verbsim-context".as_ptr(), libc::MFD_CLOEXEC) },
    };
    let async_fd = crate::provider::fds::new_fd();
    if cmd_fd < 0 || async_fd < 0 {
        crate::provider::fds::close_fd(cmd_fd);
        crate::provider::fds::close_fd(async_fd);
        return Err(Fail::new(
            v,
            libc::EMFILE,
            "no file descriptor for the context",
        ));
    }
    let vctx = state::alloc_zeroed::<c::verbs_context>();
    // SAFETY: `vctx` was just allocated, zeroed, and is not shared yet.
    let r = unsafe { &mut *vctx };
    r.sz = size_of::<c::verbs_context>();
    r.query_port = Some(op_query_port);
    r.query_device_ex = Some(op_query_device_ex);
    fill_context_ops(r);
    r.context.device = device;
    r.context.cmd_fd = cmd_fd;
    r.context.async_fd = async_fd;
    r.context.num_comp_vectors = 1;
    r.context.abi_compat = ABI_IS_EXTENDED as *mut c_void;
    let ctx: *mut c::ibv_context = &mut r.context;
    shim.add(ctx.cast(), Obj::Context(h));
    if let Some(e) = shim.get_mut(ctx.cast()) {
        e.extra.async_fd = async_fd;
        e.extra.fd = cmd_fd;
    }
    if imported.is_some() {
        shim.aliases.insert(ctx as usize);
    } else {
        shim.ctx_ptrs.insert(h, ctx as usize);
    }
    shim.fds.contexts.insert(
        ctx as usize,
        crate::provider::fds::Watched {
            handle: h,
            fd: async_fd,
            signaled: false,
        },
    );
    state::sync(shim);
    Ok(ctx)
}

/// Fills the ops the inline wrappers of `verbs.h` call through.
pub(crate) fn fill_context_ops(v: &mut c::verbs_context) {
    let ops = &mut v.context.ops;
    ops.post_send = Some(crate::provider::datapath::op_post_send);
    ops.post_recv = Some(crate::provider::datapath::op_post_recv);
    ops.post_srq_recv = Some(crate::provider::datapath::op_post_srq_recv);
    ops.poll_cq = Some(crate::provider::datapath::op_poll_cq);
    ops.req_notify_cq = Some(crate::provider::datapath::op_req_notify_cq);
    ops.alloc_mw = Some(crate::provider::ext::op_alloc_mw);
    ops.dealloc_mw = Some(crate::provider::ext::op_dealloc_mw);
    ops.bind_mw = Some(crate::provider::ext::op_bind_mw);
    v.alloc_dm = Some(crate::provider::dm::op_alloc_dm);
    v.free_dm = Some(crate::provider::dm::op_free_dm);
    v.reg_dm_mr = Some(crate::provider::dm::op_reg_dm_mr);
    v.create_qp_ex = Some(crate::provider::qp::op_create_qp_ex);
    v.create_cq_ex = Some(crate::provider::cqex::op_create_cq_ex);
    v.create_srq_ex = Some(op_create_srq_ex);
    v.get_srq_num = Some(op_get_srq_num);
    v.open_xrcd = Some(op_open_xrcd);
    v.close_xrcd = Some(op_close_xrcd);
    v.open_qp = Some(crate::provider::qp::op_open_qp);
    v.alloc_parent_domain = Some(crate::provider::parent::op_alloc_parent_domain);
    v.advise_mr = Some(crate::provider::ext::op_advise_mr);
    v.query_rt_values = Some(crate::provider::device::op_query_rt_values);
}
