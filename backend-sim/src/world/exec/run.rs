//! Runs of packets: the in-order middle packets of one RC SEND or RDMA
//! WRITE handled as one step of the event loop instead of one event each
//! (issue #16 item 1: no per-packet work for in-order packets of one
//! message when nothing else can happen in between).
//!
//! After the event loop has handled the first or a middle packet of such a
//! message, [`World::absorb_run`] looks at the next event due. While it is
//! the next packet of the same message (same endpoints, work request, PSN
//! and offset), waiting in its port's arrival FIFO with both links up,
//! within the loop's horizon and event budget, and the loop's stop
//! condition still false, nothing else can come first: no other event is
//! due before it, no input can arrive in the middle of a loop, and the
//! packet itself changes nothing but the expected PSN and the bytes it
//! places. So the packet is taken straight from the FIFO (counted and
//! traced as delivered, at its own time), its placement is traced, and its
//! bytes join one copy for the whole run. Rules, delays, reordering, link
//! changes, timers and other traffic all put another event first (or take
//! the packet out of the FIFO), which ends the run: the general path then
//! handles what follows, packet by packet.
//!
//! The run's copy is one copy only when that equals the packets' copies in
//! turn: the gather and scatter lists resolve for the whole range, and no
//! MR is both read and written or lies over the caller's memory (pieces
//! that may overlap are copied piece by piece, in packet order, as the
//! general path would).

use super::*;
use crate::fabric::SegmentPosition;

impl World {
    /// Called by the event loop right after it handled `p`: absorbs the
    /// run of packets that follows it, as described in the module
    /// documentation. Returns how many packets it took (each counts as one
    /// event against the loop's `budget`, which is what is left of it).
    #[inline(never)]
    pub(super) fn absorb_run(
        &mut self,
        p: &Packet,
        horizon: Option<u64>,
        budget: u64,
        stop: &mut impl FnMut(&Self) -> bool,
    ) -> u64 {
        let write = match p.opcode {
            Opcode::Send(_) => false,
            Opcode::RdmaWrite(_) => true,
            _ => return 0,
        };
        let seg = p.payload_len;
        // Only after the event placed `p` in order, mid-message, at its
        // destination (not after a duplicate, a stale or refused packet),
        // or accepted it out of order without completing its message.
        let Some((rq, psn)) = self.run_from.take() else {
            return 0;
        };
        if budget == 0 || seg == 0 || psn != p.psn || self.qp_at(p.destination) != Some(rq) {
            return 0;
        }
        let Some(req) = self.qp_at(p.source) else {
            return 0;
        };
        let (Some(r), Some(s)) = (
            self.qps.get(rq.index, rq.generation),
            self.qps.get(req.index, req.generation),
        ) else {
            return 0;
        };
        if r.dv.ooo {
            return self.absorb_ooo_run(p, rq, req, horizon, budget, stop);
        }
        // Plain RC at both ends (XRC, DC, UC and OOO_DP take the general
        // path), `p` accepted in order, its message still being received.
        let start = p.offset + seg;
        let msg = r.rx.msg;
        if matches!(p.opcode, Opcode::Send(pos) | Opcode::RdmaWrite(pos) if pos.ends_message())
            || r.class != QpClass::Rc
            || s.class != QpClass::Rc
            || r.dv.ooo
            || s.dv.ooo
            || !receives(r.phase.state(), Transport::Rc)
            || !msg.active
            || r.rx.epsn != p.psn.next()
            || start >= msg.byte_len
            || p.cookie < s.sq.done
            || p.cookie >= s.tx.send_seq
        {
            return 0;
        }
        let device = r.device;
        // Each packet of the run must place (and be traced as placed) as
        // the general path would: true when the rest of the message lands.
        if !self.lands(rq, write, start, msg.byte_len - start) {
            return 0;
        }
        let limit = SimInstant::from_nanos(horizon.unwrap_or(u64::MAX));
        let (src, dst, cookie) = (p.source, p.destination, p.cookie);
        let (mut psn, mut end, mut n) = (p.psn.next(), start, 0u64);
        while n < budget && !stop(self) {
            let Self {
                fabric,
                trace,
                drops,
                ..
            } = self;
            let (want_psn, want_off) = (psn, end);
            let taken = fabric.take_delivery_if(
                limit,
                |q| {
                    q.source == src
                        && q.destination == dst
                        && q.cookie == cookie
                        && q.psn == want_psn
                        && q.offset == want_off
                        && q.payload_len == seg
                        && !q.flags.contains(PacketFlags::ACK_REQUEST)
                        && q.opcode
                            == if write {
                                Opcode::RdmaWrite(SegmentPosition::Middle)
                            } else {
                                Opcode::Send(SegmentPosition::Middle)
                            }
                },
                &mut Sink { trace, drops },
            );
            let Some((at, q)) = taken else {
                break;
            };
            n += 1;
            self.now_ns = self.now_ns.max(at.as_nanos());
            self.record(TraceEvent::Placement {
                device,
                qpn: q.destination.qpn,
                offset: q.offset,
                len: q.payload_len,
            });
            psn = psn.next();
            end += seg;
        }
        if n == 0 {
            return 0;
        }
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.rx.epsn = psn;
        r.rx.nak_sent = false;
        if !self.place_run(rq, req, cookie, start, end - start, write) {
            for k in 0..n as u32 {
                self.place_range(rq, req, cookie, start + k * seg, seg, write);
            }
        }
        n
    }

    /// True when bytes `[off, off + len)` of the message `rq` is receiving
    /// land somewhere (so every piece of them does).
    fn lands(&self, rq: QpHandle, write: bool, off: u32, len: u32) -> bool {
        let Some(r) = self.qps.get(rq.index, rq.generation) else {
            return false;
        };
        if write {
            return r.rx.msg.write.is_some();
        }
        let Some(recv) = r.rx.msg.recv else {
            return false;
        };
        let mut scratch = [Extent::default(); EXTENTS_MAX];
        self.recv_extents(rq, recv, off, len, &mut scratch)
            .is_some()
    }

    /// Copies `[off, off + len)` of request `cookie`'s message to where it
    /// lands at `rq` as one copy, when that equals copying its packets in
    /// turn (module documentation); false, copying nothing, otherwise.
    fn place_run(
        &mut self,
        rq: QpHandle,
        req: QpHandle,
        cookie: u64,
        off: u32,
        len: u32,
        write: bool,
    ) -> bool {
        let mut src = [Extent::default(); EXTENTS_MAX];
        let mut dst = [Extent::default(); EXTENTS_MAX];
        let Some((ns, nd)) = self.run_extents(rq, req, cookie, off, len, write, &mut src, &mut dst)
        else {
            return false;
        };
        // Memory that could not be read: placed piece by piece instead,
        // where the message learns it.
        copy_extents(&mut self.mrs, &src[..ns], &dst[..nd])
    }

    /// The source and destination pieces of [`World::place_run`]'s copy
    /// (counts in `src` and `dst`), or `None` when that copy would not
    /// equal the packets' copies in turn.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_extents(
        &self,
        rq: QpHandle,
        req: QpHandle,
        cookie: u64,
        off: u32,
        len: u32,
        write: bool,
        src: &mut [Extent; EXTENTS_MAX],
        dst: &mut [Extent; EXTENTS_MAX],
    ) -> Option<(usize, usize)> {
        let r = self.qps.get(rq.index, rq.generation)?;
        let msg = r.rx.msg;
        let nd = if write {
            let (mr, base) = msg.write?;
            dst[0] = Extent {
                mr,
                off: (base + u64::from(off)) as usize,
                len: len as usize,
            };
            1
        } else {
            self.recv_extents(rq, msg.recv?, off, len, dst)?
        };
        let s = self.qps.get(req.index, req.generation)?;
        let (w, sges, _) = s.sq.get(cookie);
        if w.send_flags.contains(SendFlags::INLINE) {
            return None;
        }
        let ns = extents(
            &sges[..w.num_sge as usize],
            &self.mrs,
            s.device,
            u64::from(off),
            u64::from(len),
            src,
        )?;
        let (srcs, dsts) = (&src[..ns], &dst[..nd]);
        let external = |e: &Extent| {
            self.mrs
                .get_by_index(e.mr)
                .is_none_or(|(_, m)| m.bytes.is_external())
        };
        if srcs.iter().any(|a| dsts.iter().any(|b| a.mr == b.mr))
            || srcs.iter().chain(dsts).any(external)
        {
            return None;
        }
        Some((ns, nd))
    }
}
