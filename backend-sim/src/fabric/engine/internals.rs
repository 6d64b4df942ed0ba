//! The fabric's internals: serialising a packet on its port, asking the
//! rules, queueing a delivery in its port's arrival FIFO or the heap,
//! handing one out, and holding packets back for reordering.

use super::*;

impl Fabric {
    pub(super) fn observe(&mut self, now: SimInstant) -> Result<(), FabricError> {
        if now < self.latest {
            return Err(FabricError::TimeWentBackwards {
                now,
                latest: self.latest,
            });
        }
        self.latest = now;
        Ok(())
    }

    /// Occupies the source port for the packet's wire time and returns
    /// when it arrives.
    #[inline]
    pub(super) fn serialise(&mut self, src: usize, now: SimInstant, packet: &Packet) -> SimInstant {
        let port = &mut self.ports[src];
        // Payload is padded to a multiple of 4 bytes (BTH PadCnt).
        let payload = u64::from(packet.payload_len).div_ceil(4) * 4;
        let wire_bytes = payload
            + u64::from(port.config.header_overhead_bytes)
            + u64::from(packet.wire_header_extra_bytes());
        let serialisation_ps = (wire_bytes * port.ps_per_byte_q16) >> 16;
        let start_ps = now.0.saturating_mul(1_000).max(port.busy_until_ps);
        port.busy_until_ps = start_ps.saturating_add(serialisation_ps);
        let mut arrive_ps = port
            .busy_until_ps
            .saturating_add(port.config.propagation_ns.saturating_mul(1_000));
        if port.rx_ps_per_byte_q16 != 0 {
            // Store and forward at the receiver: the payload is written to
            // memory after the whole packet is in, in the link's order.
            arrive_ps = arrive_ps
                .saturating_add((payload * port.rx_ps_per_byte_q16) >> 16)
                .max(port.last_arrive_ps);
            port.last_arrive_ps = arrive_ps;
        }
        port.counters.tx_packets += 1;
        port.counters.tx_bytes += wire_bytes;
        SimInstant(arrive_ps.div_ceil(1_000))
    }

    /// Asks the rules in order, then the background network.
    pub(super) fn decide(&mut self, packet: &Packet) -> Decision {
        let mut decision = Decision {
            verdict: Verdict::Pass,
            by: None,
            overtakers: 0,
        };
        let mut spent = false;
        // Rate rules share one draw per packet (drawn at the first of them
        // in scope); each owns the next `ppm` slice of 0..10^6.
        let mut draw: Option<u64> = None;
        let mut slice_start = 0u64;
        for installed in &mut self.rules {
            // A fixed-rate rule out of scope passes without a call.
            let rate = match installed.fixed {
                Some((scope, ppm)) => {
                    if !scope.matches(packet) {
                        continue;
                    }
                    Some(ppm)
                }
                None => installed.rule.rate_ppm(packet),
            };
            let verdict = match rate {
                Some(ppm) => {
                    let x = *draw.get_or_insert_with(|| u64::from(draw_ppm(&mut self.rule_rng)));
                    let end = slice_start + u64::from(ppm);
                    let hit = x >= slice_start && x < end;
                    slice_start = end;
                    if hit {
                        installed.rule.fire()
                    } else {
                        Verdict::Pass
                    }
                }
                None => installed.rule.on_packet(packet, &mut self.rule_rng),
            };
            // A pattern test, not the derived `!=` (which compares the
            // payloads of every variant): this runs per rule per packet.
            if !matches!(verdict, Verdict::Pass) {
                if let Verdict::Reorder(window) = verdict {
                    if window > 0 {
                        decision.overtakers = 1 + self.rule_rng.below(u64::from(window)) as u32;
                    }
                }
                decision.verdict = verdict;
                decision.by = Some(installed.id);
                spent = installed.rule.is_spent();
                break;
            }
        }
        if spent {
            self.rules.retain(|r| !r.rule.is_spent());
            self.refresh_faultless();
        }
        if matches!(decision.verdict, Verdict::Pass) && !self.network_perfect {
            decision.verdict = self.network.decide(&mut self.network_rngs);
            if let Verdict::Reorder(window) = decision.verdict {
                decision.overtakers = 1 + self.network_rngs.reorder.below(u64::from(window)) as u32;
            }
        }
        decision
    }

    pub(super) fn drop_packet<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        src: usize,
        packet: Packet,
        reason: DropReason,
        sink: &mut S,
    ) -> SendOutcome {
        self.ports[src].counters.dropped_packets += 1;
        sink.record(FabricTrace::Dropped {
            at: now,
            packet,
            reason,
        });
        SendOutcome::Dropped(reason)
    }

    /// Queues `packet` to arrive at `at`: in its source port's FIFO when
    /// `in_port_order` and it does not arrive before the FIFO's last packet
    /// (the usual case), else in the heap. Either way it comes out in
    /// `(at, sequence)` order.
    #[inline]
    pub(super) fn schedule_delivery(
        &mut self,
        src: usize,
        dst: usize,
        at: SimInstant,
        packet: Packet,
        in_port_order: bool,
    ) -> Result<(), FabricError> {
        self.check_room()?;
        let fifo_ok = in_port_order
            && self.ports[src]
                .arrivals
                .back()
                .is_none_or(|last| last.at <= at.0);
        if fifo_ok {
            let seq = self.queue.reserve_seq();
            if self.ports[src].arrivals.is_empty() {
                self.queue
                    .push_reserved(at, seq, Queued::PortHead(src as u32))?;
            }
            self.ports[src].arrivals.push_back(Arrival {
                at: at.0,
                seq,
                packet,
                dst: dst as u32,
            });
            self.arrivals_queued += 1;
        } else {
            let slot = self.park(packet);
            if let Err(e) = self.queue.push(at, Queued::Deliver(slot)) {
                let _ = self.unpark(slot);
                return Err(e.into());
            }
        }
        self.deliveries_queued += 1;
        Ok(())
    }

    /// Puts `packet` in a free `parked` slot (the last freed first) and
    /// returns the slot.
    fn park(&mut self, packet: Packet) -> u32 {
        match self.parked_free.pop() {
            Some(slot) => {
                self.parked[slot as usize] = packet;
                slot
            }
            None => {
                self.parked.push(packet);
                (self.parked.len() - 1) as u32
            }
        }
    }

    /// Takes the packet out of `parked` slot `slot`, freeing the slot.
    pub(super) fn unpark(&mut self, slot: u32) -> Packet {
        self.parked_free.push(slot);
        self.parked[slot as usize]
    }

    /// Fails when heap and FIFOs together hold `events_max` events.
    pub(super) fn check_room(&self) -> Result<(), FabricError> {
        if self.events_queued() >= self.events_max {
            return Err(FabricError::QueueFull(QueueFull {
                limit: self.events_max,
            }));
        }
        Ok(())
    }

    /// Takes the head of port `port`'s FIFO, due at `at`, whose `PortHead`
    /// entry is the heap's top: the entry becomes the next head's, or goes.
    pub(super) fn take_arrival(&mut self, port: usize, at: SimInstant) -> (Packet, usize) {
        let arrivals = &mut self.ports[port].arrivals;
        let head = arrivals
            .pop_front()
            .expect("a PortHead entry always has its packet");
        debug_assert_eq!(head.at, at.0);
        self.arrivals_queued -= 1;
        self.advance_port_head(port);
        (head.packet, head.dst as usize)
    }

    /// After port `port`'s FIFO lost its head: the port's heap entry (the
    /// heap's top) becomes the next head's, or goes when the FIFO is empty.
    #[inline]
    fn advance_port_head(&mut self, port: usize) {
        match self.ports[port].arrivals.front() {
            Some(next) => {
                self.queue.replace_top(
                    SimInstant(next.at),
                    next.seq,
                    Queued::PortHead(port as u32),
                );
            }
            None => {
                let _ = self.queue.pop_next();
            }
        }
    }

    /// [`Self::take_arrival`] when the caller already holds the packet (it
    /// peeked at it): the head of port `port`'s FIFO goes without being
    /// moved out, and the port's heap entry becomes the next head's, or
    /// goes.
    #[inline]
    pub(super) fn drop_arrival(&mut self, port: usize) {
        let arrivals = &mut self.ports[port].arrivals;
        if arrivals.pop_front().is_none() {
            return;
        }
        self.arrivals_queued -= 1;
        self.advance_port_head(port);
    }

    /// A packet falls due at `at`: hand it out unless a link of its is down.
    pub(super) fn arrive<S: FabricTraceSink + ?Sized>(
        &mut self,
        at: SimInstant,
        packet: Packet,
        sink: &mut S,
    ) -> Option<FabricEvent> {
        // Both ports existed when the packet was sent and ports are never
        // removed.
        let src = self.port_index(packet.source.port_ref())?;
        let dst = self.port_index(packet.destination.port_ref())?;
        self.arrive_between(at, packet, src, dst, sink)
    }

    /// [`Self::arrive`] with the indices of the packet's source and
    /// destination ports already known (an arrival FIFO keeps them).
    #[inline]
    pub(super) fn arrive_between<S: FabricTraceSink + ?Sized>(
        &mut self,
        at: SimInstant,
        packet: Packet,
        src: usize,
        dst: usize,
        sink: &mut S,
    ) -> Option<FabricEvent> {
        if !self.ports[src].up || !self.ports[dst].up {
            self.ports[src].counters.dropped_packets += 1;
            sink.record(FabricTrace::Dropped {
                at,
                packet,
                reason: DropReason::LinkDown,
            });
            return None;
        }
        self.ports[dst].counters.rx_packets += 1;
        sink.record(FabricTrace::Delivered { at, packet });
        Some(FabricEvent::Delivered(packet))
    }

    pub(super) fn hold<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        packet: Packet,
        arrive_at: SimInstant,
        overtakers: u32,
        sink: &mut S,
    ) -> Result<(), FabricError> {
        debug_assert!(overtakers > 0);
        let (slot, generation) = match self.held_free.pop() {
            Some(slot) => (slot, self.held[slot as usize].generation),
            None => {
                let slot = u32::try_from(self.held.len())
                    .map_err(|_| FabricError::TooMany("held packets"))?;
                self.held.push(HeldSlot {
                    packet,
                    arrive_at,
                    overtakers_left: 0,
                    generation: 0,
                    occupied: false,
                });
                (slot, 0)
            }
        };
        let expires_at = arrive_at + self.reorder_hold;
        let room = self.check_room();
        if let Err(full) = room.and_then(|()| {
            self.queue
                .push(expires_at, Queued::Release { slot, generation })
                .map_err(FabricError::from)
        }) {
            self.held_free.push(slot);
            return Err(full);
        }
        self.held[slot as usize] = HeldSlot {
            packet,
            arrive_at,
            overtakers_left: overtakers,
            generation,
            occupied: true,
        };
        self.held_count += 1;
        sink.record(FabricTrace::Held {
            at: now,
            packet,
            overtakers,
        });
        Ok(())
    }

    pub(super) fn free_held(&mut self, slot: u32) {
        let s = &mut self.held[slot as usize];
        debug_assert!(s.occupied);
        s.occupied = false;
        s.generation = s.generation.wrapping_add(1);
        self.held_count -= 1;
        self.held_free.push(slot);
    }

    /// `packet`, arriving at `arrive_at`, overtakes every held packet of its
    /// flow; those whose count reaches zero are released to arrive right
    /// after it.
    #[inline]
    pub(super) fn overtake<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        src: usize,
        packet: &Packet,
        arrive_at: SimInstant,
        sink: &mut S,
    ) -> Result<(), FabricError> {
        if self.held_count == 0 {
            return Ok(());
        }
        self.overtake_held(now, src, packet, arrive_at, sink)
    }

    #[inline(never)]
    fn overtake_held<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        src: usize,
        packet: &Packet,
        arrive_at: SimInstant,
        sink: &mut S,
    ) -> Result<(), FabricError> {
        for slot in 0..self.held.len() {
            let held = &mut self.held[slot];
            if !held.occupied
                || held.packet.source != packet.source
                || held.packet.destination != packet.destination
            {
                continue;
            }
            held.overtakers_left -= 1;
            if held.overtakers_left > 0 {
                continue;
            }
            let (released, due) = (held.packet, held.arrive_at.max(arrive_at));
            self.free_held(slot as u32);
            sink.record(FabricTrace::Released {
                at: now,
                packet: released,
            });
            // Pushed after the overtaker, so it comes out after it even when
            // both are due at the same instant.
            let dst = self
                .port_index(released.destination.port_ref())
                .ok_or(FabricError::UnknownPort(released.destination.port_ref()))?;
            self.schedule_delivery(src, dst, due, released, true)?;
        }
        Ok(())
    }
}
