//! Runs of packets of one out-of-order message (`MLX5DV_QP_CREATE_OOO_DP`
//! between two RC QPs, world/ooo.rs): the counterpart of the in-order runs
//! of world/exec/run.rs.
//!
//! After the event loop has handled a SEND or WRITE packet that an OOO
//! responder accepted without completing its message,
//! [`World::absorb_ooo_run`] takes the packets of the same message that are
//! due next straight from their port's arrival FIFO, whatever their
//! position in the message, under the conditions of world/exec/run.rs
//! (nothing else due before them, links up, within the loop's horizon,
//! budget and stop condition). Each one is what
//! [`World::ooo_receive`] would accept and place without completing the
//! message: a packet of that message not seen yet, in the window, and not
//! the last one missing. It costs one bit operation on the message's
//! window (`OooMsg::mark`) and its traces (delivered,
//! placed, at its own time). The packet that completes the message (its
//! completion, its ACK), a duplicate, one outside the window, anything
//! else ends the run and goes through the general path.
//!
//! Placement: when copying the whole message at once would equal copying
//! its packets in turn (world/exec/run.rs: no MR both read and written, no
//! caller memory, no inline data), the run's packets are placed together
//! once it ends — in packet order (a bit set over the window, no sort),
//! adjacent ones merged, one copy per contiguous range, cut out of the
//! whole message's resolved pieces — which nothing can tell from
//! per-packet copies, as the ranges are disjoint and no event runs in
//! between. Otherwise each
//! packet is placed when taken, as the general path does.

use super::*;
use crate::world::dc::OooMsg;

/// Packets a run collects before placing them (bounds its scratch).
const RANGES_MAX: usize = 64;

impl World {
    /// Called by [`World::absorb_run`] for an OOO responder `rq`: absorbs
    /// the packets of `p`'s message that follow it (module documentation).
    /// Returns how many it took.
    #[inline(never)]
    pub(super) fn absorb_ooo_run(
        &mut self,
        p: &Packet,
        rq: QpHandle,
        req: QpHandle,
        horizon: Option<u64>,
        budget: u64,
        stop: &mut impl FnMut(&Self) -> bool,
    ) -> u64 {
        let write = match p.opcode {
            Opcode::Send(_) => false,
            Opcode::RdmaWrite(_) => true,
            _ => return 0,
        };
        let (Some(r), Some(s)) = (
            self.qps.get(rq.index, rq.generation),
            self.qps.get(req.index, req.generation),
        ) else {
            return 0;
        };
        let cookie = p.cookie;
        if budget == 0
            || r.class != QpClass::Rc
            || s.class != QpClass::Rc
            || !r.dv.ooo
            || !s.dv.ooo
            || !receives(r.phase.state(), Transport::Rc)
            || !r.rx.msg.active
            || cookie < s.sq.done
            || cookie >= s.tx.send_seq
        {
            return 0;
        }
        let w = s.sq.wqe(cookie);
        let (first, npkts) = (Psn::new(w.psn), w.npkts.max(1));
        let (byte_len, device) = (r.rx.msg.byte_len, r.device);
        if r.rx.epsn != first {
            return 0;
        }
        let key = (rq.index, p.source.device.0, p.source.qpn);
        let Some(mut st) = self.dc.ooo.get(&key).copied() else {
            return 0;
        };
        // Deferred placement only when one copy of the whole message would
        // equal its packets' copies (then so does any part of it).
        let mut whole = Whole {
            src: [Extent::default(); EXTENTS_MAX],
            dst: [Extent::default(); EXTENTS_MAX],
            ns: 0,
            nd: 0,
        };
        let together = match self.run_extents(
            rq,
            req,
            cookie,
            0,
            byte_len,
            write,
            &mut whole.src,
            &mut whole.dst,
        ) {
            Some((ns, nd)) => {
                (whole.ns, whole.nd) = (ns, nd);
                true
            }
            None => false,
        };
        let limit = SimInstant::from_nanos(horizon.unwrap_or(u64::MAX));
        let (src, dst) = (p.source, p.destination);
        let mut pending = Pending {
            base: st.base,
            bits: 0,
            slots: [(0, 0); RANGES_MAX],
        };
        let mut n = 0u64;
        while n < budget && !stop(self) {
            let Self {
                fabric,
                trace,
                drops,
                ..
            } = self;
            let taken = fabric.take_delivery_if(
                limit,
                |q| {
                    q.source == src
                        && q.destination == dst
                        && q.cookie == cookie
                        && matches!(
                            (q.opcode, write),
                            (Opcode::RdmaWrite(_), true) | (Opcode::Send(_), false)
                        )
                        && q.payload_len > 0
                        && q.offset
                            .checked_add(q.payload_len)
                            .is_some_and(|end| end <= byte_len)
                        && takes_without_completing(st, q.psn.distance_from(first), npkts)
                },
                &mut Sink { trace, drops },
            );
            let Some((at, q)) = taken else {
                break;
            };
            n += 1;
            self.now_ns = self.now_ns.max(at.as_nanos());
            let idx = q.psn.distance_from(first);
            if together && idx - pending.base >= RANGES_MAX as u32 {
                self.place_pending(&whole, &mut pending);
                pending.base = st.base;
            }
            st.mark(idx);
            if together {
                self.record(TraceEvent::Placement {
                    device,
                    qpn: q.destination.qpn,
                    offset: q.offset,
                    len: q.payload_len,
                });
                let slot = idx - pending.base;
                pending.bits |= 1 << slot;
                pending.slots[slot as usize] = (q.offset, q.payload_len);
            } else {
                self.place(rq, req, &q, write);
            }
        }
        if together {
            self.place_pending(&whole, &mut pending);
        }
        if n > 0 {
            self.dc.ooo.insert(key, st);
        }
        n
    }

    /// Places the pieces taken so far, in packet order, adjacent ones
    /// merged, one copy each (cut out of the whole copy's pieces, not
    /// resolved again); empties `pending`.
    fn place_pending(&mut self, whole: &Whole, pending: &mut Pending) {
        let mut bits = core::mem::take(&mut pending.bits);
        let mut merged: Option<(u32, u32)> = None;
        while bits != 0 {
            let (off, len) = pending.slots[bits.trailing_zeros() as usize];
            bits &= bits - 1;
            merged = match merged {
                Some((o, l)) if o + l == off => Some((o, l + len)),
                Some((o, l)) => {
                    self.copy_part(whole, o, l);
                    Some((off, len))
                }
                None => Some((off, len)),
            };
        }
        if let Some((o, l)) = merged {
            self.copy_part(whole, o, l);
        }
    }

    /// Copies bytes `[off, off + len)` of the copy `whole`, piece by
    /// piece.
    fn copy_part(&mut self, whole: &Whole, off: u32, len: u32) {
        let (src, dst) = (&whole.src[..whole.ns], &whole.dst[..whole.nd]);
        let (mut si, mut so) = locate(src, off as usize);
        let (mut di, mut d_o) = locate(dst, off as usize);
        let mut left = len as usize;
        while left > 0 && si < src.len() && di < dst.len() {
            let (s, d) = (src[si], dst[di]);
            let n = (s.len - so).min(d.len - d_o).min(left);
            copy_extents(
                &mut self.mrs,
                &[Extent {
                    mr: s.mr,
                    off: s.off + so,
                    len: n,
                }],
                &[Extent {
                    mr: d.mr,
                    off: d.off + d_o,
                    len: n,
                }],
            );
            left -= n;
            so += n;
            d_o += n;
            if so == s.len {
                (si, so) = (si + 1, 0);
            }
            if d_o == d.len {
                (di, d_o) = (di + 1, 0);
            }
        }
    }
}

/// Pieces a run has taken and not yet placed: bit `i` of `bits` = packet
/// `base + i` of the message, its `(offset, len)` in `slots[i]`.
struct Pending {
    base: u32,
    bits: u64,
    slots: [(u32, u32); RANGES_MAX],
}

/// The piece of `all` that byte `off` of its copy falls in, and the
/// offset in that piece (`all.len()` when past the end).
fn locate(all: &[Extent], mut off: usize) -> (usize, usize) {
    for (i, e) in all.iter().enumerate() {
        if off < e.len {
            return (i, off);
        }
        off -= e.len;
    }
    (all.len(), 0)
}

/// The source and destination pieces of a whole message's copy.
struct Whole {
    src: [Extent; EXTENTS_MAX],
    dst: [Extent; EXTENTS_MAX],
    ns: usize,
    nd: usize,
}

/// True when packet `idx` of an `npkts`-packet message in state `st` is
/// one [`World::ooo_receive`] places without completing the message.
fn takes_without_completing(st: OooMsg, idx: u32, npkts: u32) -> bool {
    if idx >= npkts || !st.fresh(idx) {
        return false;
    }
    let mut after = st;
    after.mark(idx);
    after.base < npkts
}
