//! Connection management under rsockets: rdma_cm events taken off the
//! channels and handed to the sockets they concern, the connect state
//! machine (address, route, request, answer), accepting, and readiness.

use core::ffi::c_int;
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::conn::{Conn, Hello};
use super::table::{Rsock, St, Table};
use crate::provider::state::{Fail, Res, Shim, SimRes};

/// rdma_cm timeouts the connect steps use (milliseconds).
const RESOLVE_MS: u32 = 2000;

/// The connection parameters both sides use: RC with retries, and the
/// hello in the private data.
pub(crate) fn conn_param(h: &Hello) -> ConnParam {
    ConnParam {
        private_data: h.encode(),
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    }
}

/// Virtual time one waiting step of an rsocket call moves an in-process
/// world on by.
const TICK_NS: u64 = 2_000;

/// In-process world: moves virtual time on by [`TICK_NS`], so that CM
/// messages in flight arrive while a call waits, without racing virtual
/// time to the CM's timeouts (as the simulator's own `rdma_get_cm_event`
/// does on an empty channel) before another thread of the program has
/// answered. A fixed step, not the wall clock: a single-threaded program
/// gets the same trace from the same seed.
pub(crate) fn tick(shim: &mut Shim) {
    shim.sim.advance_ns(TICK_NS);
}

/// Takes every event off channel `ch` and gives each to its socket.
pub(crate) fn pump(t: &mut Table, shim: &mut Shim, ch: CmChannelHandle) {
    for _ in 0..256 {
        // Only events already there: rdma_get_cm_event on an empty
        // channel would run virtual time forward to the next one.
        if shim.sim.cm_channel_pending(ch).unwrap_or(0) == 0 {
            return;
        }
        let ev = match shim.sim.rdma_get_cm_event(&ch) {
            Ok(Some(ev)) => ev,
            _ => return,
        };
        let (kind, id, listen, status, data, ud) = (
            ev.event,
            ev.id,
            ev.listen_id,
            ev.status,
            ev.private_data.clone(),
            ev.ud,
        );
        let _ = shim.sim.rdma_ack_cm_event(ev);
        if kind == CmEventType::ConnectRequest {
            match listen
                .and_then(|l| t.by_id.get(&l))
                .and_then(|fd| t.socks.get_mut(fd))
            {
                Some(l) if l.st == St::Listening => l.backlog.push_back((id, data)),
                Some(l) if l.dgram.is_some() => {
                    // A peer resolves this datagram socket's address.
                    if let Some(d) = l.dgram.as_ref() {
                        d.answer(shim, l.id, id);
                    }
                }
                _ => {
                    let _ = shim.sim.rdma_reject(&id, &[]);
                    let _ = shim.sim.rdma_destroy_id(&id);
                }
            }
            continue;
        }
        if let Some(s) = t.by_id.get(&id).and_then(|fd| t.socks.get_mut(fd)) {
            s.events.push_back((id, kind, status, data, ud));
        }
    }
}

/// Moves a connecting or accepting socket along with its events.
pub(crate) fn drive(t: &mut Table, shim: &mut Shim, fd: c_int) {
    let Some(ch) = t.socks.get(&fd).map(|s| s.ch) else {
        return;
    };
    pump(t, shim, ch);
    let Some(s) = t.socks.get_mut(&fd) else {
        return;
    };
    let mut done = Vec::new();
    while let Some((id, kind, status, data, ud)) = s.events.pop_front() {
        if let Some(d) = s.dgram.as_mut() {
            d.dest_event(shim, id, kind, ud);
            if !d.resolving.contains_key(&id) {
                done.push(id);
            }
            continue;
        }
        step(s, shim, kind, status, &data);
    }
    for id in done {
        t.by_id.remove(&id);
    }
}

fn fail(s: &mut Rsock, errno: c_int) {
    s.st = St::Failed;
    s.so_error = errno;
}

/// One rdma_cm event for socket `s`.
fn step(s: &mut Rsock, shim: &mut Shim, kind: CmEventType, status: i32, data: &[u8]) {
    let v = "rconnect";
    match (s.st, kind) {
        (St::Resolving, CmEventType::AddrResolved) => {
            match shim.sim.rdma_resolve_route(&s.id, RESOLVE_MS) {
                Ok(()) => s.st = St::Routing,
                Err(e) => fail(s, Fail::sim(v, &e).errno),
            }
        }
        (St::Routing, CmEventType::RouteResolved) => {
            let r = (|| -> Res<()> {
                let info = shim.sim.rdma_id_info(&s.id).at(v)?;
                let ctx = info.verbs.ok_or_else(|| {
                    Fail::new(
                        v,
                        libc::ENODEV,
                        "the id has no device after route resolution",
                    )
                })?;
                let c = Conn::new(shim, v, ctx, s.id)?;
                let p = conn_param(&c.hello());
                s.conn = Some(c);
                shim.sim.rdma_connect(&s.id, &p).at(v)
            })();
            match r {
                Ok(()) => s.st = St::Connecting,
                Err(f) => fail(s, f.errno),
            }
        }
        (St::Connecting | St::Accepting, CmEventType::Established) => {
            if s.st == St::Connecting {
                match Hello::decode(data) {
                    Some(h) => {
                        if let Some(c) = s.conn.as_mut() {
                            c.peer = h;
                        }
                    }
                    None => {
                        crate::guard::log_err(
                            v,
                            libc::ECONNREFUSED,
                            &"the peer is not an rsocket (no rsocket data in its answer)",
                        );
                        let _ = shim.sim.rdma_disconnect(&s.id);
                        fail(s, libc::ECONNREFUSED);
                        return;
                    }
                }
            }
            s.st = St::Connected;
            if let Ok(i) = shim.sim.rdma_id_info(&s.id) {
                s.local = i.addrs.local.or(s.local);
                s.peer = i.addrs.peer.or(s.peer);
            }
        }
        (_, CmEventType::Rejected) => fail(s, libc::ECONNREFUSED),
        (_, CmEventType::Unreachable | CmEventType::ConnectError) => fail(
            s,
            if status == -libc::ETIMEDOUT {
                libc::ETIMEDOUT
            } else {
                libc::ECONNREFUSED
            },
        ),
        (_, CmEventType::AddrError | CmEventType::RouteError) => fail(
            s,
            if status < 0 {
                -status
            } else {
                libc::EHOSTUNREACH
            },
        ),
        (_, CmEventType::Disconnected | CmEventType::DeviceRemoval) => s.peer_gone = true,
        _ => {}
    }
}

/// Makes the connection's progress (completions) and the CM's; true if
/// the socket is connected afterwards.
pub(crate) fn progress(t: &mut Table, shim: &mut Shim, fd: c_int, v: &str, cm_too: bool) -> bool {
    tick(shim);
    if t.socks.get(&fd).is_some_and(|s| s.is_dgram) {
        // Every bound datagram socket of the process answers the peers
        // that resolve it (rdma-core runs a service thread for this).
        let others: Vec<CmChannelHandle> = t
            .socks
            .iter()
            .filter(|(&f, s)| f != fd && s.dgram.is_some())
            .map(|(_, s)| s.ch)
            .collect();
        for ch in others {
            pump(t, shim, ch);
        }
        drive(t, shim, fd);
        if let Some(s) = t.socks.get_mut(&fd) {
            let id = s.id;
            if let Some(d) = s.dgram.as_mut() {
                d.progress(shim, v, id);
            }
        }
        return false;
    }
    let st = t.socks.get(&fd).map(|s| s.st);
    if cm_too
        || matches!(
            st,
            Some(St::Resolving | St::Routing | St::Connecting | St::Accepting | St::Listening)
        )
    {
        drive(t, shim, fd);
    }
    let Some(s) = t.socks.get_mut(&fd) else {
        return false;
    };
    if let Some(c) = s.conn.as_mut() {
        c.progress(shim, v);
        if s.peer_gone {
            // The peer left: what it sent is still read, then EOF.
            c.progress(shim, v);
            c.broken = true;
        }
    }
    s.st == St::Connected
}

/// The readiness of rsocket `fd` for `events` (poll's bits).
pub(crate) fn revents(t: &mut Table, shim: &mut Shim, fd: c_int, events: i16) -> i16 {
    progress(t, shim, fd, "rpoll", false);
    let Some(s) = t.socks.get(&fd) else {
        return libc::POLLNVAL;
    };
    let mut r: i16 = 0;
    if s.is_dgram {
        match s.dgram.as_deref() {
            Some(d) => {
                if d.readable() {
                    r |= libc::POLLIN;
                }
                if d.writable() {
                    r |= libc::POLLOUT;
                }
            }
            None => r |= libc::POLLOUT,
        }
        return r & (events | libc::POLLERR | libc::POLLHUP);
    }
    match s.st {
        St::Listening => {
            if !s.backlog.is_empty() {
                r |= libc::POLLIN;
            }
        }
        St::Failed => r |= libc::POLLOUT | libc::POLLERR | libc::POLLHUP,
        St::Init => r |= libc::POLLOUT | libc::POLLHUP,
        St::Resolving | St::Routing | St::Connecting | St::Accepting => {}
        St::Connected => {
            if let Some(c) = &s.conn {
                if c.readable() || s.shut_rd {
                    r |= libc::POLLIN;
                }
                if c.can_send() || c.broken || s.shut_wr {
                    r |= libc::POLLOUT;
                }
                if c.broken && c.readable() && !s.peer_gone {
                    r |= libc::POLLERR;
                }
                if c.eof() && (c.fin_sent || c.broken) {
                    r |= libc::POLLHUP;
                }
            }
        }
    }
    r & (events | libc::POLLERR | libc::POLLHUP)
}

/// Waits a little for the other side (another process on the shared
/// fabric, or another thread here): short at first, longer as it lasts.
pub(crate) fn nap(round: u32) {
    if round < 32 {
        std::thread::yield_now();
    } else if round < 256 {
        std::thread::sleep(Duration::from_micros(20));
    } else {
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Runs `ready` on the socket after each progress step until it returns
/// `Some`, the socket is non-blocking (then `EAGAIN`), or `limit` passes
/// (then `ETIMEDOUT`). Locks are released between steps.
pub(crate) fn wait<R>(
    fd: c_int,
    v: &str,
    nonblock: bool,
    limit: Option<Duration>,
    mut ready: impl FnMut(&mut Table, &mut Shim) -> Res<Option<R>>,
) -> Res<R> {
    let start = Instant::now();
    let mut round = 0u32;
    loop {
        let r = super::table::with_table(|t| {
            crate::provider::state::with(|shim| {
                if !t.socks.contains_key(&fd) {
                    return Err(Fail::new(
                        v,
                        libc::EBADF,
                        "the rsocket was closed while waiting",
                    ));
                }
                if let Some(x) = ready(t, shim)? {
                    return Ok(Some(x));
                }
                let moved = progress(t, shim, fd, v, round % 16 == 15);
                let _ = moved;
                ready(t, shim)
            })
        })?;
        if let Some(x) = r {
            return Ok(x);
        }
        if nonblock {
            return Err(Fail::new(v, libc::EAGAIN, "would block"));
        }
        if limit.is_some_and(|l| start.elapsed() > l) {
            return Err(Fail::new(v, libc::ETIMEDOUT, "timed out"));
        }
        nap(round);
        round = round.saturating_add(1);
    }
}

/// Creates a socket's id on a fresh event channel.
pub(crate) fn new_id(shim: &mut Shim, v: &str, dgram: bool) -> Res<(CmIdHandle, CmChannelHandle)> {
    let ch = shim.sim.rdma_create_event_channel().at(v)?;
    let ps = if dgram {
        PortSpace::Udp
    } else {
        PortSpace::Tcp
    };
    match shim.sim.rdma_create_id(&ch, 0, ps) {
        Ok(id) => Ok((id, ch)),
        Err(e) => {
            let _ = shim.sim.rdma_destroy_event_channel(&ch);
            Err(Fail::sim(v, &e))
        }
    }
}

/// Accepts the first queued request of listener `lfd`: a new connected
/// (or still accepting) socket on descriptor `nfd`.
pub(crate) fn accept_one(
    t: &mut Table,
    shim: &mut Shim,
    lfd: c_int,
    nfd: c_int,
) -> Res<Option<()>> {
    let v = "raccept";
    let Some(l) = t.socks.get_mut(&lfd) else {
        return Err(Fail::new(v, libc::EBADF, "not an rsocket"));
    };
    let Some((id, data)) = l.backlog.pop_front() else {
        return Ok(None);
    };
    let (ch, domain, opts) = (l.ch, l.domain, l.opts);
    let Some(peer) = Hello::decode(&data) else {
        crate::guard::log_err(
            v,
            libc::ECONNREFUSED,
            &"a connection request without rsocket data (not an rsocket peer): rejected",
        );
        let _ = shim.sim.rdma_reject(&id, &[]);
        let _ = shim.sim.rdma_destroy_id(&id);
        return Ok(None);
    };
    let r = (|| -> Res<Conn> {
        let info = shim.sim.rdma_id_info(&id).at(v)?;
        let ctx = info
            .verbs
            .ok_or_else(|| Fail::new(v, libc::ENODEV, "the request's id has no device"))?;
        let mut c = Conn::new(shim, v, ctx, id)?;
        c.peer = peer;
        let p = conn_param(&c.hello());
        if let Err(e) = shim.sim.rdma_accept(&id, &p) {
            c.destroy(shim, id);
            return Err(Fail::sim(v, &e));
        }
        Ok(c)
    })();
    let c = match r {
        Ok(c) => c,
        Err(f) => {
            let _ = shim.sim.rdma_reject(&id, &[]);
            let _ = shim.sim.rdma_destroy_id(&id);
            return Err(f);
        }
    };
    let info = shim.sim.rdma_id_info(&id).ok();
    *t.ch_refs.entry(ch).or_insert(0) += 1;
    t.by_id.insert(id, nfd);
    t.socks.insert(
        nfd,
        Rsock {
            domain,
            nonblock: false,
            st: St::Accepting,
            id,
            ch,
            backlog: Default::default(),
            events: Default::default(),
            conn: Some(c),
            is_dgram: false,
            dgram: None,
            so_error: 0,
            opts: super::table::Opts {
                iomapsize: opts.iomapsize,
                ..Default::default()
            },
            shut_rd: false,
            shut_wr: false,
            peer_gone: false,
            local: info.as_ref().and_then(|i| i.addrs.local),
            peer: info.as_ref().and_then(|i| i.addrs.peer),
        },
    );
    Ok(Some(()))
}

/// Releases everything of socket `fd` (already out of the table's map:
/// `s`): the connection, the id, the channel when no socket uses it.
pub(crate) fn teardown(t: &mut Table, shim: &mut Shim, mut s: Rsock) {
    let v = "rclose";
    if let Some(d) = s.dgram.as_mut() {
        for rid in d.resolving.keys() {
            t.by_id.remove(rid);
        }
        d.destroy(shim, s.id);
    }
    if let Some(c) = s.conn.as_mut() {
        if s.st == St::Connected && !c.broken {
            let _ = c.send_fin(shim, v);
            // Let what is queued leave before the QP goes.
            for _ in 0..1000 {
                c.progress(shim, v);
                if c.idle() || c.broken {
                    break;
                }
                nap(40);
            }
        }
        if matches!(s.st, St::Connected | St::Accepting | St::Connecting) {
            let _ = shim.sim.rdma_disconnect(&s.id);
        }
        c.destroy(shim, s.id);
    }
    for (id, _) in s.backlog.drain(..) {
        let _ = shim.sim.rdma_reject(&id, &[]);
        let _ = shim.sim.rdma_destroy_id(&id);
    }
    t.by_id.remove(&s.id);
    // Events still queued for the id go first (the simulator keeps an id
    // with unacknowledged events).
    pump(t, shim, s.ch);
    if let Err(e) = shim.sim.rdma_destroy_id(&s.id) {
        crate::guard::log_err(v, e.errno(), &e);
    }
    let left = t.ch_refs.get_mut(&s.ch).map(|n| {
        *n = n.saturating_sub(1);
        *n
    });
    if left == Some(0) {
        t.ch_refs.remove(&s.ch);
        if let Err(e) = shim.sim.rdma_destroy_event_channel(&s.ch) {
            crate::guard::log_err(v, e.errno(), &e);
        }
    }
}
