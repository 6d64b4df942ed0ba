//! The connection manager's plumbing: lookups, events, the address plan and the wire (see `super`).

use super::*;

impl World {
    // ------------------------------------------------------------ plumbing

    pub(super) fn cm_id(&self, id: CmIdHandle, verb: Verb) -> Result<&CmId> {
        self.cm.ids.get(id.index, id.generation).ok_or_else(|| {
            invalid(
                verb,
                format!("invalid or destroyed rdma_cm id handle {id:?}"),
            )
        })
    }

    pub(super) fn cm_id_mut(&mut self, id: CmIdHandle, verb: Verb) -> Result<&mut CmId> {
        self.cm.ids.get_mut(id.index, id.generation).ok_or_else(|| {
            invalid(
                verb,
                format!("invalid or destroyed rdma_cm id handle {id:?}"),
            )
        })
    }

    /// Schedules `action` at `now + delay`.
    pub(super) fn cm_schedule(&mut self, delay: u64, action: Action) {
        let at = self.now_ns.saturating_add(delay);
        let slot = match self.cm.free.pop() {
            Some(s) => {
                self.cm.actions[s as usize] = Some(action);
                s
            }
            None => {
                self.cm.actions.push(Some(action));
                (self.cm.actions.len() - 1) as u32
            }
        };
        let timer = TimerEvent {
            kind: TimerKind::Scheduled,
            owner: CM_TIMER_TAG | slot,
            generation: 0,
        };
        if self
            .fabric
            .schedule_timer(SimInstant::from_nanos(at), timer)
            .is_ok()
        {
            self.cm.pending += 1;
        } else {
            // A full event queue loses the message, as congestion would.
            self.cm.actions[slot as usize] = None;
            self.cm.free.push(slot);
        }
    }

    /// A [`TimerKind::Scheduled`] timer fired; runs it if it is the CM's.
    pub(crate) fn cm_timer(&mut self, t: TimerEvent) {
        if t.owner & CM_TIMER_TAG == 0 {
            return;
        }
        let slot = (t.owner & !CM_TIMER_TAG) as usize;
        let Some(action) = self.cm.actions.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.cm.free.push(slot as u32);
        self.cm.pending -= 1;
        self.cm_run(action);
    }

    /// Queues an event on the channel of `id` (and traces it).
    pub(super) fn cm_event(&mut self, id: CmIdHandle, ev: QueuedEvent) {
        let Some(i) = self.cm.ids.get(id.index, id.generation) else {
            return;
        };
        let ch = i.channel;
        let device = i.dev.unwrap_or(u32::MAX);
        self.record(TraceEvent::CmEvent {
            device,
            id: id.index,
            event: ev.event,
            status: ev.status,
        });
        if let Some(c) = self.cm.channels.get_mut(ch.index, ch.generation) {
            c.events.push_back(ev);
        }
        self.stop_epoch = self.stop_epoch.wrapping_add(1);
    }

    pub(super) fn cm_simple_event(&mut self, id: CmIdHandle, event: CmEventType, status: i32) {
        self.cm_event(
            id,
            QueuedEvent {
                event,
                id,
                listen_id: None,
                status,
                conn: ConnParam::default(),
                mc: None,
            },
        );
    }

    /// True when both ports of a CM message's path are up.
    pub(super) fn cm_path_up(&self, a: u32, b: u32) -> bool {
        let up = |d: u32| {
            self.fabric
                .link_up(PortRef {
                    device: DeviceIndex(u16::try_from(d).unwrap_or(u16::MAX)),
                    port: 1,
                })
                .unwrap_or(false)
        };
        up(a) && up(b)
    }

    /// Sends a CM message from device `a` to device `b` (lost if a link is down).
    pub(super) fn cm_send(&mut self, a: u32, b: u32, action: Action) {
        if self.cm_path_up(a, b) {
            let lat = self.config.cm.msg_latency_ns;
            self.cm_schedule(lat, action);
        }
    }

    pub(super) fn cm_next_psn(&mut self) -> u32 {
        self.cm.psn_seq += 1;
        (splitmix(self.config.seed ^ 0x636d_5f70_736e ^ self.cm.psn_seq) & 0xff_ffff) as u32
    }

    /// The device owning `ip` (its port 1), loopback → device 0.
    pub(super) fn cm_device_of(&self, ip: IpAddr) -> Option<u32> {
        if ip.is_loopback() {
            return (!self.devices.is_empty()).then_some(0);
        }
        (0..self.devices.len() as u32).find(|&d| match ip {
            IpAddr::V4(a) => a == device_ipv4(d),
            IpAddr::V6(a) => a == device_ipv6(d),
        })
    }

    pub(super) fn cm_device_addr(dev: u32, v6: bool) -> IpAddr {
        if v6 {
            IpAddr::V6(device_ipv6(dev))
        } else {
            IpAddr::V4(device_ipv4(dev))
        }
    }

    /// The CM's context for `dev` in `process`, opened on first use.
    pub(super) fn cm_dev_ctx(&mut self, process: ProcessId, dev: u32) -> Result<ContextHandle> {
        if let Some(d) = self.cm.devs.get(&(process, dev)) {
            return Ok(d.ctx);
        }
        let ctx = self.open_device(dev as usize, process)?;
        self.cm.devs.insert(
            (process, dev),
            CmDevice {
                ctx,
                pd: None,
                bound: 0,
            },
        );
        Ok(ctx)
    }

    /// Binds `id` to `dev`: the default PD of the id's process on the
    /// device is allocated with the first id (librdmacm `ucma_get_device`).
    pub(super) fn cm_attach_dev(&mut self, id: CmIdHandle, dev: u32, verb: Verb) -> Result<()> {
        let key = (self.cm_id(id, verb)?.process, dev);
        let ctx = self.cm_dev_ctx(key.0, dev).map_err(|e| reverb(e, verb))?;
        let has_pd = self.cm.devs.get(&key).and_then(|d| d.pd).is_some();
        if !has_pd {
            let pd = self.alloc_pd(ctx)?;
            if let Some(d) = self.cm.devs.get_mut(&key) {
                d.pd = Some(pd);
            }
        }
        if let Some(d) = self.cm.devs.get_mut(&key) {
            d.bound += 1;
        }
        self.cm_id_mut(id, verb)?.dev = Some(dev);
        Ok(())
    }

    /// An id of `process` leaves its device: the default PD goes with the
    /// process's last id there, if nothing uses it any more (librdmacm
    /// `ucma_put_device`; a PD still in use stays allocated and is reused).
    pub(super) fn cm_detach_dev(&mut self, process: ProcessId, dev: u32) {
        let key = (process, dev);
        let Some(d) = self.cm.devs.get_mut(&key) else {
            return;
        };
        d.bound = d.bound.saturating_sub(1);
        if d.bound > 0 {
            return;
        }
        if let Some(pd) = d.pd {
            if self.dealloc_pd(pd).is_ok() {
                if let Some(d) = self.cm.devs.get_mut(&key) {
                    d.pd = None;
                }
            }
        }
    }

    /// Process `process` is gone (its librdmacm unloaded): closes the CM's
    /// contexts it had, with their default PDs, on every device where none
    /// of its ids is bound any more. Returns how many contexts closed; a
    /// context something still lives in stays (and is closed by a later
    /// call). The shared fabric calls this when a process family ends.
    pub fn cm_process_exit(&mut self, process: ProcessId) -> usize {
        let keys: Vec<(ProcessId, u32)> = self
            .cm
            .devs
            .iter()
            .filter(|(k, d)| k.0 == process && d.bound == 0)
            .map(|(k, _)| *k)
            .collect();
        let mut closed = 0;
        for key in keys {
            let Some(d) = self.cm.devs.get(&key) else {
                continue;
            };
            let (ctx, pd) = (d.ctx, d.pd);
            if let Some(pd) = pd {
                if self.dealloc_pd(pd).is_err() {
                    continue;
                }
                if let Some(d) = self.cm.devs.get_mut(&key) {
                    d.pd = None;
                }
            }
            if self.close_device(ctx).is_ok() {
                self.cm.devs.remove(&key);
                closed += 1;
            }
        }
        closed
    }

    /// Whether `(ps, addr)` may be bound by `me` (kernel `cma_check_port`):
    /// a wildcard on either side conflicts with `EADDRNOTAVAIL`, the same
    /// address with `EADDRINUSE`.
    pub(super) fn cm_check_port(
        &self,
        me: Option<CmIdHandle>,
        ps: PortSpace,
        addr: SocketAddr,
    ) -> Result<()> {
        for (index, generation, other) in self.cm.ids.iter() {
            if me.is_some_and(|m| m.index == index && m.generation == generation) {
                continue;
            }
            let Some(o) = other.local.filter(|_| other.owns_port && other.ps == ps) else {
                continue;
            };
            if o.port() != addr.port() {
                continue;
            }
            // `afonly` is set for IPv4 ids only (IPv6 ones follow
            // bindv6only = 0), so ids of both families share a port space.
            if is_any(o.ip()) || is_any(addr.ip()) {
                return Err(Error::from_errno(
                    Verb::RdmaBindAddr,
                    EADDRNOTAVAIL,
                    format!(
                        "port {} of {ps} is already bound to {o} (a wildcard on either side conflicts)",
                        addr.port()
                    ),
                ));
            }
            if o.ip() == addr.ip() {
                return Err(Error::from_errno(
                    Verb::RdmaBindAddr,
                    EADDRINUSE,
                    format!("{addr} is already bound in {ps}"),
                ));
            }
        }
        Ok(())
    }

    /// A free ephemeral port for `addr` in `ps`.
    pub(super) fn cm_ephemeral(&mut self, ps: PortSpace, addr: SocketAddr) -> Result<u16> {
        let c = &self.config.cm;
        let (first, last) = (c.ephemeral_first, c.ephemeral_last.max(c.ephemeral_first));
        let span = u32::from(last - first) + 1;
        for _ in 0..span {
            let p = if (first..=last).contains(&self.cm.next_port) {
                self.cm.next_port
            } else {
                first
            };
            self.cm.next_port = if p >= last { first } else { p + 1 };
            let mut a = addr;
            a.set_port(p);
            if self.cm_check_port(None, ps, a).is_ok() {
                return Ok(p);
            }
        }
        Err(Error::from_errno(
            Verb::RdmaBindAddr,
            EADDRINUSE,
            "no free ephemeral port",
        ))
    }

    /// `rdma_bind_addr`'s work (also the implicit binds of resolve/listen).
    pub(super) fn cm_bind(&mut self, id: CmIdHandle, addr: SocketAddr, verb: Verb) -> Result<()> {
        let i = self.cm_id(id, verb)?;
        if i.state != IdState::Idle {
            return Err(invalid(
                verb,
                format!(
                    "the id is not idle (state {:?}): it is already bound",
                    i.state
                ),
            ));
        }
        let ps = i.ps;
        let dev = if is_any(addr.ip()) || addr.ip().is_loopback() {
            None
        } else {
            Some(self.cm_device_of(addr.ip()).ok_or_else(|| {
                Error::from_errno(
                    verb,
                    EADDRNOTAVAIL,
                    format!(
                        "no simulated device owns {} (see docs/rdma-cm.md, address plan)",
                        addr.ip()
                    ),
                )
            })?)
        };
        let mut addr = addr;
        if addr.port() == 0 {
            addr.set_port(self.cm_ephemeral(ps, addr).map_err(|e| reverb(e, verb))?);
        } else {
            self.cm_check_port(Some(id), ps, addr)
                .map_err(|e| reverb(e, verb))?;
        }
        if let Some(d) = dev {
            self.cm_attach_dev(id, d, verb)?;
        }
        let i = self.cm_id_mut(id, verb)?;
        i.local = Some(addr);
        i.owns_port = true;
        i.state = IdState::AddrBound;
        Ok(())
    }
}
