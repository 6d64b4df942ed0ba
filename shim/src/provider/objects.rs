//! Protection domains, memory regions, completion channels, CQs, SRQs and
//! address handles, and the context's op tables.

use core::ffi::{c_int, c_void};

use backend_sim::*;
use verbs_api::*;

use crate::appmem::AppMemory;
use crate::export::export;
use crate::provider::state::{
    self, c, handle_of, ret_int, ret_ptr, with, Fail, Obj, Res, Shim, SimRes,
};

// ------------------------------------------------------------------ PD

export! { "IBVERBS_1.1" fn ibv_alloc_pd(context: *mut c::ibv_context) -> *mut c::ibv_pd {
    ret_ptr(with(|shim| {
        let v = "ibv_alloc_pd";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        let h = shim.sim.alloc_pd(&ctx).at(v)?;
        Ok(wrap_pd(shim, h, context))
    }))
}}

/// The C PD of a simulator PD: the one handed out already, or a new one.
pub(crate) fn wrap_pd(
    shim: &mut Shim,
    h: PdHandle,
    context: *mut c::ibv_context,
) -> *mut c::ibv_pd {
    if let Some(&p) = shim.pd_ptrs.get(&h) {
        return p as *mut c::ibv_pd;
    }
    let pd = state::alloc_zeroed::<c::ibv_pd>();
    // SAFETY: just allocated, not shared yet.
    unsafe {
        (*pd).context = context;
        (*pd).handle = h.index();
    }
    shim.add(pd.cast(), Obj::Pd(h));
    shim.pd_ptrs.insert(h, pd as usize);
    pd
}

export! { "IBVERBS_1.1" fn ibv_dealloc_pd(pd: *mut c::ibv_pd) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_dealloc_pd";
        if let Some(r) = crate::provider::parent::dealloc(shim, v, pd) {
            return r;
        }
        let h = handle_of!(shim, v, pd, Pd, "PD")?;
        crate::provider::parent::check_unused_pd(shim, v, pd)?;
        shim.sim.dealloc_pd(&h).at(v)?;
        shim.objects.remove(&(pd as usize));
        shim.pd_ptrs.remove(&h);
        // SAFETY: a live PD of ours, unregistered above, freed once.
        unsafe { state::free(pd) };
        Ok(())
    }))
}}

// ------------------------------------------------------------------ MR

fn reg_mr(
    shim: &mut Shim,
    v: &str,
    pd: *mut c::ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> Res<*mut c::ibv_mr> {
    let h = handle_of!(shim, v, pd, Pd, "PD")?;
    if addr.is_null() && length == usize::MAX && access as u32 & c::IBV_ACCESS_ON_DEMAND != 0 {
        return reg_implicit(shim, v, pd, h, iova, access);
    }
    if addr.is_null() && length > 0 {
        return Err(Fail::new(v, libc::EFAULT, "addr is NULL"));
    }
    if length == 0 {
        return Err(Fail::new(v, libc::EINVAL, "length 0"));
    }
    if (addr as usize).checked_add(length).is_none() {
        return Err(Fail::new(v, libc::EINVAL, "addr + length wraps around"));
    }
    let m = shim
        .sim
        .reg_mr_app(
            h,
            iova,
            addr as usize,
            length,
            AccessFlags(access as u32),
            || {
                Box::new(AppMemory {
                    addr: addr as usize,
                    len: length,
                })
            },
        )
        .at(v)?;
    let info = shim.sim.mr_info(&m).at(v)?;
    let mr = state::alloc_zeroed::<c::ibv_mr>();
    // SAFETY: just allocated, not shared yet; `pd` is a live PD of ours.
    unsafe {
        (*mr).context = (*pd).context;
        (*mr).pd = pd;
        (*mr).addr = addr;
        (*mr).length = length;
        (*mr).handle = m.index();
        (*mr).lkey = info.lkey;
        (*mr).rkey = info.rkey;
    }
    shim.add(mr.cast(), Obj::Mr(m));
    Ok(mr)
}

export! { "IBVERBS_1.1" fn ibv_reg_mr(pd: *mut c::ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut c::ibv_mr {
    ret_ptr(with(|shim| reg_mr(shim, "ibv_reg_mr", pd, addr, length, addr as u64, access)))
}}

export! { "IBVERBS_1.7" fn ibv_reg_mr_iova(pd: *mut c::ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: c_int) -> *mut c::ibv_mr {
    ret_ptr(with(|shim| reg_mr(shim, "ibv_reg_mr_iova", pd, addr, length, iova, access)))
}}

export! { "IBVERBS_1.8" fn ibv_reg_mr_iova2(pd: *mut c::ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: u32) -> *mut c::ibv_mr {
    ret_ptr(with(|shim| reg_mr(shim, "ibv_reg_mr_iova2", pd, addr, length, iova, access as c_int)))
}}

export! { "IBVERBS_1.1" fn ibv_dereg_mr(mr: *mut c::ibv_mr) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_dereg_mr";
        let h = handle_of!(shim, v, mr, Mr, "MR")?;
        shim.sim.dereg_mr(&h).at(v)?;
        shim.objects.remove(&(mr as usize));
        // SAFETY: a live MR of ours, unregistered above, freed once.
        unsafe { state::free(mr) };
        Ok(())
    }))
}}

/// An implicit on-demand-paging MR (`ibv_reg_mr(pd, NULL, SIZE_MAX,
/// IBV_ACCESS_ON_DEMAND | ...)`): one key for the whole address space,
/// addresses as they are (iova 0). The kernel takes it when the device has
/// `IBV_ODP_SUPPORT_IMPLICIT` (mlx5 `mlx5_ib_reg_user_mr`, start 0 and
/// length `U64_MAX`), and refuses a non-zero iova (`EINVAL`). Its memory is
/// the process's own, reached by `process_vm_readv`/`_writev`, so an
/// address nothing is mapped at reads zeroes and takes no write instead of
/// faulting (hardware completes such an access in error: a divergence).
fn reg_implicit(
    shim: &mut Shim,
    v: &str,
    pd: *mut c::ibv_pd,
    h: PdHandle,
    iova: u64,
    access: c_int,
) -> Res<*mut c::ibv_mr> {
    if iova != 0 {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            format!("an implicit ODP MR has iova 0, not {iova:#x}"),
        ));
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let m = shim
        .sim
        .reg_mr_app(h, 0, 0, usize::MAX, AccessFlags(access as u32), || {
            Box::new(crate::fabric::memory::ProcessMemory::new(
                pid,
                0,
                usize::MAX,
                Default::default(),
            ))
        })
        .at(v)?;
    let info = shim.sim.mr_info(&m).at(v)?;
    let mr = state::alloc_zeroed::<c::ibv_mr>();
    // SAFETY: just allocated, not shared yet; `pd` is a live PD of ours.
    unsafe {
        (*mr).context = (*pd).context;
        (*mr).pd = pd;
        (*mr).addr = core::ptr::null_mut();
        (*mr).length = usize::MAX;
        (*mr).handle = m.index();
        (*mr).lkey = info.lkey;
        (*mr).rkey = info.rkey;
    }
    shim.add(mr.cast(), Obj::Mr(m));
    Ok(mr)
}

// ------------------------------------------------------------- channels

export! { "IBVERBS_1.0" fn ibv_create_comp_channel(context: *mut c::ibv_context) -> *mut c::ibv_comp_channel {
    ret_ptr(with(|shim| {
        let v = "ibv_create_comp_channel";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        let h = shim.sim.create_comp_channel(&ctx).at(v)?;
        wrap_channel(shim, v, h, context).inspect_err(|_| {
            let _ = shim.sim.destroy_comp_channel(&h);
        })
    }))
}}

/// The C completion channel of a simulator channel: the one handed out
/// already, or a new one with its own eventfd.
pub(crate) fn wrap_channel(
    shim: &mut Shim,
    v: &str,
    h: CompChannelHandle,
    context: *mut c::ibv_context,
) -> Res<*mut c::ibv_comp_channel> {
    if let Some((&p, _)) = shim.fds.channels.iter().find(|(_, w)| w.handle == h) {
        return Ok(p as *mut c::ibv_comp_channel);
    }
    let fd = crate::provider::fds::new_fd();
    if fd < 0 {
        return Err(Fail::new(
            v,
            libc::EMFILE,
            "no file descriptor for the channel",
        ));
    }
    let ch = state::alloc_zeroed::<c::ibv_comp_channel>();
    // SAFETY: just allocated, not shared yet.
    unsafe {
        (*ch).context = context;
        (*ch).fd = fd;
    }
    shim.add(ch.cast(), Obj::Channel(h));
    shim.fds.channels.insert(
        ch as usize,
        crate::provider::fds::Watched {
            handle: h,
            fd,
            signaled: false,
        },
    );
    state::sync(shim);
    Ok(ch)
}

export! { "IBVERBS_1.0" fn ibv_destroy_comp_channel(channel: *mut c::ibv_comp_channel) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_destroy_comp_channel";
        let h = handle_of!(shim, v, channel, Channel, "completion channel")?;
        shim.sim.destroy_comp_channel(&h).at(v)?;
        shim.objects.remove(&(channel as usize));
        if let Some(w) = shim.fds.channels.remove(&(channel as usize)) {
            crate::provider::fds::close_fd(w.fd);
        }
        // SAFETY: a live channel of ours, unregistered above, freed once.
        unsafe { state::free(channel) };
        Ok(())
    }))
}}

// ------------------------------------------------------------------ CQ

export! { "IBVERBS_1.1" fn ibv_create_cq(context: *mut c::ibv_context, cqe: c_int, cq_context: *mut c_void, channel: *mut c::ibv_comp_channel, comp_vector: c_int) -> *mut c::ibv_cq {
    ret_ptr(with(|shim| {
        let attr = c::ibv_cq_init_attr_ex {
            cqe: cqe.max(0) as u32,
            cq_context,
            channel,
            comp_vector: comp_vector.max(0) as u32,
            ..Default::default()
        };
        if cqe < 0 || comp_vector < 0 {
            return Err(Fail::new("ibv_create_cq", libc::EINVAL, "cqe or comp_vector is negative"));
        }
        crate::provider::cqex::create_cq(shim, "ibv_create_cq", context, &attr, false).map(|p| p.cast())
    }))
}}

export! { "IBVERBS_1.1" fn ibv_destroy_cq(cq: *mut c::ibv_cq) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_destroy_cq";
        let h = handle_of!(shim, v, cq, Cq, "CQ")?;
        shim.sim.destroy_cq(&h).at(v)?;
        shim.parent_users.remove(&(cq as usize));
        shim.objects.remove(&(cq as usize));
        shim.cq_ptrs.remove(&h);
        // SAFETY: a live CQ of ours (an ibv_cq_ex allocation), unregistered, freed once.
        unsafe { state::free(cq.cast::<crate::provider::cqex::CqAlloc>()) };
        Ok(())
    }))
}}

// ------------------------------------------------------------------ SRQ

fn to_srq_attr(a: &c::ibv_srq_attr) -> SrqAttr {
    SrqAttr {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    }
}

/// Creates an SRQ from `ibv_srq_init_attr_ex` (also for `rdma_create_srq`).
pub(crate) fn create_srq(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &mut c::ibv_srq_init_attr_ex,
) -> Res<*mut c::ibv_srq> {
    let mut attr = SrqInitAttrEx::<SimVerbs> {
        srq_context: a.srq_context as u64,
        attr: to_srq_attr(&a.attr),
        comp_mask: SrqInitAttrMask(a.comp_mask),
        srq_type: SrqType::from_raw(a.srq_type),
        ..Default::default()
    };
    let pd = if a.comp_mask & c::IBV_SRQ_INIT_ATTR_PD != 0 {
        Some(handle_of!(shim, v, a.pd, Pd, "PD")?)
    } else {
        None
    };
    let xrcd = if a.comp_mask & c::IBV_SRQ_INIT_ATTR_XRCD != 0 {
        Some(handle_of!(shim, v, a.xrcd, Xrcd, "XRCD")?)
    } else {
        None
    };
    let cq = if a.comp_mask & c::IBV_SRQ_INIT_ATTR_CQ != 0 {
        Some(handle_of!(shim, v, a.cq, Cq, "CQ")?)
    } else {
        None
    };
    attr.pd = pd.as_ref();
    attr.xrcd = xrcd.as_ref();
    attr.cq = cq.as_ref();
    let ctx = crate::provider::device::ctx_of(shim, v, context)?;
    crate::provider::mlx5::check_alloc_type(shim, v, ctx, "MLX_SRQ_ALLOC_TYPE")?;
    let h = shim.sim.create_srq_ex(&ctx, &mut attr).at(v)?;
    a.attr.max_wr = attr.attr.max_wr;
    a.attr.max_sge = attr.attr.max_sge;
    let srq = state::alloc_zeroed::<c::ibv_srq>();
    // SAFETY: just allocated, not shared yet.
    unsafe {
        (*srq).context = context;
        (*srq).srq_context = a.srq_context;
        (*srq).pd = a.pd;
        (*srq).handle = h.index();
    }
    shim.add(srq.cast(), Obj::Srq(h));
    shim.srq_ptrs.insert(h, srq as usize);
    Ok(srq)
}

export! { "IBVERBS_1.1" fn ibv_create_srq(pd: *mut c::ibv_pd, srq_init_attr: *mut c::ibv_srq_init_attr) -> *mut c::ibv_srq {
    ret_ptr(with(|shim| {
        let v = "ibv_create_srq";
        handle_of!(shim, v, pd, Pd, "PD")?;
        if srq_init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "srq_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct; `pd` is a live PD of ours.
        let (init, context) = unsafe { (&mut *srq_init_attr, (*pd).context) };
        let mut ex = c::ibv_srq_init_attr_ex {
            srq_context: init.srq_context,
            attr: init.attr,
            comp_mask: c::IBV_SRQ_INIT_ATTR_PD | c::IBV_SRQ_INIT_ATTR_TYPE,
            srq_type: c::IBV_SRQT_BASIC,
            pd,
            ..Default::default()
        };
        let srq = create_srq(shim, v, context, &mut ex)?;
        init.attr = ex.attr;
        Ok(srq)
    }))
}}

pub(crate) unsafe extern "C" fn op_create_srq_ex(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_srq_init_attr_ex,
) -> *mut c::ibv_srq {
    crate::guard::catch("ibv_create_srq_ex", || {
        ret_ptr(with(|shim| {
            if attr.is_null() {
                return Err(Fail::new(
                    "ibv_create_srq_ex",
                    libc::EINVAL,
                    "srq_init_attr_ex is NULL",
                ));
            }
            // SAFETY: non-NULL; the caller's struct.
            create_srq(shim, "ibv_create_srq_ex", context, unsafe { &mut *attr })
        }))
    })
}

pub(crate) unsafe extern "C" fn op_get_srq_num(srq: *mut c::ibv_srq, srq_num: *mut u32) -> c_int {
    crate::guard::catch("ibv_get_srq_num", || {
        ret_int(with(|shim| {
            let v = "ibv_get_srq_num";
            let h = handle_of!(shim, v, srq, Srq, "SRQ")?;
            if srq_num.is_null() {
                return Err(Fail::new(v, libc::EINVAL, "srq_num is NULL"));
            }
            let n = shim.sim.get_srq_num(&h).at(v)?;
            // SAFETY: non-NULL out-pointer.
            unsafe { *srq_num = n };
            Ok(())
        }))
    })
}

export! { "IBVERBS_1.1" fn ibv_modify_srq(srq: *mut c::ibv_srq, srq_attr: *mut c::ibv_srq_attr, srq_attr_mask: c_int) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_modify_srq";
        let h = handle_of!(shim, v, srq, Srq, "SRQ")?;
        if srq_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "srq_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = to_srq_attr(unsafe { &*srq_attr });
        shim.sim.modify_srq(&h, &a, SrqAttrMask(srq_attr_mask as u32)).at(v)
    }))
}}

export! { "IBVERBS_1.1" fn ibv_query_srq(srq: *mut c::ibv_srq, srq_attr: *mut c::ibv_srq_attr) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_query_srq";
        let h = handle_of!(shim, v, srq, Srq, "SRQ")?;
        if srq_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "srq_attr is NULL"));
        }
        let a = shim.sim.query_srq(&h).at(v)?;
        // SAFETY: non-NULL; the caller's struct.
        unsafe { srq_attr.write(c::ibv_srq_attr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit }) };
        Ok(())
    }))
}}

/// Destroys an SRQ of ours (`ibv_destroy_srq`, `rdma_destroy_srq`).
pub(crate) fn destroy_srq(shim: &mut Shim, v: &str, srq: *mut c::ibv_srq) -> Res<()> {
    let h = handle_of!(shim, v, srq, Srq, "SRQ")?;
    shim.sim.destroy_srq(&h).at(v)?;
    shim.objects.remove(&(srq as usize));
    shim.srq_ptrs.remove(&h);
    // SAFETY: a live SRQ of ours, unregistered above, freed once.
    unsafe { state::free(srq) };
    Ok(())
}

export! { "IBVERBS_1.1" fn ibv_destroy_srq(srq: *mut c::ibv_srq) -> c_int {
    ret_int(with(|shim| destroy_srq(shim, "ibv_destroy_srq", srq)))
}}

// ----------------------------------------------------------------- XRCD

pub(crate) unsafe extern "C" fn op_open_xrcd(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_xrcd_init_attr,
) -> *mut c::ibv_xrcd {
    crate::guard::catch("ibv_open_xrcd", || {
        ret_ptr(with(|shim| {
            let v = "ibv_open_xrcd";
            let ctx = crate::provider::device::ctx_of(shim, v, context)?;
            if attr.is_null() {
                return Err(Fail::new(v, libc::EINVAL, "xrcd_init_attr is NULL"));
            }
            // SAFETY: non-NULL; the caller's struct.
            let a = unsafe { &*attr };
            let fd = if a.comp_mask & c::IBV_XRCD_INIT_ATTR_FD == 0 || a.fd == -1 {
                XrcdFile::None
            } else {
                // SAFETY: fstat writes into a live, zeroed struct stat.
                let mut st: libc::stat = unsafe { core::mem::zeroed() };
                // SAFETY: as above; any fd value is acceptable to fstat.
                if unsafe { libc::fstat(a.fd, &mut st) } == 0 {
                    XrcdFile::Inode(st.st_ino)
                } else {
                    XrcdFile::BadDescriptor
                }
            };
            let init = XrcdInitAttr {
                comp_mask: XrcdInitAttrMask(a.comp_mask),
                fd,
                oflags: OpenFlags(a.oflags as u32),
            };
            let h = shim.sim.open_xrcd(&ctx, &init).at(v)?;
            let x = state::alloc_zeroed::<c::ibv_xrcd>();
            // SAFETY: just allocated.
            unsafe { (*x).context = context };
            shim.add(x.cast(), Obj::Xrcd(h));
            Ok(x)
        }))
    })
}

pub(crate) unsafe extern "C" fn op_close_xrcd(xrcd: *mut c::ibv_xrcd) -> c_int {
    crate::guard::catch("ibv_close_xrcd", || {
        ret_int(with(|shim| {
            let v = "ibv_close_xrcd";
            let h = handle_of!(shim, v, xrcd, Xrcd, "XRCD")?;
            shim.sim.close_xrcd(&h).at(v)?;
            shim.objects.remove(&(xrcd as usize));
            // SAFETY: a live XRCD of ours, unregistered above, freed once.
            unsafe { state::free(xrcd) };
            Ok(())
        }))
    })
}

// ------------------------------------------------------------------- AH

/// `struct ibv_ah_attr` → [`AhAttr`].
pub(crate) fn ah_attr(a: &c::ibv_ah_attr) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            // SAFETY: every bit pattern of the 16-byte union is a valid [u8; 16].
            dgid: Gid(unsafe { a.grh.dgid.raw }),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.is_global != 0,
        port_num: a.port_num,
    }
}

/// [`AhAttr`] → `struct ibv_ah_attr`.
pub(crate) fn c_ah_attr(a: &AhAttr) -> c::ibv_ah_attr {
    let mut o = c::ibv_ah_attr {
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
        ..Default::default()
    };
    o.grh.dgid.raw = a.grh.dgid.0;
    o.grh.flow_label = a.grh.flow_label;
    o.grh.sgid_index = a.grh.sgid_index;
    o.grh.hop_limit = a.grh.hop_limit;
    o.grh.traffic_class = a.grh.traffic_class;
    o
}

/// Creates an address handle on `pd` (`ibv_create_ah`, `ibv_create_ah_from_wc`).
pub(crate) fn create_ah(
    shim: &mut Shim,
    v: &str,
    pd: *mut c::ibv_pd,
    attr: &c::ibv_ah_attr,
) -> Res<*mut c::ibv_ah> {
    let p = handle_of!(shim, v, pd, Pd, "PD")?;
    let h = shim.sim.create_ah(&p, &ah_attr(attr)).at(v)?;
    let ah = state::alloc_zeroed::<c::ibv_ah>();
    // SAFETY: just allocated; `pd` is a live PD of ours.
    unsafe {
        (*ah).context = (*pd).context;
        (*ah).pd = pd;
        (*ah).handle = h.index();
    }
    shim.add(ah.cast(), Obj::Ah(h));
    Ok(ah)
}

export! { "IBVERBS_1.1" fn ibv_create_ah(pd: *mut c::ibv_pd, attr: *mut c::ibv_ah_attr) -> *mut c::ibv_ah {
    ret_ptr(with(|shim| {
        let v = "ibv_create_ah";
        handle_of!(shim, v, pd, Pd, "PD")?;
        if attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "ah_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        create_ah(shim, v, pd, unsafe { &*attr })
    }))
}}

export! { "IBVERBS_1.1" fn ibv_destroy_ah(ah: *mut c::ibv_ah) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_destroy_ah";
        let h = handle_of!(shim, v, ah, Ah, "AH")?;
        shim.sim.destroy_ah(&h).at(v)?;
        shim.objects.remove(&(ah as usize));
        // SAFETY: a live AH of ours, unregistered above, freed once.
        unsafe { state::free(ah) };
        Ok(())
    }))
}}
