//! A client's buffer, reached from the fabric process by
//! `process_vm_readv`/`process_vm_writev` (the NIC's DMA, across address
//! spaces).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use backend_sim::ExternalMemory;
use verbs_api::AccessFlags;

/// `len` bytes at `addr` in process `pid`.
#[derive(Debug)]
pub(crate) struct ProcessMemory {
    pid: libc::pid_t,
    addr: usize,
    len: usize,
    /// Raised when the process is found gone (a copy fails with `ESRCH`):
    /// the fabric then tears its session down before the world moves on.
    gone: Arc<AtomicBool>,
}

impl ProcessMemory {
    /// The client's range `[addr, addr + len)`; `gone` is its session's flag.
    pub(crate) fn new(pid: libc::pid_t, addr: usize, len: usize, gone: Arc<AtomicBool>) -> Self {
        Self {
            pid,
            addr,
            len,
            gone,
        }
    }

    /// Copies between `local` and the client's `[addr + offset, ..)`;
    /// whether every byte moved.
    fn copy(&self, offset: usize, local: *mut u8, n: usize, write: bool) -> bool {
        if n == 0 {
            return true;
        }
        if offset.checked_add(n).is_none_or(|end| end > self.len) {
            return false;
        }
        let l = libc::iovec {
            iov_base: local.cast(),
            iov_len: n,
        };
        let r = libc::iovec {
            iov_base: (self.addr + offset) as *mut libc::c_void,
            iov_len: n,
        };
        // SAFETY: `l` describes `n` bytes the caller owns (a live slice,
        // writable when reading); `r` names the client's memory, which
        // the kernel checks (EFAULT/ESRCH, never our memory).
        let done = unsafe {
            if write {
                libc::process_vm_writev(self.pid, &l, 1, &r, 1, 0)
            } else {
                libc::process_vm_readv(self.pid, &l, 1, &r, 1, 0)
            }
        };
        if done < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            self.gone.store(true, Ordering::Relaxed);
        }
        usize::try_from(done).is_ok_and(|d| d == n)
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
        if !self.copy(offset, dst.as_mut_ptr(), dst.len(), false) {
            dst.fill(0);
        }
    }
    /// A client that has gone gives nothing, and says so.
    fn try_read(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.copy(offset, dst.as_mut_ptr(), dst.len(), false)
    }
    /// A client that has gone takes nothing.
    fn write(&mut self, offset: usize, src: &[u8]) {
        let _ = self.copy(offset, src.as_ptr().cast_mut(), src.len(), true);
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
}
