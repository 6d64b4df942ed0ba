//! READ and atomic traffic handled back to back (issue #16: READs and
//! atomics at >= 60 % of the WRITE message rate).
//!
//! A window of READs or atomics keeps both directions busy: requests arrive
//! at the responder, their answers at the requester, interleaved in time.
//! After the event loop has handled one of these packets,
//! [`World::absorb_answers`] goes on with the packets that follow while
//! each is the next event due: a READ request, an atomic, a single-packet
//! READ response or an atomic ACK waiting at the head of its port's arrival
//! FIFO with both links up, within the loop's horizon and event budget, the
//! loop's stop condition still false. It takes the packet straight from the
//! FIFO ([`crate::fabric::Fabric::peek_arrival`], `take_peeked`: counted
//! and traced as delivered at its own time, as `pop_due` does) and hands it
//! to the handler `on_event` would give it (one match decides both that the
//! packet is answer traffic and its handler); anything else (a timer, a
//! delayed or held packet, a WRITE, a SEND, a multi-packet response) ends
//! the batch and the general loop goes on. So every event is handled by the
//! same code in the same order: only the loop's own work per event is
//! saved.

use super::*;
use crate::fabric::SegmentPosition;

/// The packets [`World::absorb_answers`] takes. Its loop lists the same
/// opcodes in its own match, which picks the handler too (sharing one
/// function that returns the handler measured 20 instructions more per
/// READ): change both together.
#[inline]
pub(super) fn is_answer_traffic(opcode: Opcode) -> bool {
    matches!(
        opcode,
        Opcode::ReadRequest
            | Opcode::CompareSwap
            | Opcode::FetchAdd
            | Opcode::ReadResponse(SegmentPosition::Only)
            | Opcode::AtomicAcknowledge
    )
}

/// Which of `on_event`'s handlers takes a packet of answer traffic.
#[derive(Clone, Copy)]
enum Answer {
    /// A READ or atomic request, at its responder (`on_request`).
    Request,
    /// A single-packet READ response (`on_read_response`).
    ReadResponse,
    /// An atomic's ACK (`on_atomic_ack`).
    AtomicAck,
}

impl World {
    /// Called by the event loop right after it handled a packet
    /// [`is_answer_traffic`] accepts: handles the packets of that kind that
    /// follow, as described in the module documentation. Returns how many
    /// it took (each counts as one event against the loop's `budget`,
    /// which is what is left of it).
    #[inline(never)]
    pub(super) fn absorb_answers(
        &mut self,
        horizon: Option<u64>,
        budget: u64,
        stop: &mut impl FnMut(&Self) -> bool,
    ) -> u64 {
        let limit = SimInstant::from_nanos(horizon.unwrap_or(u64::MAX));
        let mut n = 0u64;
        // The stop condition is asked again only after something it may
        // read changed (`stop_epoch`, see `run_events`): a READ answer
        // that completes a signalled request, not every packet.
        let mut asked = self.stop_epoch.wrapping_sub(1);
        while n < budget {
            if asked != self.stop_epoch {
                asked = self.stop_epoch;
                if stop(self) {
                    break;
                }
            }
            let Some(peeked) = self.fabric.peek_arrival(limit) else {
                break;
            };
            // `is_answer_traffic` and `on_event`'s dispatch in one match:
            // the same handler as `on_event` calls for each kind.
            let kind = match peeked.packet.opcode {
                Opcode::ReadRequest | Opcode::CompareSwap | Opcode::FetchAdd => Answer::Request,
                Opcode::ReadResponse(SegmentPosition::Only) => Answer::ReadResponse,
                Opcode::AtomicAcknowledge => Answer::AtomicAck,
                _ => break,
            };
            self.take_peeked_arrival(peeked);
            n += 1;
            self.run_from = None;
            let p = &peeked.packet;
            match kind {
                Answer::Request => {
                    if let Some(sender) = self.on_request(p) {
                        self.unreliable_done(sender, p);
                    }
                }
                Answer::ReadResponse => self.on_read_response(p),
                Answer::AtomicAck => self.on_atomic_ack(p),
            }
            if self.run_from.is_some() {
                // A packet that starts a run (not one of these): the
                // general loop goes on (the run is then handled packet by
                // packet, as the loop would without its batches).
                self.run_from = None;
                break;
            }
        }
        n
    }
}
