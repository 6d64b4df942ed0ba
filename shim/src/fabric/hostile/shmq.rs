//! The queues a process shares with the fabric, scribbled over: garbage
//! work requests, counts far ahead, a doorbell storm. Each hurts only the
//! process that did it (its own QPs go to ERR as a NIC takes a malformed
//! WQE); the fabric and the other processes carry on.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use backend_sim::*;
use verbs_api::*;

use super::{end, end_with, to_rts, End, Fabric};
use crate::fabric::cqring;
use crate::fabric::engine::Engine;
use crate::fabric::fast::encode_record;
use crate::fabric::sqring::{self, KIND_SEND, KIND_SRQ_RECV, KIND_WR};

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

/// Two connected RC ends on two connections (as two processes): `a`
/// in `e` with the `ibv_wr_*` API for WRITE and SEND (and an SRQ when
/// `srq`), `z` in `other`, receiving normally.
fn cross_pair(
    e: &mut Engine,
    other: &mut Engine,
    bufs: &mut [Vec<u8>; 2],
    srq: bool,
) -> (End, End, Option<SrqHandle>) {
    let [x, y] = bufs;
    let (a, s) = end_with(e, 0, x, SendOpsFlags::RDMA_WRITE | SendOpsFlags::SEND, srq);
    let z = end(other, 1, y);
    to_rts(e, &a.qp, z.qpn, z.lid);
    to_rts(other, &z.qp, a.qpn, a.lid);
    (a, z, s)
}

/// The submission ring's producer count (bytes of records written).
fn produced(e: &Engine) -> u64 {
    remote(e)
        .with_posts(|p| {
            p.shm()
                .counter(sqring::layout::PRODUCER)
                .load(Ordering::Acquire)
        })
        .unwrap_or(0)
}

/// An `ibv_wr_*` batch of `n` signalled WRITEs of 8 bytes from `a` to
/// `z` (request `i` from and to offset `8 i`, `wr_id` `base + i`).
fn write_batch(e: &mut Engine, a: &End, z: &End, base: u64, n: usize) -> Result<()> {
    let sges: Vec<Sge> = (0..n)
        .map(|i| Sge {
            addr: a.addr + 8 * i as u64,
            length: 8,
            lkey: a.lkey,
        })
        .collect();
    let batch: Vec<WrEx<'_, SimVerbs>> = sges
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut w = WrEx::new(
                base + i as u64,
                WrOp::RdmaWrite {
                    rkey: z.rkey,
                    remote_addr: z.addr + 8 * i as u64,
                },
            );
            w.wr_flags = SendFlags::SIGNALED;
            w.data = WrData::Sge(*g);
            w
        })
        .collect();
    // SAFETY: both buffers outlive the requests (the caller polls).
    unsafe { e.post_wr(&a.qp, &batch) }
}

/// Goal: an `ibv_wr_*` batch goes through the submission ring whole, and
/// one the checks refuse comes back at once from `ibv_wr_complete` with
/// nothing of it posted. Method: a batch of 3 WRITEs grows the ring's
/// producer count and completes with its data landed on the other
/// connection's buffer; a batch of 1 000 (more than the send queue holds)
/// fails with ENOMEM and a READ (not in the QP's send_ops_flags) with
/// EOPNOTSUPP, neither writing to the ring nor completing anything: the
/// only completion after is the next good batch's.
#[test]
fn wr_batches_go_through_the_ring_whole_or_not_at_all() {
    let fab = Fabric::start("wr-batch");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut src = vec![0u8; 65536];
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let mut bufs = [src, vec![0; 65536]];
    let (a, z, _) = cross_pair(&mut e, &mut other, &mut bufs, false);
    write_batch(&mut e, &a, &z, 10, 3).unwrap();
    let before = produced(&e);
    assert!(before > 0, "the batch went into the submission ring");
    let wc = completions(&mut e, &a.cq, 3);
    let ids: Vec<(u64, WcStatus)> = wc.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        ids,
        [
            (10, WcStatus::Success),
            (11, WcStatus::Success),
            (12, WcStatus::Success)
        ]
    );
    assert_eq!(bufs[1][..24], bufs[0][..24], "the WRITEs landed");

    let err = write_batch(&mut e, &a, &z, 100, 1000).unwrap_err();
    assert_eq!(err.errno(), libc::ENOMEM, "{err}");
    assert!(err.message().contains("nothing of the batch"), "{err}");
    let sg = [Sge {
        addr: a.addr,
        length: 8,
        lkey: a.lkey,
    }];
    let mut read = WrEx::new(
        200,
        WrOp::RdmaRead {
            rkey: z.rkey,
            remote_addr: z.addr,
        },
    );
    read.wr_flags = SendFlags::SIGNALED;
    read.data = WrData::SgeList(&sg);
    // SAFETY: the buffer outlives the request.
    let err = unsafe { e.post_wr(&a.qp, &[read]) }.unwrap_err();
    assert_eq!(err.errno(), libc::EOPNOTSUPP, "{err}");
    let after_refusals = produced(&e);
    assert_eq!(after_refusals, before, "refused batches write no record");
    write_batch(&mut e, &a, &z, 300, 1).unwrap();
    assert!(
        produced(&e) > after_refusals,
        "the next batch uses the ring"
    );
    let wc = completions(&mut e, &a.cq, 2);
    let ids: Vec<u64> = wc.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [300], "nothing of the refused batches ran: {wc:?}");
    assert_eq!(wc[0].status, WcStatus::Success);
}

/// Posts `n` receives of 64 bytes each into `srq` from `at` (`wr_id`
/// `base + i`).
fn srq_recvs(e: &mut Engine, srq: &SrqHandle, at: &End, base: u64, n: usize) -> Result<()> {
    let sges: Vec<[Sge; 1]> = (0..n)
        .map(|i| {
            [Sge {
                addr: at.addr + 64 * i as u64,
                length: 64,
                lkey: at.lkey,
            }]
        })
        .collect();
    let wrs: Vec<RecvWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| RecvWr {
            wr_id: base + i as u64,
            sg_list: s,
        })
        .collect();
    // SAFETY: the buffer outlives the requests (the caller polls).
    unsafe { e.post_srq_recv(srq, &wrs) }
}

/// A signalled SEND of 64 bytes from the start of `z`'s buffer.
fn send64(e: &mut Engine, z: &End, wr_id: u64) {
    let sg = [Sge {
        addr: z.addr,
        length: 64,
        lkey: z.lkey,
    }];
    let wr = SendWr {
        wr_id,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..SendWr::default()
    };
    // SAFETY: the buffer outlives the request (the caller polls).
    unsafe { e.post_send(&z.qp, &[wr]) }.unwrap();
}

/// Goal: `ibv_post_srq_recv` goes through the submission ring, its
/// receives take a SEND from another connection, and a list that
/// overfills the SRQ fails with ENOMEM at exactly the first request that
/// does not fit. Method: 4 receives through the ring (the producer count
/// grows); the peer SENDs 64 bytes; the receive completes with them.
/// Then a list of `max_wr - 3 + 2` receives: the first `max_wr - 3` fit
/// (3 are still queued), `bad_wr` is the next.
#[test]
fn srq_receives_go_through_the_ring() {
    let fab = Fabric::start("srq-ring");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut bufs = [vec![0u8; 65536], vec![0x5a; 65536]];
    let (a, z, srq) = cross_pair(&mut e, &mut other, &mut bufs, true);
    let srq = srq.unwrap();
    let before = produced(&e);
    srq_recvs(&mut e, &srq, &a, 1, 4).unwrap();
    assert!(produced(&e) > before, "the receives went into the ring");
    send64(&mut other, &z, 9);
    let wc = completions(&mut e, &a.cq, 1);
    assert_eq!(wc.len(), 1, "the receive completes");
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
        (1, WcStatus::Success, WcOpcode::Recv, 64)
    );
    assert!(bufs[0][..64].iter().all(|&b| b == 0x5a), "the SEND landed");
    let sent = completions(&mut other, &z.cq, 1);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].status, WcStatus::Success);

    let max_wr = e.query_srq(&srq).unwrap().max_wr as usize;
    let room = max_wr - 3;
    let err = srq_recvs(&mut e, &srq, &a, 100, room + 2).unwrap_err();
    assert_eq!(err.errno(), libc::ENOMEM, "{err}");
    assert_eq!(err.bad_wr(), Some(room), "{err}");
}

/// Goal: garbage `ibv_wr_*` and SRQ records hurt only the sender's own
/// QP or SRQ. Method: one connection writes a `KIND_WR` record for its
/// own QP whose batch does not decode, one naming the other
/// connection's QP, a `KIND_SRQ_RECV` record for its own SRQ that does
/// not decode and one naming the other's SRQ: its QP completes with
/// IBV_WC_LOC_QP_OP_ERR and is in ERR, its SRQ's context hears
/// IBV_EVENT_SRQ_ERR; the other connection's QP stays in RTS, hears
/// nothing, and its SRQ still takes a SEND.
#[test]
fn garbage_wr_and_srq_records_fail_only_their_own_objects() {
    let fab = Fabric::start("wr-garbage");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut third = fab.engine();
    let mut b1 = [vec![0xab; 65536], vec![0; 65536]];
    let mut b2 = [vec![0; 65536], vec![0x77; 65536]];
    let (a1, z1, s1) = cross_pair(&mut e, &mut third, &mut b1, true);
    let (a2, z2, s2) = cross_pair(&mut other, &mut third, &mut b2, true);
    write_batch(&mut e, &a1, &z1, 1, 1).unwrap();
    assert_eq!(completions(&mut e, &a1.cq, 1).len(), 1);
    let (s1, s2) = (s1.unwrap(), s2.unwrap());

    let mut body = encode_record(&a1.qp, &());
    body.extend_from_slice(&[0xff; 40]);
    assert!(remote(&e).submit_raw(KIND_WR, &body));
    let foreign = encode_record(&a2.qp, &(Vec::<u8>::new(), Vec::<Vec<u8>>::new()));
    assert!(remote(&e).submit_raw(KIND_WR, &foreign));
    let mut srq_body = crate::fabric::encode(&s1);
    srq_body.extend_from_slice(&[0xfe; 40]);
    assert!(remote(&e).submit_raw(KIND_SRQ_RECV, &srq_body));
    let mut srq_foreign = crate::fabric::encode(&s2);
    srq_foreign.extend_from_slice(&crate::fabric::encode(&Vec::<u8>::new()));
    assert!(remote(&e).submit_raw(KIND_SRQ_RECV, &srq_foreign));

    let wc = completions(&mut e, &a1.cq, 1);
    assert_eq!(wc.len(), 1, "the malformed batch completes");
    assert_eq!(wc[0].status, WcStatus::LocQpOpErr, "{wc:?}");
    assert_eq!(state(&mut e, &a1.qp), QpState::Error);
    // The QP in ERR also says IBV_EVENT_QP_LAST_WQE_REACHED (it has an SRQ).
    let mut events = Vec::new();
    while let Some((kind, subject, token)) = e.get_async_event(a1.ctx).unwrap() {
        e.ack_async_event(token).unwrap();
        events.push((kind, subject));
    }
    assert!(
        events.contains(&(AsyncEventType::SrqErr, AsyncSubject::Srq(s1))),
        "{events:?}"
    );

    assert_eq!(state(&mut other, &a2.qp), QpState::ReadyToSend);
    assert_eq!(other.get_async_event(a2.ctx).unwrap(), None);
    srq_recvs(&mut other, &s2, &a2, 5, 1).unwrap();
    send64(&mut third, &z2, 6);
    let wc = completions(&mut other, &a2.cq, 1);
    assert_eq!(wc.len(), 1, "the other SRQ still takes a SEND");
    assert_eq!((wc[0].wr_id, wc[0].status), (5, WcStatus::Success));
    assert!(fab.log().contains("malformed"), "{}", fab.log());
}

/// A UD QP on `end`'s PD and CQ (in `e`), in RTS with Q_Key 0x11.
fn ud_qp(e: &mut Engine, at: &End) -> (QpHandle, u32) {
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&at.cq),
        recv_cq: Some(&at.cq),
        cap: QpCap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Ud,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&at.pd),
        ..QpInitAttrEx::default()
    };
    let qp = e.create_qp_ex(&at.ctx, &mut attr).unwrap();
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qkey: 0x11,
        ..QpAttr::default()
    };
    e.modify_qp(
        &qp,
        &init,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
    )
    .unwrap();
    let rtr = QpAttr {
        qp_state: QpState::ReadyToReceive,
        ..QpAttr::default()
    };
    e.modify_qp(&qp, &rtr, QpAttrMask::STATE).unwrap();
    let rts = QpAttr {
        qp_state: QpState::ReadyToSend,
        sq_psn: 1,
        ..QpAttr::default()
    };
    e.modify_qp(&qp, &rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
        .unwrap();
    let qpn = e.qp_num(&qp).unwrap();
    (qp, qpn)
}

/// A signalled UD SEND (`wr_id` 8) of `sg` through `ah` to QP `qpn`, Q_Key 0x11.
fn ud_send<'a>(ah: &'a AhHandle, sg: &'a [Sge], qpn: u32) -> SendWr<'a, SimVerbs> {
    SendWr {
        wr_id: 8,
        sg_list: sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ud: Some(UdInfo {
            ah,
            remote_qpn: qpn,
            remote_qkey: 0x11,
        }),
        ..SendWr::default()
    }
}

/// Goal: a UD SEND naming an address handle of the process goes through
/// the submission ring and arrives; one naming a destroyed handle goes by
/// call and is refused there, as in process. Method: two UD QPs on two
/// connections; the receiver posts a receive of 40 + 64 bytes; the sender
/// SENDs 64 bytes through an AH to it (the ring's producer count grows;
/// the receive completes with the GRH's 40 bytes and the payload); after
/// `ibv_destroy_ah` a SEND naming it fails with EINVAL and writes nothing
/// to the ring.
#[test]
fn ud_sends_with_an_address_handle_go_through_the_ring() {
    let fab = Fabric::start("ud-ring");
    let mut e = fab.engine();
    let mut other = fab.engine();
    let mut src = vec![0x3cu8; 4096];
    let mut dst = vec![0u8; 4096];
    let a = end(&mut e, 0, &mut src);
    let z = end(&mut other, 1, &mut dst);
    let (uqa, _) = ud_qp(&mut e, &a);
    let (uqz, qpn_z) = ud_qp(&mut other, &z);
    let rsg = [Sge {
        addr: z.addr,
        length: 40 + 64,
        lkey: z.lkey,
    }];
    // SAFETY: the buffer outlives the request (polled below).
    unsafe {
        other.post_recv(
            &uqz,
            &[RecvWr {
                wr_id: 7,
                sg_list: &rsg,
            }],
        )
    }
    .unwrap();
    let ah = e
        .create_ah(
            &a.pd,
            &AhAttr {
                dlid: z.lid,
                port_num: 1,
                ..AhAttr::default()
            },
        )
        .unwrap();
    let sg = [Sge {
        addr: a.addr,
        length: 64,
        lkey: a.lkey,
    }];
    let before = produced(&e);
    // SAFETY: the buffer outlives the request (polled below).
    unsafe { e.post_send(&uqa, &[ud_send(&ah, &sg, qpn_z)]) }.unwrap();
    assert!(produced(&e) > before, "the UD SEND went into the ring");
    let sent = completions(&mut e, &a.cq, 1);
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].wr_id, sent[0].status), (8, WcStatus::Success));
    let got = completions(&mut other, &z.cq, 1);
    assert_eq!(got.len(), 1, "the UD SEND arrives");
    assert_eq!(
        (got[0].wr_id, got[0].status, got[0].byte_len),
        (7, WcStatus::Success, 40 + 64)
    );
    assert!(
        dst[40..104].iter().all(|&b| b == 0x3c),
        "the payload landed"
    );

    e.destroy_ah(&ah).unwrap();
    let at = produced(&e);
    // SAFETY: as above.
    let err = unsafe { e.post_send(&uqa, &[ud_send(&ah, &sg, qpn_z)]) }.unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    assert_eq!(produced(&e), at, "a refused SEND writes no record");
}
