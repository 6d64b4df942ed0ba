//! The submission ring: work requests a process posts without waiting,
//! in a region it shares with the fabric, and the doorbell (an eventfd)
//! that wakes the fabric to take them. One ring per process (per
//! connection), taken in order before anything else the process asks, so
//! a post followed by a call (modify, destroy, a post by call) reaches the
//! world in that order.
//!
//! Layout (little-endian, offsets in bytes):
//!
//! | at | what | written by |
//! |---|---|---|
//! | 0 | producer: bytes of records written | client |
//! | 64 | consumer: bytes of records taken | fabric |
//! | 128 | broken: non-zero once the fabric stopped reading the ring | fabric |
//! | [`DATA`] | [`DATA_LEN`] bytes of records, wrapping | client |
//!
//! A record: `u32` length of what follows, `u32` kind ([`KIND_SEND`],
//! [`KIND_RECV`], [`KIND_WR`], [`KIND_SRQ_RECV`]), then the postcard bytes
//! of the QP handle (the SRQ's for [`KIND_SRQ_RECV`]) followed by those of
//! the requests; padded to 8 bytes.
//!
//! The fabric trusts nothing here: a producer count behind the consumer
//! or more than a ring ahead, or a record longer than what is there,
//! breaks the ring (the process's QPs that posted through it go to ERR);
//! a record that does not decode, names a QP that is not the process's,
//! or that the world refuses, is a malformed WQE for its QP.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use super::shm::Shm;

const PRODUCER: usize = 0;
const CONSUMER: usize = 64;
const BROKEN: usize = 128;
/// Where the records start.
pub(crate) const DATA: usize = 4096;
/// Bytes of records the ring holds.
pub(crate) const DATA_LEN: usize = 1 << 20;
/// The region's size.
pub(crate) const REGION: usize = DATA + DATA_LEN;
/// A record of `ibv_post_send` requests.
pub(crate) const KIND_SEND: u32 = 1;
/// A record of `ibv_post_recv` requests.
pub(crate) const KIND_RECV: u32 = 2;
/// A record of one `ibv_wr_*` batch (`ibv_wr_start` … `ibv_wr_complete`).
pub(crate) const KIND_WR: u32 = 3;
/// A record of `ibv_post_srq_recv` requests (the SRQ handle in place of
/// the QP's).
pub(crate) const KIND_SRQ_RECV: u32 = 4;

fn padded(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Copies `bytes` into the data area at ring position `pos` (wrapping).
fn put(shm: &Shm, pos: u64, bytes: &[u8]) {
    let at = (pos % DATA_LEN as u64) as usize;
    let first = bytes.len().min(DATA_LEN - at);
    shm.write(DATA + at, &bytes[..first]);
    if first < bytes.len() {
        shm.write(DATA, &bytes[first..]);
    }
}

/// Copies `out.len()` bytes from the data area at ring position `pos`.
fn get(shm: &Shm, pos: u64, out: &mut [u8]) {
    let at = (pos % DATA_LEN as u64) as usize;
    let first = out.len().min(DATA_LEN - at);
    shm.read(DATA + at, &mut out[..first]);
    if first < out.len() {
        let n = out.len();
        shm.read(DATA, &mut out[first..n]);
    }
}

/// The client's side: writes records, rings the doorbell.
#[derive(Debug)]
pub(crate) struct Submitter {
    shm: Shm,
    doorbell: OwnedFd,
    /// Bytes written (what the producer count says).
    produced: u64,
}

impl Submitter {
    /// The client's side of a region and doorbell the fabric made.
    pub(crate) fn new(shm: Shm, doorbell: OwnedFd) -> Self {
        Self {
            shm,
            doorbell,
            produced: 0,
        }
    }

    /// Whether the fabric stopped reading the ring.
    pub(crate) fn broken(&self) -> bool {
        self.shm.counter(BROKEN).load(Ordering::Acquire) != 0
    }

    /// Writes a record of `kind` with `body` and rings the doorbell; false
    /// (nothing written) when the ring has no room for it now.
    pub(crate) fn submit(&mut self, kind: u32, body: &[u8]) -> bool {
        let total = padded(8 + body.len());
        let consumed = self.shm.counter(CONSUMER).load(Ordering::Acquire);
        let used = self.produced.saturating_sub(consumed);
        if used + total as u64 > DATA_LEN as u64 {
            return false;
        }
        let Ok(len) = u32::try_from(body.len()) else {
            return false;
        };
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&len.to_le_bytes());
        head[4..].copy_from_slice(&kind.to_le_bytes());
        put(&self.shm, self.produced, &head);
        put(&self.shm, self.produced + 8, body);
        self.produced += total as u64;
        self.shm
            .counter(PRODUCER)
            .store(self.produced, Ordering::Release);
        self.ring();
        true
    }

    /// Rings the doorbell (an eventfd write: it never blocks and never
    /// waits for the fabric).
    pub(crate) fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd.
        unsafe { libc::write(self.doorbell.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// The region (for tests that scribble on it).
    #[cfg(test)]
    pub(crate) fn shm(&self) -> &Shm {
        &self.shm
    }
}

/// What the fabric found in a ring.
#[derive(Debug)]
pub(crate) enum Taken {
    /// A record: its kind and body.
    Record(u32, Vec<u8>),
    /// Nothing more now.
    Empty,
    /// The counts or a length make no sense: the ring is broken.
    Broken(String),
}

/// The fabric's side of one process's ring.
#[derive(Debug)]
pub(crate) struct Receiver {
    shm: Shm,
    /// The doorbell the fabric waits on.
    pub(crate) doorbell: OwnedFd,
    /// Bytes taken (the fabric's own count; the region's copy is for the
    /// client).
    consumed: u64,
    broken: bool,
}

impl Receiver {
    /// A ring for one process: the region, the doorbell, and the
    /// descriptors to pass to it.
    pub(crate) fn create() -> std::io::Result<(Self, [OwnedFd; 2])> {
        let (shm, fd) = Shm::create(REGION)?;
        // SAFETY: eventfd takes no pointers.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `efd` was just made and is ours alone.
        let efd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(efd) };
        let theirs = efd.try_clone()?;
        Ok((
            Self {
                shm,
                doorbell: efd,
                consumed: 0,
                broken: false,
            },
            [fd, theirs],
        ))
    }

    /// Resets the doorbell (after it woke the fabric).
    pub(crate) fn clear_doorbell(&self) {
        let mut v = [0u8; 8];
        // SAFETY: reads 8 bytes into a live buffer from our eventfd.
        unsafe { libc::read(self.doorbell.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    }

    /// Whether records wait (a look at the producer count only).
    pub(crate) fn pending(&self) -> bool {
        !self.broken && self.shm.counter(PRODUCER).load(Ordering::Acquire) != self.consumed
    }

    /// Stops reading the ring, and says so in it.
    fn break_ring(&mut self, why: String) -> Taken {
        self.broken = true;
        self.shm.counter(BROKEN).store(1, Ordering::Release);
        Taken::Broken(why)
    }

    /// The next record, copied out of the ring.
    pub(crate) fn take(&mut self) -> Taken {
        if self.broken {
            return Taken::Empty;
        }
        let produced = self.shm.counter(PRODUCER).load(Ordering::Acquire);
        if produced == self.consumed {
            return Taken::Empty;
        }
        if produced < self.consumed || produced - self.consumed > DATA_LEN as u64 {
            return self.break_ring(format!(
                "a producer count of {produced} with {} taken (a ring holds {DATA_LEN} bytes)",
                self.consumed
            ));
        }
        let avail = (produced - self.consumed) as usize;
        let mut head = [0u8; 8];
        if avail < 8 {
            return self.break_ring(format!("{avail} bytes, less than a record header"));
        }
        get(&self.shm, self.consumed, &mut head);
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let total = padded(8 + len);
        if total > avail {
            return self.break_ring(format!(
                "a record of {len} bytes with {} bytes written",
                avail - 8
            ));
        }
        let mut body = vec![0u8; len];
        get(&self.shm, self.consumed + 8, &mut body);
        self.consumed += total as u64;
        self.shm
            .counter(CONSUMER)
            .store(self.consumed, Ordering::Release);
        Taken::Record(kind, body)
    }
}

/// Offsets of the ring's counters, for tests that scribble on them.
#[cfg(test)]
pub(crate) mod layout {
    pub(crate) const PRODUCER: usize = super::PRODUCER;
}
