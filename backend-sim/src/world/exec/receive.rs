//! Receiving RC SEND and RDMA WRITE messages in order (data-path.md §3,
//! §4.1): PSN checks, duplicates, the first packet's checks (rkey, receive
//! WQE, invalidation, FLUSH), placement, and the last packet's
//! completion.

use super::*;

impl World {
    pub(in crate::world) fn rc_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        if matches!(p.opcode, Opcode::Send(_) | Opcode::RdmaWrite(_)) && self.ooo_reliable(rq) {
            self.ooo_receive(rq, req, p);
            return;
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let epsn = r.rx.epsn;
        match p.psn.compare(epsn) {
            core::cmp::Ordering::Greater => {
                if !r.rx.nak_sent {
                    r.rx.nak_sent = true;
                    self.send_ack(p, AckSyndrome::PsnSequenceError, epsn, 0);
                }
                return;
            }
            core::cmp::Ordering::Less => {
                self.rc_duplicate(rq, req, p);
                return;
            }
            core::cmp::Ordering::Equal => r.rx.nak_sent = false,
        }
        match p.opcode {
            // The common case in one step (world/exec/fast.rs).
            Opcode::RdmaWrite(crate::fabric::SegmentPosition::Only)
                if self.config.fast_paths && self.rc_write_only(rq, req, p) =>
            {
                self.ack_if_asked(rq, p);
            }
            Opcode::Send(pos) | Opcode::RdmaWrite(pos) => {
                let write = matches!(p.opcode, Opcode::RdmaWrite(_));
                if pos.starts_message() {
                    self.ooo_unreliable_recv(rq);
                }
                if pos.starts_message() && !self.begin_message(rq, req, p, write) {
                    return;
                }
                self.place(rq, req, p, write);
                let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
                r.rx.epsn = p.psn.next();
                if pos.ends_message() {
                    self.end_message(rq, req, p);
                } else {
                    // Accepted in order mid-message: a run may follow.
                    self.run_from = Some((rq, p.psn));
                }
                if p.flags.contains(PacketFlags::ACK_REQUEST)
                    && self
                        .qps
                        .get(rq.index, rq.generation)
                        .is_some_and(|r| r.phase.state() != QpState::Error)
                {
                    self.send_ack(p, AckSyndrome::Ack, p.psn, 0);
                }
            }
            Opcode::ReadRequest => self.rc_read(rq, req, p, false),
            Opcode::CompareSwap | Opcode::FetchAdd => self.rc_atomic(rq, req, p),
            _ => {}
        }
    }

    /// A request PSN behind the expected one (a retransmission).
    pub(in crate::world) fn rc_duplicate(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        match p.opcode {
            Opcode::ReadRequest => self.rc_read(rq, req, p, true),
            Opcode::CompareSwap | Opcode::FetchAdd => {
                let r = self.qps.get(rq.index, rq.generation).expect("live");
                let key = p.psn.value() + 1;
                if let Some(&(_, v)) =
                    r.rx.atomics
                        .iter()
                        .flat_map(|a| a.iter())
                        .find(|(k, _)| *k == key)
                {
                    self.wire(Packet {
                        source: p.destination,
                        destination: p.source,
                        psn: p.psn,
                        opcode: Opcode::AtomicAcknowledge,
                        flags: PacketFlags::NONE,
                        payload_len: 0,
                        offset: 0,
                        cookie: v,
                    });
                }
            }
            _ => {
                let epsn = self.qps.get(rq.index, rq.generation).expect("live").rx.epsn;
                self.send_ack(p, AckSyndrome::Ack, epsn.sub(1), 0);
            }
        }
    }

    /// First packet of a SEND or WRITE: consume the receive WQE, check the
    /// target. False when the message is refused (NAKed or dropped).
    pub(in crate::world) fn begin_message(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        p: &Packet,
        write: bool,
    ) -> bool {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.wqe(p.cookie);
        let info = opcode_info(w.opcode);
        let needs_recv = info.is_some_and(|i| i.responder.is_some());
        let total = u32::try_from(w.length).unwrap_or(u32::MAX);
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let transport = transport_of(r.class);
        let device = r.device;
        let pd = r.pd.map_or(u32::MAX, |p| p.index);
        let mut target = None;
        if write {
            let req_view = RemoteRequest {
                op: RemoteOp::Write,
                remote_addr: w.rdma.remote_addr,
                rkey: w.rdma.rkey,
                len: w.length,
            };
            if w.opcode == WrOpcode::Flush {
                // Nothing is placed: the placement type's access and, for
                // level RANGE, the range are checked (rxe `check_rkey`).
                if let Err(scenario) = self.check_flush(rq, device, &w) {
                    self.responder_error(rq, p, scenario, None);
                    return false;
                }
            } else {
                // ATOMIC_WRITE: exactly 8 bytes at an 8-byte-aligned
                // address (rxe atomic write: misaligned → NAK invalid
                // request).
                if w.opcode == WrOpcode::AtomicWrite
                    && (w.length != 8 || w.rdma.remote_addr % 8 != 0)
                {
                    self.responder_error(rq, p, ErrorScenario::AtomicMisaligned, None);
                    return false;
                }
                match self.check_rkey(rq, device, &req_view) {
                    Ok(slot_off) => target = Some(slot_off),
                    Err(scenario) => {
                        self.note_access_cause(rq, req, p.cookie, device, &req_view);
                        // WRITE_WITH_IMM: the receive WQE is consumed and
                        // completes in error (§4.2 row 5).
                        let recv = if needs_recv { self.take_recv(rq) } else { None };
                        self.responder_error(rq, p, scenario, recv);
                        return false;
                    }
                }
            }
        }
        let mut recv = None;
        if needs_recv {
            let Some(peek) = self.peek_recv(rq) else {
                self.responder_error(rq, p, ErrorScenario::NoRecvWqe, None);
                return false;
            };
            if !write {
                // SEND: the receive buffer must hold the message (§4.2 rows 6, 7).
                if !self.recv_fits(rq, p, peek, total, transport) {
                    return false;
                }
                if info.is_some_and(|i| i.with_inv) && self.is_mw_key(w.imm_data) {
                    // A type 2 window of this PD (world/ext.rs).
                    if !self.remote_invalidate_mw(device, w.imm_data, pd) {
                        let recv = self.take_recv(rq);
                        self.responder_error(rq, p, ErrorScenario::SendInvalidateBadRkey, recv);
                        return false;
                    }
                } else if info.is_some_and(|i| i.with_inv) {
                    let mr = DevMrs {
                        mrs: &self.mrs,
                        device,
                    }
                    .by_rkey(w.imm_data);
                    if let Err(scenario) = check_invalidate(mr, pd) {
                        let recv = self.take_recv(rq);
                        self.responder_error(rq, p, scenario, recv);
                        // No NAK (row 17): the requester sees success.
                        return false;
                    }
                    // §3.2: the region is invalidated before the receive
                    // completes; its keys no longer grant access.
                    if let Some((_, m)) = self.mrs.get_by_index_mut(w.imm_data >> 8) {
                        m.invalidated = true;
                    }
                }
            }
            recv = self.take_recv(rq);
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.msg = RxMsg {
            active: true,
            dropping: false,
            recv,
            write: target,
            byte_len: total,
            faulted: false,
        };
        true
    }

    /// Places one SEND/WRITE packet's payload.
    pub(in crate::world) fn place(&mut self, rq: QpHandle, req: QpHandle, p: &Packet, write: bool) {
        if let Some(device) = self.place_range(rq, req, p.cookie, p.offset, p.payload_len, write) {
            self.record(TraceEvent::Placement {
                device,
                qpn: p.destination.qpn,
                offset: p.offset,
                len: p.payload_len,
            });
        }
    }

    /// Copies bytes `[off, off + len)` of request `cookie`'s message into
    /// where the message lands at `rq` and returns `rq`'s device; `None`
    /// when it lands nowhere (no message in progress, no bytes, no target,
    /// the receive buffer does not cover them), which is traced as no
    /// placement.
    pub(in crate::world) fn place_range(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        cookie: u64,
        off: u32,
        len: u32,
        write: bool,
    ) -> Option<u32> {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let (msg, device) = (r.rx.msg, r.device);
        if !msg.active || len == 0 {
            return None;
        }
        // A WRITE lands in one piece, a SEND into one SGE in at most one:
        // no 32-entry scratch to clear then.
        let mut one = [Extent::default(); 1];
        let mut many: [Extent; EXTENTS_MAX];
        let dst: &[Extent] = if write {
            let (mr, base) = msg.write?;
            one[0] = Extent {
                mr,
                off: (base + u64::from(off)) as usize,
                len: len as usize,
            };
            &one
        } else {
            let recv = msg.recv?;
            let scratch: &mut [Extent] = if self.recv_sges(rq, recv).len() <= 1 {
                &mut one
            } else {
                many = [Extent::default(); EXTENTS_MAX];
                &mut many
            };
            match self.recv_extents(rq, recv, off, len, scratch) {
                Some(n) => &scratch[..n],
                None => return None,
            }
        };
        if !self.copy_from_request(req, cookie, off, len, dst) {
            // The sender's memory is gone (its process died): the message
            // is not delivered (`end_message`).
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.msg.faulted = true;
        }
        Some(device)
    }

    /// Last packet of a SEND or WRITE: the receive completion, if any.
    pub(in crate::world) fn end_message(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let msg = core::mem::take(&mut r.rx.msg);
        let qpn = r.qp_num;
        let Some(recv) = msg.recv else { return };
        if !msg.active || msg.faulted {
            return;
        }
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.wqe(p.cookie);
        let Some(rc) = opcode_info(w.opcode).and_then(|i| i.responder) else {
            return;
        };
        let wc = Wc {
            wr_id: recv.wr_id,
            status: WcStatus::Success,
            opcode: rc.opcode,
            byte_len: msg.byte_len,
            imm_data: if rc.flags.intersects(WcFlags::WITH_IMM | WcFlags::WITH_INV) {
                w.imm_data
            } else {
                0
            },
            qp_num: qpn,
            wc_flags: rc.flags,
            ..Wc::default()
        };
        let solicited = p.flags.contains(PacketFlags::SOLICITED);
        self.complete_recv(rq, recv, wc, solicited);
    }

    /// The responder's rkey check of a WRITE, READ or atomic arriving at
    /// `rq` on `device`: the offset in the MR, or the §4.2 scenario.
    /// The responder's checks of a FLUSH (rxe `check_rkey` with the FLUSH
    /// extended header): the rkey names a valid MR of the QP's PD whose
    /// access holds `IBV_ACCESS_FLUSH_GLOBAL` / `_PERSISTENT` for each
    /// placement type asked for, and for level RANGE the range lies inside
    /// it; otherwise `REM_ACCESS_ERR` (row 5).
    pub(super) fn check_flush(
        &self,
        rq: QpHandle,
        device: u32,
        w: &crate::world::queues::SendWqe,
    ) -> Result<(), ErrorScenario> {
        let Some(mr) = (DevMrs {
            mrs: &self.mrs,
            device,
        })
        .by_rkey(w.rdma.rkey) else {
            return Err(ErrorScenario::RemoteAccess);
        };
        let mut need = AccessFlags::empty();
        if w.flush.flush_type & FlushInfo::GLOBAL != 0 {
            need |= AccessFlags::FLUSH_GLOBAL;
        }
        if w.flush.flush_type & FlushInfo::PERSISTENT != 0 {
            need |= AccessFlags::FLUSH_PERSISTENT;
        }
        let in_range = w.flush.level == FlushInfo::LEVEL_MR
            || mr.offset_of(w.rdma.remote_addr, w.flush.len).is_some();
        let ok =
            mr.valid && mr.pd == self.responder_view(rq).pd && mr.access.contains(need) && in_range;
        if ok {
            Ok(())
        } else {
            Err(ErrorScenario::RemoteAccess)
        }
    }

    /// The MR arena slot and the offset in it, or the §4.2 scenario. An
    /// rkey of a memory window is checked against the window (its range,
    /// access, PD and, for type 2, its QP) and lands in the window's MR.
    pub(super) fn check_rkey(
        &self,
        rq: QpHandle,
        device: u32,
        req: &RemoteRequest,
    ) -> Result<(u32, u64), ErrorScenario> {
        if let Some(t) = self.mw_target(device, req.rkey, Some(rq)) {
            let responder = self.responder_view(rq);
            return match t {
                Some((view, slot, base)) => {
                    check_remote(req, Some(view), &responder).map(|off| (slot, base + off))
                }
                None => check_remote(req, None, &responder).map(|off| (0, off)),
            };
        }
        let mr = DevMrs {
            mrs: &self.mrs,
            device,
        }
        .by_rkey(req.rkey);
        check_remote(req, mr, &self.responder_view(rq)).map(|off| (req.rkey >> 8, off))
    }

    /// [`Self::check_rkey`] at a plain RC responder `rq` (not a DCT: its
    /// own responder resources), the common MR rkey checked with the
    /// view built from the QP at hand; a window's rkey takes `check_rkey`.
    #[inline]
    pub(super) fn check_rkey_rc(
        &self,
        rq: QpHandle,
        device: u32,
        req: &RemoteRequest,
    ) -> Result<(u32, u64), ErrorScenario> {
        let Some(r) = self
            .qps
            .get(rq.index, rq.generation)
            .filter(|r| r.class != QpClass::Dct && !self.is_mw_key(req.rkey))
        else {
            return self.check_rkey(rq, device, req);
        };
        let responder = ResponderView {
            qp_access_flags: r.phase.bound().map_or(AccessFlags::empty(), |b| b.access),
            pd: r.pd.map_or(u32::MAX, |p| p.index),
            max_dest_rd_atomic: r.phase.path().map_or(0, |p| p.max_dest_rd_atomic),
        };
        let mr = DevMrs {
            mrs: &self.mrs,
            device,
        }
        .by_rkey(req.rkey);
        check_remote(req, mr, &responder).map(|off| (req.rkey >> 8, off))
    }
}
