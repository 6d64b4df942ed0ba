//! The requester's transmission (data-path.md §2): what the send queue
//! lets go (`max_rd_atomic`, FENCE, SQD, local checks), the adapter
//! model's departure times, and the packets of one work request.

use super::*;

impl World {
    /// Transmits what the send queue allows: called after a post, on
    /// entering RTS, after progress and when an RNR wait ends.
    #[inline]
    pub(crate) fn kick(&mut self, qp: QpHandle) {
        // Nothing left to transmit (the common kick after a response): the
        // loop below would return at once (`dc_gate` lets it through).
        if self
            .qps
            .get(qp.index, qp.generation)
            .is_some_and(|q| q.tx.send_seq < q.sq.tail)
        {
            self.kick_some(qp);
        }
    }

    /// [`Self::kick`] with something left to transmit.
    #[inline(never)]
    pub(super) fn kick_some(&mut self, qp: QpHandle) {
        // A run of plain single-packet requests in one step (exec/burst.rs).
        match self
            .config
            .fast_paths
            .then(|| self.burst_may_start(qp))
            .flatten()
        {
            Some(false) => self.transmit_burst::<false>(qp),
            Some(true) => self.transmit_burst::<true>(qp),
            None => {}
        }
        loop {
            // DCI: per-request target and streams (world/dc.rs).
            match self.dc_gate(qp) {
                crate::world::state::Gate::Go => {}
                crate::world::state::Gate::Stop => return,
                crate::world::state::Gate::Again => continue,
            }
            let Some(q) = self.qps.get(qp.index, qp.generation) else {
                return;
            };
            let state = q.phase.state();
            let seq = q.tx.send_seq;
            if seq >= q.sq.tail || q.tx.blocked || q.tx.rnr_wait {
                return;
            }
            let (w, sges, _) = q.sq.get(seq);
            // The few fields needed here, not a copy of the whole WQE.
            let (opcode, send_flags, transmitted) = (w.opcode, w.send_flags, w.transmitted);
            // SQD: requests already transmitted once may be retransmitted,
            // nothing new starts.
            let may_send =
                state == QpState::ReadyToSend || (state == QpState::SendQueueDrain && transmitted);
            if !may_send {
                return;
            }
            let transport = transport_of(q.class);
            if let Some(status) = w.deferred_error {
                self.fail_local(qp, seq, status);
                return;
            }
            if !w.checked {
                let pd = q.pd.map_or(u32::MAX, |p| p.index);
                let mrs = DevMrs {
                    mrs: &self.mrs,
                    device: q.device,
                };
                let checked = check_requester_local(
                    opcode,
                    send_flags,
                    transport,
                    &sges[..w.num_sge as usize],
                    &mrs,
                    pd,
                    q.tx.mtu,
                );
                if let Err(scenario) = checked {
                    let out = error_outcome(scenario, transport);
                    let status = out.requester_status.unwrap_or(WcStatus::LocQpOpErr);
                    self.fail_local(qp, seq, status);
                    return;
                }
            }
            let class = opcode_info(opcode).map_or(OpClass::Send, |i| i.class);
            if matches!(class, OpClass::Read | OpClass::Atomic) {
                let max_rd = q
                    .phase
                    .requester()
                    .map_or(0, |r| u32::from(r.max_rd_atomic));
                if q.tx.rd_atomic >= max_rd {
                    return;
                }
            }
            if send_flags.contains(SendFlags::FENCE) && q.tx.rd_atomic > 0 {
                return;
            }
            // LOCAL_INV and BIND_MW execute in the adapter, no packet
            // (world/ext.rs).
            if matches!(class, OpClass::LocalInvalidate | OpClass::BindMw) {
                self.run_local_op(qp, seq);
                continue;
            }
            self.transmit(qp, seq, transport, class);
        }
    }

    /// A request fails before leaving: it completes in error in order.
    pub(super) fn fail_local(&mut self, qp: QpHandle, seq: u64, status: WcStatus) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let w = q.sq.get_mut(seq);
        w.exec = Exec::Failed(status);
        w.checked = true;
        q.tx.send_seq = seq + 1;
        q.tx.blocked = true;
        self.complete_sq(qp);
    }

    /// The adapter model's send side for one request (module `adapter`):
    /// when its packets leave. Advances the QP's send engine and the
    /// device's DMA engine; `None` when the profile has no model.
    pub(super) fn adapter_departure(
        &mut self,
        qp: QpHandle,
        device: u32,
        reads_payload: bool,
        len: u64,
        payload: u64,
        npkts: u32,
    ) -> Option<Departure> {
        let dev = self.devices.get(device as usize)?;
        let a = &dev.profile.adapter;
        if a.is_none() {
            return None;
        }
        let (wqe_ns, packet_ns, payload_fetch_ns, dma_mbps) =
            (a.wqe_ns, a.packet_ns, a.payload_fetch_ns, a.dma_mbps);
        let hold = dev.engine_hold_ns(payload, npkts);
        let draw = self.rng_adapter.next_u64();
        let jitter = self.devices[device as usize]
            .profile
            .adapter
            .jitter_ns(draw);
        let now = self.now_ns;
        let q = self.qps.get_mut(qp.index, qp.generation)?;
        let start = now.max(q.tx.engine_free_ns);
        let ready = start + wqe_ns + jitter;
        q.tx.engine_free_ns = start + hold;
        let (first, dma_start) = if reads_payload && len > 0 {
            let fetched = ready + payload_fetch_ns;
            let d = &mut self.devices[device as usize];
            let dma_start = fetched.max(d.dma_free_ns);
            d.dma_free_ns = dma_start + d.dma_ns(len);
            (fetched, Some(dma_start))
        } else {
            (ready, None)
        };
        Some(Departure {
            first,
            packet_ns,
            dma_start,
            dma_mbps,
        })
    }

    /// Puts request `seq` on the wire.
    pub(super) fn transmit(
        &mut self,
        qp: QpHandle,
        seq: u64,
        transport: Transport,
        class: OpClass,
    ) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let now = self.now_ns;
        let (mtu, src, mut dest, psn) = (q.tx.mtu, q.tx.src, q.tx.dest, q.tx.next_psn);
        let ooo = q.dv.ooo;
        let w = q.sq.get_mut(seq);
        let retry = w.transmitted;
        let len = u32::try_from(w.length).unwrap_or(u32::MAX);
        let npkts = match transport {
            Transport::Ud => 1,
            _ => packet_count(len, mtu),
        };
        // A READ sent again resumes at its first missing response
        // (`go_back` kept the count of those received in order): the
        // request carries that PSN and the VA and length advanced by the
        // bytes already placed, as rxe's `req_retry` does for a partly
        // completed READ (drivers/infiniband/sw/rxe/rxe_req.c). Without it
        // a long READ under reordering starts over for ever (issue #12
        // item 1). OOO_DP READs track arrivals out of order and start over.
        let resume = if retry && class == OpClass::Read && !ooo && w.received < npkts {
            w.received
        } else {
            0
        };
        w.psn = psn.value();
        w.npkts = npkts;
        w.exec = Exec::Sent;
        w.checked = true;
        w.transmitted = true;
        w.received = resume;
        let (signaled, send_flags, opcode, w_ah, w_remote_qpn) =
            (w.signaled, w.send_flags, w.opcode, w.ah, w.remote_qpn);
        q.tx.next_psn = psn.add(npkts);
        q.tx.send_seq = seq + 1;
        // ACK coalescing: the last packet asks for an ACK when the request
        // is signalled, when nothing else is queued behind it, or every
        // ACK_EVERY PSNs (an ACK covers every earlier PSN, §5.1).
        let ack_request = signaled
            || seq + 1 >= q.sq.tail
            || psn.value() / ACK_EVERY != psn.add(npkts).value() / ACK_EVERY;
        if matches!(class, OpClass::Read | OpClass::Atomic) {
            q.tx.rd_atomic += 1;
        }
        let device = q.device;
        let reads_payload = matches!(class, OpClass::Send | OpClass::Write)
            && !send_flags.contains(SendFlags::INLINE);
        // The bytes this request carries (a READ's come back in its
        // responses).
        let payload = if matches!(class, OpClass::Send | OpClass::Write) {
            u64::from(len)
        } else {
            0
        };
        let dep = self.adapter_departure(qp, device, reads_payload, u64::from(len), payload, npkts);
        let at = |i: u32, end: u32| dep.map_or(now, |d| d.at(i, end));
        let info = opcode_info(opcode);
        let with_imm = info.is_some_and(|i| i.with_imm);
        let with_inv = info.is_some_and(|i| i.with_inv);
        let mut last_flags = if ack_request || retry {
            PacketFlags::ACK_REQUEST
        } else {
            PacketFlags::NONE
        };
        if with_imm {
            last_flags = last_flags | PacketFlags::WITH_IMMEDIATE;
        }
        if with_inv {
            last_flags = last_flags | PacketFlags::WITH_INVALIDATE;
        }
        if send_flags.contains(SendFlags::SOLICITED) {
            last_flags = last_flags | PacketFlags::SOLICITED;
        }
        let retry_flag = if retry {
            PacketFlags::RETRY
        } else {
            PacketFlags::NONE
        };
        if transport == Transport::Ud {
            dest = if self.ud_mcast_group(w_ah, w_remote_qpn).is_some() {
                // To the group: fanned out on arrival (exec/multicast.rs).
                Endpoint {
                    qpn: verbs_api::MULTICAST_QPN,
                    ..src
                }
            } else {
                self.ud_destination(w_ah, w_remote_qpn)
            };
            self.wire_at(
                Packet {
                    source: src,
                    destination: dest,
                    psn,
                    opcode: Opcode::UdSend,
                    flags: last_flags | retry_flag,
                    payload_len: len,
                    offset: 0,
                    cookie: seq,
                },
                at(0, len),
            );
            return;
        }
        match class {
            OpClass::Read | OpClass::Atomic => {
                let opcode = match (class, opcode) {
                    (OpClass::Read, _) => Opcode::ReadRequest,
                    (_, WrOpcode::AtomicCmpAndSwp) => Opcode::CompareSwap,
                    _ => Opcode::FetchAdd,
                };
                self.wire_at(
                    Packet {
                        source: src,
                        destination: dest,
                        psn: psn.add(resume),
                        opcode,
                        flags: PacketFlags::ACK_REQUEST | retry_flag,
                        payload_len: 0,
                        // A resumed READ asks for the bytes from here on.
                        offset: resume.saturating_mul(mtu),
                        cookie: seq,
                    },
                    at(0, 0),
                );
            }
            _ if npkts > 1 && self.ooo_reliable(qp) => {
                // OOO_DP: the packets leave in a seeded order (world/ooo.rs).
                // ATOMIC_WRITE travels as an 8-byte RDMA WRITE, FLUSH as a
                // zero-length one the responder checks (and places nothing).
                let write = matches!(
                    class,
                    OpClass::Write | OpClass::AtomicWrite | OpClass::Flush
                );
                let template = Packet {
                    source: src,
                    destination: dest,
                    psn,
                    opcode: Opcode::Send(crate::fabric::SegmentPosition::Only),
                    flags: retry_flag,
                    payload_len: 0,
                    offset: 0,
                    cookie: seq,
                };
                let kind = if write {
                    Opcode::RdmaWrite
                } else {
                    Opcode::Send
                };
                self.ooo_wire(template, len, mtu, last_flags, kind, dep);
            }
            _ => {
                // ATOMIC_WRITE travels as an 8-byte RDMA WRITE, FLUSH as a
                // zero-length one the responder checks (and places nothing).
                let write = matches!(
                    class,
                    OpClass::Write | OpClass::AtomicWrite | OpClass::Flush
                );
                let position = |p| {
                    if write {
                        Opcode::RdmaWrite(p)
                    } else {
                        Opcode::Send(p)
                    }
                };
                if npkts == 1 {
                    // One packet (what `segment` yields for it), without the
                    // iterator: the common small message.
                    self.wire_at(
                        Packet {
                            source: src,
                            destination: dest,
                            psn,
                            opcode: position(crate::fabric::SegmentPosition::Only),
                            flags: last_flags | retry_flag,
                            payload_len: len,
                            offset: 0,
                            cookie: seq,
                        },
                        at(0, len),
                    );
                } else {
                    for (i, s) in segment(len, mtu).enumerate() {
                        let flags = if s.position.ends_message() {
                            last_flags
                        } else {
                            PacketFlags::NONE
                        };
                        self.wire_at(
                            Packet {
                                source: src,
                                destination: dest,
                                psn: psn.add(i as u32),
                                opcode: position(s.position),
                                flags: flags | retry_flag,
                                payload_len: s.len,
                                offset: s.offset,
                                cookie: seq,
                            },
                            at(i as u32, s.offset + s.len),
                        );
                    }
                }
            }
        }
        if transport.is_reliable() {
            self.arm_ack_timer(qp, now);
        }
    }

    /// The endpoint a UD request goes to: its AH resolved on the fabric.
    pub(super) fn ud_destination(
        &self,
        ah: Option<crate::handles::AhHandle>,
        qpn: u32,
    ) -> Endpoint {
        let Some(a) = ah.and_then(|h| self.ahs.get(h.index, h.generation)) else {
            return NOWHERE;
        };
        let addr = if a.attr.is_global {
            Address::Gid(a.attr.grh.dgid)
        } else {
            Address::Lid(a.attr.dlid)
        };
        self.fabric.resolve(&addr).map_or(NOWHERE, |port| Endpoint {
            qpn,
            device: port.device,
            port: port.port,
        })
    }
}
