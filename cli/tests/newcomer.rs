//! What a newcomer meets first: usage errors, perftest's spellings run
//! unchanged, output into a pipe that closes early, shell completions,
//! checks before any work starts.

use std::io::Read as _;
use std::process::{Command, Stdio};

fn verbsim_in(dir: Option<&std::path::Path>, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_verbsim"));
    cmd.args(args).env_remove("VERBS_SIM_SEED");
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().expect("run verbsim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verbsim(args: &[&str]) -> (i32, String, String) {
    verbsim_in(None, args)
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("verbsim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

// Goal: a usage error is one line naming the problem and where the help
// is, exit 2, nothing on standard output (the whole help followed every
// error, 28 to 78 lines). Method: one mistake per subcommand.
#[test]
fn usage_errors_are_one_line_with_a_hint() {
    for args in [
        &["perf", "write_bw", "--bogus"][..],
        &["perf", "write_bw", "-s", "lots"],
        &["perf", "ib_write_bw"],
        &["run", "--seed", "x", "a.verbs"],
        &["run"],
        &["fuzz", "--calls", "0"],
        &["exec", "--faults", "bogus", "--", "true"],
        &["calibrate", "--bogus"],
        &["frobnicate"],
    ] {
        let (code, stdout, stderr) = verbsim(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("verbsim"), "{args:?}: {stderr}");
        assert!(stderr.contains("--help"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (_, _, stderr) = verbsim(&["perf", "ib_write_bw"]);
    assert!(stderr.contains("is write_bw here"), "{stderr}");
}

// Goal: `exec --faults bogus` is refused before the program starts (it
// was ignored with a line on stderr and exit 0, so a CI job with a typo
// tested without faults). Method: the program would create a file; it
// must not exist afterwards.
#[test]
fn exec_refuses_a_bad_fault_spec_before_running_the_program() {
    let dir = temp_dir("faults");
    let marker = dir.join("ran");
    let (code, _, stderr) = verbsim(&[
        "exec",
        "--faults",
        "drop=5,bogus",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("bogus"), "{stderr}");
    assert!(!marker.exists(), "the program ran");
    let _ = std::fs::remove_dir_all(&dir);
}

// Goal: a perftest line runs unchanged: the long spellings, a post list of
// 128 (calibration.md's anchor; -l stopped at 16), -d naming a real device
// (refused before; now a note), MB/sec unless --report_gbits.
#[test]
fn a_perftest_command_line_runs_unchanged() {
    let (code, stdout, stderr) = verbsim(&[
        "perf", "write_bw", "-d", "mlx5_0", "--qp", "2", "-s", "64", "-l", "128", "-n", "512",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("note: -d mlx5_0"), "{stderr}");
    assert!(stdout.contains("post list: 128"), "{stdout}");
    assert!(stdout.contains("BW average[MB/sec]"), "{stdout}");
    assert!(stdout.contains("QPs: 2"), "{stdout}");
    let (code, stdout, _) = verbsim(&[
        "perf",
        "write_bw",
        "--post_list",
        "4",
        "-n",
        "64",
        "--report_gbits",
    ]);
    assert_eq!(code, 0);
    assert!(stdout.contains("BW average[Gb/sec]"), "{stdout}");
    // The same run in both units: MB/sec = Gb/sec * 10^9 / 8 / 2^20.
    let bw = |out: &str| -> f64 {
        let row = out.lines().find(|l| l.ends_with("simulated")).expect(out);
        row.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let (_, mb, _) = verbsim(&["perf", "write_bw", "-n", "64"]);
    let (_, gb, _) = verbsim(&["perf", "write_bw", "-n", "64", "--report_gbits"]);
    let ratio = bw(&mb) / bw(&gb);
    assert!((ratio - 1e9 / 8.0 / 1048576.0).abs() < 0.1, "{ratio}");
}

// Goal: perftest's --out_json writes perftest_out.json in the working
// directory (it printed the JSON to standard output instead), and
// --out_json_file names another file; the table still prints.
#[test]
fn out_json_writes_perftests_file() {
    let dir = temp_dir("out-json");
    let (code, stdout, stderr) =
        verbsim_in(Some(&dir), &["perf", "read_lat", "-n", "5", "--out_json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("t_typical[usec]"), "the table: {stdout}");
    let text = std::fs::read_to_string(dir.join("perftest_out.json")).expect("perftest_out.json");
    assert!(text.contains("\"test\":\"read_lat\""), "{text}");
    let other = dir.join("mine.json");
    let (code, _, _) = verbsim_in(
        Some(&dir),
        &[
            "perf",
            "send_lat",
            "-n",
            "5",
            "--out_json",
            "--out_json_file",
            other.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0);
    assert!(std::fs::read_to_string(&other)
        .unwrap()
        .contains("\"test\":\"send_lat\""));
    let _ = std::fs::remove_dir_all(&dir);
}

// Goal: a bad --plot path is refused before the -a sweep (it was reported
// after all 23 sizes ran). Method: nothing is printed on standard output.
#[test]
fn a_bad_plot_path_is_refused_before_the_sweep() {
    let (code, stdout, stderr) = verbsim(&[
        "perf",
        "write_bw",
        "-a",
        "--plot",
        "/nonexistent-dir/bw.svg",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "the sweep ran: {stdout}");
    assert!(
        stderr.contains("--plot /nonexistent-dir/bw.svg"),
        "{stderr}"
    );
}

/// Runs `verbsim ARGS | (read `keep` bytes, close)`: status and stderr.
fn into_closed_pipe(args: &[&str], keep: usize) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_verbsim"))
        .args(args)
        .env_remove("VERBS_SIM_SEED")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn verbsim");
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; keep];
    stdout.read_exact(&mut buf).expect("the first bytes");
    drop(stdout); // the reader goes away, as `head` does
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), stderr)
}

// Goal: writing into a closed pipe ends quietly, with the status a shell
// reports for `yes | head` (141), where `println!` panicked ("Broken
// pipe", a backtrace, exit 101). Method: run, perf -a and fuzz, each read
// for a few bytes and then the pipe closed while the command still has
// output to write.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/scripts");
    for args in [
        &["run", scripts][..],
        &["perf", "write_lat", "-a", "-n", "20"],
        // 150 KB, more than a pipe's buffer holds.
        &["fuzz", "--print-script", "--seeds", "0", "--calls", "5000"],
    ] {
        let (code, stderr) = into_closed_pipe(args, 16);
        assert_eq!(code, Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

// Goal: shell completions ship: `verbsim completions SHELL` prints a
// script that knows the subcommands and perftest's flags.
#[test]
fn completions_know_the_commands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, stdout, stderr) = verbsim(&["completions", shell]);
        assert_eq!(code, 0, "{stderr}");
        for word in ["perf", "exec", "post_list", "out_json", "fabric"] {
            assert!(stdout.contains(word), "{shell}: {word}");
        }
    }
    let (code, _, _) = verbsim(&["completions", "tcsh"]);
    assert_eq!(code, 2);
}

// Goal: the top-level help lists run's report and trace options and exec's
// --log, --faults and --fabric (they were missing).
#[test]
fn top_level_help_lists_the_main_options() {
    let (code, stdout, _) = verbsim(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--junit",
        "--json",
        "--trace",
        "--log",
        "--faults",
        "--fabric",
        "completions",
    ] {
        assert!(stdout.contains(flag), "{flag}:\n{stdout}");
    }
}

// Goal: `verbsim run --trace DIR` writes one file per script, named by the
// script's path, so two scripts of one name in different folders no longer
// overwrite each other. Method: two copies of one script under a/ and b/.
#[test]
fn run_trace_files_are_unique_per_script() {
    let dir = temp_dir("trace-names");
    let script = "let d0 = open_device index=0\nclose_device d0\n";
    for sub in ["a", "b"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::write(dir.join(sub).join("same.verbs"), script).unwrap();
    }
    let out = dir.join("traces");
    let (code, stdout, stderr) = verbsim_in(
        Some(&dir),
        &["run", "--trace", out.to_str().unwrap(), "a", "b"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a__same.json", "b__same.json"]);
    let _ = std::fs::remove_dir_all(&dir);
}

// Goal: --device-profile picks the simulated adapters (parsed and carried
// to the simulator). Method: write_bw on rxe (Soft-RoCE) is slower than on
// the default ConnectX-6; --link-speed is refused until the timing model
// takes it, and on hardware both are refused.
#[test]
fn device_profile_selects_the_simulated_adapters() {
    let gbps = |args: &[&str]| -> f64 {
        let (code, stdout, stderr) = verbsim(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        let row = stdout
            .lines()
            .find(|l| l.ends_with("simulated"))
            .expect(&stdout);
        row.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let cx6 = gbps(&["perf", "write_bw", "-n", "200", "--report_gbits"]);
    let rxe = gbps(&[
        "perf",
        "write_bw",
        "-n",
        "200",
        "--report_gbits",
        "--device-profile",
        "rxe",
    ]);
    assert!(rxe < cx6, "rxe {rxe} Gb/s vs cx6 {cx6} Gb/s");
    let (code, _, stderr) = verbsim(&["perf", "write_bw", "--device-profile", "cx9"]);
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = verbsim(&[
        "perf",
        "write_bw",
        "--backend",
        "hw",
        "--device-profile",
        "cx7",
    ]);
    assert_eq!(code, 2, "{stderr}");
}
