//! The extended verbs (issue #13 item 4) over libibverbs: `ibv_rereg_mr`,
//! `ibv_resize_cq`, `ibv_query_device_ex`, extended CQs, the `ibv_wr_*`
//! API, memory windows, `ibv_query_qp_data_in_order`, GID entries and ECE.
//! [`crate::hw`]'s `Verbs` impl calls these.

// Handles wrap `Arc`s of `!Send` inners, as in `hw.rs` (see there).
#![allow(clippy::arc_with_non_send_sync)]

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::{EINVAL, ENOENT, EOPNOTSUPP};
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::convert::{device_attr_from_c, sges_to_c, to_gid, zeroed};
use crate::errors::c_error;
use crate::ffi::verbs::{self as fv, last_errno, WrBuilder};
use crate::handles::{
    register_cq, CqInner, HwContext, HwCq, HwMr, HwMw, HwPd, HwQp, MwInner, Owned,
};

fn gid_entry_from_c(e: &sys::ibv_gid_entry) -> GidEntry {
    GidEntry {
        gid: to_gid(&e.gid),
        gid_index: e.gid_index,
        port_num: e.port_num,
        gid_type: GidType::from_raw(e.gid_type),
        ndev_ifindex: e.ndev_ifindex,
    }
}

impl HwVerbs {
    /// The body of `Verbs::query_rt_values_ex`: the raw clock only
    /// (`IBV_VALUES_MASK_RAW_CLOCK`), as `tv_nsec` of `raw_clock` holds it
    /// (`tv_sec` 0, mlx5).
    pub(crate) fn ext_query_rt_values_ex(&self, ctx: &HwContext) -> Result<u64> {
        let v = Verb::QueryRtValuesEx;
        let (c, _) = self.ctx(ctx, v)?;
        let mut values: sys::ibv_values_ex = zeroed();
        values.comp_mask = sys::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK.0;
        // SAFETY: live context; `values` is a readable and writable
        // `ibv_values_ex` asking for the raw clock only.
        let rc = unsafe { fv::ibv_query_rt_values_ex(c, &mut values) };
        if rc != 0 {
            return Err(c_error(v, rc, "ibv_query_rt_values_ex"));
        }
        if values.comp_mask & sys::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK.0 == 0 {
            return Err(Error::from_errno(
                v,
                EOPNOTSUPP,
                "the provider returned no raw clock",
            ));
        }
        let ns = u64::try_from(values.raw_clock.tv_nsec).unwrap_or(0);
        let s = u64::try_from(values.raw_clock.tv_sec).unwrap_or(0);
        Ok(s.saturating_mul(1_000_000_000).saturating_add(ns))
    }

    pub(crate) fn ext_query_device_ex(&self, ctx: &HwContext) -> Result<DeviceAttrEx> {
        let v = Verb::QueryDeviceEx;
        let (c, _) = self.ctx(ctx, v)?;
        let mut a: sys::ibv_device_attr_ex = zeroed();
        // SAFETY: live context; `a` is writable for one `ibv_device_attr_ex`.
        let rc = unsafe { fv::ibv_query_device_ex(c, &mut a) };
        if rc != 0 {
            return Err(c_error(v, rc, "ibv_query_device_ex"));
        }
        let o = &a.odp_caps;
        Ok(DeviceAttrEx {
            orig_attr: device_attr_from_c(&a.orig_attr),
            comp_mask: a.comp_mask,
            odp_caps: OdpCaps {
                general_caps: o.general_caps,
                rc_odp_caps: o.per_transport_caps.rc_odp_caps,
                uc_odp_caps: o.per_transport_caps.uc_odp_caps,
                ud_odp_caps: o.per_transport_caps.ud_odp_caps,
            },
            completion_timestamp_mask: a.completion_timestamp_mask,
            hca_core_clock: a.hca_core_clock,
            device_cap_flags_ex: a.device_cap_flags_ex,
            tso_caps: TsoCaps {
                max_tso: a.tso_caps.max_tso,
                supported_qpts: a.tso_caps.supported_qpts,
            },
            rss_caps: RssCaps {
                supported_qpts: a.rss_caps.supported_qpts,
                max_rwq_indirection_tables: a.rss_caps.max_rwq_indirection_tables,
                max_rwq_indirection_table_size: a.rss_caps.max_rwq_indirection_table_size,
                rx_hash_fields_mask: a.rss_caps.rx_hash_fields_mask,
                rx_hash_function: a.rss_caps.rx_hash_function,
            },
            max_wq_type_rq: a.max_wq_type_rq,
            packet_pacing_caps: PacketPacingCaps {
                qp_rate_limit_min: a.packet_pacing_caps.qp_rate_limit_min,
                qp_rate_limit_max: a.packet_pacing_caps.qp_rate_limit_max,
                supported_qpts: a.packet_pacing_caps.supported_qpts,
            },
            raw_packet_caps: a.raw_packet_caps,
            tm_caps: TmCaps {
                max_rndv_hdr_size: a.tm_caps.max_rndv_hdr_size,
                max_num_tags: a.tm_caps.max_num_tags,
                flags: a.tm_caps.flags,
                max_ops: a.tm_caps.max_ops,
                max_sge: a.tm_caps.max_sge,
            },
            cq_mod_caps: CqModerationCaps {
                max_cq_count: a.cq_mod_caps.max_cq_count,
                max_cq_period: a.cq_mod_caps.max_cq_period,
            },
            max_dm_size: a.max_dm_size,
            pci_atomic_caps: PciAtomicCaps {
                fetch_add: a.pci_atomic_caps.fetch_add,
                compare_swap: a.pci_atomic_caps.compare_swap,
                swap: a.pci_atomic_caps.swap,
            },
            xrc_odp_caps: a.xrc_odp_caps,
            phys_port_cnt_ex: a.phys_port_cnt_ex,
        })
    }

    pub(crate) fn ext_query_gid_ex(
        &self,
        ctx: &HwContext,
        port_num: u32,
        gid_index: u32,
        flags: u32,
    ) -> Result<GidEntry> {
        let v = Verb::QueryGidEx;
        let (c, _) = self.ctx(ctx, v)?;
        let mut e: sys::ibv_gid_entry = zeroed();
        // SAFETY: live context; `e` is writable for `entry_size` bytes.
        let rc = unsafe {
            fv::_ibv_query_gid_ex(
                c,
                port_num,
                gid_index,
                &mut e,
                flags,
                size_of::<sys::ibv_gid_entry>(),
            )
        };
        if rc != 0 {
            return Err(c_error(v, rc, "ibv_query_gid_ex"));
        }
        Ok(gid_entry_from_c(&e))
    }

    pub(crate) fn ext_query_gid_table(
        &self,
        ctx: &HwContext,
        max_entries: usize,
        flags: u32,
    ) -> Result<Vec<GidEntry>> {
        let v = Verb::QueryGidTable;
        let (c, _) = self.ctx(ctx, v)?;
        // No real table is longer; the clamp bounds the allocation.
        let n = max_entries.min(1 << 16);
        let mut out: Vec<sys::ibv_gid_entry> = (0..n).map(|_| zeroed()).collect();
        // SAFETY: live context; `out` has room for `n` entries of
        // `entry_size` bytes.
        let got = unsafe {
            fv::_ibv_query_gid_table(
                c,
                out.as_mut_ptr(),
                n,
                flags,
                size_of::<sys::ibv_gid_entry>(),
            )
        };
        if got < 0 {
            let e = i32::try_from(-got).unwrap_or(EINVAL);
            return Err(c_error(v, e, "ibv_query_gid_table"));
        }
        Ok(out[..got as usize].iter().map(gid_entry_from_c).collect())
    }

    pub(crate) fn ext_resize_cq(&self, cq: &HwCq, cqe: u32) -> Result<()> {
        let v = Verb::ResizeCq;
        self.check_owner(&cq.0.obj.ctx, v, "CQ")?;
        let p = cq.0.obj.get(v)?;
        let n = c_int::try_from(cqe).map_err(|_| Error::invalid(v, "cqe too large"))?;
        // SAFETY: live CQ of a live context.
        match unsafe { sys::ibv_resize_cq(p, n) } {
            0 => Ok(()),
            rc => Err(c_error(v, rc, "ibv_resize_cq")),
        }
    }

    pub(crate) fn ext_create_cq_ex(
        &self,
        ctx: &HwContext,
        attr: &CqInitAttrEx<'_, Self>,
    ) -> Result<HwCq> {
        let v = Verb::CreateCqEx;
        let (c, inner) = self.ctx(ctx, v)?;
        let mut a: sys::ibv_cq_init_attr_ex = zeroed();
        a.cqe = attr.cqe;
        a.cq_context = attr.cq_context as usize as *mut _;
        a.channel = match attr.channel {
            Some(ch) => {
                self.check_owner(&ch.0.obj.ctx, v, "completion channel")?;
                ch.0.obj.get(v)?
            }
            None => ptr::null_mut(),
        };
        a.comp_vector = attr.comp_vector;
        a.wc_flags = attr.wc_flags.bits();
        a.comp_mask = attr.comp_mask.bits();
        a.flags = attr.flags.bits();
        if attr.comp_mask.contains(CqInitAttrMask::PD) {
            return Err(Error::invalid(
                v,
                "IBV_CQ_INIT_ATTR_MASK_PD (parent domains) is not part of the trait",
            ));
        }
        // SAFETY: live context; `a` is valid and its channel live and ours.
        let p = unsafe { fv::ibv_create_cq_ex(c, &mut a) }
            .map_err(|e| c_error(v, e, "ibv_create_cq_ex"))?;
        // `ibv_cq_ex_to_cq` is a cast: the extended CQ begins with the
        // fields of `struct ibv_cq`, and `ibv_destroy_cq` takes it so.
        let cq: NonNull<sys::ibv_cq> = p.cast();
        let cq = HwCq(Arc::new(CqInner {
            obj: Owned::new(cq, inner),
            _channel: attr.channel.cloned(),
            cq_context: attr.cq_context,
            ex: Some(attr.wc_flags),
        }));
        register_cq(&cq);
        Ok(cq)
    }

    pub(crate) fn ext_poll_cq_ex(&self, cq: &HwCq, out: &mut [WcEx]) -> Result<usize> {
        let v = Verb::PollCqEx;
        self.check_owner(&cq.0.obj.ctx, v, "CQ")?;
        let Some(flags) = cq.0.ex else {
            return Err(Error::invalid(
                v,
                "the CQ was not created with ibv_create_cq_ex",
            ));
        };
        let p = cq.0.obj.get(v)?.cast::<sys::ibv_cq_ex>();
        if out.is_empty() {
            return Ok(0);
        }
        // SAFETY: `p` is the live extended CQ this handle created (`ex`
        // is set only by `ext_create_cq_ex`); plain reads of its table.
        let (start, next, end) = unsafe { ((*p).start_poll, (*p).next_poll, (*p).end_poll) };
        let (Some(start), Some(next), Some(end)) = (start, next, end) else {
            return Err(Error::from_errno(
                v,
                EOPNOTSUPP,
                "the provider's extended CQ lacks start_poll/next_poll/end_poll",
            ));
        };
        let mut attr: sys::ibv_poll_cq_attr = zeroed();
        // SAFETY: live extended CQ, no poll open (`&self` of the one
        // backend serialises polling); `attr` is valid.
        let rc = unsafe { start(p, &mut attr) };
        if rc == ENOENT {
            return Ok(0);
        }
        if rc != 0 {
            return Err(c_error(v, rc, "ibv_start_poll"));
        }
        let mut n = 0;
        loop {
            // SAFETY: a poll is open on the live CQ and a completion is
            // current: the reads are what the provider allows then.
            out[n] = unsafe { read_current(p, flags) };
            n += 1;
            if n == out.len() {
                break;
            }
            // SAFETY: a poll is open on the live CQ.
            let rc = unsafe { next(p) };
            if rc == ENOENT {
                break;
            }
            if rc != 0 {
                // SAFETY: a poll is open on the live CQ.
                unsafe { end(p) };
                return Err(c_error(v, rc, "ibv_next_poll"));
            }
        }
        // SAFETY: a poll is open on the live CQ.
        unsafe { end(p) };
        Ok(n)
    }

    pub(crate) fn ext_rereg_mr(&self, mr: &HwMr, args: &ReregMr<'_, Self>) -> Result<()> {
        let v = Verb::ReregMr;
        self.check_owner(&mr.0.obj.ctx, v, "MR")?;
        let p = mr.0.obj.get(v)?;
        // A zero length is libibverbs' EINVAL, passed through below.
        if args.flags.contains(ReregMrFlags::CHANGE_TRANSLATION) && args.length != 0 {
            return Err(Error::from_errno(
                v,
                EOPNOTSUPP,
                "CHANGE_TRANSLATION: the hardware backend's MR owns a fixed buffer (see docs/divergence.md)",
            ));
        }
        let pd = match args.pd {
            Some(pd) if args.flags.contains(ReregMrFlags::CHANGE_PD) => {
                self.check_owner(&pd.0.obj.ctx, v, "PD")?;
                pd.0.obj.get(v)?
            }
            _ => ptr::null_mut(),
        };
        let flags = c_int::try_from(args.flags.bits())
            .map_err(|_| Error::invalid(v, "unknown flag bits"))?;
        let access = c_int::try_from(args.access.bits())
            .map_err(|_| Error::invalid(v, "unknown access bits"))?;
        // SAFETY: live MR and (if non-NULL) a live PD of the same
        // context; no new translation, so no address is passed.
        let rc = unsafe { sys::ibv_rereg_mr(p, flags, pd, ptr::null_mut(), 0, access) };
        if rc != 0 {
            let e = match last_errno() {
                0 => EINVAL,
                e => e,
            };
            return Err(c_error(v, e, "ibv_rereg_mr"));
        }
        if args.flags.contains(ReregMrFlags::CHANGE_ACCESS) {
            mr.0.access.set(args.access);
        }
        if let (true, Some(pd)) = (args.flags.contains(ReregMrFlags::CHANGE_PD), args.pd) {
            *mr.0.pd.borrow_mut() = pd.clone();
        }
        Ok(())
    }

    pub(crate) fn ext_advise_mr(
        &self,
        pd: &HwPd,
        advice: AdviseMrAdvice,
        flags: u32,
        sg_list: &[Sge],
    ) -> Result<()> {
        let v = Verb::AdviseMr;
        self.check_owner(&pd.0.obj.ctx, v, "PD")?;
        let p = pd.0.obj.get(v)?;
        let mut sges = sges_to_c(sg_list);
        let n = u32::try_from(sges.len())
            .map_err(|_| Error::invalid(v, "more SGEs than a u32 counts"))?;
        // SAFETY: live PD of a live context; `sges` holds `n` entries and
        // outlives the call.
        match unsafe { fv::ibv_advise_mr(p, advice.to_raw(), flags, sges.as_mut_ptr(), n) } {
            0 => Ok(()),
            rc => Err(c_error(v, rc, "ibv_advise_mr")),
        }
    }

    pub(crate) fn ext_alloc_mw(&self, pd: &HwPd, mw_type: MwType) -> Result<HwMw> {
        let v = Verb::AllocMw;
        self.check_owner(&pd.0.obj.ctx, v, "PD")?;
        let p = pd.0.obj.get(v)?;
        // SAFETY: live PD of a live context.
        let mw = unsafe { fv::ibv_alloc_mw(p, mw_type.to_raw()) }
            .map_err(|e| c_error(v, e, "ibv_alloc_mw"))?;
        Ok(HwMw(Arc::new(MwInner {
            obj: Owned::new(mw, &pd.0.obj.ctx),
            _pd: pd.clone(),
        })))
    }

    pub(crate) fn ext_dealloc_mw(&self, mw: &HwMw) -> Result<()> {
        self.check_owner(&mw.0.obj.ctx, Verb::DeallocMw, "MW")?;
        mw.0.obj.destroy()
    }

    pub(crate) fn ext_mw_info(&self, mw: &HwMw) -> Result<MwInfo> {
        self.check_owner(&mw.0.obj.ctx, Verb::AllocMw, "MW")?;
        let p = mw.0.obj.get(Verb::AllocMw)?;
        // SAFETY: `p` is a live MW.
        let m = unsafe { &*p };
        Ok(MwInfo {
            rkey: m.rkey,
            mw_type: MwType::from_raw(m.type_),
        })
    }

    pub(crate) fn ext_bind_mw(&self, qp: &HwQp, mw: &HwMw, bind: &MwBind<'_, Self>) -> Result<()> {
        let v = Verb::BindMw;
        let q = self.qp_ptr(qp, v)?;
        self.check_owner(&mw.0.obj.ctx, v, "MW")?;
        let m = mw.0.obj.get(v)?;
        let mr = match bind.bind_info.mr {
            Some(mr) => {
                self.check_owner(&mr.0.obj.ctx, v, "MR")?;
                mr.0.obj.get(v)?
            }
            None => ptr::null_mut(),
        };
        let mut b = sys::ibv_mw_bind {
            wr_id: bind.wr_id,
            send_flags: bind.send_flags.bits(),
            bind_info: sys::ibv_mw_bind_info {
                mr,
                addr: bind.bind_info.addr,
                length: bind.bind_info.length,
                mw_access_flags: bind.bind_info.mw_access_flags.bits() as _,
            },
        };
        // SAFETY: live QP, MW and MR (or NULL) of this context; `b` valid.
        match unsafe { fv::ibv_bind_mw(q, m, &mut b) } {
            0 => Ok(()),
            rc => Err(c_error(v, rc, "ibv_bind_mw")),
        }
    }

    pub(crate) fn ext_query_qp_data_in_order(
        &self,
        qp: &HwQp,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        let v = Verb::QueryQpDataInOrder;
        let p = self.qp_ptr(qp, v)?;
        if flags.unknown_bits() != 0 {
            return Err(Error::invalid(
                v,
                format!("unknown flag bits {:#x}", flags.unknown_bits()),
            ));
        }
        // SAFETY: live QP of a live context.
        let r = unsafe { sys::ibv_query_qp_data_in_order(p, op.to_raw(), flags.bits()) };
        Ok(DataInOrderCaps(u32::try_from(r).unwrap_or(0)))
    }

    pub(crate) fn ext_query_ece(&self, qp: &HwQp) -> Result<Ece> {
        let v = Verb::QueryEce;
        let p = self.qp_ptr(qp, v)?;
        let mut e: sys::ibv_ece = zeroed();
        // SAFETY: live QP; `e` is writable.
        match unsafe { sys::ibv_query_ece(p, &mut e) } {
            0 => Ok(Ece {
                vendor_id: e.vendor_id,
                options: e.options,
                comp_mask: e.comp_mask,
            }),
            rc => Err(c_error(v, rc.abs(), "ibv_query_ece")),
        }
    }

    pub(crate) fn ext_set_ece(&self, qp: &HwQp, ece: &mut Ece) -> Result<()> {
        let v = Verb::SetEce;
        let p = self.qp_ptr(qp, v)?;
        let mut e = sys::ibv_ece {
            vendor_id: ece.vendor_id,
            options: ece.options,
            comp_mask: ece.comp_mask,
        };
        // SAFETY: live QP; `e` is valid for reads and writes.
        match unsafe { sys::ibv_set_ece(p, &mut e) } {
            0 => {
                ece.options = e.options;
                Ok(())
            }
            rc => Err(c_error(v, rc.abs(), "ibv_set_ece")),
        }
    }

    /// The `ibv_wr_*` batch through `ibv_qp_to_qp_ex` and the provider's
    /// builders: everything the backend can check is checked before
    /// `ibv_wr_start`, so a refused batch never reaches the provider; what
    /// only the provider sees fails `ibv_wr_complete` (nothing posted).
    ///
    /// # Safety
    /// As `Verbs::post_send`.
    pub(crate) unsafe fn ext_post_wr(&self, qp: &HwQp, batch: &[WrEx<'_, Self>]) -> Result<()> {
        let v = Verb::PostWr;
        let p = self.qp_ptr(qp, v)?;
        if batch.is_empty() {
            return Ok(());
        }
        if let Some(i) = batch.iter().position(|w| w.raw_wqe) {
            // A decoded raw WQE would post here as an ordinary request
            // and complete with its own opcode, not IBV_WC_DRIVER2.
            return Err(Error::from_errno(
                v,
                EOPNOTSUPP,
                format!("work request {i}: raw mlx5 WQEs are not re-encoded by the hardware backend (mlx5dv_wr_raw_wqe is not bound)"),
            ));
        }
        // SAFETY: live QP.
        let qpx = unsafe { sys::ibv_qp_to_qp_ex(p) };
        if qpx.is_null() {
            return Err(Error::from_errno(
                v,
                EOPNOTSUPP,
                "the QP was not created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: it has no ibv_wr_* API",
            ));
        }
        struct Built {
            op: WrBuilder,
            sges: Vec<sys::ibv_sge>,
            inline: bool,
            ud: Option<(*mut sys::ibv_ah, u32, u32)>,
            srqn: Option<u32>,
        }
        let mut built = Vec::with_capacity(batch.len());
        for (i, w) in batch.iter().enumerate() {
            let at = |m: &str| format!("work request {i} (wr_id {}): {m}", w.wr_id);
            let op = match &w.op {
                WrOp::Send => WrBuilder::Send,
                WrOp::SendImm { imm_data } => WrBuilder::SendImm {
                    imm_be: imm_data.to_be(),
                },
                WrOp::SendInv { invalidate_rkey } => WrBuilder::SendInv {
                    rkey: *invalidate_rkey,
                },
                WrOp::RdmaWrite { rkey, remote_addr } => WrBuilder::RdmaWrite {
                    rkey: *rkey,
                    addr: *remote_addr,
                },
                WrOp::RdmaWriteImm {
                    rkey,
                    remote_addr,
                    imm_data,
                } => WrBuilder::RdmaWriteImm {
                    rkey: *rkey,
                    addr: *remote_addr,
                    imm_be: imm_data.to_be(),
                },
                WrOp::RdmaRead { rkey, remote_addr } => WrBuilder::RdmaRead {
                    rkey: *rkey,
                    addr: *remote_addr,
                },
                WrOp::AtomicCmpSwp {
                    rkey,
                    remote_addr,
                    compare,
                    swap,
                } => WrBuilder::CmpSwp {
                    rkey: *rkey,
                    addr: *remote_addr,
                    compare: *compare,
                    swap: *swap,
                },
                WrOp::AtomicFetchAdd {
                    rkey,
                    remote_addr,
                    add,
                } => WrBuilder::FetchAdd {
                    rkey: *rkey,
                    addr: *remote_addr,
                    add: *add,
                },
                WrOp::LocalInv { invalidate_rkey } => WrBuilder::LocalInv {
                    rkey: *invalidate_rkey,
                },
                WrOp::BindMw {
                    mw,
                    rkey,
                    bind_info,
                } => {
                    self.check_owner(&mw.0.obj.ctx, v, "MW")?;
                    let mr = match bind_info.mr {
                        Some(mr) => {
                            self.check_owner(&mr.0.obj.ctx, v, "MR")?;
                            mr.0.obj.get(v)?
                        }
                        None => ptr::null_mut(),
                    };
                    WrBuilder::BindMw {
                        mw: mw.0.obj.get(v)?,
                        rkey: *rkey,
                        mr,
                        addr: bind_info.addr,
                        length: bind_info.length,
                        access: bind_info.mw_access_flags.bits(),
                    }
                }
            };
            let (sges, inline) = match w.data {
                WrData::None => (Vec::new(), false),
                WrData::Sge(s) => (sges_to_c(&[s]), false),
                WrData::SgeList(l) => (sges_to_c(l), false),
                WrData::InlineList(l) => (sges_to_c(l), true),
            };
            // SAFETY: `qpx` is the live extended table of this QP.
            if !unsafe { fv::ibv_wr_has_builder(qpx, &op) } {
                return Err(Error::from_errno(
                    v,
                    EOPNOTSUPP,
                    at(&format!(
                        "{} is not in the QP's send_ops_flags",
                        w.op.opcode()
                    )),
                ));
            }
            // SAFETY: as above.
            if !unsafe { fv::ibv_wr_has_batch_ops(qpx, inline) } {
                return Err(Error::from_errno(
                    v,
                    EOPNOTSUPP,
                    at("the provider lacks wr_start/wr_complete or the data setter"),
                ));
            }
            match (qp.0.qp_type, w.ud.is_some(), w.xrc_srqn.is_some()) {
                (QpType::Ud, false, _) => {
                    return Err(Error::invalid(v, at("a UD QP needs ibv_wr_set_ud_addr")));
                }
                (QpType::XrcSend, _, false) => {
                    return Err(Error::invalid(
                        v,
                        at("an XRC_SEND QP needs ibv_wr_set_xrc_srqn"),
                    ));
                }
                (t, true, _) if t != QpType::Ud => {
                    return Err(Error::invalid(
                        v,
                        at("ibv_wr_set_ud_addr on a QP that is not UD"),
                    ));
                }
                (t, _, true) if t != QpType::XrcSend => {
                    return Err(Error::invalid(
                        v,
                        at("ibv_wr_set_xrc_srqn on a QP that is not XRC_SEND"),
                    ));
                }
                _ => {}
            }
            let ud = match &w.ud {
                Some(u) => {
                    self.check_owner(&u.ah.0.obj.ctx, v, "AH")?;
                    Some((u.ah.0.obj.get(v)?, u.remote_qpn, u.remote_qkey))
                }
                None => None,
            };
            built.push(Built {
                op,
                sges,
                inline,
                ud,
                srqn: w.xrc_srqn,
            });
        }
        // SAFETY: live table, `&self` of the one backend: no batch is open
        // and no other thread posts on it.
        if !unsafe { fv::ibv_wr_start(qpx) } {
            return Err(Error::from_errno(v, EOPNOTSUPP, "no wr_start entry"));
        }
        for (w, b) in batch.iter().zip(&built) {
            // SAFETY: a batch is open on the live table: plain field writes
            // the builder reads.
            unsafe {
                (*qpx).wr_id = w.wr_id;
                (*qpx).wr_flags = (w.wr_flags - SendFlags::INLINE).bits();
            }
            // SAFETY: batch open, builder present (checked), wr_id/flags set.
            let mut ok = unsafe { fv::ibv_wr_opcode(qpx, &b.op) };
            if let Some((ah, qpn, qkey)) = b.ud {
                // SAFETY: request open; live AH of this context.
                ok = ok && unsafe { fv::ibv_wr_set_ud_addr(qpx, ah, qpn, qkey) };
            }
            if let Some(n) = b.srqn {
                // SAFETY: request open.
                ok = ok && unsafe { fv::ibv_wr_set_xrc_srqn(qpx, n) };
            }
            if b.inline {
                let bufs: Vec<sys::ibv_data_buf> = b
                    .sges
                    .iter()
                    .map(|s| sys::ibv_data_buf {
                        addr: s.addr as usize as *mut _,
                        length: s.length as usize,
                    })
                    .collect();
                // SAFETY: request open; `bufs` lives across the call and
                // each entry names readable bytes (our caller's contract),
                // copied now.
                ok = ok
                    && unsafe { fv::ibv_wr_set_inline_data_list(qpx, bufs.len(), bufs.as_ptr()) };
            } else if !b.sges.is_empty() {
                // SAFETY: request open; the SGE array lives across the call.
                ok = ok && unsafe { fv::ibv_wr_set_sge_list(qpx, b.sges.len(), b.sges.as_ptr()) };
            }
            if !ok {
                // SAFETY: a batch is open on the live table.
                unsafe { fv::ibv_wr_abort(qpx) };
                return Err(Error::from_errno(
                    v,
                    EOPNOTSUPP,
                    format!(
                        "wr_id {}: the provider lacks a setter this request needs (ud_addr, xrc_srqn)",
                        w.wr_id
                    ),
                ));
            }
        }
        // SAFETY: the batch is open and built; the memory it names is our
        // caller's `post_send` contract.
        match unsafe { fv::ibv_wr_complete(qpx) } {
            0 => Ok(()),
            rc => Err(Error::from_errno(
                v,
                rc,
                format!(
                    "ibv_wr_complete failed: {}: none of the batch's {} work request(s) was posted",
                    errno::name(rc).unwrap_or("E?"),
                    batch.len()
                ),
            )),
        }
    }
}

/// The current completion of an open poll, read with `flags`.
///
/// # Safety
/// `p` is a live extended CQ with a poll open and a completion current.
unsafe fn read_current(p: *mut sys::ibv_cq_ex, flags: WcExFlags) -> WcEx {
    // SAFETY: caller's contract: the fields and entries are readable now.
    unsafe {
        let q = &*p;
        let status = WcStatus::from_raw(q.status);
        let mut w = WcEx {
            wr_id: q.wr_id,
            status,
            ..WcEx::default()
        };
        if let Some(f) = q.read_vendor_err {
            w.vendor_err = f(p);
        }
        if status != WcStatus::Success {
            // Only wr_id, status and vendor_err are valid for an error.
            return w;
        }
        if let Some(f) = q.read_opcode {
            w.opcode = WcOpcode::from_raw(f(p));
        }
        if let Some(f) = q.read_wc_flags {
            w.wc_flags = WcFlags(f(p));
        }
        let has = |x: WcExFlags| flags.contains(x);
        if has(WcExFlags::BYTE_LEN) {
            w.byte_len = q.read_byte_len.map(|f| f(p));
        }
        if has(WcExFlags::IMM) {
            let inv = w.wc_flags.contains(WcFlags::WITH_INV);
            w.imm_data = q
                .read_imm_data
                .map(|f| if inv { f(p) } else { u32::from_be(f(p)) });
        }
        if has(WcExFlags::QP_NUM) {
            w.qp_num = q.read_qp_num.map(|f| f(p));
        }
        if has(WcExFlags::SRC_QP) {
            w.src_qp = q.read_src_qp.map(|f| f(p));
        }
        if has(WcExFlags::SLID) {
            w.slid = q.read_slid.map(|f| f(p) as u16);
        }
        if has(WcExFlags::SL) {
            w.sl = q.read_sl.map(|f| f(p));
        }
        if has(WcExFlags::DLID_PATH_BITS) {
            w.dlid_path_bits = q.read_dlid_path_bits.map(|f| f(p));
        }
        if has(WcExFlags::COMPLETION_TIMESTAMP) {
            w.completion_timestamp = q.read_completion_ts.map(|f| f(p));
        }
        if has(WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK) {
            w.completion_wallclock_ns = q.read_completion_wallclock_ns.map(|f| f(p));
        }
        w
    }
}
