//! The process side of the shared-fabric benchmarks (`fabric_pingpong_rate`,
//! `fabric_verb_cost`): finding the release `verbsim` and shim, running
//! Debian's `ibv_rc_pingpong` as server and client through
//! `verbsim exec --fabric NAME`, reading its `usec/iter`, and a child
//! process that times a cheap verb on request.
//!
//! Nothing here touches the simulator: these benchmarks measure wall-clock
//! time of real processes talking to the fabric process over its Unix
//! socket (docs/fabric-perf.md).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one pingpong process may run before it is killed.
pub const PAIR_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the server gets to start listening.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);

/// The environment variable that turns the bench binary into the verb-cost
/// child ([`VerbCostChild`]); its value is the shim's path.
pub const CHILD_ENV: &str = "VERBSIM_BENCH_VERB_COST_CHILD";

/// The release build's directory of the running bench binary
/// (`target/release` for `target/release/deps/sim-HASH`).
pub fn profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().map(Path::to_path_buf)
    } else {
        Some(deps.to_path_buf())
    }
}

/// `name` in `dir`, if it is a file.
pub fn file_in(dir: &Path, name: &str) -> Option<PathBuf> {
    let p = dir.join(name);
    p.is_file().then_some(p)
}

/// The first `name` on `$PATH` that is a file.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|d| file_in(&d, name))
}

/// A TCP port nobody listens on now (the kernel's pick), so concurrent
/// runs (or CI's pairs on perftest's 18515) do not collide.
///
/// # Errors
/// No socket could be bound on the loopback.
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

/// Whether `/proc/net/tcp`-format `table` has a socket listening (state
/// `0A`) on local `port`.
pub fn listening_in(table: &str, port: u16) -> bool {
    let want = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        let mut f = l.split_whitespace();
        let local = f.nth(1).unwrap_or("");
        let state = f.nth(1).unwrap_or("");
        local.ends_with(&want) && state == "0A"
    })
}

/// Waits until something listens on TCP `port` (IPv4 or IPv6), without
/// connecting to it (the pingpong servers accept only once).
fn wait_listen(port: u16, server: &mut Child) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let up = ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .any(|t| listening_in(&t, port));
        if up {
            return Ok(());
        }
        if let Ok(Some(s)) = server.try_wait() {
            return Err(format!("the server exited ({s}) before it listened"));
        }
        if t0.elapsed() > LISTEN_TIMEOUT {
            return Err(format!(
                "the server did not listen on port {port} within {LISTEN_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The `usec/iter` figure of `ibv_rc_pingpong`'s report
/// (`N iters in S seconds = U usec/iter`).
pub fn usec_per_iter(output: &str) -> Option<f64> {
    output.lines().find_map(|l| {
        let (head, _) = l.trim().rsplit_once(" usec/iter")?;
        head.rsplit_once('=')?.1.trim().parse().ok()
    })
}

/// Waits for `child` with [`PAIR_TIMEOUT`], killing it when it runs over;
/// returns its combined output.
fn finish(mut child: Child, what: &str) -> Result<String, String> {
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t0.elapsed() > PAIR_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} ran over {PAIR_TIMEOUT:?}: killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{what} failed ({}): {}", out.status, text.trim()))
    }
}

/// `ibv_rc_pingpong -g 0 -s 64 -n ITERS` as server and client, two
/// processes on the shared fabric `fabric` (a socket path), each through
/// `verbsim exec --fabric`.
#[derive(Clone, Debug)]
pub struct PingPongPair {
    /// The release `verbsim` (the shim is found next to it).
    pub verbsim: PathBuf,
    /// `ibv_rc_pingpong`.
    pub program: PathBuf,
    /// The fabric's socket path.
    pub fabric: String,
}

impl PingPongPair {
    /// Runs `iters` round trips; returns the client's `usec/iter` (the
    /// wall-clock time of one round trip, set-up excluded).
    ///
    /// # Errors
    /// A process fails, hangs, or prints no `usec/iter`.
    pub fn run(&self, iters: u64) -> Result<f64, String> {
        let port = free_port()?.to_string();
        let iters = iters.max(1).to_string();
        let cmd = |server: bool| {
            let mut c = Command::new(&self.verbsim);
            c.args(["exec", "--fabric", &self.fabric, "--"])
                .arg(&self.program)
                .args(["-g", "0", "-s", "64", "-n", &iters, "-p", &port])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if !server {
                c.arg("127.0.0.1");
            }
            c
        };
        let mut server = cmd(true)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.verbsim.display()))?;
        if let Err(e) = wait_listen(port.parse().unwrap_or(0), &mut server) {
            let _ = server.kill();
            let out = finish(server, "the server").unwrap_or_else(|e| e);
            return Err(format!("{e}: {}", out.trim()));
        }
        let client = cmd(false)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.verbsim.display()))?;
        let client_out = finish(client, "the client");
        let server_out = finish(server, "the server");
        let text = client_out?;
        server_out?;
        usec_per_iter(&text).ok_or_else(|| format!("no usec/iter in the client's output: {text}"))
    }
}

/// perftest (Debian's) as server and client on one shared fabric, and
/// `verbsim perf` for the same workload in one process
/// (`fabric_perftest`, docs/fabric-perf.md).
#[derive(Clone, Debug)]
pub struct PerftestPair {
    /// The release `verbsim`.
    pub verbsim: PathBuf,
    /// The fabric's socket.
    pub fabric: String,
}

/// The numbers of the first result row of perftest's report (the row that
/// starts with the message size).
pub fn perftest_numbers(output: &str) -> Option<Vec<f64>> {
    output.lines().find_map(|l| {
        let nums: Vec<f64> = l
            .split_whitespace()
            .map_while(|w| w.parse::<f64>().ok())
            .collect();
        (nums.len() >= 4 && l.split_whitespace().count() == nums.len()).then_some(nums)
    })
}

/// The numbers of the `verbsim perf` row labelled `label` (`wall`,
/// `simulated`, `perftest`).
pub fn perf_row(output: &str, label: &str) -> Option<Vec<f64>> {
    output.lines().find_map(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        (words.last() == Some(&label))
            .then(|| words.iter().filter_map(|w| w.parse::<f64>().ok()).collect())
    })
}

impl PerftestPair {
    /// Runs `program args` as server and client on the fabric; the
    /// client's output.
    ///
    /// # Errors
    /// A process fails, hangs, or the server never listens.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let port = free_port()?.to_string();
        let cmd = |server: bool| {
            let mut c = Command::new(&self.verbsim);
            c.args(["exec", "--fabric", &self.fabric, "--", program])
                .args(args)
                .args(["-p", &port])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if !server {
                c.arg("127.0.0.1");
            }
            c
        };
        let mut server = cmd(true)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.verbsim.display()))?;
        if let Err(e) = wait_listen(port.parse().unwrap_or(0), &mut server) {
            let _ = server.kill();
            let out = finish(server, "the server").unwrap_or_else(|e| e);
            return Err(format!("{e}: {}", out.trim()));
        }
        let client = cmd(false)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.verbsim.display()))?;
        let client_out = finish(client, "the client");
        let server_out = finish(server, "the server");
        let text = client_out?;
        server_out?;
        Ok(text)
    }

    /// `ib_write_bw -s 65536 -n iters` over the fabric: wall-clock time
    /// per message (from perftest's `BW average`).
    ///
    /// # Errors
    /// As [`PerftestPair::run`], or no result row.
    pub fn write_bw(&self, iters: u64) -> Result<Duration, String> {
        let n = iters.max(1).to_string();
        let out = self.run("ib_write_bw", &["-s", "65536", "-n", &n, "--report_gbits"])?;
        let nums = perftest_numbers(&out).ok_or_else(|| format!("no result row: {out}"))?;
        per_message_at(nums[3])
    }

    /// `ib_write_lat -s 2 -n iters` over the fabric: perftest's
    /// `t_typical`.
    ///
    /// # Errors
    /// As [`PerftestPair::run`], or no result row.
    pub fn write_lat(&self, iters: u64) -> Result<Duration, String> {
        let n = iters.max(2).to_string();
        let out = self.run("ib_write_lat", &["-s", "2", "-n", &n])?;
        let nums = perftest_numbers(&out).ok_or_else(|| format!("no result row: {out}"))?;
        Ok(Duration::from_secs_f64(nums[4] * 1e-6))
    }

    /// `verbsim perf write_bw -s 65536 -n iters --post-list 1` in one
    /// process: wall-clock time per message.
    ///
    /// # Errors
    /// `verbsim` fails or prints no `wall` row.
    pub fn local_write_bw(&self, iters: u64) -> Result<Duration, String> {
        let n = iters.max(1).to_string();
        let out = self.perf(&[
            "write_bw",
            "-s",
            "65536",
            "-n",
            &n,
            "--post-list",
            "1",
            "--report_gbits",
        ])?;
        let row = perf_row(&out, "wall").ok_or_else(|| format!("no wall row: {out}"))?;
        per_message_at(*row.get(2).ok_or("a short wall row")?)
    }

    /// `verbsim perf write_lat -s 2 -n iters` in one process: the wall
    /// row's `t_typical`.
    ///
    /// # Errors
    /// `verbsim` fails or prints no `wall` row.
    pub fn local_write_lat(&self, iters: u64) -> Result<Duration, String> {
        let n = iters.max(2).to_string();
        let out = self.perf(&["write_lat", "-s", "2", "-n", &n])?;
        let row = perf_row(&out, "wall").ok_or_else(|| format!("no wall row: {out}"))?;
        Ok(Duration::from_secs_f64(
            *row.get(3).ok_or("a short wall row")? * 1e-6,
        ))
    }

    fn perf(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.verbsim)
            .arg("perf")
            .args(args)
            .output()
            .map_err(|e| format!("spawn {}: {e}", self.verbsim.display()))?;
        if !out.status.success() {
            return Err(format!(
                "verbsim perf {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The time one 64 KiB message takes at `gbits` Gb/s.
fn per_message_at(gbits: f64) -> Result<Duration, String> {
    if gbits.is_finite() && gbits > 0.0 {
        Ok(Duration::from_secs_f64(65536.0 * 8.0 / (gbits * 1e9)))
    } else {
        Err(format!("a bandwidth of {gbits} Gb/s"))
    }
}

/// The verbs [`VerbCostChild`] times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheapVerb {
    /// `ibv_poll_cq` on an empty CQ.
    PollCq,
    /// `ibv_query_port` of port 1.
    QueryPort,
}

impl CheapVerb {
    /// Its word in the child's protocol and in benchmark ids.
    pub fn word(self) -> &'static str {
        match self {
            Self::PollCq => "poll_cq",
            Self::QueryPort => "query_port",
        }
    }

    /// The verb a protocol word names.
    pub fn from_word(w: &str) -> Option<Self> {
        [Self::PollCq, Self::QueryPort]
            .into_iter()
            .find(|v| v.word() == w)
    }
}

/// A child process (this bench binary again, with [`CHILD_ENV`] set) that
/// loads the shim and, for each request line `VERB N`, calls the verb `N`
/// times and answers the elapsed nanoseconds (or `ERR why`). With
/// `VERBSIM_FABRIC` set in its environment, every call is an RPC to the
/// fabric process; without, a call into the library in process.
pub struct VerbCostChild {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl VerbCostChild {
    /// Starts `exe` (the bench binary) as the child over `shim`, with
    /// `env` added to its environment (`VERBSIM_FABRIC` and
    /// `VERBSIM_FABRIC_CMD` for the fabric; nothing for in process).
    ///
    /// # Errors
    /// The child cannot be started or its set-up fails.
    pub fn start(exe: &Path, shim: &Path, env: &[(&str, &str)]) -> Result<Self, String> {
        let mut c = Command::new(exe);
        c.env(CHILD_ENV, shim)
            .env_remove("VERBSIM_FABRIC")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", exe.display()))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the child has no pipes".into());
        };
        let mut me = Self {
            child,
            to,
            from: BufReader::new(from),
        };
        // The child's first line says whether its set-up worked.
        let mut line = String::new();
        me.from
            .read_line(&mut line)
            .map_err(|e| format!("the child's first line: {e}"))?;
        if line.trim() != "READY" {
            return Err(format!("the child's set-up: {}", line.trim()));
        }
        Ok(me)
    }

    /// Times `n` calls of `verb` in the child.
    ///
    /// # Errors
    /// The child fails the calls or its pipe breaks.
    pub fn time(&mut self, verb: CheapVerb, n: u64) -> Result<Duration, String> {
        writeln!(self.to, "{} {n}", verb.word()).map_err(|e| format!("to the child: {e}"))?;
        self.to.flush().map_err(|e| format!("to the child: {e}"))?;
        let mut line = String::new();
        self.from
            .read_line(&mut line)
            .map_err(|e| format!("from the child: {e}"))?;
        line.trim()
            .parse::<u64>()
            .map(Duration::from_nanos)
            .map_err(|_| format!("the child says: {}", line.trim()))
    }
}

impl Drop for VerbCostChild {
    fn drop(&mut self) {
        // Closing its stdin ends the child's loop; it exits on its own.
        let _ = writeln!(self.to, "quit");
        let _ = self.to.flush();
        let _ = self.child.wait();
    }
}

/// The child's side: serves `VERB N` requests from `input` on `output`
/// with `call(verb, n)` timed, until `quit` or end of input.
///
/// # Errors
/// Only when `output` cannot be written.
pub fn serve_requests(
    input: impl BufRead,
    mut output: impl Write,
    mut call: impl FnMut(CheapVerb, u64) -> Result<(), String>,
) -> std::io::Result<()> {
    for line in input.lines() {
        let line = line?;
        let mut words = line.split_whitespace();
        let (verb, n) = (words.next().unwrap_or(""), words.next());
        if verb == "quit" {
            break;
        }
        let reply = match (CheapVerb::from_word(verb), n.and_then(|n| n.parse().ok())) {
            (Some(v), Some(n)) => {
                let t0 = Instant::now();
                match call(v, n) {
                    Ok(()) => t0.elapsed().as_nanos().to_string(),
                    Err(e) => format!("ERR {e}"),
                }
            }
            _ => format!("ERR not a request: {line:?} (VERB N)"),
        };
        writeln!(output, "{reply}")?;
        output.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_usec_per_iter_of_the_client_report() {
        let out = "  local address:  LID 0x0002, QPN 0x000101\n\
                   256000 bytes in 0.37 seconds = 5.59 Mbit/sec\n\
                   2000 iters in 0.37 seconds = 183.17 usec/iter\n";
        assert_eq!(usec_per_iter(out), Some(183.17));
        assert_eq!(usec_per_iter("Couldn't connect to 127.0.0.1:18515"), None);
    }

    #[test]
    fn reads_perftest_and_verbsim_perf_rows() {
        let perftest =
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n \
                        65536      5000             5.20               5.18   \t\t     0.009878\n";
        assert_eq!(
            perftest_numbers(perftest),
            Some(vec![65536.0, 5000.0, 5.20, 5.18, 0.009878])
        );
        assert_eq!(perftest_numbers("Couldn't connect"), None);
        let perf = " 65536  5000  198.66  0.38  simulated\n 65536  5000  83.98  0.16  wall\n";
        assert_eq!(
            perf_row(perf, "wall"),
            Some(vec![65536.0, 5000.0, 83.98, 0.16])
        );
        assert_eq!(perf_row(perf, "perftest"), None);
        let t = per_message_at(83.98).unwrap().as_secs_f64();
        // Duration keeps whole nanoseconds.
        assert!((t - 65536.0 * 8.0 / 83.98e9).abs() < 1e-9, "{t}");
        assert!(per_message_at(0.0).is_err());
    }

    #[test]
    fn finds_a_listening_socket_by_port_and_state() {
        let table = "  sl  local_address rem_address   st tx_queue\n\
           0: 00000000:4853 00000000:0000 0A 00000000:00000000\n\
           1: 0100007F:4854 0100007F:9C40 01 00000000:00000000\n";
        assert!(listening_in(table, 0x4853));
        assert!(!listening_in(table, 0x4854), "established, not listening");
        assert!(!listening_in(table, 0x4855));
    }

    #[test]
    fn the_child_protocol_times_requests_and_refuses_garbage() {
        let input = b"poll_cq 3\nquery_port 2\nfrobnicate 1\nquery_port x\nquit\npoll_cq 1\n";
        let mut out = Vec::new();
        let mut calls = Vec::new();
        serve_requests(&input[..], &mut out, |v, n| {
            calls.push((v, n));
            if v == CheapVerb::QueryPort {
                Err("port down".into())
            } else {
                Ok(())
            }
        })
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(calls, [(CheapVerb::PollCq, 3), (CheapVerb::QueryPort, 2)]);
        assert!(lines[0].parse::<u64>().is_ok(), "{out}");
        assert_eq!(lines[1], "ERR port down");
        assert!(lines[2].starts_with("ERR not a request"));
        assert!(lines[3].starts_with("ERR not a request"));
        assert_eq!(lines.len(), 4, "nothing served after quit");
    }
}
