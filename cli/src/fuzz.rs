//! `verbsim fuzz`: the swarm ([`conformance::swarm`]) on the simulator over
//! any seed range, with the per-verb coverage counters and the rate
//! (docs/swarm.md). CI runs a fixed range through `cargo test -p
//! conformance --test swarm` and this command.

use std::process::ExitCode;
use std::time::Instant;

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use conformance::swarm::{run_seed_traced, script_for, SwarmConfig, SwarmReport};

use crate::out::{out, outln};

/// What `verbsim fuzz --help` says after the options.
const AFTER_HELP: &str = "\
Each seed picks which verb families are on and how heavily, makes N random
calls (valid and invalid) on a fresh two-device world, checks the
invariants after every call and tears everything down. Each failing seed
is printed with what broke and the failing sequence shrunk to a .verbs
script that replays it (`verbsim run FILE`).

Even seeds run two ConnectX-6 devices, odd seeds a ConnectX-7 and an rxe.
The last line is `N passed, N failed` (seeds). Exit status: 0 when every
seed passed, 1 when one failed, 2 on a usage error. `verbsim fuzz --seeds
0..1100` makes about 10^6 calls (docs/swarm.md).";

/// The command line of `verbsim fuzz`.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct FuzzArgs {
    /// The seeds, B excluded; `A` alone is one seed.
    #[arg(long, value_name = "A..B", default_value = "0..100", value_parser = parse_range)]
    seeds: (u64, u64),
    /// Calls drawn per seed (1..=1000000; a call on an empty or taken slot
    /// is skipped).
    #[arg(long, value_name = "N", default_value_t = 1_500, value_parser = parse_calls)]
    calls: usize,
    /// Print the per-verb counters (ok / refused).
    #[arg(long)]
    coverage: bool,
    /// Run every seed twice and require the same digest of calls, answers
    /// and simulator trace (determinism).
    #[arg(long)]
    twice: bool,
    /// Run every seed again with the executor's shortcuts off
    /// (SimConfig::fast_paths) and require the same digest.
    #[arg(long)]
    compare_paths: bool,
    /// Write the first failure's shrunk script to FILE.
    #[arg(long, value_name = "FILE")]
    script_out: Option<std::path::PathBuf>,
    /// Print the first seed's whole run as a .verbs script (what the
    /// simulator answered as expectations) instead of fuzzing.
    #[arg(long)]
    print_script: bool,
}

/// `--calls N`.
fn parse_calls(s: &str) -> Result<usize, String> {
    s.parse()
        .ok()
        .filter(|&n| n > 0 && n <= 1_000_000)
        .ok_or_else(|| format!("expected 1..=1000000, got `{s}`"))
}

/// `A..B` or `A`.
fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let num = |x: &str| {
        x.trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|_| format!("`{x}` is not a seed (a decimal number)"))
    };
    match s.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (num(a)?, num(b)?);
            if b <= a {
                return Err(format!("the range {s} is empty"));
            }
            Ok((a, b))
        }
        None => {
            let a = num(s)?;
            Ok((a, a.saturating_add(1)))
        }
    }
}

/// The world of a seed: two ConnectX-6 (DC, XRC, atomics) for even seeds,
/// a ConnectX-7 and an rxe device (RoCE, the rxe rules) for odd ones; the
/// same worlds as `conformance/tests/swarm.rs`.
pub(crate) fn world(seed: u64) -> SimVerbs {
    SimVerbs::new(world_config(seed))
}

/// The configuration of [`world`].
fn world_config(seed: u64) -> SimConfig {
    let devices = if seed % 2 == 0 {
        vec![DeviceProfile::connectx6(), DeviceProfile::connectx6()]
    } else {
        vec![DeviceProfile::connectx7(), DeviceProfile::rxe()]
    };
    SimConfig::for_profiles(seed, devices)
}

/// [`world`] with every shortcut of the executor off
/// (`SimConfig::fast_paths`).
fn general_world(seed: u64) -> SimVerbs {
    SimVerbs::new(SimConfig {
        fast_paths: false,
        ..world_config(seed)
    })
}

/// The seed's run configuration, with the `#! devices:` header of
/// [`world`] for failure scripts.
pub(crate) fn config(seed: u64, calls: usize) -> SwarmConfig {
    SwarmConfig {
        seed,
        calls,
        devices: if seed % 2 == 0 { "cx6 cx6" } else { "cx7 rxe" },
    }
}

/// What is alive, or `nothing` (librdmacm's own contexts and default PDs
/// live as long as the library and are not counted).
pub(crate) fn live(v: &SimVerbs) -> String {
    let l = v.live_objects();
    if l.is_empty() {
        "nothing".to_owned()
    } else {
        l.to_string()
    }
}

/// The simulator's trace, virtual time and event count, hashed.
pub(crate) fn trace(v: &SimVerbs) -> u64 {
    let t = v.trace();
    let text = format!("{}|{}|{}|{}", v.now_ns(), t.len(), t.dropped(), t.render());
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One seed, once.
pub(crate) fn run_one(seed: u64, calls: usize) -> SwarmReport {
    run_seed_traced(config(seed, calls), &world, &live, &trace)
}

/// `verbsim fuzz ARGS`.
pub(crate) fn main(a: FuzzArgs) -> ExitCode {
    if let Some(p) = &a.script_out {
        if let Err(e) = crate::out::check_writable(p) {
            return crate::usage_error(Some("fuzz"), &format!("--script-out {}: {e}", p.display()));
        }
    }
    if a.print_script {
        out!("{}", script_for(config(a.seeds.0, a.calls), &world));
        return ExitCode::SUCCESS;
    }
    let start = Instant::now();
    let mut total = SwarmReport::default();
    let (mut passed, mut failed) = (0u64, 0u64);
    let mut first_script: Option<String> = None;
    let (lo, hi) = a.seeds;
    let mut seeds_run = 0u64;
    for seed in lo..hi {
        let r = run_one(seed, a.calls);
        seeds_run += 1;
        let mut why = r
            .failure
            .as_ref()
            .map(|f| (f.why.clone(), f.script.clone()));
        if a.compare_paths && why.is_none() {
            let general = run_seed_traced(config(seed, a.calls), &general_world, &live, &trace);
            total.calls += general.calls;
            if general.digest != r.digest || general.calls != r.calls {
                why = Some((
                    format!(
                        "the fast paths and the general path differ: digest {:#018x} ({} calls) \
                         with them, {:#018x} ({} calls) without",
                        r.digest, r.calls, general.digest, general.calls
                    ),
                    String::new(),
                ));
            }
        }
        if a.twice && why.is_none() {
            let again = run_one(seed, a.calls);
            total.calls += again.calls;
            if again.digest != r.digest || again.calls != r.calls {
                why = Some((
                    format!(
                        "not deterministic: digest {:#018x} ({} calls) then {:#018x} ({} calls)",
                        r.digest, r.calls, again.digest, again.calls
                    ),
                    String::new(),
                ));
            }
        }
        total.absorb(&r);
        match why {
            None => passed += 1,
            Some((why, script)) => {
                failed += 1;
                outln!("FAIL seed {seed}: {why}");
                if !script.is_empty() {
                    outln!("--- shrunk script (VERBS_SIM_SEED={seed}) ---\n{script}---");
                    if first_script.is_none() {
                        first_script = Some(script);
                    }
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if let (Some(path), Some(script)) = (&a.script_out, &first_script) {
        if let Err(e) = std::fs::write(path, script) {
            eprintln!("verbsim fuzz: cannot write {}: {e}", path.display());
        }
    }
    if a.coverage {
        out!("{}", total.coverage());
    }
    outln!(
        "{} calls in {secs:.2} s ({:.0} calls/s), seeds {lo}..{}, {} calls drawn per seed{}, digest {:#018x}",
        total.calls,
        total.calls as f64 / secs.max(1e-9),
        lo + seeds_run,
        a.calls,
        match (a.twice, a.compare_paths) {
            (true, true) => ", every seed twice and on the general path",
            (true, false) => ", every seed twice",
            (false, true) => ", every seed also on the general path",
            (false, false) => "",
        },
        total.digest,
    );
    outln!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cmd {
        #[command(flatten)]
        fuzz: FuzzArgs,
    }

    fn parse(s: &str) -> Result<FuzzArgs, clap::Error> {
        Cmd::try_parse_from(std::iter::once("fuzz").chain(s.split_whitespace())).map(|c| c.fuzz)
    }

    #[test]
    fn parses_ranges_and_flags() {
        let a = parse("--seeds 10..20 --calls 50 --twice --coverage").unwrap();
        assert_eq!(a.seeds, (10, 20));
        assert_eq!(a.calls, 50);
        assert!(a.twice && a.coverage && !a.print_script && !a.compare_paths);
        assert!(parse("--compare-paths").unwrap().compare_paths);
        assert_eq!(parse("--seeds 7").unwrap().seeds, (7, 8));
        assert_eq!(parse("").unwrap().seeds, (0, 100));
        assert!(parse("--seeds 5..5").is_err());
        assert!(parse("--seeds x..3").is_err());
        assert!(parse("--calls 0").is_err());
        assert!(parse("--bogus").is_err());
    }

    #[test]
    fn a_seed_runs_the_same_twice_and_differs_from_another() {
        let a = run_one(3, 1_500);
        let b = run_one(3, 1_500);
        let c = run_one(4, 1_500);
        assert!(a.failure.is_none() && c.failure.is_none());
        assert!(a.calls > 300, "only {} calls", a.calls);
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.calls, b.calls);
        assert_ne!(a.digest, c.digest);
    }
}
