//! `rdma_create_qp` / `rdma_create_qp_ex` (the QP, and the CQs and PD
//! librdmacm makes for it, as borrowed handles) and `rdma_destroy_qp`.

use core::cell::Cell;
use core::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::convert::cap_from_c;
use crate::errors::c_error;
use crate::ffi::verbs::last_errno;
use crate::handles::{
    register_cq, register_qp, ChanInner, ContextInner, CqInner, HwCompChannel, HwCq, HwPd, HwQp,
    Owned, QpInner,
};

use super::*;

impl HwVerbs {
    /// `rdma_create_qp` (`legacy_pd = Some(pd)`) or `rdma_create_qp_ex`.
    pub(crate) fn cm_create_qp(
        &mut self,
        id: &HwCmId,
        legacy_pd: Option<Option<&HwPd>>,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        let (verb, name) = match legacy_pd {
            Some(_) => (Verb::RdmaCreateQp, "rdma_create_qp"),
            None => (Verb::RdmaCreateQpEx, "rdma_create_qp_ex"),
        };
        let p = self.cm_bound_id(id, verb)?;
        if id.0.qp.borrow().is_some() {
            return Err(Error::invalid(verb, "an rdma_cm id has at most one QP"));
        }
        // SAFETY: live id; plain pointer field.
        let v = unsafe { (*p).verbs };
        let ctx = self.cm_context(v);
        // Every object named must live on the id's device context.
        let same = |c: &ContextInner, what: &str| -> Result<()> {
            if c.raw == v {
                Ok(())
            } else {
                Err(Error::invalid(
                    verb,
                    format!("the {what} belongs to another device context than the rdma_cm id's"),
                ))
            }
        };
        let pd_given = match legacy_pd {
            Some(pd) => pd,
            None if attr.comp_mask.contains(QpInitAttrMask::PD) => attr.pd,
            None => None,
        };
        if let Some(pd) = pd_given {
            same(&pd.0.obj.ctx, "PD")?;
        }
        for cq in attr.send_cq.iter().chain(attr.recv_cq.iter()) {
            same(&cq.0.obj.ctx, "CQ")?;
        }
        if let Some(s) = attr.srq {
            same(&s.0.obj.ctx, "SRQ")?;
        }
        let mut ex = self.qp_init_to_c(verb, attr)?;
        let rc = match legacy_pd {
            Some(pd) => {
                let pdp = match pd {
                    Some(pd) => pd.0.obj.get(verb)?,
                    None => ptr::null_mut(),
                };
                let mut init = sys::ibv_qp_init_attr {
                    qp_context: ex.qp_context,
                    send_cq: ex.send_cq,
                    recv_cq: ex.recv_cq,
                    srq: ex.srq,
                    cap: ex.cap,
                    qp_type: ex.qp_type,
                    sq_sig_all: ex.sq_sig_all,
                };
                // SAFETY: live bound id; every object in `init` is live and
                // of the id's context (checked); NULL PD = the default PD.
                let rc = unsafe { sys::rdma_create_qp(p, pdp, &mut init) };
                ex.cap = init.cap;
                rc
            }
            // SAFETY: as above, for the extended attribute block.
            None => unsafe { sys::rdma_create_qp_ex(p, &mut ex) },
        };
        if rc != 0 {
            return Err(c_error(verb, last_errno(), name));
        }
        attr.cap = cap_from_c(&ex.cap);
        // SAFETY: on success librdmacm set these fields of the live id.
        let (q, qpd, scq, rcq, sch, rch) = unsafe {
            let r = &*p;
            (
                r.qp,
                r.pd,
                r.send_cq,
                r.recv_cq,
                r.send_cq_channel,
                r.recv_cq_channel,
            )
        };
        let q = NonNull::new(q).ok_or_else(|| Error::invalid(verb, "librdmacm returned no QP"))?;
        let wrap_chan = |c: *mut sys::ibv_comp_channel| {
            NonNull::new(c).map(|c| {
                HwCompChannel(Arc::new(ChanInner {
                    obj: Owned::borrowed(c, &ctx.0),
                    nonblock: Cell::new(false),
                }))
            })
        };
        let wrap_cq = |c: *mut sys::ibv_cq, ch: &Option<HwCompChannel>| {
            NonNull::new(c).map(|c| {
                let cq = HwCq(Arc::new(CqInner {
                    obj: Owned::borrowed(c, &ctx.0),
                    _channel: ch.clone(),
                    cq_context: id.0.addr as u64,
                    ex: None,
                }));
                register_cq(&cq);
                cq
            })
        };
        let (auto_send_channel, auto_send_cq) = if attr.send_cq.is_none() {
            let ch = wrap_chan(sch);
            let cq = wrap_cq(scq, &ch);
            (ch, cq)
        } else {
            (None, None)
        };
        let (auto_recv_channel, auto_recv_cq) = if attr.recv_cq.is_none() {
            let ch = wrap_chan(rch);
            let cq = wrap_cq(rcq, &ch);
            (ch, cq)
        } else {
            (None, None)
        };
        let pd = match pd_given {
            Some(pd) => Some(pd.clone()),
            None => self.cm_default_pd(id, qpd, &ctx),
        };
        // SAFETY: `q` is the QP librdmacm just created.
        let qp_num = unsafe { (*q.as_ptr()).qp_num };
        let qp = HwQp(Arc::new(QpInner {
            obj: Owned::borrowed(q, &ctx.0),
            qp_num,
            qp_type: attr.qp_type,
            dc_type: None,
            _send_cq: attr.send_cq.cloned().or_else(|| auto_send_cq.clone()),
            _recv_cq: attr.recv_cq.cloned().or_else(|| auto_recv_cq.clone()),
            _srq: attr.srq.cloned(),
            _pd: pd,
            _xrcd: attr.xrcd.cloned(),
        }));
        register_qp(&qp);
        *id.0.qp.borrow_mut() = Some(CmQp {
            qp: qp.clone(),
            auto_send_cq,
            auto_recv_cq,
            auto_send_channel,
            auto_recv_channel,
        });
        Ok(qp)
    }

    pub(crate) fn cm_destroy_qp(&mut self, id: &HwCmId) -> Result<()> {
        let verb = Verb::RdmaDestroyQp;
        let p = self.cm_id(id, verb)?;
        let mut slot = id.0.qp.borrow_mut();
        let Some(q) = slot.as_ref() else {
            return Err(Error::invalid(verb, "the rdma_cm id has no QP"));
        };
        q.check_no_unacked(verb)?;
        // SAFETY: live id with a QP whose objects have no unacknowledged
        // events, so the destroys inside do not wait.
        unsafe { sys::rdma_destroy_qp(p) };
        if let Some(q) = slot.take() {
            q.invalidate();
        }
        Ok(())
    }
}
