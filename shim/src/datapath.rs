//! The data path the inline wrappers reach through `ibv_context.ops`:
//! `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq`,
//! `ibv_req_notify_cq`.

use core::ffi::c_int;

use backend_sim::*;
use verbs_api::*;

use crate::objects::handle_of;
use crate::state::{c, with, Fail, Obj, Shim, SimRes};

/// Reads a C SGE list.
///
/// # Safety
/// `sg` points to `n` readable `ibv_sge`s (or `n` is 0).
unsafe fn sges(out: &mut Vec<Sge>, sg: *const c::ibv_sge, n: c_int) {
    for i in 0..n.max(0) as usize {
        // SAFETY: the caller's contract.
        let s = unsafe { &*sg.add(i) };
        out.push(Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        });
    }
}

/// Converts a C send WR (its SGEs already read into `sg`).
///
/// # Safety
/// `w` is a readable `ibv_send_wr`.
unsafe fn send_wr<'a>(w: &c::ibv_send_wr, sg: &'a [Sge]) -> SendWr<'a, SimVerbs> {
    let op = WrOpcode::from_raw(w.opcode);
    let mut wr = SendWr::<SimVerbs> {
        wr_id: w.wr_id,
        sg_list: sg,
        opcode: op,
        send_flags: SendFlags(w.send_flags),
        ..Default::default()
    };
    // SAFETY: plain-data unions; reading a member another one was written
    // through yields its bytes, as in C.
    unsafe {
        wr.imm_data = w.__bindgen_anon_1.imm_data;
        match op {
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                let a = w.wr.atomic;
                wr.atomic = AtomicInfo {
                    remote_addr: a.remote_addr,
                    compare_add: a.compare_add,
                    swap: a.swap,
                    rkey: a.rkey,
                };
            }
            _ => {
                let r = w.wr.rdma;
                wr.rdma = RdmaInfo {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                };
            }
        }
        wr.remote_srqn = w.qp_type.xrc.remote_srqn;
    }
    wr
}

/// `ibv_post_send` (the `post_send` op).
pub(crate) unsafe extern "C" fn op_post_send(
    qp: *mut c::ibv_qp,
    wr: *mut c::ibv_send_wr,
    bad_wr: *mut *mut c::ibv_send_wr,
) -> c_int {
    crate::guard::catch("ibv_post_send", || {
        with(|shim| post_send(shim, qp, wr, bad_wr))
    })
}

fn post_send(
    shim: &mut Shim,
    qp: *mut c::ibv_qp,
    first: *mut c::ibv_send_wr,
    bad_wr: *mut *mut c::ibv_send_wr,
) -> c_int {
    let v = "ibv_post_send";
    let set_bad = |p: *mut c::ibv_send_wr| {
        if !bad_wr.is_null() {
            // SAFETY: non-NULL out-pointer of the caller.
            unsafe { *bad_wr = p };
        }
    };
    let h = match handle_of!(shim, v, qp, Qp, "QP") {
        Ok(h) => h,
        Err(f) => {
            set_bad(first);
            return f.errno;
        }
    };
    // SAFETY: a live QP of ours.
    let qp_type = QpType::from_raw(unsafe { (*qp).qp_type });
    // Gather the chain: pointers, SGE ranges, AHs.
    let mut ptrs = Vec::new();
    let mut sg = Vec::new();
    let mut ranges = Vec::new();
    let mut p = first;
    while !p.is_null() {
        // SAFETY: the caller's chain of readable ibv_send_wr.
        let w = unsafe { &*p };
        let start = sg.len();
        // SAFETY: the WR names num_sge readable entries.
        unsafe { sges(&mut sg, w.sg_list, w.num_sge) };
        ranges.push(start..sg.len());
        ptrs.push(p);
        p = w.next;
    }
    let mut ahs: Vec<Option<AhHandle>> = vec![None; ptrs.len()];
    for (&p, ah) in ptrs.iter().zip(ahs.iter_mut()) {
        // SAFETY: `p` is one of the caller's readable WRs; ud shares the
        // union with rdma and is read as plain bytes.
        let a = unsafe { (*p).wr.ud.ah };
        if !a.is_null() {
            if let Some(Obj::Ah(h)) = shim.get(a.cast()).map(|e| e.obj) {
                *ah = Some(h);
            }
        }
    }
    let mut wrs = Vec::with_capacity(ptrs.len());
    for (&p, r) in ptrs.iter().zip(ranges.iter()) {
        // SAFETY: `p` is one of the caller's readable WRs.
        wrs.push(unsafe { send_wr(&*p, &sg[r.clone()]) });
    }
    for ((w, &p), ah) in wrs.iter_mut().zip(ptrs.iter()).zip(ahs.iter()) {
        if qp_type == QpType::Ud {
            // SAFETY: `p` is readable; the ud member for a UD QP.
            let ud = unsafe { (*p).wr.ud };
            match ah {
                Some(a) => {
                    w.ud = Some(UdInfo {
                        ah: a,
                        remote_qpn: ud.remote_qpn,
                        remote_qkey: ud.remote_qkey,
                    })
                }
                None => {
                    set_bad(p);
                    crate::guard::log_err(
                        v,
                        libc::EINVAL,
                        &"the UD work request's AH is not a live AH of this library",
                    );
                    return libc::EINVAL;
                }
            }
        }
    }
    // IBV_WR_BIND_MW requests carry their window in wr.bind_mw.
    let mut bind_objs = Vec::new();
    for (i, &p) in ptrs.iter().enumerate() {
        // SAFETY: `p` is one of the caller's readable WRs.
        let w = unsafe { &*p };
        if w.opcode != c::IBV_WR_BIND_MW {
            continue;
        }
        // SAFETY: the bind_mw member, as the opcode selects.
        let b = unsafe { w.__bindgen_anon_2.bind_mw };
        let mw = match shim.get(b.mw.cast()).map(|e| e.obj) {
            Some(Obj::Mw(m)) => m,
            _ => {
                set_bad(p);
                return Fail::bad_ptr(v, "MW", b.mw.cast()).errno;
            }
        };
        let mr = match shim.get(b.bind_info.mr.cast()).map(|e| e.obj) {
            Some(Obj::Mr(m)) => Some(m),
            _ if b.bind_info.mr.is_null() => None,
            _ => {
                set_bad(p);
                return Fail::bad_ptr(v, "MR", b.bind_info.mr.cast()).errno;
            }
        };
        bind_objs.push((i, mw, b.rkey, mr, b.bind_info));
    }
    let binds: Vec<_> = bind_objs
        .iter()
        .map(|(i, mw, rkey, mr, info)| {
            let bi = MwBindInfo::<SimVerbs> {
                mr: mr.as_ref(),
                addr: info.addr,
                length: info.length,
                mw_access_flags: AccessFlags(info.mw_access_flags),
            };
            (*i, *mw, *rkey, bi)
        })
        .collect();
    let r = if binds.is_empty() {
        // SAFETY: the verbs contract the caller accepted by posting: the
        // memory the SGEs name stays registered and untouched until completion.
        unsafe { shim.sim.post_send(&h, &wrs) }
    } else {
        shim.sim.post_send_with_binds(&h, &wrs, &binds)
    };
    drop(wrs);
    let rc = match r {
        Ok(()) => 0,
        Err(e) => {
            let i = e.bad_wr().unwrap_or(0);
            set_bad(ptrs.get(i).copied().unwrap_or(first));
            Fail::sim(v, &e).errno
        }
    };
    if crate::state::any_channel(shim) {
        crate::events::settle(shim);
    }
    rc
}

fn post_recv_common(
    shim: &mut Shim,
    v: &str,
    target: Result<QpHandle, SrqHandle>,
    first: *mut c::ibv_recv_wr,
    bad_wr: *mut *mut c::ibv_recv_wr,
) -> c_int {
    let set_bad = |p: *mut c::ibv_recv_wr| {
        if !bad_wr.is_null() {
            // SAFETY: non-NULL out-pointer of the caller.
            unsafe { *bad_wr = p };
        }
    };
    let mut ptrs = Vec::new();
    let mut sg = Vec::new();
    let mut ranges = Vec::new();
    let mut p = first;
    while !p.is_null() {
        // SAFETY: the caller's chain of readable ibv_recv_wr.
        let w = unsafe { &*p };
        let start = sg.len();
        // SAFETY: the WR names num_sge readable entries.
        unsafe { sges(&mut sg, w.sg_list, w.num_sge) };
        ranges.push(start..sg.len());
        ptrs.push(p);
        p = w.next;
    }
    let wrs: Vec<RecvWr<'_>> = ptrs
        .iter()
        .zip(ranges.iter())
        .map(|(&p, r)| RecvWr {
            // SAFETY: a readable WR of the caller.
            wr_id: unsafe { (*p).wr_id },
            sg_list: &sg[r.clone()],
        })
        .collect();
    // SAFETY: the verbs contract, as for post_send.
    let r = unsafe {
        match target {
            Ok(q) => shim.sim.post_recv(&q, &wrs),
            Err(s) => shim.sim.post_srq_recv(&s, &wrs),
        }
    };
    let rc = match r {
        Ok(()) => 0,
        Err(e) => {
            let i = e.bad_wr().unwrap_or(0);
            set_bad(ptrs.get(i).copied().unwrap_or(first));
            Fail::sim(v, &e).errno
        }
    };
    if crate::state::any_channel(shim) {
        crate::events::settle(shim);
    }
    rc
}

/// `ibv_post_recv` (the `post_recv` op).
pub(crate) unsafe extern "C" fn op_post_recv(
    qp: *mut c::ibv_qp,
    wr: *mut c::ibv_recv_wr,
    bad_wr: *mut *mut c::ibv_recv_wr,
) -> c_int {
    crate::guard::catch("ibv_post_recv", || {
        with(|shim| {
            let v = "ibv_post_recv";
            match handle_of!(shim, v, qp, Qp, "QP") {
                Ok(h) => post_recv_common(shim, v, Ok(h), wr, bad_wr),
                Err(f) => {
                    if !bad_wr.is_null() {
                        // SAFETY: non-NULL out-pointer.
                        unsafe { *bad_wr = wr };
                    }
                    f.errno
                }
            }
        })
    })
}

/// `ibv_post_srq_recv` (the `post_srq_recv` op).
pub(crate) unsafe extern "C" fn op_post_srq_recv(
    srq: *mut c::ibv_srq,
    wr: *mut c::ibv_recv_wr,
    bad_wr: *mut *mut c::ibv_recv_wr,
) -> c_int {
    crate::guard::catch("ibv_post_srq_recv", || {
        with(|shim| {
            let v = "ibv_post_srq_recv";
            match handle_of!(shim, v, srq, Srq, "SRQ") {
                Ok(h) => post_recv_common(shim, v, Err(h), wr, bad_wr),
                Err(f) => {
                    if !bad_wr.is_null() {
                        // SAFETY: non-NULL out-pointer.
                        unsafe { *bad_wr = wr };
                    }
                    f.errno
                }
            }
        })
    })
}

/// [`Wc`] → `struct ibv_wc`.
pub(crate) fn c_wc(w: &Wc) -> c::ibv_wc {
    let mut o = c::ibv_wc {
        wr_id: w.wr_id,
        status: w.status.to_raw(),
        opcode: w.opcode.to_raw(),
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.wc_flags.bits(),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
        ..Default::default()
    };
    o.__bindgen_anon_1.imm_data = w.imm_data;
    o
}

/// `ibv_poll_cq` (the `poll_cq` op): completions, or a negative value on error.
pub(crate) unsafe extern "C" fn op_poll_cq(
    cq: *mut c::ibv_cq,
    num_entries: c_int,
    wc: *mut c::ibv_wc,
) -> c_int {
    crate::guard::catch("ibv_poll_cq", || {
        with(|shim| {
            let v = "ibv_poll_cq";
            let h = match handle_of!(shim, v, cq, Cq, "CQ") {
                Ok(h) => h,
                Err(f) => return -f.errno,
            };
            if num_entries < 0 || (wc.is_null() && num_entries > 0) {
                return -Fail::new(v, libc::EINVAL, "num_entries is negative or wc is NULL").errno;
            }
            let n = num_entries as usize;
            let mut buf = std::mem::take(&mut shim.wc_scratch);
            buf.clear();
            buf.resize(n, Wc::default());
            let r = shim.sim.poll_cq(&h, &mut buf).at(v);
            let out = match r {
                Ok(k) => {
                    for (i, w) in buf[..k].iter().enumerate() {
                        // SAFETY: the caller passes room for num_entries ibv_wc; i < k <= n.
                        unsafe { wc.add(i).write(c_wc(w)) };
                    }
                    k as c_int
                }
                Err(f) => -f.errno,
            };
            shim.wc_scratch = buf;
            if crate::state::any_channel(shim) {
                crate::channel::sync(shim);
            }
            out
        })
    })
}

/// `ibv_req_notify_cq` (the `req_notify_cq` op).
pub(crate) unsafe extern "C" fn op_req_notify_cq(
    cq: *mut c::ibv_cq,
    solicited_only: c_int,
) -> c_int {
    crate::guard::catch("ibv_req_notify_cq", || {
        with(|shim| {
            let v = "ibv_req_notify_cq";
            let r = handle_of!(shim, v, cq, Cq, "CQ")
                .and_then(|h| shim.sim.req_notify_cq(&h, solicited_only != 0).at(v));
            match r {
                Ok(()) => {
                    crate::events::settle(shim);
                    0
                }
                Err(f) => f.errno,
            }
        })
    })
}
