//! The common single-packet RC RDMA WRITE at its responder, in one step
//! (issue #16: a cheaper event for the common WRITE).
//!
//! A plain `RDMA_WRITE` that fits in one packet (`Opcode::RdmaWrite(Only)`)
//! arriving in order at a plain RC QP does what the general path
//! (`begin_message`, `place`, `end_message` in `receive.rs`) would do, in
//! the same order and with the same trace: the rkey check, the copy and its
//! `Placement` record, the expected PSN advanced, no message left in
//! progress. Anything else (WRITE with immediate, ATOMIC_WRITE, FLUSH, a
//! refused rkey, XRC, DC) is left to the general path, which then decides
//! as before: this path changes nothing before it returns false.

use super::*;
use crate::fabric::SegmentPosition;

impl World {
    /// Handles `p`, an in-order `RdmaWrite(Only)` at `rq` from `req`, and
    /// returns true; or returns false having changed nothing.
    pub(super) fn rc_write_only(&mut self, rq: QpHandle, req: QpHandle, p: &Packet) -> bool {
        debug_assert_eq!(p.opcode, Opcode::RdmaWrite(SegmentPosition::Only));
        let (Some(r), Some(s)) = (
            self.qps.get(rq.index, rq.generation),
            self.qps.get(req.index, req.generation),
        ) else {
            return false;
        };
        if r.class != QpClass::Rc {
            return false;
        }
        let device = r.device;
        let w = s.sq.get(p.cookie).0;
        // A memory window's rkey takes the general path (`check_rkey`).
        if w.opcode != WrOpcode::RdmaWrite || self.is_mw_key(w.rdma.rkey) {
            return false;
        }
        let request = RemoteRequest {
            op: RemoteOp::Write,
            remote_addr: w.rdma.remote_addr,
            rkey: w.rdma.rkey,
            len: w.length,
        };
        // `check_rkey` for an MR's rkey, with the responder view built
        // from `r` at hand (a plain RC QP: its own responder resources).
        let responder = ResponderView {
            qp_access_flags: r.phase.bound().map_or(AccessFlags::empty(), |b| b.access),
            pd: r.pd.map_or(u32::MAX, |p| p.index),
            max_dest_rd_atomic: r.phase.path().map_or(0, |p| p.max_dest_rd_atomic),
        };
        let mr = DevMrs {
            mrs: &self.mrs,
            device,
        }
        .by_rkey(request.rkey);
        let Ok(off) = check_remote(&request, mr, &responder) else {
            return false;
        };
        let (mr, base) = (request.rkey >> 8, off);
        // What `begin_message` starts and `end_message` ends: nothing is
        // left in progress.
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.msg = RxMsg::default();
        let (off, len) = (p.offset, p.payload_len);
        if len > 0 {
            let dst = [Extent {
                mr,
                off: (base + u64::from(off)) as usize,
                len: len as usize,
            }];
            self.copy_from_request(req, p.cookie, off, len, &dst);
            self.record(TraceEvent::Placement {
                device,
                qpn: p.destination.qpn,
                offset: off,
                len,
            });
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.epsn = p.psn.next();
        true
    }

    /// Acknowledges `p`, accepted at `rq`, if it asks for an ACK and `rq`
    /// is not in ERR (as the general path does after a SEND/WRITE packet).
    #[inline]
    pub(super) fn ack_if_asked(&mut self, rq: QpHandle, p: &Packet) {
        if p.flags.contains(PacketFlags::ACK_REQUEST)
            && self
                .qps
                .get(rq.index, rq.generation)
                .is_some_and(|r| r.phase.state() != QpState::Error)
        {
            self.send_ack(p, AckSyndrome::Ack, p.psn, 0);
        }
    }
}
