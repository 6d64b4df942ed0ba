//! librdmacm's events: the C `rdma_cm_event`s built from the simulator's,
//! `rdma_get_cm_event`, `rdma_ack_cm_event`, `rdma_event_str`.

use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use std::ffi::CStr;

use backend_sim::*;
use verbs_api::*;

use super::{new_id, refresh, ret};
use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{self, c, sync_fds, with, Fail, Res, Shim, SimRes};

/// `rdma_ack_cm_event` under the lock already held.
///
/// # Safety
/// `e` is an event this library built and has not freed.
pub(super) unsafe fn rdma_ack_cm_event_inner(shim: &mut Shim, e: *mut c::rdma_cm_event) {
    if let Some((ev, _)) = shim.cm.events.remove(&(e as usize)) {
        // SAFETY: the caller's contract.
        unsafe {
            let id = (*e).id;
            if shim.cm.ids.contains_key(&(id as usize)) && (*id).event == e {
                (*id).event = ptr::null_mut();
            }
            state::free(e);
        }
        let _ = shim.sim.rdma_ack_cm_event(ev);
    }
}

// ---------------------------------------------------------------- events

/// Builds the C event for a simulator event (wrapping the new id a
/// CONNECT_REQUEST brings).
pub(super) fn c_event(
    shim: &mut Shim,
    v: &str,
    ev: CmEvent<SimVerbs>,
) -> Res<*mut c::rdma_cm_event> {
    let listen = ev
        .listen_id
        .and_then(|l| shim.cm.id_ptrs.get(&l).copied())
        .unwrap_or(0) as *mut c::rdma_cm_id;
    let id = match shim.cm.id_ptrs.get(&ev.id) {
        Some(&p) => p as *mut c::rdma_cm_id,
        None => {
            // A new id (CONNECT_REQUEST): on the listener's channel, with its context.
            let (channel, ch, sync, context) = match shim.cm.ids.get(&(listen as usize)) {
                // SAFETY: a live listener id of ours.
                Some(e) => unsafe { ((*listen).channel, e.channel, e.sync, (*listen).context) },
                None => {
                    return Err(Fail::new(
                        v,
                        libc::EINVAL,
                        format!(
                            "an event ({:?}) for an id this library does not know",
                            ev.event
                        ),
                    ))
                }
            };
            let af_ib = shim.cm.ids.get(&(listen as usize)).is_some_and(|e| e.af_ib);
            let p = new_id(shim, ev.id, channel, ch, (sync, false), context)?;
            if let Some(e) = shim.cm.ids.get_mut(&(p as usize)) {
                e.af_ib = af_ib;
            }
            p
        }
    };
    refresh(shim, v, id)?;
    let data: Box<[u8]> = ev.private_data.clone().into_boxed_slice();
    let e = state::alloc_zeroed::<c::rdma_cm_event>();
    // SAFETY: just allocated; the conn member of the param union.
    unsafe {
        (*e).id = id;
        (*e).listen_id = listen;
        (*e).event = ev.event.to_raw();
        (*e).status = ev.status;
        let p = &mut (*e).param.conn;
        p.private_data = if data.is_empty() {
            ptr::null()
        } else {
            data.as_ptr().cast()
        };
        p.private_data_len = data.len().min(255) as u8;
        p.responder_resources = ev.conn.responder_resources;
        p.initiator_depth = ev.conn.initiator_depth;
        p.flow_control = ev.conn.flow_control;
        p.retry_count = ev.conn.retry_count;
        p.rnr_retry_count = ev.conn.rnr_retry_count;
        p.srq = ev.conn.srq;
        p.qp_num = ev.conn.qp_num;
        if matches!(
            ev.event,
            CmEventType::MulticastJoin | CmEventType::MulticastError
        ) {
            // librdmacm: `param.ud`, with the join's context in
            // `private_data` and no private data length.
            let u = &mut (*e).param.ud;
            *u = c::rdma_ud_param::default();
            u.private_data = ev.context as usize as *const c_void;
            if let Some(ud) = ev.ud {
                u.ah_attr = crate::provider::objects::c_ah_attr(&ud.ah_attr);
                u.qp_num = ud.qp_num;
                u.qkey = ud.qkey;
            }
        } else if let Some(ud) = ev.ud {
            // A UD id's ESTABLISHED (SIDR REP): `param.ud` with the answer's
            // private data, as librdmacm's ucma_copy_ud_event fills it.
            let pd = (*e).param.conn.private_data;
            let len = (*e).param.conn.private_data_len;
            let u = &mut (*e).param.ud;
            *u = c::rdma_ud_param::default();
            u.private_data = pd;
            u.private_data_len = len;
            u.ah_attr = crate::provider::objects::c_ah_attr(&ud.ah_attr);
            u.qp_num = ud.qp_num;
            u.qkey = ud.qkey;
        }
        (*id).event = e;
    }
    shim.cm.events.insert(e as usize, (ev, data));
    Ok(e)
}

/// An event taken off a channel, unless it belongs to an id that
/// `rdma_destroy_id` is ending: such an event is acknowledged here and
/// never handed out (the kernel removes an id's events when it is
/// destroyed), and the new id of a connection request for a listener
/// being destroyed goes with it (its peer is rejected), as the kernel
/// destroys the ids of requests nobody took.
pub(super) fn unless_dying(shim: &mut Shim, ev: CmEvent<SimVerbs>) -> Option<CmEvent<SimVerbs>> {
    let counted = ev.listen_id.unwrap_or(ev.id);
    if !super::ledger::dying(shim, counted) && !super::ledger::dying(shim, ev.id) {
        return Some(ev);
    }
    let child = (ev.event == CmEventType::ConnectRequest && !shim.cm.id_ptrs.contains_key(&ev.id))
        .then_some(ev.id);
    let _ = shim.sim.rdma_ack_cm_event(ev);
    if let Some(c) = child {
        let _ = shim.sim.rdma_destroy_id(&c);
    }
    None
}

export! { "RDMACM_1.0" fn rdma_get_cm_event(channel: *mut c::rdma_event_channel, event: *mut *mut c::rdma_cm_event) -> c_int {
    let v = "rdma_get_cm_event";
    let fd = super::ledger::channel_fd(channel);
    let Some(fd) = fd else {
        set_errno(libc::EINVAL);
        crate::guard::log_err(v, libc::EINVAL, &"not a live event channel of this library");
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let r = crate::provider::events::blocking(v, fd, || {
        with(|shim| {
            let ch = match shim.cm.channels.get(&(channel as usize)) {
                Some(e) => e.handle,
                // Destroyed by another thread since this one entered.
                None => return Ok(Some(None)),
            };
            let mut settled = false;
            let out = loop {
                let ev = match shim.sim.rdma_get_cm_event(&ch).at(v)? {
                    Some(ev) => ev,
                    None if !settled => {
                        settled = true;
                        crate::provider::events::settle(shim);
                        continue;
                    }
                    None => break None,
                };
                if let Some(ev) = unless_dying(shim, ev) {
                    break Some(Some(c_event(shim, v, ev)? as usize));
                }
            };
            sync_fds(shim);
            Ok(out)
        })
    });
    // A channel destroyed under a thread that entered the call does not
    // end its wait: the kernel's read of the channel holds the file open,
    // so the thread sleeps until a signal or the process's exit (rping's
    // CM thread is still waiting when its main thread tears down and
    // returns).
    let r = match r {
        Ok(Some(e)) => Ok(e),
        Ok(None) => Err(crate::provider::events::wait_forever(v)),
        Err(f) => Err(f),
    };
    match r {
        Ok(e) => {
            // SAFETY: non-NULL out-pointer.
            unsafe { *event = e as *mut c::rdma_cm_event };
            0
        }
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}}

export! { "RDMACM_1.0" fn rdma_ack_cm_event(event: *mut c::rdma_cm_event) -> c_int {
    ret(with(|shim| {
        let v = "rdma_ack_cm_event";
        let Some((ev, data)) = shim.cm.events.remove(&(event as usize)) else {
            return Err(Fail::bad_ptr(v, "rdma_cm_event", event.cast()));
        };
        drop(data);
        // SAFETY: a live event of ours; its id may point back at it.
        unsafe {
            let id = (*event).id;
            if shim.cm.ids.contains_key(&(id as usize)) && (*id).event == event {
                (*id).event = ptr::null_mut();
            }
            state::free(event);
        }
        shim.sim.rdma_ack_cm_event(ev).at(v)
    }))
}}

/// `RDMA_CM_EVENT_*` names, indexed by event number.
pub(super) const EVENT_NAMES: [&CStr; 16] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

export! { "RDMACM_1.0" fn rdma_event_str(event: u32) -> *const c_char {
    EVENT_NAMES.get(event as usize).copied().unwrap_or(c"UNKNOWN EVENT").as_ptr()
}}

#[cfg(test)]
mod tests {
    use core::ffi::c_int;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    use std::sync::Arc;

    use super::super::{destroy_channel, rdma_create_event_channel};
    use super::rdma_get_cm_event;
    use crate::provider::state::{self, c};

    extern "C" fn ignore(_: c_int) {}

    #[test]
    fn a_cm_wait_entered_before_its_channel_is_destroyed_keeps_waiting() {
        // Goal: a thread inside rdma_get_cm_event is waiting on its channel
        // even while another thread holds the library's lock (a destroy
        // over the fabric does, for a round trip) and destroys the channel
        // under it: no EINVAL (rping's CM thread died so, 1 run in 300),
        // only a signal ends the wait, as for a read inside the kernel.
        // Method: the test holds the lock, a thread enters the wait, the
        // channel is destroyed under the same hold; the thread must still
        // be waiting 300 ms after the lock is released, and a signal
        // (handler without SA_RESTART) then ends its wait with EINTR.
        // SAFETY: the exported function, no arguments.
        let ch = unsafe { rdma_create_event_channel() } as usize;
        assert_ne!(ch, 0);
        // SAFETY: a handler that does nothing, installed without SA_RESTART.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = ignore as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &sa, core::ptr::null_mut()),
                0
            );
        }
        let g = state::lock();
        let done = Arc::new(AtomicBool::new(false));
        let result = Arc::new(AtomicI32::new(0));
        let (d, r) = (Arc::clone(&done), Arc::clone(&result));
        let t = std::thread::spawn(move || {
            let mut ev: *mut c::rdma_cm_event = core::ptr::null_mut();
            // SAFETY: a channel of ours (or one destroyed since) and a live out-pointer.
            let rc = unsafe { rdma_get_cm_event(ch as *mut c::rdma_event_channel, &mut ev) };
            // SAFETY: errno of this thread.
            let errno = unsafe { *libc::__errno_location() };
            r.store(if rc == 0 { 0 } else { errno }, Ordering::SeqCst);
            d.store(true, Ordering::SeqCst);
        });
        // Let the thread enter the call and stop at the library's lock.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut g = g;
        let shim = g
            .as_mut()
            .expect("the library's state, made by the channel");
        destroy_channel(shim, ch as *mut c::rdma_event_channel);
        drop(g);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !done.load(Ordering::SeqCst),
            "rdma_get_cm_event returned (errno {}) instead of waiting",
            result.load(Ordering::SeqCst)
        );
        use std::os::unix::thread::JoinHandleExt;
        // SAFETY: a live thread of this test (joined below); the signal has a handler.
        let rc = unsafe { libc::pthread_kill(t.as_pthread_t(), libc::SIGUSR2) };
        assert_eq!(rc, 0);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert_eq!(result.load(Ordering::SeqCst), libc::EINTR);
    }
}
