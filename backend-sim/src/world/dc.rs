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

use std::collections::BTreeMap;

use verbs_api::{
    DcType, DciStreams, DciStreamsCaps, Mlx5Context, Mlx5ContextFlags, Mlx5ContextMask,
    Mlx5QpCreateFlags, Mlx5QpInitAttr, Mlx5QpInitAttrMask, Mlx5SendOpsFlags, QpClass, QpInitAttrEx,
    QpInitAttrMask, QpState, QpType, Result, SendWr, Sge, Verb, WcStatus,
};

use super::queues::Exec;
use super::state::{DvQp, Gate, RxMsg};
use super::{invalid, unsupported, World};
use crate::datapath::RetryCounters;
use crate::fabric::{AckSyndrome, Address, Endpoint, Packet, Psn};
use crate::handles::{AhHandle, ContextHandle, QpHandle};
use crate::profile::DriverModel;
use crate::rng::{SimRng, Stream};
use crate::{DcKeyViolation, SimVerbs};

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

/// OOO messages in progress, keyed by `(responder slot, requester device,
/// requester number)`: a short vector (a handful are in progress at once),
/// scanned by key, so lookups per packet are cheap and deterministic.
#[derive(Debug, Default)]
pub(crate) struct OooTable(Vec<((u32, u16, u32), OooMsg)>);

impl OooTable {
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

/// `send_ops_flags` (mlx5dv part) each QP class may ask for
/// (dc-and-mlx5dv.md §1.4).
fn dv_send_ops_allowed(class: QpClass) -> Mlx5SendOpsFlags {
    use Mlx5SendOpsFlags as F;
    match class {
        QpClass::Rc => F::MR_INTERLEAVED | F::MR_LIST | F::MKEY_CONFIGURE | F::RAW_WQE | F::MEMCPY,
        QpClass::Dci => F::RAW_WQE | F::MEMCPY,
        QpClass::Uc | QpClass::XrcIni | QpClass::Ud | QpClass::RawPacket => F::RAW_WQE,
        _ => F::empty(),
    }
}

impl World {
    // --------------------------------------------------------------- verbs

    /// `mlx5dv_query_device`: the DC, DCI-stream and OOO capabilities of the
    /// device's profile; `comp_mask` on return says which fields were filled
    /// (OOO only when the profile supports it for some type). `EOPNOTSUPP`
    /// on a non-mlx5 (rxe) device.
    pub fn mlx5dv_query_device(
        &self,
        ctx: ContextHandle,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        let v = Verb::Mlx5dvQueryDevice;
        let device = self.ctx(ctx, v)?.device;
        let p = &self.device(device).profile;
        let Some(m) = p.mlx5.as_ref() else {
            return Err(unsupported(
                v,
                format!("the {} device is not an mlx5 device", p.name),
            ));
        };
        let mut out = Mlx5Context {
            version: 1,
            flags: Mlx5ContextFlags::CQE_V1,
            ..Mlx5Context::default()
        };
        let mut filled = Mlx5ContextMask::empty();
        if comp_mask.contains(Mlx5ContextMask::DCI_STREAMS) && m.dc {
            out.dci_streams_caps = m.dci_streams;
            filled |= Mlx5ContextMask::DCI_STREAMS;
        }
        if comp_mask.contains(Mlx5ContextMask::MAX_DC_RD_ATOM) && m.dc {
            out.max_dc_rd_atom = m.max_dc_rd_atom;
            out.max_dc_init_rd_atom = m.max_dc_init_rd_atom;
            filled |= Mlx5ContextMask::MAX_DC_RD_ATOM;
        }
        let o = m.ooo_recv_wrs;
        let any_ooo = o.max_rc | o.max_xrc | o.max_dct | o.max_ud | o.max_uc != 0;
        if comp_mask.contains(Mlx5ContextMask::OOO_RECV_WRS) && any_ooo {
            out.ooo_recv_wrs_caps = o;
            filled |= Mlx5ContextMask::OOO_RECV_WRS;
        }
        out.comp_mask = filled;
        Ok(out)
    }

    /// `mlx5dv_create_qp`: the mlx5dv attribute rules of dc-and-mlx5dv.md
    /// §1–§3 and §5.2, then the generic creation of `ibv_create_qp_ex`.
    /// Nothing is created on error.
    pub fn mlx5dv_create_qp(
        &mut self,
        ctx: ContextHandle,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
        dv: &Mlx5QpInitAttr,
    ) -> Result<QpHandle> {
        let v = Verb::Mlx5dvCreateQp;
        let device = self.ctx(ctx, v)?.device;
        let p = &self.device(device).profile;
        let m = match (p.driver, p.mlx5) {
            (DriverModel::Mlx5, Some(m)) => m,
            _ => {
                return Err(unsupported(
                    v,
                    format!(
                        "mlx5dv_create_qp on the {} device, which is not mlx5",
                        p.name
                    ),
                ))
            }
        };
        let mask = dv.comp_mask;
        if mask.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown mlx5dv comp_mask bits {:#x}", mask.unknown_bits()),
            ));
        }
        // DC type selection (§1.3).
        let dc = if mask.contains(Mlx5QpInitAttrMask::DC) {
            if attr.qp_type != QpType::Driver {
                return Err(invalid(v, "DC QP must be of type IBV_QPT_DRIVER"));
            }
            match dv.dc_init_attr.dc_type {
                t @ (DcType::Dci | DcType::Dct) => Some(t),
                t => return Err(invalid(v, format!("unknown dc_type {t}"))),
            }
        } else {
            if attr.qp_type == QpType::Driver {
                return Err(invalid(
                    v,
                    "an IBV_QPT_DRIVER QP needs MLX5DV_QP_INIT_ATTR_MASK_DC",
                ));
            }
            None
        };
        if dc.is_some() && !m.dc {
            return Err(unsupported(
                v,
                format!("the {} device does not support DC", p.name),
            ));
        }
        let class = QpClass::from_qp_type(attr.qp_type, dc);
        let is_dct = dc == Some(DcType::Dct);
        let is_dci = dc == Some(DcType::Dci);

        // DCT argument rules (§2.1).
        if is_dct {
            let allowed = Mlx5QpInitAttrMask::DC | Mlx5QpInitAttrMask::QP_CREATE_FLAGS;
            if !allowed.contains(mask) {
                return Err(invalid(
                    v,
                    format!(
                        "a DCT takes only DC and QP_CREATE_FLAGS in the mlx5dv comp_mask (got {mask})"
                    ),
                ));
            }
            if attr.comp_mask != QpInitAttrMask::PD {
                return Err(invalid(
                    v,
                    format!(
                        "a DCT takes exactly IBV_QP_INIT_ATTR_PD in comp_mask (got {})",
                        attr.comp_mask
                    ),
                ));
            }
            if attr.srq.is_none() || attr.recv_cq.is_none() {
                return Err(invalid(v, "a DCT needs an SRQ and a recv_cq"));
            }
        }
        // DCI argument rules (§3.1).
        if is_dci && (attr.cap.max_recv_wr != 0 || attr.cap.max_recv_sge != 0) {
            return Err(invalid(
                v,
                "a DCI has no receive queue: max_recv_wr and max_recv_sge must be 0",
            ));
        }
        let streams = if mask.contains(Mlx5QpInitAttrMask::DCI_STREAMS) {
            if !is_dci {
                return Err(invalid(v, "DCI_STREAMS is only valid for a DCI"));
            }
            let s = dv.dc_init_attr.dci_streams;
            let caps: DciStreamsCaps = m.dci_streams;
            if caps.max_log_num_concurent == 0 {
                return Err(invalid(v, "the device does not support DCI streams"));
            }
            if s.log_num_concurent > caps.max_log_num_concurent {
                return Err(invalid(
                    v,
                    format!(
                        "log_num_concurent {} is above the device's {}",
                        s.log_num_concurent, caps.max_log_num_concurent
                    ),
                ));
            }
            if s.log_num_errored > caps.max_log_num_errored {
                return Err(invalid(
                    v,
                    format!(
                        "log_num_errored {} is above the device's {}",
                        s.log_num_errored, caps.max_log_num_errored
                    ),
                ));
            }
            Some(s)
        } else {
            None
        };

        // create_flags (§1.2, §5.2).
        let flags = if mask.contains(Mlx5QpInitAttrMask::QP_CREATE_FLAGS) {
            dv.create_flags
        } else {
            Mlx5QpCreateFlags::empty()
        };
        self.check_dv_create_flags(device, attr, class, flags)?;

        // send_ops_flags (§1.4).
        if mask.contains(Mlx5QpInitAttrMask::SEND_OPS_FLAGS) {
            let ops = dv.send_ops_flags;
            if ops.unknown_bits() != 0 {
                return Err(unsupported(
                    v,
                    format!(
                        "unknown mlx5dv send_ops_flags bits {:#x}",
                        ops.unknown_bits()
                    ),
                ));
            }
            let extra = class.map_or(ops, |c| ops.difference(dv_send_ops_allowed(c)));
            if !extra.is_empty() {
                return Err(unsupported(
                    v,
                    format!("mlx5dv send_ops_flags {extra} are not supported on this QP type"),
                ));
            }
        }

        let qp = self.create_qp_as(ctx, attr, None, v, dc)?;
        let q = self.qp_mut(qp, v)?;
        q.dv = DvQp {
            dct_key: if is_dct {
                dv.dc_init_attr.dct_access_key
            } else {
                0
            },
            streams,
            ooo: flags.contains(Mlx5QpCreateFlags::OOO_DP),
            ..DvQp::default()
        };
        Ok(qp)
    }

    /// The mlx5dv `create_flags` rules for the QP's class on `device`.
    fn check_dv_create_flags(
        &self,
        device: u32,
        attr: &QpInitAttrEx<'_, SimVerbs>,
        class: Option<QpClass>,
        flags: Mlx5QpCreateFlags,
    ) -> Result<()> {
        use Mlx5QpCreateFlags as F;
        let v = Verb::Mlx5dvCreateQp;
        let p = &self.device(device).profile;
        if flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!(
                    "unknown mlx5dv create_flags bits {:#x}",
                    flags.unknown_bits()
                ),
            ));
        }
        if flags.contains(F::DISABLE_SCATTER_TO_CQE | F::ALLOW_SCATTER_TO_CQE) {
            return Err(invalid(
                v,
                "DISABLE_SCATTER_TO_CQE and ALLOW_SCATTER_TO_CQE exclude each other",
            ));
        }
        let raw = attr.qp_type == QpType::RawPacket;
        if class == Some(QpClass::Dct) {
            let refused = flags
                & (F::TUNNEL_OFFLOADS
                    | F::TIR_ALLOW_SELF_LOOPBACK_UC
                    | F::TIR_ALLOW_SELF_LOOPBACK_MC
                    | F::ALLOW_SCATTER_TO_CQE
                    | F::PACKET_BASED_CREDIT_MODE);
            if !refused.is_empty() {
                return Err(invalid(
                    v,
                    format!("create_flags {refused} are not valid for a DCT"),
                ));
            }
        } else {
            let raw_only = flags
                & (F::TUNNEL_OFFLOADS
                    | F::TIR_ALLOW_SELF_LOOPBACK_UC
                    | F::TIR_ALLOW_SELF_LOOPBACK_MC);
            if !raw_only.is_empty() && !raw {
                return Err(invalid(
                    v,
                    format!("create_flags {raw_only} are RAW_PACKET-only"),
                ));
            }
            if flags.contains(F::TUNNEL_OFFLOADS) {
                return Err(invalid(v, "the simulated device has no tunnel offloads"));
            }
            if flags.contains(F::PACKET_BASED_CREDIT_MODE) {
                if attr.qp_type != QpType::Rc {
                    return Err(invalid(v, "PACKET_BASED_CREDIT_MODE is RC-only"));
                }
                return Err(invalid(
                    v,
                    "the simulated device does not report MLX5DV_CONTEXT_FLAGS_PACKET_BASED_CREDIT_MODE",
                ));
            }
        }
        if flags.contains(F::SIG_PIPELINING) {
            return Err(unsupported(
                v,
                "SIG_PIPELINING needs SQD->RTS, which the mlx5 profile does not support",
            ));
        }
        if flags.contains(F::OOO_DP) {
            let o = p.mlx5.map(|m| m.ooo_recv_wrs).unwrap_or_default();
            // rdma-core is_qpt_ooo_sup: DRIVER -> max_dct for DCI and DCT.
            let cap = match attr.qp_type {
                QpType::Driver => o.max_dct,
                QpType::Rc => o.max_rc,
                QpType::XrcSend | QpType::XrcRecv => o.max_xrc,
                QpType::Uc => o.max_uc,
                QpType::Ud => o.max_ud,
                _ => 0,
            };
            if cap == 0 {
                return Err(unsupported(
                    v,
                    format!(
                        "the {} device does not support OOO_DP for {} QPs (no fallback)",
                        p.name, attr.qp_type
                    ),
                ));
            }
            let has_rq =
                matches!(attr.qp_type, QpType::Rc | QpType::Uc | QpType::Ud) && attr.srq.is_none();
            if has_rq && attr.cap.max_recv_wr > 1 && attr.cap.max_recv_wr > cap {
                return Err(invalid(
                    v,
                    format!(
                        "max_recv_wr {} is above the OOO limit {cap} for {} QPs",
                        attr.cap.max_recv_wr, attr.qp_type
                    ),
                ));
            }
        }
        Ok(())
    }

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

    // ------------------------------------------------------------ posting

    /// The DC addressing of one send request: `Some` on a DCI (required
    /// there), `None` elsewhere (refused there).
    pub(crate) fn dc_addressing(
        &self,
        qp: QpHandle,
        wr: &SendWr<'_, SimVerbs>,
    ) -> Result<Option<(AhHandle, u32, u64, u16)>> {
        let v = Verb::PostSend;
        let q = self.qp(qp, v)?;
        if q.class != QpClass::Dci {
            if wr.dc.is_some() {
                return Err(invalid(
                    v,
                    format!("DC addressing on a {} QP, not a DCI", q.class.name()),
                ));
            }
            return Ok(None);
        }
        let Some(dc) = wr.dc.as_ref() else {
            return Err(invalid(
                v,
                "a work request on a DCI needs DC addressing (mlx5dv_wr_set_dc_addr)",
            ));
        };
        self.ah(*dc.ah, v)?;
        Ok(Some((
            *dc.ah,
            dc.remote_dctn & 0xff_ffff,
            dc.remote_dc_key,
            dci_stream(q.dv.streams, dc.stream_id),
        )))
    }

    // ---------------------------------------------------------- requester

    /// Where a DC request goes: its AH resolved on the fabric, at `dctn`.
    fn dc_target(&self, ah: Option<AhHandle>, dctn: u32) -> Option<Endpoint> {
        let a = ah.and_then(|h| self.ahs.get(h.index, h.generation))?;
        let addr = if a.attr.is_global {
            Address::Gid(a.attr.grh.dgid)
        } else {
            Address::Lid(a.attr.dlid)
        };
        self.fabric.resolve(&addr).map(|port| Endpoint {
            qpn: dctn,
            device: port.device,
            port: port.port,
        })
    }

    /// The live DCT at `ep` (created, i.e. past INIT->RTR).
    fn dct_at(&self, ep: Endpoint) -> Option<QpHandle> {
        let h = self.qp_by_num(u32::from(ep.device.0), ep.qpn)?;
        let q = self.qps.get(h.index, h.generation)?;
        (q.class == QpClass::Dct && q.dv.dct_created).then_some(h)
    }

    /// The transmit loop's DCI step for the request at `send_seq`: flush it
    /// if its stream is in error, wait if it needs another target while
    /// requests are outstanding, else (re)connect and go.
    pub(crate) fn dc_gate(&mut self, qp: QpHandle) -> Gate {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return Gate::Go;
        };
        if q.class != QpClass::Dci {
            return Gate::Go;
        }
        let seq = q.tx.send_seq;
        if seq >= q.sq.tail
            || q.tx.blocked
            || q.tx.rnr_wait
            || q.phase.state() != QpState::ReadyToSend
        {
            return Gate::Go;
        }
        let w = *q.sq.get(seq).0;
        if w.exec == Exec::Failed(WcStatus::WrFlushErr) {
            // Flushed before a go-back-N rewind: not sent again.
            let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
            q.tx.send_seq = seq + 1;
            return Gate::Again;
        }
        if q.dv.errored & (1u32 << (w.stream & 31)) != 0 {
            let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
            let wm = q.sq.get_mut(seq);
            wm.exec = Exec::Failed(WcStatus::WrFlushErr);
            wm.checked = true;
            q.tx.send_seq = seq + 1;
            self.complete_sq(qp);
            return Gate::Again;
        }
        // An unresolvable AH goes nowhere: the fabric drops it, the DCI
        // times out (RETRY_EXC_ERR) as for an unreachable RC peer.
        let target = self.dc_target(w.ah, w.remote_qpn).unwrap_or(Endpoint {
            qpn: w.remote_qpn,
            device: crate::fabric::DeviceIndex(u16::MAX),
            port: 1,
        });
        let q = self.qps.get(qp.index, qp.generation).expect("live");
        if q.dv.connected && q.tx.dest == target {
            return Gate::Go;
        }
        if q.tx.send_seq > q.sq.done {
            return Gate::Stop;
        }
        self.dc_disconnect(qp);
        self.dc_connect(qp, target);
        Gate::Go
    }

    /// The DCI connects to `target`: the DCT (if there is one) gets fresh
    /// responder state for it, expecting the DCI's next PSN.
    fn dc_connect(&mut self, qp: QpHandle, target: Endpoint) {
        let dct = self.dct_at(target);
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        q.dv.connected = true;
        q.tx.dest = target;
        let epsn = q.tx.next_psn;
        let c = self.dc.conns.entry(qp.index).or_default();
        c.dct = dct.map(|d| d.index);
        c.epsn = epsn;
        c.nak_sent = false;
        c.msg = RxMsg::default();
        c.srq_num_sge = 0;
    }

    /// The DCI leaves its current target (the DCT forgets it).
    pub(crate) fn dc_disconnect(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if !core::mem::take(&mut q.dv.connected) {
            return;
        }
        let src = q.tx.src;
        let dct = self.dc.conns.get_mut(&qp.index).and_then(|c| c.dct.take());
        if let Some(d) = dct {
            self.dc.ooo.remove(&(d, src.device.0, src.qpn));
        }
    }

    /// A failed request of a DCI with streams: only its stream enters error
    /// (true: the DCI stays in service) unless `2^log_num_errored` distinct
    /// streams are then in error (false: the DCI goes to ERR as usual).
    pub(crate) fn dci_stream_absorbs(
        &mut self,
        qp: QpHandle,
        stream: u16,
        status: WcStatus,
    ) -> bool {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return false;
        };
        let Some(s) = q.dv.streams else {
            return false;
        };
        if q.class != QpClass::Dci {
            return false;
        }
        let bit = 1u32 << (stream & 31);
        if q.dv.errored & bit != 0 && status == WcStatus::WrFlushErr {
            return true;
        }
        q.dv.errored |= bit;
        if q.dv.errored.count_ones() >= 1u32 << s.log_num_errored {
            return false;
        }
        // Only this stream is in error: what was sent after the failure is
        // sent again on a fresh connection, the others go on.
        let req = q.phase.parts().2.unwrap_or_default();
        for seq in q.sq.done..q.tx.send_seq {
            let w = q.sq.get_mut(seq);
            if matches!(w.exec, Exec::Sent | Exec::Done) {
                w.exec = Exec::Queued;
            }
            w.received = 0;
        }
        q.tx.send_seq = q.sq.done;
        q.tx.blocked = false;
        q.tx.rd_atomic = 0;
        q.tx.retry = RetryCounters::new(req.retry_cnt, req.rnr_retry);
        self.dc_disconnect(qp);
        self.kick(qp);
        true
    }

    /// The DC side of a state change (after the executor's).
    pub(crate) fn dc_on_state(&mut self, qp: QpHandle, from: QpState, to: QpState) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        match q.class {
            QpClass::Dct if to == QpState::ReadyToReceive && from == QpState::Init => {
                q.dv.dct_created = true;
            }
            QpClass::Dci if from != to => {
                if to == QpState::Reset {
                    q.dv.errored = 0;
                }
                if matches!(
                    to,
                    QpState::Reset | QpState::Error | QpState::ReadyToReceive
                ) {
                    self.dc_disconnect(qp);
                }
            }
            _ => {}
        }
    }

    /// Before a QP is destroyed: its DC connections go.
    pub(crate) fn dc_on_destroy(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        match q.class {
            QpClass::Dci => {
                self.dc_disconnect(qp);
                self.dc.conns.remove(&qp.index);
            }
            QpClass::Dct => {
                // The DCIs still connected to it lose their responder state
                // (their requests then find no connection).
                for c in self.dc.conns.values_mut() {
                    if c.dct == Some(qp.index) {
                        c.dct = None;
                    }
                }
                self.dc.ooo.retain(|k| k.0 != qp.index);
            }
            _ => self.dc.ooo.retain(|k| k.0 != qp.index),
        }
    }

    // ---------------------------------------------------------- responder

    /// A request from a DCI at a DCT: the DC key, then the RC responder with
    /// the DCT's state for that DCI swapped in.
    pub(crate) fn dct_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let key = s.sq.get(p.cookie).0.dc_key;
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        if key != r.dv.dct_key {
            self.dc.key_violations += 1;
            match self.config.dc_key_violation {
                DcKeyViolation::SilentDrop => self.discard(p, "DC key violation"),
                DcKeyViolation::NakRemoteAccess => {
                    self.discard(p, "DC key violation");
                    self.send_ack(p, AckSyndrome::RemoteAccessError, p.psn, 0);
                }
            }
            return;
        }
        if !self.swap_conn(rq, req) {
            self.discard(p, "no DC connection from this DCI");
            return;
        }
        self.rc_receive(rq, req, p);
        self.swap_conn(rq, req);
    }

    /// Exchanges the DCT's responder state with that of its connection
    /// from the DCI `req` (false: `req` is not connected to `rq`).
    fn swap_conn(&mut self, rq: QpHandle, req: QpHandle) -> bool {
        let Self { dc, qps, .. } = self;
        let (Some(c), Some(r)) = (
            dc.conns.get_mut(&req.index),
            qps.get_mut(rq.index, rq.generation),
        ) else {
            return false;
        };
        if c.dct != Some(rq.index) {
            return false;
        }
        core::mem::swap(&mut c.epsn, &mut r.rx.epsn);
        core::mem::swap(&mut c.nak_sent, &mut r.rx.nak_sent);
        core::mem::swap(&mut c.msg, &mut r.rx.msg);
        core::mem::swap(&mut c.srq_sges, &mut r.rx.srq_sges);
        core::mem::swap(&mut c.srq_num_sge, &mut r.rx.srq_num_sge);
        true
    }

    /// `MLX5DV_QP_CREATE_OOO_DP` on one side only (§5.1 "must be set on both
    /// sides"): the responder refuses the request with an Invalid Request
    /// NAK before touching memory or receive WQEs; the requester completes
    /// Whether the QP was created with `MLX5DV_QP_CREATE_OOO_DP` (its data
    /// may be placed out of order; `ibv_query_qp_data_in_order` says 0).
    pub fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool> {
        Ok(self.qp(qp, Verb::QueryQp)?.dv.ooo)
    }

    /// it with `IBV_WC_REM_INV_REQ_ERR`. True when refused.
    pub(crate) fn ooo_mismatch(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) -> bool {
        let (Some(r), Some(s)) = (
            self.qps.get(rq.index, rq.generation),
            self.qps.get(req.index, req.generation),
        ) else {
            return false;
        };
        if r.dv.ooo == s.dv.ooo {
            return false;
        }
        let reliable = super::state::transport_of(r.class).is_reliable();
        self.discard(p, "OOO_DP set on one side only");
        if reliable {
            self.send_ack(p, AckSyndrome::InvalidRequest, p.psn, 0);
        }
        true
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
