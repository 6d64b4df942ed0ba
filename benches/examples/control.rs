//! `sim_qp_lifecycle_rate` and `sim_modify_qp_rate` run once on a
//! fixed-seed simulator, for profiling (`valgrind --tool=callgrind`, whose
//! instruction counts repeat exactly from run to run):
//!
//! ```text
//! cargo build --release -p verbsim-benches --example control
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/examples/control modify 1000000
//! callgrind_annotate cg.out | head -40
//! ```
//!
//! Arguments: `lifecycle` (create an RC QP, RESET→INIT→RTR→RTS, destroy)
//! or `modify` (the 80 % legal / 20 % illegal transition mix), and how many
//! of them (default 100 000), run after a warm-up of 1 000. Prints the wall
//! time per lifecycle or transition (noisy; the benchmark's median is the
//! figure to quote).

use std::process::ExitCode;
use std::time::Instant;

use backend_sim::{SimConfig, SimVerbs};
use verbsim_benches::control::{ModifyMix, ModifyPlan, QpLifecycle};
use verbsim_benches::WorkloadError;

fn lifecycle(v: &mut SimVerbs, n: u64) -> Result<u64, WorkloadError> {
    let mut w = QpLifecycle::new(v)?;
    for _ in 0..1_000 {
        w.run(v)?;
    }
    let t = Instant::now();
    for _ in 0..n {
        w.run(v)?;
    }
    let wall = t.elapsed().as_nanos() as u64;
    w.teardown(v)?;
    Ok(wall)
}

fn modify(v: &mut SimVerbs, n: u64) -> Result<u64, WorkloadError> {
    let mut w = ModifyMix::new(v, ModifyPlan::standard())?;
    w.run_steps(v, 1_000)?;
    let t = Instant::now();
    w.run_steps(v, n)?;
    let wall = t.elapsed().as_nanos() as u64;
    w.teardown(v)?;
    Ok(wall)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000)
        .max(1);
    let mut v = SimVerbs::new(SimConfig {
        trace_enabled: false,
        ..SimConfig::default()
    });
    let run = match args.first().map(String::as_str) {
        Some("lifecycle") => lifecycle,
        Some("modify") => modify,
        _ => {
            eprintln!("usage: control lifecycle|modify [N]");
            return ExitCode::from(2);
        }
    };
    match run(&mut v, n) {
        Ok(wall) => {
            println!("{n} runs: wall {:.1} ns each", wall as f64 / n as f64);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("control: {e}");
            ExitCode::FAILURE
        }
    }
}
