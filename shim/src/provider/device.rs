//! Devices and contexts: the device list, `ibv_open_device`, the queries,
//! async events and the small helpers (`ibv_wc_status_str`, fork).

use core::ffi::{c_char, c_int};
use core::mem::{offset_of, size_of};
use core::ptr;

use backend_sim::ContextHandle;
use verbs_api::*;

use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{self, c, put_str, ret_int, with, Fail, Obj, Res, Shim, SimRes};

/// `__VERBS_ABI_IS_EXTENDED`: the `abi_compat` value that tells the inline
/// wrappers the context is a `verbs_context`.
pub(crate) const ABI_IS_EXTENDED: usize = usize::MAX;

/// The process id every context of this process is opened under: one
/// process per world, so a constant keeps traces identical between runs.
pub(crate) const PROCESS: ProcessId = ProcessId(0);

pub(crate) fn device_index(shim: &Shim, dev: *mut c::ibv_device) -> Option<usize> {
    shim.devices.iter().position(|&d| d == dev as usize)
}

/// The simulator context of a C context pointer.
pub(crate) fn ctx_of(shim: &Shim, verb: &str, ctx: *mut c::ibv_context) -> Res<ContextHandle> {
    match shim.get(ctx.cast()) {
        Some(e) => match e.obj {
            Obj::Context(h) => Ok(h),
            _ => Err(Fail::bad_ptr(verb, "context", ctx.cast())),
        },
        None => Err(Fail::bad_ptr(verb, "context", ctx.cast())),
    }
}

/// The context's `query_rt_values` op (the inline
/// `ibv_query_rt_values_ex`): the raw clock, as mlx5 reports it
/// (`raw_clock.tv_sec` 0, `tv_nsec` the core clock's ticks). A device
/// without a clock (rxe) answers `EOPNOTSUPP`, as libibverbs does for a
/// provider without the op; mlx5 refuses unknown `comp_mask` bits with
/// `EINVAL`. Returns 0 or a positive errno.
pub(crate) unsafe extern "C" fn op_query_rt_values(
    context: *mut c::ibv_context,
    values: *mut c::ibv_values_ex,
) -> c_int {
    crate::guard::catch("ibv_query_rt_values_ex", || {
        ret_int(with(|shim| {
            let v = "ibv_query_rt_values_ex";
            let ctx = ctx_of(shim, v, context)?;
            if values.is_null() {
                return Err(Fail::new(v, libc::EINVAL, "values is NULL"));
            }
            // The clock first: a device without one has no op at all.
            let cycles = shim.sim.query_rt_values_ex(&ctx).at(v)?;
            let raw = c::IBV_VALUES_MASK_RAW_CLOCK;
            // SAFETY: non-NULL; the caller's `struct ibv_values_ex`.
            let asked = unsafe { (*values).comp_mask };
            if asked & !raw != 0 {
                return Err(Fail::new(
                    v,
                    libc::EINVAL,
                    format!("comp_mask {asked:#x}: only IBV_VALUES_MASK_RAW_CLOCK is known"),
                ));
            }
            // SAFETY: as above; plain fields of the caller's struct.
            unsafe {
                if asked & raw != 0 {
                    (*values).raw_clock.tv_sec = 0;
                    (*values).raw_clock.tv_nsec = cycles as c::__syscall_slong_t;
                }
                (*values).comp_mask = asked & raw;
            }
            Ok(())
        }))
    })
}

export! { "IBVERBS_1.1" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut c::ibv_device {
    with(|shim| {
        let n = shim.devices.len();
        // SAFETY: calloc of n+1 pointer slots; freed by ibv_free_device_list with free().
        let list = unsafe { libc::calloc(n + 1, size_of::<*mut c::ibv_device>()) }
            .cast::<*mut c::ibv_device>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return ptr::null_mut();
        }
        for (i, &d) in shim.devices.iter().enumerate() {
            // SAFETY: i < n and the array has n+1 slots.
            unsafe { *list.add(i) = d as *mut c::ibv_device };
        }
        shim.device_lists.insert(list as usize, n);
        if !num_devices.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *num_devices = n as c_int };
        }
        list
    })
}}

export! { "IBVERBS_1.1" fn ibv_free_device_list(list: *mut *mut c::ibv_device) {
    with(|shim| {
        if shim.device_lists.remove(&(list as usize)).is_some() {
            // SAFETY: `list` came from calloc in ibv_get_device_list and is freed once.
            unsafe { libc::free(list.cast()) };
        } else if !list.is_null() {
            crate::guard::log_err("ibv_free_device_list", libc::EINVAL, &"not a list this library returned");
        }
    })
}}

export! { "IBVERBS_1.1" fn ibv_get_device_name(device: *mut c::ibv_device) -> *const c_char {
    with(|shim| match device_index(shim, device) {
        // SAFETY: a device of ours: its name is a NUL-terminated array alive for the process.
        Some(_) => unsafe { (*device).name.as_ptr() },
        None => {
            set_errno(libc::EINVAL);
            ptr::null()
        }
    })
}}

export! { "IBVERBS_1.1" fn ibv_get_device_guid(device: *mut c::ibv_device) -> u64 {
    with(|shim| match device_index(shim, device) {
        Some(i) => {
            let list = shim.sim.get_device_list().unwrap_or_default();
            list.get(i).map_or(0, |d| d.guid.to_be())
        }
        None => {
            set_errno(libc::EINVAL);
            0
        }
    })
}}

export! { "IBVERBS_1.9" fn ibv_get_device_index(device: *mut c::ibv_device) -> c_int {
    with(|shim| device_index(shim, device).map_or(-1, |i| i as c_int))
}}

export! { "IBVERBS_1.1" fn ibv_close_device(context: *mut c::ibv_context) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_close_device";
        let h = ctx_of(shim, v, context)?;
        // An imported context is another handle on the same one: closing
        // it frees only the handle.
        if !shim.aliases.remove(&(context as usize)) {
            if let Err(e) = shim.sim.close_device(&h) {
                if e.errno() != libc::EBUSY {
                    return Err(e).at(v);
                }
                // rdma-core's ibv_close_device closes the uverbs file and
                // the kernel destroys what the program left (it never
                // fails); do the same, then close.
                release_children(shim, context);
                shim.sim.close_device(&h).at(v)?;
            }
            shim.ctx_ptrs.remove(&h);
        }
        let e = shim.objects.remove(&(context as usize));
        shim.fds.contexts.remove(&(context as usize));
        shim.async_unacked.clear();
        if let Some(e) = e {
            crate::provider::fds::close_fd(e.extra.fd);
            crate::provider::fds::close_fd(e.extra.async_fd);
        }
        let vctx = (context as usize - offset_of!(c::verbs_context, context)) as *mut c::verbs_context;
        // SAFETY: a live context of ours sits inside the verbs_context
        // allocated in open_device; it is unregistered above, freed once.
        unsafe { state::free(vctx) };
        Ok(())
    }))
}}

/// Destroys every object of `context` the program did not (as the kernel
/// does when a uverbs file closes): QPs first, then what they used. Their C
/// structs stay allocated, as rdma-core's do, and leave the registry, so a
/// later call naming one is `EINVAL`.
fn release_children(shim: &mut Shim, context: *mut c::ibv_context) {
    let ctx_of_obj = |p: usize, o: &Obj| -> *mut c::ibv_context {
        // SAFETY: `p` is a live object of ours of the kind its entry says;
        // every one of these structs has its `context` field set at creation.
        unsafe {
            match o {
                Obj::Pd(_) | Obj::ParentDomain(_) => (*(p as *const c::ibv_pd)).context,
                Obj::Mr(_) => (*(p as *const c::ibv_mr)).context,
                Obj::Cq(_) => (*(p as *const c::ibv_cq)).context,
                Obj::Channel(_) => (*(p as *const c::ibv_comp_channel)).context,
                Obj::Srq(_) => (*(p as *const c::ibv_srq)).context,
                Obj::Qp(_) => (*(p as *const c::ibv_qp)).context,
                Obj::Ah(_) => (*(p as *const c::ibv_ah)).context,
                Obj::Xrcd(_) => (*(p as *const c::ibv_xrcd)).context,
                Obj::Mw(_) => (*(p as *const c::ibv_mw)).context,
                Obj::Dm(_) => (*(p as *const c::ibv_dm)).context,
                Obj::Context(_) => ptr::null_mut(),
            }
        }
    };
    let rank = |o: &Obj| match o {
        Obj::Qp(_) => 0,
        Obj::Srq(_) => 1,
        Obj::Ah(_) => 2,
        Obj::Mw(_) => 3,
        Obj::Mr(_) => 4,
        Obj::Dm(_) => 5,
        Obj::Cq(_) => 6,
        Obj::Channel(_) => 7,
        Obj::ParentDomain(_) => 8,
        Obj::Pd(_) => 9,
        Obj::Xrcd(_) => 10,
        Obj::Context(_) => 11,
    };
    let mut victims: Vec<(usize, Obj)> = shim
        .objects
        .iter()
        .filter(|(p, e)| !shim.aliases.contains(p) && ctx_of_obj(**p, &e.obj) == context)
        .map(|(p, e)| (*p, e.obj))
        .collect();
    victims.sort_by_key(|(p, o)| (rank(o), *p));
    for (p, o) in victims {
        let _ = match o {
            Obj::Qp(h) => shim.sim.destroy_qp(&h),
            Obj::Srq(h) => shim.sim.destroy_srq(&h),
            Obj::Ah(h) => shim.sim.destroy_ah(&h),
            Obj::Mw(h) => shim.sim.dealloc_mw(&h),
            Obj::Mr(h) => shim.sim.dereg_mr(&h),
            Obj::Dm(h) => shim.sim.free_dm(&h),
            Obj::Cq(h) => shim.sim.destroy_cq(&h),
            Obj::Channel(h) => shim.sim.destroy_comp_channel(&h),
            Obj::Pd(h) => shim.sim.dealloc_pd(&h),
            Obj::Xrcd(h) => shim.sim.close_xrcd(&h),
            Obj::ParentDomain(_) | Obj::Context(_) => Ok(()),
        };
        shim.parents.remove(&p);
        shim.parent_users.remove(&p);
        shim.objects.remove(&p);
    }
}

/// `struct ibv_device_attr` from the simulator's attributes.
pub(crate) fn device_attr(a: &DeviceAttr) -> c::ibv_device_attr {
    let mut o = c::ibv_device_attr::default();
    put_str(&mut o.fw_ver, &a.fw_ver);
    o.node_guid = a.node_guid.to_be();
    o.sys_image_guid = a.sys_image_guid.to_be();
    o.max_mr_size = a.max_mr_size;
    o.page_size_cap = a.page_size_cap;
    o.vendor_id = a.vendor_id;
    o.vendor_part_id = a.vendor_part_id;
    o.hw_ver = a.hw_ver;
    let i = |x: u32| x.min(i32::MAX as u32) as c_int;
    o.max_qp = i(a.max_qp);
    o.max_qp_wr = i(a.max_qp_wr);
    o.device_cap_flags = a.device_cap_flags.bits() as u32;
    o.max_sge = i(a.max_sge);
    o.max_sge_rd = i(a.max_sge_rd);
    o.max_cq = i(a.max_cq);
    o.max_cqe = i(a.max_cqe);
    o.max_mr = i(a.max_mr);
    o.max_pd = i(a.max_pd);
    o.max_qp_rd_atom = i(a.max_qp_rd_atom);
    o.max_ee_rd_atom = i(a.max_ee_rd_atom);
    o.max_res_rd_atom = i(a.max_res_rd_atom);
    o.max_qp_init_rd_atom = i(a.max_qp_init_rd_atom);
    o.max_ee_init_rd_atom = i(a.max_ee_init_rd_atom);
    o.atomic_cap = a.atomic_cap.to_raw();
    o.max_ee = i(a.max_ee);
    o.max_rdd = i(a.max_rdd);
    o.max_mw = i(a.max_mw);
    o.max_raw_ipv6_qp = i(a.max_raw_ipv6_qp);
    o.max_raw_ethy_qp = i(a.max_raw_ethy_qp);
    o.max_mcast_grp = i(a.max_mcast_grp);
    o.max_mcast_qp_attach = i(a.max_mcast_qp_attach);
    o.max_total_mcast_qp_attach = i(a.max_total_mcast_qp_attach);
    o.max_ah = i(a.max_ah);
    o.max_fmr = i(a.max_fmr);
    o.max_map_per_fmr = i(a.max_map_per_fmr);
    o.max_srq = i(a.max_srq);
    o.max_srq_wr = i(a.max_srq_wr);
    o.max_srq_sge = i(a.max_srq_sge);
    o.max_pkeys = a.max_pkeys;
    o.local_ca_ack_delay = a.local_ca_ack_delay;
    o.phys_port_cnt = a.phys_port_cnt;
    o
}

export! { "IBVERBS_1.1" fn ibv_query_device(context: *mut c::ibv_context, attr: *mut c::ibv_device_attr) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_query_device";
        let h = ctx_of(shim, v, context)?;
        if attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "device_attr is NULL"));
        }
        let a = shim.sim.query_device(&h).at(v)?;
        // SAFETY: checked non-NULL; the caller passes a writable ibv_device_attr.
        unsafe { attr.write(device_attr(&a)) };
        Ok(())
    }))
}}

/// The `query_device_ex` op of `verbs_context` (what the inline
/// `ibv_query_device_ex` calls): fills `min(attr_size, ours)` bytes.
pub(crate) unsafe extern "C" fn op_query_device_ex(
    context: *mut c::ibv_context,
    input: *const c::ibv_query_device_ex_input,
    attr: *mut c::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let _ = input;
    crate::guard::catch("ibv_query_device_ex", || {
        ret_int(with(|shim| {
            let v = "ibv_query_device_ex";
            let h = ctx_of(shim, v, context)?;
            if attr.is_null() || attr_size < size_of::<c::ibv_device_attr>() {
                return Err(Fail::new(
                    v,
                    libc::EINVAL,
                    format!("attr is NULL or attr_size {attr_size} is too small"),
                ));
            }
            let a = shim.sim.query_device_ex(&h).at(v)?;
            let ex = device_attr_ex(&a);
            let n = attr_size.min(size_of::<c::ibv_device_attr_ex>());
            // SAFETY: `attr` is non-NULL and the caller says it holds
            // attr_size bytes; we copy at most that many, zeroing the rest.
            unsafe {
                ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
                ptr::copy_nonoverlapping(
                    (&ex as *const c::ibv_device_attr_ex).cast::<u8>(),
                    attr.cast::<u8>(),
                    n,
                );
            }
            Ok(())
        }))
    })
}

/// `struct ibv_device_attr_ex` from the simulator's extended attributes.
fn device_attr_ex(a: &DeviceAttrEx) -> c::ibv_device_attr_ex {
    let mut o = c::ibv_device_attr_ex {
        orig_attr: device_attr(&a.orig_attr),
        comp_mask: a.comp_mask,
        completion_timestamp_mask: a.completion_timestamp_mask,
        hca_core_clock: a.hca_core_clock,
        device_cap_flags_ex: a.device_cap_flags_ex,
        max_wq_type_rq: a.max_wq_type_rq,
        raw_packet_caps: a.raw_packet_caps,
        max_dm_size: a.max_dm_size,
        xrc_odp_caps: a.xrc_odp_caps,
        phys_port_cnt_ex: a.phys_port_cnt_ex,
        ..Default::default()
    };
    o.odp_caps.general_caps = a.odp_caps.general_caps;
    o.odp_caps.per_transport_caps.rc_odp_caps = a.odp_caps.rc_odp_caps;
    o.odp_caps.per_transport_caps.uc_odp_caps = a.odp_caps.uc_odp_caps;
    o.odp_caps.per_transport_caps.ud_odp_caps = a.odp_caps.ud_odp_caps;
    o.tso_caps.max_tso = a.tso_caps.max_tso;
    o.tso_caps.supported_qpts = a.tso_caps.supported_qpts;
    o.rss_caps.supported_qpts = a.rss_caps.supported_qpts;
    o.rss_caps.max_rwq_indirection_tables = a.rss_caps.max_rwq_indirection_tables;
    o.rss_caps.max_rwq_indirection_table_size = a.rss_caps.max_rwq_indirection_table_size;
    o.rss_caps.rx_hash_fields_mask = a.rss_caps.rx_hash_fields_mask;
    o.rss_caps.rx_hash_function = a.rss_caps.rx_hash_function;
    o.packet_pacing_caps.qp_rate_limit_min = a.packet_pacing_caps.qp_rate_limit_min;
    o.packet_pacing_caps.qp_rate_limit_max = a.packet_pacing_caps.qp_rate_limit_max;
    o.packet_pacing_caps.supported_qpts = a.packet_pacing_caps.supported_qpts;
    o.tm_caps.max_rndv_hdr_size = a.tm_caps.max_rndv_hdr_size;
    o.tm_caps.max_num_tags = a.tm_caps.max_num_tags;
    o.tm_caps.flags = a.tm_caps.flags;
    o.tm_caps.max_ops = a.tm_caps.max_ops;
    o.tm_caps.max_sge = a.tm_caps.max_sge;
    o.cq_mod_caps.max_cq_count = a.cq_mod_caps.max_cq_count;
    o.cq_mod_caps.max_cq_period = a.cq_mod_caps.max_cq_period;
    o.pci_atomic_caps.fetch_add = a.pci_atomic_caps.fetch_add;
    o.pci_atomic_caps.compare_swap = a.pci_atomic_caps.compare_swap;
    o.pci_atomic_caps.swap = a.pci_atomic_caps.swap;
    o
}

/// `struct ibv_port_attr` from the simulator's port.
fn port_attr(p: &PortAttr) -> c::ibv_port_attr {
    c::ibv_port_attr {
        state: p.state.to_raw(),
        max_mtu: p.max_mtu.to_raw(),
        active_mtu: p.active_mtu.to_raw(),
        gid_tbl_len: p.gid_tbl_len,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed.min(u32::from(u8::MAX)) as u8,
        phys_state: p.phys_state,
        link_layer: p.link_layer.to_raw() as u8,
        flags: p.flags,
        port_cap_flags2: 0,
    }
}

fn query_port(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    port: u8,
    attr: *mut c::ibv_port_attr,
    len: usize,
) -> Res<()> {
    let h = ctx_of(shim, v, context)?;
    if attr.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "port_attr is NULL"));
    }
    let p = shim.sim.query_port(&h, port).at(v)?;
    let a = port_attr(&p);
    let n = len.min(size_of::<c::ibv_port_attr>());
    // SAFETY: `attr` is non-NULL and holds `len` bytes (the caller's
    // contract); at most that many are written.
    unsafe {
        ptr::write_bytes(attr.cast::<u8>(), 0, len);
        ptr::copy_nonoverlapping(
            (&a as *const c::ibv_port_attr).cast::<u8>(),
            attr.cast::<u8>(),
            n,
        );
    }
    Ok(())
}

/// The `query_port` op (what the inline `ibv_query_port` calls).
pub(crate) unsafe extern "C" fn op_query_port(
    context: *mut c::ibv_context,
    port: u8,
    attr: *mut c::ibv_port_attr,
    len: usize,
) -> c_int {
    crate::guard::catch("ibv_query_port", || {
        ret_int(with(|shim| {
            query_port(shim, "ibv_query_port", context, port, attr, len)
        }))
    })
}

export! { "IBVERBS_1.1" fn ibv_query_port(context: *mut c::ibv_context, port_num: u8, port_attr: *mut c::ibv_port_attr) -> c_int {
    // The exported (pre-port_cap_flags2) entry: the old, shorter struct.
    let len = offset_of!(c::ibv_port_attr, port_cap_flags2);
    ret_int(with(|shim| query_port(shim, "ibv_query_port", context, port_num, port_attr, len)))
}}

export! { "IBVERBS_1.1" fn ibv_query_gid(context: *mut c::ibv_context, port_num: u8, index: c_int, gid: *mut c::ibv_gid) -> c_int {
    let r = with(|shim| {
        let v = "ibv_query_gid";
        let h = ctx_of(shim, v, context)?;
        if gid.is_null() || index < 0 {
            return Err(Fail::new(v, libc::EINVAL, "gid is NULL or the index is negative"));
        }
        let g = shim.sim.query_gid(&h, port_num, index as u32).at(v)?;
        // SAFETY: non-NULL; the caller passes a writable union ibv_gid (16 bytes).
        unsafe { (*gid).raw = g.0 };
        Ok(())
    });
    // rdma-core returns -1 (not an errno) from ibv_query_gid.
    match r {
        Ok(()) => 0,
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}}

export! { "IBVERBS_1.1" fn ibv_query_pkey(context: *mut c::ibv_context, port_num: u8, index: c_int, pkey: *mut u16) -> c_int {
    let r = with(|shim| {
        let v = "ibv_query_pkey";
        let h = ctx_of(shim, v, context)?;
        if pkey.is_null() || !(0..=i32::from(u16::MAX)).contains(&index) {
            return Err(Fail::new(v, libc::EINVAL, "pkey is NULL or the index is out of range"));
        }
        let p = shim.sim.query_pkey(&h, port_num, index as u16).at(v)?;
        // SAFETY: non-NULL; the caller passes a writable __be16.
        unsafe { *pkey = p.to_be() };
        Ok(())
    });
    match r {
        Ok(()) => 0,
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}}

/// The GID type of an index: `IBV_GID_TYPE_IB` on InfiniBand; on Ethernet
/// index 0 (the link-local GID) is RoCE v1 and the others RoCE v2.
pub(crate) fn gid_type(shim: &mut Shim, h: &ContextHandle, port: u8, index: u32) -> Res<u32> {
    let p = shim.sim.query_port(h, port).at("ibv_query_gid_type")?;
    Ok(match (p.link_layer, index) {
        (LinkLayer::Ethernet, 0) => c::IBV_GID_TYPE_ROCE_V1,
        (LinkLayer::Ethernet, _) => c::IBV_GID_TYPE_ROCE_V2,
        _ => c::IBV_GID_TYPE_IB,
    })
}

export! { "IBVERBS_PRIVATE_34" fn ibv_query_gid_type(context: *mut c::ibv_context, port_num: u8, index: u32, type_: *mut u32) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_query_gid_type";
        let h = ctx_of(shim, v, context)?;
        shim.sim.query_gid(&h, port_num, index).at(v)?;
        if type_.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "type is NULL"));
        }
        let t = gid_type(shim, &h, port_num, index)?;
        // The private entry speaks sysfs types: IB and RoCE v1 are 0, RoCE v2 is 1.
        let sysfs = u32::from(t == c::IBV_GID_TYPE_ROCE_V2);
        // SAFETY: non-NULL; the caller passes a writable enum.
        unsafe { *type_ = sysfs };
        Ok(())
    }))
}}

fn gid_entry(shim: &mut Shim, h: &ContextHandle, port: u8, index: u32) -> Res<c::ibv_gid_entry> {
    let v = "ibv_query_gid_ex";
    let g = shim.sim.query_gid(h, port, index).at(v)?;
    let mut e = c::ibv_gid_entry {
        gid_index: index,
        port_num: u32::from(port),
        gid_type: gid_type(shim, h, port, index)?,
        ..Default::default()
    };
    e.gid.raw = g.0;
    Ok(e)
}

export! { "IBVERBS_1.11" fn _ibv_query_gid_ex(context: *mut c::ibv_context, port_num: u32, gid_index: u32, entry: *mut c::ibv_gid_entry, flags: u32, entry_size: usize) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_query_gid_ex";
        let h = ctx_of(shim, v, context)?;
        if entry.is_null() || flags != 0 || entry_size < size_of::<c::ibv_gid_entry>() {
            return Err(Fail::new(v, libc::EINVAL, "entry is NULL, flags are not 0 or entry_size is too small"));
        }
        let port = u8::try_from(port_num).map_err(|_| Fail::new(v, libc::EINVAL, "port_num above 255"))?;
        let e = gid_entry(shim, &h, port, gid_index)?;
        // SAFETY: every bit pattern of the 16-byte union is a valid [u8; 16].
        if unsafe { e.gid.raw } == [0; 16] {
            return Err(Fail::new(v, libc::ENODATA, format!("GID index {gid_index} is empty")));
        }
        // SAFETY: non-NULL and at least sizeof(ibv_gid_entry) bytes (checked).
        unsafe { entry.write(e) };
        Ok(())
    }))
}}

export! { "IBVERBS_1.11" fn _ibv_query_gid_table(context: *mut c::ibv_context, entries: *mut c::ibv_gid_entry, max_entries: usize, flags: u32, entry_size: usize) -> isize {
    let r = with(|shim| {
        let v = "ibv_query_gid_table";
        let h = ctx_of(shim, v, context)?;
        if flags != 0 || entry_size < size_of::<c::ibv_gid_entry>() || (entries.is_null() && max_entries > 0) {
            return Err(Fail::new(v, libc::EINVAL, "flags are not 0, entry_size is too small or entries is NULL"));
        }
        let ports = shim.sim.query_device(&h).at(v)?.phys_port_cnt;
        let mut out = Vec::new();
        for port in 1..=ports {
            let len = shim.sim.query_port(&h, port).at(v)?.gid_tbl_len.max(0) as u32;
            for i in 0..len {
                let e = gid_entry(shim, &h, port, i)?;
                // SAFETY: every bit pattern of the 16-byte union is a valid [u8; 16].
                if unsafe { e.gid.raw } != [0; 16] {
                    out.push(e);
                }
            }
        }
        if out.len() > max_entries {
            return Err(Fail::new(v, libc::EINVAL, format!("{} entries do not fit in max_entries {max_entries}", out.len())));
        }
        for (i, e) in out.iter().enumerate() {
            // SAFETY: `entries` holds max_entries records of entry_size bytes; i < max_entries.
            unsafe { entries.cast::<u8>().add(i * entry_size).cast::<c::ibv_gid_entry>().write_unaligned(*e) };
        }
        Ok(out.len() as isize)
    });
    // A negative errno, which is also left in errno (rdma-core's ioctl failed).
    match r {
        Ok(n) => n,
        Err(f) => {
            set_errno(f.errno);
            -(f.errno as isize)
        }
    }
}}

export! { "IBVERBS_1.0" fn ibv_read_sysfs_file(dir: *const c_char, file: *const c_char, buf: *mut c_char, size: usize) -> c_int {
    // There is no sysfs behind the simulated devices: every file is absent,
    // which the callers (ibv_devinfo) handle by printing nothing.
    let _ = (dir, file, buf, size);
    set_errno(libc::ENOENT);
    -1
}}

export! { "IBVERBS_1.1" fn ibv_fork_init() -> c_int { 0 } }

export! { "IBVERBS_1.13" fn ibv_is_fork_initialized() -> u32 {
    // IBV_FORK_UNNEEDED: the simulator pins no pages.
    2
}}

export! { "IBVERBS_1.1" fn ibv_wc_status_str(status: u32) -> *const c_char {
    let s: &'static core::ffi::CStr = match WcStatus::from_raw(status) {
        WcStatus::Success => c"success",
        WcStatus::LocLenErr => c"local length error",
        WcStatus::LocQpOpErr => c"local QP operation error",
        WcStatus::LocEecOpErr => c"local EE context operation error",
        WcStatus::LocProtErr => c"local protection error",
        WcStatus::WrFlushErr => c"Work Request Flushed Error",
        WcStatus::MwBindErr => c"memory management operation error",
        WcStatus::BadRespErr => c"bad response error",
        WcStatus::LocAccessErr => c"local access error",
        WcStatus::RemInvReqErr => c"remote invalid request error",
        WcStatus::RemAccessErr => c"remote access error",
        WcStatus::RemOpErr => c"remote operation error",
        WcStatus::RetryExcErr => c"transport retry counter exceeded",
        WcStatus::RnrRetryExcErr => c"RNR retry counter exceeded",
        WcStatus::LocRddViolErr => c"local RDD violation error",
        WcStatus::RemInvRdReqErr => c"remote invalid RD request",
        WcStatus::RemAbortErr => c"aborted error",
        WcStatus::InvEecnErr => c"invalid EE context number",
        WcStatus::InvEecStateErr => c"invalid EE context state",
        WcStatus::FatalErr => c"fatal error",
        WcStatus::RespTimeoutErr => c"response timeout error",
        WcStatus::GeneralErr => c"general error",
        WcStatus::TmErr => c"TM error",
        WcStatus::TmRndvIncomplete => c"TM software rendezvous",
        _ => c"unknown",
    };
    s.as_ptr()
}}
