//! RDMA READ and atomics at the responder (data-path.md §3.3, §5.2, with
//! duplicates answered again), and the unreliable transports' receive
//! (UC, UD with its GRH).

use super::*;

impl World {
    pub(super) fn rc_read(&mut self, rq: QpHandle, req: QpHandle, p: &Packet, duplicate: bool) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = s.sq.wqe(p.cookie);
        let (rkey, remote_addr, length) = (w.rdma.rkey, w.rdma.remote_addr, w.length);
        let mtu = s.tx.mtu;
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let device = r.device;
        let req_view = RemoteRequest {
            op: RemoteOp::Read,
            remote_addr,
            rkey,
            len: length,
        };
        if let Err(scenario) = self.check_rkey_rc(rq, device, &req_view) {
            self.note_access_cause(rq, req, p.cookie, device, &req_view);
            self.responder_error(rq, p, scenario, None);
            return;
        }
        // A resumed READ asks for the bytes from `p.offset` on, answered
        // with PSNs from its own.
        let from = p.offset;
        let len = u32::try_from(length)
            .unwrap_or(u32::MAX)
            .saturating_sub(from);
        let n = packet_count(len, mtu);
        if !duplicate {
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.epsn = p.psn.add(n);
        }
        if n > 1 && self.ooo_reliable(rq) {
            let template = Packet {
                source: p.destination,
                destination: p.source,
                psn: p.psn,
                opcode: Opcode::ReadResponse(crate::fabric::SegmentPosition::Only),
                flags: PacketFlags::NONE,
                payload_len: 0,
                offset: 0,
                cookie: p.cookie,
            };
            let a = self.devices[device as usize].profile.adapter;
            let first = self.read_first(rq, device, len, n);
            let dep = (!a.is_none()).then_some(Departure {
                first,
                packet_ns: a.packet_ns,
                dma_start: None,
                dma_mbps: a.dma_mbps,
            });
            self.ooo_wire(
                template,
                len,
                mtu,
                PacketFlags::NONE,
                Opcode::ReadResponse,
                dep,
            );
            return;
        }
        // Adapter model: the responder reads the data from host memory
        // (latency, then its DMA bandwidth) before the responses leave.
        let a = self.devices[device as usize].profile.adapter;
        let first = self.read_first(rq, device, len, n);
        let dma_start = {
            let d = &mut self.devices[device as usize];
            let start = first.max(d.dma_free_ns);
            d.dma_free_ns = start + d.dma_ns(u64::from(len));
            start
        };
        if n == 1 {
            // One response (what `segment` yields for it), without the
            // iterator: the common small READ.
            let depart = first.max(dma_start + a.dma_ns(u64::from(len)));
            self.wire_read_response_one(p, len, depart);
            return;
        }
        for (i, seg) in segment(len, mtu).enumerate() {
            let depart = (first + i as u64 * a.packet_ns)
                .max(dma_start + a.dma_ns(u64::from(seg.offset + seg.len)));
            self.wire_at(
                Packet {
                    source: p.destination,
                    destination: p.source,
                    psn: p.psn.add(i as u32),
                    opcode: Opcode::ReadResponse(seg.position),
                    flags: PacketFlags::NONE,
                    payload_len: seg.len,
                    offset: from + seg.offset,
                    cookie: p.cookie,
                },
                depart,
            );
        }
    }

    /// The one response of a READ leaving at `depart`: `len` bytes from
    /// `p.offset` on (the `n == 1` case of [`Self::rc_read`]).
    #[inline(always)]
    fn wire_read_response_one(&mut self, p: &Packet, len: u32, depart: u64) {
        self.wire_routed(
            Packet {
                source: p.destination,
                destination: p.source,
                psn: p.psn,
                opcode: Opcode::ReadResponse(crate::fabric::SegmentPosition::Only),
                flags: PacketFlags::NONE,
                payload_len: len,
                offset: p.offset,
                cookie: p.cookie,
            },
            depart,
        );
    }

    /// [`Self::rc_read`] of a new READ (its PSN the expected one) at a
    /// plain RC responder from a plain RC requester, as `on_request` hands
    /// it over: the common case (`read_one_checked`) in one step, anything
    /// else through `rc_read`. `one`: what [`Self::read_one_checked`]
    /// decided of it (the caller holds both QPs already).
    #[inline(never)]
    pub(super) fn rc_read_new(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        p: &Packet,
        one: Option<(u32, u32)>,
    ) {
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.nak_sent = false;
        match one {
            Some((device, len)) => {
                // `rc_read`: the expected PSN moves past its one response.
                r.rx.epsn = p.psn.add(1);
                self.rc_read_one(rq, p, device, len);
            }
            None => self.rc_read(rq, req, p, false),
        }
    }

    /// The decision [`Self::rc_read`] makes of a READ at a plain RC
    /// responder `r` from `s`, for the common case only: the rkey names an
    /// MR (not a window) that `check_remote` accepts the READ in, and the
    /// answer is one packet. Returns the responder's device and the
    /// response's length then; `None` in any other case (a refused READ
    /// included), for `rc_read` to decide. Changes nothing.
    #[inline(always)]
    pub(super) fn read_one_checked(
        &self,
        r: &crate::world::qp::Qp,
        s: &crate::world::qp::Qp,
        p: &Packet,
    ) -> Option<(u32, u32)> {
        let w = s.sq.wqe(p.cookie);
        let (rkey, remote_addr, length) = (w.rdma.rkey, w.rdma.remote_addr, w.length);
        if r.class == QpClass::Dct || self.is_mw_key(rkey) {
            return None;
        }
        let device = r.device;
        // `check_remote` of a READ: the QP grants REMOTE_READ and has
        // responder resources; the MR the rkey names on this device is
        // valid, of the QP's PD, grants REMOTE_READ and holds the range.
        let access = r.phase.bound().map_or(AccessFlags::empty(), |b| b.access);
        let resources = r.phase.path().map_or(0, |p| p.max_dest_rd_atomic);
        if !access.contains(AccessFlags::REMOTE_READ) || resources == 0 {
            return None;
        }
        let (_, m) = self.mrs.get_by_index(rkey >> 8)?;
        let pd = r.pd.map_or(u32::MAX, |p| p.index);
        if m.rkey != rkey
            || m.device != device
            || m.invalidated
            || m.pd.index != pd
            || !m.access.contains(AccessFlags::REMOTE_READ)
        {
            return None;
        }
        if length != 0 {
            mr_view(m).offset_of(remote_addr, length)?;
        }
        let len = u32::try_from(length)
            .unwrap_or(u32::MAX)
            .saturating_sub(p.offset);
        // `packet_count(len, mtu) == 1` (a zero MTU goes to `rc_read`).
        let mtu = s.tx.mtu;
        (mtu > 0 && len <= mtu).then_some((device, len))
    }

    /// [`Self::rc_read`] of a new READ after [`Self::read_one_checked`]
    /// accepted it (`device`, `len`: its answer), the expected PSN already
    /// moved past it: the adapter's read and the one response.
    #[inline(always)]
    fn rc_read_one(&mut self, rq: QpHandle, p: &Packet, device: u32, len: u32) {
        let first = self.read_first(rq, device, len, 1);
        let d = &mut self.devices[device as usize];
        let dma = d.dma_ns(u64::from(len));
        let dma_start = first.max(d.dma_free_ns);
        d.dma_free_ns = dma_start + dma;
        let depart = first.max(dma_start + dma);
        self.wire_read_response_one(p, len, depart);
    }

    /// The adapter model's READ responder for a READ of `len` bytes in
    /// `n` responses at QP `_rq` of `device`: when its first response may
    /// leave (after the responder's memory read, and after the previous
    /// READ the device answered has had its `read_msg_ns` and time on the
    /// wire). Advances the device's READ responder.
    #[inline(always)]
    fn read_first(&mut self, _rq: QpHandle, device: u32, len: u32, n: u32) -> u64 {
        let d = &self.devices[device as usize];
        let first = self.now_ns + d.profile.adapter.responder_read_ns;
        let hold = d.read_hold_ns(u64::from(len), n);
        if hold == 0 {
            return first;
        }
        let d = &mut self.devices[device as usize];
        let first = first.max(d.read_free_ns);
        d.read_free_ns = first + hold;
        first
    }

    pub(super) fn rc_atomic(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = s.sq.wqe(p.cookie);
        let (wr_opcode, atomic) = (w.opcode, w.atomic);
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let device = r.device;
        let req_view = RemoteRequest {
            op: RemoteOp::Atomic,
            remote_addr: atomic.remote_addr,
            rkey: atomic.rkey,
            len: 8,
        };
        let (slot, off) = match self.check_rkey_rc(rq, device, &req_view) {
            Ok((slot, off)) => (slot, off as usize),
            Err(scenario) => {
                self.note_access_cause(rq, req, p.cookie, device, &req_view);
                self.responder_error(rq, p, scenario, None);
                return;
            }
        };
        let Some(op) = AtomicOp::from_wr(wr_opcode, atomic.compare_add, atomic.swap) else {
            return;
        };
        let original = match self.mrs.get_by_index_mut(slot) {
            Some((_, m)) => {
                let mut word = [0u8; 8];
                if !m.bytes.try_read(off, &mut word) {
                    // The responder's memory is gone (its process died):
                    // no answer, as from a dead node.
                    return;
                }
                let original = apply_atomic(op, &mut word);
                m.bytes.write(off, &word);
                original
            }
            None => return,
        };
        self.record(TraceEvent::Placement {
            device,
            qpn: p.destination.qpn,
            offset: 0,
            len: 8,
        });
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let slot = usize::from(r.rx.atomic_next);
        r.rx.atomics
            .get_or_insert_with(|| Box::new([(0, 0); ATOMIC_REPLAY]))[slot] =
            (p.psn.value() + 1, original);
        r.rx.atomic_next = ((slot + 1) % ATOMIC_REPLAY) as u8;
        r.rx.epsn = p.psn.next();
        let now = self.now_ns;
        self.wire_routed(
            Packet {
                source: p.destination,
                destination: p.source,
                psn: p.psn,
                opcode: Opcode::AtomicAcknowledge,
                flags: PacketFlags::NONE,
                payload_len: 0,
                offset: 0,
                cookie: original,
            },
            now,
        );
    }

    /// UC: PSNs are checked, a gap loses the message it falls in, errors
    /// drop silently, nothing is acknowledged (§4.2 UD/UC table).
    pub(super) fn uc_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let (pos, write) = match p.opcode {
            Opcode::Send(pos) => (pos, false),
            Opcode::RdmaWrite(pos) => (pos, true),
            _ => return,
        };
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let epsn = r.rx.epsn;
        if p.psn != epsn {
            if p.psn.is_behind(epsn) {
                return; // an old packet
            }
            // Packets were lost: the message in progress is abandoned.
            r.rx.msg = RxMsg::default();
            if !pos.starts_message() {
                r.rx.msg.dropping = true;
                r.rx.epsn = p.psn.next();
                return;
            }
        }
        r.rx.epsn = p.psn.next();
        if r.rx.msg.dropping && !pos.starts_message() {
            if pos.ends_message() {
                r.rx.msg = RxMsg::default();
            }
            return;
        }
        if pos.starts_message() {
            self.ooo_unreliable_recv(rq);
        }
        if pos.starts_message() && !self.begin_message(rq, req, p, write) {
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.msg = RxMsg {
                dropping: !pos.ends_message(),
                ..RxMsg::default()
            };
            return;
        }
        self.place(rq, req, p, write);
        if pos.ends_message() {
            self.end_message(rq, req, p);
        }
    }

    /// UD: Q_Key check, the 40-byte GRH, then the payload (§4.2 UD table).
    /// `mgid`: the group of a multicast SEND (the GRH's destination GID).
    pub(super) fn ud_receive(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        p: &Packet,
        mgid: Option<verbs_api::Gid>,
    ) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.wqe(p.cookie);
        let sender_qkey = s.phase.bound().map_or(0, |b| b.qkey);
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let (device, qpn) = (r.device, r.qp_num);
        let my_qkey = r.phase.bound().map_or(0, |b| b.qkey);
        // A remote_qkey with bit 31 set means "use the QP's own Q_Key".
        let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
            sender_qkey
        } else {
            w.remote_qkey
        };
        if qkey != my_qkey {
            self.discard(p, "wrong Q_Key");
            return;
        }
        self.ooo_unreliable_recv(rq);
        let Some(peek) = self.peek_recv(rq) else {
            self.discard(p, "no receive WQE");
            return;
        };
        if !self.recv_fits(rq, p, peek, p.payload_len, Transport::Ud) {
            return;
        }
        let Some(recv) = self.take_recv(rq) else {
            return;
        };
        let mut dst = [Extent::default(); EXTENTS_MAX];
        if let Some(n) = self.recv_extents(rq, recv, 0, UD_GRH_BYTES, &mut dst) {
            let mut grh = self.grh_bytes(p);
            if let Some(g) = mgid {
                grh[24..40].copy_from_slice(&g.0);
            }
            copy_bytes(&mut self.mrs, &grh, &dst[..n]);
        }
        if let Some(n) = self.recv_extents(rq, recv, UD_GRH_BYTES, p.payload_len, &mut dst) {
            if !self.copy_from_request(req, p.cookie, 0, p.payload_len, &dst[..n]) {
                // The sender's memory is gone: the datagram is lost.
                return;
            }
        }
        self.record(TraceEvent::Placement {
            device,
            qpn,
            offset: 0,
            len: p.payload_len,
        });
        let info = opcode_info(w.opcode);
        let rc = info.and_then(|i| i.responder);
        let flags = rc.map_or(WcFlags::empty(), |c| c.flags) | WcFlags::GRH;
        let slid = self
            .fabric
            .port_config(p.source.port_ref())
            .filter(|c| c.link_layer == LinkLayer::Infiniband)
            .map_or(0, |c| c.lid);
        let wc = Wc {
            wr_id: recv.wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: UD_GRH_BYTES + p.payload_len,
            imm_data: if flags.contains(WcFlags::WITH_IMM) {
                w.imm_data
            } else {
                0
            },
            qp_num: qpn,
            src_qp: p.source.qpn,
            wc_flags: flags,
            slid,
            ..Wc::default()
        };
        self.complete_recv(rq, recv, wc, p.flags.contains(PacketFlags::SOLICITED));
    }

    /// A GRH as the receiver sees it: IPv6-shaped, version 6, payload
    /// length, next header 0x1b, hop limit 64, source and destination GIDs
    /// (index 0 of each port).
    pub(super) fn grh_bytes(&self, p: &Packet) -> [u8; 40] {
        let mut g = [0u8; 40];
        g[0] = 0x60;
        let plen = (p.payload_len + 28).to_be_bytes();
        g[4] = plen[2];
        g[5] = plen[3];
        g[6] = 0x1b;
        g[7] = 64;
        let sgid = self.gid_of(u32::from(p.source.device.0), 0);
        let dgid = self.gid_of(u32::from(p.destination.device.0), 0);
        g[8..24].copy_from_slice(&sgid.0);
        g[24..40].copy_from_slice(&dgid.0);
        g
    }
}
