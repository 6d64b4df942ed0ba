//! Async events (`ibv_get_async_event` / `ibv_ack_async_event`) and
//! completion events (`ibv_get_cq_event` / `ibv_ack_cq_events`),
//! non-blocking.
//!
//! Both event sources are file descriptors (`context->async_fd`,
//! `channel->fd`). The backend sets `O_NONBLOCK` on them (the channel's when
//! it is created, the context's on the first `get_async_event`), so a read
//! with nothing pending fails with `EAGAIN`, which the verbs report as
//! `Ok(None)`.
//!
//! Elements are mapped back to handles through the context's registry
//! (`crate::registry`): a QP, CQ or SRQ this backend created comes back as
//! the handle the user holds, and its "fetched, not acknowledged" count goes
//! up (its destroy is `EBUSY` until the count is back to zero, where C would
//! wait forever). An element the backend does not know is never looked
//! into beyond what libibverbs guarantees: the event pins the object until
//! it is acknowledged, so we read an unknown QP's number, acknowledge the
//! event at once and report [`AsyncElement::QpNum`]; an unknown CQ or SRQ is
//! acknowledged and reported as an error.

use core::ffi::c_void;
use core::ptr;

use rdma_sys as sys;
use verbs_api::errno::EINVAL;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::errors::c_error;
use crate::ffi::posix::{set_nonblocking, EAGAIN};
use crate::ffi::verbs::{self as fv, last_errno};
use crate::handles::{ensure_chan_nonblocking, HwCompChannel, HwContext, HwCq, HwQp, HwSrq};
use crate::registry::{ack_type_for, element_kind, ElementKind};

/// `ibv_get_async_event`, non-blocking.
pub(crate) fn get_async_event(
    hw: &HwVerbs,
    ctx: &HwContext,
) -> Result<Option<AsyncEvent<HwVerbs>>> {
    let verb = Verb::GetAsyncEvent;
    let (c, inner) = hw.ctx(ctx, verb)?;
    if !inner.async_nonblock.get() {
        // SAFETY: `c` is a live context (checked by `ctx`); `async_fd` is a
        // plain integer field.
        let fd = unsafe { (*c).async_fd };
        set_nonblocking(fd)
            .map_err(|e| c_error(verb, e, "fcntl(async_fd, F_SETFL, O_NONBLOCK)"))?;
        inner.async_nonblock.set(true);
    }
    let mut ev = fv::ibv_async_event_raw::empty();
    // SAFETY: (1) live context; (2) `ev` is writable.
    if unsafe { fv::ibv_get_async_event(c, &mut ev) } != 0 {
        return match last_errno() {
            EAGAIN => Ok(None),
            e => Err(c_error(verb, e, "ibv_get_async_event")),
        };
    }
    let event_type = AsyncEventType::from_raw(ev.event_type);
    let kind = element_kind(ev.event_type);
    let objects = inner.objects.borrow();
    let element = match kind {
        ElementKind::Qp => {
            // SAFETY: for a QP-class event libibverbs stored `element.qp`;
            // every member is plain data, so the read itself is defined.
            let p = unsafe { ev.element.qp };
            match objects.qps.get(p as usize) {
                Some(q) => {
                    q.obj.async_unacked.set(q.obj.async_unacked.get() + 1);
                    AsyncElement::Qp(HwQp(q))
                }
                None => {
                    // SAFETY: the event pins the QP until it is acknowledged
                    // (ibv_destroy_qp waits for it), so `p` is live here.
                    let n = unsafe { (*p).qp_num };
                    // SAFETY: `ev` is the event just fetched for that live
                    // QP, acknowledged exactly once.
                    unsafe { fv::ibv_ack_async_event(&mut ev) };
                    AsyncElement::QpNum(n)
                }
            }
        }
        ElementKind::Cq => {
            // SAFETY: a CQ-class event stores `element.cq` (plain data).
            let p = unsafe { ev.element.cq };
            match objects.cqs.get(p as usize) {
                Some(cq) => {
                    cq.obj.async_unacked.set(cq.obj.async_unacked.get() + 1);
                    AsyncElement::Cq(HwCq(cq))
                }
                None => return Err(unknown_element(verb, &mut ev, event_type, "CQ")),
            }
        }
        ElementKind::Srq => {
            // SAFETY: an SRQ-class event stores `element.srq` (plain data).
            let p = unsafe { ev.element.srq };
            match objects.srqs.get(p as usize) {
                Some(s) => {
                    s.obj.async_unacked.set(s.obj.async_unacked.get() + 1);
                    AsyncElement::Srq(HwSrq(s))
                }
                None => return Err(unknown_element(verb, &mut ev, event_type, "SRQ")),
            }
        }
        ElementKind::Wq => return Err(unknown_element(verb, &mut ev, event_type, "WQ")),
        ElementKind::Port => {
            // SAFETY: a port event stores `element.port_num` (plain data).
            let port = unsafe { ev.element.port_num };
            AsyncElement::Port(u8::try_from(port).unwrap_or(0))
        }
        ElementKind::Device => AsyncElement::Device,
    };
    Ok(Some(AsyncEvent {
        event_type,
        element,
        // libibverbs acknowledges async events by count per object
        // (`events_completed`): there is no identity to check.
        token: 0,
    }))
}

/// Acknowledges an event whose element this backend has no handle for, and
/// reports it.
fn unknown_element(
    verb: Verb,
    ev: &mut fv::ibv_async_event_raw,
    t: AsyncEventType,
    what: &str,
) -> Error {
    // SAFETY: `ev` was just fetched; its element is pinned (live) until this
    // single acknowledgement.
    unsafe { fv::ibv_ack_async_event(ev) };
    Error::new(
        verb,
        ErrorKind::NotFound,
        format!("{t} for a {what} this backend did not create (acknowledged and dropped)"),
    )
}

/// `ibv_ack_async_event` for an event returned by [`get_async_event`].
pub(crate) fn ack_async_event(hw: &HwVerbs, event: &AsyncEvent<HwVerbs>) -> Result<()> {
    let verb = Verb::AckAsyncEvent;
    let (p, kind, counter) = match &event.element {
        AsyncElement::Qp(q) => {
            hw.check_owner(&q.0.obj.ctx, verb, "QP")?;
            (
                q.0.obj.get(verb)?.cast::<c_void>(),
                ElementKind::Qp,
                &q.0.obj.async_unacked,
            )
        }
        AsyncElement::Cq(c) => {
            hw.check_owner(&c.0.obj.ctx, verb, "CQ")?;
            (
                c.0.obj.get(verb)?.cast(),
                ElementKind::Cq,
                &c.0.obj.async_unacked,
            )
        }
        AsyncElement::Srq(s) => {
            hw.check_owner(&s.0.obj.ctx, verb, "SRQ")?;
            (
                s.0.obj.get(verb)?.cast(),
                ElementKind::Srq,
                &s.0.obj.async_unacked,
            )
        }
        // Already acknowledged by `get_async_event` (unknown QP), or not
        // counted by libibverbs at all (port and device events).
        AsyncElement::QpNum(_) | AsyncElement::Port(_) | AsyncElement::Device => return Ok(()),
    };
    if counter.get() == 0 {
        return Err(Error::from_errno(
            verb,
            EINVAL,
            format!(
                "no unacknowledged {} event for this object (acknowledging more events than were \
                 fetched would make its destroy wait forever)",
                event.event_type
            ),
        ));
    }
    let mut ev = fv::ibv_async_event_raw {
        element: sys::ibv_async_event_element_t { qp: p.cast() },
        event_type: ack_type_for(kind),
    };
    // SAFETY: (1) the element is a live object of `kind` (checked above) and
    // the type selects that kind's counter; (2) the object has `counter > 0`
    // events fetched and not acknowledged.
    unsafe { fv::ibv_ack_async_event(&mut ev) };
    counter.set(counter.get() - 1);
    Ok(())
}

/// `ibv_get_cq_event`, non-blocking.
pub(crate) fn get_cq_event(hw: &HwVerbs, channel: &HwCompChannel) -> Result<Option<HwCq>> {
    let verb = Verb::GetCqEvent;
    hw.check_owner(&channel.0.obj.ctx, verb, "completion channel")?;
    let p = channel.0.obj.get(verb)?;
    ensure_chan_nonblocking(channel, verb)?;
    let mut cq: *mut sys::ibv_cq = ptr::null_mut();
    let mut cq_context: *mut c_void = ptr::null_mut();
    // SAFETY: `p` is a live completion channel whose fd is non-blocking;
    // both out-parameters are writable.
    if unsafe { sys::ibv_get_cq_event(p, &mut cq, &mut cq_context) } != 0 {
        return match last_errno() {
            EAGAIN => Ok(None),
            e => Err(c_error(verb, e, "ibv_get_cq_event")),
        };
    }
    let found = channel.0.obj.ctx.objects.borrow().cqs.get(cq as usize);
    match found {
        Some(inner) => {
            inner.obj.comp_unacked.set(inner.obj.comp_unacked.get() + 1);
            Ok(Some(HwCq(inner)))
        }
        None => {
            // SAFETY: the event pins the CQ until acknowledged (ibv_destroy_cq
            // waits for it), so `cq` is live; one event, acknowledged once.
            unsafe { sys::ibv_ack_cq_events(cq, 1) };
            Err(Error::new(
                verb,
                ErrorKind::NotFound,
                "completion event for a CQ this backend did not create (acknowledged and dropped)",
            ))
        }
    }
}

/// `ibv_ack_cq_events`, refusing to acknowledge more than were fetched.
pub(crate) fn ack_cq_events(hw: &HwVerbs, cq: &HwCq, nevents: u32) -> Result<()> {
    let verb = Verb::AckCqEvents;
    hw.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
    let p = cq.0.obj.get(verb)?;
    let pending = cq.0.obj.comp_unacked.get();
    if nevents > pending {
        return Err(Error::from_errno(
            verb,
            EINVAL,
            format!(
                "acknowledging {nevents} completion event(s) but only {pending} were fetched \
                 (ibv_destroy_cq would then wait forever)"
            ),
        ));
    }
    if nevents > 0 {
        // SAFETY: live CQ; `nevents` does not exceed the events fetched and
        // not yet acknowledged.
        unsafe { sys::ibv_ack_cq_events(p, nevents) };
        cq.0.obj.comp_unacked.set(pending - nevents);
    }
    Ok(())
}
