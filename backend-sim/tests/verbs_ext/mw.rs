//! Memory windows: type 1 and type 2 binds, their ranges and keys, unbind
//! and invalidation, and what a bound window does to `dereg_mr`.

use super::*;

fn write_via(
    sim: &mut SimVerbs,
    a: &Side,
    src: &MrInfo,
    rkey: u32,
    remote_addr: u64,
    wr_id: u64,
) -> WcStatus {
    let s = [Sge {
        addr: src.addr,
        length: 8,
        lkey: src.lkey,
    }];
    let wr = SendWr::<SimVerbs> {
        wr_id,
        sg_list: &s,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo { remote_addr, rkey },
        ..SendWr::default()
    };
    send(sim, &a.qp, &[wr]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 1];
    assert_eq!(sim.poll_cq(&a.cq, &mut wc).unwrap(), 1);
    assert_eq!(wc[0].wr_id, wr_id);
    wc[0].status
}

#[test]
fn type1_window_grants_its_range_and_unbind_revokes() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let mr = sim
        .reg_mr(&b.pd, 4096, rw() | AccessFlags::MW_BIND)
        .unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type1).unwrap();
    let old = sim.mw_info(&mw).unwrap().rkey;
    // Post-time errors: an address without an MR, ZERO_BASED.
    let bad = MwBind::<SimVerbs> {
        wr_id: 1,
        send_flags: SendFlags::SIGNALED,
        bind_info: MwBindInfo {
            mr: None,
            addr: imr.addr,
            length: 64,
            mw_access_flags: AccessFlags::REMOTE_WRITE,
        },
    };
    assert_eq!(
        sim.bind_mw(&b.qp, &mw, &bad).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(sim.mw_info(&mw).unwrap().rkey, old, "nothing changed");
    let bind = MwBind::<SimVerbs> {
        wr_id: 2,
        send_flags: SendFlags::SIGNALED,
        bind_info: MwBindInfo {
            mr: Some(&mr),
            addr: imr.addr + 1024,
            length: 256,
            mw_access_flags: AccessFlags::REMOTE_WRITE,
        },
    };
    sim.bind_mw(&b.qp, &mw, &bind).unwrap();
    let rkey = sim.mw_info(&mw).unwrap().rkey;
    assert_eq!(rkey, inc_rkey(old));
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 2];
    assert_eq!(sim.poll_cq(&b.cq, &mut wc).unwrap(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (2, WcStatus::Success, WcOpcode::BindMw)
    );
    // The MR cannot be deregistered or re-registered while bound.
    assert_eq!(sim.dereg_mr(&mr).unwrap_err().kind(), ErrorKind::Busy);
    let r = ReregMr::<SimVerbs> {
        flags: ReregMrFlags::CHANGE_ACCESS,
        access: rw() | AccessFlags::MW_BIND,
        ..ReregMr::default()
    };
    assert_eq!(sim.rereg_mr(&mr, &r).unwrap_err().errno(), errno::EBUSY);

    sim.mr_bytes_mut(&src).unwrap()[..8].copy_from_slice(&[0x5a; 8]);
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr + 1024 + 8, 10),
        WcStatus::Success
    );
    assert_eq!(&sim.mr_bytes(&mr).unwrap()[1032..1040], &[0x5a; 8]);
    // Outside the window (but inside the MR): REM_ACCESS_ERR.
    let (mut sim, a, b) = {
        let _ = (sim, a, b);
        pair(DeviceProfile::connectx6, None, WcExFlags::empty())
    };
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let mr = sim
        .reg_mr(&b.pd, 4096, rw() | AccessFlags::MW_BIND)
        .unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type1).unwrap();
    let bind = MwBind::<SimVerbs> {
        wr_id: 2,
        send_flags: SendFlags::empty(),
        bind_info: MwBindInfo {
            mr: Some(&mr),
            addr: imr.addr + 1024,
            length: 256,
            mw_access_flags: AccessFlags::REMOTE_READ,
        },
    };
    sim.bind_mw(&b.qp, &mw, &bind).unwrap();
    let rkey = sim.mw_info(&mw).unwrap().rkey;
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr + 1024, 11),
        WcStatus::RemAccessErr,
        "the window grants READ only"
    );
}

#[test]
fn window_range_and_unbind() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let mr = sim
        .reg_mr(&b.pd, 4096, rw() | AccessFlags::MW_BIND)
        .unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type1).unwrap();
    fn bind(mr: Option<&backend_sim::MrHandle>, addr: u64, length: u64) -> MwBind<'_, SimVerbs> {
        MwBind {
            wr_id: 3,
            send_flags: SendFlags::empty(),
            bind_info: MwBindInfo {
                mr,
                addr,
                length,
                mw_access_flags: AccessFlags::REMOTE_WRITE,
            },
        }
    }
    sim.bind_mw(&b.qp, &mw, &bind(Some(&mr), imr.addr, 64))
        .unwrap();
    let rkey = sim.mw_info(&mw).unwrap().rkey;
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr + 60, 1),
        WcStatus::RemAccessErr,
        "8 bytes at 60 leave a 64-byte window"
    );
    // The requester QP is in ERR now; a fresh pair for the unbind case.
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let mr = sim
        .reg_mr(&b.pd, 4096, rw() | AccessFlags::MW_BIND)
        .unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type1).unwrap();
    sim.bind_mw(&b.qp, &mw, &bind(Some(&mr), imr.addr, 64))
        .unwrap();
    let rkey = sim.mw_info(&mw).unwrap().rkey;
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr, 1),
        WcStatus::Success
    );
    sim.bind_mw(&b.qp, &mw, &bind(None, 0, 0)).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    sim.dereg_mr(&mr).unwrap_or_else(|e| panic!("unbound: {e}"));
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr, 2),
        WcStatus::RemAccessErr,
        "the old rkey of an unbound window"
    );
}

#[test]
fn bind_without_mw_bind_access_completes_with_mw_bind_err() {
    let (mut sim, _a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let mr = sim.reg_mr(&b.pd, 4096, rw()).unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type1).unwrap();
    let bind = MwBind::<SimVerbs> {
        wr_id: 4,
        send_flags: SendFlags::SIGNALED,
        bind_info: MwBindInfo {
            mr: Some(&mr),
            addr: imr.addr,
            length: 64,
            mw_access_flags: AccessFlags::REMOTE_WRITE,
        },
    };
    sim.bind_mw(&b.qp, &mw, &bind).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 1];
    assert_eq!(sim.poll_cq(&b.cq, &mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (4, WcStatus::MwBindErr));
}

#[test]
fn type2_window_binds_through_wr_api_and_invalidates() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, Some(ALL_OPS), WcExFlags::empty());
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let mr = sim
        .reg_mr(&b.pd, 4096, rw() | AccessFlags::MW_BIND)
        .unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type2).unwrap();
    let rkey = inc_rkey(sim.mw_info(&mw).unwrap().rkey);
    let info = MwBindInfo::<SimVerbs> {
        mr: Some(&mr),
        addr: imr.addr,
        length: 128,
        mw_access_flags: AccessFlags::REMOTE_WRITE,
    };
    let mut w = WrEx::new(
        1,
        WrOp::BindMw {
            mw: &mw,
            rkey,
            bind_info: info.clone(),
        },
    );
    w.wr_flags = SendFlags::SIGNALED;
    post_batch(&mut sim, &b.qp, &[w]).unwrap();
    assert_eq!(sim.mw_info(&mw).unwrap().rkey, rkey);
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 1];
    assert_eq!(sim.poll_cq(&b.cq, &mut wc).unwrap(), 1);
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr, 2),
        WcStatus::Success
    );
    // ibv_bind_mw refuses a type 2 window.
    let b1 = MwBind::<SimVerbs> {
        wr_id: 0,
        send_flags: SendFlags::empty(),
        bind_info: info,
    };
    assert_eq!(
        sim.bind_mw(&b.qp, &mw, &b1).unwrap_err().errno(),
        errno::EINVAL
    );
    // LOCAL_INV of the window: its rkey no longer grants access.
    let mut w = WrEx::new(
        3,
        WrOp::LocalInv {
            invalidate_rkey: rkey,
        },
    );
    w.wr_flags = SendFlags::SIGNALED;
    post_batch(&mut sim, &b.qp, &[w]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    assert_eq!(sim.poll_cq(&b.cq, &mut wc).unwrap(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (3, WcStatus::Success, WcOpcode::LocalInv)
    );
    assert_eq!(
        write_via(&mut sim, &a, &isrc, rkey, imr.addr, 4),
        WcStatus::RemAccessErr
    );
}

#[test]
fn windows_follow_the_profile() {
    // Goal: rxe (Linux 6.17) has windows of type 1 and 2 (it used to
    // report max_mw 0); an unknown type is EINVAL.
    let (mut sim, a, _b) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    assert_eq!(sim.query_device(&a.ctx).unwrap().max_mw, (1 << 19) - 1);
    for t in [MwType::Type1, MwType::Type2] {
        let mw = sim.alloc_mw(&a.pd, t).unwrap();
        sim.dealloc_mw(&mw).unwrap();
    }
    let e = sim.alloc_mw(&a.pd, MwType::Unknown(7)).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    // And a window holds its PD.
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let pd = sim.alloc_pd(&a.ctx).unwrap();
    let mw = sim.alloc_mw(&pd, MwType::Type2).unwrap();
    assert_eq!(sim.dealloc_pd(&pd).unwrap_err().kind(), ErrorKind::Busy);
    sim.dealloc_mw(&mw).unwrap();
    assert!(sim.dealloc_mw(&mw).is_err(), "a stale handle");
    sim.dealloc_pd(&pd).unwrap();
}

#[test]
fn post_send_refuses_bind_mw_without_bind_info() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let wrs = [
        SendWr::<SimVerbs> {
            wr_id: 1,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..SendWr::default()
        },
        SendWr::<SimVerbs> {
            wr_id: 2,
            opcode: WrOpcode::BindMw,
            ..SendWr::default()
        },
    ];
    let e = send(&mut sim, &a.qp, &wrs).unwrap_err();
    assert_eq!((e.errno(), e.bad_wr()), (errno::EINVAL, Some(1)));
    // The request before it was posted (and, with no receive, stays queued
    // behind RNR retries; it is on the queue, which is what matters here).
    assert_eq!(
        sim.query_qp(&a.qp, QpAttrMask::STATE).unwrap().0.qp_state,
        QpState::ReadyToSend
    );
}

#[test]
fn dereg_errno_with_a_bound_window_is_configurable() {
    let mut config = SimConfig::for_profiles(3, vec![DeviceProfile::connectx6()]);
    config.mw.dereg_bound_errno = errno::EINVAL;
    let mut sim = SimVerbs::new(config);
    let ctx = sim.open_device(0, ProcessId(0)).unwrap();
    let pd = sim.alloc_pd(&ctx).unwrap();
    let cq = sim
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 8,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        ..QpInitAttrEx::default()
    };
    let qp = sim.create_qp(&pd, &mut attr).unwrap();
    let ep = Endpoint::query(&mut sim, &ctx, &qp, 1).unwrap();
    connect_qp(&mut sim, &qp, &ep, &ep, &ConnectOptions::default()).unwrap();
    let mr = sim.reg_mr(&pd, 4096, rw() | AccessFlags::MW_BIND).unwrap();
    let addr = sim.mr_info(&mr).unwrap().addr;
    let mw = sim.alloc_mw(&pd, MwType::Type1).unwrap();
    let bind = MwBind::<SimVerbs> {
        wr_id: 1,
        send_flags: SendFlags::empty(),
        bind_info: MwBindInfo {
            mr: Some(&mr),
            addr,
            length: 16,
            mw_access_flags: AccessFlags::REMOTE_READ,
        },
    };
    sim.bind_mw(&qp, &mw, &bind).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    assert_eq!(sim.dereg_mr(&mr).unwrap_err().errno(), errno::EINVAL);
    // Deallocating the window unbinds it; then the MR goes.
    sim.dealloc_mw(&mw).unwrap();
    sim.dereg_mr(&mr).unwrap();
}

/// Another connected RC pair on the devices of `a` and `b`, in their PDs
/// and on their CQs.
fn second_pair(
    sim: &mut SimVerbs,
    a: &Side,
    b: &Side,
) -> (backend_sim::QpHandle, backend_sim::QpHandle) {
    let mut make = |s: &Side| {
        let mut attr = QpInitAttrEx::<SimVerbs> {
            send_cq: Some(&s.cq),
            recv_cq: Some(&s.cq),
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QpType::Rc,
            ..QpInitAttrEx::default()
        };
        sim.create_qp(&s.pd, &mut attr).unwrap()
    };
    let (c, d) = (make(a), make(b));
    let ec = Endpoint::query(sim, &a.ctx, &c, 1).unwrap();
    let ed = Endpoint::query(sim, &b.ctx, &d, 1).unwrap();
    let opts = ConnectOptions::default();
    connect_qp(sim, &c, &ec, &ed, &opts).unwrap();
    connect_qp(sim, &d, &ed, &ec, &opts).unwrap();
    (c, d)
}

/// Binds a type 2 window over the first 128 bytes of a fresh MR of `b`
/// through `post_wr` on `b.qp`; gives (window rkey, MR info, source MR info).
fn bound_type2(
    sim: &mut SimVerbs,
    a: &Side,
    b: &Side,
) -> (backend_sim::MwHandle, u32, MrInfo, MrInfo) {
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let mr = sim
        .reg_mr(&b.pd, 4096, rw() | AccessFlags::MW_BIND)
        .unwrap();
    let imr = sim.mr_info(&mr).unwrap();
    let mw = sim.alloc_mw(&b.pd, MwType::Type2).unwrap();
    let rkey = inc_rkey(sim.mw_info(&mw).unwrap().rkey);
    let mut w = WrEx::new(
        77,
        WrOp::BindMw {
            mw: &mw,
            rkey,
            bind_info: MwBindInfo {
                mr: Some(&mr),
                addr: imr.addr,
                length: 128,
                mw_access_flags: AccessFlags::REMOTE_WRITE,
            },
        },
    );
    w.wr_flags = SendFlags::SIGNALED;
    post_batch(sim, &b.qp, &[w]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 1];
    assert_eq!(sim.poll_cq(&b.cq, &mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (77, WcStatus::Success));
    (mw, rkey, imr, isrc)
}

fn write_on(
    sim: &mut SimVerbs,
    qp: &backend_sim::QpHandle,
    cq: &backend_sim::CqHandle,
    src: &MrInfo,
    rkey: u32,
    remote_addr: u64,
) -> WcStatus {
    let s = [Sge {
        addr: src.addr,
        length: 8,
        lkey: src.lkey,
    }];
    let wr = SendWr::<SimVerbs> {
        wr_id: 0xabc,
        sg_list: &s,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo { remote_addr, rkey },
        ..SendWr::default()
    };
    send(sim, qp, &[wr]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 1];
    assert_eq!(sim.poll_cq(cq, &mut wc).unwrap(), 1);
    assert_eq!(wc[0].wr_id, 0xabc);
    wc[0].status
}

#[test]
fn type2b_window_is_usable_only_through_its_qp_unless_configured_2a() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, Some(ALL_OPS), WcExFlags::empty());
    let (c, _d) = second_pair(&mut sim, &a, &b);
    let (_mw, rkey, imr, isrc) = bound_type2(&mut sim, &a, &b);
    // c reaches d, a QP of the window's PD but not the one that bound it.
    assert_eq!(
        write_on(&mut sim, &c, &a.cq, &isrc, rkey, imr.addr),
        WcStatus::RemAccessErr
    );
    // Through b, the QP it is bound to, the same write lands.
    assert_eq!(
        write_on(&mut sim, &a.qp, &a.cq, &isrc, rkey, imr.addr),
        WcStatus::Success
    );

    // SimConfig::mw.type2_qp_bound = false: type 2A semantics.
    let mut config = SimConfig::for_profiles(7, vec![DeviceProfile::connectx6(); 2]);
    config.mw.type2_qp_bound = false;
    let mut sim2 = SimVerbs::new(config);
    let (a2, b2) = sides_in(&mut sim2);
    let (c2, _d2) = second_pair(&mut sim2, &a2, &b2);
    let (_mw2, rkey2, imr2, isrc2) = bound_type2(&mut sim2, &a2, &b2);
    assert_eq!(
        write_on(&mut sim2, &c2, &a2.cq, &isrc2, rkey2, imr2.addr),
        WcStatus::Success
    );
}

/// `pair`'s sides in a simulator the caller configured.
fn sides_in(sim: &mut SimVerbs) -> (Side, Side) {
    let mut sides = Vec::new();
    for dev in 0..2 {
        let ctx = sim.open_device(dev, ProcessId(dev as u32)).unwrap();
        let pd = sim.alloc_pd(&ctx).unwrap();
        let cq = sim
            .create_cq_ex(
                &ctx,
                &CqInitAttrEx {
                    cqe: 64,
                    ..CqInitAttrEx::default()
                },
            )
            .unwrap();
        let mut attr = QpInitAttrEx::<SimVerbs> {
            send_cq: Some(&cq),
            recv_cq: Some(&cq),
            cap: QpCap {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 64,
            },
            qp_type: QpType::Rc,
            comp_mask: QpInitAttrMask::PD | QpInitAttrMask::SEND_OPS_FLAGS,
            pd: Some(&pd),
            send_ops_flags: ALL_OPS,
            ..QpInitAttrEx::default()
        };
        let qp = sim.create_qp_ex(&ctx, &mut attr).unwrap();
        sides.push(Side { ctx, pd, cq, qp });
    }
    let b = sides.pop().unwrap();
    let a = sides.pop().unwrap();
    let ea = Endpoint::query(sim, &a.ctx, &a.qp, 1).unwrap();
    let eb = Endpoint::query(sim, &b.ctx, &b.qp, 1).unwrap();
    let opts = ConnectOptions::default();
    connect_qp(sim, &a.qp, &ea, &eb, &opts).unwrap();
    connect_qp(sim, &b.qp, &eb, &ea, &opts).unwrap();
    (a, b)
}

#[test]
fn send_with_invalidate_unbinds_a_type2_window_and_a_second_bind_fails() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, Some(ALL_OPS), WcExFlags::empty());
    let (_mw, rkey, imr, isrc) = bound_type2(&mut sim, &a, &b);
    // a sends SEND_WITH_INV naming the window: b's receive reports it.
    let sge = [Sge {
        addr: imr.addr + 1024,
        length: 16,
        lkey: imr.lkey,
    }];
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 8,
            sg_list: &sge,
        }],
    )
    .unwrap();
    let mut w = WrEx::new(
        9,
        WrOp::SendInv {
            invalidate_rkey: rkey,
        },
    );
    w.wr_flags = SendFlags::SIGNALED;
    w.data = WrData::Sge(Sge {
        addr: isrc.addr,
        length: 8,
        lkey: isrc.lkey,
    });
    post_batch(&mut sim, &a.qp, &[w]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let got = poll_ex(&mut sim, &b.cq);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].wr_id, got[0].status), (8, WcStatus::Success));
    assert!(got[0].wc_flags.contains(WcFlags::WITH_INV));
    let s = poll_ex(&mut sim, &a.cq);
    assert_eq!((s[0].wr_id, s[0].status), (9, WcStatus::Success));
    assert_eq!(
        write_on(&mut sim, &a.qp, &a.cq, &isrc, rkey, imr.addr),
        WcStatus::RemAccessErr,
        "the invalidated window's rkey"
    );
    // Binding a bound type 2 window again: MW_BIND_ERR (o10-37.2.30). b
    // is in ERR after the access error: a fresh pair.
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, Some(ALL_OPS), WcExFlags::empty());
    let (mw, rkey, _imr, _isrc) = bound_type2(&mut sim, &a, &b);
    let mr = sim.reg_mr(&b.pd, 64, rw() | AccessFlags::MW_BIND).unwrap();
    let i = sim.mr_info(&mr).unwrap();
    let mut again = WrEx::new(
        5,
        WrOp::BindMw {
            mw: &mw,
            rkey: inc_rkey(rkey),
            bind_info: MwBindInfo {
                mr: Some(&mr),
                addr: i.addr,
                length: 8,
                mw_access_flags: AccessFlags::REMOTE_WRITE,
            },
        },
    );
    again.wr_flags = SendFlags::SIGNALED;
    post_batch(&mut sim, &b.qp, &[again]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let got = poll_ex(&mut sim, &b.cq);
    assert_eq!((got[0].wr_id, got[0].status), (5, WcStatus::MwBindErr));
}

#[test]
fn live_objects_count_windows() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let mw = sim.alloc_mw(&a.pd, MwType::Type1).unwrap();
    assert_eq!(sim.live_objects().mws, 1);
    assert!(sim.live_objects().to_string().contains("mws=1"));
    sim.dealloc_mw(&mw).unwrap();
    assert_eq!(sim.live_objects().mws, 0);
}
