//! A digest of the world's state: what a refused call must leave as it
//! found it (the swarm compares it around every call that returned an
//! error). It folds the clock and, per live object in arena order, the
//! fields a verb may change: states, queue positions, the send engine's
//! clock, use counts, keys, access, pins, windows' bindings, CQ entries,
//! SRQ sizes, rdma_cm ids' states and addresses, and the side tables'
//! sizes. MR bytes are left out (their cost would dominate; the data
//! path's effects on them are checked by the property tests).

use core::hash::{Hash, Hasher};

use super::World;

/// An FNV-style fold a 64-bit word at a time (the swarm asks for the
/// digest before every call, so it must be cheap), and, as a [`Hasher`],
/// over enum discriminants.
struct Fold(u64);

impl Fold {
    fn add(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(29);
    }
}

impl Hasher for Fold {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }

    fn write_isize(&mut self, i: isize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl World {
    /// The digest of the world's state (see the module docs): equal
    /// digests around a call mean the call changed none of it.
    pub fn state_digest(&self) -> u64 {
        let mut f = Fold(0xcbf2_9ce4_8422_2325);
        f.add(self.now_ns);
        for (i, g, c) in self.contexts.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(c.async_unacked.len() as u64);
        }
        for (i, g, p) in self.pds.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(u64::from(p.users));
        }
        for (i, g, c) in self.cqs.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(u64::from(c.cqe) << 32 | u64::from(c.users));
            f.add(c.entries.len() as u64);
            f.add(u64::from(c.overrun) | u64::from(c.armed.is_some()) << 1);
            f.add(u64::from(c.events_unacked));
        }
        for (i, g, m) in self.mrs.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(u64::from(m.lkey) << 32 | u64::from(m.rkey));
            f.add(u64::from(m.pd.index) << 32 | u64::from(m.access.bits()));
            f.add(u64::from(m.pins));
            f.add(m.addr ^ (m.bytes.len() as u64) << 1);
            f.add(u64::from(m.invalidated) | u64::from(m.deregistered) << 1);
        }
        for (i, g, s) in self.srqs.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(u64::from(s.max_wr) << 32 | u64::from(s.limit));
            f.add(u64::from(s.users));
            f.add(s.ring.head ^ s.ring.done << 21 ^ s.ring.tail << 42);
        }
        for (i, g, q) in self.qps.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(u64::from(q.qp_num));
            core::mem::discriminant(&q.phase.state()).hash(&mut f);
            f.add(q.sq.head ^ q.sq.done << 21 ^ q.sq.tail << 42);
            f.add(q.rq.head ^ q.rq.done << 21 ^ q.rq.tail << 42);
            f.add(q.tx.engine_free_ns);
            f.add(q.tx.send_seq);
            f.add(q.mcast.len() as u64);
        }
        f.add(self.ahs.len() as u64);
        for (i, g, m) in self.ext.mws.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            f.add(u64::from(m.rkey) << 32 | u64::from(m.user_rkey));
            match m.bound {
                Some(b) => {
                    f.add(u64::from(b.mr.index) << 32 | u64::from(b.access.bits()));
                    f.add(b.addr ^ b.length << 1);
                }
                None => f.add(u64::MAX),
            }
        }
        f.add(self.ext_entries() as u64);
        f.add(self.xrc_entries() as u64);
        f.add(self.xrc_handle_count() as u64 | (self.xrc_domain_count() as u64) << 32);
        f.add(self.dc_connection_count() as u64);
        f.add(self.rqpn.len() as u64);
        f.add(self.channels.len() as u64);
        for (i, g, id) in self.cm.ids.iter() {
            f.add(u64::from(i) << 32 | u64::from(g));
            core::mem::discriminant(&id.state).hash(&mut f);
            f.add(u64::from(id.local.map_or(0, |a| a.port())));
            f.add(u64::from(id.qp.is_some()) | u64::from(id.dev.unwrap_or(u32::MAX)) << 1);
        }
        f.add(self.cm.channels.len() as u64);
        f.0
    }
}
