//! UD multicast on the simulated fabric (docs/rdma-cm.md, "Multicast"): a
//! UD SEND to QPN `0xFFFFFF` through an address handle naming a multicast
//! group (a GRH with an `ff00::/8` MGID, or a multicast LID without one)
//! leaves as one packet addressed to the sender's own port; when it
//! arrives, every QP of the world attached to the group (`ibv_attach_mcast`,
//! or the CM's join) receives a copy at that instant, in QP handle order.
//! The sender's own QP is among them when attached, unless it was created
//! with `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB` or `CmConfig::mcast_self_loopback`
//! is off. Members whose port is down receive nothing.

use super::*;
use crate::fabric::PortRef;
use crate::handles::AhHandle;
use verbs_api::{Gid, QpCreateFlags, MULTICAST_QPN};

/// The group a multicast request addresses: MGID, MLID, whether by GRH.
#[derive(Clone, Copy, Debug)]
pub(super) struct McastDest {
    gid: Gid,
    lid: u16,
    global: bool,
}

impl World {
    /// The multicast group a UD request to `qpn` through `ah` goes to, if
    /// it is a multicast one.
    pub(super) fn ud_mcast_group(&self, ah: Option<AhHandle>, qpn: u32) -> Option<McastDest> {
        if qpn != MULTICAST_QPN {
            return None;
        }
        let a = ah.and_then(|h| self.ahs.get(h.index, h.generation))?;
        let global = a.attr.is_global;
        let multicast = if global {
            a.attr.grh.dgid.0[0] == 0xff
        } else {
            (0xc000..0xffff).contains(&a.attr.dlid)
        };
        multicast.then_some(McastDest {
            gid: a.attr.grh.dgid,
            lid: a.attr.dlid,
            global,
        })
    }

    /// A multicast SEND reached the group: one copy per attached QP.
    pub(super) fn mcast_deliver(&mut self, req: QpHandle, p: &Packet) {
        let Some(s) = self.qps.get(req.index, req.generation) else {
            return;
        };
        let seq = p.cookie;
        if seq < s.sq.done || seq >= s.tx.send_seq {
            self.discard(p, "stale duplicate");
            return;
        }
        let w = *s.sq.wqe(seq);
        let Some(group) = self.ud_mcast_group(w.ah, w.remote_qpn) else {
            self.discard(p, "not a multicast group");
            return;
        };
        let block_self = !self.config.cm.mcast_self_loopback
            || s.create_flags.contains(QpCreateFlags::BLOCK_SELF_MCAST_LB);
        let members: Vec<(QpHandle, Endpoint)> = self
            .qps
            .iter()
            .filter(|&(_, _, q)| {
                let ethernet = self.device(q.device).profile.port.link_layer == LinkLayer::Ethernet;
                q.mcast.iter().any(|(g, l)| {
                    (!group.global || *g == group.gid) && (ethernet || *l == group.lid)
                })
            })
            .map(|(index, generation, q)| {
                let port = q.phase.parts().0.map_or(1, |b| b.port_num);
                (
                    QpHandle { index, generation },
                    Endpoint {
                        qpn: q.qp_num,
                        device: DeviceIndex(u16::try_from(q.device).unwrap_or(u16::MAX)),
                        port,
                    },
                )
            })
            .collect();
        if members.is_empty() {
            self.discard(p, "no QP attached to the multicast group");
            return;
        }
        for (rq, ep) in members {
            let copy = Packet {
                destination: ep,
                ..*p
            };
            if rq == req && block_self {
                self.discard(&copy, "own multicast blocked");
                continue;
            }
            let up = self
                .fabric
                .link_up(PortRef {
                    device: ep.device,
                    port: ep.port,
                })
                .unwrap_or(false);
            let Some(r) = self.qps.get(rq.index, rq.generation) else {
                continue;
            };
            if !up {
                self.discard(&copy, "member's link down");
                continue;
            }
            if transport_of(r.class) != Transport::Ud || !receives(r.phase.state(), Transport::Ud) {
                self.discard(&copy, "QP not in RTR, RTS or SQD");
                continue;
            }
            self.ud_receive(rq, req, &copy, Some(group.gid));
        }
    }
}
