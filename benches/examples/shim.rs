//! The `shim_post_poll` workload once, for profiling: 64 B RC WRITEs as
//! `sim_rc_write_msg_rate/64` posts them, either through `SimVerbs`
//! directly or through the drop-in library's C ABI (the library
//! `dlopen`ed, `ibv_post_send`/`ibv_poll_cq` through the context's ops).
//! Under callgrind the two give instructions per work request, and their
//! difference is what the library adds.
//!
//! ```text
//! cargo build --release -p verbsim-shim -p verbsim-benches --example shim
//! valgrind --tool=callgrind --callgrind-out-file=cg.shim target/release/examples/shim shim 200000
//! valgrind --tool=callgrind --callgrind-out-file=cg.direct target/release/examples/shim direct 200000
//! ```
//!
//! `shim` loads `libverbsim_shim.so` from this example's profile directory
//! (or `$VERBSIM_SHIM`).

use std::path::PathBuf;
use std::process::ExitCode;

use backend_sim::{SimConfig, SimVerbs};
use verbsim_benches::data::{MessageRate, MessageRateConfig};

/// Requests run before the measured ones, as the benchmark's warm-up.
const WARM_UP: u64 = 1_000;

fn lib() -> PathBuf {
    if let Some(p) = std::env::var_os("VERBSIM_SHIM") {
        return PathBuf::from(p);
    }
    // target/<profile>/examples/shim -> target/<profile>/libverbsim_shim.so
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("libverbsim_shim.so"))
        .unwrap_or_default()
}

fn run(mode: &str, n: u64) -> Result<(), String> {
    match mode {
        "direct" => {
            let mut v = SimVerbs::new(SimConfig {
                trace_enabled: false,
                ..SimConfig::default()
            });
            let mut w = MessageRate::new(&mut v, MessageRateConfig::rc_write_64())
                .map_err(|e| e.to_string())?;
            w.run(&mut v, WARM_UP).map_err(|e| e.to_string())?;
            w.run(&mut v, n).map_err(|e| e.to_string())?;
            w.drain(&mut v).map_err(|e| e.to_string())?;
            Ok(())
        }
        "shim" => {
            let mut w = verbsim_shim::driver::WriteRate::new(&lib())?;
            w.run(WARM_UP)?;
            w.run(n)
        }
        _ => Err(format!("unknown mode {mode:?} (direct or shim)")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = args.first() else {
        eprintln!("usage: shim direct|shim [N]");
        return ExitCode::from(2);
    };
    let n = match args.get(1).map(|s| s.parse::<u64>()) {
        None => 100_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("shim: N: {e}");
            return ExitCode::from(2);
        }
    };
    let t = std::time::Instant::now();
    match run(mode, n) {
        Ok(()) => {
            let ns = t.elapsed().as_nanos() as f64 / (n + WARM_UP) as f64;
            println!("{mode}: {n} requests, {ns:.1} ns per request (wall, noisy)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shim: {mode}: {e}");
            ExitCode::FAILURE
        }
    }
}
