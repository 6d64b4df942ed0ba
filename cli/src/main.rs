//! The `verbsim` command.
//!
//! ```text
//! verbsim run [--backend sim|hw] [--seed N] [--junit FILE] [--json FILE] [--trace DIR] PATH...
//! verbsim perf [--backend sim|hw] [--seed N] [--json] TEST [perftest's flags]
//! verbsim fuzz [--seeds A..B] [--calls N] [--coverage] [--twice]
//! verbsim calibrate
//! verbsim exec [--seed N] [--log] [--faults SPEC] [--fabric NAME] -- PROGRAM ARGS...
//! verbsim fabric --socket PATH
//! verbsim completions SHELL
//! ```
//!
//! The command line is parsed by clap (derive): each subcommand's
//! arguments are a struct in its own module. A usage error is one line on
//! standard error (what was wrong, and where the help is) and exit status
//! 2; every argument is checked before any work starts. Output goes
//! through [`out`], so a reader that closes the pipe early (`| head`) ends
//! the command quietly.

mod calibrate;
mod exec;
mod fabric;
mod fuzz;
mod out;
mod perf;
mod plot;
mod report;
mod run;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Exit status for a usage error (bad flag, missing argument, backend not built in).
const EXIT_USAGE: u8 = 2;

/// Commands in one line each, with their main options: the end of
/// `verbsim --help`.
const COMMANDS: &str = "\
Commands and their main options (`verbsim COMMAND --help` for all):
  verbsim run [--backend sim|hw] [--seed N] [--verbose] [--junit FILE]
              [--json FILE] [--trace DIR] PATH...
      run .verbs conformance scripts (files or directories)
  verbsim perf [--backend sim|hw] [--seed N] [--json] TEST [-s SIZE] [-n N]
               [-q N] [-c RC|UC|UD] [-t N] [-l N] [-a] [--plot FILE]
               [--out_json] [--report_gbits] [-d DEV]
               [--device-profile cx6|cx7|rxe] [--link-speed S]
      perftest-like benchmarks with perftest's flags (docs/perftest-flags.md)
  verbsim fuzz [--seeds A..B] [--calls N] [--coverage] [--twice]
      swarm testing: random calls with invariants, failures shrunk to a
      .verbs script (docs/swarm.md)
  verbsim calibrate [--device-profile P] [--link-speed S]
      the simulator's timing against published perftest figures (fitted
      anchors and held-out points), or one profile's predictions
  verbsim exec [--seed N] [--devices cx6,cx6] [--log] [--faults SPEC]
               [--fabric NAME] [--trace FILE] [--chrome-trace FILE]
               [--no-device-files] -- PROGRAM ARGS...
      run an unmodified RDMA program on the simulator through the drop-in
      libibverbs.so.1; --fabric joins programs in several processes
      (docs/drop-in.md)
  verbsim fabric --socket PATH [--exit-when-idle] [--pace wall|virtual]
      one simulated fabric shared by several processes
  verbsim completions bash|zsh|fish|elvish|powershell
      shell completions on standard output

See docs/user-guide.md and docs/script-format.md.";

/// verbsim: the RDMA verbs simulator and conformance runner.
#[derive(Debug, Parser)]
#[command(
    name = "verbsim",
    version,
    about = "verbsim: the RDMA verbs simulator and conformance runner",
    after_help = COMMANDS,
    subcommand_required = true,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
// Parsed once per run and matched at once: its size costs nothing, and
// boxing the perf and calibrate arguments (a device profile each) would
// only add indirection.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Run .verbs conformance scripts (files or directories).
    Run(run::RunArgs),
    /// perftest-like benchmarks on the simulator or on hardware.
    Perf(perf::PerfArgs),
    /// Swarm testing on the simulator (docs/swarm.md).
    Fuzz(fuzz::FuzzArgs),
    /// The simulator's timing against published perftest figures.
    Calibrate(calibrate::CalibrateArgs),
    /// Run an unmodified RDMA program on the simulator.
    Exec(exec::ExecArgs),
    /// One simulated fabric shared by several processes.
    Fabric(fabric::FabricArgs),
    /// Print a shell completion script for verbsim.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The names of the subcommands, to say whose usage error it is.
fn subcommand_of(argv: &[std::ffi::OsString]) -> Option<String> {
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    argv.iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .find(|a| !a.starts_with('-'))
        .filter(|a| names.iter().any(|n| n == a))
        .map(str::to_owned)
}

/// A usage error as one line on standard error, with where the help is;
/// exit status 2.
pub(crate) fn usage_error(command: Option<&str>, why: &str) -> ExitCode {
    let (who, help) = match command {
        Some(c) => (format!("verbsim {c}"), format!("verbsim {c} --help")),
        None => ("verbsim".to_owned(), "verbsim --help".to_owned()),
    };
    eprintln!("{who}: {why} (see `{help}`)");
    ExitCode::from(EXIT_USAGE)
}

/// clap's error as one line: its message and its tip, without the usage
/// block and the help hint (added by [`usage_error`]).
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information")
        {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    out::say(format_args!("{}", e.render()));
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    eprint!("{}", e.render());
                    ExitCode::from(EXIT_USAGE)
                }
                _ => usage_error(subcommand_of(&argv).as_deref(), &one_line(&e)),
            };
        }
    };
    match cli.command {
        Command::Run(a) => run::main(a),
        Command::Perf(a) => perf::main(a),
        Command::Fuzz(a) => fuzz::main(a),
        Command::Calibrate(a) => calibrate::main(a),
        Command::Exec(a) => exec::main(a),
        Command::Fabric(a) => fabric::main(a),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "verbsim", &mut buf);
            out::say(format_args!("{}", String::from_utf8_lossy(&buf)));
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: clap's own consistency checks (duplicate flags, bad defaults)
    // pass for every subcommand. Method: clap's debug_assert.
    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    // Goal: the top-level help names every option of `run` and `exec`
    // (they were missing: a newcomer could not find --junit or --fabric).
    // Method: each long flag of the two subcommands, from the parser's
    // definitions, must appear in `verbsim --help`.
    #[test]
    fn top_level_help_names_every_run_and_exec_option() {
        let mut cmd = Cli::command();
        let help = cmd.render_long_help().to_string();
        for sub in ["run", "exec"] {
            let sc = cmd.find_subcommand(sub).expect(sub).clone();
            for arg in sc.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "shim", "verbose"].contains(&long) {
                    continue;
                }
                assert!(
                    help.contains(&format!("--{long}")),
                    "`verbsim --help` does not name {sub} --{long}:\n{help}"
                );
            }
        }
    }

    // Goal: a clap error becomes one line without the usage block.
    #[test]
    fn clap_errors_become_one_line() {
        let e = Cli::try_parse_from(["verbsim", "perf", "write_bw", "--qpp", "2"]).unwrap_err();
        let line = one_line(&e);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("--qpp"), "{line}");
        assert!(!line.contains("Usage"), "{line}");
        assert_eq!(
            subcommand_of(&["verbsim".into(), "perf".into(), "x".into()]).as_deref(),
            Some("perf")
        );
    }
}
