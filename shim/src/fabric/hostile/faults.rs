//! Faulty and slow programs: registration over unmapped or read-only
//! pages, a client trickling its frames, a sender killed mid-message, a
//! process of another uid.

use super::*;

/// Goal: `ibv_reg_mr` fails with EFAULT over memory that is not mapped,
/// or not writable when write access is asked, in process and over the
/// fabric, and nothing is registered. Method: map pages, unmap one, make
/// one read-only, and register ranges over each both ways.
#[test]
fn reg_mr_over_a_hole_is_efault() {
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
    // SAFETY: pages of our own mapping, just made.
    unsafe {
        assert_eq!(libc::munmap((a + page) as *mut _, page), 0);
        assert_eq!(
            libc::mprotect((a + 2 * page) as *mut _, page, libc::PROT_READ),
            0
        );
    }
    let fabric = Fabric::start("regmr");
    let local = Engine::Local(Box::new(SimVerbs::new(SimConfig::default())));
    for mut e in [local, fabric.engine()] {
        let where_ = if e.is_remote() {
            "fabric"
        } else {
            "in process"
        };
        let ctx = e.open_device(0, ProcessId(0)).unwrap();
        let pd = e.alloc_pd(&ctx).unwrap();
        let mut reg = |addr: usize, len: usize, access: AccessFlags| {
            e.reg_mr_app(pd, addr as u64, addr, len, access, || {
                Box::new(crate::appmem::AppMemory::new(addr, len))
            })
        };
        let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let efault = |r: Result<MrHandle, Error>, what: &str| {
            let err = r.expect_err(what);
            assert_eq!(err.errno(), libc::EFAULT, "{where_}: {what}: {err}");
        };
        assert!(reg(a, page, rw).is_ok(), "{where_}: a mapped page");
        efault(reg(a, 2 * page, rw), "a range over an unmapped page");
        efault(
            reg(a + page, 16, AccessFlags::REMOTE_READ),
            "an unmapped page",
        );
        efault(
            reg(a + 2 * page, page, rw),
            "write access to a read-only page",
        );
        efault(
            reg(a + 2 * page, page, AccessFlags::REMOTE_ATOMIC),
            "atomics on a read-only page",
        );
        assert!(
            reg(a + 2 * page, page, AccessFlags::REMOTE_READ).is_ok(),
            "{where_}: read access to a read-only page"
        );
        // A 1 GiB MR over a 64 KiB buffer.
        let small = vec![0u8; 64 << 10];
        efault(
            reg(small.as_ptr() as usize, 1 << 30, rw),
            "1 GiB over a 64 KiB buffer",
        );
        // ODP MRs are not pinned: they fault when reached, as the kernel's.
        assert!(
            reg(a + page, page, rw | AccessFlags::ON_DEMAND).is_ok(),
            "{where_}: an ODP MR over a hole registers"
        );
    }
    // SAFETY: unmapping what is left of our own mapping.
    unsafe { libc::munmap(base, 4 * page) };
}

/// Goal: a client that trickles a frame (its length, then a byte every
/// 1.5 s) does not hold up another pair's verbs. Method: two QPs of this
/// process connected to each other do WRITE round trips (post, poll until
/// the completion) for 5 s while another connection trickles; the worst
/// round trip stays under [`TRICKLE_BOUND`]; the trickler is dropped by
/// the frame deadline.
#[test]
fn a_trickling_client_does_not_stall_a_busy_pair() {
    let fabric = Fabric::start("trickle");
    let mut e = fabric.engine();
    let mut a_buf = vec![1u8; 4096];
    let mut b_buf = vec![0u8; 4096];
    let a = end(&mut e, 0, &mut a_buf);
    let b = end(&mut e, 1, &mut b_buf);
    to_rts(&mut e, &a.qp, b.qpn, b.lid);
    to_rts(&mut e, &b.qp, a.qpn, a.lid);
    let socket = fabric.socket.clone();
    let trickler = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&socket).unwrap();
        let t0 = Instant::now();
        let _ = s.write_all(&100u32.to_le_bytes());
        let mut sent = 0;
        while t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1500));
            if s.write_all(&[0]).is_err() {
                break;
            }
            sent += 1;
        }
        // The fabric closed the connection: reading gives EOF.
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let mut rest = [0u8; 16];
        (sent, s.read(&mut rest))
    });
    let sg = [Sge {
        addr: a.addr,
        length: 64,
        lkey: a.lkey,
    }];
    let t0 = Instant::now();
    let (mut worst, mut trips) = (Duration::ZERO, 0u32);
    let mut wc = [Wc::default(); 4];
    while t0.elapsed() < Duration::from_secs(5) {
        let wr = SendWr {
            wr_id: u64::from(trips),
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            ..SendWr::default()
        };
        let t = Instant::now();
        // SAFETY: both buffers outlive the request (polled below).
        unsafe { e.post_send(&a.qp, &[wr]) }.unwrap();
        loop {
            let n = e.poll_cq(&a.cq, &mut wc).unwrap();
            if n > 0 {
                assert_eq!(wc[0].status, WcStatus::Success);
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "a round trip never ended"
            );
        }
        worst = worst.max(t.elapsed());
        trips += 1;
    }
    let (sent, closed) = trickler.join().unwrap();
    eprintln!("{trips} round trips beside a trickler, the worst {worst:?}");
    assert!(trips > 10, "only {trips} round trips in 5 s");
    assert!(
        worst < TRICKLE_BOUND,
        "the worst round trip took {worst:?} (bound {TRICKLE_BOUND:?})"
    );
    assert!(
        sent <= 2,
        "the trickler was not dropped by the frame deadline"
    );
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert!(
        fabric.log().contains("did not arrive in time"),
        "{}",
        fabric.log()
    );
}

/// Goal: a sender killed mid-stream never yields a successful message
/// with made-up contents. Method: 20 times, a sender process streams
/// 4 KiB SENDs of 0x5a, eight in flight, to receives this process posts
/// slowly (so sends wait for them); the sender is killed; every receive
/// that completes successfully, before or after, must hold 0x5a only
/// (receive buffers are filled with 0xee before each post).
#[test]
fn a_killed_sender_never_yields_made_up_data() {
    let fabric = Fabric::start("kill");
    let mut e = fabric.engine();
    let (mut good, mut bad, mut failed) = (0u32, 0u32, 0u32);
    for run in 0..20u64 {
        let slots = 4usize;
        let mut buf = vec![0xeeu8; 4096 * slots];
        let me = end(&mut e, 1, &mut buf);
        let (mut child, mut out) = helper("sender", &fabric.socket);
        let peer = expect(&mut out, "PEER ");
        let mut w = peer.split_whitespace();
        let (qpn, lid): (u32, u16) = (
            w.next().unwrap().parse().unwrap(),
            w.next().unwrap().parse().unwrap(),
        );
        to_rts(&mut e, &me.qp, qpn, lid);
        writeln!(child.stdin.as_mut().unwrap(), "{} {}", me.qpn, me.lid).unwrap();
        expect(&mut out, "READY");
        let post = |e: &mut Engine, buf: &mut [u8], slot: usize| {
            buf[slot * 4096..(slot + 1) * 4096].fill(0xee);
            let sg = [Sge {
                addr: me.addr + (slot * 4096) as u64,
                length: 4096,
                lkey: me.lkey,
            }];
            // SAFETY: `buf` outlives the request (polled below).
            unsafe {
                e.post_recv(
                    &me.qp,
                    &[RecvWr {
                        wr_id: slot as u64,
                        sg_list: &sg,
                    }],
                )
            }
            .unwrap();
        };
        let kill_after = Duration::from_millis(50 + (run * 37) % 200);
        let t0 = Instant::now();
        let mut killed: Option<Instant> = None;
        let mut next = 0usize;
        let mut posted = 0usize;
        let mut wc = [Wc::default(); 4];
        loop {
            if killed.is_none() && t0.elapsed() > kill_after {
                let _ = child.kill();
                killed = Some(Instant::now());
            }
            if killed.is_some_and(|k| k.elapsed() > Duration::from_millis(400)) {
                break;
            }
            // One receive at a time, every 2 ms: the sends wait for them.
            if posted == 0 {
                post(&mut e, &mut buf, next);
                next = (next + 1) % slots;
                posted = 1;
            }
            std::thread::sleep(Duration::from_millis(2));
            let n = e.poll_cq(&me.cq, &mut wc).unwrap();
            for c in &wc[..n] {
                posted -= 1;
                if c.status == WcStatus::Success {
                    let s = c.wr_id as usize;
                    if buf[s * 4096..(s + 1) * 4096].iter().all(|&x| x == 0x5a) {
                        good += 1;
                    } else {
                        bad += 1;
                    }
                } else {
                    failed += 1;
                }
            }
        }
        let _ = child.wait();
        // The flushed receive (if any) comes with the QP's destruction.
        let _ = e.destroy_qp(&me.qp);
        let _ = e.dereg_mr(&me.mr);
    }
    eprintln!("{good} messages intact, {bad} made up, {failed} receives failed");
    assert!(good > 0, "no message got through at all");
    assert_eq!(bad, 0, "{bad} successful receives held made-up data");
}

/// Goal: a process of another uid is refused by the fabric (SO_PEERCRED),
/// and the library refuses a socket it does not own. Method (as root,
/// skipped otherwise): open the fabric's directory and socket to everyone,
/// fork a child that becomes uid 65534 and greets the fabric over a raw
/// socket: it gets no answer, only a closed connection, and the fabric
/// logs the refusal; then give the socket file to uid 65534 and connect
/// as the library does: refused before connecting.
#[test]
fn a_foreign_uid_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP a_foreign_uid_is_refused: needs root to become another uid");
        return;
    }
    let fabric = Fabric::start("uid");
    // The fabric makes its socket 0600 right after binding it: wait for
    // that, or it would undo the opening below.
    let t = Instant::now();
    while std::fs::metadata(&fabric.socket)
        .map_or(true, |m| m.permissions().mode() & 0o777 != 0o600)
        && t.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let open = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    open(&fabric.dir, 0o755);
    open(&fabric.socket, 0o666);
    let hello = crate::fabric::encode(&crate::fabric::Hello {
        protocol: crate::fabric::PROTOCOL,
        family: None,
    });
    let mut frame = (hello.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&hello);
    let path = std::ffi::CString::new(fabric.socket.to_str().unwrap()).unwrap();
    let mut addr: libc::sockaddr_un =
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
        unsafe { core::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(path.as_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: fork; the child makes only async-signal-safe calls (setgid,
    // setuid, socket, connect, write, read, _exit) on memory prepared
    // before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; every pointer names memory made before fork.
        let code = unsafe {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                10
            } else {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if fd < 0 || libc::connect(fd, (&raw const addr).cast(), len) != 0 {
                    11
                } else if libc::write(fd, frame.as_ptr().cast(), frame.len()) < 0 {
                    // The fabric closed the connection before the greeting
                    // was written (EPIPE, ECONNRESET): refused.
                    0
                } else {
                    let mut b = [0u8; 64];
                    match libc::read(fd, b.as_mut_ptr().cast(), b.len()) {
                        0 => 0,          // closed without a word: refused
                        n if n > 0 => 1, // answered: served
                        _ => 0,          // reset: refused
                    }
                }
            }
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` lives.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status));
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "the process of uid 65534 was served (1) or could not try (1x)"
    );
    let t0 = Instant::now();
    while !fabric.log().contains("of uid 65534") {
        assert!(t0.elapsed() < Duration::from_secs(10), "{}", fabric.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Our own process is still served.
    let mut e = fabric.engine();
    assert!(e.get_device_list().is_ok());
    // A socket file another user owns is refused before connecting.
    std::os::unix::fs::lchown(&fabric.socket, Some(65534), Some(65534)).unwrap();
    let err = Remote::connect(fabric.socket.clone(), None).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("uid 65534"), "{err}");
}
