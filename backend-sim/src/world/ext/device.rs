//! `ibv_query_device_ex`, GID entries (`ibv_query_gid_ex`,
//! `ibv_query_gid_table`) and ECE (`ibv_query_ece`, `ibv_set_ece`).

use verbs_api::errno::{ENODATA, EOPNOTSUPP};
use verbs_api::{CqModerationCaps, DeviceAttrEx, Ece, GidEntry, GidType, LinkLayer, Result, Verb};

use crate::handles::{ContextHandle, QpHandle};
use crate::profile::DriverModel;
use crate::world::{invalid, World};

use super::*;

/// `IBV_ODP_SUPPORT_SEND`, `_RECV`, `_WRITE`, `_READ`, `_ATOMIC`,
/// `_SRQ_RECV` (`enum ibv_odp_transport_cap_bits`).
const ODP_SEND: u32 = 1;
const ODP_RECV: u32 = 2;
const ODP_WRITE: u32 = 4;
const ODP_READ: u32 = 8;
const ODP_ATOMIC: u32 = 16;
const ODP_SRQ_RECV: u32 = 32;

/// The ODP capabilities of a profile with on-demand paging (the mlx5
/// ones): `IBV_ODP_SUPPORT` and `IBV_ODP_SUPPORT_IMPLICIT`; RC every
/// operation and SRQ receives; UD sends; UC none (*estimate*: the values
/// `ibv_devinfo -v` prints for ConnectX-5/6, docs/divergence.md). Every
/// MR of the simulator is reached at the moment of the access, never
/// pinned, so ODP changes nothing on its data path.
const ODP_CAPS: verbs_api::OdpCaps = verbs_api::OdpCaps {
    general_caps: 1 | 2,
    rc_odp_caps: ODP_SEND | ODP_RECV | ODP_WRITE | ODP_READ | ODP_ATOMIC | ODP_SRQ_RECV,
    uc_odp_caps: 0,
    ud_odp_caps: ODP_SEND,
};

/// `xrc_odp_caps` of such a profile (with XRC): as RC, without plain
/// receives.
const ODP_XRC: u32 = ODP_SEND | ODP_WRITE | ODP_READ | ODP_ATOMIC | ODP_SRQ_RECV;

impl World {
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
            odp_caps: if p.odp {
                ODP_CAPS
            } else {
                verbs_api::OdpCaps::default()
            },
            xrc_odp_caps: if p.odp && p.xrc { ODP_XRC } else { 0 },
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
            max_dm_size: p.mlx5.map_or(0, |m| m.max_dm_size),
            ..DeviceAttrEx::default()
        })
    }

    // ------------------------------------------------------------- clock

    /// `ibv_query_rt_values_ex` with `IBV_VALUES_MASK_RAW_CLOCK`: the
    /// simulated mlx5 core clock now, in ticks of `hca_core_clock`
    /// (`mlx5_query_rt_values` reads the free-running counter; the
    /// simulator derives it from virtual time). rxe has no clock:
    /// `EOPNOTSUPP`, as libibverbs answers when the provider lacks the op.
    pub fn query_rt_values_ex(&self, ctx: ContextHandle) -> Result<u64> {
        let v = Verb::QueryRtValuesEx;
        self.mlx5_clock(ctx, v)?;
        Ok(ns_to_ticks(self.now_ns) & MLX5_TS_MASK)
    }

    /// `mlx5dv_get_clock_info`: the parameters of `mlx5dv_ts_to_ns` as of
    /// now. The kernel keeps them in a page it refreshes; the simulator
    /// computes them from virtual time: `last_cycles` is the clock now,
    /// `nsec` its exact time in nanoseconds (virtual time since the world
    /// began, so a wall-clock reading of it lands in 1970: a divergence),
    /// `mult`/`shift` the tick length (6.4 ns at 156.25 MHz) and `frac`
    /// the sub-nanosecond remainder. Not mlx5: `EOPNOTSUPP`.
    pub fn mlx5dv_get_clock_info(&self, ctx: ContextHandle) -> Result<verbs_api::ClockInfo> {
        let v = Verb::Mlx5dvGetClockInfo;
        self.mlx5_clock(ctx, v)?;
        Ok(clock_info(ns_to_ticks(self.now_ns)))
    }

    /// `EOPNOTSUPP` unless `ctx` is a simulated mlx5 device (which has a
    /// core clock).
    fn mlx5_clock(&self, ctx: ContextHandle, v: Verb) -> Result<()> {
        let device = self.ctx(ctx, v)?.device;
        if self.device(device).profile.driver != DriverModel::Mlx5 {
            return Err(Error::from_errno(
                v,
                EOPNOTSUPP,
                "the device has no core clock (not mlx5)",
            ));
        }
        Ok(())
    }

    // ---------------------------------------------------------- GID entries

    pub(super) fn gid_entry(&self, dev: u32, port: u8, index: u32) -> GidEntry {
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

    pub(super) fn ece_device(&self, qp: QpHandle, v: Verb) -> Result<()> {
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

    /// `ibv_query_ece` (mlx5 `mlx5_query_ece`): vendor 0x02c9 and the
    /// options the device last answered with: at creation every option it
    /// supports (*estimate*: the create command's answer), after
    /// `ibv_set_ece` 0 until a modify sends the set options, then the
    /// options the device accepted.
    pub fn query_ece(&self, qp: QpHandle) -> Result<Ece> {
        let v = Verb::QueryEce;
        self.ece_device(qp, v)?;
        let options = get_gen(&self.ext.ece, qp.index, qp.generation)
            .map_or(MLX5_ECE_OPTIONS, |(_, answered)| answered);
        Ok(Ece {
            vendor_id: MLX5_ECE_VENDOR,
            options,
            comp_mask: 0,
        })
    }

    /// `ibv_set_ece` (libibverbs, then mlx5 `mlx5_set_ece`): a zero
    /// `vendor_id` is `EOPNOTSUPP` (libibverbs, before the provider); a
    /// device without ECE `EOPNOTSUPP`; a non-zero `comp_mask` or another
    /// vendor `EINVAL`. The options are kept for the next modify and the
    /// answered ones cleared; `ece` is not written (the provider only reads
    /// it).
    pub fn set_ece(&mut self, qp: QpHandle, ece: &Ece) -> Result<()> {
        let v = Verb::SetEce;
        if ece.vendor_id == 0 {
            self.qp(qp, v)?;
            return Err(err(
                v,
                EOPNOTSUPP,
                "vendor_id 0: no vendor's ECE (libibverbs refuses it before the provider)",
            ));
        }
        self.ece_device(qp, v)?;
        if ece.comp_mask != 0 {
            return Err(invalid(
                v,
                format!("comp_mask {:#x} must be 0", ece.comp_mask),
            ));
        }
        if ece.vendor_id != MLX5_ECE_VENDOR {
            return Err(invalid(
                v,
                format!(
                    "vendor_id {:#x} is not the device's {MLX5_ECE_VENDOR:#x}",
                    ece.vendor_id
                ),
            ));
        }
        self.ext
            .ece
            .insert(qp.index, (qp.generation, (ece.options, 0)));
        Ok(())
    }

    /// A modify succeeded: options set with `ibv_set_ece` go with it, and
    /// the device answers with those it accepts (mlx5 `mlx5_modify_qp`
    /// passes `set_ece` and stores the answer as `get_ece`).
    pub(crate) fn ece_on_modify(&mut self, qp: QpHandle) {
        if let Some((g, (set, answered))) = self.ext.ece.get_mut(&qp.index) {
            if *g == qp.generation && *set != 0 {
                *answered = *set & MLX5_ECE_OPTIONS;
                *set = 0;
            }
        }
    }
}
