//! The simulated fabric: HCA ports, links, a virtual clock's event queue,
//! packets and fault injection — pure data and arithmetic, no verbs objects.
//!
//! This module is the data path's transport. The data path (requester and
//! responder logic) turns work requests into [`Packet`]s with [`segment()`]
//! and [`Psn`], hands each to [`Fabric::send`] with the current virtual
//! time, and later receives it back from [`Fabric::pop_due`] as
//! [`FabricEvent::Delivered`] at the instant the link model (and any fault)
//! says it arrives. Retransmit, RNR and CQ-moderation timers go through the
//! same queue ([`Fabric::schedule_timer`], [`FabricEvent::Timer`]), so one
//! ordered stream of events drives the whole simulation.
//!
//! The fabric is sans-IO: time is an argument of every input, nothing reads
//! a clock, nothing is threaded, every collection iterates in a defined
//! order, and every random decision comes from a named stream of one root
//! seed (a [`SimRng`] per consumer, see [`crate::rng`]). The same seed and the
//! same inputs give the same [`FabricTrace`] records, byte for byte.
//!
//! # Model
//!
//! * Devices have ports; a port has a link layer (InfiniBand with a LID, or
//!   Ethernet/RoCE v2 with GIDs), a data rate, a propagation delay and a
//!   fixed per-packet header overhead ([`PortConfig`], with presets for the
//!   device profiles).
//! * Every port reaches every other port in one hop. A packet leaves its
//!   source port when the port has finished serialising the packets before
//!   it, takes `wire bytes × 8 / rate` to serialise, and arrives
//!   `propagation_ns` after its last bit left:
//!   `arrival = max(now, port free) + serialisation + propagation`.
//! * Faults: installed [`FabricRule`]s (first non-[`Verdict::Pass`] wins),
//!   then the background [`NetworkFaults`]; links can be taken down and up.
//! * Destinations are resolved from a LID or GID with [`Fabric::resolve`]
//!   once, when the data path learns an address, not per packet.
//!
//! # Divergence from hardware
//!
//! * **No ICRC/VCRC and no corruption**: a packet arrives intact or not at
//!   all. There is no `Corrupt` verdict; a corrupted packet would be
//!   dropped by the receiver's CRC check, which is what `Drop` models.
//! * **Idealised credits and buffers**: no link-level flow control, no
//!   receive-buffer limit, no PFC pause frames, no ECN marking, no
//!   congestion control (DCQCN), no credit starvation.
//! * **No switches**: one hop from any port to any port; no switch
//!   buffering or queueing, no contention at the destination port (only the
//!   egress port serialises), no multipath, no adaptive routing; the single
//!   path is FIFO unless a fault reorders it.
//! * **No subnet manager or routing data**: LIDs and GIDs are a table filled
//!   by the world; no SL/VL arbitration, no LMC path bits, no P_Key or
//!   Q_Key checks here (the data path does those), no GRH hop limits.
//! * **RoCE without Ethernet/IP**: no ARP/ND, no VLAN/PCP/DSCP, no UDP source
//!   port entropy; the header overhead is a constant.
//! * **Packets carry resolved endpoints and a payload offset**, and point at
//!   their payload instead of containing it; real middle/last packets carry
//!   no address. No 4-byte padding beyond rounding the payload up when
//!   sizing the packet.
//! * **Loopback** between QPs of one port goes through the same egress
//!   serialisation and propagation as any other packet (HCAs loop back
//!   internally, without the wire).
//! * **Link state is instantaneous**: down and up take effect at once, with
//!   no training or INIT/ARMED states; packets already in flight are lost
//!   only if a link of theirs is down when they are due, so a flap shorter
//!   than the flight time goes unnoticed. Packets dropped at a down port
//!   take no serialisation time; packets lost to faults do.
//! * **Reordering and jitter are fault modes**: a single IB path never
//!   reorders; here `Reorder` and unequal latency bounds do. Duplicates
//!   arrive at the same instant as the original, right after it.
//! * **Time granularity**: 1 ns for events; serialisation is accumulated in
//!   picoseconds and rounded up to the nanosecond at arrival. Virtual time
//!   beyond about 213 days saturates the picosecond arithmetic.
//! * **Software NICs**: a rxe port is modelled by its 10 GbE link only; the
//!   kernel processing that limits rxe well below line rate is not.

mod config;
mod engine;
pub mod packet;
pub mod psn;
pub mod queue;
pub mod rules;
pub mod segment;
pub mod time;
pub mod trace;

#[cfg(test)]
mod tests;

pub use crate::rng::SimRng;
pub use config::{FabricConfig, PortConfig, PortCounters};
pub use engine::{Fabric, FabricEvent, Peeked, Route, RuleId, SendOutcome};
pub use packet::{
    AckSyndrome, Address, DeviceIndex, Endpoint, Opcode, Packet, PacketFlags, PortRef,
};
pub use psn::Psn;
pub use queue::{EventQueue, QueueFull, TimerEvent, TimerKind};
pub use rules::{FabricRule, FaultRule, NetworkFaults, RuleScope, Verdict};
pub use segment::{packet_count, segment, Segment, SegmentPosition, Segments};
pub use time::{SimDuration, SimInstant};
pub use trace::{trace_text, DropReason, FabricTrace, FabricTraceBody, FabricTraceSink, NoTrace};

use core::fmt;

/// Why a fabric call failed. These are caller mistakes or exhausted limits,
/// never packet fates (a lost packet is a [`SendOutcome`], not an error).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FabricError {
    /// The port named (as a packet's source, or in a call) does not exist.
    UnknownPort(PortRef),
    /// Two ports were given the same LID.
    DuplicateLid(u16),
    /// Two ports were given the same GID.
    DuplicateGid(verbs_api::Gid),
    /// More devices, or more ports on one device, than the fabric indexes
    /// (65 535 devices, 255 ports).
    TooMany(&'static str),
    /// A port configuration value is out of range (the field is named).
    InvalidPortConfig(&'static str),
    /// An input was stamped earlier than one already seen.
    TimeWentBackwards {
        /// The time given.
        now: SimInstant,
        /// The latest time seen before.
        latest: SimInstant,
    },
    /// The event queue is at its limit (`FabricConfig::events_max`).
    QueueFull(QueueFull),
    /// A bounded run processed its maximum number of events and the queue
    /// was still not empty.
    EventBoundHit {
        /// The bound.
        events_max: u64,
        /// Virtual time when it was hit.
        at: SimInstant,
    },
    /// A fault action or trigger this fabric does not implement.
    UnsupportedFault(&'static str),
}

impl fmt::Display for FabricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPort(p) => write!(f, "no port {} on device {}", p.port, p.device.0),
            Self::DuplicateLid(lid) => write!(f, "LID {lid:#x} is already assigned"),
            Self::DuplicateGid(gid) => write!(f, "GID {gid} is already assigned"),
            Self::TooMany(what) => write!(f, "too many {what}"),
            Self::InvalidPortConfig(field) => write!(f, "invalid port configuration: {field}"),
            Self::TimeWentBackwards { now, latest } => {
                write!(f, "input at {now} is earlier than {latest}")
            }
            Self::QueueFull(e) => write!(f, "{e}"),
            Self::EventBoundHit { events_max, at } => {
                write!(f, "still busy after {events_max} events (at {at})")
            }
            Self::UnsupportedFault(what) => write!(f, "unsupported {what}"),
        }
    }
}

impl std::error::Error for FabricError {}

impl From<QueueFull> for FabricError {
    fn from(e: QueueFull) -> Self {
        Self::QueueFull(e)
    }
}
