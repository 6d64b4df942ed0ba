//! [`HwVerbs`]: the [`Verbs`] trait over libibverbs.

// Handles wrap `Arc`s (style rule R11) although their inners hold `Cell`s
// and raw pointers and so are `!Send`/`!Sync`: the backend is driven from one
// thread through `&mut self`. Making them `Send` needs a justified
// `unsafe impl` per inner and a lock around the pointer cell; not done yet.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::{Cell, RefCell};
use core::ffi::c_int;
use core::fmt;
use core::mem::size_of;
use core::ptr::{self, NonNull};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::{EINVAL, ENOMEM};
use verbs_api::*;

use crate::cm::{HwCmChannel, HwCmId};
use crate::errors::{c_error, foreign, no_device_error, stale};
use crate::ffi::verbs as fv;
use crate::ffi::verbs::last_errno;
use crate::registry::{ack_type_for, ElementKind, Live, PtrRegistry};
use crate::xrc_legacy::LegacyXrcRegistry;

/// MR buffers are aligned to the x86-64 / aarch64-4K page size.
const PAGE: usize = 4096;

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);
static NEXT_XRCD_ID: AtomicU64 = AtomicU64::new(1);

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

    fn close(&self) -> Result<()> {
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
struct PageBuf {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
    len: usize,
}

impl PageBuf {
    fn new(len: usize) -> Option<Self> {
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
    buf: PageBuf,
    /// ...then the PD is released (`ibv_rereg_mr` may change it).
    pub(crate) pd: RefCell<HwPd>,
    pub(crate) access: Cell<AccessFlags>,
}
handle!(
    /// A memory region that owns its page-aligned buffer; keeps its PD alive.
    HwMr, MrInner
);

pub(crate) struct SrqInner {
    pub(crate) obj: Owned<KSrq>,
    _pd: Option<HwPd>,
    _cq: Option<HwCq>,
    _xrcd: Option<HwXrcd>,
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
    _pd: HwPd,
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

pub(crate) struct XrcdInner {
    obj: Owned<KXrcd>,
    id: u64,
}
handle!(
    /// An XRC domain (modern `ibv_xrcd` and legacy `ibv_xrc_domain`).
    HwXrcd, XrcdInner
);

// ---------------------------------------------------------------------------
// HwVerbs
// ---------------------------------------------------------------------------

/// The hardware backend: libibverbs (and libmlx5) through rdma-sys and the
/// hand-written `ffi` layer.
///
/// Handles are `Arc`s; each keeps the objects it depends on alive, so C never
/// sees a child outlive its parent. Handles from one `HwVerbs` are refused by
/// another (so two instances cannot hand out aliasing MR slices).
pub struct HwVerbs {
    pub(crate) id: u64,
    /// Legacy XRC receive-QP registrations, kept in the library.
    legacy_xrc: RefCell<LegacyXrcRegistry<HwQp>>,
    /// The device contexts librdmacm opened, by address, as handles
    /// (`rdma_id_info`'s `verbs`).
    pub(crate) cm_contexts: RefCell<std::collections::BTreeMap<usize, HwContext>>,
    /// The device `VERBS_TEST_DEVICE` (or [`HwVerbs::with_device`]) named:
    /// it is index 0 of this backend, the others follow in
    /// `ibv_get_device_list` order.
    preferred: Option<String>,
}

/// The order a backend sees devices in: `preferred` first, the rest in
/// list order; `Err` (naming the devices there are) when `preferred` is
/// not among `names`.
pub(crate) fn device_order(names: &[String], preferred: Option<&str>) -> Result<Vec<usize>> {
    let Some(want) = preferred else {
        return Ok((0..names.len()).collect());
    };
    let Some(first) = names.iter().position(|n| n == want) else {
        return Err(Error::new(
            Verb::GetDeviceList,
            ErrorKind::NoDevice,
            format!("VERBS_TEST_DEVICE={want} names no device here; the devices are {names:?}"),
        ));
    };
    Ok(std::iter::once(first)
        .chain((0..names.len()).filter(|&i| i != first))
        .collect())
}

impl fmt::Debug for HwVerbs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwVerbs")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Calls `ibv_get_device_list`, runs `f` on the array, frees it.
fn with_device_list<R>(f: impl FnOnce(&[*mut sys::ibv_device]) -> R) -> Result<R> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-parameter.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(no_device_error(last_errno()));
    }
    let len = usize::try_from(n).unwrap_or(0);
    // SAFETY: on success the list holds `n` device pointers (NULL-terminated
    // after them) and stays valid until `ibv_free_device_list`.
    let devices = unsafe { core::slice::from_raw_parts(list, len) };
    let r = f(devices);
    // SAFETY: `list` came from `ibv_get_device_list` and is freed once; no
    // borrow of it (`devices`) survives this point.
    unsafe { sys::ibv_free_device_list(list) };
    Ok(r)
}

fn device_info(dev: *mut sys::ibv_device) -> DeviceInfo {
    // SAFETY: `dev` is an entry of a live device list; the name is a
    // NUL-terminated string inside the device struct.
    let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above; returns the GUID in network order.
    let guid = u64::from_be(unsafe { sys::ibv_get_device_guid(dev) });
    DeviceInfo { name, guid }
}

fn c_to_string(s: &[core::ffi::c_char]) -> String {
    let bytes: Vec<u8> = s
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn u(v: c_int) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

pub(crate) fn to_gid(g: &sys::ibv_gid) -> Gid {
    // SAFETY: both union members are plain 16-byte data; `raw` covers all.
    Gid(unsafe { g.raw })
}

fn from_gid(g: &Gid) -> sys::ibv_gid {
    sys::ibv_gid { raw: g.0 }
}

fn ah_to_c(a: &AhAttr) -> sys::ibv_ah_attr {
    sys::ibv_ah_attr {
        grh: sys::ibv_global_route {
            dgid: from_gid(&a.grh.dgid),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
    }
}

fn ah_from_c(a: &sys::ibv_ah_attr) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: to_gid(&a.grh.dgid),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.is_global != 0,
        port_num: a.port_num,
    }
}

fn cap_to_c(c: &QpCap) -> sys::ibv_qp_cap {
    sys::ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

pub(crate) fn cap_from_c(c: &sys::ibv_qp_cap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn qp_attr_to_c(a: &QpAttr) -> sys::ibv_qp_attr {
    sys::ibv_qp_attr {
        qp_state: a.qp_state.to_raw(),
        cur_qp_state: a.cur_qp_state.to_raw(),
        path_mtu: a.path_mtu.to_raw(),
        path_mig_state: a.path_mig_state.to_raw(),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags.bits(),
        cap: cap_to_c(&a.cap),
        ah_attr: ah_to_c(&a.ah_attr),
        alt_ah_attr: ah_to_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

fn qp_attr_from_c(a: &sys::ibv_qp_attr) -> QpAttr {
    QpAttr {
        qp_state: QpState::from_raw(a.qp_state),
        cur_qp_state: QpState::from_raw(a.cur_qp_state),
        path_mtu: Mtu::from_raw(a.path_mtu),
        path_mig_state: PathMigState::from_raw(a.path_mig_state),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags(a.qp_access_flags),
        cap: cap_from_c(&a.cap),
        ah_attr: ah_from_c(&a.ah_attr),
        alt_ah_attr: ah_from_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

/// C structs for which the all-zero bit pattern is a valid value: each is
/// made only of integers, raw pointers, `Option<fn>`s, byte arrays and
/// unions of those.
pub(crate) trait ZeroValid {}
impl ZeroValid for sys::ibv_qp_attr {}
impl ZeroValid for sys::ibv_qp_init_attr {}
impl ZeroValid for sys::ibv_qp_init_attr_ex {}
impl ZeroValid for sys::ibv_wc {}
impl ZeroValid for sys::ibv_send_wr {}
impl ZeroValid for sys::ibv_device_attr {}
impl ZeroValid for sys::ibv_port_attr {}
impl ZeroValid for sys::ibv_srq_attr {}
impl ZeroValid for sys::ibv_srq_init_attr {}
impl ZeroValid for sys::ibv_srq_init_attr_ex {}
impl ZeroValid for sys::ibv_qp_open_attr {}
impl ZeroValid for sys::ibv_xrcd_init_attr {}
impl ZeroValid for sys::rdma_conn_param {}
impl ZeroValid for sys::ibv_device_attr_ex {}
impl ZeroValid for sys::ibv_cq_init_attr_ex {}
impl ZeroValid for sys::ibv_gid_entry {}
impl ZeroValid for sys::ibv_ece {}
impl ZeroValid for sys::ibv_poll_cq_attr {}

/// `struct ibv_device_attr` as the API's [`DeviceAttr`].
pub(crate) fn device_attr_from_c(a: &sys::ibv_device_attr) -> DeviceAttr {
    DeviceAttr {
        fw_ver: c_to_string(&a.fw_ver),
        node_guid: u64::from_be(a.node_guid),
        sys_image_guid: u64::from_be(a.sys_image_guid),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: u(a.max_qp),
        max_qp_wr: u(a.max_qp_wr),
        device_cap_flags: DeviceCapFlags(u64::from(a.device_cap_flags)),
        max_sge: u(a.max_sge),
        max_sge_rd: u(a.max_sge_rd),
        max_cq: u(a.max_cq),
        max_cqe: u(a.max_cqe),
        max_mr: u(a.max_mr),
        max_pd: u(a.max_pd),
        max_qp_rd_atom: u(a.max_qp_rd_atom),
        max_ee_rd_atom: u(a.max_ee_rd_atom),
        max_res_rd_atom: u(a.max_res_rd_atom),
        max_qp_init_rd_atom: u(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: u(a.max_ee_init_rd_atom),
        atomic_cap: AtomicCap::from_raw(a.atomic_cap),
        max_ee: u(a.max_ee),
        max_rdd: u(a.max_rdd),
        max_mw: u(a.max_mw),
        max_raw_ipv6_qp: u(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: u(a.max_raw_ethy_qp),
        max_mcast_grp: u(a.max_mcast_grp),
        max_mcast_qp_attach: u(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: u(a.max_total_mcast_qp_attach),
        max_ah: u(a.max_ah),
        max_fmr: u(a.max_fmr),
        max_map_per_fmr: u(a.max_map_per_fmr),
        max_srq: u(a.max_srq),
        max_srq_wr: u(a.max_srq_wr),
        max_srq_sge: u(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    }
}

/// A zero-initialised C struct.
pub(crate) fn zeroed<T: ZeroValid>() -> T {
    // SAFETY: `ZeroValid` is implemented only for types whose all-zero bit
    // pattern is a valid value (see the trait).
    unsafe { core::mem::MaybeUninit::<T>::zeroed().assume_init() }
}

impl HwVerbs {
    /// Opens the hardware backend, checking that the machine has at least
    /// one RDMA device.
    ///
    /// # Errors
    /// [`ErrorKind::NoDevice`] naming the cause: on a machine without the
    /// kernel RDMA subsystem `ibv_get_device_list` fails with `ENOSYS`; on
    /// one without a device it returns an empty list.
    pub fn new() -> Result<Self> {
        let hw = Self::unprobed();
        let n = with_device_list(|d| d.len())?;
        if n == 0 {
            return Err(no_device_error(0));
        }
        Ok(hw)
    }

    /// [`HwVerbs::new`] with the device `name` (as `ibv_devices` lists it)
    /// at index 0: `open_device(0)` opens it, the other devices follow.
    ///
    /// # Errors
    /// As [`HwVerbs::new`]; [`ErrorKind::NoDevice`] listing the devices
    /// when none is called `name`.
    pub fn with_device(name: &str) -> Result<Self> {
        let mut hw = Self::new()?;
        let names = with_device_list(|d| {
            d.iter()
                .map(|&dev| device_info(dev).name)
                .collect::<Vec<_>>()
        })?;
        device_order(&names, Some(name))?;
        hw.preferred = Some(name.to_owned());
        Ok(hw)
    }

    /// The backend `VERBS_TEST_DEVICE` asks for: [`HwVerbs::with_device`]
    /// of `NAME` when it is set (`NAME` or `NAME:1`; only port 1 is used by
    /// the corpus and the workloads, so another port is refused), else
    /// [`HwVerbs::new`].
    ///
    /// # Errors
    /// As those; `EINVAL` for a port other than 1.
    pub fn from_env() -> Result<Self> {
        match std::env::var("VERBS_TEST_DEVICE") {
            Ok(v) if !v.is_empty() => {
                let (name, port) = match v.split_once(':') {
                    Some((n, p)) => (n, Some(p)),
                    None => (v.as_str(), None),
                };
                if let Some(p) = port {
                    if p != "1" {
                        return Err(Error::new(
                            Verb::OpenDevice,
                            ErrorKind::InvalidArgument,
                            format!("VERBS_TEST_DEVICE={v}: port {p}; the corpus and the workloads use port 1 (give NAME or NAME:1)"),
                        ));
                    }
                }
                Self::with_device(name)
            }
            _ => Self::new(),
        }
    }

    /// A backend that has not looked for devices yet (every verb then
    /// reports the missing device itself).
    pub fn unprobed() -> Self {
        Self {
            id: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            legacy_xrc: RefCell::default(),
            cm_contexts: RefCell::default(),
            preferred: None,
        }
    }

    /// This backend's device order over the live list (`preferred` first).
    fn order(&self, devices: &[*mut sys::ibv_device]) -> Result<Vec<usize>> {
        let names: Vec<String> = if self.preferred.is_some() {
            devices.iter().map(|&d| device_info(d).name).collect()
        } else {
            vec![String::new(); devices.len()]
        };
        device_order(&names, self.preferred.as_deref())
    }

    pub(crate) fn ctx<'a>(
        &self,
        c: &'a HwContext,
        verb: Verb,
    ) -> Result<(*mut sys::ibv_context, &'a Arc<ContextInner>)> {
        Ok((c.0.get(verb, self.id)?, &c.0))
    }

    pub(crate) fn check_owner(&self, ctx: &ContextInner, verb: Verb, what: &str) -> Result<()> {
        if ctx.owner == self.id {
            Ok(())
        } else {
            Err(foreign(verb, what))
        }
    }

    fn make_qp(
        &self,
        verb: Verb,
        p: NonNull<sys::ibv_qp>,
        ctx: &Arc<ContextInner>,
        attr: &QpInitAttrEx<'_, Self>,
        dc_type: Option<DcType>,
    ) -> HwQp {
        // SAFETY: `p` is a QP just returned by the library.
        let qp_num = unsafe { (*p.as_ptr()).qp_num };
        let _ = verb;
        let qp = HwQp(Arc::new(QpInner {
            obj: Owned::new(p, ctx),
            qp_num,
            qp_type: attr.qp_type,
            dc_type,
            _send_cq: attr.send_cq.cloned(),
            _recv_cq: attr.recv_cq.cloned(),
            _srq: attr.srq.cloned(),
            _pd: attr.pd.cloned(),
            _xrcd: attr.xrcd.cloned(),
        }));
        register_qp(&qp);
        qp
    }

    /// Builds the C `ibv_qp_init_attr_ex`, checking every handle.
    pub(crate) fn qp_init_to_c(
        &self,
        verb: Verb,
        attr: &QpInitAttrEx<'_, Self>,
    ) -> Result<sys::ibv_qp_init_attr_ex> {
        let mut c: sys::ibv_qp_init_attr_ex = zeroed();
        c.qp_context = attr.qp_context as usize as *mut _;
        if let Some(cq) = attr.send_cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            c.send_cq = cq.0.obj.get(verb)?;
        }
        if let Some(cq) = attr.recv_cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            c.recv_cq = cq.0.obj.get(verb)?;
        }
        if let Some(srq) = attr.srq {
            self.check_owner(&srq.0.obj.ctx, verb, "SRQ")?;
            c.srq = srq.0.obj.get(verb)?;
        }
        if let Some(pd) = attr.pd {
            self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
            c.pd = pd.0.obj.get(verb)?;
        }
        if let Some(x) = attr.xrcd {
            self.check_owner(&x.0.obj.ctx, verb, "XRCD")?;
            c.xrcd = x.0.obj.get(verb)?;
        }
        c.cap = cap_to_c(&attr.cap);
        c.qp_type = attr.qp_type.to_raw();
        c.sq_sig_all = c_int::from(attr.sq_sig_all);
        c.comp_mask = attr.comp_mask.bits();
        c.create_flags = attr.create_flags.bits();
        c.max_tso_header = attr.max_tso_header;
        c.source_qpn = attr.source_qpn;
        c.send_ops_flags = attr.send_ops_flags.bits();
        Ok(c)
    }

    pub(crate) fn qp_ptr(&self, qp: &HwQp, verb: Verb) -> Result<*mut sys::ibv_qp> {
        self.check_owner(&qp.0.obj.ctx, verb, "QP")?;
        qp.0.obj.get(verb)
    }

    /// Turns an `EINVAL` from `ibv_modify_qp` into the diagnosed kind.
    fn diagnose_einval(
        &self,
        qp: &HwQp,
        p: *mut sys::ibv_qp,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Error {
        let mut cur: sys::ibv_qp_attr = zeroed();
        let mut init: sys::ibv_qp_init_attr = zeroed();
        // SAFETY: `p` is a live QP; both out-parameters are valid for writes.
        let rc =
            unsafe { sys::ibv_query_qp(p, &mut cur, QpAttrMask::STATE.bits() as c_int, &mut init) };
        let class = QpClass::from_qp_type(qp.0.qp_type, qp.0.dc_type);
        let flavor = if qp.0.obj.ctx.name.starts_with("mlx5") {
            TableFlavor::Mlx5
        } else {
            TableFlavor::Kernel
        };
        match (rc, class) {
            (0, Some(class)) => {
                let state = QpState::from_raw(cur.qp_state);
                let msg =
                    diagnose_modify(class, flavor, state, mask, attr.qp_state, attr.cur_qp_state);
                match check_modify(class, flavor, state, mask, attr.qp_state, attr.cur_qp_state) {
                    Err(kind) => Error::new(Verb::ModifyQp, kind, msg).with_errno(EINVAL),
                    Ok(_) => Error::invalid(
                        Verb::ModifyQp,
                        format!("ibv_modify_qp failed: EINVAL: transition and mask are legal, so an attribute value is out of range for the device ({msg})"),
                    ),
                }
            }
            _ => c_error(Verb::ModifyQp, EINVAL, "ibv_modify_qp"),
        }
    }

    /// One `SendWr` as a C `ibv_send_wr` (unlinked) and its SGE array.
    fn send_wr_to_c(&self, w: &SendWr<'_, Self>) -> Result<(sys::ibv_send_wr, Vec<sys::ibv_sge>)> {
        let verb = Verb::PostSend;
        if w.dc.is_some() {
            return Err(Error::invalid(
                verb,
                "DC addressing (dc: Some) on a QP that is not a DCI",
            ));
        }
        if w.opcode == WrOpcode::BindMw {
            // C would hand the provider a NULL `wr.bind_mw.mw`.
            return Err(Error::invalid(
                verb,
                "BIND_MW needs wr.bind_mw, which SendWr does not carry: use bind_mw (type 1) or post_wr with WrOp::BindMw (type 2)",
            ));
        }
        if w.opcode == WrOpcode::Flush {
            // `struct ibv_send_wr` has no place for the flush type and level:
            // libibverbs only issues FLUSH through ibv_wr_flush.
            return Err(Error::from_errno(
                verb,
                errno::EOPNOTSUPP,
                "IBV_WR_FLUSH cannot be expressed in ibv_send_wr (libibverbs offers it only through ibv_wr_flush)",
            ));
        }
        let mut c: sys::ibv_send_wr = zeroed();
        c.wr_id = w.wr_id;
        c.opcode = w.opcode.to_raw();
        c.send_flags = w.send_flags.bits();
        c.imm_data_invalidated_rkey_union.imm_data = if w.opcode == WrOpcode::SendWithInv {
            w.imm_data
        } else {
            w.imm_data.to_be()
        };
        match w.opcode {
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                c.wr.atomic = sys::atomic_t {
                    remote_addr: w.atomic.remote_addr,
                    compare_add: w.atomic.compare_add,
                    swap: w.atomic.swap,
                    rkey: w.atomic.rkey,
                };
            }
            _ => {
                c.wr.rdma = sys::rdma_t {
                    remote_addr: w.rdma.remote_addr,
                    rkey: w.rdma.rkey,
                }
            }
        }
        if let Some(ud) = &w.ud {
            self.check_owner(&ud.ah.0.obj.ctx, verb, "AH")?;
            let ah = ud.ah.0.obj.get(verb)?;
            c.wr.ud = sys::ud_t {
                ah,
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
            };
        }
        c.qp_type.xrc = sys::xrc_t {
            remote_srqn: w.remote_srqn,
        };
        c.num_sge =
            c_int::try_from(w.sg_list.len()).map_err(|_| Error::invalid(verb, "too many SGEs"))?;
        Ok((c, sges_to_c(w.sg_list)))
    }

    /// Posts on a DCI through the `ibv_wr_*` API (see `crate::dc` for how
    /// `bad_wr` maps onto it).
    ///
    /// # Safety
    ///
    /// `p` is the live DCI of `qp`; the SGE memory follows `post_send`'s
    /// contract.
    #[cfg(feature = "mlx5")]
    unsafe fn post_send_dci(&self, p: *mut sys::ibv_qp, wrs: &[SendWr<'_, Self>]) -> Result<()> {
        use crate::dc;
        use crate::ffi::mlx5dv as dv;
        use verbs_api::errno::EOPNOTSUPP;
        let verb = Verb::PostSend;
        // SAFETY: live QP; returns NULL unless it was created extended.
        let qpx = unsafe { sys::ibv_qp_to_qp_ex(p) };
        if qpx.is_null() {
            return Err(Error::from_errno(
                verb,
                EOPNOTSUPP,
                "the DCI was created without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, so it has no ibv_wr_* API",
            )
            .with_bad_wr(0));
        }
        // SAFETY: `qpx` is the live extended QP of an mlx5 QP (a DCI is
        // only made by mlx5dv_create_qp).
        let mqpx = unsafe { dv::mlx5dv_qp_ex_from_ibv_qp_ex(qpx) };
        if mqpx.is_null() {
            return Err(Error::from_errno(
                verb,
                EOPNOTSUPP,
                "mlx5dv_qp_ex_from_ibv_qp_ex returned NULL",
            )
            .with_bad_wr(0));
        }
        let mut batch = Vec::with_capacity(wrs.len());
        let mut failure = None;
        for (i, w) in wrs.iter().enumerate() {
            // SAFETY: live tables of this live DCI.
            match unsafe { self.dc_wr_to_c(w, qpx, mqpx) } {
                Ok(d) => batch.push(d),
                Err(e) => {
                    failure = Some(e.with_bad_wr(i));
                    break;
                }
            }
        }
        // SAFETY: (1) live tables, `&mut self` excludes other posters;
        // (2) every request passed `unbuildable`; (3) AHs checked live and
        // ours; (4) our caller's contract.
        let rc = unsafe { dc::post_batch(qpx, mqpx, &batch) };
        if rc != 0 {
            let name = errno::name(rc).unwrap_or("E?");
            return Err(Error::from_errno(
                verb,
                rc,
                format!(
                    "ibv_wr_complete failed: {name}: the provider refused the batch, so none of its {} \
                     work request(s) was posted (the ibv_wr API fails whole batches)",
                    batch.len()
                ),
            )
            .with_bad_wr(0));
        }
        failure.map_or(Ok(()), Err)
    }

    /// One DC request, checked against the DCI's builders.
    ///
    /// # Safety
    ///
    /// `qpx`/`mqpx` are the live extended tables of a live DCI.
    #[cfg(feature = "mlx5")]
    unsafe fn dc_wr_to_c(
        &self,
        w: &SendWr<'_, Self>,
        qpx: *mut sys::ibv_qp_ex,
        mqpx: *mut crate::ffi::mlx5dv::mlx5dv_qp_ex,
    ) -> Result<crate::dc::DcWr> {
        use crate::ffi::verbs::WrBuilder as B;
        use verbs_api::errno::EOPNOTSUPP;
        let verb = Verb::PostSend;
        let Some(dc) = &w.dc else {
            return Err(Error::invalid(
                verb,
                "a work request on a DCI needs DC addressing (dc: Some(DcInfo))",
            ));
        };
        self.check_owner(&dc.ah.0.obj.ctx, verb, "AH")?;
        let ah = dc.ah.0.obj.get(verb)?;
        let (r, a) = (&w.rdma, &w.atomic);
        let op = match w.opcode {
            WrOpcode::RdmaWrite => B::RdmaWrite {
                rkey: r.rkey,
                addr: r.remote_addr,
            },
            WrOpcode::RdmaWriteWithImm => B::RdmaWriteImm {
                rkey: r.rkey,
                addr: r.remote_addr,
                imm_be: w.imm_data.to_be(),
            },
            WrOpcode::Send => B::Send,
            WrOpcode::SendWithImm => B::SendImm {
                imm_be: w.imm_data.to_be(),
            },
            WrOpcode::RdmaRead => B::RdmaRead {
                rkey: r.rkey,
                addr: r.remote_addr,
            },
            WrOpcode::AtomicCmpAndSwp => B::CmpSwp {
                rkey: a.rkey,
                addr: a.remote_addr,
                compare: a.compare_add,
                swap: a.swap,
            },
            WrOpcode::AtomicFetchAndAdd => B::FetchAdd {
                rkey: a.rkey,
                addr: a.remote_addr,
                add: a.compare_add,
            },
            other => {
                return Err(Error::from_errno(
                    verb,
                    EOPNOTSUPP,
                    format!(
                        "opcode {other} is not supported on a DCI by the backend's ibv_wr path"
                    ),
                ))
            }
        };
        let d = crate::dc::DcWr {
            wr_id: w.wr_id,
            wr_flags: (w.send_flags - SendFlags::INLINE).bits(),
            op,
            ah,
            remote_dctn: dc.remote_dctn,
            remote_dc_key: dc.remote_dc_key,
            stream_id: dc.stream_id,
            sges: sges_to_c(w.sg_list),
            inline: w.send_flags.contains(SendFlags::INLINE),
        };
        // SAFETY: live tables (caller).
        if let Some(why) = unsafe { crate::dc::unbuildable(qpx, mqpx, &d) } {
            return Err(Error::from_errno(verb, EOPNOTSUPP, why));
        }
        Ok(d)
    }

    fn legacy_key(xrcd: &HwXrcd, qp_num: u32) -> (String, u32) {
        (xrcd.0.obj.ctx.name.clone(), qp_num)
    }

    fn legacy_qp(&self, xrcd: &HwXrcd, qp_num: u32, verb: Verb) -> Result<HwQp> {
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        self.legacy_xrc
            .borrow()
            .get(&Self::legacy_key(xrcd, qp_num))
            .cloned()
            .ok_or_else(|| {
                Error::invalid(
                    verb,
                    format!("no legacy XRC receive QP {qp_num:#x} in this domain"),
                )
            })
    }
}

impl Verbs for HwVerbs {
    type Context = HwContext;
    type Pd = HwPd;
    type Cq = HwCq;
    type CompChannel = HwCompChannel;
    type Mr = HwMr;
    type Srq = HwSrq;
    type Qp = HwQp;
    type Ah = HwAh;
    type Xrcd = HwXrcd;
    type Mw = HwMw;
    type CmChannel = HwCmChannel;
    type CmId = HwCmId;

    fn backend(&self) -> BackendKind {
        BackendKind::Hw
    }

    fn capabilities(&mut self) -> Capabilities {
        // Only what this backend implements and the device can do; without a
        // device nothing is claimed.
        let Ok(n) = with_device_list(|d| d.len()) else {
            return Capabilities::empty();
        };
        if n == 0 {
            return Capabilities::empty();
        }
        let mut caps = Capabilities::RC
            | Capabilities::UC
            | Capabilities::UD
            | Capabilities::SRQ
            | Capabilities::DATA_PATH
            | Capabilities::MCAST
            | Capabilities::XRC
            | Capabilities::LEGACY_XRC
            | Capabilities::MULTI_PROCESS;
        if n >= 2 {
            caps |= Capabilities::TWO_DEVICES;
        }
        if cfg!(feature = "mlx5") {
            caps |= Capabilities::MLX5DV;
        }
        caps
    }

    fn get_device_list(&mut self) -> Result<Vec<DeviceInfo>> {
        with_device_list(|d| {
            let order = self.order(d)?;
            Ok(order.into_iter().map(|i| device_info(d[i])).collect())
        })?
    }

    fn open_device(&mut self, index: usize, process: ProcessId) -> Result<HwContext> {
        let order = match with_device_list(|d| self.order(d)) {
            Ok(Ok(o)) => o,
            Ok(Err(e)) | Err(e) => {
                return Err(
                    Error::new(Verb::OpenDevice, e.kind(), e.message().to_string())
                        .with_errno(e.errno()),
                )
            }
        };
        let real = order.get(index).copied();
        let opened = with_device_list(|d| match real.and_then(|r| d.get(r)) {
            None => Err(Error::new(
                Verb::OpenDevice,
                ErrorKind::NoDevice,
                format!("no RDMA device at index {index} ({} found)", d.len()),
            )),
            Some(&dev) => {
                let info = device_info(dev);
                // SAFETY: `dev` is an entry of the live list; the opened
                // context holds its own reference to the device, so freeing
                // the list afterwards is allowed.
                let ctx = unsafe { sys::ibv_open_device(dev) };
                if ctx.is_null() {
                    Err(c_error(Verb::OpenDevice, last_errno(), "ibv_open_device"))
                } else {
                    Ok((ctx, info.name))
                }
            }
        });
        let (raw, name) = match opened {
            Ok(r) => r?,
            Err(e) => {
                return Err(
                    Error::new(Verb::OpenDevice, e.kind(), e.message().to_string())
                        .with_errno(e.errno()),
                )
            }
        };
        Ok(HwContext(Arc::new(ContextInner::new(
            raw, self.id, process, name, false,
        ))))
    }

    fn close_device(&mut self, ctx: &HwContext) -> Result<()> {
        ctx.0.get(Verb::CloseDevice, self.id)?;
        let live = ctx.0.live.get();
        if live > 0 {
            return Err(Error::new(
                Verb::CloseDevice,
                ErrorKind::Busy,
                format!("{live} object(s) created on this context are still alive"),
            ));
        }
        ctx.0.close()
    }

    fn query_device(&mut self, ctx: &HwContext) -> Result<DeviceAttr> {
        let (c, _) = self.ctx(ctx, Verb::QueryDevice)?;
        let mut a: sys::ibv_device_attr = zeroed();
        // SAFETY: live context; `a` is a valid out-parameter.
        let rc = unsafe { sys::ibv_query_device(c, &mut a) };
        if rc != 0 {
            return Err(c_error(Verb::QueryDevice, rc, "ibv_query_device"));
        }
        Ok(device_attr_from_c(&a))
    }

    fn query_device_ex(&mut self, ctx: &HwContext) -> Result<DeviceAttrEx> {
        self.ext_query_device_ex(ctx)
    }

    fn query_gid_ex(
        &mut self,
        ctx: &HwContext,
        port_num: u32,
        gid_index: u32,
        flags: u32,
    ) -> Result<GidEntry> {
        self.ext_query_gid_ex(ctx, port_num, gid_index, flags)
    }

    fn query_gid_table(
        &mut self,
        ctx: &HwContext,
        max_entries: usize,
        flags: u32,
    ) -> Result<Vec<GidEntry>> {
        self.ext_query_gid_table(ctx, max_entries, flags)
    }

    fn resize_cq(&mut self, cq: &HwCq, cqe: u32) -> Result<()> {
        self.ext_resize_cq(cq, cqe)
    }

    fn create_cq_ex(&mut self, ctx: &HwContext, attr: &CqInitAttrEx<'_, Self>) -> Result<HwCq> {
        self.ext_create_cq_ex(ctx, attr)
    }

    fn poll_cq_ex(&mut self, cq: &HwCq, wc: &mut [WcEx]) -> Result<usize> {
        self.ext_poll_cq_ex(cq, wc)
    }

    fn rereg_mr(&mut self, mr: &HwMr, args: &ReregMr<'_, Self>) -> Result<()> {
        self.ext_rereg_mr(mr, args)
    }

    fn alloc_mw(&mut self, pd: &HwPd, mw_type: MwType) -> Result<HwMw> {
        self.ext_alloc_mw(pd, mw_type)
    }

    fn dealloc_mw(&mut self, mw: &HwMw) -> Result<()> {
        self.ext_dealloc_mw(mw)
    }

    fn mw_info(&mut self, mw: &HwMw) -> Result<MwInfo> {
        self.ext_mw_info(mw)
    }

    fn bind_mw(&mut self, qp: &HwQp, mw: &HwMw, bind: &MwBind<'_, Self>) -> Result<()> {
        self.ext_bind_mw(qp, mw, bind)
    }

    fn query_qp_data_in_order(
        &mut self,
        qp: &HwQp,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        self.ext_query_qp_data_in_order(qp, op, flags)
    }

    fn query_ece(&mut self, qp: &HwQp) -> Result<Ece> {
        self.ext_query_ece(qp)
    }

    fn set_ece(&mut self, qp: &HwQp, ece: &mut Ece) -> Result<()> {
        self.ext_set_ece(qp, ece)
    }

    #[allow(unsafe_code)]
    unsafe fn post_wr(&mut self, qp: &HwQp, batch: &[WrEx<'_, Self>]) -> Result<()> {
        // SAFETY: our caller's `post_send` contract, passed on unchanged.
        unsafe { self.ext_post_wr(qp, batch) }
    }

    fn query_port(&mut self, ctx: &HwContext, port_num: u8) -> Result<PortAttr> {
        let (c, _) = self.ctx(ctx, Verb::QueryPort)?;
        let mut a: sys::ibv_port_attr = zeroed();
        // SAFETY: live context from `ibv_open_device`; `a` is writable.
        let rc = unsafe { fv::ibv_query_port(c, port_num, &mut a) };
        if rc != 0 {
            return Err(c_error(Verb::QueryPort, rc, "ibv_query_port"));
        }
        Ok(PortAttr {
            state: PortState::from_raw(a.state),
            max_mtu: Mtu::from_raw(a.max_mtu),
            active_mtu: Mtu::from_raw(a.active_mtu),
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            bad_pkey_cntr: a.bad_pkey_cntr,
            qkey_viol_cntr: a.qkey_viol_cntr,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            subnet_timeout: a.subnet_timeout,
            init_type_reply: a.init_type_reply,
            active_width: a.active_width,
            active_speed: u32::from(a.active_speed),
            phys_state: a.phys_state,
            link_layer: LinkLayer::from_raw(u32::from(a.link_layer)),
            flags: a.flags,
        })
    }

    fn query_gid(&mut self, ctx: &HwContext, port_num: u8, index: u32) -> Result<Gid> {
        let (c, _) = self.ctx(ctx, Verb::QueryGid)?;
        let idx = c_int::try_from(index)
            .map_err(|_| Error::invalid(Verb::QueryGid, "GID index too large"))?;
        let mut g = sys::ibv_gid { raw: [0; 16] };
        // SAFETY: live context; `g` is writable.
        if unsafe { sys::ibv_query_gid(c, port_num, idx, &mut g) } != 0 {
            return Err(c_error(Verb::QueryGid, last_errno(), "ibv_query_gid"));
        }
        Ok(to_gid(&g))
    }

    fn query_pkey(&mut self, ctx: &HwContext, port_num: u8, index: u16) -> Result<u16> {
        let (c, _) = self.ctx(ctx, Verb::QueryPkey)?;
        let mut pkey = 0u16;
        // SAFETY: live context; `pkey` is writable.
        if unsafe { sys::ibv_query_pkey(c, port_num, c_int::from(index), &mut pkey) } != 0 {
            return Err(c_error(Verb::QueryPkey, last_errno(), "ibv_query_pkey"));
        }
        Ok(u16::from_be(pkey))
    }

    fn alloc_pd(&mut self, ctx: &HwContext) -> Result<HwPd> {
        let (c, inner) = self.ctx(ctx, Verb::AllocPd)?;
        // SAFETY: live context.
        let p = unsafe { sys::ibv_alloc_pd(c) };
        let p =
            NonNull::new(p).ok_or_else(|| c_error(Verb::AllocPd, last_errno(), "ibv_alloc_pd"))?;
        Ok(HwPd(Arc::new(PdInner {
            obj: Owned::new(p, inner),
        })))
    }

    fn dealloc_pd(&mut self, pd: &HwPd) -> Result<()> {
        self.check_owner(&pd.0.obj.ctx, Verb::DeallocPd, "PD")?;
        pd.0.obj.destroy()
    }

    fn create_comp_channel(&mut self, ctx: &HwContext) -> Result<HwCompChannel> {
        let (c, inner) = self.ctx(ctx, Verb::CreateCompChannel)?;
        // SAFETY: live context.
        let p = unsafe { sys::ibv_create_comp_channel(c) };
        let p = NonNull::new(p).ok_or_else(|| {
            c_error(
                Verb::CreateCompChannel,
                last_errno(),
                "ibv_create_comp_channel",
            )
        })?;
        let ch = HwCompChannel(Arc::new(ChanInner {
            obj: Owned::new(p, inner),
            nonblock: Cell::new(false),
        }));
        // `ibv_get_cq_event` is non-blocking in this API: make the fd so now.
        ensure_chan_nonblocking(&ch, Verb::CreateCompChannel)?;
        Ok(ch)
    }

    fn destroy_comp_channel(&mut self, channel: &HwCompChannel) -> Result<()> {
        self.check_owner(
            &channel.0.obj.ctx,
            Verb::DestroyCompChannel,
            "completion channel",
        )?;
        channel.0.obj.destroy()
    }

    fn create_cq(&mut self, ctx: &HwContext, init: &CqInit<'_, Self>) -> Result<HwCq> {
        let (c, inner) = self.ctx(ctx, Verb::CreateCq)?;
        let cqe = c_int::try_from(init.cqe)
            .map_err(|_| Error::invalid(Verb::CreateCq, "cqe too large"))?;
        let vector = c_int::try_from(init.comp_vector)
            .map_err(|_| Error::invalid(Verb::CreateCq, "comp_vector too large"))?;
        let chan = match init.channel {
            Some(ch) => {
                self.check_owner(&ch.0.obj.ctx, Verb::CreateCq, "completion channel")?;
                ch.0.obj.get(Verb::CreateCq)?
            }
            None => ptr::null_mut(),
        };
        // SAFETY: live context; the channel is live or NULL; `cq_context` is
        // an opaque value C only stores.
        let p =
            unsafe { sys::ibv_create_cq(c, cqe, init.cq_context as usize as *mut _, chan, vector) };
        let p = NonNull::new(p)
            .ok_or_else(|| c_error(Verb::CreateCq, last_errno(), "ibv_create_cq"))?;
        let cq = HwCq(Arc::new(CqInner {
            obj: Owned::new(p, inner),
            _channel: init.channel.cloned(),
            cq_context: init.cq_context,
            ex: None,
        }));
        register_cq(&cq);
        Ok(cq)
    }

    fn cq_info(&mut self, cq: &HwCq) -> Result<CqInfo> {
        self.check_owner(&cq.0.obj.ctx, Verb::CreateCq, "CQ")?;
        let p = cq.0.obj.get(Verb::CreateCq)?;
        // SAFETY: `p` is a live CQ.
        let cqe = unsafe { (*p).cqe };
        Ok(CqInfo {
            cqe: u(cqe),
            cq_context: cq.0.cq_context,
        })
    }

    fn destroy_cq(&mut self, cq: &HwCq) -> Result<()> {
        self.check_owner(&cq.0.obj.ctx, Verb::DestroyCq, "CQ")?;
        cq.0.obj.destroy()
    }

    fn req_notify_cq(&mut self, cq: &HwCq, solicited_only: bool) -> Result<()> {
        self.check_owner(&cq.0.obj.ctx, Verb::ReqNotifyCq, "CQ")?;
        let p = cq.0.obj.get(Verb::ReqNotifyCq)?;
        // SAFETY: live CQ of a live context (the inner keeps both alive).
        match unsafe { fv::ibv_req_notify_cq(p, c_int::from(solicited_only)) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::ReqNotifyCq, rc, "ibv_req_notify_cq")),
        }
    }

    fn ack_cq_events(&mut self, cq: &HwCq, nevents: u32) -> Result<()> {
        crate::events::ack_cq_events(self, cq, nevents)
    }

    fn get_cq_event(&mut self, channel: &HwCompChannel) -> Result<Option<HwCq>> {
        crate::events::get_cq_event(self, channel)
    }

    fn get_async_event(&mut self, ctx: &HwContext) -> Result<Option<AsyncEvent<Self>>> {
        crate::events::get_async_event(self, ctx)
    }

    fn ack_async_event(&mut self, event: &AsyncEvent<Self>) -> Result<()> {
        crate::events::ack_async_event(self, event)
    }

    fn poll_cq(&mut self, cq: &HwCq, wc: &mut [Wc]) -> Result<usize> {
        self.check_owner(&cq.0.obj.ctx, Verb::PollCq, "CQ")?;
        let p = cq.0.obj.get(Verb::PollCq)?;
        let n = c_int::try_from(wc.len()).unwrap_or(c_int::MAX);
        let mut raw: Vec<sys::ibv_wc> = (0..n).map(|_| zeroed()).collect();
        // SAFETY: live CQ; `raw` has room for `n` completions; `&mut self`
        // serialises polling through this backend.
        let got = unsafe { fv::ibv_poll_cq(p, n, raw.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::from_errno(
                Verb::PollCq,
                -got,
                "ibv_poll_cq failed (CQ in error: overrun?)",
            ));
        }
        for (dst, src) in wc.iter_mut().zip(&raw[..got as usize]) {
            let opcode = WcOpcode::from_raw(src.opcode);
            // SAFETY: both union members are a plain u32.
            let imm = unsafe { src.imm_data_invalidated_rkey_union.imm_data };
            let flags = WcFlags(src.wc_flags);
            *dst = Wc {
                wr_id: src.wr_id,
                status: WcStatus::from_raw(src.status),
                opcode,
                vendor_err: src.vendor_err,
                byte_len: src.byte_len,
                imm_data: if flags.contains(WcFlags::WITH_INV) {
                    imm
                } else {
                    u32::from_be(imm)
                },
                qp_num: src.qp_num,
                src_qp: src.src_qp,
                wc_flags: flags,
                pkey_index: src.pkey_index,
                slid: src.slid,
                sl: src.sl,
                dlid_path_bits: src.dlid_path_bits,
            };
        }
        Ok(got as usize)
    }

    fn reg_mr(&mut self, pd: &HwPd, length: usize, access: AccessFlags) -> Result<HwMr> {
        self.check_owner(&pd.0.obj.ctx, Verb::RegMr, "PD")?;
        let p = pd.0.obj.get(Verb::RegMr)?;
        let buf = PageBuf::new(length).ok_or_else(|| {
            Error::from_errno(
                Verb::RegMr,
                ENOMEM,
                format!("cannot allocate {length} bytes"),
            )
        })?;
        let acc = c_int::try_from(access.bits())
            .map_err(|_| Error::invalid(Verb::RegMr, "unknown access bits"))?;
        // SAFETY: live PD; `buf` is a live allocation of at least `length`
        // bytes that the MR inner keeps until after deregistration.
        let mr = unsafe { sys::ibv_reg_mr(p, buf.ptr.as_ptr().cast(), length, acc) };
        // On failure `buf` is freed here: nothing stays allocated.
        let mr =
            NonNull::new(mr).ok_or_else(|| c_error(Verb::RegMr, last_errno(), "ibv_reg_mr"))?;
        Ok(HwMr(Arc::new(MrInner {
            obj: Owned::new(mr, &pd.0.obj.ctx),
            buf,
            pd: RefCell::new(pd.clone()),
            access: Cell::new(access),
        })))
    }

    fn mr_info(&mut self, mr: &HwMr) -> Result<MrInfo> {
        self.check_owner(&mr.0.obj.ctx, Verb::MrBytes, "MR")?;
        let p = mr.0.obj.get(Verb::MrBytes)?;
        // SAFETY: `p` is a live MR.
        let m = unsafe { &*p };
        Ok(MrInfo {
            addr: m.addr as u64,
            length: m.length as u64,
            lkey: m.lkey,
            rkey: m.rkey,
            access: mr.0.access.get(),
        })
    }

    fn mr_bytes<'a>(&'a self, mr: &'a HwMr) -> Result<&'a [u8]> {
        self.check_owner(&mr.0.obj.ctx, Verb::MrBytes, "MR")?;
        let b = &mr.0.buf;
        // SAFETY: `b` is a live allocation of `len` initialised (zeroed)
        // bytes that lives as long as `mr`; mutable access only goes through
        // `mr_bytes_mut`, which needs `&mut self` of this same instance
        // (checked above), so no `&mut` alias exists for `'a`. Bytes the NIC
        // writes concurrently are the `post_*` unsafe contract's business.
        Ok(unsafe { core::slice::from_raw_parts(b.ptr.as_ptr(), b.len) })
    }

    fn mr_bytes_mut<'a>(&'a mut self, mr: &'a HwMr) -> Result<&'a mut [u8]> {
        self.check_owner(&mr.0.obj.ctx, Verb::MrBytes, "MR")?;
        let b = &mr.0.buf;
        // SAFETY: as in `mr_bytes`; `&'a mut self` excludes every other
        // slice of any MR of this instance for `'a`.
        Ok(unsafe { core::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len) })
    }

    fn dereg_mr(&mut self, mr: &HwMr) -> Result<()> {
        self.check_owner(&mr.0.obj.ctx, Verb::DeregMr, "MR")?;
        mr.0.obj.destroy()
    }

    fn create_srq(&mut self, pd: &HwPd, attr: &mut SrqAttr) -> Result<HwSrq> {
        self.check_owner(&pd.0.obj.ctx, Verb::CreateSrq, "PD")?;
        let p = pd.0.obj.get(Verb::CreateSrq)?;
        let mut init: sys::ibv_srq_init_attr = zeroed();
        init.attr = sys::ibv_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        // SAFETY: live PD; `init` is a valid attribute block.
        let s = unsafe { sys::ibv_create_srq(p, &mut init) };
        let s = NonNull::new(s)
            .ok_or_else(|| c_error(Verb::CreateSrq, last_errno(), "ibv_create_srq"))?;
        attr.max_wr = init.attr.max_wr;
        attr.max_sge = init.attr.max_sge;
        let srq = HwSrq(Arc::new(SrqInner {
            obj: Owned::new(s, &pd.0.obj.ctx),
            _pd: Some(pd.clone()),
            _cq: None,
            _xrcd: None,
        }));
        register_srq(&srq);
        Ok(srq)
    }

    fn create_srq_ex(
        &mut self,
        ctx: &HwContext,
        attr: &mut SrqInitAttrEx<'_, Self>,
    ) -> Result<HwSrq> {
        let verb = Verb::CreateSrqEx;
        let (c, inner) = self.ctx(ctx, verb)?;
        let mut init: sys::ibv_srq_init_attr_ex = zeroed();
        init.srq_context = attr.srq_context as usize as *mut _;
        init.attr = sys::ibv_srq_attr {
            max_wr: attr.attr.max_wr,
            max_sge: attr.attr.max_sge,
            srq_limit: attr.attr.srq_limit,
        };
        init.comp_mask = attr.comp_mask.bits();
        init.srq_type = attr.srq_type.to_raw();
        if let Some(pd) = attr.pd {
            self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
            init.pd = pd.0.obj.get(verb)?;
        }
        if let Some(x) = attr.xrcd {
            self.check_owner(&x.0.obj.ctx, verb, "XRCD")?;
            init.xrcd = x.0.obj.get(verb)?;
        }
        if let Some(cq) = attr.cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            init.cq = cq.0.obj.get(verb)?;
        }
        // SAFETY: live context; every object named is live and of this
        // context (checked above); `init` is valid for reads and writes.
        let s = unsafe { fv::ibv_create_srq_ex(c, &mut init) }
            .map_err(|e| c_error(verb, e, "ibv_create_srq_ex"))?;
        attr.attr.max_wr = init.attr.max_wr;
        attr.attr.max_sge = init.attr.max_sge;
        let srq = HwSrq(Arc::new(SrqInner {
            obj: Owned::new(s, inner),
            _pd: attr.pd.cloned(),
            _cq: attr.cq.cloned(),
            _xrcd: attr.xrcd.cloned(),
        }));
        register_srq(&srq);
        Ok(srq)
    }

    fn modify_srq(&mut self, srq: &HwSrq, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        self.check_owner(&srq.0.obj.ctx, Verb::ModifySrq, "SRQ")?;
        let p = srq.0.obj.get(Verb::ModifySrq)?;
        let mut a = sys::ibv_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        // SAFETY: live SRQ; `a` is a valid attribute block.
        match unsafe { sys::ibv_modify_srq(p, &mut a, mask.bits() as c_int) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::ModifySrq, rc, "ibv_modify_srq")),
        }
    }

    fn query_srq(&mut self, srq: &HwSrq) -> Result<SrqAttr> {
        self.check_owner(&srq.0.obj.ctx, Verb::QuerySrq, "SRQ")?;
        let p = srq.0.obj.get(Verb::QuerySrq)?;
        let mut a: sys::ibv_srq_attr = zeroed();
        // SAFETY: live SRQ; `a` is writable.
        match unsafe { sys::ibv_query_srq(p, &mut a) } {
            0 => Ok(SrqAttr {
                max_wr: a.max_wr,
                max_sge: a.max_sge,
                srq_limit: a.srq_limit,
            }),
            rc => Err(c_error(Verb::QuerySrq, rc, "ibv_query_srq")),
        }
    }

    fn destroy_srq(&mut self, srq: &HwSrq) -> Result<()> {
        self.check_owner(&srq.0.obj.ctx, Verb::DestroySrq, "SRQ")?;
        srq.0.obj.destroy()
    }

    fn get_srq_num(&mut self, srq: &HwSrq) -> Result<u32> {
        self.check_owner(&srq.0.obj.ctx, Verb::GetSrqNum, "SRQ")?;
        let p = srq.0.obj.get(Verb::GetSrqNum)?;
        // SAFETY: live SRQ of a live context.
        unsafe { fv::ibv_get_srq_num(p) }
            .map_err(|e| c_error(Verb::GetSrqNum, e, "ibv_get_srq_num"))
    }

    fn create_qp(&mut self, pd: &HwPd, attr: &mut QpInitAttrEx<'_, Self>) -> Result<HwQp> {
        let verb = Verb::CreateQp;
        self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
        let p = pd.0.obj.get(verb)?;
        let ex = self.qp_init_to_c(verb, attr)?;
        let mut init = sys::ibv_qp_init_attr {
            qp_context: ex.qp_context,
            send_cq: ex.send_cq,
            recv_cq: ex.recv_cq,
            srq: ex.srq,
            cap: ex.cap,
            qp_type: ex.qp_type,
            sq_sig_all: ex.sq_sig_all,
        };
        // SAFETY: live PD; every object in `init` is live and checked.
        let q = unsafe { sys::ibv_create_qp(p, &mut init) };
        let q = NonNull::new(q).ok_or_else(|| c_error(verb, last_errno(), "ibv_create_qp"))?;
        attr.cap = cap_from_c(&init.cap);
        let mut owned_attr = QpInitAttrEx {
            pd: Some(pd),
            ..QpInitAttrEx::default()
        };
        owned_attr.qp_type = attr.qp_type;
        owned_attr.send_cq = attr.send_cq;
        owned_attr.recv_cq = attr.recv_cq;
        owned_attr.srq = attr.srq;
        Ok(self.make_qp(verb, q, &pd.0.obj.ctx, &owned_attr, None))
    }

    fn create_qp_ex(&mut self, ctx: &HwContext, attr: &mut QpInitAttrEx<'_, Self>) -> Result<HwQp> {
        let verb = Verb::CreateQpEx;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        let mut ex = self.qp_init_to_c(verb, attr)?;
        // SAFETY: live context; every object named is live, of this
        // context (checked), and `ex` is valid for reads and writes.
        let q = unsafe { fv::ibv_create_qp_ex(c, &mut ex) }
            .map_err(|e| c_error(verb, e, "ibv_create_qp_ex"))?;
        attr.cap = cap_from_c(&ex.cap);
        Ok(self.make_qp(verb, q, &inner, attr, None))
    }

    fn qp_num(&mut self, qp: &HwQp) -> Result<u32> {
        self.qp_ptr(qp, Verb::QueryQp)?;
        Ok(qp.0.qp_num)
    }

    fn modify_qp(&mut self, qp: &HwQp, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::ModifyQp)?;
        let mut a = qp_attr_to_c(attr);
        // The bits go to the provider as C's int: unknown high bits are its
        // (and the kernel's) to refuse, not ours.
        let m = mask.bits() as c_int;
        // SAFETY: live QP; `a` is a valid attribute block.
        match unsafe { sys::ibv_modify_qp(p, &mut a, m) } {
            0 => Ok(()),
            EINVAL => Err(self.diagnose_einval(qp, p, attr, mask)),
            rc => Err(c_error(Verb::ModifyQp, rc, "ibv_modify_qp")),
        }
    }

    fn query_qp(&mut self, qp: &HwQp, mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        let p = self.qp_ptr(qp, Verb::QueryQp)?;
        let mut a: sys::ibv_qp_attr = zeroed();
        let mut init: sys::ibv_qp_init_attr = zeroed();
        let m = mask.bits() as c_int;
        // SAFETY: live QP; both out-parameters are writable.
        match unsafe { sys::ibv_query_qp(p, &mut a, m, &mut init) } {
            0 => Ok((
                qp_attr_from_c(&a),
                QpInitInfo {
                    qp_type: qp.0.qp_type,
                    cap: cap_from_c(&init.cap),
                    sq_sig_all: init.sq_sig_all != 0,
                    qp_context: init.qp_context as usize as u64,
                    has_srq: !init.srq.is_null(),
                },
            )),
            rc => Err(c_error(Verb::QueryQp, rc, "ibv_query_qp")),
        }
    }

    fn destroy_qp(&mut self, qp: &HwQp) -> Result<()> {
        self.qp_ptr(qp, Verb::DestroyQp)?;
        qp.0.obj.destroy()
    }

    fn open_qp(&mut self, ctx: &HwContext, xrcd: &HwXrcd, attr: &QpOpenAttr) -> Result<HwQp> {
        let verb = Verb::OpenQp;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRCD")?;
        let mut oa: sys::ibv_qp_open_attr = zeroed();
        oa.comp_mask = (sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_NUM
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_XRCD
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_CONTEXT
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_TYPE)
            .0;
        oa.qp_num = attr.qp_num;
        oa.xrcd = xrcd.0.obj.get(verb)?;
        oa.qp_context = attr.qp_context as usize as *mut _;
        oa.qp_type = attr.qp_type.to_raw();
        // SAFETY: live context; `oa` is valid and names a live XRCD of it.
        let q =
            unsafe { fv::ibv_open_qp(c, &mut oa) }.map_err(|e| c_error(verb, e, "ibv_open_qp"))?;
        let a = QpInitAttrEx {
            qp_type: attr.qp_type,
            xrcd: Some(xrcd),
            ..QpInitAttrEx::default()
        };
        Ok(self.make_qp(verb, q, &inner, &a, None))
    }

    fn attach_mcast(&mut self, qp: &HwQp, gid: &Gid, lid: u16) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::AttachMcast)?;
        let g = from_gid(gid);
        // SAFETY: live QP; `g` is a valid GID.
        match unsafe { sys::ibv_attach_mcast(p, &g, lid) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::AttachMcast, rc, "ibv_attach_mcast")),
        }
    }

    fn detach_mcast(&mut self, qp: &HwQp, gid: &Gid, lid: u16) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::DetachMcast)?;
        let g = from_gid(gid);
        // SAFETY: live QP; `g` is a valid GID.
        match unsafe { sys::ibv_detach_mcast(p, &g, lid) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::DetachMcast, rc, "ibv_detach_mcast")),
        }
    }

    fn create_ah(&mut self, pd: &HwPd, attr: &AhAttr) -> Result<HwAh> {
        self.check_owner(&pd.0.obj.ctx, Verb::CreateAh, "PD")?;
        let p = pd.0.obj.get(Verb::CreateAh)?;
        let mut a = ah_to_c(attr);
        // SAFETY: live PD; `a` is a valid attribute block.
        let ah = unsafe { sys::ibv_create_ah(p, &mut a) };
        let ah = NonNull::new(ah)
            .ok_or_else(|| c_error(Verb::CreateAh, last_errno(), "ibv_create_ah"))?;
        Ok(HwAh(Arc::new(AhInner {
            obj: Owned::new(ah, &pd.0.obj.ctx),
            _pd: pd.clone(),
        })))
    }

    fn destroy_ah(&mut self, ah: &HwAh) -> Result<()> {
        self.check_owner(&ah.0.obj.ctx, Verb::DestroyAh, "AH")?;
        ah.0.obj.destroy()
    }

    #[allow(unsafe_code)]
    unsafe fn post_send(&mut self, qp: &HwQp, wrs: &[SendWr<'_, Self>]) -> Result<()> {
        let verb = Verb::PostSend;
        let p = self.qp_ptr(qp, verb)?;
        if wrs.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "mlx5")]
        if qp.0.dc_type == Some(DcType::Dci) {
            // SAFETY: `p` is this live DCI; the memory contract is ours,
            // passed on unchanged.
            return unsafe { self.post_send_dci(p, wrs) };
        }
        // Convert up to the first request that fails a check; the ones
        // before it are posted (C's `bad_wr` contract), then its error is
        // reported.
        let mut sges: Vec<Vec<sys::ibv_sge>> = Vec::with_capacity(wrs.len());
        let mut cw: Vec<sys::ibv_send_wr> = Vec::with_capacity(wrs.len());
        let mut failure = None;
        for (i, w) in wrs.iter().enumerate() {
            match self.send_wr_to_c(w) {
                Ok((c, s)) => {
                    cw.push(c);
                    sges.push(s);
                }
                Err(e) => {
                    failure = Some(e.with_bad_wr(i));
                    break;
                }
            }
        }
        if cw.is_empty() {
            return failure.map_or(Ok(()), Err);
        }
        // Link the chain now that neither vector moves any more.
        let n = cw.len();
        let base = cw.as_mut_ptr();
        for (i, (c, s)) in cw.iter_mut().zip(sges.iter_mut()).enumerate() {
            c.sg_list = if s.is_empty() {
                ptr::null_mut()
            } else {
                s.as_mut_ptr()
            };
            c.next = if i + 1 < n {
                // SAFETY: `i + 1 < n`, so the pointer stays inside `cw`.
                unsafe { base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: (1) live QP of a live context (the inner keeps them);
        // (2) `cw` is a NULL-terminated chain whose `sg_list`s point into
        // `sges`, both alive across the call; (3) `bad` is writable;
        // (4) the memory named by the SGEs is this method's own `# Safety`
        // contract, passed on to our caller.
        let rc = unsafe { fv::ibv_post_send(p, base, &mut bad) };
        if rc != 0 {
            let idx = if bad.is_null() {
                0
            } else {
                (bad as usize - base as usize) / size_of::<sys::ibv_send_wr>()
            };
            return Err(c_error(verb, rc, "ibv_post_send").with_bad_wr(idx));
        }
        failure.map_or(Ok(()), Err)
    }

    #[allow(unsafe_code)]
    unsafe fn post_recv(&mut self, qp: &HwQp, wrs: &[RecvWr<'_>]) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::PostRecv)?;
        post_recv_chain(Verb::PostRecv, wrs, |head, bad| {
            // SAFETY: live QP; `head` is a valid NULL-terminated chain built
            // by `post_recv_chain`; `bad` is writable; the buffers are the
            // caller's `# Safety` contract.
            unsafe { fv::ibv_post_recv(p, head, bad) }
        })
    }

    #[allow(unsafe_code)]
    unsafe fn post_srq_recv(&mut self, srq: &HwSrq, wrs: &[RecvWr<'_>]) -> Result<()> {
        self.check_owner(&srq.0.obj.ctx, Verb::PostSrqRecv, "SRQ")?;
        let p = srq.0.obj.get(Verb::PostSrqRecv)?;
        post_recv_chain(Verb::PostSrqRecv, wrs, |head, bad| {
            // SAFETY: live SRQ; valid chain; writable `bad`; the buffers are
            // the caller's `# Safety` contract.
            unsafe { fv::ibv_post_srq_recv(p, head, bad) }
        })
    }

    fn open_xrcd(&mut self, ctx: &HwContext, attr: &XrcdInitAttr) -> Result<HwXrcd> {
        open_xrcd_impl(
            self,
            ctx,
            Verb::OpenXrcd,
            attr.comp_mask,
            attr.fd,
            attr.oflags,
        )
    }

    fn close_xrcd(&mut self, xrcd: &HwXrcd) -> Result<()> {
        self.check_owner(&xrcd.0.obj.ctx, Verb::CloseXrcd, "XRCD")?;
        xrcd.0.obj.destroy()
    }

    fn open_xrc_domain(
        &mut self,
        ctx: &HwContext,
        fd: XrcdFile,
        oflags: OpenFlags,
    ) -> Result<HwXrcd> {
        // The OFED contract: with fd -1 the only valid oflag is O_CREAT
        // (ibv_open_xrcd itself ignores the flags then).
        if fd == XrcdFile::None && oflags != OpenFlags::CREAT {
            return Err(Error::from_errno(
                Verb::OpenXrcDomain,
                EINVAL,
                format!("fd -1 (no file) allows only oflag O_CREAT, not {oflags}"),
            ));
        }
        let mask = XrcdInitAttrMask::FD | XrcdInitAttrMask::OFLAGS;
        open_xrcd_impl(self, ctx, Verb::OpenXrcDomain, mask, fd, oflags)
    }

    fn close_xrc_domain(&mut self, xrcd: &HwXrcd) -> Result<()> {
        self.check_owner(&xrcd.0.obj.ctx, Verb::CloseXrcDomain, "XRC domain")?;
        if self
            .legacy_xrc
            .borrow()
            .process_uses_xrcd(xrcd.0.id, xrcd.0.obj.ctx.process)
        {
            return Err(Error::new(
                Verb::CloseXrcDomain,
                ErrorKind::Busy,
                "this process is still registered with a receive QP of the domain",
            ));
        }
        xrcd.0
            .obj
            .destroy()
            .map_err(|e| Error::from_errno(Verb::CloseXrcDomain, e.errno(), e.message()))
    }

    fn create_xrc_srq(
        &mut self,
        pd: &HwPd,
        xrcd: &HwXrcd,
        xrc_cq: &HwCq,
        attr: &mut SrqAttr,
    ) -> Result<HwSrq> {
        let ctx = HwContext(Arc::clone(&pd.0.obj.ctx));
        let mut ex = SrqInitAttrEx {
            attr: *attr,
            comp_mask: SrqInitAttrMask::TYPE
                | SrqInitAttrMask::PD
                | SrqInitAttrMask::XRCD
                | SrqInitAttrMask::CQ,
            srq_type: SrqType::Xrc,
            pd: Some(pd),
            xrcd: Some(xrcd),
            cq: Some(xrc_cq),
            ..SrqInitAttrEx::default()
        };
        let srq = self
            .create_srq_ex(&ctx, &mut ex)
            .map_err(|e| Error::from_errno(Verb::CreateXrcSrq, e.errno(), e.message()))?;
        *attr = ex.attr;
        Ok(srq)
    }

    fn create_xrc_rcv_qp(&mut self, xrcd: &HwXrcd) -> Result<u32> {
        let verb = Verb::CreateXrcRcvQp;
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        let ctx = HwContext(Arc::clone(&xrcd.0.obj.ctx));
        let mut attr = QpInitAttrEx {
            qp_type: QpType::XrcRecv,
            comp_mask: QpInitAttrMask::XRCD,
            xrcd: Some(xrcd),
            ..QpInitAttrEx::default()
        };
        let qp = self
            .create_qp_ex(&ctx, &mut attr)
            .map_err(|e| Error::from_errno(verb, e.errno(), e.message()))?;
        let n = qp.0.qp_num;
        let key = Self::legacy_key(xrcd, n);
        // A fresh QP number cannot be registered already; if it were, the
        // new QP is dropped (destroyed) and nothing is left behind.
        self.legacy_xrc
            .borrow_mut()
            .insert(key, xrcd.0.id, xrcd.0.obj.ctx.process, qp)
            .map_err(|e| Error::from_errno(verb, e, "receive QP number already registered"))?;
        Ok(n)
    }

    fn modify_xrc_rcv_qp(
        &mut self,
        xrcd: &HwXrcd,
        qp_num: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<()> {
        let qp = self.legacy_qp(xrcd, qp_num, Verb::ModifyXrcRcvQp)?;
        self.modify_qp(&qp, attr, mask)
    }

    fn query_xrc_rcv_qp(
        &mut self,
        xrcd: &HwXrcd,
        qp_num: u32,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let qp = self.legacy_qp(xrcd, qp_num, Verb::QueryXrcRcvQp)?;
        self.query_qp(&qp, mask)
    }

    fn reg_xrc_rcv_qp(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
        let verb = Verb::RegXrcRcvQp;
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        let key = Self::legacy_key(xrcd, qp_num);
        let process = xrcd.0.obj.ctx.process;
        if self.legacy_xrc.borrow().contains(&key) {
            return self
                .legacy_xrc
                .borrow_mut()
                .register(&key, process)
                .map_err(|e| {
                    Error::from_errno(verb, e, "already registered with this receive QP")
                });
        }
        // Created by another OS process: open it by number in the domain.
        let ctx = HwContext(Arc::clone(&xrcd.0.obj.ctx));
        let attr = QpOpenAttr {
            qp_num,
            qp_type: QpType::XrcRecv,
            qp_context: 0,
        };
        let qp = self
            .open_qp(&ctx, xrcd, &attr)
            .map_err(|e| Error::from_errno(verb, e.errno(), e.message()))?;
        self.legacy_xrc
            .borrow_mut()
            .insert(key, xrcd.0.id, process, qp)
            .map_err(|e| Error::from_errno(verb, e, "already registered"))
    }

    fn unreg_xrc_rcv_qp(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
        let verb = Verb::UnregXrcRcvQp;
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        let key = Self::legacy_key(xrcd, qp_num);
        let last = self
            .legacy_xrc
            .borrow_mut()
            .unregister(&key, xrcd.0.obj.ctx.process)
            .map_err(|e| {
                Error::from_errno(
                    verb,
                    e,
                    "this process is not registered with that receive QP",
                )
            })?;
        if let Some(qp) = last {
            // The last registration is gone: the QP goes too.
            qp.0.obj
                .destroy()
                .map_err(|e| Error::from_errno(verb, e.errno(), e.message()))?;
        }
        Ok(())
    }

    fn rdma_create_event_channel(&mut self) -> Result<HwCmChannel> {
        self.cm_create_event_channel()
    }

    fn rdma_destroy_event_channel(&mut self, channel: &HwCmChannel) -> Result<()> {
        self.cm_destroy_event_channel(channel)
    }

    fn rdma_create_id(
        &mut self,
        channel: &HwCmChannel,
        context: u64,
        ps: PortSpace,
    ) -> Result<HwCmId> {
        self.cm_create_id(channel, context, ps)
    }

    fn rdma_destroy_id(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_destroy_id(id)
    }

    fn rdma_id_info(&mut self, id: &HwCmId) -> Result<CmIdInfo<Self>> {
        self.cm_id_info(id)
    }

    fn rdma_bind_addr(&mut self, id: &HwCmId, addr: std::net::SocketAddr) -> Result<()> {
        self.cm_bind_addr(id, addr)
    }

    fn rdma_resolve_addr(
        &mut self,
        id: &HwCmId,
        src: Option<std::net::SocketAddr>,
        dst: std::net::SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        self.cm_resolve_addr(id, src, dst, timeout_ms)
    }

    fn rdma_resolve_route(&mut self, id: &HwCmId, timeout_ms: u32) -> Result<()> {
        self.cm_resolve_route(id, timeout_ms)
    }

    fn rdma_listen(&mut self, id: &HwCmId, backlog: i32) -> Result<()> {
        self.cm_listen(id, backlog)
    }

    fn rdma_connect(&mut self, id: &HwCmId, param: &ConnParam) -> Result<()> {
        self.cm_connect(id, param, false)
    }

    fn rdma_accept(&mut self, id: &HwCmId, param: &ConnParam) -> Result<()> {
        self.cm_connect(id, param, true)
    }

    fn rdma_reject(&mut self, id: &HwCmId, private_data: &[u8]) -> Result<()> {
        self.cm_reject(id, private_data)
    }

    fn rdma_disconnect(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_disconnect(id)
    }

    fn rdma_get_cm_event(&mut self, channel: &HwCmChannel) -> Result<Option<CmEvent<Self>>> {
        self.cm_get_event(channel)
    }

    fn rdma_ack_cm_event(&mut self, event: CmEvent<Self>) -> Result<()> {
        self.cm_ack_event(event)
    }

    fn rdma_create_qp(
        &mut self,
        id: &HwCmId,
        pd: Option<&HwPd>,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        self.cm_create_qp(id, Some(pd), attr)
    }

    fn rdma_create_qp_ex(
        &mut self,
        id: &HwCmId,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        self.cm_create_qp(id, None, attr)
    }

    fn rdma_destroy_qp(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_destroy_qp(id)
    }

    fn rdma_init_qp_attr(&mut self, id: &HwCmId, state: QpState) -> Result<(QpAttr, QpAttrMask)> {
        let verb = Verb::RdmaInitQpAttr;
        let p = self.cm_id(id, verb)?;
        let mut attr: sys::ibv_qp_attr = zeroed();
        attr.qp_state = state.to_raw();
        let mut mask: c_int = 0;
        // SAFETY: `p` is a live rdma_cm id of this backend; `attr` and `mask`
        // are valid for writes for the duration of the call.
        let rc = unsafe { sys::rdma_init_qp_attr(p, &mut attr, &mut mask) };
        if rc != 0 {
            return Err(c_error(verb, last_errno(), "rdma_init_qp_attr"));
        }
        Ok((qp_attr_from_c(&attr), QpAttrMask(mask as u32)))
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_query_device(
        &mut self,
        ctx: &HwContext,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        use crate::ffi::mlx5dv as dv;
        let (c, _) = self.ctx(ctx, Verb::Mlx5dvQueryDevice)?;
        let mut out = dv::mlx5dv_context::request(comp_mask.bits());
        // SAFETY: live context; `out` is at least as large as the installed
        // library's struct (layout test) and zeroed except `comp_mask`.
        let rc = unsafe { dv::mlx5dv_query_device(c, &mut out) };
        if rc != 0 {
            return Err(c_error(Verb::Mlx5dvQueryDevice, rc, "mlx5dv_query_device"));
        }
        let got = dv::Mlx5dvContext::from_filled(&out);
        let _ = dv::Mlx5dvContext::REQUEST;
        Ok(Mlx5Context {
            version: out.version,
            flags: Mlx5ContextFlags(got.flags),
            comp_mask: Mlx5ContextMask(out.comp_mask),
            dc_odp_caps: out.dc_odp_caps,
            dci_streams_caps: got
                .dci_streams_caps
                .map(|c| DciStreamsCaps {
                    max_log_num_concurent: c.max_log_num_concurent,
                    max_log_num_errored: c.max_log_num_errored,
                })
                .unwrap_or_default(),
            max_dc_rd_atom: got.max_dc_rd_atom.map_or(0, |(a, _)| a),
            max_dc_init_rd_atom: got.max_dc_rd_atom.map_or(0, |(_, b)| b),
            ooo_recv_wrs_caps: got
                .ooo_recv_wrs_caps
                .map(|c| OooRecvWrsCaps {
                    max_rc: c.max_rc,
                    max_xrc: c.max_xrc,
                    max_dct: c.max_dct,
                    max_ud: c.max_ud,
                    max_uc: c.max_uc,
                })
                .unwrap_or_default(),
        })
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_create_qp(
        &mut self,
        ctx: &HwContext,
        attr: &mut QpInitAttrEx<'_, Self>,
        mlx5_attr: &Mlx5QpInitAttr,
    ) -> Result<HwQp> {
        use crate::ffi::mlx5dv as dv;
        let verb = Verb::Mlx5dvCreateQp;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        let mut ex = self.qp_init_to_c(verb, attr)?;
        let mut m = dv::mlx5dv_qp_init_attr::zeroed();
        m.comp_mask = mlx5_attr.comp_mask.bits();
        m.create_flags = mlx5_attr.create_flags.bits();
        m.send_ops_flags = mlx5_attr.send_ops_flags.bits();
        m.dc_init_attr.dc_type = mlx5_attr.dc_init_attr.dc_type.to_raw();
        let is_dc = mlx5_attr.comp_mask.bits() & dv::MLX5DV_QP_INIT_ATTR_MASK_DC != 0;
        m.dc_init_attr.u =
            if mlx5_attr.comp_mask.bits() & dv::MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS != 0 {
                dv::mlx5dv_dc_init_attr_u {
                    dci_streams: dv::mlx5dv_dci_streams {
                        log_num_concurent: mlx5_attr.dc_init_attr.dci_streams.log_num_concurent,
                        log_num_errored: mlx5_attr.dc_init_attr.dci_streams.log_num_errored,
                    },
                }
            } else {
                dv::mlx5dv_dc_init_attr_u {
                    dct_access_key: mlx5_attr.dc_init_attr.dct_access_key,
                }
            };
        let _ = (
            dv::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
            dv::MLX5DV_QP_CREATE_OOO_DP,
        );
        // SAFETY: live context; `ex` names live objects of this context
        // (checked); `m` is a fully initialised mlx5 attribute block whose
        // layout matches the header (layout test).
        let q = unsafe { dv::mlx5dv_create_qp(c, &mut ex, &mut m) };
        let q = NonNull::new(q).ok_or_else(|| c_error(verb, last_errno(), "mlx5dv_create_qp"))?;
        attr.cap = cap_from_c(&ex.cap);
        let dc = is_dc.then_some(mlx5_attr.dc_init_attr.dc_type);
        Ok(self.make_qp(verb, q, &inner, attr, dc))
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_dci_stream_id_reset(&mut self, qp: &HwQp, stream_id: u16) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::Mlx5dvDciStreamIdReset)?;
        // SAFETY: live QP (a DCI with streams, or the library refuses).
        match unsafe { crate::ffi::mlx5dv::mlx5dv_dci_stream_id_reset(p, stream_id) } {
            0 => Ok(()),
            rc => Err(c_error(
                Verb::Mlx5dvDciStreamIdReset,
                rc,
                "mlx5dv_dci_stream_id_reset",
            )),
        }
    }
}

pub(crate) fn sges_to_c(s: &[Sge]) -> Vec<sys::ibv_sge> {
    s.iter()
        .map(|s| sys::ibv_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect()
}

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

/// The file that stands for XRCD number `n`: `$VERBSIM_XRCD_DIR/<n>`, or
/// `<temp dir>/verbsim-xrcd/<n>`, created if missing.
fn xrcd_file(n: u64) -> std::io::Result<std::fs::File> {
    let dir = std::env::var_os("VERBSIM_XRCD_DIR").map_or_else(
        || std::env::temp_dir().join("verbsim-xrcd"),
        std::path::PathBuf::from,
    );
    xrcd_file_in(&dir, n)
}

/// [`xrcd_file`] in `dir`.
fn xrcd_file_in(dir: &std::path::Path, n: u64) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(dir)?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(n.to_string()))
}

fn open_xrcd_impl(
    hw: &HwVerbs,
    ctx: &HwContext,
    verb: Verb,
    mask: XrcdInitAttrMask,
    fd: XrcdFile,
    oflags: OpenFlags,
) -> Result<HwXrcd> {
    let (c, inner) = hw.ctx(ctx, verb)?;
    let mut a: sys::ibv_xrcd_init_attr = zeroed();
    a.comp_mask = mask.bits();
    // A file named by number is a real file, one per number, so that every
    // handle naming the same number names the same inode (the kernel keys
    // shared XRC domains by inode). It stays open for the call only: the
    // domain holds its own reference.
    let file = match fd {
        XrcdFile::Inode(n) => Some(xrcd_file(n).map_err(|e| {
            Error::from_errno(
                verb,
                e.raw_os_error().unwrap_or(errno::EIO),
                format!("the file for XRCD number {n} cannot be opened: {e}"),
            )
        })?),
        _ => None,
    };
    a.fd = match fd {
        XrcdFile::None => -1,
        // An fd no process can have open: the kernel answers EBADF.
        XrcdFile::BadDescriptor => c_int::MAX,
        XrcdFile::Inode(_) => file.as_ref().map_or(-1, std::os::fd::AsRawFd::as_raw_fd),
    };
    a.oflags = oflags.bits() as c_int;
    // SAFETY: live context; `a` is valid; its fd is -1, one that the kernel
    // validates, or `file`'s, open until after the call.
    let x =
        unsafe { fv::ibv_open_xrcd(c, &mut a) }.map_err(|e| c_error(verb, e, "ibv_open_xrcd"))?;
    drop(file);
    Ok(HwXrcd(Arc::new(XrcdInner {
        obj: Owned::new(x, inner),
        id: NEXT_XRCD_ID.fetch_add(1, Ordering::Relaxed),
    })))
}

/// Builds a NULL-terminated `ibv_recv_wr` chain for `wrs` and posts it with
/// `post`, mapping `bad_wr` back to an index.
fn post_recv_chain(
    verb: Verb,
    wrs: &[RecvWr<'_>],
    post: impl FnOnce(*mut sys::ibv_recv_wr, *mut *mut sys::ibv_recv_wr) -> c_int,
) -> Result<()> {
    if wrs.is_empty() {
        return Ok(());
    }
    let mut sges: Vec<Vec<sys::ibv_sge>> = wrs
        .iter()
        .map(|w| {
            w.sg_list
                .iter()
                .map(|s| sys::ibv_sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                })
                .collect()
        })
        .collect();
    let mut cw: Vec<sys::ibv_recv_wr> = Vec::with_capacity(wrs.len());
    for (i, w) in wrs.iter().enumerate() {
        let num_sge = c_int::try_from(w.sg_list.len())
            .map_err(|_| Error::invalid(verb, "too many SGEs").with_bad_wr(i))?;
        cw.push(sys::ibv_recv_wr {
            wr_id: w.wr_id,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge,
        });
    }
    let base = cw.as_mut_ptr();
    for (i, (c, s)) in cw.iter_mut().zip(sges.iter_mut()).enumerate() {
        c.sg_list = if s.is_empty() {
            ptr::null_mut()
        } else {
            s.as_mut_ptr()
        };
        c.next = if i + 1 < wrs.len() {
            // SAFETY: `i + 1 < len`, so the pointer is inside `cw`.
            unsafe { base.add(i + 1) }
        } else {
            ptr::null_mut()
        };
    }
    let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
    let rc = post(base, &mut bad);
    if rc == 0 {
        return Ok(());
    }
    let idx = if bad.is_null() {
        0
    } else {
        (bad as usize - base as usize) / size_of::<sys::ibv_recv_wr>()
    };
    Err(c_error(verb, rc, verb.c_name()).with_bad_wr(idx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_fails_with_a_clear_no_device_error_here() {
        // This machine (and CI) has no RDMA subsystem. Where a device exists,
        // `new` succeeds and there is nothing to check.
        match HwVerbs::new() {
            Ok(_) => eprintln!("an RDMA device is present; skipping the no-device check"),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
                assert_eq!(e.verb(), Verb::GetDeviceList);
                assert!(e.to_string().contains("ibv_get_device_list"), "{e}");
                assert!(!e.message().is_empty());
            }
        }
    }

    #[test]
    fn verbs_without_a_device_fail_cleanly() {
        let mut hw = HwVerbs::unprobed();
        if hw.get_device_list().map(|l| !l.is_empty()).unwrap_or(false) {
            return; // a device is present
        }
        let e = hw.open_device(0, ProcessId(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
        assert_eq!(e.verb(), Verb::OpenDevice);
        assert!(hw.capabilities().is_empty());
        assert_eq!(hw.backend(), BackendKind::Hw);
    }

    #[test]
    fn xrcd_numbers_name_one_inode_each() {
        // Goal: every handle naming XRCD file number n reaches the same
        // inode (the kernel shares domains by inode), different numbers
        // different inodes. Method: a private directory, two opens of one
        // number and one of another, inodes compared.
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("verbsim-xrcd-test-{}", std::process::id()));
        let a = xrcd_file_in(&dir, 7).unwrap().metadata().unwrap().ino();
        let b = xrcd_file_in(&dir, 7).unwrap().metadata().unwrap().ino();
        let c = xrcd_file_in(&dir, 8).unwrap().metadata().unwrap().ino();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn page_buffers_are_aligned_and_zeroed() {
        let b = PageBuf::new(10_000).unwrap();
        assert_eq!(b.ptr.as_ptr() as usize % PAGE, 0);
        // SAFETY: `b` owns `len` initialised bytes.
        let s = unsafe { core::slice::from_raw_parts(b.ptr.as_ptr(), b.len) };
        assert!(s.iter().all(|&x| x == 0));
        assert!(
            PageBuf::new(0).is_some(),
            "a zero-length MR still gets a page"
        );
    }

    // ----------------------------------------------------------------------
    // rdma_cm, events and DC posting without a device
    // ----------------------------------------------------------------------

    #[test]
    fn event_channel_without_kernel_rdma_is_a_clear_error() {
        // Goal: on a machine without kernel RDMA (this one, CI)
        // rdma_create_event_channel fails with a kind and a message naming
        // the C function, the errno and the likely cause; no panic.
        let mut hw = HwVerbs::unprobed();
        match hw.rdma_create_event_channel() {
            Ok(_) => eprintln!("kernel rdma_cm present; skipping the no-RDMA check"),
            Err(e) => {
                eprintln!("{e}");
                assert_eq!(e.verb(), Verb::RdmaCreateEventChannel);
                assert!(!e.is_not_implemented(), "{e}");
                let name = errno::name(e.errno()).unwrap();
                assert!(
                    e.message()
                        .starts_with(&format!("rdma_create_event_channel failed: {name}")),
                    "{e}"
                );
                if e.errno() == errno::ENODEV {
                    assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
                    assert!(e.message().contains("no RDMA device"), "{e}");
                }
            }
        }
    }

    #[test]
    fn cm_verbs_on_a_destroyed_id_name_the_verb_and_do_not_touch_c() {
        // Goal: every rdma_cm verb refuses a stale id or channel with EINVAL
        // and a message, before any C call (the pointers are NULL here, so
        // a C call would crash the test).
        let mut hw = HwVerbs::unprobed();
        let id = HwCmId::stale_for_tests(hw.id);
        let ch = HwCmChannel::stale_for_tests(hw.id);
        let addr: std::net::SocketAddr = "10.0.0.1:7471".parse().unwrap();
        let param = ConnParam::default();
        let pd: Option<&HwPd> = None;
        let mut attr = QpInitAttrEx::default();
        let results: Vec<(Verb, Result<()>)> = vec![
            (
                Verb::RdmaDestroyEventChannel,
                hw.rdma_destroy_event_channel(&ch),
            ),
            (
                Verb::RdmaCreateId,
                hw.rdma_create_id(&ch, 1, PortSpace::Tcp).map(|_| ()),
            ),
            (Verb::RdmaGetCmEvent, hw.rdma_get_cm_event(&ch).map(|_| ())),
            (Verb::RdmaDestroyId, hw.rdma_destroy_id(&id)),
            (Verb::RdmaGetLocalAddr, hw.rdma_id_info(&id).map(|_| ())),
            (Verb::RdmaBindAddr, hw.rdma_bind_addr(&id, addr)),
            (
                Verb::RdmaResolveAddr,
                hw.rdma_resolve_addr(&id, None, addr, 100),
            ),
            (Verb::RdmaResolveRoute, hw.rdma_resolve_route(&id, 100)),
            (Verb::RdmaListen, hw.rdma_listen(&id, 4)),
            (Verb::RdmaConnect, hw.rdma_connect(&id, &param)),
            (Verb::RdmaAccept, hw.rdma_accept(&id, &param)),
            (Verb::RdmaReject, hw.rdma_reject(&id, b"no")),
            (Verb::RdmaDisconnect, hw.rdma_disconnect(&id)),
            (
                Verb::RdmaCreateQp,
                hw.rdma_create_qp(&id, pd, &mut attr).map(|_| ()),
            ),
            (
                Verb::RdmaCreateQpEx,
                hw.rdma_create_qp_ex(&id, &mut attr).map(|_| ()),
            ),
            (Verb::RdmaDestroyQp, hw.rdma_destroy_qp(&id)),
        ];
        for (verb, r) in results {
            let e = r.unwrap_err();
            assert_eq!(e.verb(), verb, "{e}");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.message().contains("already destroyed"), "{e}");
            assert!(e.to_string().starts_with(verb.c_name()), "{e}");
        }
        // Handles of another instance are refused as such.
        let other = HwCmId::stale_for_tests(hw.id + 1_000_000);
        let e = hw.rdma_listen(&other, 1).unwrap_err();
        assert!(e.message().contains("another HwVerbs instance"), "{e}");
    }

    #[test]
    fn verbs_test_device_puts_the_named_device_first() {
        // Goal: issue #20 item 4: VERBS_TEST_DEVICE selects the device it
        // names (index 0 of the backend), and a name that is not there is
        // a clear error listing the devices.
        let names: Vec<String> = ["mlx5_0", "mlx5_1", "rxe0"].map(String::from).to_vec();
        assert_eq!(device_order(&names, None).unwrap(), vec![0, 1, 2]);
        assert_eq!(device_order(&names, Some("mlx5_1")).unwrap(), vec![1, 0, 2]);
        assert_eq!(device_order(&names, Some("rxe0")).unwrap(), vec![2, 0, 1]);
        let e = device_order(&names, Some("mlx5_9")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert!(
            e.message().contains("mlx5_9") && e.message().contains("rxe0"),
            "{e}"
        );
    }

    #[test]
    fn cm_ack_without_a_pending_event_is_einval() {
        // Goal: acknowledging an event that was never fetched (or twice) is
        // refused; C would corrupt the id's event count.
        let mut hw = HwVerbs::unprobed();
        let id = HwCmId::stale_for_tests(hw.id);
        let ev = CmEvent {
            event: CmEventType::Established,
            id,
            listen_id: None,
            status: 0,
            private_data: vec![],
            conn: ConnParam::default(),
            token: 0,
        };
        let e = hw.rdma_ack_cm_event(ev).unwrap_err();
        assert_eq!(e.verb(), Verb::RdmaAckCmEvent);
        assert_eq!(e.errno(), EINVAL);
        assert!(e.message().contains("no unacknowledged ESTABLISHED"), "{e}");
    }

    #[test]
    fn private_data_longer_than_255_bytes_is_einval() {
        // Goal: C's u8 length would silently truncate; we refuse.
        let p = ConnParam {
            private_data: vec![0; 256],
            ..ConnParam::default()
        };
        let e = crate::cm::tests_conn_param(&p).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("256 bytes"), "{e}");
        assert!(crate::cm::tests_conn_param(&ConnParam::default()).is_ok());
    }

    /// A fake device context: a zeroed `verbs_context` whose `async_fd` is
    /// one end of a socket pair, wrapped as a *borrowed* context so that
    /// nothing ever calls `ibv_close_device` on it.
    struct FakeCtx {
        ctx: HwContext,
        _vctx: Box<sys::verbs_context>,
        fds: (
            std::os::unix::net::UnixStream,
            std::os::unix::net::UnixStream,
        ),
    }

    fn fake_ctx(owner: u64) -> FakeCtx {
        use std::os::fd::AsRawFd;
        let fds = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: `verbs_context` is a plain C struct of integers, raw
        // pointers, nullable function pointers and opaque pthread byte
        // arrays: all zero is a valid value.
        let mut v: Box<sys::verbs_context> =
            Box::new(unsafe { core::mem::MaybeUninit::zeroed().assume_init() });
        v.context.async_fd = fds.0.as_raw_fd();
        let raw = &raw mut v.context;
        let ctx = HwContext(Arc::new(ContextInner::new(
            raw,
            owner,
            ProcessId(0),
            "fake0".into(),
            true,
        )));
        FakeCtx { ctx, _vctx: v, fds }
    }

    #[test]
    fn async_events_are_non_blocking() {
        // Goal: with nothing pending, get_async_event returns Ok(None) at
        // once (O_NONBLOCK on async_fd, EAGAIN from the real libibverbs)
        // instead of blocking the thread. Method: a fake context whose
        // async_fd is an empty socket.
        let mut hw = HwVerbs::unprobed();
        let f = fake_ctx(hw.id);
        assert!(hw.get_async_event(&f.ctx).unwrap().is_none());
        assert!(f.ctx.0.async_nonblock.get());
        assert!(hw.get_async_event(&f.ctx).unwrap().is_none());
        // Another instance's context is refused; a closed one is stale.
        let mut other = HwVerbs::unprobed();
        let e = other.get_async_event(&f.ctx).unwrap_err();
        assert!(e.message().contains("another HwVerbs instance"), "{e}");
        f.ctx.0.closed.set(true);
        let e = hw.get_async_event(&f.ctx).unwrap_err();
        assert_eq!(e.verb(), Verb::GetAsyncEvent);
        assert!(e.message().contains("already destroyed"), "{e}");
        drop(f.fds);
    }

    #[test]
    fn cq_events_are_non_blocking_and_acks_are_counted() {
        // Goal: get_cq_event on an empty channel is Ok(None) without
        // blocking; ack_cq_events refuses to acknowledge more than were
        // fetched (C's destroy would then wait forever); ack_async_event
        // refuses an event never fetched. Method: fake channel and CQ.
        use std::os::fd::AsRawFd;
        let mut hw = HwVerbs::unprobed();
        let f = fake_ctx(hw.id);
        let (rx, _tx) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut chan = sys::ibv_comp_channel {
            context: f.ctx.0.raw,
            fd: rx.as_raw_fd(),
            refcnt: 0,
        };
        let ch = HwCompChannel(Arc::new(ChanInner {
            obj: Owned::borrowed(NonNull::from(&mut chan), &f.ctx.0),
            nonblock: Cell::new(false),
        }));
        assert!(hw.get_cq_event(&ch).unwrap().is_none());
        assert!(ch.0.nonblock.get());

        // SAFETY: `ibv_cq` is plain C data (pointers, integers, opaque
        // pthread byte arrays): all zero is valid.
        let mut raw_cq: sys::ibv_cq = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
        let cq = HwCq(Arc::new(CqInner {
            obj: Owned::borrowed(NonNull::from(&mut raw_cq), &f.ctx.0),
            _channel: Some(ch.clone()),
            cq_context: 0,
            ex: None,
        }));
        register_cq(&cq);
        let e = hw.ack_cq_events(&cq, 1).unwrap_err();
        assert_eq!(e.verb(), Verb::AckCqEvents);
        assert!(e.message().contains("only 0 were fetched"), "{e}");
        hw.ack_cq_events(&cq, 0).unwrap();

        let ev = AsyncEvent {
            event_type: AsyncEventType::CqErr,
            element: AsyncElement::Cq(cq.clone()),
            token: 0,
        };
        let e = hw.ack_async_event(&ev).unwrap_err();
        assert_eq!(e.errno(), EINVAL);
        for element in [
            AsyncElement::QpNum(7),
            AsyncElement::Port(1),
            AsyncElement::Device,
        ] {
            let ev = AsyncEvent {
                event_type: AsyncEventType::PortActive,
                element,
                token: 0,
            };
            hw.ack_async_event(&ev).unwrap();
        }

        // The registry maps the CQ's address back to this very handle.
        let found = f.ctx.0.objects.borrow().cqs.get(&raw mut raw_cq as usize);
        assert!(Arc::ptr_eq(&found.unwrap(), &cq.0));
        // A borrowed object is never destroyed by its handle.
        let e = hw.destroy_cq(&cq).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        // A stale channel is refused before C is called.
        ch.0.obj.invalidate();
        let e = hw.get_cq_event(&ch).unwrap_err();
        assert!(e.message().contains("already destroyed"), "{e}");
        cq.0.obj.invalidate();
    }

    #[test]
    fn dc_request_on_a_non_dci_qp_is_bad_wr_zero_and_posts_nothing() {
        // Goal: a WR with DC addressing on an ordinary QP is EINVAL with
        // bad_wr = its index, and nothing before it is sent to C when it is
        // first (a C call on this fake QP would crash the test).
        let mut hw = HwVerbs::unprobed();
        let f = fake_ctx(hw.id);
        // SAFETY: `ibv_qp`/`ibv_ah` are plain C data: all zero is valid.
        let mut raw_qp: sys::ibv_qp = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
        // SAFETY: as above.
        let mut raw_ah: sys::ibv_ah = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
        let qp = HwQp(Arc::new(QpInner {
            obj: Owned::borrowed(NonNull::from(&mut raw_qp), &f.ctx.0),
            qp_num: 1,
            qp_type: QpType::Rc,
            dc_type: None,
            _send_cq: None,
            _recv_cq: None,
            _srq: None,
            _pd: None,
            _xrcd: None,
        }));
        let ah = HwAh(Arc::new(AhInner {
            obj: Owned::borrowed(NonNull::from(&mut raw_ah), &f.ctx.0),
            _pd: HwPd(Arc::new(PdInner {
                obj: Owned::borrowed(NonNull::dangling(), &f.ctx.0),
            })),
        }));
        let wr = SendWr {
            opcode: WrOpcode::RdmaWrite,
            dc: Some(DcInfo {
                ah: &ah,
                remote_dctn: 5,
                remote_dc_key: 6,
                stream_id: 0,
            }),
            ..SendWr::default()
        };
        // SAFETY: nothing reaches the hardware (the request is refused).
        let e = unsafe { hw.post_send(&qp, &[wr]) }.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert_eq!(e.bad_wr(), Some(0));
        assert!(e.message().contains("not a DCI"), "{e}");
        ah.0._pd.0.obj.invalidate();
        ah.0.obj.invalidate();
        qp.0.obj.invalidate();
    }

    #[test]
    fn attribute_conversions_round_trip() {
        let mut a = QpAttr {
            qp_state: QpState::ReadyToSend,
            path_mtu: Mtu::Mtu4096,
            qkey: 0x1111_2222,
            dest_qp_num: 0x42,
            qp_access_flags: AccessFlags(0b111),
            timeout: 14,
            ..QpAttr::default()
        };
        a.ah_attr.grh.dgid = Gid([7; 16]);
        a.ah_attr.is_global = true;
        a.ah_attr.port_num = 1;
        a.cap.max_inline_data = 64;
        assert_eq!(qp_attr_from_c(&qp_attr_to_c(&a)), a);
    }
}
