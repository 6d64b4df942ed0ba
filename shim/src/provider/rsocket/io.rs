//! Data calls: `rsend`, `rsendto`, `rsendmsg`, `rwrite`, `rwritev`,
//! `rrecv`, `rrecvfrom`, `rrecvmsg`, `rread`, `rreadv`, and the direct
//! placement ones, `riomap`, `riounmap`, `riowrite`.

use core::ffi::{c_int, c_void};
use std::net::SocketAddr;
use std::time::Duration;

use super::api::{bad_fd, ret, write_addr};
use super::cm;
use super::conn::{closed_errno, Conn, SLOT};
use super::table::{with_table, Rsock, St, Table};
use crate::export::export;
use crate::provider::state::{with, Fail, Res, Shim, SimRes};

/// The connection of a socket that may carry data (waiting for an
/// accepted one to be established).
fn conn_of<'a>(t: &'a mut Table, v: &str, fd: c_int) -> Res<(&'a mut Rsock, bool)> {
    let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
    match s.st {
        St::Connected => Ok((s, true)),
        St::Accepting | St::Connecting | St::Resolving | St::Routing => Ok((s, false)),
        _ => Err(Fail::new(v, libc::ENOTCONN, "the rsocket is not connected")),
    }
}

/// The caller's buffers as slices.
///
/// # Safety
/// `iov` is NULL or `n` iovecs whose buffers are readable (writable for
/// receives) for their length.
unsafe fn iovs<'a>(iov: *const libc::iovec, n: c_int) -> Res<Vec<&'a mut [u8]>> {
    if n < 0 || (iov.is_null() && n > 0) {
        return Err(Fail {
            errno: libc::EINVAL,
        });
    }
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        // SAFETY: the caller's contract.
        let e = unsafe { *iov.add(i) };
        if e.iov_len == 0 {
            continue;
        }
        if e.iov_base.is_null() {
            return Err(Fail {
                errno: libc::EFAULT,
            });
        }
        // SAFETY: the caller's contract.
        out.push(unsafe { core::slice::from_raw_parts_mut(e.iov_base.cast::<u8>(), e.iov_len) });
    }
    Ok(out)
}

/// One buffer as the list the calls share.
///
/// # Safety
/// `buf` has `len` bytes (readable; writable for receives), or len is 0.
unsafe fn one<'a>(buf: *const c_void, len: usize) -> Res<Vec<&'a mut [u8]>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if buf.is_null() {
        return Err(Fail {
            errno: libc::EFAULT,
        });
    }
    // SAFETY: the caller's contract.
    Ok(vec![unsafe {
        core::slice::from_raw_parts_mut(buf as *mut u8, len)
    }])
}

/// The next message's bytes from the buffers at `(i, off)`: a slice of
/// one buffer, or a gathered copy in `scratch`.
fn next_chunk<'a>(
    bufs: &'a [&mut [u8]],
    i: usize,
    off: usize,
    scratch: &'a mut Vec<u8>,
    limit: usize,
) -> &'a [u8] {
    let first = &bufs[i][off..];
    if first.len() >= limit || i + 1 == bufs.len() {
        return &first[..first.len().min(limit)];
    }
    scratch.clear();
    let (mut j, mut o) = (i, off);
    while scratch.len() < limit && j < bufs.len() {
        let take = (bufs[j].len() - o).min(limit - scratch.len());
        scratch.extend_from_slice(&bufs[j][o..o + take]);
        j += 1;
        o = 0;
    }
    scratch
}

/// Advances `(i, off)` by `n` bytes over `bufs`.
fn advance(bufs: &[&mut [u8]], i: &mut usize, off: &mut usize, mut n: usize) {
    while n > 0 && *i < bufs.len() {
        let take = (bufs[*i].len() - *off).min(n);
        *off += take;
        n -= take;
        if *off == bufs[*i].len() {
            *i += 1;
            *off = 0;
        }
    }
}

/// How a send moves one chunk: a message, or an RDMA WRITE at an offset
/// of the peer's mappings.
#[derive(Clone, Copy)]
enum How {
    Message,
    IoWrite(u64),
}

/// Whether `fd` is a datagram rsocket.
fn is_dgram(fd: c_int) -> bool {
    with_table(|t| t.socks.get(&fd).is_some_and(|s| s.is_dgram))
}

/// Sends one datagram (the buffers gathered) to `to` or the default
/// destination, resolving it first if needed.
fn send_dgram(
    fd: c_int,
    v: &str,
    bufs: &[&mut [u8]],
    flags: c_int,
    to: Option<SocketAddr>,
) -> Res<usize> {
    let data: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
    if data.len() > super::dgram::DG_MAX {
        return Err(Fail::new(
            v,
            libc::EMSGSIZE,
            format!(
                "{} bytes: a datagram holds at most {}",
                data.len(),
                super::dgram::DG_MAX
            ),
        ));
    }
    let nonblock = with_table(|t| t.socks.get(&fd).map(|s| s.nonblock))
        .ok_or_else(|| bad_fd(v, fd))?
        || flags & libc::MSG_DONTWAIT != 0;
    let r = cm::wait(fd, v, false, Some(Duration::from_secs(10)), |t, shim| {
        let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
        if s.shut_wr {
            return Err(Fail::new(
                v,
                libc::EPIPE,
                "the rsocket was shut down for writing",
            ));
        }
        super::api::ensure_bound(s, shim)?;
        let (id, ch) = (s.id, s.ch);
        let d = s
            .dgram
            .as_mut()
            .ok_or_else(|| Fail::new(v, libc::EINVAL, "not bound"))?;
        let dest = to.or(d.default_dest).ok_or_else(|| {
            Fail::new(
                v,
                libc::EDESTADDRREQ,
                "no destination (rsendto's address or rconnect)",
            )
        })?;
        match d.dests.get(&dest) {
            None => {
                let rid = d.start_resolve(shim, v, ch, dest)?;
                t.by_id.insert(rid, fd);
                Ok(None)
            }
            Some(super::dgram::Dest::Resolving) => Ok(None),
            Some(super::dgram::Dest::Failed(e)) => {
                let e = *e;
                d.dests.remove(&dest);
                Err(Fail::new(
                    v,
                    e,
                    format!("{dest} does not resolve to a datagram rsocket"),
                ))
            }
            Some(super::dgram::Dest::Ready { .. }) => {
                if !d.writable() {
                    d.progress(shim, v, id);
                }
                if !d.writable() {
                    return if nonblock {
                        Err(Fail::new(v, libc::EAGAIN, "no free send buffer"))
                    } else {
                        Ok(None)
                    };
                }
                d.send(shim, v, id, dest, &data).map(Some)
            }
        }
    });
    r
}

/// Receives one datagram into the buffers: its length (what fit) and sender.
fn recv_dgram(
    fd: c_int,
    v: &str,
    bufs: &mut [&mut [u8]],
    flags: c_int,
) -> Res<(usize, Option<SocketAddr>)> {
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let nonblock = with_table(|t| t.socks.get(&fd).map(|s| s.nonblock))
        .ok_or_else(|| bad_fd(v, fd))?
        || flags & libc::MSG_DONTWAIT != 0;
    let peek = flags & libc::MSG_PEEK != 0;
    let mut tmp = vec![0u8; total];
    let r = cm::wait(fd, v, nonblock, None, |t, shim| {
        let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
        if s.shut_rd {
            return Ok(Some((0, None)));
        }
        let id = s.id;
        let Some(d) = s.dgram.as_mut() else {
            return Ok(None);
        };
        Ok(d.recv(shim, v, id, &mut tmp, peek)
            .map(|(n, a)| (n, Some(a))))
    })?;
    let mut off = 0;
    for b in bufs.iter_mut() {
        if off >= r.0 {
            break;
        }
        let k = b.len().min(r.0 - off);
        b[..k].copy_from_slice(&tmp[off..off + k]);
        off += k;
    }
    Ok(r)
}

/// Sends the buffers as a stream; the bytes taken.
fn send(fd: c_int, v: &str, bufs: &[&mut [u8]], flags: c_int, how: How) -> Res<usize> {
    if is_dgram(fd) {
        return match how {
            How::Message => send_dgram(fd, v, bufs, flags, None),
            How::IoWrite(_) => Err(Fail::new(
                v,
                libc::EOPNOTSUPP,
                "riowrite on a datagram rsocket",
            )),
        };
    }
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let nonblock = with_table(|t| t.socks.get(&fd).map(|s| s.nonblock))
        .ok_or_else(|| bad_fd(v, fd))?
        || flags & libc::MSG_DONTWAIT != 0;
    let (mut i, mut off, mut sent) = (0usize, 0usize, 0usize);
    let mut scratch = Vec::new();
    let mut round = 0u32;
    while sent < total || (total == 0 && sent == 0 && round == 0) {
        let r = with_table(|t| {
            with(|shim| -> Res<Option<usize>> {
                let (s, up) = conn_of(t, v, fd)?;
                if s.shut_wr {
                    return Err(Fail::new(
                        v,
                        libc::EPIPE,
                        "the rsocket was shut down for writing",
                    ));
                }
                if !up {
                    cm::progress(t, shim, fd, v, true);
                    return Ok(None);
                }
                let c = s
                    .conn
                    .as_mut()
                    .ok_or_else(|| Fail::new(v, libc::ENOTCONN, "no connection"))?;
                if c.broken || s.peer_gone {
                    return Err(Fail::new(v, closed_errno(c), "the connection is gone"));
                }
                if total == 0 {
                    return Ok(Some(0));
                }
                let ready = match how {
                    How::Message => c.can_send(),
                    How::IoWrite(_) => c.can_write(),
                };
                if !ready {
                    c.progress(shim, v);
                    let ready = match how {
                        How::Message => c.can_send(),
                        How::IoWrite(_) => c.can_write(),
                    };
                    if !ready {
                        if round % 16 == 15 {
                            cm::progress(t, shim, fd, v, true);
                        }
                        return Ok(None);
                    }
                }
                match how {
                    How::Message => {
                        let chunk = next_chunk(bufs, i, off, &mut scratch, SLOT);
                        c.send(shim, v, chunk).map(Some)
                    }
                    How::IoWrite(base) => {
                        let at = base + sent as u64;
                        let Some((raddr, room, rkey)) = c.peer_iomap(at) else {
                            return Err(Fail::new(
                                v,
                                libc::EINVAL,
                                format!("offset {at} is in no mapping the peer made with riomap"),
                            ));
                        };
                        let limit = SLOT.min(room.min(usize::MAX as u64) as usize);
                        let chunk = next_chunk(bufs, i, off, &mut scratch, limit);
                        c.write(shim, v, chunk, raddr, rkey).map(Some)
                    }
                }
            })
        });
        match r {
            Ok(Some(n)) => {
                if total == 0 {
                    break;
                }
                advance(bufs, &mut i, &mut off, n);
                sent += n;
                round = 0;
            }
            Ok(None) => {
                if nonblock {
                    break;
                }
                cm::nap(round);
                round = round.saturating_add(1);
            }
            Err(f) if sent > 0 => {
                let _ = f;
                break;
            }
            Err(f) => return Err(f),
        }
    }
    if sent == 0 && total > 0 {
        return Err(Fail::new(
            v,
            libc::EAGAIN,
            "no room to send (O_NONBLOCK or MSG_DONTWAIT)",
        ));
    }
    Ok(sent)
}

/// Reads into the buffers; the bytes read (0 at the end of the stream).
fn recv(fd: c_int, v: &str, bufs: &mut [&mut [u8]], flags: c_int) -> Res<usize> {
    if is_dgram(fd) {
        return recv_dgram(fd, v, bufs, flags).map(|r| r.0);
    }
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let nonblock = with_table(|t| t.socks.get(&fd).map(|s| s.nonblock))
        .ok_or_else(|| bad_fd(v, fd))?
        || flags & libc::MSG_DONTWAIT != 0;
    let peek = flags & libc::MSG_PEEK != 0;
    let waitall = flags & libc::MSG_WAITALL != 0 && !peek;
    let (mut i, mut got) = (0usize, 0usize);
    let mut off = 0usize;
    let mut round = 0u32;
    let mut scratch = Vec::new();
    loop {
        let r = with_table(|t| {
            with(|shim| -> Res<(usize, bool)> {
                let (s, up) = conn_of(t, v, fd)?;
                if s.shut_rd {
                    return Ok((0, true));
                }
                if !up {
                    cm::progress(t, shim, fd, v, true);
                    return Ok((0, false));
                }
                let c = s
                    .conn
                    .as_mut()
                    .ok_or_else(|| Fail::new(v, libc::ENOTCONN, "no connection"))?;
                let mut n = read_into(c, shim, v, bufs, &mut i, &mut off, peek, &mut scratch);
                if n == 0 && !c.readable() {
                    c.progress(shim, v);
                    n = read_into(c, shim, v, bufs, &mut i, &mut off, peek, &mut scratch);
                }
                let mut end = c.eof() || (c.broken && c.readable() && n == 0);
                if n == 0 && !end && round % 16 == 15 {
                    cm::progress(t, shim, fd, v, true);
                    if let Some(c) = t.socks.get(&fd).and_then(|s| s.conn.as_ref()) {
                        end = c.eof() || c.broken;
                    }
                }
                Ok((n, end))
            })
        })?;
        let (n, end) = r;
        got += n;
        if total == 0 || got == total || (got > 0 && !waitall) || end {
            return Ok(got);
        }
        if n > 0 {
            round = 0;
            continue;
        }
        if nonblock {
            if got > 0 {
                return Ok(got);
            }
            return Err(Fail::new(
                v,
                libc::EAGAIN,
                "no data (O_NONBLOCK or MSG_DONTWAIT)",
            ));
        }
        cm::nap(round);
        round = round.saturating_add(1);
    }
}

/// Copies received data into the buffers from `(i, off)` on.
#[allow(clippy::too_many_arguments)]
fn read_into(
    c: &mut Conn,
    shim: &mut Shim,
    v: &str,
    bufs: &mut [&mut [u8]],
    i: &mut usize,
    off: &mut usize,
    peek: bool,
    scratch: &mut Vec<u8>,
) -> usize {
    if *i >= bufs.len() {
        return 0;
    }
    if bufs.len() == 1 || peek {
        if bufs.len() == 1 {
            let n = c.read(shim, v, &mut bufs[0][*off..], peek);
            *off += n;
            return n;
        }
        // Peek over several buffers: one copy, scattered.
        let left: usize = bufs[*i..].iter().map(|b| b.len()).sum::<usize>() - *off;
        scratch.resize(left, 0);
        let n = c.read(shim, v, scratch, true);
        let mut done = 0;
        while done < n {
            let b = &mut bufs[*i][*off..];
            let take = b.len().min(n - done);
            b[..take].copy_from_slice(&scratch[done..done + take]);
            done += take;
            *off += take;
            if *off == bufs[*i].len() {
                *i += 1;
                *off = 0;
            }
        }
        return n;
    }
    let mut n = 0;
    while *i < bufs.len() {
        let k = c.read(shim, v, &mut bufs[*i][*off..], false);
        if k == 0 {
            break;
        }
        n += k;
        *off += k;
        if *off == bufs[*i].len() {
            *i += 1;
            *off = 0;
        }
    }
    n
}

export! { "RDMACM_1.0" fn rsend(socket: c_int, buf: *const c_void, len: usize, flags: c_int) -> isize {
    // SAFETY: the caller's buffer of len bytes.
    ret(unsafe { one(buf, len) }.and_then(|b| send(socket, "rsend", &b, flags, How::Message)).map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rsendto(socket: c_int, buf: *const c_void, len: usize, flags: c_int, dest_addr: *const libc::sockaddr, addrlen: libc::socklen_t) -> isize {
    let v = "rsendto";
    if is_dgram(socket) {
        // SAFETY: the caller's address of addrlen bytes, or NULL (then the
        // default destination).
        let to = if dest_addr.is_null() { Ok(None) } else { unsafe { super::api::read_addr(v, dest_addr, addrlen) }.map(Some) };
        // SAFETY: the caller's buffer of len bytes.
        return ret(to.and_then(|to| unsafe { one(buf, len) }.and_then(|b| send_dgram(socket, v, &b, flags, to))).map(|n| n as isize));
    }
    // A connected stream ignores the address, as TCP does.
    let _ = (dest_addr, addrlen);
    // SAFETY: the caller's buffer of len bytes.
    ret(unsafe { one(buf, len) }.and_then(|b| send(socket, v, &b, flags, How::Message)).map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rsendmsg(socket: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    if msg.is_null() {
        return ret(Err(Fail::new("rsendmsg", libc::EFAULT, "msg is NULL")));
    }
    // SAFETY: the caller's msghdr and its iovecs.
    ret(unsafe { iovs((*msg).msg_iov, (*msg).msg_iovlen as c_int) }
        .and_then(|b| send(socket, "rsendmsg", &b, flags, How::Message))
        .map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rwrite(socket: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: the caller's buffer of count bytes.
    ret(unsafe { one(buf, count) }.and_then(|b| send(socket, "rwrite", &b, 0, How::Message)).map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rwritev(socket: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    // SAFETY: the caller's iovecs.
    ret(unsafe { iovs(iov, iovcnt) }.and_then(|b| send(socket, "rwritev", &b, 0, How::Message)).map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rrecv(socket: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize {
    // SAFETY: the caller's buffer of len bytes.
    ret(unsafe { one(buf, len) }.and_then(|mut b| recv(socket, "rrecv", &mut b, flags)).map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rrecvfrom(socket: c_int, buf: *mut c_void, len: usize, flags: c_int, src_addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t) -> isize {
    let v = "rrecvfrom";
    if is_dgram(socket) {
        // SAFETY: the caller's buffer of len bytes.
        let r = unsafe { one(buf, len) }.and_then(|mut b| recv_dgram(socket, v, &mut b, flags));
        if let Ok((_, Some(src))) = r {
            // SAFETY: the caller's (addr, addrlen), as recvfrom(2) takes them.
            unsafe { write_addr(src, src_addr, addrlen) };
        }
        return ret(r.map(|(n, _)| n as isize));
    }
    // SAFETY: the caller's buffer of len bytes.
    let r = unsafe { one(buf, len) }.and_then(|mut b| recv(socket, v, &mut b, flags));
    if r.is_ok() {
        if let Some(p) = with_table(|t| t.socks.get(&socket).and_then(|s| s.peer)) {
            // SAFETY: the caller's (addr, addrlen), as recvfrom(2) takes them.
            unsafe { write_addr(p, src_addr, addrlen) };
        }
    }
    ret(r.map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rrecvmsg(socket: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    if msg.is_null() {
        return ret(Err(Fail::new("rrecvmsg", libc::EFAULT, "msg is NULL")));
    }
    // SAFETY: the caller's msghdr and its iovecs.
    let r = unsafe { iovs((*msg).msg_iov, (*msg).msg_iovlen as c_int) }
        .and_then(|mut b| recv(socket, "rrecvmsg", &mut b, flags));
    if r.is_ok() {
        // SAFETY: the caller's msghdr; no ancillary data, no flags.
        unsafe {
            (*msg).msg_controllen = 0;
            (*msg).msg_flags = 0;
            if !(*msg).msg_name.is_null() {
                let p = with_table(|t| t.socks.get(&socket).and_then(|s| s.peer));
                if let Some(p) = p {
                    write_addr(p, (*msg).msg_name.cast(), &mut (*msg).msg_namelen);
                }
            }
        }
    }
    ret(r.map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rread(socket: c_int, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: the caller's buffer of count bytes.
    ret(unsafe { one(buf, count) }.and_then(|mut b| recv(socket, "rread", &mut b, 0)).map(|n| n as isize))
}}

export! { "RDMACM_1.0" fn rreadv(socket: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    // SAFETY: the caller's iovecs.
    ret(unsafe { iovs(iov, iovcnt) }.and_then(|mut b| recv(socket, "rreadv", &mut b, 0)).map(|n| n as isize))
}}

/// Retries a control write while the send queue is full.
fn retry_ctrl(
    t: &mut Table,
    shim: &mut Shim,
    fd: c_int,
    v: &str,
    mut f: impl FnMut(&mut Conn, &mut Shim) -> Res<()>,
) -> Res<()> {
    for round in 0..2000u32 {
        let c = t
            .socks
            .get_mut(&fd)
            .and_then(|s| s.conn.as_mut())
            .ok_or_else(|| bad_fd(v, fd))?;
        match f(c, shim) {
            Err(e) if e.errno == libc::EAGAIN => {
                c.progress(shim, v);
                cm::nap(round.min(40));
            }
            r => return r,
        }
    }
    Err(Fail::new(v, libc::EAGAIN, "the send queue stays full"))
}

fn iomap(fd: c_int, buf: *mut c_void, len: usize, prot: c_int, offset: i64) -> Res<i64> {
    let v = "riomap";
    with_table(|t| {
        with(|shim| {
            let s = t.socks.get_mut(&fd).ok_or_else(|| bad_fd(v, fd))?;
            if prot & !(libc::PROT_WRITE | libc::PROT_NONE) != 0 {
                return Err(Fail::new(
                    v,
                    libc::EINVAL,
                    format!("prot {prot:#x}: PROT_WRITE or PROT_NONE"),
                ));
            }
            if buf.is_null() || len == 0 {
                return Err(Fail::new(v, libc::EINVAL, "an empty buffer"));
            }
            let limit = s.opts.iomapsize as usize;
            let c = s.conn.as_mut().ok_or_else(|| {
                Fail::new(
                    v,
                    libc::EINVAL,
                    "the rsocket has no connection (riomap comes after connect or accept)",
                )
            })?;
            let remote = prot & libc::PROT_WRITE != 0;
            let index = if remote {
                let used: Vec<usize> = c.iomaps.iter().filter_map(|m| m.index).collect();
                let i = (0..limit).find(|i| !used.contains(i));
                Some(i.ok_or_else(|| {
                    Fail::new(
                        v,
                        libc::ENOMEM,
                        format!("every remote mapping is in use (RDMA_IOMAPSIZE is {limit})"),
                    )
                })?)
            } else {
                None
            };
            let mut access = verbs_api::AccessFlags::LOCAL_WRITE;
            if remote {
                access |= verbs_api::AccessFlags::REMOTE_WRITE;
            }
            let addr = buf as usize;
            let mr = shim
                .sim
                .reg_mr_app(c.pd, addr as u64, addr, len, access, || {
                    Box::new(crate::appmem::AppMemory::new(addr, len))
                })
                .at(v)?;
            let rkey = shim.sim.mr_info(&mr).at(v)?.rkey;
            let offset = if offset == -1 { addr as i64 } else { offset };
            c.iomaps.push(super::conn::IoMap {
                addr,
                len,
                mr,
                index,
            });
            if let Some(i) = index {
                retry_ctrl(t, shim, fd, v, |c, shim| {
                    c.write_iomap(
                        shim,
                        v,
                        i,
                        Some((offset as u64, addr as u64, len as u64, rkey)),
                    )
                })?;
            }
            Ok(offset)
        })
    })
}

// off_t and size_t results are returned as isize: the same register and
// bits on x86-64, and a panic's failure value (-1) is what C expects.
export! { "RDMACM_1.0" fn riomap(socket: c_int, buf: *mut c_void, len: usize, prot: c_int, flags: c_int, offset: libc::off_t) -> isize {
    let _ = flags;
    ret(iomap(socket, buf, len, prot, offset).map(|o| o as isize))
}}

export! { "RDMACM_1.0" fn riounmap(socket: c_int, buf: *mut c_void, len: usize) -> c_int {
    let v = "riounmap";
    ret(with_table(|t| with(|shim| {
        let s = t.socks.get_mut(&socket).ok_or_else(|| bad_fd(v, socket))?;
        let c = s.conn.as_mut().ok_or_else(|| Fail::new(v, libc::EINVAL, "the rsocket has no mappings"))?;
        let pos = c
            .iomaps
            .iter()
            .position(|m| m.addr == buf as usize && m.len == len)
            .ok_or_else(|| Fail::new(v, libc::EINVAL, "no mapping of that buffer and length"))?;
        let m = c.iomaps.remove(pos);
        if let Some(i) = m.index {
            let _ = retry_ctrl(t, shim, socket, v, |c, shim| c.write_iomap(shim, v, i, None));
            // Let the peer's view change before the memory goes.
            if let Some(c) = t.socks.get_mut(&socket).and_then(|s| s.conn.as_mut()) {
                for _ in 0..200 {
                    c.progress(shim, v);
                    if c.idle() || c.broken {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
        shim.sim.dereg_mr(&m.mr).at(v)?;
        Ok(0)
    })))
}}

export! { "RDMACM_1.0" fn riowrite(socket: c_int, buf: *const c_void, count: usize, offset: libc::off_t, flags: c_int) -> isize {
    let v = "riowrite";
    if offset < 0 {
        return ret(Err(Fail::new(v, libc::EINVAL, "a negative offset")));
    }
    // SAFETY: the caller's buffer of count bytes.
    ret(unsafe { one(buf, count) }.and_then(|b| send(socket, v, &b, flags, How::IoWrite(offset as u64))).map(|n| n as isize))
}}
