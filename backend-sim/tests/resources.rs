//! PDs, CQs, MRs, SRQs, AHs, multicast and posting: the EBUSY rules, the MR
//! access rules (data-path.md §9.2) and the post-time checks (§1.1–§1.2).
#![allow(missing_docs, unsafe_code)]

mod common;

use backend_sim::{DeviceProfile, ErrnoFlavor, SimConfig, SimVerbs};
use common::*;
use verbs_api::*;

#[test]
fn dealloc_pd_in_use_is_ebusy_until_users_are_gone() {
    // Goal: EBUSY while a QP, MR, SRQ or AH uses the PD; then it succeeds.
    // Method: make one of each, dealloc after each destroy.
    let mut f = cx6();
    let pd = f.pd;
    let qp = f.rc();
    let mr = f.sim.reg_mr(&pd, 64, AccessFlags::LOCAL_WRITE).unwrap();
    let mut sa = SrqAttr {
        max_wr: 4,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = f.sim.create_srq(&pd, &mut sa).unwrap();
    let ah = f
        .sim
        .create_ah(
            &pd,
            &AhAttr {
                port_num: 1,
                dlid: 3,
                ..AhAttr::default()
            },
        )
        .unwrap();
    let e = f.sim.dealloc_pd(&pd).unwrap_err();
    assert_eq!(e.errno(), errno::EBUSY);
    assert_eq!(e.verb(), Verb::DeallocPd);
    f.sim.destroy_qp(&qp).unwrap();
    f.sim.dereg_mr(&mr).unwrap();
    f.sim.destroy_srq(&srq).unwrap();
    assert_eq!(f.sim.dealloc_pd(&pd).unwrap_err().errno(), errno::EBUSY);
    f.sim.destroy_ah(&ah).unwrap();
    f.sim.dealloc_pd(&pd).unwrap();
}

#[test]
fn destroy_cq_used_by_qp_is_ebusy_and_close_device_with_children_is_ebusy() {
    // Goal: CQ in use -> EBUSY; close_device with live children -> EBUSY.
    // Method: tear down in the wrong order, then the right one.
    let mut f = cx6();
    let (ctx, pd, cq) = (f.ctx, f.pd, f.cq);
    let qp = f.rc();
    assert_eq!(f.sim.destroy_cq(&cq).unwrap_err().errno(), errno::EBUSY);
    assert_eq!(f.sim.close_device(&ctx).unwrap_err().errno(), errno::EBUSY);
    f.sim.destroy_qp(&qp).unwrap();
    f.sim.destroy_cq(&cq).unwrap();
    f.sim.dealloc_pd(&pd).unwrap();
    f.sim.close_device(&ctx).unwrap();
}

#[test]
fn comp_channel_in_use_is_ebusy_and_notification_is_bookkept() {
    // Goal: a channel with a CQ is EBUSY to destroy; req_notify arms once;
    // get_cq_event/ack count events; destroy_cq with unacked events is refused.
    // Method: flush a receive on an armed CQ to produce one event.
    let mut f = cx6();
    let (ctx, pd) = (f.ctx, f.pd);
    let ch = f.sim.create_comp_channel(&ctx).unwrap();
    let cq = f
        .sim
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 8,
                channel: Some(&ch),
                ..CqInit::default()
            },
        )
        .unwrap();
    assert_eq!(
        f.sim.destroy_comp_channel(&ch).unwrap_err().errno(),
        errno::EBUSY
    );
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: caps(1, 2, 1, 1, 0),
        ..QpInitAttrEx::default()
    };
    let qp = f.sim.create_qp(&pd, &mut attr).unwrap();
    f.goto_init(qp);
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    unsafe {
        f.sim.post_recv(
            &qp,
            &[
                RecvWr {
                    wr_id: 5,
                    sg_list: &[],
                },
                RecvWr {
                    wr_id: 6,
                    sg_list: &[],
                },
            ],
        )
    }
    .unwrap();
    f.sim.req_notify_cq(&cq, true).unwrap();
    f.modify(qp, &state_only(QpState::Error), QpAttrMask::STATE)
        .unwrap();
    // Error completions are solicited: one event for the armed CQ, not two.
    assert_eq!(f.sim.get_cq_event(&ch).unwrap(), Some(cq));
    assert_eq!(f.sim.get_cq_event(&ch).unwrap(), None);
    f.sim.destroy_qp(&qp).unwrap();
    assert_eq!(
        f.sim.destroy_cq(&cq).unwrap_err().kind(),
        ErrorKind::ApiMisuse
    );
    f.sim.ack_cq_events(&cq, 1).unwrap();
    f.sim.destroy_cq(&cq).unwrap();
    f.sim.destroy_comp_channel(&ch).unwrap();
}

#[test]
fn reg_mr_access_rules() {
    // Goal: data-path.md §9.2: REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE ->
    // EINVAL; ON_DEMAND without ODP (rxe) -> EOPNOTSUPP; length 0 -> EINVAL;
    // optional-range bits are dropped; the bytes are zeroed and page aligned.
    let mut f = fixture(DeviceProfile::rxe());
    let pd = f.pd;
    for bad in [
        AccessFlags::REMOTE_WRITE,
        AccessFlags::REMOTE_ATOMIC | AccessFlags::REMOTE_READ,
    ] {
        let e = f.sim.reg_mr(&pd, 4096, bad).unwrap_err();
        assert_eq!(e.errno(), errno::EINVAL, "{bad}");
        assert!(
            e.to_string().starts_with("ibv_reg_mr failed: EINVAL"),
            "{e}"
        );
    }
    assert_eq!(
        f.sim
            .reg_mr(&pd, 4096, AccessFlags::ON_DEMAND)
            .unwrap_err()
            .errno(),
        errno::EOPNOTSUPP
    );
    assert_eq!(
        f.sim
            .reg_mr(&pd, 0, AccessFlags::LOCAL_WRITE)
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
    let mr = f
        .sim
        .reg_mr(
            &pd,
            5000,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::RELAXED_ORDERING,
        )
        .unwrap();
    let info = f.sim.mr_info(&mr).unwrap();
    assert_eq!(
        info.access,
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE
    );
    assert_eq!(info.addr % 4096, 0);
    assert_eq!(info.length, 5000);
    assert!(f.sim.mr_bytes(&mr).unwrap().iter().all(|b| *b == 0));
    f.sim.mr_bytes_mut(&mr).unwrap()[0] = 0xab;
    assert_eq!(f.sim.mr_bytes(&mr).unwrap()[0], 0xab);
    f.sim.dereg_mr(&mr).unwrap();
    assert_eq!(f.sim.mr_info(&mr).unwrap_err().errno(), errno::EINVAL);
}

#[test]
fn srq_modify_limit_and_resize_rules() {
    // Goal: LIMIT > max_wr is EINVAL; MAX_WR resize is EINVAL on mlx5 (no
    // SRQ_RESIZE) and rounds on rxe; query returns the armed limit.
    let mut f = cx6();
    let pd = f.pd;
    let mut a = SrqAttr {
        max_wr: 16,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = f.sim.create_srq(&pd, &mut a).unwrap();
    assert_eq!(a.max_wr, 31);
    let lim = |n| SrqAttr {
        max_wr: 0,
        max_sge: 0,
        srq_limit: n,
    };
    assert_eq!(
        f.sim
            .modify_srq(&srq, &lim(32), SrqAttrMask::LIMIT)
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
    f.sim.modify_srq(&srq, &lim(8), SrqAttrMask::LIMIT).unwrap();
    assert_eq!(f.sim.query_srq(&srq).unwrap().srq_limit, 8);
    let grow = SrqAttr {
        max_wr: 64,
        max_sge: 0,
        srq_limit: 0,
    };
    assert_eq!(
        f.sim
            .modify_srq(&srq, &grow, SrqAttrMask::MAX_WR)
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );

    let mut r = fixture(DeviceProfile::rxe());
    let rpd = r.pd;
    let mut a = SrqAttr {
        max_wr: 16,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = r.sim.create_srq(&rpd, &mut a).unwrap();
    r.sim.modify_srq(&srq, &grow, SrqAttrMask::MAX_WR).unwrap();
    assert_eq!(r.sim.query_srq(&srq).unwrap().max_wr, 127);
}

#[test]
fn multicast_rules() {
    // Goal: attach is UD only (EINVAL otherwise); destroy_qp while attached is
    // EBUSY; detaching a group that is not attached is EINVAL.
    let mut f = cx6();
    let rc = f.rc();
    let (ud, _) = f.create(QpType::Ud, caps(1, 1, 1, 1, 0)).unwrap();
    let gid = Gid::from_parts(0xff12_0000_0000_0000, 1);
    assert_eq!(
        f.sim.attach_mcast(&rc, &gid, 0xc001).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(
        f.sim
            .attach_mcast(&ud, &Gid::from_parts(0xfe80 << 48, 1), 0xc001)
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
    f.sim.attach_mcast(&ud, &gid, 0xc001).unwrap();
    assert_eq!(f.sim.destroy_qp(&ud).unwrap_err().errno(), errno::EBUSY);
    assert_eq!(
        f.sim.detach_mcast(&ud, &gid, 0xc002).unwrap_err().errno(),
        errno::EINVAL
    );
    f.sim.detach_mcast(&ud, &gid, 0xc001).unwrap();
    f.sim.destroy_qp(&ud).unwrap();
}

#[test]
fn create_ah_validates_port_grh_and_sgid() {
    // Goal: AH port 1..=phys_port_cnt, GRH on RoCE, sgid_index < gid_tbl_len.
    let mut f = fixture(DeviceProfile::connectx7());
    let pd = f.pd;
    let mut a = AhAttr {
        port_num: 1,
        is_global: true,
        ..AhAttr::default()
    };
    f.sim.create_ah(&pd, &a).unwrap();
    a.port_num = 2;
    assert_eq!(f.sim.create_ah(&pd, &a).unwrap_err().errno(), errno::EINVAL);
    a.port_num = 1;
    a.is_global = false;
    assert_eq!(f.sim.create_ah(&pd, &a).unwrap_err().errno(), errno::EINVAL);
    a.is_global = true;
    a.grh.sgid_index = 255;
    assert_eq!(f.sim.create_ah(&pd, &a).unwrap_err().errno(), errno::EINVAL);
}

#[test]
fn post_send_in_init_errno_depends_on_flavor() {
    // Goal: data-path.md §1.1: a send in INIT is ENOMEM on mlx5 and EINVAL per
    // spec/rxe; bad_wr is the first request.
    for (flavor, want) in [
        (ErrnoFlavor::Mlx5, errno::ENOMEM),
        (ErrnoFlavor::Spec, errno::EINVAL),
    ] {
        let mut sim = SimVerbs::new(SimConfig {
            errno_flavor: flavor,
            ..SimConfig::default()
        });
        let ctx = sim.open_device(0, ProcessId(0)).unwrap();
        let pd = sim.alloc_pd(&ctx).unwrap();
        let cq = sim
            .create_cq(
                &ctx,
                &CqInit {
                    cqe: 4,
                    ..CqInit::default()
                },
            )
            .unwrap();
        let mut f = Fixture { sim, ctx, pd, cq };
        let qp = f.rc();
        f.goto_init(qp);
        let wr = SendWr::<SimVerbs>::default();
        // SAFETY: the named MRs stay registered until the completions are reaped;
        // the simulator owns every byte and checks the rest.
        let e = unsafe { f.sim.post_send(&qp, &[wr]) }.unwrap_err();
        assert_eq!((e.errno(), e.bad_wr()), (want, Some(0)), "{flavor:?}: {e}");
        assert_eq!(e.verb(), Verb::PostSend);
    }
}

#[test]
fn post_recv_full_queue_is_enomem_with_bad_wr() {
    // Goal: posting past the RQ capacity fails with ENOMEM at the first request
    // that does not fit; the ones before it are posted.
    let mut f = cx6();
    let qp = f.rc(); // 16 receive slots
    f.goto_init(qp);
    let wrs: Vec<RecvWr<'_>> = (0..17)
        .map(|i| RecvWr {
            wr_id: i,
            sg_list: &[],
        })
        .collect();
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    let e = unsafe { f.sim.post_recv(&qp, &wrs) }.unwrap_err();
    assert_eq!((e.errno(), e.bad_wr()), (errno::ENOMEM, Some(16)));
    let too_many = [Sge::default(); 2];
    f.modify(qp, &state_only(QpState::Reset), QpAttrMask::STATE)
        .unwrap();
    f.goto_init(qp);
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    let e = unsafe {
        f.sim.post_recv(
            &qp,
            &[RecvWr {
                wr_id: 1,
                sg_list: &too_many,
            }],
        )
    }
    .unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
}

#[test]
fn post_recv_in_reset_is_einval_and_reset_discards_without_completions() {
    // Goal: receives in RESET are EINVAL; entering RESET drops posted WRs with no CQE (§7).
    let mut f = cx6();
    let qp = f.rc();
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    let e = unsafe {
        f.sim.post_recv(
            &qp,
            &[RecvWr {
                wr_id: 1,
                sg_list: &[],
            }],
        )
    }
    .unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    f.goto_init(qp);
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    unsafe {
        f.sim.post_recv(
            &qp,
            &[RecvWr {
                wr_id: 1,
                sg_list: &[],
            }],
        )
    }
    .unwrap();
    f.modify(qp, &state_only(QpState::Reset), QpAttrMask::STATE)
        .unwrap();
    let cq = f.cq;
    let mut wc = [Wc::default(); 2];
    assert_eq!(f.sim.poll_cq(&cq, &mut wc).unwrap(), 0);
}

#[test]
fn posts_in_err_are_flushed_and_slots_free_on_poll() {
    // Goal: WRs posted in ERR complete with WR_FLUSH_ERR; SQ slots are freed
    // only when the CQE is polled (data-path.md §1.2).
    let mut f = cx6();
    let (qp, cap) = f.create(QpType::Rc, caps(2, 1, 1, 1, 0)).unwrap();
    assert_eq!(cap.max_send_wr, 2);
    f.goto_rts(qp);
    f.modify(qp, &state_only(QpState::Error), QpAttrMask::STATE)
        .unwrap();
    let wrs: Vec<SendWr<'_, SimVerbs>> = (0..2)
        .map(|i| SendWr {
            wr_id: i,
            ..SendWr::default()
        })
        .collect();
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    unsafe { f.sim.post_send(&qp, &wrs) }.unwrap();
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    let e = unsafe {
        f.sim.post_send(
            &qp,
            &[SendWr {
                wr_id: 9,
                ..SendWr::default()
            }],
        )
    }
    .unwrap_err();
    assert_eq!(e.errno(), errno::ENOMEM);
    let cq = f.cq;
    let mut wc = [Wc::default(); 4];
    assert_eq!(f.sim.poll_cq(&cq, &mut wc).unwrap(), 2);
    assert!(wc[..2].iter().all(|w| w.status == WcStatus::WrFlushErr));
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    unsafe {
        f.sim.post_send(
            &qp,
            &[SendWr {
                wr_id: 9,
                ..SendWr::default()
            }],
        )
    }
    .unwrap();
}

#[test]
fn query_device_port_gid_pkey() {
    // Goal: the profile values are reported; bad ports and indices are EINVAL.
    let mut f = cx6();
    let ctx = f.ctx;
    let d = f.sim.query_device(&ctx).unwrap();
    assert_eq!(
        (d.max_qp_wr, d.max_cqe, d.max_sge, d.vendor_part_id),
        (32_768, 4_194_303, 30, 4123)
    );
    let p = f.sim.query_port(&ctx, 1).unwrap();
    assert_eq!(
        (p.active_mtu, p.gid_tbl_len, p.pkey_tbl_len),
        (Mtu::Mtu4096, 8, 128)
    );
    assert_eq!(
        f.sim.query_port(&ctx, 2).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(
        f.sim.query_gid(&ctx, 1, 0).unwrap().subnet_prefix(),
        0xfe80_0000_0000_0000
    );
    assert_eq!(
        f.sim.query_gid(&ctx, 1, 8).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(f.sim.query_pkey(&ctx, 1, 0).unwrap(), 0xffff);
    assert_eq!(
        f.sim.query_pkey(&ctx, 1, 128).unwrap_err().errno(),
        errno::EINVAL
    );
    let caps = f.sim.capabilities();
    assert!(caps.contains(
        Capabilities::RC
            | Capabilities::SRQ
            | Capabilities::SIM
            | Capabilities::ATOMICS
            | Capabilities::DATA_PATH
            | Capabilities::RDMA_CM
    ));
    // XRC (issue #4) is modelled on profiles with XRC (cx6 here).
    assert!(caps.contains(Capabilities::XRC | Capabilities::LEGACY_XRC));
    // DC (issue #5): claimed on cx6 (DC and DCI streams; OOO_DP is ConnectX-7 only).
    assert!(caps.contains(Capabilities::MLX5DV | Capabilities::DC | Capabilities::DCI_STREAMS));
    assert!(!caps.contains(Capabilities::OOO_DP));
}

#[test]
fn a_handle_of_another_world_is_einval_and_touches_nothing() {
    // Goal: issue #12 item 6: a handle of one SimVerbs named whatever sat at
    // that index in another (the storm destroyed 197 foreign objects).
    // Method: two worlds with the same objects at the same indices; use
    // world A's handles in world B; B's objects must survive.
    let mut a = cx6();
    let mut b = cx6();
    let qa = a.rc();
    let qb = b.rc();
    assert_eq!(qa.index(), qb.index());
    let e = b.sim.destroy_qp(&qa).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(b.sim.dealloc_pd(&a.pd).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(b.sim.destroy_cq(&a.cq).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(
        b.sim.close_device(&a.ctx).unwrap_err().errno(),
        errno::EINVAL
    );
    // B's own QP is untouched and still usable.
    b.sim.query_qp(&qb, QpAttrMask::STATE).unwrap();
    b.sim.destroy_qp(&qb).unwrap();
    a.sim.destroy_qp(&qa).unwrap();
}

#[test]
fn posting_an_empty_list_to_a_destroyed_srq_is_einval() {
    // Goal: issue #12 item 11: an empty post_srq_recv on a destroyed SRQ
    // returned 0, while posts on a destroyed QP are EINVAL.
    let mut f = cx6();
    let pd = f.pd;
    let mut sa = SrqAttr {
        max_wr: 4,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = f.sim.create_srq(&pd, &mut sa).unwrap();
    // SAFETY: an empty list names no memory.
    unsafe { f.sim.post_srq_recv(&srq, &[]) }.unwrap();
    f.sim.destroy_srq(&srq).unwrap();
    // SAFETY: as above.
    let e = unsafe { f.sim.post_srq_recv(&srq, &[]) }.unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(e.verb(), Verb::PostSrqRecv);
}

#[test]
fn dereg_under_a_posted_receive_keeps_the_slot_until_the_receive_goes() {
    // Goal: issue #18 item 1 / #12 item 3: deregistering an MR that a
    // posted receive names is allowed; the MR's keys die at once, its slot
    // is freed when the receive is released, and the PD can be freed.
    let mut f = cx6();
    let (pd, cq) = (f.pd, f.cq);
    let qp = f.rc();
    f.goto_init(qp);
    let mr = f.sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let info = f.sim.mr_info(&mr).unwrap();
    let sge = [Sge {
        addr: info.addr,
        length: 64,
        lkey: info.lkey,
    }];
    // SAFETY: the simulator owns the MR's bytes.
    unsafe {
        f.sim.post_recv(
            &qp,
            &[RecvWr {
                wr_id: 1,
                sg_list: &sge,
            }],
        )
    }
    .unwrap();
    // Writing the memory is the application's business.
    f.sim.mr_bytes_mut(&mr).unwrap()[0] = 9;
    let slots = f.sim.world().mr_slots_in_use();
    f.sim.dereg_mr(&mr).unwrap();
    assert_eq!(f.sim.mr_info(&mr).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(f.sim.dereg_mr(&mr).unwrap_err().errno(), errno::EINVAL);
    assert!(f.sim.world().mr_by_key(0, info.lkey).is_none(), "keys dead");
    assert_eq!(
        f.sim.world().mr_slots_in_use(),
        slots,
        "kept for the receive"
    );
    f.sim.destroy_qp(&qp).unwrap();
    assert_eq!(f.sim.world().mr_slots_in_use(), slots - 1, "freed with it");
    f.sim.destroy_cq(&cq).unwrap();
    f.sim.dealloc_pd(&pd).unwrap();
}

#[test]
fn strict_mr_ownership_refuses_what_hardware_leaves_to_the_application() {
    // Goal: the opt-in diagnostic keeps the old refusals (EFAULT).
    let mut sim = SimVerbs::new(SimConfig {
        strict_mr_ownership: true,
        ..SimConfig::with_devices(vec![DeviceProfile::connectx6()])
    });
    let ctx = sim.open_device(0, ProcessId(0)).unwrap();
    let pd = sim.alloc_pd(&ctx).unwrap();
    let cq = sim
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 16,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut sa = SrqAttr {
        max_wr: 4,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = sim.create_srq(&pd, &mut sa).unwrap();
    let mr = sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let info = sim.mr_info(&mr).unwrap();
    let sge = [Sge {
        addr: info.addr,
        length: 64,
        lkey: info.lkey,
    }];
    // SAFETY: the simulator owns the MR's bytes.
    unsafe {
        sim.post_srq_recv(
            &srq,
            &[RecvWr {
                wr_id: 1,
                sg_list: &sge,
            }],
        )
    }
    .unwrap();
    assert_eq!(sim.dereg_mr(&mr).unwrap_err().errno(), errno::EFAULT);
    assert_eq!(sim.mr_bytes_mut(&mr).unwrap_err().errno(), errno::EFAULT);
    sim.destroy_srq(&srq).unwrap();
    sim.mr_bytes_mut(&mr).unwrap()[0] = 1;
    sim.dereg_mr(&mr).unwrap();
    sim.destroy_cq(&cq).unwrap();
    sim.dealloc_pd(&pd).unwrap();
    sim.close_device(&ctx).unwrap();
}
