//! Single-packet RDMA WRITEs taken back to back at the responder
//! (world/exec/fast.rs, `absorb_writes`): their copies are made together at
//! the end of a batch, so these tests check that every byte still lands as
//! if each WRITE were placed on its own arrival, in order: later WRITEs to
//! the same bytes win, and a READ or a SEND posted behind them sees the
//! bytes they left.
#![allow(missing_docs)]

mod common;

use backend_sim::SimConfig;
use common::datapath::*;
use verbs_api::*;

/// Bytes per WRITE.
const PIECE: u32 = 64;
/// Destination slots the WRITEs cycle over (each written many times).
const SLOTS: u64 = 4;

/// Fills the source MR of a pair with a pattern where every 64-byte piece
/// differs from every other.
fn pattern(i: usize) -> u8 {
    ((i / PIECE as usize) * 7 + i % PIECE as usize) as u8 ^ 0x5a
}

#[test]
fn overlapping_writes_in_one_post_list_land_in_order() {
    // Goal: the last WRITE to a slot leaves its bytes there, however the
    // responder batches the WRITEs and their copies.
    // Method: 48 unsignalled 64 B WRITEs (the last signalled), piece i of
    // the source to slot i % 4 of the destination, posted as lists of 16;
    // afterwards slot k holds piece 44 + k, byte for byte.
    let p = RcParams {
        max_send_wr: 64,
        ..RcParams::default()
    };
    let mut pair = rc_pair(SimConfig::default(), &p);
    require_data_path(&mut pair.sim);
    let (a, b) = (pair.a, pair.b);
    let (src, src_info) = reg_all(&mut pair.sim, a.pd, 48 * PIECE as usize);
    let (dst, dst_info) = reg_all(&mut pair.sim, b.pd, (SLOTS * u64::from(PIECE)) as usize);
    for (i, byte) in pair.sim.mr_bytes_mut(&src).unwrap().iter_mut().enumerate() {
        *byte = pattern(i);
    }
    let sges: Vec<[Sge; 1]> = (0..48u64)
        .map(|i| [sge(&src_info, i * u64::from(PIECE), PIECE)])
        .collect();
    for list in 0..3usize {
        let wrs: Vec<SendWr<'_, _>> = (list * 16..list * 16 + 16)
            .map(|i| SendWr {
                wr_id: i as u64,
                sg_list: &sges[i],
                opcode: WrOpcode::RdmaWrite,
                send_flags: if i == 47 {
                    SendFlags::SIGNALED
                } else {
                    SendFlags::empty()
                },
                rdma: RdmaInfo {
                    remote_addr: dst_info.addr + (i as u64 % SLOTS) * u64::from(PIECE),
                    rkey: dst_info.rkey,
                },
                ..SendWr::default()
            })
            .collect();
        post_send(&mut pair.sim, a.qp, &wrs).unwrap();
    }
    let wcs = drain(&mut pair.sim, a.cq, 1);
    assert_eq!(wcs.len(), 1, "seed {}", pair.sim.seed());
    assert_eq!((wcs[0].wr_id, wcs[0].status), (47, WcStatus::Success));
    let dst_bytes = pair.sim.mr_bytes(&dst).unwrap();
    for k in 0..SLOTS as usize {
        let piece = 44 + k;
        let want: Vec<u8> = (0..PIECE as usize)
            .map(|j| pattern(piece * PIECE as usize + j))
            .collect();
        let at = k * PIECE as usize;
        assert_eq!(
            &dst_bytes[at..at + PIECE as usize],
            &want[..],
            "slot {k} does not hold piece {piece} (seed {})",
            pair.sim.seed()
        );
    }
}

#[test]
fn a_read_behind_writes_sees_their_bytes() {
    // Goal: a READ posted in the same list right behind WRITEs to the
    // bytes it reads returns what the WRITEs left, not older bytes.
    // Method: 15 WRITEs of 64 B, piece i into slot i % 4 of the remote MR
    // (zeroed), then a READ of all four slots into a zeroed local area;
    // the READ returns pieces 12..15 in slots 0..3.
    let mut pair = rc_pair(SimConfig::default(), &RcParams::default());
    require_data_path(&mut pair.sim);
    let (a, b) = (pair.a, pair.b);
    let read_at = 16 * u64::from(PIECE);
    let total = read_at + SLOTS * u64::from(PIECE);
    let (src, src_info) = reg_all(&mut pair.sim, a.pd, total as usize);
    let (_dst, dst_info) = reg_all(&mut pair.sim, b.pd, (SLOTS * u64::from(PIECE)) as usize);
    for (i, byte) in pair.sim.mr_bytes_mut(&src).unwrap()[..read_at as usize]
        .iter_mut()
        .enumerate()
    {
        *byte = pattern(i);
    }
    let sges: Vec<[Sge; 1]> = (0..15u64)
        .map(|i| [sge(&src_info, i * u64::from(PIECE), PIECE)])
        .collect();
    let read_sge = [sge(&src_info, read_at, (SLOTS * u64::from(PIECE)) as u32)];
    let mut wrs: Vec<SendWr<'_, _>> = (0..15usize)
        .map(|i| SendWr {
            wr_id: i as u64,
            sg_list: &sges[i],
            opcode: WrOpcode::RdmaWrite,
            rdma: RdmaInfo {
                remote_addr: dst_info.addr + (i as u64 % SLOTS) * u64::from(PIECE),
                rkey: dst_info.rkey,
            },
            ..SendWr::default()
        })
        .collect();
    wrs.push(SendWr {
        wr_id: 99,
        sg_list: &read_sge,
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: dst_info.addr,
            rkey: dst_info.rkey,
        },
        ..SendWr::default()
    });
    post_send(&mut pair.sim, a.qp, &wrs).unwrap();
    let wcs = drain(&mut pair.sim, a.cq, 1);
    assert_eq!(wcs.len(), 1, "seed {}", pair.sim.seed());
    assert_eq!((wcs[0].wr_id, wcs[0].status), (99, WcStatus::Success));
    let got = &pair.sim.mr_bytes(&src).unwrap()[read_at as usize..total as usize];
    for k in 0..SLOTS as usize {
        // The last WRITE into slot k: the largest i < 15 with i % 4 == k.
        let piece = (0..15usize).filter(|i| i % 4 == k).max().unwrap();
        let want: Vec<u8> = (0..PIECE as usize)
            .map(|j| pattern(piece * PIECE as usize + j))
            .collect();
        let at = k * PIECE as usize;
        assert_eq!(
            &got[at..at + PIECE as usize],
            &want[..],
            "READ slot {k}: not piece {piece} (seed {})",
            pair.sim.seed()
        );
    }
}
