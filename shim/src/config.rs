//! The world's configuration, read from the environment once per process.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `VERBSIM_SEED` (or `VERBS_SIM_SEED`) | the root seed | 0 |
//! | `VERBSIM_DEVICES` | device profiles, comma separated: `cx6`, `cx7`, `rxe` | `cx6,cx6` |
//! | `VERBSIM_FAULTS` | fabric faults, comma separated: `drop=PPM`, `dup=PPM`, `reorder=PPM`, `delay=PPM:NS` (PPM: per million packets) | none |
//! | `VERBSIM_TRACE` | write the simulator's trace to this file when the process exits | none |
//! | `VERBSIM_CHROME_TRACE` | write a Chrome/Perfetto JSON trace to this file | none |
//! | `VERBSIM_SIM_OPTIONS` | simulator divergence knobs, comma separated `NAME=VALUE` (`cq_overrun=error\|continue`, `dc_key_violation=silent_drop\|nak`, `errno_flavor=mlx5\|spec`; `SimConfig::set_option`) | the simulator's defaults |
//! | `VERBSIM_SHIM_LOG` | log every failing verb to stderr: name, errno, why | off |
//!
//! A malformed value is reported once on stderr and ignored (the program
//! runs with the default), because a C program has no way to receive a
//! configuration error.

use backend_sim::{DeviceProfile, SimConfig};
use verbs_api::FaultAction;

/// What the environment asked for.
#[derive(Clone, Debug)]
pub(crate) struct ShimConfig {
    /// The simulator's configuration.
    pub(crate) sim: SimConfig,
    /// Faults to install at start: (action, rate in ppm).
    pub(crate) faults: Vec<(FaultAction, u32)>,
    /// Where to write the text trace at exit.
    pub(crate) trace_file: Option<std::path::PathBuf>,
}

impl ShimConfig {
    /// Reads the variables of the module documentation.
    pub(crate) fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let seed = var("VERBSIM_SEED")
            .or_else(|| var("VERBS_SIM_SEED"))
            .and_then(|s| match s.trim().parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    warn(format_args!("VERBSIM_SEED={s:?} is not a number; using 0"));
                    None
                }
            })
            .unwrap_or(0);
        let mut devices = Vec::new();
        if let Some(list) = var("VERBSIM_DEVICES") {
            for name in list.split(',') {
                match DeviceProfile::by_name(name) {
                    Some(p) => devices.push(p),
                    None => warn(format_args!(
                        "VERBSIM_DEVICES: unknown profile {name:?} (cx6, cx7, rxe); ignored"
                    )),
                }
            }
        }
        if devices.is_empty() {
            devices = vec![DeviceProfile::connectx6(), DeviceProfile::connectx6()];
        }
        let mut sim = SimConfig::for_profiles(seed, devices);
        if let Some(list) = var("VERBSIM_SIM_OPTIONS") {
            apply_options(&mut sim, &list);
        }
        sim.chrome_trace = var("VERBSIM_CHROME_TRACE").map(Into::into);
        let trace_file: Option<std::path::PathBuf> = var("VERBSIM_TRACE").map(Into::into);
        sim.trace_enabled = trace_file.is_some() || sim.chrome_trace.is_some();
        let faults = var("VERBSIM_FAULTS")
            .map(|s| parse_faults(&s))
            .unwrap_or_default();
        Self {
            sim,
            faults,
            trace_file,
        }
    }
}

/// `drop=PPM,dup=PPM,reorder=PPM,delay=PPM:NS`, read by the same parser
/// as `verbsim exec --faults` (which refuses a bad one before the program
/// starts); here a bad item is said and skipped, since a C program has no
/// way to receive the error.
fn parse_faults(s: &str) -> Vec<(FaultAction, u32)> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match backend_sim::fault_spec::parse_fault_spec(item) {
            Ok(f) => out.extend(f),
            Err(why) => warn(format_args!("VERBSIM_FAULTS: {why}; ignored")),
        }
    }
    out
}

/// `NAME=VALUE,…` into the simulator's configuration; a bad item is said
/// and skipped, the others apply.
fn apply_options(sim: &mut SimConfig, list: &str) {
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let r = match item.split_once('=') {
            Some((name, value)) => sim.set_option(name.trim(), value.trim()),
            None => Err(format!("expected NAME=VALUE, got {item:?}")),
        };
        if let Err(why) = r {
            warn(format_args!("VERBSIM_SIM_OPTIONS: {why}; ignored"));
        }
    }
}

fn warn(msg: core::fmt::Arguments<'_>) {
    eprintln!("verbsim shim: {msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_reject() {
        let f = parse_faults("drop=1000, delay=50:2000,bogus=1,reorder=2000000");
        assert_eq!(
            f,
            vec![(FaultAction::Drop, 1000), (FaultAction::DelayNs(2000), 50)]
        );
    }

    #[test]
    fn sim_options_apply_and_skip_bad_items() {
        let mut sim = SimConfig::default();
        apply_options(
            &mut sim,
            "cq_overrun=continue, bogus=1,errno_flavor=spec,cq_overrun",
        );
        assert_eq!(sim.cq_overrun_qp, backend_sim::CqOverrunQp::Continue);
        assert_eq!(sim.errno_flavor, backend_sim::ErrnoFlavor::Spec);
    }
}
