//! The data path the inline wrappers reach through `ibv_context.ops`:
//! `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq`,
//! `ibv_req_notify_cq`.

use core::ffi::c_int;

use backend_sim::*;
use verbs_api::*;

use backend_sim::datapath::post::inline_carries_payload;

use crate::provider::records::PostScratch;
use crate::provider::state::{c, handle_of, with, Fail, Obj, Shim, SimRes};

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

/// `IBV_SEND_INLINE`: the CPU copies the data at post time, from any
/// memory of the program, and the lkey plays no part. Each inline request
/// of the chain (of an opcode that carries a payload, within the QP's
/// `max_inline_data`) has its bytes copied into the QP's bounce MR and its
/// SGEs pointed there, so the simulator (here or over the shared fabric)
/// reads registered memory; a longer one is left as it is, for the
/// simulator to refuse with the errno of the profile.
fn copy_inline(
    shim: &mut Shim,
    v: &str,
    qp: *mut c::ibv_qp,
    raw: &[usize],
    sg: &mut [Sge],
    ranges: &[core::ops::Range<usize>],
    lens: &mut Vec<usize>,
) -> Result<(), c_int> {
    // SAFETY: a live QP of ours (looked up by the caller): a QpAlloc.
    let max = unsafe { (*qp.cast::<crate::provider::qpex::QpAlloc>()).max_inline_data } as usize;
    let mut need = 0usize;
    for (i, &p) in raw.iter().enumerate() {
        // SAFETY: one of the caller's readable WRs.
        let w = unsafe { &*(p as *const c::ibv_send_wr) };
        let mut len: usize = 0;
        if w.send_flags & c::IBV_SEND_INLINE != 0
            && inline_carries_payload(WrOpcode::from_raw(w.opcode))
        {
            len = sg[ranges[i].clone()]
                .iter()
                .map(|s| s.length as usize)
                .sum();
            if len > max {
                len = 0;
            }
        }
        lens.push(len);
        need += len;
    }
    if need == 0 {
        return Ok(());
    }
    let (base, lkey) = crate::provider::qpex::bounce(shim, v, qp, need)?;
    let mut at = 0usize;
    for i in 0..raw.len() {
        if lens[i] == 0 {
            continue;
        }
        let b = shim
            .bounces
            .get_mut(&(qp as usize))
            .expect("bounce() made it");
        for s in &mut sg[ranges[i].clone()] {
            let n = s.length as usize;
            if n > 0 {
                // SAFETY: the program posts inline data from memory it can
                // read, `length` bytes at `addr` (the verbs' contract for
                // IBV_SEND_INLINE, which libibverbs' providers memcpy
                // from); the bounce buffer holds `need` bytes and
                // `at + n <= need`.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        s.addr as usize as *const u8,
                        b.buf.as_mut_ptr().add(at),
                        n,
                    )
                };
            }
            *s = Sge {
                addr: base + at as u64,
                length: s.length,
                lkey,
            };
            at += n;
        }
    }
    Ok(())
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
    // Gather the chain: pointers and SGE ranges, into buffers kept from
    // the last call (no allocation per post once they have grown).
    let mut scratch = std::mem::take(&mut shim.post_scratch);
    scratch.clear();
    let rc = post_send_gathered(shim, &mut scratch, v, (qp, h), qp_type, first, &set_bad);
    shim.post_scratch = scratch;
    if crate::provider::state::any_channel(shim) {
        crate::provider::events::settle(shim);
    }
    rc
}

/// [`post_send`] with its scratch buffers.
fn post_send_gathered(
    shim: &mut Shim,
    scratch: &mut PostScratch,
    v: &str,
    (qp, h): (*mut c::ibv_qp, QpHandle),
    qp_type: QpType,
    first: *mut c::ibv_send_wr,
    set_bad: &dyn Fn(*mut c::ibv_send_wr),
) -> c_int {
    let PostScratch {
        ptrs: raw,
        sg,
        ranges,
        inline,
    } = scratch;
    let mut p = first;
    while !p.is_null() {
        // SAFETY: the caller's chain of readable ibv_send_wr.
        let w = unsafe { &*p };
        let start = sg.len();
        // SAFETY: the WR names num_sge readable entries.
        unsafe { sges(sg, w.sg_list, w.num_sge) };
        ranges.push(start..sg.len());
        raw.push(p as usize);
        p = w.next;
    }
    let ptrs = |i: usize| raw[i] as *mut c::ibv_send_wr;
    if let Err(errno) = copy_inline(shim, v, qp, raw, sg, ranges, inline) {
        set_bad(first);
        return errno;
    }
    // A UD request's AH, looked up once (other QPs' requests have none:
    // `wr.ud.ah` shares its bytes with `wr.rdma`).
    let mut ahs: Vec<AhHandle> = Vec::new();
    if qp_type == QpType::Ud {
        ahs.reserve(raw.len());
        for i in 0..raw.len() {
            let p = ptrs(i);
            // SAFETY: `p` is readable; the ud member for a UD QP.
            let a = unsafe { (*p).wr.ud.ah };
            match shim.get(a.cast()).map(|e| e.obj) {
                Some(Obj::Ah(h)) if !a.is_null() => ahs.push(h),
                _ => {
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
    let mut wrs = Vec::with_capacity(raw.len());
    for (i, r) in ranges.iter().enumerate() {
        let p = ptrs(i);
        // SAFETY: `p` is one of the caller's readable WRs.
        let mut w = unsafe { send_wr(&*p, &sg[r.clone()]) };
        if let Some(ah) = ahs.get(i) {
            // SAFETY: `p` is readable; the ud member for a UD QP.
            let ud = unsafe { (*p).wr.ud };
            w.ud = Some(UdInfo {
                ah,
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
            });
        }
        wrs.push(w);
    }
    // IBV_WR_BIND_MW requests carry their window in wr.bind_mw.
    let mut bind_objs = Vec::new();
    for i in 0..raw.len() {
        let p = ptrs(i);
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
    match r {
        Ok(()) => 0,
        Err(e) => {
            let i = e.bad_wr().unwrap_or(0);
            set_bad(if i < raw.len() { ptrs(i) } else { first });
            Fail::sim(v, &e).errno
        }
    }
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
    let mut scratch = std::mem::take(&mut shim.post_scratch);
    scratch.clear();
    let PostScratch {
        ptrs: raw,
        sg,
        ranges,
        ..
    } = &mut scratch;
    let mut p = first;
    while !p.is_null() {
        // SAFETY: the caller's chain of readable ibv_recv_wr.
        let w = unsafe { &*p };
        let start = sg.len();
        // SAFETY: the WR names num_sge readable entries.
        unsafe { sges(sg, w.sg_list, w.num_sge) };
        ranges.push(start..sg.len());
        raw.push(p as usize);
        p = w.next;
    }
    let ptrs = |i: usize| raw[i] as *mut c::ibv_recv_wr;
    let wrs: Vec<RecvWr<'_>> = ranges
        .iter()
        .enumerate()
        .map(|(i, r)| RecvWr {
            // SAFETY: a readable WR of the caller.
            wr_id: unsafe { (*ptrs(i)).wr_id },
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
            set_bad(if i < raw.len() { ptrs(i) } else { first });
            Fail::sim(v, &e).errno
        }
    };
    drop(wrs);
    shim.post_scratch = scratch;
    if crate::provider::state::any_channel(shim) {
        crate::provider::events::settle(shim);
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
                        if w.status != WcStatus::Success && crate::guard::logging() {
                            let cause = shim.sim.completion_cause(&h, w);
                            crate::guard::log_wc_error(v, w, cause);
                        }
                    }
                    k as c_int
                }
                Err(f) => -f.errno,
            };
            shim.wc_scratch = buf;
            if crate::provider::state::any_channel(shim) {
                crate::provider::state::sync(shim);
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
                    crate::provider::events::settle(shim);
                    0
                }
                Err(f) => f.errno,
            }
        })
    })
}
