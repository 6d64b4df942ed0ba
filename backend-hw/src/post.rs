//! The data path's C chains: send work requests (and DC requests through the
//! extended-QP builders) and receive chains.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use rdma_sys as sys;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::convert::*;
use crate::errors::c_error;
use crate::ffi::verbs as fv;
use crate::handles::*;

impl HwVerbs {
    /// One `SendWr` as a C `ibv_send_wr` (unlinked) and its SGE array.
    pub(crate) fn send_wr_to_c(
        &self,
        w: &SendWr<'_, Self>,
    ) -> Result<(sys::ibv_send_wr, Vec<sys::ibv_sge>)> {
        let verb = Verb::PostSend;
        if w.dc.is_some() {
            return Err(Error::invalid(
                verb,
                "DC addressing (dc: Some) on a QP that is not a DCI",
            ));
        }
        if w.opcode == WrOpcode::BindMw {
            // C would hand the provider a NULL `wr.bind_mw.mw`.
            return Err(Error::invalid(
                verb,
                "BIND_MW needs wr.bind_mw, which SendWr does not carry: use bind_mw (type 1) or post_wr with WrOp::BindMw (type 2)",
            ));
        }
        if w.opcode == WrOpcode::Flush {
            // `struct ibv_send_wr` has no place for the flush type and level:
            // libibverbs only issues FLUSH through ibv_wr_flush.
            return Err(Error::from_errno(
                verb,
                errno::EOPNOTSUPP,
                "IBV_WR_FLUSH cannot be expressed in ibv_send_wr (libibverbs offers it only through ibv_wr_flush)",
            ));
        }
        let mut c: sys::ibv_send_wr = zeroed();
        c.wr_id = w.wr_id;
        c.opcode = w.opcode.to_raw();
        c.send_flags = w.send_flags.bits();
        c.imm_data_invalidated_rkey_union.imm_data = if w.opcode == WrOpcode::SendWithInv {
            w.imm_data
        } else {
            w.imm_data.to_be()
        };
        match w.opcode {
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                c.wr.atomic = sys::atomic_t {
                    remote_addr: w.atomic.remote_addr,
                    compare_add: w.atomic.compare_add,
                    swap: w.atomic.swap,
                    rkey: w.atomic.rkey,
                };
            }
            _ => {
                c.wr.rdma = sys::rdma_t {
                    remote_addr: w.rdma.remote_addr,
                    rkey: w.rdma.rkey,
                }
            }
        }
        if let Some(ud) = &w.ud {
            self.check_owner(&ud.ah.0.obj.ctx, verb, "AH")?;
            let ah = ud.ah.0.obj.get(verb)?;
            c.wr.ud = sys::ud_t {
                ah,
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
            };
        }
        c.qp_type.xrc = sys::xrc_t {
            remote_srqn: w.remote_srqn,
        };
        c.num_sge =
            c_int::try_from(w.sg_list.len()).map_err(|_| Error::invalid(verb, "too many SGEs"))?;
        Ok((c, sges_to_c(w.sg_list)))
    }

    /// Posts on a DCI through the `ibv_wr_*` API (see `crate::dc` for how
    /// `bad_wr` maps onto it).
    ///
    /// # Safety
    ///
    /// `p` is the live DCI of `qp`; the SGE memory follows `post_send`'s
    /// contract.
    #[cfg(feature = "mlx5")]
    pub(crate) unsafe fn post_send_dci(
        &self,
        p: *mut sys::ibv_qp,
        wrs: &[SendWr<'_, Self>],
    ) -> Result<()> {
        use crate::dc;
        use crate::ffi::mlx5dv as dv;
        use verbs_api::errno::EOPNOTSUPP;
        let verb = Verb::PostSend;
        // SAFETY: live QP; returns NULL unless it was created extended.
        let qpx = unsafe { sys::ibv_qp_to_qp_ex(p) };
        if qpx.is_null() {
            return Err(Error::from_errno(
                verb,
                EOPNOTSUPP,
                "the DCI was created without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, so it has no ibv_wr_* API",
            )
            .with_bad_wr(0));
        }
        // SAFETY: `qpx` is the live extended QP of an mlx5 QP (a DCI is
        // only made by mlx5dv_create_qp).
        let mqpx = unsafe { dv::mlx5dv_qp_ex_from_ibv_qp_ex(qpx) };
        if mqpx.is_null() {
            return Err(Error::from_errno(
                verb,
                EOPNOTSUPP,
                "mlx5dv_qp_ex_from_ibv_qp_ex returned NULL",
            )
            .with_bad_wr(0));
        }
        let mut batch = Vec::with_capacity(wrs.len());
        let mut failure = None;
        for (i, w) in wrs.iter().enumerate() {
            // SAFETY: live tables of this live DCI.
            match unsafe { self.dc_wr_to_c(w, qpx, mqpx) } {
                Ok(d) => batch.push(d),
                Err(e) => {
                    failure = Some(e.with_bad_wr(i));
                    break;
                }
            }
        }
        // SAFETY: (1) live tables, `&mut self` excludes other posters;
        // (2) every request passed `unbuildable`; (3) AHs checked live and
        // ours; (4) our caller's contract.
        let rc = unsafe { dc::post_batch(qpx, mqpx, &batch) };
        if rc != 0 {
            let name = errno::name(rc).unwrap_or("E?");
            return Err(Error::from_errno(
                verb,
                rc,
                format!(
                    "ibv_wr_complete failed: {name}: the provider refused the batch, so none of its {} \
                     work request(s) was posted (the ibv_wr API fails whole batches)",
                    batch.len()
                ),
            )
            .with_bad_wr(0));
        }
        failure.map_or(Ok(()), Err)
    }

    /// One DC request, checked against the DCI's builders.
    ///
    /// # Safety
    ///
    /// `qpx`/`mqpx` are the live extended tables of a live DCI.
    #[cfg(feature = "mlx5")]
    pub(crate) unsafe fn dc_wr_to_c(
        &self,
        w: &SendWr<'_, Self>,
        qpx: *mut sys::ibv_qp_ex,
        mqpx: *mut crate::ffi::mlx5dv::mlx5dv_qp_ex,
    ) -> Result<crate::dc::DcWr> {
        use crate::ffi::verbs::WrBuilder as B;
        use verbs_api::errno::EOPNOTSUPP;
        let verb = Verb::PostSend;
        let Some(dc) = &w.dc else {
            return Err(Error::invalid(
                verb,
                "a work request on a DCI needs DC addressing (dc: Some(DcInfo))",
            ));
        };
        self.check_owner(&dc.ah.0.obj.ctx, verb, "AH")?;
        let ah = dc.ah.0.obj.get(verb)?;
        let (r, a) = (&w.rdma, &w.atomic);
        let op = match w.opcode {
            WrOpcode::RdmaWrite => B::RdmaWrite {
                rkey: r.rkey,
                addr: r.remote_addr,
            },
            WrOpcode::RdmaWriteWithImm => B::RdmaWriteImm {
                rkey: r.rkey,
                addr: r.remote_addr,
                imm_be: w.imm_data.to_be(),
            },
            WrOpcode::Send => B::Send,
            WrOpcode::SendWithImm => B::SendImm {
                imm_be: w.imm_data.to_be(),
            },
            WrOpcode::RdmaRead => B::RdmaRead {
                rkey: r.rkey,
                addr: r.remote_addr,
            },
            WrOpcode::AtomicCmpAndSwp => B::CmpSwp {
                rkey: a.rkey,
                addr: a.remote_addr,
                compare: a.compare_add,
                swap: a.swap,
            },
            WrOpcode::AtomicFetchAndAdd => B::FetchAdd {
                rkey: a.rkey,
                addr: a.remote_addr,
                add: a.compare_add,
            },
            other => {
                return Err(Error::from_errno(
                    verb,
                    EOPNOTSUPP,
                    format!(
                        "opcode {other} is not supported on a DCI by the backend's ibv_wr path"
                    ),
                ))
            }
        };
        let d = crate::dc::DcWr {
            wr_id: w.wr_id,
            wr_flags: (w.send_flags - SendFlags::INLINE).bits(),
            op,
            ah,
            remote_dctn: dc.remote_dctn,
            remote_dc_key: dc.remote_dc_key,
            stream_id: dc.stream_id,
            sges: sges_to_c(w.sg_list),
            inline: w.send_flags.contains(SendFlags::INLINE),
        };
        // SAFETY: live tables (caller).
        if let Some(why) = unsafe { crate::dc::unbuildable(qpx, mqpx, &d) } {
            return Err(Error::from_errno(verb, EOPNOTSUPP, why));
        }
        Ok(d)
    }
}

/// Builds a NULL-terminated `ibv_recv_wr` chain for `wrs` and posts it with
/// `post`, mapping `bad_wr` back to an index.
pub(crate) fn post_recv_chain(
    verb: Verb,
    wrs: &[RecvWr<'_>],
    post: impl FnOnce(*mut sys::ibv_recv_wr, *mut *mut sys::ibv_recv_wr) -> c_int,
) -> Result<()> {
    if wrs.is_empty() {
        return Ok(());
    }
    let mut sges: Vec<Vec<sys::ibv_sge>> = wrs
        .iter()
        .map(|w| {
            w.sg_list
                .iter()
                .map(|s| sys::ibv_sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                })
                .collect()
        })
        .collect();
    let mut cw: Vec<sys::ibv_recv_wr> = Vec::with_capacity(wrs.len());
    for (i, w) in wrs.iter().enumerate() {
        let num_sge = c_int::try_from(w.sg_list.len())
            .map_err(|_| Error::invalid(verb, "too many SGEs").with_bad_wr(i))?;
        cw.push(sys::ibv_recv_wr {
            wr_id: w.wr_id,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge,
        });
    }
    let base = cw.as_mut_ptr();
    for (i, (c, s)) in cw.iter_mut().zip(sges.iter_mut()).enumerate() {
        c.sg_list = if s.is_empty() {
            ptr::null_mut()
        } else {
            s.as_mut_ptr()
        };
        c.next = if i + 1 < wrs.len() {
            // SAFETY: `i + 1 < len`, so the pointer is inside `cw`.
            unsafe { base.add(i + 1) }
        } else {
            ptr::null_mut()
        };
    }
    let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
    let rc = post(base, &mut bad);
    if rc == 0 {
        return Ok(());
    }
    let idx = if bad.is_null() {
        0
    } else {
        (bad as usize - base as usize) / size_of::<sys::ibv_recv_wr>()
    };
    Err(c_error(verb, rc, verb.c_name()).with_bad_wr(idx))
}

impl HwVerbs {
    /// The body of `Verbs::post_send`.
    ///
    /// # Safety
    ///
    /// The contract of `Verbs::post_send`.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn post_send_impl(
        &mut self,
        qp: &HwQp,
        wrs: &[SendWr<'_, Self>],
    ) -> Result<()> {
        let verb = Verb::PostSend;
        let p = self.qp_ptr(qp, verb)?;
        if wrs.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "mlx5")]
        if qp.0.dc_type == Some(DcType::Dci) {
            // SAFETY: `p` is this live DCI; the memory contract is ours,
            // passed on unchanged.
            return unsafe { self.post_send_dci(p, wrs) };
        }
        // Convert up to the first request that fails a check; the ones
        // before it are posted (C's `bad_wr` contract), then its error is
        // reported.
        let mut sges: Vec<Vec<sys::ibv_sge>> = Vec::with_capacity(wrs.len());
        let mut cw: Vec<sys::ibv_send_wr> = Vec::with_capacity(wrs.len());
        let mut failure = None;
        for (i, w) in wrs.iter().enumerate() {
            match self.send_wr_to_c(w) {
                Ok((c, s)) => {
                    cw.push(c);
                    sges.push(s);
                }
                Err(e) => {
                    failure = Some(e.with_bad_wr(i));
                    break;
                }
            }
        }
        if cw.is_empty() {
            return failure.map_or(Ok(()), Err);
        }
        // Link the chain now that neither vector moves any more.
        let n = cw.len();
        let base = cw.as_mut_ptr();
        for (i, (c, s)) in cw.iter_mut().zip(sges.iter_mut()).enumerate() {
            c.sg_list = if s.is_empty() {
                ptr::null_mut()
            } else {
                s.as_mut_ptr()
            };
            c.next = if i + 1 < n {
                // SAFETY: `i + 1 < n`, so the pointer stays inside `cw`.
                unsafe { base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: (1) live QP of a live context (the inner keeps them);
        // (2) `cw` is a NULL-terminated chain whose `sg_list`s point into
        // `sges`, both alive across the call; (3) `bad` is writable;
        // (4) the memory named by the SGEs is this method's own `# Safety`
        // contract, passed on to our caller.
        let rc = unsafe { fv::ibv_post_send(p, base, &mut bad) };
        if rc != 0 {
            let idx = if bad.is_null() {
                0
            } else {
                (bad as usize - base as usize) / size_of::<sys::ibv_send_wr>()
            };
            return Err(c_error(verb, rc, "ibv_post_send").with_bad_wr(idx));
        }
        failure.map_or(Ok(()), Err)
    }

    /// The body of `Verbs::poll_cq`.
    pub(crate) fn poll_cq_impl(&mut self, cq: &HwCq, wc: &mut [Wc]) -> Result<usize> {
        self.check_owner(&cq.0.obj.ctx, Verb::PollCq, "CQ")?;
        let p = cq.0.obj.get(Verb::PollCq)?;
        let n = c_int::try_from(wc.len()).unwrap_or(c_int::MAX);
        let mut raw: Vec<sys::ibv_wc> = (0..n).map(|_| zeroed()).collect();
        // SAFETY: live CQ; `raw` has room for `n` completions; `&mut self`
        // serialises polling through this backend.
        let got = unsafe { fv::ibv_poll_cq(p, n, raw.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::from_errno(
                Verb::PollCq,
                -got,
                "ibv_poll_cq failed (CQ in error: overrun?)",
            ));
        }
        for (dst, src) in wc.iter_mut().zip(&raw[..got as usize]) {
            let opcode = WcOpcode::from_raw(src.opcode);
            // SAFETY: both union members are a plain u32.
            let imm = unsafe { src.imm_data_invalidated_rkey_union.imm_data };
            let flags = WcFlags(src.wc_flags);
            *dst = Wc {
                wr_id: src.wr_id,
                status: WcStatus::from_raw(src.status),
                opcode,
                vendor_err: src.vendor_err,
                byte_len: src.byte_len,
                imm_data: if flags.contains(WcFlags::WITH_INV) {
                    imm
                } else {
                    u32::from_be(imm)
                },
                qp_num: src.qp_num,
                src_qp: src.src_qp,
                wc_flags: flags,
                pkey_index: src.pkey_index,
                slid: src.slid,
                sl: src.sl,
                dlid_path_bits: src.dlid_path_bits,
            };
        }
        Ok(got as usize)
    }
}
