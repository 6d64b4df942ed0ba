//! The workloads the determinism checks run twice: an RC mix, an RC mix
//! under seeded faults, and a UD pair with a drop rule.

use super::*;

/// One RC work request of a workload.
#[derive(Clone, Copy, Debug)]
pub(super) enum RcOp {
    Send { len: u32 },
    SendImm { len: u32, imm: u32 },
    Write { len: u32 },
    WriteImm { len: u32, imm: u32 },
    Read { len: u32 },
    CmpSwp { hit: bool },
    FetchAdd { add: u64 },
}

impl RcOp {
    fn len(self) -> u32 {
        match self {
            Self::Send { len }
            | Self::SendImm { len, .. }
            | Self::Write { len }
            | Self::WriteImm { len, .. }
            | Self::Read { len } => len,
            Self::CmpSwp { .. } | Self::FetchAdd { .. } => 8,
        }
    }

    fn consumes_recv(self) -> bool {
        matches!(
            self,
            Self::Send { .. } | Self::SendImm { .. } | Self::WriteImm { .. }
        )
    }
}

/// `count` operations with sizes from 0 to 3 × `mtu` + 100 (boundaries
/// favoured), drawn from `gen`.
pub(super) fn rc_ops(gen: &mut Gen, count: usize, mtu: u32) -> Vec<RcOp> {
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let len = match gen.below(6) {
            0 => [0, 1, mtu - 1, mtu, mtu + 1, 2 * mtu, 3 * mtu][gen.below(7) as usize],
            1 => 3 * mtu + 1 + gen.below(100) as u32,
            _ => gen.below(u64::from(3 * mtu + 100)) as u32,
        };
        let imm = gen.next() as u32;
        ops.push(match gen.below(7) {
            0 => RcOp::Send { len },
            1 => RcOp::SendImm { len, imm },
            2 => RcOp::Write { len },
            3 => RcOp::WriteImm { len, imm },
            4 => RcOp::Read { len },
            5 => RcOp::CmpSwp {
                hit: gen.below(2) == 0,
            },
            _ => RcOp::FetchAdd { add: gen.next() },
        });
    }
    ops
}

/// Everything a run leaves behind that must not depend on anything but the
/// seed and the calls.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) trace: String,
    pub(super) completions: Vec<Wc>,
    pub(super) memory: Vec<Vec<u8>>,
    pub(super) now_ns: u64,
}

/// The value an atomic's target word starts with.
pub(super) const ATOMIC_INITIAL: u64 = 0x0123_4567_89ab_cdef;

pub(super) fn rounded8(n: u32) -> u64 {
    u64::from(n).div_ceil(8) * 8
}

pub(super) fn mr_bytes(sim: &SimVerbs, mr: &MrHandle) -> Vec<u8> {
    sim.mr_bytes(mr).unwrap().to_vec()
}

/// Runs `ops` from QP `a` (device 0) to QP `b` (device 1) with `faults`
/// installed on every packet, then drains both CQs.
pub(super) fn run_rc(
    seed: u64,
    p: &RcParams,
    ops: &[RcOp],
    faults: &[(FaultAction, u32)],
) -> Outcome {
    let mut pair = rc_pair(SimConfig::with_seed(seed), p);
    require_data_path(&mut pair.sim);
    let sim = &mut pair.sim;
    let recv_len = ops.iter().map(|o| rounded8(o.len())).max().unwrap_or(8);

    // Layout: op i has `local[i]` on a and `remote[i]` on b; receive k has
    // `recv[k]` on b.
    let mut local = Vec::new();
    let mut remote = Vec::new();
    let (mut lo, mut ro) = (0u64, 0u64);
    for op in ops {
        local.push(lo);
        remote.push(ro);
        lo += rounded8(op.len()).max(8);
        ro += rounded8(op.len()).max(8);
    }
    let receives = ops.iter().filter(|o| o.consumes_recv()).count();
    let recv: Vec<u64> = (0..receives as u64).map(|k| ro + k * recv_len).collect();
    ro += receives as u64 * recv_len;
    let (mr_a, info_a) = reg_all(sim, pair.a.pd, usize::try_from(lo.max(8)).unwrap());
    let (mr_b, info_b) = reg_all(sim, pair.b.pd, usize::try_from(ro.max(8)).unwrap());

    // Sources: send/write payloads on a, read sources and atomic words on b.
    {
        let bytes = sim.mr_bytes_mut(&mr_a).unwrap();
        for (i, op) in ops.iter().enumerate() {
            if matches!(
                op,
                RcOp::Send { .. }
                    | RcOp::SendImm { .. }
                    | RcOp::Write { .. }
                    | RcOp::WriteImm { .. }
            ) {
                let at = local[i] as usize;
                for k in 0..op.len() as usize {
                    bytes[at + k] = pattern(i as u64, k);
                }
            }
        }
    }
    {
        let bytes = sim.mr_bytes_mut(&mr_b).unwrap();
        for (i, op) in ops.iter().enumerate() {
            let at = remote[i] as usize;
            match op {
                RcOp::Read { len } => {
                    for k in 0..*len as usize {
                        bytes[at + k] = pattern(1000 + i as u64, k);
                    }
                }
                RcOp::CmpSwp { .. } | RcOp::FetchAdd { .. } => {
                    bytes[at..at + 8].copy_from_slice(&ATOMIC_INITIAL.to_le_bytes());
                }
                _ => {}
            }
        }
    }

    let recv_sges: Vec<[Sge; 1]> = recv
        .iter()
        .map(|&o| [sge(&info_b, o, recv_len as u32)])
        .collect();
    let recv_wrs: Vec<RecvWr<'_>> = recv_sges
        .iter()
        .enumerate()
        .map(|(k, s)| RecvWr {
            wr_id: 1000 + k as u64,
            sg_list: s,
        })
        .collect();
    if !recv_wrs.is_empty() {
        post_recv(sim, pair.b.qp, &recv_wrs).unwrap();
    }

    for &(action, rate_ppm) in faults {
        sim.sim_control(SimCommand::Fault {
            scope: FaultScope::All,
            action,
            when: FaultWhen::RatePpm(rate_ppm),
        })
        .unwrap();
    }

    let sges: Vec<Vec<Sge>> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            if op.len() == 0 {
                Vec::new()
            } else {
                vec![sge(&info_a, local[i], op.len())]
            }
        })
        .collect();
    let wrs: Vec<SendWr<'_, SimVerbs>> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let rdma = RdmaInfo {
                remote_addr: info_b.addr + remote[i],
                rkey: info_b.rkey,
            };
            let base = SendWr {
                wr_id: i as u64,
                sg_list: &sges[i],
                send_flags: SendFlags::SIGNALED,
                rdma,
                ..SendWr::default()
            };
            match *op {
                RcOp::Send { .. } => SendWr {
                    opcode: WrOpcode::Send,
                    ..base
                },
                RcOp::SendImm { imm, .. } => SendWr {
                    opcode: WrOpcode::SendWithImm,
                    imm_data: imm,
                    ..base
                },
                RcOp::Write { .. } => SendWr {
                    opcode: WrOpcode::RdmaWrite,
                    ..base
                },
                RcOp::WriteImm { imm, .. } => SendWr {
                    opcode: WrOpcode::RdmaWriteWithImm,
                    imm_data: imm,
                    ..base
                },
                RcOp::Read { .. } => SendWr {
                    opcode: WrOpcode::RdmaRead,
                    ..base
                },
                RcOp::CmpSwp { hit } => SendWr {
                    opcode: WrOpcode::AtomicCmpAndSwp,
                    atomic: AtomicInfo {
                        remote_addr: rdma.remote_addr,
                        rkey: rdma.rkey,
                        compare_add: if hit { ATOMIC_INITIAL } else { 7 },
                        swap: 0x5555_aaaa_5555_aaaa,
                    },
                    ..base
                },
                RcOp::FetchAdd { add } => SendWr {
                    opcode: WrOpcode::AtomicFetchAndAdd,
                    atomic: AtomicInfo {
                        remote_addr: rdma.remote_addr,
                        rkey: rdma.rkey,
                        compare_add: add,
                        swap: 0,
                    },
                    ..base
                },
            }
        })
        .collect();
    post_send(sim, pair.a.qp, &wrs).unwrap();
    drop(wrs);

    let mut completions = drain(sim, pair.a.cq, ops.len() + 8);
    completions.extend(drain(sim, pair.b.cq, receives + 8));
    Outcome {
        trace: sim.trace().render(),
        memory: vec![mr_bytes(sim, &mr_a), mr_bytes(sim, &mr_b)],
        completions,
        now_ns: sim.now_ns(),
    }
}

/// The RC mix: 40 operations drawn from the seed, 1024-byte path MTU.
pub(super) fn rc_mix(seed: u64) -> (Outcome, usize) {
    let mut gen = Gen(seed ^ 0x0005_eed0_f00d);
    let ops = rc_ops(&mut gen, 40, 1024);
    let p = RcParams {
        a_sq_psn: gen.below(1 << 24) as u32,
        b_sq_psn: gen.below(1 << 24) as u32,
        ..RcParams::default()
    };
    (run_rc(seed, &p, &ops, &[]), ops.len())
}

/// The faults workload: one fixed mix of 40 operations (the same for every
/// seed), under drop 5 %, duplicate 3 %, delay 3 % (+20 µs) and reorder 3 %
/// (window 3); `timeout` 8 (≈ 1 ms) and `retry_cnt` 7.
pub(super) fn rc_faults(seed: u64) -> (Outcome, usize) {
    let ops = rc_ops(&mut Gen(0xfa17), 40, 1024);
    let p = RcParams {
        timeout: 8,
        retry_cnt: 7,
        a_sq_psn: 0xff_fff0,
        b_sq_psn: 0x42,
        ..RcParams::default()
    };
    let faults = [
        (FaultAction::Drop, 50_000),
        (FaultAction::Duplicate, 30_000),
        (FaultAction::DelayNs(20_000), 30_000),
        (FaultAction::Reorder(3), 30_000),
    ];
    (run_rc(seed, &p, &ops, &faults), ops.len())
}

// UD workload

/// A UD pair: 24 datagrams of 0..=2048 bytes from a to b, about one in four
/// with a wrong Q_Key, under a 3 % drop rule; b posts 24 receives.
pub(super) fn ud_run(seed: u64) -> (Outcome, usize) {
    const SENDS: usize = 24;
    const RECV_LEN: u64 = 40 + 2048;
    let mut gen = Gen(seed ^ 0x7d00_0000);
    let mut pair = ud_pair(SimConfig::with_seed(seed), 0x1111_1111, 0x2222_2222);
    require_data_path(&mut pair.sim);
    let sim = &mut pair.sim;
    let (mr_a, info_a) = reg_all(sim, pair.a.pd, SENDS * 2048);
    let (mr_b, info_b) = reg_all(sim, pair.b.pd, SENDS * RECV_LEN as usize);
    let lens: Vec<u32> = (0..SENDS).map(|_| gen.below(2049) as u32).collect();
    let wrong: Vec<bool> = (0..SENDS).map(|_| gen.below(4) == 0).collect();
    {
        let bytes = sim.mr_bytes_mut(&mr_a).unwrap();
        for (i, &len) in lens.iter().enumerate() {
            for k in 0..len as usize {
                bytes[i * 2048 + k] = pattern(i as u64, k);
            }
        }
    }
    let recv_sges: Vec<[Sge; 1]> = (0..SENDS as u64)
        .map(|k| [sge(&info_b, k * RECV_LEN, RECV_LEN as u32)])
        .collect();
    let recv_wrs: Vec<RecvWr<'_>> = recv_sges
        .iter()
        .enumerate()
        .map(|(k, s)| RecvWr {
            wr_id: 1000 + k as u64,
            sg_list: s,
        })
        .collect();
    post_recv(sim, pair.b.qp, &recv_wrs).unwrap();
    let ah = sim.create_ah(&pair.a.pd, &av_to(&pair.b)).unwrap();
    sim.sim_control(SimCommand::Fault {
        scope: FaultScope::All,
        action: FaultAction::Drop,
        when: FaultWhen::RatePpm(30_000),
    })
    .unwrap();
    let sges: Vec<Vec<Sge>> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            if len == 0 {
                Vec::new()
            } else {
                vec![sge(&info_a, i as u64 * 2048, len)]
            }
        })
        .collect();
    let wrs: Vec<SendWr<'_, SimVerbs>> = (0..SENDS)
        .map(|i| SendWr {
            wr_id: i as u64,
            sg_list: &sges[i],
            opcode: if i % 3 == 2 {
                WrOpcode::SendWithImm
            } else {
                WrOpcode::Send
            },
            imm_data: 0xabc0 + i as u32,
            send_flags: SendFlags::SIGNALED,
            ud: Some(UdInfo {
                ah: &ah,
                remote_qpn: pair.b.qpn,
                remote_qkey: if wrong[i] { 0x0bad_0bad } else { 0x2222_2222 },
            }),
            ..SendWr::default()
        })
        .collect();
    post_send(sim, pair.a.qp, &wrs).unwrap();
    drop(wrs);
    let mut completions = drain(sim, pair.a.cq, SENDS + 8);
    completions.extend(drain(sim, pair.b.cq, SENDS + 8));
    let out = Outcome {
        trace: sim.trace().render(),
        memory: vec![mr_bytes(sim, &mr_a), mr_bytes(sim, &mr_b)],
        completions,
        now_ns: sim.now_ns(),
    };
    (out, SENDS)
}
