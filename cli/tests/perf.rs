//! `verbsim perf` end to end: usage errors, the control-path and data-path
//! tables and JSON on the simulator, with plausible simulated figures.

use std::process::Command;

use backend_sim::fabric::PortConfig;
use backend_sim::SimVerbs;
use verbs_api::{ProcessId, Verbs};

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
            "verbsim perf: invalid value 'lots' for '--size <SIZE>'",
        ),
        (
            &["perf", "write_bw", "-s", "0"],
            "verbsim perf: -s must be 1..=",
        ),
        (
            &["perf", "write_bw", "-c", "UD"],
            "verbsim perf: -c UD: write_bw does not run over UD",
        ),
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

/// The data rate of the simulator's default port, Gb/s (what `verbsim
/// perf` runs on), from `ibv_query_port`.
fn line_rate_gbps() -> f64 {
    let mut v = SimVerbs::default();
    let ctx = v.open_device(0, ProcessId(0)).expect("open");
    let port = v.query_port(&ctx, 1).expect("port");
    let mbps = PortConfig::ib_rate_mbps(port.active_width, port.active_speed).expect("IB rate");
    mbps as f64 / 1e3
}

/// A number of the JSON, parsed.
fn json_f64(json: &str, key: &str) -> f64 {
    let raw = json_value(json, key);
    raw.parse()
        .unwrap_or_else(|_| panic!("{key} is not a number: {raw}"))
}

// Goal: the data-path tests run on the simulator and print their tables,
// both clocks, in the shape perftest prints. Method: write_bw and send_lat
// with a few iterations; find the header and a `wall` and a `simulated` row
// with the size and iterations asked for.
#[test]
fn perf_data_path_prints_the_tables() {
    for (test, header) in [
        ("write_bw", "BW average[MB/sec]"),
        ("send_lat", "t_typical[usec]"),
    ] {
        let (code, stdout, stderr) = verbsim(&["perf", test, "-n", "100"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(header), "{stdout}");
        assert!(stdout.contains("connection: RC | QPs: 1"), "{stdout}");
        for clock in ["wall", "simulated"] {
            let row = stdout
                .lines()
                .find(|l| l.trim_end().ends_with(clock))
                .unwrap_or_else(|| panic!("no {clock} row in {stdout}"));
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cells[1], "100", "{row}");
            assert!(cells[2].parse::<f64>().is_ok_and(|x| x > 0.0), "{row}");
        }
    }
}

// Goal: the simulated figures are plausible for the modelled port: 64 KiB
// RDMA WRITE bandwidth below the line rate (headers and ACKs cost) but
// above half of it (128 in flight keep the link busy), READ bandwidth below
// the line rate, a message rate for 8-byte atomics, and a SEND latency
// above the propagation delay of the round trip the ACK needs.
// Method: --json runs; the `sim` object's numbers.
#[test]
fn perf_simulated_figures_are_plausible() {
    let line = line_rate_gbps();
    let one_way_us = PortConfig::PROPAGATION_NS_DEFAULT as f64 / 1e3;
    for (test, floor) in [("write_bw", 0.5 * line), ("read_bw", 0.0)] {
        let (code, stdout, stderr) = verbsim(&["perf", "--json", test, "-n", "2000"]);
        assert_eq!(code, 0, "{stderr}");
        let sim = json_value(stdout.trim(), "sim");
        let gbps = json_f64(sim, "bw_gbps");
        assert!(
            gbps > floor && gbps < line,
            "{test}: {gbps} Gb/s on a {line} Gb/s port"
        );
        let wall = json_value(stdout.trim(), "wall");
        assert!(json_f64(wall, "bw_gbps") > 0.0, "{wall}");
    }
    let (code, stdout, stderr) = verbsim(&["perf", "--json", "atomic_rate", "-n", "2000"]);
    assert_eq!(code, 0, "{stderr}");
    let sim = json_value(stdout.trim(), "sim");
    assert!(json_f64(sim, "msg_rate_mpps") > 0.0, "{sim}");
    assert_eq!(json_value(stdout.trim(), "atomic"), "\"fetch_add\"");
    let (code, stdout, stderr) = verbsim(&["perf", "--json", "send_lat", "-n", "200"]);
    assert_eq!(code, 0, "{stderr}");
    let sim = json_value(stdout.trim(), "sim");
    let t_min = json_f64(sim, "t_min_us");
    let t_99 = json_f64(sim, "t_p99_us");
    assert!(t_min > 2.0 * one_way_us, "t_min {t_min} us");
    assert!(t_99 >= t_min && t_99 < 100.0, "t_99 {t_99} us");
}

// Goal: -c and -q reach the workloads: UD SEND bandwidth over two QP pairs
// runs and says so in the table; a UD SEND above the MTU cannot run (exit
// 2, one line). Method: send_bw -c UD -q 2 -s 2K, then -s 64K.
#[test]
fn perf_transport_and_qps_options() {
    let (code, stdout, stderr) = verbsim(&[
        "perf", "send_bw", "-c", "UD", "-q", "2", "-s", "2K", "-n", "1000",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("connection: UD | QPs: 2"), "{stdout}");
    let (code, stdout, stderr) = verbsim(&["perf", "send_bw", "-c", "UD", "-s", "64K"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with("verbsim perf: send_bw cannot run on the sim backend: ")
            && stderr.contains("MTU"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
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
