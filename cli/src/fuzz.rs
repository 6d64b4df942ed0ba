//! `verbsim fuzz`: the swarm (`conformance::swarm`, issue #12) over a range
//! of seeds on the simulator.

use std::process::ExitCode;
use std::time::Instant;

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use conformance::swarm::{run_seed, SwarmConfig, SwarmReport};

use crate::parsed_or_exit;

/// `verbsim fuzz --help`.
pub(crate) const HELP: &str = "\
verbsim fuzz: swarm testing of the simulator (random verb calls, valid and
invalid, across every family, with invariants checked after each call)

Usage:
  verbsim fuzz [--seeds A..B] [--calls N] [--coverage]

Options:
  --seeds A..B   the seeds to run, B excluded (default 0..100)
  --calls N      calls drawn per seed (default 1500; calls on an empty slot
                 are skipped, so about 4 in 10 reach the backend)
  --coverage     print the per-verb counters (ok / refused)
  -h, --help     this text

Even seeds run two ConnectX-6 devices, odd seeds a ConnectX-7 and an rxe.
Each failing seed is printed with what broke and the shrunk .verbs script
that replays it (`verbsim run FILE`). The last line is `N passed, N failed`
(seeds). Exit status: 0 when every seed passed, 1 when one failed, 2 on a
usage error. `verbsim fuzz --seeds 0..2000` makes about 10^6 calls.
";

struct Args {
    seeds: std::ops::Range<u64>,
    calls: usize,
    coverage: bool,
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        seeds: 0..100,
        calls: 1_500,
        coverage: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--coverage" => a.coverage = true,
            "--seeds" => {
                let v = it.next().ok_or("--seeds needs A..B")?;
                let (lo, hi) = v
                    .split_once("..")
                    .ok_or_else(|| format!("--seeds `{v}`: expected A..B"))?;
                let lo: u64 = lo
                    .parse()
                    .map_err(|_| format!("--seeds `{v}`: bad start"))?;
                let hi: u64 = hi.parse().map_err(|_| format!("--seeds `{v}`: bad end"))?;
                if hi <= lo {
                    return Err(format!("--seeds `{v}`: the range is empty"));
                }
                a.seeds = lo..hi;
            }
            "--calls" => {
                let v = it.next().ok_or("--calls needs a number")?;
                a.calls = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0 && n <= 1_000_000)
                    .ok_or_else(|| format!("--calls `{v}`: expected 1..=1000000"))?;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Some(a))
}

/// The world of a seed (the same as conformance/tests/swarm.rs).
fn world(seed: u64) -> SimVerbs {
    let devices = if seed % 2 == 0 {
        vec![DeviceProfile::connectx6(), DeviceProfile::connectx6()]
    } else {
        vec![DeviceProfile::connectx7(), DeviceProfile::rxe()]
    };
    SimVerbs::new(SimConfig {
        seed,
        ..SimConfig::with_devices(devices)
    })
}

fn live(v: &SimVerbs) -> String {
    let l = v.live_objects();
    if l.is_empty() {
        "nothing".to_owned()
    } else {
        l.to_string()
    }
}

/// Runs `verbsim fuzz`.
pub(crate) fn main(args: &[String]) -> ExitCode {
    let a = match parsed_or_exit("fuzz", HELP, parse(args)) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let started = Instant::now();
    let mut total = SwarmReport::default();
    let (mut passed, mut failed) = (0u64, 0u64);
    for seed in a.seeds.clone() {
        let r = run_seed(
            SwarmConfig {
                seed,
                calls: a.calls,
            },
            &world,
            &live,
        );
        total.absorb(&r);
        match r.failure {
            None => passed += 1,
            Some(f) => {
                failed += 1;
                println!(
                    "FAIL seed {}: {}\n--- shrunk script (VERBS_SIM_SEED={}) ---\n{}---",
                    f.seed, f.why, f.seed, f.script
                );
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if a.coverage {
        print!("{}", total.coverage());
    }
    println!(
        "{} calls in {:.2} s ({:.0} calls/s), seeds {}..{}",
        total.calls,
        secs,
        total.calls as f64 / secs.max(1e-9),
        a.seeds.start,
        a.seeds.end
    );
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
