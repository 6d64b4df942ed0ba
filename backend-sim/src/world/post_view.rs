//! What a poster outside the world needs to run the post-time checks
//! itself (the drop-in library over the shared fabric checks work requests
//! in the program's process, as a provider does, with the same pure rules
//! the world uses: [`crate::datapath::check_post_send`],
//! [`crate::datapath::check_post_recv`]), and how the world takes the
//! requests such a poster wrote: with their inline bytes copied at post
//! time, or, for a record that makes no sense, as a NIC takes a malformed
//! WQE.

use verbs_api::{QpClass, QpState, Result, SendOpsFlags, SendWr, Verb, WcStatus, WrEx};

use super::queues::SendWqe;
use super::state::transport_of;
use super::World;
use crate::datapath::{RecvQueueView, SendQueueView};
use crate::handles::{CqHandle, QpHandle, SrqHandle};
use crate::{ErrnoFlavor, SimVerbs};

/// A QP's post-time facts at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PostSnapshot {
    /// The send-queue view (`outstanding` as now).
    pub send: SendQueueView,
    /// The receive-queue view (`outstanding` as now).
    pub recv: RecvQueueView,
    /// Send requests posted since the QP was created (the next one's
    /// sequence number).
    pub sq_tail: u64,
    /// Receive requests posted since the QP was created.
    pub rq_tail: u64,
    /// Whether a send needs nothing beyond the datapath rules (RC, UC:
    /// no address vector, no DC addressing).
    pub plain: bool,
    /// Whether the QP is UD: a send needs the datapath rules and an
    /// address handle that exists (`wr.ud`).
    pub ud: bool,
    /// The errno flavour the world answers in.
    pub flavor: ErrnoFlavor,
    /// The QP's send and receive CQs.
    pub cqs: (Option<CqHandle>, Option<CqHandle>),
    /// The QP's `send_ops_flags`, when it was created with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` (it has the `ibv_wr_*` API).
    pub send_ops: Option<SendOpsFlags>,
}

/// An SRQ's post-time facts at one moment (`ibv_post_srq_recv`'s checks:
/// [`crate::datapath::check_post_srq_recv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SrqPostSnapshot {
    /// `max_wr` as created.
    pub max_wr: u32,
    /// `max_sge` as created.
    pub max_sge: u32,
    /// Receive requests queued and not yet freed by a poll.
    pub outstanding: u32,
    /// Receive requests posted since the SRQ was created (the next one's
    /// sequence number).
    pub tail: u64,
}

impl World {
    /// The post-time facts of `qp`.
    ///
    /// # Errors
    /// `EINVAL` for a QP that does not exist.
    pub fn post_snapshot(&self, qp: QpHandle) -> Result<PostSnapshot> {
        let v = Verb::PostSend;
        let qp = self.resolve_qp(qp, v)?;
        let q = self.qp(qp, v)?;
        let p = &self.device(q.device).profile;
        let transport = transport_of(q.class);
        let state = q.phase.state();
        Ok(PostSnapshot {
            send: SendQueueView {
                transport,
                state,
                cap: q.cap,
                outstanding: u32::try_from(q.sq.occupied()).unwrap_or(u32::MAX),
                atomics_supported: p.attr.atomic_cap != verbs_api::AtomicCap::None,
                ip_csum_supported: false,
            },
            recv: RecvQueueView {
                transport,
                state,
                has_srq: q.srq.is_some(),
                max_recv_wr: q.cap.max_recv_wr,
                max_recv_sge: q.cap.max_recv_sge,
                outstanding: u32::try_from(q.rq.occupied()).unwrap_or(u32::MAX),
            },
            sq_tail: q.sq.tail,
            rq_tail: q.rq.tail,
            plain: matches!(q.class, QpClass::Rc | QpClass::Uc),
            ud: q.class == QpClass::Ud,
            flavor: self.config.errno_flavor,
            cqs: (q.send_cq, q.recv_cq),
            send_ops: self.send_ops_of(qp),
        })
    }

    /// The post-time facts of `srq`.
    ///
    /// # Errors
    /// `EINVAL` for an SRQ that does not exist.
    pub fn srq_post_snapshot(&self, srq: SrqHandle) -> Result<SrqPostSnapshot> {
        let s = self.srq(srq, Verb::PostSrqRecv)?;
        Ok(SrqPostSnapshot {
            max_wr: s.max_wr,
            max_sge: s.max_sge,
            outstanding: u32::try_from(s.ring.occupied()).unwrap_or(u32::MAX),
            tail: s.ring.tail,
        })
    }

    /// A malformed receive request for `srq`: the SRQ's context hears
    /// `IBV_EVENT_SRQ_ERR` (the request is not queued). Nothing happens
    /// for an SRQ that does not exist.
    pub fn malformed_srq_wqe(&mut self, srq: SrqHandle) {
        if let Ok(ctx) = self.srq_ctx(srq, Verb::PostSrqRecv) {
            self.raise_async(
                ctx,
                verbs_api::AsyncEventType::SrqErr,
                super::AsyncSubject::Srq(srq),
            );
        }
    }

    /// A malformed work request on `qp`'s send queue, as a NIC meets one:
    /// in RTS or SQD it takes a slot and completes with
    /// `IBV_WC_LOC_QP_OP_ERR` at its turn, moving the QP to ERR (which
    /// flushes the rest); in any other state, or with no slot free, the
    /// QP goes to ERR at once.
    pub fn malformed_wqe(&mut self, qp: QpHandle) {
        let Ok(qp) = self.resolve_qp(qp, Verb::PostSend) else {
            return;
        };
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let state = q.phase.state();
        if matches!(state, QpState::ReadyToSend | QpState::SendQueueDrain) && !q.sq.is_full() {
            q.sq.push(
                SendWqe {
                    signaled: true,
                    deferred_error: Some(WcStatus::LocQpOpErr),
                    ..SendWqe::default()
                },
                &[],
            );
            self.kick(qp);
        } else if state != QpState::Error {
            self.leave_service(qp, crate::datapath::QpFate::Error);
        }
    }
}

impl SimVerbs {
    /// `ibv_post_send` whose inline requests bring their bytes, copied
    /// when the program posted them: `carried[i]` for `wrs[i]` (ignored
    /// unless the request is inline and its payload is copied; an entry
    /// shorter than the request's length is zero-filled). Otherwise
    /// exactly `post_send`, checks and all.
    ///
    /// # Errors
    /// As `post_send`.
    pub fn post_send_carrying(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, Self>],
        carried: &[&[u8]],
    ) -> Result<()> {
        let world = self.world_mut();
        let qp = world.resolve_qp(*qp, Verb::PostSend)?;
        if let Some(i) = wrs
            .iter()
            .position(|w| w.opcode == verbs_api::WrOpcode::BindMw)
        {
            return Err(verbs_api::Error::invalid(
                Verb::PostSend,
                "BIND_MW needs wr.bind_mw, which a carried request does not have",
            )
            .with_bad_wr(i));
        }
        world.post_send_carrying(qp, wrs, carried)
    }

    /// `post_wr` (the `ibv_wr_*` batch) whose inline requests bring their
    /// bytes, copied when the program posted them (`carried[i]` for
    /// `batch[i]`); otherwise exactly `post_wr`: the same checks, whole
    /// batch or nothing.
    ///
    /// # Errors
    /// As `post_wr`; `EINVAL` when `carried` does not have one entry per
    /// request.
    pub fn post_wr_carrying(
        &mut self,
        qp: &QpHandle,
        batch: &[WrEx<'_, Self>],
        carried: &[&[u8]],
    ) -> Result<()> {
        let world = self.world_mut();
        let qp = world.resolve_qp(*qp, Verb::PostWr)?;
        world.post_wr_carrying(qp, batch, Some(carried))
    }
}
