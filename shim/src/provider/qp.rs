//! Queue pairs: `ibv_create_qp`, the `create_qp_ex` op, modify, query,
//! destroy, `ibv_qp_to_qp_ex` and multicast.

use core::ffi::c_int;
use core::mem::size_of;

use backend_sim::*;
use verbs_api::*;

use crate::export::export;
use crate::provider::objects::{ah_attr, c_ah_attr};
use crate::provider::qpex::QpAlloc;
use crate::provider::state::{c, handle_of, ret_int, ret_ptr, with, Fail, Obj, Res, Shim, SimRes};

fn cap(c: &c::ibv_qp_cap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn c_cap(c: &QpCap) -> c::ibv_qp_cap {
    c::ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// Creates a QP from an `ibv_qp_init_attr_ex`; `pd` is the PD to use.
pub(crate) fn create_qp(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &mut c::ibv_qp_init_attr_ex,
) -> Res<*mut c::ibv_qp> {
    create_qp_dv(shim, v, context, a, None)
}

/// [`create_qp`], or `mlx5dv_create_qp` when `dv` is given.
pub(crate) fn create_qp_dv(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    a: &mut c::ibv_qp_init_attr_ex,
    dv: Option<&Mlx5QpInitAttr>,
) -> Res<*mut c::ibv_qp> {
    let pd = if a.comp_mask & c::IBV_QP_INIT_ATTR_PD != 0 {
        Some(handle_of!(shim, v, a.pd, Pd, "PD")?)
    } else {
        None
    };
    let xrcd = if a.comp_mask & c::IBV_QP_INIT_ATTR_XRCD != 0 {
        Some(handle_of!(shim, v, a.xrcd, Xrcd, "XRCD")?)
    } else {
        None
    };
    let opt_cq = |shim: &Shim, p: *mut c::ibv_cq| -> Res<Option<CqHandle>> {
        if p.is_null() {
            Ok(None)
        } else {
            handle_of!(shim, v, p, Cq, "CQ").map(Some)
        }
    };
    let send_cq = opt_cq(shim, a.send_cq)?;
    let recv_cq = opt_cq(shim, a.recv_cq)?;
    let srq = if a.srq.is_null() {
        None
    } else {
        Some(handle_of!(shim, v, a.srq, Srq, "SRQ")?)
    };
    let ctx = crate::provider::device::ctx_of(shim, v, context)?;
    crate::provider::mlx5::check_alloc_type(shim, v, ctx, "MLX_QP_ALLOC_TYPE")?;
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_context: a.qp_context as u64,
        send_cq: send_cq.as_ref(),
        recv_cq: recv_cq.as_ref(),
        srq: srq.as_ref(),
        cap: cap(&a.cap),
        qp_type: QpType::from_raw(a.qp_type),
        sq_sig_all: a.sq_sig_all != 0,
        comp_mask: QpInitAttrMask(a.comp_mask),
        pd: pd.as_ref(),
        xrcd: xrcd.as_ref(),
        create_flags: QpCreateFlags(a.create_flags),
        max_tso_header: a.max_tso_header,
        source_qpn: a.source_qpn,
        send_ops_flags: SendOpsFlags(a.send_ops_flags),
    };
    let h = match dv {
        None => shim.sim.create_qp_ex(&ctx, &mut attr).at(v)?,
        Some(d) => shim.sim.mlx5dv_create_qp(&ctx, &mut attr, d).at(v)?,
    };
    a.cap = c_cap(&attr.cap);
    let objs = QpObjs {
        context,
        pd: a.pd,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
    };
    let has_ex = a.comp_mask & c::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    let qp = wrap_qp(shim, v, h, &objs, a.qp_type, a.qp_context, has_ex)?;
    // libmlx5 installs the raw-WQE builder on a QP created with any
    // mlx5dv send-ops flag (`mlx5_qp_fill_wr_pfns`), not only
    // `MLX5DV_QP_EX_WITH_RAW_WQE` as mlx5dv_wr_post(3) asks: programs that
    // work there work here.
    if dv.is_some_and(|d| {
        d.comp_mask.contains(Mlx5QpInitAttrMask::SEND_OPS_FLAGS) && !d.send_ops_flags.is_empty()
    }) {
        // SAFETY: wrap_qp just made this QP: a live QpAlloc of ours, not
        // yet handed to C.
        crate::provider::mlx5::enable_raw_wqe(unsafe { &mut *qp.cast::<QpAlloc>() });
    }
    Ok(qp)
}

/// The C objects a QP names.
pub(crate) struct QpObjs {
    pub(crate) context: *mut c::ibv_context,
    pub(crate) pd: *mut c::ibv_pd,
    pub(crate) send_cq: *mut c::ibv_cq,
    pub(crate) recv_cq: *mut c::ibv_cq,
    pub(crate) srq: *mut c::ibv_srq,
}

/// The C QP of a simulator QP: a new [`QpAlloc`] naming `o`'s objects.
pub(crate) fn wrap_qp(
    shim: &mut Shim,
    v: &str,
    h: QpHandle,
    o: &QpObjs,
    qp_type: u32,
    qp_context: *mut core::ffi::c_void,
    has_ex: bool,
) -> Res<*mut c::ibv_qp> {
    if let Some(&p) = shim.qp_ptrs.get(&h) {
        return Ok(p as *mut c::ibv_qp);
    }
    let qpn = shim.sim.qp_num(&h).at(v)?;
    let (state, max_inline_data) = shim
        .sim
        .query_qp(&h, QpAttrMask::STATE | QpAttrMask::CAP)
        .map_or((c::IBV_QPS_RESET, 0), |(a, i)| {
            (a.qp_state.to_raw(), i.cap.max_inline_data)
        });
    let q = Box::into_raw(Box::<QpAlloc>::default());
    // SAFETY: just allocated, not shared yet.
    let r = unsafe { &mut *q };
    let b = &mut r.ex.qp_base;
    b.context = o.context;
    b.qp_context = qp_context;
    b.pd = o.pd;
    b.send_cq = o.send_cq;
    b.recv_cq = o.recv_cq;
    b.srq = o.srq;
    b.handle = h.index();
    b.qp_num = qpn;
    b.state = state;
    b.qp_type = qp_type;
    r.has_ex = has_ex;
    r.max_inline_data = max_inline_data;
    crate::provider::mlx5::fill_dv(r);
    crate::provider::qpex::fill(r);
    let ptr = q.cast::<c::ibv_qp>();
    shim.add(ptr.cast(), Obj::Qp(h));
    shim.qp_ptrs.insert(h, ptr as usize);
    crate::provider::parent::note_user(shim, ptr as usize, o.pd);
    Ok(ptr)
}

export! { "IBVERBS_1.1" fn ibv_create_qp(pd: *mut c::ibv_pd, qp_init_attr: *mut c::ibv_qp_init_attr) -> *mut c::ibv_qp {
    ret_ptr(with(|shim| {
        let v = "ibv_create_qp";
        handle_of!(shim, v, pd, Pd, "PD")?;
        if qp_init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct; `pd` is a live PD of ours.
        let (init, context) = unsafe { (&mut *qp_init_attr, (*pd).context) };
        let mut ex = c::ibv_qp_init_attr_ex {
            qp_context: init.qp_context,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: init.srq,
            cap: init.cap,
            qp_type: init.qp_type,
            sq_sig_all: init.sq_sig_all,
            comp_mask: c::IBV_QP_INIT_ATTR_PD,
            pd,
            ..Default::default()
        };
        let qp = create_qp(shim, v, context, &mut ex)?;
        init.cap = ex.cap;
        Ok(qp)
    }))
}}

/// The `create_qp_ex` op (the inline `ibv_create_qp_ex`).
pub(crate) unsafe extern "C" fn op_create_qp_ex(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_qp_init_attr_ex,
) -> *mut c::ibv_qp {
    crate::guard::catch("ibv_create_qp_ex", || {
        ret_ptr(with(|shim| {
            if attr.is_null() {
                return Err(Fail::new(
                    "ibv_create_qp_ex",
                    libc::EINVAL,
                    "qp_init_attr_ex is NULL",
                ));
            }
            // SAFETY: non-NULL; the caller's struct.
            create_qp(shim, "ibv_create_qp_ex", context, unsafe { &mut *attr })
        }))
    })
}

/// `struct ibv_qp_attr` → [`QpAttr`].
pub(crate) fn qp_attr(a: &c::ibv_qp_attr) -> QpAttr {
    QpAttr {
        qp_state: QpState::from_raw(a.qp_state),
        cur_qp_state: QpState::from_raw(a.cur_qp_state),
        path_mtu: Mtu::from_raw(a.path_mtu),
        path_mig_state: PathMigState::from_raw(a.path_mig_state),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags(a.qp_access_flags),
        cap: cap(&a.cap),
        ah_attr: ah_attr(&a.ah_attr),
        alt_ah_attr: ah_attr(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

/// [`QpAttr`] → `struct ibv_qp_attr`.
pub(crate) fn c_qp_attr(a: &QpAttr) -> c::ibv_qp_attr {
    c::ibv_qp_attr {
        qp_state: a.qp_state.to_raw(),
        cur_qp_state: a.cur_qp_state.to_raw(),
        path_mtu: a.path_mtu.to_raw(),
        path_mig_state: a.path_mig_state.to_raw(),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags.bits(),
        cap: c_cap(&a.cap),
        ah_attr: c_ah_attr(&a.ah_attr),
        alt_ah_attr: c_ah_attr(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

export! { "IBVERBS_1.1" fn ibv_modify_qp(qp: *mut c::ibv_qp, attr: *mut c::ibv_qp_attr, attr_mask: c_int) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_modify_qp";
        let h = handle_of!(shim, v, qp, Qp, "QP")?;
        if attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = qp_attr(unsafe { &*attr });
        let mask = QpAttrMask(attr_mask as u32);
        shim.sim.modify_qp(&h, &a, mask).at(v)?;
        if mask.contains(QpAttrMask::STATE) {
            // As libibverbs does: C reads qp->state without a call.
            // SAFETY: a live QP of ours.
            unsafe { (*qp).state = a.qp_state.to_raw() };
        }
        // An mlx5 DCT gets its number when it reaches RTR (the provider
        // writes qp->qp_num then); keep the field C reads current.
        if let Ok(n) = shim.sim.qp_num(&h) {
            // SAFETY: a live QP of ours.
            unsafe { (*qp).qp_num = n };
        }
        if crate::provider::state::any_channel(shim) {
            crate::provider::events::settle(shim);
        }
        Ok(())
    }))
}}

export! { "IBVERBS_1.1" fn ibv_query_qp(qp: *mut c::ibv_qp, attr: *mut c::ibv_qp_attr, attr_mask: c_int, init_attr: *mut c::ibv_qp_init_attr) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_query_qp";
        let h = handle_of!(shim, v, qp, Qp, "QP")?;
        if attr.is_null() || init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "attr or init_attr is NULL"));
        }
        let (a, info) = shim.sim.query_qp(&h, QpAttrMask(attr_mask as u32)).at(v)?;
        // SAFETY: both non-NULL; the caller's structs; `qp` is a live QP of ours.
        unsafe {
            attr.write(c_qp_attr(&a));
            let b = &*qp;
            init_attr.write(c::ibv_qp_init_attr {
                qp_context: b.qp_context,
                send_cq: b.send_cq,
                recv_cq: b.recv_cq,
                srq: b.srq,
                cap: c_cap(&info.cap),
                qp_type: info.qp_type.to_raw(),
                sq_sig_all: c_int::from(info.sq_sig_all),
            });
            (*qp).state = a.qp_state.to_raw();
        }
        Ok(())
    }))
}}

export! { "IBVERBS_1.1" fn ibv_destroy_qp(qp: *mut c::ibv_qp) -> c_int {
    ret_int(with(|shim| {
        let v = "ibv_destroy_qp";
        let h = handle_of!(shim, v, qp, Qp, "QP")?;
        if let Err(e) = shim.sim.destroy_qp(&h) {
            // A QP made by rdma_create_qp(_ex): libibverbs destroys it all
            // the same (the kernel knows no librdmacm ownership), and the
            // id is left without one.
            if e.errno() != libc::EBUSY || !release_id_qp(shim, h) {
                return Err(e).at(v);
            }
        }
        crate::provider::qpex::drop_bounce(shim, qp);
        shim.parent_users.remove(&(qp as usize));
        shim.objects.remove(&(qp as usize));
        shim.qp_ptrs.remove(&h);
        // SAFETY: a live QP of ours (a QpAlloc), unregistered above, freed once.
        drop(unsafe { Box::from_raw(qp.cast::<QpAlloc>()) });
        Ok(())
    }))
}}

export! { "IBVERBS_1.6" fn ibv_qp_to_qp_ex(qp: *mut c::ibv_qp) -> *mut c::ibv_qp_ex {
    with(|shim| {
        if !matches!(shim.get(qp.cast()).map(|e| e.obj), Some(Obj::Qp(_))) {
            crate::guard::set_errno(libc::EINVAL);
            return core::ptr::null_mut();
        }
        let q = qp.cast::<QpAlloc>();
        // SAFETY: a live QP of ours is a QpAlloc.
        if unsafe { (*q).has_ex } {
            // SAFETY: as above; `ex` is the first field.
            unsafe { &raw mut (*q).ex }
        } else {
            crate::guard::set_errno(libc::EOPNOTSUPP);
            core::ptr::null_mut()
        }
    })
}}

fn mcast(v: &str, qp: *mut c::ibv_qp, gid: *const c::ibv_gid, lid: u16, attach: bool) -> c_int {
    ret_int(with(|shim| {
        let h = handle_of!(shim, v, qp, Qp, "QP")?;
        if gid.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "gid is NULL"));
        }
        // SAFETY: non-NULL 16-byte union; any bit pattern is a valid [u8; 16].
        let g = Gid(unsafe { (*gid).raw });
        if attach {
            shim.sim.attach_mcast(&h, &g, lid).at(v)
        } else {
            shim.sim.detach_mcast(&h, &g, lid).at(v)
        }
    }))
}

export! { "IBVERBS_1.1" fn ibv_attach_mcast(qp: *mut c::ibv_qp, gid: *const c::ibv_gid, lid: u16) -> c_int {
    mcast("ibv_attach_mcast", qp, gid, lid, true)
}}

export! { "IBVERBS_1.1" fn ibv_detach_mcast(qp: *mut c::ibv_qp, gid: *const c::ibv_gid, lid: u16) -> c_int {
    mcast("ibv_detach_mcast", qp, gid, lid, false)
}}

const _: () = assert!(size_of::<QpAlloc>() >= size_of::<c::ibv_qp_ex>());

export! { "IBVERBS_1.14" fn ibv_query_qp_data_in_order(qp: *mut c::ibv_qp, op: u32, flags: u32) -> c_int {
    with(|shim| {
        let v = "ibv_query_qp_data_in_order";
        let Ok(h) = handle_of!(shim, v, qp, Qp, "QP") else { return 0 };
        match shim.sim.query_qp_data_in_order(&h, WrOpcode::from_raw(op), DataInOrderFlags(flags)) {
            Ok(caps) => caps.bits() as c_int,
            Err(e) => {
                crate::guard::log_err(v, e.errno(), &e);
                0
            }
        }
    })
}}

/// The `open_qp` op (the inline `ibv_open_qp`): another handle on an
/// XRC target QP of an XRC domain.
pub(crate) unsafe extern "C" fn op_open_qp(
    context: *mut c::ibv_context,
    attr: *mut c::ibv_qp_open_attr,
) -> *mut c::ibv_qp {
    crate::guard::catch("ibv_open_qp", || {
        ret_ptr(with(|shim| {
            let v = "ibv_open_qp";
            let ctx = crate::provider::device::ctx_of(shim, v, context)?;
            if attr.is_null() {
                return Err(Fail::new(v, libc::EINVAL, "qp_open_attr is NULL"));
            }
            // SAFETY: non-NULL; the caller's struct.
            let a = unsafe { &*attr };
            let all = c::IBV_QP_OPEN_ATTR_NUM
                | c::IBV_QP_OPEN_ATTR_XRCD
                | c::IBV_QP_OPEN_ATTR_CONTEXT
                | c::IBV_QP_OPEN_ATTR_TYPE;
            if a.comp_mask & !all != 0
                || a.comp_mask
                    & (c::IBV_QP_OPEN_ATTR_NUM
                        | c::IBV_QP_OPEN_ATTR_XRCD
                        | c::IBV_QP_OPEN_ATTR_TYPE)
                    != (c::IBV_QP_OPEN_ATTR_NUM
                        | c::IBV_QP_OPEN_ATTR_XRCD
                        | c::IBV_QP_OPEN_ATTR_TYPE)
            {
                return Err(Fail::new(
                    v,
                    libc::EINVAL,
                    format!(
                        "comp_mask {:#x} must name NUM, XRCD and TYPE and nothing unknown",
                        a.comp_mask
                    ),
                ));
            }
            let x = handle_of!(shim, v, a.xrcd, Xrcd, "XRCD")?;
            let open = QpOpenAttr {
                qp_num: a.qp_num,
                qp_type: QpType::from_raw(a.qp_type),
                qp_context: a.qp_context as u64,
            };
            let h = shim.sim.open_qp(&ctx, &x, &open).at(v)?;
            let q = Box::into_raw(Box::<QpAlloc>::default());
            // SAFETY: just allocated, not shared yet.
            let r = unsafe { &mut *q };
            let b = &mut r.ex.qp_base;
            b.context = context;
            b.qp_context = a.qp_context;
            b.handle = h.index();
            b.qp_num = a.qp_num;
            b.qp_type = a.qp_type;
            b.state = shim
                .sim
                .query_qp(&h, QpAttrMask::STATE)
                .map(|(s, _)| s.qp_state.to_raw())
                .unwrap_or(c::IBV_QPS_RESET);
            crate::provider::qpex::fill(r);
            let ptr = q.cast::<c::ibv_qp>();
            shim.add(ptr.cast(), Obj::Qp(h));
            shim.qp_ptrs.insert(h, ptr as usize);
            Ok(ptr)
        }))
    })
}

/// Destroys `qp` through the rdma_cm id that owns it (`rdma_destroy_qp`),
/// for a program that destroys such a QP with `ibv_destroy_qp`; whether an
/// id owned it. The id's `qp` pointer is cleared; CQs the program passed
/// stay, CQs `rdma_create_qp` made go with the QP, as with `rdma_destroy_qp`.
pub(crate) fn release_id_qp(shim: &mut Shim, qp: QpHandle) -> bool {
    let ids: Vec<(usize, CmIdHandle)> = shim.cm.ids.iter().map(|(p, e)| (*p, e.handle)).collect();
    for (ptr, id) in ids {
        if shim.sim.rdma_id_info(&id).is_ok_and(|i| i.qp == Some(qp))
            && shim.sim.rdma_destroy_qp(&id).is_ok()
        {
            // SAFETY: a live id of ours (from the registry).
            unsafe { (*(ptr as *mut c::rdma_cm_id)).qp = core::ptr::null_mut() };
            return true;
        }
    }
    false
}
