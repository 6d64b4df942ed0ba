//! [`SocketAddr`] ↔ C `struct sockaddr_in` / `sockaddr_in6`, in safe code.
//!
//! Addresses are written to and read from a byte buffer the size of a
//! `struct sockaddr_storage`, field by field, at the offsets of the
//! hand-declared structs in `ffi::posix` (which the layout test checks
//! against the C headers). Ports, IPv4 addresses and the IPv6 flow label
//! are in network byte order; the IPv6 scope id and the family are in host
//! order, as in C.

use core::mem::offset_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::ffi::posix::{sockaddr_in, sockaddr_in6, AF_INET, AF_INET6, SOCKADDR_STORAGE_LEN};

/// A C socket address, aligned like `struct sockaddr_storage`, ready to be
/// passed to librdmacm as a `struct sockaddr *`.
#[repr(C, align(8))]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct SockAddrBuf {
    bytes: [u8; SOCKADDR_STORAGE_LEN],
}

impl core::fmt::Debug for SockAddrBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SockAddrBuf({:?})", self.decode())
    }
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

fn get<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[off..off + N]);
    out
}

impl SockAddrBuf {
    /// Encodes `addr` as a `sockaddr_in` or `sockaddr_in6` (the rest zero).
    pub(crate) fn from_std(addr: &SocketAddr) -> Self {
        let mut b = [0u8; SOCKADDR_STORAGE_LEN];
        match addr {
            SocketAddr::V4(a) => {
                put(
                    &mut b,
                    offset_of!(sockaddr_in, sin_family),
                    &AF_INET.to_ne_bytes(),
                );
                put(
                    &mut b,
                    offset_of!(sockaddr_in, sin_port),
                    &a.port().to_be_bytes(),
                );
                put(&mut b, offset_of!(sockaddr_in, sin_addr), &a.ip().octets());
            }
            SocketAddr::V6(a) => {
                put(
                    &mut b,
                    offset_of!(sockaddr_in6, sin6_family),
                    &AF_INET6.to_ne_bytes(),
                );
                put(
                    &mut b,
                    offset_of!(sockaddr_in6, sin6_port),
                    &a.port().to_be_bytes(),
                );
                put(
                    &mut b,
                    offset_of!(sockaddr_in6, sin6_flowinfo),
                    &a.flowinfo().to_be_bytes(),
                );
                put(
                    &mut b,
                    offset_of!(sockaddr_in6, sin6_addr),
                    &a.ip().octets(),
                );
                put(
                    &mut b,
                    offset_of!(sockaddr_in6, sin6_scope_id),
                    &a.scope_id().to_ne_bytes(),
                );
            }
        }
        Self { bytes: b }
    }

    /// Copies a C address (at most `sockaddr_storage` bytes; shorter input
    /// is zero-extended).
    pub(crate) fn from_bytes(src: &[u8]) -> Self {
        let mut b = [0u8; SOCKADDR_STORAGE_LEN];
        let n = src.len().min(SOCKADDR_STORAGE_LEN);
        b[..n].copy_from_slice(&src[..n]);
        Self { bytes: b }
    }

    /// The address family (`sa_family`), host order.
    pub(crate) fn family(&self) -> u16 {
        u16::from_ne_bytes(get(&self.bytes, offset_of!(sockaddr_in, sin_family)))
    }

    /// Decodes an `AF_INET`/`AF_INET6` address; `None` for any other family
    /// (`AF_UNSPEC` before the id is bound, `AF_IB`, …).
    pub(crate) fn decode(&self) -> Option<SocketAddr> {
        let b = &self.bytes;
        match self.family() {
            AF_INET => {
                let port = u16::from_be_bytes(get(b, offset_of!(sockaddr_in, sin_port)));
                let ip: [u8; 4] = get(b, offset_of!(sockaddr_in, sin_addr));
                Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
            }
            AF_INET6 => {
                let port = u16::from_be_bytes(get(b, offset_of!(sockaddr_in6, sin6_port)));
                let flow = u32::from_be_bytes(get(b, offset_of!(sockaddr_in6, sin6_flowinfo)));
                let ip: [u8; 16] = get(b, offset_of!(sockaddr_in6, sin6_addr));
                let scope = u32::from_ne_bytes(get(b, offset_of!(sockaddr_in6, sin6_scope_id)));
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(ip),
                    port,
                    flow,
                    scope,
                )))
            }
            _ => None,
        }
    }

    /// How many bytes C reads for this family (`ucma_addrlen`).
    #[cfg(test)]
    pub(crate) fn c_len(&self) -> usize {
        match self.family() {
            AF_INET => size_of::<sockaddr_in>(),
            AF_INET6 => size_of::<sockaddr_in6>(),
            _ => 0,
        }
    }

    /// The buffer as the `struct sockaddr *` librdmacm takes. librdmacm only
    /// reads through it (it copies the address into its command), but the C
    /// prototypes are not `const`, hence `&mut self`.
    pub(crate) fn as_mut_ptr<T>(&mut self) -> *mut T {
        self.bytes.as_mut_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_round_trip() {
        // Goal: an IPv4 address survives std -> C bytes -> std, with the port
        // and the address in network order where C expects them.
        let a: SocketAddr = "192.168.7.9:4791".parse().unwrap();
        let c = SockAddrBuf::from_std(&a);
        assert_eq!(c.family(), AF_INET);
        assert_eq!(c.c_len(), 16);
        assert_eq!(c.decode(), Some(a));
        assert_eq!(&c.bytes[2..4], &[0x12, 0xb7], "port big endian");
        assert_eq!(
            &c.bytes[4..8],
            &[192, 168, 7, 9],
            "address in network order"
        );
        assert!(c.bytes[8..].iter().all(|&x| x == 0));
    }

    #[test]
    fn ipv6_round_trip_keeps_flowinfo_and_scope() {
        // Goal: every sockaddr_in6 field round-trips, including the flow
        // label (network order) and the scope id (host order).
        let a = SocketAddr::V6(SocketAddrV6::new(
            "fe80::1:2:3:4".parse().unwrap(),
            18515,
            0x000a_bcde,
            3,
        ));
        let c = SockAddrBuf::from_std(&a);
        assert_eq!(c.family(), AF_INET6);
        assert_eq!(c.c_len(), 28);
        assert_eq!(c.decode(), Some(a));
        assert_eq!(&c.bytes[4..8], &[0, 0x0a, 0xbc, 0xde]);
        assert_eq!(c.bytes[8], 0xfe);
        let copy = SockAddrBuf::from_bytes(&c.bytes[..28]);
        assert_eq!(copy, c);
    }

    #[test]
    fn unknown_families_decode_to_none() {
        // Goal: an unbound id (AF_UNSPEC) or an AF_IB address is "no
        // address", never garbage.
        assert_eq!(SockAddrBuf::from_bytes(&[]).decode(), None);
        let mut ib = [0u8; 48];
        ib[..2].copy_from_slice(&27u16.to_ne_bytes()); // AF_IB
        let c = SockAddrBuf::from_bytes(&ib);
        assert_eq!(c.decode(), None);
        assert_eq!(c.c_len(), 0);
        // Oversized input is truncated to sockaddr_storage.
        let big = [0u8; 300];
        assert_eq!(SockAddrBuf::from_bytes(&big).decode(), None);
    }
}
