//! `verbsim perf` end to end: usage errors, the control-path tables and
//! JSON on the simulator, and the "not available" exit of the data-path
//! tests while the simulator has no data path.

use std::process::Command;

use backend_sim::SimVerbs;
use verbs_api::{Capabilities, Verbs};

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

/// The raw text of `"key":value` in a flat-enough JSON object (the value
/// ends at the next `,` or `}` outside nested objects for scalars; for an
/// object value, at its closing brace).
fn json_value<'a>(json: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let start = json
        .find(&pat)
        .unwrap_or_else(|| panic!("no key {key} in {json}"))
        + pat.len();
    let rest = &json[start..];
    if rest.starts_with('{') {
        let end = rest.find('}').expect("closing brace");
        &rest[..=end]
    } else {
        let end = rest.find([',', '}']).expect("end of value");
        &rest[..end]
    }
}

// Goal: usage errors are one clear message and exit 2, never a panic.
// Method: an unknown test, a bad size, a transport the workloads lack.
#[test]
fn perf_usage_errors_exit_2() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["perf", "ib_write_bw"],
            "verbsim perf: unknown test `ib_write_bw`",
        ),
        (
            &["perf", "write_bw", "-s", "lots"],
            "verbsim perf: -s needs a number, got `lots`",
        ),
        (
            &["perf", "write_bw", "-s", "0"],
            "verbsim perf: -s must be 1..=",
        ),
        (&["perf", "write_bw", "-c", "UD"], "RC only"),
    ];
    for (args, want) in cases {
        let (code, stdout, stderr) = verbsim(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(
            stderr.lines().next().unwrap_or("").contains(want),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

// Goal: qp_lifecycle runs on the simulator and prints the rate table with
// the iterations asked for, for both clocks.
// Method: -n 1000; find the header and the two rows.
#[test]
fn perf_qp_lifecycle_prints_the_table() {
    let (code, stdout, stderr) = verbsim(&["perf", "qp_lifecycle", "-n", "1000"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("QP Lifecycle"), "{stdout}");
    assert!(stdout.contains("#iterations"), "{stdout}");
    assert!(stdout.contains("rate[Mops/sec]"), "{stdout}");
    for clock in ["wall", "simulated"] {
        let row = stdout
            .lines()
            .find(|l| l.trim_end().ends_with(clock))
            .unwrap_or_else(|| panic!("no {clock} row in {stdout}"));
        assert_eq!(row.split_whitespace().next(), Some("1000"), "{row}");
    }
}

// Goal: --json prints one object with the documented keys and numbers.
// Method: string checks on modify_qp's output: keys, numeric fields parse,
// the tally adds up to the iterations.
#[test]
fn perf_json_has_the_numbers() {
    let (code, stdout, stderr) = verbsim(&[
        "perf",
        "--json",
        "--seed",
        "5",
        "modify_qp",
        "-n",
        "2000",
        "-q",
        "8",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json = stdout.trim();
    assert!(json.starts_with('{') && json.ends_with('}'), "{json}");
    assert_eq!(json.lines().count(), 1, "{json}");
    assert_eq!(json.matches('{').count(), json.matches('}').count());
    assert_eq!(json_value(json, "test"), "\"modify_qp\"");
    assert_eq!(json_value(json, "backend"), "\"sim\"");
    assert_eq!(json_value(json, "seed"), "5");
    assert_eq!(json_value(json, "iterations"), "2000");
    assert_eq!(json_value(json, "qps"), "8");
    let wall = json_value(json, "wall");
    let seconds: f64 = json_value(wall, "seconds").parse().expect("seconds");
    let rate: f64 = json_value(wall, "rate_mops").parse().expect("rate");
    assert!(seconds > 0.0 && rate > 0.0, "{wall}");
    let sim = json_value(json, "sim");
    assert!(
        sim.starts_with('{'),
        "simulated-time figures on the sim: {sim}"
    );
    let _: f64 = json_value(sim, "seconds").parse().expect("sim seconds");
    let modify = json_value(json, "modify");
    let ok: u64 = json_value(modify, "succeeded").parse().unwrap();
    let refused: u64 = json_value(modify, "refused").parse().unwrap();
    assert_eq!(ok + refused, 2000);
}

// Goal: a data-path test on the simulator, which has no data path yet, is
// one clear line and exit 2, not a panic; once the simulator advertises the
// data path, the same command prints the bandwidth table instead.
// Method: write_bw and send_lat with a few iterations.
#[test]
fn perf_data_path_on_the_sim() {
    let data_path = SimVerbs::default()
        .capabilities()
        .contains(Capabilities::DATA_PATH);
    for (test, header) in [
        ("write_bw", "BW average[Gb/sec]"),
        ("send_lat", "t_typical[usec]"),
    ] {
        let (code, stdout, stderr) = verbsim(&["perf", test, "-n", "100"]);
        if data_path {
            assert_eq!(code, 0, "{stderr}");
            assert!(stdout.contains(header), "{stdout}");
        } else {
            assert_eq!(code, 2, "{stdout}{stderr}");
            let line = format!("verbsim perf: {test} is not available on the sim backend yet: ");
            assert!(stderr.starts_with(&line), "{stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stdout.is_empty(), "{stdout}");
        }
    }
}

// Goal: --backend hw is a clear exit 2 on this machine, built with or
// without the hardware backend (there is no RDMA device here).
// Method: run qp_lifecycle on hw.
#[test]
fn perf_hw_without_device_or_feature_exits_2() {
    let (code, _, stderr) = verbsim(&["perf", "--backend", "hw", "qp_lifecycle"]);
    if code == 0 {
        // A machine with an RDMA device and a `hw` build: nothing to check.
        return;
    }
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no hardware backend") || stderr.contains("no RDMA device"),
        "{stderr}"
    );
}
