//! Unit tests of the hardware backend that run without a device.

use super::*;
use crate::handles::PAGE;
use crate::xrcd::xrcd_file_in;

#[test]
fn new_fails_with_a_clear_no_device_error_here() {
    // This machine (and CI) has no RDMA subsystem. Where a device exists,
    // `new` succeeds and there is nothing to check.
    match HwVerbs::new() {
        Ok(_) => eprintln!("an RDMA device is present; skipping the no-device check"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
            assert_eq!(e.verb(), Verb::GetDeviceList);
            assert!(e.to_string().contains("ibv_get_device_list"), "{e}");
            assert!(!e.message().is_empty());
        }
    }
}

#[test]
fn verbs_without_a_device_fail_cleanly() {
    let mut hw = HwVerbs::unprobed();
    if hw.get_device_list().map(|l| !l.is_empty()).unwrap_or(false) {
        return; // a device is present
    }
    let e = hw.open_device(0, ProcessId(0)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
    assert_eq!(e.verb(), Verb::OpenDevice);
    assert!(hw.capabilities().is_empty());
    assert_eq!(hw.backend(), BackendKind::Hw);
}

#[test]
fn xrcd_numbers_name_one_inode_each() {
    // Goal: every handle naming XRCD file number n reaches the same
    // inode (the kernel shares domains by inode), different numbers
    // different inodes. Method: a private directory, two opens of one
    // number and one of another, inodes compared.
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("verbsim-xrcd-test-{}", std::process::id()));
    let a = xrcd_file_in(&dir, 7).unwrap().metadata().unwrap().ino();
    let b = xrcd_file_in(&dir, 7).unwrap().metadata().unwrap().ino();
    let c = xrcd_file_in(&dir, 8).unwrap().metadata().unwrap().ino();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn page_buffers_are_aligned_and_zeroed() {
    let b = PageBuf::new(10_000).unwrap();
    assert_eq!(b.ptr.as_ptr() as usize % PAGE, 0);
    // SAFETY: `b` owns `len` initialised bytes.
    let s = unsafe { core::slice::from_raw_parts(b.ptr.as_ptr(), b.len) };
    assert!(s.iter().all(|&x| x == 0));
    assert!(
        PageBuf::new(0).is_some(),
        "a zero-length MR still gets a page"
    );
}

// ----------------------------------------------------------------------
// rdma_cm, events and DC posting without a device
// ----------------------------------------------------------------------

#[test]
fn event_channel_without_kernel_rdma_is_a_clear_error() {
    // Goal: on a machine without kernel RDMA (this one, CI)
    // rdma_create_event_channel fails with a kind and a message naming
    // the C function, the errno and the likely cause; no panic.
    let mut hw = HwVerbs::unprobed();
    match hw.rdma_create_event_channel() {
        Ok(_) => eprintln!("kernel rdma_cm present; skipping the no-RDMA check"),
        Err(e) => {
            eprintln!("{e}");
            assert_eq!(e.verb(), Verb::RdmaCreateEventChannel);
            assert!(!e.is_not_implemented(), "{e}");
            let name = errno::name(e.errno()).unwrap();
            assert!(
                e.message()
                    .starts_with(&format!("rdma_create_event_channel failed: {name}")),
                "{e}"
            );
            if e.errno() == errno::ENODEV {
                assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
                assert!(e.message().contains("no RDMA device"), "{e}");
            }
        }
    }
}

#[test]
fn cm_verbs_on_a_destroyed_id_name_the_verb_and_do_not_touch_c() {
    // Goal: every rdma_cm verb refuses a stale id or channel with EINVAL
    // and a message, before any C call (the pointers are NULL here, so
    // a C call would crash the test).
    let mut hw = HwVerbs::unprobed();
    let id = HwCmId::stale_for_tests(hw.id);
    let ch = HwCmChannel::stale_for_tests(hw.id);
    let addr: std::net::SocketAddr = "10.0.0.1:7471".parse().unwrap();
    let mcast: std::net::SocketAddr = "239.1.2.3:0".parse().unwrap();
    let param = ConnParam::default();
    let pd: Option<&HwPd> = None;
    let mut attr = QpInitAttrEx::default();
    let results: Vec<(Verb, Result<()>)> = vec![
        (
            Verb::RdmaDestroyEventChannel,
            hw.rdma_destroy_event_channel(&ch),
        ),
        (
            Verb::RdmaCreateId,
            hw.rdma_create_id(&ch, 1, PortSpace::Tcp).map(|_| ()),
        ),
        (Verb::RdmaGetCmEvent, hw.rdma_get_cm_event(&ch).map(|_| ())),
        (Verb::RdmaDestroyId, hw.rdma_destroy_id(&id)),
        (Verb::RdmaGetLocalAddr, hw.rdma_id_info(&id).map(|_| ())),
        (Verb::RdmaBindAddr, hw.rdma_bind_addr(&id, addr)),
        (
            Verb::RdmaResolveAddr,
            hw.rdma_resolve_addr(&id, None, addr, 100),
        ),
        (Verb::RdmaResolveRoute, hw.rdma_resolve_route(&id, 100)),
        (Verb::RdmaListen, hw.rdma_listen(&id, 4)),
        (Verb::RdmaConnect, hw.rdma_connect(&id, &param)),
        (Verb::RdmaAccept, hw.rdma_accept(&id, &param)),
        (Verb::RdmaReject, hw.rdma_reject(&id, b"no")),
        (Verb::RdmaDisconnect, hw.rdma_disconnect(&id)),
        (
            Verb::RdmaCreateQp,
            hw.rdma_create_qp(&id, pd, &mut attr).map(|_| ()),
        ),
        (
            Verb::RdmaCreateQpEx,
            hw.rdma_create_qp_ex(&id, &mut attr).map(|_| ()),
        ),
        (Verb::RdmaDestroyQp, hw.rdma_destroy_qp(&id)),
        (Verb::RdmaEstablish, hw.rdma_establish(&id)),
        (
            Verb::RdmaJoinMulticast,
            hw.rdma_join_multicast(&id, mcast, 7),
        ),
        (
            Verb::RdmaJoinMulticastEx,
            hw.rdma_join_multicast_ex(
                &id,
                &JoinMcAttr {
                    addr: mcast,
                    join_flags: McJoinFlag::SendOnlyFullMember,
                },
                7,
            ),
        ),
        (
            Verb::RdmaLeaveMulticast,
            hw.rdma_leave_multicast(&id, mcast),
        ),
    ];
    for (verb, r) in results {
        let e = r.unwrap_err();
        assert_eq!(e.verb(), verb, "{e}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains("already destroyed"), "{e}");
        assert!(e.to_string().starts_with(verb.c_name()), "{e}");
    }
    // Handles of another instance are refused as such.
    let other = HwCmId::stale_for_tests(hw.id + 1_000_000);
    let e = hw.rdma_listen(&other, 1).unwrap_err();
    assert!(e.message().contains("another HwVerbs instance"), "{e}");
}

#[test]
fn verbs_test_device_puts_the_named_device_first() {
    // Goal: issue #20 item 4: VERBS_TEST_DEVICE selects the device it
    // names (index 0 of the backend), and a name that is not there is
    // a clear error listing the devices.
    let names: Vec<String> = ["mlx5_0", "mlx5_1", "rxe0"].map(String::from).to_vec();
    assert_eq!(device_order(&names, None).unwrap(), vec![0, 1, 2]);
    assert_eq!(device_order(&names, Some("mlx5_1")).unwrap(), vec![1, 0, 2]);
    assert_eq!(device_order(&names, Some("rxe0")).unwrap(), vec![2, 0, 1]);
    let e = device_order(&names, Some("mlx5_9")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoDevice);
    assert!(
        e.message().contains("mlx5_9") && e.message().contains("rxe0"),
        "{e}"
    );
}

#[test]
fn cm_ack_without_a_pending_event_is_einval() {
    // Goal: acknowledging an event that was never fetched (or twice) is
    // refused; C would corrupt the id's event count.
    let mut hw = HwVerbs::unprobed();
    let id = HwCmId::stale_for_tests(hw.id);
    let ev = CmEvent {
        event: CmEventType::Established,
        id,
        listen_id: None,
        status: 0,
        private_data: vec![],
        conn: ConnParam::default(),
        token: 0,
        ud: None,
        context: 0,
    };
    let e = hw.rdma_ack_cm_event(ev).unwrap_err();
    assert_eq!(e.verb(), Verb::RdmaAckCmEvent);
    assert_eq!(e.errno(), EINVAL);
    assert!(e.message().contains("no unacknowledged ESTABLISHED"), "{e}");
}

#[test]
fn private_data_longer_than_255_bytes_is_einval() {
    // Goal: C's u8 length would silently truncate; we refuse.
    let p = ConnParam {
        private_data: vec![0; 256],
        ..ConnParam::default()
    };
    let e = crate::cm::tests_conn_param(&p).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("256 bytes"), "{e}");
    assert!(crate::cm::tests_conn_param(&ConnParam::default()).is_ok());
}

/// A fake device context: a zeroed `verbs_context` whose `async_fd` is
/// one end of a socket pair, wrapped as a *borrowed* context so that
/// nothing ever calls `ibv_close_device` on it.
struct FakeCtx {
    ctx: HwContext,
    _vctx: Box<sys::verbs_context>,
    fds: (
        std::os::unix::net::UnixStream,
        std::os::unix::net::UnixStream,
    ),
}

fn fake_ctx(owner: u64) -> FakeCtx {
    use std::os::fd::AsRawFd;
    let fds = std::os::unix::net::UnixStream::pair().unwrap();
    // SAFETY: `verbs_context` is a plain C struct of integers, raw
    // pointers, nullable function pointers and opaque pthread byte
    // arrays: all zero is a valid value.
    let mut v: Box<sys::verbs_context> =
        Box::new(unsafe { core::mem::MaybeUninit::zeroed().assume_init() });
    v.context.async_fd = fds.0.as_raw_fd();
    let raw = &raw mut v.context;
    let ctx = HwContext(Arc::new(ContextInner::new(
        raw,
        owner,
        ProcessId(0),
        "fake0".into(),
        true,
    )));
    FakeCtx { ctx, _vctx: v, fds }
}

#[test]
fn async_events_are_non_blocking() {
    // Goal: with nothing pending, get_async_event returns Ok(None) at
    // once (O_NONBLOCK on async_fd, EAGAIN from the real libibverbs)
    // instead of blocking the thread. Method: a fake context whose
    // async_fd is an empty socket.
    let mut hw = HwVerbs::unprobed();
    let f = fake_ctx(hw.id);
    assert!(hw.get_async_event(&f.ctx).unwrap().is_none());
    assert!(f.ctx.0.async_nonblock.get());
    assert!(hw.get_async_event(&f.ctx).unwrap().is_none());
    // Another instance's context is refused; a closed one is stale.
    let mut other = HwVerbs::unprobed();
    let e = other.get_async_event(&f.ctx).unwrap_err();
    assert!(e.message().contains("another HwVerbs instance"), "{e}");
    f.ctx.0.closed.set(true);
    let e = hw.get_async_event(&f.ctx).unwrap_err();
    assert_eq!(e.verb(), Verb::GetAsyncEvent);
    assert!(e.message().contains("already destroyed"), "{e}");
    drop(f.fds);
}

#[test]
fn cq_events_are_non_blocking_and_acks_are_counted() {
    // Goal: get_cq_event on an empty channel is Ok(None) without
    // blocking; ack_cq_events refuses to acknowledge more than were
    // fetched (C's destroy would then wait forever); ack_async_event
    // refuses an event never fetched. Method: fake channel and CQ.
    use std::os::fd::AsRawFd;
    let mut hw = HwVerbs::unprobed();
    let f = fake_ctx(hw.id);
    let (rx, _tx) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut chan = sys::ibv_comp_channel {
        context: f.ctx.0.raw,
        fd: rx.as_raw_fd(),
        refcnt: 0,
    };
    let ch = HwCompChannel(Arc::new(ChanInner {
        obj: Owned::borrowed(NonNull::from(&mut chan), &f.ctx.0),
        nonblock: Cell::new(false),
    }));
    assert!(hw.get_cq_event(&ch).unwrap().is_none());
    assert!(ch.0.nonblock.get());

    // SAFETY: `ibv_cq` is plain C data (pointers, integers, opaque
    // pthread byte arrays): all zero is valid.
    let mut raw_cq: sys::ibv_cq = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
    let cq = HwCq(Arc::new(CqInner {
        obj: Owned::borrowed(NonNull::from(&mut raw_cq), &f.ctx.0),
        _channel: Some(ch.clone()),
        cq_context: 0,
        ex: None,
    }));
    register_cq(&cq);
    let e = hw.ack_cq_events(&cq, 1).unwrap_err();
    assert_eq!(e.verb(), Verb::AckCqEvents);
    assert!(e.message().contains("only 0 were fetched"), "{e}");
    hw.ack_cq_events(&cq, 0).unwrap();

    let ev = AsyncEvent {
        event_type: AsyncEventType::CqErr,
        element: AsyncElement::Cq(cq.clone()),
        token: 0,
    };
    let e = hw.ack_async_event(&ev).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    for element in [
        AsyncElement::QpNum(7),
        AsyncElement::Port(1),
        AsyncElement::Device,
    ] {
        let ev = AsyncEvent {
            event_type: AsyncEventType::PortActive,
            element,
            token: 0,
        };
        hw.ack_async_event(&ev).unwrap();
    }

    // The registry maps the CQ's address back to this very handle.
    let found = f.ctx.0.objects.borrow().cqs.get(&raw mut raw_cq as usize);
    assert!(Arc::ptr_eq(&found.unwrap(), &cq.0));
    // A borrowed object is never destroyed by its handle.
    let e = hw.destroy_cq(&cq).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    // A stale channel is refused before C is called.
    ch.0.obj.invalidate();
    let e = hw.get_cq_event(&ch).unwrap_err();
    assert!(e.message().contains("already destroyed"), "{e}");
    cq.0.obj.invalidate();
}

#[test]
fn dc_request_on_a_non_dci_qp_is_bad_wr_zero_and_posts_nothing() {
    // Goal: a WR with DC addressing on an ordinary QP is EINVAL with
    // bad_wr = its index, and nothing before it is sent to C when it is
    // first (a C call on this fake QP would crash the test).
    let mut hw = HwVerbs::unprobed();
    let f = fake_ctx(hw.id);
    // SAFETY: `ibv_qp`/`ibv_ah` are plain C data: all zero is valid.
    let mut raw_qp: sys::ibv_qp = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
    // SAFETY: as above.
    let mut raw_ah: sys::ibv_ah = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };
    let qp = HwQp(Arc::new(QpInner {
        obj: Owned::borrowed(NonNull::from(&mut raw_qp), &f.ctx.0),
        qp_num: 1,
        qp_type: QpType::Rc,
        dc_type: None,
        _send_cq: None,
        _recv_cq: None,
        _srq: None,
        _pd: None,
        _xrcd: None,
    }));
    let ah = HwAh(Arc::new(AhInner {
        obj: Owned::borrowed(NonNull::from(&mut raw_ah), &f.ctx.0),
        _pd: HwPd(Arc::new(PdInner {
            obj: Owned::borrowed(NonNull::dangling(), &f.ctx.0),
        })),
    }));
    let wr = SendWr {
        opcode: WrOpcode::RdmaWrite,
        dc: Some(DcInfo {
            ah: &ah,
            remote_dctn: 5,
            remote_dc_key: 6,
            stream_id: 0,
        }),
        ..SendWr::default()
    };
    // SAFETY: nothing reaches the hardware (the request is refused).
    let e = unsafe { hw.post_send(&qp, &[wr]) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.bad_wr(), Some(0));
    assert!(e.message().contains("not a DCI"), "{e}");
    ah.0._pd.0.obj.invalidate();
    ah.0.obj.invalidate();
    qp.0.obj.invalidate();
}

#[test]
fn attribute_conversions_round_trip() {
    let mut a = QpAttr {
        qp_state: QpState::ReadyToSend,
        path_mtu: Mtu::Mtu4096,
        qkey: 0x1111_2222,
        dest_qp_num: 0x42,
        qp_access_flags: AccessFlags(0b111),
        timeout: 14,
        ..QpAttr::default()
    };
    a.ah_attr.grh.dgid = Gid([7; 16]);
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.cap.max_inline_data = 64;
    assert_eq!(qp_attr_from_c(&qp_attr_to_c(&a)), a);
}
