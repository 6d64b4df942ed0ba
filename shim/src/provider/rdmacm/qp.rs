//! librdmacm's QPs: `rdma_create_qp(_ex)` with its default PD and
//! automatic CQs, `rdma_destroy_qp`, `rdma_init_qp_attr`.

use core::ffi::c_int;

use backend_sim::*;
use verbs_api::*;

use super::{id_entry, reap, refresh, ret};
use crate::export::export;
use crate::provider::state::{c, handle_of, with, Fail, Obj, Res, Shim, SimRes};

// -------------------------------------------------------------------- QPs

/// The body of `rdma_create_qp` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_create_qp` takes them.
pub(super) unsafe fn rdma_create_qp_impl(
    id: *mut c::rdma_cm_id,
    pd: *mut c::ibv_pd,
    qp_init_attr: *mut c::ibv_qp_init_attr,
) -> c_int {
    ret(with(|shim| {
        let v = "rdma_create_qp";
        let h = id_entry(shim, v, id)?.handle;
        if qp_init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = unsafe { &mut *qp_init_attr };
        // An SRQ made with rdma_create_srq serves the id's QP (librdmacm
        // writes it into the caller's attributes).
        if a.srq.is_null() {
            // SAFETY: a live id of ours (id_entry above).
            a.srq = unsafe { (*id).srq };
        }
        let pd_h = if pd.is_null() {
            None
        } else {
            Some(handle_of!(shim, v, pd, Pd, "PD")?)
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
        let mut attr = QpInitAttrEx::<SimVerbs> {
            qp_context: a.qp_context as u64,
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            cap: QpCap {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
                max_recv_sge: a.cap.max_recv_sge,
                max_inline_data: a.cap.max_inline_data,
            },
            qp_type: QpType::from_raw(a.qp_type),
            sq_sig_all: a.sq_sig_all != 0,
            ..Default::default()
        };
        let q = shim
            .sim
            .rdma_create_qp(&h, pd_h.as_ref(), &mut attr)
            .at(v)?;
        a.cap.max_send_wr = attr.cap.max_send_wr;
        a.cap.max_recv_wr = attr.cap.max_recv_wr;
        a.cap.max_send_sge = attr.cap.max_send_sge;
        a.cap.max_recv_sge = attr.cap.max_recv_sge;
        a.cap.max_inline_data = attr.cap.max_inline_data;
        refresh(shim, v, id)?;
        // SAFETY: a live id of ours (refreshed above).
        let (verbs, id_pd, id_scq, id_rcq) =
            unsafe { ((*id).verbs, (*id).pd, (*id).send_cq, (*id).recv_cq) };
        let objs = crate::provider::qp::QpObjs {
            context: verbs,
            pd: if pd.is_null() { id_pd } else { pd },
            send_cq: if a.send_cq.is_null() {
                id_scq
            } else {
                a.send_cq
            },
            recv_cq: if a.recv_cq.is_null() {
                id_rcq
            } else {
                a.recv_cq
            },
            srq: a.srq,
        };
        let qp = crate::provider::qp::wrap_qp(shim, v, q, &objs, a.qp_type, a.qp_context, false)?;
        // SAFETY: a live id of ours.
        unsafe { (*id).qp = qp };
        Ok(())
    }))
}

export! { "RDMACM_1.0" fn rdma_create_qp_ex(id: *mut c::rdma_cm_id, qp_init_attr: *mut c::ibv_qp_init_attr_ex) -> c_int {
    ret(with(|shim| {
        let v = "rdma_create_qp_ex";
        let h = id_entry(shim, v, id)?.handle;
        if qp_init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = unsafe { &mut *qp_init_attr };
        // As rdma_create_qp: the id's SRQ serves its QP.
        if a.srq.is_null() {
            // SAFETY: a live id of ours (id_entry above).
            a.srq = unsafe { (*id).srq };
        }
        let pd_h = if a.comp_mask & c::IBV_QP_INIT_ATTR_PD != 0 && !a.pd.is_null() {
            Some(handle_of!(shim, v, a.pd, Pd, "PD")?)
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
        let mut attr = QpInitAttrEx::<SimVerbs> {
            qp_context: a.qp_context as u64,
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            cap: QpCap {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
                max_recv_sge: a.cap.max_recv_sge,
                max_inline_data: a.cap.max_inline_data,
            },
            qp_type: QpType::from_raw(a.qp_type),
            sq_sig_all: a.sq_sig_all != 0,
            comp_mask: QpInitAttrMask(a.comp_mask),
            pd: pd_h.as_ref(),
            create_flags: QpCreateFlags(a.create_flags),
            send_ops_flags: SendOpsFlags(a.send_ops_flags),
            ..Default::default()
        };
        let q = shim.sim.rdma_create_qp_ex(&h, &mut attr).at(v)?;
        a.cap.max_send_wr = attr.cap.max_send_wr;
        a.cap.max_recv_wr = attr.cap.max_recv_wr;
        a.cap.max_send_sge = attr.cap.max_send_sge;
        a.cap.max_recv_sge = attr.cap.max_recv_sge;
        a.cap.max_inline_data = attr.cap.max_inline_data;
        refresh(shim, v, id)?;
        // SAFETY: a live id of ours (refreshed above).
        let (verbs, id_pd, id_scq, id_rcq) =
            unsafe { ((*id).verbs, (*id).pd, (*id).send_cq, (*id).recv_cq) };
        let objs = crate::provider::qp::QpObjs {
            context: verbs,
            pd: if pd_h.is_none() { id_pd } else { a.pd },
            send_cq: if a.send_cq.is_null() { id_scq } else { a.send_cq },
            recv_cq: if a.recv_cq.is_null() { id_rcq } else { a.recv_cq },
            srq: a.srq,
        };
        let has_ex = a.comp_mask & c::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
        let qp = crate::provider::qp::wrap_qp(shim, v, q, &objs, a.qp_type, a.qp_context, has_ex)?;
        // SAFETY: a live id of ours.
        unsafe { (*id).qp = qp };
        Ok(())
    }))
}}

export! { "RDMACM_1.0" fn rdma_create_qp(id: *mut c::rdma_cm_id, pd: *mut c::ibv_pd, qp_init_attr: *mut c::ibv_qp_init_attr) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_create_qp_impl(id, pd, qp_init_attr) }
}}

/// The body of `rdma_destroy_qp` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_destroy_qp` takes them.
pub(super) unsafe fn rdma_destroy_qp_impl(id: *mut c::rdma_cm_id) {
    let _ = ret(with(|shim| {
        let v = "rdma_destroy_qp";
        let h = id_entry(shim, v, id)?.handle;
        shim.sim.rdma_destroy_qp(&h).at(v)?;
        reap(shim);
        refresh(shim, v, id)
    }));
}

export! { "RDMACM_1.0" fn rdma_destroy_qp(id: *mut c::rdma_cm_id) {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_destroy_qp_impl(id) }
}}

export! { "RDMACM_1.2" fn rdma_init_qp_attr(id: *mut c::rdma_cm_id, qp_attr: *mut c::ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int {
    ret(with(|shim| {
        let v = "rdma_init_qp_attr";
        let h = id_entry(shim, v, id)?.handle;
        if qp_attr.is_null() || qp_attr_mask.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_attr or qp_attr_mask is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct (qp_state is the state asked for).
        let want = QpState::from_raw(unsafe { (*qp_attr).qp_state });
        let (a, m) = shim.sim.rdma_init_qp_attr(&h, want).at(v)?;
        // SAFETY: both non-NULL; the caller's.
        unsafe {
            qp_attr.write(crate::provider::qp::c_qp_attr(&a));
            *qp_attr_mask = m.bits() as c_int;
        }
        Ok(())
    }))
}}
