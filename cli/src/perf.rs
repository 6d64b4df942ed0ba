//! `verbsim perf`: the benchmark workloads of `verbsim-benches`, run once
//! and printed as perftest-like tables (or one JSON object), on either
//! backend.
//!
//! One generic function, [`measure`], runs every test on any `V: Verbs`;
//! the backends differ only in how they are built. On the simulator both
//! clocks are reported: wall time (how fast the simulator runs) and
//! simulated time (what the modelled fabric would achieve), read with
//! `sim_control(SimCommand::Now)` before and after the measured section.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use backend_sim::{SimConfig, SimVerbs};
use verbs_api::{SimCommand, SimReply, Verbs};
use verbsim_benches::control::{ModifyMix, ModifyPlan, QpLifecycle};
use verbsim_benches::data::{
    Connection, MessageRate, MessageRateConfig, RateOp, SendRecvBw, SendRecvConfig, Spread,
    DEFAULT_ACK_TIMEOUT, MAX_QPS,
};
use verbsim_benches::WorkloadError;

use crate::out::{out, outln};
use crate::EXIT_USAGE;
use std::path::PathBuf;

/// What `verbsim perf --help` says after the options.
const AFTER_HELP: &str = "\
Tests:
  write_bw      RDMA WRITE bandwidth and message rate (RC or UC)
  write_lat     RDMA WRITE latency (one signalled WRITE at a time; RC or UC)
  send_bw       SEND/RECV bandwidth and message rate (RC, UC or UD)
  send_lat      SEND/RECV latency (one SEND and its receive at a time)
  read_bw       RDMA READ bandwidth and message rate (RC)
  read_lat      RDMA READ latency (RC)
  atomic_rate   8-byte atomics rate (-A FETCH_AND_ADD|CMP_AND_SWAP; RC)
  qp_lifecycle  create an RC QP, RESET->INIT->RTR->RTS, destroy: QPs/sec
  modify_qp     80 % legal / 20 % illegal ibv_modify_qp calls: calls/sec
perftest's ib_write_bw is write_bw here, ib_send_lat send_lat, and so on
(ib_atomic_bw is atomic_rate); docs/perftest-flags.md lists every perftest
flag and its state.

Bandwidth tests print `#bytes #iterations BW average[MB/sec] MsgRate[Mpps]`
(MB = 2^20 bytes, as perftest; Gb/sec with --report_gbits), latency tests
`#bytes #iterations t_min[usec] t_typical[usec] t_avg[usec] t_99%[usec]`
(the time from posting one request to reaping its completion, and for SEND
the receive's too: not half a round trip), control-path tests
`#iterations time[usec] rate[Mops/sec]`. On the simulator each table has a
`wall` row (how fast the simulator runs on this machine) and a `simulated`
row (virtual time: what the modelled device and fabric would do); the
tests perftest has add a `perftest` row: what perftest reports, in virtual
time, with its defaults: latency over RC and UC (and send_lat over UD) as
half a ping-pong round trip for WRITE and SEND, the peer polling the last
byte or its receive CQ, inline up to 220 B WRITE, 236 B SEND, 188 B UD
SEND on mlx5 and none on rxe; the round trip of one READ; write_bw,
read_bw and send_bw over RC on one QP with 128 in flight and no post list
(docs/calibration.md). atomic_rate has none.

Every argument is checked before the test starts. Exit status: 2 on a
usage error, when the backend is missing, or when the backend cannot run
the test (for instance atomics on a device without them); 1 when a
workload fails.";

/// The heading of perftest's own flags in `verbsim perf --help`; the
/// table of docs/perftest-flags.md is checked against the flags under it.
pub(crate) const PERFTEST_HEADING: &str = "perftest's flags";

/// The command line of `verbsim perf`: verbsim's options, then perftest's
/// flags with perftest's spellings and meaning.
#[derive(Clone, Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct PerfArgs {
    /// The test: write_bw, write_lat, send_bw, send_lat, read_bw,
    /// read_lat, atomic_rate, qp_lifecycle, modify_qp.
    #[arg(value_name = "TEST")]
    test: Option<String>,
    /// The backend; hw needs a build with the `hw` feature:
    /// cargo run -p verbsim-cli --features hw -- perf --backend hw TEST.
    #[arg(long, value_enum, default_value = "sim")]
    backend: Backend,
    /// The simulator's root seed (default VERBS_SIM_SEED, else 0).
    #[arg(long, value_name = "N", value_parser = crate::run::parse_seed)]
    seed: Option<u64>,
    /// Print one JSON object on standard output instead of the table.
    #[arg(long)]
    json: bool,
    /// With -a on a *_bw test: bandwidth and message rate against message
    /// size, simulated and wall lines, as FILE.svg or FILE.png (needs a
    /// TrueType font: fonts-dejavu-core, or VERBSIM_PLOT_FONT=path).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Simulator: the profile of both simulated adapters: cx6 (default,
    /// ConnectX-6 HDR InfiniBand), cx7 (ConnectX-7, 400 Gb/s RoCE) or rxe
    /// (Soft-RoCE on 10 GbE).
    #[arg(long, value_name = "NAME")]
    device_profile: Option<backend_sim::ProfileChoice>,
    /// Simulator: the simulated ports' rate: ndr|400, hdr|200,
    /// hdr100|edr|100, hdr50|50, fdr|56, edr25|25, qdr|40, 10 (up to 200
    /// on cx6, 400 on cx7, 100 on rxe).
    #[arg(long, value_name = "SPEC")]
    link_speed: Option<backend_sim::LinkSpeed>,
    /// Simulator: switches between the two adapters, one way (0, the
    /// default: back to back; at most 16); each adds 150 ns.
    #[arg(long, value_name = "N", value_parser = backend_sim::parse_switch_hops)]
    switch_hops: Option<u32>,
    /// Simulator: each adapter sits behind a PCIe switch (105 ns a
    /// crossing), as in GPU servers; not on rxe.
    #[arg(long)]
    pcie_switch: bool,
    /// Simulator: the hosts' CPU clock while the test runs, in MHz (1500)
    /// or GHz (1.5GHz); sets the post rate of one QP and the posting
    /// delay. Default: the fitted anchors' hosts (full clock).
    #[arg(long, value_name = "MHZ", value_parser = backend_sim::parse_cpu_mhz)]
    cpu_mhz: Option<u64>,

    /// Bytes per message (K, M, G suffixes; default 65536 for *_bw, 2 for
    /// *_lat, 8 and fixed for atomic_rate; at most 1G).
    #[arg(short = 's', long = "size", value_name = "SIZE", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    size: Option<u64>,
    /// Iterations: requests, QP lifecycles or modify calls to time
    /// (default 5000 for *_bw and atomic_rate, 1000 for *_lat and
    /// qp_lifecycle, 10000 for modify_qp).
    #[arg(short = 'n', long = "iters", value_name = "N", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    iters: Option<u64>,
    /// Every size from 2 to 2^23 bytes (*_bw and *_lat), one header, a row
    /// block per size.
    #[arg(short = 'a', long = "all", conflicts_with = "size", help_heading = PERFTEST_HEADING)]
    all: bool,
    /// QP pairs of a *_bw or atomic_rate test (default 1; post lists go to
    /// them round robin); the QPs the modify_qp plan runs over (default 64).
    #[arg(short = 'q', long = "qp", alias = "qps", value_name = "N", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    qp: Option<u64>,
    /// Transport of a data-path test: RC (default), UC (write_*, send_*)
    /// or UD (send_*, one MTU at most).
    #[arg(short = 'c', long = "connection", value_name = "RC|UC|UD", help_heading = PERFTEST_HEADING)]
    connection: Option<String>,
    /// Requests in flight at most per QP (default 128 for write_bw and
    /// send_bw, 16 for read_bw and atomic_rate, 1 for *_lat).
    #[arg(short = 't', long = "tx-depth", value_name = "N", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    tx_depth: Option<u64>,
    /// Requests per ibv_post_send, the last one signalled, up to the tx
    /// depth (default 16 for write_bw and send_bw, 4 for read_bw and
    /// atomic_rate, 1 for *_lat).
    #[arg(short = 'l', long = "post_list", alias = "post-list", value_name = "N", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    post_list: Option<u64>,
    /// atomic_rate's operation: FETCH_AND_ADD (default) or CMP_AND_SWAP
    /// (as ib_atomic_bw; fetch_add and cmp_swap too).
    #[arg(short = 'A', long = "atomic_type", alias = "atomic", value_name = "TYPE", value_parser = parse_atomic, help_heading = PERFTEST_HEADING)]
    atomic_type: Option<RateOp>,
    /// The device: on hardware as ibv_devices lists it; on the simulator
    /// any name is accepted with a note (the workloads run on sim_cx6_0),
    /// so a perftest line runs unchanged.
    #[arg(short = 'd', long = "ib-dev", value_name = "NAME", help_heading = PERFTEST_HEADING)]
    ib_dev: Option<String>,
    /// The port (only 1).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    ib_port: Option<u64>,
    /// The GID index (only 0).
    #[arg(short = 'x', long = "gid-index", value_name = "INDEX", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    gid_index: Option<u64>,
    /// Max inline size (only 0 for the bandwidth workloads).
    #[arg(short = 'I', long = "inline_size", value_name = "SIZE", value_parser = parse_count, help_heading = PERFTEST_HEADING)]
    inline_size: Option<u64>,
    /// Do not warn about CPU frequency scaling: accepted (there is no
    /// check to skip).
    #[arg(short = 'F', long = "CPU-freq", help_heading = PERFTEST_HEADING)]
    cpu_freq: bool,
    /// Report bandwidth in Gb/sec (10^9 bits) instead of MB/sec (2^20
    /// bytes).
    #[arg(long = "report_gbits", help_heading = PERFTEST_HEADING)]
    report_gbits: bool,
    /// Save the report as JSON in perftest_out.json (or --out_json_file);
    /// the table is printed too.
    #[arg(long = "out_json", help_heading = PERFTEST_HEADING)]
    out_json: bool,
    /// The JSON report's file (implies --out_json); with -a one object per
    /// line, one per size.
    #[arg(long = "out_json_file", value_name = "FILE", help_heading = PERFTEST_HEADING)]
    out_json_file: Option<PathBuf>,
    /// Run for a duration: not supported (give -n).
    #[arg(short = 'D', long = "duration", value_name = "SECONDS", help_heading = PERFTEST_HEADING)]
    duration: Option<String>,
    /// Connect with rdma_cm: not supported (the workloads connect with
    /// ibv_modify_qp).
    #[arg(short = 'R', long = "rdma_cm", help_heading = PERFTEST_HEADING)]
    rdma_cm: bool,
}

/// `-A`: perftest's names, and verbsim's older ones.
fn parse_atomic(s: &str) -> Result<RateOp, String> {
    match s.to_ascii_lowercase().as_str() {
        "fetch_and_add" | "fetch_add" | "fadd" => Ok(RateOp::FetchAdd),
        "cmp_and_swap" | "cmp_swap" | "cswap" => Ok(RateOp::CompSwap),
        _ => Err(format!(
            "unknown atomic `{s}` (FETCH_AND_ADD or CMP_AND_SWAP)"
        )),
    }
}

/// perftest's default JSON file of `--out_json`.
const PERFTEST_JSON_FILE: &str = "perftest_out.json";

/// Largest message `-s` accepts (the workloads register MRs of this size).
const MAX_SIZE: u64 = 1 << 30;

/// Largest `--tx-depth` accepted.
const MAX_TX_DEPTH: u32 = 8192;

use crate::run::Backend;

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Hw => "hw",
        }
    }
}

/// The test `TEST` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TestKind {
    WriteBw,
    WriteLat,
    SendBw,
    SendLat,
    ReadBw,
    ReadLat,
    AtomicRate,
    QpLifecycle,
    ModifyQp,
}

impl TestKind {
    const ALL: [Self; 9] = [
        Self::WriteBw,
        Self::WriteLat,
        Self::SendBw,
        Self::SendLat,
        Self::ReadBw,
        Self::ReadLat,
        Self::AtomicRate,
        Self::QpLifecycle,
        Self::ModifyQp,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::WriteBw => "write_bw",
            Self::WriteLat => "write_lat",
            Self::SendBw => "send_bw",
            Self::SendLat => "send_lat",
            Self::ReadBw => "read_bw",
            Self::ReadLat => "read_lat",
            Self::AtomicRate => "atomic_rate",
            Self::QpLifecycle => "qp_lifecycle",
            Self::ModifyQp => "modify_qp",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }

    fn is_data_path(self) -> bool {
        !matches!(self, Self::QpLifecycle | Self::ModifyQp)
    }

    fn is_latency(self) -> bool {
        matches!(self, Self::WriteLat | Self::SendLat | Self::ReadLat)
    }

    /// Whether the test's operation exists on `c` (UC: WRITE and SEND; UD:
    /// SEND).
    fn runs_over(self, c: Connection) -> bool {
        match self {
            Self::SendBw | Self::SendLat => true,
            Self::WriteBw | Self::WriteLat => c != Connection::Ud,
            _ => c == Connection::Rc,
        }
    }

    /// The title line, in perftest's words where perftest has the test.
    fn title(self, atomic: RateOp) -> &'static str {
        match self {
            Self::WriteBw => "RDMA_Write BW Test",
            Self::WriteLat => "RDMA_Write Latency Test",
            Self::SendBw => "Send BW Test",
            Self::SendLat => "Send Latency Test",
            Self::ReadBw => "RDMA_Read BW Test",
            Self::ReadLat => "RDMA_Read Latency Test",
            Self::AtomicRate if atomic == RateOp::CompSwap => "Atomic CMP_AND_SWAP Rate Test",
            Self::AtomicRate => "Atomic FETCH_AND_ADD Rate Test",
            Self::QpLifecycle => "QP Lifecycle Rate Test (create, RESET->INIT->RTR->RTS, destroy)",
            Self::ModifyQp => "Modify QP Rate Test (80 % legal, 20 % illegal transitions)",
        }
    }

    /// Default `(size, iterations, tx_depth, post_list)`.
    fn defaults(self) -> (u32, u64, u32, u32) {
        match self {
            Self::WriteBw | Self::SendBw => (65_536, 5_000, 128, 16),
            Self::ReadBw => (65_536, 5_000, 16, 4),
            Self::AtomicRate => (8, 5_000, 16, 4),
            Self::WriteLat | Self::SendLat | Self::ReadLat => (2, 1_000, 1, 1),
            Self::QpLifecycle => (0, 1_000, 1, 1),
            Self::ModifyQp => (0, 10_000, 1, 1),
        }
    }
}

/// What one `verbsim perf` run measures: everything [`measure`] needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PerfTest {
    kind: TestKind,
    /// Bytes per message (0 for the control-path tests).
    size: u32,
    /// Requests, lifecycles or modify calls timed.
    iterations: u64,
    /// QP pairs of a data-path test, or the QPs of the modify_qp plan.
    qps: u32,
    /// The transport of a data-path test.
    connection: Connection,
    /// Requests in flight at most.
    tx_depth: u32,
    /// Requests per post list.
    post_list: u32,
    /// The atomic operation of atomic_rate.
    atomic: RateOp,
    /// The seed of the modify_qp plan (the simulator's seed, or 0).
    plan_seed: u64,
}

/// The parsed command line of `verbsim perf`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Args {
    backend: Backend,
    seed: Option<u64>,
    json: bool,
    test: PerfTest,
    /// perftest's `-a`: every size from 2 to 2^23 bytes.
    all_sizes: bool,
    /// perftest's `-d`: the device by name (on the simulator, a
    /// profile's device: `ProfileChoice::from_device_name`).
    device: Option<String>,
    /// perftest's `--out_json` / `--out_json_file`: the JSON report's file.
    json_file: Option<PathBuf>,
    /// `--plot FILE` (with `-a`): the chart of the sizes, SVG or PNG.
    plot: Option<PathBuf>,
    /// perftest's `--report_gbits`: bandwidth in Gb/sec, else MB/sec.
    gbits: bool,
    /// `--device-profile`: the simulated adapters' profile.
    device_profile: Option<backend_sim::ProfileChoice>,
    /// `--link-speed`: the simulated ports' rate.
    link_speed: Option<backend_sim::LinkSpeed>,
    /// `--switch-hops`, `--pcie-switch`, `--cpu-mhz`: the set-up.
    setup: backend_sim::Setup,
    /// Internal: print the table's rows only (the sizes after the first
    /// of `-a`).
    rows_only: bool,
}

/// Parses a count: decimal or 0x hex, with an optional K/M/G (binary) suffix.
fn parse_count(s: &str) -> Result<u64, String> {
    let (digits, scale) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    conformance::literal::parse_int(digits)
        .and_then(|n| u64::try_from(n).ok())
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{s}` is not a number (K, M, G suffixes allowed)"))
}

/// Checks the arguments against each other and the test, and fills in the
/// test's defaults; everything that can be refused is refused here,
/// before any work starts.
fn validate(p: PerfArgs) -> Result<Args, String> {
    if p.duration.is_some() {
        return Err(
            "-D, --duration (run for a duration) is not supported: give -n ITERS".to_owned(),
        );
    }
    if p.rdma_cm {
        return Err(
            "-R, --rdma_cm (connect with rdma_cm) is not supported: the workloads connect with ibv_modify_qp"
                .to_owned(),
        );
    }
    if let Some(port) = p.ib_port.filter(|&x| x != 1) {
        return Err(format!("-i {port}: the workloads use port 1"));
    }
    if let Some(g) = p.gid_index.filter(|&x| x != 0) {
        return Err(format!("-x {g}: the workloads address GID index 0"));
    }
    if let Some(i) = p.inline_size.filter(|&x| x != 0) {
        return Err(format!(
            "-I {i}: the bandwidth workloads post without IBV_SEND_INLINE (only -I 0); latency tests report perftest's inline figure in their perftest row"
        ));
    }
    let name = p
        .test
        .as_deref()
        .ok_or("no test given (write_bw, write_lat, send_bw, send_lat, read_bw, read_lat, atomic_rate, qp_lifecycle, modify_qp)")?;
    let test = Some(TestKind::parse(name).ok_or_else(|| {
        let known: Vec<_> = TestKind::ALL.iter().map(|t| t.name()).collect();
        let hint = name
            .strip_prefix("ib_")
            .map(|t| t.replace("atomic_bw", "atomic_rate"))
            .filter(|t| TestKind::parse(t).is_some())
            .map_or_else(String::new, |t| format!("; perftest's {name} is {t} here"));
        format!("unknown test `{name}` (known: {}){hint}", known.join(" "))
    })?);
    let connection = match &p.connection {
        None => None,
        Some(t) => Some(
            Connection::parse(t)
                .ok_or_else(|| format!("unknown transport `{t}` (RC, UC or UD)"))?,
        ),
    };
    let (size, iters, qps, tx_depth, post_list, atomic) = (
        p.size,
        p.iters,
        p.qp,
        p.tx_depth,
        p.post_list,
        p.atomic_type,
    );
    let (all_sizes, plot, seed) = (p.all, p.plot.clone(), p.seed);
    let kind = test.ok_or("no test given")?;
    let (d_size, d_iters, d_depth, d_list) = kind.defaults();

    let size = match (kind, size) {
        (_, None) => d_size,
        (TestKind::QpLifecycle | TestKind::ModifyQp, Some(_)) => {
            return Err(format!("-s does not apply to {}", kind.name()))
        }
        (TestKind::AtomicRate, Some(s)) if s != 8 => {
            return Err(format!("atomics move exactly 8 bytes (got -s {s})"))
        }
        (_, Some(s)) if s == 0 || s > MAX_SIZE => {
            return Err(format!("-s must be 1..={MAX_SIZE} bytes (got {s})"))
        }
        (_, Some(s)) => s as u32,
    };
    let iterations = match iters {
        None => d_iters,
        Some(0) => return Err("-n must be at least 1".to_owned()),
        Some(n) => n,
    };
    let qps = match (kind, qps) {
        (TestKind::ModifyQp, None) => 64,
        (_, None | Some(1)) => 1,
        (TestKind::ModifyQp, Some(q)) if (1..=65_536).contains(&q) => q as u32,
        (TestKind::ModifyQp, Some(q)) => return Err(format!("-q must be 1..=65536 (got {q})")),
        (k, Some(q)) if k.is_data_path() && !k.is_latency() => {
            if (1..=u64::from(MAX_QPS)).contains(&q) {
                q as u32
            } else {
                return Err(format!("-q must be 1..={MAX_QPS} (got {q})"));
            }
        }
        (_, Some(q)) => {
            return Err(format!(
                "-q {q}: {} runs on one QP (pair), as perftest's does",
                kind.name()
            ))
        }
    };
    let connection = match connection {
        None => Connection::Rc,
        Some(_) if !kind.is_data_path() => {
            return Err(format!("-c does not apply to {}", kind.name()))
        }
        Some(c) if !kind.runs_over(c) => {
            return Err(format!(
                "-c {}: {} does not run over {} ({})",
                c.name(),
                kind.name(),
                c.name(),
                match c {
                    Connection::Uc => "UC carries write_* and send_*",
                    _ => "UD carries send_* only",
                }
            ))
        }
        Some(c) => c,
    };
    if !kind.is_data_path() && (tx_depth.is_some() || post_list.is_some()) {
        return Err(format!("-t and -l do not apply to {}", kind.name()));
    }
    if kind != TestKind::AtomicRate && atomic.is_some() {
        return Err("-A (--atomic_type) applies to atomic_rate only".to_owned());
    }
    let tx_depth = match tx_depth {
        None => d_depth,
        Some(d) if (1..=u64::from(MAX_TX_DEPTH)).contains(&d) => d as u32,
        Some(d) => return Err(format!("--tx-depth must be 1..={MAX_TX_DEPTH} (got {d})")),
    };
    let post_list = match post_list {
        // A smaller --tx-depth caps the default post list.
        None => d_list.min(tx_depth),
        // perftest takes a post list up to the send queue's depth.
        Some(l) if (1..=u64::from(tx_depth)).contains(&l) => l as u32,
        Some(0) => return Err("-l (--post_list) must be at least 1".to_owned()),
        Some(l) => {
            return Err(format!(
                "-l {l} (--post_list) is more than the tx depth {tx_depth} (-t)"
            ))
        }
    };
    if all_sizes && (!kind.is_data_path() || kind == TestKind::AtomicRate) {
        return Err(format!(
            "-a runs every size of a *_bw or *_lat test, not of {}",
            kind.name()
        ));
    }
    if let Some(path) = &plot {
        if !(all_sizes && kind.is_data_path() && !kind.is_latency()) {
            return Err("--plot draws the sizes of -a for a *_bw test (give -a)".to_owned());
        }
        crate::plot::check(path)?;
    }
    // perftest's --out_json writes perftest_out.json unless --out_json_file
    // names the file; the file is created now, so an unwritable one is
    // refused before the test runs.
    let json_file = match (p.out_json, p.out_json_file) {
        (_, Some(f)) => Some(f),
        (true, None) => Some(PathBuf::from(PERFTEST_JSON_FILE)),
        (false, None) => None,
    };
    if let Some(f) = &json_file {
        std::fs::File::create(f).map_err(|e| format!("--out_json_file {}: {e}", f.display()))?;
    }
    if p.backend == Backend::Hw && (p.device_profile.is_some() || p.link_speed.is_some()) {
        return Err("--device-profile and --link-speed choose the simulator's model; the hardware backend measures the device".to_owned());
    }
    let setup = backend_sim::Setup {
        switch_hops: p.switch_hops.unwrap_or(0),
        pcie_switch: p.pcie_switch,
        cpu_mhz: p.cpu_mhz.unwrap_or(0),
        ..backend_sim::Setup::DEFAULT
    };
    if p.backend == Backend::Hw && !setup.is_default() {
        return Err("--switch-hops, --pcie-switch and --cpu-mhz describe the simulator's set-up; the hardware backend measures the real one".to_owned());
    }
    let plan_seed = seed.unwrap_or(0);
    Ok(Args {
        backend: p.backend,
        seed,
        json: p.json,
        all_sizes,
        device: p.ib_dev,
        json_file,
        plot,
        gbits: p.report_gbits,
        device_profile: p.device_profile,
        link_speed: p.link_speed,
        setup,
        rows_only: false,
        test: PerfTest {
            kind,
            size,
            iterations,
            qps,
            connection,
            tx_depth,
            post_list,
            atomic: atomic.unwrap_or(RateOp::FetchAdd),
            plan_seed,
        },
    })
}

/// Wall-clock and simulated-time figures of one clock.
#[derive(Clone, Debug, PartialEq)]
enum Figures {
    /// A bandwidth or rate test: `iterations` requests of `bytes` in `ns`.
    Bw { ns: u64 },
    /// A latency test: each request's completion time, sorted.
    Lat { samples_ns: Vec<u64> },
    /// A control-path test: `iterations` operations in `ns`.
    Rate { ns: u64 },
}

/// What [`measure`] found.
#[derive(Clone, Debug, PartialEq)]
struct PerfReport {
    /// The backend's name (`sim` or `hw`).
    backend: &'static str,
    /// Measured with the wall clock.
    wall: Figures,
    /// Measured in simulated time (`None` off the simulator).
    sim: Option<Figures>,
    /// For modify_qp: calls that succeeded and calls refused as predicted.
    modify_tally: Option<(u64, u64)>,
    /// Latency tests on the simulator: what perftest reports (half a
    /// ping-pong round trip for WRITE and SEND, the round trip of a READ),
    /// in simulated time.
    perftest: Option<Figures>,
}

/// The simulator's virtual time, or `None` on a backend without one.
fn sim_now<V: Verbs>(v: &mut V) -> Option<u64> {
    match v.sim_control(SimCommand::Now) {
        Ok(SimReply::TimeNs(ns)) => Some(ns),
        _ => None,
    }
}

/// Both clocks around a section of work.
struct Stopwatch {
    wall: Instant,
    sim: Option<u64>,
}

impl Stopwatch {
    fn start<V: Verbs>(v: &mut V) -> Self {
        let sim = sim_now(v);
        Self {
            wall: Instant::now(),
            sim,
        }
    }

    /// `(wall ns, simulated ns)` since `start`.
    fn stop<V: Verbs>(self, v: &mut V) -> (u64, Option<u64>) {
        let wall = u64::try_from(self.wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let sim = self.sim.zip(sim_now(v)).map(|(a, b)| b.saturating_sub(a));
        (wall, sim)
    }
}

/// Runs `test` on `v` and measures it with the wall clock and, where the
/// backend has one, the simulated clock. Every workload is set up, run and
/// torn down here; a failure during the run still tears down (best effort)
/// and reports the run's error.
///
/// # Errors
/// The workload's error: [`WorkloadError::is_not_implemented`] when the
/// backend cannot run this test yet.
fn measure<V: Verbs>(v: &mut V, test: &PerfTest) -> Result<PerfReport, WorkloadError> {
    let backend = v.backend().name();
    let n = test.iterations;
    let mut modify_tally = None;
    let (wall, sim) = match test.kind {
        TestKind::WriteBw | TestKind::ReadBw | TestKind::AtomicRate => {
            let op = match test.kind {
                TestKind::WriteBw => RateOp::Write,
                TestKind::ReadBw => RateOp::Read,
                _ => test.atomic,
            };
            let mut w = MessageRate::new(v, rate_config(op, test))?;
            let timed = (|| {
                let clock = Stopwatch::start(v);
                w.run(v, n)?;
                w.drain(v)?;
                Ok::<_, WorkloadError>(clock.stop(v))
            })();
            let torn = w.teardown(v);
            let (wall, sim) = timed?;
            torn?;
            (Figures::Bw { ns: wall }, sim.map(|ns| Figures::Bw { ns }))
        }
        TestKind::SendBw => {
            let mut w = SendRecvBw::new(v, send_config(test))?;
            let timed = (|| {
                let clock = Stopwatch::start(v);
                w.run(v, n)?;
                w.drain(v)?;
                Ok::<_, WorkloadError>(clock.stop(v))
            })();
            let torn = w.teardown(v);
            let (wall, sim) = timed?;
            torn?;
            (Figures::Bw { ns: wall }, sim.map(|ns| Figures::Bw { ns }))
        }
        TestKind::WriteLat | TestKind::ReadLat => {
            let op = if test.kind == TestKind::WriteLat {
                RateOp::Write
            } else {
                RateOp::Read
            };
            let mut w = MessageRate::new(v, rate_config(op, test))?;
            let timed = latency(v, n, |v| {
                w.run(v, 1)?;
                w.drain(v)
            });
            let torn = w.teardown(v);
            let figures = timed?;
            torn?;
            figures
        }
        TestKind::SendLat => {
            let mut w = SendRecvBw::new(v, send_config(test))?;
            let timed = latency(v, n, |v| {
                w.run(v, 1)?;
                w.drain(v)
            });
            let torn = w.teardown(v);
            let figures = timed?;
            torn?;
            figures
        }
        TestKind::QpLifecycle => {
            let mut w = QpLifecycle::new(v)?;
            let timed = (|| {
                let clock = Stopwatch::start(v);
                for _ in 0..n {
                    w.run(v)?;
                }
                Ok::<_, WorkloadError>(clock.stop(v))
            })();
            let torn = w.teardown(v);
            let (wall, sim) = timed?;
            torn?;
            (
                Figures::Rate { ns: wall },
                sim.map(|ns| Figures::Rate { ns }),
            )
        }
        TestKind::ModifyQp => {
            let plan = ModifyPlan::generate(test.qps as usize, 5_000, test.plan_seed);
            let mut w = ModifyMix::new(v, plan)?;
            let timed = (|| {
                let clock = Stopwatch::start(v);
                let tally = w.run_steps(v, n)?;
                Ok::<_, WorkloadError>((clock.stop(v), tally))
            })();
            // The QPs may be anywhere in the plan: teardown destroys them
            // from any state.
            let torn = w.teardown(v);
            let ((wall, sim), tally) = timed?;
            torn?;
            modify_tally = Some((tally.succeeded as u64, tally.refused as u64));
            (
                Figures::Rate { ns: wall },
                sim.map(|ns| Figures::Rate { ns }),
            )
        }
    };
    Ok(PerfReport {
        backend,
        wall,
        sim,
        modify_tally,
        perftest: None,
    })
}

/// Times `n` calls of `one`, each on its own, with both clocks.
fn latency<V: Verbs>(
    v: &mut V,
    n: u64,
    mut one: impl FnMut(&mut V) -> Result<(), WorkloadError>,
) -> Result<(Figures, Option<Figures>), WorkloadError> {
    let cap = usize::try_from(n).unwrap_or(usize::MAX).min(1 << 24);
    let mut wall = Vec::with_capacity(cap);
    let mut sim = Vec::with_capacity(cap);
    let mut has_sim = true;
    for _ in 0..n {
        let clock = Stopwatch::start(v);
        one(v)?;
        let (w, s) = clock.stop(v);
        wall.push(w);
        match s {
            Some(s) if has_sim => sim.push(s),
            _ => has_sim = false,
        }
    }
    wall.sort_unstable();
    sim.sort_unstable();
    Ok((
        Figures::Lat { samples_ns: wall },
        has_sim.then_some(Figures::Lat { samples_ns: sim }),
    ))
}

/// The [`MessageRateConfig`] of a WRITE, READ or atomic test.
fn rate_config(op: RateOp, test: &PerfTest) -> MessageRateConfig {
    MessageRateConfig {
        op,
        msg_bytes: test.size,
        outstanding: test.tx_depth,
        signal_every: test.post_list,
        poll_batch: 16,
        remote_mr_bytes: (test.size as usize).max(1 << 20),
        spread: Spread::Sequential,
        qps: test.qps,
        connection: test.connection,
        ack_timeout: DEFAULT_ACK_TIMEOUT,
        faults: None,
    }
}

/// The [`SendRecvConfig`] of a SEND test.
fn send_config(test: &PerfTest) -> SendRecvConfig {
    SendRecvConfig {
        msg_bytes: test.size,
        rq_depth: test.tx_depth.max(256),
        outstanding: test.tx_depth,
        signal_every: test.post_list,
        poll_batch: 16,
        qps: test.qps,
        connection: test.connection,
    }
}

/// Derived numbers of one clock, for the table and the JSON.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Derived {
    Bw {
        seconds: f64,
        gbps: f64,
        mpps: f64,
    },
    Lat {
        min_us: f64,
        typical_us: f64,
        avg_us: f64,
        p99_us: f64,
    },
    Rate {
        seconds: f64,
        mops: f64,
    },
}

fn derive(f: &Figures, test: &PerfTest) -> Derived {
    let n = test.iterations as f64;
    let per_sec = |ns: u64, x: f64| {
        if ns == 0 {
            f64::NAN
        } else {
            x * 1e9 / ns as f64
        }
    };
    match f {
        Figures::Bw { ns } => Derived::Bw {
            seconds: *ns as f64 / 1e9,
            gbps: per_sec(*ns, n * f64::from(test.size) * 8.0) / 1e9,
            mpps: per_sec(*ns, n) / 1e6,
        },
        Figures::Lat { samples_ns } => {
            let us = |ns: u64| ns as f64 / 1e3;
            let at = |q: f64| {
                let i = ((samples_ns.len() as f64 * q).ceil() as usize).saturating_sub(1);
                samples_ns.get(i).copied().map_or(f64::NAN, us)
            };
            let sum: u128 = samples_ns.iter().map(|&s| u128::from(s)).sum();
            Derived::Lat {
                min_us: samples_ns.first().copied().map_or(f64::NAN, us),
                typical_us: at(0.5),
                avg_us: if samples_ns.is_empty() {
                    f64::NAN
                } else {
                    sum as f64 / samples_ns.len() as f64 / 1e3
                },
                p99_us: at(0.99),
            }
        }
        Figures::Rate { ns } => Derived::Rate {
            seconds: *ns as f64 / 1e9,
            mops: per_sec(*ns, n) / 1e6,
        },
    }
}

/// Gb/sec (10^9 bits) as perftest's MB/sec (2^20 bytes).
fn mb_per_sec(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0 / f64::from(1u32 << 20)
}

/// A number for the table: `-` when undefined (no simulated time passed).
fn cell(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".to_owned()
    }
}

/// A number for the JSON: `null` when undefined.
fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".to_owned()
    }
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// The perftest-like table.
fn table(args: &Args, report: &PerfReport) -> String {
    let t = &args.test;
    let mut out = String::new();
    let _ = writeln!(out, "{RULE}");
    let _ = writeln!(out, "                    {}", t.kind.title(t.atomic));
    let seed = match args.backend {
        Backend::Sim => format!(" seed: {}", args.seed.unwrap_or(0)),
        Backend::Hw => String::new(),
    };
    let shape = if t.kind.is_data_path() {
        format!(
            " connection: {} | QPs: {} | tx depth: {} | post list: {}",
            t.connection.name(),
            t.qps,
            t.tx_depth,
            t.post_list
        )
    } else {
        // The control-path tests create RC QPs.
        format!(" connection: RC | QPs: {}", t.qps)
    };
    let _ = writeln!(out, " backend: {}{seed} |{shape}", report.backend);
    let _ = writeln!(out, "{RULE}");
    let rows: Vec<(&str, Derived)> = std::iter::once(("wall", derive(&report.wall, t)))
        .chain(report.sim.iter().map(|f| ("simulated", derive(f, t))))
        .chain(report.perftest.iter().map(|f| ("perftest", derive(f, t))))
        .collect();
    let label = |clock: &str| {
        if report.sim.is_some() {
            format!("   {clock}")
        } else {
            String::new()
        }
    };
    let clock_head = if report.sim.is_some() { "   clock" } else { "" };
    match rows[0].1 {
        Derived::Bw { .. } => {
            let _ = writeln!(
                out,
                " #bytes     #iterations    BW average[{}]   MsgRate[Mpps]{clock_head}",
                if args.gbits { "Gb/sec" } else { "MB/sec" }
            );
            for (clock, d) in &rows {
                if let Derived::Bw { gbps, mpps, .. } = d {
                    let bw = if args.gbits { *gbps } else { mb_per_sec(*gbps) };
                    let _ = writeln!(
                        out,
                        " {:<10} {:<14} {:<20} {:<13}{}",
                        t.size,
                        t.iterations,
                        cell(bw),
                        cell(*mpps),
                        label(clock)
                    );
                }
            }
        }
        Derived::Lat { .. } => {
            let _ = writeln!(
                out,
                " #bytes #iterations    t_min[usec]    t_typical[usec]    t_avg[usec]    t_99%[usec]{clock_head}"
            );
            for (clock, d) in &rows {
                if let Derived::Lat {
                    min_us,
                    typical_us,
                    avg_us,
                    p99_us,
                } = d
                {
                    let _ = writeln!(
                        out,
                        " {:<6} {:<14} {:<14} {:<18} {:<14} {:<11}{}",
                        t.size,
                        t.iterations,
                        cell(*min_us),
                        cell(*typical_us),
                        cell(*avg_us),
                        cell(*p99_us),
                        label(clock)
                    );
                }
            }
        }
        Derived::Rate { .. } => {
            let _ = writeln!(
                out,
                " #iterations    time[usec]      rate[Mops/sec]{clock_head}"
            );
            for (clock, d) in &rows {
                if let Derived::Rate { seconds, mops } = d {
                    let _ = writeln!(
                        out,
                        " {:<14} {:<15} {:<14}{}",
                        t.iterations,
                        cell(seconds * 1e6),
                        cell(*mops),
                        label(clock)
                    );
                }
            }
        }
    }
    if let Some((ok, refused)) = report.modify_tally {
        let _ = writeln!(
            out,
            " modify calls: {ok} succeeded, {refused} refused with the predicted error"
        );
    }
    if args.rows_only {
        // `-a` after the first size: the rows under the same header.
        return out.lines().skip(5).map(|l| format!("{l}\n")).collect();
    }
    let _ = write!(out, "{RULE}");
    out
}

/// The numbers of one clock as a JSON object.
fn json_figures(d: &Derived) -> String {
    match *d {
        Derived::Bw {
            seconds,
            gbps,
            mpps,
        } => format!(
            "{{\"seconds\":{},\"bw_gbps\":{},\"bw_mb_per_sec\":{},\"msg_rate_mpps\":{}}}",
            json_num(seconds),
            json_num(gbps),
            json_num(mb_per_sec(gbps)),
            json_num(mpps)
        ),
        Derived::Lat {
            min_us,
            typical_us,
            avg_us,
            p99_us,
        } => format!(
            "{{\"t_min_us\":{},\"t_typical_us\":{},\"t_avg_us\":{},\"t_p99_us\":{}}}",
            json_num(min_us),
            json_num(typical_us),
            json_num(avg_us),
            json_num(p99_us)
        ),
        Derived::Rate { seconds, mops } => format!(
            "{{\"seconds\":{},\"rate_mops\":{}}}",
            json_num(seconds),
            json_num(mops)
        ),
    }
}

/// One JSON object with the table's numbers (hand-written: every string in
/// it is a fixed identifier, nothing needs escaping).
fn json(args: &Args, report: &PerfReport) -> String {
    let t = &args.test;
    let seed = match args.backend {
        Backend::Sim => args.seed.unwrap_or(0).to_string(),
        Backend::Hw => "null".to_owned(),
    };
    let atomic = match (t.kind, t.atomic) {
        (TestKind::AtomicRate, RateOp::CompSwap) => "\"cmp_swap\"",
        (TestKind::AtomicRate, _) => "\"fetch_add\"",
        _ => "null",
    };
    let sim = report
        .sim
        .as_ref()
        .map_or_else(|| "null".to_owned(), |f| json_figures(&derive(f, t)));
    let perftest = report
        .perftest
        .as_ref()
        .map_or_else(|| "null".to_owned(), |f| json_figures(&derive(f, t)));
    let tally = report.modify_tally.map_or_else(
        || "null".to_owned(),
        |(ok, refused)| format!("{{\"succeeded\":{ok},\"refused\":{refused}}}"),
    );
    // Message size, depth and post list mean nothing to the control-path tests.
    let data = |x: u32| {
        if t.kind.is_data_path() {
            x.to_string()
        } else {
            "null".to_owned()
        }
    };
    format!(
        "{{\"test\":\"{}\",\"backend\":\"{}\",\"seed\":{seed},\"connection\":\"{}\",\
         \"bytes\":{},\"iterations\":{},\"qps\":{},\"tx_depth\":{},\"post_list\":{},\
         \"atomic\":{atomic},\"wall\":{},\"sim\":{sim},\"perftest\":{perftest},\"modify\":{tally}}}",
        t.kind.name(),
        report.backend,
        t.connection.name(),
        data(t.size),
        t.iterations,
        t.qps,
        data(t.tx_depth),
        data(t.post_list),
        json_figures(&derive(&report.wall, t)),
    )
}

/// Measures on `v` and prints the result; the exit status.
/// Hands each report's bandwidth figures to `collect` (the chart of
/// `--plot`).
fn run_collect<V: Verbs>(
    v: &mut V,
    args: &Args,
    perftest: impl FnOnce(&PerfTest) -> Option<Figures>,
    collect: &mut dyn FnMut(crate::plot::Point),
) -> ExitCode {
    let name = args.test.kind.name();
    match measure(v, &args.test) {
        Ok(mut report) => {
            report.perftest = perftest(&args.test);
            let t = &args.test;
            let clocks = std::iter::once(("wall", &report.wall))
                .chain(report.sim.iter().map(|f| ("simulated", f)))
                .filter_map(|(clock, f)| match derive(f, t) {
                    Derived::Bw { gbps, mpps, .. } => Some((clock, gbps, mpps)),
                    _ => None,
                })
                .collect();
            collect((t.size, clocks));
            if args.json {
                outln!("{}", json(args, &report));
            } else if args.all_sizes {
                // The closing rule comes after the last size.
                let t = table(args, &report);
                out!("{}", t.strip_suffix(RULE).unwrap_or(&t));
            } else {
                outln!("{}", table(args, &report));
            }
            if let Some(path) = &args.json_file {
                use std::io::Write as _;
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .and_then(|mut f| writeln!(f, "{}", json(args, &report)));
                if let Err(e) = written {
                    eprintln!("verbsim perf: --out_json_file {}: {e}", path.display());
                    return ExitCode::from(EXIT_USAGE);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) if e.is_not_implemented() => {
            eprintln!(
                "verbsim perf: {name} is not available on the {} backend yet: {e}",
                args.backend.name()
            );
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) if e.is_skip() => {
            eprintln!(
                "verbsim perf: {name} cannot run on the {} backend: {e}",
                args.backend.name()
            );
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            eprintln!(
                "verbsim perf: {name} failed on the {} backend: {e}",
                args.backend.name()
            );
            ExitCode::FAILURE
        }
    }
}

/// The simulated devices' profile: `--device-profile`, else the profile
/// `-d NAME` names (`mlx5_0` is a ConnectX-6, `rxe0` Soft-RoCE,
/// `sim_cx7_0` the cx7 profile; any other name runs cx6, with a note),
/// else cx6; at `--link-speed` when given.
fn sim_profile(args: &Args) -> Result<backend_sim::DeviceProfile, String> {
    let cx6 = || backend_sim::ProfileChoice {
        profile: backend_sim::DeviceProfile::connectx6(),
    };
    let choice = match (&args.device_profile, &args.device) {
        (Some(p), _) => p.clone(),
        // perftest's -d names a real device; a perftest line runs
        // unchanged, on the profile of that kind of device, else cx6.
        (None, Some(name)) => match backend_sim::ProfileChoice::from_device_name(name) {
            Some(c) => {
                eprintln!(
                    "verbsim perf: note: -d {name}: simulated as profile {}",
                    c.profile.name
                );
                c
            }
            None => {
                eprintln!(
                    "verbsim perf: note: -d {name}: no simulated profile has this device (cx6: mlx5_*, sim_cx6_*; cx7: sim_cx7_*; rxe: rxe*, sim_rxe_*); the workloads run on cx6"
                );
                cx6()
            }
        },
        (None, None) => cx6(),
    };
    let choice = match args.link_speed {
        Some(speed) => choice.with_link_speed(speed)?,
        None => choice,
    };
    choice.with_setup(&args.setup).map(|c| c.profile)
}

/// What perftest reports for `t` on the simulator (two devices of
/// `profile`, docs/calibration.md): for a latency test half a ping-pong
/// round trip of WRITE and SEND (over RC and UC, and SEND over UD), inline
/// up to perftest's default for the device (`calibrate::perftest_inline`),
/// the round trip of one READ; for `write_bw`, `read_bw` and `send_bw`
/// over RC on one QP the bandwidth with perftest's defaults (128 in
/// flight, no post list, no inline; READ 16 outstanding). `None` for
/// `atomic_rate` (`ib_atomic_bw`: not built), more QPs, or UC/UD
/// bandwidth.
fn perftest_figures(t: &PerfTest, seed: u64, p: &backend_sim::DeviceProfile) -> Option<Figures> {
    use crate::calibrate::{perftest_inline, LatTest};
    let n = u32::try_from(t.iterations).unwrap_or(u32::MAX).min(100_000);
    let mut samples_ns = match (t.kind, t.connection) {
        (TestKind::SendLat, Connection::Ud) => crate::calibrate::ud_send_lat_samples(
            p,
            seed,
            t.size,
            n,
            perftest_inline(p, LatTest::SendUd),
        ),
        (TestKind::WriteLat, c) => crate::calibrate::write_lat_samples_on(
            p,
            seed,
            t.size,
            n,
            perftest_inline(p, LatTest::Write),
            c.qp_type(),
        ),
        (TestKind::SendLat, c) => crate::calibrate::send_lat_samples_on(
            p,
            seed,
            t.size,
            n,
            perftest_inline(p, LatTest::Send),
            c.qp_type(),
        ),
        (TestKind::ReadLat, Connection::Rc) => {
            crate::calibrate::read_lat_samples(p, seed, t.size, n)
        }
        // The bandwidth tests with perftest's defaults: one QP, 128 in
        // flight, no post list, no inline (READ: 16 outstanding).
        (TestKind::WriteBw | TestKind::ReadBw, Connection::Rc) if t.qps == 1 => {
            let op = if t.kind == TestKind::WriteBw {
                verbs_api::WrOpcode::RdmaWrite
            } else {
                verbs_api::WrOpcode::RdmaRead
            };
            let ns = crate::calibrate::rate_ns(p, op, t.size, 1, n);
            return Some(Figures::Bw { ns });
        }
        (TestKind::SendBw, Connection::Rc) if t.qps == 1 => {
            let ns = crate::calibrate::send_bw_ns(p, t.size, n, 256);
            return Some(Figures::Bw { ns });
        }
        _ => return None,
    };
    samples_ns.sort_unstable();
    Some(Figures::Lat { samples_ns })
}

/// Runs `run` once, or with `-a` once per size from 2 to 2^23 bytes (the
/// header printed once, the rule after the last); the first failure ends it.
fn for_each_size(
    args: &Args,
    mut run: impl FnMut(&Args, &mut dyn FnMut(crate::plot::Point)) -> ExitCode,
) -> ExitCode {
    let mut points = Vec::new();
    if !args.all_sizes {
        return run(args, &mut |_| {});
    }
    for (i, shift) in (1..=23u32).enumerate() {
        let mut one = args.clone();
        one.test.size = 1 << shift;
        one.rows_only = i > 0;
        let code = run(&one, &mut |p| points.push(p));
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    if !args.json {
        outln!("{RULE}");
    }
    if let Some(path) = &args.plot {
        let title = format!(
            "verbsim perf {} ({})",
            args.test.kind.name(),
            args.backend.name()
        );
        if let Err(e) = crate::plot::plot(path, &title, &points) {
            eprintln!("verbsim perf: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    ExitCode::SUCCESS
}

/// Entry point of `verbsim perf`.
pub(crate) fn main(args: PerfArgs) -> ExitCode {
    let args = match validate(args) {
        Ok(a) => a,
        Err(why) => return crate::usage_error(Some("perf"), &why),
    };
    match args.backend {
        Backend::Sim => {
            let seed = args.seed.or_else(conformance::seed_from_env).unwrap_or(0);
            let args = Args {
                seed: Some(seed),
                test: PerfTest {
                    plan_seed: seed,
                    ..args.test.clone()
                },
                ..args
            };
            let profile = match sim_profile(&args) {
                Ok(p) => p,
                Err(e) => return crate::usage_error(Some("perf"), &e),
            };
            let config = SimConfig {
                seed,
                // A benchmark measures the verbs, not the trace recorder.
                trace_enabled: false,
                ..SimConfig::with_devices(vec![profile.clone(), profile.clone()])
            };
            for_each_size(&args, |args, collect| {
                let mut sim = SimVerbs::new(config.clone());
                run_collect(
                    &mut sim,
                    args,
                    |t| perftest_figures(t, seed, &profile),
                    collect,
                )
            })
        }
        Backend::Hw => run_hw(&args),
    }
}

#[cfg(feature = "hw")]
fn run_hw(args: &Args) -> ExitCode {
    if args.seed.is_some() {
        eprintln!("verbsim perf: note: --seed only affects the simulator");
    }
    // -d NAME, else VERBS_TEST_DEVICE=NAME, selects the device (index 0 of
    // the backend).
    let hw = match &args.device {
        Some(name) => backend_hw::HwVerbs::with_device(name),
        None => backend_hw::HwVerbs::from_env(),
    };
    match hw {
        Ok(mut hw) => for_each_size(args, |a, collect| {
            run_collect(&mut hw, a, |_| None, collect)
        }),
        Err(e) => {
            eprintln!("verbsim perf: no RDMA device for --backend hw: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

#[cfg(not(feature = "hw"))]
fn run_hw(_: &Args) -> ExitCode {
    eprintln!(
        "verbsim perf: this build has no hardware backend.\n\
         Build with the `hw` feature (needs libibverbs-dev, librdmacm-dev, libclang-dev):\n\
         \n    cargo run -p verbsim-cli --features hw -- perf --backend hw TEST ..."
    );
    ExitCode::from(EXIT_USAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cmd {
        #[command(flatten)]
        perf: PerfArgs,
    }

    /// `verbsim perf ARGS` through clap and [`validate`]; any error as text.
    fn parse(args: &[&str]) -> Result<Args, String> {
        let p = Cmd::try_parse_from(std::iter::once("perf").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        validate(p.perf)
    }

    // Goal: the documented forms parse, with the documented defaults, and
    // the rest is refused with a message naming the problem.
    // Method: table of command lines.
    #[test]
    fn perf_arguments_parse() {
        let a = parse(&[
            "--backend=hw",
            "--seed",
            "7",
            "--json",
            "write_bw",
            "-s",
            "4K",
            "-n",
            "100",
            "--tx-depth",
            "64",
            "--post-list=8",
            "-c",
            "rc",
        ])
        .unwrap();
        assert_eq!(a.backend, Backend::Hw);
        assert_eq!(a.seed, Some(7));
        assert!(a.json);
        assert_eq!(
            (a.test.kind, a.test.size, a.test.iterations),
            (TestKind::WriteBw, 4096, 100)
        );
        assert_eq!((a.test.tx_depth, a.test.post_list, a.test.qps), (64, 8, 1));

        let d = parse(&["send_lat"]).unwrap();
        assert_eq!(
            (
                d.test.size,
                d.test.iterations,
                d.test.tx_depth,
                d.test.post_list
            ),
            (2, 1000, 1, 1)
        );
        let m = parse(&["modify_qp", "-q", "8"]).unwrap();
        assert_eq!((m.test.qps, m.test.iterations), (8, 10_000));
        let c = parse(&["atomic_rate", "--atomic", "cmp_swap"]).unwrap();
        assert_eq!((c.test.atomic, c.test.size), (RateOp::CompSwap, 8));
        assert_eq!(c.test.connection, Connection::Rc);
        let q = parse(&["send_bw", "-q", "4", "-c", "UD", "-s", "2K"]).unwrap();
        assert_eq!(
            (q.test.qps, q.test.connection, q.test.size),
            (4, Connection::Ud, 2048)
        );
        assert_eq!(
            parse(&["write_lat", "--connection=uc"])
                .unwrap()
                .test
                .connection,
            Connection::Uc
        );
        // A small tx depth caps the default post list.
        assert_eq!(
            parse(&["write_bw", "--tx-depth", "4"])
                .unwrap()
                .test
                .post_list,
            4
        );

        let errors = [
            (&["frobnicate"][..], "unknown test `frobnicate`"),
            (&["ib_write_bw"], "perftest's ib_write_bw is write_bw here"),
            (&["write_bw", "-s", "big"], "`big` is not a number"),
            (&["write_bw", "-s", "0"], "-s must be 1..="),
            (&["write_bw", "-s", "2G"], "-s must be 1..="),
            (&["write_bw", "-n", "0"], "-n must be at least 1"),
            (&["write_bw", "-n"], "--iters"),
            (&[], "no test given"),
            (&["write_bw", "read_bw"], "read_bw"),
            (&["write_bw", "-c", "UD"], "write_bw does not run over UD"),
            (&["read_lat", "-c", "uc"], "read_lat does not run over UC"),
            (&["modify_qp", "-c", "RC"], "-c does not apply"),
            (&["write_bw", "-c", "XRC"], "unknown transport `XRC`"),
            (&["write_lat", "-q", "4"], "one QP"),
            (&["send_bw", "-q", "5000"], "-q must be 1..=1024"),
            (
                &["write_bw", "--post_list", "129"],
                "-l 129 (--post_list) is more than the tx depth 128",
            ),
            (
                &["write_bw", "-t", "4", "-l", "8"],
                "more than the tx depth 4",
            ),
            (&["atomic_rate", "-s", "64"], "exactly 8 bytes"),
            (&["qp_lifecycle", "-s", "64"], "-s does not apply"),
            (&["qp_lifecycle", "--tx-depth", "4"], "do not apply"),
            (&["write_bw", "--atomic", "cmp_swap"], "atomic_rate only"),
            (&["write_bw", "--backend", "gpu"], "gpu"),
            (&["write_bw", "--bogus"], "--bogus"),
            // -a with -s blames -s (it blamed the test's name).
            (&["write_bw", "-a", "-s", "64"], "'--size <SIZE>'"),
            (&["write_bw", "--plot", "x.svg"], "give -a"),
            (&["write_bw", "-a", "--plot", "x.gif"], ".svg or .png"),
            (
                &["write_bw", "-a", "--plot", "/nonexistent-dir/x.svg"],
                "--plot /nonexistent-dir/x.svg",
            ),
            (&["write_bw", "--device-profile", "cx9"], "cx9"),
            (&["write_bw", "--switch-hops", "17"], "at most 16"),
            (
                &["write_bw", "--switch-hops", "two"],
                "not a number of hops",
            ),
            (&["write_lat", "--cpu-mhz", "fast"], "not a clock"),
            (&["write_lat", "--cpu-mhz", "50"], "between 500 and 6000"),
            (
                &["write_bw", "--backend", "hw", "--switch-hops", "1"],
                "the hardware backend measures the real one",
            ),
            (
                &["write_bw", "--backend", "hw", "--cpu-mhz", "1500"],
                "the hardware backend measures the real one",
            ),
            (
                &["write_bw", "--out_json_file", "/nonexistent-dir/o.json"],
                "--out_json_file",
            ),
        ];
        for (args, want) in errors {
            let err = parse(args).unwrap_err();
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    // Goal: the set-up flags reach the simulated profile: hops, a PCIe
    // switch and a CPU clock give the profile `Setup::apply` gives, the
    // defaults change nothing, and a PCIe switch on rxe is refused when
    // the profile is built.
    #[test]
    fn setup_flags_parse_into_the_profile() {
        let a = parse(&[
            "write_lat",
            "--switch-hops",
            "2",
            "--pcie-switch",
            "--cpu-mhz",
            "1.5GHz",
        ])
        .unwrap();
        let want = backend_sim::Setup {
            switch_hops: 2,
            pcie_switch: true,
            cpu_mhz: 1_500,
            ..backend_sim::Setup::DEFAULT
        };
        assert_eq!(a.setup, want);
        let p = sim_profile(&a).unwrap();
        assert_eq!(
            p.adapter,
            want.apply(backend_sim::AdapterModel::CONNECTX6).unwrap()
        );
        let d = parse(&["write_lat"]).unwrap();
        assert!(d.setup.is_default());
        assert_eq!(
            sim_profile(&d).unwrap().adapter,
            backend_sim::AdapterModel::CONNECTX6
        );
        let r = parse(&["write_lat", "--device-profile", "rxe", "--pcie-switch"]).unwrap();
        let e = sim_profile(&r).unwrap_err();
        assert!(e.contains("no PCIe link"), "{e}");
    }

    // Goal: each of perftest's spellings means what it means in perftest
    // (`--qp` and `--post_list` were unknown options, `-l` stopped at 16,
    // `-A` was missing, --report_gbits did nothing). Method: every
    // spelling, short and long, on one command line each.
    #[test]
    fn perftest_spellings_parse_with_perftests_meaning() {
        let pairs: [(&[&str], &[&str]); 5] = [
            (&["-q", "4"], &["--qp", "4"]),
            (&["-l", "128"], &["--post_list", "128"]),
            (&["-t", "256"], &["--tx-depth", "256"]),
            (&["-s", "64"], &["--size", "64"]),
            (&["-n", "9"], &["--iters", "9"]),
        ];
        for (short, long) in pairs {
            let a = parse(&[&["write_bw"][..], short].concat()).unwrap();
            let b = parse(&[&["write_bw"][..], long].concat()).unwrap();
            assert_eq!(a, b, "{short:?} vs {long:?}");
        }
        let a = parse(&["write_bw", "--qp", "4", "--post_list", "128", "-s", "64"]).unwrap();
        assert_eq!((a.test.qps, a.test.post_list, a.test.size), (4, 128, 64));
        // -l up to the tx depth, as perftest (calibration.md's `-l 128`).
        let a = parse(&["write_bw", "-t", "1024", "-l", "1024"]).unwrap();
        assert_eq!(a.test.post_list, 1024);
        for atomic in [["-A", "CMP_AND_SWAP"], ["--atomic_type", "CMP_AND_SWAP"]] {
            let a = parse(&[&["atomic_rate"][..], &atomic].concat()).unwrap();
            assert_eq!(a.test.atomic, RateOp::CompSwap);
        }
        assert!(parse(&["write_bw", "--report_gbits"]).unwrap().gbits);
        assert!(
            !parse(&["write_bw", "-F"]).unwrap().gbits,
            "-F is --CPU-freq"
        );
        assert!(!parse(&["write_bw", "--CPU-freq"]).unwrap().gbits);
        let a = parse(&["write_bw", "-d", "mlx5_0", "--ib-dev", "mlx5_1"]);
        assert!(a.is_err(), "one -d");
        assert_eq!(
            parse(&["write_bw", "--ib-dev", "mlx5_0"])
                .unwrap()
                .device
                .as_deref(),
            Some("mlx5_0")
        );
        for (flag, value) in [
            ("-i", "1"),
            ("--ib-port", "1"),
            ("-x", "0"),
            ("--gid-index", "0"),
            ("-I", "0"),
            ("--inline_size", "0"),
        ] {
            parse(&["write_bw", flag, value]).unwrap_or_else(|e| panic!("{flag}: {e}"));
        }
        for (args, want) in [
            (&["write_bw", "-D", "5"][..], "-D"),
            (&["write_bw", "--duration", "5"], "-D"),
            (&["write_bw", "-R"], "-R"),
            (&["write_bw", "--rdma_cm"], "-R"),
        ] {
            assert!(parse(args).unwrap_err().contains(want), "{args:?}");
        }
        // --out_json writes perftest_out.json; --out_json_file names it.
        let dir = std::env::temp_dir().join(format!("verbsim-perf-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("o.json");
        let a = parse(&["write_bw", "--out_json_file", f.to_str().unwrap()]).unwrap();
        assert_eq!(a.json_file.as_deref(), Some(f.as_path()));
        assert!(!a.json, "the table still goes to standard output");
        let _ = std::fs::remove_dir_all(&dir);
    }

    // Goal: docs/perftest-flags.md's table and the parser agree: every
    // flag the table says is supported (same / different) is a spelling
    // the parser has, every spelling under the parser's perftest heading
    // is in the table, and every flag the table marks refused is refused
    // by name. Method: read the table; walk clap's definitions.
    #[test]
    fn perftest_flags_table_matches_the_parser() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/perftest-flags.md"
        ))
        .expect("docs/perftest-flags.md");
        let cmd = <Cmd as clap::CommandFactory>::command();
        let mut parser_flags = std::collections::BTreeSet::new();
        for arg in cmd.get_arguments() {
            if arg.get_help_heading() != Some(PERFTEST_HEADING) {
                continue;
            }
            if let Some(c) = arg.get_short() {
                parser_flags.insert(format!("-{c}"));
            }
            if let Some(l) = arg.get_long() {
                parser_flags.insert(format!("--{l}"));
            }
        }
        let mut table_supported = std::collections::BTreeSet::new();
        let mut table_refused = Vec::new();
        for line in doc.lines().filter(|l| l.starts_with("| `-")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (flags, state) = (cells[1], cells[2]);
            let names: Vec<String> = flags
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|f| f.split_whitespace().next().unwrap_or("").to_owned())
                .filter(|f| f.starts_with('-'))
                .collect();
            match state {
                "same" | "different" => table_supported.extend(names),
                "not supported" => table_refused.extend(names),
                other => panic!("unknown state `{other}` in: {line}"),
            }
        }
        assert_eq!(
            table_supported,
            parser_flags
                .iter()
                .filter(|f| !["-D", "--duration", "-R", "--rdma_cm"].contains(&f.as_str()))
                .cloned()
                .collect(),
            "the table's supported flags vs the parser's perftest flags"
        );
        assert!(table_refused.len() > 10, "{table_refused:?}");
        for flag in table_refused {
            // A flag that needs a value is given one.
            let err = parse(&["write_bw", flag.as_str()]).expect_err(&flag);
            let err = if err.contains("a value is required") {
                parse(&["write_bw", flag.as_str(), "1"]).expect_err(&flag)
            } else {
                err
            };
            assert!(
                err.contains(flag.trim_end_matches(',')),
                "{flag} is refused without its name: {err}"
            );
        }
    }

    /// The data rate of port 1 of device 0, Gb/s, from `ibv_query_port`.
    fn line_rate_gbps(v: &mut SimVerbs) -> f64 {
        let ctx = v.open_device(0, verbs_api::ProcessId(0)).expect("open");
        let port = v.query_port(&ctx, 1).expect("port");
        v.close_device(&ctx).expect("close");
        let mbps =
            backend_sim::fabric::PortConfig::ib_rate_mbps(port.active_width, port.active_speed)
                .expect("an IB rate");
        mbps as f64 / 1e3
    }

    fn test(kind: TestKind, iterations: u64) -> PerfTest {
        PerfTest {
            kind,
            size: kind.defaults().0,
            iterations,
            qps: if kind == TestKind::ModifyQp { 8 } else { 1 },
            connection: Connection::Rc,
            tx_depth: kind.defaults().2,
            post_list: kind.defaults().3,
            atomic: RateOp::FetchAdd,
            plan_seed: 1,
        }
    }

    /// The simulated figures of a data-path test, checked for plausibility
    /// against the port: bandwidth above zero and below the line rate,
    /// every latency sample above the propagation delay of a round trip on
    /// RC (the request must arrive and the answer come back) and of one way
    /// on UC/UD (a SEND is timed to its receive).
    fn check_simulated(r: &PerfReport, t: &PerfTest, line_gbps: f64) -> Derived {
        let sim = r
            .sim
            .as_ref()
            .unwrap_or_else(|| panic!("{t:?}: no simulated clock"));
        let d = derive(sim, t);
        let one_way_us = backend_sim::fabric::PortConfig::PROPAGATION_NS_DEFAULT as f64 / 1e3;
        let floor_us = if t.connection == Connection::Rc {
            2.0 * one_way_us
        } else {
            one_way_us
        };
        match d {
            Derived::Bw { gbps, mpps, .. } => {
                assert!(gbps > 0.0 && gbps < line_gbps, "{t:?}: {gbps} Gb/s");
                assert!(mpps > 0.0, "{t:?}");
            }
            Derived::Lat { min_us, p99_us, .. } => {
                assert!(min_us > floor_us, "{t:?}: t_min {min_us} us");
                assert!(p99_us < 100.0, "{t:?}: t_99 {p99_us} us");
            }
            Derived::Rate { .. } => panic!("{t:?}: a data-path test printed a rate table"),
        }
        d
    }

    // Goal: every test runs through the one generic `measure` on the
    // simulator and reports both clocks, the data-path tests with plausible
    // simulated figures: bandwidth below the port's line rate and, for 64
    // KiB messages (one RC pair, 128 in flight), above half of it; latency
    // at least the propagation of a round trip. Method: measure each test
    // on one simulator.
    #[test]
    fn measure_on_the_simulator() {
        let mut v = SimVerbs::new(SimConfig::default());
        let line_gbps = line_rate_gbps(&mut v);
        assert!(line_gbps > 0.0);
        let r = measure(&mut v, &test(TestKind::QpLifecycle, 50)).expect("lifecycle");
        assert_eq!(r.backend, "sim");
        assert!(matches!(r.wall, Figures::Rate { .. }) && r.sim.is_some());
        let r = measure(&mut v, &test(TestKind::ModifyQp, 1_003)).expect("modify");
        let (ok, refused) = r.modify_tally.expect("tally");
        assert_eq!(ok + refused, 1_003);
        for kind in TestKind::ALL.into_iter().filter(|k| k.is_data_path()) {
            let t = test(kind, 200);
            let r = measure(&mut v, &t).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert!(matches!(
                (&r.wall, kind.is_latency()),
                (Figures::Lat { .. }, true) | (Figures::Bw { .. }, false)
            ));
            let d = check_simulated(&r, &t, line_gbps);
            if let (Derived::Bw { gbps, .. }, TestKind::WriteBw | TestKind::SendBw) = (d, kind) {
                assert!(gbps > 0.5 * line_gbps, "{kind:?}: {gbps} Gb/s");
            }
        }
    }

    // Goal: the transports and QP counts the options select run on the
    // simulator too. Method: write_bw over UC on 4 QPs, send_bw over UD
    // (2 KiB, under the MTU), send_lat over UC; plausible figures each.
    #[test]
    fn transports_and_qp_counts_on_the_simulator() {
        let mut v = SimVerbs::new(SimConfig::default());
        let line_gbps = line_rate_gbps(&mut v);
        let cases = [
            PerfTest {
                qps: 4,
                connection: Connection::Uc,
                ..test(TestKind::WriteBw, 500)
            },
            PerfTest {
                size: 2048,
                connection: Connection::Ud,
                ..test(TestKind::SendBw, 500)
            },
            PerfTest {
                connection: Connection::Uc,
                ..test(TestKind::SendLat, 100)
            },
            PerfTest {
                qps: 2,
                ..test(TestKind::AtomicRate, 500)
            },
        ];
        for t in cases {
            let r = measure(&mut v, &t).unwrap_or_else(|e| panic!("{t:?}: {e}"));
            check_simulated(&r, &t, line_gbps);
        }
    }

    // Goal: latency percentiles follow perftest's definitions.
    // Method: 100 known samples.
    #[test]
    fn latency_percentiles() {
        let t = PerfTest {
            kind: TestKind::WriteLat,
            size: 2,
            iterations: 100,
            qps: 1,
            connection: Connection::Rc,
            tx_depth: 1,
            post_list: 1,
            atomic: RateOp::FetchAdd,
            plan_seed: 0,
        };
        let samples_ns: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let d = derive(&Figures::Lat { samples_ns }, &t);
        assert_eq!(
            d,
            Derived::Lat {
                min_us: 1.0,
                typical_us: 50.0,
                avg_us: 50.5,
                p99_us: 99.0
            }
        );
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(cell(f64::INFINITY), "-");
    }
}
