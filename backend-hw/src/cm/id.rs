//! Event channels and CM ids: creating and destroying them, the id's
//! device context and default PD as handles, and the connection verbs
//! (`rdma_bind_addr` through `rdma_disconnect`).

use core::cell::{Cell, RefCell};
use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr::{self, NonNull};
use std::ffi::CStr;
use std::net::SocketAddr;
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::errors::c_error;
use crate::ffi::posix::set_nonblocking;
use crate::ffi::verbs::last_errno;
use crate::handles::{ContextInner, HwContext, HwCq, HwPd, Owned, PdInner};
use crate::sockaddr::SockAddrBuf;

use super::*;

impl HwVerbs {
    pub(crate) fn cm_id(&self, id: &HwCmId, verb: Verb) -> Result<*mut sys::rdma_cm_id> {
        id.0.get(verb, self.id)
    }

    /// Like `cm_id`, and the id must be bound to a device (C dereferences it).
    pub(super) fn cm_bound_id(&self, id: &HwCmId, verb: Verb) -> Result<*mut sys::rdma_cm_id> {
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
    pub(super) fn cm_context(&self, v: *mut sys::ibv_context) -> HwContext {
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

    pub(super) fn new_id_handle(chan: &Arc<CmChannelInner>, p: *mut sys::rdma_cm_id) -> HwCmId {
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
    pub(super) fn cm_default_pd(
        &self,
        id: &HwCmId,
        pd: *mut sys::ibv_pd,
        ctx: &HwContext,
    ) -> Option<HwPd> {
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
}
