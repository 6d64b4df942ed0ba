//! Tests of the fabric's copies of client memory.

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
    let m = ProcessMemory::coalesced(me(), buf.as_mut_ptr() as usize, buf.len(), Arc::default());
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
