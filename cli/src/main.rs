//! The `verbsim` command.
//!
//! ```text
//! verbsim run [--backend sim|hw] [--seed N] [--verbose] PATH...
//! verbsim perf [--backend sim|hw] [--seed N] [--json] TEST [OPTIONS]
//! verbsim fuzz [--seeds A..B] [--calls N] [--coverage]
//! verbsim calibrate
//! verbsim exec [OPTIONS] -- PROGRAM ARGS...
//! verbsim fuzz [--seeds A..B] [--calls N] [--twice]
//! ```
//!
//! Subcommands are dispatched by name in [`main`]; each lives in its own
//! module with its own `--help` text. Arguments are parsed by hand (no
//! argument-parsing dependency).

mod calibrate;
mod exec;
mod fabric;
mod fuzz;
mod perf;
mod plot;
mod report;
mod run;

use std::process::ExitCode;

/// Exit status for a usage error (bad flag, missing argument, backend not built in).
const EXIT_USAGE: u8 = 2;

/// Turns a subcommand's argument parse into its arguments, or into the exit
/// code after printing the help (`--help`, exit 0) or the usage error and the
/// help (exit [`EXIT_USAGE`]).
fn parsed_or_exit<T>(
    command: &str,
    help: &str,
    parsed: Result<Option<T>, String>,
) -> Result<T, ExitCode> {
    match parsed {
        Ok(Some(a)) => Ok(a),
        Ok(None) => {
            print!("{help}");
            Err(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("verbsim {command}: {why}\n");
            eprint!("{help}");
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

const HELP: &str = "\
verbsim: the RDMA verbs simulator and conformance runner

Usage:
  verbsim run [--backend sim|hw] [--seed N] [--verbose] PATH...
                 run .verbs conformance scripts (files or directories)
  verbsim perf [--backend sim|hw] [--seed N] [--json] TEST [OPTIONS]
                 perftest-like benchmarks (write_bw, write_lat, send_bw,
                 send_lat, read_bw, read_lat, atomic_rate, qp_lifecycle, modify_qp)
  verbsim fuzz [--seeds A..B] [--calls N] [--coverage] [--twice]
                 swarm testing: random valid and invalid calls with invariants
                 after each, failures shrunk to a .verbs script (docs/swarm.md)
  verbsim calibrate
                 the simulator's timing against published perftest figures
                 (docs/calibration.md); exits 1 when a ratio leaves 0.75-1.33
  verbsim exec [--seed N] [--devices cx6,cx6] [--trace FILE] -- PROGRAM ARGS...
                 run an unmodified RDMA program (C, Python, Rust) on the
                 simulator through the drop-in libibverbs.so.1 (docs/drop-in.md)
  verbsim fabric --socket PATH [--exit-when-idle] [--pace wall|virtual]
                 one simulated fabric shared by several processes (programs
                 run with `verbsim exec --fabric PATH`; docs/drop-in.md)
  verbsim help [COMMAND]
                 this text, or a command's help

Options:
  -h, --help     print help
  -V, --version  print the version

See `verbsim run --help`, `verbsim perf --help` and docs/script-format.md.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        eprint!("{HELP}");
        return ExitCode::from(EXIT_USAGE);
    };
    let rest = &args[1..];
    match command.as_str() {
        "run" => run::main(rest),
        "perf" => perf::main(rest),
        "calibrate" => calibrate::main(rest),
        "fuzz" => fuzz::main(rest),
        "exec" => exec::main(rest),
        "fabric" => fabric::main(rest),
        "help" | "-h" | "--help" => match rest.first().map(String::as_str) {
            Some("run") => {
                print!("{}", run::HELP);
                ExitCode::SUCCESS
            }
            Some("perf") => {
                print!("{}", perf::HELP);
                ExitCode::SUCCESS
            }
            Some("fuzz") => {
                print!("{}", fuzz::HELP);
                ExitCode::SUCCESS
            }
            Some("exec") => {
                print!("{}", exec::HELP);
                ExitCode::SUCCESS
            }
            Some("fabric") => fabric::main(&["--help".to_owned()]),
            Some(other) => {
                eprintln!("verbsim: no such command `{other}`\n");
                eprint!("{HELP}");
                ExitCode::from(EXIT_USAGE)
            }
            None => {
                print!("{HELP}");
                ExitCode::SUCCESS
            }
        },
        "-V" | "--version" => {
            println!("verbsim {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("verbsim: unknown command `{other}`\n");
            eprint!("{HELP}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
