//! `ibv_query_device_ex`, GID entries (`ibv_query_gid_ex`,
//! `ibv_query_gid_table`) and ECE (`ibv_query_ece`, `ibv_set_ece`).

use verbs_api::errno::{ENODATA, EOPNOTSUPP};
use verbs_api::{CqModerationCaps, DeviceAttrEx, Ece, GidEntry, GidType, LinkLayer, Result, Verb};

use crate::handles::{ContextHandle, QpHandle};
use crate::profile::DriverModel;
use crate::world::{invalid, World};

use super::*;

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
            max_dm_size: p.mlx5.map_or(0, |m| m.max_dm_size),
            ..DeviceAttrEx::default()
        })
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
}
