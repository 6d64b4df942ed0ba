//! C programs compiled against the installed rdma-core headers and linked
//! with `-lrdmacm -libverbs -lmlx5`, run with the drop-in library first on
//! `LD_LIBRARY_PATH` (the four names as links to one file, as `verbsim
//! exec` lays them out). Skips, saying so, where the headers are not
//! installed; CI installs them.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::shim;

/// A directory with the four library names linked to the shim.
fn lib_dir(dir: &Path) -> PathBuf {
    let shim = shim();
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    for name in [
        "libibverbs.so.1",
        "libmlx5.so.1",
        "librdmacm.so.1",
        "libefa.so.1",
    ] {
        let _ = std::fs::remove_file(lib.join(name));
        std::os::unix::fs::symlink(&shim, lib.join(name)).unwrap();
    }
    lib
}

/// Compiles `tests/c/<name>.c` and runs it on the simulator: its stdout.
fn run_c(name: &str) -> Option<String> {
    run_c_env(name, &[])
}

/// [`run_c`] with extra environment variables.
fn run_c_env(name: &str, env: &[(&str, &Path)]) -> Option<String> {
    if !Path::new("/usr/include/rdma/rdma_cma.h").exists() {
        eprintln!("SKIPPED: rdma-core headers are not installed (librdmacm-dev); CI installs them");
        return None;
    }
    // One directory per run: tests run in parallel, some on the same program.
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "verbsim-shim-c-{name}-{}-{run}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .args(["-lrdmacm", "-libverbs", "-lmlx5", "-lpthread"])
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "compiling {name}.c failed");
    let lib = lib_dir(&dir);
    let mut child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib)
        .env("VERBSIM_SHIM_LOG", "1")
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the program");
    // A hang (a lock a forked child inherited, a wait that never ends) is
    // a failure, not a stuck test run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait for the program").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} did not finish within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child
        .wait_with_output()
        .expect("collect the program's output");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

#[test]
fn rdma_cm_client_and_server_exchange_a_send() {
    if let Some(out) = run_c("rdma_cm_loop") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn rdma_establish_confirms_a_connection_made_without_a_qp() {
    if let Some(out) = run_c("rdma_cm_establish") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn cm_multicast_join_send_and_leave() {
    if let Some(out) = run_c("rdma_cm_mcast") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn a_completion_channel_fd_is_readable_exactly_while_an_event_waits() {
    if let Some(out) = run_c("cq_channel_fd") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn the_mlx5_core_clock_reads_and_converts_virtual_time() {
    if let Some(out) = run_c("clock") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn parent_domains_stand_for_their_pd_and_hold_references() {
    if let Some(out) = run_c("parent_domain") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn providers_decide_parent_domains_rereg_inputs_and_ece() {
    // Goal: rxe has no parent domains (EOPNOTSUPP); ibv_rereg_mr answers
    // libibverbs' input errors with IBV_REREG_MR_ERR_INPUT and flags 0 with
    // the kernel's refusal (IBV_REREG_MR_ERR_CMD); mlx5's ECE does not
    // rewrite the caller's struct and reads 0 until a modify.
    // Method: a C program on an rxe and a ConnectX-6 device.
    if let Some(out) = run_c_env(
        "provider_rules",
        &[("VERBSIM_DEVICES", Path::new("rxe,cx6"))],
    ) {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn on_demand_paging_caps_advise_mr_and_implicit_mrs() {
    if let Some(out) = run_c("odp") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn mlx5dv_create_cq_checks_its_attributes_and_mlx5_cqe_size() {
    if let Some(out) = run_c("dv_cq") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn device_memory_through_the_inline_wrappers() {
    if let Some(out) = run_c("device_memory") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn fork_with_a_busy_thread_leaves_the_child_a_usable_copy() {
    if let Some(out) = run_c("fork_child") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn the_same_seed_gives_the_same_trace_through_the_c_abi() {
    let dir = std::env::temp_dir().join(format!("verbsim-shim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.trace"), dir.join("b.trace"));
    if run_c_env("rdma_cm_loop", &[("VERBSIM_TRACE", &a)]).is_none() {
        return;
    }
    run_c_env("rdma_cm_loop", &[("VERBSIM_TRACE", &b)]).unwrap();
    let (ta, tb) = (
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    // The run did something worth comparing: a connection, a SEND, a teardown.
    assert!(
        ta.contains("ESTABLISHED") && ta.contains("recv completion") && ta.contains("destroyed"),
        "{ta}"
    );
    assert_eq!(
        ta, tb,
        "two runs with the same (default) seed wrote different traces"
    );
}
