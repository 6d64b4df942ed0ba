//! `verbsim run`: run `.verbs` scripts and print one line per script.

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use conformance::{effective_seed, run_path, seed_from_env, Outcome, RunOptions, Script};
use std::path::PathBuf;
use std::process::ExitCode;
use verbs_api::Verbs;

use crate::EXIT_USAGE;

/// What `verbsim run --help` says after the options.
const AFTER_HELP: &str = "\
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

--backend hw needs a build with the `hw` feature:
  cargo run -p verbsim-cli --features hw -- run --backend hw PATH...
Without a device every script is SKIPped, unless VERBS_TEST_DEVICE is set,
which makes that a failure. VERBS_TEST_DEVICE=NAME (as ibv_devices lists
it) runs every script on that device: it is index 0, the other devices
follow; a name that is not there fails.";

/// Which backend `--backend` selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Backend {
    /// The deterministic simulator.
    Sim,
    /// The hardware backend (a build with the `hw` feature).
    Hw,
}

/// A seed: decimal or 0x hex.
pub(crate) fn parse_seed(s: &str) -> Result<u64, String> {
    conformance::literal::parse_int(s)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| format!("`{s}` is not a seed (a number, decimal or 0x hex)"))
}

/// The command line of `verbsim run`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct RunArgs {
    /// The backend.
    #[arg(long, value_enum, default_value = "sim")]
    backend: Backend,
    /// The simulator's root seed for every script (overrides `#! seed:`;
    /// the environment variable VERBS_SIM_SEED does too).
    #[arg(long, value_name = "N", value_parser = parse_seed)]
    seed: Option<u64>,
    /// Print each statement before running it.
    #[arg(short, long)]
    verbose: bool,
    /// Also write a JUnit XML report (one testcase per script; a
    /// failure's message is file:line: what, with the seed).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write the run as JSON (`-` for standard output, which then
    /// carries only the JSON).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Simulator: write each script's trace as Chrome trace-event JSON to
    /// DIR, one file per script named by its path relative to the working
    /// directory (`a/b.verbs` -> `a__b.json`, `../c.verbs` -> `up__c.json`),
    /// to open in ui.perfetto.dev or chrome://tracing.
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
    /// Scripts, or directories searched for *.verbs.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
}

/// Entry point of `verbsim run`.
pub(crate) fn main(args: RunArgs) -> ExitCode {
    if let Err(why) = check_outputs(&args) {
        return crate::usage_error(Some("run"), &why);
    }
    match args.backend {
        Backend::Sim => run_sim(&args),
        Backend::Hw => run_hw(&args),
    }
}

/// The report files and the trace directory can be written: checked
/// before any script runs.
fn check_outputs(args: &RunArgs) -> Result<(), String> {
    for (flag, path) in [("--junit", &args.junit), ("--json", &args.json)] {
        if let Some(p) = path.as_deref().filter(|p| *p != std::path::Path::new("-")) {
            crate::out::check_writable(p).map_err(|e| format!("{flag} {}: {e}", p.display()))?;
        }
    }
    if let Some(dir) = &args.trace {
        std::fs::create_dir_all(dir).map_err(|e| format!("--trace {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// The trace file of the script at `path` under `dir`: the script's path,
/// relative to the working directory when it is under it, with `/` as
/// `__`, so scripts of one name in different folders get different files.
pub(crate) fn trace_file(dir: &std::path::Path, path: &str) -> PathBuf {
    let p = std::path::Path::new(path);
    let cwd = std::env::current_dir().ok();
    let rel = cwd
        .as_deref()
        .and_then(|c| p.strip_prefix(c).ok())
        .unwrap_or(p);
    let mut parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            std::path::Component::ParentDir => Some("up".to_owned()),
            _ => None,
        })
        .collect();
    if let Some(last) = parts.last_mut() {
        if let Some(stem) = last.strip_suffix(".verbs") {
            *last = stem.to_owned();
        }
    }
    let name = if parts.is_empty() {
        "script".to_owned()
    } else {
        parts.join("__")
    };
    dir.join(format!("{name}.json"))
}

/// Builds the simulator a script asks for (`#! seed:`, `#! devices:`,
/// `#! sim:`),
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
    for (name, value) in &script.headers.sim {
        config
            .set_option(name, value)
            .map_err(|message| Outcome::Fail {
                line: 0,
                message: format!("`#! sim: {name}={value}`: {message}"),
            })?;
    }
    config.chrome_trace = trace;
    Ok(SimVerbs::new(config))
}

fn run_sim(args: &RunArgs) -> ExitCode {
    let override_seed = args.seed.or_else(seed_from_env);
    // The seed printed in failures is the one each script's simulator was built with.
    let options = RunOptions {
        seed: override_seed,
        verbose: args.verbose,
        ..RunOptions::default()
    };
    let make = |script: &Script| {
        let trace = args.trace.as_ref().map(|dir| trace_file(dir, &script.path));
        sim_backend(script, effective_seed(script, override_seed), trace)
    };
    finish(run_path(&args.paths, make, &options, printer(args)), args)
}

#[cfg(feature = "hw")]
fn run_hw(args: &RunArgs) -> ExitCode {
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
                        crate::out::outln!(
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
fn run_hw(_: &RunArgs) -> ExitCode {
    eprintln!(
        "verbsim run: this build has no hardware backend.\n\
         Build with the `hw` feature (needs libibverbs-dev, librdmacm-dev, libclang-dev):\n\
         \n    cargo run -p verbsim-cli --features hw -- run --backend hw PATH..."
    );
    ExitCode::from(EXIT_USAGE)
}

/// Prints each script's line, unless standard output carries the JSON.
fn printer(args: &RunArgs) -> impl FnMut(&str, &Outcome) {
    let quiet = args.json.as_deref() == Some(std::path::Path::new("-"));
    move |path, outcome| {
        if !quiet {
            crate::out::outln!("{}", outcome.report_line(path));
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

fn finish(summary: std::io::Result<conformance::Summary>, args: &RunArgs) -> ExitCode {
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
                crate::out::outln!("{}", s.closing_line());
                if s.failed == 0 && s.passed == 0 {
                    crate::out::outln!("nothing ran: all {} scripts were skipped", s.skipped);
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
                    crate::out::out!("{text}");
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
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Cmd::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|c| c.run)
    }

    // Goal: the documented forms parse, the rest is refused naming the
    // flag. Method: table of command lines.
    #[test]
    fn run_arguments_parse() {
        let a = parse(&["--backend", "hw", "--seed=0x7", "-v", "a.verbs", "dir"]).unwrap();
        assert_eq!(a.backend, Backend::Hw);
        assert_eq!(a.seed, Some(7));
        assert!(a.verbose);
        assert_eq!(
            a.paths,
            vec![PathBuf::from("a.verbs"), PathBuf::from("dir")]
        );
        for (args, want) in [
            (&[][..], "PATH"),
            (&["--backend", "gpu", "x"], "gpu"),
            (&["--seed", "x", "y"], "not a seed"),
            (&["--seed"], "--seed"),
            (&["--frobnicate", "x"], "--frobnicate"),
        ] {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    // Goal: trace files are unique per script: two scripts of one name in
    // different folders got one file (122 scripts gave 116 files).
    // Method: the names of a/x.verbs, b/x.verbs and an absolute path.
    #[test]
    fn trace_files_are_named_by_the_scripts_path() {
        let d = std::path::Path::new("/out");
        let a = trace_file(d, "conformance/scripts/a/x.verbs");
        let b = trace_file(d, "conformance/scripts/b/x.verbs");
        assert_ne!(a, b);
        assert_eq!(a, PathBuf::from("/out/conformance__scripts__a__x.json"));
        let cwd = std::env::current_dir().unwrap();
        let abs = cwd.join("s/y.verbs");
        assert_eq!(
            trace_file(d, abs.to_str().unwrap()),
            PathBuf::from("/out/s__y.json")
        );
    }
}
