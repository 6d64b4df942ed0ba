//! The drop-in `librdmacm.so.1` (issue #14 item 2) over the simulator's
//! connection manager: event channels with real file descriptors, ids in
//! the asynchronous mode (events through `rdma_get_cm_event`) and the
//! synchronous one (a NULL channel: each call waits for its own event, as
//! librdmacm does), `rdma_create_qp` with its default PD and automatic CQs,
//! `rdma_getaddrinfo` for numeric addresses, `rdma_create_ep` and
//! `rdma_get_request`, `rdma_establish` for ids without a QP, and CM
//! multicast (`rdma_join_multicast(_ex)`, `rdma_leave_multicast`, with
//! `param.ud` of `MULTICAST_JOIN` filled), `AF_IB` addresses (`struct
//! sockaddr_ib`) in binds and resolves. What the simulator lacks (ECE
//! over the CM, ...) fails with `EOPNOTSUPP`.
//!
//! librdmacm's convention: 0, or -1 with `errno`.

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;
use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use backend_sim::*;
use verbs_api::*;

use crate::export::export;

mod extra;
use crate::guard::set_errno;
use crate::provider::records::{ChannelEntry, IdEntry};
use crate::provider::state::handle_of;
use crate::provider::state::sync_fds;
use crate::provider::state::{self, c, with, Fail, Obj, Res, Shim, SimRes};

/// `RAI_PASSIVE` (rdma_cma.h): the address is the local one, to listen on.
const RAI_PASSIVE: c_int = 1;
/// `RAI_NUMERICHOST`.
const RAI_NUMERICHOST: c_int = 2;

/// librdmacm's return: 0, or -1 with errno.
fn ret(r: Res<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}

fn id_entry<'a>(shim: &'a Shim, v: &str, id: *mut c::rdma_cm_id) -> Res<&'a IdEntry> {
    shim.cm
        .ids
        .get(&(id as usize))
        .ok_or_else(|| Fail::bad_ptr(v, "rdma_cm_id", id.cast()))
}

// ------------------------------------------------------------- sockaddrs

/// Reads a C `struct sockaddr` (AF_INET or AF_INET6).
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
unsafe fn read_sockaddr(sa: *const c::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller's contract; the family selects the layout.
    unsafe {
        match c_int::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*sa.cast::<libc::sockaddr_in>();
                let ip = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(s.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let s = &*sa.cast::<libc::sockaddr_in6>();
                let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// `AF_IB` (rdma-core's `<infiniband/ib.h>`: `struct sockaddr_ib`).
const AF_IB: c_int = 27;

/// The IP address `sa` names, for verb `v`: `EOPNOTSUPP` for an `AF_IB`
/// address where `AF_IB` is not modelled (multicast joins, `mckey -M`;
/// binding and resolving take them through [`cm_sockaddr`]), `EINVAL` for
/// NULL or another family.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
unsafe fn need_sockaddr(v: &str, sa: *const c::sockaddr, what: &str) -> Res<SocketAddr> {
    // SAFETY: the caller's contract; the family is the first field of every sockaddr.
    if !sa.is_null() && c_int::from(unsafe { (*sa).sa_family }) == AF_IB {
        return Err(Fail::new(
            v,
            libc::EOPNOTSUPP,
            format!("{what} is an AF_IB address (struct sockaddr_ib): not modelled here, the simulated CM joins multicast groups by IPv4 and IPv6 addresses only (docs/divergence.md)"),
        ));
    }
    // SAFETY: the caller's contract.
    unsafe { read_sockaddr(sa) }.ok_or_else(|| {
        Fail::new(
            v,
            libc::EINVAL,
            format!("{what} is NULL or not AF_INET/AF_INET6"),
        )
    })
}

/// The size of `struct sockaddr_ib` (`<infiniband/ib.h>`): family, P_Key,
/// flow label, GID (`sib_addr`), service id, service-id mask, scope id.
const SOCKADDR_IB_LEN: usize = 48;

/// GID 0 of device `dev`'s port 1: the link-local prefix and the node
/// GUID (what `ibv_query_gid(ctx, 1, 0)` reports in the simulator).
fn device_gid0(shim: &mut Shim, v: &str, dev: usize) -> Res<[u8; 16]> {
    let list = shim.sim.get_device_list().at(v)?;
    let guid = list
        .get(dev)
        .map(|d| d.guid)
        .ok_or_else(|| Fail::new(v, libc::ENODEV, format!("no simulated device {dev}")))?;
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    Ok(g)
}

/// The simulated device whose port 1 has `ip` (loopback: device 0).
fn device_of_ip(shim: &mut Shim, v: &str, ip: IpAddr) -> Res<Option<usize>> {
    let n = shim.sim.get_device_list().at(v)?.len();
    if ip.is_loopback() {
        return Ok((n > 0).then_some(0));
    }
    Ok((0..n).find(|&d| match ip {
        IpAddr::V4(a) => a == device_ipv4(d as u32),
        IpAddr::V6(a) => a == device_ipv6(d as u32),
    }))
}

/// The address an `AF_IB` or IP sockaddr names in the simulated CM, and
/// whether it was `AF_IB`. An `AF_IB` address (`struct sockaddr_ib`) names
/// a port by its GID (`sib_addr`; all zero is any port) and a service by
/// its id (`sib_sid`: the port space in bits 16..31, the port in the low 16
/// bits, as the kernel's CM builds it); the simulated CM, which keys ports
/// by IP address, takes it as that port's IPv6 address and that port
/// number. A GID no simulated port has is `EADDRNOTAVAIL`.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
unsafe fn cm_sockaddr(
    shim: &mut Shim,
    v: &str,
    sa: *const c::sockaddr,
    what: &str,
) -> Res<(SocketAddr, bool)> {
    // SAFETY: the caller's contract; the family is the first field of every sockaddr.
    if sa.is_null() || c_int::from(unsafe { (*sa).sa_family }) != AF_IB {
        // SAFETY: the caller's contract.
        return unsafe { need_sockaddr(v, sa, what) }.map(|a| (a, false));
    }
    let mut b = [0u8; SOCKADDR_IB_LEN];
    // SAFETY: an AF_IB sockaddr is a struct sockaddr_ib of SOCKADDR_IB_LEN bytes.
    unsafe { ptr::copy_nonoverlapping(sa.cast::<u8>(), b.as_mut_ptr(), SOCKADDR_IB_LEN) };
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&b[8..24]);
    let sid = u64::from_be_bytes(b[24..32].try_into().unwrap_or_default());
    let port = (sid & 0xffff) as u16;
    if gid == [0u8; 16] {
        return Ok((
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            true,
        ));
    }
    let n = shim.sim.get_device_list().at(v)?.len();
    for d in 0..n {
        if device_gid0(shim, v, d)? == gid {
            return Ok((
                SocketAddr::new(IpAddr::V6(device_ipv6(d as u32)), port),
                true,
            ));
        }
    }
    Err(Fail::new(
        v,
        libc::EADDRNOTAVAIL,
        format!(
            "{what} is an AF_IB address whose GID {} is no simulated port's",
            Ipv6Addr::from(gid)
        ),
    ))
}

/// Records that `id` now uses `AF_IB` addresses (or IP ones).
fn mark_af_ib(shim: &mut Shim, id: *mut c::rdma_cm_id, ib: bool) {
    if let Some(e) = shim.cm.ids.get_mut(&(id as usize)) {
        e.af_ib = ib;
    }
}

/// Writes `a` as a `struct sockaddr_ib` into `storage`: the GID of the
/// port that has `a`'s address (zero for any, or none), the service id of
/// port space `ps` and `a`'s port, a full service-id mask, the default
/// P_Key. Nothing when `a` is `None` (an unset address).
fn write_sockaddr_ib(
    shim: &mut Shim,
    storage: &mut c::sockaddr_storage,
    a: Option<SocketAddr>,
    ps: u32,
) {
    *storage = c::sockaddr_storage::default();
    let Some(a) = a else { return };
    let v = "rdma_get_local_addr";
    let gid = if a.ip().is_unspecified() {
        [0u8; 16]
    } else {
        match device_of_ip(shim, v, a.ip()) {
            Ok(Some(d)) => device_gid0(shim, v, d).unwrap_or_default(),
            _ => [0u8; 16],
        }
    };
    let mut b = [0u8; SOCKADDR_IB_LEN];
    b[..2].copy_from_slice(&(AF_IB as u16).to_ne_bytes());
    b[2..4].copy_from_slice(&0xffffu16.to_be_bytes());
    b[8..24].copy_from_slice(&gid);
    let sid = (u64::from(ps & 0xffff) << 16) | u64::from(a.port());
    b[24..32].copy_from_slice(&sid.to_be_bytes());
    b[32..40].copy_from_slice(&u64::MAX.to_be_bytes());
    // SAFETY: sockaddr_storage (128 bytes) holds a sockaddr_ib (48).
    unsafe {
        ptr::copy_nonoverlapping(
            b.as_ptr(),
            (storage as *mut c::sockaddr_storage).cast::<u8>(),
            SOCKADDR_IB_LEN,
        )
    };
}

/// A malloc'd copy of the caller's `struct sockaddr_ib` at `sa` (for
/// `rdma_getaddrinfo`'s answer) and its length; NULL when `sa` is not one.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
unsafe fn malloc_copy_ib(sa: *const c::sockaddr) -> (*mut c::sockaddr, u32) {
    // SAFETY: the caller's contract; the family is the first field.
    if sa.is_null() || c_int::from(unsafe { (*sa).sa_family }) != AF_IB {
        return (ptr::null_mut(), 0);
    }
    // SAFETY: malloc of SOCKADDR_IB_LEN bytes; the source is a sockaddr_ib of that size.
    unsafe {
        let p = libc::malloc(SOCKADDR_IB_LEN).cast::<u8>();
        if p.is_null() {
            return (ptr::null_mut(), 0);
        }
        ptr::copy_nonoverlapping(sa.cast::<u8>(), p, SOCKADDR_IB_LEN);
        (p.cast(), SOCKADDR_IB_LEN as u32)
    }
}

/// Writes `a` as a C sockaddr into `storage` (a `sockaddr_storage`).
fn write_sockaddr(storage: &mut c::sockaddr_storage, a: Option<SocketAddr>) {
    *storage = c::sockaddr_storage::default();
    let dst = (storage as *mut c::sockaddr_storage).cast::<u8>();
    match a {
        Some(SocketAddr::V4(v4)) => {
            let s = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage (128 bytes) holds a sockaddr_in.
            unsafe {
                ptr::copy_nonoverlapping(
                    (&s as *const libc::sockaddr_in).cast::<u8>(),
                    dst,
                    size_of::<libc::sockaddr_in>(),
                )
            };
        }
        Some(SocketAddr::V6(v6)) => {
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
            unsafe {
                ptr::copy_nonoverlapping(
                    (&s as *const libc::sockaddr_in6).cast::<u8>(),
                    dst,
                    size_of::<libc::sockaddr_in6>(),
                )
            };
        }
        None => {}
    }
}

/// A malloc'd C sockaddr for `a` (freed by `rdma_freeaddrinfo`) and its length.
fn malloc_sockaddr(a: SocketAddr) -> (*mut c::sockaddr, u32) {
    let mut st = c::sockaddr_storage::default();
    write_sockaddr(&mut st, Some(a));
    let len = match a {
        SocketAddr::V4(_) => size_of::<libc::sockaddr_in>(),
        SocketAddr::V6(_) => size_of::<libc::sockaddr_in6>(),
    };
    // SAFETY: malloc of `len` bytes; copied from a live storage of ≥ len bytes.
    unsafe {
        let p = libc::malloc(len).cast::<u8>();
        if !p.is_null() {
            ptr::copy_nonoverlapping((&st as *const c::sockaddr_storage).cast::<u8>(), p, len);
        }
        (p.cast(), len as u32)
    }
}

// ------------------------------------------------------------- channels

export! { "RDMACM_1.0" fn rdma_create_event_channel() -> *mut c::rdma_event_channel {
    state::ret_ptr(with(|shim| {
        let v = "rdma_create_event_channel";
        let h = shim.sim.rdma_create_event_channel().at(v)?;
        let fd = crate::provider::fds::new_fd();
        if fd < 0 {
            let _ = shim.sim.rdma_destroy_event_channel(&h);
            return Err(Fail::new(v, libc::EMFILE, "no file descriptor for the channel"));
        }
        let ch = state::alloc_zeroed::<c::rdma_event_channel>();
        // SAFETY: just allocated.
        unsafe { (*ch).fd = fd };
        shim.cm.channels.insert(ch as usize, ChannelEntry { handle: h, fd, signaled: false });
        Ok(ch)
    }))
}}

export! { "RDMACM_1.0" fn rdma_destroy_event_channel(channel: *mut c::rdma_event_channel) {
    with(|shim| {
        let v = "rdma_destroy_event_channel";
        let Some(e) = shim.cm.channels.get(&(channel as usize)) else {
            crate::guard::log_err(v, libc::EINVAL, &"not a live event channel of this library");
            return;
        };
        // The C function returns nothing: a busy channel stays (and is logged).
        match shim.sim.rdma_destroy_event_channel(&e.handle) {
            Ok(()) => {
                if let Some(e) = shim.cm.channels.remove(&(channel as usize)) {
                    crate::provider::fds::close_fd(e.fd);
                }
                // SAFETY: a live channel of ours, unregistered above, freed once.
                unsafe { state::free(channel) };
            }
            Err(e) => {
                Fail::sim(v, &e);
            }
        }
    })
}}

// ------------------------------------------------------------------- ids

/// Allocates the C id for a simulator id (for `rdma_create_id` and the ids
/// a CONNECT_REQUEST brings), and fills it from the simulator.
fn new_id(
    shim: &mut Shim,
    h: CmIdHandle,
    channel: *mut c::rdma_event_channel,
    ch: CmChannelHandle,
    sync: (bool, bool),
    context: *mut c_void,
) -> Res<*mut c::rdma_cm_id> {
    let (sync, owns_channel) = sync;
    let id = state::alloc_zeroed::<c::rdma_cm_id>();
    // SAFETY: just allocated, not shared yet.
    unsafe {
        (*id).channel = channel;
        (*id).context = context;
    }
    shim.cm.ids.insert(
        id as usize,
        IdEntry {
            handle: h,
            sync,
            owns_channel,
            disconnected: false,
            channel: ch,
            passive_qp: None,
            af_ib: false,
        },
    );
    shim.cm.id_ptrs.insert(h, id as usize);
    refresh(shim, "rdma_create_id", id)?;
    Ok(id)
}

/// Copies the simulator's view of an id into the C struct C reads.
fn refresh(shim: &mut Shim, v: &str, id: *mut c::rdma_cm_id) -> Res<()> {
    let h = id_entry(shim, v, id)?.handle;
    let info = shim.sim.rdma_id_info(&h).at(v)?;
    let verbs = match info.verbs {
        Some(ctx) => crate::provider::context::context_ptr(shim, v, ctx)?,
        None => ptr::null_mut(),
    };
    let pd = info.pd.map_or(ptr::null_mut(), |p| {
        crate::provider::objects::wrap_pd(shim, p, verbs)
    });
    let chan = |shim: &mut Shim, h: Option<CompChannelHandle>| -> Res<*mut c::ibv_comp_channel> {
        match h {
            Some(h) => crate::provider::objects::wrap_channel(shim, v, h, verbs),
            None => Ok(ptr::null_mut()),
        }
    };
    let send_cq_channel = chan(shim, info.send_cq_channel)?;
    let recv_cq_channel = chan(shim, info.recv_cq_channel)?;
    // librdmacm makes the id the context of the CQs it creates (the
    // inline rdma_get_send_comp/rdma_get_recv_comp assert it).
    let send_cq = match info.send_cq {
        Some(q) => {
            crate::provider::cqex::wrap_cq(shim, v, q, verbs, send_cq_channel, id.cast(), false)?
                .cast()
        }
        None => ptr::null_mut(),
    };
    let recv_cq = match info.recv_cq {
        Some(q) => {
            crate::provider::cqex::wrap_cq(shim, v, q, verbs, recv_cq_channel, id.cast(), false)?
                .cast()
        }
        None => ptr::null_mut(),
    };
    let qp = info
        .qp
        .and_then(|q| shim.qp_ptrs.get(&q).copied())
        .unwrap_or(0) as *mut c::ibv_qp;
    // librdmacm moves the id's QP with ibv_modify_qp, which keeps
    // `qp->state` current; the simulated CM moved it itself.
    if let Some(q) = info.qp.filter(|_| !qp.is_null()) {
        if let Ok((a, _)) = shim.sim.query_qp(&q, QpAttrMask::STATE) {
            // SAFETY: `qp` is the live C QP of `q` (from the registry).
            unsafe { (*qp).state = a.qp_state.to_raw() };
        }
    }
    // SAFETY: a live id of ours.
    let r = unsafe { &mut *id };
    r.verbs = verbs;
    r.pd = pd;
    r.qp = qp;
    r.send_cq = send_cq;
    r.recv_cq = recv_cq;
    r.send_cq_channel = send_cq_channel;
    r.recv_cq_channel = recv_cq_channel;
    r.port_num = info.port_num;
    r.ps = info.ps.to_raw();
    r.qp_type = match info.ps {
        PortSpace::Udp | PortSpace::Ipoib => c::IBV_QPT_UD,
        _ => c::IBV_QPT_RC,
    };
    let af_ib = shim.cm.ids.get(&(id as usize)).is_some_and(|e| e.af_ib);
    let ps = info.ps.to_raw();
    // SAFETY: the storage members of the two address unions.
    unsafe {
        let src = &mut r.route.addr.__bindgen_anon_1.src_storage;
        if af_ib {
            write_sockaddr_ib(shim, src, info.addrs.local, ps);
        } else {
            write_sockaddr(src, info.addrs.local);
        }
        let dst = &mut r.route.addr.__bindgen_anon_2.dst_storage;
        if af_ib {
            write_sockaddr_ib(shim, dst, info.addrs.peer, ps);
        } else {
            write_sockaddr(dst, info.addrs.peer);
        }
    }
    Ok(())
}

fn create_id(
    shim: &mut Shim,
    channel: *mut c::rdma_event_channel,
    id: *mut *mut c::rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> Res<()> {
    let v = "rdma_create_id";
    if id.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "id is NULL"));
    }
    let (ch, sync) = if channel.is_null() {
        (shim.sim.rdma_create_event_channel().at(v)?, true)
    } else {
        match shim.cm.channels.get(&(channel as usize)) {
            Some(e) => (e.handle, false),
            None => return Err(Fail::bad_ptr(v, "event channel", channel.cast())),
        }
    };
    let h = match shim
        .sim
        .rdma_create_id(&ch, context as u64, PortSpace::from_raw(ps))
    {
        Ok(h) => h,
        Err(e) => {
            if sync {
                let _ = shim.sim.rdma_destroy_event_channel(&ch);
            }
            return Err(Fail::sim(v, &e));
        }
    };
    let p = new_id(shim, h, channel, ch, (sync, sync), context)?;
    // SAFETY: non-NULL out-pointer.
    unsafe { *id = p };
    Ok(())
}

export! { "RDMACM_1.0" fn rdma_create_id(channel: *mut c::rdma_event_channel, id: *mut *mut c::rdma_cm_id, context: *mut c_void, ps: u32) -> c_int {
    ret(with(|shim| create_id(shim, channel, id, context, ps)))
}}

/// Frees the C wrappers of objects the simulator no longer has (after
/// `rdma_destroy_qp` / `rdma_destroy_id` destroyed automatic CQs, channels
/// and QPs).
fn reap(shim: &mut Shim) {
    let dead_qps: Vec<QpHandle> = shim
        .qp_ptrs
        .keys()
        .copied()
        .filter(|h| shim.sim.qp_out_of_order(*h).is_err())
        .collect();
    for h in dead_qps {
        if let Some(p) = shim.qp_ptrs.remove(&h) {
            crate::provider::qpex::drop_bounce(shim, p as *mut c::ibv_qp);
            shim.objects.remove(&p);
            // SAFETY: a QP wrapper of ours whose QP is gone; freed once.
            drop(unsafe { Box::from_raw(p as *mut crate::provider::qpex::QpAlloc) });
        }
    }
    let cqs: Vec<CqHandle> = shim.cq_ptrs.keys().copied().collect();
    let dead_cqs: Vec<CqHandle> = cqs
        .into_iter()
        .filter(|h| shim.sim.cq_info(h).is_err())
        .collect();
    for h in dead_cqs {
        if let Some(p) = shim.cq_ptrs.remove(&h) {
            shim.objects.remove(&p);
            // SAFETY: a CQ wrapper of ours whose CQ is gone; freed once.
            drop(unsafe { Box::from_raw(p as *mut crate::provider::cqex::CqAlloc) });
        }
    }
    let dead_chs: Vec<usize> = shim
        .fds
        .channels
        .iter()
        .filter(|(_, w)| shim.sim.comp_channel_pending(w.handle).is_err())
        .map(|(&p, _)| p)
        .collect();
    for p in dead_chs {
        if let Some(w) = shim.fds.channels.remove(&p) {
            crate::provider::fds::close_fd(w.fd);
        }
        shim.objects.remove(&p);
        // SAFETY: a channel wrapper of ours whose channel is gone; freed once.
        unsafe { state::free(p as *mut c::ibv_comp_channel) };
    }
}

/// The body of `rdma_destroy_id` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_destroy_id` takes them.
unsafe fn rdma_destroy_id_impl(id: *mut c::rdma_cm_id) -> c_int {
    ret(with(|shim| {
        let v = "rdma_destroy_id";
        let (h, owns, ch) = {
            let e = id_entry(shim, v, id)?;
            (e.handle, e.owns_channel, e.channel)
        };
        shim.sim.rdma_destroy_id(&h).at(v)?;
        shim.cm.ids.remove(&(id as usize));
        shim.cm.id_ptrs.remove(&h);
        for ev in shim.cm.stash.remove(&h).unwrap_or_default() {
            let _ = shim.sim.rdma_ack_cm_event(ev);
        }
        if owns {
            let _ = shim.sim.rdma_destroy_event_channel(&ch);
        }
        // SAFETY: a live id of ours, unregistered above, freed once.
        unsafe { state::free(id) };
        reap(shim);
        Ok(())
    }))
}

export! { "RDMACM_1.0" fn rdma_destroy_id(id: *mut c::rdma_cm_id) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_destroy_id_impl(id) }
}}

/// Who a sync channel's event is for: the listener for a
/// CONNECT_REQUEST (its new id is the request's), the event's id otherwise.
fn sync_owner(ev: &CmEvent<SimVerbs>) -> CmIdHandle {
    match (ev.event, ev.listen_id) {
        (CmEventType::ConnectRequest, Some(l)) => l,
        _ => ev.id,
    }
}

/// The next event of sync id `h` (listening on `ch`), if one is there:
/// events of the other ids that share the channel (a sync listener and the
/// ids of its requests, which librdmacm moves to channels of their own)
/// are set aside for them, so each sees only its own, in order.
fn next_sync_event(
    shim: &mut Shim,
    v: &str,
    h: CmIdHandle,
    ch: CmChannelHandle,
) -> Res<Option<CmEvent<SimVerbs>>> {
    if let Some(ev) = shim.cm.stash.get_mut(&h).and_then(|q| q.pop_front()) {
        return Ok(Some(ev));
    }
    for settled in [false, true] {
        if settled {
            crate::provider::events::settle(shim);
        }
        while let Some(ev) = shim.sim.rdma_get_cm_event(&ch).at(v)? {
            let owner = sync_owner(&ev);
            if owner == h {
                return Ok(Some(ev));
            }
            shim.cm.stash.entry(owner).or_default().push_back(ev);
        }
    }
    Ok(None)
}

/// For a sync id: blocks (the library's lock released between looks, so
/// other threads and, on the shared fabric, other processes go on) until
/// its next event, which must be `want`: librdmacm's `ucma_complete`, a
/// read of the id's own channel that waits as long as it takes (the CM's
/// own timers end a wait for a peer that never answers). An error event
/// becomes the errno librdmacm gives (`ECONNREFUSED` for a rejection, the
/// event's status otherwise). `Ok(None)` for an id with a channel.
fn wait_sync(v: &str, id: *mut c::rdma_cm_id, want: CmEventType) -> Res<Option<CmEvent<SimVerbs>>> {
    let ev = crate::provider::events::blocking(v, -1, || {
        with(|shim| {
            let e = id_entry(shim, v, id)?;
            if !e.sync {
                return Ok(Some(None));
            }
            let (h, ch) = (e.handle, e.channel);
            Ok(next_sync_event(shim, v, h, ch)?.map(Some))
        })
    })?;
    let Some(ev) = ev else {
        return Ok(None);
    };
    if ev.event == want && ev.status == 0 {
        return Ok(Some(ev));
    }
    let (event, status) = (ev.event, ev.status);
    with(|shim| shim.sim.rdma_ack_cm_event(ev)).at(v)?;
    let errno = if event == CmEventType::Rejected || status == 0 {
        libc::ECONNREFUSED
    } else {
        status.abs()
    };
    Err(Fail::new(
        v,
        errno,
        format!(
            "{} (status {status}) instead of {}",
            event.name(),
            want.name()
        ),
    ))
}

/// Runs a CM verb under the library's lock; `f` returns the event a sync
/// id then waits for (None: nothing to wait for), which is waited for with
/// the lock released and acknowledged.
fn verb_then_wait(
    v: &str,
    id: *mut c::rdma_cm_id,
    f: impl FnOnce(&mut Shim, &CmIdHandle) -> Res<Option<CmEventType>>,
) -> Res<()> {
    let want = with(|shim| {
        let (h, sync) = {
            let e = id_entry(shim, v, id)?;
            (e.handle, e.sync)
        };
        let want = f(shim, &h)?;
        refresh(shim, v, id)?;
        sync_fds(shim);
        Ok(want.filter(|_| sync))
    })?;
    if let Some(want) = want {
        if let Some(ev) = wait_sync(v, id, want)? {
            with(|shim| {
                shim.sim.rdma_ack_cm_event(ev).at(v)?;
                refresh(shim, v, id)?;
                sync_fds(shim);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// The body of `rdma_bind_addr` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_bind_addr` takes them.
unsafe fn rdma_bind_addr_impl(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr) -> c_int {
    ret((|| {
        let v = "rdma_bind_addr";
        // SAFETY: the caller's sockaddr or NULL.
        let (a, ib) = with(|s| unsafe { cm_sockaddr(s, v, addr, "addr") })?;
        verb_then_wait(v, id, |s, h| {
            s.sim.rdma_bind_addr(h, a).at(v)?;
            mark_af_ib(s, id, ib);
            Ok(None)
        })
    })())
}

export! { "RDMACM_1.0" fn rdma_bind_addr(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_bind_addr_impl(id, addr) }
}}

/// The body of `rdma_resolve_addr` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_resolve_addr` takes them.
unsafe fn rdma_resolve_addr_impl(
    id: *mut c::rdma_cm_id,
    src_addr: *mut c::sockaddr,
    dst_addr: *mut c::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    ret((|| {
        let v = "rdma_resolve_addr";
        // SAFETY: the caller's sockaddrs or NULL.
        let (dst, ib) = with(|s| unsafe { cm_sockaddr(s, v, dst_addr, "dst_addr") })?;
        let src = if src_addr.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(with(|s| unsafe { cm_sockaddr(s, v, src_addr, "src_addr") })?.0)
        };
        let t = timeout_ms.max(0) as u32;
        verb_then_wait(v, id, |s, h| {
            s.sim.rdma_resolve_addr(h, src, dst, t).at(v)?;
            mark_af_ib(s, id, ib);
            Ok(Some(CmEventType::AddrResolved))
        })
    })())
}

export! { "RDMACM_1.0" fn rdma_resolve_addr(id: *mut c::rdma_cm_id, src_addr: *mut c::sockaddr, dst_addr: *mut c::sockaddr, timeout_ms: c_int) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_resolve_addr_impl(id, src_addr, dst_addr, timeout_ms) }
}}

/// The body of `rdma_resolve_route` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_resolve_route` takes them.
unsafe fn rdma_resolve_route_impl(id: *mut c::rdma_cm_id, timeout_ms: c_int) -> c_int {
    let v = "rdma_resolve_route";
    let t = timeout_ms.max(0) as u32;
    ret(verb_then_wait(v, id, |s, h| {
        s.sim.rdma_resolve_route(h, t).at(v)?;
        Ok(Some(CmEventType::RouteResolved))
    }))
}

export! { "RDMACM_1.0" fn rdma_resolve_route(id: *mut c::rdma_cm_id, timeout_ms: c_int) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_resolve_route_impl(id, timeout_ms) }
}}

export! { "RDMACM_1.0" fn rdma_listen(id: *mut c::rdma_cm_id, backlog: c_int) -> c_int {
    ret(verb_then_wait("rdma_listen", id, |s, h| s.sim.rdma_listen(h, backlog).at("rdma_listen").map(|()| None)))
}}

/// `struct rdma_conn_param` → [`ConnParam`]. NULL is what librdmacm makes
/// of it: the largest depths (the device's on connect, the request's on
/// accept: 255 says so), 7 retries and 7 RNR retries.
///
/// # Safety
/// `p` is NULL or a readable conn_param whose private data is readable.
unsafe fn read_conn_param(p: *const c::rdma_conn_param) -> ConnParam {
    if p.is_null() {
        return ConnParam {
            responder_resources: u8::MAX,
            initiator_depth: u8::MAX,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnParam::default()
        };
    }
    // SAFETY: the caller's contract.
    let c = unsafe { &*p };
    let data = if c.private_data.is_null() || c.private_data_len == 0 {
        Vec::new()
    } else {
        // SAFETY: private_data_len readable bytes (the caller's contract).
        unsafe {
            core::slice::from_raw_parts(
                c.private_data.cast::<u8>(),
                usize::from(c.private_data_len),
            )
        }
        .to_vec()
    };
    ConnParam {
        private_data: data,
        responder_resources: c.responder_resources,
        initiator_depth: c.initiator_depth,
        flow_control: c.flow_control,
        retry_count: c.retry_count,
        rnr_retry_count: c.rnr_retry_count,
        srq: c.srq,
        qp_num: c.qp_num,
    }
}

export! { "RDMACM_1.0" fn rdma_connect(id: *mut c::rdma_cm_id, conn_param: *mut c::rdma_conn_param) -> c_int {
    let v = "rdma_connect";
    // SAFETY: the caller's struct or NULL.
    let p = unsafe { read_conn_param(conn_param) };
    ret(verb_then_wait(v, id, |s, h| {
        // Without a QP the connection ends at CONNECT_RESPONSE: the
        // application moves its own QP, then calls rdma_establish.
        let want = if s.sim.rdma_id_info(h).at(v)?.qp.is_some() {
            CmEventType::Established
        } else {
            CmEventType::ConnectResponse
        };
        s.sim.rdma_connect(h, &p).at(v)?;
        Ok(Some(want))
    }))
}}

export! { "RDMACM_1.2" fn rdma_establish(id: *mut c::rdma_cm_id) -> c_int {
    ret(verb_then_wait("rdma_establish", id, |s, h| s.sim.rdma_establish(h).at("rdma_establish").map(|()| None)))
}}

/// A multicast join: the address, then (sync ids) the `MULTICAST_JOIN`
/// event waited for, as librdmacm's `ucma_complete` does.
fn join(
    v: &str,
    id: *mut c::rdma_cm_id,
    addr: Option<SocketAddr>,
    flags: Option<McJoinFlag>,
    context: *mut c_void,
) -> Res<()> {
    let a =
        addr.ok_or_else(|| Fail::new(v, libc::EINVAL, "addr is NULL or not AF_INET/AF_INET6"))?;
    let ctx = context as usize as u64;
    verb_then_wait(v, id, |s, h| {
        match flags {
            None => s.sim.rdma_join_multicast(h, a, ctx),
            Some(join_flags) => s.sim.rdma_join_multicast_ex(
                h,
                &JoinMcAttr {
                    addr: a,
                    join_flags,
                },
                ctx,
            ),
        }
        .at(v)?;
        Ok(Some(CmEventType::MulticastJoin))
    })
}

export! { "RDMACM_1.0" fn rdma_join_multicast(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr, context: *mut c_void) -> c_int {
    let v = "rdma_join_multicast";
    // SAFETY: the caller's sockaddr or NULL.
    ret(unsafe { need_sockaddr(v, addr, "addr") }.and_then(|a| join(v, id, Some(a), None, context)))
}}

export! { "RDMACM_1.1" fn rdma_join_multicast_ex(id: *mut c::rdma_cm_id, mc_join_attr: *mut c::rdma_cm_join_mc_attr_ex, context: *mut c_void) -> c_int {
    ret((|| {
        let v = "rdma_join_multicast_ex";
        if mc_join_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "mc_join_attr is NULL"));
        }
        // SAFETY: a readable struct (the caller's contract).
        let attr = unsafe { *mc_join_attr };
        if attr.comp_mask >= c::RDMA_CM_JOIN_MC_ATTR_RESERVED {
            return Err(Fail::new(v, libc::EOPNOTSUPP, format!("unknown comp_mask bits {:#x}", attr.comp_mask)));
        }
        if attr.comp_mask & c::RDMA_CM_JOIN_MC_ATTR_ADDRESS == 0 {
            return Err(Fail::new(v, libc::EINVAL, "comp_mask lacks RDMA_CM_JOIN_MC_ATTR_ADDRESS"));
        }
        if attr.comp_mask & c::RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS == 0 || attr.join_flags >= c::RDMA_MC_JOIN_FLAG_RESERVED {
            return Err(Fail::new(v, libc::EINVAL, "comp_mask lacks RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, or join_flags is unknown"));
        }
        let flags = McJoinFlag::from_raw(attr.join_flags);
        // SAFETY: the caller's sockaddr or NULL.
        let a = unsafe { need_sockaddr(v, attr.addr, "mc_join_attr->addr") }?;
        join(v, id, Some(a), Some(flags), context)
    })())
}}

export! { "RDMACM_1.0" fn rdma_leave_multicast(id: *mut c::rdma_cm_id, addr: *mut c::sockaddr) -> c_int {
    ret((|| {
        let v = "rdma_leave_multicast";
        // SAFETY: the caller's sockaddr or NULL.
        let a = unsafe { need_sockaddr(v, addr, "addr") }?;
        verb_then_wait(v, id, |s, h| s.sim.rdma_leave_multicast(h, a).at(v).map(|()| None))
    })())
}}

export! { "RDMACM_1.0" fn rdma_accept(id: *mut c::rdma_cm_id, conn_param: *mut c::rdma_conn_param) -> c_int {
    let v = "rdma_accept";
    // SAFETY: the caller's struct or NULL.
    let p = unsafe { read_conn_param(conn_param) };
    ret(verb_then_wait(v, id, |s, h| {
        s.sim.rdma_accept(h, &p).at(v)?;
        // A UD id's accept is the SIDR answer: nothing comes back for it.
        let ud = matches!(s.sim.rdma_id_info(h).at(v)?.ps, PortSpace::Udp | PortSpace::Ipoib);
        Ok((!ud).then_some(CmEventType::Established))
    }))
}}

export! { "RDMACM_1.0" fn rdma_reject(id: *mut c::rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    let data = if private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: private_data_len readable bytes.
        unsafe { core::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(private_data_len)) }.to_vec()
    };
    ret(verb_then_wait("rdma_reject", id, |s, h| s.sim.rdma_reject(h, &data).at("rdma_reject").map(|()| None)))
}}

export! { "RDMACM_1.0" fn rdma_disconnect(id: *mut c::rdma_cm_id) -> c_int {
    // A sync id waits for its DISCONNECTED, as librdmacm's does (once:
    // a second call finds the id disconnected and nothing comes).
    ret(verb_then_wait("rdma_disconnect", id, |s, h| {
        s.sim.rdma_disconnect(h).at("rdma_disconnect")?;
        let e = s.cm.ids.get_mut(&(id as usize));
        let first = e.is_some_and(|e| !core::mem::replace(&mut e.disconnected, true));
        Ok(first.then_some(CmEventType::Disconnected))
    }))
}}

// ---------------------------------------------------------------- events

/// Builds the C event for a simulator event (wrapping the new id a
/// CONNECT_REQUEST brings).
fn c_event(shim: &mut Shim, v: &str, ev: CmEvent<SimVerbs>) -> Res<*mut c::rdma_cm_event> {
    let listen = ev
        .listen_id
        .and_then(|l| shim.cm.id_ptrs.get(&l).copied())
        .unwrap_or(0) as *mut c::rdma_cm_id;
    let id = match shim.cm.id_ptrs.get(&ev.id) {
        Some(&p) => p as *mut c::rdma_cm_id,
        None => {
            // A new id (CONNECT_REQUEST): on the listener's channel, with its context.
            let (channel, ch, sync, context) = match shim.cm.ids.get(&(listen as usize)) {
                // SAFETY: a live listener id of ours.
                Some(e) => unsafe { ((*listen).channel, e.channel, e.sync, (*listen).context) },
                None => {
                    return Err(Fail::new(
                        v,
                        libc::EINVAL,
                        "an event for an id this library does not know",
                    ))
                }
            };
            let af_ib = shim.cm.ids.get(&(listen as usize)).is_some_and(|e| e.af_ib);
            let p = new_id(shim, ev.id, channel, ch, (sync, false), context)?;
            if let Some(e) = shim.cm.ids.get_mut(&(p as usize)) {
                e.af_ib = af_ib;
            }
            p
        }
    };
    refresh(shim, v, id)?;
    let data: Box<[u8]> = ev.private_data.clone().into_boxed_slice();
    let e = state::alloc_zeroed::<c::rdma_cm_event>();
    // SAFETY: just allocated; the conn member of the param union.
    unsafe {
        (*e).id = id;
        (*e).listen_id = listen;
        (*e).event = ev.event.to_raw();
        (*e).status = ev.status;
        let p = &mut (*e).param.conn;
        p.private_data = if data.is_empty() {
            ptr::null()
        } else {
            data.as_ptr().cast()
        };
        p.private_data_len = data.len().min(255) as u8;
        p.responder_resources = ev.conn.responder_resources;
        p.initiator_depth = ev.conn.initiator_depth;
        p.flow_control = ev.conn.flow_control;
        p.retry_count = ev.conn.retry_count;
        p.rnr_retry_count = ev.conn.rnr_retry_count;
        p.srq = ev.conn.srq;
        p.qp_num = ev.conn.qp_num;
        if matches!(
            ev.event,
            CmEventType::MulticastJoin | CmEventType::MulticastError
        ) {
            // librdmacm: `param.ud`, with the join's context in
            // `private_data` and no private data length.
            let u = &mut (*e).param.ud;
            *u = c::rdma_ud_param::default();
            u.private_data = ev.context as usize as *const c_void;
            if let Some(ud) = ev.ud {
                u.ah_attr = crate::provider::objects::c_ah_attr(&ud.ah_attr);
                u.qp_num = ud.qp_num;
                u.qkey = ud.qkey;
            }
        } else if let Some(ud) = ev.ud {
            // A UD id's ESTABLISHED (SIDR REP): `param.ud` with the answer's
            // private data, as librdmacm's ucma_copy_ud_event fills it.
            let pd = (*e).param.conn.private_data;
            let len = (*e).param.conn.private_data_len;
            let u = &mut (*e).param.ud;
            *u = c::rdma_ud_param::default();
            u.private_data = pd;
            u.private_data_len = len;
            u.ah_attr = crate::provider::objects::c_ah_attr(&ud.ah_attr);
            u.qp_num = ud.qp_num;
            u.qkey = ud.qkey;
        }
        (*id).event = e;
    }
    shim.cm.events.insert(e as usize, (ev, data));
    Ok(e)
}

export! { "RDMACM_1.0" fn rdma_get_cm_event(channel: *mut c::rdma_event_channel, event: *mut *mut c::rdma_cm_event) -> c_int {
    let v = "rdma_get_cm_event";
    let fd = with(|shim| shim.cm.channels.get(&(channel as usize)).map(|e| e.fd));
    let Some(fd) = fd else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let r = crate::provider::events::blocking(v, fd, || {
        with(|shim| {
            let ch = match shim.cm.channels.get(&(channel as usize)) {
                Some(e) => e.handle,
                None => return Err(Fail::bad_ptr(v, "event channel", channel.cast())),
            };
            let mut ev = shim.sim.rdma_get_cm_event(&ch).at(v)?;
            if ev.is_none() {
                crate::provider::events::settle(shim);
                ev = shim.sim.rdma_get_cm_event(&ch).at(v)?;
            }
            let out = match ev {
                Some(ev) => Some(c_event(shim, v, ev)? as usize),
                None => None,
            };
            sync_fds(shim);
            Ok(out)
        })
    });
    match r {
        Ok(e) => {
            // SAFETY: non-NULL out-pointer.
            unsafe { *event = e as *mut c::rdma_cm_event };
            0
        }
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}}

export! { "RDMACM_1.0" fn rdma_ack_cm_event(event: *mut c::rdma_cm_event) -> c_int {
    ret(with(|shim| {
        let v = "rdma_ack_cm_event";
        let Some((ev, data)) = shim.cm.events.remove(&(event as usize)) else {
            return Err(Fail::bad_ptr(v, "rdma_cm_event", event.cast()));
        };
        drop(data);
        // SAFETY: a live event of ours; its id may point back at it.
        unsafe {
            let id = (*event).id;
            if shim.cm.ids.contains_key(&(id as usize)) && (*id).event == event {
                (*id).event = ptr::null_mut();
            }
            state::free(event);
        }
        shim.sim.rdma_ack_cm_event(ev).at(v)
    }))
}}

/// `RDMA_CM_EVENT_*` names, indexed by event number.
const EVENT_NAMES: [&CStr; 16] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

export! { "RDMACM_1.0" fn rdma_event_str(event: u32) -> *const c_char {
    EVENT_NAMES.get(event as usize).copied().unwrap_or(c"UNKNOWN EVENT").as_ptr()
}}

// -------------------------------------------------------------------- QPs

/// The body of `rdma_create_qp` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_create_qp` takes them.
unsafe fn rdma_create_qp_impl(
    id: *mut c::rdma_cm_id,
    pd: *mut c::ibv_pd,
    qp_init_attr: *mut c::ibv_qp_init_attr,
) -> c_int {
    ret(with(|shim| {
        let v = "rdma_create_qp";
        let h = id_entry(shim, v, id)?.handle;
        if qp_init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = unsafe { &mut *qp_init_attr };
        // An SRQ made with rdma_create_srq serves the id's QP (librdmacm
        // writes it into the caller's attributes).
        if a.srq.is_null() {
            // SAFETY: a live id of ours (id_entry above).
            a.srq = unsafe { (*id).srq };
        }
        let pd_h = if pd.is_null() {
            None
        } else {
            Some(handle_of!(shim, v, pd, Pd, "PD")?)
        };
        let opt_cq = |shim: &Shim, p: *mut c::ibv_cq| -> Res<Option<CqHandle>> {
            if p.is_null() {
                Ok(None)
            } else {
                handle_of!(shim, v, p, Cq, "CQ").map(Some)
            }
        };
        let send_cq = opt_cq(shim, a.send_cq)?;
        let recv_cq = opt_cq(shim, a.recv_cq)?;
        let srq = if a.srq.is_null() {
            None
        } else {
            Some(handle_of!(shim, v, a.srq, Srq, "SRQ")?)
        };
        let mut attr = QpInitAttrEx::<SimVerbs> {
            qp_context: a.qp_context as u64,
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            cap: QpCap {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
                max_recv_sge: a.cap.max_recv_sge,
                max_inline_data: a.cap.max_inline_data,
            },
            qp_type: QpType::from_raw(a.qp_type),
            sq_sig_all: a.sq_sig_all != 0,
            ..Default::default()
        };
        let q = shim
            .sim
            .rdma_create_qp(&h, pd_h.as_ref(), &mut attr)
            .at(v)?;
        a.cap.max_send_wr = attr.cap.max_send_wr;
        a.cap.max_recv_wr = attr.cap.max_recv_wr;
        a.cap.max_send_sge = attr.cap.max_send_sge;
        a.cap.max_recv_sge = attr.cap.max_recv_sge;
        a.cap.max_inline_data = attr.cap.max_inline_data;
        refresh(shim, v, id)?;
        // SAFETY: a live id of ours (refreshed above).
        let (verbs, id_pd, id_scq, id_rcq) =
            unsafe { ((*id).verbs, (*id).pd, (*id).send_cq, (*id).recv_cq) };
        let objs = crate::provider::qp::QpObjs {
            context: verbs,
            pd: if pd.is_null() { id_pd } else { pd },
            send_cq: if a.send_cq.is_null() {
                id_scq
            } else {
                a.send_cq
            },
            recv_cq: if a.recv_cq.is_null() {
                id_rcq
            } else {
                a.recv_cq
            },
            srq: a.srq,
        };
        let qp = crate::provider::qp::wrap_qp(shim, v, q, &objs, a.qp_type, a.qp_context, false)?;
        // SAFETY: a live id of ours.
        unsafe { (*id).qp = qp };
        Ok(())
    }))
}

export! { "RDMACM_1.0" fn rdma_create_qp_ex(id: *mut c::rdma_cm_id, qp_init_attr: *mut c::ibv_qp_init_attr_ex) -> c_int {
    ret(with(|shim| {
        let v = "rdma_create_qp_ex";
        let h = id_entry(shim, v, id)?.handle;
        if qp_init_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = unsafe { &mut *qp_init_attr };
        // As rdma_create_qp: the id's SRQ serves its QP.
        if a.srq.is_null() {
            // SAFETY: a live id of ours (id_entry above).
            a.srq = unsafe { (*id).srq };
        }
        let pd_h = if a.comp_mask & c::IBV_QP_INIT_ATTR_PD != 0 && !a.pd.is_null() {
            Some(handle_of!(shim, v, a.pd, Pd, "PD")?)
        } else {
            None
        };
        let opt_cq = |shim: &Shim, p: *mut c::ibv_cq| -> Res<Option<CqHandle>> {
            if p.is_null() {
                Ok(None)
            } else {
                handle_of!(shim, v, p, Cq, "CQ").map(Some)
            }
        };
        let send_cq = opt_cq(shim, a.send_cq)?;
        let recv_cq = opt_cq(shim, a.recv_cq)?;
        let srq = if a.srq.is_null() {
            None
        } else {
            Some(handle_of!(shim, v, a.srq, Srq, "SRQ")?)
        };
        let mut attr = QpInitAttrEx::<SimVerbs> {
            qp_context: a.qp_context as u64,
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            cap: QpCap {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
                max_recv_sge: a.cap.max_recv_sge,
                max_inline_data: a.cap.max_inline_data,
            },
            qp_type: QpType::from_raw(a.qp_type),
            sq_sig_all: a.sq_sig_all != 0,
            comp_mask: QpInitAttrMask(a.comp_mask),
            pd: pd_h.as_ref(),
            create_flags: QpCreateFlags(a.create_flags),
            send_ops_flags: SendOpsFlags(a.send_ops_flags),
            ..Default::default()
        };
        let q = shim.sim.rdma_create_qp_ex(&h, &mut attr).at(v)?;
        a.cap.max_send_wr = attr.cap.max_send_wr;
        a.cap.max_recv_wr = attr.cap.max_recv_wr;
        a.cap.max_send_sge = attr.cap.max_send_sge;
        a.cap.max_recv_sge = attr.cap.max_recv_sge;
        a.cap.max_inline_data = attr.cap.max_inline_data;
        refresh(shim, v, id)?;
        // SAFETY: a live id of ours (refreshed above).
        let (verbs, id_pd, id_scq, id_rcq) =
            unsafe { ((*id).verbs, (*id).pd, (*id).send_cq, (*id).recv_cq) };
        let objs = crate::provider::qp::QpObjs {
            context: verbs,
            pd: if pd_h.is_none() { id_pd } else { a.pd },
            send_cq: if a.send_cq.is_null() { id_scq } else { a.send_cq },
            recv_cq: if a.recv_cq.is_null() { id_rcq } else { a.recv_cq },
            srq: a.srq,
        };
        let has_ex = a.comp_mask & c::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
        let qp = crate::provider::qp::wrap_qp(shim, v, q, &objs, a.qp_type, a.qp_context, has_ex)?;
        // SAFETY: a live id of ours.
        unsafe { (*id).qp = qp };
        Ok(())
    }))
}}

export! { "RDMACM_1.0" fn rdma_create_qp(id: *mut c::rdma_cm_id, pd: *mut c::ibv_pd, qp_init_attr: *mut c::ibv_qp_init_attr) -> c_int {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_create_qp_impl(id, pd, qp_init_attr) }
}}

/// The body of `rdma_destroy_qp` (also called by `rdma_create_ep`/`rdma_destroy_ep`:
/// an exported function called from Rust would break its symbol version).
///
/// # Safety
/// The pointers are the caller's, as `rdma_destroy_qp` takes them.
unsafe fn rdma_destroy_qp_impl(id: *mut c::rdma_cm_id) {
    let _ = ret(with(|shim| {
        let v = "rdma_destroy_qp";
        let h = id_entry(shim, v, id)?.handle;
        shim.sim.rdma_destroy_qp(&h).at(v)?;
        reap(shim);
        refresh(shim, v, id)
    }));
}

export! { "RDMACM_1.0" fn rdma_destroy_qp(id: *mut c::rdma_cm_id) {
    // SAFETY: the C caller's arguments, as the verb takes them.
    unsafe { rdma_destroy_qp_impl(id) }
}}

export! { "RDMACM_1.2" fn rdma_init_qp_attr(id: *mut c::rdma_cm_id, qp_attr: *mut c::ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int {
    ret(with(|shim| {
        let v = "rdma_init_qp_attr";
        let h = id_entry(shim, v, id)?.handle;
        if qp_attr.is_null() || qp_attr_mask.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "qp_attr or qp_attr_mask is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct (qp_state is the state asked for).
        let want = QpState::from_raw(unsafe { (*qp_attr).qp_state });
        let (a, m) = shim.sim.rdma_init_qp_attr(&h, want).at(v)?;
        // SAFETY: both non-NULL; the caller's.
        unsafe {
            qp_attr.write(crate::provider::qp::c_qp_attr(&a));
            *qp_attr_mask = m.bits() as c_int;
        }
        Ok(())
    }))
}}

// --------------------------------------------------- devices and options

export! { "RDMACM_1.0" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut c::ibv_context {
    with(|shim| {
        let v = "rdma_get_devices";
        if shim.cm.devices.is_empty() {
            for i in 0..shim.devices.len() {
                match shim.sim.cm_device_context(i as u32).at(v).and_then(|h| crate::provider::context::context_ptr(shim, v, h)) {
                    Ok(p) => shim.cm.devices.push(p as usize),
                    Err(f) => {
                        set_errno(f.errno);
                        return ptr::null_mut();
                    }
                }
            }
        }
        let n = shim.cm.devices.len();
        // SAFETY: calloc of n+1 pointers; freed by rdma_free_devices.
        let list = unsafe { libc::calloc(n + 1, size_of::<*mut c::ibv_context>()) }.cast::<*mut c::ibv_context>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return ptr::null_mut();
        }
        for (i, &p) in shim.cm.devices.iter().enumerate() {
            // SAFETY: i < n; the array has n+1 slots.
            unsafe { *list.add(i) = p as *mut c::ibv_context };
        }
        shim.cm.device_lists.insert(list as usize, ());
        if !num_devices.is_null() {
            // SAFETY: the caller's int.
            unsafe { *num_devices = n as c_int };
        }
        list
    })
}}

export! { "RDMACM_1.0" fn rdma_free_devices(list: *mut *mut c::ibv_context) {
    with(|shim| {
        if shim.cm.device_lists.remove(&(list as usize)).is_some() {
            // SAFETY: calloc'd by rdma_get_devices, freed once.
            unsafe { libc::free(list.cast()) };
        }
    })
}}

export! { "RDMACM_1.0" fn rdma_set_option(id: *mut c::rdma_cm_id, level: c_int, optname: c_int, optval: *mut c_void, optlen: usize) -> c_int {
    ret(with(|shim| {
        let v = "rdma_set_option";
        let h = id_entry(shim, v, id)?.handle;
        // The options librdmacm knows: ACK_TIMEOUT sets the timeout the CM's
        // RTS transition uses; TOS, REUSEADDR, AFONLY and the IB path are
        // accepted, and the simulator's CM has no use for them.
        match (level as u32, optname as u32) {
            (c::RDMA_OPTION_ID, 3) => {
                if optval.is_null() || optlen != 1 {
                    return Err(Fail::new(v, libc::EINVAL, "RDMA_OPTION_ID_ACK_TIMEOUT takes one u8"));
                }
                // SAFETY: non-NULL, one byte long (checked above).
                let t = unsafe { *optval.cast::<u8>() };
                shim.sim.rdma_set_ack_timeout(h, t).at(v)
            }
            (c::RDMA_OPTION_ID, 0..=2) | (c::RDMA_OPTION_IB, 1) => Ok(()),
            _ => Err(Fail::new(v, libc::ENOSYS, format!("unknown option level {level} name {optname}"))),
        }
    }))
}}

// ------------------------------------------------------ addrinfo and eps

/// Parses a numeric host and a numeric service.
fn parse_addr(node: *const c_char, service: *const c_char) -> Res<Option<SocketAddr>> {
    let v = "rdma_getaddrinfo";
    let text = |p: *const c_char| -> Option<String> {
        // SAFETY: NULL or a NUL-terminated string of the caller.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let port = match text(service) {
        Some(s) => s.parse::<u16>().map_err(|_| {
            Fail::new(
                v,
                libc::EINVAL,
                format!("service {s:?} is not a port number"),
            )
        })?,
        None => 0,
    };
    match text(node) {
        None => Ok(None),
        Some(n) => {
            let ip: IpAddr = if n == "localhost" {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                n.parse().map_err(|_| {
                    Fail::new(
                        v,
                        libc::EINVAL,
                        format!("node {n:?}: only numeric addresses resolve in the simulator"),
                    )
                })?
            };
            Ok(Some(SocketAddr::new(ip, port)))
        }
    }
}

/// The QP type and port space of an answer: the hints' where they give
/// them, else each follows the other as librdmacm's socket mapping makes
/// them (a UDP or IPoIB port space means UD, UD means the UDP port space;
/// RC and TCP otherwise).
fn qp_type_and_port_space(h: &c::rdma_addrinfo) -> (c_int, c_int) {
    let ud_ps = |ps: c_int| ps == c::RDMA_PS_UDP as c_int || ps == c::RDMA_PS_IPOIB as c_int;
    let qp_type = match h.ai_qp_type {
        0 if ud_ps(h.ai_port_space) => c::IBV_QPT_UD as c_int,
        0 => c::IBV_QPT_RC as c_int,
        t => t,
    };
    let port_space = match h.ai_port_space {
        0 if qp_type == c::IBV_QPT_UD as c_int => c::RDMA_PS_UDP as c_int,
        0 => c::RDMA_PS_TCP as c_int,
        ps => ps,
    };
    (qp_type, port_space)
}

export! { "RDMACM_1.0" fn rdma_getaddrinfo(node: *const c_char, service: *const c_char, hints: *const c::rdma_addrinfo, res: *mut *mut c::rdma_addrinfo) -> c_int {
    ret((|| {
        let v = "rdma_getaddrinfo";
        // SAFETY: NULL or the caller's hints.
        let h = if hints.is_null() { c::rdma_addrinfo::default() } else { unsafe { hints.read() } };
        // SAFETY: the hints' own sockaddrs, of the family they say (or NULL).
        let (hs, hd) = unsafe { (read_sockaddr(h.ai_src_addr), read_sockaddr(h.ai_dst_addr)) };
        // SAFETY: the hints' own sockaddrs, of the family they say (or NULL).
        let (ibs, ibd) = unsafe { (malloc_copy_ib(h.ai_src_addr), malloc_copy_ib(h.ai_dst_addr)) };
        if !res.is_null() && node.is_null() && service.is_null() && (!ibs.0.is_null() || !ibd.0.is_null()) {
            // AF_IB hints and no name: the answer carries the hints' own
            // struct sockaddr_ib (libfabric's verbs provider asks so before
            // it binds a passive endpoint).
            let ai = state::alloc_zeroed::<c::rdma_addrinfo>();
            // SAFETY: just allocated.
            let r = unsafe { &mut *ai };
            r.ai_flags = h.ai_flags;
            r.ai_family = AF_IB;
            (r.ai_qp_type, r.ai_port_space) = qp_type_and_port_space(&h);
            (r.ai_src_addr, r.ai_src_len) = ibs;
            (r.ai_dst_addr, r.ai_dst_len) = ibd;
            // SAFETY: non-NULL out-pointer.
            unsafe { *res = ai };
            return Ok(());
        }
        // SAFETY: the copies above were malloc'd here and are not kept.
        unsafe {
            libc::free(ibs.0.cast());
            libc::free(ibd.0.cast());
        }
        if !res.is_null() && node.is_null() && service.is_null() && (hs.is_some() || hd.is_some()) {
            // No name to resolve: librdmacm answers with the hints' own
            // addresses (pyverbs' multicast tests pass a source this way).
            let ai = state::alloc_zeroed::<c::rdma_addrinfo>();
            // SAFETY: just allocated.
            let r = unsafe { &mut *ai };
            r.ai_flags = h.ai_flags;
            let fam = hs.or(hd).is_some_and(|a| a.is_ipv4());
            r.ai_family = if fam { libc::AF_INET } else { libc::AF_INET6 };
            (r.ai_qp_type, r.ai_port_space) = qp_type_and_port_space(&h);
            if let Some(a) = hs {
                (r.ai_src_addr, r.ai_src_len) = malloc_sockaddr(a);
            }
            if let Some(a) = hd {
                (r.ai_dst_addr, r.ai_dst_len) = malloc_sockaddr(a);
            }
            // SAFETY: non-NULL out-pointer.
            unsafe { *res = ai };
            return Ok(());
        }
        if res.is_null() || (node.is_null() && service.is_null()) {
            return Err(Fail::new(v, libc::EINVAL, "res is NULL, or neither node nor service (nor an address in the hints) is given"));
        }
        if h.ai_flags & RAI_NUMERICHOST == 0 && !node.is_null() {
            // Names other than numeric ones and "localhost" fail in parse_addr.
        }
        let passive = h.ai_flags & RAI_PASSIVE != 0;
        let mut a = parse_addr(node, service)?;
        if a.is_none() && passive {
            let port = parse_addr(c"0.0.0.0".as_ptr(), service)?.map_or(0, |s| s.port());
            a = Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
        }
        let a = a.ok_or_else(|| Fail::new(v, libc::EINVAL, "no address"))?;
        let ai = state::alloc_zeroed::<c::rdma_addrinfo>();
        // SAFETY: just allocated.
        let r = unsafe { &mut *ai };
        r.ai_flags = h.ai_flags;
        r.ai_family = if a.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        (r.ai_qp_type, r.ai_port_space) = qp_type_and_port_space(&h);
        let (p, len) = malloc_sockaddr(a);
        if passive {
            r.ai_src_addr = p;
            r.ai_src_len = len;
        } else {
            r.ai_dst_addr = p;
            r.ai_dst_len = len;
            // librdmacm keeps the source address the hints give (an active
            // side that binds before it resolves, as pyverbs' multicast
            // tests do, passes it in `ai_src_addr`).
            // SAFETY: the hints' own sockaddr, of the family it says (or NULL).
            if let Some(src) = unsafe { read_sockaddr(h.ai_src_addr) } {
                let (sp, slen) = malloc_sockaddr(src);
                r.ai_src_addr = sp;
                r.ai_src_len = slen;
            }
        }
        // SAFETY: non-NULL out-pointer.
        unsafe { *res = ai };
        Ok(())
    })())
}}

export! { "RDMACM_1.0" fn rdma_freeaddrinfo(res: *mut c::rdma_addrinfo) {
    let mut p = res;
    while !p.is_null() {
        // SAFETY: a list rdma_getaddrinfo built: each node and its addresses
        // were allocated there (Box and malloc) and are freed once.
        unsafe {
            let next = (*p).ai_next;
            libc::free((*p).ai_src_addr.cast());
            libc::free((*p).ai_dst_addr.cast());
            state::free(p);
            p = next;
        }
    }
}}

export! { "RDMACM_1.0" fn rdma_create_ep(id: *mut *mut c::rdma_cm_id, res: *mut c::rdma_addrinfo, pd: *mut c::ibv_pd, qp_init_attr: *mut c::ibv_qp_init_attr) -> c_int {
    let v = "rdma_create_ep";
    if id.is_null() || res.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: non-NULL; the caller's addrinfo.
    let r = unsafe { &*res };
    let mut new = ptr::null_mut();
    if with(|shim| create_id(shim, ptr::null_mut(), &mut new, ptr::null_mut(), r.ai_port_space as u32)).is_err() {
        return -1;
    }
    let rc = if r.ai_flags & RAI_PASSIVE != 0 {
        // SAFETY: the exported function with the caller's addresses.
        unsafe { rdma_bind_addr_impl(new, r.ai_src_addr) }
    } else {
        // SAFETY: as above.
        let rc = unsafe { rdma_resolve_addr_impl(new, r.ai_src_addr, r.ai_dst_addr, 2000) };
        // SAFETY: as above.
        if rc == 0 { unsafe { rdma_resolve_route_impl(new, 2000) } } else { rc }
    };
    let passive = r.ai_flags & RAI_PASSIVE != 0;
    let rc = if rc == 0 && passive && !qp_init_attr.is_null() {
        // SAFETY: non-NULL; the caller's struct, copied as librdmacm does,
        // with the QP type of the address.
        let attr = c::ibv_qp_init_attr { qp_type: r.ai_qp_type as u32, ..unsafe { *qp_init_attr } };
        with(|shim| match shim.cm.ids.get_mut(&(new as usize)) {
            Some(e) => {
                e.passive_qp = Some((pd as usize, attr));
                0
            }
            None => -1,
        })
    } else if rc == 0 && !qp_init_attr.is_null() {
        // librdmacm writes the address's QP type into the caller's struct.
        // SAFETY: non-NULL; the caller's struct.
        unsafe { (*qp_init_attr).qp_type = r.ai_qp_type as u32 };
        // SAFETY: as above.
        unsafe { rdma_create_qp_impl(new, pd, qp_init_attr) }
    } else {
        rc
    };
    if rc != 0 {
        // SAFETY: errno of this thread.
        let e = unsafe { *libc::__errno_location() };
        // SAFETY: the id created above.
        unsafe { rdma_destroy_id_impl(new) };
        crate::guard::log_err(v, e, &"a step of rdma_create_ep failed");
        set_errno(e);
        return -1;
    }
    // SAFETY: non-NULL out-pointer.
    unsafe { *id = new };
    0
}}

export! { "RDMACM_1.0" fn rdma_destroy_ep(id: *mut c::rdma_cm_id) {
    // SAFETY: the exported functions, on the caller's id.
    unsafe {
        let ours = with(|shim| shim.cm.ids.contains_key(&(id as usize)));
        if ours && !(*id).qp.is_null() {
            rdma_destroy_qp_impl(id);
        }
        // As librdmacm: the id's SRQ (rdma_create_srq) goes too.
        if ours && !(*id).srq.is_null() {
            let _ = ret(with(|shim| extra::destroy_id_srq(shim, "rdma_destroy_ep", id)));
        }
        rdma_destroy_id_impl(id);
    }
}}

export! { "RDMACM_1.0" fn rdma_get_request(listen: *mut c::rdma_cm_id, id: *mut *mut c::rdma_cm_id) -> c_int {
    let v = "rdma_get_request";
    let rc = ret((|| {
        if id.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "id is NULL"));
        }
        if !with(|shim| id_entry(shim, v, listen).map(|e| e.sync))? {
            return Err(Fail::new(v, libc::EINVAL, "the listening id has an event channel (rdma_get_request is for synchronous ids)"));
        }
        // Blocks until a request comes, as librdmacm's read of the
        // listener's channel does.
        let ev = wait_sync(v, listen, CmEventType::ConnectRequest)?
            .ok_or_else(|| Fail::new(v, libc::EINVAL, "not a synchronous id"))?;
        with(|shim| {
            let e = c_event(shim, v, ev)?;
            // SAFETY: the event just built.
            let new = unsafe { (*e).id };
            // SAFETY: the exported function on our own event.
            unsafe { rdma_ack_cm_event_inner(shim, e) };
            // SAFETY: non-NULL out-pointer.
            unsafe { *id = new };
            Ok(())
        })
    })());
    if rc != 0 {
        return rc;
    }
    // A passive endpoint's QP, made for each request (librdmacm does so
    // after the lock-free part; the id is the caller's now).
    let recipe = with(|shim| shim.cm.ids.get(&(listen as usize)).and_then(|e| e.passive_qp));
    if let Some((pd, mut attr)) = recipe {
        // SAFETY: `*id` was set above to a live id of ours; `attr` is our copy.
        let rc = unsafe { rdma_create_qp_impl(*id, pd as *mut c::ibv_pd, &mut attr) };
        if rc != 0 {
            return rc;
        }
    }
    0
}}

/// `rdma_ack_cm_event` under the lock already held.
///
/// # Safety
/// `e` is an event this library built and has not freed.
unsafe fn rdma_ack_cm_event_inner(shim: &mut Shim, e: *mut c::rdma_cm_event) {
    if let Some((ev, _)) = shim.cm.events.remove(&(e as usize)) {
        // SAFETY: the caller's contract.
        unsafe {
            let id = (*e).id;
            if shim.cm.ids.contains_key(&(id as usize)) && (*id).event == e {
                (*id).event = ptr::null_mut();
            }
            state::free(e);
        }
        let _ = shim.sim.rdma_ack_cm_event(ev);
    }
}
