//! mlx5 direct verbs (dc-and-mlx5dv.md): `mlx5dv_query_device`,
//! `mlx5dv_create_qp` with every field of `mlx5dv_qp_init_attr`, the DC
//! transport (DCI requester, DCT responder, DC keys), DCI streams and
//! `mlx5dv_dci_stream_id_reset`.
//!
//! # The DC model
//!
//! A DCI is an RC requester whose destination comes with each work request
//! (address handle, DCT number, DC key, stream). It is connected to one DCT
//! at a time: a request for another target waits until everything sent to
//! the current one has completed, then the DCI disconnects and connects to
//! the new target (hardware does the same, with a connect handshake the
//! simulator makes instantaneous). The DCT keeps responder state (expected
//! PSN, the message in progress) per connected DCI, in
//! [`DcState::conns`]: one entry per DCI (a DCI has at most one
//! connection), made fresh at each connect and detached at disconnect, so
//! a DCI moving from DCT to DCT reuses its entry instead of allocating one
//! per target. The DCT object itself holds no per-initiator memory: a DCT
//! costs its QP slot, its QP-number entry and the entries of the DCIs
//! connected to it at the moment.
//!
//! A request whose DC key is not the DCT's access key is dropped silently
//! (or NAKed, [`crate::DcKeyViolation`]) before any receive WQE is touched.
//!
//! With DCI streams (`MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`) a failed request
//! puts only its stream in error: its completion carries the error, later
//! requests of that stream complete with `IBV_WC_WR_FLUSH_ERR` and the others
//! keep running; the DCI enters ERR once `2^log_num_errored` distinct streams
//! are in error. `mlx5dv_dci_stream_id_reset` takes a stream out of error.
//!
//! The DC state and the stream verbs are here; `mlx5dv_query_device` and
//! `mlx5dv_create_qp` are in [`create`], the DCI/DCT data path in [`conn`].

use std::collections::BTreeMap;

use verbs_api::{DciStreams, QpClass, QpState, Result, Sge, Verb};

use super::state::RxMsg;
use super::{invalid, unsupported, World};
use crate::fabric::Psn;
use crate::handles::QpHandle;
use crate::rng::{SimRng, Stream};

mod conn;
mod create;

/// A DCT's responder state for one connected DCI (kept per DCI, reused
/// from connection to connection).
#[derive(Debug, Default)]
pub(crate) struct Conn {
    /// The arena slot of the DCT the DCI is connected to (`None`: not
    /// connected, or connected to a number with no DCT behind it).
    dct: Option<u32>,
    epsn: Psn,
    nak_sent: bool,
    msg: RxMsg,
    srq_sges: Box<[Sge]>,
    srq_num_sge: u32,
}

/// An out-of-order message in progress at a responder: packets `base..`
/// not all arrived; bit `i` of `bits` = packet `base + i` arrived.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OooMsg {
    pub(crate) base: u32,
    pub(crate) bits: u64,
}

impl OooMsg {
    /// Packets one message's window tracks beyond `base`.
    pub(crate) const WINDOW: u32 = u64::BITS;

    /// True when packet `idx` has not arrived and lies in the window.
    pub(crate) fn fresh(&self, idx: u32) -> bool {
        idx >= self.base
            && idx - self.base < Self::WINDOW
            && (self.bits >> (idx - self.base)) & 1 == 0
    }

    /// Records packet `idx` (a [`OooMsg::fresh`] one) as arrived and moves
    /// `base` past the packets now all arrived: a bounded bit operation,
    /// not a scan.
    pub(crate) fn mark(&mut self, idx: u32) {
        self.bits |= 1 << (idx - self.base);
        let t = self.bits.trailing_ones();
        self.bits = self.bits.checked_shr(t).unwrap_or(0);
        self.base += t;
    }
}

/// OOO messages in progress, keyed by `(responder slot, requester device,
/// requester number)`: a short vector (a handful are in progress at once),
/// scanned by key, so lookups per packet are cheap and deterministic.
#[derive(Debug, Default)]
pub(crate) struct OooTable(Vec<((u32, u16, u32), OooMsg)>);

impl OooTable {
    /// Messages in progress.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn get(&self, key: &(u32, u16, u32)) -> Option<&OooMsg> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn insert(&mut self, key: (u32, u16, u32), v: OooMsg) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(e) => e.1 = v,
            None => self.0.push((key, v)),
        }
    }

    pub(crate) fn remove(&mut self, key: &(u32, u16, u32)) {
        if let Some(i) = self.0.iter().position(|(k, _)| k == key) {
            self.0.swap_remove(i);
        }
    }

    /// Keeps the entries whose key satisfies `keep`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&(u32, u16, u32)) -> bool) {
        self.0.retain(|(k, _)| keep(k));
    }
}

/// World-wide DC and OOO state.
#[derive(Debug)]
pub(crate) struct DcState {
    /// DCI arena slot → the responder state its DCT keeps for it.
    pub(crate) conns: BTreeMap<u32, Conn>,
    /// `(responder slot, requester device, requester number)` → message
    /// being placed out of order.
    pub(crate) ooo: OooTable,
    /// Placement and receive-WQE choices of OOO QPs.
    pub(crate) rng: SimRng,
    /// Requests DCTs refused for a wrong DC key.
    pub(crate) key_violations: u64,
}

impl DcState {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            conns: BTreeMap::new(),
            ooo: OooTable::default(),
            rng: SimRng::new(seed, Stream::Placement),
            key_violations: 0,
        }
    }
}

impl World {
    /// `mlx5dv_dci_stream_id_reset`: `EINVAL` if the QP is not a DCI,
    /// `EOPNOTSUPP` without DCI streams or outside RTS; the stream
    /// (`stream_id` modulo `2^log_num_concurent`, as for posting) leaves
    /// error and its later requests run.
    pub fn mlx5dv_dci_stream_id_reset(&mut self, qp: QpHandle, stream_id: u16) -> Result<()> {
        let v = Verb::Mlx5dvDciStreamIdReset;
        let q = self.qp(qp, v)?;
        if q.class != QpClass::Dci {
            return Err(invalid(
                v,
                format!("the QP is a {}, not a DCI", q.class.name()),
            ));
        }
        let Some(s) = q.dv.streams else {
            return Err(unsupported(v, "the DCI was not created with DCI streams"));
        };
        if q.phase.state() != QpState::ReadyToSend {
            return Err(unsupported(
                v,
                format!("the DCI is in {}, not RTS", q.phase.state()),
            ));
        }
        let stream = dci_stream(Some(s), stream_id);
        if q.dv.errored & (1u32 << stream) == 0 {
            if let Some(errno) = self.config.dci_reset_good_stream_errno {
                return Err(verbs_api::Error::from_errno(
                    v,
                    errno,
                    format!("stream {stream_id} is not in error (SimConfig::dci_reset_good_stream_errno)"),
                ));
            }
        }
        let q = self.qp_mut(qp, v)?;
        q.dv.errored &= !(1u32 << stream);
        self.kick(qp);
        Ok(())
    }

    /// READ/atomic requests a DCT of `device` answers at once
    /// (`max_dc_init_rd_atom`, the DC responder depth).
    pub(crate) fn dct_responder_resources(&self, device: u32) -> u8 {
        let m = self.device(device).profile.mlx5;
        u8::try_from(m.map_or(0, |m| m.max_dc_init_rd_atom)).unwrap_or(u8::MAX)
    }

    /// The number of requests DCTs refused for a wrong DC key so far.
    pub fn dc_key_violations(&self) -> u64 {
        self.dc.key_violations
    }

    /// Live DC connections (DCI → DCT responder states) in the world: at
    /// most one per DCI, whatever the number of DCTs.
    pub fn dc_connection_count(&self) -> usize {
        self.dc.conns.values().filter(|c| c.dct.is_some()).count()
    }

    /// Heap bytes the simulator holds for the DCT `qp`: its share of the QP
    /// arena (one slot), everything the QP owns out of line (rings,
    /// multicast list, alternate path, atomic replay table, SRQ SGE
    /// buffer), its entry in the device's QP-number table and its DC
    /// connection entries. (Accounted from sizes and capacities, not
    /// measured by an allocator; the arena's and the number table's spare
    /// capacity is not any one QP's.)
    pub fn dct_heap_bytes(&self, qp: QpHandle) -> Option<usize> {
        let q = self.qps.get(qp.index, qp.generation)?;
        let slot = self.qps.slot_bytes();
        let own = q.sq.heap_bytes()
            + q.rq.heap_bytes()
            + q.mcast.heap_bytes()
            + q.alt
                .as_ref()
                .map_or(0, |_| size_of::<super::state::AltPath>())
            + q.rx.heap_bytes()
            + super::QpnTable::ENTRY_BYTES;
        let conns: usize = self
            .dc
            .conns
            .values()
            .filter(|c| c.dct == Some(qp.index))
            .map(|c| size_of::<(u32, Conn)>() + c.srq_sges.len() * size_of::<Sge>())
            .sum();
        Some(slot + own + conns)
    }
}

/// The hardware stream channel a `stream_id` selects on a DCI: any 16-bit
/// id is accepted and taken modulo the DCI's `2^log_num_concurent`
/// concurrent streams (rdma-core's DC stream tests use ids past the
/// concurrency count); without DCI streams every id is the one stream 0.
pub(crate) fn dci_stream(streams: Option<DciStreams>, stream_id: u16) -> u16 {
    let n = streams.map_or(1u32, |s| 1u32 << s.log_num_concurent);
    (u32::from(stream_id) % n) as u16
}
