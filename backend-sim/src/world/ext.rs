//! The extended verbs (issue #13 item 4): `ibv_rereg_mr`, `ibv_resize_cq`,
//! `ibv_query_device_ex`, extended CQs, the `ibv_wr_*` API, memory
//! windows, `ibv_query_qp_data_in_order`, GID entries and ECE.
//!
//! Their state lives in [`ExtState`], beside the objects it describes
//! (keyed by arena index and generation), so the core object types stay
//! as they are.

use std::collections::BTreeMap;

use verbs_api::errno::{ENODATA, ENOMEM, EOPNOTSUPP, EPERM};
use verbs_api::{
    inc_rkey, AccessFlags, CqInitAttrEx, CqInitAttrMask, CqModerationCaps, CreateCqAttrFlags,
    DataInOrderCaps, DataInOrderFlags, DeviceAttrEx, Ece, Error, ErrorKind, GidEntry, GidType,
    LinkLayer, MwInfo, MwType, QpType, ReregMrFlags, Result, SendFlags, SendOpsFlags, SendWr, Sge,
    UdInfo, Verb, WcEx, WcExFlags, WcStatus, WrData, WrEx, WrOp, WrOpcode,
};

use super::state::mr_view;
use super::{busy, invalid, misuse, unsupported, World};
use crate::arena::Arena;
use crate::datapath::{check_post_send, MrView, SendQueueView, SendWrView};
use crate::handles::{ContextHandle, CqHandle, MrHandle, MwHandle, PdHandle, QpHandle};
use crate::profile::DriverModel;
use crate::SimVerbs;

/// The index bit that marks an rkey as a memory window's: MW keys are
/// `((MW_KEY_BIT | index) << 8) | variant`, MR keys `(index << 8) | variant`.
const MW_KEY_BIT: u32 = 0x80_0000;

/// mlx5's PCI vendor id, the `vendor_id` of its ECE (`PCI_VENDOR_ID_MELLANOX`).
const MLX5_ECE_VENDOR: u32 = 0x02c9;

/// The ECE option bits the simulated mlx5 devices accept (an *estimate*:
/// the bits are firmware-defined and undocumented; docs/divergence.md).
pub const MLX5_ECE_OPTIONS: u32 = 0x0000_0003;

/// The simulated mlx5 `hca_core_clock` in kHz (*estimate*, the 156.25 MHz
/// clock ConnectX-5/6 dumps commonly show).
pub const MLX5_HCA_CORE_CLOCK_KHZ: u64 = 156_250;

/// `completion_timestamp_mask` of the simulated mlx5 devices (63 bits).
const MLX5_TS_MASK: u64 = 0x7fff_ffff_ffff_ffff;

/// A memory window.
#[derive(Debug)]
pub(crate) struct Mw {
    pub(crate) pd: PdHandle,
    pub(crate) device: u32,
    pub(crate) mw_type: MwType,
    /// The key the device checks (changed when a bind executes).
    pub(crate) rkey: u32,
    /// `ibv_mw.rkey` as the application sees it (changed at post time,
    /// as mlx5's `ibv_bind_mw` does).
    pub(crate) user_rkey: u32,
    pub(crate) bound: Option<MwBound>,
}

/// Where a bound window points.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MwBound {
    pub(crate) mr: MrHandle,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: AccessFlags,
    /// Type 2 (2B): the QP the window is bound to.
    pub(crate) qp: Option<QpHandle>,
}

/// A bind posted and not yet executed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingBind {
    mw: MwHandle,
    rkey: u32,
    mr: Option<MrHandle>,
    addr: u64,
    length: u64,
    access: AccessFlags,
}

/// State of the extended verbs.
#[derive(Debug, Default)]
pub(crate) struct ExtState {
    pub(crate) mws: Arena<Mw>,
    /// Extended CQs: index → (generation, `wc_flags`).
    cq_ex: BTreeMap<u32, (u32, WcExFlags)>,
    /// QPs created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: index →
    /// (generation, `send_ops_flags`).
    qp_ops: BTreeMap<u32, (u32, SendOpsFlags)>,
    /// `ibv_set_ece` options: QP index → (generation, options).
    ece: BTreeMap<u32, (u32, u32)>,
    /// Binds posted: (QP index, generation, send-queue seq) → bind.
    binds: BTreeMap<(u32, u32, u64), PendingBind>,
}

fn get_gen<T: Copy>(m: &BTreeMap<u32, (u32, T)>, index: u32, generation: u32) -> Option<T> {
    m.get(&index)
        .filter(|(g, _)| *g == generation)
        .map(|(_, v)| *v)
}

fn err(verb: Verb, errno: i32, msg: impl Into<String>) -> Error {
    Error::from_errno(verb, errno, msg)
}

impl World {
    // -------------------------------------------------------------- rereg

    /// `ibv_rereg_mr` (libibverbs, kernel `ib_uverbs_rereg_mr`, mlx5 and
    /// rxe `rereg_user_mr`): input errors are `EINVAL` and change nothing;
    /// `EBUSY` while windows are bound to the MR; rxe cannot change the
    /// translation (`EOPNOTSUPP`). PD and access changes keep the keys;
    /// a new translation gets a new buffer and new keys (mlx5 makes a new
    /// mkey when it cannot reuse the old one; the simulator always does).
    pub fn rereg_mr(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        new_pd: Option<PdHandle>,
        length: usize,
        access: AccessFlags,
    ) -> Result<()> {
        let v = Verb::ReregMr;
        let m = self.live_mr(mr, v)?;
        let (old_pd, device, pins, old_access) = (m.pd, m.device, m.pins, m.access);
        if flags.is_empty() || flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("flags {flags} must be a non-empty set of CHANGE_TRANSLATION, CHANGE_PD, CHANGE_ACCESS"),
            ));
        }
        let translation = flags.contains(ReregMrFlags::CHANGE_TRANSLATION);
        if translation && length == 0 {
            return Err(invalid(v, "CHANGE_TRANSLATION with length 0"));
        }
        let pd = if flags.contains(ReregMrFlags::CHANGE_PD) {
            let Some(pd) = new_pd else {
                return Err(invalid(v, "CHANGE_PD without a PD"));
            };
            let old_ctx = self.pd(old_pd, v)?.ctx;
            let new_ctx = self.pd(pd, v)?.ctx;
            self.same_ctx(v, "new PD", new_ctx, old_ctx)?;
            pd
        } else {
            old_pd
        };
        let access = if flags.contains(ReregMrFlags::CHANGE_ACCESS) {
            self.check_access(device, access, v)?;
            access
        } else {
            old_access
        };
        let bound = self.mws_bound_to(mr);
        if bound > 0 {
            return Err(busy(
                v,
                format!("{bound} memory windows are bound to the MR"),
            ));
        }
        let profile = &self.device(device).profile;
        if translation {
            if profile.driver == DriverModel::Rxe {
                return Err(unsupported(
                    v,
                    "rxe re-registers only the PD and the access flags (CHANGE_TRANSLATION)",
                ));
            }
            if pins > 0 {
                return Err(misuse(
                    v,
                    format!("{pins} posted work requests still name the MR's buffer (CHANGE_TRANSLATION)"),
                ));
            }
            // A temporary registration makes and checks the new buffer
            // (length, budget, address); its bytes and address move into
            // this MR and the old ones leave with the temporary.
            let tmp = self
                .reg_mr(pd, length, access)
                .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))?;
            let (a, b) = self
                .mrs
                .pair_by_index_mut(mr.index, tmp.index)
                .expect("two live MRs");
            core::mem::swap(&mut a.bytes, &mut b.bytes);
            core::mem::swap(&mut a.addr, &mut b.addr);
            let mut variant = b.lkey & 0xff;
            if variant == a.lkey & 0xff {
                variant = (variant + 1) & 0xff;
            }
            let key = (mr.index << 8) | variant;
            a.lkey = key;
            a.rkey = key;
            a.invalidated = false;
            self.dereg_mr(tmp)
                .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))?;
        }
        if pd != old_pd {
            self.pd_mut(old_pd, v)?.users -= 1;
            self.pd_mut(pd, v)?.users += 1;
        }
        let m = self.mr_mut(mr, v)?;
        m.pd = pd;
        m.access = access;
        Ok(())
    }

    /// The access checks of `ibv_reg_mr` (data-path §9.2).
    fn check_access(&self, device: u32, access: AccessFlags, v: Verb) -> Result<()> {
        // IBV_ACCESS_OPTIONAL_RANGE is dropped silently, as by reg_mr.
        let access = AccessFlags(access.bits() & !0x3ff0_0000);
        if access.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown access flag bits {:#x}", access.unknown_bits()),
            ));
        }
        if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(invalid(
                v,
                format!(
                    "access {access} asks for REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE"
                ),
            ));
        }
        let profile = &self.device(device).profile;
        if access.contains(AccessFlags::ON_DEMAND) && !profile.odp {
            return Err(unsupported(
                v,
                "ON_DEMAND: the device has no on-demand paging",
            ));
        }
        if access.intersects(AccessFlags::FLUSH_GLOBAL | AccessFlags::FLUSH_PERSISTENT) {
            return Err(unsupported(
                v,
                "FLUSH access flags are not re-registrable here",
            ));
        }
        Ok(())
    }

    // ---------------------------------------------------------- resize_cq

    /// `ibv_resize_cq`: rounded as `ibv_create_cq` (`cq_size`); `EINVAL`
    /// for 0, above `max_cqe`, or fewer entries than are queued (rxe
    /// `rxe_cq_chk_attr`; mlx5 cannot copy more CQEs than fit).
    pub fn resize_cq(&mut self, cq: CqHandle, cqe: u32) -> Result<()> {
        let v = Verb::ResizeCq;
        let c = self.cq(cq, v)?;
        let (device, queued, overrun) = (c.device, c.entries.len(), c.overrun);
        let actual = self
            .cq_size(device, cqe)
            .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))?;
        if (cqe as usize) < queued {
            return Err(invalid(
                v,
                format!("cqe {cqe} is below the {queued} completions queued in the CQ"),
            ));
        }
        if overrun {
            return Err(Error::new(
                v,
                ErrorKind::Other(verbs_api::errno::EIO),
                "the CQ overran and is in error",
            ));
        }
        self.cq_mut(cq, v)?.cqe = actual;
        Ok(())
    }

    // --------------------------------------------------- query_device_ex

    /// `ibv_query_device_ex`: the base attributes plus what the profile
    /// can answer (see docs/divergence.md for the estimates).
    pub fn query_device_ex(&self, ctx: ContextHandle) -> Result<DeviceAttrEx> {
        let v = Verb::QueryDeviceEx;
        let c = self.ctx(ctx, v)?;
        let d = self.device(c.device);
        let p = &d.profile;
        let attr = d.attr();
        let mlx5 = p.driver == DriverModel::Mlx5;
        let mut raw = 0;
        if mlx5 {
            use verbs_api::QpCreateFlags as F;
            if p.create_flags.contains(F::CVLAN_STRIPPING) {
                raw |= verbs_api::RAW_PACKET_CAP_CVLAN_STRIPPING;
            }
            if p.create_flags.contains(F::SCATTER_FCS) {
                raw |= verbs_api::RAW_PACKET_CAP_SCATTER_FCS;
            }
            raw |= verbs_api::RAW_PACKET_CAP_IP_CSUM;
        }
        let mut flags_ex = attr.device_cap_flags.bits();
        if mlx5 {
            if p.create_flags
                .contains(verbs_api::QpCreateFlags::SCATTER_FCS)
            {
                flags_ex |= verbs_api::DEVICE_RAW_SCATTER_FCS;
            }
            if p.create_flags
                .contains(verbs_api::QpCreateFlags::PCI_WRITE_END_PADDING)
            {
                flags_ex |= verbs_api::DEVICE_PCI_WRITE_END_PADDING;
            }
        }
        Ok(DeviceAttrEx {
            phys_port_cnt_ex: u32::from(attr.phys_port_cnt),
            orig_attr: attr,
            comp_mask: 0,
            odp_caps: verbs_api::OdpCaps::default(),
            completion_timestamp_mask: if mlx5 { MLX5_TS_MASK } else { 0 },
            hca_core_clock: if mlx5 { MLX5_HCA_CORE_CLOCK_KHZ } else { 0 },
            device_cap_flags_ex: flags_ex,
            packet_pacing_caps: verbs_api::PacketPacingCaps {
                qp_rate_limit_min: 0,
                qp_rate_limit_max: p.rate_limit_max_kbps,
                supported_qpts: 0,
            },
            raw_packet_caps: raw,
            cq_mod_caps: if mlx5 {
                CqModerationCaps {
                    max_cq_count: u16::MAX,
                    max_cq_period: 4095,
                }
            } else {
                CqModerationCaps::default()
            },
            ..DeviceAttrEx::default()
        })
    }

    // -------------------------------------------------------- extended CQ

    /// The `wc_flags` the device can report: the standard fields, plus
    /// the completion timestamp where the device has a clock (mlx5), plus
    /// the stripped C-VLAN where the device strips VLANs (it claims
    /// `IBV_RAW_PACKET_CAP_CVLAN_STRIPPING`; simulated packets carry no
    /// VLAN tag, so the value read is 0).
    fn supported_wc_flags(&self, device: u32) -> WcExFlags {
        let p = &self.device(device).profile;
        let cvlan = if p
            .create_flags
            .contains(verbs_api::QpCreateFlags::CVLAN_STRIPPING)
        {
            WcExFlags::CVLAN
        } else {
            WcExFlags::empty()
        };
        match p.driver {
            DriverModel::Mlx5 => WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP | cvlan,
            DriverModel::Rxe => WcExFlags::STANDARD | cvlan,
        }
    }

    /// `ibv_create_cq_ex`: `EINVAL` for unknown `comp_mask` or `flags`
    /// bits, `EOPNOTSUPP` for `wc_flags` the device cannot report, then
    /// as `ibv_create_cq`.
    pub fn create_cq_ex(
        &mut self,
        ctx: ContextHandle,
        attr: &CqInitAttrEx<'_, SimVerbs>,
    ) -> Result<CqHandle> {
        let v = Verb::CreateCqEx;
        let device = self.ctx(ctx, v)?.device;
        if attr.comp_mask.unknown_bits() != 0 || attr.comp_mask.contains(CqInitAttrMask::PD) {
            return Err(invalid(
                v,
                format!("comp_mask {} is not supported (FLAGS only)", attr.comp_mask),
            ));
        }
        if attr.comp_mask.contains(CqInitAttrMask::FLAGS) && attr.flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown create flags {:#x}", attr.flags.unknown_bits()),
            ));
        }
        if attr.comp_mask.contains(CqInitAttrMask::FLAGS)
            && attr.flags.difference(CreateCqAttrFlags::SINGLE_THREADED)
                != CreateCqAttrFlags::empty()
        {
            // IGNORE_OVERRUN is a known flag the model lacks (a CQ overrun
            // is always reported): unsupported, not invalid.
            return Err(err(
                v,
                EOPNOTSUPP,
                format!(
                    "create flags {} are not modelled (SINGLE_THREADED only)",
                    attr.flags
                ),
            ));
        }
        let extra = attr.wc_flags.difference(self.supported_wc_flags(device));
        if !extra.is_empty() {
            return Err(err(
                v,
                EOPNOTSUPP,
                format!(
                    "wc_flags {extra} are not supported by the {} device",
                    self.device(device).profile.name
                ),
            ));
        }
        let cq = self
            .create_cq(
                ctx,
                attr.cqe,
                attr.cq_context,
                attr.channel.copied(),
                attr.comp_vector,
            )
            .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))?;
        self.ext
            .cq_ex
            .insert(cq.index, (cq.generation, attr.wc_flags));
        Ok(cq)
    }

    /// The extended poll: `ibv_start_poll` + `ibv_next_poll` … +
    /// `ibv_end_poll`, each completion read with the CQ's `wc_flags`.
    pub fn poll_cq_ex(&mut self, cq: CqHandle, out: &mut [WcEx]) -> Result<usize> {
        let v = Verb::PollCqEx;
        self.cq(cq, v)?;
        let Some(flags) = get_gen(&self.ext.cq_ex, cq.index, cq.generation) else {
            return Err(invalid(v, "the CQ was not created with ibv_create_cq_ex"));
        };
        let clock = self.device(self.cq(cq, v)?.device).profile.driver == DriverModel::Mlx5;
        let f = |x: WcExFlags| flags.contains(x);
        self.poll_cq_with(cq, out.len(), v, |n, e| {
            let w = e.wc;
            out[n] = WcEx {
                wr_id: w.wr_id,
                status: w.status,
                opcode: w.opcode,
                vendor_err: w.vendor_err,
                wc_flags: w.wc_flags,
                byte_len: f(WcExFlags::BYTE_LEN).then_some(w.byte_len),
                imm_data: f(WcExFlags::IMM).then_some(w.imm_data),
                qp_num: f(WcExFlags::QP_NUM).then_some(w.qp_num),
                src_qp: f(WcExFlags::SRC_QP).then_some(w.src_qp),
                slid: f(WcExFlags::SLID).then_some(w.slid),
                sl: f(WcExFlags::SL).then_some(w.sl),
                dlid_path_bits: f(WcExFlags::DLID_PATH_BITS).then_some(w.dlid_path_bits),
                completion_timestamp: (clock && f(WcExFlags::COMPLETION_TIMESTAMP))
                    .then(|| ns_to_ticks(e.ts_ns) & MLX5_TS_MASK),
                completion_wallclock_ns: None,
            };
        })
    }

    // ------------------------------------------------------- send ops

    /// Records the `send_ops_flags` of a QP created with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` (the `ibv_wr_*` API exists only
    /// for those).
    pub(crate) fn record_send_ops(&mut self, qp: QpHandle, ops: SendOpsFlags) {
        self.ext.qp_ops.insert(qp.index, (qp.generation, ops));
    }

    /// The `ibv_wr_*` batch (`ibv_wr_start` … `ibv_wr_complete`): checked
    /// whole first, then posted; nothing is posted on error.
    pub(crate) fn post_wr(&mut self, qp: QpHandle, batch: &[WrEx<'_, SimVerbs>]) -> Result<()> {
        let v = Verb::PostWr;
        let q = self.qp(qp, v)?;
        let Some(ops) = get_gen(&self.ext.qp_ops, qp.index, qp.generation) else {
            return Err(err(
                v,
                EOPNOTSUPP,
                "the QP was not created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: it has no ibv_wr_* API",
            ));
        };
        if matches!(q.class, verbs_api::QpClass::Dci | verbs_api::QpClass::Dct) {
            return Err(err(
                v,
                EOPNOTSUPP,
                "DC addressing (mlx5dv_wr_set_dc_addr) is not part of WrEx: post on a DCI with post_send",
            ));
        }
        let (qp_type, device, pd) = (q.qp_type, q.device, q.pd);
        // Singles of ibv_wr_set_sge, kept alive for the SendWr slices.
        let singles: Vec<[Sge; 1]> = batch
            .iter()
            .map(|w| match w.data {
                WrData::Sge(s) => [s],
                _ => [Sge::default()],
            })
            .collect();
        let mut wrs: Vec<SendWr<'_, SimVerbs>> = Vec::with_capacity(batch.len());
        let mut binds = Vec::new();
        for (i, w) in batch.iter().enumerate() {
            let at = |msg: String| format!("work request {i} (wr_id {}): {msg}", w.wr_id);
            if !ops.contains(w.op.send_op_flag()) {
                return Err(err(
                    v,
                    EOPNOTSUPP,
                    at(format!(
                        "{} is not in the QP's send_ops_flags {ops}",
                        w.op.opcode()
                    )),
                ));
            }
            let mut s = SendWr::<SimVerbs> {
                wr_id: w.wr_id,
                opcode: w.op.opcode(),
                send_flags: w.wr_flags - SendFlags::INLINE,
                ..SendWr::default()
            };
            match w.data {
                WrData::None => {}
                WrData::Sge(_) => s.sg_list = &singles[i],
                WrData::SgeList(l) => s.sg_list = l,
                WrData::InlineList(l) => {
                    s.sg_list = l;
                    s.send_flags |= SendFlags::INLINE;
                }
            }
            match &w.op {
                WrOp::Send => {}
                WrOp::SendImm { imm_data } => s.imm_data = *imm_data,
                WrOp::SendInv { invalidate_rkey } | WrOp::LocalInv { invalidate_rkey } => {
                    s.imm_data = *invalidate_rkey;
                }
                WrOp::RdmaWrite { rkey, remote_addr } | WrOp::RdmaRead { rkey, remote_addr } => {
                    s.rdma = verbs_api::RdmaInfo {
                        remote_addr: *remote_addr,
                        rkey: *rkey,
                    };
                }
                WrOp::RdmaWriteImm {
                    rkey,
                    remote_addr,
                    imm_data,
                } => {
                    s.rdma = verbs_api::RdmaInfo {
                        remote_addr: *remote_addr,
                        rkey: *rkey,
                    };
                    s.imm_data = *imm_data;
                }
                WrOp::AtomicCmpSwp {
                    rkey,
                    remote_addr,
                    compare,
                    swap,
                } => {
                    s.atomic = verbs_api::AtomicInfo {
                        remote_addr: *remote_addr,
                        compare_add: *compare,
                        swap: *swap,
                        rkey: *rkey,
                    };
                }
                WrOp::AtomicFetchAdd {
                    rkey,
                    remote_addr,
                    add,
                } => {
                    s.atomic = verbs_api::AtomicInfo {
                        remote_addr: *remote_addr,
                        compare_add: *add,
                        swap: 0,
                        rkey: *rkey,
                    };
                }
                WrOp::BindMw {
                    mw,
                    rkey,
                    bind_info,
                } => {
                    let m = self.mw(**mw, v)?;
                    if m.mw_type != MwType::Type2 {
                        return Err(invalid(v, at("ibv_wr_bind_mw binds type 2 windows; a type 1 window is bound with ibv_bind_mw".into())));
                    }
                    if let Some(mr) = bind_info.mr {
                        let mpd = self.live_mr(*mr, v)?.pd;
                        if mpd != m.pd {
                            return Err(err(
                                v,
                                EPERM,
                                at("the MR's PD is not the window's".into()),
                            ));
                        }
                    } else if bind_info.addr != 0 || bind_info.length != 0 {
                        return Err(invalid(
                            v,
                            at("bind_info has an address or length but no MR".into()),
                        ));
                    }
                    binds.push((
                        i,
                        PendingBind {
                            mw: **mw,
                            rkey: *rkey,
                            mr: bind_info.mr.copied(),
                            addr: bind_info.addr,
                            length: bind_info.length,
                            access: bind_info.mw_access_flags,
                        },
                    ));
                }
            }
            match (qp_type, &w.ud) {
                (QpType::Ud, None) => {
                    return Err(invalid(v, at("a UD QP needs ibv_wr_set_ud_addr".into())));
                }
                (QpType::Ud, Some(ud)) => {
                    self.ah(*ud.ah, v)?;
                    s.ud = Some(UdInfo {
                        ah: ud.ah,
                        remote_qpn: ud.remote_qpn,
                        remote_qkey: ud.remote_qkey,
                    });
                }
                (_, Some(_)) => {
                    return Err(invalid(
                        v,
                        at(format!("ibv_wr_set_ud_addr on a {qp_type} QP")),
                    ));
                }
                _ => {}
            }
            match (qp_type, w.xrc_srqn) {
                (QpType::XrcSend, None) => {
                    return Err(invalid(
                        v,
                        at("an XRC_SEND QP needs ibv_wr_set_xrc_srqn".into()),
                    ));
                }
                (QpType::XrcSend, Some(n)) => s.remote_srqn = n,
                (_, Some(_)) => {
                    return Err(invalid(
                        v,
                        at(format!("ibv_wr_set_xrc_srqn on a {qp_type} QP")),
                    ));
                }
                _ => {}
            }
            wrs.push(s);
        }
        // The whole batch must pass the post-time checks (mlx5 records the
        // first builder error and ibv_wr_complete returns it, posting
        // nothing), so every request is checked against the queue as it
        // will be when its turn comes.
        let flavor = self.config.errno_flavor;
        let q = self.qp(qp, v)?;
        let profile = &self.device(device).profile;
        let occupied = q.sq.occupied();
        for (i, s) in wrs.iter().enumerate() {
            let view = SendQueueView {
                transport: super::state::transport_of(q.class),
                state: q.phase.state(),
                cap: q.cap,
                outstanding: u32::try_from(occupied + i as u64).unwrap_or(u32::MAX),
                atomics_supported: profile.attr.atomic_cap != verbs_api::AtomicCap::None,
                ip_csum_supported: false,
            };
            if let Err(r) = check_post_send(&view, &SendWrView::of(s), flavor) {
                // The errno of ibv_post_send under the same driver (mlx5's
                // builders report a full queue and oversized inline data as
                // ENOMEM, too many SGEs as ENOMEM or EINVAL by flavour).
                let e = r.to_error(v, 0);
                return Err(err(
                    v,
                    e.errno(),
                    format!(
                        "work request {i} (wr_id {}): {}; nothing of the batch was posted",
                        s.wr_id,
                        e.message()
                    ),
                ));
            }
            if s.send_flags.contains(SendFlags::INLINE) && !s.sg_list.is_empty() {
                self.inline_sources(qp, s.sg_list)
                    .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))?;
            }
        }
        let _ = pd;
        // Binds are known to the executor before the post runs them.
        let tail = q.sq.tail;
        if !binds.is_empty() {
            self.prune_binds();
        }
        for (i, b) in &binds {
            self.ext
                .binds
                .insert((qp.index, qp.generation, tail + *i as u64), *b);
        }
        let r = self.post_send(qp, &wrs);
        match r {
            Ok(()) => {
                for (_, b) in &binds {
                    if let Some(m) = self.ext.mws.get_mut(b.mw.index, b.mw.generation) {
                        m.user_rkey = b.rkey;
                    }
                }
                Ok(())
            }
            Err(e) => {
                for (i, _) in &binds {
                    self.ext
                        .binds
                        .remove(&(qp.index, qp.generation, tail + *i as u64));
                }
                Err(Error::from_errno(v, e.errno(), e.message().to_owned()))
            }
        }
    }

    /// `ibv_post_send` with `IBV_WR_BIND_MW` requests (type 2 windows):
    /// the `wr.bind_mw` part C carries beside each such request, given as
    /// `(index in wrs, window, new rkey, bind info)`. The drop-in library
    /// posts legacy chains with binds through this; the checks are those
    /// of `ibv_wr_bind_mw` (a type 2 window, the MR in the window's PD),
    /// then the chain is posted as by `World::post_send`, `bad_wr` at the
    /// first failing request.
    pub fn post_send_with_binds(
        &mut self,
        qp: QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, verbs_api::MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()> {
        let v = Verb::PostSend;
        let mut pending = Vec::with_capacity(binds.len());
        for (i, mw, rkey, info) in binds {
            let m = self.mw(*mw, v).map_err(|e| e.with_bad_wr(*i))?;
            if m.mw_type != MwType::Type2 {
                return Err(invalid(v, "IBV_WR_BIND_MW binds type 2 windows; a type 1 window is bound with ibv_bind_mw").with_bad_wr(*i));
            }
            if let Some(mr) = info.mr {
                let mpd = self.live_mr(*mr, v).map_err(|e| e.with_bad_wr(*i))?.pd;
                if mpd != m.pd {
                    return Err(err(v, EPERM, "the MR's PD is not the window's").with_bad_wr(*i));
                }
            }
            pending.push((
                *i,
                PendingBind {
                    mw: *mw,
                    rkey: *rkey,
                    mr: info.mr.copied(),
                    addr: info.addr,
                    length: info.length,
                    access: info.mw_access_flags,
                },
            ));
        }
        let tail = self.qp(qp, v)?.sq.tail;
        for (i, b) in &pending {
            self.ext
                .binds
                .insert((qp.index, qp.generation, tail + *i as u64), *b);
        }
        let r = self.post_send(qp, wrs);
        let posted = match &r {
            Ok(()) => wrs.len(),
            Err(e) => e.bad_wr().unwrap_or(0),
        };
        for (i, b) in &pending {
            if *i < posted {
                if let Some(m) = self.ext.mws.get_mut(b.mw.index, b.mw.generation) {
                    m.user_rkey = b.rkey;
                }
            } else {
                self.ext
                    .binds
                    .remove(&(qp.index, qp.generation, tail + *i as u64));
            }
        }
        r
    }

    // ------------------------------------------------------ data in order

    /// `ibv_query_qp_data_in_order`: rxe has no provider entry
    /// (libibverbs answers 0); mlx5 answers "in order" (whole message and
    /// aligned 128-byte pieces) for SEND, WRITE and READ data, except on a
    /// QP created with `MLX5DV_QP_CREATE_OOO_DP`, whose placement is not
    /// ordered (dc-and-mlx5dv.md §5).
    pub fn query_qp_data_in_order(
        &self,
        qp: QpHandle,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        let v = Verb::QueryQpDataInOrder;
        if flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown flag bits {:#x}", flags.unknown_bits()),
            ));
        }
        let q = self.qp(qp, v)?;
        if self.device(q.device).profile.driver != DriverModel::Mlx5 || q.dv.ooo {
            return Ok(DataInOrderCaps::empty());
        }
        let data_op = matches!(
            op,
            WrOpcode::Send
                | WrOpcode::SendWithImm
                | WrOpcode::SendWithInv
                | WrOpcode::RdmaWrite
                | WrOpcode::RdmaWriteWithImm
                | WrOpcode::RdmaRead
        );
        if !data_op {
            return Ok(DataInOrderCaps::empty());
        }
        Ok(if flags.contains(DataInOrderFlags::RETURN_CAPS) {
            DataInOrderCaps::WHOLE_MSG | DataInOrderCaps::ALIGNED_128_BYTES
        } else {
            DataInOrderCaps::WHOLE_MSG
        })
    }

    // ---------------------------------------------------------- GID entries

    fn gid_entry(&self, dev: u32, port: u8, index: u32) -> GidEntry {
        let d = self.device(dev);
        let roce = d.profile.port.link_layer == LinkLayer::Ethernet;
        GidEntry {
            gid: self.gid_of(dev, index),
            gid_index: index,
            port_num: u32::from(port),
            gid_type: if roce { GidType::RoceV2 } else { GidType::Ib },
            ndev_ifindex: if roce { dev + 2 } else { 0 },
        }
    }

    /// `ibv_query_gid_ex`: `EINVAL` for flags, port or index; `ENODATA`
    /// for an empty entry.
    pub fn query_gid_ex(
        &self,
        ctx: ContextHandle,
        port: u32,
        index: u32,
        flags: u32,
    ) -> Result<GidEntry> {
        let v = Verb::QueryGidEx;
        if flags != 0 {
            return Err(invalid(v, format!("flags {flags:#x} must be 0")));
        }
        let port8 = u8::try_from(port).unwrap_or(0);
        let dev = self.ctx_port(ctx, port8, v)?;
        let len = u32::try_from(self.device(dev).profile.port.gid_tbl_len).unwrap_or(0);
        if index >= len {
            return Err(invalid(
                v,
                format!("GID index {index} is past gid_tbl_len {len}"),
            ));
        }
        let e = self.gid_entry(dev, port8, index);
        if e.gid == verbs_api::Gid::default() {
            return Err(err(
                v,
                ENODATA,
                format!("GID entry {index} of port {port} is empty"),
            ));
        }
        Ok(e)
    }

    /// `ibv_query_gid_table`: the valid entries of every port.
    pub fn query_gid_table(
        &self,
        ctx: ContextHandle,
        max_entries: usize,
        flags: u32,
    ) -> Result<Vec<GidEntry>> {
        let v = Verb::QueryGidTable;
        if flags != 0 {
            return Err(invalid(v, format!("flags {flags:#x} must be 0")));
        }
        let dev = self.ctx(ctx, v)?.device;
        let p = &self.device(dev).profile;
        let len = u32::try_from(p.port.gid_tbl_len).unwrap_or(0);
        let mut out = Vec::new();
        for port in 1..=p.attr.phys_port_cnt {
            // Only the first entries are ever filled (World::gid_of).
            for index in 0..len.min(2) {
                let e = self.gid_entry(dev, port, index);
                if e.gid != verbs_api::Gid::default() {
                    out.push(e);
                }
            }
        }
        if out.len() > max_entries {
            return Err(invalid(
                v,
                format!(
                    "{} valid GID entries do not fit max_entries {max_entries}",
                    out.len()
                ),
            ));
        }
        Ok(out)
    }

    // ----------------------------------------------------------------- ECE

    fn ece_device(&self, qp: QpHandle, v: Verb) -> Result<()> {
        let q = self.qp(qp, v)?;
        let p = &self.device(q.device).profile;
        if p.driver != DriverModel::Mlx5 {
            return Err(err(
                v,
                EOPNOTSUPP,
                format!("the {} device has no ECE", p.name),
            ));
        }
        Ok(())
    }

    /// `ibv_query_ece` (mlx5): vendor 0x02c9, the options set on the QP or
    /// else every option the device supports.
    pub fn query_ece(&self, qp: QpHandle) -> Result<Ece> {
        let v = Verb::QueryEce;
        self.ece_device(qp, v)?;
        let options = get_gen(&self.ext.ece, qp.index, qp.generation).unwrap_or(MLX5_ECE_OPTIONS);
        Ok(Ece {
            vendor_id: MLX5_ECE_VENDOR,
            options,
            comp_mask: 0,
        })
    }

    /// `ibv_set_ece` (mlx5): `EINVAL` for another vendor or a non-zero
    /// `comp_mask`; the accepted options (those the device supports) are
    /// written back.
    pub fn set_ece(&mut self, qp: QpHandle, ece: &mut Ece) -> Result<()> {
        let v = Verb::SetEce;
        self.ece_device(qp, v)?;
        if ece.vendor_id != MLX5_ECE_VENDOR {
            return Err(invalid(
                v,
                format!(
                    "vendor_id {:#x} is not the device's {MLX5_ECE_VENDOR:#x}",
                    ece.vendor_id
                ),
            ));
        }
        if ece.comp_mask != 0 {
            return Err(invalid(
                v,
                format!("comp_mask {:#x} must be 0", ece.comp_mask),
            ));
        }
        let accepted = ece.options & MLX5_ECE_OPTIONS;
        self.ext.ece.insert(qp.index, (qp.generation, accepted));
        ece.options = accepted;
        Ok(())
    }

    // ------------------------------------------------------ memory windows

    pub(crate) fn mw(&self, h: MwHandle, verb: Verb) -> Result<&Mw> {
        self.ext
            .mws
            .get(h.index, h.generation)
            .ok_or_else(|| invalid(verb, format!("invalid or deallocated MW handle {h:?}")))
    }

    /// How many windows are bound to `mr`.
    pub(crate) fn mws_bound_to(&self, mr: MrHandle) -> usize {
        self.ext
            .mws
            .iter()
            .filter(|(_, _, m)| m.bound.is_some_and(|b| b.mr == mr))
            .count()
    }

    /// `ibv_alloc_mw`: `EOPNOTSUPP` where the profile has no windows of
    /// that type (`IBV_DEVICE_MEM_WINDOW`, `_TYPE_2A`/`_2B`, `max_mw`).
    pub fn alloc_mw(&mut self, pd: PdHandle, mw_type: MwType) -> Result<MwHandle> {
        use verbs_api::DeviceCapFlags as D;
        let v = Verb::AllocMw;
        let device = self.pd(pd, v)?.device;
        let a = &self.device(device).profile.attr;
        let ok = a.max_mw > 0
            && match mw_type {
                MwType::Type1 => a.device_cap_flags.contains(D::MEM_WINDOW),
                MwType::Type2 => a
                    .device_cap_flags
                    .intersects(D::MEM_WINDOW_TYPE_2A | D::MEM_WINDOW_TYPE_2B),
                MwType::Unknown(_) => false,
            };
        if !ok {
            if let MwType::Unknown(t) = mw_type {
                return Err(invalid(v, format!("unknown MW type {t}")));
            }
            return Err(err(
                v,
                EOPNOTSUPP,
                format!(
                    "the {} device has no memory windows of type {}",
                    self.device(device).profile.name,
                    mw_type.name()
                ),
            ));
        }
        let live = self.ext.mws.len() as u64;
        if live >= u64::from(a.max_mw) || self.ext.mws.next_index() >= MW_KEY_BIT {
            return Err(err(v, ENOMEM, format!("max_mw {} windows exist", a.max_mw)));
        }
        let index = self.ext.mws.next_index();
        let variant = self.rng_rkey.next_u32() & 0xff;
        let rkey = ((MW_KEY_BIT | index) << 8) | variant;
        let h = MwHandle::from_parts(self.ext.mws.insert(Mw {
            pd,
            device,
            mw_type,
            rkey,
            user_rkey: rkey,
            bound: None,
        }));
        self.pd_mut(pd, v)?.users += 1;
        Ok(h)
    }

    /// `ibv_dealloc_mw`: unbinds and frees.
    pub fn dealloc_mw(&mut self, mw: MwHandle) -> Result<()> {
        let v = Verb::DeallocMw;
        let pd = self.mw(mw, v)?.pd;
        self.ext.mws.remove(mw.index, mw.generation);
        if let Ok(p) = self.pd_mut(pd, v) {
            p.users -= 1;
        }
        Ok(())
    }

    /// `rkey` and `type` of a window.
    pub fn mw_info(&self, mw: MwHandle) -> Result<MwInfo> {
        let m = self.mw(mw, Verb::AllocMw)?;
        Ok(MwInfo {
            rkey: m.user_rkey,
            mw_type: m.mw_type,
        })
    }

    /// `ibv_bind_mw` (mlx5 `mlx5_bind_mw`): post-time checks, then a
    /// BIND_MW work request; the window's rkey is the next one at once.
    pub fn bind_mw(
        &mut self,
        qp: QpHandle,
        mw: MwHandle,
        bind: &verbs_api::MwBind<'_, SimVerbs>,
    ) -> Result<()> {
        let v = Verb::BindMw;
        let (wr_id, send_flags) = (bind.wr_id, bind.send_flags);
        let i = &bind.bind_info;
        let (mr, addr, length, access) = (i.mr.copied(), i.addr, i.length, i.mw_access_flags);
        let m = self.mw(mw, v)?;
        let (mw_pd, mw_type, user_rkey) = (m.pd, m.mw_type, m.user_rkey);
        self.qp(qp, v)?;
        if mw_type != MwType::Type1 {
            return Err(invalid(
                v,
                "ibv_bind_mw binds type 1 windows; a type 2 window is bound with a BIND_MW work request",
            ));
        }
        if access.contains(AccessFlags::ZERO_BASED) {
            return Err(invalid(v, "ZERO_BASED is not supported for type 1 windows"));
        }
        match mr {
            None if addr != 0 || length != 0 => {
                return Err(invalid(v, "an address or length without an MR"));
            }
            Some(mr) if self.live_mr(mr, v)?.pd != mw_pd => {
                return Err(err(v, EPERM, "the MR's PD is not the window's"));
            }
            _ => {}
        }
        let new_rkey = inc_rkey(user_rkey);
        let tail = self.qp(qp, v)?.sq.tail;
        self.prune_binds();
        let key = (qp.index, qp.generation, tail);
        self.ext.binds.insert(
            key,
            PendingBind {
                mw,
                rkey: new_rkey,
                mr,
                addr,
                length,
                access,
            },
        );
        let wr = SendWr::<SimVerbs> {
            wr_id,
            opcode: WrOpcode::BindMw,
            send_flags,
            ..SendWr::default()
        };
        match self.post_send(qp, core::slice::from_ref(&wr)) {
            Ok(()) => {
                if let Some(m) = self.ext.mws.get_mut(mw.index, mw.generation) {
                    m.user_rkey = new_rkey;
                }
                Ok(())
            }
            Err(e) => {
                self.ext.binds.remove(&key);
                Err(Error::from_errno(v, e.errno(), e.message().to_owned()))
            }
        }
    }

    /// Forgets binds that will never execute: their QP is gone, or their
    /// request was flushed (it is behind the queue's completion point).
    fn prune_binds(&mut self) {
        let qps = &self.qps;
        self.ext.binds.retain(|&(index, generation, seq), _| {
            qps.get(index, generation).is_some_and(|q| seq >= q.sq.done)
        });
    }

    /// Whether `key` is a memory window's rkey.
    pub(crate) fn is_mw_key(&self, key: u32) -> bool {
        (key >> 8) & MW_KEY_BIT != 0
    }

    /// A remote access through a window's rkey: `None` when `rkey` is not
    /// a window's; `Some(None)` when it names no usable window (REM_ACCESS
    /// follows); else the window as a region view, its MR's arena slot and
    /// the window's offset in the MR. `rq` (the responder) is checked for
    /// type 2 windows bound to a QP.
    pub(crate) fn mw_target(
        &self,
        device: u32,
        rkey: u32,
        rq: Option<QpHandle>,
    ) -> Option<Option<(MrView, u32, u64)>> {
        if !self.is_mw_key(rkey) {
            return None;
        }
        let index = (rkey >> 8) & !MW_KEY_BIT;
        let Some((_, m)) = self.ext.mws.get_by_index(index) else {
            return Some(None);
        };
        let Some(b) = m.bound else {
            return Some(None);
        };
        if m.rkey != rkey || m.device != device {
            return Some(None);
        }
        if let (Some(bq), Some(rq), true) = (b.qp, rq, self.config.mw.type2_qp_bound) {
            if bq != rq {
                return Some(None);
            }
        }
        let Some(mr) = self.mrs.get(b.mr.index, b.mr.generation) else {
            return Some(None);
        };
        if mr.invalidated || mr.deregistered {
            return Some(None);
        }
        let view = MrView {
            addr: b.addr,
            length: b.length,
            lkey: 0,
            rkey,
            access: b.access,
            pd: m.pd.index,
            valid: true,
        };
        Some(Some((view, b.mr.index, b.addr - mr.addr)))
    }

    /// SEND_WITH_INV naming a window: a bound type 2 window of the
    /// responder's PD is unbound; false otherwise.
    pub(crate) fn remote_invalidate_mw(&mut self, device: u32, rkey: u32, pd: u32) -> bool {
        let index = (rkey >> 8) & !MW_KEY_BIT;
        match self.ext.mws.get_by_index_mut(index) {
            Some((_, m))
                if m.rkey == rkey
                    && m.device == device
                    && m.pd.index == pd
                    && m.mw_type == MwType::Type2
                    && m.bound.is_some() =>
            {
                m.bound = None;
                true
            }
            _ => false,
        }
    }

    /// Runs a LOCAL_INV or BIND_MW at the head of the send queue: it
    /// completes (in order) with success or its error status.
    pub(crate) fn run_local_op(&mut self, qp: QpHandle, seq: u64) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        let w = *q.sq.get(seq).0;
        // A retransmission pass does not run it twice.
        let status = if w.transmitted {
            WcStatus::Success
        } else if w.opcode == WrOpcode::BindMw {
            self.exec_bind(qp, seq)
        } else {
            self.exec_local_inv(qp, w.imm_data)
        };
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let wm = q.sq.get_mut(seq);
        wm.checked = true;
        wm.transmitted = true;
        wm.exec = if status == WcStatus::Success {
            super::queues::Exec::Done
        } else {
            super::queues::Exec::Failed(status)
        };
        q.tx.send_seq = seq + 1;
        if status != WcStatus::Success {
            q.tx.blocked = true;
        }
        self.complete_sq(qp);
    }

    /// LOCAL_INV (rxe `rxe_do_local_ops`): a bound type 2 window of the
    /// QP's PD is unbound, an MR of the QP's PD invalidated; anything else
    /// completes with `SimConfig::mw.local_inv_error` (`LOC_QP_OP_ERR`).
    fn exec_local_inv(&mut self, qp: QpHandle, key: u32) -> WcStatus {
        let fail = self.config.mw.local_inv_error;
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return fail;
        };
        let (device, pd) = (q.device, q.pd.map_or(u32::MAX, |p| p.index));
        if self.is_mw_key(key) {
            let index = (key >> 8) & !MW_KEY_BIT;
            return match self.ext.mws.get_by_index_mut(index) {
                Some((_, m))
                    if m.rkey == key
                        && m.device == device
                        && m.pd.index == pd
                        && m.mw_type == MwType::Type2
                        && m.bound.is_some() =>
                {
                    m.bound = None;
                    WcStatus::Success
                }
                _ => fail,
            };
        }
        match self.mrs.get_by_index_mut(key >> 8) {
            Some((_, m))
                if (m.lkey == key || m.rkey == key)
                    && m.device == device
                    && m.pd.index == pd
                    && !m.deregistered =>
            {
                m.invalidated = true;
                WcStatus::Success
            }
            _ => fail,
        }
    }

    /// BIND_MW (IBA C10-72..75, rxe `rxe_check_bind_mw`): what fails here
    /// completes with `MW_BIND_ERR`.
    fn exec_bind(&mut self, qp: QpHandle, seq: u64) -> WcStatus {
        let Some(b) = self.ext.binds.remove(&(qp.index, qp.generation, seq)) else {
            // A BIND_MW posted through ibv_post_send (the trait's SendWr
            // has no bind_mw): nothing to bind.
            return WcStatus::MwBindErr;
        };
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return WcStatus::MwBindErr;
        };
        let qp_pd = q.pd;
        let Some(m) = self.ext.mws.get(b.mw.index, b.mw.generation) else {
            return WcStatus::MwBindErr;
        };
        if (b.rkey >> 8) != (m.rkey >> 8) {
            return WcStatus::MwBindErr;
        }
        let unbind = b.mr.is_none() && b.length == 0;
        if m.mw_type == MwType::Type2 {
            // o10-37.2.30, C10-72, o10-37.2.40.
            if m.bound.is_some() || qp_pd != Some(m.pd) || unbind {
                return WcStatus::MwBindErr;
            }
        }
        let bound = if unbind {
            None
        } else {
            let Some(mr) = b.mr else {
                return WcStatus::MwBindErr;
            };
            let Some(r) = self.mrs.get(mr.index, mr.generation) else {
                return WcStatus::MwBindErr;
            };
            let needs_local_write = b
                .access
                .intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC);
            let inside = mr_view(r).offset_of(b.addr, b.length).is_some() && b.addr >= r.addr;
            if r.deregistered
                || r.invalidated
                || r.pd != m.pd
                || !r.access.contains(AccessFlags::MW_BIND)
                || r.access.contains(AccessFlags::ZERO_BASED)
                || (needs_local_write && !r.access.contains(AccessFlags::LOCAL_WRITE))
                || !inside
            {
                return WcStatus::MwBindErr;
            }
            Some(MwBound {
                mr,
                addr: b.addr,
                length: b.length,
                access: b.access
                    & (AccessFlags::REMOTE_READ
                        | AccessFlags::REMOTE_WRITE
                        | AccessFlags::REMOTE_ATOMIC
                        | AccessFlags::ZERO_BASED),
                qp: (m.mw_type == MwType::Type2).then_some(qp),
            })
        };
        if let Some(m) = self.ext.mws.get_mut(b.mw.index, b.mw.generation) {
            m.rkey = b.rkey;
            m.bound = bound;
        }
        WcStatus::Success
    }
}

/// Virtual nanoseconds as ticks of the simulated mlx5 core clock.
fn ns_to_ticks(ns: u64) -> u64 {
    (u128::from(ns) * u128::from(MLX5_HCA_CORE_CLOCK_KHZ) / 1_000_000) as u64
}

#[cfg(test)]
mod tests {
    use crate::{SimConfig, SimVerbs};
    use verbs_api::*;

    #[test]
    fn flushed_binds_are_forgotten() {
        // Goal: a bind posted on a QP in ERR is flushed, never executed; its
        // pending entry must not stay behind (a loop of such posts would
        // otherwise grow the table without bound).
        let mut sim = SimVerbs::new(SimConfig::default());
        let ctx = sim.open_device(0, ProcessId(0)).unwrap();
        let pd = sim.alloc_pd(&ctx).unwrap();
        let cq = sim
            .create_cq(
                &ctx,
                &CqInit {
                    cqe: 64,
                    ..CqInit::default()
                },
            )
            .unwrap();
        let mut attr = QpInitAttrEx::<SimVerbs> {
            send_cq: Some(&cq),
            recv_cq: Some(&cq),
            cap: QpCap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QpType::Rc,
            ..QpInitAttrEx::default()
        };
        let qp = sim.create_qp(&pd, &mut attr).unwrap();
        let ep = Endpoint::query(&mut sim, &ctx, &qp, 1).unwrap();
        connect_qp(&mut sim, &qp, &ep, &ep, &ConnectOptions::default()).unwrap();
        let to_err = QpAttr {
            qp_state: QpState::Error,
            ..QpAttr::default()
        };
        sim.modify_qp(&qp, &to_err, QpAttrMask::STATE).unwrap();
        let mw = sim.alloc_mw(&pd, MwType::Type1).unwrap();
        let unbind = MwBind::<SimVerbs> {
            wr_id: 1,
            send_flags: SendFlags::empty(),
            bind_info: MwBindInfo {
                mr: None,
                addr: 0,
                length: 0,
                mw_access_flags: AccessFlags::empty(),
            },
        };
        for _ in 0..3 {
            sim.bind_mw(&qp, &mw, &unbind).unwrap();
            let mut wc = [Wc::default(); 1];
            assert_eq!(sim.poll_cq(&cq, &mut wc).unwrap(), 1);
            assert_eq!(wc[0].status, WcStatus::WrFlushErr);
        }
        assert!(
            sim.world().ext.binds.len() <= 1,
            "{} pending binds kept for flushed requests",
            sim.world().ext.binds.len()
        );
    }
}
