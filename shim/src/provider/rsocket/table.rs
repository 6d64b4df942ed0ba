//! The live rsockets, by descriptor number, and the rdma_cm ids and
//! event channels under them.

use core::ffi::c_int;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

use backend_sim::*;
use verbs_api::*;

use super::conn::Conn;

/// Where an rsocket is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum St {
    /// Made by `rsocket` (maybe bound).
    Init,
    /// `rlisten` done.
    Listening,
    /// `rconnect` waits for the address, the route, the peer's answer.
    Resolving,
    Routing,
    Connecting,
    /// `raccept` answered; waits for the connection to be established.
    Accepting,
    /// Data may flow.
    Connected,
    /// The connect failed (`so_error` says why).
    Failed,
}

/// Socket options kept (most only read back, as the simulator's
/// transport has no use for them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Opts {
    pub(crate) reuseaddr: c_int,
    pub(crate) keepalive: c_int,
    pub(crate) keepidle: c_int,
    pub(crate) nodelay: c_int,
    pub(crate) oobinline: c_int,
    pub(crate) sndbuf: c_int,
    pub(crate) rcvbuf: c_int,
    pub(crate) linger: libc::linger,
    pub(crate) v6only: c_int,
    pub(crate) sqsize: u32,
    pub(crate) rqsize: u32,
    pub(crate) inline: u32,
    pub(crate) iomapsize: u32,
}

impl Default for Opts {
    fn default() -> Self {
        let buf = (super::conn::SLOTS as usize * super::conn::SLOT) as c_int;
        Self {
            reuseaddr: 0,
            keepalive: 0,
            keepidle: 7200,
            nodelay: 0,
            oobinline: 0,
            sndbuf: buf,
            rcvbuf: buf,
            linger: libc::linger {
                l_onoff: 0,
                l_linger: 0,
            },
            v6only: 0,
            sqsize: super::conn::SLOTS,
            rqsize: super::conn::SLOTS,
            inline: 0,
            iomapsize: 0,
        }
    }
}

/// An rdma_cm event kept for a socket: the id, the event, its status,
/// private data and UD parameters.
pub(crate) type CmEv = (CmIdHandle, CmEventType, i32, Vec<u8>, Option<UdParam>);

/// One rsocket.
#[derive(Debug)]
pub(crate) struct Rsock {
    pub(crate) domain: c_int,
    pub(crate) nonblock: bool,
    pub(crate) st: St,
    pub(crate) id: CmIdHandle,
    /// Where the id's events arrive (an accepted socket's: its listener's).
    pub(crate) ch: CmChannelHandle,
    /// Connection requests waiting for `raccept`: the new id and the
    /// requester's private data.
    pub(crate) backlog: VecDeque<(CmIdHandle, Vec<u8>)>,
    /// rdma_cm events for this socket's ids, taken off the channel: the
    /// id, the event, its status, private data and UD parameters.
    pub(crate) events: VecDeque<CmEv>,
    pub(crate) conn: Option<Conn>,
    /// A `SOCK_DGRAM` socket (its resources once bound).
    pub(crate) is_dgram: bool,
    pub(crate) dgram: Option<Box<super::dgram::Dgram>>,
    pub(crate) so_error: c_int,
    pub(crate) opts: Opts,
    pub(crate) shut_rd: bool,
    pub(crate) shut_wr: bool,
    /// The peer disconnected (rdma_cm DISCONNECTED).
    pub(crate) peer_gone: bool,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) peer: Option<SocketAddr>,
}

/// Every rsocket of the process.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub(crate) socks: BTreeMap<c_int, Rsock>,
    /// The socket that owns each id.
    pub(crate) by_id: BTreeMap<CmIdHandle, c_int>,
    /// How many sockets use each event channel.
    pub(crate) ch_refs: BTreeMap<CmChannelHandle, u32>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The table's lock (taken before the shim's, never inside it).
pub(crate) fn lock() -> MutexGuard<'static, Option<Table>> {
    TABLE.lock().unwrap_or_else(|p| {
        TABLE.clear_poison();
        p.into_inner()
    })
}

/// Runs `f` on the table.
pub(crate) fn with_table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    let mut g = lock();
    f(g.get_or_insert_with(Table::default))
}

/// Whether `fd` names a live rsocket.
pub(crate) fn is_rsocket(fd: c_int) -> bool {
    lock().as_ref().is_some_and(|t| t.socks.contains_key(&fd))
}
