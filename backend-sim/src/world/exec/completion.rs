//! Completions at the requester: send completions in order, leaving
//! service after an error, and unreliable requests finishing on departure.

use super::*;

impl World {
    /// Completes finished send requests in posting order: a CQE for each
    /// signalled success and for every failure; a failure then moves the
    /// QP to ERR (reliable) or SQE (unreliable).
    pub(crate) fn complete_sq(&mut self, qp: QpHandle) {
        let flavor = self.config.errno_flavor;
        loop {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                return;
            };
            let seq = q.sq.done;
            if seq >= q.tx.send_seq || seq >= q.sq.tail {
                break;
            }
            let w = q.sq.wqe(seq);
            if w.exec == Exec::Done && !w.signaled {
                // The common unsignalled success: no CQE, nothing to build.
                if q.phase.state() == QpState::Error {
                    q.sq.done += 1;
                    return;
                }
                // And the run of them behind it, in one step (nothing in
                // the run changes the QP).
                let end = q.tx.send_seq.min(q.sq.tail);
                q.sq.done =
                    q.sq.done_run(seq + 1, end, |w| w.exec == Exec::Done && !w.signaled);
                continue;
            }
            let w = *w;
            let (status, fate) = match w.exec {
                Exec::Done => (WcStatus::Success, None),
                Exec::Failed(s) => (
                    s,
                    Some(if transport_of(q.class).is_reliable() {
                        QpFate::Error
                    } else {
                        QpFate::SendQueueError
                    }),
                ),
                _ => break,
            };
            q.sq.done += 1;
            let info = opcode_info(w.opcode);
            let len = u32::try_from(w.length).unwrap_or(u32::MAX);
            let wc = if status == WcStatus::Success {
                Wc {
                    wr_id: w.wr_id,
                    status,
                    opcode: info.map_or(WcOpcode::Send, |i| i.requester_opcode),
                    byte_len: requester_byte_len(w.opcode, len, flavor),
                    wc_flags: requester_wc_flags(w.opcode, flavor),
                    qp_num: q.qp_num,
                    ..Wc::default()
                }
            } else {
                Wc {
                    wr_id: w.wr_id,
                    status,
                    opcode: info.map_or(WcOpcode::Send, |i| i.requester_opcode),
                    qp_num: q.qp_num,
                    ..Wc::default()
                }
            };
            let cq = q.send_cq;
            if w.signaled || status != WcStatus::Success {
                let entry = CqEntry {
                    wc,
                    qp,
                    queue: QueueKind::Send,
                    seq,
                    ts_ns: 0,
                };
                match cq {
                    Some(cq) => self.push_completion(cq, entry, false),
                    None => self.release_wqes(qp, QueueKind::Send, seq),
                }
            }
            if let Some(fate) = fate {
                // DCI streams: only the request's stream may enter error.
                if self.dci_stream_absorbs(qp, w.stream, status) {
                    continue;
                }
                self.leave_service(qp, fate);
                return;
            }
            // A CQ overrun may have moved the QP to ERR.
            if self
                .qps
                .get(qp.index, qp.generation)
                .is_none_or(|q| q.phase.state() == QpState::Error)
            {
                return;
            }
        }
        self.check_drained(qp);
    }

    /// The device moves a QP to ERR or SQE after an error (§4.3).
    pub(crate) fn leave_service(&mut self, qp: QpHandle, fate: QpFate) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        // A DCT serves many DCIs: one initiator's error does not stop it.
        if q.class == QpClass::Dct {
            return;
        }
        let state = q.phase.state();
        let (b, p, r) = q.phase.parts();
        match fate {
            QpFate::Unchanged => {}
            QpFate::Error if state != QpState::Error => {
                self.set_state(qp, QpPhase::Error(b, p, r));
            }
            QpFate::SendQueueError
                if matches!(state, QpState::ReadyToSend | QpState::SendQueueDrain) =>
            {
                self.set_state(
                    qp,
                    QpPhase::SendQueueError(
                        b.unwrap_or_default(),
                        p.unwrap_or_default(),
                        r.unwrap_or_default(),
                    ),
                );
            }
            _ => {}
        }
    }

    /// An unreliable request's last packet arrived or was dropped: the
    /// request is done (the responder, if any, has read its bytes).
    pub(super) fn unreliable_departed(&mut self, p: &Packet) {
        if let Some(qp) = self.qp_at(p.source) {
            self.unreliable_done(qp, p);
        }
    }

    /// [`Self::unreliable_departed`] with the sender already looked up.
    pub(super) fn unreliable_done(&mut self, qp: QpHandle, p: &Packet) {
        if !p.opcode.ends_message() {
            return;
        }
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if transport_of(q.class).is_reliable() {
            return;
        }
        let seq = p.cookie;
        if seq < q.sq.done || seq >= q.tx.send_seq {
            return;
        }
        let w = q.sq.get_mut(seq);
        if w.exec == Exec::Sent {
            w.exec = Exec::Done;
        }
        self.complete_sq(qp);
    }
}
