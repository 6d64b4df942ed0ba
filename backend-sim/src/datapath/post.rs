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
    AtomicInfo, Error, ErrorKind, QpCap, QpState, RdmaInfo, SendFlags, SendWr, Sge, Verb, Verbs,
    WcStatus, WrData, WrEx, WrOp, WrOpcode,
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
    #[inline]
    pub fn total_len(&self) -> u64 {
        // One SGE is the usual case: not the vectorised sum's set-up.
        match self.sg_list {
            [s] => u64::from(s.length),
            l => l.iter().map(|s| u64::from(s.length)).sum(),
        }
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

/// [`check_post_send`] for the requests of one post list against one
/// queue view (everything but `outstanding` fixed for the list).
///
/// The checks read five things of a request: its opcode, its flags, its
/// SGE count, its total length and (atomics) `remote_addr % 8`; of the
/// queue, `outstanding` only through `outstanding >= max_send_wr`. So a
/// request of the same shape as the last one admitted gets the same
/// answer while the queue has room, without running the checks again
/// (a post list is usually one shape throughout). Every other request,
/// and every refusal, is [`check_post_send`] itself: one source of truth.
#[derive(Clone, Copy, Debug)]
pub struct SendListCheck {
    q: SendQueueView,
    flavor: ErrnoFlavor,
    last: Option<(SendWrShape, SendAdmission)>,
}

/// What [`check_post_send`] reads of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SendWrShape {
    opcode: WrOpcode,
    send_flags: SendFlags,
    num_sge: usize,
    total: u64,
    atomic_align: u64,
}

impl SendListCheck {
    /// Checks against `q` (its `outstanding` is replaced at each request).
    pub fn new(q: SendQueueView, flavor: ErrnoFlavor) -> Self {
        Self {
            q,
            flavor,
            last: None,
        }
    }

    /// [`check_post_send`] of `wr` with `outstanding` slots in use, and the
    /// request's total length ([`SendWrView::total_len`]).
    ///
    /// # Errors
    ///
    /// The [`PostReject`] of the first failed check.
    #[inline]
    pub fn check(
        &mut self,
        wr: &SendWrView<'_>,
        outstanding: u32,
    ) -> Result<(SendAdmission, u64), PostReject> {
        let shape = SendWrShape {
            opcode: wr.opcode,
            send_flags: wr.send_flags,
            num_sge: wr.sg_list.len(),
            total: wr.total_len(),
            atomic_align: wr.atomic_remote_addr & 7,
        };
        if let Some((last, admission)) = self.last {
            if last == shape && outstanding < self.q.cap.max_send_wr {
                return Ok((admission, shape.total));
            }
        }
        let q = SendQueueView {
            outstanding,
            ..self.q
        };
        let admission = check_post_send(&q, wr, self.flavor)?;
        self.last = Some((shape, admission));
        Ok((admission, shape.total))
    }
}

/// The receive-queue facts a post is validated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
mod tests;

/// The `ibv_post_send` request an `ibv_wr_*` request stands for: opcode,
/// flags (`IBV_SEND_INLINE` exactly when its data came by
/// `ibv_wr_set_inline_data[_list]`), immediate, RDMA and atomic fields,
/// and its scatter list (`single` holds the one SGE of
/// `ibv_wr_set_sge`, which the result borrows). Addressing (`ud`,
/// `xrc_srqn`) and a window bind's arguments are the caller's: they need
/// the world to resolve. Used by the world's `post_wr` and by a poster
/// that checks a batch outside the world, so both build the same request.
pub fn send_wr_of_wr_ex<'a, V: Verbs + ?Sized>(
    w: &WrEx<'a, V>,
    single: &'a [Sge; 1],
) -> SendWr<'a, V> {
    let mut s = SendWr::<V> {
        wr_id: w.wr_id,
        opcode: w.op.opcode(),
        send_flags: w.wr_flags - SendFlags::INLINE,
        ..SendWr::default()
    };
    match w.data {
        WrData::None => {}
        WrData::Sge(_) => s.sg_list = single,
        WrData::SgeList(l) => s.sg_list = l,
        WrData::InlineList(l) => {
            s.sg_list = l;
            s.send_flags |= SendFlags::INLINE;
        }
    }
    match &w.op {
        WrOp::Send | WrOp::BindMw { .. } => {}
        WrOp::SendImm { imm_data } => s.imm_data = *imm_data,
        WrOp::SendInv { invalidate_rkey } | WrOp::LocalInv { invalidate_rkey } => {
            s.imm_data = *invalidate_rkey;
        }
        WrOp::RdmaWrite { rkey, remote_addr } | WrOp::RdmaRead { rkey, remote_addr } => {
            s.rdma = RdmaInfo {
                remote_addr: *remote_addr,
                rkey: *rkey,
            };
        }
        WrOp::RdmaWriteImm {
            rkey,
            remote_addr,
            imm_data,
        } => {
            s.rdma = RdmaInfo {
                remote_addr: *remote_addr,
                rkey: *rkey,
            };
            s.imm_data = *imm_data;
        }
        WrOp::AtomicCmpSwp {
            rkey,
            remote_addr,
            compare,
            swap,
        } => {
            s.atomic = AtomicInfo {
                remote_addr: *remote_addr,
                compare_add: *compare,
                swap: *swap,
                rkey: *rkey,
            };
        }
        WrOp::AtomicFetchAdd {
            rkey,
            remote_addr,
            add,
        } => {
            s.atomic = AtomicInfo {
                remote_addr: *remote_addr,
                compare_add: *add,
                swap: 0,
                rkey: *rkey,
            };
        }
    }
    s
}

/// The one SGE of `ibv_wr_set_sge` (any other data: an empty SGE), for
/// [`send_wr_of_wr_ex`] to borrow.
pub fn single_sge_of<V: Verbs + ?Sized>(w: &WrEx<'_, V>) -> [Sge; 1] {
    match w.data {
        WrData::Sge(s) => [s],
        _ => [Sge::default()],
    }
}
