//! The socket-level calls: `rsocket`, `rbind`, `rlisten`, `raccept`,
//! `rconnect`, `rshutdown`, `rclose`, `rgetpeername`, `rgetsockname`,
//! `rsetsockopt`, `rgetsockopt`, `rfcntl`. Each returns what the socket
//! call returns: -1 with `errno` on failure.

use core::ffi::{c_int, c_long, c_void};
use core::mem::size_of;
use core::ptr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

use super::cm;
use super::table::{with_table, Opts, Rsock, St};
use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{with, Fail, Res, SimRes};

/// `SOL_RDMA` (rsocket.h) and its options.
const SOL_RDMA: c_int = 0x10000;
const RDMA_SQSIZE: c_int = 0;
const RDMA_RQSIZE: c_int = 1;
const RDMA_INLINE: c_int = 2;
const RDMA_IOMAPSIZE: c_int = 3;
const RDMA_ROUTE: c_int = 4;

/// The socket calls' convention: the value, or -1 with errno.
pub(crate) fn ret<T: From<i8>>(r: Res<T>) -> T {
    match r {
        Ok(x) => x,
        Err(f) => {
            set_errno(f.errno);
            T::from(-1)
        }
    }
}

/// EBADF unless `fd` is a live rsocket.
pub(crate) fn bad_fd(v: &str, fd: c_int) -> Fail {
    Fail::new(v, libc::EBADF, format!("{fd} is not an rsocket"))
}

/// Reads a caller's sockaddr of `len` bytes (AF_INET or AF_INET6).
///
/// # Safety
/// `sa` is NULL or points to `len` readable bytes.
pub(crate) unsafe fn read_addr(
    v: &str,
    sa: *const libc::sockaddr,
    len: libc::socklen_t,
) -> Res<SocketAddr> {
    let bad = |why: &str| Fail::new(v, libc::EINVAL, why);
    if sa.is_null() {
        return Err(bad("the address is NULL"));
    }
    // SAFETY: the caller's contract; each family is read only if `len`
    // covers its struct.
    unsafe {
        match c_int::from((*sa).sa_family) {
            libc::AF_INET if len as usize >= size_of::<libc::sockaddr_in>() => {
                let s = &*sa.cast::<libc::sockaddr_in>();
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                    u16::from_be(s.sin_port),
                )))
            }
            libc::AF_INET6 if len as usize >= size_of::<libc::sockaddr_in6>() => {
                let s = &*sa.cast::<libc::sockaddr_in6>();
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                )))
            }
            libc::AF_INET | libc::AF_INET6 => {
                Err(bad("the address length is too short for its family"))
            }
            f => Err(Fail::new(
                v,
                libc::EAFNOSUPPORT,
                format!("address family {f}"),
            )),
        }
    }
}

/// Writes `a` to a caller's (addr, addrlen) pair, truncated as sockets do.
///
/// # Safety
/// `addr` is NULL or has `*len` writable bytes; `len` is NULL or readable
/// and writable.
pub(crate) unsafe fn write_addr(
    a: SocketAddr,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) {
    if addr.is_null() || len.is_null() {
        return;
    }
    // SAFETY: zeroed storage is a valid sockaddr_storage.
    let mut st: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let full = match a {
        SocketAddr::V4(v4) => {
            let s = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage holds a sockaddr_in.
            unsafe { ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), s) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let s = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage holds a sockaddr_in6.
            unsafe { ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), s) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: the caller's contract: *len bytes writable at addr.
    unsafe {
        let n = (*len as usize).min(full);
        ptr::copy_nonoverlapping(
            (&st as *const libc::sockaddr_storage).cast::<u8>(),
            addr.cast::<u8>(),
            n,
        );
        *len = full as libc::socklen_t;
    }
}

/// The unspecified address of a domain (for an unbound socket's name).
fn any(domain: c_int) -> SocketAddr {
    if domain == libc::AF_INET6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    }
}

fn socket(domain: c_int, ty: c_int) -> Res<c_int> {
    let v = "rsocket";
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return Err(Fail::new(
            v,
            libc::EAFNOSUPPORT,
            format!("domain {domain}: only AF_INET and AF_INET6"),
        ));
    }
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let dgram = match base {
        libc::SOCK_STREAM => false,
        libc::SOCK_DGRAM => true,
        _ => {
            return Err(Fail::new(
                v,
                libc::EPROTONOSUPPORT,
                format!("socket type {base}"),
            ))
        }
    };
    let fd = crate::provider::fds::new_fd();
    if fd < 0 {
        return Err(Fail::new(
            v,
            libc::EMFILE,
            "no file descriptor for the rsocket",
        ));
    }
    with_table(|t| {
        with(|shim| {
            let (id, ch) = match cm::new_id(shim, v, dgram) {
                Ok(x) => x,
                Err(f) => {
                    crate::provider::fds::close_fd(fd);
                    return Err(f);
                }
            };
            *t.ch_refs.entry(ch).or_insert(0) += 1;
            t.by_id.insert(id, fd);
            t.socks.insert(
                fd,
                Rsock {
                    domain,
                    nonblock: ty & libc::SOCK_NONBLOCK != 0,
                    st: St::Init,
                    id,
                    ch,
                    backlog: Default::default(),
                    events: Default::default(),
                    conn: None,
                    is_dgram: dgram,
                    dgram: None,
                    so_error: 0,
                    opts: Opts::default(),
                    shut_rd: false,
                    shut_wr: false,
                    peer_gone: false,
                    local: None,
                    peer: None,
                },
            );
            Ok(fd)
        })
    })
}

export! { "RDMACM_1.0" fn rsocket(domain: c_int, r#type: c_int, protocol: c_int) -> c_int {
    let _ = protocol;
    ret(socket(domain, r#type))
}}

fn bind(fd: c_int, a: SocketAddr) -> Res<c_int> {
    let v = "rbind";
    with_table(|t| {
        with(|shim| {
            let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
            if s.st != St::Init || s.local.is_some() {
                return Err(Fail::new(v, libc::EINVAL, "the rsocket is already bound"));
            }
            if s.is_dgram {
                bind_dgram(s, shim, a)?;
                return Ok(0);
            }
            let mut r = shim.sim.rdma_bind_addr(&s.id, a);
            if r.is_err() && a.ip().is_unspecified() && a.is_ipv6() {
                // The wildcard of either family listens on every device.
                r = shim.sim.rdma_bind_addr(
                    &s.id,
                    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), a.port()),
                );
            }
            r.at(v)?;
            s.local = shim
                .sim
                .rdma_id_info(&s.id)
                .ok()
                .and_then(|i| i.addrs.local)
                .or(Some(a));
            Ok(0)
        })
    })
}

/// Binds a datagram socket and makes its QP. A wildcard address stands
/// (or the loopback one) stands for device 0's: a datagram socket has
/// one QP, on one device.
fn bind_dgram(s: &mut Rsock, shim: &mut crate::provider::state::Shim, a: SocketAddr) -> Res<()> {
    let v = "rbind";
    let a = if a.ip().is_unspecified() || a.ip().is_loopback() {
        super::dgram::device0(a)
    } else {
        a
    };
    shim.sim.rdma_bind_addr(&s.id, a).at(v)?;
    let local = shim
        .sim
        .rdma_id_info(&s.id)
        .ok()
        .and_then(|i| i.addrs.local)
        .unwrap_or(a);
    s.dgram = Some(Box::new(super::dgram::Dgram::new(shim, v, s.id, local)?));
    s.local = Some(local);
    Ok(())
}

/// A datagram socket bound (to device 0 and an ephemeral port if the
/// program did not bind it), as sendto and connect bind it.
pub(crate) fn ensure_bound(s: &mut Rsock, shim: &mut crate::provider::state::Shim) -> Res<()> {
    if s.dgram.is_some() {
        return Ok(());
    }
    bind_dgram(s, shim, any(s.domain))
}

export! { "RDMACM_1.0" fn rbind(socket: c_int, addr: *const libc::sockaddr, addrlen: libc::socklen_t) -> c_int {
    // SAFETY: the caller's address of addrlen bytes.
    ret(unsafe { read_addr("rbind", addr, addrlen) }.and_then(|a| bind(socket, a)))
}}

export! { "RDMACM_1.0" fn rlisten(socket: c_int, backlog: c_int) -> c_int {
    let v = "rlisten";
    ret(with_table(|t| with(|shim| {
        let s = t.socks.get_mut(&socket).ok_or_else(|| bad_fd(v, socket))?;
        if s.is_dgram {
            return Err(Fail::new(v, libc::EOPNOTSUPP, "a datagram rsocket does not listen"));
        }
        match s.st {
            St::Listening => return Ok(0),
            St::Init => {}
            _ => return Err(Fail::new(v, libc::EINVAL, "the rsocket is connected or connecting")),
        }
        shim.sim.rdma_listen(&s.id, backlog.max(1)).at(v)?;
        s.st = St::Listening;
        Ok(0)
    })))
}}

fn accept(fd: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> Res<c_int> {
    let v = "raccept";
    let nonblock = with_table(|t| match t.socks.get(&fd) {
        Some(s) if s.is_dgram => Err(Fail::new(
            v,
            libc::EOPNOTSUPP,
            "a datagram rsocket does not accept",
        )),
        Some(s) if s.st == St::Listening => Ok(s.nonblock),
        Some(_) => Err(Fail::new(v, libc::EINVAL, "the rsocket is not listening")),
        None => Err(bad_fd(v, fd)),
    })?;
    let nfd = crate::provider::fds::new_fd();
    if nfd < 0 {
        return Err(Fail::new(
            v,
            libc::EMFILE,
            "no file descriptor for the rsocket",
        ));
    }
    if let Err(f) = cm::wait(fd, v, nonblock, None, |t, shim| {
        cm::accept_one(t, shim, fd, nfd)
    }) {
        crate::provider::fds::close_fd(nfd);
        return Err(f);
    }
    // The connection is established once the requester's confirmation
    // arrives; it is on its way.
    let up = cm::wait(nfd, v, false, Some(Duration::from_secs(30)), |t, _| match t
        .socks
        .get_mut(&nfd)
    {
        Some(s) if s.st == St::Connected => Ok(Some(s.peer)),
        Some(s) if s.st == St::Failed => Err(Fail::new(
            v,
            s.so_error,
            "the connection failed before it was established",
        )),
        Some(s) if s.peer_gone => Err(Fail::new(
            v,
            libc::ECONNABORTED,
            "the peer left before the connection was established",
        )),
        _ => Ok(None),
    });
    match up {
        Ok(peer) => {
            if let Some(p) = peer {
                // SAFETY: the caller's (addr, addrlen), as accept(2) takes them.
                unsafe { write_addr(p, addr, len) };
            }
            Ok(nfd)
        }
        Err(f) => {
            close(nfd);
            Err(f)
        }
    }
}

export! { "RDMACM_1.0" fn raccept(socket: c_int, addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t) -> c_int {
    ret(accept(socket, addr, addrlen))
}}

fn connect(fd: c_int, a: SocketAddr) -> Res<c_int> {
    let v = "rconnect";
    let nonblock = with_table(|t| {
        with(|shim| {
            let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
            if s.is_dgram {
                // A datagram socket's connect names the default destination.
                ensure_bound(s, shim)?;
                let id = s.id;
                let ch = s.ch;
                let d = s
                    .dgram
                    .as_mut()
                    .ok_or_else(|| Fail::new(v, libc::EINVAL, "not bound"))?;
                d.default_dest = Some(a);
                s.peer = Some(a);
                if !d.dests.contains_key(&a) {
                    let rid = d.start_resolve(shim, v, ch, a)?;
                    t.by_id.insert(rid, fd);
                }
                let _ = id;
                return Ok(None);
            }
            match s.st {
                St::Init => {}
                St::Connected => return Err(Fail::new(v, libc::EISCONN, "already connected")),
                St::Listening => return Err(Fail::new(v, libc::EINVAL, "the rsocket listens")),
                St::Failed => {
                    let e = core::mem::take(&mut s.so_error);
                    return Err(Fail::new(
                        v,
                        if e == 0 { libc::ECONNABORTED } else { e },
                        "the earlier connect failed",
                    ));
                }
                _ if s.nonblock => {
                    return Err(Fail::new(v, libc::EALREADY, "a connect is in progress"))
                }
                _ => return Ok(Some(false)),
            }
            let src = s.local;
            shim.sim
                .rdma_resolve_addr(&s.id, src, a, 2000)
                .map_err(|e| {
                    let f = Fail::sim(v, &e);
                    if f.errno == libc::EINVAL {
                        Fail {
                            errno: libc::EHOSTUNREACH,
                        }
                    } else {
                        f
                    }
                })?;
            s.peer = Some(a);
            s.st = St::Resolving;
            Ok(Some(s.nonblock))
        })
    })?;
    let Some(nonblock) = nonblock else {
        return Ok(0);
    };
    if nonblock {
        return Err(Fail::new(v, libc::EINPROGRESS, "connecting (O_NONBLOCK)"));
    }
    cm::wait(fd, v, false, None, |t, _| {
        let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
        match s.st {
            St::Connected => Ok(Some(0)),
            St::Failed => {
                let e = core::mem::take(&mut s.so_error);
                s.st = St::Init;
                Err(Fail::new(v, e, "the connection was not made"))
            }
            _ => Ok(None),
        }
    })
}

export! { "RDMACM_1.0" fn rconnect(socket: c_int, addr: *const libc::sockaddr, addrlen: libc::socklen_t) -> c_int {
    // SAFETY: the caller's address of addrlen bytes.
    ret(unsafe { read_addr("rconnect", addr, addrlen) }.and_then(|a| connect(socket, a)))
}}

export! { "RDMACM_1.0" fn rshutdown(socket: c_int, how: c_int) -> c_int {
    let v = "rshutdown";
    if !(libc::SHUT_RD..=libc::SHUT_RDWR).contains(&how) {
        set_errno(libc::EINVAL);
        return -1;
    }
    ret(cm::wait(socket, v, false, Some(Duration::from_secs(10)), |t, shim| {
        let s = t.socks.get_mut(&socket).ok_or_else(|| bad_fd(v, socket))?;
        if s.is_dgram {
            if s.peer.is_none() {
                return Err(Fail::new(v, libc::ENOTCONN, "the rsocket is not connected"));
            }
            s.shut_rd |= how != libc::SHUT_WR;
            s.shut_wr |= how != libc::SHUT_RD;
            return Ok(Some(0));
        }
        if s.st != St::Connected {
            return Err(Fail::new(v, libc::ENOTCONN, "the rsocket is not connected"));
        }
        if how != libc::SHUT_WR {
            s.shut_rd = true;
        }
        if how != libc::SHUT_RD && !s.shut_wr {
            if let Some(c) = s.conn.as_mut() {
                if c.send_fin(shim, v).is_err() {
                    return Ok(None);
                }
            }
            s.shut_wr = true;
        }
        Ok(Some(0))
    }))
}}

/// Closes rsocket `fd` (and its descriptor); false if it was none.
pub(crate) fn close(fd: c_int) -> bool {
    let found = with_table(|t| {
        let Some(s) = t.socks.remove(&fd) else {
            return false;
        };
        with(|shim| cm::teardown(t, shim, s));
        true
    });
    if found {
        crate::provider::fds::close_fd(fd);
    }
    found
}

export! { "RDMACM_1.0" fn rclose(socket: c_int) -> c_int {
    if close(socket) {
        0
    } else {
        crate::guard::log_err("rclose", libc::EBADF, &format_args!("{socket} is not an rsocket"));
        set_errno(libc::EBADF);
        -1
    }
}}

fn name(
    fd: c_int,
    v: &str,
    peer: bool,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> Res<c_int> {
    if addr.is_null() || len.is_null() {
        return Err(Fail::new(v, libc::EFAULT, "addr or addrlen is NULL"));
    }
    let a = with_table(|t| {
        with(|shim| {
            let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
            if peer && s.is_dgram {
                return s.peer.ok_or_else(|| {
                    Fail::new(v, libc::ENOTCONN, "no default destination (rconnect)")
                });
            }
            if peer {
                if s.st != St::Connected {
                    return Err(Fail::new(v, libc::ENOTCONN, "the rsocket is not connected"));
                }
                return s
                    .peer
                    .ok_or_else(|| Fail::new(v, libc::ENOTCONN, "no peer address"));
            }
            if let Some(l) = shim
                .sim
                .rdma_id_info(&s.id)
                .ok()
                .and_then(|i| i.addrs.local)
            {
                s.local = Some(l);
            }
            Ok(s.local.unwrap_or_else(|| any(s.domain)))
        })
    })?;
    // SAFETY: the caller's (addr, addrlen), non-NULL.
    unsafe { write_addr(a, addr, len) };
    Ok(0)
}

export! { "RDMACM_1.0" fn rgetpeername(socket: c_int, addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t) -> c_int {
    ret(name(socket, "rgetpeername", true, addr, addrlen))
}}

export! { "RDMACM_1.0" fn rgetsockname(socket: c_int, addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t) -> c_int {
    ret(name(socket, "rgetsockname", false, addr, addrlen))
}}

/// Reads an int option value.
///
/// # Safety
/// `p` is NULL or has `len` readable bytes.
unsafe fn int_opt(v: &str, p: *const c_void, len: libc::socklen_t) -> Res<c_int> {
    if p.is_null() || (len as usize) < size_of::<c_int>() {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "the option value is NULL or shorter than an int",
        ));
    }
    // SAFETY: non-NULL with at least an int's bytes (checked).
    Ok(unsafe { p.cast::<c_int>().read_unaligned() })
}

fn setsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    val: *const c_void,
    len: libc::socklen_t,
) -> Res<c_int> {
    let v = "rsetsockopt";
    with_table(|t| {
        let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
        let o = &mut s.opts;
        let int = || {
            // SAFETY: the caller's value of `len` bytes (int_opt checks
            // NULL and the length).
            unsafe { int_opt(v, val, len) }
        };
        match (level, opt) {
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = int()?,
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive = int()?,
            (libc::SOL_SOCKET, libc::SO_OOBINLINE) => o.oobinline = int()?,
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => o.sndbuf = int()?,
            (libc::SOL_SOCKET, libc::SO_RCVBUF) => o.rcvbuf = int()?,
            (libc::SOL_SOCKET, libc::SO_LINGER) => {
                if val.is_null() || (len as usize) < size_of::<libc::linger>() {
                    return Err(Fail::new(
                        v,
                        libc::EINVAL,
                        "SO_LINGER takes a struct linger",
                    ));
                }
                // SAFETY: non-NULL, a linger's bytes (checked).
                o.linger = unsafe { val.cast::<libc::linger>().read_unaligned() };
            }
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.nodelay = int()?,
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => o.keepidle = int()?,
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
                int()?;
            }
            (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => o.v6only = int()?,
            (SOL_RDMA, RDMA_SQSIZE | RDMA_RQSIZE | RDMA_INLINE | RDMA_IOMAPSIZE) => {
                if s.conn.is_some() {
                    return Err(Fail::new(
                        v,
                        libc::EINVAL,
                        "SOL_RDMA options are set before the connection",
                    ));
                }
                let n = int()?.max(0) as u32;
                match opt {
                    RDMA_SQSIZE => o.sqsize = n,
                    RDMA_RQSIZE => o.rqsize = n,
                    RDMA_INLINE => o.inline = n,
                    _ => o.iomapsize = n.min(super::conn::MAX_IOMAP as u32),
                }
            }
            (SOL_RDMA, RDMA_ROUTE) => {
                return Err(Fail::new(v, libc::EOPNOTSUPP, "RDMA_ROUTE (a path record) is not modelled; the simulator resolves routes itself"));
            }
            _ => {
                return Err(Fail::new(
                    v,
                    libc::ENOTSUP,
                    format!("option level {level} name {opt}"),
                ))
            }
        }
        Ok(0)
    })
}

export! { "RDMACM_1.0" fn rsetsockopt(socket: c_int, level: c_int, optname: c_int, optval: *const c_void, optlen: libc::socklen_t) -> c_int {
    ret(setsockopt(socket, level, optname, optval, optlen))
}}

fn getsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    val: *mut c_void,
    len: *mut libc::socklen_t,
) -> Res<c_int> {
    let v = "rgetsockopt";
    if val.is_null() || len.is_null() {
        return Err(Fail::new(v, libc::EFAULT, "optval or optlen is NULL"));
    }
    with_table(|t| {
        let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
        let o = s.opts;
        let int: c_int = match (level, opt) {
            (libc::SOL_SOCKET, libc::SO_ERROR) => core::mem::take(&mut s.so_error),
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr,
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive,
            (libc::SOL_SOCKET, libc::SO_OOBINLINE) => o.oobinline,
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => o.sndbuf,
            (libc::SOL_SOCKET, libc::SO_RCVBUF) => o.rcvbuf,
            (libc::SOL_SOCKET, libc::SO_LINGER) => {
                // SAFETY: the caller's buffer of *len bytes.
                unsafe {
                    let n = (*len as usize).min(size_of::<libc::linger>());
                    ptr::copy_nonoverlapping(
                        (&o.linger as *const libc::linger).cast::<u8>(),
                        val.cast::<u8>(),
                        n,
                    );
                    *len = size_of::<libc::linger>() as libc::socklen_t;
                }
                return Ok(0);
            }
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.nodelay,
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => o.keepidle,
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => super::conn::SLOT as c_int,
            (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => o.v6only,
            (SOL_RDMA, RDMA_SQSIZE) => o.sqsize as c_int,
            (SOL_RDMA, RDMA_RQSIZE) => o.rqsize as c_int,
            (SOL_RDMA, RDMA_INLINE) => o.inline as c_int,
            (SOL_RDMA, RDMA_IOMAPSIZE) => o.iomapsize as c_int,
            _ => {
                return Err(Fail::new(
                    v,
                    libc::ENOTSUP,
                    format!("option level {level} name {opt}"),
                ))
            }
        };
        // SAFETY: the caller's buffer of *len bytes (non-NULL, checked).
        unsafe {
            let n = (*len as usize).min(size_of::<c_int>());
            ptr::copy_nonoverlapping((&int as *const c_int).cast::<u8>(), val.cast::<u8>(), n);
            *len = size_of::<c_int>() as libc::socklen_t;
        }
        Ok(0)
    })
}

export! { "RDMACM_1.0" fn rgetsockopt(socket: c_int, level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut libc::socklen_t) -> c_int {
    ret(getsockopt(socket, level, optname, optval, optlen))
}}

// rfcntl is variadic in C; on x86-64 (System V) an int or long third
// argument arrives in the same register as a fixed one, so the fixed
// form reads it.
export! { "RDMACM_1.0" fn rfcntl(socket: c_int, cmd: c_int, arg: c_long) -> c_int {
    let v = "rfcntl";
    ret(with_table(|t| {
        let s = t.socks.get_mut(&socket).ok_or_else(|| bad_fd(v, socket))?;
        match cmd {
            libc::F_GETFL => Ok(libc::O_RDWR | if s.nonblock { libc::O_NONBLOCK } else { 0 }),
            libc::F_SETFL => {
                s.nonblock = arg as c_int & libc::O_NONBLOCK != 0;
                Ok(0)
            }
            _ => Err(Fail::new(v, libc::ENOTSUP, format!("command {cmd}: only F_GETFL and F_SETFL"))),
        }
    }))
}}
