//! CM multicast: `rdma_join_multicast(_ex)`, `rdma_leave_multicast`, the
//! group plan (IP multicast address → MGID, MLID) and the join events.
//! The data path's side (a UD SEND to a group) is `exec/multicast.rs`.

use super::*;
use verbs_api::errno::{ENOMEM, ETIMEDOUT};
use verbs_api::{JoinMcAttr, MULTICAST_QPN};

/// The first MLID the simulated SA hands out (multicast LIDs are
/// `0xC000..=0xFFFE`; `0xFFFF` is the permissive LID).
pub const MLID_FIRST: u16 = 0xC001;
/// The last MLID handed out before wrapping to [`MLID_FIRST`].
pub const MLID_LAST: u16 = 0xFFFE;

/// The MGID the kernel's rdma_cm derives from the IP multicast address
/// `ip` (`cma_set_mgid` / `cma_iboe_set_mgid`, see docs/rdma-cm.md):
///
/// * InfiniBand, IPv4: the IPoIB mapping `ff12:401b:ffff::` + the low 28
///   bits of the address, with the RDMA CM signature `4001` instead of
///   `401b` for `RDMA_PS_UDP` (scope 2 and P_Key `0xffff`, those of the
///   default IPoIB broadcast group);
/// * InfiniBand, IPv6: an address that is already an SA-assigned MGID
///   (`ff1x:a01b::/32`) as it is; otherwise `ff12:601b:ffff:` + its last
///   10 bytes (`6001` for `RDMA_PS_UDP`);
/// * Ethernet (RoCE): an IPv6 address as it is; an IPv4 one as
///   `ff0e::ffff:a.b.c.d` (the RoCE v1 form; RoCE v2 uses `::ffff:a.b.c.d`,
///   which `ibv_attach_mcast` here would refuse, see docs/divergence.md).
pub fn mcast_mgid(ip: IpAddr, ps: PortSpace, link: LinkLayer) -> Gid {
    let mut g = [0u8; 16];
    match (link, ip) {
        (LinkLayer::Ethernet, IpAddr::V6(a)) => g = a.octets(),
        (LinkLayer::Ethernet, IpAddr::V4(a)) => {
            g[0] = 0xff;
            g[1] = 0x0e;
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(&a.octets());
        }
        (_, IpAddr::V6(a))
            if u32::from_be_bytes([a.octets()[0], a.octets()[1], a.octets()[2], a.octets()[3]])
                & 0xFFF0_FFFF
                == 0xFF10_A01B =>
        {
            g = a.octets();
        }
        (_, IpAddr::V6(a)) => {
            g[..6].copy_from_slice(&[0xff, 0x12, 0x60, 0x1b, 0xff, 0xff]);
            g[6..].copy_from_slice(&a.octets()[6..]);
        }
        (_, IpAddr::V4(a)) => {
            g[..6].copy_from_slice(&[0xff, 0x12, 0x40, 0x1b, 0xff, 0xff]);
            let o = a.octets();
            g[12] = o[0] & 0x0f;
            g[13..].copy_from_slice(&o[1..]);
        }
    }
    if link != LinkLayer::Ethernet && ps == PortSpace::Udp && !(g[2] == 0xa0 && g[3] == 0x1b) {
        // The RDMA CM signature (the kernel's `mc_map[7] = 0x01`).
        g[3] = 0x01;
    }
    Gid(g)
}

impl World {
    /// `rdma_join_multicast(_ex)`: checks the id (UD port space, bound to a
    /// device, address resolved or bound), records the join with its MGID
    /// and MLID, and schedules the SA's answer (`MULTICAST_JOIN`). The QP is
    /// attached when that event is fetched, as librdmacm does.
    pub fn rdma_join_multicast(
        &mut self,
        id: CmIdHandle,
        attr: &JoinMcAttr,
        context: u64,
        v: Verb,
    ) -> Result<()> {
        let i = self.cm_id(id, v)?;
        if i.ps != PortSpace::Udp {
            return Err(invalid(
                v,
                format!(
                    "multicast needs a UD id (RDMA_PS_UDP), not one of port space {}",
                    i.ps
                ),
            ));
        }
        if !matches!(i.state, IdState::AddrBound | IdState::AddrResolved) {
            return Err(invalid(
                v,
                format!(
                    "multicast needs an id with a bound or resolved address and nothing else going on (state {:?})",
                    i.state
                ),
            ));
        }
        let Some(dev) = i.dev else {
            return Err(invalid(
                v,
                "the id is not bound to a device (bind to a device's address or resolve one first)",
            ));
        };
        let ip = attr.addr.ip();
        if !ip.is_multicast() {
            return Err(invalid(
                v,
                format!("{ip} is not an IP multicast address (224.0.0.0/4, ff00::/8)"),
            ));
        }
        if i.joins.iter().any(|j| j.addr == ip) {
            return Err(Error::from_errno(
                v,
                EADDRINUSE,
                format!("the id already joined {ip}"),
            ));
        }
        let link = self.device(dev).profile.port.link_layer;
        let mgid = mcast_mgid(ip, i.ps, link);
        let mlid = match self.cm.groups.get_mut(&mgid.0) {
            Some(g) => {
                g.members += 1;
                g.mlid
            }
            None => {
                let mlid = self
                    .cm_alloc_mlid()
                    .ok_or_else(|| Error::from_errno(v, ENOMEM, "every multicast LID is in use"))?;
                self.cm.groups.insert(mgid.0, McGroup { mlid, members: 1 });
                mlid
            }
        };
        self.cm.join_seq += 1;
        let serial = self.cm.join_seq;
        self.cm_id_mut(id, v)?.joins.push(McJoin {
            serial,
            addr: ip,
            context,
            flags: attr.join_flags,
            mgid,
            mlid,
            attached: None,
        });
        let t = self.config.cm.mcast_join_ns;
        self.cm_schedule(t, Action::McJoined { id, serial });
        Ok(())
    }

    /// A free MLID, from [`MLID_FIRST`] upward (wrapping), deterministic.
    fn cm_alloc_mlid(&mut self) -> Option<u16> {
        let span = u32::from(MLID_LAST - MLID_FIRST) + 1;
        for _ in 0..span {
            let m = if (MLID_FIRST..=MLID_LAST).contains(&self.cm.next_mlid) {
                self.cm.next_mlid
            } else {
                MLID_FIRST
            };
            self.cm.next_mlid = if m >= MLID_LAST { MLID_FIRST } else { m + 1 };
            if !self.cm.groups.values().any(|g| g.mlid == m) {
                return Some(m);
            }
        }
        None
    }

    /// One join leaves its group (the group goes with its last join).
    fn cm_release_group(&mut self, mgid: &Gid) {
        if let Some(g) = self.cm.groups.get_mut(&mgid.0) {
            g.members = g.members.saturating_sub(1);
            if g.members == 0 {
                self.cm.groups.remove(&mgid.0);
            }
        }
    }

    /// `rdma_leave_multicast`: `EADDRNOTAVAIL` for a group the id did not
    /// join; detaches the QP, forgets the join and drops its events not yet
    /// fetched (none is delivered after this returns).
    pub fn rdma_leave_multicast(&mut self, id: CmIdHandle, addr: SocketAddr) -> Result<()> {
        let v = Verb::RdmaLeaveMulticast;
        let i = self.cm_id(id, v)?;
        let ip = addr.ip();
        let Some(pos) = i.joins.iter().position(|j| j.addr == ip) else {
            return Err(Error::from_errno(
                v,
                EADDRNOTAVAIL,
                format!("the id has not joined {ip}"),
            ));
        };
        let ch = i.channel;
        let j = self.cm_id_mut(id, v)?.joins.remove(pos);
        if let Some(qp) = j.attached {
            // librdmacm ignores the result of this detach.
            let _ = self.detach_mcast(qp, &j.mgid, j.mlid);
        }
        self.cm_release_group(&j.mgid);
        if let Some(c) = self.cm.channels.get_mut(ch.index, ch.generation) {
            c.events
                .retain(|e| e.mc.as_ref().is_none_or(|m| m.serial != j.serial));
        }
        Ok(())
    }

    /// The joins of an id that goes away release their groups (the
    /// kernel leaves them with the id).
    pub(super) fn cm_forget_joins(&mut self, joins: Vec<McJoin>) {
        for j in joins {
            if let Some(qp) = j.attached {
                let _ = self.detach_mcast(qp, &j.mgid, j.mlid);
            }
            self.cm_release_group(&j.mgid);
        }
    }

    /// The SA answered join `serial` of `id`: `MULTICAST_JOIN` with the
    /// group's UD parameters (or `MULTICAST_ERROR` when the device's link
    /// is down); nothing if the id left meanwhile.
    pub(super) fn cm_mc_joined(&mut self, id: CmIdHandle, serial: u64) {
        let Some(i) = self.cm.ids.get(id.index, id.generation) else {
            return;
        };
        let Some(j) = i.joins.iter().find(|j| j.serial == serial) else {
            return;
        };
        let dev = i.dev.unwrap_or(0);
        let qkey = RDMA_UDP_QKEY;
        let link = self.device(dev).profile.port.link_layer;
        let ud = UdParam {
            ah_attr: AhAttr {
                grh: GlobalRoute {
                    dgid: j.mgid,
                    flow_label: 0,
                    sgid_index: u8::from(link == LinkLayer::Ethernet && j.addr.is_ipv4()),
                    hop_limit: 64,
                    traffic_class: 0,
                },
                dlid: j.mlid,
                sl: 0,
                src_path_bits: 0,
                static_rate: 0,
                is_global: true,
                port_num: 1,
            },
            qp_num: MULTICAST_QPN,
            qkey,
        };
        let context = j.context;
        let (event, status) = if self.cm_path_up(dev, dev) {
            (CmEventType::MulticastJoin, 0)
        } else {
            (CmEventType::MulticastError, -ETIMEDOUT)
        };
        self.cm_event(
            id,
            QueuedEvent {
                event,
                id,
                listen_id: None,
                status,
                conn: ConnParam::default(),
                mc: Some(Box::new(McEventInfo {
                    serial,
                    ud,
                    context,
                })),
            },
        );
    }

    /// A `MULTICAST_JOIN` is being fetched: the id's QP (if any, and unless
    /// the join is send-only) is attached to the group now, as librdmacm
    /// does in `rdma_get_cm_event`; a failed attach makes the event
    /// `MULTICAST_ERROR` with its errno.
    pub(super) fn cm_mc_fetched(&mut self, ev: &mut QueuedEvent) {
        if ev.event != CmEventType::MulticastJoin {
            return;
        }
        let Some(serial) = ev.mc.as_ref().map(|m| m.serial) else {
            return;
        };
        let Some(i) = self.cm.ids.get(ev.id.index, ev.id.generation) else {
            return;
        };
        let Some(qp) = i.qp.map(|q| q.qp) else {
            return;
        };
        let Some(pos) = i.joins.iter().position(|j| j.serial == serial) else {
            return;
        };
        let j = &i.joins[pos];
        if j.flags == McJoinFlag::SendOnlyFullMember || j.attached.is_some() {
            return;
        }
        let (mgid, mlid) = (j.mgid, j.mlid);
        match self.attach_mcast(qp, &mgid, mlid) {
            Ok(()) => {
                if let Some(i) = self.cm.ids.get_mut(ev.id.index, ev.id.generation) {
                    i.joins[pos].attached = Some(qp);
                }
            }
            Err(e) => {
                ev.event = CmEventType::MulticastError;
                ev.status = -e.errno();
            }
        }
    }
}
