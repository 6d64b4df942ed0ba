//! `sim_dc_fanout` run once on a fixed-seed simulator, for profiling
//! (`valgrind --tool=callgrind`, whose instruction counts repeat exactly
//! from run to run):
//!
//! ```text
//! cargo build --release -p verbsim-benches --example dc
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/examples/dc 10000 200000
//! callgrind_annotate cg.out | head -40
//! ```
//!
//! Arguments: the number of DCTs (default 10 000) and of 64 B WRITEs
//! (default 100 000), run after a warm-up of 10 000. Prints the wall time
//! per WRITE (noisy; the benchmark's median is the figure to quote) and the
//! heap bytes per DCT.

use std::process::ExitCode;
use std::time::Instant;

use backend_sim::{SimConfig, SimVerbs};
use verbsim_benches::dc::DcFanout;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (dcts, writes) = (num(0, 10_000) as usize, num(1, 100_000));
    let mut v = SimVerbs::new(SimConfig {
        trace_enabled: false,
        ..SimConfig::default()
    });
    let mut w = match DcFanout::new(&mut v, dcts) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("set-up failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = w.run(&mut v, 10_000) {
        eprintln!("warm-up failed: {e}");
        return ExitCode::FAILURE;
    }
    let start = Instant::now();
    if let Err(e) = w.run(&mut v, writes) {
        eprintln!("run failed: {e}");
        return ExitCode::FAILURE;
    }
    let wall = start.elapsed();
    let world = v.world();
    let heap: usize = w
        .dcts()
        .iter()
        .filter_map(|h| world.dct_heap_bytes(*h))
        .sum();
    println!(
        "{dcts} DCTs, {writes} WRITEs: {:.1} ns per WRITE, heap per DCT {} B",
        wall.as_nanos() as f64 / writes.max(1) as f64,
        heap / dcts.max(1)
    );
    match w.teardown(&mut v) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("teardown failed: {e}");
            ExitCode::FAILURE
        }
    }
}
