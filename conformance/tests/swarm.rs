//! The swarm (conformance::swarm) on the simulator over a fixed seed range,
//! debug assertions on: no panic, refused calls change nothing, completions
//! match posted requests once, teardown leaves the world empty. A failure
//! prints its seed and the shrunk `.verbs` script. `verbsim fuzz` runs any
//! range (docs/swarm.md).
#![allow(missing_docs)]

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use conformance::swarm::{run_seed, run_seed_traced, SwarmConfig, SwarmReport};

/// Two ConnectX-6 devices (DC, XRC, atomics) for even seeds, cx7 + rxe for
/// odd ones (RoCE, OOO-capable, the rxe rules).
fn world(seed: u64) -> SimVerbs {
    let devices = if seed % 2 == 0 {
        vec![DeviceProfile::connectx6(), DeviceProfile::connectx6()]
    } else {
        vec![DeviceProfile::connectx7(), DeviceProfile::rxe()]
    };
    SimVerbs::new(SimConfig {
        seed,
        ..SimConfig::with_devices(devices)
    })
}

/// What is alive; `nothing` when only librdmacm's own contexts and PDs
/// are (they live as long as the library, not a leak).
fn live(v: &SimVerbs) -> String {
    let l = v.live_objects();
    if l.is_empty() {
        "nothing".to_owned()
    } else {
        l.to_string()
    }
}

#[test]
fn swarm_fixed_seed_range() {
    // 400 seeds × 1 500 generated calls: about 375 000 made (a call whose
    // slot is empty or taken is skipped), plus the teardowns.
    let mut total = SwarmReport::default();
    for seed in 0..400u64 {
        let r = run_seed(SwarmConfig { seed, calls: 1_500 }, &world, &live);
        total.absorb(&r);
        if let Some(f) = r.failure {
            panic!(
                "swarm seed {} failed: {}\n--- shrunk script ---\n{}",
                f.seed, f.why, f.script
            );
        }
    }
    assert!(total.calls >= 100_000, "only {} calls", total.calls);
    // Every family is reached somewhere in the range.
    for verb in [
        "open_device",
        "create_qp",
        "connect",
        "post_send",
        "post_recv",
        "poll_cq",
        "post_srq_recv",
        "sim",
        "open_xrc_domain",
        "create_xrc_rcv_qp",
        "rdma_create_id",
        "rdma_bind_addr",
        "mlx5dv_create_qp",
        "create_srq_ex",
        "create_qp_ex",
        "poll_cq (completion)",
    ] {
        let (ok, _) = total.per_verb.get(verb).copied().unwrap_or_default();
        assert!(ok > 0, "{verb} never succeeded:\n{}", total.coverage());
    }
    println!("swarm: {} calls\n{}", total.calls, total.coverage());
}

/// The simulator's trace and clock, hashed (as `verbsim fuzz --twice`).
fn trace(v: &SimVerbs) -> u64 {
    let text = format!("{}|{}|{}", v.now_ns(), v.trace().dropped(), v.trace());
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn swarm_seeds_are_deterministic() {
    // Same seed, same calls, answers and simulator trace; another seed
    // differs (the digest sees something).
    let mut digests = Vec::new();
    for seed in [0u64, 1, 17, 400, 401] {
        let cfg = SwarmConfig { seed, calls: 1_500 };
        let a = run_seed_traced(cfg, &world, &live, &trace);
        let b = run_seed_traced(cfg, &world, &live, &trace);
        assert!(a.failure.is_none(), "seed {seed}: {:?}", a.failure);
        assert_eq!(a.calls, b.calls, "seed {seed}");
        assert_eq!(a.digest, b.digest, "seed {seed}: two runs differ");
        assert_eq!(a.per_verb, b.per_verb, "seed {seed}");
        digests.push(a.digest);
    }
    digests.sort_unstable();
    digests.dedup();
    assert_eq!(digests.len(), 5, "distinct seeds gave one digest");
}
