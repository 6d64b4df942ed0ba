//! `ibv_resize_cq` and extended CQs: `ibv_create_cq_ex` and the
//! `ibv_start_poll` family (`poll_cq_ex`).

use verbs_api::errno::EOPNOTSUPP;
use verbs_api::{
    CqInitAttrEx, CqInitAttrMask, CreateCqAttrFlags, Error, ErrorKind, Result, Verb, WcEx,
    WcExFlags,
};

use crate::handles::{ContextHandle, CqHandle};
use crate::profile::DriverModel;
use crate::world::{invalid, World};
use crate::SimVerbs;

use super::*;

impl World {
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
        self.detach_cq_mirror(cq);
        self.cq_mut(cq, v)?.cqe = actual;
        Ok(())
    }

    // -------------------------------------------------------- extended CQ

    /// The `wc_flags` the device can report: the standard fields, plus
    /// the completion timestamp where the device has a clock (mlx5), plus
    /// the stripped C-VLAN where the device strips VLANs (it claims
    /// `IBV_RAW_PACKET_CAP_CVLAN_STRIPPING`; simulated packets carry no
    /// VLAN tag, so the value read is 0).
    pub(super) fn supported_wc_flags(&self, device: u32) -> WcExFlags {
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

    /// What `poll_cq_ex` reports of `cq`'s completions: the `wc_flags`
    /// it was created with and whether its device has a completion clock
    /// (for [`crate::wc_ex_of`]); `EINVAL` for a CQ that does not exist or
    /// was not created with `ibv_create_cq_ex`, as `poll_cq_ex` says.
    pub fn cq_ex_format(&self, cq: CqHandle) -> Result<(WcExFlags, bool)> {
        let v = Verb::PollCqEx;
        let device = self.cq(cq, v)?.device;
        let Some(flags) = get_gen(&self.ext.cq_ex, cq.index, cq.generation) else {
            return Err(invalid(v, "the CQ was not created with ibv_create_cq_ex"));
        };
        Ok((
            flags,
            self.device(device).profile.driver == DriverModel::Mlx5,
        ))
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
        self.poll_cq_with(cq, out.len(), v, |n, e| {
            out[n] = crate::world::wc_ex_of(&e.wc, e.ts_ns, flags, clock);
        })
    }
}
