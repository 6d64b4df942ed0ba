//! Queue pairs: the object, its phase (R6), creation with capability
//! rounding, query, destroy, multicast attachment. Creation is in
//! [`create`], the capability rounding it applies in [`caps`].

use verbs_api::{
    Gid, QpAttr, QpAttrMask, QpCap, QpClass, QpCreateFlags, QpInitInfo, QpState, QpType, Result,
    Verb,
};

use super::queues::{RecvWqe, Ring, SendWqe};
use super::state::{AltPath, QpPhase, QueueKind};
use super::{busy, invalid, no_mem, World};
use crate::handles::*;
use crate::profile::DriverModel;
use crate::trace::TraceEvent;

mod caps;
mod create;

use caps::*;

/// The multicast groups a UD QP is attached to: out of line, since most
/// QPs never attach one (8 bytes in the QP instead of a `Vec`'s 24).
/// (A boxed `Vec`, deliberately: a thin pointer, where a `Vec` or a boxed
/// slice would be 24 or 16 bytes in every QP.)
#[derive(Debug, Default)]
#[allow(clippy::box_collection)]
pub(crate) struct McastList(Option<Box<Vec<(Gid, u16)>>>);

impl McastList {
    fn groups(&self) -> &[(Gid, u16)] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    pub(crate) fn len(&self) -> usize {
        self.groups().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.groups().is_empty()
    }

    pub(crate) fn iter(&self) -> core::slice::Iter<'_, (Gid, u16)> {
        self.groups().iter()
    }

    fn push(&mut self, gid: Gid, lid: u16) {
        self.0.get_or_insert_with(Box::default).push((gid, lid));
    }

    fn remove(&mut self, pos: usize) {
        if let Some(v) = self.0.as_deref_mut() {
            v.remove(pos);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }

    /// Heap bytes the list owns.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.0.as_deref().map_or(0, |v| {
            size_of::<Vec<(Gid, u16)>>() + v.capacity() * size_of::<(Gid, u16)>()
        })
    }
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) ctx: ContextHandle,
    pub(crate) device: u32,
    pub(crate) pd: Option<PdHandle>,
    pub(crate) send_cq: Option<CqHandle>,
    pub(crate) recv_cq: Option<CqHandle>,
    pub(crate) srq: Option<SrqHandle>,
    pub(crate) qp_type: QpType,
    pub(crate) class: QpClass,
    pub(crate) qp_num: u32,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
    pub(crate) qp_context: u64,
    #[allow(dead_code)] // read by the data path (e.g. BLOCK_SELF_MCAST_LB)
    pub(crate) create_flags: QpCreateFlags,
    pub(crate) phase: QpPhase,
    /// The alternate path of the phase's [`Path`](super::state::Path) (`None` whenever the
    /// phase has no path; [`World::set_state`] clears it).
    pub(crate) alt: Option<Box<AltPath>>,
    pub(crate) mcast: McastList,
    pub(crate) sq: Ring<SendWqe>,
    pub(crate) rq: Ring<RecvWqe>,
    /// Requester execution state.
    pub(crate) tx: super::state::Tx,
    /// Responder execution state.
    pub(crate) rx: super::state::Rx,
    /// mlx5dv attributes: DC role, DC key, DCI streams, OOO (`world/dc.rs`).
    pub(crate) dv: super::state::DvQp,
}

impl World {
    /// `qp->qp_num`.
    pub fn qp_num(&self, qp: QpHandle) -> Result<u32> {
        let q = self.qp(qp, Verb::QueryQp)?;
        // A DCT gets its number at INIT->RTR (dc-and-mlx5dv.md §2.2).
        Ok(if q.class == QpClass::Dct && !q.dv.dct_created {
            0
        } else {
            q.qp_num
        })
    }

    /// The QP's current state (authoritative; what `ibv_query_qp` reports).
    pub fn qp_state(&self, qp: QpHandle) -> Result<QpState> {
        Ok(self.qp(qp, Verb::QueryQp)?.phase.state())
    }

    /// `ibv_query_qp`: every attribute set so far (0 for never-set ones) and
    /// the creation attributes with the actual capabilities. `mask` is a
    /// hint, as in C: everything is returned.
    pub fn query_qp(&self, qp: QpHandle, _mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        let q = self.qp(qp, Verb::QueryQp)?;
        let state = q.phase.state();
        if q.class == QpClass::Dct && state != QpState::ReadyToReceive {
            // mlx5_query_qp: a DCT is queried only once created (RTR).
            return Err(invalid(
                Verb::QueryQp,
                format!("ibv_query_qp on a DCT in {state}: only RTR can be queried"),
            ));
        }
        let mut a = QpAttr {
            qp_state: state,
            cur_qp_state: state,
            cap: q.cap,
            ..QpAttr::default()
        };
        let (bound, path, req) = q.phase.parts();
        if let Some(b) = bound {
            a.port_num = b.port_num;
            a.pkey_index = b.pkey_index;
            a.qkey = b.qkey;
            a.qp_access_flags = b.access;
        }
        if let Some(p) = path {
            a.ah_attr = p.ah;
            a.path_mtu = p.path_mtu;
            a.dest_qp_num = p.dest_qpn;
            a.rq_psn = p.rq_psn;
            a.max_dest_rd_atomic = p.max_dest_rd_atomic;
            a.min_rnr_timer = p.min_rnr_timer;
            a.path_mig_state = p.path_mig_state;
            if let Some(alt) = q.alt.as_deref() {
                a.alt_ah_attr = alt.ah;
                a.alt_pkey_index = alt.pkey_index;
                a.alt_port_num = alt.port_num;
                a.alt_timeout = alt.timeout;
            }
        }
        if let Some(r) = req {
            a.sq_psn = r.sq_psn;
            a.timeout = r.timeout;
            a.retry_cnt = r.retry_cnt;
            a.rnr_retry = r.rnr_retry;
            a.max_rd_atomic = r.max_rd_atomic;
            a.rate_limit = r.rate_limit;
            a.en_sqd_async_notify = u8::from(r.en_sqd_async_notify);
        }
        if let QpPhase::SendQueueDrain(.., draining) = q.phase {
            a.sq_draining = u8::from(draining);
        }
        let info = QpInitInfo {
            qp_type: q.qp_type,
            cap: q.cap,
            sq_sig_all: q.sq_sig_all,
            qp_context: q.qp_context,
            has_srq: q.srq.is_some(),
        };
        Ok((a, info))
    }

    /// `ibv_destroy_qp`: `EBUSY` while attached to a multicast group.
    /// Outstanding work requests are dropped without completions; on mlx5
    /// the QP's unpolled CQEs are removed from its CQs (`mlx5_destroy_qp`).
    ///
    /// # Divergence from hardware
    /// Unacknowledged async events of the QP do not block the destroy.
    pub fn destroy_qp(&mut self, qp: QpHandle) -> Result<()> {
        let v = Verb::DestroyQp;
        let q = self.qp(qp, v)?;
        if !q.mcast.is_empty() {
            return Err(busy(
                v,
                format!(
                    "the QP is still attached to {} multicast groups",
                    q.mcast.len()
                ),
            ));
        }
        let (ctx, device, qpn, pd, send_cq, recv_cq, srq) =
            (q.ctx, q.device, q.qp_num, q.pd, q.send_cq, q.recv_cq, q.srq);
        self.exec_on_destroy(qp);
        self.dc_on_destroy(qp);
        self.discard_queues(qp);
        if self.device(device).profile.driver == DriverModel::Mlx5 {
            for cq in [send_cq, recv_cq].into_iter().flatten() {
                self.clean_cq(cq, qp);
            }
        }
        self.ext_on_destroy_qp(qp);
        self.qps.remove(qp.index, qp.generation);
        self.drop_async_events_of(super::AsyncSubject::Qp(qp));
        self.free_qpn(device, qpn);
        self.devices[device as usize].qp_count -= 1;
        if let Some(pd) = pd {
            if let Ok(p) = self.pd_mut(pd, v) {
                p.users -= 1;
            }
        }
        for cq in [send_cq, recv_cq].into_iter().flatten() {
            if let Ok(c) = self.cq_mut(cq, v) {
                c.users -= 1;
            }
        }
        if let Some(s) = srq {
            if let Ok(s) = self.srq_mut(s, v) {
                s.users -= 1;
            }
        }
        if let Ok(c) = self.ctx_mut(ctx, v) {
            c.children -= 1;
        }
        self.record(TraceEvent::QpDestroyed { device, qpn });
        Ok(())
    }

    /// Drops every posted request of both queues without completions and
    /// unpins their MRs (entering RESET, destroy).
    pub(crate) fn discard_queues(&mut self, qp: QpHandle) {
        for queue in [QueueKind::Send, QueueKind::Recv] {
            let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                return;
            };
            let range = match queue {
                QueueKind::Send => {
                    let r = q.sq.head..q.sq.tail;
                    q.sq.done = q.sq.tail;
                    r
                }
                QueueKind::Recv => {
                    let r = q.rq.head..q.rq.tail;
                    q.rq.done = q.rq.tail;
                    r
                }
                QueueKind::Srq(_) => continue,
            };
            if let Some(last) = range.end.checked_sub(1) {
                if range.start <= last {
                    self.release_wqes(qp, queue, last);
                }
            }
        }
    }

    /// `ibv_attach_mcast`: UD QPs only; the GID must be multicast (ff00::/8);
    /// on InfiniBand the LID must be a multicast LID (0xc000..0xfffe).
    /// Attaching twice to the same group succeeds once (K-UVERBS).
    pub fn attach_mcast(&mut self, qp: QpHandle, gid: &Gid, lid: u16) -> Result<()> {
        let v = Verb::AttachMcast;
        let q = self.qp(qp, v)?;
        self.check_mcast(q, gid, lid, v)?;
        if q.mcast.iter().any(|(g, l)| g == gid && *l == lid) {
            return Ok(());
        }
        let max = self.device(q.device).profile.attr.max_mcast_qp_attach as usize;
        if q.mcast.len() >= max {
            return Err(no_mem(
                v,
                format!("the QP is already attached to max_mcast_qp_attach = {max} groups"),
            ));
        }
        self.qp_mut(qp, v)?.mcast.push(*gid, lid);
        Ok(())
    }

    /// `ibv_detach_mcast`: `EINVAL` for a group the QP is not attached to.
    pub fn detach_mcast(&mut self, qp: QpHandle, gid: &Gid, lid: u16) -> Result<()> {
        let v = Verb::DetachMcast;
        let q = self.qp_mut(qp, v)?;
        let Some(pos) = q.mcast.iter().position(|(g, l)| g == gid && *l == lid) else {
            return Err(invalid(
                v,
                format!("the QP is not attached to group {gid} lid {lid:#x}"),
            ));
        };
        q.mcast.remove(pos);
        Ok(())
    }

    fn check_mcast(&self, q: &Qp, gid: &Gid, lid: u16, v: Verb) -> Result<()> {
        if q.qp_type != QpType::Ud {
            return Err(invalid(
                v,
                format!("multicast needs a UD QP, not {}", q.qp_type),
            ));
        }
        if gid.0[0] != 0xff {
            return Err(invalid(v, format!("{gid} is not a multicast GID")));
        }
        let p = &self.device(q.device).profile;
        if p.port.link_layer == verbs_api::LinkLayer::Infiniband && !(0xc000..0xffff).contains(&lid)
        {
            return Err(invalid(
                v,
                format!("lid {lid:#x} is not a multicast LID (0xc000..0xfffe)"),
            ));
        }
        Ok(())
    }
}
