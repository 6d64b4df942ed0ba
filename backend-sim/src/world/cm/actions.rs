//! Timed actions: address and route answers, REQ, REP, RTU, REJ, DREQ, DREP, SIDR, timewait.

use super::*;

impl World {
    // ---------------------------------------------------- actions (timed)

    /// The end of an address or route query: if `id` is still the same
    /// query (`gen`) in state `from`, it moves to `to` and gets `event`
    /// with its status; a stale timer does nothing.
    pub(super) fn cm_query_done(
        &mut self,
        (id, gen): (CmIdHandle, u32),
        from: IdState,
        to: IdState,
        (event, status): (CmEventType, i32),
    ) {
        let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
            return;
        };
        if i.gen != gen || i.state != from {
            return;
        }
        i.state = to;
        self.cm_simple_event(id, event, status);
    }

    pub(super) fn cm_run(&mut self, action: Action) {
        match action {
            Action::AddrResolved { id, gen, dev } => {
                let Some(i) = self.cm.ids.get(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::AddrQuery {
                    return;
                }
                let had_dev = i.dev.is_some();
                let v6 = i.peer.is_some_and(|p| p.is_ipv6());
                if !had_dev && self.cm_attach_dev(id, dev, Verb::RdmaResolveAddr).is_err() {
                    self.cm_simple_event(id, CmEventType::AddrError, -verbs_api::errno::ENOMEM);
                    return;
                }
                if let Some(i) = self.cm.ids.get_mut(id.index, id.generation) {
                    i.state = IdState::AddrResolved;
                    if let Some(l) = i.local.as_mut() {
                        if is_any(l.ip()) {
                            l.set_ip(Self::cm_device_addr(dev, v6));
                        }
                    }
                }
                self.cm_simple_event(id, CmEventType::AddrResolved, 0);
            }
            Action::AddrError { id, gen } => self.cm_query_done(
                (id, gen),
                IdState::AddrQuery,
                IdState::AddrBound,
                (CmEventType::AddrError, -ETIMEDOUT),
            ),
            Action::RouteResolved { id, gen } => self.cm_query_done(
                (id, gen),
                IdState::RouteQuery,
                IdState::RouteResolved,
                (CmEventType::RouteResolved, 0),
            ),
            // Back to ADDR_RESOLVED: the application may try again.
            Action::RouteError { id, gen } => self.cm_query_done(
                (id, gen),
                IdState::RouteQuery,
                IdState::AddrResolved,
                (CmEventType::RouteError, -ETIMEDOUT),
            ),
            Action::Req(req) => self.cm_on_req(*req),
            Action::ReqTimeout {
                id,
                gen,
                attempt,
                req,
            } => {
                let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::Connect(Conn::ReqSent) {
                    return;
                }
                if attempt < self.config.cm.max_retries {
                    let to_dev = i.remote_dev;
                    self.cm_send(req.from_dev, to_dev, Action::Req(req.clone()));
                    let t = self.config.cm.response_timeout_ns;
                    self.cm_schedule(
                        t,
                        Action::ReqTimeout {
                            id,
                            gen,
                            attempt: attempt + 1,
                            req,
                        },
                    );
                    return;
                }
                i.state = IdState::Failed;
                self.cm_qp_to_err(id);
                self.cm_simple_event(id, CmEventType::Unreachable, -ETIMEDOUT);
            }
            Action::Rep {
                to,
                from,
                param,
                qpn,
                psn,
            } => self.cm_on_rep(to, from, param, qpn, psn),
            Action::RepTimeout {
                id,
                gen,
                attempt,
                rep,
            } => {
                let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::Connect(Conn::RepSent) {
                    return;
                }
                if attempt < self.config.cm.max_retries {
                    let (dev, there) = (i.dev.unwrap_or(0), i.remote_dev);
                    self.cm_send(dev, there, (*rep).clone());
                    let t = self.config.cm.response_timeout_ns;
                    self.cm_schedule(
                        t,
                        Action::RepTimeout {
                            id,
                            gen,
                            attempt: attempt + 1,
                            rep,
                        },
                    );
                    return;
                }
                // IB_CM_REP_ERROR: the RTU never came.
                i.state = IdState::Failed;
                self.cm_qp_to_err(id);
                self.cm_simple_event(id, CmEventType::Unreachable, -ETIMEDOUT);
            }
            Action::Rtu { to } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                if i.state != IdState::Connect(Conn::RepSent) {
                    return;
                }
                i.state = IdState::Connect(Conn::Established);
                self.cm_simple_event(to, CmEventType::Established, 0);
            }
            Action::Rej { to, reason, data } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                if !matches!(
                    i.state,
                    IdState::Connect(Conn::ReqSent | Conn::ReqRcvd | Conn::RepSent | Conn::RepRcvd)
                ) {
                    return;
                }
                i.state = IdState::Failed;
                i.gen += 1;
                self.cm_qp_to_err(to);
                let padded = pad(&data, REJ_PD, self.config.cm.pad_private_data);
                self.cm_event(
                    to,
                    QueuedEvent {
                        event: CmEventType::Rejected,
                        id: to,
                        listen_id: None,
                        status: reason,
                        conn: ConnParam {
                            private_data: padded,
                            ..ConnParam::default()
                        },
                        mc: None,
                    },
                );
            }
            Action::SidrRep {
                to,
                status,
                data,
                qpn,
            } => {
                let Some(i) = self.cm.ids.get(to.index, to.generation) else {
                    return;
                };
                if i.state != IdState::Connect(Conn::ReqSent) {
                    return;
                }
                // The kernel fills `param.ud` of a SIDR answer: the address
                // vector to the peer, its QP number and the UDP port space's
                // Q_Key (`ucma_copy_ud_event`).
                let ud = UdParam {
                    ah_attr: self.cm_qp_attr(i, QpState::ReadyToReceive, 0, 0).ah_attr,
                    qp_num: qpn,
                    qkey: RDMA_UDP_QKEY,
                };
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                i.gen += 1;
                let padded = pad(&data, SIDR_REP_PD, self.config.cm.pad_private_data);
                let (event, conn) = if status == 0 {
                    i.state = IdState::Connect(Conn::Established);
                    i.remote_qpn = qpn;
                    (
                        CmEventType::Established,
                        ConnParam {
                            private_data: padded,
                            qp_num: qpn,
                            ..ConnParam::default()
                        },
                    )
                } else {
                    i.state = IdState::Failed;
                    (
                        CmEventType::Unreachable,
                        ConnParam {
                            private_data: padded,
                            ..ConnParam::default()
                        },
                    )
                };
                self.cm_event(
                    to,
                    QueuedEvent {
                        event,
                        id: to,
                        listen_id: None,
                        status,
                        conn,
                        mc: (status == 0).then(|| {
                            Box::new(McEventInfo {
                                serial: u64::MAX,
                                ud,
                                context: 0,
                            })
                        }),
                    },
                );
            }
            Action::Dreq { to } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                let (dev, there, remote) = (i.dev.unwrap_or(0), i.remote_dev, i.remote);
                match i.state {
                    IdState::Connect(Conn::Established | Conn::RepSent | Conn::RepRcvd) => {
                        i.state = IdState::Disconnect;
                        i.gen += 1;
                        let gen = i.gen;
                        self.cm_simple_event(to, CmEventType::Disconnected, 0);
                        self.cm_enter_timewait(to, gen);
                    }
                    IdState::Disconnect => {}
                    _ => return,
                }
                // The CM answers every DREQ (also a resent one) with a DREP.
                if let Some(r) = remote {
                    self.cm_send(dev, there, Action::Drep { to: r });
                }
            }
            Action::Drep { to } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                // Only the side that sent the DREQ is still waiting.
                if i.state != IdState::Disconnect || !i.dreq_sent {
                    return;
                }
                i.gen += 1;
                let gen = i.gen;
                self.cm_simple_event(to, CmEventType::Disconnected, 0);
                self.cm_enter_timewait(to, gen);
            }
            Action::DreqTimeout { id, gen, attempt } => {
                let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::Disconnect {
                    return;
                }
                if attempt < self.config.cm.max_retries {
                    let (dev, there, remote) = (i.dev.unwrap_or(0), i.remote_dev, i.remote);
                    if let Some(r) = remote {
                        self.cm_send(dev, there, Action::Dreq { to: r });
                    }
                    let t = self.config.cm.response_timeout_ns;
                    self.cm_schedule(
                        t,
                        Action::DreqTimeout {
                            id,
                            gen,
                            attempt: attempt + 1,
                        },
                    );
                    return;
                }
                i.gen += 1;
                let gen = i.gen;
                self.cm_simple_event(id, CmEventType::Disconnected, -ETIMEDOUT);
                self.cm_enter_timewait(id, gen);
            }
            Action::Timewait { id, gen } => {
                let Some(i) = self.cm.ids.get(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen {
                    return;
                }
                self.cm_simple_event(id, CmEventType::TimewaitExit, 0);
            }
            Action::McJoined { id, serial } => self.cm_mc_joined(id, serial),
        }
    }

    pub(super) fn cm_enter_timewait(&mut self, id: CmIdHandle, gen: u32) {
        if let Some(i) = self.cm.ids.get_mut(id.index, id.generation) {
            i.dreq_sent = false;
        }
        let t = self.config.cm.timewait_ns;
        self.cm_schedule(t, Action::Timewait { id, gen });
    }

    /// A REQ (or SIDR REQ) reaches the destination's CM.
    pub(super) fn cm_on_req(&mut self, req: ReqMsg) {
        // A resent REQ for a connection already being handled is absorbed.
        let dup = self
            .cm
            .ids
            .iter()
            .any(|(_, _, i)| i.remote == Some(req.from));
        if dup {
            return;
        }
        let to_dev = self.cm_device_of(req.dst.ip()).unwrap_or(0);
        let listener = self
            .cm
            .ids
            .iter()
            .find(|(_, _, i)| {
                i.state == IdState::Listen
                    && i.ps == req.ps
                    && i.local.is_some_and(|l| {
                        l.port() == req.dst.port()
                            && (is_any(l.ip()) || l.ip() == req.dst.ip())
                            && (l.is_ipv4() == req.dst.is_ipv4() || l.is_ipv6())
                    })
                    && i.dev.is_none_or(|d| d == to_dev)
            })
            .map(|(index, generation, i)| (CmIdHandle { index, generation }, i.channel));
        let Some((listen, channel)) = listener else {
            let action = if req.ud {
                Action::SidrRep {
                    to: req.from,
                    status: reject_reason::SIDR_UNSUPPORTED,
                    data: Vec::new(),
                    qpn: 0,
                }
            } else {
                Action::Rej {
                    to: req.from,
                    reason: reject_reason::INVALID_SERVICE_ID,
                    data: Vec::new(),
                }
            };
            self.cm_send(to_dev, req.from_dev, action);
            return;
        };
        // The new id: on the listener's channel, bound to the device.
        let ps = req.ps;
        let new = self.cm_new_id(channel, ps);
        if let Some(c) = self.cm.channels.get_mut(channel.index, channel.generation) {
            c.ids += 1;
        }
        if self
            .cm_attach_dev(new, to_dev, Verb::RdmaGetCmEvent)
            .is_err()
        {
            return;
        }
        let limit = connect_limit(ps, req.ud);
        let conn = ConnParam {
            private_data: pad(
                &req.param.private_data,
                limit,
                self.config.cm.pad_private_data,
            ),
            // The CM swaps the two: the active side's initiator depth is
            // what the passive side must offer as responder resources.
            responder_resources: req.param.initiator_depth,
            initiator_depth: req.param.responder_resources,
            flow_control: req.param.flow_control,
            retry_count: req.param.retry_count,
            rnr_retry_count: req.param.rnr_retry_count,
            srq: req.param.srq,
            qp_num: req.qpn,
        };
        if let Some(i) = self.cm.ids.get_mut(new.index, new.generation) {
            i.state = IdState::Connect(Conn::ReqRcvd);
            i.local = Some(req.dst);
            i.peer = Some(req.src);
            i.remote = Some(req.from);
            i.remote_dev = req.from_dev;
            i.remote_qpn = req.qpn;
            i.remote_psn = req.psn;
            i.req = req.param.clone();
            i.ud = req.ud;
        }
        // The passive CM acknowledges the REQ (MRA): the active side now
        // waits `mra_timeout_ns` for the application's answer.
        if let Some(a) = self.cm.ids.get_mut(req.from.index, req.from.generation) {
            if a.state == IdState::Connect(Conn::ReqSent) {
                a.gen += 1;
                let gen = a.gen;
                let t = self.config.cm.mra_timeout_ns;
                let from = req.from;
                let from_dev = req.from_dev;
                self.cm_schedule(
                    t,
                    Action::ReqTimeout {
                        id: from,
                        gen,
                        attempt: u32::MAX,
                        req: Box::new(ReqMsg { from_dev, ..req }),
                    },
                );
            }
        }
        self.cm_event(
            new,
            QueuedEvent {
                event: CmEventType::ConnectRequest,
                id: new,
                listen_id: Some(listen),
                status: 0,
                conn,
                mc: None,
            },
        );
    }

    /// A REP reaches the active side: QP to RTS, RTU back, ESTABLISHED (or
    /// CONNECT_ERROR and a REJ when a transition fails); without a QP the
    /// event is CONNECT_RESPONSE and the id waits in `RepRcvd` for
    /// `rdma_establish` (a resent REP is then absorbed, as IB CM's
    /// duplicate-REP handling does in REP_RCVD).
    pub(super) fn cm_on_rep(
        &mut self,
        to: CmIdHandle,
        from: CmIdHandle,
        param: ConnParam,
        qpn: u32,
        psn: u32,
    ) {
        let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
            return;
        };
        if i.state == IdState::Connect(Conn::Established) && i.remote == Some(from) {
            // A resent REP: our RTU was lost; send it again.
            let (dev, there) = (i.dev.unwrap_or(0), i.remote_dev);
            self.cm_send(dev, there, Action::Rtu { to: from });
            return;
        }
        if i.state != IdState::Connect(Conn::ReqSent) {
            return;
        }
        i.gen += 1;
        i.remote = Some(from);
        i.remote_qpn = qpn;
        i.remote_psn = psn;
        // Our retry count goes into our own RTS, the RNR retry count is
        // the one the REP carries (IB CM `cm_rep_handler`).
        i.req = i.param.clone();
        i.req.rnr_retry_count = param.rnr_retry_count;
        // The active QP's responder resources are the passive side's
        // initiator depth, and the other way round.
        i.rd = (param.initiator_depth, param.responder_resources);
        let (dev, there, has_qp) = (i.dev.unwrap_or(0), i.remote_dev, i.qp.is_some());
        let conn = ConnParam {
            private_data: pad(&param.private_data, REP_PD, self.config.cm.pad_private_data),
            responder_resources: param.initiator_depth,
            initiator_depth: param.responder_resources,
            flow_control: param.flow_control,
            retry_count: 0,
            rnr_retry_count: param.rnr_retry_count,
            srq: param.srq,
            qp_num: qpn,
        };
        if !has_qp {
            // The application moves its own QP and confirms with
            // rdma_establish, which sends the RTU; until then the passive
            // side keeps resending its REP and finally gives up.
            if let Some(i) = self.cm.ids.get_mut(to.index, to.generation) {
                i.state = IdState::Connect(Conn::RepRcvd);
            }
            self.cm_event(
                to,
                QueuedEvent {
                    event: CmEventType::ConnectResponse,
                    id: to,
                    listen_id: None,
                    status: 0,
                    conn,
                    mc: None,
                },
            );
            return;
        }
        // Responder resources of the active QP = the passive's initiator
        // depth; its initiator depth = the passive's responder resources.
        let r = self.cm_ready_qp(
            to,
            param.initiator_depth,
            param.responder_resources,
            Verb::RdmaGetCmEvent,
        );
        match r {
            Ok(()) => {
                if let Some(i) = self.cm.ids.get_mut(to.index, to.generation) {
                    i.state = IdState::Connect(Conn::Established);
                }
                self.cm_send(dev, there, Action::Rtu { to: from });
                self.cm_event(
                    to,
                    QueuedEvent {
                        event: CmEventType::Established,
                        id: to,
                        listen_id: None,
                        status: 0,
                        conn,
                        mc: None,
                    },
                );
            }
            Err(e) => {
                if let Some(i) = self.cm.ids.get_mut(to.index, to.generation) {
                    i.state = IdState::Failed;
                }
                self.cm_qp_to_err(to);
                self.cm_send(
                    dev,
                    there,
                    Action::Rej {
                        to: from,
                        reason: reject_reason::CONSUMER_DEFINED,
                        data: Vec::new(),
                    },
                );
                self.cm_simple_event(to, CmEventType::ConnectError, -e.errno());
            }
        }
    }
}
