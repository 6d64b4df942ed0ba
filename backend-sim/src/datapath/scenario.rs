//! The error-scenario table of data-path §4.2 as data, with the rule of
//! thumb of §4.3 (which QP goes to ERR, which async event is raised).
//!
//! The integrator detects a condition (through [`super::protection`],
//! [`super::scatter`], [`super::retry`], or its own queues), names it as an
//! [`ErrorScenario`], and applies the [`ErrorOutcome`] that
//! [`error_outcome`] returns: which completion each side gets, which QP
//! changes state, which affiliated async event the responder raises, and
//! whether an unreliable responder simply drops the message.

use verbs_api::{AsyncEventType, WcStatus};

use super::Transport;

/// A condition the data path detected, named after its §4.2 row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorScenario {
    /// Rows 1–3: a requester SGE with an invalid lkey, outside its MR, in
    /// another PD, deregistered, or (for a READ/atomic landing buffer)
    /// without `LOCAL_WRITE`. Detected by the requester before sending.
    LocalProtection,
    /// Row 5: invalid rkey, range outside the MR/MW, or the MR/MW lacks
    /// the REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC the opcode needs.
    RemoteAccess,
    /// Row 6: the receive WQE is too small for the SEND.
    RecvTooSmall,
    /// Row 7: a receive SGE the payload reaches is invalid (bad lkey, outside
    /// its MR, deregistered MR, MR without `LOCAL_WRITE`, other PD).
    RecvSgeInvalid,
    /// Row 9: RNR retries exhausted (`rnr_retry` < 7).
    RnrRetryExceeded,
    /// Row 10: atomic `remote_addr` not 8-byte aligned.
    AtomicMisaligned,
    /// Rows 11–12: atomic local SGE length ≠ 8.
    AtomicLocalLength,
    /// Rows 13–14: READ/atomic while the responder's `max_dest_rd_atomic`
    /// is 0, or the responder QP's `qp_access_flags` lack the needed
    /// REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC.
    ResponderQpAccess,
    /// Rows 15–16: no ACK within the timeout `retry_cnt + 1` times (peer
    /// dead, not in RTR/RTS, wrong QPN/GID, RC into a UD QP).
    TransportRetryExceeded,
    /// Row 17: SEND_WITH_INV whose `invalidate_rkey` names no valid MR/MW.
    SendInvalidateBadRkey,
    /// Row 18: opcode invalid for the QP type, accepted by the provider
    /// (mlx5, see [`super::SendAdmission::CompleteInError`]); also the
    /// simulator's INLINE-on-READ/atomic outcome on mlx5.
    LocalQpOperation,
    /// Row 20: a memory-window bind failed.
    MwBind,
    /// UD/UC table "UD send payload > path MTU": the requester refuses to
    /// send a UD message longer than the path MTU.
    UdPayloadExceedsMtu,
    /// §5/§10.5 and UD/UC table: a message that needs a receive WQE found
    /// none (RC: RNR NAK and retry, not yet an error; UD/UC: dropped).
    NoRecvWqe,
    /// §6.3: a completion could not be written because its CQ is full.
    CqOverrun,
}

/// What happens to a QP's state because of an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpFate {
    /// Unchanged.
    Unchanged,
    /// → ERR: all outstanding and later WRs of both queues are flushed.
    Error,
    /// → SQE (UD/UC send-side errors in the IB model): the send queue is
    /// flushed until SQE→RTS; the receive queue keeps working.
    SendQueueError,
}

/// The consequences of one [`ErrorScenario`] on one transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorOutcome {
    /// Status of the requester's completion for the failed WR; `None` when
    /// the requester sees no error (the message is then treated as
    /// delivered: UD/UC drops, row 17) or has none yet (RC RNR: retry).
    pub requester_status: Option<WcStatus>,
    /// Status of the responder's receive WQE **if the message consumed
    /// one** (SEND, WRITE_WITH_IMM); `None` = no responder completion.
    pub responder_status: Option<WcStatus>,
    /// What happens to the requester QP.
    pub requester_fate: QpFate,
    /// What happens to the responder QP.
    pub responder_fate: QpFate,
    /// Affiliated async event raised on the responder QP.
    pub responder_event: Option<AsyncEventType>,
    /// Affiliated async event raised on the requester QP.
    pub requester_event: Option<AsyncEventType>,
    /// The responder silently drops the message: no receive WQE consumed,
    /// no completion, no state change (UD/UC, §4.3; UD class-D faults).
    pub dropped: bool,
    /// RC only: the responder answers with an RNR NAK and the requester
    /// retries per `rnr_retry` (§4.2 row 9); nothing completes yet.
    pub rnr_nak: bool,
}

const NOTHING: ErrorOutcome = ErrorOutcome {
    requester_status: None,
    responder_status: None,
    requester_fate: QpFate::Unchanged,
    responder_fate: QpFate::Unchanged,
    responder_event: None,
    requester_event: None,
    dropped: false,
    rnr_nak: false,
};

/// A requester-local error: only the requester leaves service (§4.3 bullet
/// 1); UD/UC enter SQE, reliable transports ERR (§4.3 bullet 5).
const fn local(status: WcStatus, transport: Transport) -> ErrorOutcome {
    ErrorOutcome {
        requester_status: Some(status),
        requester_fate: if transport.is_reliable() {
            QpFate::Error
        } else {
            QpFate::SendQueueError
        },
        ..NOTHING
    }
}

/// A responder-detected error on a reliable transport: NAK, requester
/// completes with `requester`, the consumed receive WQE (if any) with
/// `responder`, both QPs → ERR, responder raises `event` (§4.3 bullet 2).
const fn responder_nak(
    requester: WcStatus,
    responder: WcStatus,
    event: AsyncEventType,
) -> ErrorOutcome {
    ErrorOutcome {
        requester_status: Some(requester),
        responder_status: Some(responder),
        requester_fate: QpFate::Error,
        responder_fate: QpFate::Error,
        responder_event: Some(event),
        ..NOTHING
    }
}

/// The message is dropped by an unreliable responder (§4.3 bullet 4).
const DROPPED: ErrorOutcome = ErrorOutcome {
    dropped: true,
    ..NOTHING
};

/// Data-path §4.2 and §4.3: the consequences of `scenario` on a QP pair of
/// `transport` (the requester's transport; XRC and DC behave as RC).
///
/// | scenario (row) | requester CQE | responder recv CQE | requester | responder | event (responder) |
/// |---|---|---|---|---|---|
/// | LocalProtection (1–3) | `LOC_PROT_ERR` | — | ERR (UD/UC: SQE) | — | — |
/// | RemoteAccess (5) | `REM_ACCESS_ERR` | `LOC_ACCESS_ERR` (WRITE_WITH_IMM) | ERR | ERR | `QP_ACCESS_ERR` |
/// | RecvTooSmall (6) | `REM_INV_REQ_ERR` | `LOC_LEN_ERR` | ERR | ERR | `QP_REQ_ERR` |
/// | RecvSgeInvalid (7) | `REM_OP_ERR` | `LOC_PROT_ERR` | ERR | ERR | `QP_FATAL` |
/// | RnrRetryExceeded (9) | `RNR_RETRY_EXC_ERR` | — | ERR | — | — |
/// | AtomicMisaligned (10) | `REM_INV_REQ_ERR` | — | ERR | ERR | `QP_REQ_ERR` |
/// | AtomicLocalLength (11, 12) | `LOC_LEN_ERR` | — | ERR | — | — |
/// | ResponderQpAccess (13, 14) | `REM_INV_REQ_ERR` | `REM_INV_REQ_ERR` (WRITE_WITH_IMM only) | ERR | ERR | `QP_REQ_ERR` |
/// | TransportRetryExceeded (15, 16) | `RETRY_EXC_ERR` | — | ERR | — | — |
/// | SendInvalidateBadRkey (17) | none (success) | `REM_INV_REQ_ERR` | — | ERR | — |
/// | LocalQpOperation (18) | `LOC_QP_OP_ERR` | — | ERR (UD/UC: SQE) | — | — |
/// | MwBind (20) | `MW_BIND_ERR` | — | ERR (UD/UC: SQE) | — | — |
/// | UdPayloadExceedsMtu | `LOC_LEN_ERR` | — | SQE | — | — |
/// | NoRecvWqe | RC: RNR NAK, retry | — | — | — | — |
/// | CqOverrun (§6.3) | — | — | ERR, `QP_FATAL` (on the QP whose CQE was lost) | — | — |
///
/// On UD/UC every responder-detected scenario (RemoteAccess, RecvTooSmall,
/// RecvSgeInvalid's length variant, AtomicMisaligned, ResponderQpAccess,
/// SendInvalidateBadRkey, NoRecvWqe) is a silent drop: no NAK, sender
/// `SUCCESS`, no WQE consumed, no state change (§4.3; UD class-D faults
/// GUT-UD `SendWithTooSmallRecv`; RXE-RESP UC drops). A UD/UC receive WQE
/// whose SGE is invalid is the receiver's own fault, not the packet's: it
/// completes `LOC_PROT_ERR` and the receiver goes to ERR (no source; the
/// IB model of a local protection error).
///
/// For CqOverrun, `requester_*` describes the QP whose completion was lost
/// (whichever side it is); the integrator also raises `IBV_EVENT_CQ_ERR` on
/// the CQ and marks it unusable.
///
/// # Divergence from hardware
///
/// * Row 1, bad lkey: rxe reports `LOC_QP_OP_ERR`; the simulator uses the
///   hardware `LOC_PROT_ERR` in both flavours.
/// * Row 5, WRITE_WITH_IMM receive WQE: hardware gives `LOC_ACCESS_ERR` or
///   `LOC_PROT_ERR`; the simulator picks `LOC_ACCESS_ERR`.
/// * Row 6: rxe completes the receive with `REM_INV_REQ_ERR`; the
///   simulator follows hardware (`LOC_LEN_ERR`).
/// * Row 7: rxe completes the receive with `LOC_QP_OP_ERR`; the simulator
///   follows hardware (`LOC_PROT_ERR`). The responder event follows §4.3
///   ("`QP_FATAL` otherwise"); no source observed it.
/// * Rows 11–12: mlx5 deviates on CMP_AND_SWP and FETCH_AND_ADD with a
///   local length ≠ 8 (GUT introspection); the simulator gives
///   `LOC_LEN_ERR` to both, one of the outcomes GUT accepts for FETCH_ADD.
/// * Rows 13–14: only rxe's behaviour is known (`REM_INV_REQ_ERR`); mlx5
///   silently disables READ/atomic when `max_dest_rd_atomic == 0`, with an
///   error status no source records.
/// * Row 15: some NICs give `REM_OP_ERR`/`FATAL_ERR`, and mlx5 gives no
///   completion within GUT's timeout when the peer is in ERR; the simulator
///   always gives `RETRY_EXC_ERR` after the retries.
/// * Row 17: some NICs NAK with `REM_ACCESS_ERR`; the simulator follows the
///   default NIC model (no NAK) and rxe's receive status
///   (`REM_INV_REQ_ERR`); no event (none is documented for it).
/// * Row 18 and other requester-local errors on UD/UC: GUT observes mlx5
///   moving a UD QP to ERR; rxe uses ERR for every error; the simulator
///   follows the IB model (SQE, recoverable with SQE→RTS), which flushes
///   the send queue exactly as ERR would.
/// * UD payload > MTU: rxe reports success without sending; the simulator
///   follows hardware (`LOC_LEN_ERR`).
pub const fn error_outcome(scenario: ErrorScenario, transport: Transport) -> ErrorOutcome {
    use AsyncEventType as E;
    use ErrorScenario as S;
    use WcStatus as W;
    let reliable = transport.is_reliable();
    match scenario {
        S::LocalProtection => local(W::LocProtErr, transport),
        S::AtomicLocalLength => local(W::LocLenErr, transport),
        S::LocalQpOperation => local(W::LocQpOpErr, transport),
        S::MwBind => local(W::MwBindErr, transport),
        S::UdPayloadExceedsMtu => local(W::LocLenErr, transport),
        // RNR and transport timeouts: only the requester → ERR (§4.3 bullet 3).
        S::RnrRetryExceeded => ErrorOutcome {
            requester_status: Some(W::RnrRetryExcErr),
            requester_fate: QpFate::Error,
            ..NOTHING
        },
        S::TransportRetryExceeded => ErrorOutcome {
            requester_status: Some(W::RetryExcErr),
            requester_fate: QpFate::Error,
            ..NOTHING
        },
        // §6.3 simulator recommendation.
        S::CqOverrun => ErrorOutcome {
            requester_fate: QpFate::Error,
            requester_event: Some(E::QpFatal),
            ..NOTHING
        },
        // The receiver's own malformed WQE: an error on UD/UC as well.
        S::RecvSgeInvalid if !reliable => ErrorOutcome {
            responder_status: Some(W::LocProtErr),
            responder_fate: QpFate::Error,
            ..NOTHING
        },
        // Everything else is detected by the responder: UD/UC drop it.
        _ if !reliable => DROPPED,
        S::RemoteAccess => responder_nak(W::RemAccessErr, W::LocAccessErr, E::QpAccessErr),
        S::RecvTooSmall => responder_nak(W::RemInvReqErr, W::LocLenErr, E::QpReqErr),
        S::RecvSgeInvalid => responder_nak(W::RemOpErr, W::LocProtErr, E::QpFatal),
        // Atomics consume no receive WQE: no responder completion.
        S::AtomicMisaligned => ErrorOutcome {
            responder_status: None,
            ..responder_nak(W::RemInvReqErr, W::RemInvReqErr, E::QpReqErr)
        },
        S::ResponderQpAccess => responder_nak(W::RemInvReqErr, W::RemInvReqErr, E::QpReqErr),
        S::SendInvalidateBadRkey => ErrorOutcome {
            responder_status: Some(W::RemInvReqErr),
            responder_fate: QpFate::Error,
            ..NOTHING
        },
        S::NoRecvWqe => ErrorOutcome {
            rnr_nak: true,
            ..NOTHING
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AsyncEventType as E;
    use ErrorScenario as S;
    use WcStatus as W;

    /// (requester status, responder status, requester fate, responder fate, responder event)
    type Row = (Option<W>, Option<W>, QpFate, QpFate, Option<E>);

    fn row(o: ErrorOutcome) -> Row {
        (
            o.requester_status,
            o.responder_status,
            o.requester_fate,
            o.responder_fate,
            o.responder_event,
        )
    }

    #[test]
    fn rc_error_table_section_4_2() {
        // Goal: every RC row of the §4.2 table: requester CQE, responder CQE,
        // who goes to ERR, and the §4.3 async event.
        // Method: the table transcribed by hand, compared with error_outcome.
        use QpFate::{Error as Err, Unchanged as Same};
        let table: [(S, Row); 11] = [
            (
                S::LocalProtection,
                (Some(W::LocProtErr), None, Err, Same, None),
            ),
            (
                S::RemoteAccess,
                (
                    Some(W::RemAccessErr),
                    Some(W::LocAccessErr),
                    Err,
                    Err,
                    Some(E::QpAccessErr),
                ),
            ),
            (
                S::RecvTooSmall,
                (
                    Some(W::RemInvReqErr),
                    Some(W::LocLenErr),
                    Err,
                    Err,
                    Some(E::QpReqErr),
                ),
            ),
            (
                S::RecvSgeInvalid,
                (
                    Some(W::RemOpErr),
                    Some(W::LocProtErr),
                    Err,
                    Err,
                    Some(E::QpFatal),
                ),
            ),
            (
                S::RnrRetryExceeded,
                (Some(W::RnrRetryExcErr), None, Err, Same, None),
            ),
            (
                S::AtomicLocalLength,
                (Some(W::LocLenErr), None, Err, Same, None),
            ),
            (
                S::TransportRetryExceeded,
                (Some(W::RetryExcErr), None, Err, Same, None),
            ),
            (
                S::SendInvalidateBadRkey,
                (None, Some(W::RemInvReqErr), Same, Err, None),
            ),
            (
                S::LocalQpOperation,
                (Some(W::LocQpOpErr), None, Err, Same, None),
            ),
            (S::MwBind, (Some(W::MwBindErr), None, Err, Same, None)),
            (
                S::ResponderQpAccess,
                (
                    Some(W::RemInvReqErr),
                    Some(W::RemInvReqErr),
                    Err,
                    Err,
                    Some(E::QpReqErr),
                ),
            ),
        ];
        for (s, expected) in table {
            assert_eq!(row(error_outcome(s, Transport::Rc)), expected, "{s:?}");
            // XRC and DC follow RC.
            assert_eq!(row(error_outcome(s, Transport::XrcSend)), expected, "{s:?}");
            assert_eq!(row(error_outcome(s, Transport::Dci)), expected, "{s:?}");
        }
        // Row 10: both → ERR, requester REM_INV_REQ_ERR, responder QP_REQ_ERR.
        let o = error_outcome(S::AtomicMisaligned, Transport::Rc);
        assert_eq!(o.requester_status, Some(W::RemInvReqErr));
        assert_eq!(o.responder_status, None, "atomics consume no receive WQE");
        assert_eq!((o.requester_fate, o.responder_fate), (Err, Err));
        assert_eq!(o.responder_event, Some(E::QpReqErr));
    }

    #[test]
    fn rc_missing_recv_wqe_is_rnr_nak_not_error() {
        // Goal: §4.2 row 9 / §10.5: on RC a missing receive WQE NAKs RNR and
        // retries; nothing completes and no QP changes state yet.
        // Method: NoRecvWqe on RC.
        let o = error_outcome(S::NoRecvWqe, Transport::Rc);
        assert!(o.rnr_nak && !o.dropped);
        assert_eq!(
            (o.requester_status, o.requester_fate),
            (None, QpFate::Unchanged)
        );
    }

    #[test]
    fn ud_uc_responder_errors_are_silent_drops_section_4_3() {
        // Goal: §4.3 "UD/UC: the responder never moves to ERR because of a bad
        // incoming packet; it drops it", sender SUCCESS (UD/UC table).
        // Method: every responder-detected scenario on UD and UC.
        for t in [Transport::Ud, Transport::Uc] {
            for s in [
                S::RemoteAccess,
                S::RecvTooSmall,
                S::NoRecvWqe,
                S::AtomicMisaligned,
                S::ResponderQpAccess,
                S::SendInvalidateBadRkey,
            ] {
                let o = error_outcome(s, t);
                assert!(o.dropped, "{s:?} on {t:?}");
                assert_eq!(o.requester_status, None);
                assert_eq!(o.responder_status, None);
                assert_eq!(
                    (o.requester_fate, o.responder_fate),
                    (QpFate::Unchanged, QpFate::Unchanged)
                );
                assert!(!o.rnr_nak);
            }
        }
    }

    #[test]
    fn ud_uc_send_side_errors_enter_sqe_section_4_3() {
        // Goal: §4.3 last bullet: UD/UC send-side errors move the QP to SQE in
        // the IB model; UD payload > MTU is LOC_LEN_ERR at the sender.
        // Method: local scenarios on UD and UC.
        for t in [Transport::Ud, Transport::Uc] {
            let o = error_outcome(S::LocalProtection, t);
            assert_eq!(
                (o.requester_status, o.requester_fate),
                (Some(W::LocProtErr), QpFate::SendQueueError)
            );
            assert_eq!(o.responder_fate, QpFate::Unchanged);
        }
        let o = error_outcome(S::UdPayloadExceedsMtu, Transport::Ud);
        assert_eq!(
            (o.requester_status, o.requester_fate),
            (Some(W::LocLenErr), QpFate::SendQueueError)
        );
        let o = error_outcome(S::LocalQpOperation, Transport::Ud);
        assert_eq!(o.requester_status, Some(W::LocQpOpErr));
    }

    #[test]
    fn cq_overrun_section_6_3() {
        // Goal: §6.3 simulator rule: the QP whose completion was lost → ERR
        // with IBV_EVENT_QP_FATAL.
        // Method: CqOverrun on RC and UD.
        for t in [Transport::Rc, Transport::Ud] {
            let o = error_outcome(S::CqOverrun, t);
            assert_eq!(
                (o.requester_fate, o.requester_event),
                (QpFate::Error, Some(E::QpFatal))
            );
        }
    }
}
