//! The handle types of the hardware backend and their inners: each inner owns
//! one C object (`Owned`) and holds its parents; the per-context registry of
//! live QPs, CQs and SRQs that events are answered from.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::{Cell, RefCell};
use core::ffi::c_int;
use core::fmt;
use core::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::*;

use crate::errors::{c_error, foreign, stale};
use crate::ffi::verbs as fv;
use crate::ffi::verbs::last_errno;
use crate::registry::{ack_type_for, ElementKind, Live, PtrRegistry};

/// MR buffers are aligned to the x86-64 / aarch64-4K page size.
pub(crate) const PAGE: usize = 4096;

// ---------------------------------------------------------------------------
// Owned C objects
// ---------------------------------------------------------------------------

/// A C object kind: its type, how to destroy it, and the verb that does.
pub(crate) trait CKind {
    type C;
    const DESTROY: Verb;
    const WHAT: &'static str;
    /// How async events name objects of this kind (`None`: they never do).
    const ELEMENT: Option<ElementKind> = None;
    /// # Safety
    /// `p` is a live object of this kind with no live dependants in C.
    unsafe fn destroy(p: *mut Self::C) -> c_int;
}

macro_rules! ckind {
    ($name:ident, $c:ty, $verb:ident, $what:literal, |$p:ident| $body:expr) => {
        ckind!($name, $c, $verb, $what, None, |$p| $body);
    };
    ($name:ident, $c:ty, $verb:ident, $what:literal, $el:expr, |$p:ident| $body:expr) => {
        pub(crate) struct $name;
        impl CKind for $name {
            type C = $c;
            const DESTROY: Verb = Verb::$verb;
            const WHAT: &'static str = $what;
            const ELEMENT: Option<ElementKind> = $el;
            unsafe fn destroy($p: *mut $c) -> c_int {
                // SAFETY: forwarded contract: `p` is live and has no dependants.
                unsafe { $body }
            }
        }
    };
}

ckind!(KPd, sys::ibv_pd, DeallocPd, "PD", |p| sys::ibv_dealloc_pd(
    p
));
ckind!(
    KChan,
    sys::ibv_comp_channel,
    DestroyCompChannel,
    "completion channel",
    |p| sys::ibv_destroy_comp_channel(p)
);
ckind!(
    KCq,
    sys::ibv_cq,
    DestroyCq,
    "CQ",
    Some(ElementKind::Cq),
    |p| sys::ibv_destroy_cq(p)
);
ckind!(KMr, sys::ibv_mr, DeregMr, "MR", |p| sys::ibv_dereg_mr(p));
ckind!(
    KSrq,
    sys::ibv_srq,
    DestroySrq,
    "SRQ",
    Some(ElementKind::Srq),
    |p| sys::ibv_destroy_srq(p)
);
ckind!(
    KQp,
    sys::ibv_qp,
    DestroyQp,
    "QP",
    Some(ElementKind::Qp),
    |p| sys::ibv_destroy_qp(p)
);
ckind!(KAh, sys::ibv_ah, DestroyAh, "AH", |p| sys::ibv_destroy_ah(
    p
));
ckind!(KXrcd, sys::ibv_xrcd, CloseXrcd, "XRCD", |p| {
    fv::ibv_close_xrcd(p)
});
ckind!(KMw, sys::ibv_mw, DeallocMw, "MW", |p| fv::ibv_dealloc_mw(p));
ckind!(KDm, sys::ibv_dm, FreeDm, "DM", |p| fv::ibv_free_dm(p));

/// One C object owned by a handle's inner: the pointer (null once
/// destroyed) and the context whose live-object count it holds.
///
/// Teardown policy: explicit destroy verbs report the C error and keep the
/// object; `Drop` (the last handle gone) destroys it and, if C refuses,
/// prints the error to stderr and leaks the object — it never panics, since
/// a panic in drop during unwinding aborts the process.
///
/// Events: libibverbs' destroy verbs wait (forever) until every async event
/// and completion event fetched for the object has been acknowledged. The
/// counts below make an explicit destroy with events outstanding an `EBUSY`
/// error instead of a hang, and `Drop` acknowledges them first.
///
/// A *borrowed* object belongs to librdmacm (the QP, CQs, completion
/// channels and default PD of an `rdma_cm_id`): we never destroy it, and
/// librdmacm's own teardown marks it stale through [`Owned::invalidate`].
pub(crate) struct Owned<K: CKind> {
    pub(crate) raw: Cell<*mut K::C>,
    pub(crate) ctx: Arc<ContextInner>,
    /// Owned by librdmacm, not by this handle.
    pub(crate) borrowed: bool,
    /// Async events fetched for this object and not acknowledged yet.
    pub(crate) async_unacked: Cell<u32>,
    /// Completion events fetched for this CQ and not acknowledged yet.
    pub(crate) comp_unacked: Cell<u32>,
}

impl<K: CKind> Owned<K> {
    pub(crate) fn new(p: NonNull<K::C>, ctx: &Arc<ContextInner>) -> Self {
        ctx.live.set(ctx.live.get() + 1);
        Self {
            raw: Cell::new(p.as_ptr()),
            ctx: Arc::clone(ctx),
            borrowed: false,
            async_unacked: Cell::new(0),
            comp_unacked: Cell::new(0),
        }
    }

    /// Wraps an object librdmacm owns (see the type docs).
    pub(crate) fn borrowed(p: NonNull<K::C>, ctx: &Arc<ContextInner>) -> Self {
        Self {
            raw: Cell::new(p.as_ptr()),
            ctx: Arc::clone(ctx),
            borrowed: true,
            async_unacked: Cell::new(0),
            comp_unacked: Cell::new(0),
        }
    }

    /// The live pointer, or a "stale handle" error for `verb`.
    pub(crate) fn get(&self, verb: Verb) -> Result<*mut K::C> {
        let p = self.raw.get();
        if p.is_null() {
            Err(stale(verb, K::WHAT))
        } else {
            Ok(p)
        }
    }

    /// Marks a borrowed object destroyed (librdmacm freed it).
    pub(crate) fn invalidate(&self) {
        self.raw.set(ptr::null_mut());
    }

    /// `EBUSY` while events of this object are unacknowledged.
    pub(crate) fn check_no_unacked(&self, verb: Verb) -> Result<()> {
        let (a, c) = (self.async_unacked.get(), self.comp_unacked.get());
        if a == 0 && c == 0 {
            return Ok(());
        }
        Err(Error::new(
            verb,
            ErrorKind::Busy,
            format!(
                "the {} has {a} async and {c} completion event(s) not acknowledged; \
                 {} would wait for them forever (ack_async_event / ack_cq_events first)",
                K::WHAT,
                K::DESTROY.c_name()
            ),
        ))
    }

    /// Acknowledges every event still counted against the object (before it
    /// is destroyed without the user's help: `Drop`, `rdma_destroy_qp`).
    pub(crate) fn ack_outstanding(&self) {
        let p = self.raw.get();
        if p.is_null() {
            return;
        }
        if let Some(kind) = K::ELEMENT {
            for _ in 0..self.async_unacked.get() {
                let mut ev = fv::ibv_async_event_raw {
                    element: sys::ibv_async_event_element_t { qp: p.cast() },
                    event_type: ack_type_for(kind),
                };
                // SAFETY: (1) the element is this live object (all union
                // members are the same pointer; the event type selects this
                // kind's counter); (2) `async_unacked` counts events fetched
                // for it and not acknowledged, so we never over-acknowledge.
                unsafe { fv::ibv_ack_async_event(&mut ev) };
            }
            if kind == ElementKind::Cq && self.comp_unacked.get() > 0 {
                // SAFETY: `ELEMENT == Cq` only for `KCq`, whose `C` is
                // `ibv_cq`: `p` is a live CQ; the count is exactly the
                // completion events fetched and not acknowledged.
                unsafe { sys::ibv_ack_cq_events(p.cast(), self.comp_unacked.get()) };
            }
        }
        self.async_unacked.set(0);
        self.comp_unacked.set(0);
    }

    /// Destroys the object now; on failure nothing changes.
    pub(crate) fn destroy(&self) -> Result<()> {
        let p = self.get(K::DESTROY)?;
        if self.borrowed {
            return Err(Error::new(
                K::DESTROY,
                ErrorKind::Busy,
                format!(
                    "this {} belongs to an rdma_cm id: rdma_destroy_qp (or dropping the id) destroys it",
                    K::WHAT
                ),
            ));
        }
        self.check_no_unacked(K::DESTROY)?;
        // SAFETY: `p` is live (non-null and not destroyed: `raw` is nulled
        // only below, after a successful destroy). C checks dependants itself
        // and answers EBUSY; the kernel refuses to free objects still in use.
        let rc = unsafe { K::destroy(p) };
        if rc != 0 {
            return Err(c_error(K::DESTROY, rc, K::DESTROY.c_name()));
        }
        self.raw.set(ptr::null_mut());
        self.ctx.live.set(self.ctx.live.get() - 1);
        Ok(())
    }
}

impl<K: CKind> Drop for Owned<K> {
    fn drop(&mut self) {
        if !self.raw.get().is_null() && !self.borrowed {
            self.ack_outstanding();
            if let Err(e) = self.destroy() {
                eprintln!(
                    "backend-hw: leaking a {} whose last handle was dropped: {e}",
                    K::WHAT
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Handles (R11: each wraps an Arc<Inner>; each inner keeps its parents alive)
// Drop order (R12): in every inner, the owned C object is the FIRST field, so
// it is destroyed before the parent Arcs (declared after it) are released;
// a parent therefore always outlives its children in C.
// ---------------------------------------------------------------------------

/// The QPs, CQs and SRQs of one context by C address, so that events name
/// the handles the user holds (see `crate::registry`).
#[derive(Default)]
pub(crate) struct Objects {
    pub(crate) qps: PtrRegistry<QpInner>,
    pub(crate) cqs: PtrRegistry<CqInner>,
    pub(crate) srqs: PtrRegistry<SrqInner>,
}

pub(crate) struct ContextInner {
    pub(crate) raw: *mut sys::ibv_context,
    /// The `HwVerbs` instance that opened it.
    pub(crate) owner: u64,
    pub(crate) process: ProcessId,
    pub(crate) name: String,
    /// Objects created on this context and not yet destroyed.
    pub(crate) live: Cell<usize>,
    pub(crate) closed: Cell<bool>,
    /// Opened by librdmacm (the `verbs` of an `rdma_cm_id`): librdmacm
    /// closes it, never us.
    pub(crate) borrowed: bool,
    /// `async_fd` has been made non-blocking.
    pub(crate) async_nonblock: Cell<bool>,
    /// Objects of this context by address, for events.
    pub(crate) objects: RefCell<Objects>,
}

impl ContextInner {
    pub(crate) fn new(
        raw: *mut sys::ibv_context,
        owner: u64,
        process: ProcessId,
        name: String,
        borrowed: bool,
    ) -> Self {
        Self {
            raw,
            owner,
            process,
            name,
            live: Cell::new(0),
            closed: Cell::new(false),
            borrowed,
            async_nonblock: Cell::new(false),
            objects: RefCell::default(),
        }
    }

    pub(crate) fn get(&self, verb: Verb, owner: u64) -> Result<*mut sys::ibv_context> {
        if self.owner != owner {
            return Err(foreign(verb, "device context"));
        }
        if self.closed.get() {
            return Err(stale(verb, "device context"));
        }
        Ok(self.raw)
    }

    pub(crate) fn close(&self) -> Result<()> {
        if self.closed.get() {
            return Err(stale(Verb::CloseDevice, "device context"));
        }
        if self.borrowed {
            return Err(Error::new(
                Verb::CloseDevice,
                ErrorKind::Busy,
                "this device context was opened by librdmacm (an rdma_cm id's `verbs`); librdmacm closes it",
            ));
        }
        // SAFETY: `raw` came from `ibv_open_device`, is not closed yet, and no
        // object created on it is alive (`live == 0`, checked by callers).
        let rc = unsafe { sys::ibv_close_device(self.raw) };
        if rc != 0 {
            return Err(c_error(Verb::CloseDevice, last_errno(), "ibv_close_device"));
        }
        self.closed.set(true);
        Ok(())
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // Every child holds an Arc to this inner, so none is alive here.
        if !self.closed.get() && !self.borrowed {
            if let Err(e) = self.close() {
                eprintln!("backend-hw: leaking device context {}: {e}", self.name);
            }
        }
    }
}

macro_rules! handle {
    ($(#[$m:meta])* $name:ident, $inner:ident) => {
        $(#[$m])*
        #[derive(Clone)]
        pub struct $name(pub(crate) Arc<$inner>);
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:p})"), Arc::as_ptr(&self.0))
            }
        }
    };
}

handle!(
    /// An open device (`struct ibv_context`); closes it when the last handle
    /// and the last object created on it are gone.
    HwContext, ContextInner
);

pub(crate) struct PdInner {
    pub(crate) obj: Owned<KPd>,
}
handle!(
    /// A protection domain.
    HwPd, PdInner
);

pub(crate) struct ChanInner {
    pub(crate) obj: Owned<KChan>,
    /// The channel's fd has been made non-blocking.
    pub(crate) nonblock: Cell<bool>,
}
handle!(
    /// A completion channel.
    HwCompChannel, ChanInner
);

pub(crate) struct CqInner {
    pub(crate) obj: Owned<KCq>,
    /// Released after the CQ is destroyed (a channel must outlive its CQs).
    pub(crate) _channel: Option<HwCompChannel>,
    pub(crate) cq_context: u64,
    /// `Some(wc_flags)` for a CQ made by `ibv_create_cq_ex`.
    pub(crate) ex: Option<WcExFlags>,
}
handle!(
    /// A completion queue; keeps its completion channel alive.
    HwCq, CqInner
);

/// A zeroed, page-aligned heap buffer.
pub(crate) struct PageBuf {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) layout: std::alloc::Layout,
    pub(crate) len: usize,
}

impl PageBuf {
    pub(crate) fn new(len: usize) -> Option<Self> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), PAGE).ok()?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| Self { ptr, layout, len })
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated by `alloc_zeroed` with `layout`.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

pub(crate) struct MrInner {
    /// Deregistered first (R12: the registration dies before the buffer)...
    pub(crate) obj: Owned<KMr>,
    /// ...then the bytes are freed...
    pub(crate) buf: PageBuf,
    /// ...then the PD is released (`ibv_rereg_mr` may change it)...
    pub(crate) pd: RefCell<HwPd>,
    pub(crate) access: Cell<AccessFlags>,
    /// ...and, for an MR on device memory (`ibv_reg_dm_mr`, whose `buf` is
    /// empty), the DM, which cannot be freed before the MR is deregistered.
    pub(crate) dm: Option<HwDm>,
}
handle!(
    /// A memory region that owns its page-aligned buffer; keeps its PD alive.
    HwMr, MrInner
);

pub(crate) struct SrqInner {
    pub(crate) obj: Owned<KSrq>,
    pub(crate) _pd: Option<HwPd>,
    pub(crate) _cq: Option<HwCq>,
    pub(crate) _xrcd: Option<HwXrcd>,
}
handle!(
    /// A shared receive queue; keeps its PD, CQ and XRCD alive.
    HwSrq, SrqInner
);

pub(crate) struct QpInner {
    pub(crate) obj: Owned<KQp>,
    pub(crate) qp_num: u32,
    pub(crate) qp_type: QpType,
    pub(crate) dc_type: Option<DcType>,
    pub(crate) _send_cq: Option<HwCq>,
    pub(crate) _recv_cq: Option<HwCq>,
    pub(crate) _srq: Option<HwSrq>,
    pub(crate) _pd: Option<HwPd>,
    pub(crate) _xrcd: Option<HwXrcd>,
}

impl Live for QpInner {
    fn is_live_at(&self, addr: usize) -> bool {
        addr != 0 && self.obj.raw.get() as usize == addr
    }
}
impl Live for CqInner {
    fn is_live_at(&self, addr: usize) -> bool {
        addr != 0 && self.obj.raw.get() as usize == addr
    }
}
impl Live for SrqInner {
    fn is_live_at(&self, addr: usize) -> bool {
        addr != 0 && self.obj.raw.get() as usize == addr
    }
}
handle!(
    /// A queue pair (also DCI/DCT and opened XRC_TGT QPs); keeps its PD,
    /// CQs, SRQ and XRCD alive.
    HwQp, QpInner
);

pub(crate) struct AhInner {
    pub(crate) obj: Owned<KAh>,
    pub(crate) _pd: HwPd,
}
handle!(
    /// An address handle; keeps its PD alive.
    HwAh, AhInner
);

pub(crate) struct MwInner {
    /// Deallocated first, then the PD is released.
    pub(crate) obj: Owned<KMw>,
    pub(crate) _pd: HwPd,
}
handle!(
    /// A memory window; keeps its PD alive.
    HwMw, MwInner
);

pub(crate) struct DmInner {
    /// Freed when the last handle (and the last MR on it) is gone.
    pub(crate) obj: Owned<KDm>,
}
handle!(
    /// Device memory (`struct ibv_dm`); MRs registered on it keep it alive.
    HwDm, DmInner
);

pub(crate) struct XrcdInner {
    pub(crate) obj: Owned<KXrcd>,
    pub(crate) id: u64,
}
handle!(
    /// An XRC domain (modern `ibv_xrcd` and legacy `ibv_xrc_domain`).
    HwXrcd, XrcdInner
);

/// Records a new QP in its context's registry (for events).
pub(crate) fn register_qp(qp: &HwQp) {
    let addr = qp.0.obj.raw.get() as usize;
    qp.0.obj.ctx.objects.borrow_mut().qps.insert(addr, &qp.0);
}

/// Records a new CQ in its context's registry (for events).
pub(crate) fn register_cq(cq: &HwCq) {
    let addr = cq.0.obj.raw.get() as usize;
    cq.0.obj.ctx.objects.borrow_mut().cqs.insert(addr, &cq.0);
}

/// Records a new SRQ in its context's registry (for events).
pub(crate) fn register_srq(srq: &HwSrq) {
    let addr = srq.0.obj.raw.get() as usize;
    srq.0.obj.ctx.objects.borrow_mut().srqs.insert(addr, &srq.0);
}

/// Makes a completion channel's fd non-blocking (once).
pub(crate) fn ensure_chan_nonblocking(ch: &HwCompChannel, verb: Verb) -> Result<()> {
    if ch.0.nonblock.get() {
        return Ok(());
    }
    let p = ch.0.obj.get(verb)?;
    // SAFETY: `p` is a live completion channel; `fd` is a plain field.
    let fd = unsafe { (*p).fd };
    crate::ffi::posix::set_nonblocking(fd)
        .map_err(|e| c_error(verb, e, "fcntl(channel->fd, F_SETFL, O_NONBLOCK)"))?;
    ch.0.nonblock.set(true);
    Ok(())
}
