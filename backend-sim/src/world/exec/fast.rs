//! The common single-packet RC RDMA WRITE at its responder, in one step
//! (issue #16: a cheaper event for the common WRITE).
//!
//! A plain `RDMA_WRITE` that fits in one packet (`Opcode::RdmaWrite(Only)`)
//! arriving in order at a plain RC QP does what the general path
//! (`begin_message`, `place`, `end_message` in `receive.rs`) would do, in
//! the same order and with the same trace: the rkey check, the copy and its
//! `Placement` record, the expected PSN advanced, no message left in
//! progress. Anything else (WRITE with immediate, ATOMIC_WRITE, FLUSH, a
//! refused rkey, XRC, DC) is left to the general path, which then decides
//! as before: this path changes nothing before it returns false.

use super::*;
use crate::fabric::SegmentPosition;

/// `check_rkey`'s responder view of a plain RC QP (its own responder
/// resources).
fn responder_view(r: &crate::world::qp::Qp) -> ResponderView {
    ResponderView {
        qp_access_flags: r.phase.bound().map_or(AccessFlags::empty(), |b| b.access),
        pd: r.pd.map_or(u32::MAX, |p| p.index),
        max_dest_rd_atomic: r.phase.path().map_or(0, |p| p.max_dest_rd_atomic),
    }
}

impl World {
    /// Handles `p`, an in-order `RdmaWrite(Only)` at `rq` from `req`, and
    /// returns true; or returns false having changed nothing.
    pub(super) fn rc_write_only(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) -> bool {
        match self.rc_write_target(rq, req, p) {
            Some(target) => {
                self.rc_write_apply(rq, req, p, target);
                true
            }
            None => false,
        }
    }

    /// What [`Self::rc_write_only`] decides, without changing anything:
    /// `(device, MR slot, offset of the remote address in it)` when the
    /// one-step path takes `p`.
    fn rc_write_target(&self, rq: QpHandle, req: QpHandle, p: &Packet) -> Option<(u32, u32, u64)> {
        debug_assert_eq!(p.opcode, Opcode::RdmaWrite(SegmentPosition::Only));
        let r = self.qps.get(rq.index, rq.generation)?;
        let s = self.qps.get(req.index, req.generation)?;
        if r.class != QpClass::Rc {
            return None;
        }
        let device = r.device;
        let w = s.sq.wqe(p.cookie);
        // A memory window's rkey takes the general path (`check_rkey`).
        if w.opcode != WrOpcode::RdmaWrite || self.is_mw_key(w.rdma.rkey) {
            return None;
        }
        let request = RemoteRequest {
            op: RemoteOp::Write,
            remote_addr: w.rdma.remote_addr,
            rkey: w.rdma.rkey,
            len: w.length,
        };
        // `check_rkey` for an MR's rkey, with the responder view built
        // from `r` at hand (a plain RC QP: its own responder resources).
        let responder = responder_view(r);
        let mr = DevMrs {
            mrs: &self.mrs,
            device,
        }
        .by_rkey(request.rkey);
        let off = check_remote(&request, mr, &responder).ok()?;
        Some((device, request.rkey >> 8, off))
    }

    /// The effects of [`Self::rc_write_only`] once it has decided to take
    /// `p` into MR slot `mr` at offset `base`.
    fn rc_write_apply(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        p: &Packet,
        (device, mr, base): (u32, u32, u64),
    ) {
        // What `begin_message` starts and `end_message` ends: nothing is
        // left in progress.
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.msg = RxMsg::default();
        let (off, len) = (p.offset, p.payload_len);
        if len > 0 {
            let dst = [Extent {
                mr,
                off: (base + u64::from(off)) as usize,
                len: len as usize,
            }];
            self.copy_from_request(req, p.cookie, off, len, &dst);
            self.record(TraceEvent::Placement {
                device,
                qpn: p.destination.qpn,
                offset: off,
                len,
            });
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.epsn = p.psn.next();
    }

    /// Called by the event loop right after `on_request` took `p` through
    /// the one-step path (it leaves `run_from` naming `p`): takes the
    /// single-packet WRITEs of the same QP pair that follow it straight
    /// from the fabric, as `absorb_run` does for the packets of one
    /// message. Each is the next event (no other event is due before it),
    /// in its port's arrival FIFO with both links up, within the loop's
    /// horizon and budget, the loop's stop condition still false, in order
    /// at a responder still receiving, for a request still outstanding,
    /// and one this path takes; it is then delivered (counted and traced
    /// at its own time), placed and acknowledged if it asks, exactly as the
    /// event loop would have done through `on_event`. Anything else ends
    /// the batch and the general loop goes on. Returns how many packets it
    /// took (each counts as one event against `budget`).
    #[inline(never)]
    pub(super) fn absorb_writes(
        &mut self,
        p: &Packet,
        horizon: Option<u64>,
        budget: u64,
        stop: &mut impl FnMut(&Self) -> bool,
    ) -> u64 {
        let Some(rq) = self.qp_at(p.destination) else {
            return 0;
        };
        if self.run_from.take() != Some((rq, p.psn)) {
            return 0;
        }
        let Some(req) = self.qp_at(p.source) else {
            return 0;
        };
        let limit = SimInstant::from_nanos(horizon.unwrap_or(u64::MAX));
        let (src, dst) = (p.source, p.destination);
        let Some(r) = self.qps.get(rq.index, rq.generation) else {
            return 0;
        };
        if r.class != QpClass::Rc {
            return 0;
        }
        // Nothing in the batch changes the responder's attributes or any
        // MR's key, range or access (placements write bytes only): its
        // view, and each key's MR once looked up, hold for the batch.
        let device = r.device;
        let responder = responder_view(r);
        // `check_remote` of a WRITE, in two halves: the responder's access
        // (the same for the whole batch), then the MR's (per rkey, below).
        if !responder
            .qp_access_flags
            .contains(AccessFlags::REMOTE_WRITE)
        {
            return 0;
        }
        let mut rkey_mr: Option<KeyRange> = None;
        let mut lkey_mr: Option<KeyRange> = None;
        // The loop's stop conditions (`run_events`' callers: a CQ's
        // entries, a CM channel's events, never) read nothing a WRITE's
        // placement, its expected PSN or an ACK put on the wire changes:
        // asked once, the answer holds for the batch.
        if stop(self) {
            return 0;
        }
        let mut n = 0u64;
        let mut copies = PendingCopies::new();
        while n < budget {
            let Some(peeked) = self.fabric.peek_arrival(limit) else {
                break;
            };
            let q = peeked.packet;
            let (Some(r), Some(s)) = (
                self.qps.get(rq.index, rq.generation),
                self.qps.get(req.index, req.generation),
            ) else {
                break;
            };
            if q.source != src
                || q.destination != dst
                || q.opcode != Opcode::RdmaWrite(SegmentPosition::Only)
                || q.psn != r.rx.epsn
                || q.cookie < s.sq.done
                || q.cookie >= s.tx.send_seq
                || !receives(r.phase.state(), Transport::Rc)
                || s.class != QpClass::Rc
                || r.dv.ooo
                || s.dv.ooo
            {
                break;
            }
            // `rc_write_target`, with the lookups above kept.
            let (w, sges, _) = s.sq.get(q.cookie);
            if w.opcode != WrOpcode::RdmaWrite || self.is_mw_key(w.rdma.rkey) {
                break;
            }
            let request = RemoteRequest {
                op: RemoteOp::Write,
                remote_addr: w.rdma.remote_addr,
                rkey: w.rdma.rkey,
                len: w.length,
            };
            let mr = match rkey_mr {
                Some(k) if k.is(request.rkey) => k,
                _ => {
                    let v = DevMrs {
                        mrs: &self.mrs,
                        device,
                    }
                    .by_rkey(request.rkey);
                    let k =
                        KeyRange::checked(request.rkey, v, responder.pd, AccessFlags::REMOTE_WRITE);
                    rkey_mr = Some(k);
                    k
                }
            };
            // `check_remote`'s MR half: nothing to check for 0 bytes.
            let base = if request.len == 0 {
                0
            } else {
                match mr.offset_of(request.remote_addr, request.len) {
                    Some(base) => base,
                    None => break,
                }
            };
            // One gather SGE (not inline): `copy_one_sge` below.
            let one = (w.num_sge == 1 && !w.send_flags.contains(SendFlags::INLINE))
                .then(|| (sges[0], s.device));
            self.take_peeked_arrival_call(peeked);
            n += 1;
            // `rc_write_apply`.
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.msg = RxMsg::default();
            let (off, len) = (q.offset, q.payload_len);
            if len > 0 {
                let d = Extent {
                    mr: request.rkey >> 8,
                    off: (base + u64::from(off)) as usize,
                    len: len as usize,
                };
                match one {
                    Some((sge, sdev)) => {
                        let (o, l) = (u64::from(off), u64::from(len));
                        if o + l <= u64::from(sge.length) {
                            let v = match lkey_mr {
                                Some(k) if k.is(sge.lkey) => k,
                                _ => {
                                    let v = DevMrs {
                                        mrs: &self.mrs,
                                        device: sdev,
                                    }
                                    .by_lkey(sge.lkey);
                                    let k = KeyRange::any(sge.lkey, v);
                                    lkey_mr = Some(k);
                                    k
                                }
                            };
                            if let Some(from) = v.offset_of(sge.addr + o, l) {
                                copies.push(&mut self.mrs, (sge.lkey >> 8, from as usize), d);
                            }
                        }
                    }
                    None => {
                        // In order: the copies put off so far land first.
                        copies.flush(&mut self.mrs);
                        self.copy_from_request(req, q.cookie, off, len, &[d]);
                    }
                }
                self.record(TraceEvent::Placement {
                    device,
                    qpn: q.destination.qpn,
                    offset: off,
                    len,
                });
            }
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.epsn = q.psn.next();
            r.rx.nak_sent = false;
            self.ack_if_asked(rq, &q);
        }
        copies.flush(&mut self.mrs);
        n
    }

    /// Acknowledges `p`, accepted at `rq`, if it asks for an ACK and `rq`
    /// is not in ERR (as the general path does after a SEND/WRITE packet).
    #[inline(always)]
    pub(super) fn ack_if_asked(&mut self, rq: QpHandle, p: &Packet) {
        if p.flags.contains(PacketFlags::ACK_REQUEST)
            && self
                .qps
                .get(rq.index, rq.generation)
                .is_some_and(|r| r.phase.state() != QpState::Error)
        {
            self.send_ack(p, AckSyndrome::Ack, p.psn, 0);
        }
    }
}
