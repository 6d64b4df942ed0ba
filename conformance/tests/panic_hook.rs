//! `check_calls` leaves the panic hook alone: other tests in the same
//! `cargo test` binary keep their failure messages (it replaced the
//! process-wide hook with a silent one while it ran, and with several test
//! threads the silent hook could stay for good).
#![allow(missing_docs)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use backend_sim::{SimConfig, SimVerbs};
use conformance::swarm::{calls, check_calls, Calls};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

fn world(seed: u64) -> SimVerbs {
    SimVerbs::new(SimConfig::with_seed(seed))
}

fn live(v: &SimVerbs) -> String {
    let l = v.live_objects();
    if l.is_empty() {
        "nothing".to_owned()
    } else {
        l.to_string()
    }
}

/// A few calls to run.
fn some_calls() -> Calls {
    calls(20..40)
        .new_tree(&mut TestRunner::deterministic())
        .expect("a case")
        .current()
}

/// The child process's marker: the two neighbour tests below only act
/// when the parent test runs this binary with it.
const CHILD: &str = "VERBSIM_PANIC_HOOK_CHILD";

/// Set once `check_calls` runs: the neighbour then panics.
static CHECK_CALLS_RUNNING: AtomicBool = AtomicBool::new(false);
/// Set (by a drop during unwinding, after the hook printed) when the
/// neighbour's panic has been reported.
static NEIGHBOUR_DONE: AtomicBool = AtomicBool::new(false);

/// Waits until `flag` is set, at most 20 s (a broken test fails, never hangs).
fn wait_for(flag: &AtomicBool) {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

// Child only: a test that fails while its neighbour runs check_calls.
#[test]
fn neighbour_fails_with_a_message() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            NEIGHBOUR_DONE.store(true, Ordering::SeqCst);
        }
    }
    let _done = Done;
    wait_for(&CHECK_CALLS_RUNNING);
    panic!("the neighbour's own failure message 4242");
}

// Child only: check_calls, whose backend is built (inside check_calls)
// only after the neighbour's panic has been reported.
#[test]
fn neighbour_runs_check_calls() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let make = |seed: u64| {
        CHECK_CALLS_RUNNING.store(true, Ordering::SeqCst);
        wait_for(&NEIGHBOUR_DONE);
        world(seed)
    };
    check_calls(&some_calls(), &make, &live, &mut |_| Ok(())).unwrap();
}

// Goal: two tests in one binary: one fails while the other is inside
// check_calls; the failing test's message must still be printed.
// Method: run this binary again with the two neighbour tests on two
// threads, synchronised so the panic happens during check_calls, and read
// what libtest printed.
#[test]
fn another_tests_failure_message_survives_check_calls() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--test-threads=2",
            "neighbour_fails_with_a_message",
            "neighbour_runs_check_calls",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "the neighbour must fail:\n{text}");
    assert!(
        text.contains("test neighbour_runs_check_calls ... ok"),
        "{text}"
    );
    assert!(
        text.contains("the neighbour's own failure message 4242"),
        "the failing test's message was swallowed:\n{text}"
    );
}

/// Panics the recording hook saw.
static SEEN: AtomicUsize = AtomicUsize::new(0);
/// One test at a time changes the hook in this process.
static HOOK_LOCK: Mutex<()> = Mutex::new(());

// Goal: while check_calls runs, the hook installed before it still sees
// panics of other threads, and after it the same hook is in place.
// Method: a recording hook (chained to the previous one); a thread that
// panics from inside check_calls (while it builds the backend); then one
// more panic after.
#[test]
fn the_hook_installed_before_check_calls_stays_in_place() {
    let _one = HOOK_LOCK.lock().unwrap();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() == Some(&"recorded panic") {
            SEEN.fetch_add(1, Ordering::SeqCst);
        } else {
            previous(info);
        }
    }));
    let before = SEEN.load(Ordering::SeqCst);
    let make = |seed: u64| {
        let r = std::thread::spawn(|| std::panic::panic_any("recorded panic")).join();
        assert!(r.is_err());
        world(seed)
    };
    check_calls(&some_calls(), &make, &live, &mut |_| Ok(())).unwrap();
    assert!(
        SEEN.load(Ordering::SeqCst) > before,
        "a panic during check_calls did not reach the hook"
    );
    let during = SEEN.load(Ordering::SeqCst);
    let r = std::thread::spawn(|| std::panic::panic_any("recorded panic")).join();
    assert!(r.is_err());
    assert_eq!(SEEN.load(Ordering::SeqCst), during + 1, "after check_calls");
    let _ = std::panic::take_hook(); // back to the default
}
