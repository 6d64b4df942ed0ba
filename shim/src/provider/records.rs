//! The records the registry (`Shim`, in `state`) keeps beside its C
//! objects: librdmacm's ids and channels, the post-time scratch buffers,
//! the inline bounce buffers, the async-event ledger. Plain data; the
//! modules that own each concern work on them.

use core::ffi::c_int;
use std::collections::BTreeMap;

use backend_sim::*;
use verbs_api::*;

use crate::sys as c;

/// An id the library handed out.
#[derive(Debug)]
pub(crate) struct IdEntry {
    pub(crate) handle: CmIdHandle,
    /// Created with a NULL channel: calls wait for their own events.
    pub(crate) sync: bool,
    /// A sync id's channel is its own (made by `rdma_create_id`), not its
    /// listener's: destroying the id destroys the channel.
    pub(crate) owns_channel: bool,
    /// A sync id whose `rdma_disconnect` has had its DISCONNECTED: a
    /// second call has nothing more to wait for.
    pub(crate) disconnected: bool,
    /// The channel its events go to (the internal one of a sync id).
    pub(crate) channel: CmChannelHandle,
    /// A passive endpoint's QP recipe (`rdma_create_ep` with
    /// `RAI_PASSIVE`): librdmacm keeps the PD and a copy of the attributes
    /// and creates each accepted id's QP in `rdma_get_request`.
    pub(crate) passive_qp: Option<(usize, c::ibv_qp_init_attr)>,
    /// Bound or resolved with `AF_IB` addresses: `rdma_get_local_addr`
    /// and `rdma_get_peer_addr` read `struct sockaddr_ib` (the ids a
    /// listener's CONNECT_REQUEST brings inherit it, as the kernel's do).
    pub(crate) af_ib: bool,
    /// `rdma_destroy_id` is waiting for the id's events already handed
    /// out to be acknowledged: from then on, no event of the id (nor a
    /// connection request of a listening id) is handed out any more.
    pub(crate) dying: bool,
}

/// An event channel the library handed out.
#[derive(Debug)]
pub(crate) struct ChannelEntry {
    pub(crate) handle: CmChannelHandle,
    pub(crate) fd: c_int,
    pub(crate) signaled: bool,
}

/// librdmacm's objects, by C pointer.
#[derive(Debug, Default)]
pub(crate) struct CmState {
    pub(crate) channels: BTreeMap<usize, ChannelEntry>,
    pub(crate) ids: BTreeMap<usize, IdEntry>,
    pub(crate) id_ptrs: BTreeMap<CmIdHandle, usize>,
    /// Events handed out and not acknowledged: the event and its private data.
    pub(crate) events: BTreeMap<usize, (CmEvent<SimVerbs>, Box<[u8]>)>,
    /// Events of sync ids taken off a shared channel while another id of
    /// it waited, kept for their own id (see `next_sync_event`).
    pub(crate) stash: BTreeMap<CmIdHandle, std::collections::VecDeque<CmEvent<SimVerbs>>>,
    /// Contexts `rdma_get_devices` lists (one per device, opened once).
    pub(crate) devices: Vec<usize>,
    /// Arrays `rdma_get_devices` returned.
    pub(crate) device_lists: BTreeMap<usize, ()>,
}

/// Buffers `ibv_post_send`/`ibv_post_recv` gather a chain of C work
/// requests into, kept in [`Shim`](crate::provider::state::Shim) from call to call so that posting
/// allocates nothing once they have grown to the longest chain seen.
#[derive(Default)]
pub(crate) struct PostScratch {
    /// The chain's WRs, as addresses, in order.
    pub(crate) ptrs: Vec<usize>,
    /// Every WR's SGEs, one after the other.
    pub(crate) sg: Vec<Sge>,
    /// The SGEs of WR *i*: `sg[ranges[i]]`.
    pub(crate) ranges: Vec<core::ops::Range<usize>>,
    /// The inline bytes of WR *i* (0: not copied at post).
    pub(crate) inline: Vec<usize>,
}

impl PostScratch {
    pub(crate) fn clear(&mut self) {
        self.ptrs.clear();
        self.sg.clear();
        self.ranges.clear();
        self.inline.clear();
    }
}

/// A QP's bounce buffer for inline data.
#[derive(Debug)]
pub(crate) struct Bounce {
    pub(crate) buf: Box<[u8]>,
    pub(crate) mr: MrHandle,
    /// The MR's lkey (asked once: over the shared fabric each question is
    /// a round trip).
    pub(crate) lkey: u32,
}

/// Unacknowledged async events: (token, type, element) in the order handed out.
pub(crate) type AsyncLedger = Vec<(u64, u32, usize)>;
