//! The DC data path: addressing a request, the DCI's connection to one DCT
//! at a time (gate, connect, disconnect, streams) and the DCT responder.

use verbs_api::{QpClass, QpState, Result, SendWr, Verb, WcStatus};

use crate::datapath::RetryCounters;
use crate::fabric::{AckSyndrome, Address, Endpoint, Packet};
use crate::handles::{AhHandle, QpHandle};
use crate::world::queues::Exec;
use crate::world::state::{Gate, RxMsg};
use crate::world::{invalid, World};
use crate::{DcKeyViolation, SimVerbs};

use super::*;

impl World {
    // ------------------------------------------------------------ posting

    /// The DC addressing of one send request: `Some` on a DCI (required
    /// there), `None` elsewhere (refused there).
    pub(crate) fn dc_addressing(
        &self,
        qp: QpHandle,
        wr: &SendWr<'_, SimVerbs>,
    ) -> Result<Option<(AhHandle, u32, u64, u16)>> {
        let v = Verb::PostSend;
        let q = self.qp(qp, v)?;
        if q.class != QpClass::Dci {
            if wr.dc.is_some() {
                return Err(invalid(
                    v,
                    format!("DC addressing on a {} QP, not a DCI", q.class.name()),
                ));
            }
            return Ok(None);
        }
        let Some(dc) = wr.dc.as_ref() else {
            return Err(invalid(
                v,
                "a work request on a DCI needs DC addressing (mlx5dv_wr_set_dc_addr)",
            ));
        };
        self.ah(*dc.ah, v)?;
        Ok(Some((
            *dc.ah,
            dc.remote_dctn & 0xff_ffff,
            dc.remote_dc_key,
            dci_stream(q.dv.streams, dc.stream_id),
        )))
    }

    // ---------------------------------------------------------- requester

    /// Where a DC request goes: its AH resolved on the fabric, at `dctn`.
    pub(super) fn dc_target(&self, ah: Option<AhHandle>, dctn: u32) -> Option<Endpoint> {
        let a = ah.and_then(|h| self.ahs.get(h.index, h.generation))?;
        let addr = if a.attr.is_global {
            Address::Gid(a.attr.grh.dgid)
        } else {
            Address::Lid(a.attr.dlid)
        };
        self.fabric.resolve(&addr).map(|port| Endpoint {
            qpn: dctn,
            device: port.device,
            port: port.port,
        })
    }

    /// The live DCT at `ep` (created, i.e. past INIT->RTR).
    pub(super) fn dct_at(&self, ep: Endpoint) -> Option<QpHandle> {
        let h = self.qp_by_num(u32::from(ep.device.0), ep.qpn)?;
        let q = self.qps.get(h.index, h.generation)?;
        (q.class == QpClass::Dct && q.dv.dct_created).then_some(h)
    }

    /// The transmit loop's DCI step for the request at `send_seq`: flush it
    /// if its stream is in error, wait if it needs another target while
    /// requests are outstanding, else (re)connect and go.
    pub(crate) fn dc_gate(&mut self, qp: QpHandle) -> Gate {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return Gate::Go;
        };
        if q.class != QpClass::Dci {
            return Gate::Go;
        }
        let seq = q.tx.send_seq;
        if seq >= q.sq.tail
            || q.tx.blocked
            || q.tx.rnr_wait
            || q.phase.state() != QpState::ReadyToSend
        {
            return Gate::Go;
        }
        let w = *q.sq.wqe(seq);
        if w.exec == Exec::Failed(WcStatus::WrFlushErr) {
            // Flushed before a go-back-N rewind: not sent again.
            let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
            q.tx.send_seq = seq + 1;
            return Gate::Again;
        }
        if q.dv.errored & (1u32 << (w.stream & 31)) != 0 {
            let q = self.qps.get_mut(qp.index, qp.generation).expect("live");
            let wm = q.sq.get_mut(seq);
            wm.exec = Exec::Failed(WcStatus::WrFlushErr);
            wm.checked = true;
            q.tx.send_seq = seq + 1;
            self.complete_sq(qp);
            return Gate::Again;
        }
        // An unresolvable AH goes nowhere: the fabric drops it, the DCI
        // times out (RETRY_EXC_ERR) as for an unreachable RC peer.
        let target = self.dc_target(w.ah, w.remote_qpn).unwrap_or(Endpoint {
            qpn: w.remote_qpn,
            device: crate::fabric::DeviceIndex(u16::MAX),
            port: 1,
        });
        let q = self.qps.get(qp.index, qp.generation).expect("live");
        if q.dv.connected && q.tx.dest == target {
            return Gate::Go;
        }
        if q.tx.send_seq > q.sq.done {
            return Gate::Stop;
        }
        self.dc_disconnect(qp);
        self.dc_connect(qp, target);
        Gate::Go
    }

    /// The DCI connects to `target`: the DCT (if there is one) gets fresh
    /// responder state for it, expecting the DCI's next PSN.
    pub(super) fn dc_connect(&mut self, qp: QpHandle, target: Endpoint) {
        let dct = self.dct_at(target);
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        q.dv.connected = true;
        q.tx.dest = target;
        let epsn = q.tx.next_psn;
        let c = self.dc.conns.entry(qp.index).or_default();
        c.dct = dct.map(|d| d.index);
        c.epsn = epsn;
        c.nak_sent = false;
        c.msg = RxMsg::default();
        c.srq_num_sge = 0;
    }

    /// The DCI leaves its current target (the DCT forgets it).
    pub(crate) fn dc_disconnect(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        if !core::mem::take(&mut q.dv.connected) {
            return;
        }
        let src = q.tx.src;
        let dct = self.dc.conns.get_mut(&qp.index).and_then(|c| c.dct.take());
        if let Some(d) = dct {
            self.dc.ooo.remove(&(d, src.device.0, src.qpn));
        }
    }

    /// A failed request of a DCI with streams: only its stream enters error
    /// (true: the DCI stays in service) unless `2^log_num_errored` distinct
    /// streams are then in error (false: the DCI goes to ERR as usual).
    pub(crate) fn dci_stream_absorbs(
        &mut self,
        qp: QpHandle,
        stream: u16,
        status: WcStatus,
    ) -> bool {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return false;
        };
        let Some(s) = q.dv.streams else {
            return false;
        };
        if q.class != QpClass::Dci {
            return false;
        }
        let bit = 1u32 << (stream & 31);
        if q.dv.errored & bit != 0 && status == WcStatus::WrFlushErr {
            return true;
        }
        q.dv.errored |= bit;
        if q.dv.errored.count_ones() >= 1u32 << s.log_num_errored {
            return false;
        }
        // Only this stream is in error: what was sent after the failure is
        // sent again on a fresh connection, the others go on.
        let req = q.phase.parts().2.unwrap_or_default();
        for seq in q.sq.done..q.tx.send_seq {
            let w = q.sq.get_mut(seq);
            if matches!(w.exec, Exec::Sent | Exec::Done) {
                w.exec = Exec::Queued;
            }
            w.received = 0;
        }
        q.tx.send_seq = q.sq.done;
        q.tx.blocked = false;
        q.tx.rd_atomic = 0;
        q.tx.retry = RetryCounters::new(req.retry_cnt, req.rnr_retry);
        self.dc_disconnect(qp);
        self.kick(qp);
        true
    }

    /// The DC side of a state change (after the executor's).
    pub(crate) fn dc_on_state(&mut self, qp: QpHandle, from: QpState, to: QpState) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        match q.class {
            QpClass::Dct if to == QpState::ReadyToReceive && from == QpState::Init => {
                q.dv.dct_created = true;
            }
            QpClass::Dci if from != to => {
                if to == QpState::Reset {
                    q.dv.errored = 0;
                }
                if matches!(
                    to,
                    QpState::Reset | QpState::Error | QpState::ReadyToReceive
                ) {
                    self.dc_disconnect(qp);
                }
            }
            _ => {}
        }
    }

    /// Before a QP is destroyed: its DC connections go.
    pub(crate) fn dc_on_destroy(&mut self, qp: QpHandle) {
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return;
        };
        match q.class {
            QpClass::Dci => {
                self.dc_disconnect(qp);
                self.dc.conns.remove(&qp.index);
            }
            QpClass::Dct => {
                // The DCIs still connected to it lose their responder state
                // (their requests then find no connection).
                for c in self.dc.conns.values_mut() {
                    if c.dct == Some(qp.index) {
                        c.dct = None;
                    }
                }
                self.dc.ooo.retain(|k| k.0 != qp.index);
            }
            _ => self.dc.ooo.retain(|k| k.0 != qp.index),
        }
    }

    // ---------------------------------------------------------- responder

    /// A request from a DCI at a DCT: the DC key, then the RC responder with
    /// the DCT's state for that DCI swapped in.
    pub(crate) fn dct_receive(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) {
        let s = self.qps.get(req.index, req.generation).expect("live");
        let key = s.sq.wqe(p.cookie).dc_key;
        let r = self.qps.get(rq.index, rq.generation).expect("live");
        if key != r.dv.dct_key {
            self.dc.key_violations += 1;
            match self.config.dc_key_violation {
                DcKeyViolation::SilentDrop => self.discard(p, "DC key violation"),
                DcKeyViolation::NakRemoteAccess => {
                    self.discard(p, "DC key violation");
                    self.send_ack(p, AckSyndrome::RemoteAccessError, p.psn, 0);
                }
            }
            return;
        }
        if !self.swap_conn(rq, req) {
            self.discard(p, "no DC connection from this DCI");
            return;
        }
        self.rc_receive(rq, req, p);
        self.swap_conn(rq, req);
    }

    /// Exchanges the DCT's responder state with that of its connection
    /// from the DCI `req` (false: `req` is not connected to `rq`).
    pub(super) fn swap_conn(&mut self, rq: QpHandle, req: QpHandle) -> bool {
        let Self { dc, qps, .. } = self;
        let (Some(c), Some(r)) = (
            dc.conns.get_mut(&req.index),
            qps.get_mut(rq.index, rq.generation),
        ) else {
            return false;
        };
        if c.dct != Some(rq.index) {
            return false;
        }
        core::mem::swap(&mut c.epsn, &mut r.rx.epsn);
        core::mem::swap(&mut c.nak_sent, &mut r.rx.nak_sent);
        core::mem::swap(&mut c.msg, &mut r.rx.msg);
        core::mem::swap(&mut c.srq_sges, &mut r.rx.srq_sges);
        core::mem::swap(&mut c.srq_num_sge, &mut r.rx.srq_num_sge);
        true
    }

    /// `MLX5DV_QP_CREATE_OOO_DP` on one side only (§5.1 "must be set on both
    /// sides"): the responder refuses the request with an Invalid Request
    /// NAK before touching memory or receive WQEs; the requester completes
    /// Whether the QP was created with `MLX5DV_QP_CREATE_OOO_DP` (its data
    /// may be placed out of order; `ibv_query_qp_data_in_order` says 0).
    pub fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool> {
        Ok(self.qp(qp, Verb::QueryQp)?.dv.ooo)
    }

    /// it with `IBV_WC_REM_INV_REQ_ERR`. True when refused.
    pub(crate) fn ooo_mismatch(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) -> bool {
        let (Some(r), Some(s)) = (
            self.qps.get(rq.index, rq.generation),
            self.qps.get(req.index, req.generation),
        ) else {
            return false;
        };
        if r.dv.ooo == s.dv.ooo {
            return false;
        }
        let reliable = crate::world::state::transport_of(r.class).is_reliable();
        self.discard(p, "OOO_DP set on one side only");
        if reliable {
            self.send_ack(p, AckSyndrome::InvalidRequest, p.psn, 0);
        }
        true
    }
}
