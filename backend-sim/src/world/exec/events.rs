//! The event loop and the executor's plumbing: handing packets to the
//! fabric, processing due events in virtual time (deliveries, ACK, RNR and
//! CM timers), fault rules and links, the counters the benchmarks read,
//! and the data path's side of QP state changes and destruction.

use super::*;

impl World {
    pub(super) fn instant(&self) -> SimInstant {
        SimInstant::from_nanos(self.now_ns)
    }

    /// True while anything can still happen without a new input: packets
    /// on the wire or an armed retransmission/RNR timer.
    pub(crate) fn busy(&self) -> bool {
        self.fabric.in_flight() > 0 || self.live_timers > 0
    }

    /// The live QP at `ep`, if any.
    pub(in crate::world) fn qp_at(&self, ep: Endpoint) -> Option<QpHandle> {
        let d = self.devices.get(usize::from(ep.device.0))?;
        let index = d.qpns.get(ep.qpn)?;
        let (generation, q) = self.qps.get_by_index(index)?;
        (q.qp_num == ep.qpn && q.device == u32::from(ep.device.0))
            .then_some(QpHandle { index, generation })
    }

    /// Hands `packet` to the fabric now.
    pub(in crate::world) fn wire(&mut self, packet: Packet) {
        let now = self.now_ns;
        self.wire_at(packet, now);
    }

    /// Takes the arrival `peek_arrival` showed off the fabric (recorded as
    /// the event loop's pop would) and moves virtual time to it: the step
    /// the batching paths (`absorb_writes`, `absorb_answers`) share.
    /// Inlined into `absorb_answers` (a READ crosses the fabric twice);
    /// `absorb_writes`, whose loop is register-bound already, calls
    /// [`Self::take_peeked_arrival_call`] (measured both ways, callgrind).
    #[inline(always)]
    pub(in crate::world) fn take_peeked_arrival(&mut self, peeked: crate::fabric::Peeked) {
        let Self {
            fabric,
            trace,
            drops,
            ..
        } = self;
        fabric.take_peeked(peeked, &mut Sink { trace, drops });
        self.now_ns = self.now_ns.max(peeked.at.as_nanos());
    }

    /// [`Self::take_peeked_arrival`] out of line.
    #[inline(never)]
    pub(in crate::world) fn take_peeked_arrival_call(&mut self, peeked: crate::fabric::Peeked) {
        self.take_peeked_arrival(peeked);
    }

    /// Puts `packet` on the fabric, leaving the adapter at `depart_ns`
    /// (the adapter model's delays; `now` without one).
    pub(in crate::world) fn wire_at(&mut self, packet: Packet, depart_ns: u64) {
        let now = self.instant();
        let depart = SimInstant::from_nanos(depart_ns.max(now.as_nanos()));
        let Self {
            fabric,
            trace,
            drops,
            ..
        } = self;
        // A full event queue loses the packet, as congestion would; the
        // sender's reliability (or its absence) takes it from there.
        let _ = fabric.send_at(now, depart, packet, &mut Sink { trace, drops });
        self.settle_drops();
    }

    /// [`Self::wire_at`] through [`crate::fabric::Fabric::send_routed`]
    /// when the fabric gives a clear route between the packet's ports
    /// (`Fabric::clear_route`: then `send_at` would only serialise it and
    /// queue it in order, which `send_routed` does with the same record,
    /// timing and queue sequence); otherwise `wire_at` itself. For the
    /// answers to READs and atomics, one packet each (always inlined: a
    /// call costs as much as the rest of it here).
    #[inline(always)]
    pub(in crate::world) fn wire_routed(&mut self, packet: Packet, depart_ns: u64) {
        let Some(route) = self.fabric.clear_route(packet.source, packet.destination) else {
            self.wire_at(packet, depart_ns);
            return;
        };
        let now = self.instant();
        let depart = SimInstant::from_nanos(depart_ns.max(now.as_nanos()));
        let Self {
            fabric,
            trace,
            drops,
            ..
        } = self;
        // A full event queue loses the packet, as `wire_at` does.
        let _ = fabric.send_routed(now, depart, route, packet, &mut Sink { trace, drops });
        self.settle_drops();
    }

    /// Completes unreliable requests whose last packet the fabric dropped.
    #[inline]
    pub(super) fn settle_drops(&mut self) {
        if !self.drops.is_empty() {
            self.settle_drops_slow();
        }
    }

    #[inline(never)]
    pub(super) fn settle_drops_slow(&mut self) {
        let mut drops = core::mem::take(&mut self.drops);
        for p in drops.drain(..) {
            self.unreliable_departed(&p);
        }
        if self.drops.is_empty() {
            self.drops = drops;
        }
    }

    pub(super) fn schedule(&mut self, at: u64, kind: TimerKind, owner: u32, generation: u32) {
        let _ = self.fabric.schedule_timer(
            SimInstant::from_nanos(at),
            TimerEvent {
                kind,
                owner,
                generation,
            },
        );
    }

    pub(super) fn next_timer_gen(&mut self) -> u32 {
        self.timer_seq = self.timer_seq.wrapping_add(1);
        self.timer_seq
    }

    /// Processes events in time order until `stop` holds, nothing is left
    /// to do, the next event is past `horizon`, or `budget` events ran.
    /// Returns false when the budget ran out first.
    ///
    /// `stop` may read only what bumps `stop_epoch` when it changes: the
    /// completion queues (`push_completion`) and the CM event channels
    /// (`cm_event`); its callers read a CQ's entries, a CM channel's
    /// events, or nothing. `absorb_writes` asks it once per batch of WRITEs
    /// (which write no completion), `absorb_answers` again only after a
    /// bump.
    pub(crate) fn run_events(
        &mut self,
        horizon: Option<u64>,
        budget: u64,
        mut stop: impl FnMut(&Self) -> bool,
    ) -> bool {
        let horizon = match (horizon, self.time_limit) {
            (Some(h), Some(l)) => Some(h.min(l)),
            (h, l) => h.or(l),
        };
        let mut n = 0u64;
        loop {
            if stop(self) {
                return true;
            }
            let Some(next) = self.fabric.next_event_time() else {
                return true;
            };
            let next = next.as_nanos();
            if horizon.is_some_and(|h| next > h) {
                return true;
            }
            if horizon.is_none() && !self.busy() {
                return true;
            }
            if n >= budget {
                return false;
            }
            n += 1;
            let at = SimInstant::from_nanos(next.max(self.now_ns));
            let Self {
                fabric,
                trace,
                drops,
                ..
            } = self;
            let popped = fabric.pop_due(at, &mut Sink { trace, drops });
            self.now_ns = self.now_ns.max(next);
            self.settle_drops();
            if let Some((t, event)) = popped {
                self.now_ns = self.now_ns.max(t.as_nanos());
                self.run_from = None;
                self.on_event(event);
                // The rest of an in-order message in one step
                // (world/exec/run.rs), or the packets of an out-of-order
                // one that follow at once (world/exec/ooo_run.rs).
                if let (FabricEvent::Delivered(p), true) = (event, self.config.fast_paths) {
                    if self.run_from.is_none() && answers::is_answer_traffic(p.opcode) {
                        // READs, atomics and their answers back to back
                        // (exec/answers.rs).
                        n += self.absorb_answers(horizon, budget - n, &mut stop);
                    } else if self.run_from.is_some() {
                        n += if p.opcode == Opcode::RdmaWrite(crate::fabric::SegmentPosition::Only)
                        {
                            // Single-packet WRITEs back to back (exec/fast.rs).
                            self.absorb_writes(&p, horizon, budget - n, &mut stop)
                        } else {
                            self.absorb_run(&p, horizon, budget - n, &mut stop)
                        };
                    }
                }
            }
        }
    }

    /// Packets the fabric has put on the wire so far, every port together
    /// (retransmissions included): the unit of `sim_fault_overhead`'s
    /// per-packet cost.
    pub fn packets_sent(&self) -> u64 {
        self.fabric.packets_sent()
    }

    /// Events the fabric has handed to the world so far (deliveries and
    /// timers): the unit of `sim_scale`'s event rate.
    pub fn events_handled(&self) -> u64 {
        self.fabric.events_handled()
    }

    /// The heap bytes the simulator holds for `qp`, as `(own, rings)`:
    /// `own` is its slot in the QP arena, what it owns out of line apart
    /// from its work-queue rings (multicast list, alternate path, atomic
    /// replay table, SRQ SGE buffer) and its entry in the device's
    /// QP-number table; `rings` is its send and receive rings' storage
    /// (perf.md's `sim_scale`: at most 2 KiB per idle QP plus its rings).
    /// Accounted from sizes and capacities, like
    /// [`World::dct_heap_bytes`].
    pub fn qp_heap_bytes(&self, qp: QpHandle) -> Option<(usize, usize)> {
        let q = self.qps.get(qp.index, qp.generation)?;
        let own = self.qps.slot_bytes()
            + q.mcast.heap_bytes()
            + q.alt
                .as_ref()
                .map_or(0, |_| size_of::<crate::world::state::AltPath>())
            + q.rx.heap_bytes()
            + crate::world::QpnTable::ENTRY_BYTES;
        Some((own, q.sq.heap_bytes() + q.rq.heap_bytes()))
    }

    /// `RunUntilIdle`: false if the bound was hit with work left.
    pub fn run_until_idle(&mut self) -> bool {
        self.run_events(None, RUN_EVENT_BUDGET, |_| false)
    }

    /// Installs a fault rule (`SimCommand::Fault`): on every packet, or on
    /// those from (`Some((true, qp))`) or to (`Some((false, qp))`) a QP.
    pub(crate) fn install_fault(
        &mut self,
        scope: Option<(bool, QpHandle)>,
        action: verbs_api::FaultAction,
        when: verbs_api::FaultWhen,
    ) -> verbs_api::Result<()> {
        let v = verbs_api::Verb::SimControl;
        // A delay of any length is accepted: the packet it holds back lands
        // by the virtual-time horizon at the latest (the fabric clamps its
        // arrival), so no sum of a time and a delay can overflow.
        let scope = match scope {
            None => RuleScope::All,
            Some((from, qp)) => {
                let q = self.qp(qp, v)?;
                let (device, qpn) = (DeviceIndex(q.device as u16), q.qp_num);
                if from {
                    RuleScope::From { device, qpn }
                } else {
                    RuleScope::To { device, qpn }
                }
            }
        };
        let rule = FaultRule::new(scope, action, when)
            .map_err(|e| crate::world::invalid(v, format!("fault: {e}")))?;
        self.fabric.install_rule(rule);
        Ok(())
    }

    /// Removes every fault rule (`SimCommand::ClearFaults`).
    pub(crate) fn clear_faults(&mut self) {
        self.fabric.clear_rules();
    }

    /// Takes a port's link down or up (`SimCommand::Link`).
    pub(crate) fn set_link(&mut self, device: u32, port: u8, up: bool) -> verbs_api::Result<()> {
        let v = verbs_api::Verb::SimControl;
        let pr = crate::fabric::PortRef {
            device: DeviceIndex(u16::try_from(device).unwrap_or(u16::MAX)),
            port,
        };
        let now = self.instant();
        let Self {
            fabric,
            trace,
            drops,
            ..
        } = self;
        fabric
            .set_link(now, pr, up, &mut Sink { trace, drops })
            .map_err(|e| crate::world::invalid(v, format!("link: {e}")))?;
        self.settle_drops();
        Ok(())
    }

    pub(super) fn on_event(&mut self, event: FabricEvent) {
        match event {
            FabricEvent::Delivered(p) => match p.opcode {
                Opcode::Acknowledge(s) => self.on_ack(&p, s),
                Opcode::ReadResponse(_) => self.on_read_response(&p),
                Opcode::AtomicAcknowledge => self.on_atomic_ack(&p),
                _ => {
                    if let Some(sender) = self.on_request(&p) {
                        self.unreliable_done(sender, &p);
                    }
                }
            },
            FabricEvent::Timer(t) => match t.kind {
                TimerKind::AckTimeout => self.on_ack_timer(t),
                TimerKind::RnrRetry => self.on_rnr_timer(t),
                TimerKind::Scheduled => self.cm_timer(t),
                _ => {}
            },
        }
    }

    /// The data path's side of a state change (called by `set_state` after
    /// the phase changed and queues were flushed or discarded).
    #[inline(always)]
    pub(crate) fn exec_on_state(&mut self, qp: QpHandle, from: QpState, to: QpState) {
        // INIT (and INIT->INIT) concerns neither side of the data path.
        if to == QpState::Init || (to == from && to != QpState::ReadyToSend) {
            return;
        }
        if to == QpState::ReadyToSend {
            return self.exec_enter_rts(qp, from);
        }
        self.exec_on_state_changed(qp, from, to);
    }

    /// Entering RTS (or staying there): from RTR the requester starts at
    /// `sq_psn` with the first unfinished request; the retry budgets are
    /// reloaded, the send queue unblocked and kicked.
    #[inline]
    fn exec_enter_rts(&mut self, qp: QpHandle, from: QpState) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let (sq_psn, retry_cnt, rnr_retry) = q
            .phase
            .requester()
            .map_or((0, 0, 0), |r| (r.sq_psn, r.retry_cnt, r.rnr_retry));
        if from == QpState::ReadyToReceive {
            q.tx.next_psn = Psn::new(sq_psn);
            q.tx.send_seq = q.sq.done;
        }
        q.tx.retry = RetryCounters::new(retry_cnt, rnr_retry);
        q.tx.blocked = false;
        // `kick` has nothing to do otherwise (it tests the same).
        if q.tx.send_seq < q.sq.tail {
            self.kick(qp);
        }
    }

    /// [`Self::exec_on_state`] for a change the data path sees.
    #[inline(never)]
    fn exec_on_state_changed(&mut self, qp: QpHandle, from: QpState, to: QpState) {
        match to {
            QpState::ReadyToSend => self.exec_enter_rts(qp, from),
            QpState::ReadyToReceive if from != QpState::ReadyToReceive => self.exec_enter_rtr(qp),
            QpState::Reset => {
                let Some(q) = self.qps.get(qp.index, qp.generation) else {
                    return;
                };
                // `disarm_tx` has nothing to stop without a timer armed or
                // an RNR wait.
                if q.tx.ack_deadline.is_some() || q.tx.rnr_wait {
                    self.disarm_tx(qp);
                }
                if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                    let srq_sges = core::mem::take(&mut q.rx.srq_sges);
                    // The ring keeps its sequence numbers across RESET (its
                    // slots are discarded, not renumbered): nothing before
                    // the tail is left to transmit.
                    q.tx = Tx {
                        send_seq: q.sq.tail,
                        ..Tx::default()
                    };
                    q.rx = Rx {
                        srq_sges,
                        ..Default::default()
                    };
                }
            }
            QpState::Error | QpState::SendQueueError => {
                let Some(q) = self.qps.get(qp.index, qp.generation) else {
                    return;
                };
                // (`disarm_tx` has nothing to stop otherwise.)
                if q.tx.ack_deadline.is_some() || q.tx.rnr_wait {
                    self.disarm_tx(qp);
                }
                if to == QpState::Error {
                    self.flush_rx_message(qp);
                } else {
                    self.flush_queue(qp, QueueKind::Send);
                }
                if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                    q.tx.send_seq = q.sq.tail;
                    q.tx.blocked = false;
                    q.tx.rd_atomic = 0;
                }
            }
            QpState::SendQueueDrain => {
                if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                    let req = q.phase.requester();
                    q.tx.retry = RetryCounters::new(
                        req.map_or(0, |r| r.retry_cnt),
                        req.map_or(0, |r| r.rnr_retry),
                    );
                } else {
                    return;
                }
                self.check_drained(qp);
            }
            _ => {}
        }
    }

    /// Entering RTR (from another state): the QP's own endpoint, the
    /// connected peer and the path MTU, a fresh timer generation and an
    /// empty responder.
    fn exec_enter_rtr(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        let device = q.device;
        let b = q.phase.bound().copied().unwrap_or_default();
        let p = q.phase.path().copied().unwrap_or_default();
        let src = self.endpoint_of(device, q.qp_num, b);
        let class = q.class;
        let port_mtu = self.devices[device as usize].profile.port.active_mtu;
        let (dest, mtu) = match class {
            QpClass::Ud => (NOWHERE, port_mtu.bytes().unwrap_or(4096)),
            _ => {
                let addr = if p.ah.is_global {
                    Address::Gid(p.ah.grh.dgid)
                } else {
                    Address::Lid(p.ah.dlid)
                };
                let dest = self.fabric.resolve(&addr).map_or(NOWHERE, |port| Endpoint {
                    qpn: p.dest_qpn & 0xff_ffff,
                    device: port.device,
                    port: port.port,
                });
                (dest, p.path_mtu.bytes().unwrap_or(4096))
            }
        };
        // A fresh timer generation: events queued by an earlier life
        // of this QP slot never match.
        let generation = self.next_timer_gen();
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.tx.ack_gen = generation;
        q.tx.ack_queued = false;
        q.rx.epsn = Psn::new(p.rq_psn);
        q.rx.nak_sent = false;
        q.rx.msg = RxMsg::default();
        q.tx.src = src;
        q.tx.dest = dest;
        q.tx.mtu = mtu;
    }

    /// True while a QP in SQD still has transmitted requests outstanding
    /// (entering SQD raises SQ_DRAINED only after they finish).
    pub(crate) fn sq_in_flight(&self, qp: QpHandle) -> bool {
        self.qps
            .get(qp.index, qp.generation)
            .is_some_and(|q| q.sq.done < q.sq.tail && q.sq.wqe(q.sq.done).transmitted)
    }

    /// SQD: once nothing transmitted is outstanding, the drain is over
    /// (SQ_DRAINED if `en_sqd_async_notify`, qp-state-machine.md §7).
    #[inline]
    pub(super) fn check_drained(&mut self, qp: QpHandle) {
        // Only a QP in SQD with the drain still pending has anything to do
        // (checked here so the common case costs no call).
        if self
            .qps
            .get(qp.index, qp.generation)
            .is_some_and(|q| matches!(q.phase, QpPhase::SendQueueDrain(_, _, _, true)))
        {
            self.check_drained_slow(qp);
        }
    }

    #[inline(never)]
    fn check_drained_slow(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if let QpPhase::SendQueueDrain(b, p, r, true) = q.phase {
            // Transmission is in order: nothing in flight when the oldest
            // uncompleted request was never transmitted (or there is none).
            if q.sq.done >= q.sq.tail || !q.sq.wqe(q.sq.done).transmitted {
                q.phase = QpPhase::SendQueueDrain(b, p, r, false);
                let ctx = q.ctx;
                if r.en_sqd_async_notify {
                    self.raise_async(
                        ctx,
                        AsyncEventType::SqDrained,
                        crate::world::AsyncSubject::Qp(qp),
                    );
                }
            }
        }
    }

    pub(super) fn endpoint_of(&self, device: u32, qpn: u32, b: Bound) -> Endpoint {
        Endpoint {
            qpn,
            device: DeviceIndex(device as u16),
            port: b.port_num.max(1),
        }
    }

    /// Before a QP is destroyed: its timers stop counting as live work.
    pub(crate) fn exec_on_destroy(&mut self, qp: QpHandle) {
        self.disarm_tx(qp);
    }

    pub(super) fn disarm_tx(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let mut n = 0;
        if q.tx.ack_deadline.take().is_some() {
            n += 1;
        }
        if core::mem::take(&mut q.tx.rnr_wait) {
            // A parked RNR wait has no timer (`unpark_rnr`).
            if let Some(i) = self.rnr_parked.iter().position(|&p| p == qp) {
                self.rnr_parked.remove(i);
            } else {
                n += 1;
            }
        }
        self.live_timers -= n;
    }

    /// Entering ERR with an SRQ receive WQE half-filled: it completes with
    /// WR_FLUSH_ERR (an RQ one is flushed with the rest of the RQ).
    pub(super) fn flush_rx_message(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let msg = core::mem::take(&mut q.rx.msg);
        if let Some(recv) = msg.recv {
            if recv.srq.is_some() {
                let wc = Wc {
                    wr_id: recv.wr_id,
                    status: WcStatus::WrFlushErr,
                    opcode: WcOpcode::Recv,
                    qp_num: q.qp_num,
                    ..Wc::default()
                };
                self.complete_recv(qp, recv, wc, false);
            }
        }
    }
}
