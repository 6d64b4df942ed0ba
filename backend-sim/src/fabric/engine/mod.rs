//! The fabric itself: ports, the link model, the event queue, fault rules
//! and held (reordered) packets.

use std::collections::{BTreeMap, VecDeque};

use verbs_api::{Gid, LinkLayer};

use super::config::{FabricConfig, PortConfig, PortCounters};
use super::packet::{Address, DeviceIndex, Packet, PortRef};
use super::queue::{EventQueue, QueueFull, TimerEvent};
use super::rules::{draw_ppm, FabricRule, NetworkFaults, NetworkRngs, RuleScope, Verdict};
use super::time::{SimDuration, SimInstant};
use super::trace::{DropReason, FabricTrace, FabricTraceSink};
use super::FabricError;
use crate::rng::{SimRng, Stream};

mod internals;
mod route;

pub use route::{Peeked, Route};

/// What the fabric hands back when an event is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricEvent {
    /// A packet arrived at its destination port.
    Delivered(Packet),
    /// A timer scheduled with [`Fabric::schedule_timer`] expired.
    Timer(TimerEvent),
}

/// What became of a packet given to [`Fabric::send`]. The data path of a
/// real HCA cannot know this; it is for tests and traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// It will arrive at this instant.
    Scheduled {
        /// Arrival time.
        arrive_at: SimInstant,
    },
    /// It will arrive twice, both at this instant.
    Duplicated {
        /// Arrival time of both copies.
        arrive_at: SimInstant,
    },
    /// It is held back until this many later packets of its flow pass it.
    Held {
        /// Packets that must overtake it.
        overtakers: u32,
    },
    /// It is lost.
    Dropped(DropReason),
}

/// Names an installed rule (its installation number, never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleId(pub u32);

/// Queue entries: what the caller sees plus the fabric's own wake-ups.
#[derive(Clone, Copy, Debug)]
enum Queued {
    /// The packet in `parked` slot `0` is due (a delivery outside the
    /// ports' arrival FIFOs: delayed, duplicated or overtaken). The packet
    /// waits in the slot so heap entries stay small (32 bytes with the key).
    Deliver(u32),
    Timer(TimerEvent),
    /// The hold limit of held slot `slot` expired, if it still holds the
    /// packet of `generation`.
    Release {
        slot: u32,
        generation: u32,
    },
    /// The first packet in port `0`'s arrival FIFO is due (the entry's key
    /// is that packet's key).
    PortHead(u32),
}

/// A packet in a port's arrival FIFO, with its queue key.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at: u64,
    seq: u64,
    packet: Packet,
    /// The index of the destination port in `ports` (the source port is
    /// the FIFO's own), so the arrival need not look either up again.
    dst: u32,
}

#[derive(Clone, Debug)]
struct Port {
    config: PortConfig,
    /// Serialisation time per byte in picoseconds, as a 48.16 fixed-point
    /// number (exact for every rate that divides 8 Tb/s evenly).
    ps_per_byte_q16: u64,
    /// The far NIC's store-and-forward time per payload byte, ps in 48.16
    /// fixed point (0 = none; `PortConfig::rx_store_mbps`).
    rx_ps_per_byte_q16: u64,
    /// The latest arrival handed out from this port, in picoseconds: the
    /// receive pipeline keeps a link's packets in order.
    last_arrive_ps: u64,
    up: bool,
    /// When the port finishes serialising what it has been given, in
    /// picoseconds (finer than events, so rounding does not accumulate).
    busy_until_ps: u64,
    /// Packets sent from this port, in arrival order: a port's packets
    /// arrive in the order they left, so they wait here instead of in the
    /// heap, which then holds one `PortHead` entry per busy port. Packets
    /// that would break the order (delayed ones) go to the heap.
    arrivals: VecDeque<Arrival>,
    counters: PortCounters,
}

#[derive(Clone, Copy, Debug)]
struct HeldSlot {
    packet: Packet,
    /// When the link model would have delivered it.
    arrive_at: SimInstant,
    overtakers_left: u32,
    generation: u32,
    occupied: bool,
}

struct InstalledRule {
    id: RuleId,
    rule: Box<dyn FabricRule>,
    /// [`FabricRule::fixed_rate`], asked once at installation.
    fixed: Option<(RuleScope, u32)>,
}

/// The verdict for one packet, with who gave it and the drawn reorder
/// distance.
struct Decision {
    verdict: Verdict,
    by: Option<RuleId>,
    overtakers: u32,
}

/// The simulated fabric: devices' ports, their links, the event queue of
/// deliveries and timers, and fault injection.
///
/// Inputs ([`Self::send`], [`Self::schedule_timer`], [`Self::set_link`])
/// carry the current virtual time, which must never go backwards; outputs
/// are pulled with [`Self::next_event_time`] and [`Self::pop_due`].
pub struct Fabric {
    ports: Vec<Port>,
    /// Per device: index of its first port in `ports`, and its port count.
    devices: Vec<(u32, u8)>,
    lids: BTreeMap<u16, PortRef>,
    gids: BTreeMap<Gid, PortRef>,
    queue: EventQueue<Queued>,
    /// Packets scheduled for delivery: `Deliver` entries in `queue` plus
    /// every port's `arrivals`.
    deliveries_queued: usize,
    /// `arrivals` entries of all ports together.
    arrivals_queued: usize,
    events_max: usize,
    rules: Vec<InstalledRule>,
    next_rule_id: u32,
    /// The `fault_rules` stream, shared by the rules in order.
    rule_rng: SimRng,
    network: NetworkFaults,
    network_rngs: NetworkRngs,
    /// No rules installed and a perfect network: skip deciding.
    faultless: bool,
    /// `network.is_perfect()`, kept with `network` (asked per packet).
    network_perfect: bool,
    /// [`Self::clear_route`] may give routes (see
    /// [`Self::set_clear_routes`]).
    clear_routes: bool,
    seed: u64,
    held: Vec<HeldSlot>,
    held_free: Vec<u32>,
    held_count: u32,
    /// The packets of `Queued::Deliver` entries, by slot; `parked_free`
    /// lists the free slots (taken last in, first out).
    parked: Vec<Packet>,
    parked_free: Vec<u32>,
    held_packets_max: u32,
    reorder_hold: SimDuration,
    latest: SimInstant,
    /// Events handed out by `pop_due`.
    events_handled: u64,
}

impl core::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fabric")
            .field("seed", &self.seed)
            .field("devices", &self.devices.len())
            .field("ports", &self.ports.len())
            .field("events_queued", &self.queue.len())
            .field("held", &self.held_count)
            .field("rules", &self.rules.len())
            .field("latest", &self.latest)
            .finish()
    }
}

impl Fabric {
    /// An empty fabric (no devices) with `config`.
    pub fn new(config: FabricConfig) -> Self {
        let seed = config.seed;
        Self {
            ports: Vec::new(),
            devices: Vec::new(),
            lids: BTreeMap::new(),
            gids: BTreeMap::new(),
            queue: EventQueue::new(config.events_max),
            deliveries_queued: 0,
            arrivals_queued: 0,
            events_max: config.events_max,
            rules: Vec::new(),
            next_rule_id: 0,
            rule_rng: SimRng::new(seed, Stream::FaultRules),
            network: config.network,
            network_rngs: NetworkRngs {
                loss: SimRng::new(seed, Stream::FabricLoss),
                reorder: SimRng::new(seed, Stream::FabricReorder),
                latency: SimRng::new(seed, Stream::FabricLatency),
            },
            faultless: config.network.is_perfect(),
            network_perfect: config.network.is_perfect(),
            clear_routes: true,
            seed,
            held: Vec::new(),
            held_free: Vec::new(),
            held_count: 0,
            parked: Vec::new(),
            parked_free: Vec::new(),
            held_packets_max: config.held_packets_max,
            reorder_hold: SimDuration::from_nanos(config.reorder_hold_ns_max),
            latest: SimInstant::ZERO,
            events_handled: 0,
        }
    }

    // ----- topology and addressing -------------------------------------

    /// Adds a device with these ports (numbered from 1 in order), all links
    /// up, and registers the InfiniBand ports' LIDs.
    ///
    /// # Errors
    ///
    /// * [`FabricError::InvalidPortConfig`]: a zero rate, an IB port whose
    ///   LID is not unicast, an Ethernet port with a LID, an unknown link
    ///   layer, or no ports at all.
    /// * [`FabricError::DuplicateLid`]: a LID already in use.
    /// * [`FabricError::TooMany`]: more than 65 535 devices or 255 ports.
    pub fn add_device(&mut self, ports: &[PortConfig]) -> Result<DeviceIndex, FabricError> {
        let index = u16::try_from(self.devices.len())
            .ok()
            .filter(|&i| i < u16::MAX)
            .ok_or(FabricError::TooMany("devices"))?;
        let count = u8::try_from(ports.len()).map_err(|_| FabricError::TooMany("ports"))?;
        if count == 0 {
            return Err(FabricError::InvalidPortConfig("a device needs a port"));
        }
        for (i, p) in ports.iter().enumerate() {
            if p.rate_mbps == 0 {
                return Err(FabricError::InvalidPortConfig("rate_mbps"));
            }
            match p.link_layer {
                LinkLayer::Infiniband => {
                    if !(0x0001..=0xBFFF).contains(&p.lid) {
                        return Err(FabricError::InvalidPortConfig("lid"));
                    }
                    let repeated = ports[..i]
                        .iter()
                        .any(|q| q.link_layer == LinkLayer::Infiniband && q.lid == p.lid);
                    if repeated || self.lids.contains_key(&p.lid) {
                        return Err(FabricError::DuplicateLid(p.lid));
                    }
                }
                LinkLayer::Ethernet => {
                    if p.lid != 0 {
                        return Err(FabricError::InvalidPortConfig("lid on Ethernet"));
                    }
                }
                _ => return Err(FabricError::InvalidPortConfig("link_layer")),
            }
        }
        let device = DeviceIndex(index);
        let first = u32::try_from(self.ports.len()).map_err(|_| FabricError::TooMany("ports"))?;
        for (i, p) in ports.iter().enumerate() {
            if p.link_layer == LinkLayer::Infiniband {
                let port = PortRef {
                    device,
                    port: i as u8 + 1,
                };
                self.lids.insert(p.lid, port);
            }
            self.ports.push(Port {
                config: *p,
                ps_per_byte_q16: (8_000_000u64 << 16) / p.rate_mbps,
                rx_ps_per_byte_q16: match p.rx_store_mbps {
                    0 => 0,
                    r => (8_000_000u64 << 16) / r,
                },
                last_arrive_ps: 0,
                up: true,
                busy_until_ps: 0,
                arrivals: VecDeque::new(),
                counters: PortCounters::default(),
            });
        }
        self.devices.push((first, count));
        Ok(device)
    }

    /// Registers `gid` as an address of `port` (a RoCE GID table entry, or
    /// an IB port's GID for routes with a GRH).
    ///
    /// # Errors
    ///
    /// [`FabricError::UnknownPort`], or [`FabricError::DuplicateGid`] if
    /// any port already has this GID.
    pub fn add_gid(&mut self, port: PortRef, gid: Gid) -> Result<(), FabricError> {
        self.port_index(port)
            .ok_or(FabricError::UnknownPort(port))?;
        if self.gids.contains_key(&gid) {
            return Err(FabricError::DuplicateGid(gid));
        }
        self.gids.insert(gid, port);
        Ok(())
    }

    /// The port that owns `address`, if any. Call it when an address is
    /// learned (RTR, AH creation) and keep the result: packets carry
    /// resolved [`crate::fabric::Endpoint`]s.
    pub fn resolve(&self, address: &Address) -> Option<PortRef> {
        match address {
            Address::Lid(lid) => self.lids.get(lid).copied(),
            Address::Gid(gid) => self.gids.get(gid).copied(),
        }
    }

    /// The number of devices added.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// The number of ports `device` has (`None` if no such device).
    pub fn port_count(&self, device: DeviceIndex) -> Option<u8> {
        self.devices.get(usize::from(device.0)).map(|&(_, n)| n)
    }

    /// The configuration of `port`.
    pub fn port_config(&self, port: PortRef) -> Option<&PortConfig> {
        self.port_index(port).map(|i| &self.ports[i].config)
    }

    /// The counters of `port`.
    pub fn port_counters(&self, port: PortRef) -> Option<PortCounters> {
        self.port_index(port).map(|i| self.ports[i].counters)
    }

    /// Events [`Self::pop_due`] has handed out so far (deliveries and
    /// timers; the fabric's own wake-ups not counted).
    pub fn events_handled(&self) -> u64 {
        self.events_handled
    }

    /// Packets put on the wire by every port so far (retransmissions and
    /// packets a rule later dropped included; a duplicate counts once).
    pub fn packets_sent(&self) -> u64 {
        self.ports.iter().map(|p| p.counters.tx_packets).sum()
    }

    /// True when `port`'s link is up (`None` if no such port).
    pub fn link_up(&self, port: PortRef) -> Option<bool> {
        self.port_index(port).map(|i| self.ports[i].up)
    }

    /// Takes `port`'s link up or down at `now`. While a link is down every
    /// packet sent from or to it is dropped, and so is every packet that
    /// falls due while it is down.
    ///
    /// # Errors
    ///
    /// [`FabricError::UnknownPort`]; [`FabricError::TimeWentBackwards`].
    pub fn set_link<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        port: PortRef,
        up: bool,
        sink: &mut S,
    ) -> Result<(), FabricError> {
        let i = self
            .port_index(port)
            .ok_or(FabricError::UnknownPort(port))?;
        self.observe(now)?;
        if self.ports[i].up != up {
            self.ports[i].up = up;
            sink.record(FabricTrace::Link { at: now, port, up });
        }
        Ok(())
    }

    fn port_index(&self, port: PortRef) -> Option<usize> {
        let &(first, count) = self.devices.get(usize::from(port.device.0))?;
        if port.port == 0 || port.port > count {
            return None;
        }
        Some(first as usize + usize::from(port.port) - 1)
    }

    // ----- fault configuration -----------------------------------------

    /// Installs `rule` after the existing ones (it is asked after them).
    pub fn install_rule<R: FabricRule + 'static>(&mut self, rule: R) -> RuleId {
        let id = RuleId(self.next_rule_id);
        self.next_rule_id += 1;
        let fixed = rule.fixed_rate();
        self.rules.push(InstalledRule {
            id,
            rule: Box::new(rule),
            fixed,
        });
        self.faultless = false;
        id
    }

    /// Removes rule `id`; false if it is not installed (or already spent).
    pub fn remove_rule(&mut self, id: RuleId) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        self.refresh_faultless();
        self.rules.len() != before
    }

    /// Removes every installed rule (the background network stays).
    pub fn clear_rules(&mut self) {
        self.rules.clear();
        self.refresh_faultless();
    }

    /// Rules installed and not yet spent.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Replaces the background network knobs.
    pub fn set_network(&mut self, network: NetworkFaults) {
        self.network = network;
        self.refresh_faultless();
    }

    fn refresh_faultless(&mut self) {
        self.network_perfect = self.network.is_perfect();
        self.faultless = self.rules.is_empty() && self.network_perfect;
    }

    /// The background network knobs.
    pub fn network(&self) -> NetworkFaults {
        self.network
    }

    // ----- inputs -------------------------------------------------------

    /// Puts `packet` on the wire at `now`: traces it, serialises it on its
    /// source port, asks the rules and the background network for a
    /// verdict, and schedules its delivery (or not).
    ///
    /// A packet whose destination port does not exist is dropped as
    /// unroutable, as a switch would; a packet whose source port does not
    /// exist is a caller bug and an error.
    ///
    /// # Errors
    ///
    /// [`FabricError::UnknownPort`] for the source port;
    /// [`FabricError::TimeWentBackwards`]; [`FabricError::QueueFull`].
    pub fn send<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        packet: Packet,
        sink: &mut S,
    ) -> Result<SendOutcome, FabricError> {
        self.send_at(now, now, packet, sink)
    }

    /// [`Fabric::send`] for a packet that leaves its adapter at `depart`
    /// (at or after `now`): the adapter model's doorbell, WQE and DMA
    /// delays. The port serialises it from then on.
    pub fn send_at<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        depart: SimInstant,
        packet: Packet,
        sink: &mut S,
    ) -> Result<SendOutcome, FabricError> {
        let source_port = packet.source.port_ref();
        let src = self
            .port_index(source_port)
            .ok_or(FabricError::UnknownPort(source_port))?;
        self.observe(now)?;
        sink.record(FabricTrace::Sent { at: now, packet });
        let Some(dst) = self.port_index(packet.destination.port_ref()) else {
            return Ok(self.drop_packet(now, src, packet, DropReason::Unroutable, sink));
        };
        if !self.ports[src].up || !self.ports[dst].up {
            return Ok(self.drop_packet(now, src, packet, DropReason::LinkDown, sink));
        }
        let arrive_at = self.serialise(src, depart.max(now), &packet);
        let decision = if self.faultless {
            Decision {
                verdict: Verdict::Pass,
                by: None,
                overtakers: 0,
            }
        } else {
            self.decide(&packet)
        };
        match decision.verdict {
            Verdict::Drop => {
                let reason = decision
                    .by
                    .map_or(DropReason::Loss, |id| DropReason::Rule(id.0));
                Ok(self.drop_packet(now, src, packet, reason, sink))
            }
            Verdict::Pass | Verdict::Reorder(0) => {
                self.schedule_delivery(src, dst, arrive_at, packet, true)?;
                self.overtake(now, src, &packet, arrive_at, sink)?;
                Ok(SendOutcome::Scheduled { arrive_at })
            }
            Verdict::Deliver(extra) => {
                // A delay ends at the virtual-time horizon at the latest.
                let horizon = SimInstant::from_nanos(crate::world::TIME_HORIZON_NS);
                let arrive_at = (arrive_at + extra).min(horizon.max(arrive_at));
                sink.record(FabricTrace::Delayed {
                    at: now,
                    packet,
                    extra,
                });
                // Delayed packets leave the port's order: straight to the heap.
                self.schedule_delivery(src, dst, arrive_at, packet, false)?;
                self.overtake(now, src, &packet, arrive_at, sink)?;
                Ok(SendOutcome::Scheduled { arrive_at })
            }
            Verdict::Duplicate => {
                sink.record(FabricTrace::Duplicated { at: now, packet });
                self.schedule_delivery(src, dst, arrive_at, packet, true)?;
                self.schedule_delivery(src, dst, arrive_at, packet, true)?;
                self.overtake(now, src, &packet, arrive_at, sink)?;
                Ok(SendOutcome::Duplicated { arrive_at })
            }
            Verdict::Reorder(_) => {
                if self.held_count >= self.held_packets_max {
                    // Out of hold slots: deliver in order rather than grow.
                    self.schedule_delivery(src, dst, arrive_at, packet, true)?;
                    self.overtake(now, src, &packet, arrive_at, sink)?;
                    return Ok(SendOutcome::Scheduled { arrive_at });
                }
                self.hold(now, packet, arrive_at, decision.overtakers, sink)?;
                Ok(SendOutcome::Held {
                    overtakers: decision.overtakers,
                })
            }
        }
    }

    /// Schedules `timer` to fire at `at` (see [`TimerEvent`] for
    /// cancellation by generation).
    ///
    /// # Errors
    ///
    /// [`FabricError::TimeWentBackwards`] if `at` is before the latest time
    /// seen; [`FabricError::QueueFull`].
    pub fn schedule_timer(&mut self, at: SimInstant, timer: TimerEvent) -> Result<(), FabricError> {
        if at < self.latest {
            return Err(FabricError::TimeWentBackwards {
                now: at,
                latest: self.latest,
            });
        }
        self.check_room()?;
        self.queue.push(at, Queued::Timer(timer))?;
        Ok(())
    }

    // ----- outputs ------------------------------------------------------

    /// The due time of the earliest queued event, if any. It may be one of
    /// the fabric's own wake-ups (a reorder hold expiring), for which
    /// [`Self::pop_due`] returns nothing; keep looping until this is `None`.
    pub fn next_event_time(&self) -> Option<SimInstant> {
        self.queue.next_time()
    }

    /// Whether the next scheduled event is a timer (as opposed to a packet
    /// in flight or the release of a held one); false when nothing is
    /// scheduled.
    pub fn next_event_is_timer(&self) -> bool {
        self.queue
            .peek_due(SimInstant::from_nanos(u64::MAX))
            .is_some_and(|(_, q)| matches!(q, Queued::Timer(_)))
    }

    /// Processes queued events due at or before `now`, in `(time,
    /// sequence)` order, until one must be handed out: a delivery (traced
    /// as delivered, or as dropped if a link of its is down by now) or a
    /// timer. Returns it with its due time, or `None` when nothing more is
    /// due by `now`.
    pub fn pop_due<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        sink: &mut S,
    ) -> Option<(SimInstant, FabricEvent)> {
        let event = self.next_due(now, sink);
        self.events_handled += u64::from(event.is_some());
        event
    }

    fn next_due<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        sink: &mut S,
    ) -> Option<(SimInstant, FabricEvent)> {
        loop {
            let (at, queued) = self.queue.peek_due(now)?;
            if at > self.latest {
                self.latest = at;
            }
            if let Queued::PortHead(port) = queued {
                // The port's next arrival takes the entry's place in the
                // heap (one sift, not a pop and a push).
                let (packet, dst) = self.take_arrival(port as usize, at);
                self.deliveries_queued -= 1;
                if let Some(event) = self.arrive_between(at, packet, port as usize, dst, sink) {
                    return Some((at, event));
                }
                continue;
            }
            self.queue.pop_next();
            match queued {
                Queued::Timer(timer) => return Some((at, FabricEvent::Timer(timer))),
                // Handled above, without popping.
                Queued::PortHead(_) => {}
                Queued::Deliver(slot) => {
                    let packet = self.unpark(slot);
                    self.deliveries_queued -= 1;
                    if let Some(event) = self.arrive(at, packet, sink) {
                        return Some((at, event));
                    }
                }
                Queued::Release { slot, generation } => {
                    let held = self.held[slot as usize];
                    if held.occupied && held.generation == generation {
                        self.free_held(slot);
                        sink.record(FabricTrace::Released {
                            at,
                            packet: held.packet,
                        });
                        if let Some(event) = self.arrive(at, held.packet, sink) {
                            return Some((at, event));
                        }
                    }
                }
            }
        }
    }

    /// Takes the next event as [`Self::pop_due`] would, but only if it is
    /// due by `limit`, is a delivery waiting in a port's arrival FIFO (the
    /// in-order case, not a delayed or held packet), both of its links are
    /// up and `accept` takes its packet; otherwise changes nothing. For the
    /// data path's runs of packets of one message (`world/exec/run.rs`): the
    /// caller has checked that nothing else happens before it.
    pub fn take_delivery_if<S: FabricTraceSink + ?Sized>(
        &mut self,
        limit: SimInstant,
        accept: impl FnOnce(&Packet) -> bool,
        sink: &mut S,
    ) -> Option<(SimInstant, Packet)> {
        let (at, Queued::PortHead(port)) = self.queue.peek_due(limit)? else {
            return None;
        };
        let packet = self.ports[port as usize].arrivals.front()?.packet;
        if !accept(&packet) {
            return None;
        }
        let src = self.port_index(packet.source.port_ref())?;
        let dst = self.port_index(packet.destination.port_ref())?;
        if !self.ports[src].up || !self.ports[dst].up {
            return None;
        }
        if at > self.latest {
            self.latest = at;
        }
        let (packet, _) = self.take_arrival(port as usize, at);
        self.deliveries_queued -= 1;
        self.ports[dst].counters.rx_packets += 1;
        sink.record(FabricTrace::Delivered { at, packet });
        self.events_handled += 1;
        Some((at, packet))
    }

    /// The packet [`Self::take_delivery_if`] would consider next (the next
    /// event, if it is due by `limit`, waits in a port's arrival FIFO and
    /// both of its links are up), left in place.
    #[inline]
    pub fn peek_delivery(&self, limit: SimInstant) -> Option<Packet> {
        let (_, Queued::PortHead(port)) = self.queue.peek_due(limit)? else {
            return None;
        };
        let packet = self.ports[port as usize].arrivals.front()?.packet;
        let src = self.port_index(packet.source.port_ref())?;
        let dst = self.port_index(packet.destination.port_ref())?;
        (self.ports[src].up && self.ports[dst].up).then_some(packet)
    }

    /// Runs the fabric from `now` until no event is left, handing each
    /// event to `handle` (which may send packets and schedule timers
    /// through the `&mut Fabric` it gets). Returns the virtual time of the
    /// last event processed (or `now`).
    ///
    /// # Errors
    ///
    /// [`FabricError::EventBoundHit`] after `events_max` queue entries if
    /// the queue is still not empty (a livelock, or a bound too small).
    pub fn run_until_idle<S, F>(
        &mut self,
        now: SimInstant,
        events_max: u64,
        sink: &mut S,
        mut handle: F,
    ) -> Result<SimInstant, FabricError>
    where
        S: FabricTraceSink + ?Sized,
        F: FnMut(&mut Self, &mut S, SimInstant, FabricEvent),
    {
        let mut clock = now;
        let mut processed = 0u64;
        while let Some(next) = self.next_event_time() {
            if processed >= events_max {
                return Err(FabricError::EventBoundHit {
                    events_max,
                    at: clock,
                });
            }
            clock = clock.max(next);
            processed += 1;
            if let Some((at, event)) = self.pop_due(clock, sink) {
                handle(self, sink, at, event);
            }
        }
        Ok(clock)
    }

    /// Packets on their way: queued deliveries plus held packets.
    pub fn in_flight(&self) -> usize {
        self.deliveries_queued + self.held_count as usize
    }

    /// Events queued: deliveries, timers, hold expiries.
    pub fn events_queued(&self) -> usize {
        self.queue.len() + self.arrivals_queued
    }

    /// The latest virtual time the fabric has been given or has reached by
    /// popping an event; inputs earlier than this are refused.
    pub fn latest(&self) -> SimInstant {
        self.latest
    }

    /// The root seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_entries_fit_a_cache_line() {
        // Goal: the queue's element (key + event) stays within 32 bytes
        // (perf.md: small Copy events; a delivery's packet waits in a
        // slot, not in the heap).
        // Method: assert the size of the internal event; the key adds 16.
        assert!(size_of::<Queued>() <= 16, "{}", size_of::<Queued>());
    }
}
