//! The floor under a ping-pong across processes: what the fabric's
//! mechanism alone costs, with no simulator behind it.
//!
//! Two programs ping-ponging over the shared fabric hand every message to
//! a third process, the fabric, through memory they share with it: the
//! sender writes its ring and rings an eventfd doorbell; the fabric, asleep
//! in `epoll_pwait2`, wakes, reads the record, runs the world and writes the
//! receiver's completion ring; the receiver, spinning on that ring with a
//! `sched_yield` every 64 empty polls, sees it and answers the
//! same way. [`RelayFloor`] does exactly those steps with three processes
//! and nothing else: the relay copies 64 bytes from one side's slot to the
//! other's and bumps a counter, where the fabric would run the simulator.
//! Its round trip is therefore the least any relay that sleeps when idle
//! (as the fabric must) can take on this machine; the benchmark
//! `fabric_pingpong_rate/relay_floor` reports it beside the fabric's and
//! the one-process round trips, so the fabric's own work per message is
//! the difference (docs/fabric-perf.md).
//!
//! The relay and the echoing side are children: the running executable
//! started again with [`CHILD_ENV`] naming their role (`relay` or `echo`);
//! such an executable calls [`child_main`] first thing in `main`. They
//! inherit the region and the two doorbells (their descriptor numbers in
//! [`FDS_ENV`]) and exit when told to stop, when their parent is gone, or
//! when they are killed.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::cqring::YIELD_EVERY;
use super::poller::{Poller, Token, READ};
use super::shm::Shm;

/// The environment variable that makes an executable one of the floor's
/// children; its value is the role, `relay`, `relay-spin` or `echo`.
pub const CHILD_ENV: &str = "VERBSIM_RELAY_FLOOR_CHILD";

/// The inherited descriptors, `REGION,DOORBELL_A,DOORBELL_B`.
pub const FDS_ENV: &str = "VERBSIM_RELAY_FLOOR_FDS";

/// The message size, as `ibv_rc_pingpong -s 64`.
const MSG: usize = 64;
/// The region: one page.
const REGION: usize = 4096;
/// The initiator's posts (a count), then its message slot.
const A_POST: usize = 0;
/// The echoing side's completions, written by the relay.
const B_CQ: usize = 64;
/// The echoing side's posts.
const B_POST: usize = 128;
/// The initiator's completions, written by the relay.
const A_CQ: usize = 192;
/// Non-zero: the children exit.
const STOP: usize = 256;
/// Non-zero: the sides ring the relay's doorbells (it sleeps).
const RINGS: usize = 320;
/// Message slots: the initiator's, the echoing side's, and the two the
/// relay delivers into.
const A_SLOT: usize = 1024;
const B_SLOT: usize = 1024 + MSG;
const A_IN: usize = 1024 + 2 * MSG;
const B_IN: usize = 1024 + 3 * MSG;

/// How long a side waits for an answer before the run is declared hung.
const HUNG: Duration = Duration::from_secs(20);
/// How often the sleeping relay looks whether its parent is still there.
const RELAY_CHECK_NS: u64 = 200_000_000;

/// A new non-blocking eventfd (close-on-exec: the children get theirs
/// through [`Command::pre_exec`]).
fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes two integers and returns a new descriptor.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just made and is ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Rings a doorbell (a write that never blocks: a full counter is already
/// rung).
fn ring(fd: RawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live buffer to an open descriptor.
    unsafe { libc::write(fd, one.as_ptr().cast(), 8) };
}

/// Resets a doorbell after it woke the relay.
fn clear(fd: RawFd) {
    let mut v = [0u8; 8];
    // SAFETY: reads 8 bytes into a live buffer from an open descriptor.
    unsafe { libc::read(fd, v.as_mut_ptr().cast(), 8) };
}

/// Spins until `counter` reaches `want`, as a program polling an empty CQ
/// ring does (a `sched_yield` every [`YIELD_EVERY`] empty polls); false if
/// `give_up` (asked every 1 024 yields) said so first.
fn spin_until(region: &Shm, counter: usize, want: u64, mut give_up: impl FnMut() -> bool) -> bool {
    let c: &AtomicU64 = region.counter(counter);
    let mut empty = 0u32;
    let mut since_check = 0u32;
    while c.load(Ordering::Acquire) < want {
        empty += 1;
        if empty >= YIELD_EVERY {
            empty = 0;
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
            since_check += 1;
            if since_check >= 1024 {
                since_check = 0;
                if give_up() {
                    return false;
                }
            }
        }
    }
    true
}

/// Whether the initiator asked the children to end.
fn stopped(region: &Shm) -> bool {
    region.counter(STOP).load(Ordering::Acquire) != 0
}

/// One direction through the relay: the sender's post counter and slot,
/// the receiver's slot and completion counter.
struct Lane {
    post: usize,
    slot: usize,
    into: usize,
    cq: usize,
}

/// The initiator's messages to the echoing side.
const A_TO_B: Lane = Lane {
    post: A_POST,
    slot: A_SLOT,
    into: B_IN,
    cq: B_CQ,
};

/// The echoing side's answers.
const B_TO_A: Lane = Lane {
    post: B_POST,
    slot: B_SLOT,
    into: A_IN,
    cq: A_CQ,
};

/// Delivers the lane's newest post if it is newer than `seen`: the
/// message into the receiver's slot, then its completion count.
fn forward(region: &Shm, lane: &Lane, seen: &mut u64) {
    let posted = region.counter(lane.post).load(Ordering::Acquire);
    if posted != *seen {
        *seen = posted;
        let mut msg = [0u8; MSG];
        region.read(lane.slot, &mut msg);
        region.write(lane.into, &msg);
        region.counter(lane.cq).store(posted, Ordering::Release);
    }
}

/// How the relay waits for a doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayWait {
    /// Asleep in `epoll_pwait2` until a doorbell rings, as the fabric
    /// waits: the floor of the fabric's design.
    Sleep,
    /// Never asleep: it looks at both sides' post counters in a loop with a
    /// `sched_yield` each time, and the sides ring no doorbell. What a
    /// relay that spins (which the fabric must not, idle) would cost.
    Spin,
}

impl RelayWait {
    fn role(self) -> &'static str {
        match self {
            Self::Sleep => "relay",
            Self::Spin => "relay-spin",
        }
    }
}

/// Three processes ping-ponging 64-byte messages through a relay (see the
/// module's documentation).
#[derive(Debug)]
pub struct RelayFloor {
    region: Shm,
    /// The relay's doorbell for our posts.
    doorbell: OwnedFd,
    /// The other doorbell, kept to wake the relay at the end.
    other: OwnedFd,
    relay: Child,
    echo: Child,
    /// Round trips done so far (the counters only grow).
    done: u64,
    /// How long [`RelayFloor::run`] waits for one answer.
    hung: Duration,
    /// Whether posts ring the relay's doorbell.
    rings: bool,
}

impl RelayFloor {
    /// Starts the relay (waiting as `wait` says) and the echoing side as
    /// children: `exe` with
    /// `args`, [`CHILD_ENV`] set (an executable whose `main` calls
    /// [`child_main`] first).
    ///
    /// # Errors
    /// The region, a doorbell or a child could not be made.
    pub fn start(exe: &Path, args: &[&str], wait: RelayWait) -> Result<Self, String> {
        let (region, region_fd) =
            Shm::create(REGION).map_err(|e| format!("relay floor: memfd: {e}"))?;
        let a = eventfd().map_err(|e| format!("relay floor: eventfd: {e}"))?;
        let b = eventfd().map_err(|e| format!("relay floor: eventfd: {e}"))?;
        let rings = wait == RelayWait::Sleep;
        region
            .counter(RINGS)
            .store(u64::from(rings), Ordering::Release);
        let fds = [region_fd.as_raw_fd(), a.as_raw_fd(), b.as_raw_fd()];
        let spawn = |role: &str| {
            let mut c = Command::new(exe);
            c.args(args)
                .env(CHILD_ENV, role)
                .env(FDS_ENV, format!("{},{},{}", fds[0], fds[1], fds[2]))
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            // SAFETY: the closure runs in the child between fork and exec
            // and calls only fcntl, which is async-signal-safe, on
            // descriptors the parent holds open; it allocates nothing.
            unsafe {
                c.pre_exec(move || {
                    for fd in fds {
                        if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                            return Err(io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
            c.spawn()
                .map_err(|e| format!("relay floor: spawn {} ({role}): {e}", exe.display()))
        };
        let relay = spawn(wait.role())?;
        let echo = match spawn("echo") {
            Ok(c) => c,
            Err(e) => {
                let mut relay = relay;
                let _ = relay.kill();
                let _ = relay.wait();
                return Err(e);
            }
        };
        Ok(Self {
            region,
            doorbell: a,
            other: b,
            relay,
            echo,
            done: 0,
            hung: HUNG,
            rings,
        })
    }

    /// Runs `round_trips` round trips: post, ring, wait for the answer.
    ///
    /// # Errors
    /// An answer did not come within 20 s (a child died or hung).
    pub fn run(&mut self, round_trips: u64) -> Result<(), String> {
        let mut msg = [0u8; MSG];
        let mut back = [0u8; MSG];
        for _ in 0..round_trips {
            let n = self.done + 1;
            msg[..8].copy_from_slice(&n.to_le_bytes());
            self.region.write(A_SLOT, &msg);
            self.region.counter(A_POST).store(n, Ordering::Release);
            if self.rings {
                ring(self.doorbell.as_raw_fd());
            }
            let (t0, hung, region) = (Instant::now(), self.hung, &self.region);
            if !spin_until(region, A_CQ, n, || stopped(region) || t0.elapsed() > hung) {
                return Err(format!(
                    "relay floor: no answer to round trip {n} within {:?}",
                    self.hung
                ));
            }
            self.region.read(A_IN, &mut back);
            if back[..8] != msg[..8] {
                return Err(format!(
                    "relay floor: round trip {n} came back with another message"
                ));
            }
            self.done = n;
        }
        Ok(())
    }
}

impl Drop for RelayFloor {
    fn drop(&mut self) {
        self.region.counter(STOP).store(1, Ordering::Release);
        ring(self.doorbell.as_raw_fd());
        ring(self.other.as_raw_fd());
        for child in [&mut self.relay, &mut self.echo] {
            let t0 = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The inherited region and doorbells.
fn inherited() -> Result<(Shm, OwnedFd, OwnedFd), String> {
    let spec = std::env::var(FDS_ENV).map_err(|_| format!("{FDS_ENV} is not set"))?;
    let fds: Vec<RawFd> = spec
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{FDS_ENV}={spec}: three descriptor numbers expected"))?;
    let &[region, a, b] = fds.as_slice() else {
        return Err(format!(
            "{FDS_ENV}={spec}: three descriptor numbers expected"
        ));
    };
    for fd in [region, a, b] {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(format!("{FDS_ENV}={spec}: descriptor {fd} is not open"));
        }
    }
    // SAFETY: the three descriptors are open (checked above), inherited for
    // this process alone, and each is taken once.
    let (region, a, b) = unsafe {
        (
            OwnedFd::from_raw_fd(region),
            OwnedFd::from_raw_fd(a),
            OwnedFd::from_raw_fd(b),
        )
    };
    let shm = Shm::map(&region, REGION).map_err(|e| format!("mapping the region: {e}"))?;
    Ok((shm, a, b))
}

/// Whether the process that started this one is gone (this one was
/// handed to another parent).
fn orphaned(parent: libc::pid_t) -> bool {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() != parent }
}

/// The relay: sleeps in `epoll_pwait2` on both doorbells, as the fabric
/// does, and forwards each new post to the other side's slot and
/// completion counter.
fn relay(region: &Shm, a: &OwnedFd, b: &OwnedFd) -> Result<(), String> {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let mut poller = Poller::new().map_err(|e| format!("epoll: {e}"))?;
    poller
        .add(a.as_raw_fd(), READ, Token::Doorbell(0))
        .and_then(|()| poller.add(b.as_raw_fd(), READ, Token::Doorbell(1)))
        .map_err(|e| format!("epoll_ctl: {e}"))?;
    let (mut from_a, mut from_b) = (0u64, 0u64);
    loop {
        let ready = poller
            .wait(RELAY_CHECK_NS)
            .map_err(|e| format!("epoll_pwait2: {e}"))?;
        if stopped(region) || orphaned(parent) {
            return Ok(());
        }
        for (token, _) in ready {
            match token {
                Token::Doorbell(0) => {
                    clear(a.as_raw_fd());
                    forward(region, &A_TO_B, &mut from_a);
                }
                Token::Doorbell(_) => {
                    clear(b.as_raw_fd());
                    forward(region, &B_TO_A, &mut from_b);
                }
                _ => {}
            }
        }
    }
}

/// The relay that never sleeps: looks at both post counters in a loop,
/// yielding the CPU each time round.
fn relay_spinning(region: &Shm) -> Result<(), String> {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let (mut from_a, mut from_b) = (0u64, 0u64);
    let mut rounds = 0u32;
    loop {
        forward(region, &A_TO_B, &mut from_a);
        forward(region, &B_TO_A, &mut from_b);
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
        rounds += 1;
        if rounds >= 4096 {
            rounds = 0;
            if stopped(region) || orphaned(parent) {
                return Ok(());
            }
        }
    }
}

/// The echoing side: spins on its completions, as a program polling its
/// CQ, and posts each message back.
fn echo(region: &Shm, b: &OwnedFd) -> Result<(), String> {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let mut msg = [0u8; MSG];
    let mut seen = 0u64;
    let rings = region.counter(RINGS).load(Ordering::Acquire) != 0;
    loop {
        if !spin_until(region, B_CQ, seen + 1, || {
            stopped(region) || orphaned(parent)
        }) {
            return Ok(());
        }
        seen = region.counter(B_CQ).load(Ordering::Acquire);
        region.read(B_IN, &mut msg);
        region.write(B_SLOT, &msg);
        region.counter(B_POST).store(seen, Ordering::Release);
        if rings {
            ring(b.as_raw_fd());
        }
    }
}

/// With [`CHILD_ENV`] set, runs this process as the floor's relay or
/// echoing side (the value names the role: `relay`, `relay-spin` or
/// `echo`) and returns its exit code (0, or 2 with the reason on
/// standard error); `None` when the variable is not set.
pub fn child_main() -> Option<i32> {
    let role = std::env::var(CHILD_ENV).ok()?;
    let run = || -> Result<(), String> {
        let (region, a, b) = inherited()?;
        match role.as_str() {
            "relay" => relay(&region, &a, &b),
            "relay-spin" => relay_spinning(&region),
            "echo" => echo(&region, &b),
            other => Err(format!(
                "{CHILD_ENV}={other}: `relay`, `relay-spin` or `echo` expected"
            )),
        }
    };
    Some(match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("relay floor ({role}): {e}");
            2
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor's children inside the test binary: started again with
    /// this test alone selected and [`CHILD_ENV`] set, it becomes the relay
    /// or the echoing side; run by the harness, it does nothing.
    #[test]
    fn child_entry() {
        if let Some(code) = child_main() {
            std::process::exit(code);
        }
    }

    fn start(wait: RelayWait) -> RelayFloor {
        let exe = std::env::current_exe().unwrap();
        RelayFloor::start(
            &exe,
            &[
                "--exact",
                "fabric::floor::tests::child_entry",
                "--nocapture",
            ],
            wait,
        )
        .unwrap()
    }

    #[test]
    fn messages_go_round_through_the_relay_and_the_children_end() {
        for wait in [RelayWait::Sleep, RelayWait::Spin] {
            round_trips_then_end(wait);
        }
    }

    fn round_trips_then_end(wait: RelayWait) {
        let mut floor = start(wait);
        floor.run(500).unwrap();
        floor.run(500).unwrap();
        assert_eq!(floor.done, 1000);
        assert_eq!(floor.region.counter(B_POST).load(Ordering::Acquire), 1000);
        let pids = [floor.relay.id(), floor.echo.id()];
        drop(floor);
        for pid in pids {
            // SAFETY: signal 0 only checks the process exists.
            let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
            assert!(!alive, "{wait:?}: child {pid} outlived the floor");
        }
    }

    #[test]
    fn a_dead_relay_is_an_error_not_a_hang() {
        let mut floor = start(RelayWait::Sleep);
        floor.run(10).unwrap();
        floor.relay.kill().unwrap();
        floor.relay.wait().unwrap();
        floor.hung = Duration::from_millis(300);
        let e = floor.run(1).unwrap_err();
        assert!(e.contains("no answer to round trip 11"), "{e}");
    }
}
