//! Device memory over libibverbs: `ibv_alloc_dm`, `ibv_free_dm`,
//! `ibv_memcpy_to_dm`, `ibv_memcpy_from_dm` and `ibv_reg_dm_mr`.
//!
//! Ownership (R11, R12): a [`HwDm`] owns its `struct ibv_dm` and keeps its
//! context alive; an MR registered on it keeps the DM alive (`MrInner::dm`,
//! released after the MR is deregistered), so the DM is never freed under
//! a live MR by a dropped handle. The explicit `free_dm` is the kernel's
//! answer: `EBUSY` while MRs are on it.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::{Cell, RefCell};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::errors::c_error;
use crate::ffi::verbs as fv;
use crate::handles::{DmInner, HwContext, HwDm, HwMr, HwPd, MrInner, Owned, PageBuf};

impl HwVerbs {
    /// The body of `Verbs::alloc_dm`.
    pub(crate) fn alloc_dm_impl(&mut self, ctx: &HwContext, attr: &AllocDmAttr) -> Result<HwDm> {
        let v = Verb::AllocDm;
        let (c, inner) = self.ctx(ctx, v)?;
        let length = usize::try_from(attr.length)
            .map_err(|_| Error::invalid(v, "length does not fit in size_t"))?;
        let mut a = sys::ibv_alloc_dm_attr {
            length,
            log_align_req: attr.log_align_req,
            comp_mask: attr.comp_mask,
        };
        // SAFETY: `c` is a live context (checked by `ctx`); `a` is a valid
        // attribute block that outlives the call.
        let dm =
            unsafe { fv::ibv_alloc_dm(c, &mut a) }.map_err(|e| c_error(v, e, "ibv_alloc_dm"))?;
        Ok(HwDm(Arc::new(DmInner {
            obj: Owned::new(dm, inner),
        })))
    }

    /// The body of `Verbs::free_dm`.
    pub(crate) fn free_dm_impl(&mut self, dm: &HwDm) -> Result<()> {
        self.check_owner(&dm.0.obj.ctx, Verb::FreeDm, "DM")?;
        dm.0.obj.destroy()
    }

    /// The body of `Verbs::memcpy_to_dm`.
    pub(crate) fn memcpy_to_dm_impl(&mut self, dm: &HwDm, offset: u64, host: &[u8]) -> Result<()> {
        let v = Verb::MemcpyToDm;
        self.check_owner(&dm.0.obj.ctx, v, "DM")?;
        let p = dm.0.obj.get(v)?;
        // SAFETY: `p` is a live DM (not freed: `get` checked).
        match unsafe { fv::ibv_memcpy_to_dm(p, offset, host) } {
            0 => Ok(()),
            rc => Err(c_error(v, rc, "ibv_memcpy_to_dm")),
        }
    }

    /// The body of `Verbs::memcpy_from_dm`.
    pub(crate) fn memcpy_from_dm_impl(
        &mut self,
        dm: &HwDm,
        offset: u64,
        host: &mut [u8],
    ) -> Result<()> {
        let v = Verb::MemcpyFromDm;
        self.check_owner(&dm.0.obj.ctx, v, "DM")?;
        let p = dm.0.obj.get(v)?;
        // SAFETY: `p` is a live DM (not freed: `get` checked).
        match unsafe { fv::ibv_memcpy_from_dm(host, p, offset) } {
            0 => Ok(()),
            rc => Err(c_error(v, rc, "ibv_memcpy_from_dm")),
        }
    }

    /// The body of `Verbs::reg_dm_mr`: an MR with no host buffer (its
    /// bytes are the DM's; `mr_bytes` refuses it).
    pub(crate) fn reg_dm_mr_impl(
        &mut self,
        pd: &HwPd,
        dm: &HwDm,
        offset: u64,
        length: usize,
        access: AccessFlags,
    ) -> Result<HwMr> {
        let v = Verb::RegDmMr;
        self.check_owner(&pd.0.obj.ctx, v, "PD")?;
        self.check_owner(&dm.0.obj.ctx, v, "DM")?;
        let p = pd.0.obj.get(v)?;
        let d = dm.0.obj.get(v)?;
        if !Arc::ptr_eq(&pd.0.obj.ctx, &dm.0.obj.ctx) {
            return Err(Error::invalid(
                v,
                "the DM belongs to another device context than the PD",
            ));
        }
        let buf = PageBuf::new(0)
            .ok_or_else(|| Error::from_errno(v, errno::ENOMEM, "cannot allocate 1 byte"))?;
        // SAFETY: `p` and `d` are live objects of one live context (same
        // context checked above).
        let mr = unsafe { fv::ibv_reg_dm_mr(p, d, offset, length, access.bits()) }
            .map_err(|e| c_error(v, e, "ibv_reg_dm_mr"))?;
        Ok(HwMr(Arc::new(MrInner {
            obj: Owned::new(mr, &pd.0.obj.ctx),
            buf,
            pd: RefCell::new(pd.clone()),
            access: Cell::new(access),
            dm: Some(dm.clone()),
        })))
    }
}

/// An MR on device memory has no host bytes: `EOPNOTSUPP` (read and write
/// the DM with `memcpy_from_dm` / `memcpy_to_dm`).
pub(crate) fn dm_mr_has_no_bytes(mr: &HwMr) -> Result<()> {
    if mr.0.dm.is_some() {
        return Err(Error::from_errno(
            Verb::MrBytes,
            errno::EOPNOTSUPP,
            "the MR is registered on device memory: use memcpy_from_dm / memcpy_to_dm",
        ));
    }
    Ok(())
}
