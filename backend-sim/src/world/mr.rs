//! Memory regions: the bytes live in the World; keys are index + variant.

use verbs_api::{AccessFlags, AdviseMrAdvice, MrInfo, Result, Sge, Verb};

use super::{invalid, misuse, no_mem, unsupported, World};
use crate::handles::{DmHandle, MrHandle, PdHandle};
use crate::memory::MrMemory;
use crate::ExternalMemory;

/// `IBV_ACCESS_OPTIONAL_RANGE`: flags libibverbs silently drops when the
/// kernel does not know them (verbs.h comment on `ibv_reg_mr_iova2`).
const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

#[derive(Debug)]
pub(crate) struct Mr {
    pub(crate) pd: PdHandle,
    pub(crate) device: u32,
    pub(crate) addr: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) access: AccessFlags,
    pub(crate) bytes: MrMemory,
    /// Posted work requests whose SGEs name this MR and are not yet reaped.
    pub(crate) pins: u32,
    /// Invalidated by a SEND_WITH_INV naming its rkey (data-path §3.2): its
    /// keys fail every check until it is deregistered.
    pub(crate) invalidated: bool,
    /// Deregistered while posted requests still named it: its handle and
    /// keys are dead (every check fails), but requests already on the wire
    /// still read the bytes hardware would have fetched. The slot is freed
    /// when the last such request is released (`pins` reaches 0).
    pub(crate) deregistered: bool,
    /// Keys a new translation (`ibv_rereg_mr` `CHANGE_TRANSLATION`) retired
    /// while posted requests still named them: dead for every check, but
    /// still the MR's for pinning and unpinning, so the pin count stays
    /// exact. Forgotten at a re-registration that finds no pin; empty (no
    /// allocation, one pointer in the MR) for an MR never re-registered
    /// under pins.
    pub(crate) retired_keys: Option<Box<[u32]>>,
    /// The device memory an `ibv_reg_dm_mr` MR is registered on: its use
    /// count drops when the MR is deregistered.
    pub(crate) dm: Option<DmHandle>,
}

impl Mr {
    /// Whether `key` is one of [`Mr::retired_keys`] of this device's MR:
    /// it still pins the MR. The pin paths test the MR's own key first
    /// and ask this only when that fails (out of line: they are hot).
    #[cold]
    #[inline(never)]
    pub(crate) fn pinned_by_retired(&self, key: u32, device: u32) -> bool {
        self.device == device && self.retired_keys.as_ref().is_some_and(|k| k.contains(&key))
    }
}

impl World {
    /// `ibv_reg_mr` over `length` zeroed bytes the World allocates.
    ///
    /// Access rules (data-path.md §9.2): `REMOTE_WRITE`/`REMOTE_ATOMIC`
    /// without `LOCAL_WRITE` → `EINVAL`; `ON_DEMAND` without ODP →
    /// `EOPNOTSUPP`; `FLUSH_GLOBAL`/`FLUSH_PERSISTENT` on a device without
    /// RDMA FLUSH → `EOPNOTSUPP`, `FLUSH_PERSISTENT` elsewhere → `EINVAL`
    /// (not persistent memory); unknown bits → `EINVAL`, except the optional range,
    /// which is silently dropped; length 0 or above `max_mr_size` → `EINVAL`.
    ///
    /// # Divergence from hardware
    /// On an ODP-capable profile `ON_DEMAND` is accepted but no page faults
    /// are modelled. Registrations past `SimConfig::mr_bytes_max` fail with
    /// `ENOMEM`.
    pub fn reg_mr(&mut self, pd: PdHandle, length: usize, access: AccessFlags) -> Result<MrHandle> {
        let (device, process, access) = self.check_reg_mr(pd, length, access)?;
        let total = self.mr_bytes_total.saturating_add(length as u64);
        if total > self.config.mr_bytes_max {
            return Err(no_mem(
                Verb::RegMr,
                format!(
                    "the simulator's MR memory budget (SimConfig::mr_bytes_max = {}) is exhausted",
                    self.config.mr_bytes_max
                ),
            ));
        }
        let addr = self.alloc_va(process, length as u64);
        let h = self.insert_mr(pd, device, addr, access, MrMemory::Owned(vec![0u8; length]))?;
        self.mr_bytes_total = total;
        Ok(h)
    }

    /// `ibv_reg_mr` over memory the caller owns, at the caller's address:
    /// the hardware meaning, for the drop-in `libibverbs.so.1`. `addr` is
    /// the address the MR's requests name (`mr->addr`, the iova); the
    /// simulator reads and writes `memory` itself, never a copy, and drops
    /// it when the MR is deregistered (then, unlike [`World::reg_mr`],
    /// requests already on the wire see zeroes: the caller may free its
    /// buffer as soon as `ibv_dereg_mr` returns). The same checks as
    /// [`World::reg_mr`] apply; the memory does not count against
    /// `SimConfig::mr_bytes_max`. An empty `memory` is `EINVAL`.
    pub fn reg_mr_external(
        &mut self,
        pd: PdHandle,
        addr: u64,
        memory: Box<dyn ExternalMemory>,
        access: AccessFlags,
    ) -> Result<MrHandle> {
        let length = memory.len();
        let (device, _, access) = self.check_reg_mr(pd, length, access)?;
        if addr.checked_add(length as u64).is_none() {
            return Err(invalid(
                Verb::RegMr,
                format!("addr {addr:#x} + length {length} wraps around"),
            ));
        }
        self.insert_mr(pd, device, addr, access, MrMemory::External(memory))
    }

    /// The checks `ibv_reg_mr` makes; gives the device, the process and
    /// the access flags with the optional range dropped.
    fn check_reg_mr(
        &self,
        pd: PdHandle,
        length: usize,
        access: AccessFlags,
    ) -> Result<(u32, verbs_api::ProcessId, AccessFlags)> {
        let v = Verb::RegMr;
        let p = self.pd(pd, v)?;
        let (device, ctx) = (p.device, p.ctx);
        let process = self.ctx(ctx, v)?.process;
        let profile = &self.device(device).profile;
        let access = AccessFlags(access.bits() & !ACCESS_OPTIONAL_RANGE);
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
        if access.contains(AccessFlags::ON_DEMAND) && !profile.odp {
            return Err(unsupported(
                v,
                "ON_DEMAND: the device has no on-demand paging",
            ));
        }
        let flush = AccessFlags::FLUSH_GLOBAL | AccessFlags::FLUSH_PERSISTENT;
        if access.intersects(flush) && !profile.flush_and_atomic_write {
            // ib_check_mr_access: the flush flags need the device's
            // IB_DEVICE_FLUSH_GLOBAL / _PERSISTENT.
            return Err(unsupported(
                v,
                format!(
                    "access {access}: the {} device does not support RDMA FLUSH",
                    profile.name
                ),
            ));
        }
        if access.contains(AccessFlags::FLUSH_PERSISTENT) {
            // rxe accepts FLUSH_PERSISTENT only over persistent-memory
            // pages; simulated memory is ordinary memory.
            return Err(invalid(
                v,
                "FLUSH_PERSISTENT needs persistent memory; simulated MRs are not",
            ));
        }
        if length == 0 {
            return Err(invalid(v, "length 0"));
        }
        let max = profile.attr.max_mr_size;
        if length as u64 > max {
            return Err(invalid(
                v,
                format!("length {length} is above the device's max_mr_size {max:#x}"),
            ));
        }
        Ok((device, process, access))
    }

    /// Allocates the keys and the slot of a checked registration.
    pub(super) fn insert_mr(
        &mut self,
        pd: PdHandle,
        device: u32,
        addr: u64,
        access: AccessFlags,
        bytes: MrMemory,
    ) -> Result<MrHandle> {
        // lkey = rkey = (arena index << 8) | variant byte from the seeded
        // `rkey_alloc` stream, the mlx5 mkey layout: O(1) lookup, and a
        // stale key does not match a reused index.
        let index = self.mrs.next_index();
        let variant = self.rng_rkey.next_u32() & 0xff;
        let key = (index << 8) | variant;
        let mr = Mr {
            pd,
            device,
            addr,
            lkey: key,
            rkey: key,
            access,
            bytes,
            pins: 0,
            invalidated: false,
            deregistered: false,
            retired_keys: None,
            dm: None,
        };
        let h = MrHandle::from_parts(self.mrs.insert(mr));
        debug_assert_eq!(h.index, index);
        self.pd_mut(pd, Verb::RegMr)?.users += 1;
        Ok(h)
    }

    /// The MR an lkey/rkey names on `device`, if any (O(1)).
    pub fn mr_by_key(&self, device: u32, key: u32) -> Option<MrHandle> {
        self.mr_slot_by_key(device, key).filter(|h| {
            self.mrs
                .get(h.index, h.generation)
                .is_some_and(|m| !m.deregistered)
        })
    }

    /// The slot an lkey/rkey names, deregistered or not (for the pin count).
    fn mr_slot_by_key(&self, device: u32, key: u32) -> Option<MrHandle> {
        let (generation, mr) = self.mrs.get_by_index(key >> 8)?;
        (mr.lkey == key && mr.device == device).then_some(MrHandle {
            index: key >> 8,
            generation,
        })
    }

    /// `addr`, `length`, keys and access of an MR.
    pub fn mr_info(&self, mr: MrHandle) -> Result<MrInfo> {
        let m = self.live_mr(mr, Verb::RegMr)?;
        Ok(MrInfo {
            addr: m.addr,
            length: m.bytes.len() as u64,
            lkey: m.lkey,
            rkey: m.rkey,
            access: m.access,
        })
    }

    /// The MR's bytes. An MR over memory in another process
    /// ([`World::reg_mr_external`] with copy-only memory) has no in-place
    /// view: `EOPNOTSUPP`.
    pub fn mr_bytes(&self, mr: MrHandle) -> Result<&[u8]> {
        self.live_mr(mr, Verb::MrBytes)?
            .bytes
            .slice()
            .ok_or_else(|| no_view(Verb::MrBytes))
    }

    /// The MR's bytes, writable. Writing memory a posted request names is
    /// the application's business, as on hardware (a receive posted over a
    /// buffer the program then fills and sends from is ordinary); only
    /// `SimConfig::strict_mr_ownership` refuses it (`EFAULT`).
    pub fn mr_bytes_mut(&mut self, mr: MrHandle) -> Result<&mut [u8]> {
        let strict = self.config.strict_mr_ownership;
        self.live_mr(mr, Verb::MrBytes)?;
        let m = self.mr_mut(mr, Verb::MrBytes)?;
        if strict && m.pins > 0 {
            return Err(misuse(
                Verb::MrBytes,
                format!(
                    "{} posted work requests still own bytes of this MR (strict_mr_ownership)",
                    m.pins
                ),
            ));
        }
        m.bytes.slice_mut().ok_or_else(|| no_view(Verb::MrBytes))
    }

    /// An MR the application still holds (not deregistered).
    pub(crate) fn live_mr(&self, mr: MrHandle, verb: Verb) -> Result<&Mr> {
        let m = self.mr(mr, verb)?;
        if m.deregistered {
            return Err(invalid(
                verb,
                format!("invalid or destroyed MR handle {mr:?}"),
            ));
        }
        Ok(m)
    }

    /// `ibv_dereg_mr`. Allowed while posted requests name the MR, as on
    /// hardware: those requests then fail when they touch it (the keys are
    /// dead at once), and the bytes are kept only for requests already on
    /// the wire. `SimConfig::strict_mr_ownership` refuses it (`EFAULT`).
    pub fn dereg_mr(&mut self, mr: MrHandle) -> Result<()> {
        let strict = self.config.strict_mr_ownership;
        let m = self.live_mr(mr, Verb::DeregMr)?;
        if strict && m.pins > 0 {
            return Err(misuse(
                Verb::DeregMr,
                format!(
                    "{} posted work requests still name this MR (strict_mr_ownership)",
                    m.pins
                ),
            ));
        }
        let (pd, len, pinned, dm) = (m.pd, m.bytes.len(), m.pins > 0, m.dm);
        let owned = !m.bytes.is_external();
        if pinned {
            let m = self.mr_mut(mr, Verb::DeregMr)?;
            m.deregistered = true;
            m.invalidated = true;
            if !owned {
                // The caller may free its buffer once ibv_dereg_mr returns:
                // requests still in flight read zeroes instead.
                m.bytes = MrMemory::External(Box::new(crate::memory::Gone(len)));
            }
        } else {
            self.mrs.remove(mr.index, mr.generation);
        }
        if owned {
            self.mr_bytes_total -= len as u64;
        }
        if let Some(dm) = dm {
            // The DM may be freed now, even while requests still in flight
            // name the MR (they read zeroes, as for application memory).
            self.release_dm_use(dm);
        }
        if let Ok(p) = self.pd_mut(pd, Verb::DeregMr) {
            p.users -= 1;
        }
        Ok(())
    }

    /// `ibv_advise_mr` (kernel `ib_uverbs_advise_mr`, mlx5
    /// `mlx5_ib_advise_mr_prefetch`): checks the advice and each range, and
    /// does nothing else: the simulator reaches every MR's memory at the
    /// moment of the access, so there is nothing to fault in ahead of it.
    /// A device without on-demand paging, or an advice it does not know:
    /// `EOPNOTSUPP`; flags other than `IBV_ADVISE_MR_FLAG_FLUSH` or an
    /// empty list: `EINVAL`; an lkey that is not an ODP MR: `ENOENT`; an
    /// ODP MR of another PD, or one registered without `LOCAL_WRITE` for
    /// `PREFETCH_WRITE`: `EPERM` (mlx5 `get_prefetchable_mr`, Linux 6.17);
    /// a range outside its MR: `EFAULT`.
    pub fn advise_mr(
        &self,
        pd: PdHandle,
        advice: AdviseMrAdvice,
        flags: u32,
        sges: &[Sge],
    ) -> Result<()> {
        let v = Verb::AdviseMr;
        let device = self.pd(pd, v)?.device;
        if !self.device(device).profile.odp {
            return Err(unsupported(v, "the device has no on-demand paging"));
        }
        if let AdviseMrAdvice::Unknown(a) = advice {
            return Err(unsupported(v, format!("unknown advice {a}")));
        }
        if flags & !verbs_api::ADVISE_MR_FLAG_FLUSH != 0 {
            return Err(invalid(v, format!("unknown flags {flags:#x}")));
        }
        if sges.is_empty() {
            return Err(invalid(v, "an empty sg_list"));
        }
        for (i, s) in sges.iter().enumerate() {
            // mlx5's get_prefetchable_mr (Linux 6.17 hw/mlx5/odp.c): the key
            // must name an ODP MR (ENOENT), of this PD (EPERM), writable
            // for PREFETCH_WRITE (EPERM).
            let m = self
                .mr_by_key(device, s.lkey)
                .and_then(|h| self.mrs.get(h.index, h.generation))
                .filter(|m| !m.invalidated && m.access.contains(AccessFlags::ON_DEMAND));
            let Some(m) = m else {
                return Err(verbs_api::Error::from_errno(
                    v,
                    verbs_api::errno::ENOENT,
                    format!(
                        "sg_list[{i}]: lkey {:#x} is not an on-demand-paging MR",
                        s.lkey
                    ),
                ));
            };
            if m.pd != pd {
                return Err(verbs_api::Error::from_errno(
                    v,
                    verbs_api::errno::EPERM,
                    format!("sg_list[{i}]: lkey {:#x} is an MR of another PD", s.lkey),
                ));
            }
            if advice == AdviseMrAdvice::PrefetchWrite
                && !m.access.contains(AccessFlags::LOCAL_WRITE)
            {
                return Err(verbs_api::Error::from_errno(
                    v,
                    verbs_api::errno::EPERM,
                    format!(
                        "sg_list[{i}]: PREFETCH_WRITE on lkey {:#x}, an MR registered without LOCAL_WRITE",
                        s.lkey
                    ),
                ));
            }
            let end = s.addr.checked_add(u64::from(s.length));
            let mr_end = m.addr.saturating_add(m.bytes.len() as u64);
            if s.addr < m.addr || end.is_none_or(|e| e > mr_end) {
                return Err(verbs_api::Error::from_errno(
                    v,
                    verbs_api::errno::EFAULT,
                    format!(
                        "sg_list[{i}]: [{:#x}, +{}) is outside the MR [{:#x}, {mr_end:#x})",
                        s.addr, s.length, m.addr
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Adds `delta` (±1) to the pin count of the MR an SGE's lkey names
    /// (its own key, or one a re-registration retired while pinned).
    pub(crate) fn pin_key(&mut self, device: u32, lkey: u32, add: bool) {
        let Some((generation, m)) = self.mrs.get_by_index_mut(lkey >> 8) else {
            return;
        };
        if !(m.lkey == lkey && m.device == device || m.pinned_by_retired(lkey, device)) {
            return;
        }
        if add {
            m.pins += 1;
        } else {
            m.pins = m.pins.saturating_sub(1);
            if m.deregistered && m.pins == 0 {
                self.mrs.remove(lkey >> 8, generation);
            }
        }
    }
}

/// The error for an MR whose bytes cannot be seen in place.
fn no_view(verb: Verb) -> verbs_api::Error {
    verbs_api::Error::new(
        verb,
        verbs_api::ErrorKind::Unsupported,
        "the MR's memory is in another process: it has no in-place view".to_owned(),
    )
}
