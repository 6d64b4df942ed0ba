//! The `ibv_wr_*` post API: the builder callbacks of `struct ibv_qp_ex`
//! (`ibv_wr_start`, `ibv_wr_send`, `ibv_wr_rdma_write`, `ibv_wr_set_sge`,
//! …, `ibv_wr_complete`, `ibv_wr_abort`), and the inline bounce buffer.
//!
//! A batch is built in the QP's allocation ([`QpAlloc`]) and posted as one
//! `ibv_post_send` at `ibv_wr_complete`, which returns its errno (nothing of
//! a failed batch is posted, as on mlx5). Inline data is copied when it is
//! set, into a per-QP bounce MR the shim registers over its own memory, so
//! the application may reuse its buffer at once, as the verbs promise.

use core::ffi::{c_int, c_void};

use backend_sim::*;
use verbs_api::*;

use crate::provider::records::Bounce;
use crate::provider::state::{c, with, Fail, Obj, Shim, SimRes};

/// One allocation per QP: `struct ibv_qp_ex` (which starts with `struct
/// ibv_qp`) and the `struct mlx5dv_qp_ex` `mlx5dv_qp_ex_from_ibv_qp_ex`
/// returns.
#[repr(C)]
#[derive(Default)]
pub(crate) struct QpAlloc {
    pub(crate) ex: c::ibv_qp_ex,
    pub(crate) dv: c::mlx5dv_qp_ex,
    /// Whether `ibv_qp_to_qp_ex` may return `ex` (created through
    /// `create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`).
    pub(crate) has_ex: bool,
    /// The `ibv_wr_*` batch being built.
    pub(crate) batch: Batch,
    /// The QP's `cap.max_inline_data`: `ibv_post_send` copies inline data
    /// up to it at post time.
    pub(crate) max_inline_data: u32,
}
/// One work request being built.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pending {
    wr_id: u64,
    flags: u32,
    opcode: WrOpcode,
    imm: u32,
    rdma: RdmaInfo,
    atomic: AtomicInfo,
    sges: Vec<Sge>,
    inline: Vec<u8>,
    ud: Option<(usize, u32, u32)>,
    srqn: u32,
    /// `ibv_wr_set_xrc_srqn` was called.
    has_srqn: bool,
    /// `ibv_wr_bind_mw`: the MW, the new rkey, the MR, addr, length, access.
    bind: Option<(usize, u32, usize, u64, u64, u32)>,
    /// `mlx5dv_wr_set_dc_addr(_stream)`: AH, DCT number, DC key, stream id.
    pub(crate) dc: Option<(usize, u32, u64, u16)>,
    /// Decoded from a raw mlx5 WQE (`mlx5dv_wr_raw_wqe`).
    pub(crate) raw: bool,
}

/// The batch of a QP between `wr_start` and `wr_complete`/`wr_abort`.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    wrs: Vec<Pending>,
    /// The first error met while building (reported by `wr_complete`).
    error: c_int,
    open: bool,
}

/// Fills the `wr_*` table of a new QP.
pub(crate) fn fill(q: &mut QpAlloc) {
    let e = &mut q.ex;
    e.wr_start = Some(wr_start);
    e.wr_complete = Some(wr_complete);
    e.wr_abort = Some(wr_abort);
    e.wr_send = Some(wr_send);
    e.wr_send_imm = Some(wr_send_imm);
    e.wr_send_inv = Some(wr_send_inv);
    e.wr_rdma_write = Some(wr_rdma_write);
    e.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    e.wr_rdma_read = Some(wr_rdma_read);
    e.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    e.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    e.wr_local_inv = Some(wr_local_inv);
    e.wr_bind_mw = Some(wr_bind_mw);
    e.wr_send_tso = Some(wr_send_tso);
    e.wr_set_sge = Some(wr_set_sge);
    e.wr_set_sge_list = Some(wr_set_sge_list);
    e.wr_set_inline_data = Some(wr_set_inline_data);
    e.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    e.wr_set_ud_addr = Some(wr_set_ud_addr);
    e.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    e.wr_atomic_write = Some(wr_atomic_write);
}

/// The allocation behind a `struct ibv_qp_ex` reached through its own table.
///
/// # Safety
/// `qp` is a live QP of ours (the inline wrappers only reach these
/// callbacks through pointers the shim put in that QP), used by one thread
/// at a time while building, as the verbs require.
unsafe fn alloc<'a>(qp: *mut c::ibv_qp_ex) -> &'a mut QpAlloc {
    // SAFETY: the caller's contract; `ex` is QpAlloc's first field.
    unsafe { &mut *qp.cast::<QpAlloc>() }
}

unsafe extern "C" fn wr_start(qp: *mut c::ibv_qp_ex) {
    // SAFETY: see `alloc`.
    let q = unsafe { alloc(qp) };
    q.batch = Batch {
        open: true,
        ..Batch::default()
    };
}

unsafe extern "C" fn wr_abort(qp: *mut c::ibv_qp_ex) {
    // SAFETY: see `alloc`.
    let q = unsafe { alloc(qp) };
    q.batch = Batch::default();
}

fn begin(qp: *mut c::ibv_qp_ex, opcode: WrOpcode) -> Option<&'static mut Pending> {
    // SAFETY: see `alloc`.
    let q = unsafe { alloc(qp) };
    if !q.batch.open {
        return None;
    }
    let p = Pending {
        wr_id: q.ex.wr_id,
        flags: q.ex.wr_flags,
        opcode,
        ..Pending::default()
    };
    q.batch.wrs.push(p);
    q.batch.wrs.last_mut()
}

pub(crate) fn last(qp: *mut c::ibv_qp_ex) -> Option<&'static mut Pending> {
    // SAFETY: see `alloc`.
    let q = unsafe { alloc(qp) };
    if q.batch.wrs.is_empty() && q.batch.open && q.batch.error == 0 {
        q.batch.error = libc::EINVAL;
    }
    q.batch.wrs.last_mut()
}

pub(crate) fn fail(qp: *mut c::ibv_qp_ex, errno: c_int) {
    // SAFETY: see `alloc`.
    let q = unsafe { alloc(qp) };
    if q.batch.error == 0 {
        q.batch.error = errno;
    }
}

unsafe extern "C" fn wr_send(qp: *mut c::ibv_qp_ex) {
    begin(qp, WrOpcode::Send);
}
unsafe extern "C" fn wr_send_imm(qp: *mut c::ibv_qp_ex, imm: u32) {
    if let Some(p) = begin(qp, WrOpcode::SendWithImm) {
        p.imm = imm;
    }
}
unsafe extern "C" fn wr_send_inv(qp: *mut c::ibv_qp_ex, rkey: u32) {
    if let Some(p) = begin(qp, WrOpcode::SendWithInv) {
        p.imm = rkey;
    }
}
unsafe extern "C" fn wr_rdma_write(qp: *mut c::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    if let Some(p) = begin(qp, WrOpcode::RdmaWrite) {
        p.rdma = RdmaInfo { remote_addr, rkey };
    }
}
unsafe extern "C" fn wr_rdma_write_imm(
    qp: *mut c::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm: u32,
) {
    if let Some(p) = begin(qp, WrOpcode::RdmaWriteWithImm) {
        p.rdma = RdmaInfo { remote_addr, rkey };
        p.imm = imm;
    }
}
unsafe extern "C" fn wr_rdma_read(qp: *mut c::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    if let Some(p) = begin(qp, WrOpcode::RdmaRead) {
        p.rdma = RdmaInfo { remote_addr, rkey };
    }
}
unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut c::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    if let Some(p) = begin(qp, WrOpcode::AtomicCmpAndSwp) {
        p.atomic = AtomicInfo {
            remote_addr,
            compare_add: compare,
            swap,
            rkey,
        };
    }
}
unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut c::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    if let Some(p) = begin(qp, WrOpcode::AtomicFetchAndAdd) {
        p.atomic = AtomicInfo {
            remote_addr,
            compare_add: add,
            swap: 0,
            rkey,
        };
    }
}
unsafe extern "C" fn wr_local_inv(qp: *mut c::ibv_qp_ex, rkey: u32) {
    if let Some(p) = begin(qp, WrOpcode::LocalInv) {
        p.imm = rkey;
    }
}
unsafe extern "C" fn wr_bind_mw(
    qp: *mut c::ibv_qp_ex,
    mw: *mut c::ibv_mw,
    rkey: u32,
    info: *const c::ibv_mw_bind_info,
) {
    if info.is_null() {
        fail(qp, libc::EINVAL);
        return;
    }
    // SAFETY: non-NULL; the caller's struct.
    let b = unsafe { &*info };
    if let Some(p) = begin(qp, WrOpcode::BindMw) {
        p.bind = Some((
            mw as usize,
            rkey,
            b.mr as usize,
            b.addr,
            b.length,
            b.mw_access_flags,
        ));
    }
}
unsafe extern "C" fn wr_atomic_write(
    qp: *mut c::ibv_qp_ex,
    _rkey: u32,
    _remote_addr: u64,
    _data: *const c_void,
) {
    // IBV_WR_ATOMIC_WRITE through the wr API is not modelled on these profiles.
    fail(qp, libc::EOPNOTSUPP);
}
unsafe extern "C" fn wr_send_tso(
    qp: *mut c::ibv_qp_ex,
    _hdr: *mut c_void,
    _hdr_sz: u16,
    _mss: u16,
) {
    fail(qp, libc::EOPNOTSUPP);
}
unsafe extern "C" fn wr_set_sge(qp: *mut c::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    if let Some(p) = last(qp) {
        p.sges = vec![Sge { addr, length, lkey }];
    }
}
unsafe extern "C" fn wr_set_sge_list(
    qp: *mut c::ibv_qp_ex,
    num_sge: usize,
    sg_list: *const c::ibv_sge,
) {
    if let Some(p) = last(qp) {
        p.sges = (0..num_sge)
            .map(|i| {
                // SAFETY: the caller passes num_sge readable entries.
                let s = unsafe { &*sg_list.add(i) };
                Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                }
            })
            .collect();
    }
}
unsafe extern "C" fn wr_set_inline_data(qp: *mut c::ibv_qp_ex, addr: *mut c_void, length: usize) {
    if let Some(p) = last(qp) {
        p.inline.clear();
        if length > 0 && !addr.is_null() {
            // SAFETY: the caller passes `length` readable bytes at `addr`.
            p.inline.extend_from_slice(unsafe {
                core::slice::from_raw_parts(addr.cast::<u8>(), length)
            });
        }
        p.flags |= c::IBV_SEND_INLINE;
        p.sges.clear();
    }
}
unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut c::ibv_qp_ex,
    num_buf: usize,
    buf_list: *const c::ibv_data_buf,
) {
    if let Some(p) = last(qp) {
        p.inline.clear();
        for i in 0..num_buf {
            // SAFETY: the caller passes num_buf readable entries, each naming readable bytes.
            unsafe {
                let b = &*buf_list.add(i);
                if b.length > 0 && !b.addr.is_null() {
                    p.inline.extend_from_slice(core::slice::from_raw_parts(
                        b.addr.cast::<u8>(),
                        b.length,
                    ));
                }
            }
        }
        p.flags |= c::IBV_SEND_INLINE;
        p.sges.clear();
    }
}
unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut c::ibv_qp_ex,
    ah: *mut c::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    if let Some(p) = last(qp) {
        p.ud = Some((ah as usize, remote_qpn, remote_qkey));
    }
}
unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut c::ibv_qp_ex, remote_srqn: u32) {
    if let Some(p) = last(qp) {
        p.srqn = remote_srqn;
        p.has_srqn = true;
    }
}

unsafe extern "C" fn wr_complete(qp: *mut c::ibv_qp_ex) -> c_int {
    crate::guard::catch("ibv_wr_complete", || {
        // SAFETY: see `alloc`.
        let q = unsafe { alloc(qp) };
        let batch = core::mem::take(&mut q.batch);
        if !batch.open {
            return libc::EINVAL;
        }
        // SAFETY: see `alloc`; `qp_base.state` is kept current by ibv_modify_qp.
        let state = unsafe { (*qp).qp_base.state };
        if matches!(state, c::IBV_QPS_RESET | c::IBV_QPS_INIT | c::IBV_QPS_RTR) {
            // data-path §1.1: ibv_wr_complete is EINVAL unless the QP reached RTS.
            crate::guard::log_err(
                "ibv_wr_complete",
                libc::EINVAL,
                &"the QP has not reached RTS",
            );
            return libc::EINVAL;
        }
        if batch.error != 0 {
            crate::guard::log_err(
                "ibv_wr_complete",
                batch.error,
                &"an ibv_wr_* call of this batch failed",
            );
            return batch.error;
        }
        with(|shim| post_batch(shim, qp.cast(), batch.wrs))
    })
}

/// Posts a built batch through the simulator: 0 or an errno.
fn post_batch(shim: &mut Shim, qp: *mut c::ibv_qp, mut wrs: Vec<Pending>) -> c_int {
    let v = "ibv_wr_complete";
    let h = match shim.get(qp.cast()).map(|e| e.obj) {
        Some(Obj::Qp(h)) => h,
        _ => return Fail::bad_ptr(v, "QP", qp.cast()).errno,
    };
    // Inline data goes through the QP's bounce MR.
    let need: usize = wrs.iter().map(|w| w.inline.len()).sum();
    if need > 0 {
        match bounce(shim, "ibv_wr_set_inline_data", qp, need) {
            Ok((base, lkey)) => {
                let mut off = 0usize;
                for w in wrs.iter_mut().filter(|w| !w.inline.is_empty()) {
                    let b = shim.bounces.get_mut(&(qp as usize)).expect("just made");
                    b.buf[off..off + w.inline.len()].copy_from_slice(&w.inline);
                    w.sges = vec![Sge {
                        addr: base + off as u64,
                        length: w.inline.len() as u32,
                        lkey,
                    }];
                    off += w.inline.len();
                }
            }
            Err(e) => return e,
        }
    }
    let ahs: Vec<Option<AhHandle>> = wrs
        .iter()
        .map(|w| {
            let a = w.ud.map(|u| u.0).or(w.dc.map(|d| d.0));
            match a.and_then(|a| shim.get(a as *const c_void).map(|e| e.obj)) {
                Some(Obj::Ah(h)) => Some(h),
                _ => None,
            }
        })
        .collect();
    if wrs.iter().all(|w| w.dc.is_none()) {
        return post_wr(shim, h, &wrs, &ahs);
    }
    let mut out = Vec::with_capacity(wrs.len());
    for (w, ah) in wrs.iter().zip(ahs.iter()) {
        let mut s = SendWr::<SimVerbs> {
            wr_id: w.wr_id,
            sg_list: &w.sges,
            opcode: w.opcode,
            send_flags: SendFlags(w.flags),
            imm_data: w.imm,
            rdma: w.rdma,
            atomic: w.atomic,
            remote_srqn: w.srqn,
            ..Default::default()
        };
        if let Some((_, qpn, qkey)) = w.ud {
            match ah {
                Some(a) => {
                    s.ud = Some(UdInfo {
                        ah: a,
                        remote_qpn: qpn,
                        remote_qkey: qkey,
                    })
                }
                None => {
                    return Fail::new(
                        v,
                        libc::EINVAL,
                        "ibv_wr_set_ud_addr named an AH that is not live",
                    )
                    .errno
                }
            }
        }
        if let Some((_, dctn, key, stream)) = w.dc {
            match ah {
                Some(a) => {
                    s.dc = Some(DcInfo {
                        ah: a,
                        remote_dctn: dctn,
                        remote_dc_key: key,
                        stream_id: stream,
                    })
                }
                None => {
                    return Fail::new(
                        v,
                        libc::EINVAL,
                        "mlx5dv_wr_set_dc_addr named an AH that is not live",
                    )
                    .errno
                }
            }
        }
        out.push(s);
    }
    // SAFETY: the verbs contract the caller accepted by posting.
    let r = unsafe { shim.sim.post_send(&h, &out) }.at(v);
    let rc = match r {
        Ok(()) => 0,
        Err(f) => f.errno,
    };
    if crate::provider::state::any_channel(shim) {
        crate::provider::events::settle(shim);
    }
    rc
}

/// The QP's bounce MR of at least `need` bytes: its address and lkey.
pub(crate) fn bounce(
    shim: &mut Shim,
    v: &str,
    qp: *mut c::ibv_qp,
    need: usize,
) -> Result<(u64, u32), c_int> {
    if let Some(b) = shim.bounces.get(&(qp as usize)) {
        if b.buf.len() >= need {
            return Ok((b.buf.as_ptr() as u64, b.lkey));
        }
    }
    drop_bounce(shim, qp);
    // SAFETY: a live QP of ours; its pd field is what the app created it with.
    let pd = unsafe { (*qp).pd };
    let pd = match shim.get(pd.cast()).map(|e| e.obj) {
        Some(Obj::Pd(h) | Obj::ParentDomain(h)) => h,
        _ => return Err(Fail::new(v, libc::EINVAL, "inline data needs the QP's PD").errno),
    };
    let mut buf = vec![0u8; need.max(4096)].into_boxed_slice();
    let addr = buf.as_mut_ptr() as usize;
    let len = buf.len();
    let mr = shim
        .sim
        .reg_mr_app(pd, addr as u64, addr, len, AccessFlags::LOCAL_WRITE, || {
            Box::new(crate::appmem::AppMemory::new(addr, len))
        })
        .map_err(|e| Fail::sim(v, &e).errno)?;
    let lkey = shim
        .sim
        .mr_info(&mr)
        .map_err(|e| Fail::sim(v, &e).errno)?
        .lkey;
    shim.bounces.insert(qp as usize, Bounce { buf, mr, lkey });
    Ok((addr as u64, lkey))
}

/// Deregisters and frees a QP's bounce MR (at destroy, or to grow it).
pub(crate) fn drop_bounce(shim: &mut Shim, qp: *mut c::ibv_qp) {
    if let Some(b) = shim.bounces.remove(&(qp as usize)) {
        let _ = shim.sim.dereg_mr(&b.mr);
        drop(b.buf);
    }
}

/// Posts a batch without DC addressing through the trait's `ibv_wr_*` API
/// (`Verbs::post_wr`): `send_ops_flags` enforced, whole batch or nothing.
fn post_wr(shim: &mut Shim, h: QpHandle, wrs: &[Pending], ahs: &[Option<AhHandle>]) -> c_int {
    let v = "ibv_wr_complete";
    let mut mws = Vec::with_capacity(wrs.len());
    let mut mrs = Vec::with_capacity(wrs.len());
    for w in wrs {
        let (mw, mr) = match w.bind {
            Some((mw, _, mr, ..)) => {
                let mw = match shim.get(mw as *const c_void).map(|e| e.obj) {
                    Some(Obj::Mw(m)) => Some(m),
                    _ => {
                        return Fail::new(
                            v,
                            libc::EINVAL,
                            "ibv_wr_bind_mw named an MW that is not live",
                        )
                        .errno
                    }
                };
                let mr = match shim.get(mr as *const c_void).map(|e| e.obj) {
                    Some(Obj::Mr(m)) => Some(m),
                    _ if mr == 0 => None,
                    _ => {
                        return Fail::new(
                            v,
                            libc::EINVAL,
                            "ibv_wr_bind_mw named an MR that is not live",
                        )
                        .errno
                    }
                };
                (mw, mr)
            }
            None => (None, None),
        };
        mws.push(mw);
        mrs.push(mr);
    }
    let mut batch = Vec::with_capacity(wrs.len());
    for (((w, ah), mw), mr) in wrs.iter().zip(ahs).zip(&mws).zip(&mrs) {
        let op = match w.opcode {
            WrOpcode::Send => WrOp::Send,
            WrOpcode::SendWithImm => WrOp::SendImm { imm_data: w.imm },
            WrOpcode::SendWithInv => WrOp::SendInv {
                invalidate_rkey: w.imm,
            },
            WrOpcode::RdmaWrite => WrOp::RdmaWrite {
                rkey: w.rdma.rkey,
                remote_addr: w.rdma.remote_addr,
            },
            WrOpcode::RdmaWriteWithImm => WrOp::RdmaWriteImm {
                rkey: w.rdma.rkey,
                remote_addr: w.rdma.remote_addr,
                imm_data: w.imm,
            },
            WrOpcode::RdmaRead => WrOp::RdmaRead {
                rkey: w.rdma.rkey,
                remote_addr: w.rdma.remote_addr,
            },
            WrOpcode::AtomicCmpAndSwp => WrOp::AtomicCmpSwp {
                rkey: w.atomic.rkey,
                remote_addr: w.atomic.remote_addr,
                compare: w.atomic.compare_add,
                swap: w.atomic.swap,
            },
            WrOpcode::AtomicFetchAndAdd => WrOp::AtomicFetchAdd {
                rkey: w.atomic.rkey,
                remote_addr: w.atomic.remote_addr,
                add: w.atomic.compare_add,
            },
            WrOpcode::LocalInv => WrOp::LocalInv {
                invalidate_rkey: w.imm,
            },
            WrOpcode::BindMw => {
                let (Some(m), Some((_, rkey, _, addr, length, access))) = (mw.as_ref(), w.bind)
                else {
                    return Fail::new(v, libc::EINVAL, "a BIND_MW without its window").errno;
                };
                WrOp::BindMw {
                    mw: m,
                    rkey,
                    bind_info: MwBindInfo {
                        mr: mr.as_ref(),
                        addr,
                        length,
                        mw_access_flags: AccessFlags(access),
                    },
                }
            }
            other => {
                return Fail::new(
                    v,
                    libc::EOPNOTSUPP,
                    format!("{other:?} through the ibv_wr_* API"),
                )
                .errno
            }
        };
        let inline = w.flags & c::IBV_SEND_INLINE != 0;
        let data = match (inline, w.sges.len()) {
            (_, 0) => WrData::None,
            (true, _) => WrData::InlineList(&w.sges),
            (false, 1) => WrData::Sge(w.sges[0]),
            (false, _) => WrData::SgeList(&w.sges),
        };
        let mut e = WrEx::new(w.wr_id, op);
        e.wr_flags = SendFlags(w.flags & !c::IBV_SEND_INLINE);
        e.data = data;
        e.xrc_srqn = w.has_srqn.then_some(w.srqn);
        e.raw_wqe = w.raw;
        if let Some((_, qpn, qkey)) = w.ud {
            match ah {
                Some(a) => {
                    e.ud = Some(UdInfo {
                        ah: a,
                        remote_qpn: qpn,
                        remote_qkey: qkey,
                    })
                }
                None => {
                    return Fail::new(
                        v,
                        libc::EINVAL,
                        "ibv_wr_set_ud_addr named an AH that is not live",
                    )
                    .errno
                }
            }
        }
        batch.push(e);
    }
    // SAFETY: the verbs contract the caller accepted by posting.
    let rc = match unsafe { shim.sim.post_wr(&h, &batch) }.at(v) {
        Ok(()) => 0,
        Err(f) => f.errno,
    };
    if crate::provider::state::any_channel(shim) {
        crate::provider::events::settle(shim);
    }
    rc
}

/// A raw mlx5 WQE decoded into a request of the batch (`mlx5dv_wr_raw_wqe`
/// in `crate::provider::mlx5`), or the errno the batch then fails with.
pub(crate) fn push_raw(qp: *mut c::ibv_qp_ex, decoded: Result<Pending, c_int>) {
    // SAFETY: see `alloc`.
    let q = unsafe { alloc(qp) };
    if !q.batch.open {
        return;
    }
    match decoded {
        Ok(mut p) => {
            p.wr_id = q.ex.wr_id;
            p.raw = true;
            q.batch.wrs.push(p);
        }
        Err(e) => fail(qp, e),
    }
}

impl Pending {
    /// A request decoded from a raw WQE's segments (its `wr_id` is set by
    /// [`push_raw`]).
    pub(crate) fn raw(
        opcode: WrOpcode,
        flags: u32,
        imm: u32,
        rdma: RdmaInfo,
        atomic: AtomicInfo,
        sges: Vec<Sge>,
    ) -> Self {
        Self {
            opcode,
            flags,
            imm,
            rdma,
            atomic,
            sges,
            ..Self::default()
        }
    }
}

#[cfg(test)]
impl Pending {
    pub(crate) fn opcode_for_test(&self) -> WrOpcode {
        self.opcode
    }
    pub(crate) fn flags_for_test(&self) -> u32 {
        self.flags
    }
    pub(crate) fn sges_for_test(&self) -> &[Sge] {
        &self.sges
    }
    pub(crate) fn rdma_for_test(&self) -> RdmaInfo {
        self.rdma
    }
    pub(crate) fn atomic_for_test(&self) -> AtomicInfo {
        self.atomic
    }
    pub(crate) fn imm_for_test(&self) -> u32 {
        self.imm
    }
}
