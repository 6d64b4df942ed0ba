//! Posting: the post-time checks that need no fabric (data-path.md §1.1,
//! §1.2), the rings, flushing on ERR (§4, qp-state-machine.md §7) and slot
//! release at poll time.
//!
//! Execution of work requests in RTS (packets, placement, success
//! completions) belongs to the data path and is not modelled yet: accepted
//! requests stay outstanding until the QP enters ERR (flushed) or RESET
//! (dropped).

use verbs_api::{
    errno, AtomicCap, Error, QpState, QpType, RecvWr, Result, SendFlags, SendWr, Verb, Wc,
    WcOpcode, WcStatus, WrOpcode,
};

use super::cq::{CqEntry, QueueKind};
use super::queues::{RecvWqe, SendWqe};
use super::{invalid, no_mem, unsupported, Mr, World};
use crate::arena::Arena;
use crate::handles::{QpHandle, SrqHandle};
use crate::{ErrnoFlavor, SimVerbs};

/// Whether `op` is a valid send opcode for `qp_type` (data-path.md §2.1).
fn opcode_valid_for(op: WrOpcode, qp_type: QpType) -> bool {
    use WrOpcode as O;
    match qp_type {
        QpType::Ud => matches!(op, O::Send | O::SendWithImm | O::Tso),
        QpType::Uc => matches!(
            op,
            O::RdmaWrite
                | O::RdmaWriteWithImm
                | O::Send
                | O::SendWithImm
                | O::LocalInv
                | O::BindMw
                | O::SendWithInv
        ),
        QpType::Rc | QpType::XrcSend => !matches!(op, O::Tso | O::Driver1 | O::Unknown(_)),
        QpType::RawPacket => matches!(op, O::Send | O::Tso),
        _ => false,
    }
}

fn is_atomic(op: WrOpcode) -> bool {
    matches!(op, WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd)
}

/// A post error with the driver's errno for this flavor.
fn post_error(verb: Verb, flavor: ErrnoFlavor, mlx5_errno: i32, msg: String) -> Error {
    match flavor {
        ErrnoFlavor::Mlx5 => Error::from_errno(verb, mlx5_errno, msg),
        ErrnoFlavor::Spec => Error::invalid(verb, msg),
    }
}

fn unpin(mrs: &mut Arena<Mr>, device: u32, key: u32) {
    if let Some((_, m)) = mrs.get_by_index_mut(key >> 8) {
        if m.lkey == key && m.device == device {
            m.pins = m.pins.saturating_sub(1);
        }
    }
}

fn pin(mrs: &mut Arena<Mr>, device: u32, key: u32) {
    if let Some((_, m)) = mrs.get_by_index_mut(key >> 8) {
        if m.lkey == key && m.device == device {
            m.pins += 1;
        }
    }
}

impl World {
    /// `ibv_post_send`: checks each request, stops at the first bad one
    /// (`bad_wr`), queues the rest; in ERR or SQE they are flushed at once.
    pub(crate) fn post_send(&mut self, qp: QpHandle, wrs: &[SendWr<'_, SimVerbs>]) -> Result<()> {
        let v = Verb::PostSend;
        let flavor = self.config.errno_flavor;
        let result = (|| {
            for (i, wr) in wrs.iter().enumerate() {
                self.post_one_send(qp, wr, flavor)
                    .map_err(|e| e.with_bad_wr(i))?;
            }
            Ok(())
        })();
        let state = self.qp(qp, v)?.phase.state();
        if matches!(state, QpState::Error | QpState::SendQueueError) {
            self.flush_queue(qp, QueueKind::Send);
        }
        result
    }

    fn post_one_send(
        &mut self,
        qp: QpHandle,
        wr: &SendWr<'_, SimVerbs>,
        flavor: ErrnoFlavor,
    ) -> Result<()> {
        let v = Verb::PostSend;
        let q = self.qp(qp, v)?;
        let p = &self.device(q.device).profile;
        let state = q.phase.state();
        let mlx5 = flavor == ErrnoFlavor::Mlx5;
        // mlx5 checks the ring first (`mlx5_wq_overflow`), then the state.
        if mlx5 && q.sq.is_full() {
            return Err(no_mem(
                v,
                format!("the send queue is full ({} outstanding)", q.sq.occupied()),
            ));
        }
        let state_ok = if mlx5 {
            q.sq_open
        } else {
            !matches!(
                state,
                QpState::Reset | QpState::Init | QpState::ReadyToReceive
            )
        };
        if !state_ok {
            return Err(post_error(
                v,
                flavor,
                errno::ENOMEM,
                format!("the QP is in {state}: sends are accepted only once it has reached RTS (IBA C10-22, C10-25)"),
            ));
        }
        if matches!(wr.opcode, WrOpcode::Unknown(_) | WrOpcode::Driver1) {
            return Err(invalid(
                v,
                format!("opcode {} is not a valid ibv_wr_opcode", wr.opcode),
            ));
        }
        if !opcode_valid_for(wr.opcode, q.qp_type) && !mlx5 {
            return Err(invalid(
                v,
                format!("opcode {} is not valid on a {} QP", wr.opcode, q.qp_type),
            ));
        }
        if is_atomic(wr.opcode) && p.attr.atomic_cap == AtomicCap::None {
            return Err(unsupported(v, "the device has no atomics"));
        }
        let num_sge = wr.sg_list.len() as u32;
        if num_sge > q.cap.max_send_sge {
            return Err(post_error(
                v,
                flavor,
                errno::ENOMEM,
                format!(
                    "num_sge {num_sge} is above max_send_sge {}",
                    q.cap.max_send_sge
                ),
            ));
        }
        let length: u64 = wr.sg_list.iter().map(|s| u64::from(s.length)).sum();
        let inline = wr.send_flags.contains(SendFlags::INLINE);
        if inline {
            if length > u64::from(q.cap.max_inline_data) {
                return Err(post_error(
                    v,
                    flavor,
                    errno::ENOMEM,
                    format!(
                        "{length} inline bytes are above max_inline_data {}",
                        q.cap.max_inline_data
                    ),
                ));
            }
            if !mlx5 && (wr.opcode == WrOpcode::RdmaRead || is_atomic(wr.opcode)) {
                return Err(invalid(
                    v,
                    format!("IBV_SEND_INLINE is not valid for {}", wr.opcode),
                ));
            }
        }
        if !mlx5 {
            if is_atomic(wr.opcode)
                && (num_sge != 1 || wr.sg_list[0].length != 8 || wr.atomic.remote_addr % 8 != 0)
            {
                return Err(invalid(
                    v,
                    "an atomic needs one 8-byte SGE and an 8-byte aligned remote_addr",
                ));
            }
            if length > 1 << 31 {
                return Err(invalid(v, format!("message length {length} is above 2^31")));
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
        if !mlx5 && q.sq.is_full() {
            return Err(no_mem(
                v,
                format!("the send queue is full ({} outstanding)", q.sq.occupied()),
            ));
        }
        let wqe = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            send_flags: wr.send_flags,
            imm_data: wr.imm_data,
            rdma: wr.rdma,
            atomic: wr.atomic,
            ah,
            remote_qpn,
            remote_qkey,
            remote_srqn: wr.remote_srqn,
            num_sge,
            signaled: q.sq_sig_all || wr.send_flags.contains(SendFlags::SIGNALED),
            length,
        };
        let device = q.device;
        let Self { qps, mrs, .. } = self;
        let q = qps.get_mut(qp.index, qp.generation).expect("checked");
        q.sq.push(wqe, wr.sg_list);
        if !inline {
            for s in wr.sg_list {
                pin(mrs, device, s.lkey);
            }
        }
        Ok(())
    }

    /// `ibv_post_recv`.
    pub(crate) fn post_recv(&mut self, qp: QpHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let v = Verb::PostRecv;
        let flavor = self.config.errno_flavor;
        let result = (|| {
            for (i, wr) in wrs.iter().enumerate() {
                self.post_one_recv(qp, wr, flavor)
                    .map_err(|e| e.with_bad_wr(i))?;
            }
            Ok(())
        })();
        if self.qp(qp, v)?.phase.state() == QpState::Error {
            self.flush_queue(qp, QueueKind::Recv);
        }
        result
    }

    fn post_one_recv(&mut self, qp: QpHandle, wr: &RecvWr<'_>, flavor: ErrnoFlavor) -> Result<()> {
        let v = Verb::PostRecv;
        let q = self.qp(qp, v)?;
        let mlx5 = flavor == ErrnoFlavor::Mlx5;
        let num_sge = wr.sg_list.len() as u32;
        if q.srq.is_some() {
            return Err(post_error(
                v,
                flavor,
                errno::ENOMEM,
                "the QP receives from an SRQ: use ibv_post_srq_recv (it has no receive queue)"
                    .to_owned(),
            ));
        }
        if mlx5 && q.rq.is_full() {
            return Err(no_mem(
                v,
                format!(
                    "the receive queue is full ({} outstanding)",
                    q.rq.occupied()
                ),
            ));
        }
        let state = q.phase.state();
        let state_ok = if mlx5 {
            q.rq_open
        } else {
            state != QpState::Reset
        };
        if !state_ok {
            return Err(invalid(
                v,
                format!("the QP is in {state}: receives are accepted from INIT on (IBA C10-22)"),
            ));
        }
        if num_sge > q.cap.max_recv_sge {
            return Err(invalid(
                v,
                format!(
                    "num_sge {num_sge} is above max_recv_sge {}",
                    q.cap.max_recv_sge
                ),
            ));
        }
        if q.rq.is_full() {
            return Err(no_mem(
                v,
                format!(
                    "the receive queue is full ({} outstanding)",
                    q.rq.occupied()
                ),
            ));
        }
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
        Ok(())
    }

    /// `ibv_post_srq_recv`: `max_sge` exceeded → `EINVAL`, full → `ENOMEM`.
    pub(crate) fn post_srq_recv(&mut self, srq: SrqHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let v = Verb::PostSrqRecv;
        for (i, wr) in wrs.iter().enumerate() {
            let s = self.srq(srq, v)?;
            let num_sge = wr.sg_list.len() as u32;
            if num_sge > s.max_sge {
                return Err(invalid(
                    v,
                    format!("num_sge {num_sge} is above the SRQ's max_sge {}", s.max_sge),
                )
                .with_bad_wr(i));
            }
            if s.ring.is_full() {
                return Err(
                    no_mem(v, format!("the SRQ is full ({} posted)", s.ring.occupied()))
                        .with_bad_wr(i),
                );
            }
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
            };
            if ring_done >= ring_tail {
                return;
            }
            let seq = ring_done;
            let (wr_id, opcode, cq) = match queue {
                QueueKind::Send => {
                    let w = *q.sq.get(seq).0;
                    let op = match w.opcode {
                        WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
                        WrOpcode::RdmaRead => WcOpcode::RdmaRead,
                        WrOpcode::AtomicCmpAndSwp => WcOpcode::CompSwap,
                        WrOpcode::AtomicFetchAndAdd => WcOpcode::FetchAdd,
                        _ => WcOpcode::Send,
                    };
                    q.sq.done += 1;
                    (w.wr_id, op, q.send_cq)
                }
                QueueKind::Recv => {
                    let w = *q.rq.get(seq).0;
                    q.rq.done += 1;
                    (w.wr_id, WcOpcode::Recv, q.recv_cq)
                }
            };
            let wc = Wc {
                wr_id,
                status: WcStatus::WrFlushErr,
                opcode,
                qp_num: q.qp_num,
                ..Wc::default()
            };
            let entry = CqEntry { wc, qp, queue, seq };
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
        let Self { qps, mrs, .. } = self;
        let Some(q) = qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let device = q.device;
        match queue {
            QueueKind::Send => {
                let range = q.sq.free_through(seq);
                for s in range {
                    let (w, sges, _) = q.sq.get_freed(s);
                    if !w.send_flags.contains(SendFlags::INLINE) {
                        for g in &sges[..w.num_sge as usize] {
                            unpin(mrs, device, g.lkey);
                        }
                    }
                }
            }
            QueueKind::Recv => {
                let range = q.rq.free_through(seq);
                for s in range {
                    let (w, sges, _) = q.rq.get_freed(s);
                    for g in &sges[..w.num_sge as usize] {
                        unpin(mrs, device, g.lkey);
                    }
                }
            }
        }
    }
}
