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
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_a_process_by_pid() {
        let mut buf = vec![7u8; 64];
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let mut m = ProcessMemory::new(pid, buf.as_mut_ptr() as usize, buf.len(), Arc::default());
        m.write(10, &[1, 2, 3]);
        let mut out = [0u8; 5];
        m.read(9, &mut out);
        assert_eq!(out, [7, 1, 2, 3, 7]);
        // Past the end: refused, zeroes, nothing written.
        let mut past = [9u8; 4];
        m.read(62, &mut past);
        assert_eq!(past, [0; 4]);
        m.write(63, &[5, 5]);
        assert_eq!(buf[63], 7);
        assert_eq!(&buf[10..13], &[1, 2, 3]);
    }

    /// Goal: registration's check sees holes and read-only pages. Method:
    /// map four pages, unmap the second, make the third read-only and the
    /// fourth inaccessible (so no other thread's mapping can land right
    /// after the third and make the last question's answer vary), and ask
    /// about ranges over each.
    #[test]
    fn mapping_check_finds_holes_and_read_only_pages() {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: an anonymous private mapping, no address hint.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                4 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let a = base as usize;
        // SAFETY: the pages are ours, just mapped above.
        unsafe {
            assert_eq!(libc::munmap((a + page) as *mut _, page), 0);
            assert_eq!(
                libc::mprotect((a + 2 * page) as *mut _, page, libc::PROT_READ),
                0
            );
            assert_eq!(
                libc::mprotect((a + 3 * page) as *mut _, page, libc::PROT_NONE),
                0
            );
        }
        assert!(check_mapped(None, a, page, true).is_ok());
        let hole = check_mapped(None, a, 2 * page, false).unwrap_err();
        assert!(hole.contains("nothing is mapped"), "{hole}");
        assert!(check_mapped(None, a + 2 * page, page, false).is_ok());
        let ro = check_mapped(None, a + 2 * page, page, true).unwrap_err();
        assert!(ro.contains("not readable and writable"), "{ro}");
        assert!(check_mapped(None, a + 2 * page, page + 1, false).is_err());
        // SAFETY: unmapping what remains of our own mapping.
        unsafe {
            libc::munmap(base, page);
            libc::munmap((a + 2 * page) as *mut _, 2 * page);
        }
        assert!(needs_write(AccessFlags::REMOTE_ATOMIC));
        assert!(!needs_write(AccessFlags::REMOTE_READ));
    }
    /// Goal: plain (not coalesced) memory, the library's own implicit ODP
    /// MR, copies at once: nothing flushes or moves an epoch there.
    /// Method: write and look at the buffer; change it and read.
    #[test]
    fn plain_memory_copies_at_once() {
        let mut buf = vec![0u8; 64];
        let mut m = ProcessMemory::new(me(), buf.as_mut_ptr() as usize, 64, Arc::default());
        let mut out = [0u8; 1];
        m.read(0, &mut out);
        m.write(1, &[5]);
        // SAFETY: reading our own live buffer.
        assert_eq!(unsafe { core::ptr::read_volatile(buf.as_ptr().add(1)) }, 5);
        buf[0] = 6;
        m.read(0, &mut out);
        assert_eq!(out, [6]);
        drop(m);
    }

    fn me() -> libc::pid_t {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() }
    }

    /// Goal: a read after a write sees it, even when a span covering the
    /// written bytes was fetched before. Method: read (fetching a span),
    /// write through the same process's other registration, read again.
    #[test]
    fn a_read_after_a_write_sees_it() {
        new_epoch();
        let mut buf = vec![1u8; 8192];
        let a = buf.as_mut_ptr() as usize;
        let r = ProcessMemory::coalesced(me(), a, buf.len(), Arc::default());
        let mut w = ProcessMemory::coalesced(me(), a + 4096, 4096, Arc::default());
        let mut out = [0u8; 4];
        r.read(4096, &mut out);
        assert_eq!(out, [1; 4]);
        w.write(1, &[9, 8]);
        assert!(r.try_read(4096, &mut out));
        assert_eq!(out, [1, 9, 8, 1]);
        drop((r, w));
        assert_eq!(&buf[4096..4100], &[1, 9, 8, 1]);
    }

    /// Goal: writes wait in the queue and land, all of them, at a flush;
    /// more pieces than one call takes still land. Method: queue
    /// non-contiguous writes (every other byte, more than `IOV_MAX`),
    /// look at the buffer before and after `flush_all`.
    #[test]
    fn writes_land_at_a_flush() {
        new_epoch();
        let mut buf = vec![0u8; 4 * IOV_MAX + 4];
        let mut m =
            ProcessMemory::coalesced(me(), buf.as_mut_ptr() as usize, buf.len(), Arc::default());
        for i in 0..2 * IOV_MAX {
            m.write(2 * i, &[(i % 251) as u8 + 1]);
        }
        // Contiguous writes make one piece.
        m.write(4 * IOV_MAX + 1, &[7]);
        m.write(4 * IOV_MAX + 2, &[7]);
        // SAFETY: reading our own live buffer; the fabric's copies go
        // through the kernel only at a flush, which has not happened.
        let before = unsafe { core::ptr::read_volatile(buf.as_ptr()) };
        assert_eq!(before, 0, "the write went through before the flush");
        flush_all();
        for i in 1..2 * IOV_MAX {
            assert_eq!(buf[2 * i], (i % 251) as u8 + 1, "byte {}", 2 * i);
            assert_eq!(buf[2 * i + 1], 0);
        }
        assert_eq!(buf[0], 1);
        assert_eq!(&buf[4 * IOV_MAX..], &[0, 7, 7, 0]);
        drop(m);
    }

    /// Goal: a write of exactly the bytes of a queued one takes its place
    /// when no write queued after it overlaps them, and only then; the
    /// bytes that land are those of the writes made in order. Method:
    /// write `[0, 8)` three times with a write of `[16, 24)` between (one
    /// queued write each for the two ranges), then `[4, 12)` and `[0, 8)`
    /// again (queued: the overlap forbids the replacement); flush.
    #[test]
    fn a_rewrite_of_the_same_bytes_replaces_the_queued_one() {
        new_epoch();
        let mut buf = vec![0u8; 64];
        let mut m =
            ProcessMemory::coalesced(me(), buf.as_mut_ptr() as usize, buf.len(), Arc::default());
        let queued = || PROCS.with(|p| p.borrow().get(&me()).map_or(0, |c| c.writes.len()));
        m.write(0, &[1; 8]);
        m.write(16, &[5; 8]);
        m.write(0, &[2; 8]);
        m.write(0, &[3; 8]);
        assert_eq!(queued(), 2, "the rewrites of [0, 8) replaced the first");
        m.write(4, &[4; 8]);
        m.write(0, &[6; 8]);
        assert_eq!(queued(), 4, "after an overlapping write, a rewrite queues");
        flush_all();
        assert_eq!(&buf[..12], &[6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4]);
        assert_eq!(&buf[16..24], &[5; 8]);
        drop(m);
    }

    /// Goal: reads are served from the span until the epoch moves, and
    /// see the process's changes after. Method: read, change the buffer
    /// in place, read (old bytes: the span), bump, read (new bytes).
    #[test]
    fn a_new_epoch_forgets_what_was_read() {
        new_epoch();
        let mut buf = vec![3u8; 1000];
        let m =
            ProcessMemory::coalesced(me(), buf.as_mut_ptr() as usize, buf.len(), Arc::default());
        let mut out = [0u8; 2];
        m.read(500, &mut out);
        assert_eq!(out, [3, 3]);
        buf[500] = 4;
        buf[990] = 5;
        m.read(500, &mut out);
        assert_eq!(out, [3, 3], "the read did not come from the span");
        new_epoch();
        m.read(500, &mut out);
        assert_eq!(out, [4, 3]);
        m.read(989, &mut out);
        assert_eq!(out, [3, 5]);
        drop(m);
    }

    /// Goal: a span that cannot be read whole, and writes of which some
    /// cannot land, move exactly the bytes single copies would. Method:
    /// three pages, the last unmapped: reads inside the mapped part
    /// succeed, reads reaching the hole fail (zeroes, `try_read` false);
    /// queued writes before, into and after the hole: the others land.
    #[test]
    fn unmapped_parts_move_what_single_copies_would() {
        new_epoch();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: an anonymous private mapping, no address hint.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                3 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let a = base as usize;
        // SAFETY: the page is ours, just mapped above.
        assert_eq!(unsafe { libc::munmap((a + 2 * page) as *mut _, page) }, 0);
        let gone = Arc::new(AtomicBool::new(false));
        let mut m = ProcessMemory::coalesced(me(), a, 3 * page, Arc::clone(&gone));
        // SAFETY: the first two pages are mapped and ours.
        let mem = unsafe { core::slice::from_raw_parts_mut(a as *mut u8, 2 * page) };
        mem[page - 1] = 6;
        let mut out = [9u8; 2];
        assert!(m.try_read(page - 2, &mut out));
        assert_eq!(out, [0, 6]);
        let mut out = [9u8; 2];
        assert!(!m.try_read(2 * page - 1, &mut out));
        m.read(2 * page - 1, &mut out);
        assert_eq!(out, [0, 0]);
        assert!(!m.try_read(2 * page, &mut out));
        m.write(10, &[1, 2]);
        m.write(2 * page - 1, &[3, 3]);
        m.write(page + 5, &[4]);
        m.write(2 * page + 1, &[5]);
        flush_all();
        assert_eq!(&mem[10..12], &[1, 2]);
        assert_eq!(mem[page + 5], 4);
        // A single copy over the hole's edge may move the bytes before it
        // (as the kernel copies page by page): whatever it did, the same
        // as a single copy does.
        let edge = mem[2 * page - 1];
        assert!(edge == 0 || edge == 3, "{edge}");
        assert!(!gone.load(Ordering::Relaxed));
        drop(m);
        // SAFETY: unmapping what remains of our own mapping.
        unsafe { libc::munmap(base, 2 * page) };
    }

    /// Goal: a process that has gone reads as nothing and raises its
    /// session's flag, for reads and for queued writes. Method: fork a
    /// child that exits at once, reap it, copy from and to its pid.
    #[test]
    fn a_gone_process_raises_the_flag() {
        new_epoch();
        // SAFETY: the child only calls _exit (async-signal-safe).
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(0) };
        }
        assert!(child > 0);
        let mut status = 0;
        // SAFETY: waiting for our own child; `status` is live.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        let buf = [0u8; 64];
        let gone = Arc::new(AtomicBool::new(false));
        let m = ProcessMemory::coalesced(child, buf.as_ptr() as usize, 64, Arc::clone(&gone));
        let mut out = [9u8; 8];
        assert!(!m.try_read(0, &mut out));
        assert_eq!(out, [9; 8], "a failed read gave bytes");
        assert!(gone.load(Ordering::Relaxed));
        let gone2 = Arc::new(AtomicBool::new(false));
        let mut w = ProcessMemory::coalesced(child, buf.as_ptr() as usize, 64, Arc::clone(&gone2));
        w.write(0, &[1]);
        flush_all();
        assert!(gone2.load(Ordering::Relaxed));
        assert_eq!(buf[0], 0);
    }
}
