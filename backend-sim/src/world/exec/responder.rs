//! The responder's plumbing (data-path.md §4): a request arriving at its
//! QP, receive WQEs (own RQ or SRQ), receive completions, copying the
//! payload from the requester's gather list, and the error path of a
//! responder-detected condition.

use super::*;

impl World {
    /// A request arrives; returns its sender, if it still exists.
    pub(super) fn on_request(&mut self, p: &Packet) -> Option<QpHandle> {
        let Some(req) = self.qp_at(p.source) else {
            // The sender is gone: nothing to read the payload from.
            self.discard(p, "sender destroyed");
            return None;
        };
        if p.destination.qpn == verbs_api::MULTICAST_QPN && p.opcode == Opcode::UdSend {
            self.mcast_deliver(req, p);
            return Some(req);
        }
        let Some(rq) = self.qp_at(p.destination) else {
            // No such QP: dropped (RC senders time out).
            self.discard(p, "no such QP");
            return Some(req);
        };
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let s = self.qps.get(req.index, req.generation).expect("live");
        let rt = transport_of(r.class);
        let st = transport_of(s.class);
        if !receives(r.phase.state(), rt) {
            self.discard(p, "QP not in RTR, RTS or SQD");
            return Some(req);
        }
        let seq = p.cookie;
        if seq < s.sq.done || seq >= s.tx.send_seq {
            // The request already completed: a stale duplicate.
            self.discard(p, "stale duplicate");
            return Some(req);
        }
        // Between plain RC QPs (neither OOO_DP, so no mismatch to refuse)
        // every request goes to `rc_receive`, and the common in-order ones
        // straight to what `rc_receive` would call: a single-packet WRITE
        // to its one-step path (world/exec/fast.rs; what that declines
        // goes through `rc_receive`), a READ or an atomic to its handler.
        // Nothing is left for `unreliable_done` on a reliable sender.
        if (rt, st) == (Transport::Rc, Transport::Rc)
            && self.config.fast_paths
            && !r.dv.ooo
            && !s.dv.ooo
            && p.opcode != Opcode::UdSend
        {
            if p.psn == r.rx.epsn {
                if p.opcode == Opcode::ReadRequest {
                    // Decided with both QPs at hand, then carried out.
                    let one = self.read_one_checked(r, s, p);
                    self.rc_read_new(rq, req, p, one);
                    return None;
                }
                match p.opcode {
                    Opcode::RdmaWrite(crate::fabric::SegmentPosition::Only)
                        if self.rc_write_only(rq, req, p) =>
                    {
                        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
                        r.rx.nak_sent = false;
                        self.ack_if_asked(rq, p);
                        // The event loop may take the WRITEs that follow
                        // in one step (`absorb_writes`).
                        self.run_from = Some((rq, p.psn));
                        return None;
                    }
                    Opcode::CompareSwap | Opcode::FetchAdd => {
                        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
                        r.rx.nak_sent = false;
                        self.rc_atomic(rq, req, p);
                        return None;
                    }
                    _ => {}
                }
            }
            self.rc_receive(rq, req, p);
            return None;
        }
        if self.ooo_mismatch(rq, req, p) {
            return Some(req);
        }
        match (rt, st) {
            (Transport::Dct, Transport::Dci) if p.opcode != Opcode::UdSend => {
                self.dct_receive(rq, req, p);
            }
            (Transport::Ud, Transport::Ud) if p.opcode == Opcode::UdSend => {
                self.ud_receive(rq, req, p, None);
            }
            (Transport::Rc, Transport::Rc) if p.opcode != Opcode::UdSend => {
                self.rc_receive(rq, req, p);
            }
            (Transport::Uc, Transport::Uc) if p.opcode != Opcode::UdSend => {
                self.uc_receive(rq, req, p);
            }
            // XRC: the TGT QP receives into the SRQ the request names.
            (Transport::XrcRecv, Transport::XrcSend) if p.opcode != Opcode::UdSend => {
                if self.xrc_bind_message(rq, req, seq) {
                    self.rc_receive(rq, req, p);
                    self.xrc_unbind_message(rq);
                } else if self.config.xrc_unknown_srqn == crate::XrcUnknownSrqn::Drop {
                    self.discard(p, "unknown XRC SRQ number");
                } else {
                    self.responder_error(rq, p, ErrorScenario::ResponderQpAccess, None);
                }
            }
            // RC into UD, UD into RC and the like: dropped (§4.2 row 16,
            // UD/UC table "UD→RC QP").
            _ => self.discard(p, "transport mismatch"),
        }
        Some(req)
    }

    /// Records that the receiver dropped `p` silently, and why.
    pub(in crate::world) fn discard(&mut self, p: &Packet, reason: &'static str) {
        self.record(TraceEvent::Discarded {
            device: u32::from(p.destination.device.0),
            qpn: p.destination.qpn,
            psn: p.psn.value(),
            reason,
        });
    }

    pub(in crate::world) fn send_ack(
        &mut self,
        p: &Packet,
        syndrome: AckSyndrome,
        psn: Psn,
        cookie: u64,
    ) {
        // Sent now; through the clear route when the fabric gives one
        // (`wire_routed`: what `send_at` would decide, decided once).
        let now = self.now_ns;
        self.wire_routed(
            Packet {
                source: p.destination,
                destination: p.source,
                psn,
                opcode: Opcode::Acknowledge(syndrome),
                flags: PacketFlags::NONE,
                payload_len: 0,
                offset: 0,
                cookie,
            },
            now,
        );
    }

    pub(super) fn responder_view(&self, rq: QpHandle) -> ResponderView {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let (b, p) = (r.phase.bound(), r.phase.path());
        ResponderView {
            qp_access_flags: b.map_or(AccessFlags::empty(), |b| b.access),
            pd: r.pd.map_or(u32::MAX, |p| p.index),
            max_dest_rd_atomic: if r.class == QpClass::Dct {
                // A DCT's responder resources are the device's DC ones.
                self.dct_responder_resources(r.device)
            } else {
                p.map_or(0, |p| p.max_dest_rd_atomic)
            },
        }
    }

    /// The next receive WQE of `rq` (its SRQ's or its RQ's), not taken.
    pub(super) fn peek_recv(&self, rq: QpHandle) -> Option<RecvRef> {
        let r = self.qps.get(rq.index, rq.generation)?;
        let (seq, wr_id, srq) = match r.srq {
            Some(srq) => {
                let s = self.srqs.get(srq.index, srq.generation)?;
                if s.ring.done >= s.ring.tail {
                    return None;
                }
                (s.ring.done, s.ring.wqe(s.ring.done).wr_id, Some(srq))
            }
            None => {
                if r.rq.done >= r.rq.tail {
                    return None;
                }
                (r.rq.done, r.rq.wqe(r.rq.done).wr_id, None)
            }
        };
        Some(RecvRef { srq, seq, wr_id })
    }

    /// Takes the next receive WQE of `rq` (its SRQ or its RQ); `None` when
    /// there is none.
    pub(super) fn take_recv(&mut self, rq: QpHandle) -> Option<RecvRef> {
        let r = self.qps.get(rq.index, rq.generation)?;
        match r.srq {
            Some(srq) => {
                let s = self.srqs.get(srq.index, srq.generation)?;
                if s.ring.done >= s.ring.tail {
                    return None;
                }
                let seq = s.ring.done;
                let w = *s.ring.wqe(seq);
                let n = w.num_sge as usize;
                let (limit, left) = (s.limit, s.ring.tail - seq - 1);
                let ctx = self.pds.get(s.pd.index, s.pd.generation).map(|p| p.ctx);
                let Self { qps, srqs, .. } = self;
                let s = srqs.get_mut(srq.index, srq.generation)?;
                let sges = &s.ring.get(seq).1[..n];
                let r = qps.get_mut(rq.index, rq.generation)?;
                if r.rx.srq_sges.len() < n {
                    // Sized at creation to the SRQ's max_sge; only a DC
                    // connection's buffer starts empty.
                    r.rx.srq_sges = sges.into();
                } else {
                    r.rx.srq_sges[..n].copy_from_slice(sges);
                }
                r.rx.srq_num_sge = n as u32;
                s.ring.done += 1;
                // SRQ limit: armed and now below it → one event, disarmed.
                if limit > 0 && left < u64::from(limit) {
                    s.limit = 0;
                    if let Some(ctx) = ctx {
                        self.raise_async(
                            ctx,
                            AsyncEventType::SrqLimitReached,
                            crate::world::AsyncSubject::Srq(srq),
                        );
                    }
                }
                Some(RecvRef {
                    srq: Some(srq),
                    seq,
                    wr_id: w.wr_id,
                })
            }
            None => {
                if r.rq.done >= r.rq.tail {
                    return None;
                }
                let seq = r.rq.done;
                Some(RecvRef {
                    srq: None,
                    seq,
                    wr_id: r.rq.wqe(seq).wr_id,
                })
            }
        }
    }

    /// Whether the receive WQE `peek` can take a `len`-byte message
    /// (`scatter_plan`); if not, the error path runs (the WQE is consumed
    /// unless the receiver drops the message) and the answer is false.
    pub(super) fn recv_fits(
        &mut self,
        rq: QpHandle,
        p: &Packet,
        peek: RecvRef,
        len: u32,
        transport: Transport,
    ) -> bool {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let device = r.device;
        // mlx5: an SRQ's buffers belong to the SRQ's PD, which may differ
        // from the QP's (an SRQ is shared by QPs of other PDs, XRC TGT QPs
        // have none). rxe copies with the QP's PD whichever queue the WQE
        // came from (rxe_resp.c). RDMA targets stay checked against the
        // QP's PD on both.
        let srq_pd = self.device(device).profile.driver == DriverModel::Mlx5;
        let (sges, pd) = match peek.srq {
            Some(srq) => {
                let s = self.srqs.get(srq.index, srq.generation).expect("live");
                let (w, sges, _) = s.ring.get(peek.seq);
                let pd = if srq_pd || r.pd.is_none() {
                    s.pd.index
                } else {
                    r.pd.map_or(u32::MAX, |p| p.index)
                };
                (&sges[..w.num_sge as usize], pd)
            }
            None => {
                let (w, sges, _) = r.rq.get(peek.seq);
                (
                    &sges[..w.num_sge as usize],
                    r.pd.map_or(u32::MAX, |p| p.index),
                )
            }
        };
        let mrs = DevMrs {
            mrs: &self.mrs,
            device,
        };
        let Err(scenario) = scatter_plan(len, transport, sges, &mrs, pd) else {
            return true;
        };
        let recv = if error_outcome(scenario, transport).dropped {
            None
        } else {
            self.take_recv(rq)
        };
        self.responder_error(rq, p, scenario, recv);
        false
    }

    /// The SGEs of a consumed receive WQE.
    pub(super) fn recv_sges(&self, rq: QpHandle, recv: RecvRef) -> &[Sge] {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        match recv.srq {
            Some(_) => &r.rx.srq_sges[..r.rx.srq_num_sge as usize],
            None => {
                let (w, sges, _) = r.rq.get(recv.seq);
                &sges[..w.num_sge as usize]
            }
        }
    }

    /// Writes a receive completion (the RQ's `done` moves past it).
    pub(super) fn complete_recv(&mut self, rq: QpHandle, recv: RecvRef, wc: Wc, solicited: bool) {
        let Some(r) = self.qps.get_mut(rq.index, rq.generation) else {
            return;
        };
        let queue = match recv.srq {
            Some(srq) => QueueKind::Srq(srq),
            None => {
                if r.rq.done != recv.seq {
                    return;
                }
                r.rq.done += 1;
                QueueKind::Recv
            }
        };
        let entry = CqEntry {
            wc,
            qp: rq,
            queue,
            seq: recv.seq,
            ts_ns: 0,
        };
        // An XRC SRQ completes into its own CQ (the TGT QP has none).
        let cq = match (r.recv_cq, queue) {
            (None, QueueKind::Srq(s)) => self.xrc.srq_cq(s),
            (cq, _) => cq,
        };
        match cq {
            Some(cq) => self.push_completion(cq, entry, solicited),
            None => self.release_wqes(rq, queue, recv.seq),
        }
    }

    /// Copies bytes `[off, off + len)` of request `seq` of `req` to `dst`;
    /// false when the requester's memory could not be read (its process
    /// died: nothing was written, and the caller delivers nothing).
    pub(super) fn copy_from_request(
        &mut self,
        req: QpHandle,
        seq: u64,
        off: u32,
        len: u32,
        dst: &[Extent],
    ) -> bool {
        if len == 0 {
            return true;
        }
        let Self { qps, mrs, .. } = self;
        let Some(s) = qps.get(req.index, req.generation) else {
            return true;
        };
        let (w, sges, _) = s.sq.get(seq);
        if w.send_flags.contains(SendFlags::INLINE) {
            let bytes = s.sq.inline_bytes(seq, w.length as usize);
            let end = (off as usize + len as usize).min(bytes.len());
            copy_bytes(mrs, &bytes[(off as usize).min(end)..end], dst);
            return true;
        }
        let sges = &sges[..w.num_sge as usize];
        if let ([sge], [d]) = (sges, dst) {
            if d.len == len as usize {
                return copy_one_sge(mrs, sge, s.device, u64::from(off), u64::from(len), *d);
            }
        }
        // One SGE gives at most one extent: no 32-entry scratch to clear.
        let mut one = [Extent::default(); 1];
        let mut many;
        let src: &mut [Extent] = if sges.len() <= 1 {
            &mut one
        } else {
            many = [Extent::default(); EXTENTS_MAX];
            &mut many
        };
        match extents(sges, mrs, s.device, u64::from(off), u64::from(len), src) {
            Some(ns) => copy_extents(mrs, &src[..ns], dst),
            None => true,
        }
    }

    /// The destination pieces of `[off, off + len)` of a receive WQE.
    pub(in crate::world) fn recv_extents(
        &self,
        rq: QpHandle,
        recv: RecvRef,
        off: u32,
        len: u32,
        out: &mut [Extent],
    ) -> Option<usize> {
        let device = self.qps.get(rq.index, rq.generation)?.device;
        extents(
            self.recv_sges(rq, recv),
            &self.mrs,
            device,
            u64::from(off),
            u64::from(len),
            out,
        )
    }

    /// The error path of a responder-detected condition (§4.2, §4.3).
    pub(super) fn responder_error(
        &mut self,
        rq: QpHandle,
        p: &Packet,
        scenario: ErrorScenario,
        recv: Option<RecvRef>,
    ) {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let transport = transport_of(r.class);
        let (ctx, qpn) = (r.ctx, r.qp_num);
        let out = error_outcome(scenario, transport);
        if out.dropped {
            self.discard(p, scenario_name(scenario));
            return;
        }
        if out.rnr_nak {
            let timer = r.phase.path().map_or(0, |p| p.min_rnr_timer);
            self.send_ack(p, AckSyndrome::RnrNak { timer }, p.psn, 0);
            return;
        }
        if transport.is_reliable() {
            if let Some(st) = out.requester_status {
                self.send_ack(p, nak_of(st), p.psn, 0);
            }
        }
        if let (Some(st), Some(recv)) = (out.responder_status, recv) {
            let wc = Wc {
                wr_id: recv.wr_id,
                status: st,
                opcode: WcOpcode::Recv,
                qp_num: qpn,
                ..Wc::default()
            };
            if let Some(r) = self.qps.get_mut(rq.index, rq.generation) {
                r.rx.msg = RxMsg::default();
            }
            self.complete_recv(rq, recv, wc, false);
        }
        if let Some(event) = out.responder_event {
            self.raise_async(ctx, event, crate::world::AsyncSubject::Qp(rq));
        }
        self.leave_service(rq, out.responder_fate);
    }
}
