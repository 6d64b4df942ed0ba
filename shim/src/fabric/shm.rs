//! Memory shared between a process and the fabric, and the descriptors
//! that travel with a reply (SCM_RIGHTS).
//!
//! The fabric makes each region (a sealed memfd: its size cannot change
//! once it is handed out, so no client can make the fabric's mapping fault
//! by shrinking it) and passes its descriptor with the reply to the call
//! that asked for it; both sides map it. The fabric never trusts what it
//! reads there: indices are checked against its own copies, and records
//! are copied out before they are decoded.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU64;

/// A shared mapping of a memfd.
pub(crate) struct Shm {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, read and written only
// through atomics and byte copies; it lives until the value is dropped.
unsafe impl Send for Shm {}
// SAFETY: as above: no method hands out a reference into the mapping
// except atomics.
unsafe impl Sync for Shm {}

impl std::fmt::Debug for Shm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shm({} bytes at {:p})", self.len, self.ptr)
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping this value made and owns.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl Shm {
    /// A new memfd of `len` bytes (zeroed), sealed against growing and
    /// shrinking, mapped here; with the descriptor to pass on.
    pub(crate) fn create(len: usize) -> io::Result<(Self, OwnedFd)> {
        // SAFETY: the name is a NUL-terminated literal.
        let fd = unsafe {
            libc::memfd_create(
                c"verbsim-fabric-queue".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and is ours alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let size = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region too large"))?;
        // SAFETY: plain fd calls on the descriptor we own.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), size) != 0 {
                return Err(io::Error::last_os_error());
            }
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let shm = Self::map_raw(fd.as_raw_fd(), len)?;
        Ok((shm, fd))
    }

    /// Maps a region the fabric passed, after checking that it holds at
    /// least `len` bytes.
    pub(crate) fn map(fd: &OwnedFd, len: usize) -> io::Result<Self> {
        // SAFETY: `st` is a live, writable stat buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open; `st` lives.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if usize::try_from(st.st_size).unwrap_or(0) < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a shared region of {} bytes, {len} expected", st.st_size),
            ));
        }
        Self::map_raw(fd.as_raw_fd(), len)
    }

    fn map_raw(fd: RawFd, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of `len` bytes of an open fd; the
        // kernel picks the address.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: p.cast(), len })
    }

    /// The 8-byte counter at byte `off` (a multiple of 8 inside the region).
    ///
    /// # Panics
    /// On an offset that is not; offsets are the layouts' constants.
    pub(crate) fn counter(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.len,
            "counter at {off}"
        );
        // SAFETY: in bounds and aligned (the mapping is page-aligned); an
        // AtomicU64 may alias memory another process writes, as every
        // access to it is atomic.
        unsafe { &*self.ptr.add(off).cast::<AtomicU64>() }
    }

    /// Copies `out.len()` bytes from byte `off` (clamped to the region:
    /// bytes past its end read as 0).
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) {
        let n = out.len().min(self.len.saturating_sub(off));
        if n > 0 {
            // SAFETY: `[off, off + n)` is inside the mapping and `out` is a
            // distinct local buffer; the bytes may change under the copy
            // (the other side writes them), which only yields other bytes.
            unsafe { core::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), n) };
        }
        out[n..].fill(0);
    }

    /// Copies `bytes` to byte `off` (what does not fit is not written).
    pub(crate) fn write(&self, off: usize, bytes: &[u8]) {
        let n = bytes.len().min(self.len.saturating_sub(off));
        if n > 0 {
            // SAFETY: `[off, off + n)` is inside the mapping; `bytes` is a
            // distinct buffer.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(off), n) };
        }
    }
}

/// Writes `bytes` on `sock` with `fds` attached (SCM_RIGHTS, at most 4);
/// how many bytes went.
pub(crate) fn send_with_fds(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    let fds = &fds[..fds.len().min(4)];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(size_of_val(fds) as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: zeroed msghdr is valid; pointers set below name live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds one cmsg of `fds.len()` fds
    // (CMSG_SPACE above).
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(size_of_val(fds) as u32) as _;
        let data = libc::CMSG_DATA(c).cast::<RawFd>();
        for (i, fd) in fds.iter().enumerate() {
            core::ptr::write_unaligned(data.add(i), *fd);
        }
    }
    loop {
        // SAFETY: `msg` names live buffers; the socket is open.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads up to `buf.len()` bytes from `sock`, with the descriptors that
/// came with them (any beyond the first few are closed).
pub(crate) fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    const MAX_FDS: usize = 4;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: zeroed msghdr is valid; pointers set below name live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: `msg` names live buffers; the socket is open.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walks the control buffer the kernel filled, as CMSG_* do.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let count =
                    ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<RawFd>();
                for i in 0..count {
                    let fd = core::ptr::read_unaligned(data.add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, fds))
}
