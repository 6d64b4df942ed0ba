//! `MLX5DV_QP_CREATE_OOO_DP` on the simulator (dc-and-mlx5dv.md §5): the
//! torn-read bug class it exposes, in-order completions, one-sided OOO,
//! and determinism of a DC + OOO workload.

#![allow(unsafe_code)]

mod common;

use backend_sim::{DeviceProfile, MrHandle, QpHandle, SimConfig, SimVerbs, TraceEvent};
use common::datapath::*;
use verbs_api::*;

const LEN: usize = 64 * 1024;

fn config(seed: u64, window: u32) -> SimConfig {
    SimConfig {
        seed,
        devices: vec![DeviceProfile::connectx7(), DeviceProfile::connectx7()],
        ooo_window: window,
        ..SimConfig::default()
    }
}

/// An RC QP on device `index`, made with `mlx5dv_create_qp` (OOO or not).
fn dv_rc(sim: &mut SimVerbs, index: usize, ooo: bool) -> End {
    dv_qp(sim, index, QpType::Rc, ooo)
}

/// A QP of `qp_type` on device `index`, made with `mlx5dv_create_qp`.
fn dv_qp(sim: &mut SimVerbs, index: usize, qp_type: QpType, ooo: bool) -> End {
    dv_qp_sges(sim, index, qp_type, ooo, 1)
}

/// As [`dv_qp`], with `sges` SGEs per work request on either queue.
fn dv_qp_sges(sim: &mut SimVerbs, index: usize, qp_type: QpType, ooo: bool, sges: u32) -> End {
    let (ctx, pd, cq, lid, gid, grh) = open_end(sim, index);
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&pd),
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: sges,
            max_recv_sge: sges,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    let dv = Mlx5QpInitAttr {
        comp_mask: Mlx5QpInitAttrMask::QP_CREATE_FLAGS,
        create_flags: if ooo {
            Mlx5QpCreateFlags::OOO_DP
        } else {
            Mlx5QpCreateFlags::empty()
        },
        ..Mlx5QpInitAttr::default()
    };
    let qp = sim.mlx5dv_create_qp(&ctx, &mut attr, &dv).unwrap();
    let qpn = sim.qp_num(&qp).unwrap();
    End {
        index,
        ctx,
        pd,
        cq,
        qp,
        qpn,
        lid,
        gid,
        grh,
    }
}

fn pair(seed: u64, window: u32, ooo_a: bool, ooo_b: bool) -> Pair {
    let mut sim = SimVerbs::new(config(seed, window));
    let a = dv_rc(&mut sim, 0, ooo_a);
    let b = dv_rc(&mut sim, 1, ooo_b);
    let p = RcParams {
        path_mtu: Mtu::Mtu4096,
        ..RcParams::default()
    };
    rc_to_rtr(&mut sim, &a, &b, &p, 0);
    rc_to_rtr(&mut sim, &b, &a, &p, 0);
    rc_to_rts(&mut sim, &a, &p, 0);
    rc_to_rts(&mut sim, &b, &p, 0);
    Pair { sim, a, b }
}

fn write(sim: &mut SimVerbs, qp: QpHandle, src: &MrInfo, dst: &MrInfo, len: u32) {
    let sges = [sge(src, 0, len)];
    let wr = SendWr::<SimVerbs> {
        wr_id: 1,
        sg_list: &sges,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        },
        ..SendWr::default()
    };
    post_send(sim, qp, &[wr]).unwrap();
}

/// Posts one 64 KiB RDMA WRITE (16 packets of 4 KiB) and polls the last
/// byte of the target in 50 ns steps of virtual time, as an application
/// spinning on a "last byte written" flag would. Returns whether, when the
/// last byte first showed up, some earlier byte was still missing (torn),
/// and the final check that every byte landed.
fn poll_last_byte(seed: u64, ooo: bool) -> bool {
    let Pair { mut sim, a, b } = pair(seed, 8, ooo, ooo);
    let (src_mr, src) = reg_all(&mut sim, a.pd, LEN);
    let (dst_mr, dst) = reg_all(&mut sim, b.pd, LEN);
    sim.mr_bytes_mut(&src_mr).unwrap().fill(0xab);
    write(&mut sim, a.qp, &src, &dst, LEN as u32);
    let torn = last_byte_torn(&mut sim, &dst_mr);
    let wc = drain(&mut sim, a.cq, 4);
    assert_eq!(wc.len(), 1);
    assert_eq!(wc[0].status, WcStatus::Success);
    assert!(sim.mr_bytes(&dst_mr).unwrap().iter().all(|&x| x == 0xab));
    torn
}

fn last_byte_torn(sim: &mut SimVerbs, dst: &MrHandle) -> bool {
    for _ in 0..1_000_000 {
        let bytes = sim.mr_bytes(dst).unwrap();
        if bytes[LEN - 1] != 0 {
            return bytes.contains(&0);
        }
        assert!(sim.world_mut().advance_ns(50));
    }
    panic!("the last byte never arrived");
}

// Goal: the bug class OOO_DP exists to catch (man page: "Polling on any
// memory that is used by the device to scatter data, is not recommended").
// Method: poll the last byte of a 64 KiB WRITE under 16 seeds; with OOO the
// last byte shows up before the rest in some of them, never in order.
#[test]
fn polling_last_byte_sees_torn_data_only_under_ooo() {
    let torn_ooo = (0..16).filter(|&s| poll_last_byte(s, true)).count();
    let torn_in_order = (0..16).filter(|&s| poll_last_byte(s, false)).count();
    assert_eq!(torn_in_order, 0, "an in-order QP never shows torn data");
    assert!(
        torn_ooo >= 8,
        "OOO showed torn data in only {torn_ooo} of 16 seeds"
    );
    // Seed 0 is the script's case (conformance/scripts/ooo/torn_last_byte.verbs).
    assert!(poll_last_byte(0, true));
}

/// Moves one `len`-byte message between two OOO RC QPs (reorder window
/// `window`) from a gather list over two MRs, as a WRITE or as a SEND into a
/// receive WQE scattered over two MRs; returns (bytes sent, bytes landed).
fn ooo_message(window: u32, send: bool, seed: u64) -> (Vec<u8>, Vec<u8>) {
    const N: usize = 50 * 4096 + 123;
    let mut sim = SimVerbs::new(config(seed, window));
    let a = dv_qp_sges(&mut sim, 0, QpType::Rc, true, 4);
    let b = dv_qp_sges(&mut sim, 1, QpType::Rc, true, 4);
    let p = RcParams {
        path_mtu: Mtu::Mtu4096,
        ..RcParams::default()
    };
    rc_to_rtr(&mut sim, &a, &b, &p, 0);
    rc_to_rtr(&mut sim, &b, &a, &p, 0);
    rc_to_rts(&mut sim, &a, &p, 0);
    rc_to_rts(&mut sim, &b, &p, 0);
    let (s1, i1) = reg_all(&mut sim, a.pd, N);
    let (s2, i2) = reg_all(&mut sim, a.pd, N);
    for (k, x) in sim.mr_bytes_mut(&s1).unwrap().iter_mut().enumerate() {
        *x = (k * 7 % 251) as u8;
    }
    for (k, x) in sim.mr_bytes_mut(&s2).unwrap().iter_mut().enumerate() {
        *x = (k * 13 % 241 + 1) as u8;
    }
    let gather = [
        sge(&i1, 5, 70_000),
        sge(&i2, 0, 100_000),
        sge(&i1, 100_000, (N - 170_000) as u32),
    ];
    let mut sent = Vec::new();
    sent.extend_from_slice(&sim.mr_bytes(&s1).unwrap()[5..70_005]);
    sent.extend_from_slice(&sim.mr_bytes(&s2).unwrap()[..100_000]);
    sent.extend_from_slice(&sim.mr_bytes(&s1).unwrap()[100_000..100_000 + N - 170_000]);
    let (d1, j1) = reg_all(&mut sim, b.pd, N + 8);
    let (d2, j2) = reg_all(&mut sim, b.pd, N + 8);
    let scatter = [
        sge(&j1, 0, 1_000),
        sge(&j2, 3, 150_000),
        sge(&j1, 1_000, (N - 151_000) as u32),
    ];
    if send {
        let rwr = RecvWr {
            wr_id: 9,
            sg_list: &scatter,
        };
        post_recv(&mut sim, b.qp, &[rwr]).unwrap();
    }
    let wr = SendWr::<SimVerbs> {
        wr_id: 1,
        sg_list: &gather,
        opcode: if send {
            WrOpcode::Send
        } else {
            WrOpcode::RdmaWrite
        },
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: j2.addr + 3,
            rkey: j2.rkey,
        },
        ..SendWr::default()
    };
    post_send(&mut sim, a.qp, &[wr]).unwrap();
    let wc = drain(&mut sim, a.cq, 4);
    assert_eq!(wc.len(), 1);
    assert_eq!(wc[0].status, WcStatus::Success);
    let landed = if send {
        let wc = drain(&mut sim, b.cq, 4);
        assert_eq!((wc.len(), wc[0].status), (1, WcStatus::Success));
        let mut v = sim.mr_bytes(&d1).unwrap()[..1_000].to_vec();
        v.extend_from_slice(&sim.mr_bytes(&d2).unwrap()[3..150_003]);
        v.extend_from_slice(&sim.mr_bytes(&d1).unwrap()[1_000..1_000 + N - 151_000]);
        v
    } else {
        sim.mr_bytes(&d2).unwrap()[3..3 + N].to_vec()
    };
    (sent, landed)
}

// Goal: the packets of an OOO message the event loop takes in runs
// (world/exec/ooo_run.rs: placed together once the run ends, cut out of
// the whole message's pieces) land every byte where per-packet placement
// would. Method: a 51-packet WRITE and SEND gathered from two MRs (and, for
// the SEND, scattered over two), windows 8 and 64, several seeds.
#[test]
fn ooo_runs_place_every_byte() {
    for window in [8, 64] {
        for send in [false, true] {
            for seed in 0..4 {
                let (sent, landed) = ooo_message(window, send, seed);
                assert!(
                    sent == landed,
                    "window {window}, send {send}, seed {seed}: bytes differ"
                );
            }
        }
    }
}

// Goal: §5.1 "must be set on both sides": one-sided OOO places nothing.
// Method: OOO requester → plain responder and the reverse; the WRITE fails
// with REM_INV_REQ_ERR and the target stays zero.
#[test]
fn one_sided_ooo_is_refused_and_places_nothing() {
    for (oa, ob) in [(true, false), (false, true)] {
        let Pair { mut sim, a, b } = pair(1, 8, oa, ob);
        let (src_mr, src) = reg_all(&mut sim, a.pd, LEN);
        let (dst_mr, dst) = reg_all(&mut sim, b.pd, LEN);
        sim.mr_bytes_mut(&src_mr).unwrap().fill(0xcd);
        write(&mut sim, a.qp, &src, &dst, 8192);
        let wc = drain(&mut sim, a.cq, 4);
        assert_eq!(wc[0].status, WcStatus::RemInvReqErr, "ooo a={oa} b={ob}");
        assert!(sim.mr_bytes(&dst_mr).unwrap().iter().all(|&x| x == 0));
    }
}

/// The placement offsets of a run, in trace order.
fn placements(sim: &SimVerbs) -> Vec<u32> {
    sim.trace()
        .records()
        .iter()
        .filter_map(|r| match r.event {
            TraceEvent::Placement { offset, .. } => Some(offset),
            _ => None,
        })
        .collect()
}

/// OOO RC traffic: a 64 KiB WRITE, four SENDs into four posted receives,
/// a 32 KiB READ; returns the trace, placements, receive wr_ids in
/// completion order.
fn ooo_workload(seed: u64) -> (String, Vec<u32>, Vec<u64>) {
    let Pair { mut sim, a, b } = pair(seed, 16, true, true);
    let (src_mr, src) = reg_all(&mut sim, a.pd, LEN);
    let (_dst_mr, dst) = reg_all(&mut sim, b.pd, LEN);
    let (_rbuf, rinfo) = reg_all(&mut sim, b.pd, LEN);
    sim.mr_bytes_mut(&src_mr).unwrap().fill(0x11);
    for i in 0..4u64 {
        let s = [sge(&rinfo, i * 8192, 8192)];
        post_recv(
            &mut sim,
            b.qp,
            &[RecvWr {
                wr_id: 100 + i,
                sg_list: &s,
            }],
        )
        .unwrap();
    }
    write(&mut sim, a.qp, &src, &dst, LEN as u32);
    for i in 0..4u64 {
        let s = [sge(&src, 0, 6000 + i as u32)];
        let wr = SendWr::<SimVerbs> {
            wr_id: 10 + i,
            sg_list: &s,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..SendWr::default()
        };
        post_send(&mut sim, a.qp, &[wr]).unwrap();
    }
    let s = [sge(&src, 0, 32768)];
    let read = SendWr::<SimVerbs> {
        wr_id: 20,
        sg_list: &s,
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        },
        ..SendWr::default()
    };
    post_send(&mut sim, a.qp, &[read]).unwrap();
    let sent = drain(&mut sim, a.cq, 16);
    // Requester completions in posting order, all successful.
    let ids: Vec<u64> = sent.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![1, 10, 11, 12, 13, 20]);
    assert!(sent.iter().all(|w| w.status == WcStatus::Success));
    let recv = drain(&mut sim, b.cq, 16);
    assert_eq!(recv.len(), 4);
    // Completions in message order (byte_len grows), each naming the WQE
    // it consumed, every WQE once.
    let lens: Vec<u32> = recv.iter().map(|w| w.byte_len).collect();
    assert_eq!(lens, vec![6000, 6001, 6002, 6003]);
    let mut got: Vec<u64> = recv.iter().map(|w| w.wr_id).collect();
    let order = got.clone();
    got.sort_unstable();
    assert_eq!(got, vec![100, 101, 102, 103]);
    (sim.trace().render(), placements(&sim), order)
}

// Goal: determinism of OOO placement; the seed drives it.
// Method: the same seed twice gives identical traces; several seeds give
// different placement orders and receive-WQE choices.
#[test]
fn ooo_placement_is_seeded_and_deterministic() {
    let (t1, p1, _) = ooo_workload(7);
    let (t2, p2, _) = ooo_workload(7);
    assert_eq!(t1, t2);
    assert_eq!(p1, p2);
    let orders: Vec<Vec<u32>> = (0..4).map(|s| ooo_workload(s).1).collect();
    assert!(
        orders.iter().any(|o| *o != orders[0]),
        "placement ignores the seed"
    );
    let wqes: Vec<Vec<u64>> = (0..8).map(|s| ooo_workload(s).2).collect();
    assert!(
        wqes.iter().any(|o| *o != vec![100, 101, 102, 103]),
        "receive WQEs always consumed in order"
    );
}

/// Two OOO (or plain) UD QPs made with `mlx5dv_create_qp`, in RTS, Q_Key 7.
fn ud_dv_pair(seed: u64, ooo: bool) -> Pair {
    let mut sim = SimVerbs::new(config(seed, 8));
    let a = dv_qp(&mut sim, 0, QpType::Ud, ooo);
    let b = dv_qp(&mut sim, 1, QpType::Ud, ooo);
    for end in [&a, &b] {
        let init = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            qkey: 7,
            ..QpAttr::default()
        };
        let mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY;
        sim.modify_qp(&end.qp, &init, mask).unwrap();
        let rtr = QpAttr {
            qp_state: QpState::ReadyToReceive,
            ..QpAttr::default()
        };
        sim.modify_qp(&end.qp, &rtr, QpAttrMask::STATE).unwrap();
        let rts = QpAttr {
            qp_state: QpState::ReadyToSend,
            ..QpAttr::default()
        };
        sim.modify_qp(&end.qp, &rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
            .unwrap();
    }
    Pair { sim, a, b }
}

/// Eight UD SENDs of 100 + i bytes (byte value i + 1) into eight receive
/// WQEs of 256 bytes each (wr_id 200 + j at offset 256·j); returns the
/// receive completions' wr_ids in completion order, after checking that
/// each completion's bytes landed in the buffer of the WQE it names.
fn ud_receive_order(seed: u64, ooo: bool) -> Vec<u64> {
    let Pair { mut sim, a, b } = ud_dv_pair(seed, ooo);
    let (src_mr, src) = reg_all(&mut sim, a.pd, 4096);
    let (dst_mr, dst) = reg_all(&mut sim, b.pd, 8 * 256);
    for i in 0..8u64 {
        let s = [sge(&dst, i * 256, 256)];
        post_recv(
            &mut sim,
            b.qp,
            &[RecvWr {
                wr_id: 200 + i,
                sg_list: &s,
            }],
        )
        .unwrap();
        sim.mr_bytes_mut(&src_mr).unwrap()[i as usize * 512..][..512].fill(i as u8 + 1);
    }
    let ah = sim.create_ah(&a.pd, &av_to(&b)).unwrap();
    for i in 0..8u64 {
        let s = [sge(&src, i * 512, 100 + i as u32)];
        let wr = SendWr::<SimVerbs> {
            wr_id: i,
            sg_list: &s,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ud: Some(UdInfo {
                ah: &ah,
                remote_qpn: b.qpn,
                remote_qkey: 7,
            }),
            ..SendWr::default()
        };
        post_send(&mut sim, a.qp, &[wr]).unwrap();
    }
    let sent = drain(&mut sim, a.cq, 16);
    assert_eq!(sent.len(), 8);
    assert!(sent.iter().all(|w| w.status == WcStatus::Success));
    let recv = drain(&mut sim, b.cq, 16);
    assert_eq!(recv.len(), 8);
    let bytes = sim.mr_bytes(&dst_mr).unwrap();
    for (k, wc) in recv.iter().enumerate() {
        // Completions in message order: message k is 100 + k bytes + GRH.
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.byte_len, 40 + 100 + k as u32, "seed {seed}");
        let slot = (wc.wr_id - 200) as usize * 256;
        let payload = &bytes[slot + 40..slot + 40 + 100 + k];
        assert!(
            payload.iter().all(|&x| x == k as u8 + 1),
            "seed {seed}: wrong WQE's buffer"
        );
    }
    recv.iter().map(|w| w.wr_id).collect()
}

// Goal: §5.1 on UD: "a posted receive WR may be consumed by any arriving
// message"; completions stay in message order and name the WQE used.
// Method: eight UD SENDs into eight WQEs under 8 seeds: some seed consumes
// them out of posting order with OOO, none without; each completion's data
// is in the buffer of the WQE it names.
#[test]
fn ud_receive_wqes_are_consumed_out_of_order_only_under_ooo() {
    let in_order: Vec<u64> = (200..208).collect();
    for seed in 0..8 {
        assert_eq!(ud_receive_order(seed, false), in_order, "seed {seed}");
    }
    let shuffled = (0..8)
        .filter(|&s| ud_receive_order(s, true) != in_order)
        .count();
    assert!(shuffled > 0, "OOO UD never consumed a WQE out of order");
    assert_eq!(ud_receive_order(3, true), ud_receive_order(3, true));
}
