//! Simulator control: virtual time, fault rules and traces, reachable
//! through [`crate::Verbs::sim_control`] so that code generic over the trait
//! (the script runner) can drive them. Other backends return
//! `Unsupported`.

use crate::Verbs;

/// Direction selector for a fault rule.
pub enum FaultScope<'a, V: Verbs + ?Sized> {
    /// Every packet on the fabric.
    All,
    /// Packets sent by this QP.
    From(&'a V::Qp),
    /// Packets addressed to this QP.
    To(&'a V::Qp),
}

/// What a fault rule does to a packet it matches.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FaultAction {
    /// Drop the packet.
    Drop,
    /// Deliver it twice.
    Duplicate,
    /// Delay it by this many nanoseconds.
    DelayNs(u64),
    /// Hold it back so up to this many later packets overtake it.
    Reorder(u32),
}

/// When a rule fires.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FaultWhen {
    /// The next `n` matching packets.
    Next(u32),
    /// Each matching packet with this probability (parts per million), drawn
    /// from the seeded fault stream.
    RatePpm(u32),
}

/// A command to the simulator.
#[non_exhaustive]
pub enum SimCommand<'a, V: Verbs + ?Sized> {
    /// Advance virtual time by `ns`, processing due events.
    AdvanceNs(u64),
    /// Process events until none is left (bounded; error if the bound is hit).
    RunUntilIdle,
    /// Report the current virtual time.
    Now,
    /// Install a fault rule.
    Fault {
        /// Which packets.
        scope: FaultScope<'a, V>,
        /// What to do.
        action: FaultAction,
        /// When.
        when: FaultWhen,
    },
    /// Remove every fault rule.
    ClearFaults,
    /// Take the link of a device's port down (`up = false`) or up.
    Link {
        /// Device index.
        device: u32,
        /// Port number.
        port: u8,
        /// Up or down.
        up: bool,
    },
    /// A directive by name with `key=value` arguments, for extensions the
    /// enum does not list yet; handles are passed by the caller's names.
    Raw {
        /// Directive name.
        name: &'a str,
        /// Arguments.
        args: &'a [(&'a str, &'a str)],
    },
}

/// The simulator's answer to a [`SimCommand`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SimReply {
    /// Done.
    Ok,
    /// Virtual time in nanoseconds.
    TimeNs(u64),
    /// Free-form text (for `Raw`).
    Text(String),
}
