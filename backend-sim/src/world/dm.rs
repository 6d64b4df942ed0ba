//! Device memory (DM): `ibv_alloc_dm`, `ibv_free_dm`, `ibv_memcpy_to_dm`,
//! `ibv_memcpy_from_dm` and `ibv_reg_dm_mr`.
//!
//! A DM is memory on the adapter (mlx5 calls it MEMIC), reached by the host
//! only through the two copy verbs and by work requests only through MRs
//! registered on it. Its bytes live in the World behind an
//! `Arc<Mutex<Vec<u8>>>` that the MRs over it share as
//! [`ExternalMemory`] windows, so the data path reads and writes a DM MR
//! as any other MR.
//!
//! The rules, from rdma-core (libibverbs `verbs.h`, `cmd_dm.c`; mlx5
//! `providers/mlx5/verbs.c`) and the kernel (`uverbs_std_types_dm.c`,
//! `uverbs_std_types_mr.c`, mlx5 `dm.c`), restated:
//!
//! * allocation: a `comp_mask` other than 0 and a length above
//!   `max_dm_size` are refused by the mlx5 provider (`EINVAL`); the mlx5
//!   kernel driver refuses length 0 (`EINVAL`, its MEMIC allocation
//!   command). A device without device memory has no `alloc_dm` op
//!   (`EOPNOTSUPP`). When the device's memory is used up the allocation
//!   fails with `ENOMEM`.
//! * freeing: refused with `EBUSY` while MRs registered on the DM exist
//!   (the kernel keeps a use count on the DM).
//! * copies: a range past the DM's end is `EFAULT`, checked first; an
//!   offset or a length that is not a multiple of 4 is `EINVAL` (mlx5
//!   copies in 4-byte units). Nothing is copied on error.
//! * registration: the provider accepts only `LOCAL_WRITE`,
//!   `REMOTE_WRITE`, `REMOTE_READ`, `REMOTE_ATOMIC`, `ZERO_BASED` and the
//!   optional range (others `EINVAL`); libibverbs demands `ZERO_BASED`
//!   (`EINVAL`); the kernel applies the ordinary MR access rules and
//!   refuses a range outside the DM (`EINVAL`). The MR is zero-based
//!   (`addr` 0). Deregistration gives the use count back.
//!
//! # Divergence from hardware
//! * Capacity is the sum of the live DMs' lengths against `max_dm_size`
//!   (an *estimate* for ConnectX: the adapter allocates whole pages of its
//!   MEMIC BAR, and the BAR's size is not public). Fragmentation is not
//!   modelled.
//! * `log_align_req` is accepted and ignored (the DM's "address" is never
//!   visible: MRs over it are zero-based).
//! * Length 0 in `ibv_reg_dm_mr` is accepted, as the kernel's checks (range
//!   within the DM) allow it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use verbs_api::errno::{EFAULT, EINVAL, ENOMEM, EOPNOTSUPP};
use verbs_api::{AccessFlags, AllocDmAttr, Error, Result, Verb};

use super::{busy, invalid, World};
use crate::handles::{ContextHandle, DmHandle, MrHandle, PdHandle};
use crate::memory::MrMemory;
use crate::ExternalMemory;

/// `IBV_ACCESS_OPTIONAL_RANGE` (verbs.h).
const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

/// The unit of `ibv_memcpy_to_dm` / `ibv_memcpy_from_dm` offsets and
/// lengths on mlx5.
const DM_COPY_UNIT: u64 = 4;

/// One device memory allocation.
#[derive(Debug)]
pub(crate) struct Dm {
    pub(crate) ctx: ContextHandle,
    pub(crate) device: u32,
    /// The bytes, shared with the MRs registered on the DM.
    pub(crate) bytes: Arc<Mutex<Vec<u8>>>,
    /// MRs registered on the DM and not yet deregistered.
    pub(crate) mrs: u32,
}

impl Dm {
    fn len(&self) -> u64 {
        lock(&self.bytes).len() as u64
    }
}

/// The bytes behind the lock. Nothing in the World runs on two threads, so
/// the lock is never poisoned; if it were, the bytes are still valid.
fn lock(bytes: &Mutex<Vec<u8>>) -> MutexGuard<'_, Vec<u8>> {
    bytes.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A window of a DM's bytes: the memory of an MR registered on it.
#[derive(Debug)]
struct DmWindow {
    bytes: Arc<Mutex<Vec<u8>>>,
    offset: usize,
    len: usize,
}

impl ExternalMemory for DmWindow {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, dst: &mut [u8]) {
        let start = self.offset + offset;
        dst.copy_from_slice(&lock(&self.bytes)[start..start + dst.len()]);
    }

    fn write(&mut self, offset: usize, src: &[u8]) {
        let start = self.offset + offset;
        lock(&self.bytes)[start..start + src.len()].copy_from_slice(src);
    }
}

fn err(verb: Verb, errno: i32, msg: impl Into<String>) -> Error {
    Error::from_errno(verb, errno, msg)
}

impl World {
    fn dm(&self, h: DmHandle, verb: Verb) -> Result<&Dm> {
        self.ext
            .dms
            .get(h.index, h.generation)
            .ok_or_else(|| invalid(verb, format!("invalid or freed DM handle {h:?}")))
    }

    /// Bytes of device memory allocated on `device`.
    fn dm_bytes_on(&self, device: u32) -> u64 {
        self.ext
            .dms
            .iter()
            .filter(|(_, _, d)| d.device == device)
            .map(|(_, _, d)| d.len())
            .sum()
    }

    /// `ibv_alloc_dm`: zeroed device memory owned by `ctx`.
    ///
    /// # Errors
    /// `EOPNOTSUPP` where the profile has no device memory; `EINVAL` for a
    /// `comp_mask` other than 0, length 0 or a length above `max_dm_size`;
    /// `ENOMEM` when the device's `max_dm_size` bytes are allocated.
    pub fn alloc_dm(&mut self, ctx: ContextHandle, attr: &AllocDmAttr) -> Result<DmHandle> {
        let v = Verb::AllocDm;
        let device = self.ctx(ctx, v)?.device;
        let profile = &self.device(device).profile;
        let max = profile.mlx5.map_or(0, |m| m.max_dm_size);
        if max == 0 {
            return Err(err(
                v,
                EOPNOTSUPP,
                format!("the {} device has no device memory", profile.name),
            ));
        }
        if attr.comp_mask != 0 {
            return Err(err(
                v,
                EINVAL,
                format!("comp_mask {:#x}: no extension is defined", attr.comp_mask),
            ));
        }
        if attr.length > max {
            return Err(err(
                v,
                EINVAL,
                format!(
                    "length {} is above the device's max_dm_size {max}",
                    attr.length
                ),
            ));
        }
        if attr.length == 0 {
            return Err(err(v, EINVAL, "length 0"));
        }
        let used = self.dm_bytes_on(device);
        if used + attr.length > max {
            return Err(err(
                v,
                ENOMEM,
                format!(
                    "{used} of the device's {max} bytes of device memory are allocated; {} more do not fit",
                    attr.length
                ),
            ));
        }
        let bytes = Arc::new(Mutex::new(vec![0u8; attr.length as usize]));
        let h = DmHandle::from_parts(self.ext.dms.insert(Dm {
            ctx,
            device,
            bytes,
            mrs: 0,
        }));
        self.ctx_mut(ctx, v)?.children += 1;
        Ok(h)
    }

    /// `ibv_free_dm`.
    ///
    /// # Errors
    /// `EBUSY` while MRs are registered on the DM.
    pub fn free_dm(&mut self, dm: DmHandle) -> Result<()> {
        let v = Verb::FreeDm;
        let d = self.dm(dm, v)?;
        if d.mrs > 0 {
            return Err(busy(
                v,
                format!("{} MRs are registered on the device memory", d.mrs),
            ));
        }
        let ctx = d.ctx;
        self.ext.dms.remove(dm.index, dm.generation);
        if let Ok(c) = self.ctx_mut(ctx, v) {
            c.children -= 1;
        }
        Ok(())
    }

    /// The checks of both copy verbs: the range as `usize`s.
    fn dm_range(&self, dm: DmHandle, offset: u64, length: usize, v: Verb) -> Result<usize> {
        let len = self.dm(dm, v)?.len();
        let end = offset.checked_add(length as u64);
        if end.is_none_or(|e| e > len) {
            return Err(err(
                v,
                EFAULT,
                format!(
                    "offset {offset} + length {length} is past the device memory's {len} bytes"
                ),
            ));
        }
        if offset % DM_COPY_UNIT != 0 || length as u64 % DM_COPY_UNIT != 0 {
            return Err(err(
                v,
                EINVAL,
                format!("offset {offset} and length {length} must be multiples of {DM_COPY_UNIT}"),
            ));
        }
        Ok(offset as usize)
    }

    /// `ibv_memcpy_to_dm`: `src` to the DM at `offset`.
    ///
    /// # Errors
    /// `EFAULT` past the end (checked first), `EINVAL` for an offset or a
    /// length not a multiple of 4; nothing is copied on error.
    pub fn memcpy_to_dm(&mut self, dm: DmHandle, offset: u64, src: &[u8]) -> Result<()> {
        let v = Verb::MemcpyToDm;
        let start = self.dm_range(dm, offset, src.len(), v)?;
        let d = self.dm(dm, v)?;
        lock(&d.bytes)[start..start + src.len()].copy_from_slice(src);
        Ok(())
    }

    /// `ibv_memcpy_from_dm`: `dst.len()` bytes of the DM at `offset`.
    ///
    /// # Errors
    /// As [`World::memcpy_to_dm`]; `dst` is untouched on error.
    pub fn memcpy_from_dm(&self, dm: DmHandle, offset: u64, dst: &mut [u8]) -> Result<()> {
        let v = Verb::MemcpyFromDm;
        let start = self.dm_range(dm, offset, dst.len(), v)?;
        let d = self.dm(dm, v)?;
        dst.copy_from_slice(&lock(&d.bytes)[start..start + dst.len()]);
        Ok(())
    }

    /// `ibv_reg_dm_mr`: a zero-based MR over `length` bytes of the DM from
    /// `offset`.
    ///
    /// # Errors
    /// `EINVAL` for access bits the provider does not take, no
    /// `ZERO_BASED`, the ordinary MR access rules, a range outside the DM,
    /// or a DM of another context than the PD's.
    pub fn reg_dm_mr(
        &mut self,
        pd: PdHandle,
        dm: DmHandle,
        offset: u64,
        length: usize,
        access: AccessFlags,
    ) -> Result<MrHandle> {
        let v = Verb::RegDmMr;
        let p = self.pd(pd, v)?;
        let (pd_ctx, device) = (p.ctx, p.device);
        let d = self.dm(dm, v)?;
        let (dm_ctx, dm_len) = (d.ctx, d.len());
        let taken = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC
            | AccessFlags::ZERO_BASED;
        let extra = access.bits() & !(taken.bits() | ACCESS_OPTIONAL_RANGE);
        if extra != 0 {
            return Err(invalid(
                v,
                format!("access bits {extra:#x} are not taken for device memory"),
            ));
        }
        if !access.contains(AccessFlags::ZERO_BASED) {
            return Err(invalid(v, "device memory MRs must be ZERO_BASED"));
        }
        let access = AccessFlags(access.bits() & !ACCESS_OPTIONAL_RANGE);
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
        if offset
            .checked_add(length as u64)
            .is_none_or(|end| end > dm_len)
        {
            return Err(invalid(
                v,
                format!("offset {offset} + length {length} is outside the device memory's {dm_len} bytes"),
            ));
        }
        self.same_ctx(v, "device memory", dm_ctx, pd_ctx)?;
        let window = DmWindow {
            bytes: Arc::clone(&self.dm(dm, v)?.bytes),
            offset: offset as usize,
            len: length,
        };
        let mr = self.insert_mr(pd, device, 0, access, MrMemory::External(Box::new(window)))?;
        self.mr_mut(mr, v)?.dm = Some(dm);
        if let Some(d) = self.ext.dms.get_mut(dm.index, dm.generation) {
            d.mrs += 1;
        }
        Ok(mr)
    }

    /// Gives back the use count an MR on device memory holds (at
    /// `ibv_dereg_mr`).
    pub(crate) fn release_dm_use(&mut self, dm: DmHandle) {
        if let Some(d) = self.ext.dms.get_mut(dm.index, dm.generation) {
            d.mrs = d.mrs.saturating_sub(1);
        }
    }

    /// Live device memory allocations (for [`crate::LiveObjects`]).
    pub(crate) fn dm_count(&self) -> usize {
        self.ext.dms.len()
    }
}
