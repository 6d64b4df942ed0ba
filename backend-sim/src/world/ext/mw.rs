//! `ibv_rereg_mr` and memory windows: `ibv_alloc_mw`, `ibv_bind_mw`,
//! their keys, and the bind and local-invalidate work requests executed on a
//! send queue.

use verbs_api::errno::{ENOMEM, EOPNOTSUPP, EPERM};
use verbs_api::{
    inc_rkey, AccessFlags, Error, MwInfo, MwType, ReregMrFlags, Result, SendWr, Verb, WcStatus,
    WrOpcode,
};

use crate::datapath::MrView;
use crate::handles::{MrHandle, MwHandle, PdHandle, QpHandle};
use crate::profile::DriverModel;
use crate::world::state::mr_view;
use crate::world::{busy, invalid, unsupported, World};
use crate::SimVerbs;

use super::*;

/// The longest window mlx5 binds: one KLM entry's 2 GiB.
const MLX5_BIND_LENGTH_MAX: u64 = 1 << 31;

/// Where a re-registration's new translation comes from.
enum NewTranslation {
    /// A zeroed buffer the World allocates, this many bytes long.
    Owned(usize),
    /// Memory the caller lends, named by this address (the iova).
    External(u64, Box<dyn crate::ExternalMemory>),
}

impl World {
    // -------------------------------------------------------------- rereg

    /// `ibv_rereg_mr` (libibverbs, kernel `ib_uverbs_rereg_mr`, mlx5 and
    /// rxe `rereg_user_mr`): input errors are `EINVAL` and change nothing;
    /// `EBUSY` while windows are bound to the MR; rxe cannot change the
    /// translation (`EOPNOTSUPP`). PD and access changes keep the keys;
    /// a new translation gets a new buffer and new keys (mlx5 makes a new
    /// mkey when it cannot reuse the old one; the simulator always does).
    /// Posted requests that name the old translation's key stay posted,
    /// as on hardware (the kernel does not know them): the key is dead,
    /// so they fail with a protection error when they execute.
    pub fn rereg_mr(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        new_pd: Option<PdHandle>,
        length: usize,
        access: AccessFlags,
    ) -> Result<()> {
        self.rereg(mr, flags, new_pd, NewTranslation::Owned(length), access)
    }

    /// [`World::rereg_mr`] whose new translation (with
    /// `CHANGE_TRANSLATION`) is memory the caller lends at `addr`, as
    /// [`World::reg_mr_external`] registers it: the drop-in library's
    /// `ibv_rereg_mr` over the program's new buffer. Without
    /// `CHANGE_TRANSLATION`, `memory` is dropped unused.
    pub fn rereg_mr_external(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        new_pd: Option<PdHandle>,
        addr: u64,
        memory: Box<dyn crate::ExternalMemory>,
        access: AccessFlags,
    ) -> Result<()> {
        self.rereg(
            mr,
            flags,
            new_pd,
            NewTranslation::External(addr, memory),
            access,
        )
    }

    fn rereg(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        new_pd: Option<PdHandle>,
        source: NewTranslation,
        access: AccessFlags,
    ) -> Result<()> {
        let v = Verb::ReregMr;
        let length = match &source {
            NewTranslation::Owned(n) => *n,
            NewTranslation::External(_, m) => m.len(),
        };
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
        // libibverbs' ibv_rereg_mr refuses access flags without
        // CHANGE_ACCESS (IBV_REREG_MR_ERR_INPUT) before the kernel sees
        // them; a PD without CHANGE_PD is not read (the kernel's
        // ib_uverbs_rereg_mr looks the PD up only under IB_MR_REREG_PD).
        if !access.is_empty() && !flags.contains(ReregMrFlags::CHANGE_ACCESS) {
            return Err(invalid(
                v,
                format!("access {access} without IBV_REREG_MR_CHANGE_ACCESS"),
            ));
        }
        if self.live_mr(mr, v)?.dm.is_some() {
            // The kernel's ib_uverbs_rereg_mr refuses MRs on device memory.
            return Err(invalid(v, "the MR is registered on device memory"));
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
            // A temporary registration makes and checks the new buffer
            // (length, budget, address); its bytes and address move into
            // this MR and the old ones leave with the temporary.
            let tmp = match source {
                NewTranslation::Owned(n) => self.reg_mr(pd, n, access),
                NewTranslation::External(addr, memory) => {
                    self.reg_mr_external(pd, addr, memory, access)
                }
            }
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
            if pins == 0 {
                a.retired_keys = None;
            } else if !a.retired_keys.as_ref().is_some_and(|k| k.contains(&a.lkey)) {
                // Requests posted over the old key keep their pins. (A
                // later translation may draw a retired key's variant again,
                // as an 8-bit mkey variant wraps on hardware: such a key
                // then pins, and checks, as the MR's own.)
                let mut keys = a.retired_keys.take().map(Vec::from).unwrap_or_default();
                keys.push(a.lkey);
                a.retired_keys = Some(keys.into_boxed_slice());
            }
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
    pub(super) fn check_access(&self, device: u32, access: AccessFlags, v: Verb) -> Result<()> {
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
        let m = self.mw(mw, Verb::MwInfo)?;
        Ok(MwInfo {
            rkey: m.user_rkey,
            mw_type: m.mw_type,
        })
    }

    /// The bind's length against what the QP's device can map: mlx5
    /// builds the window's translation as one KLM entry, which covers at
    /// most 2 GiB, and refuses a longer bind at post time with
    /// `EOPNOTSUPP` before it writes anything (rdma-core
    /// `providers/mlx5/qp.c`, `set_bind_wr`); rxe has no such limit.
    pub(super) fn check_bind_length(&self, qp: QpHandle, length: u64, v: Verb) -> Result<()> {
        let device = self.qp(qp, v)?.device;
        if self.device(device).profile.driver == DriverModel::Mlx5 && length > MLX5_BIND_LENGTH_MAX
        {
            return Err(err(
                v,
                EOPNOTSUPP,
                format!(
                    "a bind of {length} bytes: mlx5 maps at most {MLX5_BIND_LENGTH_MAX} bytes (2 GiB) per window"
                ),
            ));
        }
        Ok(())
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
        // The window, its MR and the QP that binds it are one context's
        // (each process reaches only the objects of its own uverbs file;
        // a QP of another device would bind the window to memory it
        // cannot reach).
        let qp_ctx = self.qp(qp, v)?.ctx;
        let mw_ctx = self.pd(mw_pd, v)?.ctx;
        self.same_ctx(v, "QP that binds the window", qp_ctx, mw_ctx)?;
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
        self.check_bind_length(qp, length, v)?;
        let new_rkey = inc_rkey(user_rkey);
        let tail = self.qp(qp, v)?.sq.tail;
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
                // Binds that will never run go once a post succeeded (a
                // refused one leaves the world as it found it).
                self.prune_binds();
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
    /// Forgets raw-WQE marks of requests the queue has moved past (their
    /// completions polled, or unsignalled) or of QPs that are gone.
    pub(super) fn prune_raw_wqes(&mut self) {
        let qps = &self.qps;
        self.ext.raw_wqes.retain(|&(index, generation, seq)| {
            qps.get(index, generation).is_some_and(|q| seq >= q.sq.done)
        });
    }

    /// The opcode a send-queue completion reports: `IBV_WC_DRIVER2` for
    /// the successful completion of a raw WQE (whose mark it takes), else
    /// `opcode` as it is.
    pub(crate) fn raw_wqe_opcode(
        &mut self,
        qp: QpHandle,
        seq: u64,
        status: WcStatus,
        opcode: verbs_api::WcOpcode,
    ) -> verbs_api::WcOpcode {
        if self.ext.raw_wqes.remove(&(qp.index, qp.generation, seq)) && status == WcStatus::Success
        {
            verbs_api::WcOpcode::Driver2
        } else {
            opcode
        }
    }

    pub(super) fn prune_binds(&mut self) {
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
        let w = *q.sq.wqe(seq);
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
            crate::world::queues::Exec::Done
        } else {
            crate::world::queues::Exec::Failed(status)
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
    pub(super) fn exec_local_inv(&mut self, qp: QpHandle, key: u32) -> WcStatus {
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
    pub(super) fn exec_bind(&mut self, qp: QpHandle, seq: u64) -> WcStatus {
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
