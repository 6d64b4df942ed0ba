//! A post list of single-packet RC SENDs and WRITEs, and READs and
//! atomics (one request packet each), transmitted in one step (issue #16
//! item 1: batch transmission per post list).
//!
//! `kick` transmits request after request, looking up the QP, its device
//! and its state for each. When nothing can decide differently for the
//! requests of one call (a plain RC QP in RTS, not blocked, not in an RNR
//! wait), [`World::transmit_burst`] takes the run of requests that need
//! one packet each (a SEND or WRITE within the MTU, a READ whose response
//! fits one packet, an atomic), new or sent again after `go_back`, and
//! carry no FENCE, local operation or deferred error, while
//! `max_rd_atomic` lets READs and atomics go: it looks the QP up once,
//! arms the ACK timer after the first packet as `transmit` does (later
//! calls in the same instant change nothing) and hands each packet to the
//! fabric. With a [`crate::fabric::Fabric::clear_route`] between the ports
//! (no rule, no background fault, nothing held, both links up) that is
//! [`crate::fabric::Fabric::send_routed`]; otherwise `send_at`, which
//! draws the packet's verdict, as `wire_at` does. Each request gets the
//! same checks, departure time (the adapter model's draws in the same
//! order), packet (RETRY and AckReq on a retransmission), trace records
//! and queue sequence as through `transmit`; the first request it
//! declines ends the burst and `kick`'s general loop takes it from there.
//! `SimConfig::fast_paths` off turns the burst off, and the tests in
//! `benches/tests/fast_paths.rs` require equal traces both ways.

use core::cell::Cell;

use super::*;
use crate::fabric::SegmentPosition;

/// The device's MRs with the last lkey looked up remembered: a post list
/// gathers from one MR, and nothing changes an MR during a burst.
struct Remembered<'a> {
    mrs: DevMrs<'a>,
    last: &'a Cell<Option<(u32, Option<MrView>)>>,
}

impl MrLookup for Remembered<'_> {
    fn by_lkey(&self, lkey: u32) -> Option<MrView> {
        match self.last.get() {
            Some((k, v)) if k == lkey => v,
            _ => {
                let v = self.mrs.by_lkey(lkey);
                self.last.set(Some((lkey, v)));
                v
            }
        }
    }

    fn by_rkey(&self, rkey: u32) -> Option<MrView> {
        self.mrs.by_rkey(rkey)
    }
}

/// `kick`'s limit on READs and atomics outstanding.
#[inline]
fn max_rd_atomic(q: &crate::world::qp::Qp) -> u32 {
    q.phase
        .requester()
        .map_or(0, |r| u32::from(r.max_rd_atomic))
}

impl World {
    /// The cheap test before [`Self::transmit_burst`]: `Some(false)` when
    /// the next request to transmit is a new SEND or WRITE, `Some(true)`
    /// when it is a new READ or atomic that `max_rd_atomic` lets go.
    #[inline]
    pub(super) fn burst_may_start(&self, qp: QpHandle) -> Option<bool> {
        let q = self.qps.get(qp.index, qp.generation)?;
        if q.tx.send_seq >= q.sq.tail {
            return None;
        }
        match q.sq.wqe(q.tx.send_seq).opcode {
            WrOpcode::RdmaWrite
            | WrOpcode::RdmaWriteWithImm
            | WrOpcode::Send
            | WrOpcode::SendWithImm
            | WrOpcode::SendWithInv => Some(false),
            WrOpcode::RdmaRead | WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                (q.tx.rd_atomic < max_rd_atomic(q)).then_some(true)
            }
            _ => None,
        }
    }

    /// Transmits the run of plain requests at the head of `qp`'s
    /// untransmitted ones, as described in the module documentation.
    /// `READS`: a run of READs and atomics (one request packet each, the
    /// response of a READ fitting one packet), else of SENDs and WRITEs.
    #[inline(never)]
    pub(super) fn transmit_burst<const READS: bool>(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        if q.class != QpClass::Rc
            || q.phase.state() != QpState::ReadyToSend
            || q.tx.blocked
            || q.tx.rnr_wait
            || q.tx.send_seq >= q.sq.tail
        {
            return;
        }
        // With no clear route (a rule installed, a faulty network, a packet
        // held, a link down), each packet goes through `send_at` and its
        // verdict, exactly as `wire_at` sends it.
        let route = self.fabric.clear_route(q.tx.src, q.tx.dest);
        let (device, pd, mtu, src, dest) = (
            q.device,
            q.pd.map_or(u32::MAX, |p| p.index),
            q.tx.mtu,
            q.tx.src,
            q.tx.dest,
        );
        let now = self.now_ns;
        let adapter = self.devices[device as usize].profile.adapter;
        let last = Cell::new(None);
        let mut gather: Option<KeyRange> = None;
        let mut first = true;
        loop {
            let q = self.qps.get(qp.index, qp.generation).expect("live");
            let seq = q.tx.send_seq;
            if seq >= q.sq.tail {
                break;
            }
            let (w, sges, _) = q.sq.get(seq);
            let (opcode, send_flags) = (w.opcode, w.send_flags);
            let Some(info) = opcode_info(opcode) else {
                break;
            };
            let len = u32::try_from(w.length).unwrap_or(u32::MAX);
            // A READ whose response fits one packet, or an atomic: one
            // request packet, as `transmit` sends it.
            let rd_atomic = READS;
            let kind = if READS {
                matches!(info.class, OpClass::Read | OpClass::Atomic)
            } else {
                matches!(info.class, OpClass::Send | OpClass::Write)
            };
            // A request sent before goes again after a NAK or a timeout
            // (`go_back`): the same packet with RETRY and AckReq set.
            let retry = w.transmitted;
            if w.deferred_error.is_some()
                || !kind
                || send_flags.contains(SendFlags::FENCE)
                // `packet_count(len, mtu) != 1` without the division.
                || len > mtu
                || (rd_atomic && q.tx.rd_atomic >= max_rd_atomic(q))
            {
                break;
            }
            if !w.checked {
                let sges = &sges[..w.num_sge as usize];
                let ok = match sges {
                    // `check_requester_local` of a SEND or WRITE gathering
                    // from one SGE on RC: `check_local_sges` of that SGE
                    // (no LOCAL_WRITE needed, no length rule), its MR
                    // remembered across the list.
                    [sge] if !READS && !send_flags.contains(SendFlags::INLINE) => {
                        sge.length == 0 || {
                            let view = match gather {
                                Some(k) if k.is(sge.lkey) => k,
                                _ => {
                                    let v = DevMrs {
                                        mrs: &self.mrs,
                                        device,
                                    }
                                    .by_lkey(sge.lkey);
                                    let k =
                                        KeyRange::checked(sge.lkey, v, pd, AccessFlags::empty());
                                    gather = Some(k);
                                    k
                                }
                            };
                            view.offset_of(sge.addr, u64::from(sge.length)).is_some()
                        }
                    }
                    // Its READ or atomic with one landing SGE: the landing
                    // buffer is checked when the answer lands; an atomic's
                    // must be 8 bytes.
                    [sge] if READS => info.class != OpClass::Atomic || sge.length == 8,
                    _ => {
                        let mrs = Remembered {
                            mrs: DevMrs {
                                mrs: &self.mrs,
                                device,
                            },
                            last: &last,
                        };
                        check_requester_local(
                            opcode,
                            send_flags,
                            Transport::Rc,
                            sges,
                            &mrs,
                            pd,
                            mtu,
                        )
                        .is_ok()
                    }
                };
                if !ok {
                    break;
                }
            }
            let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
            let psn = q.tx.next_psn;
            let w = q.sq.get_mut(seq);
            w.psn = psn.value();
            w.npkts = 1;
            w.exec = Exec::Sent;
            w.checked = true;
            w.transmitted = true;
            w.received = 0;
            let signaled = w.signaled;
            q.tx.next_psn = psn.next();
            q.tx.send_seq = seq + 1;
            // Every READ and atomic asks for its answer.
            let ack_request = signaled
                || retry
                || rd_atomic
                || seq + 1 >= q.sq.tail
                || psn.value() / ACK_EVERY != psn.next().value() / ACK_EVERY;
            if rd_atomic {
                q.tx.rd_atomic += 1;
            }
            // `adapter_departure` with the model looked up once.
            let depart = if adapter.is_none() {
                now
            } else {
                let draw = self.rng_adapter.next_u64();
                let jitter = adapter.jitter_ns(draw);
                let start = now.max(q.tx.engine_free_ns);
                let ready = start + adapter.wqe_ns + jitter;
                let payload = if rd_atomic { 0 } else { u64::from(len) };
                q.tx.engine_free_ns =
                    start + self.devices[device as usize].engine_hold_ns(payload, 1);
                // `Departure::at(0, ..)` of the one packet: the DMA of its
                // payload, when it has one, after the WQE's fetch.
                if !rd_atomic && !send_flags.contains(SendFlags::INLINE) && len > 0 {
                    let fetched = ready + adapter.payload_fetch_ns;
                    let d = &mut self.devices[device as usize];
                    let dma = d.dma_ns(u64::from(len));
                    let dma_start = fetched.max(d.dma_free_ns);
                    d.dma_free_ns = dma_start + dma;
                    fetched.max(dma_start + dma)
                } else {
                    ready
                }
            };
            let mut flags = match (ack_request, retry) {
                (_, true) => PacketFlags::ACK_REQUEST | PacketFlags::RETRY,
                (true, false) => PacketFlags::ACK_REQUEST,
                (false, false) => PacketFlags::NONE,
            };
            // `transmit` sends a READ or atomic request with AckReq alone.
            if info.with_imm && !rd_atomic {
                flags = flags | PacketFlags::WITH_IMMEDIATE;
            }
            if info.with_inv && !rd_atomic {
                flags = flags | PacketFlags::WITH_INVALIDATE;
            }
            if send_flags.contains(SendFlags::SOLICITED) && !rd_atomic {
                flags = flags | PacketFlags::SOLICITED;
            }
            let packet = Packet {
                source: src,
                destination: dest,
                psn,
                opcode: match (info.class, opcode) {
                    (OpClass::Write, _) => Opcode::RdmaWrite(SegmentPosition::Only),
                    (OpClass::Read, _) => Opcode::ReadRequest,
                    (OpClass::Atomic, WrOpcode::AtomicCmpAndSwp) => Opcode::CompareSwap,
                    (OpClass::Atomic, _) => Opcode::FetchAdd,
                    _ => Opcode::Send(SegmentPosition::Only),
                },
                flags,
                payload_len: if rd_atomic { 0 } else { len },
                offset: 0,
                cookie: seq,
            };
            let at = SimInstant::from_nanos(now);
            let depart = SimInstant::from_nanos(depart.max(now));
            let Self {
                fabric,
                trace,
                drops,
                ..
            } = self;
            // A full event queue loses the packet, as `wire_at` does.
            match route {
                Some(route) => {
                    let _ =
                        fabric.send_routed(at, depart, route, packet, &mut Sink { trace, drops });
                }
                None => {
                    let _ = fabric.send_at(at, depart, packet, &mut Sink { trace, drops });
                    self.settle_drops();
                }
            }
            if first {
                first = false;
                self.arm_ack_timer(qp, now);
            }
        }
    }
}
