//! XRC_TGT QPs: the handles `ibv_open_qp` makes to a domain's real QP,
//! resolving, querying and destroying them, fanning events out to every
//! handle, and binding a message to the receiving QP.

use verbs_api::{AsyncEventType, QpAttr, QpAttrMask, QpInitInfo, QpOpenAttr, QpType, Result, Verb};

use crate::world::{invalid, AsyncSubject, World};

use super::*;

impl World {
    // ------------------------------------------------------------ TGT QPs

    /// Checks the XRCD of an XRC_TGT creation (called by `create_qp` once
    /// the type rules passed); returns the handle.
    pub(crate) fn tgt_xrcd(
        &self,
        ctx: ContextHandle,
        xrcd: Option<XrcdHandle>,
        verb: Verb,
    ) -> Result<XrcdHandle> {
        let Some(x) = xrcd else {
            return Err(invalid(verb, "an XRC_RECV QP needs an xrcd"));
        };
        self.ctx(ctx, verb)?;
        self.same_ctx(verb, "XRCD", self.xrcd_open(x, verb)?.ctx, ctx)?;
        Ok(x)
    }

    /// Records a just-created real XRC_TGT QP in the domain of `xrcd` and
    /// returns the creator's handle to it (K-VERBS `create_xrc_qp_user`).
    pub(crate) fn tgt_created(
        &mut self,
        real: QpHandle,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        qp_context: u64,
    ) -> QpHandle {
        let domain = self
            .xrc
            .opens
            .get(xrcd.index, xrcd.generation)
            .expect("checked")
            .domain;
        let qpn = self
            .qps
            .get(real.index, real.generation)
            .expect("live")
            .qp_num;
        self.xrc
            .domains
            .get_mut(domain.0, domain.1)
            .expect("live")
            .tgt_qps
            .insert(qpn, real);
        self.xrc.tgts.insert(
            real.index,
            RealTgt {
                domain,
                handles: Vec::new(),
            },
        );
        // The real QP belongs to the domain, not to the creator's context:
        // the context counts the handle instead.
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.children -= 1;
        }
        self.new_tgt_handle(real, ctx, xrcd, qp_context)
    }

    pub(super) fn new_tgt_handle(
        &mut self,
        real: QpHandle,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        qp_context: u64,
    ) -> QpHandle {
        let (index, generation) = self.xrc.tgt_opens.insert(TgtOpen {
            real,
            ctx,
            xrcd,
            qp_context,
        });
        let h = QpHandle::from_parts((index | ALIAS_BIT, generation));
        self.xrc
            .tgts
            .get_mut(&real.index)
            .expect("live")
            .handles
            .push(h);
        if let Some(o) = self.xrc.opens.get_mut(xrcd.index, xrcd.generation) {
            o.refcnt += 1;
        }
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.children += 1;
        }
        h
    }

    pub(super) fn tgt_open(&self, qp: QpHandle, verb: Verb) -> Result<&TgtOpen> {
        self.xrc
            .tgt_opens
            .get(qp.index & !ALIAS_BIT, qp.generation)
            .ok_or_else(|| invalid(verb, format!("invalid or destroyed QP handle {qp:?}")))
    }

    /// The QP a handle acts on: the real XRC_TGT QP for a TGT handle, the
    /// handle itself otherwise.
    pub(crate) fn resolve_qp(&self, qp: QpHandle, verb: Verb) -> Result<QpHandle> {
        if is_alias(qp) {
            Ok(self.tgt_open(qp, verb)?.real)
        } else {
            Ok(qp)
        }
    }

    /// `ibv_query_qp` through any handle: a TGT handle reports the real
    /// QP's attributes with its own `qp_context`.
    pub(crate) fn query_qp_handle(
        &self,
        qp: QpHandle,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let real = self.resolve_qp(qp, Verb::QueryQp)?;
        let (a, mut info) = self.query_qp(real, mask)?;
        if is_alias(qp) {
            info.qp_context = self.tgt_open(qp, Verb::QueryQp)?.qp_context;
            info.has_srq = false;
        }
        Ok((a, info))
    }

    /// `ibv_destroy_qp` through any handle: a TGT handle is closed and the
    /// real QP destroyed with its last handle (K-VERBS `__ib_destroy_shared_qp`).
    pub(crate) fn destroy_qp_handle(&mut self, qp: QpHandle) -> Result<()> {
        let v = Verb::DestroyQp;
        if !is_alias(qp) {
            // The real XRC_TGT QP belongs to its domain and dies with its
            // last handle or registration; a handle naming it directly
            // (found by number, say) must not destroy it behind them.
            if self.xrc.tgts.contains_key(&qp.index)
                && self.qps.get(qp.index, qp.generation).is_some()
            {
                return Err(invalid(
                    v,
                    "the XRC_TGT QP is owned by its XRC domain: destroy the handle that \
                     ibv_create_qp/ibv_open_qp gave, or ibv_unreg_xrc_rcv_qp a legacy registration",
                ));
            }
            return self.destroy_qp(qp);
        }
        let o = self.tgt_open(qp, v)?;
        let (real, ctx, xrcd) = (o.real, o.ctx, o.xrcd);
        // A legacy registration's handle is closed with unreg, never here.
        if self.xrc.legacy.values().any(|&h| h == qp) {
            return Err(invalid(
                v,
                "this handle is a legacy registration: use ibv_unreg_xrc_rcv_qp",
            ));
        }
        self.close_tgt_handle(qp, real, ctx, xrcd);
        self.drop_async_events_of(AsyncSubject::Qp(qp));
        Ok(())
    }

    pub(super) fn close_tgt_handle(
        &mut self,
        qp: QpHandle,
        real: QpHandle,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
    ) {
        self.xrc
            .tgt_opens
            .remove(qp.index & !ALIAS_BIT, qp.generation);
        if let Some(o) = self.xrc.opens.get_mut(xrcd.index, xrcd.generation) {
            o.refcnt -= 1;
        }
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.children -= 1;
        }
        let t = self.xrc.tgts.get_mut(&real.index).expect("live");
        t.handles.retain(|&h| h != qp);
        if !t.handles.is_empty() {
            return;
        }
        let domain = t.domain;
        self.xrc.tgts.remove(&real.index);
        let Some(q) = self.qps.get_mut(real.index, real.generation) else {
            return;
        };
        // Unbind what the last message bound (xrc_bind_message), so that
        // destroy_qp releases nothing the TGT QP never counted.
        q.srq = None;
        q.pd = None;
        let (qpn, rctx) = (q.qp_num, q.ctx);
        if let Some(d) = self.xrc.domains.get_mut(domain.0, domain.1) {
            d.tgt_qps.remove(&qpn);
        }
        // destroy_qp gives back a context child the real QP never held.
        if let Some(c) = self.contexts.get_mut(rctx.index, rctx.generation) {
            c.children += 1;
        }
        let _ = self.destroy_qp(real);
    }

    /// `ibv_open_qp`: a new handle to the XRC_TGT QP `attr.qp_num` of `xrcd`
    /// (xrc.md §1.4): `EINVAL` for another type, an unknown number, a QP of
    /// another domain.
    pub(crate) fn open_qp(
        &mut self,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        attr: &QpOpenAttr,
        verb: Verb,
    ) -> Result<QpHandle> {
        let real = self.find_tgt(ctx, xrcd, attr.qp_num, attr.qp_type, verb)?;
        Ok(self.new_tgt_handle(real, ctx, xrcd, attr.qp_context))
    }

    /// The real TGT QP `qpn` of the domain of `xrcd`, or why not.
    pub(super) fn find_tgt(
        &self,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        qpn: u32,
        qp_type: QpType,
        verb: Verb,
    ) -> Result<QpHandle> {
        let device = self.ctx(ctx, verb)?.device;
        let o = self.xrcd_open(xrcd, verb)?;
        self.same_ctx(verb, "XRCD", o.ctx, ctx)?;
        let d = self.xrc.domains.get(o.domain.0, o.domain.1).expect("live");
        if qp_type != QpType::XrcRecv {
            return Err(invalid(
                verb,
                format!("only XRC_RECV QPs can be opened, not {qp_type}"),
            ));
        }
        if let Some(&real) = d.tgt_qps.get(&qpn) {
            return Ok(real);
        }
        Err(match self.qp_by_num(device, qpn) {
            None => invalid(verb, format!("no QP with number {qpn:#x} on the device")),
            Some(q) => match self.xrc.tgts.contains_key(&q.index) {
                true => invalid(
                    verb,
                    format!("XRC receive QP {qpn:#x} belongs to another XRC domain"),
                ),
                false => invalid(
                    verb,
                    format!(
                        "QP {qpn:#x} is a {} QP, not an XRC receive QP",
                        self.qps.get(q.index, q.generation).expect("live").qp_type
                    ),
                ),
            },
        })
    }

    /// Delivers an async event of a real XRC_TGT QP to every handle's
    /// context (the kernel's shared event handler). False if `qp` is not one.
    pub(crate) fn fan_out_tgt_event(&mut self, qp: QpHandle, event: AsyncEventType) -> bool {
        let Some(t) = self.xrc.tgts.get(&qp.index) else {
            return false;
        };
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return false;
        };
        let (device, qpn) = (q.device, q.qp_num);
        for &h in &t.handles {
            let Some(o) = self.xrc.tgt_opens.get(h.index & !ALIAS_BIT, h.generation) else {
                continue;
            };
            // A legacy registration has no handle in the process: the event
            // names the QP by number (xrc.md §2.3, last row).
            let subject = if self.xrc.legacy.values().any(|&l| l == h) {
                AsyncSubject::QpNum(qpn)
            } else {
                AsyncSubject::Qp(h)
            };
            if let Some(c) = self.contexts.get_mut(o.ctx.index, o.ctx.generation) {
                c.async_events.push_back((event, subject));
            }
        }
        self.record(crate::trace::TraceEvent::AsyncEvent {
            device,
            event,
            element: qpn,
        });
        true
    }

    /// Data path: binds the XRC SRQ named by the sender's work request to
    /// the XRC_TGT QP `rq` for one packet (its SRQ and PD). `false` when
    /// the number names no XRC SRQ of the TGT QP's domain.
    pub(crate) fn xrc_bind_message(&mut self, rq: QpHandle, req: QpHandle, seq: u64) -> bool {
        let Some(s) = self.qps.get(req.index, req.generation) else {
            return false;
        };
        let srqn = s.sq.wqe(seq).remote_srqn;
        let Some(t) = self.xrc.tgts.get(&rq.index) else {
            return false;
        };
        let Some(r) = self.qps.get(rq.index, rq.generation) else {
            return false;
        };
        let Some(&srq) = self.xrc.srq_nums.get(&(r.device, srqn & 0xff_ffff)) else {
            return false;
        };
        let Some(x) = self.xrc.srqs.get(&srq.index) else {
            return false;
        };
        if x.domain != t.domain {
            return false;
        }
        let Some(pd) = self.srqs.get(srq.index, srq.generation).map(|s| s.pd) else {
            return false;
        };
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.srq = Some(srq);
        r.pd = Some(pd);
        true
    }

    /// Undoes [`World::xrc_bind_message`] after the packet.
    pub(crate) fn xrc_unbind_message(&mut self, rq: QpHandle) {
        if let Some(r) = self.qps.get_mut(rq.index, rq.generation) {
            r.srq = None;
            r.pd = None;
        }
    }
}
