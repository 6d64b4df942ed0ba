//! What librdmacm's calls share about ids and channels beside the
//! library's state: the fds of the live event channels (read without the
//! library's lock) and the count of an id's events handed out and not
//! acknowledged (what `rdma_destroy_id` and `rdma_migrate_id` wait for).

use core::ffi::c_int;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use backend_sim::*;

use crate::provider::state::{c, Shim};

/// The file descriptors of the live event channels, by C pointer, under a
/// lock of their own: `rdma_get_cm_event` finds its channel's fd without
/// the library's lock, which another thread may hold for a while (a
/// destroy over the fabric is a round trip). A thread that has entered the
/// call so is waiting on the channel, as one inside the kernel's read is,
/// and a destroy that comes after that does not make it fail.
static CHANNEL_FDS: Mutex<BTreeMap<usize, c_int>> = Mutex::new(BTreeMap::new());

fn channel_fds() -> MutexGuard<'static, BTreeMap<usize, c_int>> {
    CHANNEL_FDS.lock().unwrap_or_else(|p| {
        CHANNEL_FDS.clear_poison();
        p.into_inner()
    })
}

/// Records a new event channel's fd (`rdma_create_event_channel`).
pub(super) fn note_channel_fd(channel: *mut c::rdma_event_channel, fd: c_int) {
    channel_fds().insert(channel as usize, fd);
}

/// Forgets a destroyed event channel's fd (`rdma_destroy_event_channel`).
pub(super) fn forget_channel_fd(channel: *mut c::rdma_event_channel) {
    channel_fds().remove(&(channel as usize));
}

/// Whether the id of handle `h` is being destroyed ([`IdEntry::dying`]).
///
/// [`IdEntry::dying`]: crate::provider::records::IdEntry::dying
pub(super) fn dying(shim: &Shim, h: CmIdHandle) -> bool {
    shim.cm
        .id_ptrs
        .get(&h)
        .and_then(|p| shim.cm.ids.get(p))
        .is_some_and(|e| e.dying)
}

/// The fd of live event channel `channel`, if it is one.
pub(super) fn channel_fd(channel: *mut c::rdma_event_channel) -> Option<c_int> {
    channel_fds().get(&(channel as usize)).copied()
}

/// How many events handed out for id `h` wait for `rdma_ack_cm_event`
/// (a connection request counts for its listener, as librdmacm counts it).
pub(super) fn handed_out(shim: &Shim, h: CmIdHandle) -> usize {
    shim.cm
        .events
        .values()
        .filter(|(ev, _)| ev.listen_id.unwrap_or(ev.id) == h)
        .count()
}
