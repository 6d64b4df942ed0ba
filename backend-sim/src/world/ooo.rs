//! Out-of-order data placement (`MLX5DV_QP_CREATE_OOO_DP`,
//! dc-and-mlx5dv.md §5) on the reliable transports (RC, DCI→DCT).
//!
//! * The requester of an OOO QP puts the packets of a multi-packet SEND or
//!   WRITE on the wire in a seeded random order within each run of
//!   [`crate::SimConfig::ooo_window`] packets; an OOO responder does the
//!   same with the packets of a READ response.
//! * An OOO responder places each SEND/WRITE packet when it arrives,
//!   whatever its position, and completes (and acknowledges) the message
//!   once every packet of it has arrived; a READ or atomic still executes
//!   only after every earlier message (it takes the in-order path).
//! * An OOO requester places READ response packets as they arrive.
//! * The receive WQE a message consumes is a seeded choice among the first
//!   `ooo_window` posted ones (RQ or SRQ); completions stay in order and
//!   carry the `wr_id` of the WQE actually consumed. This holds on UC and
//!   UD OOO QPs too; there the packets of a UC message keep their order
//!   (a divergence: hardware may place them in any order).
//!
//! So a poller of the last byte of a WRITE can see it before the bytes in
//! front of it: the bug class the flag's man page warns about.

use verbs_api::{QpClass, QpState, SendFlags, WrOpcode};

use super::dc::OooMsg;
use super::World;
use crate::fabric::{packet_count, AckSyndrome, Opcode, Packet, PacketFlags, Psn, SegmentPosition};
use crate::handles::QpHandle;

/// Most packets one OOO window permutes.
const WINDOW_MAX: usize = 64;

impl World {
    /// The reorder window of OOO QPs (1 = in order).
    fn ooo_window(&self) -> usize {
        (self.config.ooo_window as usize).clamp(1, WINDOW_MAX)
    }

    /// True when `qp` is an OOO QP of a reliable transport.
    pub(crate) fn ooo_reliable(&self, qp: QpHandle) -> bool {
        self.qps.get(qp.index, qp.generation).is_some_and(|q| {
            q.dv.ooo && matches!(q.class, QpClass::Rc | QpClass::Dci | QpClass::Dct)
        })
    }

    /// Wires the packets of a `len`-byte message (`template` gives
    /// everything but PSN, opcode position, offset and length) in a seeded
    /// random order within each window; `last_flags` go on the last
    /// packet, `response` selects READ response packets. With an adapter
    /// model the k-th packet on the wire leaves when the send engine and
    /// the DMA engine have produced k + 1 packets' worth (`dep`).
    pub(crate) fn ooo_wire(
        &mut self,
        template: Packet,
        len: u32,
        mtu: u32,
        last_flags: PacketFlags,
        kind: fn(SegmentPosition) -> Opcode,
        dep: Option<super::exec::Departure>,
    ) {
        let window = self.ooo_window();
        let now = self.now_ns;
        let count = packet_count(len, mtu);
        let mut k = 0u32;
        // The packets of one window by their index from `start`: a few
        // bytes to shuffle, each packet's share computed as `segment`
        // gives it.
        let mut order = [0u8; WINDOW_MAX];
        let mut start = 0u32;
        while start < count {
            let n = (count - start).min(window as u32) as usize;
            for (i, o) in order[..n].iter_mut().enumerate() {
                *o = i as u8;
            }
            // Fisher-Yates on the window.
            for i in (1..n).rev() {
                let j = self.dc.rng.below(i as u64 + 1) as usize;
                order.swap(i, j);
            }
            for &o in &order[..n] {
                let index = start + u32::from(o);
                let offset = index * mtu;
                let last = index + 1 == count;
                let position = match (index == 0, last) {
                    (true, true) => SegmentPosition::Only,
                    (true, false) => SegmentPosition::First,
                    (false, true) => SegmentPosition::Last,
                    (false, false) => SegmentPosition::Middle,
                };
                let flags = if last {
                    last_flags | template.flags
                } else {
                    template.flags
                };
                let produced = (k + 1).saturating_mul(mtu).min(len);
                let depart = dep.map_or(now, |d| d.at(k, produced));
                k += 1;
                self.wire_at(
                    Packet {
                        psn: template.psn.add(index),
                        opcode: kind(position),
                        flags,
                        payload_len: (len - offset).min(mtu),
                        offset,
                        ..template
                    },
                    depart,
                );
            }
            start += n as u32;
        }
    }

    /// Before an unreliable OOO receiver (UC, UD) takes a receive WQE for
    /// a new message: the same seeded choice as the reliable path makes.
    /// A no-op on QPs without `MLX5DV_QP_CREATE_OOO_DP`.
    pub(crate) fn ooo_unreliable_recv(&mut self, rq: QpHandle) {
        if self
            .qps
            .get(rq.index, rq.generation)
            .is_some_and(|q| q.dv.ooo && matches!(q.class, QpClass::Uc | QpClass::Ud))
        {
            self.ooo_shuffle_recv(rq);
        }
    }

    /// An OOO receiver takes a receive WQE: a seeded one of the first
    /// `ooo_window` posted ones is moved to the head first.
    fn ooo_shuffle_recv(&mut self, rq: QpHandle) {
        let window = self.ooo_window() as u64;
        let Some(r) = self.qps.get(rq.index, rq.generation) else {
            return;
        };
        let (done, tail) = match r.srq {
            Some(s) => match self.srqs.get(s.index, s.generation) {
                Some(s) => (s.ring.done, s.ring.tail),
                None => return,
            },
            None => (r.rq.done, r.rq.tail),
        };
        let k = (tail - done).min(window);
        if k < 2 {
            return;
        }
        let j = done + self.dc.rng.below(k);
        let srq = r.srq;
        match srq {
            Some(s) => {
                if let Some(s) = self.srqs.get_mut(s.index, s.generation) {
                    s.ring.swap(done, j);
                }
            }
            None => {
                if let Some(r) = self.qps.get_mut(rq.index, rq.generation) {
                    r.rq.swap(done, j);
                }
            }
        }
    }

    /// A SEND or WRITE packet at an OOO responder (the RC responder's
    /// in-order path handles READs and atomics).
    pub(crate) fn ooo_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let write = matches!(p.opcode, Opcode::RdmaWrite(_));
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.wqe(p.cookie);
        let first = Psn::new(w.psn);
        let n = w.npkts.max(1);
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let epsn = r.rx.epsn;
        match first.compare(epsn) {
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
            core::cmp::Ordering::Equal => {}
        }
        let idx = p.psn.distance_from(first);
        let key = (rq.index, p.source.device.0, p.source.qpn);
        let mut st = match self.dc.ooo.get(&key) {
            Some(st) => *st,
            None => {
                // Whichever packet of the message comes first begins it.
                let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
                r.rx.nak_sent = false;
                self.ooo_shuffle_recv(rq);
                let head = Packet { psn: first, ..*p };
                if !self.begin_message(rq, req, &head, write) {
                    return;
                }
                OooMsg::default()
            }
        };
        if !st.fresh(idx) {
            self.dc.ooo.insert(key, st);
            self.discard(p, "OOO duplicate or outside the window");
            return;
        }
        self.place(rq, req, p, write);
        st.mark(idx);
        if st.base < n {
            self.dc.ooo.insert(key, st);
            // More packets of this message may follow at once: the event
            // loop takes them straight from the fabric
            // (world/exec/ooo_run.rs).
            self.run_from = Some((rq, p.psn));
            return;
        }
        self.dc.ooo.remove(&key);
        let last_psn = first.add(n - 1);
        if let Some(r) = self.qps.get_mut(rq.index, rq.generation) {
            r.rx.epsn = first.add(n);
        }
        let solicited = if w.send_flags.contains(SendFlags::SOLICITED) {
            PacketFlags::SOLICITED
        } else {
            PacketFlags::NONE
        };
        let last = Packet {
            psn: last_psn,
            flags: solicited,
            ..*p
        };
        self.end_message(rq, req, &last);
        if self
            .qps
            .get(rq.index, rq.generation)
            .is_some_and(|r| r.phase.state() != QpState::Error)
        {
            self.send_ack(&last, AckSyndrome::Ack, last_psn, 0);
        }
    }

    /// A READ response packet at an OOO requester, before placement:
    /// `None` when the QP is not OOO (the in-order path decides), `Some(true)`
    /// for a new packet of the READ at `p.cookie` (its `received` count is
    /// updated), `Some(false)` for a duplicate or stray one (dropped).
    pub(crate) fn ooo_read_response(&mut self, qp: QpHandle, p: &Packet) -> Option<bool> {
        if !self.ooo_reliable(qp) {
            return None;
        }
        let q = self.qps.get(qp.index, qp.generation)?;
        let seq = p.cookie;
        if seq < q.sq.done || seq >= q.tx.send_seq {
            return Some(false);
        }
        let w = *q.sq.wqe(seq);
        if w.exec != super::queues::Exec::Sent || !matches!(w.opcode, WrOpcode::RdmaRead) {
            return Some(false);
        }
        let first = Psn::new(w.psn);
        let idx = p.psn.distance_from(first);
        let key = (qp.index, p.source.device.0, p.source.qpn | 0x8000_0000);
        let mut st = self.dc.ooo.get(&key).copied().unwrap_or_default();
        if idx >= w.npkts.max(1) || !st.fresh(idx) {
            return Some(false);
        }
        st.mark(idx);
        // `received` counts every arrived packet (the READ is done when it
        // reaches npkts); the window state remembers which.
        let q = self.qps.get_mut(qp.index, qp.generation)?;
        let got = q.sq.wqe(seq).received + 1;
        q.sq.get_mut(seq).received = got;
        if got >= w.npkts.max(1) {
            self.dc.ooo.remove(&key);
        } else {
            self.dc.ooo.insert(key, st);
        }
        Some(true)
    }

    /// Forgets the OOO READ progress of a requester (go-back-N re-reads).
    pub(crate) fn ooo_forget_reads(&mut self, qp: QpHandle) {
        self.dc
            .ooo
            .retain(|k| k.0 != qp.index || k.2 & 0x8000_0000 == 0);
    }
}
