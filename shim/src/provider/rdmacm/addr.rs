//! Socket addresses between C and the simulator: `sockaddr_in`,
//! `sockaddr_in6` and `AF_IB`'s `sockaddr_ib`, read and written.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use backend_sim::*;

use crate::provider::state::{c, Fail, Res, Shim, SimRes};

// ------------------------------------------------------------- sockaddrs

/// Reads a C `struct sockaddr` (AF_INET or AF_INET6).
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
pub(super) unsafe fn read_sockaddr(sa: *const c::sockaddr) -> Option<SocketAddr> {
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
pub(super) const AF_IB: c_int = 27;

/// The IP address `sa` names, for verb `v`: `EOPNOTSUPP` for an `AF_IB`
/// address where `AF_IB` is not modelled (multicast joins, `mckey -M`;
/// binding and resolving take them through [`cm_sockaddr`]), `EINVAL` for
/// NULL or another family.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
pub(super) unsafe fn need_sockaddr(v: &str, sa: *const c::sockaddr, what: &str) -> Res<SocketAddr> {
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
pub(super) const SOCKADDR_IB_LEN: usize = 48;

/// GID 0 of device `dev`'s port 1: the link-local prefix and the node
/// GUID (what `ibv_query_gid(ctx, 1, 0)` reports in the simulator).
pub(super) fn device_gid0(shim: &mut Shim, v: &str, dev: usize) -> Res<[u8; 16]> {
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
pub(super) fn device_of_ip(shim: &mut Shim, v: &str, ip: IpAddr) -> Res<Option<usize>> {
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
pub(super) unsafe fn cm_sockaddr(
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
pub(super) fn mark_af_ib(shim: &mut Shim, id: *mut c::rdma_cm_id, ib: bool) {
    if let Some(e) = shim.cm.ids.get_mut(&(id as usize)) {
        e.af_ib = ib;
    }
}

/// Writes `a` as a `struct sockaddr_ib` into `storage`: the GID of the
/// port that has `a`'s address (zero for any, or none), the service id of
/// port space `ps` and `a`'s port, a full service-id mask, the default
/// P_Key. Nothing when `a` is `None` (an unset address).
pub(super) fn write_sockaddr_ib(
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
pub(super) unsafe fn malloc_copy_ib(sa: *const c::sockaddr) -> (*mut c::sockaddr, u32) {
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
pub(super) fn write_sockaddr(storage: &mut c::sockaddr_storage, a: Option<SocketAddr>) {
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
pub(super) fn malloc_sockaddr(a: SocketAddr) -> (*mut c::sockaddr, u32) {
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
