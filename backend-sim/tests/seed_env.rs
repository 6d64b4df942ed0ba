//! Seeds reach users' own tests (issue #20 item 2): `SimVerbs::from_env`
//! takes `VERBS_SIM_SEED`, and a panicking test prints the seed of every
//! simulator alive. Each check runs this binary again as a child with the
//! variable set, so the parent's environment is never touched.
#![allow(missing_docs)]

use backend_sim::{SimConfig, SimVerbs};
use std::process::Command;

const HELPER: &str = "VERBSIM_SEED_ENV_HELPER";

fn child(test: &str, seed: &str) -> (bool, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(HELPER, "1")
        .env("VERBS_SIM_SEED", seed)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn helper_panics_with_a_simulator_alive() {
    if std::env::var_os(HELPER).is_none() {
        return;
    }
    let _sim = SimVerbs::from_env();
    panic!("the user's assertion failed");
}

#[test]
fn helper_checks_the_seed() {
    if std::env::var_os(HELPER).is_none() {
        return;
    }
    let sim = SimVerbs::from_env();
    assert_eq!(sim.seed(), 0x4d, "from VERBS_SIM_SEED");
    assert_eq!(SimConfig::from_env().seed, 0x4d);
}

#[test]
fn from_env_takes_the_seed_of_the_environment() {
    let (ok, stderr) = child("helper_checks_the_seed", "0x4d");
    assert!(ok, "{stderr}");
    let (ok, stderr) = child("helper_checks_the_seed", "77");
    assert!(ok, "77 is 0x4d in decimal: {stderr}");
    let (ok, stderr) = child("helper_checks_the_seed", "78");
    assert!(!ok, "78 is not 0x4d: {stderr}");
}

#[test]
fn a_failing_test_prints_the_seed_of_its_simulator() {
    let (ok, stderr) = child("helper_panics_with_a_simulator_alive", "1234");
    assert!(!ok);
    assert!(stderr.contains("the user's assertion failed"), "{stderr}");
    assert!(
        stderr.contains("VERBS_SIM_SEED=1234 replays it"),
        "{stderr}"
    );
}

#[test]
fn a_bad_seed_is_refused_by_name() {
    let (ok, stderr) = child("helper_checks_the_seed", "twelve");
    assert!(!ok);
    assert!(
        stderr.contains("VERBS_SIM_SEED=\"twelve\" is not a seed"),
        "{stderr}"
    );
}
