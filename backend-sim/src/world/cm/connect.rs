//! Connecting: parameters, connect, accept, reject, disconnect, QP attributes and events.

use super::*;

impl World {
    /// Checks `responder_resources` / `initiator_depth` against the device
    /// (librdmacm `ucma_valid_param`; 255 means "the device's maximum").
    pub(super) fn cm_valid_param(&self, dev: u32, p: &ConnParam, verb: Verb) -> Result<ConnParam> {
        let a = self.device(dev).attr();
        let mut p = p.clone();
        let max_res = u8::try_from(a.max_qp_rd_atom).unwrap_or(u8::MAX);
        let max_init = u8::try_from(a.max_qp_init_rd_atom).unwrap_or(u8::MAX);
        if p.responder_resources == u8::MAX {
            p.responder_resources = max_res;
        } else if p.responder_resources > max_res {
            return Err(invalid(
                verb,
                format!(
                    "responder_resources {} is above the device's max_qp_rd_atom {max_res}",
                    p.responder_resources
                ),
            ));
        }
        if p.initiator_depth == u8::MAX {
            p.initiator_depth = max_init;
        } else if p.initiator_depth > max_init {
            return Err(invalid(
                verb,
                format!(
                    "initiator_depth {} is above the device's max_qp_init_rd_atom {max_init}",
                    p.initiator_depth
                ),
            ));
        }
        Ok(p)
    }

    pub(super) fn cm_private_limit(verb: Verb, data: &[u8], max: usize) -> Result<()> {
        if data.len() > max {
            return Err(invalid(
                verb,
                format!(
                    "{} bytes of private data, at most {max} fit in this message",
                    data.len()
                ),
            ));
        }
        Ok(())
    }

    /// `rdma_connect`: `EINVAL` unless the route is resolved.
    pub fn rdma_connect(&mut self, id: CmIdHandle, param: &ConnParam) -> Result<()> {
        let v = Verb::RdmaConnect;
        let i = self.cm_id(id, v)?;
        if i.state != IdState::RouteResolved {
            return Err(invalid(
                v,
                format!(
                    "rdma_connect needs a resolved route (rdma_resolve_route and ROUTE_RESOLVED first; state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, ps, ud) = (i.dev.unwrap_or(0), i.ps, i.ud);
        let qp = i.qp.map(|q| q.qp);
        let (local, peer) = (i.local, i.peer);
        Self::cm_private_limit(v, &param.private_data, connect_limit(ps, ud))?;
        let mut p = if ud {
            param.clone()
        } else {
            self.cm_valid_param(dev, param, v)?
        };
        let qpn = match qp {
            Some(q) => {
                let n = self.qp(q, v)?.qp_num;
                p.srq = u8::from(self.qp(q, v)?.srq.is_some());
                n
            }
            None => param.qp_num,
        };
        p.qp_num = qpn;
        let (Some(src), Some(dst)) = (local, peer) else {
            return Err(invalid(v, "the id has no resolved addresses"));
        };
        let psn = self.cm_next_psn();
        let to_dev = self.cm_device_of(dst.ip()).unwrap_or(0);
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::Connect(Conn::ReqSent);
        i.param = p.clone();
        i.psn = psn;
        i.remote_dev = to_dev;
        i.gen += 1;
        let gen = i.gen;
        let req = Box::new(ReqMsg {
            from: id,
            from_dev: dev,
            src,
            dst,
            ps,
            ud,
            param: p,
            qpn,
            psn,
        });
        self.cm_send(dev, to_dev, Action::Req(req.clone()));
        let t = self.config.cm.response_timeout_ns;
        self.cm_schedule(
            t,
            Action::ReqTimeout {
                id,
                gen,
                attempt: 0,
                req,
            },
        );
        Ok(())
    }

    /// The attributes of a connected QP's automatic transitions.
    pub(super) fn cm_qp_attr(&self, id: &CmId, to: QpState, rd_res: u8, rd_init: u8) -> QpAttr {
        let dev = id.dev.unwrap_or(0);
        let there = id.remote_dev;
        let me = self.device(dev).port_attr(dev);
        let peer = self.device(there).port_attr(there);
        let v6 = id.peer.is_some_and(|p| p.is_ipv6());
        let dgid = if peer.link_layer == LinkLayer::Ethernet {
            match v6 {
                false => self.gid_of(there, 1),
                true => self.gid_of(there, 0),
            }
        } else {
            self.gid_of(there, 0)
        };
        let global =
            peer.link_layer == LinkLayer::Ethernet || self.device(dev).profile.grh_required();
        let sgid_index = if me.link_layer == LinkLayer::Ethernet && !v6 {
            1
        } else {
            0
        };
        let mut mtu = Mtu::Mtu4096;
        for active in [me.active_mtu, peer.active_mtu] {
            if active.bytes().is_some() && active.to_raw() < mtu.to_raw() {
                mtu = active;
            }
        }
        let mut access = AccessFlags::REMOTE_WRITE;
        if rd_res > 0 {
            access |= AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        }
        QpAttr {
            qp_state: to,
            qp_access_flags: access,
            pkey_index: 0,
            port_num: 1,
            path_mtu: mtu,
            dest_qp_num: id.remote_qpn,
            rq_psn: id.remote_psn,
            sq_psn: id.psn,
            max_dest_rd_atomic: rd_res,
            max_rd_atomic: rd_init,
            min_rnr_timer: self.config.cm.min_rnr_timer,
            timeout: id.ack_timeout.unwrap_or(self.config.cm.ack_timeout),
            retry_cnt: id.req.retry_count.min(7),
            rnr_retry: id.req.rnr_retry_count.min(7),
            ah_attr: AhAttr {
                grh: GlobalRoute {
                    dgid,
                    flow_label: 0,
                    sgid_index,
                    hop_limit: 64,
                    traffic_class: 0,
                },
                dlid: peer.lid,
                sl: 0,
                src_path_bits: 0,
                static_rate: 0,
                is_global: global,
                port_num: 1,
            },
            ..QpAttr::default()
        }
    }

    /// INIT→INIT (access flags), INIT→RTR, RTR→RTS with the CM's values.
    pub(super) fn cm_ready_qp(
        &mut self,
        id: CmIdHandle,
        rd_res: u8,
        rd_init: u8,
        verb: Verb,
    ) -> Result<()> {
        let i = self.cm_id(id, verb)?;
        let Some(q) = i.qp else {
            return Ok(());
        };
        let class = self.qp(q.qp, verb)?.class;
        let steps = [
            (QpState::Init, QpState::Init),
            (QpState::Init, QpState::ReadyToReceive),
            (QpState::ReadyToReceive, QpState::ReadyToSend),
        ];
        for (from, to) in steps {
            let i = self.cm_id(id, verb)?;
            let attr = self.cm_qp_attr(i, to, rd_res, rd_init);
            let masks =
                transition_masks(class, from, to, TableFlavor::Kernel).ok_or_else(|| {
                    invalid(verb, format!("no {from} -> {to} transition for {class}"))
                })?;
            let mut mask = masks.required | QpAttrMask::STATE;
            if from == QpState::Init && to == QpState::Init {
                mask |= QpAttrMask::ACCESS_FLAGS & (masks.required | masks.optional);
            }
            self.modify_qp(q.qp, &attr, mask)
                .map_err(|e| reverb(e, verb))?;
        }
        Ok(())
    }

    /// `rdma_init_qp_attr`: the attributes and mask of the id's
    /// transition to `state`, as the CM applies them to its own QP
    /// (`cm_ready_qp`): INIT (P_Key index, port, access flags, or the Q_Key
    /// for UDP/IB port spaces), RTR (path, MTU, peer QPN and PSN, responder
    /// resources, RNR timer), RTS (PSN, timeout, retries, initiator depth).
    /// `EINVAL` for another state, or RTR/RTS of a connected port space
    /// before the peer's QP number is known.
    pub fn rdma_init_qp_attr(
        &mut self,
        id: CmIdHandle,
        state: QpState,
    ) -> Result<(QpAttr, QpAttrMask)> {
        let v = Verb::RdmaInitQpAttr;
        let i = self.cm_id(id, v)?;
        if i.dev.is_none() {
            return Err(invalid(v, "the id is not bound to a device yet"));
        }
        // A passive side moving its own (external) QP to RTS before it
        // accepts: the send PSN it gets now is the one its REP will carry.
        if state == QpState::ReadyToSend
            && i.state == IdState::Connect(Conn::ReqRcvd)
            && !i.psn_chosen
        {
            let psn = self.cm_next_psn();
            let i = self.cm_id_mut(id, v)?;
            i.psn = psn;
            i.psn_chosen = true;
        }
        let i = self.cm_id(id, v)?;
        let datagram = matches!(i.ps, PortSpace::Udp | PortSpace::Ib) || i.ud;
        let connected = matches!(i.state, IdState::Connect(_)) && i.remote_qpn != 0;
        // Responder resources and initiator depth negotiated for this side.
        let (rd_res, rd_init) = i.rd;
        let mut attr = self.cm_qp_attr(i, state, rd_res, rd_init);
        use QpAttrMask as M;
        let mask = match (state, datagram) {
            (QpState::Init, true) => {
                attr.qkey = RDMA_UDP_QKEY;
                M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY
            }
            (QpState::Init, false) => M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
            (QpState::ReadyToReceive, true) => M::STATE,
            (QpState::ReadyToSend, true) => {
                attr.sq_psn = 0;
                M::STATE | M::SQ_PSN
            }
            (QpState::ReadyToReceive | QpState::ReadyToSend, false) if !connected => {
                return Err(invalid(
                    v,
                    format!("{state} needs a connected id (the peer's QP number is not known yet)"),
                ));
            }
            (QpState::ReadyToReceive, false) => {
                M::STATE
                    | M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER
            }
            (QpState::ReadyToSend, false) => {
                M::STATE
                    | M::SQ_PSN
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
            }
            (other, _) => {
                return Err(invalid(
                    v,
                    format!("no CM attributes for a transition to {other} (INIT, RTR or RTS)"),
                ));
            }
        };
        Ok((attr, mask))
    }

    pub(super) fn cm_qp_to_err(&mut self, id: CmIdHandle) {
        if let Some(q) = self.cm.ids.get(id.index, id.generation).and_then(|i| i.qp) {
            let attr = QpAttr {
                qp_state: QpState::Error,
                ..QpAttr::default()
            };
            let _ = self.modify_qp(q.qp, &attr, QpAttrMask::STATE);
        }
    }

    /// `rdma_accept`: `EINVAL` unless a CONNECT_REQUEST's id waiting for an
    /// answer. A connected QP goes to RTS before the REP leaves.
    pub fn rdma_accept(&mut self, id: CmIdHandle, param: &ConnParam) -> Result<()> {
        let v = Verb::RdmaAccept;
        let i = self.cm_id(id, v)?;
        if i.state != IdState::Connect(Conn::ReqRcvd) {
            return Err(invalid(
                v,
                format!(
                    "rdma_accept needs the id of a CONNECT_REQUEST not answered yet (state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, ud, remote, there) = (i.dev.unwrap_or(0), i.ud, i.remote, i.remote_dev);
        let qp = i.qp.map(|q| q.qp);
        let Some(remote) = remote else {
            return Err(invalid(v, "the id has no peer"));
        };
        Self::cm_private_limit(
            v,
            &param.private_data,
            if ud { SIDR_REP_PD } else { REP_PD },
        )?;
        let qpn = match qp {
            Some(q) => self.qp(q, v)?.qp_num,
            None => param.qp_num,
        };
        if ud {
            self.cm_id_mut(id, v)?.state = IdState::Connect(Conn::Established);
            self.cm_send(
                dev,
                there,
                Action::SidrRep {
                    to: remote,
                    status: 0,
                    data: param.private_data.clone(),
                    qpn,
                },
            );
            return Ok(());
        }
        // 255 on accept means what the request offered, within the
        // device's limits (librdmacm's rdma_accept: the CONNECT_REQUEST's
        // swapped depths, capped), not the device's maximum as on connect.
        let offered = {
            let r = &self.cm_id(id, v)?.req;
            (r.initiator_depth, r.responder_resources)
        };
        let mut p = self.cm_valid_param(dev, param, v)?;
        if param.responder_resources == u8::MAX {
            p.responder_resources = p.responder_resources.min(offered.0);
        }
        if param.initiator_depth == u8::MAX {
            p.initiator_depth = p.initiator_depth.min(offered.1);
        }
        p.qp_num = qpn;
        if let Some(q) = qp {
            p.srq = u8::from(self.qp(q, v)?.srq.is_some());
        }
        let seq = self.cm.psn_seq;
        let chosen = self
            .cm_id(id, v)?
            .psn_chosen
            .then(|| self.cm_id(id, v).map(|i| i.psn));
        let psn = match chosen {
            Some(p) => p?,
            None => self.cm_next_psn(),
        };
        let saved = {
            let i = self.cm_id_mut(id, v)?;
            let saved = (i.psn, i.param.clone(), i.req.rnr_retry_count);
            i.psn = psn;
            i.param = p.clone();
            i.req.rnr_retry_count = p.rnr_retry_count;
            i.rd = (p.responder_resources, p.initiator_depth);
            saved
        };
        if let Err(e) = self.cm_ready_qp(id, p.responder_resources, p.initiator_depth, v) {
            // The id is as before (a QP step that failed changed nothing;
            // steps before it stay, as in librdmacm).
            self.cm.psn_seq = seq;
            let i = self.cm_id_mut(id, v)?;
            (i.psn, i.param, i.req.rnr_retry_count) = saved;
            return Err(e);
        }
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::Connect(Conn::RepSent);
        i.gen += 1;
        let gen = i.gen;
        let rep = Action::Rep {
            to: remote,
            from: id,
            param: p,
            qpn,
            psn,
        };
        self.cm_send(dev, there, rep.clone());
        let t = self.config.cm.response_timeout_ns;
        self.cm_schedule(
            t,
            Action::RepTimeout {
                id,
                gen,
                attempt: 0,
                rep: Box::new(rep),
            },
        );
        Ok(())
    }

    /// `rdma_establish`: the active side of a connection made without a QP
    /// confirms the REP (`CONNECT_RESPONSE`): the RTU leaves and the passive
    /// side gets `ESTABLISHED`. `EINVAL` for an id with a QP (librdmacm
    /// moves that QP itself) or one not waiting in `RepRcvd` (the kernel's
    /// `ib_send_cm_rtu`).
    pub fn rdma_establish(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaEstablish;
        let i = self.cm_id(id, v)?;
        if i.qp.is_some() {
            return Err(invalid(
                v,
                "rdma_establish is for ids without a QP (the CM moves an id's own QP and confirms by itself)",
            ));
        }
        if i.state != IdState::Connect(Conn::RepRcvd) {
            return Err(invalid(
                v,
                format!(
                    "rdma_establish needs an active id that got CONNECT_RESPONSE and did not confirm yet (state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, there) = (i.dev.unwrap_or(0), i.remote_dev);
        let Some(remote) = i.remote else {
            return Err(invalid(v, "the id has no peer"));
        };
        self.cm_id_mut(id, v)?.state = IdState::Connect(Conn::Established);
        self.cm_send(dev, there, Action::Rtu { to: remote });
        Ok(())
    }

    /// `rdma_reject`: `EINVAL` unless a CONNECT_REQUEST's id waiting for an
    /// answer; the peer gets `REJECTED` (`IB_CM_REJ_CONSUMER_DEFINED`) or,
    /// for UD, `UNREACHABLE` (`IB_SIDR_REJECT`), with the private data.
    pub fn rdma_reject(&mut self, id: CmIdHandle, data: &[u8]) -> Result<()> {
        self.cm_reject(Verb::RdmaReject, id, data, reject_reason::CONSUMER_DEFINED)
    }

    /// `rdma_reject_ece`: [`World::rdma_reject`] whose REJ carries
    /// `IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED` (the ECE options of the
    /// request are refused); a UD id's SIDR REP is the same as
    /// `rdma_reject`'s (SIDR has no reason field).
    pub fn rdma_reject_ece(&mut self, id: CmIdHandle, data: &[u8]) -> Result<()> {
        self.cm_reject(
            Verb::RdmaRejectEce,
            id,
            data,
            reject_reason::VENDOR_OPTION_NOT_SUPPORTED,
        )
    }

    fn cm_reject(&mut self, v: Verb, id: CmIdHandle, data: &[u8], reason: i32) -> Result<()> {
        let i = self.cm_id(id, v)?;
        if i.state != IdState::Connect(Conn::ReqRcvd) {
            return Err(invalid(
                v,
                format!(
                    "rdma_reject needs the id of a CONNECT_REQUEST not answered yet (state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, ud, there) = (i.dev.unwrap_or(0), i.ud, i.remote_dev);
        let Some(remote) = i.remote else {
            return Err(invalid(v, "the id has no peer"));
        };
        Self::cm_private_limit(v, data, if ud { SIDR_REP_PD } else { REJ_PD })?;
        self.cm_id_mut(id, v)?.state = IdState::Failed;
        let action = if ud {
            Action::SidrRep {
                to: remote,
                status: reject_reason::SIDR_REJECT,
                data: data.to_vec(),
                qpn: 0,
            }
        } else {
            Action::Rej {
                to: remote,
                reason,
                data: data.to_vec(),
            }
        };
        self.cm_send(dev, there, action);
        Ok(())
    }

    /// `rdma_disconnect`: the QP goes to ERR and a DREQ leaves; `EINVAL` on
    /// an id that never connected; 0 again while disconnecting.
    pub fn rdma_disconnect(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaDisconnect;
        let i = self.cm_id(id, v)?;
        match i.state {
            IdState::Connect(Conn::Established) if !i.ud => {}
            IdState::Connect(Conn::RepSent | Conn::RepRcvd) => {}
            IdState::Disconnect => {
                self.cm_qp_to_err(id);
                return Ok(());
            }
            s => {
                return Err(invalid(
                    v,
                    format!("rdma_disconnect needs a connected id (state {s:?})"),
                ))
            }
        }
        let (dev, there, remote) = (i.dev.unwrap_or(0), i.remote_dev, i.remote);
        self.cm_qp_to_err(id);
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::Disconnect;
        i.dreq_sent = true;
        i.gen += 1;
        let gen = i.gen;
        if let Some(r) = remote {
            self.cm_send(dev, there, Action::Dreq { to: r });
        }
        let t = self.config.cm.response_timeout_ns;
        self.cm_schedule(
            t,
            Action::DreqTimeout {
                id,
                gen,
                attempt: 0,
            },
        );
        Ok(())
    }

    /// `rdma_get_cm_event`, non-blocking: runs virtual time forward until
    /// the channel has an event or nothing left could produce one. The
    /// How many CM events wait on `ch` for `rdma_get_cm_event` (what makes
    /// an event channel's file descriptor readable in the drop-in library).
    pub fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize> {
        match self.cm.channels.get(ch.index, ch.generation) {
            Some(c) => Ok(c.events.len()),
            None => Err(invalid(
                Verb::RdmaGetCmEvent,
                format!("invalid or destroyed event channel {ch:?}"),
            )),
        }
    }

    /// event comes with its token (for `rdma_ack_cm_event`).
    pub(crate) fn rdma_get_cm_event(
        &mut self,
        ch: CmChannelHandle,
    ) -> Result<Option<(QueuedEvent, u64)>> {
        let v = Verb::RdmaGetCmEvent;
        if self.cm.channels.get(ch.index, ch.generation).is_none() {
            return Err(invalid(
                v,
                format!("invalid or destroyed rdma_cm event channel {ch:?}"),
            ));
        }
        let has = |w: &Self| {
            w.cm.channels
                .get(ch.index, ch.generation)
                .is_some_and(|c| !c.events.is_empty())
        };
        let mut rounds = 0u64;
        while !has(self) {
            if self.cm.pending == 0 && !self.busy() {
                break;
            }
            let Some(next) = self.fabric.next_event_time() else {
                break;
            };
            // The shared fabric caps virtual time (World::set_time_limit).
            if self.time_limit.is_some_and(|l| next.as_nanos() > l) {
                break;
            }
            rounds += 1;
            if rounds > crate::world::state::RUN_EVENT_BUDGET {
                break;
            }
            self.run_events(
                Some(next.as_nanos()),
                crate::world::state::RUN_EVENT_BUDGET,
                has,
            );
            self.now_ns = self.now_ns.max(next.as_nanos());
        }
        let Some(mut ev) = self
            .cm
            .channels
            .get_mut(ch.index, ch.generation)
            .and_then(|c| c.events.pop_front())
        else {
            return Ok(None);
        };
        self.cm_mc_fetched(&mut ev);
        let counted = ev.listen_id.unwrap_or(ev.id);
        self.event_tokens += 1;
        let token = self.event_tokens;
        if let Some(i) = self.cm.ids.get_mut(counted.index, counted.generation) {
            i.unacked.push(token);
        }
        Ok(Some((ev, token)))
    }

    /// `rdma_ack_cm_event`.
    pub fn rdma_ack_cm_event(
        &mut self,
        id: CmIdHandle,
        listen_id: Option<CmIdHandle>,
        token: u64,
    ) -> Result<()> {
        let v = Verb::RdmaAckCmEvent;
        let counted = listen_id.unwrap_or(id);
        let i = self.cm_id_mut(counted, v)?;
        let Some(pos) = i.unacked.iter().position(|&t| t == token) else {
            return Err(Error::from_errno(
                v,
                EINVAL,
                format!("rdma_cm event #{token} of this id was never handed out or is already acknowledged"),
            ));
        };
        i.unacked.remove(pos);
        Ok(())
    }
}
