//! The swarm (conformance::swarm) on the simulator over a fixed seed range,
//! debug assertions on: no panic, refused calls change nothing, completions
//! match posted requests once, teardown leaves the world empty. A failure
//! prints its seed and the shrunk `.verbs` script. `verbsim fuzz` runs any
//! range (docs/swarm.md).
#![allow(missing_docs)]

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use conformance::swarm::{run_seed, SwarmConfig, SwarmReport};

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
    // 400 seeds × 1 500 generated calls: about 140 000 made (a call whose
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
    ] {
        let (ok, _) = total.per_verb.get(verb).copied().unwrap_or_default();
        assert!(ok > 0, "{verb} never succeeded:\n{}", total.coverage());
    }
    println!("swarm: {} calls\n{}", total.calls, total.coverage());
}

#[test]
fn a_run_printed_as_a_script_replays_through_the_runner() {
    // Goal: the script a failure prints reproduces the calls: every
    // statement parses and gives the outcome the swarm saw. Method: render
    // whole passing runs (cx6 pairs, the data path mixed in) and run them.
    for seed in [0u64, 2, 4, 6, 8, 10] {
        let cfg = SwarmConfig { seed, calls: 300 };
        let text = conformance::swarm::script_for(cfg, &world);
        let script = conformance::parse("swarm.verbs", &text)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        let mut make = |_: &conformance::Script| Ok::<_, conformance::Outcome>(world(seed));
        let outcome =
            conformance::run_parsed(&script, &mut make, &conformance::RunOptions::default());
        assert!(
            matches!(outcome, conformance::Outcome::Pass),
            "seed {seed}: {}\n{text}",
            outcome.report_line("swarm.verbs")
        );
        assert!(
            text.lines().count() > 20,
            "seed {seed}: a short run:\n{text}"
        );
    }
}
