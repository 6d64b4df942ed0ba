//! Determinism (style rule R20): the same seed and the same calls give the
//! same QP numbers, keys, addresses and trace, byte for byte. Seeds come from
//! `VERBS_SIM_SEEDS` (a count, default 8); a failure prints `VERBS_SIM_SEED`.
#![allow(missing_docs)]

mod common;

use backend_sim::{SimConfig, SimVerbs};
use common::*;
use verbs_api::*;

/// A fixed workload; returns (qp numbers, mr keys and addresses, trace text).
fn workload(seed: u64) -> (Vec<u32>, Vec<(u32, u64)>, String) {
    let mut sim = SimVerbs::new(SimConfig::with_seed(seed));
    let ctx = sim.open_device(0, ProcessId(1)).unwrap();
    let pd = sim.alloc_pd(&ctx).unwrap();
    let cq = sim
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 64,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut f = Fixture { sim, ctx, pd, cq };
    let mut qpns = Vec::new();
    let mut keys = Vec::new();
    for i in 0..6 {
        let qp = f.rc();
        qpns.push(f.sim.qp_num(&qp).unwrap());
        let mr = f
            .sim
            .reg_mr(&pd, 4096 * (i + 1), AccessFlags::LOCAL_WRITE)
            .unwrap();
        let info = f.sim.mr_info(&mr).unwrap();
        keys.push((info.lkey, info.addr));
        f.goto_rts(qp);
        if i % 2 == 0 {
            f.modify(qp, &state_only(QpState::Error), QpAttrMask::STATE)
                .unwrap();
            f.sim.destroy_qp(&qp).unwrap();
            f.sim.dereg_mr(&mr).unwrap();
        }
    }
    (qpns, keys, f.sim.trace().render())
}

#[test]
fn same_seed_same_numbers_keys_and_trace() {
    // Goal: runs are reproducible per seed.
    // Method: run the workload twice for each seed and compare everything.
    let seeds: u64 = std::env::var("VERBS_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    for seed in 0..seeds {
        let a = workload(seed);
        let b = workload(seed);
        assert_eq!(a, b, "VERBS_SIM_SEED={seed}");
    }
}

#[test]
fn qp_numbers_are_cyclic_from_the_start_and_never_reused_at_once() {
    // Goal: QPNs start at qpn_start (0x100), increase, and a freed number is
    // not handed out again before the counter wraps (create-qp.md §7).
    let (qpns, _, _) = workload(3);
    assert_eq!(qpns, vec![0x100, 0x101, 0x102, 0x103, 0x104, 0x105]);
}

#[test]
fn keys_depend_on_the_seed_and_index_the_mr() {
    // Goal: key = (MR index << 8) | byte from the rkey_alloc stream: the index
    // part is stable, the variant byte follows the seed.
    let (_, a, _) = workload(1);
    let (_, b, _) = workload(2);
    assert_eq!(
        a.iter().map(|k| k.0 >> 8).collect::<Vec<_>>(),
        b.iter().map(|k| k.0 >> 8).collect::<Vec<_>>()
    );
    assert_ne!(
        a.iter().map(|k| k.0 & 0xff).collect::<Vec<_>>(),
        b.iter().map(|k| k.0 & 0xff).collect::<Vec<_>>()
    );
    assert!(a.iter().all(|k| k.1 % 4096 == 0));
}

#[test]
fn trace_snapshot_of_one_lifecycle() {
    // Goal: the trace is data with a stable text form.
    // Method: one QP through RESET->INIT->RTR->RTS->ERR->destroy; compare the text.
    let mut f = cx6();
    let qp = f.rc();
    f.goto_rts(qp);
    f.modify(qp, &state_only(QpState::Error), QpAttrMask::STATE)
        .unwrap();
    f.sim.destroy_qp(&qp).unwrap();
    let expected = "\
[           0] dev0 qp 0x000100 created RC
[           0] dev0 qp 0x000100 RESET -> INIT
[           0] dev0 qp 0x000100 INIT -> RTR
[           0] dev0 qp 0x000100 RTR -> RTS
[           0] dev0 qp 0x000100 RTS -> ERR
[           0] dev0 qp 0x000100 destroyed
";
    assert_eq!(f.sim.trace().render(), expected);
}
