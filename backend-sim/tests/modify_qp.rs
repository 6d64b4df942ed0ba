//! `ibv_modify_qp` on the simulator, one test per (state, input), named
//! `<state>_<input>_<outcome>` (style rule R24a). Expected outcomes come from
//! spec/qp-state-machine.md, not from the implementation.
#![allow(missing_docs)]

mod common;

use backend_sim::DeviceProfile;
use common::*;
use verbs_api::*;

type M = QpAttrMask;

/// Asserts an EINVAL that left the QP in `state` with the same attributes.
fn assert_einval_unchanged(
    f: &mut Fixture,
    qp: backend_sim::QpHandle,
    r: Result<()>,
    state: QpState,
) {
    let before = f.query(qp);
    let e = r.expect_err("must fail");
    assert_eq!(e.errno(), errno::EINVAL, "{e}");
    assert_eq!(e.verb(), Verb::ModifyQp);
    assert_eq!(f.state(qp), state);
    assert_eq!(f.query(qp), before);
}

#[test]
fn reset_to_init_with_required_mask_succeeds() {
    // Goal: RC RESET->INIT needs PKEY_INDEX|PORT|ACCESS_FLAGS (§4.1).
    // Method: modify with exactly that mask; query the stored values.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    let a = f.query(qp);
    assert_eq!(a.qp_state, QpState::Init);
    assert_eq!(a.port_num, 1);
    assert_eq!(a.qp_access_flags, AccessFlags::REMOTE_WRITE);
}

#[test]
fn reset_to_init_missing_port_is_einval_and_changes_nothing() {
    // Goal: a missing required bit is EINVAL and changes nothing (§3 step 4, U-MAN-MOD).
    // Method: drop PORT from the RC INIT mask; check errno, kind, message and state.
    let mut f = cx6();
    let qp = f.rc();
    let r = f.modify(qp, &init_attr(), init_mask() - M::PORT);
    let e = r.clone().unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidAttrMask {
            missing: M::PORT,
            extra: M::empty()
        }
    );
    assert!(
        e.to_string().contains("ibv_modify_qp failed: EINVAL"),
        "{e}"
    );
    assert!(e.message().contains("RESET->INIT for RC requires"), "{e}");
    assert!(e.message().contains("missing PORT"), "{e}");
    assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
}

#[test]
fn reset_to_init_extra_sq_psn_is_einval() {
    // Goal: a bit that is neither required nor optional is EINVAL (§3 step 5).
    // Method: add SQ_PSN to the RESET->INIT mask.
    let mut f = cx6();
    let qp = f.rc();
    let r = f.modify(qp, &init_attr(), init_mask() | M::SQ_PSN);
    assert_eq!(
        r.clone().unwrap_err().kind(),
        ErrorKind::InvalidAttrMask {
            missing: M::empty(),
            extra: M::SQ_PSN
        }
    );
    assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
}

#[test]
fn reset_to_rtr_is_invalid_transition() {
    // Goal: RESET->RTR is not in the table (§2).
    // Method: ask for RTR from RESET with the full RTR mask.
    let mut f = cx6();
    let qp = f.rc();
    let a = f.rtr_attr();
    let r = f.modify(qp, &a, rtr_mask());
    let e = r.clone().unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidTransition {
            from: QpState::Reset,
            to: QpState::ReadyToReceive
        }
    );
    assert!(
        e.message()
            .contains("RESET->RTR is not a legal transition for RC"),
        "{e}"
    );
    assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
}

#[test]
fn reset_to_err_is_einval() {
    // Goal: RESET->ERR is the one "to ERR" transition the table lacks (§2).
    // Method: modify with STATE only.
    let mut f = cx6();
    let qp = f.rc();
    let r = f.modify(qp, &state_only(QpState::Error), M::STATE);
    assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
}

#[test]
fn reset_to_reset_succeeds() {
    // Goal: any state -> RESET with mask STATE is legal, including RESET->RESET.
    // Method: modify a fresh QP to RESET.
    let mut f = cx6();
    let qp = f.rc();
    f.modify(qp, &state_only(QpState::Reset), M::STATE).unwrap();
    assert_eq!(f.state(qp), QpState::Reset);
}

#[test]
fn reset_unknown_mask_bit_is_eopnotsupp() {
    // Goal: a mask bit outside STANDARD_BITS|RATE_LIMIT is EOPNOTSUPP (§5.1).
    // Method: set bit 22 beside a valid INIT mask.
    let mut f = cx6();
    let qp = f.rc();
    let e = f
        .modify(qp, &init_attr(), init_mask() | QpAttrMask(1 << 22))
        .unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP);
    assert_eq!(f.state(qp), QpState::Reset);
}

#[test]
fn reset_to_init_port_two_on_one_port_device_is_einval() {
    // Goal: port_num must be 1..=phys_port_cnt (§5.2).
    // Method: ask for port 2 and port 0 on a one-port ConnectX-6.
    let mut f = cx6();
    let qp = f.rc();
    for port in [0, 2] {
        let a = QpAttr {
            port_num: port,
            ..init_attr()
        };
        let r = f.modify(qp, &a, init_mask());
        assert!(
            r.as_ref().unwrap_err().message().contains("port_num"),
            "{r:?}"
        );
        assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
    }
}

#[test]
fn reset_to_init_pkey_index_past_table_is_einval() {
    // Goal: pkey_index must be below the port's pkey_tbl_len (128 on ConnectX-6).
    // Method: index 128 fails, 127 succeeds.
    let mut f = cx6();
    let qp = f.rc();
    let r = f.modify(
        qp,
        &QpAttr {
            pkey_index: 128,
            ..init_attr()
        },
        init_mask(),
    );
    assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
    f.modify(
        qp,
        &QpAttr {
            pkey_index: 127,
            ..init_attr()
        },
        init_mask(),
    )
    .unwrap();
}

#[test]
fn init_to_init_changing_port_and_access_succeeds() {
    // Goal: INIT->INIT accepts the optional PKEY_INDEX|PORT|ACCESS_FLAGS (§4.2).
    // Method: change the access flags without STATE in the mask (validated as INIT->INIT).
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    let a = QpAttr {
        qp_access_flags: AccessFlags::REMOTE_READ,
        ..init_attr()
    };
    f.modify(qp, &a, M::ACCESS_FLAGS).unwrap();
    assert_eq!(f.query(qp).qp_access_flags, AccessFlags::REMOTE_READ);
}

#[test]
fn init_to_rtr_missing_dest_qpn_is_einval_and_changes_nothing() {
    // Goal: RC INIT->RTR requires DEST_QPN (§4.3).
    // Method: drop DEST_QPN; check kind, message, unchanged state.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    let a = f.rtr_attr();
    let r = f.modify(qp, &a, rtr_mask() - M::DEST_QPN);
    let e = r.clone().unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidAttrMask {
            missing: M::DEST_QPN,
            extra: M::empty()
        }
    );
    assert!(e.message().contains("missing DEST_QPN"), "{e}");
    assert_einval_unchanged(&mut f, qp, r, QpState::Init);
}

#[test]
fn init_to_rtr_with_required_mask_succeeds_and_masks_psn() {
    // Goal: INIT->RTR succeeds with the §4.3 mask; PSNs are masked to 24 bits (§5.1).
    // Method: pass rq_psn with high bits set; query it back.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    let a = QpAttr {
        rq_psn: 0xab12_3456,
        ..f.rtr_attr()
    };
    f.modify(qp, &a, rtr_mask()).unwrap();
    let q = f.query(qp);
    assert_eq!(q.qp_state, QpState::ReadyToReceive);
    assert_eq!(q.rq_psn, 0x12_3456);
    assert_eq!(q.dest_qp_num, 0x123);
    assert_eq!(q.path_mtu, Mtu::Mtu1024);
}

#[test]
fn init_to_rtr_av_port_mismatch_is_einval() {
    // Goal: at INIT->RTR the AV's port must equal the QP's port (§5.1).
    // Method: a two-port profile, QP on port 1, AV on port 2.
    let mut p = DeviceProfile::connectx6();
    p.attr.phys_port_cnt = 2;
    let mut f = fixture(p);
    let qp = f.rc();
    f.goto_init(qp);
    let mut a = f.rtr_attr();
    a.ah_attr.port_num = 2;
    let r = f.modify(qp, &a, rtr_mask());
    assert_einval_unchanged(&mut f, qp, r, QpState::Init);
}

#[test]
fn init_to_rtr_range_violations_are_einval() {
    // Goal: §5.2 range checks: path_mtu enum, min_rnr_timer 0..31,
    // max_dest_rd_atomic <= max_qp_rd_atom (16 on ConnectX-6).
    // Method: one bad field at a time from a valid RTR attribute set.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    let base = f.rtr_attr();
    for bad in [
        QpAttr {
            path_mtu: Mtu::Unknown(6),
            ..base
        },
        QpAttr {
            path_mtu: Mtu::Unknown(0),
            ..base
        },
        QpAttr {
            min_rnr_timer: 32,
            ..base
        },
        QpAttr {
            max_dest_rd_atomic: 17,
            ..base
        },
    ] {
        let r = f.modify(qp, &bad, rtr_mask());
        assert_einval_unchanged(&mut f, qp, r, QpState::Init);
    }
    f.modify(
        qp,
        &QpAttr {
            max_dest_rd_atomic: 16,
            ..base
        },
        rtr_mask(),
    )
    .unwrap();
}

#[test]
fn init_to_rtr_roce_without_grh_is_einval() {
    // Goal: on a RoCE port an AV without GRH is EINVAL (U-MAN-MOD, §5.2).
    // Method: ConnectX-7 (RoCE) profile, is_global = false.
    let mut f = fixture(DeviceProfile::connectx7());
    let qp = f.rc();
    f.goto_init(qp);
    let mut a = f.rtr_attr();
    a.ah_attr.is_global = false;
    let r = f.modify(qp, &a, rtr_mask());
    assert!(r.as_ref().unwrap_err().message().contains("GRH"), "{r:?}");
    assert_einval_unchanged(&mut f, qp, r, QpState::Init);
}

#[test]
fn init_to_rtr_sgid_index_past_table_is_einval() {
    // Goal: ah_attr.grh.sgid_index must be below gid_tbl_len (§5.2).
    // Method: RoCE profile with gid_tbl_len 255; index 255 fails, 1 works.
    let mut f = fixture(DeviceProfile::connectx7());
    let qp = f.rc();
    f.goto_init(qp);
    let mut a = f.rtr_attr();
    a.ah_attr.grh.sgid_index = 255;
    let r = f.modify(qp, &a, rtr_mask());
    assert_einval_unchanged(&mut f, qp, r, QpState::Init);
    a.ah_attr.grh.sgid_index = 1;
    f.modify(qp, &a, rtr_mask()).unwrap();
}

#[test]
fn init_to_rtr_alt_path_on_roce_is_einval() {
    // Goal: IBV_QP_ALT_PATH on a RoCE port is EINVAL (§5.1).
    // Method: ConnectX-7, RTR mask plus ALT_PATH with a valid alt AV.
    let mut f = fixture(DeviceProfile::connectx7());
    let qp = f.rc();
    f.goto_init(qp);
    let mut a = f.rtr_attr();
    a.alt_ah_attr = a.ah_attr;
    a.alt_port_num = 1;
    let r = f.modify(qp, &a, rtr_mask() | M::ALT_PATH);
    assert_einval_unchanged(&mut f, qp, r, QpState::Init);
}

#[test]
fn init_to_rts_is_invalid_transition() {
    // Goal: INIT->RTS is not in the table (§2, GUT ModifyInvalid*).
    // Method: RTS attributes from INIT.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    let r = f.modify(qp, &rts_attr(), rts_mask());
    assert_einval_unchanged(&mut f, qp, r, QpState::Init);
}

#[test]
fn init_to_err_succeeds() {
    // Goal: every state but RESET may go to ERR with STATE only (§2).
    // Method: INIT -> ERR.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_init(qp);
    f.modify(qp, &state_only(QpState::Error), M::STATE).unwrap();
    assert_eq!(f.state(qp), QpState::Error);
}

#[test]
fn rtr_to_rts_missing_timeout_names_the_rule() {
    // Goal: the error says the transition, the rule and the missing bit.
    // Method: drop TIMEOUT from the RC RTR->RTS mask; read the message.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rtr(qp);
    let r = f.modify(qp, &rts_attr(), rts_mask() - M::TIMEOUT);
    let e = r.clone().unwrap_err();
    assert_eq!(
        e.message(),
        "RTR->RTS for RC requires TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN; missing TIMEOUT"
    );
    assert!(
        e.to_string().starts_with("ibv_modify_qp failed: EINVAL"),
        "{e}"
    );
    assert_einval_unchanged(&mut f, qp, r, QpState::ReadyToReceive);
}

#[test]
fn rtr_to_rts_range_violations_are_einval() {
    // Goal: timeout 0..31, retry_cnt and rnr_retry 0..7, max_rd_atomic <=
    // max_qp_init_rd_atom (16) (§5.2).
    // Method: one bad field at a time.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rtr(qp);
    let base = rts_attr();
    for bad in [
        QpAttr {
            timeout: 32,
            ..base
        },
        QpAttr {
            retry_cnt: 8,
            ..base
        },
        QpAttr {
            rnr_retry: 8,
            ..base
        },
        QpAttr {
            max_rd_atomic: 17,
            ..base
        },
    ] {
        let r = f.modify(qp, &bad, rts_mask());
        assert_einval_unchanged(&mut f, qp, r, QpState::ReadyToReceive);
    }
}

#[test]
fn rtr_to_rts_with_cur_state_succeeds_and_mismatch_is_einval() {
    // Goal: CUR_STATE is optional at RTR->RTS; a wrong cur_qp_state is refused.
    // Method: cur_qp_state = INIT fails, = RTR succeeds.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rtr(qp);
    let bad = QpAttr {
        cur_qp_state: QpState::Init,
        ..rts_attr()
    };
    let r = f.modify(qp, &bad, rts_mask() | M::CUR_STATE);
    assert_einval_unchanged(&mut f, qp, r, QpState::ReadyToReceive);
    let good = QpAttr {
        cur_qp_state: QpState::ReadyToReceive,
        ..rts_attr()
    };
    f.modify(qp, &good, rts_mask() | M::CUR_STATE).unwrap();
    let q = f.query(qp);
    assert_eq!(q.qp_state, QpState::ReadyToSend);
    assert_eq!(
        (
            q.timeout,
            q.retry_cnt,
            q.rnr_retry,
            q.sq_psn,
            q.max_rd_atomic
        ),
        (14, 7, 7, 9, 4)
    );
}

#[test]
fn rtr_without_state_bit_is_einval() {
    // Goal: a modify without STATE in RTR validates as RTR->RTR, which is illegal (§3).
    // Method: mask = MIN_RNR_TIMER only.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rtr(qp);
    let r = f.modify(qp, &f.rtr_attr(), M::MIN_RNR_TIMER);
    assert_einval_unchanged(&mut f, qp, r, QpState::ReadyToReceive);
}

#[test]
fn rts_to_sqd_on_mlx5_is_einval() {
    // Goal: mlx5 has no RTS->SQD command (§6.1).
    // Method: ConnectX-6 profile, RTS -> SQD with STATE only.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rts(qp);
    let r = f.modify(qp, &state_only(QpState::SendQueueDrain), M::STATE);
    assert!(r.as_ref().unwrap_err().message().contains("mlx5"), "{r:?}");
    assert_einval_unchanged(&mut f, qp, r, QpState::ReadyToSend);
}

#[test]
fn rts_to_sqd_on_rxe_succeeds_and_notifies() {
    // Goal: the kernel table allows RTS->SQD (rxe); EN_SQD_ASYNC_NOTIFY raises SQ_DRAINED (§7).
    // Method: rxe profile; modify with EN_SQD_ASYNC_NOTIFY; read the async event.
    let mut f = fixture(DeviceProfile::rxe());
    let qp = f.rc();
    f.goto_rts(qp);
    let a = QpAttr {
        en_sqd_async_notify: 1,
        ..state_only(QpState::SendQueueDrain)
    };
    f.modify(qp, &a, M::STATE | M::EN_SQD_ASYNC_NOTIFY).unwrap();
    assert_eq!(f.state(qp), QpState::SendQueueDrain);
    let ctx = f.ctx;
    let ev = f.sim.get_async_event(&ctx).unwrap().expect("event");
    assert_eq!(ev.event_type, AsyncEventType::SqDrained);
    f.sim.ack_async_event(&ev).unwrap();
    f.modify(qp, &state_only(QpState::ReadyToSend), M::STATE)
        .unwrap();
}

#[test]
fn rts_rate_limit_on_rc_is_einval() {
    // Goal: RATE_LIMIT is optional only for RAW_PACKET (§4.5).
    // Method: RTS->RTS with RATE_LIMIT on RC.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rts(qp);
    let r = f.modify(
        qp,
        &QpAttr {
            rate_limit: 1000,
            ..rts_attr()
        },
        M::RATE_LIMIT,
    );
    assert_einval_unchanged(&mut f, qp, r, QpState::ReadyToSend);
}

#[test]
fn rts_to_err_flushes_posted_receives() {
    // Goal: entering ERR completes every outstanding WR with WR_FLUSH_ERR (§7).
    // Method: post two receives in RTS, move to ERR, poll both flushes in order.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rts(qp);
    let pd = f.pd;
    let mr = f.sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let info = f.sim.mr_info(&mr).unwrap();
    let sge = [Sge {
        addr: info.addr,
        length: 64,
        lkey: info.lkey,
    }];
    let wrs = [
        RecvWr {
            wr_id: 1,
            sg_list: &sge,
        },
        RecvWr {
            wr_id: 2,
            sg_list: &sge,
        },
    ];
    // SAFETY: the named MRs stay registered until the completions are reaped;
    // the simulator owns every byte and checks the rest.
    #[allow(unsafe_code)]
    let r = unsafe { f.sim.post_recv(&qp, &wrs) };
    r.unwrap();
    // Deregistering under posted receives is allowed (issue #18 item 1):
    // a flush touches no memory, so the receives still flush.
    f.sim.dereg_mr(&mr).unwrap();
    f.modify(qp, &state_only(QpState::Error), M::STATE).unwrap();
    let mut wc = [Wc::default(); 4];
    let cq = f.cq;
    let n = f.sim.poll_cq(&cq, &mut wc).unwrap();
    assert_eq!(n, 2);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::WrFlushErr));
    assert_eq!((wc[1].wr_id, wc[1].status), (2, WcStatus::WrFlushErr));
    // The slot kept for the receives went with their completions.
    assert_eq!(f.sim.dereg_mr(&mr).unwrap_err().errno(), errno::EINVAL);
    assert!(f.sim.world().mr_by_key(0, info.lkey).is_none());
}

#[test]
fn err_to_reset_to_init_reuses_the_qp() {
    // Goal: a QP can be reused after RESET; attributes are cleared (§7, GUT ReuseQp).
    // Method: RTS -> ERR -> RESET -> INIT; query between.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rts(qp);
    f.modify(qp, &state_only(QpState::Error), M::STATE).unwrap();
    assert_eq!(
        f.query(qp).dest_qp_num,
        0x123,
        "ERR keeps the configured attributes for query"
    );
    f.modify(qp, &state_only(QpState::Reset), M::STATE).unwrap();
    assert_eq!(f.query(qp).dest_qp_num, 0);
    f.goto_init(qp);
    assert_eq!(f.state(qp), QpState::Init);
}

#[test]
fn err_to_rts_is_invalid_transition() {
    // Goal: from ERR only RESET and ERR are legal (§2).
    // Method: ERR -> RTS.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rts(qp);
    f.modify(qp, &state_only(QpState::Error), M::STATE).unwrap();
    let r = f.modify(qp, &state_only(QpState::ReadyToSend), M::STATE);
    assert_einval_unchanged(&mut f, qp, r, QpState::Error);
}

#[test]
fn ud_reset_to_init_requires_qkey() {
    // Goal: UD RESET->INIT requires PKEY_INDEX|PORT|QKEY and forbids ACCESS_FLAGS (§4.1).
    // Method: the RC mask fails; the UD mask succeeds; UD RTR needs only STATE.
    let mut f = cx6();
    let (qp, _) = f.create(QpType::Ud, caps(8, 8, 1, 1, 0)).unwrap();
    let r = f.modify(qp, &init_attr(), init_mask());
    assert_einval_unchanged(&mut f, qp, r, QpState::Reset);
    let a = QpAttr {
        qkey: 0x1111,
        ..init_attr()
    };
    f.modify(qp, &a, M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY)
        .unwrap();
    f.modify(qp, &state_only(QpState::ReadyToReceive), M::STATE)
        .unwrap();
    f.modify(
        qp,
        &QpAttr {
            sq_psn: 5,
            ..state_only(QpState::ReadyToSend)
        },
        M::STATE | M::SQ_PSN,
    )
    .unwrap();
    assert_eq!(f.query(qp).qkey, 0x1111);
}

#[test]
fn rxe_rounds_rd_atomic_to_power_of_two() {
    // Goal: rxe stores max_rd_atomic / max_dest_rd_atomic rounded up to a power of two (§5.2).
    // Method: rxe profile, ask 3 and 5; query 4 and 8.
    let mut f = fixture(DeviceProfile::rxe());
    let qp = f.rc();
    f.goto_init(qp);
    let a = QpAttr {
        max_dest_rd_atomic: 5,
        ..f.rtr_attr()
    };
    f.modify(qp, &a, rtr_mask()).unwrap();
    f.modify(
        qp,
        &QpAttr {
            max_rd_atomic: 3,
            ..rts_attr()
        },
        rts_mask(),
    )
    .unwrap();
    let q = f.query(qp);
    assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (4, 8));
}

#[test]
fn modify_on_destroyed_qp_is_einval() {
    // Goal: a stale handle is EINVAL, never another object.
    // Method: destroy, create a new QP in the same slot, use the old handle.
    let mut f = cx6();
    let qp = f.rc();
    f.sim.destroy_qp(&qp).unwrap();
    let _again = f.rc();
    let e = f.modify(qp, &init_attr(), init_mask()).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
}

#[test]
fn rts_alt_path_is_kept_until_reset() {
    // Goal: the alternate path set with IBV_QP_ALT_PATH belongs to the
    // path: later modifies without ALT_PATH and ERR keep it for query,
    // RESET clears it (§7 "attributes are cleared").
    // Method: ConnectX-6 (InfiniBand), ALT_PATH at RTR->RTS; RTS->RTS with
    // another attribute; ERR; RESET; back to RTR without ALT_PATH.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rtr(qp);
    let mut a = rts_attr();
    a.alt_ah_attr = f.av();
    a.alt_port_num = 1;
    a.alt_timeout = 17;
    f.modify(qp, &a, rts_mask() | M::ALT_PATH).unwrap();
    let q = f.query(qp);
    assert_eq!((q.alt_port_num, q.alt_timeout), (1, 17));
    assert_eq!(q.alt_ah_attr, f.av());
    let again = QpAttr {
        qp_state: QpState::ReadyToSend,
        min_rnr_timer: 3,
        ..QpAttr::default()
    };
    f.modify(qp, &again, M::STATE | M::MIN_RNR_TIMER).unwrap();
    assert_eq!(f.query(qp).alt_timeout, 17);
    f.modify(qp, &state_only(QpState::Error), M::STATE).unwrap();
    assert_eq!(f.query(qp).alt_timeout, 17, "ERR keeps the path for query");
    f.modify(qp, &state_only(QpState::Reset), M::STATE).unwrap();
    f.goto_rtr(qp);
    let q = f.query(qp);
    assert_eq!((q.alt_port_num, q.alt_timeout), (0, 0));
    assert_eq!(q.alt_ah_attr, AhAttr::default());
}
