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

use super::queues::Exec;
use super::state::{
    mr_view, transport_of, Bound, CqEntry, QpPhase, QueueKind, RecvRef, Rx, RxMsg, Tx,
    ATOMIC_REPLAY, NOWHERE, RUN_EVENT_BUDGET,
};
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
use crate::handles::QpHandle;
use crate::memory::MrMemory;
use crate::profile::DriverModel;
use crate::trace::{Trace, TraceEvent};

mod acks;
mod answers;
mod burst;
mod cause;
mod completion;
mod events;
mod fast;
mod landing;
mod multicast;
mod ooo_run;
mod receive;
mod remote_ops;
mod requester;
mod responder;
mod run;

pub(crate) use cause::{may_have_cause, CauseRing};

/// An unsignalled stream of requests asks for an ACK at least once per this
/// many PSNs.
const ACK_EVERY: u32 = 64;

/// Most SGEs on either side of a copy (devices allow at most 32).
pub(super) const EXTENTS_MAX: usize = 32;

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
pub(super) fn copy_extents(mrs: &mut Arena<Mr>, src: &[Extent], dst: &[Extent]) -> bool {
    let (mut si, mut di) = (0, 0);
    let (mut so, mut d_o) = (0usize, 0usize);
    let mut ok = true;
    while si < src.len() && di < dst.len() {
        let s = src[si];
        let d = dst[di];
        let n = (s.len - so).min(d.len - d_o);
        ok &= copy_piece(mrs, s.mr, s.off + so, d.mr, d.off + d_o, n);
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
    ok
}

/// Copies of a batch of WRITEs ([`World::absorb_writes`]), put off and
/// made together, in order, at the end of the batch (or when
/// [`PENDING_COPIES`] are waiting). Nothing in that batch reads MR bytes
/// (its stop condition looks at CQs), so the bytes every MR holds when it
/// returns are the same; made back to back, the copies' cache and TLB
/// misses overlap, where one copy between two packets' bookkeeping waits
/// for its own miss (the `sim_rc_write_msg_rate/64_1GiB` workload, whose
/// targets are spread over 1 GiB). It lives on the stack.
#[derive(Debug)]
pub(super) struct PendingCopies {
    /// `(source MR slot, offset)`, destination extent; the first `len`.
    list: [((u32, usize), Extent); PENDING_COPIES],
    len: usize,
}

/// A key's MR as a batch of requests needs it, looked up once: the range
/// of addresses it covers (`MrView::base`, `MrView::length`) when the MR
/// passes what every request of the batch asks of it, `None` when it does
/// not (or no MR has the key). Nothing in a batch changes an MR's key,
/// range, access or validity, so the answer holds for the batch.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeyRange {
    key: u32,
    range: Option<(u64, u64)>,
}

impl KeyRange {
    /// `view` (the MR `key` names) for requests that need it valid, of PD
    /// `pd`, granting `needed`.
    #[inline]
    pub(super) fn checked(key: u32, view: Option<MrView>, pd: u32, needed: AccessFlags) -> Self {
        Self {
            key,
            range: view
                .filter(|m| m.valid && m.pd == pd && m.access.contains(needed))
                .map(|m| (m.base(), m.length)),
        }
    }

    /// `view` (the MR `key` names) for requests that need nothing but its
    /// range (checked already elsewhere).
    #[inline]
    pub(super) fn any(key: u32, view: Option<MrView>) -> Self {
        Self {
            key,
            range: view.map(|m| (m.base(), m.length)),
        }
    }

    /// Whether this is `key`'s.
    #[inline(always)]
    pub(super) fn is(&self, key: u32) -> bool {
        self.key == key
    }

    /// `MrView::offset_of` of the MR, if it passed.
    #[inline(always)]
    pub(super) fn offset_of(&self, address: u64, len: u64) -> Option<u64> {
        let (base, length) = self.range?;
        let offset = address.checked_sub(base)?;
        match offset.checked_add(len) {
            Some(end) if end <= length => Some(offset),
            _ => None,
        }
    }
}

/// Copies [`PendingCopies`] holds at most.
const PENDING_COPIES: usize = 16;

impl PendingCopies {
    /// An empty list.
    #[inline(always)]
    pub(super) const fn new() -> Self {
        const NONE: ((u32, usize), Extent) = (
            (0, 0),
            Extent {
                mr: 0,
                off: 0,
                len: 0,
            },
        );
        Self {
            list: [NONE; PENDING_COPIES],
            len: 0,
        }
    }

    /// Puts off a copy of `to.len` bytes from `from` to `to`, first making
    /// the waiting ones when the list is full.
    #[inline(always)]
    pub(super) fn push(&mut self, mrs: &mut Arena<Mr>, from: (u32, usize), to: Extent) {
        if self.len >= PENDING_COPIES {
            self.flush(mrs);
        }
        if let Some(slot) = self.list.get_mut(self.len) {
            *slot = (from, to);
            self.len += 1;
        }
    }

    /// Makes the waiting copies, in the order they were put off.
    #[inline]
    pub(super) fn flush(&mut self, mrs: &mut Arena<Mr>) {
        if self.flush_between_two(mrs) {
            self.len = 0;
            return;
        }
        // Load the first and last byte of every destination first: the
        // loads are independent, so their misses overlap.
        let mut touched = 0u8;
        for &(_, d) in &self.list[..self.len] {
            if let Some((
                _,
                Mr {
                    bytes: MrMemory::Owned(b),
                    ..
                },
            )) = mrs.get_by_index(d.mr)
            {
                touched ^= ends(b, d);
            }
        }
        core::hint::black_box(touched);
        for &((src, off), d) in &self.list[..self.len] {
            // A WRITE from memory that cannot be read lands nothing.
            let _ = copy_piece(mrs, src, off, d.mr, d.off, d.len);
        }
        self.len = 0;
    }

    /// The common batch, every copy from one MR the simulator owns to
    /// another: both looked up once, then the same loads and copies, in
    /// the same order, as [`Self::flush`]'s general loop. False (nothing
    /// done) for any other batch.
    #[inline]
    fn flush_between_two(&self, mrs: &mut Arena<Mr>) -> bool {
        let list = &self.list[..self.len];
        let Some(&((src, _), first)) = list.first() else {
            return true;
        };
        if !list.iter().all(|&((s, _), d)| s == src && d.mr == first.mr) {
            return false;
        }
        let Some((sm, dm)) = mrs.pair_by_index_mut(src, first.mr) else {
            return false;
        };
        let (MrMemory::Owned(a), MrMemory::Owned(b)) = (&sm.bytes, &mut dm.bytes) else {
            return false;
        };
        let mut touched = 0u8;
        for &(_, d) in list {
            touched ^= ends(b, d);
        }
        core::hint::black_box(touched);
        for &((_, off), d) in list {
            b[d.off..d.off + d.len].copy_from_slice(&a[off..off + d.len]);
        }
        true
    }
}

/// The first and last byte of extent `d` of `b`, combined (0 outside it):
/// the loads [`PendingCopies::flush`] makes first so that the misses of a
/// batch overlap.
#[inline(always)]
fn ends(b: &[u8], d: Extent) -> u8 {
    b.get(d.off).copied().unwrap_or(0)
        ^ b.get(d.off + d.len.saturating_sub(1)).copied().unwrap_or(0)
}

/// The stack bounce buffer of a copy between MRs over external memory.
const BOUNCE: usize = 256;

/// The largest piece [`SCRATCH`] serves.
const SCRATCH_MAX: usize = 64 << 10;

thread_local! {
    /// The bounce buffer of larger copies between MRs over external
    /// memory (grown to the largest piece seen; its bytes are always
    /// overwritten before they are read).
    static SCRATCH: core::cell::RefCell<Vec<u8>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// Copies `n` bytes at `src_off` of MR slot `src` to `dst_off` of MR slot
/// `dst` (one piece of [`copy_extents`]).
#[inline]
fn copy_piece(
    mrs: &mut Arena<Mr>,
    src: u32,
    src_off: usize,
    dst: u32,
    dst_off: usize,
    n: usize,
) -> bool {
    if src == dst {
        if let Some((_, m)) = mrs.get_by_index_mut(src) {
            m.bytes.copy_within(src_off..src_off + n, dst_off);
        }
        true
    } else if let Some((sm, dm)) = mrs.pair_by_index_mut(src, dst) {
        let (from, to) = (src_off..src_off + n, dst_off..dst_off + n);
        match (&sm.bytes, &mut dm.bytes) {
            (MrMemory::Owned(a), MrMemory::Owned(b)) => {
                b[to].copy_from_slice(&a[from]);
                true
            }
            (a, b) => {
                // Two MRs over the caller's memory may overlap: never
                // hold both views at once, and read all before writing
                // (as memmove). Small pieces bounce on the stack, so the
                // common small copy allocates nothing.
                // Memory that cannot be read (its process died) puts
                // nothing in the target: never made-up bytes; the caller
                // learns it (false) and delivers nothing.
                if n <= BOUNCE {
                    let mut bounce = [0u8; BOUNCE];
                    let ok = a.try_read(from.start, &mut bounce[..n]);
                    if ok {
                        b.write(to.start, &bounce[..n]);
                    }
                    ok
                } else {
                    // Larger pieces (a packet's payload, MTU-sized) bounce
                    // through one buffer kept for the thread: no
                    // allocation and no zeroing per packet.
                    let mut copy = |bounce: &mut [u8]| {
                        let ok = a.try_read(from.start, bounce);
                        if ok {
                            b.write(to.start, bounce);
                        }
                        ok
                    };
                    SCRATCH.with(|s| match s.try_borrow_mut() {
                        Ok(mut v) if n <= SCRATCH_MAX => {
                            if v.len() < n {
                                v.resize(n, 0);
                            }
                            copy(&mut v[..n])
                        }
                        _ => copy(&mut vec![0u8; n]),
                    })
                }
            }
        }
    } else {
        true
    }
}

/// [`extents`] followed by [`copy_extents`] for the common case of one
/// SGE and one destination piece: the SGE's MR looked up once, no extent
/// lists. The same outcome: nothing is copied unless `[off, off + len)`
/// lies in the SGE and the SGE in an MR of `device`. False when the
/// source's memory could not be read (nothing was written).
pub(super) fn copy_one_sge(
    mrs: &mut Arena<Mr>,
    sge: &Sge,
    device: u32,
    off: u64,
    len: u64,
    dst: Extent,
) -> bool {
    if len == 0 || off.saturating_add(len) > u64::from(sge.length) {
        // `extents` resolves nothing past the list's end.
        return true;
    }
    let Some((_, m)) = mrs.get_by_index(sge.lkey >> 8) else {
        return true;
    };
    if m.lkey != sge.lkey || m.device != device {
        return true;
    }
    let Some(mr_off) = mr_view(m).offset_of(sge.addr + off, len) else {
        return true;
    };
    debug_assert_eq!(dst.len as u64, len);
    copy_piece(
        mrs,
        sge.lkey >> 8,
        mr_off as usize,
        dst.mr,
        dst.off,
        dst.len.min(len as usize),
    )
}

/// Copies `bytes` into `dst`.
fn copy_bytes(mrs: &mut Arena<Mr>, mut bytes: &[u8], dst: &[Extent]) {
    for d in dst {
        if bytes.is_empty() {
            break;
        }
        let n = d.len.min(bytes.len());
        if let Some((_, m)) = mrs.get_by_index_mut(d.mr) {
            m.bytes.write(d.off, &bytes[..n]);
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
    /// The model's DMA bandwidth (`AdapterModel::dma_mbps`).
    dma_mbps: u64,
}

impl Departure {
    /// Departure of packet `i`, whose payload ends at byte `end`.
    pub(crate) fn at(&self, i: u32, end: u32) -> u64 {
        let engine = self.first + u64::from(i) * self.packet_ns;
        match self.dma_start {
            Some(d) => {
                let model = crate::adapter::AdapterModel {
                    dma_mbps: self.dma_mbps,
                    ..crate::adapter::AdapterModel::NONE
                };
                engine.max(d + model.dma_ns(u64::from(end)))
            }
            None => engine,
        }
    }
}
