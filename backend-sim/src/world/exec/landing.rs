//! Answers at the requester: READ responses and atomic ACKs landing in
//! the requester's memory (the common one in one step, the general path
//! for the rest), and the request they answer moving on.

use super::*;
use crate::world::queues::SendWqe;

/// What the answer of a READ or atomic needs of its WQE.
#[derive(Clone, Copy)]
struct ReadWqe {
    exec: Exec,
    opcode: WrOpcode,
    psn: u32,
    received: u32,
    num_sge: u32,
    rdma: verbs_api::RdmaInfo,
}

impl ReadWqe {
    #[inline]
    fn of(w: &SendWqe) -> Self {
        Self {
            exec: w.exec,
            opcode: w.opcode,
            psn: w.psn,
            received: w.received,
            num_sge: w.num_sge,
            rdma: w.rdma,
        }
    }
}

/// `check_local_sges` of one landing SGE whose lkey named `view` (of the
/// requester's device), LOCAL_WRITE needed: a READ response or atomic
/// answer may be scattered there (an empty SGE always may).
#[inline(always)]
fn lands_in(view: &MrView, sge: &Sge, pd: u32) -> bool {
    sge.length == 0
        || (view.valid
            && view.pd == pd
            && view.offset_of(sge.addr, u64::from(sge.length)).is_some()
            && view.access.contains(AccessFlags::LOCAL_WRITE))
}

impl World {
    pub(super) fn on_read_response(&mut self, p: &Packet) {
        let Some((qp, q)) = self.requester_at(p) else {
            return;
        };
        // The common in-order response in one step, checked with the QP
        // at hand.
        if self.config.fast_paths {
            if let Some(landing) = self.read_response_one(q, p) {
                let (seq, psn, rdma, lkey, doff, device) = landing;
                if self.place_read_one(qp, p, (seq, psn, true), rdma, (lkey, doff, device)) {
                    return;
                }
            }
        }
        let seq = p.cookie;
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        if seq < q.sq.done || seq >= q.tx.send_seq {
            return;
        }
        // The few fields needed here, not a copy of the whole WQE.
        let w = ReadWqe::of(q.sq.wqe(seq));
        if w.exec != Exec::Sent || !matches!(w.opcode, WrOpcode::RdmaRead) {
            return;
        }
        let ooo = self.ooo_read_response(qp, p);
        if ooo == Some(false) {
            return;
        }
        if ooo.is_none() && p.psn != Psn::new(w.psn).add(w.received) {
            return; // out of order: the timer retries the READ
        }
        if w.num_sge == 1 && p.payload_len > 0 {
            // One landing SGE: its MR looked up once for the landing check
            // and the placement (`landing_fails`, `extents`).
            let Some((sge, device, view)) = self.landing_one(qp, seq) else {
                return;
            };
            let (off, len) = (u64::from(p.offset), u64::from(p.payload_len));
            // `extents` of one SGE: the range lies in it, and in its MR.
            let Some(doff) = view
                .filter(|_| off + len <= u64::from(sge.length))
                .and_then(|v| v.offset_of(sge.addr + off, len))
            else {
                return;
            };
            self.place_read_one(
                qp,
                p,
                (seq, w.psn, ooo.is_none()),
                w.rdma,
                (sge.lkey, doff, device),
            );
            return;
        }
        if self.landing_fails(qp, seq) {
            return;
        }
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        let sges = q.sq.get(seq).1;
        // Place the response: responder MR (by rkey) → local SGEs.
        let device = q.device;
        let sges = &sges[..w.num_sge as usize];
        let (mut one, mut many);
        let dst: &mut [Extent] = if sges.len() <= 1 {
            one = [Extent::default(); 1];
            &mut one
        } else {
            many = [Extent::default(); EXTENTS_MAX];
            &mut many
        };
        let nd = extents(
            sges,
            &self.mrs,
            device,
            u64::from(p.offset),
            u64::from(p.payload_len),
            dst,
        );
        // A zero-length READ names no memory (data-path §3.3).
        let src = if p.payload_len == 0 {
            Some(Extent::default())
        } else {
            self.remote_extent(
                u32::from(p.source.device.0),
                w.rdma.rkey,
                w.rdma.remote_addr + u64::from(p.offset),
                u64::from(p.payload_len),
            )
        };
        match (nd, src) {
            (Some(nd), Some(src)) => {
                // The responder's memory could not be read (its process
                // died): the response is lost, as a dead node's is.
                if !copy_extents(&mut self.mrs, &[src], &dst[..nd]) {
                    return;
                }
                if p.payload_len > 0 {
                    self.record(TraceEvent::Placement {
                        device,
                        qpn: p.destination.qpn,
                        offset: p.offset,
                        len: p.payload_len,
                    });
                }
            }
            (None, _) => return,
            // The responder's MR went away since it answered: the response
            // is lost, the timer retries and the responder refuses then.
            (_, None) => return,
        }
        self.read_answered(qp, seq, w.psn, ooo.is_none());
    }

    /// What the rest of [`Self::on_read_response`] does with the common
    /// response: the next in order of a READ still waiting at a QP without
    /// OOO_DP, with bytes, landing in one SGE whose MR (looked up once)
    /// holds them, from an MR (not a window) that holds them at the
    /// responder. Returns false, having changed nothing, in any other case
    /// (the general path then decides, as before). This half decides,
    /// changing nothing: the request, its PSN and remote range, and where
    /// the bytes land (the lkey, the offset in its MR and the device), for
    /// [`Self::place_read_one`].
    #[inline(always)]
    fn read_response_one(
        &self,
        q: &crate::world::qp::Qp,
        p: &Packet,
    ) -> Option<(u64, u32, verbs_api::RdmaInfo, u32, u64, u32)> {
        let seq = p.cookie;
        if seq < q.sq.done || seq >= q.tx.send_seq || q.dv.ooo || p.payload_len == 0 {
            return None;
        }
        let (w, sges, _) = q.sq.get(seq);
        if w.exec != Exec::Sent
            || !matches!(w.opcode, WrOpcode::RdmaRead)
            || w.num_sge != 1
            || p.psn != Psn::new(w.psn).add(w.received)
        {
            return None;
        }
        let (psn, rdma, sge) = (w.psn, w.rdma, sges[0]);
        let device = q.device;
        // `landing_one`: the SGE's MR by its lkey, `check_local_sges` of
        // one SGE with LOCAL_WRITE needed.
        let (_, m) = self.mrs.get_by_index(sge.lkey >> 8)?;
        if m.lkey != sge.lkey || m.device != device {
            return None;
        }
        let view = mr_view(m);
        let pd = q.pd.map_or(u32::MAX, |p| p.index);
        if !lands_in(&view, &sge, pd) {
            return None;
        }
        // `extents` of one SGE: the range lies in it, and in its MR.
        let (off, len) = (u64::from(p.offset), u64::from(p.payload_len));
        if off + len > u64::from(sge.length) {
            return None;
        }
        let doff = view.offset_of(sge.addr + off, len)?;
        Some((seq, psn, rdma, sge.lkey, doff, device))
    }

    /// The effects of a READ response `p` landing in one SGE, once the
    /// landing is checked: `p`'s bytes from the responder's range (request
    /// `seq` of PSN `psn`, answered `in_order` or not) copied to offset
    /// `doff` of the MR `lkey` names on `device`, the placement recorded
    /// and the request answered. Returns false, having changed nothing,
    /// when the responder's range is not in one of its MRs.
    #[inline(always)]
    fn place_read_one(
        &mut self,
        qp: QpHandle,
        p: &Packet,
        (seq, psn, in_order): (u64, u32, bool),
        rdma: verbs_api::RdmaInfo,
        (lkey, doff, device): (u32, u64, u32),
    ) -> bool {
        let (off, len) = (u64::from(p.offset), u64::from(p.payload_len));
        let Some(src) = self.remote_extent(
            u32::from(p.source.device.0),
            rdma.rkey,
            rdma.remote_addr + off,
            len,
        ) else {
            return false;
        };
        if !copy_piece(
            &mut self.mrs,
            src.mr,
            src.off,
            lkey >> 8,
            doff as usize,
            len as usize,
        ) {
            // The responder's memory could not be read: the response is
            // lost (handled: the general path would lose it too).
            return true;
        }
        self.record(TraceEvent::Placement {
            device,
            qpn: p.destination.qpn,
            offset: p.offset,
            len: p.payload_len,
        });
        self.read_answered(qp, seq, psn, in_order);
        true
    }

    /// After a response of READ `seq` (first PSN `psn`) was placed: counts
    /// it (`in_order`: not an OOO_DP one, counted on its own) and moves on.
    fn read_answered(&mut self, qp: QpHandle, seq: u64, psn: u32, in_order: bool) {
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        // An answer implies everything before the READ was received
        // (`acknowledge_before`, its early return checked with the QP at
        // hand).
        let d = q.sq.done;
        let waiting = d >= q.tx.send_seq || {
            let w = q.sq.wqe(d);
            w.exec == Exec::Sent
                && matches!(
                    w.opcode,
                    WrOpcode::RdmaRead | WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
                )
        };
        let q = if waiting {
            q
        } else {
            self.acknowledge(qp, Psn::new(psn), false);
            self.qps.get_mut(qp.index, qp.generation).expect("live")
        };
        // Forward progress (which alone reloads the retry counter) is new
        // data for the oldest request: responses to a later request, or
        // answers repeated by a retry, do not count.
        let oldest = seq == q.sq.done;
        let w = q.sq.get_mut(seq);
        if in_order {
            w.received += 1;
        }
        if w.received >= w.npkts {
            w.exec = Exec::Done;
            q.tx.rd_atomic = q.tx.rd_atomic.saturating_sub(1);
        }
        if oldest {
            q.tx.retry.on_progress();
        }
        self.after_answer(qp);
    }

    /// What follows a READ's or an atomic's answer: completions in order
    /// (the common quiet head in one step), then the send queue kicked and
    /// the ACK timer rearmed.
    #[inline(always)]
    fn after_answer(&mut self, qp: QpHandle) {
        if self.complete_quiet_head(qp) {
            self.check_drained(qp);
        } else {
            self.complete_sq(qp);
        }
        self.kick_and_rearm(qp);
    }

    /// What [`Self::complete_sq`] does in the common case of an answer in
    /// a window of READs or atomics: the oldest request is done and
    /// unsignalled, the QP is not in ERR, and the next request is still
    /// executing (or there is none), so `done` moves past the oldest and
    /// nothing else completes. Returns false, having changed nothing, in
    /// any other case (the caller then runs `complete_sq`); on true the
    /// caller still owes `complete_sq`'s closing `check_drained`.
    #[inline(always)]
    fn complete_quiet_head(&mut self, qp: QpHandle) -> bool {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return false;
        };
        let s = q.sq.done;
        let end = q.tx.send_seq.min(q.sq.tail);
        if s >= end || q.phase.state() == QpState::Error {
            return false;
        }
        let w = q.sq.wqe(s);
        if w.exec != Exec::Done || w.signaled {
            return false;
        }
        if s + 1 < end && matches!(q.sq.wqe(s + 1).exec, Exec::Done | Exec::Failed(_)) {
            return false;
        }
        q.sq.done = s + 1;
        true
    }

    /// [`Self::landing_fails`] for a request with one SGE, returning on
    /// success the SGE, the requester's device and the SGE's MR as its
    /// lkey names it (looked up once), or `None` having failed it.
    fn landing_one(&mut self, qp: QpHandle, seq: u64) -> Option<(Sge, u32, Option<MrView>)> {
        let q = self.qps.get(qp.index, qp.generation)?;
        let sge = q.sq.get(seq).1[0];
        let device = q.device;
        let view = DevMrs {
            mrs: &self.mrs,
            device,
        }
        .by_lkey(sge.lkey);
        // `check_local_sges` of one SGE, with LOCAL_WRITE needed.
        let pd = q.pd.map_or(u32::MAX, |p| p.index);
        let ok = view.map_or(sge.length == 0, |mr| lands_in(&mr, &sge, pd));
        if !ok {
            // The general check fails it the same way.
            let failed = self.landing_fails(qp, seq);
            debug_assert!(failed);
            return None;
        }
        Some((sge, device, view))
    }

    /// The landing buffer of a READ or atomic is checked when its response
    /// is scattered, after the responder's checks (data-path §10.3; google
    /// rdma-unit-test: a bad lkey with a bad rkey completes
    /// `REM_ACCESS_ERR`, and an atomic with a bad lkey still executes at the
    /// responder). On failure the request completes `LOC_PROT_ERR` and the
    /// QP leaves service; returns whether it failed.
    pub(super) fn landing_fails(&mut self, qp: QpHandle, seq: u64) -> bool {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return true;
        };
        let (w, sges, _) = q.sq.get(seq);
        let psn = Psn::new(w.psn);
        let mrs = DevMrs {
            mrs: &self.mrs,
            device: q.device,
        };
        let pd = q.pd.map_or(u32::MAX, |p| p.index);
        if check_local_sges(&sges[..w.num_sge as usize], &mrs, pd, true).is_ok() {
            return false;
        }
        // An answer implies everything before the request was received.
        self.acknowledge(qp, psn, false);
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        if q.sq.wqe(seq).exec == Exec::Sent {
            q.sq.get_mut(seq).exec = Exec::Failed(WcStatus::LocProtErr);
            q.tx.rd_atomic = q.tx.rd_atomic.saturating_sub(1);
            q.tx.blocked = true;
        }
        self.complete_sq(qp);
        self.kick(qp);
        self.rearm(qp);
        true
    }

    pub(super) fn on_atomic_ack(&mut self, p: &Packet) {
        let Some((qp, q)) = self.requester_at(p) else {
            return;
        };
        // The common answer in one step, checked with the QP at hand.
        if self.config.fast_paths {
            if let Some((seq, psn, slot, off)) = self.atomic_ack_one(q, p) {
                if let Some((_, m)) = self.mrs.get_by_index_mut(slot) {
                    m.bytes.write(off, &p.cookie.to_le_bytes());
                    self.atomic_answered(qp, seq, psn);
                    return;
                }
            }
        }
        let Some(seq) = self.wqe_with_psn(qp, p.psn) else {
            return;
        };
        let q = self.qps.get(qp.index, qp.generation).expect("live");
        let w = ReadWqe::of(q.sq.wqe(seq));
        if w.exec != Exec::Sent
            || !matches!(
                w.opcode,
                WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
            )
        {
            return;
        }
        if w.num_sge == 1 {
            // One landing SGE: its MR looked up once (`landing_one`), the
            // 8 bytes written as `extents` and `copy_bytes` would.
            let Some((sge, _, view)) = self.landing_one(qp, seq) else {
                return;
            };
            if let Some(off) = view
                .filter(|_| sge.length >= 8)
                .and_then(|v| v.offset_of(sge.addr, 8))
            {
                if let Some((_, m)) = self.mrs.get_by_index_mut(sge.lkey >> 8) {
                    m.bytes.write(off as usize, &p.cookie.to_le_bytes());
                }
            }
            self.atomic_answered(qp, seq, w.psn);
            return;
        }
        if self.landing_fails(qp, seq) {
            return;
        }
        let q = self.qps.get(qp.index, qp.generation).expect("live");
        let sges = &q.sq.get(seq).1[..w.num_sge as usize];
        let (mut one, mut many);
        let dst: &mut [Extent] = if sges.len() <= 1 {
            one = [Extent::default(); 1];
            &mut one
        } else {
            many = [Extent::default(); EXTENTS_MAX];
            &mut many
        };
        if let Some(nd) = extents(sges, &self.mrs, q.device, 0, 8, dst) {
            copy_bytes(&mut self.mrs, &p.cookie.to_le_bytes(), &dst[..nd]);
        }
        self.atomic_answered(qp, seq, w.psn);
    }

    /// What the rest of [`Self::on_atomic_ack`] does with the common
    /// answer: `p` answers the oldest request still waiting (the one
    /// `wqe_with_psn` finds first), an atomic in flight with one landing
    /// SGE of at least 8 bytes whose MR, looked up once, passes
    /// `landing_one`'s check and holds the 8 bytes. Returns the request,
    /// its PSN, the MR's slot and the offset there, for the caller to
    /// write the original value and answer the atomic; `None`, having
    /// changed nothing, in any other case (the general path then decides,
    /// as before).
    #[inline(always)]
    fn atomic_ack_one(
        &self,
        q: &crate::world::qp::Qp,
        p: &Packet,
    ) -> Option<(u64, u32, u32, usize)> {
        let seq = q.sq.done;
        if seq >= q.tx.send_seq {
            return None;
        }
        let (w, sges, _) = q.sq.get(seq);
        if p.psn.distance_from(Psn::new(w.psn)) >= w.npkts.max(1)
            || w.exec != Exec::Sent
            || !matches!(
                w.opcode,
                WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
            )
            || w.num_sge != 1
        {
            return None;
        }
        let (psn, sge, device) = (w.psn, sges[0], q.device);
        let pd = q.pd.map_or(u32::MAX, |p| p.index);
        let (_, m) = self.mrs.get_by_index(sge.lkey >> 8)?;
        if m.lkey != sge.lkey || m.device != device {
            return None;
        }
        // `landing_one`'s check of the SGE, then the 8 bytes in it.
        let view = mr_view(m);
        let landing = sge.length >= 8 && lands_in(&view, &sge, pd);
        let off = view.offset_of(sge.addr, 8).filter(|_| landing)?;
        Some((seq, psn, sge.lkey >> 8, off as usize))
    }

    /// After the answer of atomic `seq` (PSN `psn`) landed: it is done.
    fn atomic_answered(&mut self, qp: QpHandle, seq: u64, psn: u32) {
        self.acknowledge_before(qp, Psn::new(psn));
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.sq.get_mut(seq).exec = Exec::Done;
        q.tx.rd_atomic = q.tx.rd_atomic.saturating_sub(1);
        // An atomic answered behind an unfinished READ is no progress: the
        // READ still holds the queue (issue #12 item 1).
        if seq == q.sq.done {
            q.tx.retry.on_progress();
        }
        self.after_answer(qp);
    }

    /// `len` bytes at `addr` of the MR `rkey` names on `device`.
    #[inline(always)]
    pub(super) fn remote_extent(
        &self,
        device: u32,
        rkey: u32,
        addr: u64,
        len: u64,
    ) -> Option<Extent> {
        // An MW rkey names a window of an MR (world/ext.rs).
        if let Some(t) = self.mw_target(device, rkey, None) {
            let (view, slot, base) = t?;
            let off = view.offset_of(addr, len)?;
            return Some(Extent {
                mr: slot,
                off: (base + off) as usize,
                len: len as usize,
            });
        }
        let (_, m) = self.mrs.get_by_index(rkey >> 8)?;
        if m.rkey != rkey || m.device != device {
            return None;
        }
        let off = mr_view(m).offset_of(addr, len)?;
        Some(Extent {
            mr: rkey >> 8,
            off: off as usize,
            len: len as usize,
        })
    }
}
