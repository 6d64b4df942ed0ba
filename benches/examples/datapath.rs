//! One data-path workload of the `sim` benchmarks, run once on a fixed-seed
//! simulator: for profiling (`valgrind --tool=callgrind`, whose instruction
//! counts repeat exactly from run to run) and for looking at what the
//! simulator did (with `--trace`: packets sent, dropped, duplicated,
//! delayed, retransmissions by cause).
//!
//! ```text
//! cargo run --release -p verbsim-benches --example datapath -- WORKLOAD [N] [--trace] [--timeout T] [--general-paths]
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/examples/datapath write64 200000
//! callgrind_annotate cg.out | head -40
//! ```
//!
//! `WORKLOAD` is one of `write64`, `write64_1gib`, `scale`, `read`, `fadd`, `cswap`,
//! `send4k`, `send64k`, `send1m`, `fault_none`, `fault_faults`, `ooo0`,
//! `ooo8`, `ooo64` (`sim_ooo_placement/{0,8,64}`: one 64 KiB WRITE per
//! request between two ConnectX-7 RC QPs, OOO_DP with that reorder window
//! for 8 and 64) (the benchmark with that id, see `benches/sim.rs`) or
//! `send64` (the
//! SEND/RECV workload with 64 B messages, no benchmark of its own); `N` requests (default
//! 100 000) are run after a warm-up of 1 000 and drained; `--timeout T`
//! overrides the QP `timeout` of a message-rate workload (to see what the
//! choice of `FAULT_ACK_TIMEOUT` changes); `--general-paths` runs it with
//! `SimConfig::fast_paths` off (every event through the general path: the
//! trace digest must not change, only the time). Prints the wall
//! time per request (noisy; the benchmark's median is the figure to quote)
//! and the virtual time the run took.

use std::process::ExitCode;
use std::time::Instant;

use backend_sim::fabric::FabricTrace;
use backend_sim::{SimConfig, SimVerbs, TraceEvent};
use verbs_api::{SimCommand, SimReply, Verbs};
use verbsim_benches::data::{MessageRate, MessageRateConfig, RateOp, SendRecvBw, SendRecvConfig};
use verbsim_benches::dc::OooWrite;
use verbsim_benches::WorkloadError;

/// A workload of the `sim` bench, by its short name.
enum Workload {
    Rate(MessageRateConfig),
    SendRecv(SendRecvConfig),
    /// `sim_ooo_placement/{window}`: OOO_DP QPs when the window is not 0.
    Ooo(u32),
}

fn workload(name: &str) -> Option<Workload> {
    Some(match name {
        "write64" => Workload::Rate(MessageRateConfig::rc_write_64()),
        "write64_1gib" => Workload::Rate(MessageRateConfig::rc_write_64_1gib()),
        "scale" => Workload::Rate(MessageRateConfig::scale()),
        "read" => Workload::Rate(MessageRateConfig::read_64()),
        "fadd" => Workload::Rate(MessageRateConfig::atomic(RateOp::FetchAdd)),
        "cswap" => Workload::Rate(MessageRateConfig::atomic(RateOp::CompSwap)),
        "fault_none" => Workload::Rate(MessageRateConfig::fault_overhead(false)),
        "fault_faults" => Workload::Rate(MessageRateConfig::fault_overhead(true)),
        "send64" => Workload::SendRecv(SendRecvConfig::bw(64)),
        "send4k" => Workload::SendRecv(SendRecvConfig::bw(4096)),
        "send64k" => Workload::SendRecv(SendRecvConfig::bw(65536)),
        "send1m" => Workload::SendRecv(SendRecvConfig::bw(1 << 20)),
        "ooo0" => Workload::Ooo(0),
        "ooo8" => Workload::Ooo(8),
        "ooo64" => Workload::Ooo(64),
        _ => return None,
    })
}

fn now(v: &mut SimVerbs) -> u64 {
    match v.sim_control(SimCommand::Now) {
        Ok(SimReply::TimeNs(ns)) => ns,
        _ => 0,
    }
}

/// Runs `n` requests after a warm-up; `(wall ns, virtual ns)` of the `n`.
fn run(v: &mut SimVerbs, w: &Workload, n: u64) -> Result<(u64, u64), WorkloadError> {
    const WARM_UP: u64 = 1_000;
    let timed =
        |v: &mut SimVerbs,
         step: &mut dyn FnMut(&mut SimVerbs, u64) -> Result<(), WorkloadError>| {
            step(v, WARM_UP)?;
            let (wall, virt) = (Instant::now(), now(v));
            step(v, n)?;
            let wall = wall.elapsed().as_nanos() as u64;
            Ok::<_, WorkloadError>((wall, now(v) - virt))
        };
    match *w {
        Workload::Rate(cfg) => {
            let mut w = MessageRate::new(v, cfg)?;
            let r = timed(v, &mut |v, k| w.run(v, k));
            let torn = w.teardown(v);
            let r = r?;
            torn?;
            Ok(r)
        }
        Workload::SendRecv(cfg) => {
            let mut w = SendRecvBw::new(v, cfg)?;
            let r = timed(v, &mut |v, k| w.run(v, k));
            let torn = w.teardown(v);
            let r = r?;
            torn?;
            Ok(r)
        }
        Workload::Ooo(window) => {
            let mut w = OooWrite::new(v, window > 0)?;
            let r = timed(v, &mut |v, k| w.run(v, k));
            let torn = w.teardown(v);
            let r = r?;
            torn?;
            Ok(r)
        }
    }
}

/// Counts of the trace's events by kind, in a fixed order.
fn tally(v: &SimVerbs) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = Vec::new();
    let mut bump = |k: String| match counts.iter_mut().find(|(name, _)| *name == k) {
        Some((_, c)) => *c += 1,
        None => counts.push((k, 1)),
    };
    for r in v.trace().records() {
        let kind = match r.event {
            TraceEvent::Packet(p) => match p {
                FabricTrace::Sent { .. } => "packet sent".to_owned(),
                FabricTrace::Dropped { .. } => "packet dropped".to_owned(),
                FabricTrace::Duplicated { .. } => "packet duplicated".to_owned(),
                FabricTrace::Delayed { .. } => "packet delayed".to_owned(),
                FabricTrace::Delivered { .. } => "packet delivered".to_owned(),
                _ => "packet other".to_owned(),
            },
            TraceEvent::Retransmit { cause, .. } => format!("retransmit ({cause})"),
            TraceEvent::Completion { recv, .. } => {
                format!("{} completion", if recv { "recv" } else { "send" })
            }
            TraceEvent::Placement { .. } => "placement".to_owned(),
            _ => "other".to_owned(),
        };
        bump(kind);
    }
    counts
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let trace = args.iter().any(|a| a == "--trace");
    let general = args.iter().any(|a| a == "--general-paths");
    let mut timeout = None;
    let mut rest: Vec<&String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--trace" | "--general-paths" => {}
            "--timeout" => timeout = it.next().and_then(|t| t.parse::<u8>().ok()),
            _ => rest.push(a),
        }
    }
    let Some(mut w) = rest.first().and_then(|n| workload(n)) else {
        eprintln!(
            "usage: datapath WORKLOAD [N] [--trace] [--timeout T] [--general-paths]  (see the source for the names)"
        );
        return ExitCode::from(2);
    };
    if let (Workload::Rate(cfg), Some(t)) = (&mut w, timeout) {
        cfg.ack_timeout = t;
    }
    let n: u64 = match rest.get(1).map(|s| s.parse()) {
        None => 100_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("datapath: N must be a positive number");
            return ExitCode::from(2);
        }
    };
    let mut config = SimConfig {
        trace_enabled: trace,
        trace_events_max: if trace { 1 << 27 } else { 0 },
        fast_paths: !general,
        ..SimConfig::default()
    };
    if let Workload::Ooo(window) = w {
        // As `sim_ooo_placement` builds its simulator.
        config.devices = vec![
            backend_sim::DeviceProfile::connectx7(),
            backend_sim::DeviceProfile::connectx7(),
        ];
        config.ooo_window = window;
    }
    let mut v = SimVerbs::new(config);
    match run(&mut v, &w, n) {
        Ok((wall, virt)) => {
            println!(
                "{} requests: wall {:.1} ns/request, virtual {:.3} ns/request ({} ns in all)",
                n,
                wall as f64 / n as f64,
                virt as f64 / n as f64,
                virt
            );
            if trace {
                let total = n + 1_000;
                for (kind, count) in tally(&v) {
                    println!(
                        "  {kind:<40} {count:>10}  ({:.3} per request)",
                        count as f64 / total as f64
                    );
                }
                // FNV-1a of the rendered trace: equal digests before and
                // after a change to the executor mean the same run.
                let digest = v
                    .trace()
                    .render()
                    .bytes()
                    .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                    });
                println!("  trace digest {digest:016x}");
                if v.trace().dropped() > 0 {
                    println!("  (trace full: {} events not kept)", v.trace().dropped());
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("datapath: {e}");
            ExitCode::FAILURE
        }
    }
}
