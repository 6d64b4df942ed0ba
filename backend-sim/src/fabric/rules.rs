//! Fault rules: composable per-packet decisions with seeded randomness.
//!
//! A rule looks at each packet leaving a port and returns a [`Verdict`].
//! Rules are kept in installation order and the first verdict other than
//! [`Verdict::Pass`] decides; if every rule passes, the fabric's background
//! [`NetworkFaults`] knobs decide. The rules draw from the `fault_rules`
//! stream, in installation order; the background knobs draw from the
//! `fabric.*` streams, so adding or removing a rule never changes the
//! background network's decisions.

use verbs_api::{FaultAction, FaultWhen};

use super::packet::{DeviceIndex, Packet};
use super::time::SimDuration;
use super::FabricError;
use crate::rng::SimRng;

/// What happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// This rule has no opinion; ask the next one.
    Pass,
    /// Deliver it, this much later than the link model says.
    Deliver(SimDuration),
    /// Lose it on the wire (it still occupied the egress port).
    Drop,
    /// Deliver it twice.
    Duplicate,
    /// Hold it back until between 1 and this many later packets of the same
    /// flow (same source and destination QP) have overtaken it. `0` means no
    /// reordering.
    Reorder(u32),
}

/// A per-packet fault decision, installed with
/// [`crate::fabric::Fabric::install_rule`].
///
/// `rng` is the `fault_rules` stream, shared by the installed rules in
/// order; draw from it for every random choice and from nothing else, so
/// runs replay from the seed. A rule that draws only for packets in its
/// scope leaves the other rules' draws untouched by traffic outside it.
pub trait FabricRule {
    /// Decides what happens to `packet`. Called once per packet sent, in
    /// send order, until some earlier rule returns a verdict other than
    /// [`Verdict::Pass`].
    fn on_packet(&mut self, packet: &Packet, rng: &mut SimRng) -> Verdict;

    /// True once the rule can never again return anything but `Pass` (a
    /// `Next(n)` rule that has fired `n` times); the fabric then removes it.
    /// Asked only right after the rule returned a verdict other than `Pass`
    /// (a rule can only use itself up by firing).
    fn is_spent(&self) -> bool {
        false
    }

    /// For a rule that fires on a fraction of the packets in its scope:
    /// that fraction in parts per million for `packet` (`None` out of
    /// scope, or for a rule that decides in [`Self::on_packet`]). The
    /// fabric then makes one draw per packet, shared by every such rule
    /// in order (rule *k* fires when the draw falls in its own slice of
    /// 0..10^6, after the slices of the rules before it), and calls
    /// [`Self::fire`] instead of [`Self::on_packet`]: one random number
    /// per packet however many rules are installed.
    fn rate_ppm(&self, packet: &Packet) -> Option<u32> {
        let _ = packet;
        None
    }

    /// The verdict of a rate rule the shared draw selected.
    fn fire(&mut self) -> Verdict {
        Verdict::Pass
    }

    /// For a rule that is a fixed rate over a fixed scope for its whole
    /// life: that scope and rate. The promise is that
    /// [`Self::rate_ppm`] returns `Some(ppm)` for every packet in `scope`,
    /// and that for a packet out of it `rate_ppm` returns `None` and
    /// [`Self::on_packet`] returns [`Verdict::Pass`] without drawing or
    /// changing anything. The fabric, told this once when the rule is
    /// installed, then tests the scope itself and calls the rule only when
    /// the shared draw selects it: the same verdicts and draws, without
    /// two dynamic calls per rule per packet. `None` (the default) keeps
    /// the per-packet calls.
    fn fixed_rate(&self) -> Option<(RuleScope, u32)> {
        None
    }
}

/// Which packets a rule looks at. The fabric sees QPs as `(device, qpn)`;
/// the world translates QP handles into this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleScope {
    /// Every packet.
    All,
    /// Packets sent by this QP.
    From {
        /// The sender's device.
        device: DeviceIndex,
        /// The sender's QP number.
        qpn: u32,
    },
    /// Packets addressed to this QP.
    To {
        /// The receiver's device.
        device: DeviceIndex,
        /// The receiver's QP number.
        qpn: u32,
    },
}

impl RuleScope {
    /// True when `packet` is in scope.
    pub fn matches(&self, packet: &Packet) -> bool {
        match *self {
            Self::All => true,
            Self::From { device, qpn } => {
                packet.source.device == device && packet.source.qpn == qpn
            }
            Self::To { device, qpn } => {
                packet.destination.device == device && packet.destination.qpn == qpn
            }
        }
    }
}

/// What a [`FaultRule`] does, the fabric's copy of
/// [`verbs_api::FaultAction`] (which is `non_exhaustive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RuleAction {
    Drop,
    Duplicate,
    Delay(SimDuration),
    Reorder(u32),
}

/// The built-in rule behind `sim drop|duplicate|delay|reorder ...` and
/// [`verbs_api::SimCommand::Fault`]: a scope, an action, and when it fires
/// (the next `n` matching packets, or each with a probability).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    scope: RuleScope,
    action: RuleAction,
    when: FaultWhen,
    /// Firings left for `FaultWhen::Next`.
    remaining: u32,
}

impl FaultRule {
    /// A rule that applies `action` to packets in `scope` `when` told.
    ///
    /// # Errors
    ///
    /// [`FabricError::UnsupportedFault`] for an action or trigger this
    /// version of the fabric does not know (both enums are
    /// `non_exhaustive`).
    pub fn new(
        scope: RuleScope,
        action: FaultAction,
        when: FaultWhen,
    ) -> Result<Self, FabricError> {
        let action = match action {
            FaultAction::Drop => RuleAction::Drop,
            FaultAction::Duplicate => RuleAction::Duplicate,
            FaultAction::DelayNs(ns) => RuleAction::Delay(SimDuration::from_nanos(ns)),
            FaultAction::Reorder(window) => RuleAction::Reorder(window),
            _ => return Err(FabricError::UnsupportedFault("fault action")),
        };
        let remaining = match when {
            FaultWhen::Next(n) => n,
            FaultWhen::RatePpm(_) => 0,
            _ => return Err(FabricError::UnsupportedFault("fault trigger")),
        };
        Ok(Self {
            scope,
            action,
            when,
            remaining,
        })
    }

    fn verdict(&self) -> Verdict {
        match self.action {
            RuleAction::Drop => Verdict::Drop,
            RuleAction::Duplicate => Verdict::Duplicate,
            RuleAction::Delay(d) => Verdict::Deliver(d),
            RuleAction::Reorder(w) => Verdict::Reorder(w),
        }
    }
}

impl FabricRule for FaultRule {
    fn rate_ppm(&self, packet: &Packet) -> Option<u32> {
        match self.when {
            FaultWhen::RatePpm(ppm) if self.scope.matches(packet) => Some(ppm),
            _ => None,
        }
    }

    fn fire(&mut self) -> Verdict {
        self.verdict()
    }

    /// A `RatePpm` rule: its scope and rate never change, and out of
    /// scope `on_packet` passes without drawing.
    fn fixed_rate(&self) -> Option<(RuleScope, u32)> {
        match self.when {
            FaultWhen::RatePpm(ppm) => Some((self.scope, ppm)),
            _ => None,
        }
    }

    fn on_packet(&mut self, packet: &Packet, rng: &mut SimRng) -> Verdict {
        if !self.scope.matches(packet) {
            return Verdict::Pass;
        }
        match self.when {
            FaultWhen::Next(_) => {
                if self.remaining == 0 {
                    return Verdict::Pass;
                }
                self.remaining -= 1;
                self.verdict()
            }
            FaultWhen::RatePpm(ppm) => {
                if chance_ppm(rng, ppm) {
                    self.verdict()
                } else {
                    Verdict::Pass
                }
            }
            // `new` admits no other trigger.
            _ => Verdict::Pass,
        }
    }

    fn is_spent(&self) -> bool {
        matches!(self.when, FaultWhen::Next(_)) && self.remaining == 0
    }
}

/// Background imperfections of the whole network, applied to every packet
/// no installed rule claimed. All knobs default to zero (a perfect network),
/// and zero knobs draw nothing.
///
/// Checked in this order, the first that fires deciding: loss, duplication,
/// reordering, extra latency. Loss and duplication share one draw from
/// `fabric.loss` (the packet's fate: below `loss_ppm` it is lost, in the
/// next `duplicate_ppm` it is duplicated), so turning duplication on or off
/// does not change which packets are lost. Reordering draws from
/// `fabric.reorder` (whether, then how far), latency from `fabric.latency`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetworkFaults {
    /// Probability that a packet is lost, parts per million.
    pub loss_ppm: u32,
    /// Probability that a packet is delivered twice, parts per million.
    pub duplicate_ppm: u32,
    /// Probability that a packet is held back and overtaken, parts per
    /// million.
    pub reorder_ppm: u32,
    /// How many later packets of its flow may overtake a held packet
    /// (the distance is drawn from 1 to this).
    pub reorder_window_packets: u32,
    /// Least extra one-way latency added to every packet, in nanoseconds.
    pub latency_ns_min: u64,
    /// Most extra one-way latency; drawn uniformly between min and max.
    /// Unequal bounds let later packets overtake earlier ones.
    pub latency_ns_max: u64,
}

/// The three background streams, owned by the fabric.
#[derive(Clone, Debug)]
pub(super) struct NetworkRngs {
    pub(super) loss: SimRng,
    pub(super) reorder: SimRng,
    pub(super) latency: SimRng,
}

impl NetworkFaults {
    /// Every knob zero: a perfect network (the default).
    pub const PERFECT: Self = Self {
        loss_ppm: 0,
        duplicate_ppm: 0,
        reorder_ppm: 0,
        reorder_window_packets: 0,
        latency_ns_min: 0,
        latency_ns_max: 0,
    };

    /// True when every knob is zero.
    pub fn is_perfect(&self) -> bool {
        *self == Self::PERFECT
    }

    /// The background verdict for one packet.
    pub(super) fn decide(&self, rngs: &mut NetworkRngs) -> Verdict {
        if self.loss_ppm > 0 || self.duplicate_ppm > 0 {
            let fate = draw_ppm(&mut rngs.loss);
            if fate < self.loss_ppm {
                return Verdict::Drop;
            }
            if u64::from(fate) < u64::from(self.loss_ppm) + u64::from(self.duplicate_ppm) {
                return Verdict::Duplicate;
            }
        }
        if self.reorder_ppm > 0
            && self.reorder_window_packets > 0
            && chance_ppm(&mut rngs.reorder, self.reorder_ppm)
        {
            return Verdict::Reorder(self.reorder_window_packets);
        }
        if self.latency_ns_max > 0 {
            let low = self.latency_ns_min.min(self.latency_ns_max);
            let extra = if low == self.latency_ns_max {
                low
            } else {
                rngs.latency.range_inclusive(low, self.latency_ns_max)
            };
            return Verdict::Deliver(SimDuration::from_nanos(extra));
        }
        Verdict::Pass
    }
}

/// A uniform value in `0..1_000_000` from one 64-bit draw (two on a rare
/// rejection): multiply-and-shift, with no division on the common path,
/// because fault rules draw once per packet.
pub(super) fn draw_ppm(rng: &mut SimRng) -> u32 {
    const RANGE: u64 = 1_000_000;
    // 2^64 mod RANGE: low halves below it would bias the result; redraw.
    const THRESHOLD: u64 = RANGE.wrapping_neg() % RANGE;
    loop {
        let wide = u128::from(rng.next_u64()) * u128::from(RANGE);
        if (wide as u64) >= THRESHOLD {
            return (wide >> 64) as u32;
        }
    }
}

/// True with probability `ppm` parts per million; draws once whatever
/// `ppm` is, so a rule's draws do not depend on its rate.
pub(super) fn chance_ppm(rng: &mut SimRng, ppm: u32) -> bool {
    draw_ppm(rng) < ppm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn draw_ppm_is_uniform_over_its_range() {
        // Goal: the per-packet probability draw covers 0..1e6 evenly, and
        // the extremes of `chance_ppm` are exact.
        // Method: bucket 100 000 draws into ten deciles (expect 10 000 each,
        // accept ±600); check 0 ppm never and 1e6 ppm always fires.
        let mut rng = SimRng::new(77, Stream::FaultRules);
        let mut deciles = [0u32; 10];
        for _ in 0..100_000 {
            let v = draw_ppm(&mut rng);
            assert!(v < 1_000_000);
            deciles[(v / 100_000) as usize] += 1;
        }
        assert!(
            deciles.iter().all(|&c| (9_400..=10_600).contains(&c)),
            "{deciles:?}"
        );
        for _ in 0..1_000 {
            assert!(!chance_ppm(&mut rng, 0));
            assert!(chance_ppm(&mut rng, 1_000_000));
        }
    }
}
