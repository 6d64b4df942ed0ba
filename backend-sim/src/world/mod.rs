//! The World (style rule R1): every object, the virtual clock, the RNG
//! streams and the trace. Verb calls are inputs (`handle_*`-style methods
//! named after the verbs); nothing here reads a wall clock, spawns a thread
//! or iterates a hash map.

mod async_events;
pub(crate) mod cm;
mod context;
mod cq;
mod cq_mirror;
mod dc;
mod digest;
mod dm;
mod exec;
pub(crate) mod ext;
mod live;
mod modify;
mod mr;
mod ooo;
mod post;
mod post_view;
mod qp;
mod queues;
mod reserved_qpn;
mod srq;
mod state;
mod xrc;

use std::collections::{BTreeMap, VecDeque};

use verbs_api::{
    AhAttr, AsyncEventType, DeviceAttr, Error, ErrorKind, Gid, LinkLayer, PortAttr, ProcessId,
    Result, Verb,
};

use crate::arena::Arena;
use crate::fabric::{Fabric, FabricConfig, PortConfig};
use crate::handles::*;
use crate::rng::{SimRng, Stream};
use crate::trace::{Trace, TraceEvent};
use crate::{DeviceProfile, SimConfig};

pub(crate) use cq::Cq;
pub use cq_mirror::{wc_ex_of, CqMirror, MirroredCqe, MirroredQueue};
pub(crate) use exec::may_have_cause as exec_may_have_cause;
pub use live::LiveObjects;
pub(crate) use mr::Mr;
pub use post_view::{PostSnapshot, SrqPostSnapshot};
pub(crate) use qp::Qp;
pub(crate) use srq::Srq;
pub(crate) use xrc::legacy_srq_attr;
pub use xrc::XrcUnknownSrqn;

/// Page size of the simulated processes' address spaces.
pub(crate) const PAGE_SIZE: u64 = 4096;

/// First virtual address handed out to MRs in every simulated process.
const VA_BASE: u64 = 0x7f00_0000_0000;

/// A QP-number → QP-index table with O(1) lookup and lazily allocated pages,
/// so a 24-bit number space costs memory only where numbers are in use.
#[derive(Debug, Default)]
pub(crate) struct QpnTable {
    pages: Vec<Option<Box<[u32; QPN_PAGE]>>>,
}

const QPN_PAGE: usize = 4096;
const QPN_NONE: u32 = u32::MAX;

impl QpnTable {
    /// Bytes one QP number's entry takes in a page.
    pub(crate) const ENTRY_BYTES: usize = size_of::<u32>();

    fn get(&self, qpn: u32) -> Option<u32> {
        let (page, slot) = (qpn as usize / QPN_PAGE, qpn as usize % QPN_PAGE);
        self.pages
            .get(page)?
            .as_ref()
            .map(|p| p[slot])
            .filter(|&v| v != QPN_NONE)
    }

    fn set(&mut self, qpn: u32, index: u32) {
        let (page, slot) = (qpn as usize / QPN_PAGE, qpn as usize % QPN_PAGE);
        if self.pages.len() <= page {
            self.pages.resize_with(page + 1, || None);
        }
        self.pages[page].get_or_insert_with(|| Box::new([QPN_NONE; QPN_PAGE]))[slot] = index;
    }

    fn clear(&mut self, qpn: u32) {
        let (page, slot) = (qpn as usize / QPN_PAGE, qpn as usize % QPN_PAGE);
        if let Some(Some(p)) = self.pages.get_mut(page) {
            p[slot] = QPN_NONE;
        }
    }
}

/// One simulated HCA.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) profile: DeviceProfile,
    pub(crate) node_guid: u64,
    qpns: QpnTable,
    next_qpn: u32,
    pub(crate) qp_count: u32,
    /// The adapter model's DMA engine is busy until then (ns).
    pub(crate) dma_free_ns: u64,
    /// Adapter model with a host CPU (`AdapterModel::post_ns`): the
    /// host's posting thread is free for the next `ibv_post_send` from
    /// then on.
    pub(crate) host_free_ns: u64,
    /// The adapter model's READ responder is free from then on (ns): one
    /// per device (kept out of the QP, whose size the DC and scale targets
    /// bound).
    pub(crate) read_free_ns: u64,
    /// The last `(bytes, ns)` of [`Self::dma_ns`].
    dma_memo: (u64, u64),
    /// The port's serialisation time per byte, ps in 48.16 fixed point
    /// (as the fabric's), and its per-packet header bytes: the adapter
    /// model's time on the wire of a message.
    wire_ps_per_byte_q16: u64,
    wire_overhead_bytes: u64,
}

impl Device {
    /// `ibv_query_device` of this instance.
    pub(crate) fn attr(&self) -> DeviceAttr {
        let mut a = self.profile.attr.clone();
        a.node_guid = self.node_guid;
        a.sys_image_guid = self.node_guid;
        a
    }

    /// `ibv_query_port` of this instance (`port` already validated).
    pub(crate) fn port_attr(&self, index: u32) -> PortAttr {
        let mut p = self.profile.port.clone();
        if p.link_layer == LinkLayer::Infiniband {
            p.lid = u16::try_from(index + 2).unwrap_or(u16::MAX);
        }
        p
    }

    /// `profile.adapter.dma_ns(bytes)`, remembered for the last size: a
    /// 64-bit division the requests of a workload, of one size as a rule,
    /// need once (the profile never changes after creation).
    #[inline]
    pub(crate) fn dma_ns(&mut self, bytes: u64) -> u64 {
        if self.dma_memo.0 == bytes {
            return self.dma_memo.1;
        }
        let ns = self.profile.adapter.dma_ns(bytes);
        self.dma_memo = (bytes, ns);
        ns
    }

    /// Nanoseconds `bytes` of payload in `npkts` packets take on this
    /// device's port (headers included).
    #[inline]
    pub(crate) fn wire_ns(&self, bytes: u64, npkts: u32) -> u64 {
        let wire = bytes + u64::from(npkts) * self.wire_overhead_bytes;
        ((wire * self.wire_ps_per_byte_q16) >> 16).div_ceil(1_000)
    }

    /// How long the adapter model's send engine is busy with one WQE
    /// (module `adapter`): `wqe_ns` and `packet_ns` per packet, or
    /// `msg_ns` plus the time on the wire of its `payload` bytes when that
    /// is longer.
    #[inline]
    pub(crate) fn engine_hold_ns(&self, payload: u64, npkts: u32) -> u64 {
        let a = &self.profile.adapter;
        let engine = a.wqe_ns + u64::from(npkts) * a.packet_ns;
        engine.max(a.msg_ns + self.wire_ns(payload, npkts))
    }

    /// The READ responder's time per READ of `len` bytes in `npkts`
    /// responses (module `adapter`).
    #[inline]
    pub(crate) fn read_hold_ns(&self, len: u64, npkts: u32) -> u64 {
        let a = &self.profile.adapter;
        if a.read_msg_ns == 0 {
            return 0;
        }
        a.read_msg_ns + self.wire_ns(len, npkts)
    }

    pub(crate) fn port_valid(&self, port: u8) -> bool {
        port >= 1 && port <= self.profile.attr.phys_port_cnt
    }
}

/// The fabric of `config`: one port per device port, InfiniBand ports with
/// the LID `ibv_query_port` reports, RoCE ports with the GIDs
/// `ibv_query_gid` reports, at the profile's link rate.
fn build_fabric(config: &SimConfig) -> Fabric {
    let mut fabric = Fabric::new(FabricConfig::with_seed(config.seed));
    fabric.set_clear_routes(config.fast_paths);
    for (i, profile) in config.devices.iter().enumerate() {
        let port = &profile.port;
        let a = &profile.adapter;
        let rate = crate::link::link_mbps(profile);
        let ports: Vec<PortConfig> = (0..profile.attr.phys_port_cnt.max(1))
            .map(|_| match port.link_layer {
                LinkLayer::Ethernet => PortConfig::roce_v2(rate),
                _ => PortConfig::infiniband(u16::try_from(i + 2).unwrap_or(u16::MAX), rate),
            })
            .map(|p| {
                if a.is_none() {
                    p
                } else {
                    // The wire plus the receive pipeline and host write:
                    // an arrival event is when its effect is visible.
                    PortConfig {
                        propagation_ns: a.wire_ns + a.rx_ns,
                        rx_store_mbps: a.rx_mbps,
                        ..p
                    }
                }
            })
            .collect();
        // Two devices sharing a LID would be a configuration bug; the port
        // then simply is not addressable by LID.
        let Ok(dev) = fabric.add_device(&ports) else {
            continue;
        };
        if port.link_layer == LinkLayer::Ethernet {
            let node_guid = device_node_guid(i);
            for n in 1..=ports.len() as u8 {
                let pr = crate::fabric::PortRef {
                    device: dev,
                    port: n,
                };
                let _ = fabric.add_gid(pr, Gid::from_parts(0xfe80_0000_0000_0000, node_guid));
                let _ = fabric.add_gid(
                    pr,
                    Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, (i & 0xff) as u8, 1)),
                );
            }
        } else {
            let node_guid = device_node_guid(i);
            let pr = crate::fabric::PortRef {
                device: dev,
                port: 1,
            };
            let _ = fabric.add_gid(pr, Gid::from_parts(0xfe80_0000_0000_0000, node_guid));
        }
    }
    fabric
}

/// The node GUID of device `i` (also its GID 0's interface id).
fn device_node_guid(i: usize) -> u64 {
    0x0002_c903_0000_0000 | ((i as u64 + 1) << 16) | 0x1a2b
}

/// What an asynchronous event is about (`event.element`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AsyncSubject {
    /// A QP.
    Qp(QpHandle),
    /// A QP known to the receiving process only by number (a legacy XRC
    /// receive QP the process is registered with, `IBV_XRC_QP_EVENT_FLAG`).
    QpNum(u32),
    /// A CQ.
    Cq(CqHandle),
    /// An SRQ.
    Srq(SrqHandle),
    /// A port.
    Port(u8),
    /// The device.
    Device,
}

#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) device: u32,
    pub(crate) process: ProcessId,
    /// PDs, CQs, completion channels and QPs made through this context.
    pub(crate) children: u32,
    pub(crate) async_events: VecDeque<(AsyncEventType, AsyncSubject)>,
    /// Tokens of the events handed out and not yet acknowledged.
    pub(crate) async_unacked: Vec<u64>,
}

#[derive(Debug)]
pub(crate) struct Pd {
    pub(crate) ctx: ContextHandle,
    pub(crate) device: u32,
    /// QPs, MRs, SRQs and AHs using this PD.
    pub(crate) users: u32,
}

#[derive(Debug)]
pub(crate) struct Ah {
    pub(crate) pd: PdHandle,
    #[allow(dead_code)] // read by the data path (UD address vectors)
    pub(crate) attr: AhAttr,
}

#[derive(Debug)]
pub(crate) struct CompChannel {
    pub(crate) ctx: ContextHandle,
    pub(crate) cqs: u32,
    pub(crate) events: VecDeque<CqHandle>,
}

/// A simulated process: its own virtual address space for MR addresses.
#[derive(Debug)]
pub(crate) struct Process {
    next_va: u64,
}

/// The whole simulation.
#[derive(Debug)]
pub struct World {
    pub(crate) config: SimConfig,
    pub(crate) now_ns: u64,
    /// The last event token handed out (async and rdma_cm events).
    pub(crate) event_tokens: u64,
    pub(crate) devices: Vec<Device>,
    pub(crate) contexts: Arena<Context>,
    pub(crate) pds: Arena<Pd>,
    pub(crate) cqs: Arena<Cq>,
    pub(crate) channels: Arena<CompChannel>,
    pub(crate) mrs: Arena<Mr>,
    pub(crate) srqs: Arena<Srq>,
    pub(crate) qps: Arena<Qp>,
    pub(crate) ahs: Arena<Ah>,
    pub(crate) processes: BTreeMap<ProcessId, Process>,
    pub(crate) mr_bytes_total: u64,
    pub(crate) rng_rkey: SimRng,
    /// The adapter model's per-WQE jitter.
    pub(crate) rng_adapter: SimRng,
    pub(crate) trace: Trace,
    /// The simulated fabric: ports, links, the event queue, faults.
    pub(crate) fabric: Fabric,
    /// Unreliable requests the fabric dropped, waiting to complete.
    pub(crate) drops: Vec<crate::fabric::Packet>,
    /// Armed ACK and RNR timers (stale timer events do not count).
    pub(crate) live_timers: u32,
    /// Requesters parked in an endless RNR wait (`exec::unpark_rnr`).
    pub(crate) rnr_parked: Vec<QpHandle>,
    /// The QP and PSN of the packet the event being handled placed in
    /// order as the first or a middle packet of an RC message: where a
    /// run of packets may continue (`exec/run.rs`); cleared per event.
    pub(crate) run_from: Option<(QpHandle, crate::fabric::Psn)>,
    /// Bumped whenever what an event loop's stop condition may read
    /// changes: a completion written (or a CQ overrunning), a CM event
    /// queued. A batch asks its stop condition again only after a bump
    /// (`run_events` documents the contract).
    pub(crate) stop_epoch: u64,
    /// Which check refused the last few remote accesses, by the
    /// requester's work request (the trace's completion and
    /// `SimVerbs::completion_cause` read it).
    pub(crate) access_causes: exec::CauseRing,
    /// No event later than this runs, whatever verb asks ([`World::set_time_limit`]).
    pub(crate) time_limit: Option<u64>,
    /// Source of unique timer generations.
    pub(crate) timer_seq: u32,
    /// DC connections, OOO messages in progress, their RNG (`world/dc.rs`).
    pub(crate) dc: dc::DcState,
    /// XRC domains, XRC SRQs, XRC_TGT handles, legacy registrations.
    pub(crate) xrc: xrc::XrcState,
    /// The connection manager (rdma_cm): channels, ids, timed CM actions.
    pub(crate) cm: cm::Cm,
    /// Memory windows, extended CQs, `send_ops_flags`, ECE (`world/ext.rs`).
    pub(crate) ext: ext::ExtState,
    /// QP numbers reserved by `mlx5dv_reserved_qpn_alloc` (`world/reserved_qpn.rs`).
    pub(crate) rqpn: reserved_qpn::ReservedQpns,
}

/// How far virtual time may go: 2^62 ns, about 146 years. `sim advance`
/// past it and a `delay` fault longer than it are refused (`EINVAL`), and
/// a delayed packet arrives by it at the latest, so every sum of a virtual
/// time and a delay, timeout or adapter cost stays far below 2^64 (the
/// clock used to overflow: a debug build panicked, a release build
/// wrapped).
pub const TIME_HORIZON_NS: u64 = 1 << 62;

pub(crate) fn invalid(verb: Verb, msg: impl Into<String>) -> Error {
    Error::invalid(verb, msg)
}

pub(crate) fn unsupported(verb: Verb, msg: impl Into<String>) -> Error {
    Error::new(verb, ErrorKind::Unsupported, msg)
}

pub(crate) fn busy(verb: Verb, msg: impl Into<String>) -> Error {
    Error::new(verb, ErrorKind::Busy, msg)
}

pub(crate) fn no_mem(verb: Verb, msg: impl Into<String>) -> Error {
    Error::new(verb, ErrorKind::OutOfResources, msg)
}

pub(crate) fn misuse(verb: Verb, msg: impl Into<String>) -> Error {
    Error::new(verb, ErrorKind::ApiMisuse, msg)
}

macro_rules! lookup {
    ($(#[$m:meta])* $get:ident, $get_mut:ident, $field:ident, $h:ty, $t:ty, $what:literal) => {
        pub(crate) fn $get(&self, h: $h, verb: Verb) -> Result<&$t> {
            self.$field
                .get(h.index, h.generation)
                .ok_or_else(|| invalid(verb, format!(concat!("invalid or destroyed ", $what, " handle {:?}"), h)))
        }

        $(#[$m])*
        pub(crate) fn $get_mut(&mut self, h: $h, verb: Verb) -> Result<&mut $t> {
            self.$field
                .get_mut(h.index, h.generation)
                .ok_or_else(|| invalid(verb, format!(concat!("invalid or destroyed ", $what, " handle {:?}"), h)))
        }
    };
}

impl World {
    /// Builds the world of `config`: devices from their profiles, empty arenas.
    pub fn new(config: SimConfig) -> Self {
        let devices = config
            .devices
            .iter()
            .enumerate()
            .map(|(i, profile)| Device {
                profile: profile.clone(),
                node_guid: device_node_guid(i),
                qpns: QpnTable::default(),
                next_qpn: config.qpn_start & 0xff_ffff,
                qp_count: 0,
                dma_free_ns: 0,
                host_free_ns: 0,
                read_free_ns: 0,
                // `dma_ns(0)` is 0 on every model.
                dma_memo: (0, 0),
                wire_ps_per_byte_q16: (8_000_000u64 << 16) / crate::link::link_mbps(profile).max(1),
                wire_overhead_bytes: u64::from(if profile.port.link_layer == LinkLayer::Ethernet {
                    PortConfig::ROCE_V2_HEADER_OVERHEAD_BYTES
                } else {
                    PortConfig::IB_HEADER_OVERHEAD_BYTES
                }),
            })
            .collect();
        let fabric = build_fabric(&config);
        Self {
            fabric,
            drops: Vec::new(),
            live_timers: 0,
            rnr_parked: Vec::new(),
            run_from: None,
            stop_epoch: 0,
            access_causes: exec::CauseRing::default(),
            time_limit: None,
            timer_seq: 0,
            dc: dc::DcState::new(config.seed),
            cm: cm::Cm::default(),
            ext: ext::ExtState::default(),
            rqpn: reserved_qpn::ReservedQpns::default(),
            rng_rkey: SimRng::new(config.seed, Stream::RkeyAlloc),
            rng_adapter: SimRng::new(config.seed, Stream::Adapter),
            trace: Trace::new(config.trace_enabled, config.trace_events_max),
            config,
            now_ns: 0,
            event_tokens: 0,
            devices,
            contexts: Arena::default(),
            pds: Arena::default(),
            cqs: Arena::default(),
            channels: Arena::default(),
            mrs: Arena::default(),
            srqs: Arena::default(),
            qps: Arena::default(),
            ahs: Arena::default(),
            processes: BTreeMap::new(),
            mr_bytes_total: 0,
            xrc: xrc::XrcState::default(),
        }
    }

    /// The configuration the world was built from.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The root seed.
    pub fn seed(&self) -> u64 {
        self.config.seed
    }

    /// Virtual time in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Moves virtual time forward by `ns`, processing every event due by
    /// then. False if the event bound was hit first (a livelock); time has
    /// still moved to where the last event left it. Time stops at
    /// [`TIME_HORIZON_NS`] (`sim advance` past it is refused with `EINVAL`
    /// before this is called).
    pub fn advance_ns(&mut self, ns: u64) -> bool {
        let mut target = self
            .now_ns
            .saturating_add(ns)
            .min(TIME_HORIZON_NS.max(self.now_ns));
        if let Some(limit) = self.time_limit {
            target = target.min(limit.max(self.now_ns));
        }
        let done = self.run_events(Some(target), state::RUN_EVENT_BUDGET, |_| false);
        if done {
            self.now_ns = self.now_ns.max(target);
        }
        done
    }

    /// When the next scheduled event (a delivery or a timer) is due, in
    /// virtual nanoseconds; `None` when nothing is scheduled.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.fabric.next_event_time().map(|t| t.as_nanos())
    }

    /// Caps virtual time: no event due after `limit` ns runs, not even
    /// inside a verb that would otherwise run the world until it has its
    /// answer (`poll_cq` on an empty CQ). `None` (the default) lets verbs
    /// run the world freely. The shared fabric sets it to the wall-clock
    /// time since it started, so that timers (retransmission, RNR, CM)
    /// take as long as they would on a wire while the other processes
    /// catch up.
    pub fn set_time_limit(&mut self, limit: Option<u64>) {
        self.time_limit = limit;
    }

    /// Runs the packets in flight due by `limit` at once, beyond the time
    /// limit ([`World::set_time_limit`]) if need be, and stops at the first
    /// timer past that limit (a timer is never run early, and nothing
    /// after it runs before it). Virtual time is left at the last event
    /// run, not moved to `limit`. False if the event bound was hit first.
    ///
    /// The shared fabric calls this after catching up with the wall clock:
    /// a request's packets, their answers and their acknowledgements are
    /// handled when the request is posted, instead of the fabric waiting
    /// out each wire latency on the wall clock, while retransmission, RNR
    /// and moderation timers still take their real duration.
    pub fn run_packets_until(&mut self, limit: u64) -> bool {
        let cap = self.time_limit.unwrap_or(self.now_ns).max(self.now_ns);
        let saved = self.time_limit.replace(limit.max(cap));
        let done = self.run_events(Some(limit.max(cap)), state::RUN_EVENT_BUDGET, |w| {
            w.fabric.next_event_is_timer()
                && w.fabric
                    .next_event_time()
                    .is_some_and(|t| t.as_nanos() > cap)
        });
        self.time_limit = saved;
        done
    }

    /// The trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The trace, writable (for the fabric to append its events).
    pub fn trace_mut(&mut self) -> &mut Trace {
        &mut self.trace
    }

    /// Appends an event at the current virtual time.
    #[inline]
    pub(crate) fn record(&mut self, event: TraceEvent) {
        let now = self.now_ns;
        self.trace.push(now, event);
    }

    /// The number of simulated devices.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// The profile of device `index`.
    pub fn device_profile(&self, index: usize) -> Option<&DeviceProfile> {
        self.devices.get(index).map(|d| &d.profile)
    }

    /// How many MR slots are in use: registered MRs, plus MRs deregistered
    /// under posted requests and kept until those are released.
    pub fn mr_slots_in_use(&self) -> usize {
        self.mrs.len()
    }

    /// How many QPs exist.
    pub fn qp_count(&self) -> usize {
        self.qps.len()
    }

    /// The QP with number `qpn` on `device` (O(1)).
    pub fn qp_by_num(&self, device: u32, qpn: u32) -> Option<QpHandle> {
        let d = self.devices.get(device as usize)?;
        let index = d.qpns.get(qpn & 0xff_ffff)?;
        self.qps
            .get_by_index(index)
            .map(|(generation, _)| QpHandle { index, generation })
    }

    /// `EINVAL` unless `owner` is `ctx`: the kernel resolves every handle
    /// in a command through the calling uverbs file, so a PD, CQ, SRQ or
    /// XRCD of another context (even of the same device) is unknown there
    /// (issue #12 item 5).
    pub(crate) fn same_ctx(
        &self,
        verb: Verb,
        what: &str,
        owner: ContextHandle,
        ctx: ContextHandle,
    ) -> Result<()> {
        if owner == ctx {
            Ok(())
        } else {
            Err(invalid(
                verb,
                format!("the {what} belongs to another device context ({owner:?}, not {ctx:?})"),
            ))
        }
    }

    /// The context an SRQ was made through (its PD's).
    pub(crate) fn srq_ctx(&self, srq: SrqHandle, verb: Verb) -> Result<ContextHandle> {
        let pd = self.srq(srq, verb)?.pd;
        Ok(self.pd(pd, verb)?.ctx)
    }

    lookup!(ctx, ctx_mut, contexts, ContextHandle, Context, "context");
    lookup!(pd, pd_mut, pds, PdHandle, Pd, "PD");
    lookup!(cq, cq_mut, cqs, CqHandle, Cq, "CQ");
    lookup!(
        channel,
        channel_mut,
        channels,
        CompChannelHandle,
        CompChannel,
        "completion channel"
    );
    lookup!(mr, mr_mut, mrs, MrHandle, Mr, "MR");
    lookup!(srq, srq_mut, srqs, SrqHandle, Srq, "SRQ");
    lookup!(qp, qp_mut, qps, QpHandle, Qp, "QP");
    lookup!(
        #[allow(dead_code)]
        ah,
        ah_mut,
        ahs,
        AhHandle,
        Ah,
        "AH"
    );

    pub(crate) fn device(&self, index: u32) -> &Device {
        &self.devices[index as usize]
    }

    // ------------------------------------------------------------ QP numbers

    /// Allocates the next free QP number of `device`: cyclic from the
    /// configured start, 24-bit, never 0 or 1, skipping live numbers
    /// (create-qp.md §7).
    pub(crate) fn alloc_qpn(&mut self, device: u32, qp_index: u32) -> Option<u32> {
        let d = &mut self.devices[device as usize];
        for _ in 0..=0xff_ffffu32 {
            let candidate = d.next_qpn & 0xff_ffff;
            d.next_qpn = (candidate + 1) & 0xff_ffff;
            if candidate <= 1 || d.qpns.get(candidate).is_some() {
                continue;
            }
            d.qpns.set(candidate, qp_index);
            return Some(candidate);
        }
        None
    }

    pub(crate) fn free_qpn(&mut self, device: u32, qpn: u32) {
        self.devices[device as usize].qpns.clear(qpn);
    }

    // ------------------------------------------------------------- processes

    /// Reserves `length` bytes of page-aligned virtual addresses in `process`.
    pub(crate) fn alloc_va(&mut self, process: ProcessId, length: u64) -> u64 {
        let p = self
            .processes
            .entry(process)
            .or_insert(Process { next_va: VA_BASE });
        let addr = p.next_va;
        let pages = length.div_ceil(PAGE_SIZE).max(1);
        // One unmapped guard page between regions.
        p.next_va = p.next_va.saturating_add((pages + 1) * PAGE_SIZE);
        addr
    }
}
