//! A client's buffer, reached from the fabric process by
//! `process_vm_readv`/`process_vm_writev` (the NIC's DMA, across address
//! spaces).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use backend_sim::ExternalMemory;
use verbs_api::AccessFlags;

/// `len` bytes at `addr` in process `pid`.
///
/// The fabric's copies are coalesced ([`ProcessMemory::coalesced`], see
/// [`Coalescer`]): a read that misses fetches up to [`SPAN`] bytes of the
/// range at once and later reads are served from them until the
/// [epoch](new_epoch) moves on; writes wait in a queue until [`flush_all`]
/// (or a read of the same process) sends them in one `process_vm_writev`.
/// Elsewhere (the library's own implicit ODP MR, where nothing calls those
/// hooks) every copy is one exact call.
#[derive(Debug)]
pub(crate) struct ProcessMemory {
    pid: libc::pid_t,
    addr: usize,
    len: usize,
    /// Raised when the process is found gone (a copy fails with `ESRCH`):
    /// the fabric then tears its session down before the world moves on.
    gone: Arc<AtomicBool>,
    /// Whether copies go through the thread's [`Coalescer`]s.
    coalesce: bool,
}

/// The most a missed read fetches at once (clipped to the range's end):
/// one 64 KiB message's worth. perftest's `ib_write_bw` measured no
/// better with 256 KiB, and a span is fetched anew after every call.
const SPAN: usize = 64 * 1024;
/// Read-ahead spans kept per process.
const SPANS: usize = 4;
/// Queued write bytes of one process that make it flush at once.
const MAX_PENDING: usize = 1 << 20;
/// The most iovecs one `process_vm_writev` takes (the kernel's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;
/// How many of the latest queued writes a new write looks through for one
/// it may replace (`Coalescer::replace`).
const REPLACE_SCAN: usize = 64;

/// Bytes fetched from a process at one epoch.
#[derive(Debug, Default)]
struct Span {
    /// The process's address of `bytes[0]`.
    start: usize,
    bytes: Vec<u8>,
    /// The epoch the bytes were read at; 0: invalid.
    epoch: u64,
    /// When it last served a read (for replacement).
    used: u64,
}

/// One queued write: `len` bytes of the queue's data from `at`, for the
/// process's address `addr`, raising `gone` if the process has gone.
#[derive(Debug)]
struct Pending {
    addr: usize,
    at: usize,
    len: usize,
    gone: Arc<AtomicBool>,
}

/// The read-ahead spans and queued writes of one process.
#[derive(Debug, Default)]
struct Coalescer {
    spans: Vec<Span>,
    writes: Vec<Pending>,
    data: Vec<u8>,
    tick: u64,
}

thread_local! {
    /// The read cache's generation: spans read at an older one are stale.
    /// Per thread, as the world (and so every [`ProcessMemory`] it holds)
    /// lives on the fabric's one thread.
    static EPOCH: Cell<u64> = const { Cell::new(1) };
    /// Per process (by pid), shared by all its registrations.
    static PROCS: RefCell<BTreeMap<libc::pid_t, Coalescer>> =
        const { RefCell::new(BTreeMap::new()) };
}

/// Forgets every read-ahead span: the processes may have changed their
/// memory since. The fabric calls it whenever it takes in new work or
/// calls and when it wakes from sleep.
pub(crate) fn new_epoch() {
    EPOCH.with(|e| e.set(e.get().wrapping_add(1).max(1)));
}

/// Sends every queued write to its process. The fabric calls it before
/// anything that lets a process see the world's progress: a completion
/// published, a reply sent, going to sleep.
pub(crate) fn flush_all() {
    let _ = PROCS.try_with(|p| {
        let Ok(mut procs) = p.try_borrow_mut() else {
            return;
        };
        for (pid, c) in procs.iter_mut() {
            c.flush(*pid);
        }
        // Processes that come and go leave entries: keep the table small.
        if procs.len() > 64 {
            let now = EPOCH.with(Cell::get);
            procs.retain(|_, c| c.spans.iter().any(|s| s.epoch == now));
        }
    });
}

/// Copies `n` bytes between `local` and process `pid`'s address `remote`
/// in one call; whether every byte moved. `ESRCH` raises `gone`.
fn copy_exact(
    pid: libc::pid_t,
    remote: usize,
    local: *mut u8,
    n: usize,
    write: bool,
    gone: &AtomicBool,
) -> bool {
    if n == 0 {
        return true;
    }
    let l = libc::iovec {
        iov_base: local.cast(),
        iov_len: n,
    };
    let r = libc::iovec {
        iov_base: remote as *mut libc::c_void,
        iov_len: n,
    };
    // SAFETY: `l` describes `n` bytes the caller owns (a live slice,
    // writable when reading); `r` names the client's memory, which
    // the kernel checks (EFAULT/ESRCH, never our memory).
    let done = unsafe {
        if write {
            libc::process_vm_writev(pid, &l, 1, &r, 1, 0)
        } else {
            libc::process_vm_readv(pid, &l, 1, &r, 1, 0)
        }
    };
    if done < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        gone.store(true, Ordering::Relaxed);
    }
    usize::try_from(done).is_ok_and(|d| d == n)
}

impl Coalescer {
    /// Sends the queued writes to process `pid`: contiguous ones as one
    /// iovec, up to [`IOV_MAX`] iovecs per call. When a call moves less
    /// than all (a page not mapped), its writes are made again one by one,
    /// as they would have been without the queue, so the same bytes land.
    fn flush(&mut self, pid: libc::pid_t) {
        if self.writes.is_empty() {
            return;
        }
        let mut first = 0;
        while first < self.writes.len() {
            let mut local: Vec<libc::iovec> = Vec::new();
            let mut remote: Vec<libc::iovec> = Vec::new();
            let mut total = 0usize;
            let mut end = first;
            let mut next_addr = None;
            while end < self.writes.len() {
                let w = &self.writes[end];
                if next_addr == Some(w.addr) {
                    // Contiguous in the process and in `data` (queued in order).
                    if let (Some(l), Some(r)) = (local.last_mut(), remote.last_mut()) {
                        l.iov_len += w.len;
                        r.iov_len += w.len;
                    }
                } else {
                    if local.len() == IOV_MAX {
                        break;
                    }
                    local.push(libc::iovec {
                        // In bounds: `at + len <= data.len()` for every write.
                        iov_base: self.data[w.at..].as_mut_ptr().cast(),
                        iov_len: w.len,
                    });
                    remote.push(libc::iovec {
                        iov_base: w.addr as *mut libc::c_void,
                        iov_len: w.len,
                    });
                }
                total += w.len;
                next_addr = w.addr.checked_add(w.len);
                end += 1;
            }
            // SAFETY: each local iovec names bytes of `self.data`, alive and
            // not moved during the call; the remote ones name the client's
            // memory, which the kernel checks (EFAULT/ESRCH, never ours).
            // Both arrays hold `local.len()` (<= IOV_MAX) entries.
            let done = unsafe {
                libc::process_vm_writev(
                    pid,
                    local.as_ptr(),
                    local.len() as libc::c_ulong,
                    remote.as_ptr(),
                    remote.len() as libc::c_ulong,
                    0,
                )
            };
            if usize::try_from(done).is_ok_and(|d| d == total) {
                first = end;
                continue;
            }
            let esrch =
                done < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            for w in &self.writes[first..] {
                if esrch {
                    w.gone.store(true, Ordering::Relaxed);
                } else {
                    let at = self.data[w.at..].as_mut_ptr();
                    let _ = copy_exact(pid, w.addr, at, w.len, true, &w.gone);
                }
            }
            break;
        }
        self.writes.clear();
        self.data.clear();
    }

    /// Puts `src` in place of the bytes of a queued write of exactly
    /// `[addr, addr + src.len())` when no write queued after it overlaps
    /// them (looked for among the last [`REPLACE_SCAN`] writes only);
    /// whether it did. Nothing sees the process's memory between two
    /// flushes, so the bytes that land are the same as with both writes
    /// made in order, and a program that WRITEs the same buffer again and
    /// again (perftest's bandwidth tests) costs one copy into the process
    /// per flush instead of one per message.
    fn replace(&mut self, addr: usize, src: &[u8], gone: &Arc<AtomicBool>) -> bool {
        let n = src.len();
        let from = self.writes.len().saturating_sub(REPLACE_SCAN);
        let recent = &self.writes[from..];
        let Some(i) = recent.iter().rposition(|w| w.addr == addr && w.len == n) else {
            return false;
        };
        let end = addr.saturating_add(n);
        if recent[i + 1..]
            .iter()
            .any(|w| w.addr < end && addr < w.addr.saturating_add(w.len))
        {
            return false;
        }
        // Every write queued after `i` is in the window, and none overlaps.
        let w = &mut self.writes[from + i];
        self.data[w.at..w.at + n].copy_from_slice(src);
        w.gone = Arc::clone(gone);
        true
    }

    /// Forgets the spans overlapping `[addr, addr + n)`.
    fn invalidate(&mut self, addr: usize, n: usize) {
        for s in &mut self.spans {
            if addr < s.start.saturating_add(s.bytes.len()) && s.start < addr.saturating_add(n) {
                s.epoch = 0;
            }
        }
    }
}

impl ProcessMemory {
    /// The range `[addr, addr + len)` of process `pid`, each copy one
    /// exact call; `gone` is raised when the process has gone.
    pub(crate) fn new(pid: libc::pid_t, addr: usize, len: usize, gone: Arc<AtomicBool>) -> Self {
        Self {
            pid,
            addr,
            len,
            gone,
            coalesce: false,
        }
    }

    /// The client's range `[addr, addr + len)`, its copies coalesced: only
    /// for a thread that calls [`new_epoch`] and [`flush_all`] as the
    /// fabric's loop does; `gone` is its session's flag.
    pub(crate) fn coalesced(
        pid: libc::pid_t,
        addr: usize,
        len: usize,
        gone: Arc<AtomicBool>,
    ) -> Self {
        Self {
            pid,
            addr,
            len,
            gone,
            coalesce: true,
        }
    }

    /// The process's address of `offset` when `[offset, offset + n)`
    /// lies in the range (and in the address space).
    fn at(&self, offset: usize, n: usize) -> Option<usize> {
        let end = offset.checked_add(n)?;
        let addr = self.addr.checked_add(offset)?;
        (end <= self.len && addr.checked_add(n).is_some()).then_some(addr)
    }

    /// Reads the client's `[addr + offset, ..)` into `dst`; whether every
    /// byte came. Served from a span read at this epoch when one covers
    /// it; else the queued writes go first and a span is fetched; when
    /// the span cannot be read far enough, one exact copy decides.
    fn read_into(&self, offset: usize, dst: &mut [u8]) -> bool {
        let n = dst.len();
        if n == 0 {
            return true;
        }
        let Some(addr) = self.at(offset, n) else {
            return false;
        };
        let exact =
            |dst: &mut [u8]| copy_exact(self.pid, addr, dst.as_mut_ptr(), n, false, &self.gone);
        if !self.coalesce {
            return exact(dst);
        }
        let epoch = EPOCH.with(Cell::get);
        let served = PROCS.try_with(|p| {
            let Ok(mut procs) = p.try_borrow_mut() else {
                return exact(dst);
            };
            let c = procs.entry(self.pid).or_default();
            c.tick += 1;
            let tick = c.tick;
            if let Some(s) = c.spans.iter_mut().find(|s| {
                s.epoch == epoch
                    && s.start <= addr
                    && addr + n <= s.start.saturating_add(s.bytes.len())
            }) {
                s.used = tick;
                let from = addr - s.start;
                dst.copy_from_slice(&s.bytes[from..from + n]);
                return true;
            }
            // Every earlier write lands before the process is read again.
            c.flush(self.pid);
            if n >= SPAN {
                return exact(dst);
            }
            let want = SPAN.min(self.len - offset).min(usize::MAX - addr);
            if c.spans.len() < SPANS {
                c.spans.push(Span::default());
            }
            let Some(s) = c
                .spans
                .iter_mut()
                .min_by_key(|s| (s.epoch == epoch, s.used))
            else {
                return exact(dst);
            };
            s.epoch = 0;
            s.bytes.resize(want, 0);
            let l = libc::iovec {
                iov_base: s.bytes.as_mut_ptr().cast(),
                iov_len: want,
            };
            let r = libc::iovec {
                iov_base: addr as *mut libc::c_void,
                iov_len: want,
            };
            // SAFETY: `l` names the span's `want` bytes, ours and alive;
            // `r` the client's memory, which the kernel checks.
            let done = unsafe { libc::process_vm_readv(self.pid, &l, 1, &r, 1, 0) };
            let Ok(got) = usize::try_from(done) else {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
                    self.gone.store(true, Ordering::Relaxed);
                    return false;
                }
                return exact(dst);
            };
            if got < n {
                // Part of the span is not there: exactly as without it.
                return exact(dst);
            }
            s.bytes.truncate(got);
            s.start = addr;
            s.epoch = epoch;
            s.used = tick;
            dst.copy_from_slice(&s.bytes[..n]);
            true
        });
        served.unwrap_or_else(|_| exact(dst))
    }

    /// Queues `src` for the client's `[addr + offset, ..)` (nothing when
    /// out of the range), forgetting the spans it overlaps.
    fn write_from(&self, offset: usize, src: &[u8]) {
        let n = src.len();
        let Some(addr) = self.at(offset, n).filter(|_| n > 0) else {
            return;
        };
        if !self.coalesce {
            let _ = copy_exact(self.pid, addr, src.as_ptr().cast_mut(), n, true, &self.gone);
            return;
        }
        let queued = PROCS.try_with(|p| {
            let Ok(mut procs) = p.try_borrow_mut() else {
                return false;
            };
            let c = procs.entry(self.pid).or_default();
            c.invalidate(addr, n);
            if c.replace(addr, src, &self.gone) {
                return true;
            }
            c.writes.push(Pending {
                addr,
                at: c.data.len(),
                len: n,
                gone: Arc::clone(&self.gone),
            });
            c.data.extend_from_slice(src);
            if c.data.len() >= MAX_PENDING {
                c.flush(self.pid);
            }
            true
        });
        if !queued.unwrap_or(false) {
            let _ = copy_exact(self.pid, addr, src.as_ptr().cast_mut(), n, true, &self.gone);
        }
    }
}

impl Drop for ProcessMemory {
    /// What the world wrote lands before the registration is forgotten,
    /// and what was read of it is forgotten too.
    fn drop(&mut self) {
        if !self.coalesce {
            return;
        }
        let _ = PROCS.try_with(|p| {
            if let Ok(mut procs) = p.try_borrow_mut() {
                if let Some(c) = procs.get_mut(&self.pid) {
                    c.flush(self.pid);
                    c.invalidate(self.addr, self.len);
                }
            }
        });
    }
}

/// Whether registering memory with `access` needs it writable, as the
/// kernel decides when it pins the pages: local or remote write, remote
/// atomics, and window binding (which can grant write) do.
pub(crate) fn needs_write(access: AccessFlags) -> bool {
    access.intersects(
        AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::MW_BIND,
    )
}

/// Checks that every page of `[addr, addr + len)` is mapped readable (and
/// writable when `write`) in process `pid` (`None`: this one), as
/// `ibv_reg_mr` pinning the pages does; the reason for `EFAULT` otherwise.
///
/// Reads `/proc/PID/maps` once (a registration is rare and a listing is a
/// few hundred lines): cheaper than touching every page, and it sees
/// permissions, which probing by copy does not.
pub(crate) fn check_mapped(
    pid: Option<libc::pid_t>,
    addr: usize,
    len: usize,
    write: bool,
) -> Result<(), String> {
    if len == 0 {
        return Ok(());
    }
    let end = addr
        .checked_add(len)
        .ok_or_else(|| "addr + length wraps around".to_owned())?;
    let path = match pid {
        Some(p) => format!("/proc/{p}/maps"),
        None => "/proc/self/maps".to_owned(),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut at = addr;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (words.next(), words.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if hi <= at {
            continue;
        }
        if lo > at {
            break;
        }
        let p = perms.as_bytes();
        if p.first() != Some(&b'r') || (write && p.get(1) != Some(&b'w')) {
            return Err(format!(
                "the page at {at:#x} is mapped {perms}, not {}",
                if write {
                    "readable and writable"
                } else {
                    "readable"
                }
            ));
        }
        at = hi;
        if at >= end {
            return Ok(());
        }
    }
    Err(format!(
        "nothing is mapped at {at:#x} (inside [{addr:#x}, {end:#x}))"
    ))
}

impl ExternalMemory for ProcessMemory {
    fn len(&self) -> usize {
        self.len
    }
    /// A client that has gone (or unmapped the buffer) reads as zeroes.
    fn read(&self, offset: usize, dst: &mut [u8]) {
        if !self.read_into(offset, dst) {
            dst.fill(0);
        }
    }
    /// A client that has gone gives nothing, and says so.
    fn try_read(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.read_into(offset, dst)
    }
    /// A client that has gone takes nothing.
    fn write(&mut self, offset: usize, src: &[u8]) {
        self.write_from(offset, src);
    }
}

#[cfg(test)]
mod tests;
