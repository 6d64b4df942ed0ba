//! `verbsim fuzz` and `verbsim calibrate` end to end: closing lines and exit
//! codes.

use std::process::Command;

fn verbsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_verbsim"))
        .args(args)
        .env_remove("VERBS_SIM_SEED")
        .output()
        .expect("run verbsim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Goal: a seed range passes with the plain closing line and the counters.
#[test]
fn fuzz_runs_a_range_and_reports_coverage() {
    let (code, stdout, stderr) =
        verbsim(&["fuzz", "--seeds", "10..14", "--calls", "400", "--coverage"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.lines().any(|l| l == "4 passed, 0 failed"),
        "{stdout}"
    );
    assert!(stdout.contains("calls/s), seeds 10..14"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("create_qp ")),
        "{stdout}"
    );
}

// Goal: bad arguments are one-line errors and exit 2.
#[test]
fn fuzz_and_calibrate_refuse_bad_arguments() {
    for args in [
        &["fuzz", "--seeds", "5..5"][..],
        &["fuzz", "--seeds", "x"],
        &["fuzz", "--calls", "0"],
        &["fuzz", "--bogus"],
        &["calibrate", "--bogus"],
    ] {
        let (code, _, stderr) = verbsim(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("verbsim "), "{args:?}: {stderr}");
    }
}

// Goal: the calibration table passes its band and says so.
#[test]
fn calibrate_prints_every_anchor_in_band() {
    let (code, stdout, _) = verbsim(&["calibrate"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("8 of 8 anchors within 0.75-1.33"),
        "{stdout}"
    );
    assert!(!stdout.contains("MISS"), "{stdout}");
}
