//! Completion queues and completion channels.

use std::collections::VecDeque;

use verbs_api::{AsyncEventType, Result, Verb, Wc, WcStatus};

use super::state::{CqEntry, QueueKind};
use super::{busy, invalid, misuse, AsyncSubject, CompChannel, World};
use crate::handles::{CompChannelHandle, ContextHandle, CqHandle, QpHandle};
use crate::profile::DriverModel;
use crate::trace::TraceEvent;

#[derive(Debug)]
pub(crate) struct Cq {
    pub(crate) ctx: ContextHandle,
    pub(crate) device: u32,
    pub(crate) cqe: u32,
    pub(crate) cq_context: u64,
    pub(crate) channel: Option<CompChannelHandle>,
    /// QPs (send and receive side counted once each) and SRQs using the CQ.
    pub(crate) users: u32,
    pub(crate) entries: VecDeque<CqEntry>,
    /// `Some(solicited_only)` while armed by `ibv_req_notify_cq`.
    pub(crate) armed: Option<bool>,
    pub(crate) events_unacked: u32,
    /// Set after an overrun: the CQ is unusable (data-path.md §6.3).
    pub(crate) overrun: bool,
    /// Where its completions are mirrored, if anywhere (`cq_mirror`).
    pub(crate) mirror: Option<super::cq_mirror::Mirror>,
}

impl World {
    /// `ibv_create_comp_channel`.
    pub fn create_comp_channel(&mut self, ctx: ContextHandle) -> Result<CompChannelHandle> {
        self.ctx_mut(ctx, Verb::CreateCompChannel)?.children += 1;
        let ch = CompChannel {
            ctx,
            cqs: 0,
            events: VecDeque::new(),
        };
        Ok(CompChannelHandle::from_parts(self.channels.insert(ch)))
    }

    /// How many completion events wait on `ch` for `ibv_get_cq_event`
    /// (what makes a channel's file descriptor readable in the drop-in
    /// library).
    pub fn comp_channel_pending(&self, ch: CompChannelHandle) -> Result<usize> {
        Ok(self.channel(ch, Verb::GetCqEvent)?.events.len())
    }

    /// `ibv_destroy_comp_channel`: `EBUSY` while a CQ uses it.
    pub fn destroy_comp_channel(&mut self, ch: CompChannelHandle) -> Result<()> {
        let c = self.channel(ch, Verb::DestroyCompChannel)?;
        if c.cqs > 0 {
            return Err(busy(
                Verb::DestroyCompChannel,
                format!("{} CQs are still bound to the channel", c.cqs),
            ));
        }
        let ctx = c.ctx;
        self.channels.remove(ch.index, ch.generation);
        if let Ok(c) = self.ctx_mut(ctx, Verb::DestroyCompChannel) {
            c.children -= 1;
        }
        Ok(())
    }

    /// The actual CQ size for a request of `cqe` entries on `device`.
    ///
    /// Both drivers allocate `roundup_pow_of_two(cqe + 1)` entries and report
    /// one less (rdma-core `providers/mlx5/verbs.c` `create_cq`:
    /// `align_queue_size(cqe + 1)`, `cqe = ncqe - 1`; torvalds/linux
    /// `drivers/infiniband/sw/rxe/rxe_queue.c` `rxe_queue_init`).
    pub(crate) fn cq_size(&self, device: u32, cqe: u32) -> Result<u32> {
        let d = self.device(device);
        let max = d.profile.attr.max_cqe;
        if cqe == 0 {
            return Err(invalid(Verb::CreateCq, "cqe must be at least 1"));
        }
        if cqe > max {
            return Err(invalid(
                Verb::CreateCq,
                format!("cqe {cqe} is above the device's max_cqe {max}"),
            ));
        }
        let slots = (u64::from(cqe) + 1).next_power_of_two();
        Ok((slots - 1) as u32)
    }

    /// `ibv_create_cq`.
    pub fn create_cq(
        &mut self,
        ctx: ContextHandle,
        cqe: u32,
        cq_context: u64,
        channel: Option<CompChannelHandle>,
        comp_vector: u32,
    ) -> Result<CqHandle> {
        let device = self.ctx(ctx, Verb::CreateCq)?.device;
        let actual = self.cq_size(device, cqe)?;
        if let Some(ch) = channel {
            let c = self.channel(ch, Verb::CreateCq)?;
            if c.ctx != ctx {
                return Err(invalid(
                    Verb::CreateCq,
                    "the completion channel belongs to another context",
                ));
            }
        }
        // mlx5 reports 63 completion vectors on ConnectX-6 (num_comp_vectors);
        // rxe has one. A vector past the count is EINVAL in both drivers.
        let vectors = match self.device(device).profile.driver {
            DriverModel::Mlx5 => 63,
            DriverModel::Rxe => 1,
        };
        if comp_vector >= vectors {
            return Err(invalid(
                Verb::CreateCq,
                format!("comp_vector {comp_vector} is past num_comp_vectors {vectors}"),
            ));
        }
        if let Some(ch) = channel {
            self.channel_mut(ch, Verb::CreateCq)?.cqs += 1;
        }
        self.ctx_mut(ctx, Verb::CreateCq)?.children += 1;
        let cq = Cq {
            ctx,
            device,
            cqe: actual,
            cq_context,
            channel,
            users: 0,
            entries: VecDeque::new(),
            armed: None,
            events_unacked: 0,
            overrun: false,
            mirror: None,
        };
        Ok(CqHandle::from_parts(self.cqs.insert(cq)))
    }

    /// `ibv_destroy_cq`: `EBUSY` while a QP or SRQ uses it.
    ///
    /// # Divergence from hardware
    /// With unacknowledged completion events libibverbs blocks forever; the
    /// simulator refuses with `ApiMisuse` instead.
    pub fn destroy_cq(&mut self, cq: CqHandle) -> Result<()> {
        let c = self.cq(cq, Verb::DestroyCq)?;
        if c.users > 0 {
            return Err(busy(
                Verb::DestroyCq,
                format!("{} QP queues/SRQs still use the CQ", c.users),
            ));
        }
        if c.events_unacked > 0 {
            return Err(misuse(
                Verb::DestroyCq,
                format!("{} completion events of this CQ are not acknowledged (ibv_destroy_cq would block)", c.events_unacked),
            ));
        }
        let (ctx, channel) = (c.ctx, c.channel);
        self.detach_cq_mirror(cq);
        self.ext_on_destroy_cq(cq);
        self.cqs.remove(cq.index, cq.generation);
        self.drop_async_events_of(AsyncSubject::Cq(cq));
        if let Some(ch) = channel {
            if let Ok(c) = self.channel_mut(ch, Verb::DestroyCq) {
                c.cqs -= 1;
                c.events.retain(|e| *e != cq);
            }
        }
        if let Ok(c) = self.ctx_mut(ctx, Verb::DestroyCq) {
            c.children -= 1;
        }
        Ok(())
    }

    /// Writes a completion into `cq`: traces it, handles overrun
    /// (data-path.md §6.3) and fires an armed notification (§6.4).
    pub(crate) fn push_completion(&mut self, cq: CqHandle, mut entry: CqEntry, solicited: bool) {
        self.stop_epoch = self.stop_epoch.wrapping_add(1);
        entry.ts_ns = self.now_ns;
        // A mirrored CQ's occupancy counts what its consumer has taken.
        self.sync_cq_mirror(cq);
        let device;
        let mut fire = None;
        let mut overran = false;
        let mut first_overrun = false;
        {
            let Some(c) = self.cqs.get_mut(cq.index, cq.generation) else {
                return;
            };
            device = c.device;
            if c.overrun || c.entries.len() >= c.cqe as usize {
                first_overrun = !c.overrun;
                c.overrun = true;
                overran = true;
            } else {
                c.entries.push_back(entry);
                if let Some(solicited_only) = c.armed {
                    let is_solicited = solicited || entry.wc.status != WcStatus::Success;
                    if !solicited_only || is_solicited {
                        c.armed = None;
                        fire = c.channel;
                    }
                }
            }
        }
        if overran {
            // The overrun (docs/divergence.md, "CQ overrun"): the entries
            // already written stay and poll as usual; this completion and
            // every later one to the CQ are lost; the CQ's context gets
            // IBV_EVENT_CQ_ERR once. By default the QP whose completion was
            // lost moves to ERR with QP_FATAL (the IB rule, data-path.md
            // §6.3); with `CqOverrunQp::Continue` it goes on, as
            // google/rdma-unit-test's CqOverflowTest expects of NICs whose
            // full CQ does not idle the QP, except that rxe's responder still
            // fails a receive it cannot complete (`RESPST_ERR_CQ_OVERFLOW`).
            // Nothing frees the lost completions' slots, as no CQE covers
            // them: a QP that goes on keeps its queue that full until it is
            // reset or destroyed.
            if first_overrun {
                self.record(TraceEvent::CqOverrun {
                    device,
                    cq: cq.index,
                });
                let ctx = self.cqs.get(cq.index, cq.generation).map(|c| c.ctx);
                if let Some(ctx) = ctx {
                    self.raise_async(ctx, AsyncEventType::CqErr, AsyncSubject::Cq(cq));
                }
            }
            let rxe = self.devices[device as usize].profile.driver == DriverModel::Rxe;
            let fatal = self.config.cq_overrun_qp == crate::CqOverrunQp::Error
                || (rxe && entry.queue != QueueKind::Send);
            if fatal {
                let qp = self
                    .qps
                    .get(entry.qp.index, entry.qp.generation)
                    .map(|q| (q.ctx, q.phase.state()));
                if let Some((qctx, state)) = qp {
                    if state != verbs_api::QpState::Error {
                        self.raise_async(qctx, AsyncEventType::QpFatal, AsyncSubject::Qp(entry.qp));
                        self.leave_service(entry.qp, crate::datapath::QpFate::Error);
                    }
                }
            }
            return;
        }
        let cause = if super::exec::may_have_cause(entry.wc.status) {
            self.access_causes
                .find(device, entry.wc.qp_num, entry.wc.wr_id)
        } else {
            None
        };
        self.record(TraceEvent::Completion {
            device,
            qpn: entry.wc.qp_num,
            wr_id: entry.wc.wr_id,
            status: entry.wc.status,
            recv: entry.queue != QueueKind::Send,
            cause,
        });
        self.publish_last(cq);
        if let Some(ch) = fire {
            if let Some(c) = self.channels.get_mut(ch.index, ch.generation) {
                c.events.push_back(cq);
            }
        }
    }

    /// `ibv_poll_cq`: moves up to `wc.len()` completions out, freeing the
    /// work-queue slots they cover.
    ///
    /// When the CQ holds fewer than `wc.len()` completions, virtual time
    /// moves on: events are processed in order until it holds that many,
    /// nothing is left in flight, or a bound of events per call is reached
    /// (so an endless RNR retry cannot hang a poll).
    pub fn poll_cq(&mut self, cq: CqHandle, wc: &mut [Wc]) -> Result<usize> {
        self.poll_cq_with(cq, wc.len(), Verb::PollCq, |n, e| wc[n] = e.wc)
    }

    /// The body of `ibv_poll_cq` and of the extended poll: up to `want`
    /// completions, each handed to `out` with its index.
    pub(crate) fn poll_cq_with(
        &mut self,
        cq: CqHandle,
        want: usize,
        verb: Verb,
        mut out: impl FnMut(usize, &CqEntry),
    ) -> Result<usize> {
        let mut c = self.cq_mut(cq, verb)?;
        if c.mirror.is_some() {
            // Polled in the world: the mirror can no longer follow.
            self.detach_cq_mirror(cq);
            c = self.cq_mut(cq, verb)?;
        }
        if c.entries.len() < want && !c.overrun {
            self.run_events(None, super::state::POLL_EVENT_BUDGET, |w| {
                w.cqs
                    .get(cq.index, cq.generation)
                    .is_none_or(|c| c.entries.len() >= want || c.overrun)
            });
        }
        let mut n = 0;
        while n < want {
            let Some(entry) = self
                .cqs
                .get_mut(cq.index, cq.generation)
                .and_then(|c| c.entries.pop_front())
            else {
                break;
            };
            let mut entry = entry;
            if !self.ext.raw_wqes.is_empty() && entry.queue == QueueKind::Send {
                entry.wc.opcode =
                    self.raw_wqe_opcode(entry.qp, entry.seq, entry.wc.status, entry.wc.opcode);
            }
            out(n, &entry);
            n += 1;
            self.release_wqes(entry.qp, entry.queue, entry.seq);
        }
        Ok(n)
    }

    /// `ibv_req_notify_cq`.
    pub fn req_notify_cq(&mut self, cq: CqHandle, solicited_only: bool) -> Result<()> {
        let c = self.cq_mut(cq, Verb::ReqNotifyCq)?;
        if c.channel.is_none() {
            return Err(invalid(
                Verb::ReqNotifyCq,
                "the CQ has no completion channel",
            ));
        }
        // A later request of "any completion" widens an armed "solicited only".
        c.armed = Some(match c.armed {
            Some(prev) => prev && solicited_only,
            None => solicited_only,
        });
        Ok(())
    }

    /// `ibv_get_cq_event`, non-blocking.
    pub fn get_cq_event(&mut self, ch: CompChannelHandle) -> Result<Option<CqHandle>> {
        let c = self.channel_mut(ch, Verb::GetCqEvent)?;
        let Some(cq) = c.events.pop_front() else {
            return Ok(None);
        };
        if let Some(c) = self.cqs.get_mut(cq.index, cq.generation) {
            c.events_unacked += 1;
        }
        Ok(Some(cq))
    }

    /// `ibv_ack_cq_events`.
    pub fn ack_cq_events(&mut self, cq: CqHandle, nevents: u32) -> Result<()> {
        let c = self.cq_mut(cq, Verb::AckCqEvents)?;
        if nevents > c.events_unacked {
            return Err(misuse(
                Verb::AckCqEvents,
                format!(
                    "acknowledging {nevents} events but only {} were received",
                    c.events_unacked
                ),
            ));
        }
        c.events_unacked -= nevents;
        Ok(())
    }

    /// Removes every queued completion of `qp` from `cq` (mlx5
    /// `__mlx5_cq_clean`, done on destroy and on entering RESET).
    pub(crate) fn clean_cq(&mut self, cq: CqHandle, qp: QpHandle) {
        if self.cq_mirrored(cq) {
            self.detach_cq_mirror(cq);
        }
        if let Some(c) = self.cqs.get_mut(cq.index, cq.generation) {
            c.entries.retain(|e| e.qp != qp);
        }
    }
}
