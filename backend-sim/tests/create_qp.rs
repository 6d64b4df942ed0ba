//! QP creation: capability rounding worked out by hand from the formulas of
//! spec/create-qp.md §4.2 (mlx5) and §4.3 (rxe), and the validation rules of
//! §2–§7. Numbers in comments show the arithmetic, not the implementation.
#![allow(missing_docs)]

mod common;

use backend_sim::{DeviceProfile, SimVerbs};
use common::*;
use verbs_api::*;

#[test]
fn mlx5_rc_small_request_rounds_to_one_wqebb_pair() {
    // Goal: mlx5 SQ maths for RC with the default ops.
    // Method: overhead 192 (bind/UMR segments), +16 per SGE = 208 -> WQE 256;
    // inline = 256 - 192 - 4 = 60; SQ = roundup_pow2(16*256) = 4096 -> 16 WRs.
    // RQ: 16 B WQE, roundup_pow2(16)*16 = 256 B -> 16 WRs, 1 SGE.
    let mut f = cx6();
    let (_, cap) = f.create(QpType::Rc, caps(16, 16, 1, 1, 0)).unwrap();
    assert_eq!(cap, caps(16, 16, 1, 1, 60));
}

#[test]
fn mlx5_rc_hundred_wrs_round_up() {
    // Goal: returned caps >= requested. 2 SGEs: 192+32 = 224 -> 256;
    // SQ = roundup_pow2(100*256 = 25600) = 32768 -> 128 WRs. RQ: sge 3 ->
    // 48 B -> 64 B WQE, roundup_pow2(100) = 128 -> 128 WRs, 4 SGEs.
    let mut f = cx6();
    let (_, cap) = f.create(QpType::Rc, caps(100, 100, 2, 3, 0)).unwrap();
    assert_eq!(cap, caps(128, 128, 2, 4, 60));
}

#[test]
fn mlx5_rc_inline_grows_the_wqe() {
    // Goal: inline sizing: 192 + align16(4+100) = 304 -> 320-byte WQE;
    // inline = 320-192-4 = 124; SQ = roundup_pow2(10*320 = 3200) = 4096 -> 12 WRs.
    let mut f = cx6();
    let (_, cap) = f.create(QpType::Rc, caps(10, 1, 1, 1, 100)).unwrap();
    assert_eq!((cap.max_send_wr, cap.max_inline_data), (12, 124));
    // RQ of 1: 16 B WQE, buffer at least 64 B -> 4 WRs.
    assert_eq!(cap.max_recv_wr, 4);
}

#[test]
fn mlx5_rc_send_sge_over_what_fits_is_einval() {
    // Goal: max_send_sge > (max_sq_desc_sz - overhead)/16 = (1024-192)/16 = 52 is EINVAL.
    let mut f = cx6();
    assert!(f.create(QpType::Rc, caps(4, 4, 52, 1, 0)).is_ok());
    let e = f.create(QpType::Rc, caps(4, 4, 53, 1, 0)).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(e.verb(), Verb::CreateQp);
    assert!(e.message().contains("max_send_sge 53"), "{e}");
}

#[test]
fn mlx5_limits_on_wrs_and_recv_sge() {
    // Goal: SQ basic blocks <= max_send_wqebb (32768): 8192 WRs * 256 B = 2 MiB
    // = 32768 blocks is fine, 8193 -> 4 MiB = 65536 blocks is EINVAL;
    // max_recv_wr > 32768 and a 33-SGE receive WQE (528 B > 512) are EINVAL.
    let mut f = cx6();
    assert_eq!(
        f.create(QpType::Rc, caps(8192, 1, 1, 1, 0))
            .unwrap()
            .1
            .max_send_wr,
        8192
    );
    assert_eq!(
        f.create(QpType::Rc, caps(8193, 1, 1, 1, 0))
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
    assert_eq!(
        f.create(QpType::Rc, caps(1, 32769, 1, 1, 0))
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
    assert_eq!(
        f.create(QpType::Rc, caps(1, 1, 1, 33, 0))
            .unwrap_err()
            .errno(),
        errno::EINVAL
    );
}

#[test]
fn mlx5_ud_overhead_is_datagram_segment() {
    // Goal: UD overhead = ctrl 16 + datagram 48 = 64; 1 SGE: 80 -> 128-byte
    // WQE; inline = 128-64-4 = 60; SQ = roundup_pow2(8*128) = 1024 -> 8 WRs.
    let mut f = cx6();
    let (_, cap) = f.create(QpType::Ud, caps(8, 8, 1, 1, 0)).unwrap();
    assert_eq!(cap, caps(8, 8, 1, 1, 60));
}

#[test]
fn mlx5_zero_send_wr_is_legal() {
    // Goal: max_send_wr = 0 is legal (GUT ZeroSendWr); no SQ is sized.
    let mut f = cx6();
    let (_, cap) = f.create(QpType::Rc, caps(0, 4, 1, 1, 0)).unwrap();
    assert_eq!(cap.max_send_wr, 0);
}

#[test]
fn srq_makes_receive_caps_ignored() {
    // Goal: with an SRQ the receive caps are ignored and reported 0 (U-MAN-CQP).
    let mut f = cx6();
    let pd = f.pd;
    let mut sa = SrqAttr {
        max_wr: 16,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = f.sim.create_srq(&pd, &mut sa).unwrap();
    let cq = f.cq;
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        srq: Some(&srq),
        cap: caps(4, 99_999, 1, 99, 0),
        ..QpInitAttrEx::default()
    };
    let qp = f.sim.create_qp(&pd, &mut attr).unwrap();
    assert_eq!((attr.cap.max_recv_wr, attr.cap.max_recv_sge), (0, 0));
    let (_, info) = f.sim.query_qp(&qp, QpAttrMask::CAP).unwrap();
    assert!(info.has_srq);
    assert_eq!(f.sim.destroy_srq(&srq).unwrap_err().errno(), errno::EBUSY);
}

#[test]
fn xrc_send_forces_receive_caps_to_zero() {
    // Goal: libibverbs forces XRC_SEND receive caps to 0; overhead 192 + XRC 16 = 208,
    // +16 = 224 -> 256-byte WQE, inline 256-208-4 = 44.
    let mut f = cx6();
    let ctx = f.ctx;
    let (pd, cq) = (f.pd, f.cq);
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::XrcSend,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&pd),
        send_cq: Some(&cq),
        cap: caps(4, 8, 1, 1, 0),
        ..QpInitAttrEx::default()
    };
    f.sim.create_qp_ex(&ctx, &mut attr).unwrap();
    assert_eq!(attr.cap, caps(4, 0, 1, 0, 44));
}

#[test]
fn rxe_rounds_queues_to_power_of_two_minus_one() {
    // Goal: rxe queues have roundup_pow2(n+1) slots, n usable: 100 -> 127;
    // SQ WQE = max(3*16, 0) = 48 -> max_send_sge 3, max_inline_data 48.
    let mut f = fixture(DeviceProfile::rxe());
    let (_, cap) = f.create(QpType::Rc, caps(100, 100, 3, 2, 0)).unwrap();
    assert_eq!(cap, caps(127, 127, 3, 2, 48));
    // inline 100 with 1 SGE: WQE 100 -> 6 SGEs (100/16), inline 100.
    let (_, cap) = f.create(QpType::Rc, caps(1, 1, 1, 1, 100)).unwrap();
    assert_eq!(
        (cap.max_send_wr, cap.max_send_sge, cap.max_inline_data),
        (1, 6, 100)
    );
}

#[test]
fn rxe_limits_are_einval_and_types_eopnotsupp() {
    // Goal: rxe_qp_chk_cap (Linux 6.17): wr > 2^20, sge > 32, inline > 512
    // are EINVAL; XRC and create_flags are EOPNOTSUPP on rxe.
    let mut f = fixture(DeviceProfile::rxe());
    for c in [
        caps((1 << 20) + 1, 1, 1, 1, 0),
        caps(1, (1 << 20) + 1, 1, 1, 0),
        caps(1, 1, 33, 1, 0),
        caps(1, 1, 1, 1, 513),
    ] {
        assert_eq!(
            f.create(QpType::Rc, c).unwrap_err().errno(),
            errno::EINVAL,
            "{c:?}"
        );
    }
    assert_eq!(
        f.create(QpType::XrcSend, caps(1, 0, 1, 0, 0))
            .unwrap_err()
            .errno(),
        errno::EOPNOTSUPP
    );
}

#[test]
fn creation_argument_rules() {
    // Goal: create-qp.md §6 errno table for the rules that need no XRC domain.
    // Method: one violation per call; every failure leaves the PD free to dealloc later.
    let mut f = cx6();
    let ctx = f.ctx;
    let (pd, cq) = (f.pd, f.cq);
    let base = || QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Ud,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&pd),
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: caps(1, 1, 1, 1, 0),
        ..QpInitAttrEx::default()
    };
    let cases: Vec<(&str, QpInitAttrEx<'_, SimVerbs>, i32)> = vec![
        (
            "unknown type",
            QpInitAttrEx {
                qp_type: QpType::Unknown(77),
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "unknown comp_mask",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask(1 << 9) | QpInitAttrMask::PD,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "no PD bit",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask::empty(),
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "XRC_RECV without XRCD",
            QpInitAttrEx {
                qp_type: QpType::XrcRecv,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "missing send_cq",
            QpInitAttrEx {
                send_cq: None,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "missing recv_cq",
            QpInitAttrEx {
                recv_cq: None,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "unknown create flag",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask::PD | QpInitAttrMask::CREATE_FLAGS,
                create_flags: QpCreateFlags(1 << 20),
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "create flag on RC",
            QpInitAttrEx {
                qp_type: QpType::Rc,
                comp_mask: QpInitAttrMask::PD | QpInitAttrMask::CREATE_FLAGS,
                create_flags: QpCreateFlags::BLOCK_SELF_MCAST_LB,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "SCATTER_FCS on UD",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask::PD | QpInitAttrMask::CREATE_FLAGS,
                create_flags: QpCreateFlags::SCATTER_FCS,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "READ in UD send_ops",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask::PD | QpInitAttrMask::SEND_OPS_FLAGS,
                send_ops_flags: SendOpsFlags::RDMA_READ,
                ..base()
            },
            errno::EOPNOTSUPP,
        ),
        (
            "TSO header on UD",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask::PD | QpInitAttrMask::MAX_TSO_HEADER,
                max_tso_header: 64,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "RSS",
            QpInitAttrEx {
                comp_mask: QpInitAttrMask::PD | QpInitAttrMask::RX_HASH,
                ..base()
            },
            errno::EOPNOTSUPP,
        ),
        (
            "DRIVER without mlx5dv",
            QpInitAttrEx {
                qp_type: QpType::Driver,
                ..base()
            },
            errno::EINVAL,
        ),
        (
            "RAW_PACKET without CAP_NET_RAW",
            QpInitAttrEx {
                qp_type: QpType::RawPacket,
                ..base()
            },
            errno::EPERM,
        ),
    ];
    for (what, mut attr, want) in cases {
        let e = f.sim.create_qp_ex(&ctx, &mut attr).expect_err(what);
        assert_eq!(e.errno(), want, "{what}: {e}");
        assert_eq!(e.verb(), Verb::CreateQpEx, "{what}");
    }
    let mut ok = QpInitAttrEx {
        comp_mask: QpInitAttrMask::PD
            | QpInitAttrMask::CREATE_FLAGS
            | QpInitAttrMask::SEND_OPS_FLAGS,
        create_flags: QpCreateFlags::SOURCE_QPN,
        send_ops_flags: SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM,
        ..base()
    };
    let qp = f.sim.create_qp_ex(&ctx, &mut ok).unwrap();
    assert_eq!(f.state(qp), QpState::Reset);
    f.sim.destroy_qp(&qp).unwrap();
    f.sim.destroy_cq(&cq).unwrap();
    f.sim.dealloc_pd(&pd).unwrap();
}

#[test]
fn cq_sizes_round_as_the_drivers_do() {
    // Goal: both drivers give roundup_pow2(cqe+1) - 1 entries; 0 and > max_cqe are EINVAL.
    // Method: 1 -> 1, 100 -> 127, 128 -> 255, 4194303 -> 4194303 on ConnectX-6 (max_cqe 4194303);
    // rxe max_cqe 32767.
    let mut f = cx6();
    let ctx = f.ctx;
    for (ask, want) in [(1, 1), (100, 127), (128, 255), (4_194_303, 4_194_303)] {
        let cq = f
            .sim
            .create_cq(
                &ctx,
                &CqInit {
                    cqe: ask,
                    ..CqInit::default()
                },
            )
            .unwrap();
        assert_eq!(f.sim.cq_info(&cq).unwrap().cqe, want, "cqe {ask}");
    }
    for bad in [0, 4_194_304] {
        assert_eq!(
            f.sim
                .create_cq(
                    &ctx,
                    &CqInit {
                        cqe: bad,
                        ..CqInit::default()
                    }
                )
                .unwrap_err()
                .errno(),
            errno::EINVAL
        );
    }
    let mut r = fixture(DeviceProfile::rxe());
    let rctx = r.ctx;
    assert!(r
        .sim
        .create_cq(
            &rctx,
            &CqInit {
                cqe: 32_767,
                ..CqInit::default()
            }
        )
        .is_ok());
    assert!(r
        .sim
        .create_cq(
            &rctx,
            &CqInit {
                cqe: 32_768,
                ..CqInit::default()
            }
        )
        .is_err());
}

#[test]
fn srq_sizes_round_as_the_drivers_do() {
    // Goal: mlx5 SRQ: max_wr -> align_queue_size(max_wr+1)-1 (100 -> 127); the
    // WQE is roundup_pow2(max(32, 16+16*sge)): sge 1 -> 32 B -> 1, sge 2 -> 64 B -> 3,
    // sge 4 -> 128 B -> 7; sge 33 > 512/16 is EINVAL; max_wr > 32767 is EINVAL.
    let mut f = cx6();
    let pd = f.pd;
    for (sge, want) in [(1, 1), (2, 3), (4, 7)] {
        let mut a = SrqAttr {
            max_wr: 100,
            max_sge: sge,
            srq_limit: 0,
        };
        f.sim.create_srq(&pd, &mut a).unwrap();
        assert_eq!((a.max_wr, a.max_sge), (127, want), "sge {sge}");
    }
    let mut a = SrqAttr {
        max_wr: 1,
        max_sge: 33,
        srq_limit: 0,
    };
    assert_eq!(
        f.sim.create_srq(&pd, &mut a).unwrap_err().errno(),
        errno::EINVAL
    );
    let mut a = SrqAttr {
        max_wr: 32_768,
        max_sge: 1,
        srq_limit: 0,
    };
    assert_eq!(
        f.sim.create_srq(&pd, &mut a).unwrap_err().errno(),
        errno::EINVAL
    );
}

#[test]
fn srq_max_sge_above_the_device_limit_is_einval_on_every_profile() {
    // Goal: issue #18 item 4. mlx5's userspace bound (max_rq_desc_sz/16 = 32)
    // is one above max_srq_sge (31): asking for 32 used to succeed and return
    // 63. Every cap above the device limit is EINVAL, and nothing is created;
    // max_srq_sge itself is accepted.
    for profile in [
        DeviceProfile::connectx6(),
        DeviceProfile::connectx7(),
        DeviceProfile::rxe(),
    ] {
        let name = profile.name.clone();
        let limit = profile.attr.max_srq_sge;
        let mut f = fixture(profile);
        let pd = f.pd;
        let mut a = SrqAttr {
            max_wr: 4,
            max_sge: limit + 1,
            srq_limit: 0,
        };
        let e = f.sim.create_srq(&pd, &mut a).unwrap_err();
        assert_eq!(e.errno(), errno::EINVAL, "{name}: {e}");
        assert_eq!(a.max_sge, limit + 1, "{name}: attr left unchanged");
        let mut a = SrqAttr {
            max_wr: 4,
            max_sge: limit,
            srq_limit: 0,
        };
        let srq = f.sim.create_srq(&pd, &mut a).unwrap();
        assert_eq!(a.max_sge, limit, "{name}");
        f.sim.destroy_srq(&srq).unwrap();
        // the PD has no SRQ left behind
        f.sim.dealloc_pd(&pd).unwrap();
    }
}
