//! The state the executor's files share, below all of them: per-QP phase
//! and attributes, the requester's and the responder's state, completion
//! entries, the transport of a QP class and the event budgets. Completion
//! queues (`cq.rs`), QPs (`qp.rs`), posting (`post.rs`), DC (`dc.rs`) and
//! the executor (`exec/`) import their types from here and from nothing
//! of each other, so the files stand in layers: this one, then `cq.rs`
//! and `qp.rs`, then `post.rs`, `dc.rs` and `exec/` (which call one
//! another's methods on [`World`](super::World) but import no names from each other).

use verbs_api::{AccessFlags, AhAttr, DciStreams, Mtu, PathMigState, QpClass, QpState, Sge, Wc};

use super::Mr;
use crate::datapath::{MrView, RetryCounters, Transport};
use crate::fabric::{DeviceIndex, Endpoint, Psn};
use crate::handles::{QpHandle, SrqHandle};

/// Which work queue of a QP a completion came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueKind {
    Send,
    Recv,
    /// A receive WQE of this SRQ, consumed by the entry's QP.
    Srq(SrqHandle),
}

/// A completion waiting in a CQ, with the work request it frees when polled.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqEntry {
    pub(crate) wc: Wc,
    pub(crate) qp: QpHandle,
    pub(crate) queue: QueueKind,
    pub(crate) seq: u64,
    /// Virtual time (ns) the completion was written (extended CQs report
    /// it as the completion timestamp); set by `push_completion`.
    pub(crate) ts_ns: u64,
}

/// What a QP knows once it is bound to a port (from INIT on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bound {
    pub(crate) port_num: u8,
    pub(crate) pkey_index: u16,
    pub(crate) qkey: u32,
    pub(crate) access: AccessFlags,
}

/// The alternate path (`IBV_QP_ALT_PATH`): part of the responder path, but
/// kept out of line in [`Qp::alt`](super::qp::Qp::alt) (rarely set, 40 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AltPath {
    pub(crate) ah: AhAttr,
    pub(crate) pkey_index: u16,
    pub(crate) port_num: u8,
    pub(crate) timeout: u8,
}

/// What the responder side knows from RTR on (for UD only defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Path {
    pub(crate) ah: AhAttr,
    pub(crate) path_mtu: Mtu,
    pub(crate) dest_qpn: u32,
    /// Next expected PSN (24 bits).
    pub(crate) rq_psn: u32,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) path_mig_state: PathMigState,
}

/// What the requester side knows from RTS on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Requester {
    /// Next PSN to send (24 bits).
    pub(crate) sq_psn: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) rate_limit: u32,
    pub(crate) en_sqd_async_notify: bool,
}

/// The QP's phase: the public state plus only the data valid in it (R6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum QpPhase {
    /// RESET: nothing configured.
    #[default]
    Reset,
    /// INIT: bound to a port.
    Init(Bound),
    /// RTR: responder path set.
    ReadyToReceive(Bound, Path),
    /// RTS: requester set too.
    ReadyToSend(Bound, Path, Requester),
    /// SQD (`draining` while in-flight messages finish).
    SendQueueDrain(Bound, Path, Requester, bool),
    /// SQE (device-entered, UD/UC).
    SendQueueError(Bound, Path, Requester),
    /// ERR: what was configured before, kept for `ibv_query_qp`.
    Error(Option<Bound>, Option<Path>, Option<Requester>),
}

impl QpPhase {
    /// The public state (derived, never stored beside the phase).
    pub(crate) fn state(&self) -> QpState {
        match self {
            Self::Reset => QpState::Reset,
            Self::Init(..) => QpState::Init,
            Self::ReadyToReceive(..) => QpState::ReadyToReceive,
            Self::ReadyToSend(..) => QpState::ReadyToSend,
            Self::SendQueueDrain(..) => QpState::SendQueueDrain,
            Self::SendQueueError(..) => QpState::SendQueueError,
            Self::Error(..) => QpState::Error,
        }
    }

    /// The port binding, whatever the phase, by reference (the data
    /// path's per-packet reads; `parts` copies all three).
    #[inline]
    pub(crate) fn bound(&self) -> Option<&Bound> {
        match self {
            Self::Reset => None,
            Self::Init(b)
            | Self::ReadyToReceive(b, _)
            | Self::ReadyToSend(b, _, _)
            | Self::SendQueueDrain(b, _, _, _)
            | Self::SendQueueError(b, _, _) => Some(b),
            Self::Error(b, _, _) => b.as_ref(),
        }
    }

    /// The responder path, whatever the phase, by reference.
    #[inline]
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Self::Reset | Self::Init(_) => None,
            Self::ReadyToReceive(_, p)
            | Self::ReadyToSend(_, p, _)
            | Self::SendQueueDrain(_, p, _, _)
            | Self::SendQueueError(_, p, _) => Some(p),
            Self::Error(_, p, _) => p.as_ref(),
        }
    }

    /// The requester attributes, whatever the phase, by reference.
    #[inline]
    pub(crate) fn requester(&self) -> Option<&Requester> {
        match self {
            Self::Reset | Self::Init(_) | Self::ReadyToReceive(..) => None,
            Self::ReadyToSend(_, _, r)
            | Self::SendQueueDrain(_, _, r, _)
            | Self::SendQueueError(_, _, r) => Some(r),
            Self::Error(_, _, r) => r.as_ref(),
        }
    }

    /// The configured parts, whatever the phase, in place.
    #[inline]
    pub(crate) fn parts_mut(
        &mut self,
    ) -> (
        Option<&mut Bound>,
        Option<&mut Path>,
        Option<&mut Requester>,
    ) {
        match self {
            Self::Reset => (None, None, None),
            Self::Init(b) => (Some(b), None, None),
            Self::ReadyToReceive(b, p) => (Some(b), Some(p), None),
            Self::ReadyToSend(b, p, r)
            | Self::SendQueueDrain(b, p, r, _)
            | Self::SendQueueError(b, p, r) => (Some(b), Some(p), Some(r)),
            Self::Error(b, p, r) => (b.as_mut(), p.as_mut(), r.as_mut()),
        }
    }

    /// Turns the phase into `next`'s, in place: the parts it holds are
    /// kept, the ones `next` needs and lacks start at their defaults, ERR
    /// keeps exactly what was there, RESET nothing, and SQD starts not
    /// draining. A phase already in `next` (but SQD) is left as it is.
    /// States beyond ERR leave it unchanged (`check_modify` never returns
    /// one).
    #[inline(always)]
    pub(crate) fn reshape(&mut self, next: QpState) {
        if self.state() == next && next != QpState::SendQueueDrain {
            return;
        }
        // The transitions of a QP's ordinary life, built from the parts
        // they keep (the generic rebuild below moves every field through
        // options); each arm is what the generic one computes.
        let cur = &*self;
        *self = match (cur, next) {
            (_, QpState::Reset) => Self::Reset,
            (Self::Reset, QpState::Init) => Self::Init(Bound::default()),
            (Self::Init(b), QpState::ReadyToReceive) => Self::ReadyToReceive(*b, Path::default()),
            (Self::ReadyToReceive(b, p), QpState::ReadyToSend) => {
                Self::ReadyToSend(*b, *p, Requester::default())
            }
            (Self::Reset, QpState::Error) => Self::Error(None, None, None),
            (Self::Init(b), QpState::Error) => Self::Error(Some(*b), None, None),
            (Self::ReadyToReceive(b, p), QpState::Error) => Self::Error(Some(*b), Some(*p), None),
            (Self::ReadyToSend(b, p, r), QpState::Error) => {
                Self::Error(Some(*b), Some(*p), Some(*r))
            }
            _ => self.rebuilt(next),
        };
    }

    /// [`Self::reshape`]'s new phase, from the parts of any phase.
    #[inline(never)]
    fn rebuilt(&self, next: QpState) -> Self {
        let (b, p, r) = self.parts();
        match next {
            QpState::Reset => Self::Reset,
            QpState::Init => Self::Init(b.unwrap_or_default()),
            QpState::ReadyToReceive => {
                Self::ReadyToReceive(b.unwrap_or_default(), p.unwrap_or_default())
            }
            QpState::ReadyToSend => Self::ReadyToSend(
                b.unwrap_or_default(),
                p.unwrap_or_default(),
                r.unwrap_or_default(),
            ),
            QpState::SendQueueDrain => Self::SendQueueDrain(
                b.unwrap_or_default(),
                p.unwrap_or_default(),
                r.unwrap_or_default(),
                false,
            ),
            QpState::SendQueueError => Self::SendQueueError(
                b.unwrap_or_default(),
                p.unwrap_or_default(),
                r.unwrap_or_default(),
            ),
            QpState::Error => Self::Error(b, p, r),
            QpState::UnknownState | QpState::Unknown(_) => *self,
        }
    }

    /// The configured parts, whatever the phase.
    pub(crate) fn parts(&self) -> (Option<Bound>, Option<Path>, Option<Requester>) {
        match *self {
            Self::Reset => (None, None, None),
            Self::Init(b) => (Some(b), None, None),
            Self::ReadyToReceive(b, p) => (Some(b), Some(p), None),
            Self::ReadyToSend(b, p, r)
            | Self::SendQueueDrain(b, p, r, _)
            | Self::SendQueueError(b, p, r) => (Some(b), Some(p), Some(r)),
            Self::Error(b, p, r) => (b, p, r),
        }
    }
}

/// The mlx5dv attributes of a QP (all default for a plain verbs QP).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DvQp {
    /// DCT: its `dct_access_key`.
    pub(crate) dct_key: u64,
    /// DCT: reached RTR, so it exists in "firmware" and has its number.
    pub(crate) dct_created: bool,
    /// DCI: its stream configuration, if created with DCI streams.
    pub(crate) streams: Option<DciStreams>,
    /// DCI: the streams in error (bit `stream_id`).
    pub(crate) errored: u32,
    /// `MLX5DV_QP_CREATE_OOO_DP`.
    pub(crate) ooo: bool,
    /// DCI: connected to the target in its `tx.dest`.
    pub(crate) connected: bool,
}

/// What the DCI gate tells the transmit loop.
pub(crate) enum Gate {
    /// Go on with the request at `send_seq` (or the loop's own checks).
    Go,
    /// Wait: the request needs another target while requests are outstanding.
    Stop,
    /// The request was flushed (its stream is in error): look again.
    Again,
}

/// The data-path transport of a QP class (data-path §2.1 columns).
pub(crate) const fn transport_of(class: QpClass) -> Transport {
    match class {
        QpClass::Rc => Transport::Rc,
        QpClass::Uc => Transport::Uc,
        QpClass::Ud => Transport::Ud,
        QpClass::RawPacket => Transport::RawPacket,
        QpClass::XrcIni => Transport::XrcSend,
        QpClass::XrcTgt => Transport::XrcRecv,
        QpClass::Dci => Transport::Dci,
        QpClass::Dct => Transport::Dct,
    }
}

/// Most events one `ibv_poll_cq` call processes while waiting for a
/// completion (an endless RNR retry loop must not hang a poll).
pub(crate) const POLL_EVENT_BUDGET: u64 = 200_000;

/// Most events `RunUntilIdle` and `AdvanceNs` process in one call.
pub(crate) const RUN_EVENT_BUDGET: u64 = 50_000_000;

/// Atomic results a responder keeps to answer duplicate atomics without
/// executing them again (data-path §5.2 "answered from the saved result").
pub(crate) const ATOMIC_REPLAY: usize = 16;

/// A destination that resolves to nothing: the fabric drops packets to it
/// as unroutable.
pub(crate) const NOWHERE: Endpoint = Endpoint {
    qpn: 0,
    device: DeviceIndex(u16::MAX),
    port: 1,
};

/// The requester side of a QP.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tx {
    /// PSN of the next packet to transmit.
    pub(crate) next_psn: Psn,
    /// Sequence number of the next work request to transmit; `[sq.done,
    /// send_seq)` are transmitted and not yet completed.
    pub(crate) send_seq: u64,
    /// READ/atomic requests transmitted and not yet answered.
    pub(crate) rd_atomic: u32,
    pub(crate) retry: RetryCounters,
    /// Generation of the armed ACK timer (unique in the world).
    pub(crate) ack_gen: u32,
    /// When the ACK timer expires, while armed.
    pub(crate) ack_deadline: Option<u64>,
    /// This QP's ACK-timer event is in the fabric queue (at most one is:
    /// re-arming moves the deadline, and an event that fires early
    /// re-queues itself at the deadline).
    pub(crate) ack_queued: bool,
    pub(crate) rnr_gen: u32,
    /// Waiting out an RNR NAK (until the RNR timer of generation
    /// `rnr_gen` fires).
    pub(crate) rnr_wait: bool,
    /// A work request failed locally: nothing more is transmitted.
    pub(crate) blocked: bool,
    /// This QP's own endpoint.
    pub(crate) src: Endpoint,
    /// The connected peer (RC/UC), resolved at RTR.
    pub(crate) dest: Endpoint,
    /// Path MTU in bytes.
    pub(crate) mtu: u32,
    /// Adapter model: the QP's send engine is free (and the WQEs of the
    /// last doorbell fetched) from then on (ns).
    pub(crate) engine_free_ns: u64,
}

impl Default for Tx {
    fn default() -> Self {
        Self {
            next_psn: Psn::default(),
            send_seq: 0,
            rd_atomic: 0,
            retry: RetryCounters::default(),
            ack_gen: 0,
            ack_deadline: None,
            ack_queued: false,
            rnr_gen: 0,
            rnr_wait: false,
            blocked: false,
            src: NOWHERE,
            dest: NOWHERE,
            mtu: 256,
            engine_free_ns: 0,
        }
    }
}

/// A receive WQE a message has consumed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvRef {
    pub(crate) srq: Option<SrqHandle>,
    pub(crate) seq: u64,
    pub(crate) wr_id: u64,
}

/// The message a responder is in the middle of (RC/UC receive in order,
/// so there is at most one).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RxMsg {
    pub(crate) active: bool,
    /// UC: a packet of this message was lost; drop the rest.
    pub(crate) dropping: bool,
    pub(crate) recv: Option<RecvRef>,
    /// RDMA WRITE target: MR arena index and offset in it.
    pub(crate) write: Option<(u32, u64)>,
    pub(crate) byte_len: u32,
    /// A piece of the message could not be read from the sender's memory
    /// (its process died): the message completes nothing.
    pub(crate) faulted: bool,
}

/// The responder side of a QP.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rx {
    /// Expected PSN.
    pub(crate) epsn: Psn,
    /// A sequence-error NAK was sent for the current gap.
    pub(crate) nak_sent: bool,
    pub(crate) msg: RxMsg,
    /// The SGEs of a WQE taken from an SRQ (its slot may be reused before
    /// the message ends); empty without an SRQ.
    pub(crate) srq_sges: Box<[Sge]>,
    pub(crate) srq_num_sge: u32,
    /// `(psn + 1, original value)` of recent atomics; 0 = empty. Boxed and
    /// allocated at the first atomic: most QPs (and every DCT slot's
    /// share of `sim_dc_fanout`'s heap per DCT) never execute one.
    pub(crate) atomics: Option<Box<[(u32, u64); ATOMIC_REPLAY]>>,
    pub(crate) atomic_next: u8,
}

impl Rx {
    /// Heap bytes the responder state owns (SRQ SGE buffer, atomic replay
    /// table).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.srq_sges.len() * size_of::<Sge>()
            + self
                .atomics
                .as_ref()
                .map_or(0, |_| size_of::<[(u32, u64); ATOMIC_REPLAY]>())
    }
}

/// What the data-path rules see of an MR.
pub(crate) fn mr_view(m: &Mr) -> MrView {
    MrView {
        addr: m.addr,
        length: m.bytes.len() as u64,
        lkey: m.lkey,
        rkey: m.rkey,
        access: m.access,
        pd: m.pd.index,
        valid: !m.invalidated,
    }
}
