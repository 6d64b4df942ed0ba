//! `verbsim-fabric` (run as `verbsim fabric`): one simulated fabric for
//! several processes (the drop-in library's `VERBSIM_FABRIC`;
//! docs/drop-in.md).
//!
//! A binary of its own, in the shim's package, so that the `verbsim`
//! command never links the drop-in library's code: a binary that did would
//! define `ibv_*` itself, and backend-hw's calls in it would bind to the
//! simulator instead of rdma-core.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use verbsim_shim::fabric::server::{serve, FabricOptions, Pace};

/// `verbsim fabric --help`.
const HELP: &str = "\
verbsim fabric: one simulated fabric shared by several processes

Usage:
  verbsim fabric --socket PATH [OPTIONS]

Processes whose drop-in libibverbs sees VERBSIM_FABRIC=PATH send every verb
here and share one simulated world: a server and a client started as two
programs reach each other as on one host with two ports. `verbsim exec
--fabric PATH` sets that up and starts this command on demand.

The world's configuration comes from the environment: VERBSIM_SEED,
VERBSIM_DEVICES, VERBSIM_FAULTS.

Options:
  --socket PATH       the Unix socket to listen on (required)
  --exit-when-idle    exit when the last process has left and none joined
                      for --linger seconds
  --linger SECS       (default 2)
  --pace wall|virtual wall (default): virtual time never runs ahead of the
                      wall clock, so timers last as on a wire; virtual: time
                      runs as fast as events allow (the trace depends only on
                      the order of the processes' calls)
  --trace FILE        write the simulator's trace to FILE on exit
  -h, --help          this text

Exit status: 0 after --exit-when-idle; 1 when the socket cannot be bound
(another fabric listens there); 2 for a usage error.
";

fn parse(args: &[String]) -> Result<Option<FabricOptions>, String> {
    let mut o = FabricOptions {
        socket: PathBuf::new(),
        exit_when_idle: false,
        linger: Duration::from_secs(2),
        pace: Pace::Wall,
        trace: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--socket" => o.socket = value("--socket")?.into(),
            "--exit-when-idle" => o.exit_when_idle = true,
            "--linger" => {
                let v = value("--linger")?;
                let s: f64 = v
                    .parse()
                    .map_err(|_| format!("--linger {v:?} is not a number"))?;
                if !(0.0..=3600.0).contains(&s) {
                    return Err(format!("--linger {v}: between 0 and 3600 seconds"));
                }
                o.linger = Duration::from_secs_f64(s);
            }
            "--pace" => {
                o.pace = match value("--pace")?.as_str() {
                    "wall" => Pace::Wall,
                    "virtual" => Pace::Virtual,
                    other => return Err(format!("--pace {other:?}: wall or virtual")),
                }
            }
            "--trace" => o.trace = Some(value("--trace")?.into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.socket.as_os_str().is_empty() {
        return Err("--socket PATH is required".into());
    }
    Ok(Some(o))
}

/// Runs `verbsim fabric`.
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = &args[..];
    let opts = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("verbsim fabric: {e}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    match serve(&opts) {
        Ok(stats) => {
            eprintln!(
                "verbsim fabric: done: {} processes, {} calls, {} refused, {} objects reclaimed",
                stats.sessions, stats.calls, stats.refused, stats.reclaimed
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("verbsim fabric: {}: {e}", opts.socket.display());
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_reject() {
        let o = parse(&[
            "--socket".into(),
            "/tmp/x".into(),
            "--pace".into(),
            "virtual".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((o.pace, o.exit_when_idle), (Pace::Virtual, false));
        assert!(parse(&[]).unwrap_err().contains("--socket"));
        assert!(
            parse(&["--socket".into(), "s".into(), "--pace".into(), "x".into()])
                .unwrap_err()
                .contains("wall or virtual")
        );
        assert!(parse(&[
            "--linger".into(),
            "-1".into(),
            "--socket".into(),
            "s".into()
        ])
        .is_err());
    }
}
