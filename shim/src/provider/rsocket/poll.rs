//! `rpoll` and `rselect`: `poll(2)`/`select(2)` over rsockets and ordinary
//! descriptors together.
//!
//! Ordinary descriptors pass through to `poll(2)`. Descriptors the shim
//! owns (a CM event channel's, a completion channel's, a context's async
//! fd) are made current from the simulator before each look, and the wait
//! is cut into short slices so that an event another process makes on the
//! shared fabric (which touches no fd of ours) is seen. rsockets answer
//! from their own state.

use core::ffi::c_int;
use std::time::{Duration, Instant};

use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{with, Shim};

/// Whether `fd` is one the shim keeps in step with the simulator.
fn shim_owned(shim: &Shim, fd: c_int) -> bool {
    shim.cm.channels.values().any(|c| c.fd == fd)
        || shim.fds.channels.values().any(|w| w.fd == fd)
        || shim.fds.contexts.values().any(|w| w.fd == fd)
}

/// How long one slice of a wait lasts when the shim must look again.
fn slice(rsockets: bool) -> Duration {
    if rsockets || crate::fabric::is_remote() {
        Duration::from_millis(1)
    } else {
        Duration::from_millis(10)
    }
}

/// The readiness of an rsocket, or `None` if `fd` is not one. Filled by
/// the rsocket table; `events` is what the caller asks for.
fn rsocket_revents(fd: c_int, events: i16) -> Option<i16> {
    super::table::with_table(|t| {
        if !t.socks.contains_key(&fd) {
            return None;
        }
        Some(with(|shim| super::cm::revents(t, shim, fd, events)))
    })
}

/// In-process world: steps virtual time to the next due events (CM
/// timers, packets) until one of the shim's fds in `fds` is readable or
/// nothing is due, bounded; then makes every shim fd current. On the
/// shared fabric the fabric process runs time itself.
pub(crate) fn advance(shim: &mut Shim, fds: &[libc::pollfd]) {
    crate::provider::events::settle(shim);
    for _ in 0..64 {
        if fds
            .iter()
            .any(|p| shim_owned(shim, p.fd) && readable_now(p.fd))
        {
            return;
        }
        if !shim.sim.advance_to_next_event() {
            return;
        }
        crate::provider::events::settle(shim);
    }
}

/// Whether `fd` polls readable right now.
fn readable_now(fd: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

/// `rpoll` on a slice of pollfds; the count of ready entries, or -1 with errno.
pub(crate) fn rpoll_slice(fds: &mut [libc::pollfd], timeout_ms: c_int) -> c_int {
    let any_rsocket = fds.iter().any(|p| super::table::is_rsocket(p.fd));
    let any_owned = crate::provider::state::lock()
        .as_ref()
        .is_some_and(|s| fds.iter().any(|p| shim_owned(s, p.fd)));
    if !any_rsocket && !any_owned {
        // Ordinary descriptors only: poll(2) itself, with its own timeout.
        // SAFETY: `fds` is a live slice of pollfds of its length.
        return unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    }
    let deadline =
        (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    let mut real: Vec<libc::pollfd> = Vec::with_capacity(fds.len());
    let mut spins = 0u32;
    loop {
        // The shim's fds from the simulator's state; the in-process world
        // runs forward to its next events, as a blocking wait would.
        if any_owned {
            with(|shim| advance(shim, fds));
        }
        real.clear();
        let mut ready = 0;
        for p in fds.iter_mut() {
            p.revents = 0;
            match rsocket_revents(p.fd, p.events) {
                Some(r) => {
                    p.revents = r;
                    if r != 0 {
                        ready += 1;
                    }
                    // A placeholder poll(2) ignores (a negative fd).
                    real.push(libc::pollfd {
                        fd: -1,
                        events: 0,
                        revents: 0,
                    });
                }
                None => real.push(libc::pollfd {
                    fd: p.fd,
                    events: p.events,
                    revents: 0,
                }),
            }
        }
        let wait = if ready > 0 {
            0
        } else if any_rsocket && spins < 64 {
            // rsockets are answered by looking, not by an fd: look again
            // soon before sleeping in slices.
            spins += 1;
            std::thread::yield_now();
            0
        } else {
            let left = deadline.map_or(slice(any_rsocket), |d| {
                d.saturating_duration_since(Instant::now())
            });
            left.min(slice(any_rsocket)).as_millis() as c_int
        };
        // SAFETY: `real` is a live Vec of pollfds of its length.
        let n = unsafe { libc::poll(real.as_mut_ptr(), real.len() as libc::nfds_t, wait) };
        if n < 0 {
            return -1;
        }
        for (p, r) in fds.iter_mut().zip(&real) {
            if r.fd >= 0 {
                p.revents = r.revents;
                if r.revents != 0 {
                    ready += 1;
                }
            }
        }
        if ready > 0 {
            return ready;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return 0;
        }
    }
}

export! { "RDMACM_1.0" fn rpoll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    if fds.is_null() && nfds > 0 {
        set_errno(libc::EFAULT);
        return -1;
    }
    let slice: &mut [libc::pollfd] = if nfds == 0 {
        &mut []
    } else {
        // SAFETY: the caller's array of `nfds` pollfds (non-NULL, checked).
        unsafe { core::slice::from_raw_parts_mut(fds, nfds as usize) }
    };
    rpoll_slice(slice, timeout)
}}

/// `rselect`'s conversion of a `timeval` into poll's milliseconds (NULL: forever).
///
/// # Safety
/// `tv` is NULL or a readable timeval.
unsafe fn timeout_ms(tv: *const libc::timeval) -> Option<c_int> {
    if tv.is_null() {
        return Some(-1);
    }
    // SAFETY: non-NULL; the caller's.
    let t = unsafe { *tv };
    if t.tv_sec < 0 || t.tv_usec < 0 {
        return None;
    }
    let ms = t.tv_sec.saturating_mul(1000) + (t.tv_usec + 999) / 1000;
    Some(ms.min(c_int::MAX as i64) as c_int)
}

export! { "RDMACM_1.0" fn rselect(nfds: c_int, readfds: *mut libc::fd_set, writefds: *mut libc::fd_set, exceptfds: *mut libc::fd_set, timeout: *mut libc::timeval) -> c_int {
    if !(0..=libc::FD_SETSIZE as c_int).contains(&nfds) {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: NULL or the caller's timeval.
    let Some(ms) = (unsafe { timeout_ms(timeout) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    // (The FD_* calls below: each set is NULL, checked, or the
    // caller's fd_set, and every fd is below nfds ≤ FD_SETSIZE.)
    let isset = |set: *mut libc::fd_set, fd: c_int| {
        // SAFETY: the set is the caller's fd_set (non-NULL, checked) and
        // fd < nfds ≤ FD_SETSIZE.
        !set.is_null() && unsafe { libc::FD_ISSET(fd, set) }
    };
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        if isset(readfds, fd) {
            events |= libc::POLLIN;
        }
        if isset(writefds, fd) {
            events |= libc::POLLOUT;
        }
        if isset(exceptfds, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            pfds.push(libc::pollfd { fd, events, revents: 0 });
        }
    }
    let n = rpoll_slice(&mut pfds, ms);
    if n < 0 {
        return -1;
    }
    if pfds.iter().any(|p| p.revents & libc::POLLNVAL != 0) {
        set_errno(libc::EBADF);
        return -1;
    }
    for set in [readfds, writefds, exceptfds] {
        if !set.is_null() {
            // SAFETY: the caller's fd_set (non-NULL).
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mut count = 0;
    for p in &pfds {
        let r = p.revents;
        let mark = |set: *mut libc::fd_set, hit: bool| -> c_int {
            if hit && !set.is_null() {
                // SAFETY: as above; fd < nfds.
                unsafe { libc::FD_SET(p.fd, set) };
                1
            } else {
                0
            }
        };
        count += mark(readfds, p.events & libc::POLLIN != 0 && r & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0);
        count += mark(writefds, p.events & libc::POLLOUT != 0 && r & (libc::POLLOUT | libc::POLLERR) != 0);
        count += mark(exceptfds, p.events & libc::POLLPRI != 0 && r & libc::POLLPRI != 0);
    }
    count
}}
