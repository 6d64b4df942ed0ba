//! The few POSIX items backend-hw needs, declared by hand instead of adding
//! the `libc` crate: `fcntl` and its flags from `<fcntl.h>` (to make event
//! file descriptors non-blocking), and the IPv4/IPv6 socket address
//! structures and families from `<netinet/in.h>` / `<sys/socket.h>` (for
//! `rdma_bind_addr` and friends).
//!
//! Every value and layout here is checked against the installed C headers
//! by the layout test (`ffi/layout.rs`), so a target whose numbering differs
//! (e.g. `O_NONBLOCK` on MIPS or SPARC) fails the test instead of silently
//! misbehaving. The socket address structs are used only for their layout
//! (`offset_of!`/`size_of`): addresses are converted byte by byte in safe
//! code (`crate::sockaddr`).

#![allow(non_camel_case_types)] // C names, kept so the headers can be grepped

use core::ffi::c_int;

/// `F_GETFL`: read the file status flags.
pub(crate) const F_GETFL: c_int = 3;
/// `F_SETFL`: set the file status flags.
pub(crate) const F_SETFL: c_int = 4;
/// `O_NONBLOCK` (Linux generic numbering: x86-64, aarch64, riscv64, …).
pub(crate) const O_NONBLOCK: c_int = 0o4000;
/// `EAGAIN` (== `EWOULDBLOCK` on Linux).
pub(crate) const EAGAIN: i32 = 11;

/// `AF_INET`.
pub(crate) const AF_INET: u16 = 2;
/// `AF_INET6`.
pub(crate) const AF_INET6: u16 = 10;
/// `sizeof(struct sockaddr_storage)`: the size of the address unions inside
/// `struct rdma_addr`, and of the buffer we hand to librdmacm.
pub(crate) const SOCKADDR_STORAGE_LEN: usize = 128;

/// `struct sockaddr_in` (only its layout is used).
#[repr(C)]
#[allow(dead_code)] // fields are read through offset_of! only
pub(crate) struct sockaddr_in {
    pub(crate) sin_family: u16,
    /// Network byte order.
    pub(crate) sin_port: u16,
    /// `struct in_addr`: network byte order.
    pub(crate) sin_addr: u32,
    pub(crate) sin_zero: [u8; 8],
}

/// `struct sockaddr_in6` (only its layout is used).
#[repr(C)]
#[allow(dead_code)] // fields are read through offset_of! only
pub(crate) struct sockaddr_in6 {
    pub(crate) sin6_family: u16,
    /// Network byte order.
    pub(crate) sin6_port: u16,
    /// Network byte order.
    pub(crate) sin6_flowinfo: u32,
    /// `struct in6_addr`: 16 bytes, network order.
    pub(crate) sin6_addr: [u8; 16],
    /// Host byte order.
    pub(crate) sin6_scope_id: u32,
}

extern "C" {
    /// `fcntl(2)` (variadic in C; we only pass an `int` third argument).
    /// Returns -1 and sets `errno` on failure.
    fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
}

/// Sets `O_NONBLOCK` on `fd`, so that a `read` (or librdmacm's `write`
/// command) that would wait fails with `EAGAIN` instead.
///
/// Returns the positive errno on failure (`EBADF` for a closed descriptor).
/// Memory-safe for any integer: the kernel validates the descriptor.
pub(crate) fn set_nonblocking(fd: c_int) -> Result<(), i32> {
    // SAFETY: `fcntl(fd, F_GETFL)` takes no pointer argument and only reads
    // the descriptor's flags; an invalid `fd` is reported as EBADF.
    let flags = unsafe { fcntl(fd, F_GETFL) };
    if flags < 0 {
        return Err(super::verbs::last_errno());
    }
    if flags & O_NONBLOCK != 0 {
        return Ok(());
    }
    // SAFETY: `F_SETFL` takes one `int` argument, passed as the variadic
    // `int`; it changes only the descriptor's status flags.
    if unsafe { fcntl(fd, F_SETFL, flags | O_NONBLOCK) } < 0 {
        return Err(super::verbs::last_errno());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn nonblocking_read_reports_eagain() {
        // Goal: set_nonblocking really makes an empty descriptor answer
        // EAGAIN (the mechanism every non-blocking event verb relies on).
        // Method: a socket pair with nothing written, read from one end.
        let (mut a, _b) = UnixStream::pair().unwrap();
        set_nonblocking(a.as_raw_fd()).unwrap();
        set_nonblocking(a.as_raw_fd()).unwrap(); // idempotent
        let mut buf = [0u8; 8];
        let e = a.read(&mut buf).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EAGAIN));
    }

    #[test]
    fn closed_descriptor_is_ebadf() {
        // Goal: a bad descriptor is an errno, not a crash.
        assert_eq!(set_nonblocking(-1), Err(9));
    }
}
