//! A client's buffer, reached from the fabric process by
//! `process_vm_readv`/`process_vm_writev` (the NIC's DMA, across address
//! spaces).

use backend_sim::ExternalMemory;

/// `len` bytes at `addr` in process `pid`.
#[derive(Debug)]
pub(crate) struct ProcessMemory {
    pid: libc::pid_t,
    addr: usize,
    len: usize,
}

impl ProcessMemory {
    /// The client's range `[addr, addr + len)`.
    pub(crate) fn new(pid: libc::pid_t, addr: usize, len: usize) -> Self {
        Self { pid, addr, len }
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
        usize::try_from(done).is_ok_and(|d| d == n)
    }
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
        let mut m = ProcessMemory::new(pid, buf.as_mut_ptr() as usize, buf.len());
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
}
