//! The requester's reliability (data-path.md §5, §6): the ACK and RNR
//! timers, go-back-N, and ACKs and NAKs arriving.

use super::*;

impl World {
    pub(super) fn arm_ack_timer(&mut self, qp: QpHandle, now: u64) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let timeout = q.phase.requester().map_or(0, |r| r.timeout);
        let Some(ns) = crate::datapath::ack_timeout_ns(timeout) else {
            return;
        };
        let deadline = now.saturating_add(ns);
        if q.tx.ack_deadline.replace(deadline).is_none() {
            self.live_timers += 1;
        }
        // One queued event per QP: an earlier one re-queues itself at the
        // deadline when it fires.
        if !q.tx.ack_queued {
            q.tx.ack_queued = true;
            let generation = q.tx.ack_gen;
            self.schedule(deadline, TimerKind::AckTimeout, qp.index, generation);
        }
    }

    /// [`Self::kick`] then [`Self::rearm`], the QP looked up once when
    /// nothing is left to transmit (the common answer in a window of READs
    /// or atomics).
    #[inline(always)]
    pub(super) fn kick_and_rearm(&mut self, qp: QpHandle) {
        let now = self.now_ns;
        let Self {
            qps, live_timers, ..
        } = self;
        let Some(q) = qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if q.tx.send_seq < q.sq.tail {
            self.kick_some(qp);
            self.rearm(qp);
        } else if rearm_qp(q, now, live_timers) {
            self.arm_ack_timer(qp, now);
        }
    }

    /// After progress or a retransmission: the ACK timer runs while
    /// anything transmitted is unanswered.
    #[inline(always)]
    pub(super) fn rearm(&mut self, qp: QpHandle) {
        let now = self.now_ns;
        let Self {
            qps, live_timers, ..
        } = self;
        let Some(q) = qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if rearm_qp(q, now, live_timers) {
            self.arm_ack_timer(qp, now);
        }
    }

    pub(super) fn on_ack_timer(&mut self, t: TimerEvent) {
        let Some((generation, q)) = self.qps.get_by_index_mut(t.owner) else {
            return;
        };
        let qp = QpHandle {
            index: t.owner,
            generation,
        };
        if q.tx.ack_gen != t.generation {
            return;
        }
        q.tx.ack_queued = false;
        let Some(deadline) = q.tx.ack_deadline else {
            return;
        };
        if deadline > self.now_ns {
            q.tx.ack_queued = true;
            self.schedule(deadline, TimerKind::AckTimeout, t.owner, t.generation);
            return;
        }
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.tx.ack_deadline = None;
        self.live_timers -= 1;
        if q.tx.send_seq == q.sq.done || q.tx.rnr_wait {
            return;
        }
        let (device, qpn, psn) = (q.device, q.qp_num, q.sq.wqe(q.sq.done).psn);
        match q.tx.retry.on_timeout() {
            RetryVerdict::Retry { .. } => {
                self.record(TraceEvent::Retransmit {
                    device,
                    qpn,
                    psn,
                    cause: "ack timeout",
                });
                self.go_back(qp);
                self.kick(qp);
                self.rearm(qp);
            }
            RetryVerdict::Exhausted(status) => self.fail_outstanding(qp, status),
        }
    }

    pub(super) fn on_rnr_timer(&mut self, t: TimerEvent) {
        let Some((generation, q)) = self.qps.get_by_index(t.owner) else {
            return;
        };
        if q.tx.rnr_gen != t.generation || !q.tx.rnr_wait {
            return;
        }
        let qp = QpHandle {
            index: t.owner,
            generation,
        };
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.tx.rnr_wait = false;
        self.live_timers -= 1;
        self.kick(qp);
        self.rearm(qp);
    }

    /// Requesters parked in an endless RNR wait retry now: called when a
    /// receive is posted or a QP changes, which could end the wait (a
    /// parked QP that still finds no receive parks again after seven more
    /// RNR NAKs).
    #[inline]
    pub(crate) fn unpark_rnr(&mut self) {
        // Called after every post, modify and destroy: the common case (no
        // requester parked) costs one test, not a call.
        if !self.rnr_parked.is_empty() {
            self.unpark_rnr_slow();
        }
    }

    #[inline(never)]
    fn unpark_rnr_slow(&mut self) {
        for qp in core::mem::take(&mut self.rnr_parked) {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                continue;
            };
            if !q.tx.rnr_wait {
                continue;
            }
            q.tx.rnr_wait = false;
            self.kick(qp);
            self.rearm(qp);
        }
    }

    /// The requesters parked in an endless RNR wait, described: what a
    /// poll loop that never ends is waiting for.
    pub fn rnr_stalls(&self) -> Vec<String> {
        self.rnr_parked
            .iter()
            .filter_map(|qp| self.qps.get(qp.index, qp.generation))
            .filter(|q| q.tx.rnr_wait)
            .map(|q| {
                format!(
                    "QP {:#x} of device {} waits for ever for a receive on QP {:#x} of device {}: \
                     RNR NAK seven times in a row with rnr_retry=7 (retry for ever); \
                     post a receive there, or use a finite rnr_retry",
                    q.qp_num, q.device, q.tx.dest.qpn, q.tx.dest.device.0
                )
            })
            .collect()
    }

    /// The oldest outstanding request fails with `status` (retries
    /// exhausted): it completes in error and the QP enters ERR.
    pub(super) fn fail_outstanding(&mut self, qp: QpHandle, status: WcStatus) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let seq = q.sq.done;
        if seq < q.tx.send_seq {
            q.sq.get_mut(seq).exec = Exec::Failed(status);
            q.tx.blocked = true;
        }
        self.complete_sq(qp);
    }

    /// Go-back-N: every request from the oldest uncompleted one is sent
    /// again (duplicates are re-acknowledged, READs re-read, atomics
    /// answered from the saved result).
    pub(super) fn go_back(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let first = q.sq.done;
        if first >= q.tx.send_seq {
            return;
        }
        let ooo = q.dv.ooo;
        for s in first..q.tx.send_seq {
            let w = q.sq.get_mut(s);
            // A READ still waiting keeps the responses it has, in order:
            // it is re-issued from the first missing one (`transmit`).
            // Go-back-N gives every request the PSNs it had, so the count
            // still names the same PSNs.
            let partial_read = w.exec == Exec::Sent && w.opcode == WrOpcode::RdmaRead && !ooo;
            if matches!(w.exec, Exec::Sent | Exec::Done) {
                w.exec = Exec::Queued;
            }
            if !partial_read {
                w.received = 0;
            }
        }
        q.tx.next_psn = Psn::new(q.sq.wqe(first).psn);
        q.tx.send_seq = first;
        q.tx.rd_atomic = 0;
        self.ooo_forget_reads(qp);
    }

    /// Marks SEND/WRITE requests whose last PSN is at or before `psn`
    /// (`inclusive`) or before it as acknowledged; stops at the first one
    /// still waiting (a READ or atomic without its response).
    pub(super) fn acknowledge(&mut self, qp: QpHandle, psn: Psn, inclusive: bool) -> bool {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return false;
        };
        let mut progress = false;
        let mut s = q.sq.done;
        while s < q.tx.send_seq {
            let w = q.sq.get_mut(s);
            if w.exec == Exec::Done {
                s += 1;
                continue;
            }
            if w.exec != Exec::Sent {
                break;
            }
            let class = opcode_info(w.opcode).map_or(OpClass::Send, |i| i.class);
            let last = Psn::new(w.psn).add(w.npkts.max(1) - 1);
            let covered = if inclusive {
                !last.is_ahead_of(psn)
            } else {
                psn.is_ahead_of(last)
            };
            if !covered || matches!(class, OpClass::Read | OpClass::Atomic) {
                break;
            }
            w.exec = Exec::Done;
            progress = true;
            s += 1;
        }
        if progress {
            q.tx.retry.on_progress();
        }
        progress
    }

    /// `acknowledge(qp, psn, false)` (an answer's implied ACK of what came
    /// before), without the call when it stops at once: nothing
    /// transmitted is outstanding, or the oldest request is a READ or an
    /// atomic still waiting for its answer (a window of READs or atomics).
    #[inline]
    pub(super) fn acknowledge_before(&mut self, qp: QpHandle, psn: Psn) {
        if let Some(q) = self.qps.get(qp.index, qp.generation) {
            let s = q.sq.done;
            if s >= q.tx.send_seq {
                return;
            }
            let w = q.sq.wqe(s);
            if w.exec == Exec::Sent
                && matches!(
                    w.opcode,
                    WrOpcode::RdmaRead | WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
                )
            {
                return;
            }
        }
        self.acknowledge(qp, psn, false);
    }

    /// The request at or after `sq.done` whose PSN range holds `psn`.
    pub(super) fn wqe_with_psn(&self, qp: QpHandle, psn: Psn) -> Option<u64> {
        let q = self.qps.get(qp.index, qp.generation)?;
        (q.sq.done..q.tx.send_seq).find(|&s| {
            let w = q.sq.wqe(s);
            let first = Psn::new(w.psn);
            psn.distance_from(first) < w.npkts.max(1)
        })
    }

    /// A requester QP able to take responses: alive, reliable, sending.
    pub(super) fn requester_for(&self, p: &Packet) -> Option<QpHandle> {
        self.requester_at(p).map(|(qp, _)| qp)
    }

    /// [`Self::requester_for`] with the QP it found.
    #[inline(always)]
    pub(super) fn requester_at(&self, p: &Packet) -> Option<(QpHandle, &crate::world::qp::Qp)> {
        // `qp_at(p.destination)`, keeping the QP it finds.
        let ep = p.destination;
        let index = self
            .devices
            .get(usize::from(ep.device.0))?
            .qpns
            .get(ep.qpn)?;
        let (generation, q) = self.qps.get_by_index(index)?;
        if q.qp_num != ep.qpn || q.device != u32::from(ep.device.0) {
            return None;
        }
        let qp = QpHandle { index, generation };
        let ok = matches!(
            q.phase.state(),
            QpState::ReadyToSend | QpState::SendQueueDrain
        ) && transport_of(q.class).is_reliable()
            && q.tx.dest.qpn == p.source.qpn
            && q.tx.dest.device == p.source.device;
        ok.then_some((qp, q))
    }

    pub(super) fn on_ack(&mut self, p: &Packet, syndrome: AckSyndrome) {
        let Some(qp) = self.requester_for(p) else {
            return;
        };
        match syndrome {
            AckSyndrome::Ack => {
                self.acknowledge(qp, p.psn, true);
            }
            AckSyndrome::RnrNak { timer } => {
                self.acknowledge(qp, p.psn, false);
                self.complete_sq(qp);
                let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                    return;
                };
                if q.sq.done >= q.tx.send_seq || q.tx.rnr_wait {
                    return;
                }
                let (device, qpn) = (q.device, q.qp_num);
                match q.tx.retry.on_rnr_nak(timer) {
                    RetryVerdict::Retry { delay_ns } => {
                        self.record(TraceEvent::Retransmit {
                            device,
                            qpn,
                            psn: p.psn.value(),
                            cause: "RNR NAK",
                        });
                        self.go_back(qp);
                        let until = self.now_ns.saturating_add(delay_ns);
                        let generation = self.next_timer_gen();
                        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
                        q.tx.rnr_wait = true;
                        q.tx.rnr_gen = generation;
                        if q.tx.ack_deadline.take().is_some() {
                            self.live_timers -= 1;
                        }
                        if q.tx.retry.rnr_stalled() {
                            // rnr_retry=7 and no receive for seven tries:
                            // park instead of spinning (rnr_stalls).
                            let peer = q.tx.dest;
                            self.rnr_parked.push(qp);
                            self.record(TraceEvent::RnrStalled {
                                device,
                                qpn,
                                peer_device: u32::from(peer.device.0),
                                peer_qpn: peer.qpn,
                            });
                            return;
                        }
                        self.live_timers += 1;
                        self.schedule(until, TimerKind::RnrRetry, qp.index, generation);
                        return;
                    }
                    RetryVerdict::Exhausted(status) => {
                        self.fail_outstanding(qp, status);
                        return;
                    }
                }
            }
            AckSyndrome::PsnSequenceError => {
                self.acknowledge(qp, p.psn, false);
                self.complete_sq(qp);
                let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                    return;
                };
                if q.sq.done >= q.tx.send_seq {
                    return;
                }
                let oldest = Psn::new(q.sq.wqe(q.sq.done).psn);
                if p.psn.is_behind(oldest) || !p.psn.is_behind(q.tx.next_psn) {
                    return; // stale NAK from before a rewind
                }
                let (device, qpn) = (q.device, q.qp_num);
                match q.tx.retry.on_timeout() {
                    RetryVerdict::Retry { .. } => {
                        self.record(TraceEvent::Retransmit {
                            device,
                            qpn,
                            psn: p.psn.value(),
                            cause: "PSN sequence error NAK",
                        });
                        self.go_back(qp);
                        self.kick(qp);
                    }
                    RetryVerdict::Exhausted(status) => {
                        self.fail_outstanding(qp, status);
                        return;
                    }
                }
            }
            nak => {
                self.acknowledge(qp, p.psn, false);
                if let Some(seq) = self.wqe_with_psn(qp, p.psn) {
                    let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
                    if q.sq.wqe(seq).exec == Exec::Sent {
                        q.sq.get_mut(seq).exec = Exec::Failed(status_of(nak));
                        q.tx.blocked = true;
                    }
                }
            }
        }
        self.complete_sq(qp);
        self.kick(qp);
        self.rearm(qp);
    }
}

/// [`World::rearm`] of `q` at `now`, as far as it needs nothing but the
/// QP: moves a live, queued timer's deadline, or stops the timer when
/// nothing transmitted is unanswered (`live_timers` counts it). Returns
/// true when the timer must be armed (`World::arm_ack_timer`).
#[inline(always)]
fn rearm_qp(q: &mut crate::world::qp::Qp, now: u64, live_timers: &mut u32) -> bool {
    if q.tx.send_seq > q.sq.done && !q.tx.rnr_wait {
        if q.tx.ack_queued && q.tx.ack_deadline.is_some() {
            // `arm_ack_timer` with the timer live and its event queued:
            // only the deadline moves.
            let timeout = q.phase.requester().map_or(0, |r| r.timeout);
            if let Some(ns) = crate::datapath::ack_timeout_ns(timeout) {
                q.tx.ack_deadline = Some(now.saturating_add(ns));
            }
            return false;
        }
        return true;
    } else if q.tx.ack_deadline.is_some() {
        q.tx.ack_deadline = None;
        *live_timers -= 1;
    }
    false
}
