//! The fabric's wait for work: an epoll set of the listening socket, each
//! process's socket and each submission ring's doorbell.
//!
//! The set is kept from one turn of the loop to the next, so a turn costs
//! one `epoll_pwait2` whatever the number of processes, instead of a
//! `ppoll` that hooks every descriptor onto its wait queue and unhooks it
//! again (most of the fabric's time per message before, docs/fabric-perf.md).
//! The wait takes a timeout in nanoseconds, as the world's next timer is
//! microseconds away.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What a registered descriptor is, packed in epoll's 64-bit user data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    /// The listening socket.
    Listener,
    /// Connection `id`'s socket.
    Socket(u64),
    /// Connection `id`'s doorbell.
    Doorbell(u64),
}

impl Token {
    fn pack(self) -> u64 {
        match self {
            Self::Listener => u64::MAX,
            Self::Socket(id) => id << 1,
            Self::Doorbell(id) => (id << 1) | 1,
        }
    }

    fn unpack(v: u64) -> Self {
        if v == u64::MAX {
            Self::Listener
        } else if v & 1 == 0 {
            Self::Socket(v >> 1)
        } else {
            Self::Doorbell(v >> 1)
        }
    }
}

/// Readable (a frame, a connection, a doorbell rung).
pub(crate) const READ: u32 = libc::EPOLLIN as u32;
/// Writable (a reply that did not fit can go on).
pub(crate) const WRITE: u32 = libc::EPOLLOUT as u32;
/// Hung up or failed (reported whatever was asked).
pub(crate) const GONE: u32 = (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32;

/// An epoll set.
#[derive(Debug)]
pub(crate) struct Poller {
    ep: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Poller {
    /// An empty set.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor
        // or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: `fd` was just returned to us and is owned by nothing else.
            ep: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 256],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: Token) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: token.pack(),
        };
        // SAFETY: `ev` is a live epoll_event; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `fd` for `events` ([`READ`], [`WRITE`]), reported as `token`.
    pub(crate) fn add(&self, fd: RawFd, events: u32, token: Token) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes what `fd` is watched for.
    pub(crate) fn modify(&self, fd: RawFd, events: u32, token: Token) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd` (before it is closed: a descriptor shared with
    /// another would otherwise stay in the set).
    pub(crate) fn remove(&self, fd: RawFd) {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL; a descriptor
        // not in the set gives ENOENT, which changes nothing.
        unsafe {
            libc::epoll_ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                core::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout_ns` (0: not at all) for something to be ready;
    /// what is, with its events. Interrupted by a signal: nothing ready.
    pub(crate) fn wait(&mut self, timeout_ns: u64) -> io::Result<Vec<(Token, u32)>> {
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `events` is a live array of its length; `ts` lives; no
        // signal mask is passed.
        let n = unsafe {
            libc::epoll_pwait2(
                self.ep.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                &ts,
                core::ptr::null(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Vec::new());
            }
            return Err(e);
        }
        let ready = self.events[..n as usize]
            .iter()
            .map(|e| (Token::unpack(e.u64), e.events))
            .collect();
        Ok(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for t in [
            Token::Listener,
            Token::Socket(0),
            Token::Socket(7),
            Token::Doorbell(0),
            Token::Doorbell(1 << 40),
        ] {
            assert_eq!(Token::unpack(t.pack()), t);
        }
    }

    #[test]
    fn reports_a_rung_doorbell_once_read_stays_quiet() {
        let mut p = Poller::new().unwrap();
        // SAFETY: eventfd takes two integers and returns a new descriptor.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(efd >= 0);
        // SAFETY: `efd` is ours.
        let efd = unsafe { OwnedFd::from_raw_fd(efd) };
        p.add(efd.as_raw_fd(), READ, Token::Doorbell(3)).unwrap();
        assert!(p.wait(0).unwrap().is_empty());
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer.
        let wrote = unsafe { libc::write(efd.as_raw_fd(), one.as_ptr().cast(), 8) };
        assert_eq!(wrote, 8);
        let got = p.wait(1_000_000).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Token::Doorbell(3));
        assert_ne!(got[0].1 & READ, 0);
        let mut v = [0u8; 8];
        // SAFETY: reads 8 bytes into a live buffer.
        let read = unsafe { libc::read(efd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
        assert_eq!(read, 8);
        assert!(p.wait(0).unwrap().is_empty());
        p.remove(efd.as_raw_fd());
        // SAFETY: as above.
        unsafe { libc::write(efd.as_raw_fd(), one.as_ptr().cast(), 8) };
        assert!(
            p.wait(0).unwrap().is_empty(),
            "a removed descriptor is not reported"
        );
    }
}
