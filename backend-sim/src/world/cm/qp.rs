//! `rdma_create_qp` and what the CM owns for an id.

use super::*;

impl World {
    // --------------------------------------------------- rdma_create_qp

    /// How many PDs, CQs, completion channels and QPs live on the
    /// connection manager's context of device `dev` in the process of
    /// `rdma_create_event_channel` (`None` before the CM opened one): lets
    /// tests check that a refused `rdma_create_qp` left nothing behind.
    pub fn cm_context_children(&self, dev: u32) -> Option<u32> {
        self.cm_context_children_of(self.config.cm.process, dev)
    }

    /// [`World::cm_context_children`] for the CM context of `process`.
    pub fn cm_context_children_of(&self, process: ProcessId, dev: u32) -> Option<u32> {
        let d = self.cm.devs.get(&(process, dev))?;
        self.contexts
            .get(d.ctx.index, d.ctx.generation)
            .map(|c| c.children)
    }

    /// The connection manager's context of device `dev` in the process of
    /// `rdma_create_event_channel`, opened on first use (`ibv_open_device`
    /// once per device and process, as librdmacm does):
    /// `rdma_get_devices` lists these, and every id of the process bound to
    /// the device has it as `verbs`, so a PD or CQ a program makes on a
    /// listed context serves the id's QP.
    pub fn cm_device_context(&mut self, dev: u32) -> Result<ContextHandle> {
        self.cm_dev_ctx(self.config.cm.process, dev)
    }

    /// [`World::cm_device_context`] of `process` (the shared fabric asks
    /// for the caller's).
    pub fn cm_device_context_of(&mut self, process: ProcessId, dev: u32) -> Result<ContextHandle> {
        self.cm_dev_ctx(process, dev)
    }

    /// The connection manager's default PD of device `dev` in the process
    /// of `rdma_create_event_channel`, while its ids are bound to the
    /// device.
    pub fn cm_device_default_pd(&self, dev: u32) -> Option<PdHandle> {
        self.cm_default_pd(self.config.cm.process, dev)
    }

    /// [`World::cm_device_default_pd`] of `process`.
    pub fn cm_device_default_pd_of(&self, process: ProcessId, dev: u32) -> Option<PdHandle> {
        self.cm_default_pd(process, dev)
    }

    /// The default PD of `process` on the device (allocated while ids of
    /// the process are bound to it).
    pub(crate) fn cm_default_pd(&self, process: ProcessId, dev: u32) -> Option<PdHandle> {
        self.cm.devs.get(&(process, dev)).and_then(|d| d.pd)
    }

    /// `rdma_create_qp` (`legacy = Some(pd)`) / `rdma_create_qp_ex`
    /// (`legacy = None`): create-qp.md §10.
    pub(crate) fn rdma_create_qp(
        &mut self,
        id: CmIdHandle,
        legacy: Option<Option<PdHandle>>,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
    ) -> Result<QpHandle> {
        let v = if legacy.is_some() {
            Verb::RdmaCreateQp
        } else {
            Verb::RdmaCreateQpEx
        };
        let i = self.cm_id(id, v)?;
        let Some(dev) = i.dev else {
            return Err(invalid(
                v,
                "the rdma_cm id is not bound to a device yet (rdma_bind_addr to a device address, or rdma_resolve_addr and its ADDR_RESOLVED event, first)",
            ));
        };
        if i.qp.is_some() {
            return Err(invalid(
                v,
                "an rdma_cm id may only be associated with a single QP",
            ));
        }
        let (ps, id_ud, process) = (i.ps, i.ud, i.process);
        if id_ud != (attr.qp_type == QpType::Ud) {
            return Err(invalid(
                v,
                format!(
                    "a {} QP does not fit an id of port space {ps} (UDP ids take UD QPs, TCP and IB ids connected ones)",
                    attr.qp_type
                ),
            ));
        }
        let ctx = self.cm_dev_ctx(process, dev)?;
        let given_pd = match legacy {
            Some(pd) => pd,
            None if attr.comp_mask.contains(QpInitAttrMask::PD) => attr.pd.copied(),
            None => None,
        };
        let pd = match given_pd {
            Some(pd) => {
                let p = self.pd(pd, v)?;
                if p.ctx != ctx {
                    return Err(invalid(
                        v,
                        "the PD belongs to another device context than the rdma_cm id's (allocate it on id.verbs)",
                    ));
                }
                pd
            }
            None => self
                .cm_default_pd(process, dev)
                .ok_or_else(|| invalid(v, "the device has no default PD"))?,
        };
        for cq in attr.send_cq.iter().chain(attr.recv_cq.iter()) {
            if self.cq(**cq, v)?.ctx != ctx {
                return Err(invalid(
                    v,
                    "the CQ belongs to another device context than the rdma_cm id's",
                ));
            }
        }
        // Missing CQs: a completion channel and a CQ each, sized by the caps.
        let mut made: Vec<(CqHandle, CompChannelHandle)> = Vec::new();
        let auto = |w: &mut Self, cqe: u32| -> Result<Option<(CqHandle, CompChannelHandle)>> {
            if cqe == 0 {
                return Ok(None);
            }
            let ch = w.create_comp_channel(ctx).map_err(|e| reverb(e, v))?;
            match w.create_cq(ctx, cqe, u64::from(id.index), Some(ch), 0) {
                Ok(cq) => Ok(Some((cq, ch))),
                Err(e) => {
                    let _ = w.destroy_comp_channel(ch);
                    Err(reverb(e, v))
                }
            }
        };
        let rollback = |w: &mut Self, made: &[(CqHandle, CompChannelHandle)]| {
            for (cq, ch) in made {
                let _ = w.destroy_cq(*cq);
                let _ = w.destroy_comp_channel(*ch);
            }
        };
        let send_auto = if attr.send_cq.is_none() {
            auto(self, attr.cap.max_send_wr)?
        } else {
            None
        };
        made.extend(send_auto);
        let recv_auto = if attr.recv_cq.is_none() {
            match auto(self, attr.cap.max_recv_wr) {
                Ok(r) => r,
                Err(e) => {
                    rollback(self, &made);
                    return Err(e);
                }
            }
        } else {
            None
        };
        made.extend(recv_auto);
        let send_cq = attr.send_cq.copied().or(send_auto.map(|a| a.0));
        let recv_cq = attr.recv_cq.copied().or(recv_auto.map(|a| a.0));
        let srq = attr.srq.copied();
        let mut inner = QpInitAttrEx::<SimVerbs> {
            qp_context: attr.qp_context,
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            cap: attr.cap,
            qp_type: attr.qp_type,
            sq_sig_all: attr.sq_sig_all,
            comp_mask: attr.comp_mask | QpInitAttrMask::PD,
            pd: Some(&pd),
            xrcd: attr.xrcd,
            create_flags: attr.create_flags,
            max_tso_header: attr.max_tso_header,
            source_qpn: attr.source_qpn,
            send_ops_flags: attr.send_ops_flags,
        };
        let legacy_pd = legacy.map(|_| pd);
        let qp = match self.create_qp(ctx, &mut inner, legacy_pd, v) {
            Ok(q) => q,
            Err(e) => {
                rollback(self, &made);
                return Err(e);
            }
        };
        let cap = inner.cap;
        // Automatic transitions: INIT now; UD straight on to RTS.
        let ud = attr.qp_type == QpType::Ud;
        let class = self.qp(qp, v)?.class;
        let mut steps = vec![(QpState::Reset, QpState::Init)];
        if ud {
            steps.push((QpState::Init, QpState::ReadyToReceive));
            steps.push((QpState::ReadyToReceive, QpState::ReadyToSend));
        }
        let qkey = match ps {
            PortSpace::Udp | PortSpace::Ib => RDMA_UDP_QKEY,
            _ => 0,
        };
        for (from, to) in steps {
            let masks = transition_masks(class, from, to, TableFlavor::Kernel);
            let mask = masks.map_or(QpAttrMask::STATE, |m| m.required | QpAttrMask::STATE);
            let a = QpAttr {
                qp_state: to,
                pkey_index: 0,
                port_num: 1,
                qkey,
                qp_access_flags: AccessFlags::empty(),
                sq_psn: 0,
                ..QpAttr::default()
            };
            if let Err(e) = self.modify_qp(qp, &a, mask) {
                let _ = self.destroy_qp(qp);
                rollback(self, &made);
                return Err(reverb(e, v));
            }
        }
        let i = self.cm_id_mut(id, v)?;
        i.qp = Some(CmQp {
            qp,
            pd,
            send_cq: send_auto.map(|a| a.0),
            recv_cq: recv_auto.map(|a| a.0),
            send_ch: send_auto.map(|a| a.1),
            recv_ch: recv_auto.map(|a| a.1),
        });
        attr.cap = cap;
        Ok(qp)
    }

    /// `rdma_destroy_qp`: the QP, then the CQs and channels made for it.
    /// `EINVAL` without a QP; `EBUSY` (nothing destroyed) when the QP or an
    /// automatic CQ/channel cannot go (multicast, another user, unacked
    /// events), where C would leak them silently.
    pub fn rdma_destroy_qp(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaDestroyQp;
        let Some(q) = self.cm_id(id, v)?.qp else {
            return Err(invalid(v, "the rdma_cm id has no QP"));
        };
        let qp = self.qp(q.qp, v)?;
        if !qp.mcast.is_empty() {
            return Err(busy(v, "the QP is still attached to multicast groups"));
        }
        let (qp_send_cq, qp_recv_cq) = (qp.send_cq, qp.recv_cq);
        for cq in [q.send_cq, q.recv_cq].into_iter().flatten() {
            let c = self.cq(cq, v)?;
            // The QP's own uses of the CQ: an XRC_SEND QP has no receive
            // queue, so it does not use the id's receive CQ at all, and an
            // XRC SRQ made on that CQ is another user.
            let own = u32::from(qp_send_cq == Some(cq)) + u32::from(qp_recv_cq == Some(cq));
            if c.users > own || c.events_unacked > 0 {
                return Err(busy(
                    v,
                    "an automatic CQ of the id is used by another QP or has unacknowledged events",
                ));
            }
        }
        // An automatic channel goes with its CQs: any other CQ on it (an
        // application's, made on id->recv_cq_channel) keeps it busy, and
        // then nothing is destroyed (issue #12 item 9).
        for ch in [q.send_ch, q.recv_ch].into_iter().flatten() {
            let own = [(q.send_cq, q.send_ch), (q.recv_cq, q.recv_ch)]
                .iter()
                .filter(|(cq, c)| cq.is_some() && *c == Some(ch))
                .count() as u32;
            if self.channel(ch, v)?.cqs > own {
                return Err(busy(
                    v,
                    "an automatic completion channel of the id has other CQs bound to it",
                ));
            }
        }
        self.destroy_qp(q.qp).map_err(|e| reverb(e, v))?;
        for (cq, ch) in [(q.send_cq, q.send_ch), (q.recv_cq, q.recv_ch)] {
            if let Some(cq) = cq {
                let _ = self.destroy_cq(cq);
            }
            if let Some(ch) = ch {
                let _ = self.destroy_comp_channel(ch);
            }
        }
        self.cm_id_mut(id, v)?.qp = None;
        Ok(())
    }

    /// What `struct rdma_cm_id` holds.
    pub(crate) fn cm_id_fields(&self, id: CmIdHandle) -> Result<(CmIdView, &CmId)> {
        let v = Verb::RdmaGetLocalAddr;
        let i = self.cm_id(id, v)?;
        let ctx = i
            .dev
            .and_then(|d| self.cm.devs.get(&(i.process, d)))
            .map(|d| d.ctx);
        let pd = match i.qp {
            Some(q) => Some(q.pd),
            None => i.dev.and_then(|d| self.cm_default_pd(i.process, d)),
        };
        Ok((CmIdView { ctx, pd }, i))
    }

    /// Whether a QP, CQ, channel or PD is owned by the CM (made by
    /// `rdma_create_qp`, or a default PD): the plain destroy verbs refuse
    /// those with `EBUSY`, as the hardware backend does.
    pub(crate) fn cm_owned(&self, what: CmOwned) -> bool {
        if matches!(what, CmOwned::Pd(p) if self.cm.devs.values().any(|d| d.pd == Some(p))) {
            return true;
        }
        // librdmacm opens a device's context once and keeps it for as long
        // as the library is loaded (`ucma_init` / `ucma_cleanup`), whether
        // or not an id is bound to it now.
        if matches!(what, CmOwned::Ctx(c) if self.cm.devs.values().any(|d| d.ctx == c)) {
            return true;
        }
        self.cm
            .ids
            .iter()
            .filter_map(|(_, _, i)| i.qp)
            .any(|q| match what {
                CmOwned::Qp(h) => q.qp == h,
                CmOwned::Cq(h) => q.send_cq == Some(h) || q.recv_cq == Some(h),
                CmOwned::Channel(h) => q.send_ch == Some(h) || q.recv_ch == Some(h),
                CmOwned::Pd(_) | CmOwned::Ctx(_) => false,
            })
    }
}
