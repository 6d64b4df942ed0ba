//! The drop-in `librdmacm.so.1` (issue #14 item 2) over the simulator's
//! connection manager: event channels with real file descriptors, ids in
//! the asynchronous mode (events through `rdma_get_cm_event`) and the
//! synchronous one (a NULL channel: each call waits for its own event, as
//! librdmacm does), `rdma_create_qp` with its default PD and automatic CQs,
//! `rdma_getaddrinfo` for numeric addresses, `rdma_create_ep` and
//! `rdma_get_request`, `rdma_establish` for ids without a QP, and CM
//! multicast (`rdma_join_multicast(_ex)`, `rdma_leave_multicast`, with
//! `param.ud` of `MULTICAST_JOIN` filled), `AF_IB` addresses (`struct
//! sockaddr_ib`) in binds and resolves. What the simulator lacks (ECE
//! over the CM, ...) fails with `EOPNOTSUPP`.
//!
//! librdmacm's convention: 0, or -1 with `errno`.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::net::SocketAddr;

use backend_sim::*;
use verbs_api::*;

use crate::export::export;

mod addr;
mod ep;
mod event;
mod extra;
mod ledger;
mod qp;
use crate::guard::set_errno;
use crate::provider::records::{ChannelEntry, IdEntry};
use crate::provider::state::{self, c, sync_fds, with, Fail, Res, Shim, SimRes};
use addr::{cm_sockaddr, mark_af_ib, need_sockaddr, write_sockaddr, write_sockaddr_ib};

/// `RAI_PASSIVE` (rdma_cma.h): the address is the local one, to listen on.
const RAI_PASSIVE: c_int = 1;
/// `RAI_NUMERICHOST`.
const RAI_NUMERICHOST: c_int = 2;

/// librdmacm's return: 0, or -1 with errno.
fn ret(r: Res<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}

fn id_entry<'a>(shim: &'a Shim, v: &str, id: *mut c::rdma_cm_id) -> Res<&'a IdEntry> {
    shim.cm
        .ids
        .get(&(id as usize))
        .ok_or_else(|| Fail::bad_ptr(v, "rdma_cm_id", id.cast()))
}

// ------------------------------------------------------------- channels

export! { "RDMACM_1.0" fn rdma_create_event_channel() -> *mut c::rdma_event_channel {
    state::ret_ptr(with(|shim| {
        let v = "rdma_create_event_channel";
        let h = shim.sim.rdma_create_event_channel().at(v)?;
        let fd = crate::provider::fds::new_fd();
        if fd < 0 {
            let _ = shim.sim.rdma_destroy_event_channel(&h);
            return Err(Fail::new(v, libc::EMFILE, "no file descriptor for the channel"));
        }
        let ch = state::alloc_zeroed::<c::rdma_event_channel>();
        // SAFETY: just allocated.
        unsafe { (*ch).fd = fd };
        shim.cm.channels.insert(ch as usize, ChannelEntry { handle: h, fd, signaled: false });
        ledger::note_channel_fd(ch, fd);
        Ok(ch)
    }))
}}

export! { "RDMACM_1.0" fn rdma_destroy_event_channel(channel: *mut c::rdma_event_channel) {
    with(|shim| destroy_channel(shim, channel))
}}

/// The body of `rdma_destroy_event_channel`, under the library's lock.
fn destroy_channel(shim: &mut Shim, channel: *mut c::rdma_event_channel) {
    let v = "rdma_destroy_event_channel";
    let Some(e) = shim.cm.channels.get(&(channel as usize)) else {
        crate::guard::log_err(v, libc::EINVAL, &"not a live event channel of this library");
        return;
    };
    // The C function returns nothing: a busy channel stays (and is logged).
    match shim.sim.rdma_destroy_event_channel(&e.handle) {
        Ok(()) => {
            ledger::forget_channel_fd(channel);
            if let Some(e) = shim.cm.channels.remove(&(channel as usize)) {
                crate::provider::fds::close_fd(e.fd);
            }
            // SAFETY: a live channel of ours, unregistered above, freed once.
            unsafe { state::free(channel) };
        }
        Err(e) => {
            Fail::sim(v, &e);
        }
    }
}

// ------------------------------------------------------------------- ids

/// Allocates the C id for a simulator id (for `rdma_create_id` and the ids
/// a CONNECT_REQUEST brings), and fills it from the simulator.
fn new_id(
    shim: &mut Shim,
    h: CmIdHandle,
    channel: *mut c::rdma_event_channel,
    ch: CmChannelHandle,
    sync: (bool, bool),
    context: *mut c_void,
) -> Res<*mut c::rdma_cm_id> {
    let (sync, owns_channel) = sync;
    let id = state::alloc_zeroed::<c::rdma_cm_id>();
    // SAFETY: just allocated, not shared yet.
    unsafe {
        (*id).channel = channel;
        (*id).context = context;
    }
    shim.cm.ids.insert(
        id as usize,
        IdEntry {
            handle: h,
            sync,
            owns_channel,
            disconnected: false,
            channel: ch,
            passive_qp: None,
            af_ib: false,
            dying: false,
        },
    );
    shim.cm.id_ptrs.insert(h, id as usize);
    refresh(shim, "rdma_create_id", id)?;
    Ok(id)
}

/// Copies the simulator's view of an id into the C struct C reads.
fn refresh(shim: &mut Shim, v: &str, id: *mut c::rdma_cm_id) -> Res<()> {
    let h = id_entry(shim, v, id)?.handle;
    let info = shim.sim.rdma_id_info(&h).at(v)?;
    let verbs = match info.verbs {
        Some(ctx) => crate::provider::context::context_ptr(shim, v, ctx)?,
        None => ptr::null_mut(),
    };
    let pd = info.pd.map_or(ptr::null_mut(), |p| {
        crate::provider::objects::wrap_pd(shim, p, verbs)
    });
    let chan = |shim: &mut Shim, h: Option<CompChannelHandle>| -> Res<*mut c::ibv_comp_channel> {
        match h {
            Some(h) => crate::provider::objects::wrap_channel(shim, v, h, verbs),
            None => Ok(ptr::null_mut()),
        }
    };
    let send_cq_channel = chan(shim, info.send_cq_channel)?;
    let recv_cq_channel = chan(shim, info.recv_cq_channel)?;
    // librdmacm makes the id the context of the CQs it creates (the
    // inline rdma_get_send_comp/rdma_get_recv_comp assert it).
    let send_cq = match info.send_cq {
        Some(q) => {
            crate::provider::cqex::wrap_cq(shim, v, q, verbs, send_cq_channel, id.cast(), false)?
                .cast()
        }
        None => ptr::null_mut(),
    };
    let recv_cq = match info.recv_cq {
        Some(q) => {
            crate::provider::cqex::wrap_cq(shim, v, q, verbs, recv_cq_channel, id.cast(), false)?
                .cast()
        }
        None => ptr::null_mut(),
    };
    let qp = info
        .qp
        .and_then(|q| shim.qp_ptrs.get(&q).copied())
        .unwrap_or(0) as *mut c::ibv_qp;
    // librdmacm moves the id's QP with ibv_modify_qp, which keeps
    // `qp->state` current; the simulated CM moved it itself.
    if let Some(q) = info.qp.filter(|_| !qp.is_null()) {
        if let Ok((a, _)) = shim.sim.query_qp(&q, QpAttrMask::STATE) {
            // SAFETY: `qp` is the live C QP of `q` (from the registry).
            unsafe { (*qp).state = a.qp_state.to_raw() };
        }
    }
    // SAFETY: a live id of ours.
    let r = unsafe { &mut *id };
    r.verbs = verbs;
    r.pd = pd;
    r.qp = qp;
    r.send_cq = send_cq;
    r.recv_cq = recv_cq;
    r.send_cq_channel = send_cq_channel;
    r.recv_cq_channel = recv_cq_channel;
    r.port_num = info.port_num;
    r.ps = info.ps.to_raw();
    r.qp_type = match info.ps {
        PortSpace::Udp | PortSpace::Ipoib => c::IBV_QPT_UD,
        _ => c::IBV_QPT_RC,
    };
    let af_ib = shim.cm.ids.get(&(id as usize)).is_some_and(|e| e.af_ib);
    let ps = info.ps.to_raw();
    // SAFETY: the storage members of the two address unions.
    unsafe {
        let src = &mut r.route.addr.__bindgen_anon_1.src_storage;
        if af_ib {
            write_sockaddr_ib(shim, src, info.addrs.local, ps);
        } else {
            write_sockaddr(src, info.addrs.local);
        }
        let dst = &mut r.route.addr.__bindgen_anon_2.dst_storage;
        if af_ib {
            write_sockaddr_ib(shim, dst, info.addrs.peer, ps);
        } else {
            write_sockaddr(dst, info.addrs.peer);
        }
    }
    Ok(())
}

fn create_id(
    shim: &mut Shim,
    channel: *mut c::rdma_event_channel,
    id: *mut *mut c::rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> Res<()> {
    let v = "rdma_create_id";
    if id.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "id is NULL"));
    }
    let (ch, sync) = if channel.is_null() {
        (shim.sim.rdma_create_event_channel().at(v)?, true)
    } else {
        match shim.cm.channels.get(&(channel as usize)) {
            Some(e) => (e.handle, false),
            None => return Err(Fail::bad_ptr(v, "event channel", channel.cast())),
        }
    };
    let h = match shim
        .sim
        .rdma_create_id(&ch, context as u64, PortSpace::from_raw(ps))
    {
        Ok(h) => h,
        Err(e) => {
            if sync {
                let _ = shim.sim.rdma_destroy_event_channel(&ch);
            }
            return Err(Fail::sim(v, &e));
        }
    };
    let p = new_id(shim, h, channel, ch, (sync, sync), context)?;
    // SAFETY: non-NULL out-pointer.
    unsafe { *id = p };
    Ok(())
}

export! { "RDMACM_1.0" fn rdma_create_id(channel: *mut c::rdma_event_channel, id: *mut *mut c::rdma_cm_id, context: *mut c_void, ps: u32) -> c_int {
    ret(with(|shim| create_id(shim, channel, id, context, ps)))
}}

/// Frees the C wrappers of objects the simulator no longer has (after
/// `rdma_destroy_qp` / `rdma_destroy_id` destroyed automatic CQs, channels
/// and QPs).
fn reap(shim: &mut Shim) {
    let dead_qps: Vec<QpHandle> = shim
        .qp_ptrs
        .keys()
        .copied()
        .filter(|h| shim.sim.qp_out_of_order(*h).is_err())
        .collect();
    for h in dead_qps {
        if let Some(p) = shim.qp_ptrs.remove(&h) {
            crate::provider::qpex::drop_bounce(shim, p as *mut c::ibv_qp);
            shim.objects.remove(&p);
            // SAFETY: a QP wrapper of ours whose QP is gone; freed once.
            drop(unsafe { Box::from_raw(p as *mut crate::provider::qpex::QpAlloc) });
        }
    }
    let cqs: Vec<CqHandle> = shim.cq_ptrs.keys().copied().collect();
    let dead_cqs: Vec<CqHandle> = cqs
        .into_iter()
        .filter(|h| shim.sim.cq_info(h).is_err())
        .collect();
    for h in dead_cqs {
        if let Some(p) = shim.cq_ptrs.remove(&h) {
            shim.objects.remove(&p);
            // SAFETY: a CQ wrapper of ours whose CQ is gone; freed once.
            drop(unsafe { Box::from_raw(p as *mut crate::provider::cqex::CqAlloc) });
        }
    }
    let dead_chs: Vec<usize> = shim
        .fds
        .channels
        .iter()
        .filter(|(_, w)| shim.sim.comp_channel_pending(w.handle).is_err())
        .map(|(&p, _)| p)
        .collect();
    for p in dead_chs {
        if let Some(w) = shim.fds.channels.remove(&p) {
            crate::provider::fds::close_fd(w.fd);
        }
        shim.objects.remove(&p);
        // SAFETY: a channel wrapper of ours whose channel is gone; freed once.
        unsafe { state::free(p as *mut c::ibv_comp_channel) };
    }
}

/// The body of `rdma_destroy_id` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// As librdmacm's: from the start of the call no event of the id is
/// handed out any more, on any thread (`rdma_get_cm_event` drops them;
/// the simulator removes those still queued when the id goes), and the
/// call waits, without the library's lock, until the events already
/// handed out for the id are acknowledged (`rdma_ack_cm_event` on another
/// thread), then destroys it.
///
/// # Safety
/// The pointers are the caller's, as `rdma_destroy_id` takes them.
unsafe fn rdma_destroy_id_impl(id: *mut c::rdma_cm_id) -> c_int {
    let v = "rdma_destroy_id";
    let start = std::time::Instant::now();
    let mut noticed = false;
    loop {
        let r = with(|shim| -> Res<bool> {
            let h = id_entry(shim, v, id)?.handle;
            let outstanding = ledger::handed_out(shim, h);
            // A QP still on the id fails at once (below), wait or not.
            if outstanding > 0 && shim.sim.rdma_id_info(&h).at(v)?.qp.is_none() {
                if let Some(e) = shim.cm.ids.get_mut(&(id as usize)) {
                    e.dying = true;
                }
                return Ok(false);
            }
            destroy_id_now(shim, v, id, h)?;
            Ok(true)
        });
        match r {
            Ok(true) => return 0,
            Ok(false) => {}
            Err(f) => {
                set_errno(f.errno);
                return -1;
            }
        }
        if !noticed && start.elapsed() > std::time::Duration::from_secs(10) {
            noticed = true;
            eprintln!(
                "verbsim shim: {v} has waited 10s for an event of the id to be acknowledged (rdma_ack_cm_event); librdmacm waits as long as it takes"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Destroys id `id` (handle `h`), whose handed-out events are all acknowledged.
fn destroy_id_now(shim: &mut Shim, v: &str, id: *mut c::rdma_cm_id, h: CmIdHandle) -> Res<()> {
    let (owns, ch) = {
        let e = id_entry(shim, v, id)?;
        (e.owns_channel, e.channel)
    };
    if let Err(e) = shim.sim.rdma_destroy_id(&h) {
        if let Some(e) = shim.cm.ids.get_mut(&(id as usize)) {
            e.dying = false;
        }
        return Err(Fail::sim(v, &e));
    }
    shim.cm.ids.remove(&(id as usize));
    shim.cm.id_ptrs.remove(&h);
    for ev in shim.cm.stash.remove(&h).unwrap_or_default() {
        let _ = shim.sim.rdma_ack_cm_event(ev);
    }
    if owns {
        let _ = shim.sim.rdma_destroy_event_channel(&ch);
    }
    // SAFETY: a live id of ours, unregistered above, freed once.
    unsafe { state::free(id) };
    reap(shim);
    Ok(())
}

export! { "RDMACM_1.0" fn rdma_destroy_id(id: *mut c::rdma_cm_id) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_destroy_id_impl(id) }
}}

/// Who a sync channel's event is for: the listener for a
/// CONNECT_REQUEST (its new id is the request's), the event's id otherwise.
fn sync_owner(ev: &CmEvent<SimVerbs>) -> CmIdHandle {
    match (ev.event, ev.listen_id) {
        (CmEventType::ConnectRequest, Some(l)) => l,
        _ => ev.id,
    }
}

/// The next event of sync id `h` (listening on `ch`), if one is there:
/// events of the other ids that share the channel (a sync listener and the
/// ids of its requests, which librdmacm moves to channels of their own)
/// are set aside for them, so each sees only its own, in order.
fn next_sync_event(
    shim: &mut Shim,
    v: &str,
    h: CmIdHandle,
    ch: CmChannelHandle,
) -> Res<Option<CmEvent<SimVerbs>>> {
    if let Some(ev) = shim.cm.stash.get_mut(&h).and_then(|q| q.pop_front()) {
        return Ok(Some(ev));
    }
    for settled in [false, true] {
        if settled {
            crate::provider::events::settle(shim);
        }
        while let Some(ev) = shim.sim.rdma_get_cm_event(&ch).at(v)? {
            let owner = sync_owner(&ev);
            if owner == h {
                return Ok(Some(ev));
            }
            shim.cm.stash.entry(owner).or_default().push_back(ev);
        }
    }
    Ok(None)
}

/// For a sync id: blocks (the library's lock released between looks, so
/// other threads and, on the shared fabric, other processes go on) until
/// its next event, which must be `want`: librdmacm's `ucma_complete`, a
/// read of the id's own channel that waits as long as it takes (the CM's
/// own timers end a wait for a peer that never answers). An error event
/// becomes the errno librdmacm gives (`ECONNREFUSED` for a rejection, the
/// event's status otherwise). `Ok(None)` for an id with a channel.
fn wait_sync(v: &str, id: *mut c::rdma_cm_id, want: CmEventType) -> Res<Option<CmEvent<SimVerbs>>> {
    let ev = crate::provider::events::blocking(v, -1, || {
        with(|shim| {
            let e = id_entry(shim, v, id)?;
            if !e.sync {
                return Ok(Some(None));
            }
            let (h, ch) = (e.handle, e.channel);
            Ok(next_sync_event(shim, v, h, ch)?.map(Some))
        })
    })?;
    let Some(ev) = ev else {
        return Ok(None);
    };
    if ev.event == want && ev.status == 0 {
        return Ok(Some(ev));
    }
    let (event, status) = (ev.event, ev.status);
    with(|shim| shim.sim.rdma_ack_cm_event(ev)).at(v)?;
    let errno = if event == CmEventType::Rejected || status == 0 {
        libc::ECONNREFUSED
    } else {
        status.abs()
    };
    Err(Fail::new(
        v,
        errno,
        format!(
            "{} (status {status}) instead of {}",
            event.name(),
            want.name()
        ),
    ))
}

/// Runs a CM verb under the library's lock; `f` returns the event a sync
/// id then waits for (None: nothing to wait for), which is waited for with
/// the lock released and acknowledged.
fn verb_then_wait(
    v: &str,
    id: *mut c::rdma_cm_id,
    f: impl FnOnce(&mut Shim, &CmIdHandle) -> Res<Option<CmEventType>>,
) -> Res<()> {
    let want = with(|shim| {
        let (h, sync) = {
            let e = id_entry(shim, v, id)?;
            (e.handle, e.sync)
        };
        let want = f(shim, &h)?;
        refresh(shim, v, id)?;
        sync_fds(shim);
        Ok(want.filter(|_| sync))
    })?;
    if let Some(want) = want {
        if let Some(ev) = wait_sync(v, id, want)? {
            with(|shim| {
                shim.sim.rdma_ack_cm_event(ev).at(v)?;
                refresh(shim, v, id)?;
                sync_fds(shim);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// The body of `rdma_bind_addr` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_bind_addr` takes them.
unsafe fn rdma_bind_addr_impl(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr) -> c_int {
    ret((|| {
        let v = "rdma_bind_addr";
        // SAFETY: the caller's sockaddr or NULL.
        let (a, ib) = with(|s| unsafe { cm_sockaddr(s, v, addr, "addr") })?;
        verb_then_wait(v, id, |s, h| {
            s.sim.rdma_bind_addr(h, a).at(v)?;
            mark_af_ib(s, id, ib);
            Ok(None)
        })
    })())
}

export! { "RDMACM_1.0" fn rdma_bind_addr(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_bind_addr_impl(id, addr) }
}}

/// The body of `rdma_resolve_addr` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_resolve_addr` takes them.
unsafe fn rdma_resolve_addr_impl(
    id: *mut c::rdma_cm_id,
    src_addr: *mut c::sockaddr,
    dst_addr: *mut c::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    ret((|| {
        let v = "rdma_resolve_addr";
        // SAFETY: the caller's sockaddrs or NULL.
        let (dst, ib) = with(|s| unsafe { cm_sockaddr(s, v, dst_addr, "dst_addr") })?;
        let src = if src_addr.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(with(|s| unsafe { cm_sockaddr(s, v, src_addr, "src_addr") })?.0)
        };
        let t = timeout_ms.max(0) as u32;
        verb_then_wait(v, id, |s, h| {
            s.sim.rdma_resolve_addr(h, src, dst, t).at(v)?;
            mark_af_ib(s, id, ib);
            Ok(Some(CmEventType::AddrResolved))
        })
    })())
}

export! { "RDMACM_1.0" fn rdma_resolve_addr(id: *mut c::rdma_cm_id, src_addr: *mut c::sockaddr, dst_addr: *mut c::sockaddr, timeout_ms: c_int) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_resolve_addr_impl(id, src_addr, dst_addr, timeout_ms) }
}}

/// The body of `rdma_resolve_route` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_resolve_route` takes them.
unsafe fn rdma_resolve_route_impl(id: *mut c::rdma_cm_id, timeout_ms: c_int) -> c_int {
    let v = "rdma_resolve_route";
    let t = timeout_ms.max(0) as u32;
    ret(verb_then_wait(v, id, |s, h| {
        s.sim.rdma_resolve_route(h, t).at(v)?;
        Ok(Some(CmEventType::RouteResolved))
    }))
}

export! { "RDMACM_1.0" fn rdma_resolve_route(id: *mut c::rdma_cm_id, timeout_ms: c_int) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_resolve_route_impl(id, timeout_ms) }
}}

export! { "RDMACM_1.0" fn rdma_listen(id: *mut c::rdma_cm_id, backlog: c_int) -> c_int {
    ret(verb_then_wait("rdma_listen", id, |s, h| s.sim.rdma_listen(h, backlog).at("rdma_listen").map(|()| None)))
}}

/// `struct rdma_conn_param` → [`ConnParam`]. NULL is what librdmacm makes
/// of it: the largest depths (the device's on connect, the request's on
/// accept: 255 says so), 7 retries and 7 RNR retries.
///
/// # Safety
/// `p` is NULL or a readable conn_param whose private data is readable.
unsafe fn read_conn_param(p: *const c::rdma_conn_param) -> ConnParam {
    if p.is_null() {
        return ConnParam {
            responder_resources: u8::MAX,
            initiator_depth: u8::MAX,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnParam::default()
        };
    }
    // SAFETY: the caller's contract.
    let c = unsafe { &*p };
    let data = if c.private_data.is_null() || c.private_data_len == 0 {
        Vec::new()
    } else {
        // SAFETY: private_data_len readable bytes (the caller's contract).
        unsafe {
            core::slice::from_raw_parts(
                c.private_data.cast::<u8>(),
                usize::from(c.private_data_len),
            )
        }
        .to_vec()
    };
    ConnParam {
        private_data: data,
        responder_resources: c.responder_resources,
        initiator_depth: c.initiator_depth,
        flow_control: c.flow_control,
        retry_count: c.retry_count,
        rnr_retry_count: c.rnr_retry_count,
        srq: c.srq,
        qp_num: c.qp_num,
    }
}

export! { "RDMACM_1.0" fn rdma_connect(id: *mut c::rdma_cm_id, conn_param: *mut c::rdma_conn_param) -> c_int {
    let v = "rdma_connect";
    // SAFETY: the caller's struct or NULL.
    let p = unsafe { read_conn_param(conn_param) };
    ret(verb_then_wait(v, id, |s, h| {
        // Without a QP the connection ends at CONNECT_RESPONSE: the
        // application moves its own QP, then calls rdma_establish.
        let want = if s.sim.rdma_id_info(h).at(v)?.qp.is_some() {
            CmEventType::Established
        } else {
            CmEventType::ConnectResponse
        };
        s.sim.rdma_connect(h, &p).at(v)?;
        Ok(Some(want))
    }))
}}

export! { "RDMACM_1.2" fn rdma_establish(id: *mut c::rdma_cm_id) -> c_int {
    ret(verb_then_wait("rdma_establish", id, |s, h| s.sim.rdma_establish(h).at("rdma_establish").map(|()| None)))
}}

/// A multicast join: the address, then (sync ids) the `MULTICAST_JOIN`
/// event waited for, as librdmacm's `ucma_complete` does.
fn join(
    v: &str,
    id: *mut c::rdma_cm_id,
    addr: Option<SocketAddr>,
    flags: Option<McJoinFlag>,
    context: *mut c_void,
) -> Res<()> {
    let a =
        addr.ok_or_else(|| Fail::new(v, libc::EINVAL, "addr is NULL or not AF_INET/AF_INET6"))?;
    let ctx = context as usize as u64;
    verb_then_wait(v, id, |s, h| {
        match flags {
            None => s.sim.rdma_join_multicast(h, a, ctx),
            Some(join_flags) => s.sim.rdma_join_multicast_ex(
                h,
                &JoinMcAttr {
                    addr: a,
                    join_flags,
                },
                ctx,
            ),
        }
        .at(v)?;
        Ok(Some(CmEventType::MulticastJoin))
    })
}

export! { "RDMACM_1.0" fn rdma_join_multicast(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr, context: *mut c_void) -> c_int {
    let v = "rdma_join_multicast";
    // SAFETY: the caller's sockaddr or NULL.
    ret(unsafe { need_sockaddr(v, addr, "addr") }.and_then(|a| join(v, id, Some(a), None, context)))
}}

export! { "RDMACM_1.1" fn rdma_join_multicast_ex(id: *mut c::rdma_cm_id, mc_join_attr: *mut c::rdma_cm_join_mc_attr_ex, context: *mut c_void) -> c_int {
    ret((|| {
        let v = "rdma_join_multicast_ex";
        if mc_join_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "mc_join_attr is NULL"));
        }
        // SAFETY: a readable struct (the caller's contract).
        let attr = unsafe { *mc_join_attr };
        if attr.comp_mask >= c::RDMA_CM_JOIN_MC_ATTR_RESERVED {
            return Err(Fail::new(v, libc::EOPNOTSUPP, format!("unknown comp_mask bits {:#x}", attr.comp_mask)));
        }
        if attr.comp_mask & c::RDMA_CM_JOIN_MC_ATTR_ADDRESS == 0 {
            return Err(Fail::new(v, libc::EINVAL, "comp_mask lacks RDMA_CM_JOIN_MC_ATTR_ADDRESS"));
        }
        if attr.comp_mask & c::RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS == 0 || attr.join_flags >= c::RDMA_MC_JOIN_FLAG_RESERVED {
            return Err(Fail::new(v, libc::EINVAL, "comp_mask lacks RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, or join_flags is unknown"));
        }
        let flags = McJoinFlag::from_raw(attr.join_flags);
        // SAFETY: the caller's sockaddr or NULL.
        let a = unsafe { need_sockaddr(v, attr.addr, "mc_join_attr->addr") }?;
        join(v, id, Some(a), Some(flags), context)
    })())
}}

export! { "RDMACM_1.0" fn rdma_leave_multicast(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr) -> c_int {
    ret((|| {
        let v = "rdma_leave_multicast";
        // SAFETY: the caller's sockaddr or NULL.
        let a = unsafe { need_sockaddr(v, addr, "addr") }?;
        verb_then_wait(v, id, |s, h| s.sim.rdma_leave_multicast(h, a).at(v).map(|()| None))
    })())
}}

export! { "RDMACM_1.0" fn rdma_accept(id: *mut c::rdma_cm_id, conn_param: *mut c::rdma_conn_param) -> c_int {
    let v = "rdma_accept";
    // SAFETY: the caller's struct or NULL.
    let p = unsafe { read_conn_param(conn_param) };
    ret(verb_then_wait(v, id, |s, h| {
        s.sim.rdma_accept(h, &p).at(v)?;
        // A UD id's accept is the SIDR answer: nothing comes back for it.
        let ud = matches!(s.sim.rdma_id_info(h).at(v)?.ps, PortSpace::Udp | PortSpace::Ipoib);
        Ok((!ud).then_some(CmEventType::Established))
    }))
}}

export! { "RDMACM_1.0" fn rdma_reject(id: *mut c::rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    let data = if private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: private_data_len readable bytes.
        unsafe { core::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(private_data_len)) }.to_vec()
    };
    ret(verb_then_wait("rdma_reject", id, |s, h| s.sim.rdma_reject(h, &data).at("rdma_reject").map(|()| None)))
}}

export! { "RDMACM_1.0" fn rdma_disconnect(id: *mut c::rdma_cm_id) -> c_int {
    // A sync id waits for its DISCONNECTED, as librdmacm's does (once:
    // a second call finds the id disconnected and nothing comes).
    ret(verb_then_wait("rdma_disconnect", id, |s, h| {
        s.sim.rdma_disconnect(h).at("rdma_disconnect")?;
        let e = s.cm.ids.get_mut(&(id as usize));
        let first = e.is_some_and(|e| !core::mem::replace(&mut e.disconnected, true));
        Ok(first.then_some(CmEventType::Disconnected))
    }))
}}
