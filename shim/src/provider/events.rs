//! Completion events (`ibv_get_cq_event`, `ibv_ack_cq_events`) and async
//! events (`ibv_get_async_event`, `ibv_ack_async_event`).
//!
//! A blocking wait runs the simulated world forward (virtual time) until an
//! event is pending; if the world is idle and none is, it releases the lock
//! and waits on the fd, so another thread's verbs can make one.

use core::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use backend_sim::AsyncSubject;
use verbs_api::*;

use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{c, with, Fail, Obj, Res, Shim, SimRes};

/// Runs the world until it is idle (bounded steps, repeated).
pub(crate) fn settle(shim: &mut Shim) {
    for _ in 0..64 {
        if shim.sim.run_until_idle() {
            break;
        }
    }
    crate::provider::state::sync(shim);
}

/// How long a blocked wait goes before it says why it may never return.
const STUCK_NOTICE: Duration = Duration::from_secs(10);

/// Blocks on `fd` while `try_once` says nothing is pending.
pub(crate) fn blocking<T>(
    verb: &str,
    fd: c_int,
    mut try_once: impl FnMut() -> Res<Option<T>>,
) -> Res<T> {
    let start = Instant::now();
    let mut noticed = false;
    loop {
        if let Some(t) = try_once()? {
            return Ok(t);
        }
        if crate::provider::fds::nonblocking(fd) {
            return Err(Fail::new(
                verb,
                libc::EAGAIN,
                "no event pending (O_NONBLOCK)",
            ));
        }
        // On the shared fabric another process's verbs make events without
        // touching our fds: look again soon.
        // A signal handler that runs while we wait ends the wait with
        // EINTR, as it ends libibverbs' read() of the channel fd: qperf
        // stops its tests so, from SIGALRM.
        if !crate::provider::fds::wait(fd, if crate::fabric::is_remote() { 1 } else { 50 }) {
            return Err(Fail::new(
                verb,
                libc::EINTR,
                "interrupted by a signal while waiting for an event",
            ));
        }
        if !noticed && start.elapsed() > STUCK_NOTICE {
            noticed = true;
            let who = if crate::fabric::is_remote() {
                "another thread's or another process's verbs on the shared fabric"
            } else {
                "another thread's verbs"
            };
            eprintln!(
                "verbsim shim: {verb} has waited {}s: the simulated world holds no event for this channel; only {who} can make one",
                STUCK_NOTICE.as_secs()
            );
        }
    }
}

/// Sleeps until a signal arrives (then `EINTR`, as an interrupted
/// `read()`), for a wait whose object went away under it: nothing can
/// end it but a signal or the process's exit.
pub(crate) fn wait_forever(verb: &str) -> Fail {
    loop {
        let ts = libc::timespec {
            tv_sec: 3600,
            tv_nsec: 0,
        };
        // SAFETY: `ts` lives; no remainder is asked for.
        if unsafe { libc::nanosleep(&ts, core::ptr::null_mut()) } != 0 {
            return Fail::new(
                verb,
                libc::EINTR,
                "interrupted by a signal while waiting on a destroyed channel",
            );
        }
    }
}

pub(crate) fn get_cq_event(
    channel: *mut c::ibv_comp_channel,
    cq: *mut *mut c::ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    let v = "ibv_get_cq_event";
    let fd = with(|shim| shim.fds.channels.get(&(channel as usize)).map(|w| w.fd));
    let Some(fd) = fd else {
        set_errno(libc::EINVAL);
        crate::guard::log_err(
            v,
            libc::EINVAL,
            &"not a live completion channel of this library",
        );
        return -1;
    };
    if cq.is_null() || cq_context.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let r = blocking(v, fd, || {
        with(|shim| {
            let Some(Obj::Channel(h)) = shim.get(channel.cast()).map(|e| e.obj) else {
                return Err(Fail::bad_ptr(v, "channel", channel.cast()));
            };
            let mut ev = shim.sim.get_cq_event(&h).at(v)?;
            if ev.is_none() {
                settle(shim);
                ev = shim.sim.get_cq_event(&h).at(v)?;
            }
            crate::provider::state::sync(shim);
            Ok(ev.and_then(|h| shim.cq_ptrs.get(&h).copied()))
        })
    });
    match r {
        Ok(p) => {
            let p = p as *mut c::ibv_cq;
            // SAFETY: `p` is a live CQ of ours; `cq` and `cq_context` are
            // non-NULL out-pointers (checked).
            unsafe {
                *cq = p;
                *cq_context = (*p).cq_context;
            }
            0
        }
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}

pub(crate) fn ack_cq_events(cq: *mut c::ibv_cq, nevents: u32) {
    let v = "ibv_ack_cq_events";
    let r = with(|shim| -> Res<()> {
        let Some(Obj::Cq(h)) = shim.get(cq.cast()).map(|e| e.obj) else {
            return Err(Fail::bad_ptr(v, "CQ", cq.cast()));
        };
        shim.sim.ack_cq_events(&h, nevents).at(v)?;
        // SAFETY: a live CQ of ours.
        unsafe { (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(nevents) };
        Ok(())
    });
    let _ = r;
}

pub(crate) fn get_async_event(
    context: *mut c::ibv_context,
    event: *mut c::ibv_async_event,
) -> c_int {
    let v = "ibv_get_async_event";
    let fd = with(|shim| shim.fds.contexts.get(&(context as usize)).map(|w| w.fd));
    let Some(fd) = fd else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let r = blocking(v, fd, || {
        with(|shim| {
            let h = crate::provider::device::ctx_of(shim, v, context)?;
            let (t, token, element, mut out) = loop {
                let mut ev = shim.sim.get_async_event(h).at(v)?;
                if ev.is_none() {
                    settle(shim);
                    ev = shim.sim.get_async_event(h).at(v)?;
                }
                let Some((t, subject, token)) = ev else {
                    crate::provider::state::sync(shim);
                    return Ok(None);
                };
                let mut out = c::ibv_async_event {
                    event_type: t.to_raw(),
                    ..Default::default()
                };
                let element = match subject {
                    AsyncSubject::Qp(q) => shim.qp_ptrs.get(&q).copied(),
                    AsyncSubject::Cq(q) => shim.cq_ptrs.get(&q).copied(),
                    AsyncSubject::Srq(s) => shim.srq_ptrs.get(&s).copied(),
                    AsyncSubject::Port(p) => {
                        out.element.port_num = c_int::from(p);
                        Some(usize::MAX)
                    }
                    _ => Some(0),
                };
                match element {
                    Some(e) => break (t, token, e, out),
                    // An object this process no longer has a pointer for
                    // (the world drops a destroyed object's events; this
                    // is the last guard): never an event naming NULL.
                    None => {
                        let _ = shim.sim.ack_async_event(token);
                    }
                }
            };
            crate::provider::state::sync(shim);
            if element != usize::MAX {
                out.element.qp = element as *mut c::ibv_qp;
            }
            shim.async_unacked.push((token, t.to_raw(), element));
            Ok(Some(out))
        })
    });
    match r {
        Ok(e) => {
            // SAFETY: non-NULL (checked); the caller's struct.
            unsafe { event.write(e) };
            0
        }
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}

pub(crate) fn ack_async_event(event: *mut c::ibv_async_event) {
    if event.is_null() {
        return;
    }
    // SAFETY: non-NULL; the caller passes the event ibv_get_async_event filled.
    let e = unsafe { event.read() };
    with(|shim| {
        let is_port = matches!(
            AsyncEventType::from_raw(e.event_type),
            AsyncEventType::PortActive
                | AsyncEventType::PortErr
                | AsyncEventType::LidChange
                | AsyncEventType::PkeyChange
                | AsyncEventType::GidChange
                | AsyncEventType::SmChange
                | AsyncEventType::ClientReregister
                | AsyncEventType::DeviceFatal
        );
        // SAFETY: reading the union as the member the event type selects.
        let element = if is_port {
            usize::MAX
        } else {
            // SAFETY: the union's pointer member, as the event type selects.
            unsafe { e.element.qp as usize }
        };
        let pos = shim
            .async_unacked
            .iter()
            .position(|&(_, t, el)| t == e.event_type && (el == element || is_port));
        if let Some(pos) = pos {
            let (token, _, _) = shim.async_unacked.remove(pos);
            let _ = shim.sim.ack_async_event(token);
        }
    });
}

export! { "IBVERBS_1.1" fn ibv_get_cq_event(channel: *mut c::ibv_comp_channel, cq: *mut *mut c::ibv_cq, cq_context: *mut *mut c_void) -> c_int {
    get_cq_event(channel, cq, cq_context)
}}

export! { "IBVERBS_1.1" fn ibv_ack_cq_events(cq: *mut c::ibv_cq, nevents: u32) {
    ack_cq_events(cq, nevents)
}}

export! { "IBVERBS_1.1" fn ibv_get_async_event(context: *mut c::ibv_context, event: *mut c::ibv_async_event) -> c_int {
    get_async_event(context, event)
}}

export! { "IBVERBS_1.1" fn ibv_ack_async_event(event: *mut c::ibv_async_event) {
    ack_async_event(event)
}}
