//! CQ mirrors (world/cq_mirror.rs): a consumer outside the world sees
//! every completion once, in order, and the world frees work-queue slots
//! only as far as the consumer says it took them.
#![allow(missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use backend_sim::{CqMirror, MirroredCqe, MirroredQueue, SimConfig};
use common::datapath::*;
use verbs_api::*;

/// What the test's mirror saw, and the count its "consumer" says.
#[derive(Debug, Default)]
struct Seen {
    published: Vec<MirroredCqe>,
    consumed: u64,
    detached: bool,
}

#[derive(Debug)]
struct TestMirror(Arc<Mutex<Seen>>);

impl CqMirror for TestMirror {
    fn consumed(&self) -> u64 {
        self.0.lock().unwrap().consumed
    }
    fn publish(&mut self, cqe: &MirroredCqe) {
        self.0.lock().unwrap().published.push(*cqe);
    }
    fn detach(&mut self) {
        self.0.lock().unwrap().detached = true;
    }
}

fn write(p: &mut Pair, src: &MrInfo, dst: &MrInfo, wr_id: u64) -> Result<()> {
    let sg = [sge(src, 0, 64)];
    let wr = SendWr {
        wr_id,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        },
        ..SendWr::default()
    };
    post_send(&mut p.sim, p.a.qp, &[wr])
}

#[test]
fn a_mirror_sees_each_completion_once_and_slots_free_as_it_takes_them() {
    // Goal: completions go to the mirror in order, with the request each
    // retires; the send queue's slots are freed only through what the
    // consumer took; a count that goes backwards detaches the mirror and
    // loses nothing. Method: a send queue of 8 filled with signalled
    // WRITEs; the 9th is refused until the consumer says it took 3, then
    // 3 more go and the 4th is refused; a count that goes back detaches
    // the mirror and a poll in the world returns the rest in order.
    let mut p = rc_pair(
        SimConfig::default(),
        &RcParams {
            max_send_wr: 8,
            ..RcParams::default()
        },
    );
    let (_, src) = reg_all(&mut p.sim, p.a.pd, 4096);
    let (_, dst) = reg_all(&mut p.sim, p.b.pd, 4096);
    let cap = p.sim.query_qp(&p.a.qp, QpAttrMask::CAP).unwrap().0.cap;
    let depth = u64::from(cap.max_send_wr);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cq = p.a.cq;
    p.sim
        .world_mut()
        .attach_cq_mirror(cq, Box::new(TestMirror(Arc::clone(&seen))))
        .unwrap();
    for id in 0..depth {
        write(&mut p, &src, &dst, id).unwrap();
    }
    assert!(p.sim.world_mut().run_until_idle());
    {
        let s = seen.lock().unwrap();
        let ids: Vec<u64> = s.published.iter().map(|c| c.wc.wr_id).collect();
        assert_eq!(ids, (0..depth).collect::<Vec<_>>());
        assert!(s.published.iter().enumerate().all(|(i, c)| c.qp == p.a.qp
            && c.queue == MirroredQueue::Send
            && c.seq == i as u64
            && c.wc.status == WcStatus::Success));
    }
    let full = write(&mut p, &src, &dst, 100).unwrap_err();
    assert_eq!(full.errno(), errno::ENOMEM, "{full}");
    seen.lock().unwrap().consumed = 3;
    assert!(p.sim.world_mut().sync_cq_mirror(cq));
    for id in 100..103 {
        write(&mut p, &src, &dst, id).unwrap();
    }
    assert!(
        write(&mut p, &src, &dst, 103).is_err(),
        "3 slots freed, not 4"
    );
    assert!(p.sim.world_mut().run_until_idle());
    assert_eq!(seen.lock().unwrap().published.len() as u64, depth + 3);
    // A count that goes backwards: detached, nothing taken.
    seen.lock().unwrap().consumed = 1;
    assert!(!p.sim.world_mut().sync_cq_mirror(cq));
    assert!(seen.lock().unwrap().detached);
    assert!(!p.sim.world().cq_mirrored(cq));
    let rest: Vec<u64> = drain(&mut p.sim, cq, 64).iter().map(|w| w.wr_id).collect();
    let mut want: Vec<u64> = (3..depth).collect();
    want.extend(100..103);
    assert_eq!(rest, want, "the entries not taken, once each, in order");
}
