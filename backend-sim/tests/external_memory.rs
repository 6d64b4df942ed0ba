//! MRs over memory the simulator can only copy to and from
//! (`ExternalMemory` without an in-place view), as the shared fabric's
//! clients lend it: every data-path access goes through `read`/`write`,
//! and what lands there is exactly what a World-owned MR would hold.
#![allow(missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use backend_sim::{ExternalMemory, MrHandle, PdHandle, SimConfig, SimVerbs};
use common::datapath::*;
use verbs_api::*;

/// Bytes behind a lock, reachable only by copies; counts the copies.
#[derive(Debug, Clone, Default)]
struct CopyOnly {
    bytes: Arc<Mutex<Vec<u8>>>,
    copies: Arc<Mutex<(u32, u32)>>,
}

impl ExternalMemory for CopyOnly {
    fn len(&self) -> usize {
        self.bytes.lock().unwrap().len()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        self.copies.lock().unwrap().0 += 1;
        dst.copy_from_slice(&self.bytes.lock().unwrap()[offset..offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        self.copies.lock().unwrap().1 += 1;
        self.bytes.lock().unwrap()[offset..offset + src.len()].copy_from_slice(src);
    }
}

const ALL: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0,
);

fn reg_copy_only(
    sim: &mut SimVerbs,
    pd: PdHandle,
    len: usize,
    fill: u8,
) -> (MrHandle, MrInfo, CopyOnly) {
    let mem = CopyOnly {
        bytes: Arc::new(Mutex::new(vec![fill; len])),
        ..CopyOnly::default()
    };
    let mr = sim
        .world_mut()
        .reg_mr_external(pd, 0x7000_0000, Box::new(mem.clone()), ALL)
        .unwrap();
    let info = sim.mr_info(&mr).unwrap();
    assert_eq!((info.addr, info.length), (0x7000_0000, len as u64));
    (mr, info, mem)
}

fn one(sim: &mut SimVerbs, qp: backend_sim::QpHandle, wr: SendWr<'_, SimVerbs>) {
    post_send(sim, qp, &[wr]).unwrap();
}

#[test]
fn write_read_atomic_and_send_go_through_the_copies() {
    let mut p = rc_pair(SimConfig::default(), &RcParams::default());
    let (a, b) = (p.a, p.b);
    let (src_mr, src, src_mem) = reg_copy_only(&mut p.sim, a.pd, 4096, 0);
    let (_dst_mr, dst, dst_mem) = reg_copy_only(&mut p.sim, b.pd, 4096, 0xEE);
    for (i, byte) in src_mem.bytes.lock().unwrap().iter_mut().enumerate() {
        *byte = (i % 251) as u8;
    }

    // WRITE 3000 bytes (three packets at MTU 1024) into the copy-only target.
    let sg = [sge(&src, 0, 3000)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 1,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: dst.addr + 100,
                rkey: dst.rkey,
            },
            ..SendWr::default()
        },
    );
    let wc = drain(&mut p.sim, a.cq, 4);
    assert_eq!(wc.len(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
    {
        let d = dst_mem.bytes.lock().unwrap();
        let s = src_mem.bytes.lock().unwrap();
        assert_eq!(&d[100..3100], &s[..3000]);
        assert!(d[..100].iter().chain(&d[3100..]).all(|&x| x == 0xEE));
    }
    assert!(
        dst_mem.copies.lock().unwrap().1 >= 1,
        "the target was written by copies"
    );

    // READ it back into the source MR at offset 3200 (3000 + 896 > 4096, so 800 bytes).
    let rd = [sge(&src, 3200, 800)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 2,
            sg_list: &rd,
            opcode: WrOpcode::RdmaRead,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: dst.addr + 100,
                rkey: dst.rkey,
            },
            ..SendWr::default()
        },
    );
    let wc = drain(&mut p.sim, a.cq, 4);
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::Success));
    {
        let s = src_mem.bytes.lock().unwrap();
        let want: Vec<u8> = (0..800).map(|i| (i % 251) as u8).collect();
        assert_eq!(&s[3200..4000], &want[..]);
    }

    // FETCH_AND_ADD on the copy-only target: returns the old word, adds.
    dst_mem.bytes.lock().unwrap()[8..16].copy_from_slice(&41u64.to_le_bytes());
    let at = [sge(&src, 4000, 8)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 3,
            sg_list: &at,
            opcode: WrOpcode::AtomicFetchAndAdd,
            send_flags: SendFlags::SIGNALED,
            atomic: AtomicInfo {
                remote_addr: dst.addr + 8,
                rkey: dst.rkey,
                compare_add: 1,
                swap: 0,
            },
            ..SendWr::default()
        },
    );
    let wc = drain(&mut p.sim, a.cq, 4);
    assert_eq!((wc[0].wr_id, wc[0].status), (3, WcStatus::Success));
    let word = u64::from_le_bytes(dst_mem.bytes.lock().unwrap()[8..16].try_into().unwrap());
    let old = u64::from_le_bytes(
        src_mem.bytes.lock().unwrap()[4000..4008]
            .try_into()
            .unwrap(),
    );
    assert_eq!((old, word), (41, 42));

    // SEND with inline data from the copy-only source into a posted receive.
    let (rmr, rinfo) = reg_all(&mut p.sim, b.pd, 256);
    post_recv(
        &mut p.sim,
        b.qp,
        &[RecvWr {
            wr_id: 9,
            sg_list: &[sge(&rinfo, 0, 256)],
        }],
    )
    .unwrap();
    let sg = [sge(&src, 10, 32)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 4,
            sg_list: &sg,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED | SendFlags::INLINE,
            ..SendWr::default()
        },
    );
    let wc = drain(&mut p.sim, b.cq, 4);
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (9, 32));
    let got = p.sim.mr_bytes(&rmr).unwrap()[..32].to_vec();
    assert_eq!(got, src_mem.bytes.lock().unwrap()[10..42].to_vec());
    let _ = src_mr;
}

#[test]
fn copy_only_memory_has_no_in_place_view() {
    let mut p = rc_pair(SimConfig::default(), &RcParams::default());
    let (mr, _, _) = reg_copy_only(&mut p.sim, p.a.pd, 64, 1);
    let e = p.sim.mr_bytes(&mr).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let e = p.sim.mr_bytes_mut(&mr).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    p.sim.dereg_mr(&mr).unwrap();
}

/// `World::set_time_limit`: no verb runs an event due after the limit, not
/// even `poll_cq` on an empty CQ; lifting it lets the same poll finish.
#[test]
fn a_time_limit_holds_verbs_at_that_time() {
    let mut p = rc_pair(SimConfig::default(), &RcParams::default());
    let (a, b) = (p.a, p.b);
    let (_, src) = reg_all(&mut p.sim, a.pd, 64);
    let (_, dst) = reg_all(&mut p.sim, b.pd, 64);
    let now = p.sim.world().now_ns();
    p.sim.world_mut().set_time_limit(Some(now));
    let sg = [sge(&src, 0, 64)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 7,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            ..SendWr::default()
        },
    );
    assert!(
        drain(&mut p.sim, a.cq, 1).is_empty(),
        "nothing may complete at the limit"
    );
    assert_eq!(p.sim.world().now_ns(), now, "time stayed at the limit");
    assert!(p.sim.world().next_event_ns().is_some_and(|t| t > now));
    p.sim.world_mut().advance_ns(1_000_000_000);
    assert_eq!(p.sim.world().now_ns(), now, "advance_ns stops at the limit");
    p.sim.world_mut().set_time_limit(None);
    let wc = drain(&mut p.sim, a.cq, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (7, WcStatus::Success));
}

/// `World::run_packets_until`, as the shared fabric uses it after catching
/// up with the wall clock: a WRITE's packet and its acknowledgement run at
/// once past the time limit, time stops at the last of them (not at the
/// bound), and the limit is restored.
#[test]
fn packets_in_flight_run_ahead_of_the_time_limit() {
    let mut p = rc_pair(SimConfig::default(), &RcParams::default());
    let (a, b) = (p.a, p.b);
    let (_, src) = reg_all(&mut p.sim, a.pd, 64);
    let (_, dst) = reg_all(&mut p.sim, b.pd, 64);
    let now = p.sim.world().now_ns();
    p.sim.world_mut().set_time_limit(Some(now));
    let sg = [sge(&src, 0, 64)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 9,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            ..SendWr::default()
        },
    );
    assert!(drain(&mut p.sim, a.cq, 1).is_empty(), "held at the limit");
    let bound = now + 50_000;
    assert!(p.sim.world_mut().run_packets_until(bound));
    let after = p.sim.world().now_ns();
    assert!(
        after > now && after < bound,
        "time at the last packet: {now} < {after} < {bound}"
    );
    let wc = drain(&mut p.sim, a.cq, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::Success));
    // The limit is what it was: advancing does not pass it.
    p.sim.world_mut().advance_ns(1_000_000);
    assert_eq!(p.sim.world().now_ns(), after);
}

/// A timer is never run early by `World::run_packets_until`, and nothing
/// due after it runs before it: a SEND that meets no receive gets an RNR
/// NAK, and the retry waits for its timer however far the bound is.
#[test]
fn a_timer_stops_packets_running_ahead() {
    let mut p = rc_pair(SimConfig::default(), &RcParams::default());
    let (a, b) = (p.a, p.b);
    let (_, src) = reg_all(&mut p.sim, a.pd, 64);
    let _ = b;
    let now = p.sim.world().now_ns();
    p.sim.world_mut().set_time_limit(Some(now));
    let sg = [sge(&src, 0, 64)];
    one(
        &mut p.sim,
        a.qp,
        SendWr {
            wr_id: 4,
            sg_list: &sg,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..SendWr::default()
        },
    );
    assert!(p.sim.world_mut().run_packets_until(now + 1_000_000_000));
    let after = p.sim.world().now_ns();
    let next = p.sim.world().next_event_ns().expect("the RNR retry timer");
    assert!(
        next > after,
        "the timer at {next} was not run (time {after})"
    );
    assert!(
        after - now < 50_000,
        "only the SEND and its NAK ran: {}",
        after - now
    );
    assert!(
        drain(&mut p.sim, a.cq, 1).is_empty(),
        "the SEND waits for its retry"
    );
}
