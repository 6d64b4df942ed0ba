//! Asynchronous events: raising them on a context's queue, and
//! `ibv_get_async_event` / `ibv_ack_async_event`.

use verbs_api::{AsyncEventType, Error, Result, Verb};

use crate::handles::*;
use crate::trace::TraceEvent;

use super::*;

impl World {
    // ----------------------------------------------------------- async events

    /// Queues an asynchronous event on the context that owns the subject.
    pub(crate) fn raise_async(
        &mut self,
        ctx: ContextHandle,
        event: AsyncEventType,
        subject: AsyncSubject,
    ) {
        // A real XRC_TGT QP: every handle's context hears it.
        if let AsyncSubject::Qp(q) = subject {
            if self.fan_out_tgt_event(q, event) {
                return;
            }
        }
        let (device, element) = match subject {
            AsyncSubject::Qp(q) => match self.qps.get(q.index, q.generation) {
                Some(qp) => (qp.device, qp.qp_num),
                None => return,
            },
            AsyncSubject::Cq(c) => (
                self.cqs.get(c.index, c.generation).map_or(0, |c| c.device),
                c.index,
            ),
            AsyncSubject::Srq(s) => (
                self.srqs.get(s.index, s.generation).map_or(0, |s| s.device),
                s.index,
            ),
            AsyncSubject::QpNum(n) => (
                self.contexts
                    .get(ctx.index, ctx.generation)
                    .map_or(0, |c| c.device),
                n,
            ),
            AsyncSubject::Port(p) => (
                self.contexts
                    .get(ctx.index, ctx.generation)
                    .map_or(0, |c| c.device),
                u32::from(p),
            ),
            AsyncSubject::Device => (
                self.contexts
                    .get(ctx.index, ctx.generation)
                    .map_or(0, |c| c.device),
                0,
            ),
        };
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.async_events.push_back((event, subject));
            self.record(TraceEvent::AsyncEvent {
                device,
                event,
                element,
            });
        }
    }

    /// Drops the events still queued about `subject`, which is being
    /// destroyed: the kernel discards a destroyed object's pending events
    /// from the async file (`ib_uverbs_release_uevent`), so a program never
    /// gets an event naming an object it has freed.
    pub(crate) fn drop_async_events_of(&mut self, subject: AsyncSubject) {
        let holders: Vec<u32> = self
            .contexts
            .iter()
            .filter(|(_, _, c)| c.async_events.iter().any(|(_, s)| *s == subject))
            .map(|(i, _, _)| i)
            .collect();
        for i in holders {
            if let Some((_, c)) = self.contexts.get_by_index_mut(i) {
                c.async_events.retain(|(_, s)| *s != subject);
            }
        }
    }

    /// How many async events wait on `ctx` for `ibv_get_async_event`.
    pub fn async_pending(&self, ctx: ContextHandle) -> Result<usize> {
        Ok(self.ctx(ctx, Verb::GetAsyncEvent)?.async_events.len())
    }

    /// `ibv_get_async_event`, non-blocking: the event and its token (for
    /// [`World::ack_async_event`]).
    pub fn get_async_event(
        &mut self,
        ctx: ContextHandle,
    ) -> Result<Option<(AsyncEventType, AsyncSubject, u64)>> {
        let token = self.event_tokens + 1;
        let c = self.ctx_mut(ctx, Verb::GetAsyncEvent)?;
        let Some((t, subject)) = c.async_events.pop_front() else {
            return Ok(None);
        };
        c.async_unacked.push(token);
        self.event_tokens = token;
        Ok(Some((t, subject, token)))
    }

    /// `ibv_ack_async_event` of the event `ibv_get_async_event` handed out
    /// as `token`: each event is acknowledged once, whatever else is
    /// pending (issue #12 item 8).
    pub fn ack_async_event(&mut self, token: u64) -> Result<()> {
        let found = self.contexts.iter().find_map(|(i, g, c)| {
            c.async_unacked
                .iter()
                .position(|&t| t == token)
                .map(|p| (i, g, p))
        });
        let Some((index, generation, pos)) = found else {
            return Err(Error::from_errno(
                Verb::AckAsyncEvent,
                verbs_api::errno::EINVAL,
                format!("async event #{token} was never handed out or is already acknowledged"),
            ));
        };
        if let Some(c) = self.contexts.get_mut(index, generation) {
            c.async_unacked.remove(pos);
        }
        Ok(())
    }
}
