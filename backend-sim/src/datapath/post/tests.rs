//! Unit tests of the posting checks of `datapath/post.rs`.

use super::*;
use ErrnoFlavor::{Mlx5, Spec};

const SGE8: [Sge; 1] = [Sge {
    addr: 0x1000,
    length: 8,
    lkey: 1,
}];

fn rc_queue(state: QpState) -> SendQueueView {
    SendQueueView {
        transport: Transport::Rc,
        state,
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 2,
            max_recv_sge: 2,
            max_inline_data: 64,
        },
        outstanding: 0,
        atomics_supported: true,
        ip_csum_supported: false,
    }
}

fn wr(opcode: WrOpcode, sg_list: &[Sge]) -> SendWrView<'_> {
    SendWrView {
        opcode,
        send_flags: SendFlags::empty(),
        sg_list,
        atomic_remote_addr: 0x2000,
    }
}

fn errno_of(r: Result<SendAdmission, PostReject>) -> i32 {
    r.map(|_| 0).unwrap_or_else(|e| e.errno)
}

#[test]
fn send_state_table_section_1_1() {
    // Goal: the §1.1 table: sends refused in RESET/INIT/RTR (rxe EINVAL,
    // mlx5 ENOMEM, kind = from_errno: InvalidArgument / OutOfResources),
    // accepted in RTS/SQD,
    // flushed in SQE/ERR.
    // Method: post a valid SEND in every state with both flavours.
    let send = wr(WrOpcode::Send, &SGE8);
    for s in [QpState::Reset, QpState::Init, QpState::ReadyToReceive] {
        let spec = check_post_send(&rc_queue(s), &send, Spec).unwrap_err();
        assert_eq!(
            (spec.kind, spec.errno),
            (ErrorKind::InvalidArgument, EINVAL),
            "{s}"
        );
        let m = check_post_send(&rc_queue(s), &send, Mlx5).unwrap_err();
        assert_eq!(
            (m.kind, m.errno),
            (ErrorKind::OutOfResources, ENOMEM),
            "{s}"
        );
    }
    for f in [Spec, Mlx5] {
        assert_eq!(
            check_post_send(&rc_queue(QpState::ReadyToSend), &send, f),
            Ok(SendAdmission::Execute)
        );
        assert_eq!(
            check_post_send(&rc_queue(QpState::SendQueueDrain), &send, f),
            Ok(SendAdmission::Execute)
        );
        assert_eq!(
            check_post_send(&rc_queue(QpState::SendQueueError), &send, f),
            Ok(SendAdmission::Flush)
        );
        assert_eq!(
            check_post_send(&rc_queue(QpState::Error), &send, f),
            Ok(SendAdmission::Flush)
        );
    }
}

#[test]
fn send_validation_table_section_1_2() {
    // Goal: each row of the §1.2 table with the errno of each flavour.
    // Method: one deliberately bad WR per row on an RTS RC QP with
    // max_send_wr 4, max_send_sge 2, max_inline_data 64.
    let rts = rc_queue(QpState::ReadyToSend);
    let three = [SGE8[0]; 3];
    let big = [Sge {
        length: 65,
        ..SGE8[0]
    }];
    // opcode outside the enum table: EINVAL / EINVAL
    for f in [Spec, Mlx5] {
        assert_eq!(
            errno_of(check_post_send(&rts, &wr(WrOpcode::Unknown(42), &SGE8), f)),
            EINVAL
        );
        assert_eq!(
            errno_of(check_post_send(&rts, &wr(WrOpcode::Driver1, &SGE8), f)),
            EINVAL
        );
    }
    // SQ full: ENOMEM / ENOMEM, kind OutOfResources
    let full = SendQueueView {
        outstanding: 4,
        ..rts
    };
    for f in [Spec, Mlx5] {
        let e = check_post_send(&full, &wr(WrOpcode::Send, &SGE8), f).unwrap_err();
        assert_eq!((e.kind, e.errno), (ErrorKind::OutOfResources, ENOMEM));
    }
    // num_sge > max_send_sge: rxe EINVAL, mlx5 ENOMEM
    assert_eq!(
        errno_of(check_post_send(&rts, &wr(WrOpcode::Send, &three), Spec)),
        EINVAL
    );
    assert_eq!(
        errno_of(check_post_send(&rts, &wr(WrOpcode::Send, &three), Mlx5)),
        ENOMEM
    );
    // inline total > max_inline_data: rxe EINVAL, mlx5 ENOMEM
    let inline = SendWrView {
        send_flags: SendFlags::INLINE,
        ..wr(WrOpcode::Send, &big)
    };
    assert_eq!(errno_of(check_post_send(&rts, &inline, Spec)), EINVAL);
    assert_eq!(errno_of(check_post_send(&rts, &inline, Mlx5)), ENOMEM);
    // 64 bytes inline fits exactly
    let fits = SendWrView {
        sg_list: &[Sge {
            length: 64,
            ..SGE8[0]
        }],
        ..inline
    };
    assert_eq!(
        check_post_send(&rts, &fits, Spec),
        Ok(SendAdmission::Execute)
    );
    // IP_CSUM without offload: EINVAL both
    let csum = SendWrView {
        send_flags: SendFlags::IP_CSUM,
        ..wr(WrOpcode::Send, &SGE8)
    };
    assert_eq!(errno_of(check_post_send(&rts, &csum, Spec)), EINVAL);
    assert_eq!(errno_of(check_post_send(&rts, &csum, Mlx5)), EINVAL);
}

#[test]
fn opcode_invalid_for_type_rxe_einval_mlx5_loc_qp_op_err() {
    // Goal: §1.2 row "opcode not valid for the QP type": rxe refuses with
    // EINVAL; mlx5 accepts and the WR completes LOC_QP_OP_ERR (§4.2 row 18,
    // GUT-UD Read/Write/FetchAdd/CompareSwap).
    // Method: post READ, WRITE and both atomics on an RTS UD QP.
    let ud = SendQueueView {
        transport: Transport::Ud,
        ..rc_queue(QpState::ReadyToSend)
    };
    for op in [
        WrOpcode::RdmaRead,
        WrOpcode::RdmaWrite,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::AtomicCmpAndSwp,
    ] {
        assert_eq!(
            errno_of(check_post_send(&ud, &wr(op, &SGE8), Spec)),
            EINVAL,
            "{op}"
        );
        assert_eq!(
            check_post_send(&ud, &wr(op, &SGE8), Mlx5),
            Ok(SendAdmission::CompleteInError(WcStatus::LocQpOpErr)),
            "{op}"
        );
    }
    // In ERR the same request is just flushed.
    let ud_err = SendQueueView {
        state: QpState::Error,
        ..ud
    };
    assert_eq!(
        check_post_send(&ud_err, &wr(WrOpcode::RdmaRead, &SGE8), Mlx5),
        Ok(SendAdmission::Flush)
    );
    // No send queue at all: EINVAL in both flavours.
    let tgt = SendQueueView {
        transport: Transport::XrcRecv,
        ..rc_queue(QpState::ReadyToSend)
    };
    assert_eq!(
        errno_of(check_post_send(&tgt, &wr(WrOpcode::Send, &SGE8), Mlx5)),
        EINVAL
    );
}

#[test]
fn inline_on_read_or_atomic_section_1_2() {
    // Goal: §1.2 "IBV_SEND_INLINE on READ/atomic": rxe EINVAL; mlx5 undefined,
    // the simulator completes with LOC_QP_OP_ERR (GUT accepts it).
    // Method: INLINE READ and FETCH_ADD on RTS RC.
    let rts = rc_queue(QpState::ReadyToSend);
    for op in [WrOpcode::RdmaRead, WrOpcode::AtomicFetchAndAdd] {
        let w = SendWrView {
            send_flags: SendFlags::INLINE,
            ..wr(op, &SGE8)
        };
        assert_eq!(errno_of(check_post_send(&rts, &w, Spec)), EINVAL);
        assert_eq!(
            check_post_send(&rts, &w, Mlx5),
            Ok(SendAdmission::CompleteInError(WcStatus::LocQpOpErr))
        );
    }
}

#[test]
fn atomic_post_checks_section_1_2_and_7() {
    // Goal: atomic SGE length != 8 or remote_addr % 8 != 0 → rxe EINVAL,
    // mlx5 accepted (fails at execution); no atomics → EOPNOTSUPP.
    // Method: vary SGE length and alignment of a CMP_AND_SWP on RTS RC.
    let rts = rc_queue(QpState::ReadyToSend);
    let four = [Sge {
        length: 4,
        ..SGE8[0]
    }];
    let short = wr(WrOpcode::AtomicCmpAndSwp, &four);
    assert_eq!(errno_of(check_post_send(&rts, &short, Spec)), EINVAL);
    assert_eq!(
        check_post_send(&rts, &short, Mlx5),
        Ok(SendAdmission::Execute)
    );
    let unaligned = SendWrView {
        atomic_remote_addr: 0x2004,
        ..wr(WrOpcode::AtomicFetchAndAdd, &SGE8)
    };
    assert_eq!(errno_of(check_post_send(&rts, &unaligned, Spec)), EINVAL);
    assert_eq!(
        check_post_send(&rts, &unaligned, Mlx5),
        Ok(SendAdmission::Execute)
    );
    assert_eq!(
        check_post_send(&rts, &wr(WrOpcode::AtomicFetchAndAdd, &SGE8), Spec),
        Ok(SendAdmission::Execute)
    );
    let no_atomics = SendQueueView {
        atomics_supported: false,
        ..rts
    };
    for f in [Spec, Mlx5] {
        let e =
            check_post_send(&no_atomics, &wr(WrOpcode::AtomicFetchAndAdd, &SGE8), f).unwrap_err();
        assert_eq!((e.kind, e.errno), (ErrorKind::Unsupported, EOPNOTSUPP));
    }
}

#[test]
fn total_length_over_2_pow_31_rxe_only() {
    // Goal: §1.2 "total message length > 2^31": rxe EINVAL, mlx5 not checked;
    // exactly 2^31 is allowed.
    // Method: two SGEs of 2^30 (+1) bytes on RTS RC.
    let rts = rc_queue(QpState::ReadyToSend);
    let half = Sge {
        length: 1 << 30,
        ..SGE8[0]
    };
    let exact = [half, half];
    let over = [
        half,
        Sge {
            length: (1 << 30) + 1,
            ..half
        },
    ];
    assert_eq!(
        check_post_send(&rts, &wr(WrOpcode::Send, &exact), Spec),
        Ok(SendAdmission::Execute)
    );
    assert_eq!(
        errno_of(check_post_send(&rts, &wr(WrOpcode::Send, &over), Spec)),
        EINVAL
    );
    assert_eq!(
        check_post_send(&rts, &wr(WrOpcode::Send, &over), Mlx5),
        Ok(SendAdmission::Execute)
    );
}

#[test]
fn flush_and_atomic_write_absent_from_mlx5_post_send() {
    // Goal: FLUSH/ATOMIC_WRITE are valid on RC per §2.1 (spec flavour) but
    // outside mlx5's post_send opcode table → EINVAL there.
    // Method: post both on RTS RC with each flavour.
    let rts = rc_queue(QpState::ReadyToSend);
    for op in [WrOpcode::Flush, WrOpcode::AtomicWrite] {
        assert_eq!(
            check_post_send(&rts, &wr(op, &SGE8), Spec),
            Ok(SendAdmission::Execute)
        );
        assert_eq!(
            errno_of(check_post_send(&rts, &wr(op, &SGE8), Mlx5)),
            EINVAL
        );
    }
}

fn rq(state: QpState) -> RecvQueueView {
    RecvQueueView {
        transport: Transport::Rc,
        state,
        has_srq: false,
        max_recv_wr: 2,
        max_recv_sge: 1,
        outstanding: 0,
    }
}

#[test]
fn recv_state_and_validation_sections_1_1_and_1_2() {
    // Goal: recv refused in RESET (EINVAL both), accepted INIT..SQE,
    // flushed in ERR; RQ full ENOMEM; num_sge > max_recv_sge EINVAL both.
    // Method: walk the states and the two limits with both flavours.
    for f in [Spec, Mlx5] {
        let e = check_post_recv(&rq(QpState::Reset), &SGE8, f).unwrap_err();
        assert_eq!((e.kind, e.errno), (ErrorKind::InvalidArgument, EINVAL));
        for s in [
            QpState::Init,
            QpState::ReadyToReceive,
            QpState::ReadyToSend,
            QpState::SendQueueDrain,
            QpState::SendQueueError,
        ] {
            assert_eq!(
                check_post_recv(&rq(s), &SGE8, f),
                Ok(RecvAdmission::Queue),
                "{s}"
            );
        }
        assert_eq!(
            check_post_recv(&rq(QpState::Error), &SGE8, f),
            Ok(RecvAdmission::Flush)
        );
        let full = RecvQueueView {
            outstanding: 2,
            ..rq(QpState::ReadyToSend)
        };
        let e = check_post_recv(&full, &SGE8, f).unwrap_err();
        assert_eq!((e.kind, e.errno), (ErrorKind::OutOfResources, ENOMEM));
        let two = [SGE8[0]; 2];
        let e = check_post_recv(&rq(QpState::ReadyToSend), &two, f).unwrap_err();
        assert_eq!(e.errno, EINVAL);
    }
}

#[test]
fn recv_on_srq_attached_qp_section_1_2() {
    // Goal: §1.2 last row: post_recv on a QP with an SRQ fails: rxe EINVAL,
    // mlx5 ENOMEM (no RQ allocated); same for send-only/XRC types.
    // Method: SRQ-attached RC, XRC_SEND and DCI receive queues.
    let srq = RecvQueueView {
        has_srq: true,
        ..rq(QpState::ReadyToSend)
    };
    assert_eq!(
        check_post_recv(&srq, &SGE8, Spec).unwrap_err().errno,
        EINVAL
    );
    assert_eq!(
        check_post_recv(&srq, &SGE8, Mlx5).unwrap_err().errno,
        ENOMEM
    );
    for t in [
        Transport::XrcSend,
        Transport::XrcRecv,
        Transport::Dci,
        Transport::Dct,
    ] {
        let q = RecvQueueView {
            transport: t,
            ..rq(QpState::ReadyToSend)
        };
        assert_eq!(
            check_post_recv(&q, &SGE8, Spec).unwrap_err().errno,
            EINVAL,
            "{t:?}"
        );
    }
}

#[test]
fn srq_post_limits_man_psrq() {
    // Goal: SRQ max_wr and max_sge limits (GUT-SRQ ExceedMaxWr/ExceedMaxSge).
    // Method: at and past each limit.
    assert_eq!(check_post_srq_recv(2, 1, 1, &SGE8), Ok(()));
    assert_eq!(
        check_post_srq_recv(2, 1, 2, &SGE8).unwrap_err().errno,
        ENOMEM
    );
    assert_eq!(
        check_post_srq_recv(2, 1, 0, &[SGE8[0]; 2])
            .unwrap_err()
            .errno,
        EINVAL
    );
}

#[test]
fn post_reject_becomes_verb_error_with_bad_wr() {
    // Goal: a refusal turns into the verbs Error with its errno and bad_wr.
    // Method: convert an mlx5 state refusal at index 3.
    let e = check_post_send(&rc_queue(QpState::Init), &wr(WrOpcode::Send, &SGE8), Mlx5)
        .unwrap_err()
        .to_error(Verb::PostSend, 3);
    assert_eq!(e.kind(), ErrorKind::OutOfResources);
    assert_eq!(e.kind(), ErrorKind::from_errno(e.errno()));
    assert_eq!(e.errno(), ENOMEM);
    assert_eq!(e.bad_wr(), Some(3));
}

#[test]
fn list_check_answers_as_check_post_send() {
    // Goal: `SendListCheck` (the per-list memo `post_send` uses) gives
    // every request exactly what `check_post_send` gives it, whatever came
    // before it in the list: admissions, refusals, errnos and messages.
    // Method: walk sequences of requests of varied shapes (opcode, flags,
    // SGE count, length, atomic alignment) over queues in several states
    // and fill levels, in both flavours, comparing the two at each step.
    let one = SGE8;
    let two = [SGE8[0], SGE8[0]];
    let three = [SGE8[0], SGE8[0], SGE8[0]];
    let long = [Sge {
        length: 100,
        ..SGE8[0]
    }];
    let none: [Sge; 0] = [];
    let lists: [&[Sge]; 5] = [&one, &two, &three, &long, &none];
    let opcodes = [
        WrOpcode::RdmaWrite,
        WrOpcode::Send,
        WrOpcode::RdmaRead,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::Flush,
        WrOpcode::Unknown(99),
    ];
    let flags = [
        SendFlags::empty(),
        SendFlags::SIGNALED,
        SendFlags::INLINE,
        SendFlags::IP_CSUM,
    ];
    let mut shapes = Vec::new();
    for &op in &opcodes {
        for &f in &flags {
            for l in lists {
                for addr in [0x2000, 0x2004] {
                    shapes.push(SendWrView {
                        opcode: op,
                        send_flags: f,
                        sg_list: l,
                        atomic_remote_addr: addr,
                    });
                }
            }
        }
    }
    for flavor in [Spec, Mlx5] {
        for state in [QpState::Init, QpState::ReadyToSend, QpState::Error] {
            for transport in [Transport::Rc, Transport::Ud] {
                let q = SendQueueView {
                    transport,
                    ..rc_queue(state)
                };
                let mut list = SendListCheck::new(q, flavor);
                // Each shape twice in a row (the memo's hit), then the
                // next, with the fill level cycling through full.
                for (i, w) in shapes.iter().enumerate() {
                    for k in 0..2 {
                        let outstanding = ((i * 2 + k) % 6) as u32;
                        let want = check_post_send(&SendQueueView { outstanding, ..q }, w, flavor)
                            .map(|a| (a, w.total_len()));
                        assert_eq!(list.check(w, outstanding), want, "{w:?} {outstanding}");
                    }
                }
            }
        }
    }
}
