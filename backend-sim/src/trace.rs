//! The trace: what happened, with virtual time, as data (style rule R20).
//!
//! Every state change, completion and async event is a [`TraceRecord`]; the
//! same seed and the same verb calls give the same trace. [`Trace::render`]
//! prints one stable line per record for snapshot tests.

use core::fmt;
use verbs_api::{AsyncEventType, QpState, QpType, WcStatus};

use crate::datapath::protection::AccessCause;
use crate::fabric::FabricTrace;

/// ` cause=…` after a completion that has one, nothing otherwise.
struct CauseSuffix(Option<AccessCause>);

impl fmt::Display for CauseSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(c) => write!(f, " cause=\"{c}\""),
            None => Ok(()),
        }
    }
}

/// One thing that happened in the world.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A QP was created (in RESET).
    QpCreated {
        /// Device index.
        device: u32,
        /// QP number.
        qpn: u32,
        /// QP type.
        qp_type: QpType,
    },
    /// A QP changed state (by `ibv_modify_qp` or by the device).
    QpState {
        /// Device index.
        device: u32,
        /// QP number.
        qpn: u32,
        /// Previous state.
        from: QpState,
        /// New state.
        to: QpState,
    },
    /// A work request was posted (`ibv_post_send`, `ibv_post_recv`).
    Posted {
        /// Device index.
        device: u32,
        /// The QP it was posted on.
        qpn: u32,
        /// Its `wr_id`.
        wr_id: u64,
        /// A receive (else a send-queue request).
        recv: bool,
    },
    /// A QP was destroyed.
    QpDestroyed {
        /// Device index.
        device: u32,
        /// QP number.
        qpn: u32,
    },
    /// A work completion was written to a CQ.
    Completion {
        /// Device index.
        device: u32,
        /// QP number of the completing work request.
        qpn: u32,
        /// `wr_id`.
        wr_id: u64,
        /// Status.
        status: WcStatus,
        /// `true` for a receive-queue (or SRQ) completion.
        recv: bool,
        /// For a refused remote access: which check refused it.
        cause: Option<AccessCause>,
    },
    /// A CQ overran: a completion was lost and the CQ is in error.
    CqOverrun {
        /// Device index.
        device: u32,
        /// CQ arena index.
        cq: u32,
    },
    /// An asynchronous event was raised.
    AsyncEvent {
        /// Device index.
        device: u32,
        /// Event type.
        event: AsyncEventType,
        /// QP number, CQ/SRQ index or port, depending on the event.
        element: u32,
    },
    /// A packet's fate on the fabric (sent, dropped, duplicated, delayed,
    /// held, released, delivered) or a link change.
    Packet(FabricTrace),
    /// Payload bytes placed in memory at the receiving end (a responder's
    /// receive buffer or WRITE target, a requester's READ/atomic buffer).
    Placement {
        /// Device index.
        device: u32,
        /// The QP whose message the bytes belong to.
        qpn: u32,
        /// Offset in the message.
        offset: u32,
        /// Bytes placed.
        len: u32,
    },
    /// A receiver discarded an arriving request without a NAK (UD/UC
    /// drops, packets for a QP that cannot take them).
    Discarded {
        /// Device index.
        device: u32,
        /// The QP number the packet was addressed to.
        qpn: u32,
        /// Its PSN.
        psn: u32,
        /// Why, e.g. "wrong Q_Key", "no receive WQE", "QP not ready".
        reason: &'static str,
    },
    /// A requester rewinds and retransmits (go-back-N) from `psn`.
    Retransmit {
        /// Device index.
        device: u32,
        /// The requester QP.
        qpn: u32,
        /// The PSN it goes back to.
        psn: u32,
        /// Why: "ack timeout", "RNR NAK", "PSN sequence error NAK".
        cause: &'static str,
    },
    /// A requester with `rnr_retry = 7` got seven RNR NAKs in a row and is
    /// parked until a receive is posted or a QP changes (it would retry
    /// for ever; `World::rnr_stalls` says what it waits for).
    RnrStalled {
        /// Device index.
        device: u32,
        /// The requester QP.
        qpn: u32,
        /// The responder's device.
        peer_device: u32,
        /// The responder QP that has no receive.
        peer_qpn: u32,
    },
    /// The connection manager queued an event on an id's channel.
    CmEvent {
        /// Device the id is bound to (`u32::MAX`: none yet).
        device: u32,
        /// The id's arena index.
        id: u32,
        /// The event.
        event: verbs_api::CmEventType,
        /// Its status.
        status: i32,
    },
    /// `mlx5dv_reserved_qpn_alloc` reserved a QP number.
    QpnReserved {
        /// Device index.
        device: u32,
        /// The number.
        qpn: u32,
    },
    /// A reserved QP number was released (`mlx5dv_reserved_qpn_dealloc`
    /// or the close of its context).
    QpnReleased {
        /// Device index.
        device: u32,
        /// The number.
        qpn: u32,
    },
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::QpCreated {
                device,
                qpn,
                qp_type,
            } => {
                write!(f, "dev{device} qp {qpn:#08x} created {qp_type}")
            }
            Self::QpState {
                device,
                qpn,
                from,
                to,
            } => {
                write!(f, "dev{device} qp {qpn:#08x} {from} -> {to}")
            }
            Self::QpDestroyed { device, qpn } => write!(f, "dev{device} qp {qpn:#08x} destroyed"),
            Self::Posted {
                device,
                qpn,
                wr_id,
                recv,
            } => write!(
                f,
                "dev{device} qp {qpn:#08x} posted {} wr_id={wr_id}",
                if recv { "receive" } else { "request" }
            ),
            Self::Completion {
                device,
                qpn,
                wr_id,
                status,
                recv,
                cause,
            } => write!(
                f,
                "dev{device} qp {qpn:#08x} {} completion wr_id={wr_id} status={status}{}",
                if recv { "recv" } else { "send" },
                CauseSuffix(cause)
            ),
            Self::CqOverrun { device, cq } => write!(f, "dev{device} cq {cq} overrun"),
            Self::AsyncEvent {
                device,
                event,
                element,
            } => {
                write!(f, "dev{device} async {event} element={element:#x}")
            }
            Self::Packet(ref r) => write!(f, "fabric {}", r.body()),
            Self::Placement {
                device,
                qpn,
                offset,
                len,
            } => write!(
                f,
                "dev{device} qp {qpn:#08x} placed {len} bytes at offset {offset}"
            ),
            Self::Discarded {
                device,
                qpn,
                psn,
                reason,
            } => write!(
                f,
                "dev{device} qp {qpn:#08x} discarded psn={psn} ({reason})"
            ),
            Self::Retransmit {
                device,
                qpn,
                psn,
                cause,
            } => write!(
                f,
                "dev{device} qp {qpn:#08x} retransmit from psn={psn} ({cause})"
            ),
            Self::RnrStalled {
                device,
                qpn,
                peer_device,
                peer_qpn,
            } => write!(
                f,
                "dev{device} qp {qpn:#08x} RNR stall: waits for a receive on dev{peer_device} qp {peer_qpn:#08x} (rnr_retry=7)"
            ),
            Self::CmEvent {
                device,
                id,
                event,
                status,
            } => {
                if device == u32::MAX {
                    write!(f, "cm id#{id} {event} status={status}")
                } else {
                    write!(f, "dev{device} cm id#{id} {event} status={status}")
                }
            }
            Self::QpnReserved { device, qpn } => write!(f, "dev{device} qpn {qpn:#08x} reserved"),
            Self::QpnReleased { device, qpn } => write!(f, "dev{device} qpn {qpn:#08x} released"),
        }
    }
}

/// One trace entry: an event at a virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Virtual time in nanoseconds.
    pub time_ns: u64,
    /// What happened.
    pub event: TraceEvent,
}

/// The world's trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    records: Vec<TraceRecord>,
    dropped: u64,
    enabled: bool,
    events_max: usize,
}

impl Trace {
    pub(crate) fn new(enabled: bool, events_max: usize) -> Self {
        Self {
            records: Vec::new(),
            dropped: 0,
            enabled,
            events_max,
        }
    }

    /// Appends an event (counted only, once the trace is full or disabled).
    #[inline]
    pub fn push(&mut self, time_ns: u64, event: TraceEvent) {
        if self.enabled && self.records.len() < self.events_max {
            self.records.push(TraceRecord { time_ns, event });
        } else {
            self.dropped += 1;
        }
    }

    /// Every recorded event, oldest first.
    pub fn records(&self) -> &[TraceRecord] {
        &self.records
    }

    /// How many events were recorded.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// `true` when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// How many events were not kept (trace disabled or full).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The stable text form: one `[time_ns] event` line per record.
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.records {
            writeln!(f, "[{:>12}] {}", r.time_ns, r.event)?;
        }
        if self.dropped > 0 {
            writeln!(f, "({} events not recorded)", self.dropped)?;
        }
        Ok(())
    }
}
