//! `bench-report`: the ratio table of the last criterion run.
//!
//! ```text
//! cargo run -p verbsim-benches --bin bench-report [-- [--dir DIR] [--strict]]
//! ```
//!
//! Reads `DIR` (default `$CARGO_TARGET_DIR/criterion`, else the
//! workspace's `target/criterion`) and prints one row per benchmark with
//! its median, rate, the ratio `perf.md` defines its target as, the target
//! and PASS/MISS; a ratio target the `sim` bench also measured paired
//! (`DIR/paired/`, see `verbsim_benches::paired`) is checked against the
//! paired ratio, the medians' ratio printed beside it. Exits 2 when there are no results, and with `--strict` 1
//! when a target is missed.

use std::path::PathBuf;
use std::process::ExitCode;

use verbsim_benches::report;

fn main() -> ExitCode {
    let mut dir = None;
    let mut strict = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dir" => dir = args.next().map(PathBuf::from),
            "--strict" => strict = true,
            "-h" | "--help" => {
                println!("usage: bench-report [--dir DIR] [--strict]");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("bench-report: unknown argument {other:?} (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    let dir = dir.unwrap_or_else(report::default_dir);
    let dir = dir.canonicalize().unwrap_or(dir);
    let measurements = match report::load(&dir) {
        Ok(m) if !m.is_empty() => m,
        Ok(_) => {
            eprintln!("bench-report: no criterion results under {}; run `cargo bench -p verbsim-benches` first", dir.display());
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("bench-report: {e}");
            return ExitCode::from(2);
        }
    };
    let paired = match report::load_paired(&dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench-report: {e}");
            return ExitCode::from(2);
        }
    };
    let table = report::evaluate_paired(&measurements, &paired);
    println!("results: {}\n", dir.display());
    print!("{table}");
    if strict && table.missed() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
