//! Execution of posted work requests over the fabric (data-path.md §2–§7):
//! the requester (transmission, ACK/NAK handling, go-back-N retransmission,
//! RNR waits, `max_rd_atomic`, FENCE), the responder (PSN checks, receive
//! WQE consumption, placement, READ responses, atomics with replay of
//! duplicates) and the event loop that drives both in virtual time.
//!
//! Everything here is driven by three inputs: a post (which transmits at
//! the current virtual time), a fabric event (a packet delivered, a timer
//! due) and a state change. Decisions are the pure rules of
//! [`crate::datapath`]; this module only moves bytes and state.
//!
//! Payload is copied once, at the receiving end, straight from the source
//! MR to the destination MR ([`copy_extents`]): a packet carries the
//! requester's work-request number (its cookie) and the offset of its
//! payload in the message, and the responder reads the bytes from the
//! requester's gather list (or its inline copy) when the packet arrives. A
//! reliable requester keeps the work request until it is acknowledged, so
//! the bytes are there; an unreliable one completes it only once its last
//! packet has arrived or been dropped (so the same holds), which is the
//! one timing divergence this design brings (see `docs/divergence.md`).

use verbs_api::{
    AccessFlags, AsyncEventType, FlushInfo, LinkLayer, QpClass, QpState, SendFlags, Sge, Wc,
    WcFlags, WcOpcode, WcStatus, WrOpcode,
};

use super::cq::{CqEntry, QueueKind};
use super::post::transport_of;
use super::qp::{Bound, QpPhase};
use super::queues::Exec;
use super::{Mr, World};
use crate::arena::Arena;
use crate::datapath::{
    apply_atomic, check_invalidate, check_local_sges, check_remote, check_requester_local,
    error_outcome, opcode_info, requester_byte_len, requester_wc_flags, scatter_plan, AtomicOp,
    ErrorScenario, MrLookup, MrView, OpClass, QpFate, RemoteOp, RemoteRequest, ResponderView,
    RetryCounters, RetryVerdict, Transport, UD_GRH_BYTES,
};
use crate::fabric::{
    packet_count, segment, AckSyndrome, Address, DeviceIndex, Endpoint, FabricEvent, FabricTrace,
    FabricTraceSink, FaultRule, Opcode, Packet, PacketFlags, Psn, RuleScope, SimInstant,
    TimerEvent, TimerKind,
};
use crate::handles::{QpHandle, SrqHandle};
use crate::profile::DriverModel;
use crate::trace::{Trace, TraceEvent};

/// Most events one `ibv_poll_cq` call processes while waiting for a
/// completion (an endless RNR retry loop must not hang a poll).
pub(crate) const POLL_EVENT_BUDGET: u64 = 200_000;

/// Most events `RunUntilIdle` and `AdvanceNs` process in one call.
pub(crate) const RUN_EVENT_BUDGET: u64 = 50_000_000;

/// Atomic results a responder keeps to answer duplicate atomics without
/// executing them again (data-path §5.2 "answered from the saved result").
const ATOMIC_REPLAY: usize = 16;

/// An unsignalled stream of requests asks for an ACK at least once per this
/// many PSNs.
const ACK_EVERY: u32 = 64;

/// Most SGEs on either side of a copy (devices allow at most 32).
pub(super) const EXTENTS_MAX: usize = 32;

/// A destination that resolves to nothing: the fabric drops packets to it
/// as unroutable.
const NOWHERE: Endpoint = Endpoint {
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

/// A piece of a copy: `len` bytes at `off` in MR arena slot `mr`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Extent {
    pub(super) mr: u32,
    pub(super) off: usize,
    pub(super) len: usize,
}

/// The MRs of one device, as the datapath rules see them.
pub(crate) struct DevMrs<'a> {
    pub(crate) mrs: &'a Arena<Mr>,
    pub(crate) device: u32,
}

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

impl MrLookup for DevMrs<'_> {
    fn by_lkey(&self, lkey: u32) -> Option<MrView> {
        let (_, m) = self.mrs.get_by_index(lkey >> 8)?;
        (m.lkey == lkey && m.device == self.device).then(|| mr_view(m))
    }

    fn by_rkey(&self, rkey: u32) -> Option<MrView> {
        let (_, m) = self.mrs.get_by_index(rkey >> 8)?;
        (m.rkey == rkey && m.device == self.device).then(|| mr_view(m))
    }
}

/// The pieces of MR memory that bytes `[off, off + len)` of the stream an
/// SGE list describes occupy (skipping zero-length SGEs). `None` if an SGE
/// names no MR of `device` or leaves its MR.
pub(super) fn extents(
    sges: &[Sge],
    mrs: &Arena<Mr>,
    device: u32,
    mut off: u64,
    mut len: u64,
    out: &mut [Extent],
) -> Option<usize> {
    let mut n = 0;
    for sge in sges {
        if len == 0 {
            break;
        }
        let sl = u64::from(sge.length);
        if off >= sl {
            off -= sl;
            continue;
        }
        let take = (sl - off).min(len);
        let (_, m) = mrs.get_by_index(sge.lkey >> 8)?;
        if m.lkey != sge.lkey || m.device != device {
            return None;
        }
        let view = mr_view(m);
        let mr_off = view.offset_of(sge.addr + off, take)?;
        if n == out.len() {
            return None;
        }
        out[n] = Extent {
            mr: sge.lkey >> 8,
            off: mr_off as usize,
            len: take as usize,
        };
        n += 1;
        len -= take;
        off = 0;
    }
    (len == 0).then_some(n)
}

/// Copies the bytes of `src` into `dst` (both lists cover the same number
/// of bytes), MR to MR, without a bounce buffer.
pub(super) fn copy_extents(mrs: &mut Arena<Mr>, src: &[Extent], dst: &[Extent]) {
    let (mut si, mut di) = (0, 0);
    let (mut so, mut d_o) = (0usize, 0usize);
    while si < src.len() && di < dst.len() {
        let s = src[si];
        let d = dst[di];
        let n = (s.len - so).min(d.len - d_o);
        if s.mr == d.mr {
            if let Some((_, m)) = mrs.get_by_index_mut(s.mr) {
                m.bytes.copy_within(s.off + so..s.off + so + n, d.off + d_o);
            }
        } else if let Some((sm, dm)) = mrs.pair_by_index_mut(s.mr, d.mr) {
            let src = s.off + so..s.off + so + n;
            let dst = d.off + d_o..d.off + d_o + n;
            if sm.bytes.is_external() || dm.bytes.is_external() {
                // Two MRs over the caller's memory may overlap: never hold
                // both views at once.
                let bounce = sm.bytes[src].to_vec();
                dm.bytes[dst].copy_from_slice(&bounce);
            } else {
                dm.bytes[dst].copy_from_slice(&sm.bytes[src]);
            }
        }
        so += n;
        d_o += n;
        if so == s.len {
            si += 1;
            so = 0;
        }
        if d_o == d.len {
            di += 1;
            d_o = 0;
        }
    }
}

/// Copies `bytes` into `dst`.
fn copy_bytes(mrs: &mut Arena<Mr>, mut bytes: &[u8], dst: &[Extent]) {
    for d in dst {
        if bytes.is_empty() {
            break;
        }
        let n = d.len.min(bytes.len());
        if let Some((_, m)) = mrs.get_by_index_mut(d.mr) {
            m.bytes[d.off..d.off + n].copy_from_slice(&bytes[..n]);
        }
        bytes = &bytes[n..];
    }
}

/// The world's fabric trace sink: records into the trace, and remembers
/// dropped unreliable requests so their senders can complete.
pub(crate) struct Sink<'a> {
    pub(crate) trace: &'a mut Trace,
    pub(crate) drops: &'a mut Vec<Packet>,
}

impl FabricTraceSink for Sink<'_> {
    #[inline]
    fn record(&mut self, record: FabricTrace) {
        if let FabricTrace::Dropped { packet, .. } = record {
            if packet.opcode.is_request() && packet.opcode.ends_message() {
                self.drops.push(packet);
            }
        }
        self.trace
            .push(record.at().as_nanos(), TraceEvent::Packet(record));
    }
}

/// A short name of a condition a receiver drops a message for.
const fn scenario_name(s: ErrorScenario) -> &'static str {
    match s {
        ErrorScenario::NoRecvWqe => "no receive WQE",
        ErrorScenario::RecvTooSmall => "receive WQE too small",
        ErrorScenario::RecvSgeInvalid => "receive SGE invalid",
        ErrorScenario::RemoteAccess => "remote access violation",
        ErrorScenario::ResponderQpAccess => "QP access flags",
        ErrorScenario::AtomicMisaligned => "misaligned atomic",
        ErrorScenario::SendInvalidateBadRkey => "invalidate rkey invalid",
        _ => "responder error",
    }
}

/// The NAK syndrome a requester status travels as (IBTA §9.7.5.2.2).
fn nak_of(status: WcStatus) -> AckSyndrome {
    match status {
        WcStatus::RemAccessErr => AckSyndrome::RemoteAccessError,
        WcStatus::RemOpErr => AckSyndrome::RemoteOperationalError,
        _ => AckSyndrome::InvalidRequest,
    }
}

/// The requester status a NAK syndrome completes with.
fn status_of(nak: AckSyndrome) -> WcStatus {
    match nak {
        AckSyndrome::RemoteAccessError => WcStatus::RemAccessErr,
        AckSyndrome::RemoteOperationalError => WcStatus::RemOpErr,
        _ => WcStatus::RemInvReqErr,
    }
}

/// True in the states whose responder accepts packets.
pub(super) fn receives(state: QpState, transport: Transport) -> bool {
    match state {
        QpState::ReadyToReceive | QpState::ReadyToSend | QpState::SendQueueDrain => true,
        QpState::SendQueueError => transport.is_unreliable(),
        _ => false,
    }
}

impl World {
    // ------------------------------------------------------------ plumbing

    fn instant(&self) -> SimInstant {
        SimInstant::from_nanos(self.now_ns)
    }

    /// True while anything can still happen without a new input: packets
    /// on the wire or an armed retransmission/RNR timer.
    pub(crate) fn busy(&self) -> bool {
        self.fabric.in_flight() > 0 || self.live_timers > 0
    }

    /// The live QP at `ep`, if any.
    pub(super) fn qp_at(&self, ep: Endpoint) -> Option<QpHandle> {
        let d = self.devices.get(usize::from(ep.device.0))?;
        let index = d.qpns.get(ep.qpn)?;
        let (generation, q) = self.qps.get_by_index(index)?;
        (q.qp_num == ep.qpn && q.device == u32::from(ep.device.0))
            .then_some(QpHandle { index, generation })
    }

    /// Hands `packet` to the fabric now.
    pub(super) fn wire(&mut self, packet: Packet) {
        let now = self.now_ns;
        self.wire_at(packet, now);
    }

    /// Puts `packet` on the fabric, leaving the adapter at `depart_ns`
    /// (the adapter model's delays; `now` without one).
    pub(super) fn wire_at(&mut self, packet: Packet, depart_ns: u64) {
        let now = self.instant();
        let depart = SimInstant::from_nanos(depart_ns.max(now.as_nanos()));
        let Self {
            fabric,
            trace,
            drops,
            ..
        } = self;
        // A full event queue loses the packet, as congestion would; the
        // sender's reliability (or its absence) takes it from there.
        let _ = fabric.send_at(now, depart, packet, &mut Sink { trace, drops });
        self.settle_drops();
    }

    /// Completes unreliable requests whose last packet the fabric dropped.
    #[inline]
    fn settle_drops(&mut self) {
        if !self.drops.is_empty() {
            self.settle_drops_slow();
        }
    }

    #[inline(never)]
    fn settle_drops_slow(&mut self) {
        let mut drops = core::mem::take(&mut self.drops);
        for p in drops.drain(..) {
            self.unreliable_departed(&p);
        }
        if self.drops.is_empty() {
            self.drops = drops;
        }
    }

    fn schedule(&mut self, at: u64, kind: TimerKind, owner: u32, generation: u32) {
        let _ = self.fabric.schedule_timer(
            SimInstant::from_nanos(at),
            TimerEvent {
                kind,
                owner,
                generation,
            },
        );
    }

    fn next_timer_gen(&mut self) -> u32 {
        self.timer_seq = self.timer_seq.wrapping_add(1);
        self.timer_seq
    }

    // ---------------------------------------------------------- event loop

    /// Processes events in time order until `stop` holds, nothing is left
    /// to do, the next event is past `horizon`, or `budget` events ran.
    /// Returns false when the budget ran out first.
    pub(crate) fn run_events(
        &mut self,
        horizon: Option<u64>,
        budget: u64,
        mut stop: impl FnMut(&Self) -> bool,
    ) -> bool {
        let mut n = 0u64;
        loop {
            if stop(self) {
                return true;
            }
            let Some(next) = self.fabric.next_event_time() else {
                return true;
            };
            let next = next.as_nanos();
            if horizon.is_some_and(|h| next > h) {
                return true;
            }
            if horizon.is_none() && !self.busy() {
                return true;
            }
            if n >= budget {
                return false;
            }
            n += 1;
            let at = SimInstant::from_nanos(next.max(self.now_ns));
            let Self {
                fabric,
                trace,
                drops,
                ..
            } = self;
            let popped = fabric.pop_due(at, &mut Sink { trace, drops });
            self.now_ns = self.now_ns.max(next);
            self.settle_drops();
            if let Some((t, event)) = popped {
                self.now_ns = self.now_ns.max(t.as_nanos());
                self.on_event(event);
                // The rest of an in-order message in one step (world/run.rs).
                if let FabricEvent::Delivered(p) = event {
                    if let Opcode::Send(pos) | Opcode::RdmaWrite(pos) = p.opcode {
                        if !pos.ends_message() {
                            n += self.absorb_run(&p, horizon, budget - n, &mut stop);
                        }
                    }
                }
            }
        }
    }

    /// Packets the fabric has put on the wire so far, every port together
    /// (retransmissions included): the unit of `sim_fault_overhead`'s
    /// per-packet cost.
    pub fn packets_sent(&self) -> u64 {
        self.fabric.packets_sent()
    }

    /// Events the fabric has handed to the world so far (deliveries and
    /// timers): the unit of `sim_scale`'s event rate.
    pub fn events_handled(&self) -> u64 {
        self.fabric.events_handled()
    }

    /// The heap bytes the simulator holds for `qp`, as `(own, rings)`:
    /// `own` is its slot in the QP arena, what it owns out of line apart
    /// from its work-queue rings (multicast list, alternate path, atomic
    /// replay table, SRQ SGE buffer) and its entry in the device's
    /// QP-number table; `rings` is its send and receive rings' storage
    /// (perf.md's `sim_scale`: at most 2 KiB per idle QP plus its rings).
    /// Accounted from sizes and capacities, like
    /// [`World::dct_heap_bytes`].
    pub fn qp_heap_bytes(&self, qp: QpHandle) -> Option<(usize, usize)> {
        let q = self.qps.get(qp.index, qp.generation)?;
        let own = self.qps.slot_bytes()
            + q.mcast.heap_bytes()
            + q.alt
                .as_ref()
                .map_or(0, |_| size_of::<super::qp::AltPath>())
            + q.rx.heap_bytes()
            + super::QpnTable::ENTRY_BYTES;
        Some((own, q.sq.heap_bytes() + q.rq.heap_bytes()))
    }

    /// `RunUntilIdle`: false if the bound was hit with work left.
    pub fn run_until_idle(&mut self) -> bool {
        self.run_events(None, RUN_EVENT_BUDGET, |_| false)
    }

    /// Installs a fault rule (`SimCommand::Fault`): on every packet, or on
    /// those from (`Some((true, qp))`) or to (`Some((false, qp))`) a QP.
    pub(crate) fn install_fault(
        &mut self,
        scope: Option<(bool, QpHandle)>,
        action: verbs_api::FaultAction,
        when: verbs_api::FaultWhen,
    ) -> verbs_api::Result<()> {
        let v = verbs_api::Verb::SimControl;
        let scope = match scope {
            None => RuleScope::All,
            Some((from, qp)) => {
                let q = self.qp(qp, v)?;
                let (device, qpn) = (DeviceIndex(q.device as u16), q.qp_num);
                if from {
                    RuleScope::From { device, qpn }
                } else {
                    RuleScope::To { device, qpn }
                }
            }
        };
        let rule = FaultRule::new(scope, action, when)
            .map_err(|e| super::invalid(v, format!("fault: {e}")))?;
        self.fabric.install_rule(rule);
        Ok(())
    }

    /// Removes every fault rule (`SimCommand::ClearFaults`).
    pub(crate) fn clear_faults(&mut self) {
        self.fabric.clear_rules();
    }

    /// Takes a port's link down or up (`SimCommand::Link`).
    pub(crate) fn set_link(&mut self, device: u32, port: u8, up: bool) -> verbs_api::Result<()> {
        let v = verbs_api::Verb::SimControl;
        let pr = crate::fabric::PortRef {
            device: DeviceIndex(u16::try_from(device).unwrap_or(u16::MAX)),
            port,
        };
        let now = self.instant();
        let Self {
            fabric,
            trace,
            drops,
            ..
        } = self;
        fabric
            .set_link(now, pr, up, &mut Sink { trace, drops })
            .map_err(|e| super::invalid(v, format!("link: {e}")))?;
        self.settle_drops();
        Ok(())
    }

    fn on_event(&mut self, event: FabricEvent) {
        match event {
            FabricEvent::Delivered(p) => match p.opcode {
                Opcode::Acknowledge(s) => self.on_ack(&p, s),
                Opcode::ReadResponse(_) => self.on_read_response(&p),
                Opcode::AtomicAcknowledge => self.on_atomic_ack(&p),
                _ => {
                    if let Some(sender) = self.on_request(&p) {
                        self.unreliable_done(sender, &p);
                    }
                }
            },
            FabricEvent::Timer(t) => match t.kind {
                TimerKind::AckTimeout => self.on_ack_timer(t),
                TimerKind::RnrRetry => self.on_rnr_timer(t),
                TimerKind::Scheduled => self.cm_timer(t),
                _ => {}
            },
        }
    }

    // ------------------------------------------------------ state changes

    /// The data path's side of a state change (called by `set_state` after
    /// the phase changed and queues were flushed or discarded).
    pub(crate) fn exec_on_state(&mut self, qp: QpHandle, from: QpState, to: QpState) {
        // INIT (and INIT->INIT) concerns neither side of the data path.
        if to == QpState::Init || (to == from && to != QpState::ReadyToSend) {
            return;
        }
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        let device = q.device;
        let (bound, path, req) = q.phase.parts();
        match to {
            QpState::Reset => {
                self.disarm_tx(qp);
                if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                    let srq_sges = core::mem::take(&mut q.rx.srq_sges);
                    // The ring keeps its sequence numbers across RESET (its
                    // slots are discarded, not renumbered): nothing before
                    // the tail is left to transmit.
                    q.tx = Tx {
                        send_seq: q.sq.tail,
                        ..Tx::default()
                    };
                    q.rx = Rx {
                        srq_sges,
                        ..Default::default()
                    };
                }
            }
            QpState::Error | QpState::SendQueueError => {
                if to == QpState::Error {
                    self.disarm_tx(qp);
                    self.flush_rx_message(qp);
                } else {
                    self.disarm_tx(qp);
                    self.flush_queue(qp, QueueKind::Send);
                }
                if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                    q.tx.send_seq = q.sq.tail;
                    q.tx.blocked = false;
                    q.tx.rd_atomic = 0;
                }
            }
            QpState::ReadyToReceive if from != QpState::ReadyToReceive => {
                let (b, p) = (bound.unwrap_or_default(), path.unwrap_or_default());
                let src = self.endpoint_of(device, q.qp_num, b);
                let class = q.class;
                let port_mtu = self.devices[device as usize].profile.port.active_mtu;
                let (dest, mtu) = match class {
                    QpClass::Ud => (NOWHERE, port_mtu.bytes().unwrap_or(4096)),
                    _ => {
                        let addr = if p.ah.is_global {
                            Address::Gid(p.ah.grh.dgid)
                        } else {
                            Address::Lid(p.ah.dlid)
                        };
                        let dest = self.fabric.resolve(&addr).map_or(NOWHERE, |port| Endpoint {
                            qpn: p.dest_qpn & 0xff_ffff,
                            device: port.device,
                            port: port.port,
                        });
                        (dest, p.path_mtu.bytes().unwrap_or(4096))
                    }
                };
                // A fresh timer generation: events queued by an earlier life
                // of this QP slot never match.
                let generation = self.next_timer_gen();
                let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
                q.tx.ack_gen = generation;
                q.tx.ack_queued = false;
                q.rx.epsn = Psn::new(p.rq_psn);
                q.rx.nak_sent = false;
                q.rx.msg = RxMsg::default();
                q.tx.src = src;
                q.tx.dest = dest;
                q.tx.mtu = mtu;
            }
            QpState::ReadyToSend => {
                let r = req.unwrap_or_default();
                let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
                if from == QpState::ReadyToReceive {
                    q.tx.next_psn = Psn::new(r.sq_psn);
                    q.tx.send_seq = q.sq.done;
                }
                q.tx.retry = RetryCounters::new(r.retry_cnt, r.rnr_retry);
                q.tx.blocked = false;
                self.kick(qp);
            }
            QpState::SendQueueDrain => {
                if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                    q.tx.retry = RetryCounters::new(
                        req.map_or(0, |r| r.retry_cnt),
                        req.map_or(0, |r| r.rnr_retry),
                    );
                }
                self.check_drained(qp);
            }
            _ => {}
        }
    }

    /// True while a QP in SQD still has transmitted requests outstanding
    /// (entering SQD raises SQ_DRAINED only after they finish).
    pub(crate) fn sq_in_flight(&self, qp: QpHandle) -> bool {
        self.qps
            .get(qp.index, qp.generation)
            .is_some_and(|q| q.sq.done < q.sq.tail && q.sq.get(q.sq.done).0.transmitted)
    }

    /// SQD: once nothing transmitted is outstanding, the drain is over
    /// (SQ_DRAINED if `en_sqd_async_notify`, qp-state-machine.md §7).
    fn check_drained(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if let QpPhase::SendQueueDrain(b, p, r, true) = q.phase {
            // Transmission is in order: nothing in flight when the oldest
            // uncompleted request was never transmitted (or there is none).
            if q.sq.done >= q.sq.tail || !q.sq.get(q.sq.done).0.transmitted {
                q.phase = QpPhase::SendQueueDrain(b, p, r, false);
                let ctx = q.ctx;
                if r.en_sqd_async_notify {
                    self.raise_async(ctx, AsyncEventType::SqDrained, super::AsyncSubject::Qp(qp));
                }
            }
        }
    }

    fn endpoint_of(&self, device: u32, qpn: u32, b: Bound) -> Endpoint {
        Endpoint {
            qpn,
            device: DeviceIndex(device as u16),
            port: b.port_num.max(1),
        }
    }

    /// Before a QP is destroyed: its timers stop counting as live work.
    pub(crate) fn exec_on_destroy(&mut self, qp: QpHandle) {
        self.disarm_tx(qp);
    }

    fn disarm_tx(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let mut n = 0;
        if q.tx.ack_deadline.take().is_some() {
            n += 1;
        }
        if core::mem::take(&mut q.tx.rnr_wait) {
            // A parked RNR wait has no timer (`unpark_rnr`).
            if let Some(i) = self.rnr_parked.iter().position(|&p| p == qp) {
                self.rnr_parked.remove(i);
            } else {
                n += 1;
            }
        }
        self.live_timers -= n;
    }

    /// Entering ERR with an SRQ receive WQE half-filled: it completes with
    /// WR_FLUSH_ERR (an RQ one is flushed with the rest of the RQ).
    fn flush_rx_message(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let msg = core::mem::take(&mut q.rx.msg);
        if let Some(recv) = msg.recv {
            if recv.srq.is_some() {
                let wc = Wc {
                    wr_id: recv.wr_id,
                    status: WcStatus::WrFlushErr,
                    opcode: WcOpcode::Recv,
                    qp_num: q.qp_num,
                    ..Wc::default()
                };
                self.complete_recv(qp, recv, wc, false);
            }
        }
    }

    // ----------------------------------------------------------- requester

    /// Transmits what the send queue allows: called after a post, on
    /// entering RTS, after progress and when an RNR wait ends.
    pub(crate) fn kick(&mut self, qp: QpHandle) {
        loop {
            // DCI: per-request target and streams (world/dc.rs).
            match self.dc_gate(qp) {
                super::dc::Gate::Go => {}
                super::dc::Gate::Stop => return,
                super::dc::Gate::Again => continue,
            }
            let Some(q) = self.qps.get(qp.index, qp.generation) else {
                return;
            };
            let state = q.phase.state();
            let seq = q.tx.send_seq;
            if seq >= q.sq.tail || q.tx.blocked || q.tx.rnr_wait {
                return;
            }
            let (w, sges, _) = q.sq.get(seq);
            let w = *w;
            // SQD: requests already transmitted once may be retransmitted,
            // nothing new starts.
            let may_send = state == QpState::ReadyToSend
                || (state == QpState::SendQueueDrain && w.transmitted);
            if !may_send {
                return;
            }
            let transport = transport_of(q.class);
            if let Some(status) = w.deferred_error {
                self.fail_local(qp, seq, status);
                return;
            }
            if !w.checked {
                let pd = q.pd.map_or(u32::MAX, |p| p.index);
                let mrs = DevMrs {
                    mrs: &self.mrs,
                    device: q.device,
                };
                let checked = check_requester_local(
                    w.opcode,
                    w.send_flags,
                    transport,
                    &sges[..w.num_sge as usize],
                    &mrs,
                    pd,
                    q.tx.mtu,
                );
                if let Err(scenario) = checked {
                    let out = error_outcome(scenario, transport);
                    let status = out.requester_status.unwrap_or(WcStatus::LocQpOpErr);
                    self.fail_local(qp, seq, status);
                    return;
                }
            }
            let class = opcode_info(w.opcode).map_or(OpClass::Send, |i| i.class);
            let max_rd = q.phase.parts().2.map_or(0, |r| u32::from(r.max_rd_atomic));
            if matches!(class, OpClass::Read | OpClass::Atomic) && q.tx.rd_atomic >= max_rd {
                return;
            }
            if w.send_flags.contains(SendFlags::FENCE) && q.tx.rd_atomic > 0 {
                return;
            }
            // LOCAL_INV and BIND_MW execute in the adapter, no packet
            // (world/ext.rs).
            if matches!(class, OpClass::LocalInvalidate | OpClass::BindMw) {
                self.run_local_op(qp, seq);
                continue;
            }
            self.transmit(qp, seq, transport, class);
        }
    }

    /// A request fails before leaving: it completes in error in order.
    fn fail_local(&mut self, qp: QpHandle, seq: u64, status: WcStatus) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let w = q.sq.get_mut(seq);
        w.exec = Exec::Failed(status);
        w.checked = true;
        q.tx.send_seq = seq + 1;
        q.tx.blocked = true;
        self.complete_sq(qp);
    }

    /// The adapter model's send side for one request (module `adapter`):
    /// when its packets leave. Advances the QP's send engine and the
    /// device's DMA engine; `None` when the profile has no model.
    fn adapter_departure(
        &mut self,
        qp: QpHandle,
        device: u32,
        reads_payload: bool,
        len: u64,
        npkts: u32,
    ) -> Option<Departure> {
        let a = self.devices.get(device as usize)?.profile.adapter;
        if a.is_none() {
            return None;
        }
        let now = self.now_ns;
        let jitter = a.jitter_ns(self.rng_adapter.next_u64());
        let q = self.qps.get_mut(qp.index, qp.generation)?;
        let start = now.max(q.tx.engine_free_ns);
        let ready = start + a.wqe_ns + jitter;
        q.tx.engine_free_ns = start + a.wqe_ns + u64::from(npkts) * a.packet_ns;
        let (first, dma_start) = if reads_payload && len > 0 {
            let fetched = ready + a.payload_fetch_ns;
            let d = &mut self.devices[device as usize];
            let dma_start = fetched.max(d.dma_free_ns);
            d.dma_free_ns = dma_start + a.dma_ns(len);
            (fetched, Some(dma_start))
        } else {
            (ready, None)
        };
        Some(Departure {
            first,
            packet_ns: a.packet_ns,
            dma_start,
            model: a,
        })
    }

    /// Puts request `seq` on the wire.
    fn transmit(&mut self, qp: QpHandle, seq: u64, transport: Transport, class: OpClass) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let now = self.now_ns;
        let (mtu, src, mut dest, psn) = (q.tx.mtu, q.tx.src, q.tx.dest, q.tx.next_psn);
        let ooo = q.dv.ooo;
        let w = q.sq.get_mut(seq);
        let retry = w.transmitted;
        let len = u32::try_from(w.length).unwrap_or(u32::MAX);
        let npkts = match transport {
            Transport::Ud => 1,
            _ => packet_count(len, mtu),
        };
        // A READ sent again resumes at its first missing response
        // (`go_back` kept the count of those received in order): the
        // request carries that PSN and the VA and length advanced by the
        // bytes already placed, as rxe's `req_retry` does for a partly
        // completed READ (drivers/infiniband/sw/rxe/rxe_req.c). Without it
        // a long READ under reordering starts over for ever (issue #12
        // item 1). OOO_DP READs track arrivals out of order and start over.
        let resume = if retry && class == OpClass::Read && !ooo && w.received < npkts {
            w.received
        } else {
            0
        };
        w.psn = psn.value();
        w.npkts = npkts;
        w.exec = Exec::Sent;
        w.checked = true;
        w.transmitted = true;
        w.received = resume;
        let w = *w;
        q.tx.next_psn = psn.add(npkts);
        q.tx.send_seq = seq + 1;
        // ACK coalescing: the last packet asks for an ACK when the request
        // is signalled, when nothing else is queued behind it, or every
        // ACK_EVERY PSNs (an ACK covers every earlier PSN, §5.1).
        let ack_request = w.signaled
            || seq + 1 >= q.sq.tail
            || psn.value() / ACK_EVERY != psn.add(npkts).value() / ACK_EVERY;
        if matches!(class, OpClass::Read | OpClass::Atomic) {
            q.tx.rd_atomic += 1;
        }
        let device = q.device;
        let reads_payload = matches!(class, OpClass::Send | OpClass::Write)
            && !w.send_flags.contains(SendFlags::INLINE);
        let dep = self.adapter_departure(qp, device, reads_payload, u64::from(len), npkts);
        let at = |i: u32, end: u32| dep.map_or(now, |d| d.at(i, end));
        let info = opcode_info(w.opcode);
        let with_imm = info.is_some_and(|i| i.with_imm);
        let with_inv = info.is_some_and(|i| i.with_inv);
        let mut last_flags = if ack_request || retry {
            PacketFlags::ACK_REQUEST
        } else {
            PacketFlags::NONE
        };
        if with_imm {
            last_flags = last_flags | PacketFlags::WITH_IMMEDIATE;
        }
        if with_inv {
            last_flags = last_flags | PacketFlags::WITH_INVALIDATE;
        }
        if w.send_flags.contains(SendFlags::SOLICITED) {
            last_flags = last_flags | PacketFlags::SOLICITED;
        }
        let retry_flag = if retry {
            PacketFlags::RETRY
        } else {
            PacketFlags::NONE
        };
        if transport == Transport::Ud {
            dest = self.ud_destination(w.ah, w.remote_qpn);
            self.wire_at(
                Packet {
                    source: src,
                    destination: dest,
                    psn,
                    opcode: Opcode::UdSend,
                    flags: last_flags | retry_flag,
                    payload_len: len,
                    offset: 0,
                    cookie: seq,
                },
                at(0, len),
            );
            return;
        }
        match class {
            OpClass::Read | OpClass::Atomic => {
                let opcode = match (class, w.opcode) {
                    (OpClass::Read, _) => Opcode::ReadRequest,
                    (_, WrOpcode::AtomicCmpAndSwp) => Opcode::CompareSwap,
                    _ => Opcode::FetchAdd,
                };
                self.wire_at(
                    Packet {
                        source: src,
                        destination: dest,
                        psn: psn.add(resume),
                        opcode,
                        flags: PacketFlags::ACK_REQUEST | retry_flag,
                        payload_len: 0,
                        // A resumed READ asks for the bytes from here on.
                        offset: resume.saturating_mul(mtu),
                        cookie: seq,
                    },
                    at(0, 0),
                );
            }
            _ if npkts > 1 && self.ooo_reliable(qp) => {
                // OOO_DP: the packets leave in a seeded order (world/ooo.rs).
                // ATOMIC_WRITE travels as an 8-byte RDMA WRITE, FLUSH as a
                // zero-length one the responder checks (and places nothing).
                let write = matches!(
                    class,
                    OpClass::Write | OpClass::AtomicWrite | OpClass::Flush
                );
                let template = Packet {
                    source: src,
                    destination: dest,
                    psn,
                    opcode: Opcode::Send(crate::fabric::SegmentPosition::Only),
                    flags: retry_flag,
                    payload_len: 0,
                    offset: 0,
                    cookie: seq,
                };
                let kind = if write {
                    Opcode::RdmaWrite
                } else {
                    Opcode::Send
                };
                self.ooo_wire(template, len, mtu, last_flags, kind, dep);
            }
            _ => {
                // ATOMIC_WRITE travels as an 8-byte RDMA WRITE, FLUSH as a
                // zero-length one the responder checks (and places nothing).
                let write = matches!(
                    class,
                    OpClass::Write | OpClass::AtomicWrite | OpClass::Flush
                );
                for (i, s) in segment(len, mtu).enumerate() {
                    let flags = if s.position.ends_message() {
                        last_flags
                    } else {
                        PacketFlags::NONE
                    };
                    self.wire_at(
                        Packet {
                            source: src,
                            destination: dest,
                            psn: psn.add(i as u32),
                            opcode: if write {
                                Opcode::RdmaWrite(s.position)
                            } else {
                                Opcode::Send(s.position)
                            },
                            flags: flags | retry_flag,
                            payload_len: s.len,
                            offset: s.offset,
                            cookie: seq,
                        },
                        at(i as u32, s.offset + s.len),
                    );
                }
            }
        }
        if transport.is_reliable() {
            self.arm_ack_timer(qp, now);
        }
    }

    /// The endpoint a UD request goes to: its AH resolved on the fabric.
    fn ud_destination(&self, ah: Option<crate::handles::AhHandle>, qpn: u32) -> Endpoint {
        let Some(a) = ah.and_then(|h| self.ahs.get(h.index, h.generation)) else {
            return NOWHERE;
        };
        let addr = if a.attr.is_global {
            Address::Gid(a.attr.grh.dgid)
        } else {
            Address::Lid(a.attr.dlid)
        };
        self.fabric.resolve(&addr).map_or(NOWHERE, |port| Endpoint {
            qpn,
            device: port.device,
            port: port.port,
        })
    }

    fn arm_ack_timer(&mut self, qp: QpHandle, now: u64) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let timeout = q.phase.parts().2.map_or(0, |r| r.timeout);
        let Some(ns) = crate::datapath::ack_timeout_ns(timeout) else {
            return;
        };
        let deadline = now.saturating_add(ns);
        if q.tx.ack_deadline.replace(deadline).is_none() {
            self.live_timers += 1;
        }
        // One queued event per QP: an earlier one re-queues itself at the
        // deadline when it fires.
        if !q.tx.ack_queued {
            q.tx.ack_queued = true;
            let generation = q.tx.ack_gen;
            self.schedule(deadline, TimerKind::AckTimeout, qp.index, generation);
        }
    }

    /// After progress or a retransmission: the ACK timer runs while
    /// anything transmitted is unanswered.
    fn rearm(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        if q.tx.send_seq > q.sq.done && !q.tx.rnr_wait {
            let now = self.now_ns;
            self.arm_ack_timer(qp, now);
        } else if q.tx.ack_deadline.is_some() {
            let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
            q.tx.ack_deadline = None;
            self.live_timers -= 1;
        }
    }

    fn on_ack_timer(&mut self, t: TimerEvent) {
        let Some((generation, q)) = self.qps.get_by_index_mut(t.owner) else {
            return;
        };
        let qp = QpHandle {
            index: t.owner,
            generation,
        };
        if q.tx.ack_gen != t.generation {
            return;
        }
        q.tx.ack_queued = false;
        let Some(deadline) = q.tx.ack_deadline else {
            return;
        };
        if deadline > self.now_ns {
            q.tx.ack_queued = true;
            self.schedule(deadline, TimerKind::AckTimeout, t.owner, t.generation);
            return;
        }
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.tx.ack_deadline = None;
        self.live_timers -= 1;
        if q.tx.send_seq == q.sq.done || q.tx.rnr_wait {
            return;
        }
        let (device, qpn, psn) = (q.device, q.qp_num, q.sq.get(q.sq.done).0.psn);
        match q.tx.retry.on_timeout() {
            RetryVerdict::Retry { .. } => {
                self.record(TraceEvent::Retransmit {
                    device,
                    qpn,
                    psn,
                    cause: "ack timeout",
                });
                self.go_back(qp);
                self.kick(qp);
                self.rearm(qp);
            }
            RetryVerdict::Exhausted(status) => self.fail_outstanding(qp, status),
        }
    }

    fn on_rnr_timer(&mut self, t: TimerEvent) {
        let Some((generation, q)) = self.qps.get_by_index(t.owner) else {
            return;
        };
        if q.tx.rnr_gen != t.generation || !q.tx.rnr_wait {
            return;
        }
        let qp = QpHandle {
            index: t.owner,
            generation,
        };
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.tx.rnr_wait = false;
        self.live_timers -= 1;
        self.kick(qp);
        self.rearm(qp);
    }

    /// Requesters parked in an endless RNR wait retry now: called when a
    /// receive is posted or a QP changes, which could end the wait (a
    /// parked QP that still finds no receive parks again after seven more
    /// RNR NAKs).
    pub(crate) fn unpark_rnr(&mut self) {
        if self.rnr_parked.is_empty() {
            return;
        }
        for qp in core::mem::take(&mut self.rnr_parked) {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                continue;
            };
            if !q.tx.rnr_wait {
                continue;
            }
            q.tx.rnr_wait = false;
            self.kick(qp);
            self.rearm(qp);
        }
    }

    /// The requesters parked in an endless RNR wait, described: what a
    /// poll loop that never ends is waiting for.
    pub fn rnr_stalls(&self) -> Vec<String> {
        self.rnr_parked
            .iter()
            .filter_map(|qp| self.qps.get(qp.index, qp.generation))
            .filter(|q| q.tx.rnr_wait)
            .map(|q| {
                format!(
                    "QP {:#x} of device {} waits for ever for a receive on QP {:#x} of device {}: \
                     RNR NAK seven times in a row with rnr_retry=7 (retry for ever); \
                     post a receive there, or use a finite rnr_retry",
                    q.qp_num, q.device, q.tx.dest.qpn, q.tx.dest.device.0
                )
            })
            .collect()
    }

    /// The oldest outstanding request fails with `status` (retries
    /// exhausted): it completes in error and the QP enters ERR.
    fn fail_outstanding(&mut self, qp: QpHandle, status: WcStatus) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let seq = q.sq.done;
        if seq < q.tx.send_seq {
            q.sq.get_mut(seq).exec = Exec::Failed(status);
            q.tx.blocked = true;
        }
        self.complete_sq(qp);
    }

    /// Go-back-N: every request from the oldest uncompleted one is sent
    /// again (duplicates are re-acknowledged, READs re-read, atomics
    /// answered from the saved result).
    fn go_back(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let first = q.sq.done;
        if first >= q.tx.send_seq {
            return;
        }
        let ooo = q.dv.ooo;
        for s in first..q.tx.send_seq {
            let w = q.sq.get_mut(s);
            // A READ still waiting keeps the responses it has, in order:
            // it is re-issued from the first missing one (`transmit`).
            // Go-back-N gives every request the PSNs it had, so the count
            // still names the same PSNs.
            let partial_read = w.exec == Exec::Sent && w.opcode == WrOpcode::RdmaRead && !ooo;
            if matches!(w.exec, Exec::Sent | Exec::Done) {
                w.exec = Exec::Queued;
            }
            if !partial_read {
                w.received = 0;
            }
        }
        q.tx.next_psn = Psn::new(q.sq.get(first).0.psn);
        q.tx.send_seq = first;
        q.tx.rd_atomic = 0;
        self.ooo_forget_reads(qp);
    }

    /// Marks SEND/WRITE requests whose last PSN is at or before `psn`
    /// (`inclusive`) or before it as acknowledged; stops at the first one
    /// still waiting (a READ or atomic without its response).
    fn acknowledge(&mut self, qp: QpHandle, psn: Psn, inclusive: bool) -> bool {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return false;
        };
        let mut progress = false;
        let mut s = q.sq.done;
        while s < q.tx.send_seq {
            let w = q.sq.get_mut(s);
            if w.exec == Exec::Done {
                s += 1;
                continue;
            }
            if w.exec != Exec::Sent {
                break;
            }
            let class = opcode_info(w.opcode).map_or(OpClass::Send, |i| i.class);
            let last = Psn::new(w.psn).add(w.npkts.max(1) - 1);
            let covered = if inclusive {
                !last.is_ahead_of(psn)
            } else {
                psn.is_ahead_of(last)
            };
            if !covered || matches!(class, OpClass::Read | OpClass::Atomic) {
                break;
            }
            w.exec = Exec::Done;
            progress = true;
            s += 1;
        }
        if progress {
            q.tx.retry.on_progress();
        }
        progress
    }

    /// The request at or after `sq.done` whose PSN range holds `psn`.
    fn wqe_with_psn(&self, qp: QpHandle, psn: Psn) -> Option<u64> {
        let q = self.qps.get(qp.index, qp.generation)?;
        (q.sq.done..q.tx.send_seq).find(|&s| {
            let w = q.sq.get(s).0;
            let first = Psn::new(w.psn);
            psn.distance_from(first) < w.npkts.max(1)
        })
    }

    /// A requester QP able to take responses: alive, reliable, sending.
    fn requester_for(&self, p: &Packet) -> Option<QpHandle> {
        let qp = self.qp_at(p.destination)?;
        let q = self.qps.get(qp.index, qp.generation)?;
        let ok = matches!(
            q.phase.state(),
            QpState::ReadyToSend | QpState::SendQueueDrain
        ) && transport_of(q.class).is_reliable()
            && q.tx.dest.qpn == p.source.qpn
            && q.tx.dest.device == p.source.device;
        ok.then_some(qp)
    }

    fn on_ack(&mut self, p: &Packet, syndrome: AckSyndrome) {
        let Some(qp) = self.requester_for(p) else {
            return;
        };
        match syndrome {
            AckSyndrome::Ack => {
                self.acknowledge(qp, p.psn, true);
            }
            AckSyndrome::RnrNak { timer } => {
                self.acknowledge(qp, p.psn, false);
                self.complete_sq(qp);
                let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                    return;
                };
                if q.sq.done >= q.tx.send_seq || q.tx.rnr_wait {
                    return;
                }
                let (device, qpn) = (q.device, q.qp_num);
                match q.tx.retry.on_rnr_nak(timer) {
                    RetryVerdict::Retry { delay_ns } => {
                        self.record(TraceEvent::Retransmit {
                            device,
                            qpn,
                            psn: p.psn.value(),
                            cause: "RNR NAK",
                        });
                        self.go_back(qp);
                        let until = self.now_ns.saturating_add(delay_ns);
                        let generation = self.next_timer_gen();
                        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
                        q.tx.rnr_wait = true;
                        q.tx.rnr_gen = generation;
                        if q.tx.ack_deadline.take().is_some() {
                            self.live_timers -= 1;
                        }
                        if q.tx.retry.rnr_stalled() {
                            // rnr_retry=7 and no receive for seven tries:
                            // park instead of spinning (rnr_stalls).
                            let peer = q.tx.dest;
                            self.rnr_parked.push(qp);
                            self.record(TraceEvent::RnrStalled {
                                device,
                                qpn,
                                peer_device: u32::from(peer.device.0),
                                peer_qpn: peer.qpn,
                            });
                            return;
                        }
                        self.live_timers += 1;
                        self.schedule(until, TimerKind::RnrRetry, qp.index, generation);
                        return;
                    }
                    RetryVerdict::Exhausted(status) => {
                        self.fail_outstanding(qp, status);
                        return;
                    }
                }
            }
            AckSyndrome::PsnSequenceError => {
                self.acknowledge(qp, p.psn, false);
                self.complete_sq(qp);
                let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                    return;
                };
                if q.sq.done >= q.tx.send_seq {
                    return;
                }
                let oldest = Psn::new(q.sq.get(q.sq.done).0.psn);
                if p.psn.is_behind(oldest) || !p.psn.is_behind(q.tx.next_psn) {
                    return; // stale NAK from before a rewind
                }
                let (device, qpn) = (q.device, q.qp_num);
                match q.tx.retry.on_timeout() {
                    RetryVerdict::Retry { .. } => {
                        self.record(TraceEvent::Retransmit {
                            device,
                            qpn,
                            psn: p.psn.value(),
                            cause: "PSN sequence error NAK",
                        });
                        self.go_back(qp);
                        self.kick(qp);
                    }
                    RetryVerdict::Exhausted(status) => {
                        self.fail_outstanding(qp, status);
                        return;
                    }
                }
            }
            nak => {
                self.acknowledge(qp, p.psn, false);
                if let Some(seq) = self.wqe_with_psn(qp, p.psn) {
                    let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
                    if q.sq.get(seq).0.exec == Exec::Sent {
                        q.sq.get_mut(seq).exec = Exec::Failed(status_of(nak));
                        q.tx.blocked = true;
                    }
                }
            }
        }
        self.complete_sq(qp);
        self.kick(qp);
        self.rearm(qp);
    }

    fn on_read_response(&mut self, p: &Packet) {
        let Some(qp) = self.requester_for(p) else {
            return;
        };
        let seq = p.cookie;
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        if seq < q.sq.done || seq >= q.tx.send_seq {
            return;
        }
        let w = *q.sq.get(seq).0;
        if w.exec != Exec::Sent || !matches!(w.opcode, WrOpcode::RdmaRead) {
            return;
        }
        let ooo = self.ooo_read_response(qp, p);
        if ooo == Some(false) {
            return;
        }
        if ooo.is_none() && p.psn != Psn::new(w.psn).add(w.received) {
            return; // out of order: the timer retries the READ
        }
        if self.landing_fails(qp, seq) {
            return;
        }
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        let sges = q.sq.get(seq).1;
        // Place the response: responder MR (by rkey) → local SGEs.
        let device = q.device;
        let sges = &sges[..w.num_sge as usize];
        let (mut one, mut many);
        let dst: &mut [Extent] = if sges.len() <= 1 {
            one = [Extent::default(); 1];
            &mut one
        } else {
            many = [Extent::default(); EXTENTS_MAX];
            &mut many
        };
        let nd = extents(
            sges,
            &self.mrs,
            device,
            u64::from(p.offset),
            u64::from(p.payload_len),
            dst,
        );
        // A zero-length READ names no memory (data-path §3.3).
        let src = if p.payload_len == 0 {
            Some(Extent::default())
        } else {
            self.remote_extent(
                u32::from(p.source.device.0),
                w.rdma.rkey,
                w.rdma.remote_addr + u64::from(p.offset),
                u64::from(p.payload_len),
            )
        };
        match (nd, src) {
            (Some(nd), Some(src)) => {
                copy_extents(&mut self.mrs, &[src], &dst[..nd]);
                if p.payload_len > 0 {
                    self.record(TraceEvent::Placement {
                        device,
                        qpn: p.destination.qpn,
                        offset: p.offset,
                        len: p.payload_len,
                    });
                }
            }
            (None, _) => return,
            // The responder's MR went away since it answered: the response
            // is lost, the timer retries and the responder refuses then.
            (_, None) => return,
        }
        // An answer implies everything before the READ was received.
        self.acknowledge(qp, Psn::new(w.psn), false);
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        // Forward progress (which alone reloads the retry counter) is new
        // data for the oldest request: responses to a later request, or
        // answers repeated by a retry, do not count.
        let oldest = seq == q.sq.done;
        let w = q.sq.get_mut(seq);
        if ooo.is_none() {
            w.received += 1;
        }
        if w.received >= w.npkts {
            w.exec = Exec::Done;
            q.tx.rd_atomic = q.tx.rd_atomic.saturating_sub(1);
        }
        if oldest {
            q.tx.retry.on_progress();
        }
        self.complete_sq(qp);
        self.kick(qp);
        self.rearm(qp);
    }

    /// The landing buffer of a READ or atomic is checked when its response
    /// is scattered, after the responder's checks (data-path §10.3; google
    /// rdma-unit-test: a bad lkey with a bad rkey completes
    /// `REM_ACCESS_ERR`, and an atomic with a bad lkey still executes at the
    /// responder). On failure the request completes `LOC_PROT_ERR` and the
    /// QP leaves service; returns whether it failed.
    fn landing_fails(&mut self, qp: QpHandle, seq: u64) -> bool {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return true;
        };
        let (w, sges, _) = q.sq.get(seq);
        let psn = Psn::new(w.psn);
        let mrs = DevMrs {
            mrs: &self.mrs,
            device: q.device,
        };
        let pd = q.pd.map_or(u32::MAX, |p| p.index);
        if check_local_sges(&sges[..w.num_sge as usize], &mrs, pd, true).is_ok() {
            return false;
        }
        // An answer implies everything before the request was received.
        self.acknowledge(qp, psn, false);
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        if q.sq.get(seq).0.exec == Exec::Sent {
            q.sq.get_mut(seq).exec = Exec::Failed(WcStatus::LocProtErr);
            q.tx.rd_atomic = q.tx.rd_atomic.saturating_sub(1);
            q.tx.blocked = true;
        }
        self.complete_sq(qp);
        self.kick(qp);
        self.rearm(qp);
        true
    }

    fn on_atomic_ack(&mut self, p: &Packet) {
        let Some(qp) = self.requester_for(p) else {
            return;
        };
        let Some(seq) = self.wqe_with_psn(qp, p.psn) else {
            return;
        };
        let q = self.qps.get(qp.index, qp.generation).expect("live");
        let w = *q.sq.get(seq).0;
        if w.exec != Exec::Sent
            || !matches!(
                w.opcode,
                WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
            )
        {
            return;
        }
        if self.landing_fails(qp, seq) {
            return;
        }
        let q = self.qps.get(qp.index, qp.generation).expect("live");
        let sges = &q.sq.get(seq).1[..w.num_sge as usize];
        let (mut one, mut many);
        let dst: &mut [Extent] = if sges.len() <= 1 {
            one = [Extent::default(); 1];
            &mut one
        } else {
            many = [Extent::default(); EXTENTS_MAX];
            &mut many
        };
        if let Some(nd) = extents(sges, &self.mrs, q.device, 0, 8, dst) {
            copy_bytes(&mut self.mrs, &p.cookie.to_le_bytes(), &dst[..nd]);
        }
        self.acknowledge(qp, Psn::new(w.psn), false);
        let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
        q.sq.get_mut(seq).exec = Exec::Done;
        q.tx.rd_atomic = q.tx.rd_atomic.saturating_sub(1);
        // An atomic answered behind an unfinished READ is no progress: the
        // READ still holds the queue (issue #12 item 1).
        if seq == q.sq.done {
            q.tx.retry.on_progress();
        }
        self.complete_sq(qp);
        self.kick(qp);
        self.rearm(qp);
    }

    /// `len` bytes at `addr` of the MR `rkey` names on `device`.
    fn remote_extent(&self, device: u32, rkey: u32, addr: u64, len: u64) -> Option<Extent> {
        // An MW rkey names a window of an MR (world/ext.rs).
        if let Some(t) = self.mw_target(device, rkey, None) {
            let (view, slot, base) = t?;
            let off = view.offset_of(addr, len)?;
            return Some(Extent {
                mr: slot,
                off: (base + off) as usize,
                len: len as usize,
            });
        }
        let (_, m) = self.mrs.get_by_index(rkey >> 8)?;
        if m.rkey != rkey || m.device != device {
            return None;
        }
        let off = mr_view(m).offset_of(addr, len)?;
        Some(Extent {
            mr: rkey >> 8,
            off: off as usize,
            len: len as usize,
        })
    }

    /// Completes finished send requests in posting order: a CQE for each
    /// signalled success and for every failure; a failure then moves the
    /// QP to ERR (reliable) or SQE (unreliable).
    pub(crate) fn complete_sq(&mut self, qp: QpHandle) {
        let flavor = self.config.errno_flavor;
        loop {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                return;
            };
            let seq = q.sq.done;
            if seq >= q.tx.send_seq || seq >= q.sq.tail {
                break;
            }
            let w = *q.sq.get(seq).0;
            let (status, fate) = match w.exec {
                Exec::Done => (WcStatus::Success, None),
                Exec::Failed(s) => (
                    s,
                    Some(if transport_of(q.class).is_reliable() {
                        QpFate::Error
                    } else {
                        QpFate::SendQueueError
                    }),
                ),
                _ => break,
            };
            q.sq.done += 1;
            let info = opcode_info(w.opcode);
            let len = u32::try_from(w.length).unwrap_or(u32::MAX);
            let wc = if status == WcStatus::Success {
                Wc {
                    wr_id: w.wr_id,
                    status,
                    opcode: info.map_or(WcOpcode::Send, |i| i.requester_opcode),
                    byte_len: requester_byte_len(w.opcode, len, flavor),
                    wc_flags: requester_wc_flags(w.opcode, flavor),
                    qp_num: q.qp_num,
                    ..Wc::default()
                }
            } else {
                Wc {
                    wr_id: w.wr_id,
                    status,
                    opcode: info.map_or(WcOpcode::Send, |i| i.requester_opcode),
                    qp_num: q.qp_num,
                    ..Wc::default()
                }
            };
            let cq = q.send_cq;
            if w.signaled || status != WcStatus::Success {
                let entry = CqEntry {
                    wc,
                    qp,
                    queue: QueueKind::Send,
                    seq,
                    ts_ns: 0,
                };
                match cq {
                    Some(cq) => self.push_completion(cq, entry, false),
                    None => self.release_wqes(qp, QueueKind::Send, seq),
                }
            }
            if let Some(fate) = fate {
                // DCI streams: only the request's stream may enter error.
                if self.dci_stream_absorbs(qp, w.stream, status) {
                    continue;
                }
                self.leave_service(qp, fate);
                return;
            }
            // A CQ overrun may have moved the QP to ERR.
            if self
                .qps
                .get(qp.index, qp.generation)
                .is_none_or(|q| q.phase.state() == QpState::Error)
            {
                return;
            }
        }
        self.check_drained(qp);
    }

    /// The device moves a QP to ERR or SQE after an error (§4.3).
    pub(crate) fn leave_service(&mut self, qp: QpHandle, fate: QpFate) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        // A DCT serves many DCIs: one initiator's error does not stop it.
        if q.class == QpClass::Dct {
            return;
        }
        let state = q.phase.state();
        let (b, p, r) = q.phase.parts();
        match fate {
            QpFate::Unchanged => {}
            QpFate::Error if state != QpState::Error => {
                self.set_state(qp, QpPhase::Error(b, p, r));
            }
            QpFate::SendQueueError
                if matches!(state, QpState::ReadyToSend | QpState::SendQueueDrain) =>
            {
                self.set_state(
                    qp,
                    QpPhase::SendQueueError(
                        b.unwrap_or_default(),
                        p.unwrap_or_default(),
                        r.unwrap_or_default(),
                    ),
                );
            }
            _ => {}
        }
    }

    /// An unreliable request's last packet arrived or was dropped: the
    /// request is done (the responder, if any, has read its bytes).
    fn unreliable_departed(&mut self, p: &Packet) {
        if let Some(qp) = self.qp_at(p.source) {
            self.unreliable_done(qp, p);
        }
    }

    /// [`Self::unreliable_departed`] with the sender already looked up.
    fn unreliable_done(&mut self, qp: QpHandle, p: &Packet) {
        if !p.opcode.ends_message() {
            return;
        }
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if transport_of(q.class).is_reliable() {
            return;
        }
        let seq = p.cookie;
        if seq < q.sq.done || seq >= q.tx.send_seq {
            return;
        }
        let w = q.sq.get_mut(seq);
        if w.exec == Exec::Sent {
            w.exec = Exec::Done;
        }
        self.complete_sq(qp);
    }

    // ----------------------------------------------------------- responder

    /// A request arrives; returns its sender, if it still exists.
    fn on_request(&mut self, p: &Packet) -> Option<QpHandle> {
        let Some(req) = self.qp_at(p.source) else {
            // The sender is gone: nothing to read the payload from.
            self.discard(p, "sender destroyed");
            return None;
        };
        let Some(rq) = self.qp_at(p.destination) else {
            // No such QP: dropped (RC senders time out).
            self.discard(p, "no such QP");
            return Some(req);
        };
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let s = self.qps.get(req.index, req.generation).expect("live");
        let rt = transport_of(r.class);
        let st = transport_of(s.class);
        if !receives(r.phase.state(), rt) {
            self.discard(p, "QP not in RTR, RTS or SQD");
            return Some(req);
        }
        let seq = p.cookie;
        if seq < s.sq.done || seq >= s.tx.send_seq {
            // The request already completed: a stale duplicate.
            self.discard(p, "stale duplicate");
            return Some(req);
        }
        if self.ooo_mismatch(rq, req, p) {
            return Some(req);
        }
        match (rt, st) {
            (Transport::Dct, Transport::Dci) if p.opcode != Opcode::UdSend => {
                self.dct_receive(rq, req, p);
            }
            (Transport::Ud, Transport::Ud) if p.opcode == Opcode::UdSend => {
                self.ud_receive(rq, req, p);
            }
            (Transport::Rc, Transport::Rc) if p.opcode != Opcode::UdSend => {
                self.rc_receive(rq, req, p);
            }
            (Transport::Uc, Transport::Uc) if p.opcode != Opcode::UdSend => {
                self.uc_receive(rq, req, p);
            }
            // XRC: the TGT QP receives into the SRQ the request names.
            (Transport::XrcRecv, Transport::XrcSend) if p.opcode != Opcode::UdSend => {
                if self.xrc_bind_message(rq, req, seq) {
                    self.rc_receive(rq, req, p);
                    self.xrc_unbind_message(rq);
                } else if self.config.xrc_unknown_srqn == crate::XrcUnknownSrqn::Drop {
                    self.discard(p, "unknown XRC SRQ number");
                } else {
                    self.responder_error(rq, p, ErrorScenario::ResponderQpAccess, None);
                }
            }
            // RC into UD, UD into RC and the like: dropped (§4.2 row 16,
            // UD/UC table "UD→RC QP").
            _ => self.discard(p, "transport mismatch"),
        }
        Some(req)
    }

    /// Records that the receiver dropped `p` silently, and why.
    pub(super) fn discard(&mut self, p: &Packet, reason: &'static str) {
        self.record(TraceEvent::Discarded {
            device: u32::from(p.destination.device.0),
            qpn: p.destination.qpn,
            psn: p.psn.value(),
            reason,
        });
    }

    pub(super) fn send_ack(&mut self, p: &Packet, syndrome: AckSyndrome, psn: Psn, cookie: u64) {
        self.wire(Packet {
            source: p.destination,
            destination: p.source,
            psn,
            opcode: Opcode::Acknowledge(syndrome),
            flags: PacketFlags::NONE,
            payload_len: 0,
            offset: 0,
            cookie,
        });
    }

    fn responder_view(&self, rq: QpHandle) -> ResponderView {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let (b, p, _) = r.phase.parts();
        ResponderView {
            qp_access_flags: b.map_or(AccessFlags::empty(), |b| b.access),
            pd: r.pd.map_or(u32::MAX, |p| p.index),
            max_dest_rd_atomic: if r.class == QpClass::Dct {
                // A DCT's responder resources are the device's DC ones.
                self.dct_responder_resources(r.device)
            } else {
                p.map_or(0, |p| p.max_dest_rd_atomic)
            },
        }
    }

    /// The next receive WQE of `rq` (its SRQ's or its RQ's), not taken.
    fn peek_recv(&self, rq: QpHandle) -> Option<RecvRef> {
        let r = self.qps.get(rq.index, rq.generation)?;
        let (seq, wr_id, srq) = match r.srq {
            Some(srq) => {
                let s = self.srqs.get(srq.index, srq.generation)?;
                if s.ring.done >= s.ring.tail {
                    return None;
                }
                (s.ring.done, s.ring.get(s.ring.done).0.wr_id, Some(srq))
            }
            None => {
                if r.rq.done >= r.rq.tail {
                    return None;
                }
                (r.rq.done, r.rq.get(r.rq.done).0.wr_id, None)
            }
        };
        Some(RecvRef { srq, seq, wr_id })
    }

    /// Takes the next receive WQE of `rq` (its SRQ or its RQ); `None` when
    /// there is none.
    fn take_recv(&mut self, rq: QpHandle) -> Option<RecvRef> {
        let r = self.qps.get(rq.index, rq.generation)?;
        match r.srq {
            Some(srq) => {
                let s = self.srqs.get(srq.index, srq.generation)?;
                if s.ring.done >= s.ring.tail {
                    return None;
                }
                let seq = s.ring.done;
                let w = *s.ring.get(seq).0;
                let n = w.num_sge as usize;
                let (limit, left) = (s.limit, s.ring.tail - seq - 1);
                let ctx = self.pds.get(s.pd.index, s.pd.generation).map(|p| p.ctx);
                let Self { qps, srqs, .. } = self;
                let s = srqs.get_mut(srq.index, srq.generation)?;
                let sges = &s.ring.get(seq).1[..n];
                let r = qps.get_mut(rq.index, rq.generation)?;
                if r.rx.srq_sges.len() < n {
                    // Sized at creation to the SRQ's max_sge; only a DC
                    // connection's buffer starts empty.
                    r.rx.srq_sges = sges.into();
                } else {
                    r.rx.srq_sges[..n].copy_from_slice(sges);
                }
                r.rx.srq_num_sge = n as u32;
                s.ring.done += 1;
                // SRQ limit: armed and now below it → one event, disarmed.
                if limit > 0 && left < u64::from(limit) {
                    s.limit = 0;
                    if let Some(ctx) = ctx {
                        self.raise_async(
                            ctx,
                            AsyncEventType::SrqLimitReached,
                            super::AsyncSubject::Srq(srq),
                        );
                    }
                }
                Some(RecvRef {
                    srq: Some(srq),
                    seq,
                    wr_id: w.wr_id,
                })
            }
            None => {
                if r.rq.done >= r.rq.tail {
                    return None;
                }
                let seq = r.rq.done;
                Some(RecvRef {
                    srq: None,
                    seq,
                    wr_id: r.rq.get(seq).0.wr_id,
                })
            }
        }
    }

    /// Whether the receive WQE `peek` can take a `len`-byte message
    /// (`scatter_plan`); if not, the error path runs (the WQE is consumed
    /// unless the receiver drops the message) and the answer is false.
    fn recv_fits(
        &mut self,
        rq: QpHandle,
        p: &Packet,
        peek: RecvRef,
        len: u32,
        transport: Transport,
    ) -> bool {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let device = r.device;
        // mlx5: an SRQ's buffers belong to the SRQ's PD, which may differ
        // from the QP's (an SRQ is shared by QPs of other PDs, XRC TGT QPs
        // have none). rxe copies with the QP's PD whichever queue the WQE
        // came from (rxe_resp.c). RDMA targets stay checked against the
        // QP's PD on both.
        let srq_pd = self.device(device).profile.driver == DriverModel::Mlx5;
        let (sges, pd) = match peek.srq {
            Some(srq) => {
                let s = self.srqs.get(srq.index, srq.generation).expect("live");
                let (w, sges, _) = s.ring.get(peek.seq);
                let pd = if srq_pd || r.pd.is_none() {
                    s.pd.index
                } else {
                    r.pd.map_or(u32::MAX, |p| p.index)
                };
                (&sges[..w.num_sge as usize], pd)
            }
            None => {
                let (w, sges, _) = r.rq.get(peek.seq);
                (
                    &sges[..w.num_sge as usize],
                    r.pd.map_or(u32::MAX, |p| p.index),
                )
            }
        };
        let mrs = DevMrs {
            mrs: &self.mrs,
            device,
        };
        let Err(scenario) = scatter_plan(len, transport, sges, &mrs, pd) else {
            return true;
        };
        let recv = if error_outcome(scenario, transport).dropped {
            None
        } else {
            self.take_recv(rq)
        };
        self.responder_error(rq, p, scenario, recv);
        false
    }

    /// The SGEs of a consumed receive WQE.
    fn recv_sges(&self, rq: QpHandle, recv: RecvRef) -> &[Sge] {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        match recv.srq {
            Some(_) => &r.rx.srq_sges[..r.rx.srq_num_sge as usize],
            None => {
                let (w, sges, _) = r.rq.get(recv.seq);
                &sges[..w.num_sge as usize]
            }
        }
    }

    /// Writes a receive completion (the RQ's `done` moves past it).
    fn complete_recv(&mut self, rq: QpHandle, recv: RecvRef, wc: Wc, solicited: bool) {
        let Some(r) = self.qps.get_mut(rq.index, rq.generation) else {
            return;
        };
        let queue = match recv.srq {
            Some(srq) => QueueKind::Srq(srq),
            None => {
                if r.rq.done != recv.seq {
                    return;
                }
                r.rq.done += 1;
                QueueKind::Recv
            }
        };
        let entry = CqEntry {
            wc,
            qp: rq,
            queue,
            seq: recv.seq,
            ts_ns: 0,
        };
        // An XRC SRQ completes into its own CQ (the TGT QP has none).
        let cq = match (r.recv_cq, queue) {
            (None, QueueKind::Srq(s)) => self.xrc.srq_cq(s),
            (cq, _) => cq,
        };
        match cq {
            Some(cq) => self.push_completion(cq, entry, solicited),
            None => self.release_wqes(rq, queue, recv.seq),
        }
    }

    /// Copies bytes `[off, off + len)` of request `seq` of `req` to `dst`.
    fn copy_from_request(&mut self, req: QpHandle, seq: u64, off: u32, len: u32, dst: &[Extent]) {
        if len == 0 {
            return;
        }
        let Self { qps, mrs, .. } = self;
        let Some(s) = qps.get(req.index, req.generation) else {
            return;
        };
        let (w, sges, _) = s.sq.get(seq);
        if w.send_flags.contains(SendFlags::INLINE) {
            let bytes = s.sq.inline_bytes(seq, w.length as usize);
            let end = (off as usize + len as usize).min(bytes.len());
            copy_bytes(mrs, &bytes[(off as usize).min(end)..end], dst);
            return;
        }
        let sges = &sges[..w.num_sge as usize];
        // One SGE gives at most one extent: no 32-entry scratch to clear.
        let mut one = [Extent::default(); 1];
        let mut many;
        let src: &mut [Extent] = if sges.len() <= 1 {
            &mut one
        } else {
            many = [Extent::default(); EXTENTS_MAX];
            &mut many
        };
        if let Some(ns) = extents(sges, mrs, s.device, u64::from(off), u64::from(len), src) {
            copy_extents(mrs, &src[..ns], dst);
        }
    }

    /// The destination pieces of `[off, off + len)` of a receive WQE.
    pub(super) fn recv_extents(
        &self,
        rq: QpHandle,
        recv: RecvRef,
        off: u32,
        len: u32,
        out: &mut [Extent],
    ) -> Option<usize> {
        let device = self.qps.get(rq.index, rq.generation)?.device;
        extents(
            self.recv_sges(rq, recv),
            &self.mrs,
            device,
            u64::from(off),
            u64::from(len),
            out,
        )
    }

    /// The error path of a responder-detected condition (§4.2, §4.3).
    fn responder_error(
        &mut self,
        rq: QpHandle,
        p: &Packet,
        scenario: ErrorScenario,
        recv: Option<RecvRef>,
    ) {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let transport = transport_of(r.class);
        let (ctx, qpn) = (r.ctx, r.qp_num);
        let out = error_outcome(scenario, transport);
        if out.dropped {
            self.discard(p, scenario_name(scenario));
            return;
        }
        if out.rnr_nak {
            let timer = r.phase.parts().1.map_or(0, |p| p.min_rnr_timer);
            self.send_ack(p, AckSyndrome::RnrNak { timer }, p.psn, 0);
            return;
        }
        if transport.is_reliable() {
            if let Some(st) = out.requester_status {
                self.send_ack(p, nak_of(st), p.psn, 0);
            }
        }
        if let (Some(st), Some(recv)) = (out.responder_status, recv) {
            let wc = Wc {
                wr_id: recv.wr_id,
                status: st,
                opcode: WcOpcode::Recv,
                qp_num: qpn,
                ..Wc::default()
            };
            if let Some(r) = self.qps.get_mut(rq.index, rq.generation) {
                r.rx.msg = RxMsg::default();
            }
            self.complete_recv(rq, recv, wc, false);
        }
        if let Some(event) = out.responder_event {
            self.raise_async(ctx, event, super::AsyncSubject::Qp(rq));
        }
        self.leave_service(rq, out.responder_fate);
    }

    pub(super) fn rc_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        if matches!(p.opcode, Opcode::Send(_) | Opcode::RdmaWrite(_)) && self.ooo_reliable(rq) {
            self.ooo_receive(rq, req, p);
            return;
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let epsn = r.rx.epsn;
        match p.psn.compare(epsn) {
            core::cmp::Ordering::Greater => {
                if !r.rx.nak_sent {
                    r.rx.nak_sent = true;
                    self.send_ack(p, AckSyndrome::PsnSequenceError, epsn, 0);
                }
                return;
            }
            core::cmp::Ordering::Less => {
                self.rc_duplicate(rq, req, p);
                return;
            }
            core::cmp::Ordering::Equal => r.rx.nak_sent = false,
        }
        match p.opcode {
            Opcode::Send(pos) | Opcode::RdmaWrite(pos) => {
                let write = matches!(p.opcode, Opcode::RdmaWrite(_));
                if pos.starts_message() {
                    self.ooo_unreliable_recv(rq);
                }
                if pos.starts_message() && !self.begin_message(rq, req, p, write) {
                    return;
                }
                self.place(rq, req, p, write);
                let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
                r.rx.epsn = p.psn.next();
                if pos.ends_message() {
                    self.end_message(rq, req, p);
                }
                if p.flags.contains(PacketFlags::ACK_REQUEST)
                    && self
                        .qps
                        .get(rq.index, rq.generation)
                        .is_some_and(|r| r.phase.state() != QpState::Error)
                {
                    self.send_ack(p, AckSyndrome::Ack, p.psn, 0);
                }
            }
            Opcode::ReadRequest => self.rc_read(rq, req, p, false),
            Opcode::CompareSwap | Opcode::FetchAdd => self.rc_atomic(rq, req, p),
            _ => {}
        }
    }

    /// A request PSN behind the expected one (a retransmission).
    pub(super) fn rc_duplicate(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        match p.opcode {
            Opcode::ReadRequest => self.rc_read(rq, req, p, true),
            Opcode::CompareSwap | Opcode::FetchAdd => {
                let r = self.qps.get(rq.index, rq.generation).expect("live");
                let key = p.psn.value() + 1;
                if let Some(&(_, v)) =
                    r.rx.atomics
                        .iter()
                        .flat_map(|a| a.iter())
                        .find(|(k, _)| *k == key)
                {
                    self.wire(Packet {
                        source: p.destination,
                        destination: p.source,
                        psn: p.psn,
                        opcode: Opcode::AtomicAcknowledge,
                        flags: PacketFlags::NONE,
                        payload_len: 0,
                        offset: 0,
                        cookie: v,
                    });
                }
            }
            _ => {
                let epsn = self.qps.get(rq.index, rq.generation).expect("live").rx.epsn;
                self.send_ack(p, AckSyndrome::Ack, epsn.sub(1), 0);
            }
        }
    }

    /// First packet of a SEND or WRITE: consume the receive WQE, check the
    /// target. False when the message is refused (NAKed or dropped).
    pub(super) fn begin_message(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        p: &Packet,
        write: bool,
    ) -> bool {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.get(p.cookie).0;
        let info = opcode_info(w.opcode);
        let needs_recv = info.is_some_and(|i| i.responder.is_some());
        let total = u32::try_from(w.length).unwrap_or(u32::MAX);
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let transport = transport_of(r.class);
        let device = r.device;
        let pd = r.pd.map_or(u32::MAX, |p| p.index);
        let mut target = None;
        if write {
            let req_view = RemoteRequest {
                op: RemoteOp::Write,
                remote_addr: w.rdma.remote_addr,
                rkey: w.rdma.rkey,
                len: w.length,
            };
            if w.opcode == WrOpcode::Flush {
                // Nothing is placed: the placement type's access and, for
                // level RANGE, the range are checked (rxe `check_rkey`).
                if let Err(scenario) = self.check_flush(rq, device, &w) {
                    self.responder_error(rq, p, scenario, None);
                    return false;
                }
            } else {
                // ATOMIC_WRITE: exactly 8 bytes at an 8-byte-aligned
                // address (rxe atomic write: misaligned → NAK invalid
                // request).
                if w.opcode == WrOpcode::AtomicWrite
                    && (w.length != 8 || w.rdma.remote_addr % 8 != 0)
                {
                    self.responder_error(rq, p, ErrorScenario::AtomicMisaligned, None);
                    return false;
                }
                match self.check_rkey(rq, device, &req_view) {
                    Ok(slot_off) => target = Some(slot_off),
                    Err(scenario) => {
                        // WRITE_WITH_IMM: the receive WQE is consumed and
                        // completes in error (§4.2 row 5).
                        let recv = if needs_recv { self.take_recv(rq) } else { None };
                        self.responder_error(rq, p, scenario, recv);
                        return false;
                    }
                }
            }
        }
        let mut recv = None;
        if needs_recv {
            let Some(peek) = self.peek_recv(rq) else {
                self.responder_error(rq, p, ErrorScenario::NoRecvWqe, None);
                return false;
            };
            if !write {
                // SEND: the receive buffer must hold the message (§4.2 rows 6, 7).
                if !self.recv_fits(rq, p, peek, total, transport) {
                    return false;
                }
                if info.is_some_and(|i| i.with_inv) && self.is_mw_key(w.imm_data) {
                    // A type 2 window of this PD (world/ext.rs).
                    if !self.remote_invalidate_mw(device, w.imm_data, pd) {
                        let recv = self.take_recv(rq);
                        self.responder_error(rq, p, ErrorScenario::SendInvalidateBadRkey, recv);
                        return false;
                    }
                } else if info.is_some_and(|i| i.with_inv) {
                    let mr = DevMrs {
                        mrs: &self.mrs,
                        device,
                    }
                    .by_rkey(w.imm_data);
                    if let Err(scenario) = check_invalidate(mr, pd) {
                        let recv = self.take_recv(rq);
                        self.responder_error(rq, p, scenario, recv);
                        // No NAK (row 17): the requester sees success.
                        return false;
                    }
                    // §3.2: the region is invalidated before the receive
                    // completes; its keys no longer grant access.
                    if let Some((_, m)) = self.mrs.get_by_index_mut(w.imm_data >> 8) {
                        m.invalidated = true;
                    }
                }
            }
            recv = self.take_recv(rq);
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.msg = RxMsg {
            active: true,
            dropping: false,
            recv,
            write: target,
            byte_len: total,
        };
        true
    }

    /// Places one SEND/WRITE packet's payload.
    pub(super) fn place(&mut self, rq: QpHandle, req: QpHandle, p: &Packet, write: bool) {
        if let Some(device) = self.place_range(rq, req, p.cookie, p.offset, p.payload_len, write) {
            self.record(TraceEvent::Placement {
                device,
                qpn: p.destination.qpn,
                offset: p.offset,
                len: p.payload_len,
            });
        }
    }

    /// Copies bytes `[off, off + len)` of request `cookie`'s message into
    /// where the message lands at `rq` and returns `rq`'s device; `None`
    /// when it lands nowhere (no message in progress, no bytes, no target,
    /// the receive buffer does not cover them), which is traced as no
    /// placement.
    pub(super) fn place_range(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        cookie: u64,
        off: u32,
        len: u32,
        write: bool,
    ) -> Option<u32> {
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let (msg, device) = (r.rx.msg, r.device);
        if !msg.active || len == 0 {
            return None;
        }
        // A WRITE lands in one piece, a SEND into one SGE in at most one:
        // no 32-entry scratch to clear then.
        let mut one = [Extent::default(); 1];
        let mut many: [Extent; EXTENTS_MAX];
        let dst: &[Extent] = if write {
            let (mr, base) = msg.write?;
            one[0] = Extent {
                mr,
                off: (base + u64::from(off)) as usize,
                len: len as usize,
            };
            &one
        } else {
            let recv = msg.recv?;
            let scratch: &mut [Extent] = if self.recv_sges(rq, recv).len() <= 1 {
                &mut one
            } else {
                many = [Extent::default(); EXTENTS_MAX];
                &mut many
            };
            match self.recv_extents(rq, recv, off, len, scratch) {
                Some(n) => &scratch[..n],
                None => return None,
            }
        };
        self.copy_from_request(req, cookie, off, len, dst);
        Some(device)
    }

    /// Last packet of a SEND or WRITE: the receive completion, if any.
    pub(super) fn end_message(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let msg = core::mem::take(&mut r.rx.msg);
        let qpn = r.qp_num;
        let Some(recv) = msg.recv else { return };
        if !msg.active {
            return;
        }
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.get(p.cookie).0;
        let Some(rc) = opcode_info(w.opcode).and_then(|i| i.responder) else {
            return;
        };
        let wc = Wc {
            wr_id: recv.wr_id,
            status: WcStatus::Success,
            opcode: rc.opcode,
            byte_len: msg.byte_len,
            imm_data: if rc.flags.intersects(WcFlags::WITH_IMM | WcFlags::WITH_INV) {
                w.imm_data
            } else {
                0
            },
            qp_num: qpn,
            wc_flags: rc.flags,
            ..Wc::default()
        };
        let solicited = p.flags.contains(PacketFlags::SOLICITED);
        self.complete_recv(rq, recv, wc, solicited);
    }

    /// The responder's rkey check of a WRITE, READ or atomic arriving at
    /// `rq` on `device`: the offset in the MR, or the §4.2 scenario.
    /// The responder's checks of a FLUSH (rxe `check_rkey` with the FLUSH
    /// extended header): the rkey names a valid MR of the QP's PD whose
    /// access holds `IBV_ACCESS_FLUSH_GLOBAL` / `_PERSISTENT` for each
    /// placement type asked for, and for level RANGE the range lies inside
    /// it; otherwise `REM_ACCESS_ERR` (row 5).
    fn check_flush(
        &self,
        rq: QpHandle,
        device: u32,
        w: &super::queues::SendWqe,
    ) -> Result<(), ErrorScenario> {
        let Some(mr) = (DevMrs {
            mrs: &self.mrs,
            device,
        })
        .by_rkey(w.rdma.rkey) else {
            return Err(ErrorScenario::RemoteAccess);
        };
        let mut need = AccessFlags::empty();
        if w.flush.flush_type & FlushInfo::GLOBAL != 0 {
            need |= AccessFlags::FLUSH_GLOBAL;
        }
        if w.flush.flush_type & FlushInfo::PERSISTENT != 0 {
            need |= AccessFlags::FLUSH_PERSISTENT;
        }
        let in_range = w.flush.level == FlushInfo::LEVEL_MR
            || mr.offset_of(w.rdma.remote_addr, w.flush.len).is_some();
        let ok =
            mr.valid && mr.pd == self.responder_view(rq).pd && mr.access.contains(need) && in_range;
        if ok {
            Ok(())
        } else {
            Err(ErrorScenario::RemoteAccess)
        }
    }

    /// The MR arena slot and the offset in it, or the §4.2 scenario. An
    /// rkey of a memory window is checked against the window (its range,
    /// access, PD and, for type 2, its QP) and lands in the window's MR.
    fn check_rkey(
        &self,
        rq: QpHandle,
        device: u32,
        req: &RemoteRequest,
    ) -> Result<(u32, u64), ErrorScenario> {
        if let Some(t) = self.mw_target(device, req.rkey, Some(rq)) {
            let responder = self.responder_view(rq);
            return match t {
                Some((view, slot, base)) => {
                    check_remote(req, Some(view), &responder).map(|off| (slot, base + off))
                }
                None => check_remote(req, None, &responder).map(|off| (0, off)),
            };
        }
        let mr = DevMrs {
            mrs: &self.mrs,
            device,
        }
        .by_rkey(req.rkey);
        check_remote(req, mr, &self.responder_view(rq)).map(|off| (req.rkey >> 8, off))
    }

    fn rc_read(&mut self, rq: QpHandle, req: QpHandle, p: &Packet, duplicate: bool) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.get(p.cookie).0;
        let mtu = s.tx.mtu;
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let device = r.device;
        let req_view = RemoteRequest {
            op: RemoteOp::Read,
            remote_addr: w.rdma.remote_addr,
            rkey: w.rdma.rkey,
            len: w.length,
        };
        if let Err(scenario) = self.check_rkey(rq, device, &req_view) {
            self.responder_error(rq, p, scenario, None);
            return;
        }
        // A resumed READ asks for the bytes from `p.offset` on, answered
        // with PSNs from its own.
        let from = p.offset;
        let len = u32::try_from(w.length)
            .unwrap_or(u32::MAX)
            .saturating_sub(from);
        let n = packet_count(len, mtu);
        if !duplicate {
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.epsn = p.psn.add(n);
        }
        if n > 1 && self.ooo_reliable(rq) {
            let template = Packet {
                source: p.destination,
                destination: p.source,
                psn: p.psn,
                opcode: Opcode::ReadResponse(crate::fabric::SegmentPosition::Only),
                flags: PacketFlags::NONE,
                payload_len: 0,
                offset: 0,
                cookie: p.cookie,
            };
            let a = self.devices[device as usize].profile.adapter;
            let dep = (!a.is_none()).then(|| Departure {
                first: self.now_ns + a.responder_read_ns,
                packet_ns: a.packet_ns,
                dma_start: None,
                model: a,
            });
            self.ooo_wire(
                template,
                len,
                mtu,
                PacketFlags::NONE,
                Opcode::ReadResponse,
                dep,
            );
            return;
        }
        // Adapter model: the responder reads the data from host memory
        // (latency, then its DMA bandwidth) before the responses leave.
        let a = self.devices[device as usize].profile.adapter;
        let now = self.now_ns;
        let first = now + a.responder_read_ns;
        let dma_start = {
            let d = &mut self.devices[device as usize];
            let start = first.max(d.dma_free_ns);
            d.dma_free_ns = start + a.dma_ns(u64::from(len));
            start
        };
        for (i, seg) in segment(len, mtu).enumerate() {
            let depart = (first + i as u64 * a.packet_ns)
                .max(dma_start + a.dma_ns(u64::from(seg.offset + seg.len)));
            self.wire_at(
                Packet {
                    source: p.destination,
                    destination: p.source,
                    psn: p.psn.add(i as u32),
                    opcode: Opcode::ReadResponse(seg.position),
                    flags: PacketFlags::NONE,
                    payload_len: seg.len,
                    offset: from + seg.offset,
                    cookie: p.cookie,
                },
                depart,
            );
        }
    }

    fn rc_atomic(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.get(p.cookie).0;
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let device = r.device;
        let req_view = RemoteRequest {
            op: RemoteOp::Atomic,
            remote_addr: w.atomic.remote_addr,
            rkey: w.atomic.rkey,
            len: 8,
        };
        let (slot, off) = match self.check_rkey(rq, device, &req_view) {
            Ok((slot, off)) => (slot, off as usize),
            Err(scenario) => {
                self.responder_error(rq, p, scenario, None);
                return;
            }
        };
        let Some(op) = AtomicOp::from_wr(w.opcode, w.atomic.compare_add, w.atomic.swap) else {
            return;
        };
        let original = match self.mrs.get_by_index_mut(slot) {
            Some((_, m)) => {
                let mut word = [0u8; 8];
                word.copy_from_slice(&m.bytes[off..off + 8]);
                let original = apply_atomic(op, &mut word);
                m.bytes[off..off + 8].copy_from_slice(&word);
                original
            }
            None => return,
        };
        self.record(TraceEvent::Placement {
            device,
            qpn: p.destination.qpn,
            offset: 0,
            len: 8,
        });
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let slot = usize::from(r.rx.atomic_next);
        r.rx.atomics
            .get_or_insert_with(|| Box::new([(0, 0); ATOMIC_REPLAY]))[slot] =
            (p.psn.value() + 1, original);
        r.rx.atomic_next = ((slot + 1) % ATOMIC_REPLAY) as u8;
        r.rx.epsn = p.psn.next();
        self.wire(Packet {
            source: p.destination,
            destination: p.source,
            psn: p.psn,
            opcode: Opcode::AtomicAcknowledge,
            flags: PacketFlags::NONE,
            payload_len: 0,
            offset: 0,
            cookie: original,
        });
    }

    /// UC: PSNs are checked, a gap loses the message it falls in, errors
    /// drop silently, nothing is acknowledged (§4.2 UD/UC table).
    fn uc_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let (pos, write) = match p.opcode {
            Opcode::Send(pos) => (pos, false),
            Opcode::RdmaWrite(pos) => (pos, true),
            _ => return,
        };
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        let epsn = r.rx.epsn;
        if p.psn != epsn {
            if p.psn.is_behind(epsn) {
                return; // an old packet
            }
            // Packets were lost: the message in progress is abandoned.
            r.rx.msg = RxMsg::default();
            if !pos.starts_message() {
                r.rx.msg.dropping = true;
                r.rx.epsn = p.psn.next();
                return;
            }
        }
        r.rx.epsn = p.psn.next();
        if r.rx.msg.dropping && !pos.starts_message() {
            if pos.ends_message() {
                r.rx.msg = RxMsg::default();
            }
            return;
        }
        if pos.starts_message() {
            self.ooo_unreliable_recv(rq);
        }
        if pos.starts_message() && !self.begin_message(rq, req, p, write) {
            let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
            r.rx.msg = RxMsg {
                dropping: !pos.ends_message(),
                ..RxMsg::default()
            };
            return;
        }
        self.place(rq, req, p, write);
        if pos.ends_message() {
            self.end_message(rq, req, p);
        }
    }

    /// UD: Q_Key check, the 40-byte GRH, then the payload (§4.2 UD table).
    fn ud_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let w = *s.sq.get(p.cookie).0;
        let sender_qkey = s.phase.parts().0.map_or(0, |b| b.qkey);
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        let (device, qpn) = (r.device, r.qp_num);
        let my_qkey = r.phase.parts().0.map_or(0, |b| b.qkey);
        // A remote_qkey with bit 31 set means "use the QP's own Q_Key".
        let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
            sender_qkey
        } else {
            w.remote_qkey
        };
        if qkey != my_qkey {
            self.discard(p, "wrong Q_Key");
            return;
        }
        self.ooo_unreliable_recv(rq);
        let Some(peek) = self.peek_recv(rq) else {
            self.discard(p, "no receive WQE");
            return;
        };
        if !self.recv_fits(rq, p, peek, p.payload_len, Transport::Ud) {
            return;
        }
        let Some(recv) = self.take_recv(rq) else {
            return;
        };
        let mut dst = [Extent::default(); EXTENTS_MAX];
        if let Some(n) = self.recv_extents(rq, recv, 0, UD_GRH_BYTES, &mut dst) {
            let grh = self.grh_bytes(p);
            copy_bytes(&mut self.mrs, &grh, &dst[..n]);
        }
        if let Some(n) = self.recv_extents(rq, recv, UD_GRH_BYTES, p.payload_len, &mut dst) {
            self.copy_from_request(req, p.cookie, 0, p.payload_len, &dst[..n]);
        }
        self.record(TraceEvent::Placement {
            device,
            qpn,
            offset: 0,
            len: p.payload_len,
        });
        let info = opcode_info(w.opcode);
        let rc = info.and_then(|i| i.responder);
        let flags = rc.map_or(WcFlags::empty(), |c| c.flags) | WcFlags::GRH;
        let slid = self
            .fabric
            .port_config(p.source.port_ref())
            .filter(|c| c.link_layer == LinkLayer::Infiniband)
            .map_or(0, |c| c.lid);
        let wc = Wc {
            wr_id: recv.wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: UD_GRH_BYTES + p.payload_len,
            imm_data: if flags.contains(WcFlags::WITH_IMM) {
                w.imm_data
            } else {
                0
            },
            qp_num: qpn,
            src_qp: p.source.qpn,
            wc_flags: flags,
            slid,
            ..Wc::default()
        };
        self.complete_recv(rq, recv, wc, p.flags.contains(PacketFlags::SOLICITED));
    }

    /// A GRH as the receiver sees it: IPv6-shaped, version 6, payload
    /// length, next header 0x1b, hop limit 64, source and destination GIDs
    /// (index 0 of each port).
    fn grh_bytes(&self, p: &Packet) -> [u8; 40] {
        let mut g = [0u8; 40];
        g[0] = 0x60;
        let plen = (p.payload_len + 28).to_be_bytes();
        g[4] = plen[2];
        g[5] = plen[3];
        g[6] = 0x1b;
        g[7] = 64;
        let sgid = self.gid_of(u32::from(p.source.device.0), 0);
        let dgid = self.gid_of(u32::from(p.destination.device.0), 0);
        g[8..24].copy_from_slice(&sgid.0);
        g[24..40].copy_from_slice(&dgid.0);
        g
    }
}

/// When the packets of one request leave their adapter (the adapter
/// model's send side).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Departure {
    /// The first packet's departure (ns).
    first: u64,
    /// Send engine time per packet.
    packet_ns: u64,
    /// When the DMA engine starts on the payload (non-inline sends).
    dma_start: Option<u64>,
    model: crate::adapter::AdapterModel,
}

impl Departure {
    /// Departure of packet `i`, whose payload ends at byte `end`.
    pub(crate) fn at(&self, i: u32, end: u32) -> u64 {
        let engine = self.first + u64::from(i) * self.packet_ns;
        match self.dma_start {
            Some(d) => engine.max(d + self.model.dma_ns(u64::from(end))),
            None => engine,
        }
    }
}
