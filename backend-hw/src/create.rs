//! Creating CQs, MRs, SRQs and QPs, opening XRC QPs and querying QPs: the
//! longer bodies of those verbs.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::{Cell, RefCell};
use core::ffi::c_int;
use core::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::ENOMEM;
use verbs_api::*;

use crate::errors::c_error;
use crate::ffi::verbs as fv;
use crate::ffi::verbs::last_errno;

use crate::backend::*;
use crate::convert::*;
use crate::handles::*;

impl HwVerbs {
    /// The body of `Verbs::create_cq`.
    pub(crate) fn create_cq_impl(
        &mut self,
        ctx: &HwContext,
        init: &CqInit<'_, Self>,
    ) -> Result<HwCq> {
        let (c, inner) = self.ctx(ctx, Verb::CreateCq)?;
        let cqe = c_int::try_from(init.cqe)
            .map_err(|_| Error::invalid(Verb::CreateCq, "cqe too large"))?;
        let vector = c_int::try_from(init.comp_vector)
            .map_err(|_| Error::invalid(Verb::CreateCq, "comp_vector too large"))?;
        let chan = match init.channel {
            Some(ch) => {
                self.check_owner(&ch.0.obj.ctx, Verb::CreateCq, "completion channel")?;
                ch.0.obj.get(Verb::CreateCq)?
            }
            None => ptr::null_mut(),
        };
        // SAFETY: live context; the channel is live or NULL; `cq_context` is
        // an opaque value C only stores.
        let p =
            unsafe { sys::ibv_create_cq(c, cqe, init.cq_context as usize as *mut _, chan, vector) };
        let p = NonNull::new(p)
            .ok_or_else(|| c_error(Verb::CreateCq, last_errno(), "ibv_create_cq"))?;
        let cq = HwCq(Arc::new(CqInner {
            obj: Owned::new(p, inner),
            _channel: init.channel.cloned(),
            cq_context: init.cq_context,
            ex: None,
        }));
        register_cq(&cq);
        Ok(cq)
    }

    /// The body of `Verbs::reg_mr`.
    pub(crate) fn reg_mr_impl(
        &mut self,
        pd: &HwPd,
        length: usize,
        access: AccessFlags,
    ) -> Result<HwMr> {
        self.check_owner(&pd.0.obj.ctx, Verb::RegMr, "PD")?;
        let p = pd.0.obj.get(Verb::RegMr)?;
        let buf = PageBuf::new(length).ok_or_else(|| {
            Error::from_errno(
                Verb::RegMr,
                ENOMEM,
                format!("cannot allocate {length} bytes"),
            )
        })?;
        let acc = c_int::try_from(access.bits())
            .map_err(|_| Error::invalid(Verb::RegMr, "unknown access bits"))?;
        // SAFETY: live PD; `buf` is a live allocation of at least `length`
        // bytes that the MR inner keeps until after deregistration.
        let mr = unsafe { sys::ibv_reg_mr(p, buf.ptr.as_ptr().cast(), length, acc) };
        // On failure `buf` is freed here: nothing stays allocated.
        let mr =
            NonNull::new(mr).ok_or_else(|| c_error(Verb::RegMr, last_errno(), "ibv_reg_mr"))?;
        Ok(HwMr(Arc::new(MrInner {
            obj: Owned::new(mr, &pd.0.obj.ctx),
            buf,
            pd: RefCell::new(pd.clone()),
            access: Cell::new(access),
            dm: None,
        })))
    }

    /// The body of `Verbs::create_srq`.
    pub(crate) fn create_srq_impl(&mut self, pd: &HwPd, attr: &mut SrqAttr) -> Result<HwSrq> {
        self.check_owner(&pd.0.obj.ctx, Verb::CreateSrq, "PD")?;
        let p = pd.0.obj.get(Verb::CreateSrq)?;
        let mut init: sys::ibv_srq_init_attr = zeroed();
        init.attr = sys::ibv_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        // SAFETY: live PD; `init` is a valid attribute block.
        let s = unsafe { sys::ibv_create_srq(p, &mut init) };
        let s = NonNull::new(s)
            .ok_or_else(|| c_error(Verb::CreateSrq, last_errno(), "ibv_create_srq"))?;
        attr.max_wr = init.attr.max_wr;
        attr.max_sge = init.attr.max_sge;
        let srq = HwSrq(Arc::new(SrqInner {
            obj: Owned::new(s, &pd.0.obj.ctx),
            _pd: Some(pd.clone()),
            _cq: None,
            _xrcd: None,
        }));
        register_srq(&srq);
        Ok(srq)
    }

    /// The body of `Verbs::create_srq_ex`.
    pub(crate) fn create_srq_ex_impl(
        &mut self,
        ctx: &HwContext,
        attr: &mut SrqInitAttrEx<'_, Self>,
    ) -> Result<HwSrq> {
        let verb = Verb::CreateSrqEx;
        let (c, inner) = self.ctx(ctx, verb)?;
        let mut init: sys::ibv_srq_init_attr_ex = zeroed();
        init.srq_context = attr.srq_context as usize as *mut _;
        init.attr = sys::ibv_srq_attr {
            max_wr: attr.attr.max_wr,
            max_sge: attr.attr.max_sge,
            srq_limit: attr.attr.srq_limit,
        };
        init.comp_mask = attr.comp_mask.bits();
        init.srq_type = attr.srq_type.to_raw();
        if let Some(pd) = attr.pd {
            self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
            init.pd = pd.0.obj.get(verb)?;
        }
        if let Some(x) = attr.xrcd {
            self.check_owner(&x.0.obj.ctx, verb, "XRCD")?;
            init.xrcd = x.0.obj.get(verb)?;
        }
        if let Some(cq) = attr.cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            init.cq = cq.0.obj.get(verb)?;
        }
        // SAFETY: live context; every object named is live and of this
        // context (checked above); `init` is valid for reads and writes.
        let s = unsafe { fv::ibv_create_srq_ex(c, &mut init) }
            .map_err(|e| c_error(verb, e, "ibv_create_srq_ex"))?;
        attr.attr.max_wr = init.attr.max_wr;
        attr.attr.max_sge = init.attr.max_sge;
        let srq = HwSrq(Arc::new(SrqInner {
            obj: Owned::new(s, inner),
            _pd: attr.pd.cloned(),
            _cq: attr.cq.cloned(),
            _xrcd: attr.xrcd.cloned(),
        }));
        register_srq(&srq);
        Ok(srq)
    }

    /// The body of `Verbs::create_qp`.
    pub(crate) fn create_qp_impl(
        &mut self,
        pd: &HwPd,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        let verb = Verb::CreateQp;
        self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
        let p = pd.0.obj.get(verb)?;
        let ex = self.qp_init_to_c(verb, attr)?;
        let mut init = sys::ibv_qp_init_attr {
            qp_context: ex.qp_context,
            send_cq: ex.send_cq,
            recv_cq: ex.recv_cq,
            srq: ex.srq,
            cap: ex.cap,
            qp_type: ex.qp_type,
            sq_sig_all: ex.sq_sig_all,
        };
        // SAFETY: live PD; every object in `init` is live and checked.
        let q = unsafe { sys::ibv_create_qp(p, &mut init) };
        let q = NonNull::new(q).ok_or_else(|| c_error(verb, last_errno(), "ibv_create_qp"))?;
        attr.cap = cap_from_c(&init.cap);
        let mut owned_attr = QpInitAttrEx {
            pd: Some(pd),
            ..QpInitAttrEx::default()
        };
        owned_attr.qp_type = attr.qp_type;
        owned_attr.send_cq = attr.send_cq;
        owned_attr.recv_cq = attr.recv_cq;
        owned_attr.srq = attr.srq;
        Ok(self.make_qp(verb, q, &pd.0.obj.ctx, &owned_attr, None))
    }

    /// The body of `Verbs::open_qp`.
    pub(crate) fn open_qp_impl(
        &mut self,
        ctx: &HwContext,
        xrcd: &HwXrcd,
        attr: &QpOpenAttr,
    ) -> Result<HwQp> {
        let verb = Verb::OpenQp;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRCD")?;
        let mut oa: sys::ibv_qp_open_attr = zeroed();
        oa.comp_mask = (sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_NUM
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_XRCD
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_CONTEXT
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_TYPE)
            .0;
        oa.qp_num = attr.qp_num;
        oa.xrcd = xrcd.0.obj.get(verb)?;
        oa.qp_context = attr.qp_context as usize as *mut _;
        oa.qp_type = attr.qp_type.to_raw();
        // SAFETY: live context; `oa` is valid and names a live XRCD of it.
        let q =
            unsafe { fv::ibv_open_qp(c, &mut oa) }.map_err(|e| c_error(verb, e, "ibv_open_qp"))?;
        let a = QpInitAttrEx {
            qp_type: attr.qp_type,
            xrcd: Some(xrcd),
            ..QpInitAttrEx::default()
        };
        Ok(self.make_qp(verb, q, &inner, &a, None))
    }

    /// The body of `Verbs::query_qp`.
    pub(crate) fn query_qp_impl(
        &mut self,
        qp: &HwQp,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let p = self.qp_ptr(qp, Verb::QueryQp)?;
        let mut a: sys::ibv_qp_attr = zeroed();
        let mut init: sys::ibv_qp_init_attr = zeroed();
        let m = mask.bits() as c_int;
        // SAFETY: live QP; both out-parameters are writable.
        match unsafe { sys::ibv_query_qp(p, &mut a, m, &mut init) } {
            0 => Ok((
                qp_attr_from_c(&a),
                QpInitInfo {
                    qp_type: qp.0.qp_type,
                    cap: cap_from_c(&init.cap),
                    sq_sig_all: init.sq_sig_all != 0,
                    qp_context: init.qp_context as usize as u64,
                    has_srq: !init.srq.is_null(),
                },
            )),
            rc => Err(c_error(Verb::QueryQp, rc, "ibv_query_qp")),
        }
    }
}
