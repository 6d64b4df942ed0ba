//! The extended verbs of issue #13 item 4 on the simulator: rereg_mr,
//! resize_cq, query_device_ex, extended CQs, the ibv_wr_* API,
//! query_qp_data_in_order, memory windows (`verbs_ext/mw.rs`), GID entries
//! and ECE (`verbs_ext/device.rs`), device memory (`verbs_ext/dm.rs`).

#![allow(unsafe_code)] // posting is `unsafe fn` (the hardware contract)

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use verbs_api::*;

#[path = "verbs_ext/device.rs"]
mod device;
#[path = "verbs_ext/dm.rs"]
mod dm;
#[path = "verbs_ext/mw.rs"]
mod mw;
#[path = "verbs_ext/storm.rs"]
mod storm;

/// One side of a connected RC pair.
struct Side {
    ctx: backend_sim::ContextHandle,
    pd: backend_sim::PdHandle,
    cq: backend_sim::CqHandle,
    qp: backend_sim::QpHandle,
}

/// Two devices of `profile`, an RC QP on each made with `send_ops` (when
/// `Some`, through `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`) and an extended CQ
/// of `wc_flags`, connected with every remote access.
fn pair(
    profile: fn() -> DeviceProfile,
    send_ops: Option<SendOpsFlags>,
    wc_flags: WcExFlags,
) -> (SimVerbs, Side, Side) {
    pair_sig_all(profile, send_ops, wc_flags, false)
}

/// [`pair`], the QPs created with `sq_sig_all` as given.
fn pair_sig_all(
    profile: fn() -> DeviceProfile,
    send_ops: Option<SendOpsFlags>,
    wc_flags: WcExFlags,
    sq_sig_all: bool,
) -> (SimVerbs, Side, Side) {
    let mut sim = SimVerbs::new(SimConfig::for_profiles(7, vec![profile(), profile()]));
    let mut sides = Vec::new();
    for dev in 0..2 {
        let ctx = sim.open_device(dev, ProcessId(dev as u32)).unwrap();
        let pd = sim.alloc_pd(&ctx).unwrap();
        let cq = sim
            .create_cq_ex(
                &ctx,
                &CqInitAttrEx {
                    cqe: 64,
                    wc_flags,
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
            sq_sig_all,
            comp_mask: QpInitAttrMask::PD,
            pd: Some(&pd),
            ..QpInitAttrEx::default()
        };
        if let Some(ops) = send_ops {
            attr.comp_mask |= QpInitAttrMask::SEND_OPS_FLAGS;
            attr.send_ops_flags = ops;
        }
        let qp = sim.create_qp_ex(&ctx, &mut attr).unwrap();
        sides.push(Side { ctx, pd, cq, qp });
    }
    let b = sides.pop().unwrap();
    let a = sides.pop().unwrap();
    let ea = Endpoint::query(&mut sim, &a.ctx, &a.qp, 1).unwrap();
    let eb = Endpoint::query(&mut sim, &b.ctx, &b.qp, 1).unwrap();
    let opts = ConnectOptions::default();
    connect_qp(&mut sim, &a.qp, &ea, &eb, &opts).unwrap();
    connect_qp(&mut sim, &b.qp, &eb, &ea, &opts).unwrap();
    (sim, a, b)
}

const ALL_OPS: SendOpsFlags = SendOpsFlags(
    SendOpsFlags::SEND.0
        | SendOpsFlags::SEND_WITH_IMM.0
        | SendOpsFlags::RDMA_WRITE.0
        | SendOpsFlags::RDMA_READ.0
        | SendOpsFlags::BIND_MW.0
        | SendOpsFlags::LOCAL_INV.0
        | SendOpsFlags::SEND_WITH_INV.0,
);

fn send(
    sim: &mut SimVerbs,
    qp: &backend_sim::QpHandle,
    wrs: &[SendWr<'_, SimVerbs>],
) -> Result<()> {
    // SAFETY: the simulator owns every byte an SGE names (the contract
    // only matters on hardware).
    unsafe { sim.post_send(qp, wrs) }
}

fn recv(sim: &mut SimVerbs, qp: &backend_sim::QpHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
    // SAFETY: as in `send`.
    unsafe { sim.post_recv(qp, wrs) }
}

fn post_batch(
    sim: &mut SimVerbs,
    qp: &backend_sim::QpHandle,
    batch: &[WrEx<'_, SimVerbs>],
) -> Result<()> {
    // SAFETY: as in `send`.
    unsafe { sim.post_wr(qp, batch) }
}

fn rw() -> AccessFlags {
    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ
}

fn poll_ex(sim: &mut SimVerbs, cq: &backend_sim::CqHandle) -> Vec<WcEx> {
    let mut out = vec![WcEx::default(); 16];
    let n = sim.poll_cq_ex(cq, &mut out).unwrap();
    out.truncate(n);
    out
}

// ------------------------------------------------------------- rereg_mr

#[test]
fn rereg_mr_checks_input_and_changes_nothing_on_error() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let mr = sim.reg_mr(&a.pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let before = sim.mr_info(&mr).unwrap();
    let bad = [
        ReregMr::<SimVerbs>::default(),
        ReregMr {
            flags: ReregMrFlags(1 << 3),
            ..ReregMr::default()
        },
        ReregMr {
            flags: ReregMrFlags::CHANGE_TRANSLATION,
            length: 0,
            ..ReregMr::default()
        },
        ReregMr {
            flags: ReregMrFlags::CHANGE_PD,
            ..ReregMr::default()
        },
        ReregMr {
            flags: ReregMrFlags::CHANGE_ACCESS,
            access: AccessFlags::REMOTE_WRITE,
            ..ReregMr::default()
        },
        // A PD of another context.
        ReregMr {
            flags: ReregMrFlags::CHANGE_PD,
            pd: Some(&b.pd),
            ..ReregMr::default()
        },
    ];
    for args in &bad {
        let e = sim.rereg_mr(&mr, args).unwrap_err();
        assert_eq!(e.errno(), errno::EINVAL, "{e}");
        assert_eq!(e.verb(), Verb::ReregMr);
        assert_eq!(sim.mr_info(&mr).unwrap(), before);
    }
}

#[test]
fn rereg_mr_access_and_pd_keep_keys_translation_makes_new_ones() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let mr = sim.reg_mr(&a.pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let before = sim.mr_info(&mr).unwrap();
    sim.rereg_mr(
        &mr,
        &ReregMr {
            flags: ReregMrFlags::CHANGE_ACCESS,
            access: rw(),
            ..ReregMr::default()
        },
    )
    .unwrap();
    let after = sim.mr_info(&mr).unwrap();
    assert_eq!(after.access, rw());
    assert_eq!((after.lkey, after.rkey), (before.lkey, before.rkey));

    // CHANGE_PD moves the MR's reference: the old PD can go, the new one not.
    let pd2 = sim.alloc_pd(&a.ctx).unwrap();
    sim.rereg_mr(
        &mr,
        &ReregMr {
            flags: ReregMrFlags::CHANGE_PD,
            pd: Some(&pd2),
            ..ReregMr::default()
        },
    )
    .unwrap();
    assert_eq!(
        sim.dealloc_pd(&pd2).unwrap_err().kind(),
        ErrorKind::Busy,
        "the MR is now in pd2"
    );

    sim.mr_bytes_mut(&mr).unwrap()[0] = 0xab;
    sim.rereg_mr(
        &mr,
        &ReregMr {
            flags: ReregMrFlags::CHANGE_TRANSLATION,
            length: 8192,
            ..ReregMr::default()
        },
    )
    .unwrap();
    let t = sim.mr_info(&mr).unwrap();
    assert_eq!(t.length, 8192);
    assert_ne!(t.addr, before.addr);
    assert_ne!(t.lkey, before.lkey);
    assert_eq!(sim.mr_bytes(&mr).unwrap()[0], 0, "a new, zeroed buffer");
    sim.dereg_mr(&mr).unwrap();
    sim.dealloc_pd(&pd2).unwrap();
}

#[test]
fn rereg_mr_translation_under_posted_receives_keeps_pins_exact() {
    // Goal: a new translation while receives name the MR is allowed (as
    // on hardware); the receives posted over the old key, before and after
    // the re-registration, keep and then release exactly their pins, so
    // deregistration frees the slot at once (no slot kept for a pin that
    // can never be released, none freed under a live pin).
    let (mut sim, _a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let slots = sim.world().mr_slots_in_use();
    let mr = sim.reg_mr(&b.pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let old = sim.mr_info(&mr).unwrap();
    let sge = |lkey| {
        [Sge {
            addr: 0,
            length: 64,
            lkey,
        }]
    };
    let first = sge(old.lkey);
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 1,
            sg_list: &first,
        }],
    )
    .unwrap();
    sim.rereg_mr(
        &mr,
        &ReregMr {
            flags: ReregMrFlags::CHANGE_TRANSLATION,
            length: 8192,
            ..ReregMr::default()
        },
    )
    .unwrap();
    let new = sim.mr_info(&mr).unwrap();
    assert_ne!(new.lkey, old.lkey);
    // A receive posted over the retired key pins the MR as the first did.
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 2,
            sg_list: &first,
        }],
    )
    .unwrap();
    let fresh = sge(new.lkey);
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 3,
            sg_list: &fresh,
        }],
    )
    .unwrap();
    // Dereg under three pins keeps the slot for them...
    sim.dereg_mr(&mr).unwrap();
    assert_eq!(sim.world().mr_slots_in_use(), slots + 1);
    // ...and flushing the three receives releases every one.
    let to_err = QpAttr {
        qp_state: QpState::Error,
        ..QpAttr::default()
    };
    sim.modify_qp(&b.qp, &to_err, QpAttrMask::STATE).unwrap();
    let got = poll_ex(&mut sim, &b.cq);
    assert_eq!(
        got.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [1, 2, 3].map(|i| (i, WcStatus::WrFlushErr))
    );
    assert_eq!(
        sim.world().mr_slots_in_use(),
        slots,
        "the pins over the retired key were released"
    );
}

#[test]
fn advise_mr_checks_advice_flags_and_each_range() {
    // Goal: ibv_advise_mr takes ranges of ODP MRs of its PD, and refuses
    // everything else with the errno mlx5 gives, changing nothing.
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let odp = AccessFlags::LOCAL_WRITE | AccessFlags::ON_DEMAND;
    let mr = sim.reg_mr(&a.pd, 4096, odp).unwrap();
    let i = sim.mr_info(&mr).unwrap();
    let ro = sim.reg_mr(&a.pd, 4096, AccessFlags::ON_DEMAND).unwrap();
    let plain = sim.reg_mr(&a.pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let other = sim.reg_mr(&b.pd, 4096, odp).unwrap();
    let sge = |m: &backend_sim::MrHandle, sim: &mut SimVerbs, off: u64, len: u32| {
        let i = sim.mr_info(m).unwrap();
        [Sge {
            addr: i.addr + off,
            length: len,
            lkey: i.lkey,
        }]
    };
    let whole = sge(&mr, &mut sim, 0, 4096);
    use AdviseMrAdvice as A;
    for advice in [A::Prefetch, A::PrefetchWrite, A::PrefetchNoFault] {
        for flags in [0, ADVISE_MR_FLAG_FLUSH] {
            sim.advise_mr(&a.pd, advice, flags, &whole).unwrap();
        }
    }
    let errno_of = |r: Result<()>| r.unwrap_err().errno();
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Unknown(9), 0, &whole)),
        errno::EOPNOTSUPP
    );
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 2, &whole)),
        errno::EINVAL
    );
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 0, &[])),
        errno::EINVAL
    );
    let past = sge(&mr, &mut sim, 4000, 200);
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 0, &past)),
        errno::EFAULT
    );
    let p = sge(&plain, &mut sim, 0, 64);
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 0, &p)),
        errno::ENOENT
    );
    // mlx5 get_prefetchable_mr (Linux 6.17): a read-only ODP MR takes
    // PREFETCH but not PREFETCH_WRITE (EPERM).
    let r = sge(&ro, &mut sim, 0, 64);
    sim.advise_mr(&a.pd, A::Prefetch, 0, &r).unwrap();
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::PrefetchWrite, 0, &r)),
        errno::EPERM
    );
    // An ODP MR of another PD of the same device: EPERM.
    let pd2 = sim.alloc_pd(&a.ctx).unwrap();
    let same_dev = sim.reg_mr(&pd2, 4096, odp).unwrap();
    let s2 = sge(&same_dev, &mut sim, 0, 64);
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 0, &s2)),
        errno::EPERM
    );
    // Another device's ODP MR is not in this device's table: ENOENT.
    let o = sge(&other, &mut sim, 0, 64);
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 0, &o)),
        errno::ENOENT
    );
    // The second of two ranges is checked too.
    let two = [whole[0], p[0]];
    assert_eq!(
        errno_of(sim.advise_mr(&a.pd, A::Prefetch, 0, &two)),
        errno::ENOENT
    );
    assert_eq!(sim.mr_info(&mr).unwrap(), i, "nothing changed");

    let (mut rxe, r, _) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    let m = rxe.reg_mr(&r.pd, 64, AccessFlags::LOCAL_WRITE).unwrap();
    let s = sge(&m, &mut rxe, 0, 64);
    assert_eq!(
        errno_of(rxe.advise_mr(&r.pd, A::Prefetch, 0, &s)),
        errno::EOPNOTSUPP
    );
}

#[test]
fn rereg_mr_translation_is_eopnotsupp_on_rxe() {
    let (mut sim, a, _b) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    let mr = sim.reg_mr(&a.pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let e = sim
        .rereg_mr(
            &mr,
            &ReregMr {
                flags: ReregMrFlags::CHANGE_TRANSLATION,
                length: 4096,
                ..ReregMr::default()
            },
        )
        .unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP);
}

// ------------------------------------------------------------ resize_cq

#[test]
fn resize_cq_rounds_keeps_completions_and_refuses_too_small() {
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let e = sim.resize_cq(&a.cq, 0).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    let max = sim.query_device(&a.ctx).unwrap().max_cqe;
    assert_eq!(
        sim.resize_cq(&a.cq, max + 1).unwrap_err().errno(),
        errno::EINVAL
    );

    // Three completions queued on b's CQ.
    let mr_a = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let ia = sim.mr_info(&mr_a).unwrap();
    let mr_b = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let ib = sim.mr_info(&mr_b).unwrap();
    for i in 0..3u64 {
        let sge = [Sge {
            addr: ib.addr,
            length: 8,
            lkey: ib.lkey,
        }];
        recv(
            &mut sim,
            &b.qp,
            &[RecvWr {
                wr_id: i,
                sg_list: &sge,
            }],
        )
        .unwrap();
        let s = [Sge {
            addr: ia.addr,
            length: 8,
            lkey: ia.lkey,
        }];
        let wr = SendWr::<SimVerbs> {
            wr_id: 100 + i,
            sg_list: &s,
            opcode: WrOpcode::Send,
            ..SendWr::default()
        };
        send(&mut sim, &a.qp, &[wr]).unwrap();
    }
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let e = sim.resize_cq(&b.cq, 2).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL, "{e}");
    assert_eq!(
        sim.cq_info(&b.cq).unwrap().cqe,
        127,
        "unchanged after the error"
    );
    sim.resize_cq(&b.cq, 3).unwrap();
    assert_eq!(
        sim.cq_info(&b.cq).unwrap().cqe,
        3,
        "roundup_pow_of_two(3 + 1) - 1"
    );
    sim.resize_cq(&b.cq, 200).unwrap();
    assert_eq!(sim.cq_info(&b.cq).unwrap().cqe, 255);
    let got: Vec<u64> = poll_ex(&mut sim, &b.cq).iter().map(|w| w.wr_id).collect();
    assert_eq!(
        got,
        vec![0, 1, 2],
        "the queued completions survive resizing"
    );
}

// ------------------------------------------------------ query_device_ex

#[test]
fn query_device_ex_extends_query_device_per_profile() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let ex = sim.query_device_ex(&a.ctx).unwrap();
    let base = sim.query_device(&a.ctx).unwrap();
    assert_eq!(ex.orig_attr, base);
    assert_eq!(ex.hca_core_clock, backend_sim::MLX5_HCA_CORE_CLOCK_KHZ);
    assert_eq!(ex.completion_timestamp_mask, 0x7fff_ffff_ffff_ffff);
    assert_eq!(
        ex.device_cap_flags_ex & 0xffff_ffff,
        base.device_cap_flags.bits()
    );
    assert_ne!(ex.device_cap_flags_ex & DEVICE_PCI_WRITE_END_PADDING, 0);
    // ODP: the profile accepts ON_DEMAND, and says so (RC everything, UD
    // sends, XRC all but plain receives, implicit MRs).
    assert_eq!(ex.odp_caps.general_caps, 1 | 2);
    assert_eq!(ex.odp_caps.rc_odp_caps, 0x3f);
    assert_eq!((ex.odp_caps.uc_odp_caps, ex.odp_caps.ud_odp_caps), (0, 1));
    assert_eq!(ex.xrc_odp_caps, 0x3d);
    assert_eq!(ex.tm_caps, TmCaps::default());
    assert_eq!(
        ex.max_dm_size, 131_072,
        "the mlx5 estimate (verbs_ext/dm.rs)"
    );
    assert!(ex.cq_mod_caps.max_cq_count > 0);
    assert_eq!(ex.phys_port_cnt_ex, 1);

    let (mut sim, a, _b) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    let ex = sim.query_device_ex(&a.ctx).unwrap();
    assert_eq!((ex.hca_core_clock, ex.completion_timestamp_mask), (0, 0));
    assert_eq!(ex.raw_packet_caps, 0);
    assert_eq!(
        (ex.odp_caps, ex.xrc_odp_caps),
        (OdpCaps::default(), 0),
        "rxe: no on-demand paging"
    );
    assert_eq!(ex.max_dm_size, 0);
}

// ------------------------------------------------------------ extended CQ

#[test]
fn create_cq_ex_refuses_unsupported_wc_flags() {
    let mut sim = SimVerbs::new(SimConfig::for_profiles(1, vec![DeviceProfile::rxe()]));
    let ctx = sim.open_device(0, ProcessId(0)).unwrap();
    let e = sim
        .create_cq_ex(
            &ctx,
            &CqInitAttrEx {
                cqe: 4,
                wc_flags: WcExFlags::COMPLETION_TIMESTAMP,
                ..CqInitAttrEx::default()
            },
        )
        .unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP, "rxe has no completion clock");
    for flags in [WcExFlags::FLOW_TAG, WcExFlags::TM_INFO, WcExFlags(1 << 40)] {
        let e = sim
            .create_cq_ex(
                &ctx,
                &CqInitAttrEx {
                    wc_flags: flags,
                    ..CqInitAttrEx::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.errno(), errno::EOPNOTSUPP, "{flags}");
    }
    let e = sim
        .create_cq_ex(
            &ctx,
            &CqInitAttrEx {
                comp_mask: CqInitAttrMask(1 << 5),
                ..CqInitAttrEx::default()
            },
        )
        .unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(sim.live_objects().cqs, 0, "nothing created on error");
    // A CQ from ibv_create_cq has no extended poll.
    let cq = sim.create_cq(&ctx, &CqInit::default()).unwrap();
    let mut wc = [WcEx::default(); 1];
    assert_eq!(
        sim.poll_cq_ex(&cq, &mut wc).unwrap_err().errno(),
        errno::EINVAL
    );
}

#[test]
fn poll_cq_ex_reports_the_requested_fields_and_timestamps() {
    let flags = WcExFlags::BYTE_LEN | WcExFlags::QP_NUM | WcExFlags::COMPLETION_TIMESTAMP;
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, Some(ALL_OPS), flags);
    assert!(poll_ex(&mut sim, &a.cq).is_empty(), "empty is Ok(0)");
    let mr_a = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let ia = sim.mr_info(&mr_a).unwrap();
    let mr_b = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let ib = sim.mr_info(&mr_b).unwrap();
    let sge = [Sge {
        addr: ib.addr,
        length: 64,
        lkey: ib.lkey,
    }];
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 9,
            sg_list: &sge,
        }],
    )
    .unwrap();
    let mut w = WrEx::new(1, WrOp::SendImm { imm_data: 0x1234 });
    w.wr_flags = SendFlags::SIGNALED;
    w.data = WrData::Sge(Sge {
        addr: ia.addr,
        length: 24,
        lkey: ia.lkey,
    });
    post_batch(&mut sim, &a.qp, &[w]).unwrap();
    let t0 = sim.now_ns();
    let got = poll_ex(&mut sim, &b.cq);
    assert_eq!(got.len(), 1);
    let r = got[0];
    assert_eq!(
        (r.wr_id, r.status, r.opcode),
        (9, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(r.byte_len, Some(24));
    assert_eq!(r.qp_num, Some(sim.qp_num(&b.qp).unwrap()));
    assert_eq!(r.imm_data, None, "IMM was not asked for");
    assert!(r.wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!(r.src_qp, None);
    let ts = r.completion_timestamp.expect("asked for");
    let now_ticks = sim.now_ns() as u128 * 156_250 / 1_000_000;
    assert!(
        ts as u128 <= now_ticks && ts > 0,
        "ts {ts} now {now_ticks} (t0 {t0})"
    );
    let s = poll_ex(&mut sim, &a.cq);
    assert_eq!(s.len(), 1);
    assert!(
        s[0].completion_timestamp.unwrap() > ts,
        "the send completes when the ACK is back, after the receive"
    );
}

// ------------------------------------------------------------ ibv_wr_*

#[test]
fn post_wr_needs_send_ops_flags_and_fails_whole_batches() {
    // Created without SEND_OPS_FLAGS: no ibv_wr_* API.
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let e = post_batch(&mut sim, &a.qp, &[WrEx::new(1, WrOp::Send)]).unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP);

    let (mut sim, a, b) = pair(
        DeviceProfile::connectx6,
        Some(SendOpsFlags::SEND | SendOpsFlags::RDMA_WRITE),
        WcExFlags::empty(),
    );
    // An op outside send_ops_flags fails the batch; nothing is posted.
    let batch = [
        WrEx::new(1, WrOp::Send),
        WrEx::new(
            2,
            WrOp::RdmaRead {
                rkey: 1,
                remote_addr: 0,
            },
        ),
    ];
    let e = post_batch(&mut sim, &a.qp, &batch).unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP, "{e}");
    // Too many for the send queue (max_send_wr 8): ENOMEM, nothing posted.
    let many: Vec<_> = (0..9).map(|i| WrEx::new(i, WrOp::Send)).collect();
    let e = post_batch(&mut sim, &a.qp, &many).unwrap_err();
    assert_eq!(e.errno(), errno::ENOMEM, "{e}");
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let mut wc = [Wc::default(); 4];
    assert_eq!(
        sim.poll_cq(&a.cq, &mut wc).unwrap(),
        0,
        "nothing was posted"
    );

    // A good batch: RDMA WRITE lands.
    let mr_a = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let ia = sim.mr_info(&mr_a).unwrap();
    let mr_b = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let ib = sim.mr_info(&mr_b).unwrap();
    sim.mr_bytes_mut(&mr_a).unwrap()[..8].copy_from_slice(&[7; 8]);
    let mut w = WrEx::new(
        5,
        WrOp::RdmaWrite {
            rkey: ib.rkey,
            remote_addr: ib.addr + 8,
        },
    );
    w.wr_flags = SendFlags::SIGNALED;
    let list = [Sge {
        addr: ia.addr,
        length: 8,
        lkey: ia.lkey,
    }];
    w.data = WrData::SgeList(&list);
    post_batch(&mut sim, &a.qp, &[w]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    assert_eq!(sim.poll_cq(&a.cq, &mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (5, WcStatus::Success));
    assert_eq!(&sim.mr_bytes(&mr_b).unwrap()[8..16], &[7; 8]);
}

// ----------------------------------------------------- data in order

#[test]
fn data_in_order_per_profile_and_ooo() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx7, None, WcExFlags::empty());
    let caps = sim
        .query_qp_data_in_order(&a.qp, WrOpcode::RdmaWrite, DataInOrderFlags::RETURN_CAPS)
        .unwrap();
    assert_eq!(
        caps,
        DataInOrderCaps::WHOLE_MSG | DataInOrderCaps::ALIGNED_128_BYTES
    );
    let one = sim
        .query_qp_data_in_order(&a.qp, WrOpcode::Send, DataInOrderFlags::empty())
        .unwrap();
    assert_eq!(one.bits(), 1);
    let atomic = sim
        .query_qp_data_in_order(
            &a.qp,
            WrOpcode::AtomicFetchAndAdd,
            DataInOrderFlags::empty(),
        )
        .unwrap();
    assert!(atomic.is_empty());
    assert_eq!(
        sim.query_qp_data_in_order(&a.qp, WrOpcode::Send, DataInOrderFlags(8))
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
    // An OOO_DP QP: data is not in order.
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&a.cq),
        recv_cq: Some(&a.cq),
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&a.pd),
        ..QpInitAttrEx::default()
    };
    let ooo = sim
        .mlx5dv_create_qp(
            &a.ctx,
            &mut attr,
            &Mlx5QpInitAttr {
                comp_mask: Mlx5QpInitAttrMask::QP_CREATE_FLAGS,
                create_flags: Mlx5QpCreateFlags::OOO_DP,
                ..Mlx5QpInitAttr::default()
            },
        )
        .unwrap();
    assert!(sim
        .query_qp_data_in_order(&ooo, WrOpcode::RdmaWrite, DataInOrderFlags::RETURN_CAPS)
        .unwrap()
        .is_empty());
    // rxe: libibverbs' default answer, 0.
    let (mut sim, a, _b) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    assert!(sim
        .query_qp_data_in_order(&a.qp, WrOpcode::RdmaWrite, DataInOrderFlags::RETURN_CAPS)
        .unwrap()
        .is_empty());
}

#[test]
fn post_wr_inline_and_ud() {
    // Inline data through ibv_wr_set_inline_data_list: copied at post time.
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, Some(ALL_OPS), WcExFlags::BYTE_LEN);
    let src = sim.reg_mr(&a.pd, 4096, rw()).unwrap();
    let isrc = sim.mr_info(&src).unwrap();
    let dst = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let idst = sim.mr_info(&dst).unwrap();
    sim.mr_bytes_mut(&src).unwrap()[..4].copy_from_slice(b"wrex");
    let sge = [Sge {
        addr: idst.addr,
        length: 64,
        lkey: idst.lkey,
    }];
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 1,
            sg_list: &sge,
        }],
    )
    .unwrap();
    let list = [Sge {
        addr: isrc.addr,
        length: 4,
        lkey: 0,
    }];
    let mut w = WrEx::new(2, WrOp::Send);
    w.data = WrData::InlineList(&list);
    post_batch(&mut sim, &a.qp, &[w]).unwrap();
    // The source may change now: the bytes were copied.
    sim.mr_bytes_mut(&src).unwrap()[..4].copy_from_slice(b"XXXX");
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let got = poll_ex(&mut sim, &b.cq);
    assert_eq!(got[0].byte_len, Some(4));
    assert_eq!(&sim.mr_bytes(&dst).unwrap()[..4], b"wrex");
    // Inline data longer than max_inline_data: the batch fails.
    let cap = sim.query_qp(&a.qp, QpAttrMask::CAP).unwrap().0.cap;
    let long = [Sge {
        addr: isrc.addr,
        length: cap.max_inline_data + 1,
        lkey: 0,
    }];
    let mut w = WrEx::new(3, WrOp::Send);
    w.data = WrData::InlineList(&long);
    let e = post_batch(&mut sim, &a.qp, &[w]).unwrap_err();
    assert_eq!(e.errno(), errno::ENOMEM, "{e}");
    // ibv_wr_set_ud_addr on an RC QP is refused.
    let ah = sim
        .create_ah(
            &a.pd,
            &AhAttr {
                dlid: 3,
                port_num: 1,
                ..AhAttr::default()
            },
        )
        .unwrap();
    let mut w = WrEx::new(4, WrOp::Send);
    w.ud = Some(UdInfo {
        ah: &ah,
        remote_qpn: 1,
        remote_qkey: 1,
    });
    assert_eq!(
        post_batch(&mut sim, &a.qp, &[w]).unwrap_err().errno(),
        errno::EINVAL
    );
}

#[test]
fn raw_wqes_pass_send_ops_and_complete_as_driver2() {
    // Goal: a request decoded from a raw mlx5 WQE (WrEx::raw_wqe) is not
    // limited by the QP's send_ops_flags (the provider copies the WQE as
    // it is), executes as the request it describes, and its successful
    // completion reports IBV_WC_DRIVER2; an ordinary request beside it
    // keeps its own opcode, and an unsignalled raw WQE leaves no mark.
    let (mut sim, a, b) = pair(
        DeviceProfile::connectx6,
        Some(SendOpsFlags::SEND),
        WcExFlags::empty(),
    );
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let si = sim.mr_info(&src).unwrap();
    sim.mr_bytes_mut(&src).unwrap().fill(0x5c);
    let dst = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let di = sim.mr_info(&dst).unwrap();
    let write = |wr_id, raw, signaled: bool| {
        let mut w = WrEx::new(
            wr_id,
            WrOp::RdmaWrite {
                rkey: di.rkey,
                remote_addr: di.addr,
            },
        );
        w.raw_wqe = raw;
        if signaled {
            w.wr_flags = SendFlags::SIGNALED;
        }
        w.data = WrData::Sge(Sge {
            addr: si.addr,
            length: 64,
            lkey: si.lkey,
        });
        w
    };
    let e = post_batch(&mut sim, &a.qp, &[write(1, false, true)]).unwrap_err();
    assert_eq!(
        e.errno(),
        errno::EOPNOTSUPP,
        "WRITE is not in send_ops_flags"
    );
    post_batch(
        &mut sim,
        &a.qp,
        &[write(2, true, false), write(3, true, true)],
    )
    .unwrap();
    let mut send = WrEx::new(4, WrOp::Send);
    send.wr_flags = SendFlags::SIGNALED;
    let rsge = [Sge {
        addr: di.addr,
        length: 64,
        lkey: di.lkey,
    }];
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 9,
            sg_list: &rsge,
        }],
    )
    .unwrap();
    post_batch(&mut sim, &a.qp, &[send]).unwrap();
    let got = poll_ex(&mut sim, &a.cq);
    assert_eq!(
        got.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [
            (3, WcStatus::Success, WcOpcode::Driver2),
            (4, WcStatus::Success, WcOpcode::Send)
        ]
    );
    assert_eq!(WcOpcode::Driver2.to_raw(), 136);
    assert!(
        sim.mr_bytes(&dst).unwrap().iter().all(|&x| x == 0x5c),
        "the raw WRITEs placed their bytes"
    );
}

#[test]
fn raw_wqes_ignore_sq_sig_all() {
    // Goal: on a QP created with sq_sig_all, a raw WQE completes only if
    // its own SIGNALED (the control segment's CQ_UPDATE) asks for it, as
    // on mlx5, where sq_sig_all is libmlx5's default for the WQEs it
    // builds; the ordinary requests of the batch, and of later posts, are
    // still signalled by sq_sig_all.
    // Method: one batch of an unsignalled raw WRITE, a signalled raw WRITE
    // and an unsignalled ordinary WRITE, then an unsignalled ordinary
    // WRITE alone; compare the CQEs and the bytes placed.
    let (mut sim, a, b) = pair_sig_all(
        DeviceProfile::connectx6,
        Some(SendOpsFlags::RDMA_WRITE),
        WcExFlags::empty(),
        true,
    );
    let src = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let si = sim.mr_info(&src).unwrap();
    sim.mr_bytes_mut(&src).unwrap().fill(0x3d);
    let dst = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let di = sim.mr_info(&dst).unwrap();
    let write = |wr_id, raw, signaled: bool| {
        let mut w = WrEx::new(
            wr_id,
            WrOp::RdmaWrite {
                rkey: di.rkey,
                remote_addr: di.addr + 16 * (wr_id - 1),
            },
        );
        w.raw_wqe = raw;
        if signaled {
            w.wr_flags = SendFlags::SIGNALED;
        }
        w.data = WrData::Sge(Sge {
            addr: si.addr,
            length: 16,
            lkey: si.lkey,
        });
        w
    };
    post_batch(
        &mut sim,
        &a.qp,
        &[
            write(1, true, false),
            write(2, true, true),
            write(3, false, false),
        ],
    )
    .unwrap();
    post_batch(&mut sim, &a.qp, &[write(4, false, false)]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let got = poll_ex(&mut sim, &a.cq);
    assert_eq!(
        got.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [
            (2, WcStatus::Success, WcOpcode::Driver2),
            (3, WcStatus::Success, WcOpcode::RdmaWrite),
            (4, WcStatus::Success, WcOpcode::RdmaWrite)
        ],
        "no CQE for the raw WRITE without SIGNALED; sq_sig_all still signals the ordinary ones"
    );
    assert!(
        sim.mr_bytes(&dst).unwrap().iter().all(|&x| x == 0x3d),
        "all four WRITEs placed their bytes, the unsignalled raw one too"
    );
}
