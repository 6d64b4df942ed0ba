//! Devices, contexts, ports, GIDs and P_Keys, protection domains and
//! address handles: `ibv_get_device_list`, `ibv_open_device`,
//! `ibv_close_device`, `ibv_query_device`, `ibv_query_port`,
//! `ibv_query_gid`, `ibv_query_pkey`, `ibv_alloc_pd`, `ibv_dealloc_pd`,
//! `ibv_create_ah`, `ibv_destroy_ah`.

use std::collections::VecDeque;

use verbs_api::{
    AhAttr, DeviceAttr, DeviceInfo, Error, ErrorKind, Gid, LinkLayer, PortAttr, ProcessId, Result,
    Verb,
};

use crate::handles::*;

use super::*;

impl World {
    // ---------------------------------------------------------------- device

    /// `ibv_get_device_list`.
    pub fn get_device_list(&self) -> Vec<DeviceInfo> {
        self.devices
            .iter()
            .enumerate()
            .map(|(i, d)| DeviceInfo {
                name: format!("sim_{}_{i}", d.profile.name),
                guid: d.node_guid,
            })
            .collect()
    }

    /// The index of the device `ctx` was opened on.
    pub fn context_device(&self, ctx: ContextHandle) -> Result<u32> {
        Ok(self.ctx(ctx, Verb::QueryDevice)?.device)
    }

    /// `ibv_open_device` by `process`.
    pub fn open_device(&mut self, index: usize, process: ProcessId) -> Result<ContextHandle> {
        if index >= self.devices.len() {
            return Err(Error::new(
                Verb::OpenDevice,
                ErrorKind::NoDevice,
                format!(
                    "no device at index {index} ({} simulated devices)",
                    self.devices.len()
                ),
            ));
        }
        self.processes
            .entry(process)
            .or_insert(Process { next_va: VA_BASE });
        let ctx = Context {
            device: index as u32,
            process,
            children: 0,
            async_events: VecDeque::new(),
            async_unacked: Vec::new(),
        };
        Ok(ContextHandle::from_parts(self.contexts.insert(ctx)))
    }

    /// `ibv_close_device`: `EBUSY` while the context still has children;
    /// the QP numbers it reserved are released.
    pub fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        let c = self.ctx(ctx, Verb::CloseDevice)?;
        if c.children > 0 {
            return Err(busy(
                Verb::CloseDevice,
                format!(
                    "{} PD/CQ/channel/QP objects of this context are still alive",
                    c.children
                ),
            ));
        }
        self.contexts.remove(ctx.index, ctx.generation);
        self.release_reserved_qpns(ctx);
        Ok(())
    }

    /// `ibv_query_device`.
    pub fn query_device(&self, ctx: ContextHandle) -> Result<DeviceAttr> {
        let c = self.ctx(ctx, Verb::QueryDevice)?;
        Ok(self.device(c.device).attr())
    }

    pub(super) fn ctx_port(&self, ctx: ContextHandle, port: u8, verb: Verb) -> Result<u32> {
        let c = self.ctx(ctx, verb)?;
        let d = self.device(c.device);
        if !d.port_valid(port) {
            return Err(invalid(
                verb,
                format!(
                    "port_num {port} is not a port of the device (1..={})",
                    d.profile.attr.phys_port_cnt
                ),
            ));
        }
        Ok(c.device)
    }

    /// `ibv_query_port`.
    pub fn query_port(&self, ctx: ContextHandle, port: u8) -> Result<PortAttr> {
        let dev = self.ctx_port(ctx, port, Verb::QueryPort)?;
        Ok(self.device(dev).port_attr(dev))
    }

    /// `ibv_query_gid`: index 0 is the link-local GID built from the node
    /// GUID; on RoCE index 1 is the IPv4-mapped address `10.0.<dev>.1`;
    /// other entries inside the table are zero, as empty hardware entries are.
    pub fn query_gid(&self, ctx: ContextHandle, port: u8, index: u32) -> Result<Gid> {
        let dev = self.ctx_port(ctx, port, Verb::QueryGid)?;
        let d = self.device(dev);
        let len = u32::try_from(d.profile.port.gid_tbl_len).unwrap_or(0);
        if index >= len {
            return Err(invalid(
                Verb::QueryGid,
                format!("GID index {index} is past gid_tbl_len {len}"),
            ));
        }
        Ok(self.gid_of(dev, index))
    }

    pub(crate) fn gid_of(&self, dev: u32, index: u32) -> Gid {
        let d = self.device(dev);
        match index {
            0 => Gid::from_parts(0xfe80_0000_0000_0000, d.node_guid),
            1 if d.profile.port.link_layer == LinkLayer::Ethernet => {
                Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, (dev & 0xff) as u8, 1))
            }
            _ => Gid::default(),
        }
    }

    /// `ibv_query_pkey`: index 0 holds the default full-membership P_Key 0xffff.
    pub fn query_pkey(&self, ctx: ContextHandle, port: u8, index: u16) -> Result<u16> {
        let dev = self.ctx_port(ctx, port, Verb::QueryPkey)?;
        let len = self.device(dev).profile.port.pkey_tbl_len;
        if index >= len {
            return Err(invalid(
                Verb::QueryPkey,
                format!("P_Key index {index} is past pkey_tbl_len {len}"),
            ));
        }
        Ok(if index == 0 { 0xffff } else { 0 })
    }

    // -------------------------------------------------------------------- PD

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        let device = self.ctx(ctx, Verb::AllocPd)?.device;
        self.ctx_mut(ctx, Verb::AllocPd)?.children += 1;
        Ok(PdHandle::from_parts(self.pds.insert(Pd {
            ctx,
            device,
            users: 0,
        })))
    }

    /// `ibv_dealloc_pd`: `EBUSY` while a QP, MR, SRQ or AH uses it.
    pub fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        let p = self.pd(pd, Verb::DeallocPd)?;
        if p.users > 0 {
            return Err(busy(
                Verb::DeallocPd,
                format!("{} QP/MR/SRQ/AH objects still use the PD", p.users),
            ));
        }
        let ctx = p.ctx;
        self.pds.remove(pd.index, pd.generation);
        if let Ok(c) = self.ctx_mut(ctx, Verb::DeallocPd) {
            c.children -= 1;
        }
        Ok(())
    }

    // -------------------------------------------------------------------- AH

    /// Validates an address vector against `device` (port, GRH on RoCE,
    /// `sgid_index`), as `ibv_create_ah` and `IBV_QP_AV` do.
    pub(crate) fn check_ah_attr(
        &self,
        device: u32,
        attr: &AhAttr,
        verb: Verb,
        what: &str,
    ) -> Result<()> {
        Self::check_ah(self.device(device), attr, verb, what)
    }

    /// [`Self::check_ah_attr`] against the device itself.
    pub(crate) fn check_ah(d: &Device, attr: &AhAttr, verb: Verb, what: &str) -> Result<()> {
        if !d.port_valid(attr.port_num) {
            return Err(invalid(
                verb,
                format!(
                    "{what}.port_num {} is not a port of the device (1..={})",
                    attr.port_num, d.profile.attr.phys_port_cnt
                ),
            ));
        }
        if d.profile.grh_required() && !attr.is_global {
            return Err(invalid(
                verb,
                format!("{what}: the port is RoCE (GRH required) but is_global is 0"),
            ));
        }
        if attr.is_global {
            let len = u32::try_from(d.profile.port.gid_tbl_len).unwrap_or(0);
            if u32::from(attr.grh.sgid_index) >= len {
                return Err(invalid(
                    verb,
                    format!(
                        "{what}.grh.sgid_index {} is past gid_tbl_len {len}",
                        attr.grh.sgid_index
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `ibv_create_ah`.
    pub fn create_ah(&mut self, pd: PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        let device = self.pd(pd, Verb::CreateAh)?.device;
        self.check_ah_attr(device, attr, Verb::CreateAh, "ah_attr")?;
        self.pd_mut(pd, Verb::CreateAh)?.users += 1;
        Ok(AhHandle::from_parts(
            self.ahs.insert(Ah { pd, attr: *attr }),
        ))
    }

    /// `ibv_destroy_ah`.
    pub fn destroy_ah(&mut self, ah: AhHandle) -> Result<()> {
        let pd = self.ah(ah, Verb::DestroyAh)?.pd;
        self.ahs.remove(ah.index, ah.generation);
        if let Ok(p) = self.pd_mut(pd, Verb::DestroyAh) {
            p.users -= 1;
        }
        Ok(())
    }
}
