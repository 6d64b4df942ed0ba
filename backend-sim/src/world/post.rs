//! Posting: the post-time checks (data-path.md §1.1, §1.2), the rings,
//! flushing on ERR (§4, qp-state-machine.md §7) and slot release at poll
//! time.
//!
//! The checks themselves are the datapath's pure rules
//! ([`crate::datapath::check_post_send`], `check_post_recv`,
//! `check_post_srq_recv`), the one source of truth; this module only builds
//! their views from the QP and adds what needs the arenas (a UD send's AH).
//! A refusal's kind is `ErrorKind::from_errno` of its errno. A request mlx5
//! accepts but completes in error (an opcode invalid for the QP type) keeps
//! that status in [`SendWqe::deferred_error`] for the executor.
//!
//! Accepted send requests are handed to the executor (`exec.rs`) at once,
//! which transmits them at the current virtual time when the QP is in RTS.

use verbs_api::{
    FlushInfo, QpClass, QpState, QpType, RecvWr, Result, SendFlags, SendWr, Sge, Verb, Wc,
    WcOpcode, WcStatus, WrOpcode,
};

use super::queues::{RecvWqe, SendWqe};
use super::state::{transport_of, CqEntry, QueueKind};
use super::{invalid, Mr, World};
use crate::arena::Arena;
use crate::datapath::{
    check_post_recv, check_post_send, check_post_srq_recv, inline_carries_payload, opcode_info,
    RecvAdmission, RecvQueueView, SendAdmission, SendListCheck, SendQueueView, SendWrView,
};
use crate::handles::{QpHandle, SrqHandle};
use crate::trace::TraceEvent;
use crate::SimVerbs;

/// Ring occupancy as the `u32` the post checks compare with the caps.
fn occupancy(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Releases `n` posted requests' holds on the MR `key` names; an MR
/// deregistered under its requests is freed with the last one.
fn unpin(mrs: &mut Arena<Mr>, device: u32, key: u32, n: u32) {
    if let Some((generation, m)) = mrs.get_by_index_mut(key >> 8) {
        if m.lkey == key && m.device == device {
            m.pins = m.pins.saturating_sub(n);
            if m.deregistered && m.pins == 0 {
                mrs.remove(key >> 8, generation);
            }
        } else {
            unpin_retired(mrs, device, key, n);
        }
    }
}

/// [`unpin`] by a key a re-registration retired while requests named it
/// (`Mr::retired_keys`); nothing for any other key.
#[cold]
#[inline(never)]
fn unpin_retired(mrs: &mut Arena<Mr>, device: u32, key: u32, n: u32) {
    if let Some((generation, m)) = mrs.get_by_index_mut(key >> 8) {
        if m.pinned_by_retired(key, device) {
            m.pins = m.pins.saturating_sub(n);
            if m.deregistered && m.pins == 0 {
                mrs.remove(key >> 8, generation);
            }
        }
    }
}

/// Adds `n` pins to the MR of a key a re-registration retired while
/// requests named it; nothing for any other key.
#[cold]
#[inline(never)]
fn pin_retired(mrs: &mut Arena<Mr>, device: u32, key: u32, n: u32) {
    if let Some((_, m)) = mrs.get_by_index_mut(key >> 8) {
        if m.pinned_by_retired(key, device) {
            m.pins += n;
        }
    }
}

/// Pins or unpins in runs: consecutive changes of one key cost one MR
/// lookup (a post list pins, and a poll frees, a whole batch of requests,
/// usually over one MR). The same result as one at a time: `n` pins of one
/// key at once are `n` pins, unpins saturate at 0 either way, and an MR
/// freed at 0 is not there for the rest of its run.
struct KeyRun {
    device: u32,
    /// Pins when true, unpins when false.
    pin: bool,
    key: u32,
    n: u32,
}

impl KeyRun {
    /// A run of unpins on `device`.
    fn unpins(device: u32) -> Self {
        Self {
            device,
            pin: false,
            key: 0,
            n: 0,
        }
    }

    /// A run of pins on `device`.
    fn pins(device: u32) -> Self {
        Self {
            pin: true,
            ..Self::unpins(device)
        }
    }

    #[inline]
    fn add(&mut self, mrs: &mut Arena<Mr>, key: u32) {
        if self.n > 0 && key != self.key {
            self.flush(mrs);
        }
        self.key = key;
        self.n += 1;
    }

    fn flush(&mut self, mrs: &mut Arena<Mr>) {
        if self.n == 0 {
            return;
        }
        if self.pin {
            if let Some((_, m)) = mrs.get_by_index_mut(self.key >> 8) {
                if m.lkey == self.key && m.device == self.device {
                    m.pins += self.n;
                } else {
                    pin_retired(mrs, self.device, self.key, self.n);
                }
            }
        } else {
            unpin(mrs, self.device, self.key, self.n);
        }
        self.n = 0;
    }
}

fn pin(mrs: &mut Arena<Mr>, device: u32, key: u32) {
    if let Some((_, m)) = mrs.get_by_index_mut(key >> 8) {
        if m.lkey == key && m.device == device {
            m.pins += 1;
        } else {
            pin_retired(mrs, device, key, 1);
        }
    }
}

impl World {
    /// `ibv_post_send`: checks each request, stops at the first bad one
    /// (`bad_wr`), queues the rest; in ERR or SQE they are flushed at once.
    pub(crate) fn post_send(&mut self, qp: QpHandle, wrs: &[SendWr<'_, SimVerbs>]) -> Result<()> {
        self.post_send_carrying(qp, wrs, &[])
    }

    /// [`Self::post_send`] with the bytes of inline requests carried
    /// (`carried[i]` for `wrs[i]`, copied by the poster at post time)
    /// instead of read from the MRs now.
    pub(crate) fn post_send_carrying(
        &mut self,
        qp: QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        carried: &[&[u8]],
    ) -> Result<()> {
        let v = Verb::PostSend;
        let mut posted = 0;
        let result = (|| {
            while posted < wrs.len() {
                posted += self.post_plain_sends(qp, &wrs[posted..]);
                if let Some(wr) = wrs.get(posted) {
                    self.post_one_send(qp, wr, carried.get(posted).copied())
                        .map_err(|e| e.with_bad_wr(posted))?;
                    posted += 1;
                }
            }
            Ok(())
        })();
        // A post that built no WQE writes no doorbell (mlx5's post_send
        // rings only when it queued something), so a program that retries
        // a refused post pays nothing for the refusals.
        if posted > 0 {
            self.ring_doorbell(qp, &wrs[..posted]);
        }
        let state = self.qp(qp, v)?.phase.state();
        if matches!(state, QpState::Error | QpState::SendQueueError) {
            self.flush_queue(qp, QueueKind::Send);
            let q = self.qp_mut(qp, v)?;
            q.tx.send_seq = q.sq.tail;
        } else {
            self.kick(qp);
        }
        result
    }

    /// The adapter model's doorbell (module `adapter`): the WQEs of this
    /// call are known to the adapter `doorbell_ns` from now, plus a PCIe
    /// fetch on the QP's send engine unless one inline WQE went with the
    /// doorbell (BlueFlame).
    fn ring_doorbell(&mut self, qp: QpHandle, wrs: &[SendWr<'_, SimVerbs>]) {
        let now = self.now_ns;
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        let device = q.device as usize;
        let a = &self.devices[device].profile.adapter;
        if a.is_none() {
            return;
        }
        let blueflame = wrs.len() == 1 && wrs[0].send_flags.contains(SendFlags::INLINE);
        let fetch = if blueflame { 0 } else { a.wqe_fetch_ns };
        let (doorbell_ns, gap, post) = (a.doorbell_ns, a.doorbell_gap_ns, a.post_ns);
        // A modelled host CPU (`post_ns`) makes one call at a time: one
        // posting thread per device, as perftest's.
        let at = if post == 0 {
            now
        } else {
            let d = &mut self.devices[device];
            let start = now.max(d.host_free_ns);
            d.host_free_ns = start + post;
            start
        };
        // The fetch is latency (fetches of successive doorbells overlap);
        // each doorbell costs the QP's send engine `doorbell_gap_ns`, so
        // unbatched posts pay it once a WQE, a post list once a list.
        if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
            q.tx.engine_free_ns = (at + doorbell_ns + fetch).max(q.tx.engine_free_ns + gap);
        }
    }

    /// The requests at the start of `wrs` that need nothing but the
    /// datapath rules and the ring, posted with the QP, its device and the
    /// queue view looked up once (a post list of plain requests: no UD or
    /// DC addressing, no FLUSH or ATOMIC_WRITE, no INLINE): each gets what
    /// [`Self::post_one_send`] gives it (the same checks through
    /// [`SendListCheck`], WQE, pins and trace record). Returns how many
    /// were posted; stops, having done nothing for it, at the first request
    /// that is not plain or that the checks refuse, for `post_one_send`
    /// to take (and refuse with its error).
    fn post_plain_sends(&mut self, qp: QpHandle, wrs: &[SendWr<'_, SimVerbs>]) -> usize {
        if !self.config.fast_paths {
            return 0;
        }
        let flavor = self.config.errno_flavor;
        let Self {
            qps,
            mrs,
            devices,
            trace,
            now_ns,
            ..
        } = self;
        let Some(q) = qps.get_mut(qp.index, qp.generation) else {
            return 0;
        };
        if q.qp_type == QpType::Ud || q.class == QpClass::Dci {
            return 0;
        }
        let device = q.device;
        let p = &devices[device as usize].profile;
        let mut check = SendListCheck::new(
            SendQueueView {
                transport: transport_of(q.class),
                state: q.phase.state(),
                cap: q.cap,
                outstanding: 0,
                atomics_supported: p.attr.atomic_cap != verbs_api::AtomicCap::None,
                ip_csum_supported: false,
            },
            flavor,
        );
        let mut pins = KeyRun::pins(device);
        let mut n = 0;
        for wr in wrs {
            if wr.dc.is_some()
                || wr.send_flags.contains(SendFlags::INLINE)
                || matches!(wr.opcode, WrOpcode::Flush | WrOpcode::AtomicWrite)
            {
                break;
            }
            let Ok((admission, length)) =
                check.check(&SendWrView::of(wr), occupancy(q.sq.occupied()))
            else {
                break;
            };
            *q.sq.push_slot(wr.sg_list) = SendWqe {
                wr_id: wr.wr_id,
                opcode: wr.opcode,
                send_flags: wr.send_flags,
                imm_data: wr.imm_data,
                rdma: wr.rdma,
                atomic: wr.atomic,
                ah: None,
                remote_qpn: 0,
                remote_qkey: 0,
                remote_srqn: wr.remote_srqn,
                dc_key: 0,
                stream: 0,
                flush: wr.flush,
                num_sge: wr.sg_list.len() as u32,
                signaled: q.sq_sig_all || wr.send_flags.contains(SendFlags::SIGNALED),
                length,
                deferred_error: match admission {
                    SendAdmission::CompleteInError(status) => Some(status),
                    SendAdmission::Execute | SendAdmission::Flush => None,
                },
                ..SendWqe::default()
            };
            for s in wr.sg_list {
                pins.add(mrs, s.lkey);
            }
            trace.push(
                *now_ns,
                TraceEvent::Posted {
                    device,
                    qpn: q.qp_num,
                    wr_id: wr.wr_id,
                    recv: false,
                },
            );
            n += 1;
        }
        pins.flush(mrs);
        n
    }

    /// One request: the datapath rules (`check_post_send`, data-path §1.1,
    /// §1.2) decide; the UD address vector is checked here (it needs the AH
    /// arena).
    fn post_one_send(
        &mut self,
        qp: QpHandle,
        wr: &SendWr<'_, SimVerbs>,
        carried: Option<&[u8]>,
    ) -> Result<()> {
        let v = Verb::PostSend;
        let flavor = self.config.errno_flavor;
        let q = self.qp(qp, v)?;
        let p = &self.device(q.device).profile;
        let view = SendQueueView {
            transport: transport_of(q.class),
            state: q.phase.state(),
            cap: q.cap,
            outstanding: occupancy(q.sq.occupied()),
            atomics_supported: p.attr.atomic_cap != verbs_api::AtomicCap::None,
            ip_csum_supported: false,
        };
        let admission =
            check_post_send(&view, &SendWrView::of(wr), flavor).map_err(|r| r.to_error(v, 0))?;
        // FLUSH and ATOMIC_WRITE exist only where the device claims them
        // (rxe); elsewhere they are refused as mlx5 refuses opcodes past
        // its table.
        if matches!(wr.opcode, WrOpcode::Flush | WrOpcode::AtomicWrite) {
            if !p.flush_and_atomic_write {
                return Err(invalid(
                    v,
                    format!(
                        "opcode {} is not supported by the {} device",
                        wr.opcode, p.name
                    ),
                ));
            }
            let f = wr.flush;
            if wr.opcode == WrOpcode::Flush
                && (f.flush_type == 0
                    || f.flush_type & !(FlushInfo::GLOBAL | FlushInfo::PERSISTENT) != 0
                    || f.level > FlushInfo::LEVEL_MR
                    || !wr.sg_list.is_empty())
            {
                return Err(invalid(
                    v,
                    format!(
                        "FLUSH needs type GLOBAL (1) and/or PERSISTENT (2), level RANGE (0) or MR (1) and no SGEs (type {}, level {}, {} SGEs)",
                        f.flush_type,
                        f.level,
                        wr.sg_list.len()
                    ),
                ));
            }
        }
        let (ah, remote_qpn, remote_qkey) = match (q.qp_type, wr.ud.as_ref()) {
            (QpType::Ud, None) => {
                return Err(invalid(
                    v,
                    "a UD send needs wr.ud (ah, remote_qpn, remote_qkey)",
                ))
            }
            (QpType::Ud, Some(ud)) => {
                self.ah(*ud.ah, v)?;
                (Some(*ud.ah), ud.remote_qpn & 0xff_ffff, ud.remote_qkey)
            }
            _ => (None, 0, 0),
        };
        // DC addressing (world/dc.rs): required on a DCI, refused elsewhere.
        let dc = self.dc_addressing(qp, wr)?;
        let q = self.qp(qp, v)?;
        let (ah, remote_qpn, dc_key, stream) = match dc {
            Some((ah, dctn, key, stream)) => (Some(ah), dctn, key, stream),
            None => (ah, remote_qpn, 0, 0),
        };
        let length: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        // INLINE copies bytes only for opcodes that carry a payload and
        // only when the request will execute; on READ/atomics (deferred
        // LOC_QP_OP_ERR under mlx5) the flag is dropped from the WQE so
        // the gather list is neither copied nor treated as inline later.
        let inline = wr.send_flags.contains(SendFlags::INLINE)
            && inline_carries_payload(wr.opcode)
            && matches!(admission, SendAdmission::Execute | SendAdmission::Flush);
        let send_flags = if inline {
            wr.send_flags
        } else {
            wr.send_flags - SendFlags::INLINE
        };
        let wqe = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            send_flags,
            imm_data: wr.imm_data,
            rdma: wr.rdma,
            atomic: wr.atomic,
            ah,
            remote_qpn,
            remote_qkey,
            remote_srqn: wr.remote_srqn,
            dc_key,
            stream,
            flush: wr.flush,
            num_sge: wr.sg_list.len() as u32,
            signaled: q.sq_sig_all || wr.send_flags.contains(SendFlags::SIGNALED),
            length,
            deferred_error: match admission {
                SendAdmission::CompleteInError(status) => Some(status),
                SendAdmission::Execute | SendAdmission::Flush => None,
            },
            ..SendWqe::default()
        };
        let device = q.device;
        let inline_src = if inline && length > 0 && carried.is_none() {
            Some(self.inline_sources(qp, wr.sg_list)?)
        } else {
            None
        };
        let Self { qps, mrs, .. } = self;
        let q = qps.get_mut(qp.index, qp.generation).expect("checked");
        let seq = q.sq.push(wqe, wr.sg_list);
        if let (true, Some(bytes)) = (inline && length > 0, carried) {
            // Copied by the poster when the program posted it.
            let area = q.sq.inline_area_mut(seq);
            let n = area.len().min(bytes.len());
            area[..n].copy_from_slice(&bytes[..n]);
            area[n..].fill(0);
        } else if let Some(srcs) = inline_src {
            // IBV_SEND_INLINE: the bytes are copied now (data-path §3.1).
            let area = q.sq.inline_area_mut(seq);
            let mut at = 0usize;
            for (mr, off, len) in srcs.into_iter().flatten() {
                if let Some((_, m)) = mrs.get_by_index(mr) {
                    m.bytes.read(off, &mut area[at..at + len]);
                }
                at += len;
            }
        }
        if !inline {
            for s in wr.sg_list {
                pin(mrs, device, s.lkey);
            }
        }
        let qpn = q.qp_num;
        self.record(TraceEvent::Posted {
            device,
            qpn,
            wr_id: wr.wr_id,
            recv: false,
        });
        Ok(())
    }

    /// Where the bytes of an inline gather list live: `(MR slot, offset,
    /// length)` per SGE. The lkey of an inline SGE is not used by hardware
    /// (the CPU copies from the address), so the MR is found by address in
    /// the QP's process when the lkey does not cover it.
    ///
    /// # Divergence from hardware
    /// Hardware copies from any mapped address; the simulator can only
    /// read memory it registered, so an inline SGE outside every MR of the
    /// process is refused with `EFAULT` (`ApiMisuse`).
    pub(super) fn inline_sources(
        &self,
        qp: QpHandle,
        sges: &[Sge],
    ) -> Result<[Option<(u32, usize, usize)>; 32]> {
        let v = Verb::PostSend;
        let q = self.qp(qp, v)?;
        let process = self.ctx(q.ctx, v)?.process;
        let mut out = [None; 32];
        for (i, s) in sges.iter().enumerate().take(32) {
            if s.length == 0 {
                continue;
            }
            let len = u64::from(s.length);
            let by_key = self
                .mrs
                .get_by_index(s.lkey >> 8)
                .filter(|(_, m)| m.lkey == s.lkey && m.device == q.device)
                .and_then(|(_, m)| {
                    super::state::mr_view(m)
                        .offset_of(s.addr, len)
                        .map(|o| (s.lkey >> 8, o as usize))
                });
            let found = by_key.or_else(|| {
                self.mrs.iter().find_map(|(idx, _, m)| {
                    let same_process = self
                        .pds
                        .get(m.pd.index, m.pd.generation)
                        .and_then(|p| self.contexts.get(p.ctx.index, p.ctx.generation))
                        .is_some_and(|c| c.process == process);
                    (same_process
                        && s.addr >= m.addr
                        && s.addr + len <= m.addr + m.bytes.len() as u64)
                        .then(|| (idx, (s.addr - m.addr) as usize))
                })
            });
            let Some((mr, off)) = found else {
                return Err(verbs_api::Error::new(
                    v,
                    verbs_api::ErrorKind::ApiMisuse,
                    format!(
                        "inline SGE {i} ({:#x}, {} bytes) is not inside memory the simulator registered",
                        s.addr, s.length
                    ),
                ).with_errno(verbs_api::errno::EFAULT));
            };
            out[i] = Some((mr, off, s.length as usize));
        }
        Ok(out)
    }

    /// `ibv_post_recv`.
    pub(crate) fn post_recv(&mut self, qp: QpHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let v = Verb::PostRecv;
        let result = (|| {
            for (i, wr) in wrs.iter().enumerate() {
                self.post_one_recv(qp, wr).map_err(|e| e.with_bad_wr(i))?;
            }
            Ok(())
        })();
        if self.qp(qp, v)?.phase.state() == QpState::Error {
            self.flush_queue(qp, QueueKind::Recv);
        }
        result
    }

    /// One receive request, validated by `check_post_recv` (data-path §1.1,
    /// §1.2).
    fn post_one_recv(&mut self, qp: QpHandle, wr: &RecvWr<'_>) -> Result<()> {
        let v = Verb::PostRecv;
        let flavor = self.config.errno_flavor;
        let q = self.qp(qp, v)?;
        let view = RecvQueueView {
            transport: transport_of(q.class),
            state: q.phase.state(),
            has_srq: q.srq.is_some(),
            max_recv_wr: q.cap.max_recv_wr,
            max_recv_sge: q.cap.max_recv_sge,
            outstanding: occupancy(q.rq.occupied()),
        };
        // Queue or flush: both take a slot; `post_recv` flushes in ERR.
        let _: RecvAdmission =
            check_post_recv(&view, wr.sg_list, flavor).map_err(|r| r.to_error(v, 0))?;
        let num_sge = wr.sg_list.len() as u32;
        let length = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        let device = q.device;
        let Self { qps, mrs, .. } = self;
        let q = qps.get_mut(qp.index, qp.generation).expect("checked");
        q.rq.push(
            RecvWqe {
                wr_id: wr.wr_id,
                num_sge,
                length,
            },
            wr.sg_list,
        );
        for s in wr.sg_list {
            pin(mrs, device, s.lkey);
        }
        let qpn = q.qp_num;
        self.record(TraceEvent::Posted {
            device,
            qpn,
            wr_id: wr.wr_id,
            recv: true,
        });
        Ok(())
    }

    /// `ibv_post_srq_recv`: `check_post_srq_recv` (full → `ENOMEM`, too many
    /// SGEs → `EINVAL`).
    pub(crate) fn post_srq_recv(&mut self, srq: SrqHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let v = Verb::PostSrqRecv;
        // A destroyed SRQ is EINVAL even for an empty list, as a destroyed
        // QP is for post_send/post_recv.
        self.srq(srq, v)?;
        for (i, wr) in wrs.iter().enumerate() {
            let s = self.srq(srq, v)?;
            check_post_srq_recv(
                s.max_wr,
                s.max_sge,
                occupancy(s.ring.occupied()),
                wr.sg_list,
            )
            .map_err(|r| r.to_error(v, i))?;
            let num_sge = wr.sg_list.len() as u32;
            let device = s.device;
            let length = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
            let Self { srqs, mrs, .. } = self;
            let s = srqs.get_mut(srq.index, srq.generation).expect("checked");
            s.ring.push(
                RecvWqe {
                    wr_id: wr.wr_id,
                    num_sge,
                    length,
                },
                wr.sg_list,
            );
            for g in wr.sg_list {
                pin(mrs, device, g.lkey);
            }
        }
        Ok(())
    }

    /// Completes every outstanding request of one queue with `WR_FLUSH_ERR`,
    /// in posting order, whether signalled or not (data-path.md §3.1, §4.2 #19).
    pub(crate) fn flush_queue(&mut self, qp: QpHandle, queue: QueueKind) {
        loop {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                return;
            };
            let (ring_done, ring_tail) = match queue {
                QueueKind::Send => (q.sq.done, q.sq.tail),
                QueueKind::Recv => (q.rq.done, q.rq.tail),
                QueueKind::Srq(_) => return,
            };
            if ring_done >= ring_tail {
                return;
            }
            let seq = ring_done;
            let (wr_id, opcode, cq) = match queue {
                QueueKind::Send => {
                    let w = *q.sq.wqe(seq);
                    // The WR's requester opcode (data-path §2.2, one table).
                    let op = opcode_info(w.opcode).map_or(WcOpcode::Send, |i| i.requester_opcode);
                    q.sq.done += 1;
                    (w.wr_id, op, q.send_cq)
                }
                QueueKind::Recv => {
                    let w = *q.rq.wqe(seq);
                    q.rq.done += 1;
                    (w.wr_id, WcOpcode::Recv, q.recv_cq)
                }
                QueueKind::Srq(_) => return,
            };
            let wc = Wc {
                wr_id,
                status: WcStatus::WrFlushErr,
                opcode,
                qp_num: q.qp_num,
                ..Wc::default()
            };
            let entry = CqEntry {
                wc,
                qp,
                queue,
                seq,
                ts_ns: 0,
            };
            match cq {
                Some(cq) => self.push_completion(cq, entry, false),
                // No CQ to report to: the slot is free at once.
                None => self.release_wqes(qp, queue, seq),
            }
        }
    }

    /// Flushes both queues (entering ERR).
    pub(crate) fn flush_queues(&mut self, qp: QpHandle) {
        self.flush_queue(qp, QueueKind::Send);
        self.flush_queue(qp, QueueKind::Recv);
    }

    /// Frees the slots of `queue` up to `seq` (a polled CQE covers every
    /// earlier request of its queue) and unpins their MRs.
    pub(crate) fn release_wqes(&mut self, qp: QpHandle, queue: QueueKind, seq: u64) {
        if let QueueKind::Srq(srq) = queue {
            let Self { srqs, mrs, .. } = self;
            let Some(s) = srqs.get_mut(srq.index, srq.generation) else {
                return;
            };
            let device = s.device;
            let range = s.ring.free_through(seq);
            let mut run = KeyRun::unpins(device);
            s.ring.for_each_freed(range, |w, sges| {
                for g in &sges[..w.num_sge as usize] {
                    run.add(mrs, g.lkey);
                }
            });
            run.flush(mrs);
            return;
        }
        let Self { qps, mrs, .. } = self;
        let Some(q) = qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let device = q.device;
        match queue {
            QueueKind::Send => {
                let range = q.sq.free_through(seq);
                let mut run = KeyRun::unpins(device);
                q.sq.for_each_freed(range, |w, sges| {
                    if !w.send_flags.contains(SendFlags::INLINE) {
                        for g in &sges[..w.num_sge as usize] {
                            run.add(mrs, g.lkey);
                        }
                    }
                });
                run.flush(mrs);
            }
            QueueKind::Recv => {
                let range = q.rq.free_through(seq);
                let mut run = KeyRun::unpins(device);
                q.rq.for_each_freed(range, |w, sges| {
                    for g in &sges[..w.num_sge as usize] {
                        run.add(mrs, g.lkey);
                    }
                });
                run.flush(mrs);
            }
            QueueKind::Srq(_) => {}
        }
    }
}
