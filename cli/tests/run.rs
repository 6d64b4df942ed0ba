//! `verbsim run` end to end: the report lines, the closing line and the exit
//! codes, on the conformance fixtures.

use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance/tests/fixtures")
}

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

// Goal: one line per script, the closing line, exit 1 when a script fails.
// Method: run the fixtures directory (which holds one failing fixture).
#[test]
fn run_reports_each_script_and_fails_on_failure() {
    let dir = fixtures();
    let (code, stdout, _) = verbsim(&["run", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let fail = lines
        .iter()
        .find(|l| l.starts_with("FAIL "))
        .expect("a FAIL line");
    assert!(
        fail.contains("fail_expectation_line.verbs:10: modify_qp a"),
        "{fail}"
    );
    assert!(
        fail.ends_with("expected EINVAL, got success (VERBS_SIM_SEED=3)"),
        "{fail}"
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with("SKIP ") && l.ends_with("skip_requires.verbs: requires xrc")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("PASS ") && l.ends_with("pass_resources.verbs")));
    let last = lines.last().unwrap();
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert!(
        last.ends_with(" skipped") && last.contains(" passed, 1 failed, "),
        "{last}"
    );
    assert_eq!(lines.len(), files + 1);
}

// Goal: --seed overrides the script's seed in the failure report; a passing
// file exits 0.
// Method: run single fixtures.
#[test]
fn run_seed_flag_and_success_exit() {
    let failing = fixtures().join("fail_expectation_line.verbs");
    let (code, stdout, _) = verbsim(&["run", "--seed", "77", failing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("(VERBS_SIM_SEED=77)"), "{stdout}");
    let passing = fixtures().join("pass_resources.verbs");
    let (code, stdout, _) = verbsim(&["run", passing.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.ends_with("1 passed, 0 failed, 0 skipped\n"),
        "{stdout}"
    );
}

// Goal: usage errors and the missing hardware backend exit 2 with a message.
// Method: bad flags, no paths, a missing file, `--backend hw` without the feature.
#[test]
fn run_usage_errors() {
    let (code, _, stderr) = verbsim(&["run"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("required arguments were not provided: <PATH>"),
        "{stderr}"
    );
    let (code, _, stderr) = verbsim(&["run", "--bogus", "x"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unexpected argument '--bogus'"), "{stderr}");
    let (code, _, stderr) = verbsim(&["run", "/nonexistent/x.verbs"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no such file or directory"), "{stderr}");
    let (code, stdout, _) = verbsim(&["run", "--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Usage: verbsim run"), "{stdout}");
    assert!(stdout.contains("--junit <FILE>"), "{stdout}");
    if !cfg!(feature = "hw") {
        let (code, _, stderr) = verbsim(&["run", "--backend", "hw", "x.verbs"]);
        assert_eq!(code, 2);
        assert!(
            stderr.contains("this build has no hardware backend"),
            "{stderr}"
        );
        assert!(
            stderr.contains("cargo run -p verbsim-cli --features hw -- run --backend hw"),
            "{stderr}"
        );
    }
}

// Goal: issue #20 item 5: no script found is an error, not a pass; a run
// where everything was skipped says so and exits 3.
#[test]
fn empty_and_all_skipped_runs_have_their_own_exit_codes() {
    let dir = std::env::temp_dir().join(format!("verbsim-run-codes-{}", std::process::id()));
    let empty = dir.join("empty");
    let skipped = dir.join("skipped");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::create_dir_all(&skipped).unwrap();
    std::fs::write(
        skipped.join("hw_only.verbs"),
        "#! description: runs on hardware only\n#! backends: hw\nlet d0 = open_device index=0\n",
    )
    .unwrap();
    let (code, stdout, stderr) = verbsim(&["run", empty.to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("no *.verbs script under"), "{stderr}");
    let (code, stdout, _) = verbsim(&["run", skipped.to_str().unwrap()]);
    assert_eq!(code, 3, "{stdout}");
    assert!(stdout.contains("0 passed, 0 failed, 1 skipped"), "{stdout}");
    assert!(
        stdout.contains("nothing ran: all 1 scripts were skipped"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// Goal: issue #17 item 2: the JUnit report is XML a CI reporter reads (one
// testcase per script, the failure's message is file:line with the seed,
// skips marked), the JSON has the same content, `--json -` makes standard
// output pure JSON, and the run's own exit status stands.
#[test]
fn junit_and_json_reports_parse_and_match_the_run() {
    let dir = std::env::temp_dir().join(format!("verbsim-reports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (junit, json) = (dir.join("r.xml"), dir.join("r.json"));
    let fx = fixtures();
    let (code, stdout, stderr) = verbsim(&[
        "run",
        "--junit",
        junit.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        fx.to_str().unwrap(),
    ]);
    assert_eq!(
        code, 1,
        "the fixtures hold a failing script: {stdout}{stderr}"
    );

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let scripts = stdout
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL ") || l.starts_with("SKIP "))
        .count();
    assert_eq!(cases.len(), scripts, "one testcase per script");
    let failures: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .collect();
    assert_eq!(failures.len(), 1);
    let msg = failures[0].attribute("message").unwrap();
    assert!(msg.contains("fail_expectation_line.verbs:10:"), "{msg}");
    assert!(msg.contains("VERBS_SIM_SEED="), "{msg}");
    assert_eq!(
        doc.descendants()
            .filter(|n| n.has_tag_name("skipped"))
            .count(),
        1
    );
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("failures"), Some("1"));

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["failed"], 1);
    assert_eq!(v["scripts"].as_array().unwrap().len(), scripts);
    let fail = v["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["outcome"] == "fail")
        .unwrap();
    assert_eq!(fail["line"], 10);
    assert!(fail["seed"].is_u64());

    // `--json -`: standard output is the JSON alone.
    let (code, stdout, _) = verbsim(&["run", "--json", "-", fx.to_str().unwrap()]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is pure JSON");
    assert_eq!(v["backend"], "sim");

    // A report that cannot be written is refused before any script runs.
    let (code, stdout, stderr) = verbsim(&[
        "run",
        "--junit",
        "/nonexistent/dir/r.xml",
        fx.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "a script ran: {stdout}");
    assert!(
        stderr.contains("--junit /nonexistent/dir/r.xml"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// Goal: issue #17 item 1: `--trace DIR` writes one trace-event file per
// script that a trace viewer reads: metadata naming one track per QP,
// spans from post to completion, packets and drops as instants on virtual
// time. Method: a script with a dropped packet, read with serde_json.
#[test]
fn trace_files_follow_the_trace_event_format() {
    let dir = std::env::temp_dir().join(format!("verbsim-trace-{}", std::process::id()));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../conformance/scripts/datapath/faults/drop_ack.verbs");
    let (code, stdout, stderr) = verbsim(&[
        "run",
        "--trace",
        dir.to_str().unwrap(),
        script.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // Named by the script's path relative to the working directory (cli/).
    let text = std::fs::read_to_string(
        dir.join("up__conformance__scripts__datapath__faults__drop_ack.json"),
    )
    .expect("one file per script");
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(matches!(ph, "M" | "X" | "i"), "{e}");
        assert!(e["pid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
            assert!(e["name"].is_string(), "{e}");
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        }
    }
    let tracks = events.iter().filter(|e| e["name"] == "thread_name").count();
    assert!(tracks >= 2, "a track per QP");
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("request wr_id=")));
    assert!(
        events.iter().any(|e| e["name"] == "packet dropped"),
        "the drop is on the timeline"
    );
    assert!(events.iter().any(|e| e["name"] == "retransmit"));
    let _ = std::fs::remove_dir_all(&dir);
}
