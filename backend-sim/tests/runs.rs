//! Runs of packets (world/exec/run.rs): the middle packets of an in-order RC
//! message are taken in one step of the event loop, and the run stops
//! wherever packet-by-packet handling would have seen something else: the
//! horizon of `AdvanceNs`, a link going down, the end of the message.
#![allow(missing_docs)]

mod common;

use backend_sim::fabric::FabricTrace;
use backend_sim::{MrHandle, SimConfig, TraceEvent};
use common::datapath::*;
use verbs_api::*;

/// 16 KiB over MTU 1024: 16 packets.
const LEN: u32 = 16 * 1024;

/// Request packets delivered to `qpn`, with their times, in trace order.
fn delivered(pair: &Pair, qpn: u32) -> Vec<(u64, u32)> {
    pair.sim
        .trace()
        .records()
        .iter()
        .filter_map(|r| match r.event {
            TraceEvent::Packet(FabricTrace::Delivered { at, packet })
                if packet.destination.qpn == qpn && packet.opcode.is_request() =>
            {
                Some((at.as_nanos(), packet.offset))
            }
            _ => None,
        })
        .collect()
}

/// Placements at `qpn` (offset, length), in trace order.
fn placements(pair: &Pair, qpn: u32) -> Vec<(u32, u32)> {
    pair.sim
        .trace()
        .records()
        .iter()
        .filter_map(|r| match r.event {
            TraceEvent::Placement {
                qpn: q,
                offset,
                len,
                ..
            } if q == qpn => Some((offset, len)),
            _ => None,
        })
        .collect()
}

/// An RC pair at MTU 1024 with `LEN`-byte MRs on both sides (the source
/// filled with a pattern), one receive posted at B and one SEND of `LEN`
/// bytes posted at A.
fn one_send() -> (Pair, MrHandle, MrHandle) {
    let mut pair = rc_pair(SimConfig::default(), &RcParams::default());
    require_data_path(&mut pair.sim);
    let (a, b) = (pair.a, pair.b);
    let (src, src_info) = reg_all(&mut pair.sim, a.pd, LEN as usize);
    let (dst, dst_info) = reg_all(&mut pair.sim, b.pd, LEN as usize);
    for (i, byte) in pair.sim.mr_bytes_mut(&src).unwrap().iter_mut().enumerate() {
        *byte = (i % 251) as u8 + 1;
    }
    let rsge = [sge(&dst_info, 0, LEN)];
    post_recv(
        &mut pair.sim,
        b.qp,
        &[RecvWr {
            wr_id: 7,
            sg_list: &rsge,
        }],
    )
    .unwrap();
    let ssge = [sge(&src_info, 0, LEN)];
    let wr = SendWr {
        wr_id: 1,
        sg_list: &ssge,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..SendWr::default()
    };
    post_send(&mut pair.sim, a.qp, &[wr]).unwrap();
    (pair, src, dst)
}

/// Bytes of `dst` equal to the source pattern, counted from the start.
fn placed_prefix(pair: &Pair, dst: &MrHandle) -> usize {
    let bytes = pair.sim.mr_bytes(dst).unwrap();
    bytes
        .iter()
        .enumerate()
        .take_while(|&(i, &b)| b == (i % 251) as u8 + 1)
        .count()
}

#[test]
fn the_horizon_cuts_a_run_where_packet_by_packet_handling_would() {
    // Goal: advancing virtual time part way through a message delivers and
    // places exactly the packets due by then, never one past the horizon.
    // Method: a 16-packet SEND; advance 97 ns at a time (about two packets) until the receive
    // completes; after each step every delivered packet is due by now, the
    // bytes placed are exactly the delivered packets' (in order), and the
    // trace has one placement per delivered packet.
    let (mut pair, _src, dst) = one_send();
    let b = pair.b;
    let mut steps = 0;
    let mut partial_seen = false;
    loop {
        let horizon = pair.sim.now_ns() + 97;
        pair.sim
            .sim_control(SimCommand::AdvanceNs(97))
            .expect("advance");
        assert_eq!(pair.sim.now_ns(), horizon);
        let got = delivered(&pair, b.qpn);
        assert!(
            got.iter().all(|&(at, _)| at <= horizon),
            "{got:?} past {horizon}"
        );
        let offsets: Vec<u32> = got.iter().map(|&(_, off)| off).collect();
        let expect: Vec<u32> = (0..got.len() as u32).map(|k| k * 1024).collect();
        assert_eq!(offsets, expect);
        let placed = placed_prefix(&pair, &dst);
        assert_eq!(placed, (got.len() * 1024).min(LEN as usize));
        let p = placements(&pair, b.qpn);
        assert_eq!(p.len(), got.len());
        partial_seen |= (2..16).contains(&got.len());
        if got.len() == 16 {
            break;
        }
        steps += 1;
        assert!(steps < 100_000, "the message never arrived");
    }
    assert!(partial_seen, "no step ended in the middle of the message");
    let wcs = drain(&mut pair.sim, b.cq, 4);
    assert_eq!(wcs.len(), 1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].byte_len),
        (7, WcStatus::Success, LEN)
    );
}

#[test]
fn a_link_down_in_the_middle_of_a_message_ends_the_run() {
    // Goal: a link taken down while a message is on the wire loses the
    // packets not yet arrived (none of them is placed early), and
    // go-back-N completes the message once the link is back.
    // Method: advance until 4 of the 16 packets arrived; take B's port
    // down, run 1 µs, bring it back; the packets due in that microsecond
    // are dropped, not placed; then the SEND and the receive complete with
    // every byte in place.
    let (mut pair, _src, dst) = one_send();
    let b = pair.b;
    while delivered(&pair, b.qpn).len() < 4 {
        pair.sim.sim_control(SimCommand::AdvanceNs(10)).unwrap();
    }
    let arrived = delivered(&pair, b.qpn).len();
    assert!(arrived < 16);
    let link = |up| SimCommand::Link {
        device: b.index as u32,
        port: 1,
        up,
    };
    pair.sim.sim_control(link(false)).unwrap();
    pair.sim.sim_control(SimCommand::AdvanceNs(1_000)).unwrap();
    assert_eq!(delivered(&pair, b.qpn).len(), arrived);
    assert_eq!(placed_prefix(&pair, &dst), arrived * 1024);
    let lost = pair
        .sim
        .trace()
        .records()
        .iter()
        .filter(|r| matches!(r.event, TraceEvent::Packet(FabricTrace::Dropped { .. })))
        .count();
    assert!(lost > 0, "nothing was lost while the link was down");
    pair.sim.sim_control(link(true)).unwrap();
    let wcs = drain(&mut pair.sim, b.cq, 4);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (7, WcStatus::Success));
    assert_eq!(placed_prefix(&pair, &dst), LEN as usize);
    let sent = drain(&mut pair.sim, pair.a.cq, 4);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].status, WcStatus::Success);
}
