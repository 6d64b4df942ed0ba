//! What the fabric did, as plain data.
//!
//! Every packet decision is reported to a [`FabricTraceSink`] passed into
//! the call that made it: no callbacks are stored and nothing is logged. The
//! world either keeps [`FabricTrace`] records as they are (a
//! `Vec<FabricTrace>` is a sink) or converts them into its own trace events
//! by implementing the trait; [`NoTrace`] discards them at no cost.

use core::fmt;

use super::packet::{Packet, PortRef};
use super::time::{SimDuration, SimInstant};

/// Why a packet did not arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// An installed fault rule dropped it; the number is the rule's
    /// [`crate::fabric::RuleId`].
    Rule(u32),
    /// The background network model lost it (`loss_ppm`).
    Loss,
    /// The source or destination link was down (when sent, or when due).
    LinkDown,
    /// No port has the destination the packet names.
    Unroutable,
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule(id) => write!(f, "rule{id}"),
            Self::Loss => f.write_str("loss"),
            Self::LinkDown => f.write_str("link_down"),
            Self::Unroutable => f.write_str("unroutable"),
        }
    }
}

/// One fabric trace record, stamped with virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FabricTrace {
    /// A packet entered the fabric (before any fault decision).
    Sent {
        /// When.
        at: SimInstant,
        /// The packet.
        packet: Packet,
    },
    /// A packet was lost.
    Dropped {
        /// When the loss was decided.
        at: SimInstant,
        /// The packet.
        packet: Packet,
        /// Why.
        reason: DropReason,
    },
    /// A packet will arrive twice.
    Duplicated {
        /// When decided.
        at: SimInstant,
        /// The packet.
        packet: Packet,
    },
    /// A packet got extra latency.
    Delayed {
        /// When decided.
        at: SimInstant,
        /// The packet.
        packet: Packet,
        /// How much more than the link model.
        extra: SimDuration,
    },
    /// A packet is held back until `overtakers` later packets of its flow
    /// have passed it (or the hold limit expires).
    Held {
        /// When decided.
        at: SimInstant,
        /// The packet.
        packet: Packet,
        /// How many later packets must overtake it.
        overtakers: u32,
    },
    /// A held packet was let go.
    Released {
        /// When.
        at: SimInstant,
        /// The packet.
        packet: Packet,
    },
    /// A packet arrived at its destination port.
    Delivered {
        /// When.
        at: SimInstant,
        /// The packet.
        packet: Packet,
    },
    /// A port's link went up or down.
    Link {
        /// When.
        at: SimInstant,
        /// Which port.
        port: PortRef,
        /// The new state.
        up: bool,
    },
}

impl FabricTrace {
    /// The virtual time of the record.
    pub const fn at(&self) -> SimInstant {
        match self {
            Self::Sent { at, .. }
            | Self::Dropped { at, .. }
            | Self::Duplicated { at, .. }
            | Self::Delayed { at, .. }
            | Self::Held { at, .. }
            | Self::Released { at, .. }
            | Self::Delivered { at, .. }
            | Self::Link { at, .. } => *at,
        }
    }
}

impl FabricTrace {
    /// The record without its time stamp (`dropped(loss) <packet>`), for a
    /// trace that prints the time itself.
    pub fn body(&self) -> FabricTraceBody<'_> {
        FabricTraceBody(self)
    }
}

/// One line: `<time> <what> <packet>`, e.g.
/// `1536ns dropped(rule0) dev0:1/qp0x11 -> dev1:1/qp0x12 SEND_ONLY psn=0 …`.
impl fmt::Display for FabricTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.at(), self.body())
    }
}

/// [`FabricTrace::body`]: a record printed without its time.
#[derive(Clone, Copy, Debug)]
pub struct FabricTraceBody<'a>(&'a FabricTrace);

impl fmt::Display for FabricTraceBody<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            FabricTrace::Sent { packet, .. } => write!(f, "sent {packet}"),
            FabricTrace::Dropped { packet, reason, .. } => write!(f, "dropped({reason}) {packet}"),
            FabricTrace::Duplicated { packet, .. } => write!(f, "duplicated {packet}"),
            FabricTrace::Delayed { packet, extra, .. } => write!(f, "delayed(+{extra}) {packet}"),
            FabricTrace::Held {
                packet, overtakers, ..
            } => write!(f, "held(overtakers={overtakers}) {packet}"),
            FabricTrace::Released { packet, .. } => write!(f, "released {packet}"),
            FabricTrace::Delivered { packet, .. } => write!(f, "delivered {packet}"),
            FabricTrace::Link { port, up, .. } => write!(
                f,
                "link dev{}:{} {}",
                port.device.0,
                port.port,
                if *up { "up" } else { "down" }
            ),
        }
    }
}

/// Receives the fabric's trace records as they happen.
pub trait FabricTraceSink {
    /// Takes one record.
    fn record(&mut self, record: FabricTrace);
}

/// Keeps every record in order.
impl FabricTraceSink for Vec<FabricTrace> {
    fn record(&mut self, record: FabricTrace) {
        self.push(record);
    }
}

/// A sink that discards everything (for runs that keep no trace).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTrace;

impl FabricTraceSink for NoTrace {
    #[inline]
    fn record(&mut self, _record: FabricTrace) {}
}

/// Renders records one per line, for snapshots and determinism checks.
pub fn trace_text(records: &[FabricTrace]) -> String {
    use fmt::Write;
    let mut out = String::new();
    for r in records {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{r}");
    }
    out
}
