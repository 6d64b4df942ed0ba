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
use core::ffi::c_void;
use core::fmt;
use core::ptr::{self};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::{ENODEV, EPERM};
use verbs_api::*;

use crate::convert::zeroed;
use crate::errors::{foreign, stale};
use crate::ffi::verbs::last_errno;
use crate::handles::{HwCompChannel, HwCq, HwPd, HwQp};
use crate::registry::{Live, PtrRegistry};

mod event;
mod id;
mod mcast;
mod qp;

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

/// `conn_param_to_c`, for the tests in `hw/tests.rs`.
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
