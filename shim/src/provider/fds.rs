//! Real file descriptors for completion channels and async events.
//!
//! Each channel (and each context, for async events) owns an `eventfd`
//! whose counter is 1 exactly while the simulator holds an event for it:
//! programs `poll()`/`select()`/`epoll` on it as on rdma-core's. Only the
//! shim reads or writes the counter, so it tracks the state itself and
//! never blocks on it.

use core::ffi::c_int;
use std::collections::BTreeMap;

use backend_sim::{CompChannelHandle, ContextHandle};

/// An eventfd (blocking, close-on-exec), or -1.
pub(crate) fn new_fd() -> c_int {
    // SAFETY: eventfd has no memory arguments.
    unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }
}

/// Closes an fd the shim opened (ignores -1).
pub(crate) fn close_fd(fd: c_int) {
    if fd >= 0 {
        // SAFETY: the fd was opened by the shim and is closed once.
        unsafe { libc::close(fd) };
    }
}

/// Makes `fd` readable (`on`) or not, given whether it is now.
pub(crate) fn set_fd(fd: c_int, signaled: &mut bool, on: bool) {
    if on == *signaled {
        return;
    }
    if on {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own; the
        // counter is 0 here, so the write cannot block.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    } else {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from an eventfd we own; the
        // counter is 1 here, so the read cannot block.
        unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    }
    *signaled = on;
}

/// A watched fd: the simulator object, the fd, whether it is readable.
#[derive(Debug)]
pub(crate) struct Watched<H> {
    pub(crate) handle: H,
    pub(crate) fd: c_int,
    pub(crate) signaled: bool,
}

/// The fds to keep in step with the simulator.
#[derive(Debug, Default)]
pub(crate) struct Fds {
    /// Completion channels, by C pointer.
    pub(crate) channels: BTreeMap<usize, Watched<CompChannelHandle>>,
    /// Contexts' async fds, by C pointer.
    pub(crate) contexts: BTreeMap<usize, Watched<ContextHandle>>,
}

impl Fds {
    /// Whether any channel exists (then the world runs eagerly after posts).
    pub(crate) fn any_channel(&self) -> bool {
        !self.channels.is_empty()
    }
}

/// Whether the caller set `O_NONBLOCK` on `fd`.
pub(crate) fn nonblocking(fd: c_int) -> bool {
    // SAFETY: F_GETFL takes no pointer.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// Waits up to `ms` for `fd` to become readable (another thread's verb);
/// false when a signal handler ran meanwhile (`EINTR`).
pub(crate) fn wait(fd: c_int, ms: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    // SAFETY: errno of this thread, read right after the call.
    !(rc < 0 && unsafe { *libc::__errno_location() } == libc::EINTR)
}
