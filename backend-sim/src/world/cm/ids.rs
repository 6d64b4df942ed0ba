//! Event channels and ids: create, destroy, bind, resolve, listen.

use super::*;

impl World {
    // --------------------------------------------------------------- verbs

    /// `rdma_create_event_channel`.
    pub fn rdma_create_event_channel(&mut self) -> CmChannelHandle {
        self.rdma_create_event_channel_of(self.config.cm.process)
    }

    /// `rdma_create_event_channel` in simulated process `process`: its ids
    /// use that process's own CM device contexts and default PDs, never
    /// another process's (as each process's librdmacm opens its own).
    pub fn rdma_create_event_channel_of(&mut self, process: ProcessId) -> CmChannelHandle {
        CmChannelHandle::from_parts(self.cm.channels.insert(CmChannel {
            process,
            ..CmChannel::default()
        }))
    }

    /// `rdma_destroy_event_channel`: `EBUSY` while ids use it.
    pub fn rdma_destroy_event_channel(&mut self, ch: CmChannelHandle) -> Result<()> {
        let v = Verb::RdmaDestroyEventChannel;
        let c = self
            .cm
            .channels
            .get(ch.index, ch.generation)
            .ok_or_else(|| {
                invalid(
                    v,
                    format!("invalid or destroyed rdma_cm event channel {ch:?}"),
                )
            })?;
        if c.ids > 0 {
            return Err(busy(
                v,
                format!("{} rdma_cm id(s) of this channel are still alive", c.ids),
            ));
        }
        self.cm.channels.remove(ch.index, ch.generation);
        Ok(())
    }

    /// `rdma_create_id`.
    pub fn rdma_create_id(&mut self, ch: CmChannelHandle, ps: PortSpace) -> Result<CmIdHandle> {
        let v = Verb::RdmaCreateId;
        if !matches!(ps, PortSpace::Tcp | PortSpace::Udp | PortSpace::Ib) {
            return Err(Error::from_errno(
                v,
                verbs_api::errno::EPROTONOSUPPORT,
                format!("port space {ps} is not modelled (TCP, UDP and IB are)"),
            ));
        }
        let c = self
            .cm
            .channels
            .get_mut(ch.index, ch.generation)
            .ok_or_else(|| {
                invalid(
                    v,
                    format!("invalid or destroyed rdma_cm event channel {ch:?}"),
                )
            })?;
        c.ids += 1;
        Ok(self.cm_new_id(ch, ps))
    }

    pub(super) fn cm_new_id(&mut self, channel: CmChannelHandle, ps: PortSpace) -> CmIdHandle {
        let process = self
            .cm
            .channels
            .get(channel.index, channel.generation)
            .map_or(self.config.cm.process, |c| c.process);
        CmIdHandle::from_parts(self.cm.ids.insert(CmId {
            process,
            ack_timeout: None,
            psn_chosen: false,
            channel,
            ps,
            state: IdState::Idle,
            local: None,
            peer: None,
            owns_port: false,
            dev: None,
            qp: None,
            unacked: Vec::new(),
            remote: None,
            param: ConnParam::default(),
            req: ConnParam::default(),
            remote_qpn: 0,
            remote_psn: 0,
            remote_dev: 0,
            psn: 0,
            gen: 0,
            ud: ps == PortSpace::Udp,
            dreq_sent: false,
            rd: (0, 0),
            joins: Vec::new(),
        }))
    }

    /// `rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`
    /// (the kernel's `rdma_set_ack_timeout`): the `timeout` the id's QP gets
    /// when the CM moves it to RTS (`rdma_init_qp_attr` reports it too).
    /// Values above 31 are `EINVAL` (the 5-bit field).
    pub fn rdma_set_ack_timeout(&mut self, id: CmIdHandle, timeout: u8) -> Result<()> {
        let v = Verb::RdmaSetOption;
        if timeout > 31 {
            return Err(invalid(
                v,
                format!("ACK timeout {timeout} does not fit 5 bits"),
            ));
        }
        self.cm_id_mut(id, v)?.ack_timeout = Some(timeout);
        Ok(())
    }

    /// `rdma_destroy_id`: `EBUSY` with unacknowledged events or a QP. A
    /// connection in progress is rejected (`IB_CM_REJ_TIMEOUT`), an
    /// established one disconnected (DREQ), as `ib_destroy_cm_id` does.
    pub fn rdma_destroy_id(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaDestroyId;
        let i = self.cm_id(id, v)?;
        if !i.unacked.is_empty() {
            return Err(busy(
                v,
                format!(
                    "{} rdma_cm event(s) of this id are not acknowledged; rdma_destroy_id would wait for them forever",
                    i.unacked.len()
                ),
            ));
        }
        if i.qp.is_some() {
            return Err(busy(v, "the id still has a QP: rdma_destroy_qp first"));
        }
        let (state, remote, dev, ud) = (i.state, i.remote, i.dev, i.ud);
        // An active id whose REQ is being handled knows its peer only once
        // the REP arrives; the passive id knows it.
        let remote = remote.or_else(|| {
            self.cm
                .ids
                .iter()
                .find(|(_, _, o)| o.remote == Some(id))
                .map(|(index, generation, _)| CmIdHandle { index, generation })
        });
        let here = dev.unwrap_or(0);
        let there = self.cm_id(id, v)?.remote_dev;
        if let Some(r) = remote {
            match state {
                IdState::Connect(Conn::Established) if !ud => {
                    self.cm_send(here, there, Action::Dreq { to: r });
                }
                IdState::Connect(Conn::ReqSent | Conn::ReqRcvd | Conn::RepSent | Conn::RepRcvd)
                    if !ud =>
                {
                    self.cm_send(
                        here,
                        there,
                        Action::Rej {
                            to: r,
                            reason: reject_reason::TIMEOUT,
                            data: Vec::new(),
                        },
                    );
                }
                _ => {}
            }
        }
        self.cm_forget_id(id);
        Ok(())
    }

    /// Removes `id` and the events queued for it; connection requests it
    /// received as a listener and nobody fetched yet are rejected and their
    /// new ids removed too.
    pub(super) fn cm_forget_id(&mut self, id: CmIdHandle) {
        let Some(i) = self.cm.ids.remove(id.index, id.generation) else {
            return;
        };
        let mut orphans = Vec::new();
        if let Some(c) = self
            .cm
            .channels
            .get_mut(i.channel.index, i.channel.generation)
        {
            c.ids -= 1;
            c.events.retain(|e| {
                if e.listen_id == Some(id) {
                    orphans.push(e.id);
                }
                e.id != id && e.listen_id != Some(id)
            });
        }
        if let Some(d) = i.dev {
            self.cm_detach_dev(i.process, d);
        }
        self.cm_forget_joins(i.joins);
        for o in orphans {
            if let Some(n) = self.cm.ids.get(o.index, o.generation) {
                let (here, there, remote) = (n.dev.unwrap_or(0), n.remote_dev, n.remote);
                if let Some(r) = remote {
                    let action = if n.ud {
                        Action::SidrRep {
                            to: r,
                            status: reject_reason::SIDR_UNSUPPORTED,
                            data: Vec::new(),
                            qpn: 0,
                        }
                    } else {
                        Action::Rej {
                            to: r,
                            reason: reject_reason::TIMEOUT,
                            data: Vec::new(),
                        }
                    };
                    self.cm_send(here, there, action);
                }
            }
            self.cm_forget_id(o);
        }
    }

    /// `rdma_bind_addr`: `EINVAL` unless idle, `EADDRNOTAVAIL` for an
    /// address no device owns, `EADDRINUSE`/`EADDRNOTAVAIL` for a taken port.
    pub fn rdma_bind_addr(&mut self, id: CmIdHandle, addr: SocketAddr) -> Result<()> {
        self.cm_bind(id, addr, Verb::RdmaBindAddr)
    }

    /// `rdma_resolve_addr`: binds first if idle; `ADDR_RESOLVED` after
    /// `addr_resolve_ns`, or `ADDR_ERROR` (`-ETIMEDOUT`) after `timeout_ms`
    /// for an address no device owns.
    pub fn rdma_resolve_addr(
        &mut self,
        id: CmIdHandle,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        let v = Verb::RdmaResolveAddr;
        let i = self.cm_id(id, v)?;
        if let Some(s) = src {
            if s.is_ipv4() != dst.is_ipv4() {
                return Err(invalid(
                    v,
                    format!("src {s} and dst {dst} are of different families"),
                ));
            }
        }
        if i.state == IdState::Idle {
            let any = match dst {
                SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
                SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
            };
            self.cm_bind(id, src.unwrap_or(any), v)?;
        }
        let i = self.cm_id(id, v)?;
        if i.state != IdState::AddrBound {
            return Err(invalid(
                v,
                format!(
                    "rdma_resolve_addr needs an idle or bound id (state {:?})",
                    i.state
                ),
            ));
        }
        let bound_dev = i.dev;
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::AddrQuery;
        i.peer = Some(dst);
        i.gen += 1;
        let gen = i.gen;
        // A multicast destination resolves to the device the id is bound
        // to (device 0 for a wildcard), as the kernel's address resolution
        // finds the interface a group is reached through: mckey resolves
        // its group before it joins.
        let group = dst.ip().is_multicast().then(|| bound_dev.unwrap_or(0));
        match group.or_else(|| self.cm_device_of(dst.ip())) {
            Some(d) if !is_any(dst.ip()) => {
                let dev = bound_dev.unwrap_or(d);
                let delay = self.config.cm.addr_resolve_ns;
                self.cm_schedule(delay, Action::AddrResolved { id, gen, dev });
            }
            _ => {
                let delay = u64::from(timeout_ms) * 1_000_000;
                self.cm_schedule(delay, Action::AddrError { id, gen });
            }
        }
        Ok(())
    }

    /// `rdma_resolve_route`: `EINVAL` unless the address is resolved.
    ///
    /// With port 1 of the id's device or of the destination's down the path
    /// query is lost: `ROUTE_ERROR` (`-ETIMEDOUT`) after `timeout_ms`.
    pub fn rdma_resolve_route(&mut self, id: CmIdHandle, timeout_ms: u32) -> Result<()> {
        let v = Verb::RdmaResolveRoute;
        let i = self.cm_id(id, v)?;
        let here = i.dev.unwrap_or(0);
        let there = i
            .peer
            .and_then(|p| self.cm_device_of(p.ip()))
            .unwrap_or(here);
        let up = self.cm_path_up(here, there);
        let i = self.cm_id_mut(id, v)?;
        if i.state != IdState::AddrResolved {
            return Err(invalid(
                v,
                format!(
                    "rdma_resolve_route needs a resolved address (ADDR_RESOLVED first; state {:?})",
                    i.state
                ),
            ));
        }
        i.state = IdState::RouteQuery;
        i.gen += 1;
        let gen = i.gen;
        if up {
            let delay = self.config.cm.route_resolve_ns;
            self.cm_schedule(delay, Action::RouteResolved { id, gen });
        } else {
            let delay = u64::from(timeout_ms) * 1_000_000;
            self.cm_schedule(delay, Action::RouteError { id, gen });
        }
        Ok(())
    }

    /// `rdma_listen`: binds to the IPv4 wildcard first if idle; `EINVAL`
    /// unless bound.
    pub fn rdma_listen(&mut self, id: CmIdHandle, _backlog: i32) -> Result<()> {
        let v = Verb::RdmaListen;
        if self.cm_id(id, v)?.state == IdState::Idle {
            self.cm_bind(id, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), v)?;
        }
        let i = self.cm_id_mut(id, v)?;
        if i.state != IdState::AddrBound {
            return Err(invalid(
                v,
                format!("rdma_listen needs a bound id (state {:?})", i.state),
            ));
        }
        i.state = IdState::Listen;
        Ok(())
    }
}
