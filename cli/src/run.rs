//! `verbsim run`: run `.verbs` scripts and print one line per script.

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use conformance::{effective_seed, run_path, seed_from_env, Outcome, RunOptions, Script};
use std::path::PathBuf;
use std::process::ExitCode;
use verbs_api::Verbs;

use crate::EXIT_USAGE;

/// `verbsim run --help`.
pub(crate) const HELP: &str = "\
verbsim run: run .verbs conformance scripts

Usage:
  verbsim run [--backend sim|hw] [--seed N] [--verbose] PATH...

Runs every script named (directories are searched for *.verbs, in sorted
order), each on a fresh backend, and prints one line per script:

  PASS path
  FAIL path:line: statement: what was expected, what happened
  SKIP path: reason

then `N passed, N failed, N skipped`.

Exit status:
  0  every script that ran passed (and at least one ran)
  1  a script failed or did not parse
  2  usage error: a bad flag, a path that does not exist, no *.verbs
     script under the paths, or a backend this build does not have
  3  nothing ran: every script was skipped (for instance --backend hw on a
     machine without an RDMA device, said once with the reason)

Options:
  --backend sim|hw  the backend (default sim). hw needs a build with the
                    `hw` feature: cargo run -p verbsim-cli --features hw -- run --backend hw PATH...
                    Without a device every script is SKIPped, unless
                    VERBS_TEST_DEVICE is set, which makes that a failure.
                    VERBS_TEST_DEVICE=NAME (as ibv_devices lists it) runs
                    every script on that device: it is index 0, the other
                    devices follow; a name that is not there fails.
  --seed N          the simulator's root seed for every script (overrides
                    `#! seed:`; the environment variable VERBS_SIM_SEED does too)
  --verbose, -v     print each statement before running it
  --junit FILE      also write a JUnit XML report (one testcase per script;
                    a failure's message is file:line: what, with the seed)
  --json FILE       also write the run as JSON (`-` for standard output,
                    which then carries only the JSON)
  --trace DIR       simulator: write each script's trace as Chrome
                    trace-event JSON, DIR/<script>.json, to open in
                    ui.perfetto.dev or chrome://tracing
  -h, --help        print this help
";

/// Which backend `--backend` selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Sim,
    Hw,
}

/// The parsed command line of `verbsim run`.
#[derive(Debug)]
struct Args {
    backend: Backend,
    seed: Option<u64>,
    verbose: bool,
    paths: Vec<PathBuf>,
    /// `--junit FILE`.
    junit: Option<PathBuf>,
    /// `--json FILE` (`-` for standard output).
    json: Option<PathBuf>,
    /// `--trace DIR`: one Chrome trace-event JSON file per script.
    trace: Option<PathBuf>,
}

/// Parses `verbsim run`'s arguments; `Ok(None)` for `--help`.
fn parse_args(args: &[String]) -> Result<Option<Args>, String> {
    let mut out = Args {
        backend: Backend::Sim,
        seed: None,
        verbose: false,
        paths: Vec::new(),
        junit: None,
        json: None,
        trace: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "-v" | "--verbose" => out.verbose = true,
            "--junit" => out.junit = Some(PathBuf::from(value("--junit")?)),
            "--json" => out.json = Some(PathBuf::from(value("--json")?)),
            "--trace" => out.trace = Some(PathBuf::from(value("--trace")?)),
            "--backend" => {
                out.backend = match value("--backend")?.as_str() {
                    "sim" => Backend::Sim,
                    "hw" => Backend::Hw,
                    other => return Err(format!("unknown backend `{other}` (sim or hw)")),
                }
            }
            "--seed" => {
                let v = value("--seed")?;
                let seed = conformance::literal::parse_int(&v)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| format!("--seed needs a number, got `{v}`"))?;
                out.seed = Some(seed);
            }
            "--" => out.paths.extend(it.by_ref().map(PathBuf::from)),
            f if f.starts_with('-') && f.len() > 1 => return Err(format!("unknown option `{f}`")),
            path => out.paths.push(PathBuf::from(path)),
        }
    }
    if out.paths.is_empty() {
        return Err("no script or directory given".to_owned());
    }
    Ok(Some(out))
}

/// Entry point of `verbsim run`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let args = match crate::parsed_or_exit("run", HELP, parse_args(args)) {
        Ok(a) => a,
        Err(code) => return code,
    };
    match args.backend {
        Backend::Sim => run_sim(&args),
        Backend::Hw => run_hw(&args),
    }
}

/// Builds the simulator a script asks for (`#! seed:`, `#! devices:`),
/// writing its trace to `trace` when given.
fn sim_backend(script: &Script, seed: u64, trace: Option<PathBuf>) -> Result<SimVerbs, Outcome> {
    let mut config = SimConfig {
        seed,
        ..SimConfig::default()
    };
    if !script.headers.devices.is_empty() {
        let mut devices = Vec::new();
        for name in &script.headers.devices {
            devices.push(DeviceProfile::by_name(name).ok_or_else(|| Outcome::Fail {
                line: 0,
                message: format!(
                    "unknown device profile `{name}` in `#! devices:` (known: cx6 cx7 rxe)"
                ),
            })?);
        }
        config = SimConfig::for_profiles(seed, devices);
    }
    config.chrome_trace = trace;
    Ok(SimVerbs::new(config))
}

fn run_sim(args: &Args) -> ExitCode {
    let override_seed = args.seed.or_else(seed_from_env);
    // The seed printed in failures is the one each script's simulator was built with.
    let options = RunOptions {
        seed: override_seed,
        verbose: args.verbose,
        ..RunOptions::default()
    };
    if let Some(dir) = &args.trace {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("verbsim run: --trace {}: {e}", dir.display());
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let make = |script: &Script| {
        let trace = args.trace.as_ref().map(|dir| {
            let stem = std::path::Path::new(&script.path)
                .file_stem()
                .map_or_else(|| "script".into(), |s| s.to_string_lossy().into_owned());
            dir.join(format!("{stem}.json"))
        });
        sim_backend(script, effective_seed(script, override_seed), trace)
    };
    finish(run_path(&args.paths, make, &options, printer(args)), args)
}

#[cfg(feature = "hw")]
fn run_hw(args: &Args) -> ExitCode {
    if args.seed.is_some() {
        eprintln!("verbsim run: note: --seed only affects the simulator");
    }
    let strict = std::env::var_os("VERBS_TEST_DEVICE").is_some();
    let options = RunOptions {
        verbose: args.verbose,
        ..RunOptions::default()
    };
    // No device: say so once, not once per script.
    if !strict {
        if let Err(e) = backend_hw::HwVerbs::new() {
            return match conformance::collect_scripts(&args.paths) {
                Ok(found) if found.is_empty() => no_scripts(&args.paths),
                Ok(found) => {
                    let reason = format!("no RDMA device: {e}");
                    if args.json.as_deref() != Some(std::path::Path::new("-")) {
                        println!(
                            "SKIP all {} scripts: {reason} (set VERBS_TEST_DEVICE to make this a failure)",
                            found.len()
                        );
                    }
                    let mut summary = conformance::Summary::default();
                    for p in found {
                        summary.add(
                            p.display().to_string(),
                            Outcome::Skip {
                                reason: reason.clone(),
                            },
                        );
                    }
                    finish(Ok(summary), args)
                }
                Err(e) => {
                    eprintln!("verbsim run: {e}");
                    ExitCode::from(EXIT_USAGE)
                }
            };
        }
    }
    // VERBS_TEST_DEVICE=NAME runs every script on that device (index 0).
    let make = |_: &Script| match backend_hw::HwVerbs::from_env() {
        Ok(hw) => Ok(hw),
        Err(e) if strict => Err(Outcome::Fail {
            line: 0,
            message: format!("VERBS_TEST_DEVICE is set but: {e}"),
        }),
        Err(e) => Err(Outcome::Skip {
            reason: format!("no RDMA device: {e}"),
        }),
    };
    finish(run_path(&args.paths, make, &options, printer(args)), args)
}

#[cfg(not(feature = "hw"))]
fn run_hw(_: &Args) -> ExitCode {
    eprintln!(
        "verbsim run: this build has no hardware backend.\n\
         Build with the `hw` feature (needs libibverbs-dev, librdmacm-dev, libclang-dev):\n\
         \n    cargo run -p verbsim-cli --features hw -- run --backend hw PATH..."
    );
    ExitCode::from(EXIT_USAGE)
}

/// Prints each script's line, unless standard output carries the JSON.
fn printer(args: &Args) -> impl FnMut(&str, &Outcome) {
    let quiet = args.json.as_deref() == Some(std::path::Path::new("-"));
    move |path, outcome| {
        if !quiet {
            println!("{}", outcome.report_line(path));
        }
    }
}

/// Exit status when every script was skipped.
const EXIT_NOTHING_RAN: u8 = 3;

/// No script under the paths: a usage error, not a pass.
fn no_scripts(paths: &[PathBuf]) -> ExitCode {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    eprintln!("verbsim run: no *.verbs script under {}", shown.join(" "));
    ExitCode::from(EXIT_USAGE)
}

fn finish(summary: std::io::Result<conformance::Summary>, args: &Args) -> ExitCode {
    let to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    match summary {
        Ok(s) if s.passed + s.failed + s.skipped == 0 => no_scripts(&args.paths),
        Ok(s) => {
            let code = if s.failed > 0 {
                ExitCode::FAILURE
            } else if s.passed == 0 {
                ExitCode::from(EXIT_NOTHING_RAN)
            } else {
                ExitCode::SUCCESS
            };
            if !to_stdout {
                println!("{}", s.closing_line());
                if s.failed == 0 && s.passed == 0 {
                    println!("nothing ran: all {} scripts were skipped", s.skipped);
                }
            }
            let backend = match args.backend {
                Backend::Sim => "sim",
                Backend::Hw => "hw",
            };
            // A report that cannot be written is said, and turns a passing
            // run's status into 2; a failing run keeps its 1.
            let mut write_failed = false;
            let mut write = |path: &std::path::Path, text: String| {
                let r = if path == std::path::Path::new("-") {
                    print!("{text}");
                    Ok(())
                } else {
                    std::fs::write(path, text)
                };
                if let Err(e) = r {
                    eprintln!("verbsim run: cannot write {}: {e}", path.display());
                    write_failed = true;
                }
            };
            if let Some(p) = &args.junit {
                write(p, crate::report::junit(&s, backend));
            }
            if let Some(p) = &args.json {
                write(p, crate::report::json_report(&s, backend));
            }
            if write_failed && s.failed == 0 {
                ExitCode::from(EXIT_USAGE)
            } else {
                code
            }
        }
        Err(e) => {
            eprintln!("verbsim run: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Keeps the generic bound visible: every backend goes through the same runner.
#[allow(dead_code)]
fn assert_backend<V: Verbs>(_: &V) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    // Goal: the hand-written argument parser accepts the documented forms
    // and rejects the rest with a message.
    // Method: table of command lines.
    #[test]
    fn run_arguments_parse() {
        let a = parse_args(&strings(&[
            "--backend",
            "hw",
            "--seed=7",
            "-v",
            "a.verbs",
            "dir",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(a.backend, Backend::Hw);
        assert_eq!(a.seed, Some(7));
        assert!(a.verbose);
        assert_eq!(
            a.paths,
            vec![PathBuf::from("a.verbs"), PathBuf::from("dir")]
        );
        assert!(parse_args(&strings(&["--help"])).unwrap().is_none());
        assert_eq!(
            parse_args(&strings(&[])).unwrap_err(),
            "no script or directory given"
        );
        assert_eq!(
            parse_args(&strings(&["--backend", "gpu", "x"])).unwrap_err(),
            "unknown backend `gpu` (sim or hw)"
        );
        assert_eq!(
            parse_args(&strings(&["--seed", "x", "y"])).unwrap_err(),
            "--seed needs a number, got `x`"
        );
        assert_eq!(
            parse_args(&strings(&["--seed"])).unwrap_err(),
            "--seed needs a value"
        );
        assert_eq!(
            parse_args(&strings(&["--frobnicate", "x"])).unwrap_err(),
            "unknown option `--frobnicate`"
        );
    }
}
