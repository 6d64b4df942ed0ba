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

/// [`run_c_env`] on a shared fabric of its own: `verbsim-fabric` (this
/// package's binary) serves the world, as `verbsim exec --fabric` runs
/// programs; it exits once the program has left.
fn run_c_fabric(name: &str) -> Option<String> {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let sock = std::env::temp_dir().join(format!(
        "verbsim-shim-c-fabric-{name}-{}-{run}.sock",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&sock);
    let mut fabric = Command::new(env!("CARGO_BIN_EXE_verbsim-fabric"))
        .arg("--socket")
        .arg(&sock)
        .args(["--exit-when-idle", "--linger", "0.5"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start verbsim-fabric");
    for _ in 0..400 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = run_c_env(name, &[("VERBSIM_FABRIC", &sock)]);
    let _ = fabric.wait();
    out
}

#[test]
fn rdma_cm_client_and_server_exchange_a_send() {
    if let Some(out) = run_c("rdma_cm_loop") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn accept_and_connect_with_a_null_conn_param_allow_rdma_reads() {
    // Goal: rping's server accepts with a NULL conn_param and then READs;
    // librdmacm gives the QP the depths the request offered. Method: a C
    // client and server in one process, READs both ways.
    if let Some(out) = run_c("rdma_cm_accept_null") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn synchronous_endpoints_block_until_their_events_come() {
    // Goal: rdma_server/rdma_client's synchronous API: rdma_get_request
    // blocks until a client connects, rdma_create_ep takes the QP type the
    // address says; a SEND each way. Method: a C server thread and client thread in one process on a
    // shared fabric (whose wall-clock pace gives the server thread the
    // time a wire would: in one process virtual time would run the CM's
    // timers out while the other thread is scheduled).
    if let Some(out) = run_c_fabric("rdma_cm_sync_ep") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn inline_sends_copy_unregistered_memory_at_post() {
    // Goal: IBV_SEND_INLINE through ibv_post_send from memory no MR
    // covers (UCX, rdma_client) is copied at post, lkey ignored, within
    // max_inline_data. Method: RC and UD SENDs from a stack buffer that is
    // overwritten right after the post; a longer one is refused.
    if let Some(out) = run_c("inline_unregistered") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn destroying_an_id_drops_its_untaken_events_and_waits_for_handed_out_ones() {
    // Goal: as librdmacm over the kernel's ucma, rdma_get_cm_event never
    // returns an event of an id rdma_destroy_id has ended (rping's CM
    // thread failed with EINVAL so), and rdma_destroy_id waits until the
    // id's events already handed out are acknowledged.
    // Method: a listener destroyed with a connection request queued, a
    // request's id destroyed with its ESTABLISHED queued (the non-blocking
    // channel then says EAGAIN, the peers are rejected or disconnected),
    // and a listener destroyed while another thread holds its request
    // (the destroy returns only after that thread's ack; a request that
    // comes meanwhile is not handed out); in one process and over a fabric.
    for out in [
        run_c("rdma_cm_destroy_events"),
        run_c_fabric("rdma_cm_destroy_events"),
    ]
    .into_iter()
    .flatten()
    {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn a_signal_ends_a_blocked_event_wait_with_eintr() {
    // Goal: a handler without SA_RESTART that runs while a completion,
    // async or CM event wait is blocked makes it return EINTR, as the
    // read() of rdma-core's fd does (qperf ends tests from SIGALRM).
    // Method: a 200 ms interval timer against each of the three waits;
    // then a CM wait whose channel another thread destroys keeps waiting
    // (no EINVAL, as the kernel's read holds the channel's file) until a
    // signal sent to its thread ends it.
    if let Some(out) = run_c("event_wait_eintr") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn af_ib_addresses_bind_resolve_and_connect() {
    // Goal: struct sockaddr_ib (libfabric's verbs provider binds and
    // resolves them) names a port by GID and a service by id: a listener
    // and a client connect with them, every id reports sockaddr_ib, a GID
    // no port has is EADDRNOTAVAIL and changes nothing, rdma_getaddrinfo
    // answers AF_IB hints with them; AF_IB multicast stays EOPNOTSUPP.
    if let Some(out) = run_c("rdma_cm_af_ib") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn the_async_fd_is_readable_when_an_event_is_queued() {
    // Goal: context->async_fd wakes a poll() when an async event is
    // queued, with no completion channel and no library call meanwhile,
    // and is quiet once the event is taken. Method: LAST_WQE_REACHED from
    // a QP on an SRQ moved to ERR, in one process and over a fabric.
    if let Some(out) = run_c("async_fd_poll") {
        assert_eq!(out.trim(), "ok");
    }
    if let Some(out) = run_c_fabric("async_fd_poll") {
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

#[test]
fn rpoll_and_rselect_see_pipes_and_the_cm_channel_fd_together() {
    if let Some(out) = run_c("rpoll_fds") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn failing_verbs_leave_their_errno_in_errno() {
    // Goal: a failing int verb (ibv_modify_qp, ibv_dealloc_pd,
    // ibv_destroy_cq, ibv_query_qp, ibv_resize_cq, ibv_destroy_qp) returns
    // the errno and sets errno to it, as libibverbs' system calls do.
    if let Some(out) = run_c("errno_verbs") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn device_helpers_follow_rdma_core() {
    // Goal: ibv_get_pkey_index, ibv_init_ah_from_wc and
    // ibv_create_ah_from_wc, ibv_resolve_eth_l2_from_gid, ibv_reg_mr_iova,
    // the fork range calls, ibv_get_sysfs_path and mlx5dv_alloc_dm give
    // rdma-core's values on an InfiniBand and a RoCE device.
    let env = [
        ("VERBSIM_DEVICES", Path::new("cx6,cx7")),
        ("SYSFS_PATH", Path::new("/tmp/verbsim-sysfs//")),
    ];
    if let Some(out) = run_c_env("verbs_helpers", &env) {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn rdma_cm_migrate_ports_srq_notify_and_ece_reject() {
    // Goal: rdma_migrate_id moves queued and future events (and a
    // listener's requests) to the new channel or makes the id synchronous,
    // the port getters read the id's addresses, rdma_create_srq's SRQ
    // serves rdma_create_qp, rdma_notify and rdma_reject_ece behave as
    // librdmacm over the kernel's CM.
    if let Some(out) = run_c("rdma_cm_more") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn rsockets_stream_eof_nonblocking_rpoll_iomap_and_misuse() {
    if let Some(out) = run_c("rsocket_stream") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn rsockets_in_one_thread_give_the_same_trace_from_the_same_seed() {
    let dir = std::env::temp_dir().join(format!("verbsim-shim-rs-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.trace"), dir.join("b.trace"));
    let Some(out) = run_c_env("rsocket_one_thread", &[("VERBSIM_TRACE", &a)]) else {
        return;
    };
    assert_eq!(out.trim(), "ok");
    run_c_env("rsocket_one_thread", &[("VERBSIM_TRACE", &b)]).unwrap();
    let (ta, tb) = (
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    // The run connected and moved data through the simulator.
    assert!(
        ta.contains("ESTABLISHED") && ta.contains("recv completion"),
        "{ta}"
    );
    assert_eq!(ta, tb, "two runs with the same seed wrote different traces");
}

#[test]
fn datagram_rsockets_resolve_send_answer_and_cut() {
    if let Some(out) = run_c("rsocket_dgram") {
        assert_eq!(out.trim(), "ok");
    }
}

#[test]
fn the_chrome_trace_is_written_when_the_program_exits() {
    let dir = std::env::temp_dir().join(format!("verbsim-shim-chrome-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("run.json");
    if run_c_env("rdma_cm_loop", &[("VERBSIM_CHROME_TRACE", &file)]).is_none() {
        return;
    }
    let text = std::fs::read_to_string(&file).expect("the Chrome trace was written");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        text.starts_with("{\"displayTimeUnit\":\"ns\",\"traceEvents\":["),
        "{text}"
    );
    assert!(text.contains("completion"), "the run's events: {text}");
}

// Goal: `verbsim exec --log` says which check refused a remote access: a
// bad rkey and a WRITE past the end of the region both complete with
// REM_ACCESS_ERR and were logged (and traced) identically. Method: a C
// program makes both refusals; its log lines must name the two causes.

#[test]
fn the_log_names_the_check_that_refused_a_remote_access() {
    let Some(out) = run_c("rem_access_cause") else {
        return;
    };
    assert!(out.trim_end().ends_with("ok"), "{out}");
    let logged: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("completed with REM_ACCESS_ERR"))
        .collect();
    assert_eq!(logged.len(), 2, "{out}");
    assert!(
        logged[0].contains("wr_id 1") && logged[0].contains("bad rkey"),
        "{out}"
    );
    assert!(
        logged[1].contains("wr_id 2") && logged[1].contains("out of bounds"),
        "{out}"
    );
}
