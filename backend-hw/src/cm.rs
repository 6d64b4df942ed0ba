//! The rdma_cm verbs over librdmacm (rdma-sys binds `<rdma/rdma_cma.h>`).
//!
//! # Ownership
//!
//! * [`HwCmChannel`] owns an `rdma_event_channel` (made non-blocking at
//!   creation). [`HwCmId`] owns an `rdma_cm_id` and holds an `Arc` of its
//!   channel, so a channel is destroyed only after its last id;
//!   `rdma_destroy_event_channel` is `EBUSY` while ids are alive (C would
//!   leave them pointing at a freed channel).
//! * What librdmacm creates *for* an id — its device context (`verbs`), the
//!   default PD, the QP of `rdma_create_qp` and the CQs and completion
//!   channels it creates when none are given — is wrapped in *borrowed*
//!   handles: usable like any other, never destroyed by us (destroying one
//!   through `destroy_qp` etc. is `EBUSY`), and marked stale when librdmacm
//!   destroys it (`rdma_destroy_qp`, `rdma_destroy_id`).
//! * Dropping the last handle of an id acknowledges its outstanding events,
//!   destroys its QP (`rdma_destroy_qp`) if any, then the id.
//!
//! # Events
//!
//! `rdma_get_cm_event` is non-blocking (`Ok(None)` on `EAGAIN`). The event
//! is copied out — type, status, connection parameters, private data — and
//! the C event stays allocated until [`rdma_ack_cm_event`](crate::HwVerbs)
//! is called with the copy: librdmacm counts it against the listening id
//! for `CONNECT_REQUEST` and against the event's id otherwise, and
//! `rdma_destroy_id` waits (forever) for that count, so the explicit
//! `rdma_destroy_id` is `EBUSY` while events are unacknowledged. The new id
//! of a `CONNECT_REQUEST` becomes a new [`HwCmId`]; later events name it
//! through the channel's registry of live ids.
//!
//! # Checks librdmacm does not make
//!
//! `rdma_resolve_route`, `rdma_connect`, `rdma_accept` and `rdma_create_qp`
//! dereference the id's device (`id->verbs`, `cma_dev`) without checking it;
//! on an id not yet bound to a device they would crash, so the backend
//! answers `EINVAL` first. Private data longer than 255 bytes (C's `u8`
//! length) is `EINVAL` rather than silently truncated.

// See hw.rs: the handles wrap `Arc`s of `!Send` inners on purpose.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::{Cell, RefCell};
use core::ffi::{c_int, c_void};
use core::fmt;
use core::mem::size_of;
use core::ptr::{self, NonNull};
use std::ffi::CStr;
use std::net::SocketAddr;
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::{EINVAL, ENODEV, EPERM};
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::convert::{cap_from_c, zeroed};
use crate::errors::{c_error, foreign, stale};
use crate::ffi::posix::{set_nonblocking, EAGAIN};
use crate::ffi::verbs::last_errno;
use crate::handles::{
    register_cq, register_qp, ChanInner, ContextInner, CqInner, HwCompChannel, HwContext, HwCq,
    HwPd, HwQp, Owned, PdInner, QpInner,
};
use crate::registry::{Live, PtrRegistry};
use crate::sockaddr::SockAddrBuf;

/// `RDMA_CM_EVENT_CONNECT_REQUEST`.
const CONNECT_REQUEST: u32 = 4;
/// `RDMA_CM_EVENT_MULTICAST_JOIN` / `_ERROR`: their `private_data` is the
/// user's join context, not bytes.
const MULTICAST_JOIN: u32 = 12;
const MULTICAST_ERROR: u32 = 13;

pub(crate) struct CmChannelInner {
    raw: Cell<*mut sys::rdma_event_channel>,
    owner: u64,
    /// Live ids of this channel by address (events name ids by address).
    ids: RefCell<PtrRegistry<CmIdInner>>,
    /// Ids created on (or arrived through) this channel and not destroyed.
    live_ids: Cell<usize>,
}

impl CmChannelInner {
    fn get(&self, verb: Verb, owner: u64) -> Result<*mut sys::rdma_event_channel> {
        if self.owner != owner {
            return Err(foreign(verb, "rdma_cm event channel"));
        }
        let p = self.raw.get();
        if p.is_null() {
            return Err(stale(verb, "rdma_cm event channel"));
        }
        Ok(p)
    }
}

impl Drop for CmChannelInner {
    fn drop(&mut self) {
        // Every id holds an Arc of this inner, so none is alive here.
        let p = self.raw.get();
        if !p.is_null() {
            // SAFETY: `p` came from `rdma_create_event_channel`, is destroyed
            // once, and no id uses it any more.
            unsafe { sys::rdma_destroy_event_channel(p) };
        }
    }
}

/// An rdma_cm event channel (`struct rdma_event_channel`), non-blocking.
#[derive(Clone)]
pub struct HwCmChannel(pub(crate) Arc<CmChannelInner>);

impl fmt::Debug for HwCmChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HwCmChannel({:p})", Arc::as_ptr(&self.0))
    }
}

/// An event fetched and not acknowledged yet, counted on the id that holds
/// it in its `pending` list.
struct PendingEvent {
    raw: *mut sys::rdma_cm_event,
    event: u32,
    /// Address of the event's `id` (matched on acknowledgement).
    id_addr: usize,
}

/// The QP librdmacm created for an id, with the CQs and channels it created
/// along (all borrowed).
struct CmQp {
    qp: HwQp,
    auto_send_cq: Option<HwCq>,
    auto_recv_cq: Option<HwCq>,
    auto_send_channel: Option<HwCompChannel>,
    auto_recv_channel: Option<HwCompChannel>,
}

impl CmQp {
    fn check_no_unacked(&self, verb: Verb) -> Result<()> {
        self.qp.0.obj.check_no_unacked(verb)?;
        for cq in self.auto_send_cq.iter().chain(&self.auto_recv_cq) {
            cq.0.obj.check_no_unacked(verb)?;
        }
        Ok(())
    }

    fn ack_outstanding(&self) {
        self.qp.0.obj.ack_outstanding();
        for cq in self.auto_send_cq.iter().chain(&self.auto_recv_cq) {
            cq.0.obj.ack_outstanding();
        }
    }

    /// librdmacm destroyed them: every clone of these handles goes stale.
    fn invalidate(&self) {
        self.qp.0.obj.invalidate();
        for cq in self.auto_send_cq.iter().chain(&self.auto_recv_cq) {
            cq.0.obj.invalidate();
        }
        for ch in self.auto_send_channel.iter().chain(&self.auto_recv_channel) {
            ch.0.obj.invalidate();
        }
    }
}

pub(crate) struct CmIdInner {
    /// Destroyed (in `Drop`) before the channel below is released.
    raw: Cell<*mut sys::rdma_cm_id>,
    /// The id's address, kept after destruction to match events.
    addr: usize,
    /// Events counted on this id, not acknowledged yet.
    pending: RefCell<Vec<PendingEvent>>,
    /// `rdma_create_qp`'s QP and automatic CQs.
    qp: RefCell<Option<CmQp>>,
    /// The borrowed default PD (`id->pd`), once asked for.
    pd: RefCell<Option<HwPd>>,
    /// Released last: the channel outlives the id.
    channel: Arc<CmChannelInner>,
}

impl Live for CmIdInner {
    fn is_live_at(&self, addr: usize) -> bool {
        addr != 0 && self.raw.get() as usize == addr
    }
}

impl CmIdInner {
    fn get(&self, verb: Verb, owner: u64) -> Result<*mut sys::rdma_cm_id> {
        if self.channel.owner != owner {
            return Err(foreign(verb, "rdma_cm id"));
        }
        let p = self.raw.get();
        if p.is_null() {
            return Err(stale(verb, "rdma_cm id"));
        }
        Ok(p)
    }

    /// After librdmacm freed the id: forget it everywhere.
    fn forget(&self) {
        self.raw.set(ptr::null_mut());
        if let Some(pd) = self.pd.borrow_mut().take() {
            pd.0.obj.invalidate();
        }
        self.channel.ids.borrow_mut().remove(self.addr);
        self.channel.live_ids.set(self.channel.live_ids.get() - 1);
    }
}

impl Drop for CmIdInner {
    fn drop(&mut self) {
        let p = self.raw.get();
        if p.is_null() {
            return;
        }
        for ev in self.pending.borrow_mut().drain(..) {
            // SAFETY: each pending event came from `rdma_get_cm_event` and is
            // acknowledged exactly once (it is removed from the list).
            unsafe { sys::rdma_ack_cm_event(ev.raw) };
        }
        if let Some(q) = self.qp.borrow_mut().take() {
            q.ack_outstanding();
            // SAFETY: live id with a QP; its objects' events are all
            // acknowledged, so the destroys inside do not wait.
            unsafe { sys::rdma_destroy_qp(p) };
            q.invalidate();
        }
        // SAFETY: live id, its QP destroyed and its counted events
        // acknowledged, so `rdma_destroy_id` does not wait.
        if unsafe { sys::rdma_destroy_id(p) } != 0 {
            eprintln!(
                "backend-hw: leaking an rdma_cm id whose last handle was dropped: rdma_destroy_id failed: errno {}",
                last_errno()
            );
            return;
        }
        self.forget();
    }
}

/// An rdma_cm identifier (`struct rdma_cm_id`); keeps its event channel
/// alive.
#[derive(Clone)]
pub struct HwCmId(pub(crate) Arc<CmIdInner>);

impl fmt::Debug for HwCmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HwCmId({:p})", Arc::as_ptr(&self.0))
    }
}

/// The error for a failed `rdma_create_event_channel`, naming the likely
/// cause.
pub(crate) fn channel_error(errno: i32) -> Error {
    let why = match errno {
        ENODEV => ": librdmacm found no RDMA device (ibv_get_device_list failed or is empty)",
        EPERM => ": the kernel offers no rdma_cm ABI (is the rdma_ucm module loaded?)",
        2 => ": /dev/infiniband/rdma_cm does not exist (rdma_ucm not loaded?)",
        _ => "",
    };
    let name = errno::name(errno).unwrap_or("E?");
    Error::from_errno(
        Verb::RdmaCreateEventChannel,
        errno,
        format!("rdma_create_event_channel failed: {name}{why}"),
    )
}

fn private_len(verb: Verb, data: &[u8]) -> Result<u8> {
    u8::try_from(data.len()).map_err(|_| {
        Error::invalid(
            verb,
            format!("{} bytes of private data (at most 255)", data.len()),
        )
    })
}

fn conn_param_to_c(verb: Verb, p: &ConnParam) -> Result<sys::rdma_conn_param> {
    let mut c: sys::rdma_conn_param = zeroed();
    c.private_data = if p.private_data.is_empty() {
        ptr::null()
    } else {
        p.private_data.as_ptr().cast()
    };
    c.private_data_len = private_len(verb, &p.private_data)?;
    c.responder_resources = p.responder_resources;
    c.initiator_depth = p.initiator_depth;
    c.flow_control = p.flow_control;
    c.retry_count = p.retry_count;
    c.rnr_retry_count = p.rnr_retry_count;
    c.srq = p.srq;
    c.qp_num = p.qp_num;
    Ok(c)
}

/// Copies `len` bytes at `p` (nothing for NULL or 0).
///
/// # Safety
///
/// `p` is NULL or names `len` readable bytes.
unsafe fn copy_bytes(p: *const c_void, len: u8) -> Vec<u8> {
    if p.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: caller's contract.
    unsafe { core::slice::from_raw_parts(p.cast::<u8>(), usize::from(len)) }.to_vec()
}

impl HwVerbs {
    pub(crate) fn cm_id(&self, id: &HwCmId, verb: Verb) -> Result<*mut sys::rdma_cm_id> {
        id.0.get(verb, self.id)
    }

    /// Like `cm_id`, and the id must be bound to a device (C dereferences it).
    fn cm_bound_id(&self, id: &HwCmId, verb: Verb) -> Result<*mut sys::rdma_cm_id> {
        let p = self.cm_id(id, verb)?;
        // SAFETY: `p` is a live id; `verbs` is a plain pointer field.
        if unsafe { (*p).verbs }.is_null() {
            return Err(Error::invalid(
                verb,
                "the rdma_cm id is not bound to a device yet (rdma_bind_addr, or \
                 rdma_resolve_addr and its ADDR_RESOLVED event, first)",
            ));
        }
        Ok(p)
    }

    /// The handle of a device context librdmacm opened (one per address).
    fn cm_context(&self, v: *mut sys::ibv_context) -> HwContext {
        let mut map = self.cm_contexts.borrow_mut();
        map.entry(v as usize)
            .or_insert_with(|| {
                // SAFETY: `v` is the live `verbs` of a live id; `device` and
                // its name are set by ibv_open_device and NUL-terminated.
                let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name((*v).device)) }
                    .to_string_lossy()
                    .into_owned();
                HwContext(Arc::new(ContextInner::new(
                    v,
                    self.id,
                    ProcessId(0),
                    name,
                    true,
                )))
            })
            .clone()
    }

    fn new_id_handle(chan: &Arc<CmChannelInner>, p: *mut sys::rdma_cm_id) -> HwCmId {
        let inner = Arc::new(CmIdInner {
            raw: Cell::new(p),
            addr: p as usize,
            pending: RefCell::default(),
            qp: RefCell::default(),
            pd: RefCell::default(),
            channel: Arc::clone(chan),
        });
        chan.ids.borrow_mut().insert(p as usize, &inner);
        chan.live_ids.set(chan.live_ids.get() + 1);
        HwCmId(inner)
    }

    /// The borrowed handle of the id's default PD.
    fn cm_default_pd(&self, id: &HwCmId, pd: *mut sys::ibv_pd, ctx: &HwContext) -> Option<HwPd> {
        let nn = NonNull::new(pd)?;
        let mut slot = id.0.pd.borrow_mut();
        if let Some(h) = slot.as_ref().filter(|h| h.0.obj.raw.get() == pd) {
            return Some(h.clone());
        }
        let h = HwPd(Arc::new(PdInner {
            obj: Owned::borrowed(nn, &ctx.0),
        }));
        if let Some(old) = slot.replace(h.clone()) {
            old.0.obj.invalidate();
        }
        Some(h)
    }

    pub(crate) fn cm_create_event_channel(&mut self) -> Result<HwCmChannel> {
        // SAFETY: no arguments; returns NULL and sets errno on failure.
        let p = unsafe { sys::rdma_create_event_channel() };
        if p.is_null() {
            return Err(channel_error(last_errno()));
        }
        let inner = Arc::new(CmChannelInner {
            raw: Cell::new(p),
            owner: self.id,
            ids: RefCell::default(),
            live_ids: Cell::new(0),
        });
        // SAFETY: `p` is the live channel just created; `fd` is a plain field.
        let fd = unsafe { (*p).fd };
        // On failure `inner` is dropped, which destroys the channel.
        set_nonblocking(fd).map_err(|e| {
            c_error(
                Verb::RdmaCreateEventChannel,
                e,
                "fcntl(channel->fd, F_SETFL, O_NONBLOCK)",
            )
        })?;
        Ok(HwCmChannel(inner))
    }

    pub(crate) fn cm_destroy_event_channel(&mut self, ch: &HwCmChannel) -> Result<()> {
        let verb = Verb::RdmaDestroyEventChannel;
        let p = ch.0.get(verb, self.id)?;
        let n = ch.0.live_ids.get();
        if n > 0 {
            return Err(Error::new(
                verb,
                ErrorKind::Busy,
                format!("{n} rdma_cm id(s) of this channel are still alive"),
            ));
        }
        // SAFETY: live channel with no id left on it; destroyed once (the
        // pointer is cleared right after).
        unsafe { sys::rdma_destroy_event_channel(p) };
        ch.0.raw.set(ptr::null_mut());
        Ok(())
    }

    pub(crate) fn cm_create_id(
        &mut self,
        ch: &HwCmChannel,
        context: u64,
        ps: PortSpace,
    ) -> Result<HwCmId> {
        let verb = Verb::RdmaCreateId;
        let c = ch.0.get(verb, self.id)?;
        let mut id: *mut sys::rdma_cm_id = ptr::null_mut();
        // SAFETY: live channel; `id` is a valid out-parameter; `context` is
        // an opaque value librdmacm only stores.
        let rc = unsafe {
            sys::rdma_create_id(c, &mut id, context as usize as *mut c_void, ps.to_raw())
        };
        if rc != 0 || id.is_null() {
            return Err(c_error(verb, last_errno(), "rdma_create_id"));
        }
        Ok(Self::new_id_handle(&ch.0, id))
    }

    pub(crate) fn cm_destroy_id(&mut self, id: &HwCmId) -> Result<()> {
        let verb = Verb::RdmaDestroyId;
        let p = self.cm_id(id, verb)?;
        let n = id.0.pending.borrow().len();
        if n > 0 {
            return Err(Error::new(
                verb,
                ErrorKind::Busy,
                format!(
                    "{n} rdma_cm event(s) of this id are not acknowledged; rdma_destroy_id would \
                     wait for them forever (rdma_ack_cm_event first)"
                ),
            ));
        }
        if id.0.qp.borrow().is_some() {
            return Err(Error::new(
                verb,
                ErrorKind::Busy,
                "the id still has a QP: rdma_destroy_qp first",
            ));
        }
        // SAFETY: live id with no QP and no unacknowledged event.
        if unsafe { sys::rdma_destroy_id(p) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_destroy_id"));
        }
        id.0.forget();
        Ok(())
    }

    pub(crate) fn cm_id_info(&mut self, id: &HwCmId) -> Result<CmIdInfo<Self>> {
        let verb = Verb::RdmaGetLocalAddr;
        let p = self.cm_id(id, verb)?;
        // SAFETY: `p` is a live id; we copy plain fields out of it.
        let (v, pd, send_cq, recv_cq, port_num, ps) = unsafe {
            let r = &*p;
            (r.verbs, r.pd, r.send_cq, r.recv_cq, r.port_num, r.ps)
        };
        let read_addr = |dst: bool| {
            // SAFETY: `p` is live; both unions are `sockaddr_storage`-sized
            // plain bytes written by librdmacm (zero before binding).
            let bytes: &[u8] = unsafe {
                let a = &(*p).route.addr;
                if dst {
                    core::slice::from_raw_parts(
                        (&raw const a.dst_addr_union).cast::<u8>(),
                        size_of::<sys::dst_addr_union_t>(),
                    )
                } else {
                    core::slice::from_raw_parts(
                        (&raw const a.src_addr_union).cast::<u8>(),
                        size_of::<sys::src_addr_union_t>(),
                    )
                }
            };
            SockAddrBuf::from_bytes(bytes).decode()
        };
        let addrs = CmAddrs {
            local: read_addr(false),
            peer: read_addr(true),
        };
        let ctx = (!v.is_null()).then(|| self.cm_context(v));
        let q = id.0.qp.borrow();
        let find_cq = |c: *mut sys::ibv_cq| -> Option<HwCq> {
            if c.is_null() {
                return None;
            }
            let ctx = ctx.as_ref()?;
            let found = ctx.0.objects.borrow().cqs.get(c as usize);
            found.map(HwCq)
        };
        let qp_pd = q
            .as_ref()
            .and_then(|q| q.qp.0._pd.clone())
            .filter(|h| h.0.obj.raw.get() == pd);
        let pd = match (qp_pd, &ctx) {
            (Some(h), _) => Some(h),
            (None, Some(c)) => self.cm_default_pd(id, pd, c),
            (None, None) => None,
        };
        Ok(CmIdInfo {
            verbs: ctx.clone(),
            pd,
            qp: q.as_ref().map(|q| q.qp.clone()),
            send_cq: find_cq(send_cq),
            recv_cq: find_cq(recv_cq),
            send_cq_channel: q.as_ref().and_then(|q| q.auto_send_channel.clone()),
            recv_cq_channel: q.as_ref().and_then(|q| q.auto_recv_channel.clone()),
            port_num,
            ps: PortSpace::from_raw(ps),
            addrs,
        })
    }

    pub(crate) fn cm_bind_addr(&mut self, id: &HwCmId, addr: SocketAddr) -> Result<()> {
        let verb = Verb::RdmaBindAddr;
        let p = self.cm_id(id, verb)?;
        let mut a = SockAddrBuf::from_std(&addr);
        // SAFETY: live id; `a` is a valid `sockaddr_in`/`sockaddr_in6` that
        // librdmacm only reads.
        if unsafe { sys::rdma_bind_addr(p, a.as_mut_ptr()) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_bind_addr"));
        }
        Ok(())
    }

    pub(crate) fn cm_resolve_addr(
        &mut self,
        id: &HwCmId,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        let verb = Verb::RdmaResolveAddr;
        let p = self.cm_id(id, verb)?;
        let t = c_int::try_from(timeout_ms)
            .map_err(|_| Error::invalid(verb, "timeout_ms above INT_MAX"))?;
        let mut s = src.map(|a| SockAddrBuf::from_std(&a));
        let mut d = SockAddrBuf::from_std(&dst);
        let sp = s.as_mut().map_or(ptr::null_mut(), |s| s.as_mut_ptr());
        // SAFETY: live id; the addresses are valid (or NULL for `src`) and
        // only read; non-blocking: the result arrives as an event.
        if unsafe { sys::rdma_resolve_addr(p, sp, d.as_mut_ptr(), t) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_resolve_addr"));
        }
        Ok(())
    }

    pub(crate) fn cm_resolve_route(&mut self, id: &HwCmId, timeout_ms: u32) -> Result<()> {
        let verb = Verb::RdmaResolveRoute;
        let p = self.cm_bound_id(id, verb)?;
        let t = c_int::try_from(timeout_ms)
            .map_err(|_| Error::invalid(verb, "timeout_ms above INT_MAX"))?;
        // SAFETY: live id bound to a device (checked: C dereferences it).
        if unsafe { sys::rdma_resolve_route(p, t) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_resolve_route"));
        }
        Ok(())
    }

    pub(crate) fn cm_listen(&mut self, id: &HwCmId, backlog: i32) -> Result<()> {
        let verb = Verb::RdmaListen;
        let p = self.cm_id(id, verb)?;
        // SAFETY: live id.
        if unsafe { sys::rdma_listen(p, backlog) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_listen"));
        }
        Ok(())
    }

    pub(crate) fn cm_connect(
        &mut self,
        id: &HwCmId,
        param: &ConnParam,
        accept: bool,
    ) -> Result<()> {
        let (verb, name) = if accept {
            (Verb::RdmaAccept, "rdma_accept")
        } else {
            (Verb::RdmaConnect, "rdma_connect")
        };
        let p = self.cm_bound_id(id, verb)?;
        let mut c = conn_param_to_c(verb, param)?;
        // SAFETY: live id bound to a device (checked: C dereferences its
        // device); `c` is valid and its private data (borrowed from `param`)
        // outlives the call, which copies it into the kernel command.
        let rc = unsafe {
            if accept {
                sys::rdma_accept(p, &mut c)
            } else {
                sys::rdma_connect(p, &mut c)
            }
        };
        if rc != 0 {
            return Err(c_error(verb, last_errno(), name));
        }
        Ok(())
    }

    pub(crate) fn cm_reject(&mut self, id: &HwCmId, data: &[u8]) -> Result<()> {
        let verb = Verb::RdmaReject;
        let p = self.cm_id(id, verb)?;
        let len = private_len(verb, data)?;
        let ptr = if data.is_empty() {
            ptr::null()
        } else {
            data.as_ptr().cast()
        };
        // SAFETY: live id; `ptr` names `len` readable bytes (or is NULL).
        if unsafe { sys::rdma_reject(p, ptr, len) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_reject"));
        }
        Ok(())
    }

    pub(crate) fn cm_disconnect(&mut self, id: &HwCmId) -> Result<()> {
        let verb = Verb::RdmaDisconnect;
        let p = self.cm_id(id, verb)?;
        // SAFETY: live id (librdmacm checks the device itself here).
        if unsafe { sys::rdma_disconnect(p) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_disconnect"));
        }
        Ok(())
    }

    pub(crate) fn cm_get_event(&mut self, ch: &HwCmChannel) -> Result<Option<CmEvent<Self>>> {
        let verb = Verb::RdmaGetCmEvent;
        let c = ch.0.get(verb, self.id)?;
        let mut ev: *mut sys::rdma_cm_event = ptr::null_mut();
        // SAFETY: live, non-blocking channel; `ev` is a valid out-parameter.
        if unsafe { sys::rdma_get_cm_event(c, &mut ev) } != 0 {
            return match last_errno() {
                EAGAIN => Ok(None),
                e => Err(c_error(verb, e, "rdma_get_cm_event")),
            };
        }
        // SAFETY: on success `ev` points to an event librdmacm keeps until
        // `rdma_ack_cm_event`; its `id` (and `listen_id`, if set) are live
        // ids until then. Everything is copied out here.
        let (event, status, id_p, listen_p, is_ud) = unsafe {
            let e = &*ev;
            let ud = (*e.id).qp_type == sys::ibv_qp_type::IBV_QPT_UD;
            (e.event, e.status, e.id, e.listen_id, ud)
        };
        let (private_data, conn) = if event == MULTICAST_JOIN || event == MULTICAST_ERROR {
            (Vec::new(), ConnParam::default())
        } else if is_ud {
            // SAFETY: for UD ids librdmacm fills `param.ud`; its private data
            // points into the event (`private_data_len` bytes).
            let (data, qp_num) = unsafe {
                let u = &(*ev).param.ud;
                (copy_bytes(u.private_data, u.private_data_len), u.qp_num)
            };
            let conn = ConnParam {
                private_data: data.clone(),
                qp_num,
                ..ConnParam::default()
            };
            (data, conn)
        } else {
            // SAFETY: for connected ids librdmacm fills `param.conn`; its
            // private data points into the event (`private_data_len` bytes).
            let (data, c) = unsafe {
                let c = (*ev).param.conn;
                (copy_bytes(c.private_data, c.private_data_len), c)
            };
            let conn = ConnParam {
                private_data: data.clone(),
                responder_resources: c.responder_resources,
                initiator_depth: c.initiator_depth,
                flow_control: c.flow_control,
                retry_count: c.retry_count,
                rnr_retry_count: c.rnr_retry_count,
                srq: c.srq,
                qp_num: c.qp_num,
            };
            (data, conn)
        };
        let ack_now = |why: String| {
            // SAFETY: the event just fetched, acknowledged once.
            unsafe { sys::rdma_ack_cm_event(ev) };
            Error::new(verb, ErrorKind::NotFound, why)
        };
        let known = ch.0.ids.borrow().get(id_p as usize);
        let id = match known {
            Some(inner) => HwCmId(inner),
            None if event == CONNECT_REQUEST => Self::new_id_handle(&ch.0, id_p),
            None => {
                return Err(ack_now(format!(
                    "{} for an rdma_cm id this backend does not know (acknowledged and dropped)",
                    CmEventType::from_raw(event)
                )))
            }
        };
        let listen_id = if listen_p.is_null() {
            None
        } else {
            let l = ch.0.ids.borrow().get(listen_p as usize);
            match l {
                Some(l) => Some(HwCmId(l)),
                None => {
                    return Err(ack_now(
                        "CONNECT_REQUEST on a listening id this backend does not know".into(),
                    ))
                }
            }
        };
        let counted = listen_id.as_ref().unwrap_or(&id);
        counted.0.pending.borrow_mut().push(PendingEvent {
            raw: ev,
            event,
            id_addr: id_p as usize,
        });
        Ok(Some(CmEvent {
            event: CmEventType::from_raw(event),
            id,
            listen_id,
            status,
            private_data,
            conn,
            // The event's own address identifies it until it is acked.
            token: ev as usize as u64,
        }))
    }

    pub(crate) fn cm_ack_event(&mut self, event: CmEvent<Self>) -> Result<()> {
        let verb = Verb::RdmaAckCmEvent;
        let counted = event.listen_id.as_ref().unwrap_or(&event.id);
        if counted.0.channel.owner != self.id {
            return Err(foreign(verb, "rdma_cm id"));
        }
        let raw_type = event.event.to_raw();
        let id_addr = event.id.0.addr;
        let mut pending = counted.0.pending.borrow_mut();
        let Some(i) = pending.iter().position(|p| {
            p.raw as usize as u64 == event.token && p.event == raw_type && p.id_addr == id_addr
        }) else {
            return Err(Error::from_errno(
                verb,
                EINVAL,
                format!("no unacknowledged {} event for this id", event.event),
            ));
        };
        let p = pending.remove(i);
        // SAFETY: `p.raw` came from `rdma_get_cm_event` and is acknowledged
        // once (removed from the list just now).
        if unsafe { sys::rdma_ack_cm_event(p.raw) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_ack_cm_event"));
        }
        Ok(())
    }

    /// `rdma_create_qp` (`legacy_pd = Some(pd)`) or `rdma_create_qp_ex`.
    pub(crate) fn cm_create_qp(
        &mut self,
        id: &HwCmId,
        legacy_pd: Option<Option<&HwPd>>,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        let (verb, name) = match legacy_pd {
            Some(_) => (Verb::RdmaCreateQp, "rdma_create_qp"),
            None => (Verb::RdmaCreateQpEx, "rdma_create_qp_ex"),
        };
        let p = self.cm_bound_id(id, verb)?;
        if id.0.qp.borrow().is_some() {
            return Err(Error::invalid(verb, "an rdma_cm id has at most one QP"));
        }
        // SAFETY: live id; plain pointer field.
        let v = unsafe { (*p).verbs };
        let ctx = self.cm_context(v);
        // Every object named must live on the id's device context.
        let same = |c: &ContextInner, what: &str| -> Result<()> {
            if c.raw == v {
                Ok(())
            } else {
                Err(Error::invalid(
                    verb,
                    format!("the {what} belongs to another device context than the rdma_cm id's"),
                ))
            }
        };
        let pd_given = match legacy_pd {
            Some(pd) => pd,
            None if attr.comp_mask.contains(QpInitAttrMask::PD) => attr.pd,
            None => None,
        };
        if let Some(pd) = pd_given {
            same(&pd.0.obj.ctx, "PD")?;
        }
        for cq in attr.send_cq.iter().chain(attr.recv_cq.iter()) {
            same(&cq.0.obj.ctx, "CQ")?;
        }
        if let Some(s) = attr.srq {
            same(&s.0.obj.ctx, "SRQ")?;
        }
        let mut ex = self.qp_init_to_c(verb, attr)?;
        let rc = match legacy_pd {
            Some(pd) => {
                let pdp = match pd {
                    Some(pd) => pd.0.obj.get(verb)?,
                    None => ptr::null_mut(),
                };
                let mut init = sys::ibv_qp_init_attr {
                    qp_context: ex.qp_context,
                    send_cq: ex.send_cq,
                    recv_cq: ex.recv_cq,
                    srq: ex.srq,
                    cap: ex.cap,
                    qp_type: ex.qp_type,
                    sq_sig_all: ex.sq_sig_all,
                };
                // SAFETY: live bound id; every object in `init` is live and
                // of the id's context (checked); NULL PD = the default PD.
                let rc = unsafe { sys::rdma_create_qp(p, pdp, &mut init) };
                ex.cap = init.cap;
                rc
            }
            // SAFETY: as above, for the extended attribute block.
            None => unsafe { sys::rdma_create_qp_ex(p, &mut ex) },
        };
        if rc != 0 {
            return Err(c_error(verb, last_errno(), name));
        }
        attr.cap = cap_from_c(&ex.cap);
        // SAFETY: on success librdmacm set these fields of the live id.
        let (q, qpd, scq, rcq, sch, rch) = unsafe {
            let r = &*p;
            (
                r.qp,
                r.pd,
                r.send_cq,
                r.recv_cq,
                r.send_cq_channel,
                r.recv_cq_channel,
            )
        };
        let q = NonNull::new(q).ok_or_else(|| Error::invalid(verb, "librdmacm returned no QP"))?;
        let wrap_chan = |c: *mut sys::ibv_comp_channel| {
            NonNull::new(c).map(|c| {
                HwCompChannel(Arc::new(ChanInner {
                    obj: Owned::borrowed(c, &ctx.0),
                    nonblock: Cell::new(false),
                }))
            })
        };
        let wrap_cq = |c: *mut sys::ibv_cq, ch: &Option<HwCompChannel>| {
            NonNull::new(c).map(|c| {
                let cq = HwCq(Arc::new(CqInner {
                    obj: Owned::borrowed(c, &ctx.0),
                    _channel: ch.clone(),
                    cq_context: id.0.addr as u64,
                    ex: None,
                }));
                register_cq(&cq);
                cq
            })
        };
        let (auto_send_channel, auto_send_cq) = if attr.send_cq.is_none() {
            let ch = wrap_chan(sch);
            let cq = wrap_cq(scq, &ch);
            (ch, cq)
        } else {
            (None, None)
        };
        let (auto_recv_channel, auto_recv_cq) = if attr.recv_cq.is_none() {
            let ch = wrap_chan(rch);
            let cq = wrap_cq(rcq, &ch);
            (ch, cq)
        } else {
            (None, None)
        };
        let pd = match pd_given {
            Some(pd) => Some(pd.clone()),
            None => self.cm_default_pd(id, qpd, &ctx),
        };
        // SAFETY: `q` is the QP librdmacm just created.
        let qp_num = unsafe { (*q.as_ptr()).qp_num };
        let qp = HwQp(Arc::new(QpInner {
            obj: Owned::borrowed(q, &ctx.0),
            qp_num,
            qp_type: attr.qp_type,
            dc_type: None,
            _send_cq: attr.send_cq.cloned().or_else(|| auto_send_cq.clone()),
            _recv_cq: attr.recv_cq.cloned().or_else(|| auto_recv_cq.clone()),
            _srq: attr.srq.cloned(),
            _pd: pd,
            _xrcd: attr.xrcd.cloned(),
        }));
        register_qp(&qp);
        *id.0.qp.borrow_mut() = Some(CmQp {
            qp: qp.clone(),
            auto_send_cq,
            auto_recv_cq,
            auto_send_channel,
            auto_recv_channel,
        });
        Ok(qp)
    }

    pub(crate) fn cm_destroy_qp(&mut self, id: &HwCmId) -> Result<()> {
        let verb = Verb::RdmaDestroyQp;
        let p = self.cm_id(id, verb)?;
        let mut slot = id.0.qp.borrow_mut();
        let Some(q) = slot.as_ref() else {
            return Err(Error::invalid(verb, "the rdma_cm id has no QP"));
        };
        q.check_no_unacked(verb)?;
        // SAFETY: live id with a QP whose objects have no unacknowledged
        // events, so the destroys inside do not wait.
        unsafe { sys::rdma_destroy_qp(p) };
        if let Some(q) = slot.take() {
            q.invalidate();
        }
        Ok(())
    }
}

/// `conn_param_to_c`, for the tests in `hw.rs`.
#[cfg(test)]
pub(crate) fn tests_conn_param(p: &ConnParam) -> Result<()> {
    conn_param_to_c(Verb::RdmaConnect, p).map(|_| ())
}

#[cfg(test)]
impl HwCmId {
    /// A handle whose id is already destroyed, on a channel that never
    /// existed in C: exercises every "stale handle" path without a device.
    pub(crate) fn stale_for_tests(owner: u64) -> Self {
        let chan = Arc::new(CmChannelInner {
            raw: Cell::new(ptr::null_mut()),
            owner,
            ids: RefCell::default(),
            live_ids: Cell::new(1),
        });
        Self(Arc::new(CmIdInner {
            raw: Cell::new(ptr::null_mut()),
            addr: 0x10,
            pending: RefCell::default(),
            qp: RefCell::default(),
            pd: RefCell::default(),
            channel: chan,
        }))
    }
}

#[cfg(test)]
impl HwCmChannel {
    /// A destroyed channel handle (see [`HwCmId::stale_for_tests`]).
    pub(crate) fn stale_for_tests(owner: u64) -> Self {
        Self(Arc::new(CmChannelInner {
            raw: Cell::new(ptr::null_mut()),
            owner,
            ids: RefCell::default(),
            live_ids: Cell::new(0),
        }))
    }
}
