//! The configuration of the fabric and its ports: link rates and
//! latencies (with the profiles' presets), counters, and the fabric's own
//! knobs.

use verbs_api::LinkLayer;

use super::rules::NetworkFaults;

/// The configuration of one port's link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// InfiniBand (addressed by LID) or Ethernet (RoCE v2, addressed by
    /// GID).
    pub link_layer: LinkLayer,
    /// The port's LID on InfiniBand (unicast, `0x0001..=0xBFFF`); `0` on
    /// Ethernet.
    pub lid: u16,
    /// Data rate in megabits per second (after line coding).
    pub rate_mbps: u64,
    /// One-way delay from the last bit leaving this port to the packet
    /// arriving, in nanoseconds (cable plus the far NIC's pipeline).
    pub propagation_ns: u64,
    /// Bytes every packet carries besides its payload and transport
    /// extension headers (link, network and base transport headers, CRCs,
    /// and on Ethernet the preamble and inter-frame gap).
    pub header_overhead_bytes: u32,
    /// The far NIC writes a packet's payload to host memory after the whole
    /// packet arrived, at this rate in Mb/s (0 = no such cost): the
    /// packet's effect is `payload / rx_store_mbps` later than its last
    /// bit plus `propagation_ns`. Arrivals from one port stay in order.
    pub rx_store_mbps: u64,
}

impl PortConfig {
    /// Default one-way propagation delay: 500 ns, about a back-to-back
    /// cable plus NIC pipeline, so a small RC SEND takes roughly 1 µs like
    /// the published ConnectX figures (perf.md anchors).
    pub const PROPAGATION_NS_DEFAULT: u64 = 500;
    /// InfiniBand per-packet overhead: LRH 8 + BTH 12 + ICRC 4 + VCRC 2
    /// bytes (IBTA vol. 1 §7.7, §9.2, §7.8).
    pub const IB_HEADER_OVERHEAD_BYTES: u32 = 26;
    /// RoCE v2 over IPv4 per-packet overhead: preamble and SFD 8, Ethernet
    /// 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, inter-frame gap 12 bytes
    /// (IBTA RoCE v2 annex A17).
    pub const ROCE_V2_HEADER_OVERHEAD_BYTES: u32 = 82;

    /// An InfiniBand port with this LID and rate, default delay and
    /// overhead.
    pub const fn infiniband(lid: u16, rate_mbps: u64) -> Self {
        Self {
            link_layer: LinkLayer::Infiniband,
            lid,
            rate_mbps,
            propagation_ns: Self::PROPAGATION_NS_DEFAULT,
            header_overhead_bytes: Self::IB_HEADER_OVERHEAD_BYTES,
            rx_store_mbps: 0,
        }
    }

    /// A RoCE v2 (Ethernet) port at this rate; give it GIDs with
    /// [`Fabric::add_gid`](super::Fabric::add_gid).
    pub const fn roce_v2(rate_mbps: u64) -> Self {
        Self {
            link_layer: LinkLayer::Ethernet,
            lid: 0,
            rate_mbps,
            propagation_ns: Self::PROPAGATION_NS_DEFAULT,
            header_overhead_bytes: Self::ROCE_V2_HEADER_OVERHEAD_BYTES,
            rx_store_mbps: 0,
        }
    }

    /// ConnectX-6 on HDR InfiniBand: 4x lanes at 50 Gb/s, 200 Gb/s.
    pub const fn connectx6_hdr(lid: u16) -> Self {
        Self::infiniband(lid, 200_000)
    }

    /// ConnectX-7 on NDR InfiniBand: 4x lanes at 100 Gb/s, 400 Gb/s.
    pub const fn connectx7_ndr(lid: u16) -> Self {
        Self::infiniband(lid, 400_000)
    }

    /// ConnectX-6 Dx on 100 GbE, RoCE v2.
    pub const fn connectx6_roce_100g() -> Self {
        Self::roce_v2(100_000)
    }

    /// Soft-RoCE (rxe) on a 10 GbE interface.
    pub const fn rxe_10gbe() -> Self {
        Self::roce_v2(10_000)
    }

    /// The data rate in Mb/s of an InfiniBand port from its
    /// `ibv_port_attr` encodings: `active_width` (1 = 1x, 2 = 4x, 4 = 8x,
    /// 8 = 12x, 16 = 2x) times the per-lane data rate of `active_speed`
    /// after line coding (1 SDR 2 Gb/s, 2 DDR 4, 4 QDR 8, 8 FDR10 10,
    /// 16 FDR 13.64, 32 EDR 25, 64 HDR 50, 128 NDR 100, 256 XDR 200).
    /// `None` for an encoding not listed.
    pub const fn ib_rate_mbps(active_width: u8, active_speed: u32) -> Option<u64> {
        let lanes = match active_width {
            1 => 1,
            2 => 4,
            4 => 8,
            8 => 12,
            16 => 2,
            _ => return None,
        };
        let lane_mbps = match active_speed {
            1 => 2_000,
            2 => 4_000,
            4 => 8_000,
            8 => 10_000,
            16 => 13_636,
            32 => 25_000,
            64 => 50_000,
            128 => 100_000,
            256 => 200_000,
            _ => return None,
        };
        Some(lanes * lane_mbps)
    }
}

/// Counters of one port (as `perfquery` would show them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Packets put on the wire from this port.
    pub tx_packets: u64,
    /// Bytes put on the wire, headers included.
    pub tx_bytes: u64,
    /// Packets delivered to this port.
    pub rx_packets: u64,
    /// Packets from this port that were lost (fault, down link, no route).
    pub dropped_packets: u64,
}

/// Fabric-wide settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FabricConfig {
    /// The root seed of every random stream the fabric uses.
    pub seed: u64,
    /// Background network imperfections (all zero: a perfect network).
    pub network: NetworkFaults,
    /// Longest time a reordered packet waits for its overtakers before it
    /// is delivered anyway (so the last packet of a burst is not held
    /// forever), in nanoseconds.
    pub reorder_hold_ns_max: u64,
    /// Most packets held for reordering at once; a reorder verdict beyond
    /// it is delivered in order instead.
    pub held_packets_max: u32,
    /// Most events (packets in flight, timers) queued at once.
    pub events_max: usize,
}

impl FabricConfig {
    /// Defaults with the given seed: a perfect network, reordered packets
    /// held at most 10 µs, at most 4 096 held packets and 4 Mi events.
    pub const fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            network: NetworkFaults::PERFECT,
            reorder_hold_ns_max: 10_000,
            held_packets_max: 4_096,
            events_max: 1 << 22,
        }
    }
}

impl Default for FabricConfig {
    fn default() -> Self {
        Self::with_seed(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_rates_follow_the_port_attribute_encodings() {
        // Goal: the rate table matches the published link speeds.
        // Method: HDR 4x is 200 Gb/s, NDR 4x 400, EDR 4x 100, QDR 4x 32;
        // unknown encodings give None.
        assert_eq!(PortConfig::ib_rate_mbps(2, 64), Some(200_000));
        assert_eq!(PortConfig::ib_rate_mbps(2, 128), Some(400_000));
        assert_eq!(PortConfig::ib_rate_mbps(2, 32), Some(100_000));
        assert_eq!(PortConfig::ib_rate_mbps(2, 4), Some(32_000));
        assert_eq!(PortConfig::ib_rate_mbps(3, 4), None);
        assert_eq!(PortConfig::ib_rate_mbps(1, 3), None);
    }
}
