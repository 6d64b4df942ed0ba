//! Runs of in-order packets with their checks decided once (issue #16:
//! no per-packet work beyond what the wire model needs).
//!
//! [`Fabric::clear_route`] decides once what [`Fabric::send_at`] would
//! decide for every packet between two ports while nothing changes (both
//! ports exist and are up, no rule, a perfect network, nothing held):
//! that the packet just serialises on its source port and joins that
//! port's arrival FIFO. [`Fabric::send_routed`] then does only that, with
//! the same trace record, timing and queue sequence as `send_at`.
//! [`Fabric::peek_arrival`] and [`Fabric::take_peeked`] are
//! [`Fabric::peek_delivery`] and [`Fabric::take_delivery_if`] split so the
//! checks are made once: the arrival FIFO already knows both ports.

use super::*;
use crate::fabric::packet::Endpoint;

/// Two ports between which packets go straight to the source port's
/// arrival FIFO (see [`Fabric::clear_route`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    src: u32,
    dst: u32,
}

/// The next event, a delivery at the head of a port's arrival FIFO with
/// both links up, as [`Fabric::peek_arrival`] found it.
#[derive(Clone, Copy, Debug)]
pub struct Peeked {
    /// When it is due.
    pub at: SimInstant,
    /// The packet.
    pub packet: Packet,
    port: u32,
    dst: u32,
}

impl Fabric {
    /// The route from `source`'s port to `destination`'s when a packet
    /// sent between them now would be queued in order with no verdict to
    /// draw: both ports exist and are up, no rule is installed, the
    /// background network is perfect and no packet is held. It stays valid
    /// while none of these changes, which only a verb, an event or a
    /// verdict can do: callers use it for a run of sends with nothing else
    /// in between.
    #[inline]
    pub fn clear_route(&self, source: Endpoint, destination: Endpoint) -> Option<Route> {
        if !self.faultless || self.held_count != 0 || !self.clear_routes {
            return None;
        }
        let src = self.port_index(source.port_ref())?;
        let dst = self.port_index(destination.port_ref())?;
        (self.ports[src].up && self.ports[dst].up).then_some(Route {
            src: src as u32,
            dst: dst as u32,
        })
    }

    /// Whether [`Self::clear_route`] gives routes at all (default true).
    /// Off, every packet goes through [`Self::send_at`], which decides
    /// the same: for checking that [`Self::send_routed`] changes nothing
    /// (`SimConfig::fast_paths`).
    pub fn set_clear_routes(&mut self, on: bool) {
        self.clear_routes = on;
    }

    /// [`Self::send_at`] of `packet` over `route` (from
    /// [`Self::clear_route`] for its endpoints, still valid): the same
    /// `Sent` record, serialisation and place in the arrival FIFO.
    /// Returns when it arrives.
    ///
    /// # Errors
    ///
    /// As `send_at`: [`FabricError::TimeWentBackwards`],
    /// [`FabricError::QueueFull`].
    #[inline]
    pub fn send_routed<S: FabricTraceSink + ?Sized>(
        &mut self,
        now: SimInstant,
        depart: SimInstant,
        route: Route,
        packet: Packet,
        sink: &mut S,
    ) -> Result<SimInstant, FabricError> {
        debug_assert!(self.faultless && self.held_count == 0);
        self.observe(now)?;
        sink.record(FabricTrace::Sent { at: now, packet });
        let (src, dst) = (route.src as usize, route.dst as usize);
        let arrive_at = self.serialise(src, depart.max(now), &packet);
        self.schedule_delivery(src, dst, arrive_at, packet, true)?;
        Ok(arrive_at)
    }

    /// What [`Self::peek_delivery`] returns, with what
    /// [`Self::take_peeked`] needs to take it without looking again.
    #[inline(always)]
    pub fn peek_arrival(&self, limit: SimInstant) -> Option<Peeked> {
        let (at, Queued::PortHead(port)) = self.queue.peek_due(limit)? else {
            return None;
        };
        let head = self.ports[port as usize].arrivals.front()?;
        (self.ports[port as usize].up && self.ports[head.dst as usize].up).then_some(Peeked {
            at,
            packet: head.packet,
            port,
            dst: head.dst,
        })
    }

    /// Takes what [`Self::peek_arrival`] just returned, with nothing done
    /// to the fabric in between: [`Self::take_delivery_if`] accepting it.
    #[inline(always)]
    pub fn take_peeked<S: FabricTraceSink + ?Sized>(&mut self, peeked: Peeked, sink: &mut S) {
        let at = peeked.at;
        if at > self.latest {
            self.latest = at;
        }
        self.drop_arrival(peeked.port as usize);
        self.deliveries_queued -= 1;
        self.ports[peeked.dst as usize].counters.rx_packets += 1;
        sink.record(FabricTrace::Delivered {
            at,
            packet: peeked.packet,
        });
        self.events_handled += 1;
    }
}
