//! Post-time validation of `ibv_post_send`, `ibv_post_recv` and
//! `ibv_post_srq_recv` (data-path §1.1, §1.2): which work requests are
//! refused with which errno, and what happens to the accepted ones.
//!
//! Each check returns the first failure of one work request; the caller
//! stops there and reports that index as `bad_wr` (MAN-PS), keeping the
//! earlier requests posted.
//!
//! The [`ErrorKind`] of a refusal is always [`ErrorKind::from_errno`] of
//! the errno the modelled driver returns, exactly as the hardware backend
//! classifies it: mlx5's `ENOMEM` for a send in INIT is
//! [`ErrorKind::OutOfResources`], rxe's `EINVAL` for the same post is
//! [`ErrorKind::InvalidArgument`], so a script compares the same kind on
//! either backend. Queue-full refusals are `ENOMEM` in both flavours.

use verbs_api::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use verbs_api::{
    Error, ErrorKind, QpCap, QpState, SendFlags, SendWr, Sge, Verb, Verbs, WcStatus, WrOpcode,
};

use super::opcode::{opcode_info, opcode_valid_for, OpClass};
use super::Transport;
use crate::ErrnoFlavor;

/// Why a work request was refused at post time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostReject {
    /// The errno class: [`ErrorKind::from_errno`] of `errno`.
    pub kind: ErrorKind,
    /// The raw errno the modelled driver returns.
    pub errno: i32,
    /// What was wrong, in words.
    pub message: &'static str,
}

impl PostReject {
    /// A refusal with `errno`; the kind follows from it.
    fn new(errno: i32, message: &'static str) -> Self {
        Self {
            kind: ErrorKind::from_errno(errno),
            errno,
            message,
        }
    }

    /// `EINVAL` in both flavours.
    fn invalid(message: &'static str) -> Self {
        Self::new(EINVAL, message)
    }

    /// A refusal that rxe reports as `EINVAL` and mlx5 as `ENOMEM` (kind
    /// `InvalidArgument` and `OutOfResources` respectively).
    fn invalid_or_nomem(flavor: ErrnoFlavor, message: &'static str) -> Self {
        let errno = match flavor {
            ErrnoFlavor::Mlx5 => ENOMEM,
            ErrnoFlavor::Spec => EINVAL,
        };
        Self::new(errno, message)
    }

    /// A full work queue: `ENOMEM` everywhere.
    fn full(message: &'static str) -> Self {
        Self::new(ENOMEM, message)
    }

    /// The verb error, with `bad_wr` set to the refused request's index.
    /// (Allocates the message; only on the failure path.)
    pub fn to_error(self, verb: Verb, bad_wr: usize) -> Error {
        Error::new(verb, self.kind, self.message)
            .with_errno(self.errno)
            .with_bad_wr(bad_wr)
    }
}

/// What happens to a send work request that passed validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendAdmission {
    /// Queue it for execution (in SQD it waits until the QP is back in RTS).
    Execute,
    /// The QP is in ERR (or its SQ in SQE): complete it with
    /// `IBV_WC_WR_FLUSH_ERR` without executing it (§1.1, §4.2 row 19).
    Flush,
    /// Accepted, but the device will complete it with this error status
    /// when it reaches the head of the queue and move the QP out of
    /// service (mlx5: opcode invalid for the QP type → `LOC_QP_OP_ERR`,
    /// §1.2 and §4.2 row 18).
    CompleteInError(WcStatus),
}

/// What happens to a receive work request that passed validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvAdmission {
    /// Queue it (in INIT it is not consumed until RTR, §1.1).
    Queue,
    /// The QP is in ERR: complete it with `IBV_WC_WR_FLUSH_ERR` (§1.1).
    Flush,
}

/// The send-queue facts a post is validated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendQueueView {
    /// The QP's transport.
    pub transport: Transport,
    /// The QP's current state.
    pub state: QpState,
    /// The QP's actual capabilities (`max_send_wr`, `max_send_sge`,
    /// `max_inline_data` are read).
    pub cap: QpCap,
    /// Send-queue slots in use ([`super::SqAccounting::outstanding`]).
    pub outstanding: u32,
    /// The device supports atomics (`atomic_cap != IBV_ATOMIC_NONE`).
    pub atomics_supported: bool,
    /// The device offers `IBV_SEND_IP_CSUM` checksum offload.
    pub ip_csum_supported: bool,
}

/// The parts of one `ibv_send_wr` that post-time validation reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWrView<'a> {
    /// `opcode`.
    pub opcode: WrOpcode,
    /// `send_flags`.
    pub send_flags: SendFlags,
    /// `sg_list` / `num_sge`.
    pub sg_list: &'a [Sge],
    /// `wr.atomic.remote_addr` (read for atomics only).
    pub atomic_remote_addr: u64,
}

impl<'a> SendWrView<'a> {
    /// The view of a full work request.
    pub fn of<V: Verbs + ?Sized>(wr: &SendWr<'a, V>) -> Self {
        Self {
            opcode: wr.opcode,
            send_flags: wr.send_flags,
            sg_list: wr.sg_list,
            atomic_remote_addr: wr.atomic.remote_addr,
        }
    }

    /// The sum of the SGE lengths (the message length), without overflow.
    pub fn total_len(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.length)).sum()
    }
}

/// Largest message rxe accepts at post time (data-path §1.2 "total message
/// length > 2^31").
const MSG_LEN_MAX: u64 = 1 << 31;

/// Whether `IBV_SEND_INLINE` makes the CPU copy this opcode's gather list
/// at post time: only opcodes whose payload travels from the requester
/// (SEND and RDMA WRITE with their variants). On READ, atomics and the
/// local opcodes the flag names no bytes to copy; `check_post_send`
/// decides what it does there.
pub fn inline_carries_payload(opcode: WrOpcode) -> bool {
    opcode_info(opcode).is_some_and(|i| matches!(i.class, OpClass::Send | OpClass::Write))
}

/// Validates one send work request at `ibv_post_send` time (data-path
/// §1.1 state table, §1.2 validation table, §2.1 opcode × QP type).
///
/// Checks, in this order (the first failure wins):
///
/// | check | `Spec` (rxe) | `Mlx5` |
/// |---|---|---|
/// | QP type without send queue (XRC_RECV, DCT) | `EINVAL` | `EINVAL` |
/// | opcode outside the enum table (`Unknown`, `DRIVER1`) | `EINVAL` | `EINVAL` |
/// | state RESET / INIT / RTR (C10-22, C10-25, C10-29) | `EINVAL` | `ENOMEM` |
/// | `outstanding >= max_send_wr` | `ENOMEM` | `ENOMEM` |
/// | `num_sge > max_send_sge` | `EINVAL` | `ENOMEM` |
/// | FLUSH / ATOMIC_WRITE (absent from mlx5's opcode table) | per §2.1 | `EINVAL` |
/// | opcode not valid for the QP type (§2.1) | `EINVAL` | accepted → `LOC_QP_OP_ERR` |
/// | `IBV_SEND_INLINE` on READ / atomic | `EINVAL` | accepted → `LOC_QP_OP_ERR` |
/// | atomic on a device without atomics | `EOPNOTSUPP` | `EOPNOTSUPP` |
/// | atomic SGE total ≠ 8 or `remote_addr % 8 != 0` | `EINVAL` | accepted (fails at execution, §4.2 rows 10–12) |
/// | `IBV_SEND_IP_CSUM` without offload | `EINVAL` | `EINVAL` |
/// | inline total > `max_inline_data` | `EINVAL` | `ENOMEM` |
/// | total length > 2^31 | `EINVAL` | not checked |
///
/// A request that passes is [`SendAdmission::Flush`] in ERR and SQE,
/// otherwise [`SendAdmission::Execute`] (or `CompleteInError` as above).
///
/// # Errors
///
/// The [`PostReject`] of the first failed check.
///
/// # Divergence from hardware
///
/// * mlx5 rejects sends in any state until the QP has reached RTS since its
///   last RESET (its `qp_state_max_gs` stays −1), so a QP that went
///   RESET→INIT→ERR refuses sends with `ENOMEM` there; the simulator
///   follows the IB state table in both flavours (§1.1 recommendation) and
///   flushes such sends instead.
/// * INLINE on READ/atomic is undefined on mlx5; the simulator completes it
///   with `LOC_QP_OP_ERR`, one of the outcomes GUT accepts.
/// * Older mlx5 providers (before rdma-core 988f90bc1) accepted sends in
///   RESET/INIT/RTR; not modelled.
pub fn check_post_send(
    q: &SendQueueView,
    wr: &SendWrView<'_>,
    flavor: ErrnoFlavor,
) -> Result<SendAdmission, PostReject> {
    let mlx5 = flavor == ErrnoFlavor::Mlx5;
    if !q.transport.has_send_queue() {
        return Err(PostReject::invalid("the QP type has no send queue"));
    }
    let Some(info) = opcode_info(wr.opcode) else {
        return Err(PostReject::invalid(
            "opcode outside the ibv_wr_opcode table",
        ));
    };
    // §1.1: RESET (C10-22), INIT and RTR (C10-25, C10-29) refuse sends.
    let flush = match q.state {
        QpState::ReadyToSend | QpState::SendQueueDrain => false,
        QpState::SendQueueError | QpState::Error => true,
        _ => {
            return Err(PostReject::invalid_or_nomem(
                flavor,
                "post_send is refused before the QP reaches RTS",
            ))
        }
    };
    if q.outstanding >= q.cap.max_send_wr {
        return Err(PostReject::full(
            "send queue full (outstanding >= max_send_wr)",
        ));
    }
    if wr.sg_list.len() > q.cap.max_send_sge as usize {
        return Err(PostReject::invalid_or_nomem(
            flavor,
            "num_sge > max_send_sge",
        ));
    }
    // mlx5's legacy post_send opcode table ends at IBV_WR_DRIVER1.
    if mlx5 && matches!(info.class, OpClass::Flush | OpClass::AtomicWrite) {
        return Err(PostReject::invalid(
            "opcode not supported by ibv_post_send on mlx5",
        ));
    }
    let mut deferred = None;
    if !opcode_valid_for(wr.opcode, q.transport) {
        if mlx5 {
            deferred = Some(WcStatus::LocQpOpErr);
        } else {
            return Err(PostReject::invalid("opcode not valid for the QP type"));
        }
    }
    let inline = wr.send_flags.contains(SendFlags::INLINE);
    let total = wr.total_len();
    if deferred.is_none() {
        let read_or_atomic = matches!(info.class, OpClass::Read | OpClass::Atomic);
        if inline && read_or_atomic {
            if mlx5 {
                deferred = Some(WcStatus::LocQpOpErr);
            } else {
                return Err(PostReject::invalid(
                    "IBV_SEND_INLINE on RDMA READ or atomic",
                ));
            }
        }
        if info.class == OpClass::Atomic {
            if !q.atomics_supported {
                return Err(PostReject::new(
                    EOPNOTSUPP,
                    "the device does not support atomics",
                ));
            }
            if !mlx5 && total != 8 {
                return Err(PostReject::invalid("atomic local SGE length is not 8"));
            }
            if !mlx5 && wr.atomic_remote_addr & 7 != 0 {
                return Err(PostReject::invalid(
                    "atomic remote_addr is not 8-byte aligned",
                ));
            }
        }
    }
    if wr.send_flags.contains(SendFlags::IP_CSUM) && !q.ip_csum_supported {
        return Err(PostReject::invalid(
            "IBV_SEND_IP_CSUM without checksum offload",
        ));
    }
    if inline && inline_carries_payload(wr.opcode) && total > u64::from(q.cap.max_inline_data) {
        return Err(PostReject::invalid_or_nomem(
            flavor,
            "inline data longer than max_inline_data",
        ));
    }
    if !mlx5 && total > MSG_LEN_MAX {
        return Err(PostReject::invalid("message longer than 2^31 bytes"));
    }
    Ok(match (flush, deferred) {
        (true, _) => SendAdmission::Flush,
        (false, Some(status)) => SendAdmission::CompleteInError(status),
        (false, None) => SendAdmission::Execute,
    })
}

/// The receive-queue facts a post is validated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvQueueView {
    /// The QP's transport.
    pub transport: Transport,
    /// The QP's current state.
    pub state: QpState,
    /// The QP receives through an SRQ (then it has no receive queue).
    pub has_srq: bool,
    /// `cap.max_recv_wr`.
    pub max_recv_wr: u32,
    /// `cap.max_recv_sge`.
    pub max_recv_sge: u32,
    /// Receive WQEs posted and not yet freed.
    pub outstanding: u32,
}

/// Validates one receive work request at `ibv_post_recv` time (data-path
/// §1.1, §1.2).
///
/// | check | `Spec` (rxe) | `Mlx5` |
/// |---|---|---|
/// | QP uses an SRQ, or its type has no RQ (XRC_SEND, XRC_RECV, DCI, DCT) | `EINVAL` | `ENOMEM` (no RQ allocated: the overflow check fires first) |
/// | state RESET | `EINVAL` | `EINVAL` |
/// | `outstanding >= max_recv_wr` | `ENOMEM` | `ENOMEM` |
/// | `num_sge > max_recv_sge` | `EINVAL` | `EINVAL` |
///
/// Accepted in INIT, RTR, RTS, SQD, SQE ([`RecvAdmission::Queue`]) and ERR
/// ([`RecvAdmission::Flush`]).
///
/// # Errors
///
/// The [`PostReject`] of the first failed check.
pub fn check_post_recv(
    q: &RecvQueueView,
    sg_list: &[Sge],
    flavor: ErrnoFlavor,
) -> Result<RecvAdmission, PostReject> {
    if q.has_srq || !q.transport.can_have_recv_queue() {
        return Err(PostReject::invalid_or_nomem(
            flavor,
            "the QP has no receive queue (it uses an SRQ, or its type has none)",
        ));
    }
    let flush = match q.state {
        QpState::Init
        | QpState::ReadyToReceive
        | QpState::ReadyToSend
        | QpState::SendQueueDrain
        | QpState::SendQueueError => false,
        QpState::Error => true,
        _ => {
            return Err(PostReject::invalid(
                "post_recv is refused in RESET (C10-22)",
            ))
        }
    };
    if q.outstanding >= q.max_recv_wr {
        return Err(PostReject::full(
            "receive queue full (outstanding >= max_recv_wr)",
        ));
    }
    if sg_list.len() > q.max_recv_sge as usize {
        return Err(PostReject::invalid("num_sge > max_recv_sge"));
    }
    Ok(if flush {
        RecvAdmission::Flush
    } else {
        RecvAdmission::Queue
    })
}

/// Validates one receive work request at `ibv_post_srq_recv` time
/// (data-path §1 MAN-PSRQ; GUT-SRQ `ExceedMaxWr`, `ExceedMaxSge`): a full
/// SRQ is `ENOMEM`, too many SGEs `EINVAL`, in both flavours.
///
/// # Errors
///
/// The [`PostReject`] of the first failed check.
pub fn check_post_srq_recv(
    max_wr: u32,
    max_sge: u32,
    outstanding: u32,
    sg_list: &[Sge],
) -> Result<(), PostReject> {
    if outstanding >= max_wr {
        return Err(PostReject::full("SRQ full (outstanding >= max_wr)"));
    }
    if sg_list.len() > max_sge as usize {
        return Err(PostReject::invalid("num_sge > max_sge"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
            let e = check_post_send(&no_atomics, &wr(WrOpcode::AtomicFetchAndAdd, &SGE8), f)
                .unwrap_err();
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
}
