//! The queues a process shares with the fabric, scribbled over: garbage
//! work requests, counts far ahead, a doorbell storm. Each hurts only the
//! process that did it (its own QPs go to ERR as a NIC takes a malformed
//! WQE); the fabric and the other processes carry on.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::{end, to_rts, End, Fabric};
use crate::fabric::cqring;
use crate::fabric::engine::Engine;
use crate::fabric::fast::encode_record;
use crate::fabric::sqring::{self, KIND_SEND};

/// Two connected RC ends in one engine, over `bufs`.
fn pair(e: &mut Engine, bufs: &mut [Vec<u8>; 2]) -> (End, End) {
    let [x, y] = bufs;
    let a = end(e, 0, x);
    let b = end(e, 1, y);
    to_rts(e, &a.qp, b.qpn, b.lid);
    to_rts(e, &b.qp, a.qpn, a.lid);
    (a, b)
}

/// Posts a signalled WRITE of `len` bytes from `a` to `b` with `wr_id`.
fn write(e: &mut Engine, a: &End, b: &End, wr_id: u64, len: u32) -> Result<()> {
    let sg = [Sge {
        addr: a.addr,
        length: len,
        lkey: a.lkey,
    }];
    let wr = SendWr {
        wr_id,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: b.addr,
            rkey: b.rkey,
        },
        ..SendWr::default()
    };
    // SAFETY: both buffers outlive the request (the caller polls).
    unsafe { e.post_send(&a.qp, &[wr]) }
}

/// Polls `cq` until `n` completions came or 10 s passed.
fn completions(e: &mut Engine, cq: &CqHandle, n: usize) -> Vec<Wc> {
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < n && t0.elapsed() < Duration::from_secs(10) {
        let mut wc = [Wc::default(); 8];
        let k = e.poll_cq(cq, &mut wc).unwrap();
        got.extend_from_slice(&wc[..k]);
    }
    got
}

fn remote(e: &Engine) -> &crate::fabric::client::Remote {
    match e {
        Engine::Remote(r) => r,
        Engine::Local(_) => unreachable!("a fabric engine"),
    }
}

fn state(e: &mut Engine, qp: &QpHandle) -> QpState {
    e.query_qp(qp, QpAttrMask::STATE).unwrap().0.qp_state
}

/// Goal: a pair that works through the rings; a WRITE's data lands.
fn works(e: &mut Engine, a: &End, b: &End, buf_b: &[u8], id: u64) {
    write(e, a, b, id, 64).unwrap();
    let wc = completions(e, &a.cq, 1);
    assert_eq!(wc.len(), 1, "one completion for WRITE {id}");
    assert_eq!((wc[0].wr_id, wc[0].status), (id, WcStatus::Success));
    assert_eq!(buf_b[0], 0xab, "the WRITE landed");
}

/// Goal: garbage in a process's submission ring hurts only the QP it
/// names, and only if that QP is the process's. Method: two pairs in one
/// process and one in another; the first process writes a record for its
/// QP whose requests do not decode, and a record naming the other
/// process's QP; its QP completes a request with IBV_WC_LOC_QP_OP_ERR and
/// is in ERR, while its other pair and the other process's pair work.
#[test]
fn garbage_work_requests_fail_only_their_own_qp() {
    let fab = Fabric::start("sq-garbage");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut b1 = [vec![0xab; 4096], vec![0; 4096]];
    let mut b2 = [vec![0xab; 4096], vec![0; 4096]];
    let mut b3 = [vec![0xab; 4096], vec![0; 4096]];
    let (a1, z1) = pair(&mut e, &mut b1);
    let (a2, z2) = pair(&mut e, &mut b2);
    let (a3, z3) = pair(&mut other, &mut b3);
    works(&mut e, &a1, &z1, &b1[1], 1);
    assert!(
        remote(&e).with_posts(|_| ()).is_some(),
        "the post went through a submission ring"
    );
    // Requests that are no requests, for our QP; and a record for a QP
    // that is not ours (the other process's).
    let mut body = encode_record(&a1.qp, &());
    body.extend_from_slice(&[0xff; 40]);
    assert!(remote(&e).submit_raw(KIND_SEND, &body));
    let foreign = encode_record(&a3.qp, &(Vec::<u8>::new(), Vec::<Vec<u8>>::new()));
    assert!(remote(&e).submit_raw(KIND_SEND, &foreign));
    let wc = completions(&mut e, &a1.cq, 1);
    assert_eq!(wc.len(), 1, "the malformed request completes");
    assert_eq!(wc[0].status, WcStatus::LocQpOpErr, "{wc:?}");
    assert_eq!(state(&mut e, &a1.qp), QpState::Error);
    b2[1][0] = 0;
    works(&mut e, &a2, &z2, &b2[1], 2);
    works(&mut other, &a3, &z3, &b3[1], 3);
    assert_eq!(state(&mut other, &a3.qp), QpState::ReadyToSend);
    assert!(fab.log().contains("malformed"), "{}", fab.log());
}

/// Goal: a producer count far ahead breaks only that process's ring.
/// Method: a process posts once through its ring, then sets the ring's
/// producer count far past its size and rings; the QP it posted through
/// goes to ERR, its later posts go by call (and flush), and another
/// process's pair works throughout.
#[test]
fn a_producer_count_far_ahead_breaks_only_that_ring() {
    let fab = Fabric::start("sq-ahead");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut b1 = [vec![0xab; 4096], vec![0; 4096]];
    let mut b3 = [vec![0xab; 4096], vec![0; 4096]];
    let (a1, z1) = pair(&mut e, &mut b1);
    let (a3, z3) = pair(&mut other, &mut b3);
    works(&mut e, &a1, &z1, &b1[1], 1);
    remote(&e)
        .with_posts(|p| {
            p.shm()
                .counter(sqring::layout::PRODUCER)
                .store(u64::MAX / 3, Ordering::Release);
            p.ring();
        })
        .unwrap();
    let t0 = Instant::now();
    while state(&mut e, &a1.qp) != QpState::Error {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the QP never went to ERR"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(remote(&e).with_posts(|p| p.broken()).unwrap());
    works(&mut other, &a3, &z3, &b3[1], 3);
    // A post after the break goes by call: the QP in ERR flushes it.
    write(&mut e, &a1, &z1, 9, 8).unwrap();
    let wc = completions(&mut e, &a1.cq, 2);
    assert!(
        wc.iter()
            .any(|w| w.wr_id == 9 && w.status == WcStatus::WrFlushErr),
        "{wc:?}"
    );
    assert!(fab.log().contains("broken"), "{}", fab.log());
}

/// Goal: a doorbell storm costs the others nothing but CPU. Method: one
/// process rings its doorbell 100 000 times with nothing in its ring
/// while another's pair does 20 WRITEs; every one completes, and the
/// storming process's own pair still works after.
#[test]
fn a_doorbell_storm_hurts_no_one() {
    let fab = Fabric::start("sq-storm");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut b1 = [vec![0xab; 4096], vec![0; 4096]];
    let mut b3 = [vec![0xab; 4096], vec![0; 4096]];
    let (a1, z1) = pair(&mut e, &mut b1);
    let (a3, z3) = pair(&mut other, &mut b3);
    works(&mut e, &a1, &z1, &b1[1], 1);
    for i in 0..100_000 {
        remote(&e).with_posts(|p| p.ring()).unwrap();
        if i % 5000 == 0 {
            write(&mut other, &a3, &z3, i, 64).unwrap();
            let wc = completions(&mut other, &a3.cq, 1);
            assert_eq!(wc.len(), 1, "WRITE {i} of the other process completes");
            assert_eq!(wc[0].status, WcStatus::Success);
        }
    }
    b1[1][0] = 0;
    works(&mut e, &a1, &z1, &b1[1], 2);
}

/// Goal: a consumer count far ahead in a CQ ring loses nothing and hurts
/// nothing else. Method: after one completion is in the ring, the process
/// sets the ring's consumer count past what was published; the next
/// completion makes the fabric detach the ring; the next poll attaches a
/// new one and returns both completions, in order, exactly once.
#[test]
fn a_cq_consumer_count_far_ahead_loses_nothing() {
    let fab = Fabric::start("cq-ahead");
    let mut e = fab.engine();
    let mut b1 = [vec![0xab; 4096], vec![0; 4096]];
    let (a1, z1) = pair(&mut e, &mut b1);
    works(&mut e, &a1, &z1, &b1[1], 1);
    write(&mut e, &a1, &z1, 2, 64).unwrap();
    // Wait for the completion to be published, without taking it.
    let t0 = Instant::now();
    loop {
        let ready = remote(&e)
            .with_cq_ring(a1.cq, |r| {
                r.shm()
                    .counter(cqring::layout::PRODUCER)
                    .load(Ordering::Acquire)
            })
            .unwrap();
        if ready >= 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no completion published"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    remote(&e)
        .with_cq_ring(a1.cq, |r| {
            r.shm()
                .counter(cqring::layout::CONSUMER)
                .store(1 << 40, Ordering::Release)
        })
        .unwrap();
    write(&mut e, &a1, &z1, 3, 64).unwrap();
    let t0 = Instant::now();
    while remote(&e)
        .with_cq_ring(a1.cq, |r| {
            r.shm()
                .counter(cqring::layout::DETACHED)
                .load(Ordering::Acquire)
        })
        .unwrap()
        == 0
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the ring was never detached"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let wc = completions(&mut e, &a1.cq, 2);
    let ids: Vec<u64> = wc.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [2, 3], "both completions, once each: {wc:?}");
    assert!(wc.iter().all(|w| w.status == WcStatus::Success));
    let mut more = [Wc::default(); 4];
    assert_eq!(e.poll_cq(&a1.cq, &mut more).unwrap(), 0);
}
