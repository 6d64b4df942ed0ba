//! The data path's rules as pure functions: what a post accepts, what each
//! opcode completes as, which protection check fails with which status, what
//! an error does to both QPs, how a receive scatters, how atomics compute,
//! how timers and retry counters run, when send-queue slots free up, and
//! what a flush generates.
//!
//! Nothing here touches the `World`: every function takes plain values (QP
//! type, state, capabilities, flags, [`MrView`]s or an [`MrLookup`]) and
//! returns a verdict, so each rule is unit-tested against the spec text on
//! its own and the integrator (issue 3) only wires inputs to outputs. The
//! hot functions do not allocate, hash, read a clock or spawn anything.
//!
//! Each item cites the row of `spec/data-path.md` (or
//! `spec/qp-state-machine.md`) it implements. Where mlx5 and rxe disagree
//! the doc says which one the simulator follows, in a
//! `# Divergence from hardware` section.
//!
//! | module | spec rows |
//! |---|---|
//! | [`post`] | data-path §1.1, §1.2 (post-time validation, errnos) |
//! | [`opcode`] | §2.1 (opcode × QP type), §2.2 and §3.2 (WC opcodes and flags), §6.2 (`byte_len`) |
//! | [`protection`] | §4.2 rows 1–5, 10, 11, 13, 14; §3.3; §7; §9.2 |
//! | [`scenario`] | §4.2 (error-scenario table), §4.3 (which QP goes to ERR), §6.3 |
//! | [`scatter`] | §4.2 rows 6–8, UD receive layout, UD/UC specifics; §3.3 |
//! | [`atomic`] | §7 |
//! | [`retry`] | §5.2; qp-state-machine §5.2 (RNR timer table, `timeout`) |
//! | [`accounting`] | §1.2 "SQ occupancy" |
//! | [`flush`] | §3.1 flush rules, §4.2 row 19, §5.1; qp-state-machine §7 (ERR entry) |
//!
//! PSN arithmetic and message segmentation are the fabric's
//! (`crate::fabric::psn`, `crate::fabric::segment`) and are not repeated here.
//!
//! The errno flavour is [`crate::ErrnoFlavor`] (`Mlx5` or `Spec`,
//! the latter meaning "IB spec as rxe implements it").

pub mod accounting;
pub mod atomic;
pub mod flush;
pub mod opcode;
pub mod post;
pub mod protection;
pub mod retry;
pub mod scatter;
pub mod scenario;

pub use accounting::{QueueFull, SqAccounting};
pub use atomic::{apply_atomic, AtomicOp};
pub use flush::{
    flush_plan, FlushCompletion, FlushCompletions, FlushInput, FlushPlan, RecvSource, WorkQueue,
    WqeRange,
};
pub use opcode::{
    consumes_recv_wqe, opcode_info, opcode_valid_for, requester_byte_len, requester_wc_flags,
    OpClass, OpcodeInfo, PayloadDirection, ResponderCompletion,
};
pub use post::{
    check_post_recv, check_post_send, check_post_srq_recv, inline_carries_payload,
    send_wr_of_wr_ex, single_sge_of, PostReject, RecvAdmission, RecvQueueView, SendAdmission,
    SendListCheck, SendQueueView, SendWrView,
};
pub use protection::{
    check_invalidate, check_local_sges, check_remote, check_requester_local, RemoteOp,
    RemoteRequest, ResponderView,
};
pub use retry::{
    ack_timeout_ns, rnr_timer_ns, RetryCounters, RetryVerdict, RNR_RETRY_INFINITE, RNR_TIMER_US,
};
pub use scatter::{
    scatter_plan, ScatterPart, ScatterPlan, ScatterSegment, ScatterSegments, UD_GRH_BYTES,
};
pub use scenario::{error_outcome, ErrorOutcome, ErrorScenario, QpFate};

use verbs_api::{AccessFlags, DcType, QpType};

/// What the data path needs to know about one memory region (or memory
/// window): its range, keys, access, PD and whether it is still registered.
///
/// `addr` is the address of the first byte as `ibv_reg_mr` reported it. For
/// an `IBV_ACCESS_ZERO_BASED` region the SGE and remote addresses are offsets
/// from the start (data-path §1, MAN-PS), so the range starts at 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrView {
    /// `ibv_mr.addr`.
    pub addr: u64,
    /// `ibv_mr.length` in bytes.
    pub length: u64,
    /// `ibv_mr.lkey`.
    pub lkey: u32,
    /// `ibv_mr.rkey`.
    pub rkey: u32,
    /// The access flags it was registered with.
    pub access: AccessFlags,
    /// The owning PD (any stable number; compared for equality only).
    pub pd: u32,
    /// `false` once deregistered (or invalidated): every use then fails as
    /// a bad key would (data-path §4.2 row 7 "MR deregistered").
    pub valid: bool,
}

impl MrView {
    /// The first address that names byte 0 of the region: 0 for a
    /// zero-based region, `addr` otherwise.
    pub const fn base(&self) -> u64 {
        if self.access.contains(AccessFlags::ZERO_BASED) {
            0
        } else {
            self.addr
        }
    }

    /// The byte offset inside the region of `[address, address + len)`,
    /// or `None` when any byte of it lies outside the region (or the sum
    /// overflows). A zero-length range needs only its start inside
    /// `[base, base + length]`.
    pub const fn offset_of(&self, address: u64, len: u64) -> Option<u64> {
        let base = self.base();
        if address < base {
            return None;
        }
        let offset = address - base;
        match offset.checked_add(len) {
            Some(end) if end <= self.length => Some(offset),
            _ => None,
        }
    }
}

/// Finds MRs by key. The `World` implements it over its arenas (O(1) by
/// key index); tests and small callers use the slice impl.
///
/// A lookup returns the region whatever its PD, access or validity: the
/// checks in [`protection`] and [`scatter`] decide what that means.
pub trait MrLookup {
    /// The region whose `lkey` is `lkey`, if any.
    fn by_lkey(&self, lkey: u32) -> Option<MrView>;
    /// The region (or memory window) whose `rkey` is `rkey`, if any.
    fn by_rkey(&self, rkey: u32) -> Option<MrView>;
}

/// Linear search, for tests and tiny tables.
impl MrLookup for [MrView] {
    fn by_lkey(&self, lkey: u32) -> Option<MrView> {
        self.iter().copied().find(|m| m.lkey == lkey)
    }

    fn by_rkey(&self, rkey: u32) -> Option<MrView> {
        self.iter().copied().find(|m| m.rkey == rkey)
    }
}

/// The transport service of a QP, as the data-path tables distinguish it
/// (data-path §2.1 columns, plus the receive-only XRC_RECV and DCT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Transport {
    /// `IBV_QPT_RC`.
    Rc,
    /// `IBV_QPT_UC`.
    Uc,
    /// `IBV_QPT_UD`.
    Ud,
    /// `IBV_QPT_XRC_SEND` (XRC initiator).
    XrcSend,
    /// `IBV_QPT_XRC_RECV` (XRC target): no send queue, receives through an SRQ.
    XrcRecv,
    /// `IBV_QPT_RAW_PACKET`.
    RawPacket,
    /// mlx5 DC initiator (`IBV_QPT_DRIVER` + `MLX5DV_DCTYPE_DCI`).
    Dci,
    /// mlx5 DC target (`IBV_QPT_DRIVER` + `MLX5DV_DCTYPE_DCT`): no send queue.
    Dct,
}

impl Transport {
    /// The transport of a QP type; `IBV_QPT_DRIVER` needs its DC type.
    /// `None` for unknown types and a `DRIVER` QP without a DC type.
    pub const fn from_qp_type(qp_type: QpType, dc_type: Option<DcType>) -> Option<Self> {
        Some(match qp_type {
            QpType::Rc => Self::Rc,
            QpType::Uc => Self::Uc,
            QpType::Ud => Self::Ud,
            QpType::XrcSend => Self::XrcSend,
            QpType::XrcRecv => Self::XrcRecv,
            QpType::RawPacket => Self::RawPacket,
            QpType::Driver => match dc_type {
                Some(DcType::Dci) => Self::Dci,
                Some(DcType::Dct) => Self::Dct,
                _ => return None,
            },
            QpType::Unknown(_) => return None,
        })
    }

    /// Reliable transports acknowledge, NAK and retry (RC, XRC, DC).
    pub const fn is_reliable(self) -> bool {
        matches!(
            self,
            Self::Rc | Self::XrcSend | Self::XrcRecv | Self::Dci | Self::Dct
        )
    }

    /// Unreliable transports (UD, UC, raw): the responder drops a bad
    /// packet and never moves to ERR because of it (data-path §4.3).
    pub const fn is_unreliable(self) -> bool {
        !self.is_reliable()
    }

    /// Whether user WRs can be posted to a send queue (data-path §2.1:
    /// "XRC_RECV (TGT) and DCT have no send queue for user WRs").
    pub const fn has_send_queue(self) -> bool {
        !matches!(self, Self::XrcRecv | Self::Dct)
    }

    /// Whether the QP type can own a receive queue at all (XRC_SEND and DCI
    /// are send-only; XRC_RECV and DCT receive through an SRQ).
    pub const fn can_have_recv_queue(self) -> bool {
        !matches!(self, Self::XrcSend | Self::XrcRecv | Self::Dci | Self::Dct)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mr_view_offset_of_checks_every_byte() {
        // Goal: the range check behind LOC_PROT_ERR / REM_ACCESS_ERR ("addr
        // outside MR", data-path §4.2 rows 5 and 7) covers first and last byte,
        // and zero-based regions count from 0 (MAN-PS on ZERO_BASED).
        // Method: a 4096-byte region at 0x1000; probe the edges.
        let mr = MrView {
            addr: 0x1000,
            length: 4096,
            valid: true,
            ..MrView::default()
        };
        assert_eq!(mr.offset_of(0x1000, 4096), Some(0));
        assert_eq!(mr.offset_of(0x1fff, 1), Some(0xfff));
        assert_eq!(mr.offset_of(0x1fff, 2), None, "one byte past the end");
        assert_eq!(mr.offset_of(0xfff, 1), None, "one byte before the start");
        assert_eq!(
            mr.offset_of(0x2000, 0),
            Some(4096),
            "empty range at the end"
        );
        assert_eq!(mr.offset_of(u64::MAX, 2), None, "overflow is out of range");
        let zero_based = MrView {
            access: AccessFlags::ZERO_BASED,
            ..mr
        };
        assert_eq!(zero_based.offset_of(0, 4096), Some(0));
        assert_eq!(zero_based.offset_of(0x1000, 1), None);
    }

    #[test]
    fn transport_from_qp_type_and_queue_shape() {
        // Goal: QP types map onto the data-path §2.1 columns; XRC_RECV and DCT
        // have no send queue, XRC_SEND/DCI no receive queue.
        // Method: map every type and check the queue predicates.
        assert_eq!(
            Transport::from_qp_type(QpType::Rc, None),
            Some(Transport::Rc)
        );
        assert_eq!(
            Transport::from_qp_type(QpType::Driver, Some(DcType::Dci)),
            Some(Transport::Dci)
        );
        assert_eq!(Transport::from_qp_type(QpType::Driver, None), None);
        assert_eq!(Transport::from_qp_type(QpType::Unknown(77), None), None);
        assert!(!Transport::XrcRecv.has_send_queue());
        assert!(!Transport::Dct.has_send_queue());
        assert!(Transport::Dci.has_send_queue());
        assert!(!Transport::XrcSend.can_have_recv_queue());
        assert!(!Transport::Dci.can_have_recv_queue());
        assert!(Transport::Ud.can_have_recv_queue());
        assert!(Transport::Ud.is_unreliable() && Transport::Uc.is_unreliable());
        assert!(Transport::XrcSend.is_reliable());
    }
}
