//! The executor's shortcuts for the common case (`SimConfig::fast_paths`,
//! issue #16) against the general path, on the benchmark workloads
//! themselves: each workload runs twice on the same seed, shortcuts on and
//! off, with the trace on, and the two runs must leave the same trace
//! record for record (every packet sent and delivered, with its time, PSN,
//! flags and cookie; every placement, retransmission and completion), the
//! same virtual time and the same completions. The benchmarks measure the
//! shortcuts; this is what makes their figures figures of the simulator
//! and not of a different model.
#![allow(missing_docs)]

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use verbs_api::{SimCommand, SimReply, Verbs};
use verbsim_benches::data::{MessageRate, MessageRateConfig, RateOp, SendRecvBw, SendRecvConfig};
use verbsim_benches::dc::OooWrite;
use verbsim_benches::WorkloadError;

/// Requests per workload: enough for every batch shape (post lists, runs
/// of WRITEs with their ACK requests, READ windows, retransmissions under
/// the fault rules) to recur many times, small enough for a debug build.
const REQUESTS: u64 = 1_500;

/// A workload of the benchmarks.
#[derive(Clone, Copy, Debug)]
enum Workload {
    Rate(MessageRateConfig),
    SendRecv(SendRecvConfig),
    Ooo,
}

/// The simulator the benchmarks use (`benches/sim.rs`), trace on, with
/// the shortcuts `fast`.
fn sim(fast: bool, ooo: bool) -> SimVerbs {
    let mut config = SimConfig {
        trace_enabled: true,
        trace_events_max: 1 << 24,
        fast_paths: fast,
        ..SimConfig::default()
    };
    if ooo {
        config.devices = vec![DeviceProfile::connectx7(), DeviceProfile::connectx7()];
        config.ooo_window = 8;
    }
    SimVerbs::new(config)
}

fn now(v: &mut SimVerbs) -> u64 {
    match v.sim_control(SimCommand::Now) {
        Ok(SimReply::TimeNs(ns)) => ns,
        other => panic!("SimCommand::Now: {other:?}"),
    }
}

/// Runs `w` on a fresh simulator; the trace rendered, and the virtual time.
fn run(w: Workload, fast: bool) -> Result<(String, u64), WorkloadError> {
    let mut v = sim(fast, matches!(w, Workload::Ooo));
    match w {
        Workload::Rate(cfg) => {
            let mut m = MessageRate::new(&mut v, cfg)?;
            m.run(&mut v, REQUESTS)?;
            m.teardown(&mut v)?;
        }
        Workload::SendRecv(cfg) => {
            let mut m = SendRecvBw::new(&mut v, cfg)?;
            m.run(&mut v, REQUESTS)?;
            m.teardown(&mut v)?;
        }
        Workload::Ooo => {
            let mut m = OooWrite::new(&mut v, true)?;
            m.run(&mut v, REQUESTS / 10)?;
            m.teardown(&mut v)?;
        }
    }
    let t = now(&mut v);
    assert_eq!(v.trace().dropped(), 0, "the trace must hold every event");
    Ok((v.trace().to_string(), t))
}

/// The first line where two renderings differ, for the failure message.
fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {i}:\n  fast:    {x}\n  general: {y}");
        }
    }
    format!(
        "one is a prefix of the other ({} and {} lines)",
        a.lines().count(),
        b.lines().count()
    )
}

fn same_both_ways(name: &str, w: Workload) {
    let (fast, t_fast) = run(w, true).unwrap_or_else(|e| panic!("{name} (fast): {e}"));
    let (general, t_general) = run(w, false).unwrap_or_else(|e| panic!("{name} (general): {e}"));
    assert!(
        fast.lines().count() > REQUESTS as usize,
        "{name}: the trace recorded too little to compare"
    );
    assert!(
        fast == general,
        "{name} (seed 0): the fast paths and the general path differ at {}",
        first_difference(&fast, &general)
    );
    assert_eq!(t_fast, t_general, "{name} (seed 0): virtual time differs");
}

#[test]
fn rc_write_64_is_the_same_both_ways() {
    // Post lists of 16 WRITEs, signalled every 16th, 128 outstanding: the
    // burst at the requester, the responder's runs of WRITEs with their
    // put-off copies and ACK requests, completions in runs.
    same_both_ways(
        "sim_rc_write_msg_rate/64",
        Workload::Rate(MessageRateConfig::rc_write_64()),
    );
}

#[test]
fn read_and_atomics_are_the_same_both_ways() {
    // READ windows and atomics: answers in one step both ways round.
    same_both_ways(
        "sim_read_rate",
        Workload::Rate(MessageRateConfig::read_64()),
    );
    for op in [RateOp::FetchAdd, RateOp::CompSwap] {
        same_both_ways(
            "sim_atomic_rate",
            Workload::Rate(MessageRateConfig::atomic(op)),
        );
    }
}

#[test]
fn faults_are_the_same_both_ways() {
    // 1 % drop, duplicate and delay: go-back-N, duplicates, held packets;
    // the clear route comes and goes with the held ones.
    same_both_ways(
        "sim_fault_overhead/faults",
        Workload::Rate(MessageRateConfig::fault_overhead(true)),
    );
}

#[test]
fn send_recv_is_the_same_both_ways() {
    // SEND/RECV of one packet and of 16 (runs of one message's packets).
    for bytes in [64, 4096, 65536] {
        same_both_ways(
            "sim_send_recv_bw",
            Workload::SendRecv(SendRecvConfig::bw(bytes)),
        );
    }
}

#[test]
fn out_of_order_placement_is_the_same_both_ways() {
    // 64 KiB WRITEs on OOO_DP QPs, reorder window 8 (the OOO runs).
    same_both_ways("sim_ooo_placement/8", Workload::Ooo);
}
