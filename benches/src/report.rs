//! The ratio report: reads criterion's results after a run and checks every
//! target of `perf.md` as the ratio it is defined as.
//!
//! After `cargo bench -p verbsim-benches --bench sim`, run
//! `cargo run -p verbsim-benches --bin bench-report` (or call [`load`],
//! [`evaluate`] and print the [`Report`]). For each benchmark directory
//! under `target/criterion` it reads `new/benchmark.json` (the id and the
//! declared throughput) and `new/estimates.json` (the median time per
//! iteration), and prints one row per benchmark: median, rate, the ratio
//! the target is about, the target, and PASS or MISS.
//!
//! Rates are the declared throughput per second (elements or bytes); for
//! targets stated per operation of a calibration benchmark (`3 % of
//! phys_memcpy_hot/64 rate`), the calibration's rate is its iterations per
//! second (one copy per iteration). A calibration benchmark and the
//! benchmark it calibrates must come from the same run: the report reads
//! whatever the last run left, so run them together. When the two results
//! were written more than [`SAME_RUN_WINDOW_S`] apart the verdict is marked
//! with `*` (probably two runs: rerun both).
//!
//! Ratio targets are checked against the paired measurement of the `sim`
//! bench when it wrote one ([`crate::paired`]: the benchmark and its
//! reference run in alternating rounds, which cancels the machine's drift
//! between two separate measurements): the ratio column then shows the
//! paired ratio marked `(p)`, and the last column the quotient of the two
//! medians beside it.
//!
//! Ratios print as percentages for "at least" targets (`3.07 %` of the
//! reference's rate) and as cost multiples for "at most" targets (`1.12×`
//! the reference's time per element).

use core::fmt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::paired::{Paired, PairedRatio};

/// Results written further apart than this (seconds) are taken to come
/// from different runs; a full `cargo bench --bench sim` takes well under
/// an hour here.
pub const SAME_RUN_WINDOW_S: u64 = 3600;

/// What one benchmark iteration moves, as criterion recorded it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Throughput {
    /// Elements (work requests, transitions, QPs) per iteration.
    Elements(u64),
    /// Bytes per iteration.
    Bytes(u64),
}

/// One benchmark's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// The full id (`group/function`), e.g. `phys_memcpy_hot/64`.
    pub id: String,
    /// Median time per iteration, nanoseconds.
    pub median_ns: f64,
    /// The declared throughput per iteration, if any.
    pub throughput: Option<Throughput>,
    /// When criterion wrote the result (seconds since the Unix epoch), if
    /// known.
    pub written_unix_s: Option<u64>,
}

impl Measurement {
    /// Iterations per second.
    pub fn iterations_per_sec(&self) -> f64 {
        1e9 / self.median_ns
    }

    /// Declared throughput per second (elements or bytes); iterations per
    /// second when none was declared.
    pub fn rate(&self) -> f64 {
        match self.throughput {
            Some(Throughput::Elements(n)) | Some(Throughput::Bytes(n)) => {
                n as f64 * 1e9 / self.median_ns
            }
            None => self.iterations_per_sec(),
        }
    }

    /// [`Measurement::rate`] in words: `12.3 M/s`, `10.4 GB/s`.
    pub fn rate_text(&self) -> String {
        let r = self.rate();
        match self.throughput {
            Some(Throughput::Bytes(_)) => format!("{:.2} GB/s", r / 1e9),
            _ => scaled_per_sec(r),
        }
    }
}

fn scaled_per_sec(r: f64) -> String {
    if r >= 1e9 {
        format!("{:.2} G/s", r / 1e9)
    } else if r >= 1e6 {
        format!("{:.2} M/s", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.2} K/s", r / 1e3)
    } else {
        format!("{r:.2} /s")
    }
}

/// A duration in nanoseconds, in words: `3.10 ns`, `4.56 µs`, `7.89 ms`.
pub fn duration_text(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.2} ns")
    }
}

/// Which rate of a reference benchmark a ratio divides by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefRate {
    /// Its iterations per second (a calibration copy per iteration).
    Iterations,
    /// Its declared throughput per second (bytes or elements).
    Throughput,
}

/// How a target is checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// `rate(bench) / rate(reference) ≥ at_least`.
    RatioAtLeast {
        /// The reference benchmark's id.
        reference: &'static str,
        /// Which of its rates.
        unit: RefRate,
        /// The smallest passing ratio.
        at_least: f64,
    },
    /// `cost(bench) / cost(reference) ≤ at_most`, cost being time per
    /// declared element (the inverse of the throughput rate).
    CostAtMost {
        /// The reference benchmark's id.
        reference: &'static str,
        /// The largest passing cost ratio.
        at_most: f64,
    },
    /// `cost(bench) / cost(reference)`, printed beside a target but not
    /// itself one (the whole-workload fault overhead, perf.md).
    CostReported {
        /// The reference benchmark's id.
        reference: &'static str,
    },
    /// `rate(bench) ≥ per_sec`.
    Absolute {
        /// The smallest passing rate, per second.
        per_sec: f64,
    },
}

/// One target of `perf.md`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// The benchmark it is about.
    pub bench: &'static str,
    /// How it is checked.
    pub rule: Rule,
    /// The target as `perf.md` words it.
    pub text: &'static str,
}

const fn ratio(
    bench: &'static str,
    reference: &'static str,
    unit: RefRate,
    at_least: f64,
    text: &'static str,
) -> Target {
    Target {
        bench,
        rule: Rule::RatioAtLeast {
            reference,
            unit,
            at_least,
        },
        text,
    }
}

const fn cost(
    bench: &'static str,
    reference: &'static str,
    at_most: f64,
    text: &'static str,
) -> Target {
    Target {
        bench,
        rule: Rule::CostAtMost { reference, at_most },
        text,
    }
}

/// The simulator targets of `perf.md`, one per benchmark id. Benchmarks not
/// written yet (DC, XRC, OOO, faults, scale) are listed under the ids they
/// will have, so their rows read "not run" until they exist. Memory targets
/// (heap per DCT, bytes per idle QP) are not measured by criterion and are
/// not listed.
pub const TARGETS: &[Target] = &[
    ratio(
        "sim_rc_write_msg_rate/64",
        "phys_memcpy_hot/64",
        RefRate::Iterations,
        0.03,
        "≥ 3 % of phys_memcpy_hot/64 rate (≈ 10 M WR/s)",
    ),
    ratio(
        "sim_rc_write_msg_rate/64_1GiB",
        "phys_memcpy_rand/64",
        RefRate::Iterations,
        0.15,
        "≥ 15 % of phys_memcpy_rand/64 rate",
    ),
    ratio(
        "sim_send_recv_bw/4K",
        "phys_memcpy_rand/4096",
        RefRate::Throughput,
        0.5,
        "≥ 50 % of phys_memcpy_rand/4096",
    ),
    ratio(
        "sim_send_recv_bw/64K",
        "phys_memcpy_rand/65536",
        RefRate::Throughput,
        0.8,
        "≥ 80 % of phys_memcpy_rand/65536",
    ),
    ratio(
        "sim_send_recv_bw/1M",
        "phys_memcpy_rand/1048576",
        RefRate::Throughput,
        0.8,
        "≥ 80 % of phys_memcpy_rand/1048576",
    ),
    ratio(
        "sim_read_rate",
        "sim_rc_write_msg_rate/64",
        RefRate::Throughput,
        0.6,
        "≥ 60 % of sim_rc_write_msg_rate/64",
    ),
    ratio(
        "sim_atomic_rate/fadd",
        "sim_rc_write_msg_rate/64",
        RefRate::Throughput,
        0.6,
        "≥ 60 % of sim_rc_write_msg_rate/64",
    ),
    ratio(
        "sim_atomic_rate/cswap",
        "sim_rc_write_msg_rate/64",
        RefRate::Throughput,
        0.6,
        "≥ 60 % of sim_rc_write_msg_rate/64",
    ),
    Target {
        bench: "sim_qp_lifecycle_rate",
        rule: Rule::Absolute { per_sec: 1e6 },
        text: "≥ 1 M QPs/s",
    },
    Target {
        bench: "sim_modify_qp_rate",
        rule: Rule::Absolute { per_sec: 2e7 },
        text: "≥ 20 M transitions/s",
    },
    ratio(
        "sim_dc_fanout/10000",
        "sim_dc_fanout/1",
        RefRate::Throughput,
        0.7,
        "rate(10 000) / rate(1) ≥ 0.7",
    ),
    ratio(
        "sim_xrc_srq_fanin/1024",
        "sim_xrc_srq_fanin/1",
        RefRate::Throughput,
        0.7,
        "rate(1 024) / rate(1) ≥ 0.7",
    ),
    cost(
        "sim_ooo_placement/8",
        "sim_ooo_placement/0",
        1.25,
        "≤ 1.25× the in-order cost",
    ),
    cost(
        "sim_ooo_placement/64",
        "sim_ooo_placement/0",
        1.5,
        "≤ 1.5× the in-order cost",
    ),
    cost(
        "sim_fault_overhead/faults_per_packet",
        "sim_fault_overhead/none_per_packet",
        1.15,
        "per packet on the wire ≤ 1.15× fault-free",
    ),
    Target {
        bench: "sim_fault_overhead/faults",
        rule: Rule::CostReported {
            reference: "sim_fault_overhead/none",
        },
        text: "whole workload (go-back-N windows included): reported",
    },
    cost(
        "shim_post_poll/shim",
        "shim_post_poll/direct",
        1.3,
        "≤ 1.3× SimVerbs directly",
    ),
    cost(
        "fabric_pingpong_rate/fabric",
        "fabric_pingpong_rate/local",
        8.0,
        "≤ 8× the single-process round trip",
    ),
    Target {
        bench: "fabric_pingpong_rate/relay_floor",
        rule: Rule::CostReported {
            reference: "fabric_pingpong_rate/local",
        },
        text: "the same round trip through a sleeping relay doing no work: reported",
    },
    Target {
        bench: "fabric_pingpong_rate/relay_floor_spinning",
        rule: Rule::CostReported {
            reference: "fabric_pingpong_rate/local",
        },
        text: "the same through a relay that never sleeps, doing no work: reported",
    },
    cost(
        "fabric_verb_cost/fabric_poll_cq",
        "fabric_verb_cost/local_poll_cq",
        3.0,
        "empty poll ≤ 3× in process (a read of shared memory)",
    ),
    cost(
        "fabric_perftest/fabric_write_bw",
        "fabric_perftest/local_write_bw",
        4.0,
        "ib_write_bw -s 65536 ≥ 25 % of verbsim perf write_bw wall",
    ),
    Target {
        bench: "fabric_perftest/fabric_write_lat",
        rule: Rule::CostReported {
            reference: "fabric_perftest/local_write_lat",
        },
        text: "ib_write_lat -s 2 t_typical, reported beside verbsim perf's",
    },
    Target {
        bench: "fabric_verb_cost/fabric_query_port",
        rule: Rule::CostReported {
            reference: "fabric_verb_cost/local_query_port",
        },
        text: "cost of a verb across processes: reported (docs/fabric-perf.md)",
    },
    ratio(
        "sim_scale/events",
        "phys_heap_poppush/100k",
        RefRate::Iterations,
        0.3,
        "event rate ≥ 30 % of phys_heap_poppush/100k",
    ),
];

impl Rule {
    /// The reference benchmark, for the rules that have one.
    pub fn reference(&self) -> Option<&'static str> {
        match *self {
            Self::RatioAtLeast { reference, .. }
            | Self::CostAtMost { reference, .. }
            | Self::CostReported { reference } => Some(reference),
            Self::Absolute { .. } => None,
        }
    }
}

/// The verdict on one target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Met; the value is the ratio (or the rate, for absolute targets).
    Pass(f64),
    /// Missed; same value.
    Miss(f64),
    /// The reference benchmark is missing from the results.
    NoReference,
    /// Reported, not a target; the value is the cost ratio.
    Reported(f64),
}

/// Checks `target` against `bench` (its measurement) and `all` (for the
/// reference).
pub fn check(target: &Target, bench: &Measurement, all: &[Measurement]) -> Verdict {
    let find = |id: &str| all.iter().find(|m| m.id == id);
    let (value, pass) = match target.rule {
        Rule::Absolute { per_sec } => {
            let r = bench.rate();
            (r, r >= per_sec)
        }
        Rule::RatioAtLeast {
            reference,
            unit,
            at_least,
        } => {
            let Some(r) = find(reference) else {
                return Verdict::NoReference;
            };
            let denominator = match unit {
                RefRate::Iterations => r.iterations_per_sec(),
                RefRate::Throughput => r.rate(),
            };
            let value = bench.rate() / denominator;
            (value, value >= at_least)
        }
        Rule::CostAtMost { reference, at_most } => {
            let Some(r) = find(reference) else {
                return Verdict::NoReference;
            };
            let value = r.rate() / bench.rate();
            (value, value <= at_most)
        }
        Rule::CostReported { reference } => {
            let Some(r) = find(reference) else {
                return Verdict::NoReference;
            };
            return Verdict::Reported(r.rate() / bench.rate());
        }
    };
    if pass {
        Verdict::Pass(value)
    } else {
        Verdict::Miss(value)
    }
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The benchmark id.
    pub id: String,
    /// Its measurement, if it ran.
    pub measurement: Option<Measurement>,
    /// Its target, if `perf.md` has one.
    pub target: Option<Target>,
    /// The verdict, when both are known.
    pub verdict: Option<Verdict>,
    /// The reference was written more than [`SAME_RUN_WINDOW_S`] apart
    /// from the measurement (probably another run).
    pub stale_reference: bool,
    /// The paired measurement the verdict used, if there was one.
    pub paired: Option<Paired>,
    /// With a paired verdict: the verdict the two medians alone give.
    pub unpaired: Option<Verdict>,
}

/// The whole report: one row per measured benchmark (calibration first,
/// then in id order), then one per target whose benchmark did not run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The rows.
    pub rows: Vec<Row>,
}

impl Report {
    /// Targets met.
    pub fn passed(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| matches!(r.verdict, Some(Verdict::Pass(_))))
            .count()
    }

    /// Targets missed.
    pub fn missed(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| matches!(r.verdict, Some(Verdict::Miss(_))))
            .count()
    }
}

/// Builds the report from measurements alone (no paired ratios).
pub fn evaluate(measurements: &[Measurement]) -> Report {
    evaluate_paired(measurements, &[])
}

/// The paired ratio of `target`, if `paired` has one for its benchmark and
/// reference.
fn paired_for<'a>(target: &Target, paired: &'a [PairedRatio]) -> Option<&'a PairedRatio> {
    let reference = target.rule.reference()?;
    paired
        .iter()
        .find(|p| p.bench == target.bench && p.reference == reference)
}

/// [`check`] with the reference's median replaced by the one the paired
/// cost ratio implies (the benchmark's median over the ratio), so every
/// rule's units apply unchanged.
fn check_paired(
    target: &Target,
    bench: &Measurement,
    all: &[Measurement],
    paired: &PairedRatio,
) -> Verdict {
    let adjusted: Vec<Measurement> = all
        .iter()
        .map(|m| {
            if m.id == paired.reference {
                Measurement {
                    median_ns: bench.median_ns / paired.paired.median,
                    ..m.clone()
                }
            } else {
                m.clone()
            }
        })
        .collect();
    check(target, bench, &adjusted)
}

/// Builds the report from measurements and the paired ratios the `sim`
/// bench wrote ([`load_paired`]): a target with a paired ratio is checked
/// against it, the medians' verdict kept beside it.
pub fn evaluate_paired(measurements: &[Measurement], paired: &[PairedRatio]) -> Report {
    let mut sorted: Vec<&Measurement> = measurements.iter().collect();
    sorted.sort_by(|a, b| {
        order_key(&a.id)
            .partial_cmp(&order_key(&b.id))
            .unwrap_or(core::cmp::Ordering::Equal)
    });
    let mut rows: Vec<Row> = sorted
        .into_iter()
        .map(|m| {
            let target = TARGETS.iter().find(|t| t.bench == m.id).copied();
            let medians = target.as_ref().map(|t| check(t, m, measurements));
            let pair = target.as_ref().and_then(|t| paired_for(t, paired));
            let (verdict, unpaired) = match (target.as_ref(), pair, medians) {
                (Some(t), Some(p), Some(v)) if v != Verdict::NoReference => {
                    (Some(check_paired(t, m, measurements, p)), Some(v))
                }
                _ => (medians, None),
            };
            let stale_reference = target
                .and_then(|t| t.rule.reference())
                .and_then(|r| measurements.iter().find(|x| x.id == r))
                .is_some_and(|r| apart(m, r));
            Row {
                id: m.id.clone(),
                measurement: Some(m.clone()),
                target,
                verdict,
                stale_reference,
                paired: unpaired.and(pair.map(|p| p.paired)),
                unpaired,
            }
        })
        .collect();
    for t in TARGETS {
        if !measurements.iter().any(|m| m.id == t.bench) {
            rows.push(Row {
                id: t.bench.to_owned(),
                measurement: None,
                target: Some(*t),
                verdict: None,
                stale_reference: false,
                paired: None,
                unpaired: None,
            });
        }
    }
    Report { rows }
}

/// Whether two results were written more than [`SAME_RUN_WINDOW_S`] apart.
fn apart(a: &Measurement, b: &Measurement) -> bool {
    match (a.written_unix_s, b.written_unix_s) {
        (Some(x), Some(y)) => x.abs_diff(y) > SAME_RUN_WINDOW_S,
        _ => false,
    }
}

/// Sort key of an id: calibration first, then by group, then by the
/// parameter's value (`64` < `4096`, `1k` < `100k`, `4K` < `1M`), then by
/// its text.
fn order_key(id: &str) -> (bool, &str, f64, &str) {
    let (group, param) = id.rsplit_once('/').unwrap_or((id, ""));
    (
        !id.starts_with("phys_"),
        group,
        param_value(param).unwrap_or(f64::MAX),
        param,
    )
}

/// The numeric value of a parameter like `64`, `1k`, `100k`, `4K`, `1M`.
fn param_value(param: &str) -> Option<f64> {
    let digits = param
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(param.len());
    let n: f64 = param[..digits].parse().ok()?;
    let scale = match &param[digits..] {
        "" => 1.0,
        "k" => 1e3,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n * scale)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header = [
            "benchmark",
            "median",
            "rate",
            "ratio",
            "target",
            "result",
            "medians alone",
        ];
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                let (median, rate) = match &r.measurement {
                    Some(m) => (duration_text(m.median_ns), m.rate_text()),
                    None => ("-".into(), "-".into()),
                };
                let rule = r.target.map(|t| t.rule);
                let star = if r.stale_reference { "*" } else { "" };
                let (ratio, result) = match (r.verdict, &r.measurement) {
                    (Some(Verdict::Pass(v)), _) => (ratio_text(v, rule), format!("PASS{star}")),
                    (Some(Verdict::Miss(v)), _) => (ratio_text(v, rule), format!("MISS{star}")),
                    (Some(Verdict::NoReference), _) => ("-".into(), "no reference".into()),
                    (Some(Verdict::Reported(v)), _) => (ratio_text(v, rule), "reported".into()),
                    (None, None) => ("-".into(), "not run".into()),
                    (None, Some(_)) if r.id.starts_with("phys_") => {
                        ("-".into(), "calibration".into())
                    }
                    (None, Some(_)) => ("-".into(), "-".into()),
                };
                let target = r
                    .target
                    .map_or_else(|| "-".to_owned(), |t| t.text.to_owned());
                let (ratio, alone) = match (r.paired, r.unpaired) {
                    (Some(_), Some(Verdict::Pass(v) | Verdict::Miss(v) | Verdict::Reported(v))) => {
                        (format!("{ratio} (p)"), ratio_text(v, rule))
                    }
                    _ => (ratio, String::new()),
                };
                [r.id.clone(), median, rate, ratio, target, result, alone]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, row: &[&str]| -> fmt::Result {
            let mut text = String::new();
            for (i, (c, w)) in row.iter().zip(widths).enumerate() {
                let pad = w - c.chars().count();
                if i + 1 == row.len() {
                    text.push_str(c);
                } else if i == 0 || i == 4 || i == 5 {
                    text.push_str(&format!("{c}{}", " ".repeat(pad)));
                } else {
                    text.push_str(&format!("{}{c}", " ".repeat(pad)));
                }
                if i + 1 < row.len() {
                    text.push_str("  ");
                }
            }
            writeln!(f, "{}", text.trim_end())
        };
        line(f, &header)?;
        for row in &cells {
            line(f, &row.iter().map(String::as_str).collect::<Vec<_>>())?;
        }
        if let Some(rounds) = self
            .rows
            .iter()
            .filter_map(|r| r.paired)
            .map(|p| p.rounds)
            .min()
        {
            writeln!(
                f,
                "\n(p) paired: the benchmark and its reference timed in alternating rounds ({rounds} or more), the median round's ratio; the quotient of the two medians is in the last column"
            )?;
        }
        if self.rows.iter().any(|r| r.stale_reference) {
            writeln!(
                f,
                "\n* the reference was measured more than {} s apart (another run?): rerun both together",
                SAME_RUN_WINDOW_S
            )?;
        }
        writeln!(f, "\n{} passed, {} missed", self.passed(), self.missed())
    }
}

/// The value of a verdict in words: a rate for absolute targets, a cost
/// multiple for "at most" targets, a percentage of the reference's rate
/// otherwise (a multiple beyond 10×).
fn ratio_text(v: f64, rule: Option<Rule>) -> String {
    match rule {
        Some(Rule::Absolute { .. }) => format!("abs {}", scaled_per_sec(v)),
        Some(Rule::CostAtMost { .. } | Rule::CostReported { .. }) => format!("{v:.2}×"),
        _ if v < 10.0 => format!("{:.2} %", v * 100.0),
        _ => format!("{v:.1}×"),
    }
}

/// Why results could not be read.
#[derive(Debug)]
pub enum LoadError {
    /// A file could not be read.
    Io(PathBuf, std::io::Error),
    /// A file is not the JSON criterion writes.
    Format(PathBuf, String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(p, e) => write!(f, "{}: {e}", p.display()),
            Self::Format(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for LoadError {}

/// The default results directory: `$CARGO_TARGET_DIR/criterion`, else the
/// workspace's `target/criterion`.
pub fn default_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("criterion"),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("criterion"),
    }
}

/// Reads every benchmark under `dir` (any directory holding
/// `new/estimates.json` and `new/benchmark.json`), sorted by id.
///
/// # Errors
/// [`LoadError`] for a file that cannot be read or parsed; a missing `dir`
/// is an I/O error.
pub fn load(dir: &Path) -> Result<Vec<Measurement>, LoadError> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<Measurement>) -> Result<(), LoadError> {
    let new = dir.join("new");
    if new.join("estimates.json").is_file() && new.join("benchmark.json").is_file() {
        out.push(read_measurement(&new)?);
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| LoadError::Io(dir.to_owned(), e))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n != "report" && n != "paired")
        })
        .collect();
    dirs.sort();
    for d in dirs {
        walk(&d, out)?;
    }
    Ok(())
}

/// Reads the paired ratios the `sim` bench wrote under `dir`
/// (`dir/paired/*.json`, see [`crate::paired`]); none when it wrote none.
///
/// # Errors
/// [`LoadError`] for a file that cannot be read or parsed.
pub fn load_paired(dir: &Path) -> Result<Vec<PairedRatio>, LoadError> {
    let pdir = PairedRatio::dir(dir);
    let Ok(entries) = std::fs::read_dir(&pdir) else {
        return Ok(Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|e| LoadError::Io(f.clone(), e))?;
            PairedRatio::from_json(&text).map_err(|e| LoadError::Format(f.clone(), e))
        })
        .collect()
}

fn read_json(path: &Path) -> Result<json::Value, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io(path.to_owned(), e))?;
    json::parse(&text).map_err(|e| LoadError::Format(path.to_owned(), e))
}

/// Reads one criterion `new/` directory.
fn read_measurement(new: &Path) -> Result<Measurement, LoadError> {
    let bench_path = new.join("benchmark.json");
    let bench = read_json(&bench_path)?;
    let estimates_path = new.join("estimates.json");
    let estimates = read_json(&estimates_path)?;
    let mut m =
        parse_measurement(&bench, &estimates).map_err(|e| LoadError::Format(new.to_owned(), e))?;
    m.written_unix_s = std::fs::metadata(&estimates_path)
        .and_then(|md| md.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    Ok(m)
}

/// Builds a [`Measurement`] from the two parsed files.
fn parse_measurement(bench: &json::Value, estimates: &json::Value) -> Result<Measurement, String> {
    let id = bench
        .get("full_id")
        .and_then(json::Value::as_str)
        .ok_or("benchmark.json has no full_id")?;
    let median_ns = estimates
        .get("median")
        .and_then(|m| m.get("point_estimate"))
        .and_then(json::Value::as_f64)
        .ok_or("estimates.json has no median.point_estimate")?;
    let throughput = match bench.get("throughput") {
        Some(t) => {
            let n = |key: &str| t.get(key).and_then(json::Value::as_f64).map(|n| n as u64);
            if let Some(n) = n("Elements") {
                Some(Throughput::Elements(n))
            } else {
                n("Bytes")
                    .or_else(|| n("BytesDecimal"))
                    .map(Throughput::Bytes)
            }
        }
        None => None,
    };
    Ok(Measurement {
        id: id.to_owned(),
        median_ns,
        throughput,
        written_unix_s: None,
    })
}

/// Just enough JSON to read criterion's files (no dependency for it).
pub mod json {
    /// A JSON value.
    #[derive(Clone, Debug, PartialEq)]
    pub enum Value {
        /// `null`.
        Null,
        /// `true` / `false`.
        Bool(bool),
        /// A number.
        Number(f64),
        /// A string.
        String(String),
        /// An array.
        Array(Vec<Self>),
        /// An object, members in file order.
        Object(Vec<(String, Self)>),
    }

    impl Value {
        /// The member `key` of an object (`None` for `null` members too).
        pub fn get(&self, key: &str) -> Option<&Self> {
            match self {
                Self::Object(members) => members
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v)
                    .filter(|v| **v != Self::Null),
                _ => None,
            }
        }

        /// The number, if this is one.
        pub fn as_f64(&self) -> Option<f64> {
            match self {
                Self::Number(n) => Some(*n),
                _ => None,
            }
        }

        /// The string, if this is one.
        pub fn as_str(&self) -> Option<&str> {
            match self {
                Self::String(s) => Some(s),
                _ => None,
            }
        }
    }

    /// Parses one JSON document.
    ///
    /// # Errors
    /// A message with the byte offset of the first problem.
    pub fn parse(text: &str) -> Result<Value, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(p.err("trailing characters"));
        }
        Ok(v)
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn err(&self, what: &str) -> String {
            format!("JSON: {what} at byte {}", self.i)
        }

        fn ws(&mut self) {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }

        fn eat(&mut self, c: u8) -> Result<(), String> {
            self.ws();
            if self.s.get(self.i) == Some(&c) {
                self.i += 1;
                Ok(())
            } else {
                Err(self.err(&format!("expected '{}'", c as char)))
            }
        }

        fn literal(&mut self, word: &str, v: Value) -> Result<Value, String> {
            if self.s[self.i..].starts_with(word.as_bytes()) {
                self.i += word.len();
                Ok(v)
            } else {
                Err(self.err("bad literal"))
            }
        }

        fn value(&mut self) -> Result<Value, String> {
            self.ws();
            match self.s.get(self.i) {
                None => Err(self.err("unexpected end")),
                Some(b'n') => self.literal("null", Value::Null),
                Some(b't') => self.literal("true", Value::Bool(true)),
                Some(b'f') => self.literal("false", Value::Bool(false)),
                Some(b'"') => self.string().map(Value::String),
                Some(b'[') => {
                    self.i += 1;
                    let mut items = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b']') {
                        self.i += 1;
                        return Ok(Value::Array(items));
                    }
                    loop {
                        items.push(self.value()?);
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                return Ok(Value::Array(items));
                            }
                            _ => return Err(self.err("expected ',' or ']'")),
                        }
                    }
                }
                Some(b'{') => {
                    self.i += 1;
                    let mut members = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b'}') {
                        self.i += 1;
                        return Ok(Value::Object(members));
                    }
                    loop {
                        self.ws();
                        let key = self.string()?;
                        self.eat(b':')?;
                        members.push((key, self.value()?));
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                return Ok(Value::Object(members));
                            }
                            _ => return Err(self.err("expected ',' or '}'")),
                        }
                    }
                }
                Some(_) => self.number(),
            }
        }

        fn number(&mut self) -> Result<Value, String> {
            let start = self.i;
            while self.i < self.s.len()
                && matches!(
                    self.s[self.i],
                    b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                )
            {
                self.i += 1;
            }
            let text =
                core::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("bad number"))?;
            text.parse()
                .map(Value::Number)
                .map_err(|_| self.err("bad number"))
        }

        fn string(&mut self) -> Result<String, String> {
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a string"));
            }
            self.i += 1;
            let mut out = Vec::new();
            loop {
                match self.s.get(self.i) {
                    None => return Err(self.err("unterminated string")),
                    Some(b'"') => {
                        self.i += 1;
                        return String::from_utf8(out).map_err(|_| self.err("bad UTF-8"));
                    }
                    Some(b'\\') => {
                        let c = *self
                            .s
                            .get(self.i + 1)
                            .ok_or_else(|| self.err("bad escape"))?;
                        self.i += 2;
                        let simple = match c {
                            b'"' => Some(b'"'),
                            b'\\' => Some(b'\\'),
                            b'/' => Some(b'/'),
                            b'b' => Some(8),
                            b'f' => Some(12),
                            b'n' => Some(b'\n'),
                            b'r' => Some(b'\r'),
                            b't' => Some(b'\t'),
                            b'u' => None,
                            _ => return Err(self.err("bad escape")),
                        };
                        match simple {
                            Some(b) => out.push(b),
                            None => {
                                let hex = self
                                    .s
                                    .get(self.i..self.i + 4)
                                    .ok_or_else(|| self.err("bad \\u"))?;
                                let hex =
                                    core::str::from_utf8(hex).map_err(|_| self.err("bad \\u"))?;
                                let code = u32::from_str_radix(hex, 16)
                                    .map_err(|_| self.err("bad \\u"))?;
                                self.i += 4;
                                // Surrogate pairs do not occur in criterion's ids; replace them.
                                let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                                out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                            }
                        }
                    }
                    Some(&b) => {
                        out.push(b);
                        self.i += 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, median_ns: f64, throughput: Option<Throughput>) -> Measurement {
        Measurement {
            id: id.into(),
            median_ns,
            throughput,
            written_unix_s: None,
        }
    }

    fn ratio_of(v: Verdict) -> f64 {
        match v {
            Verdict::Pass(r) | Verdict::Miss(r) => r,
            Verdict::Reported(r) => r,
            Verdict::NoReference => panic!("no reference"),
        }
    }

    #[test]
    fn spread_write_rate_is_a_fraction_of_random_copies_per_second() {
        // Goal: the 1 GiB write target divides WR/s by random 64 B copies/s.
        // Method: a 27 ns copy is 37.0 M copies/s and 15 % of it 5.56 M WR/s,
        // i.e. 180 ns per WR: 170 ns passes (15.9 %), 190 ns misses (14.2 %).
        let t = target("sim_rc_write_msg_rate/64_1GiB");
        let copy = m("phys_memcpy_rand/64", 27.0, Some(Throughput::Bytes(64)));
        let hot = m("phys_memcpy_hot/64", 3.0, Some(Throughput::Bytes(64)));
        let id = "sim_rc_write_msg_rate/64_1GiB";
        let fast = m(id, 170.0, Some(Throughput::Elements(1)));
        let slow = m(id, 190.0, Some(Throughput::Elements(1)));
        let all = [hot, copy];
        let v = check(&t, &fast, &all);
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
        assert!((ratio_of(v) - 27.0 / 170.0).abs() < 1e-9);
        assert!(matches!(check(&t, &slow, &all), Verdict::Miss(_)));
        assert_eq!(check(&t, &fast, &all[..1]), Verdict::NoReference);
    }

    #[test]
    fn read_and_atomic_rates_compare_with_the_write_rate() {
        // Goal: read and atomic rates are fractions of the 64 B write rate
        // (elements per second on both sides; `sim_read_rate` declares no
        // throughput, so its iterations per second count), 60 % passing.
        // Method: write at 100 ns per WR; read at 160 ns is 62.5 % (PASS),
        // cswap at 170 ns 58.8 % (MISS), fadd at 165 ns 60.6 % (PASS).
        let write = m(
            "sim_rc_write_msg_rate/64",
            100.0,
            Some(Throughput::Elements(1)),
        );
        let read = m("sim_read_rate", 160.0, None);
        let cswap = m(
            "sim_atomic_rate/cswap",
            170.0,
            Some(Throughput::Elements(1)),
        );
        let fadd = m("sim_atomic_rate/fadd", 165.0, Some(Throughput::Elements(1)));
        let all = [write, read.clone(), cswap.clone(), fadd.clone()];
        let v = check(&target("sim_read_rate"), &read, &all);
        assert!(matches!(v, Verdict::Pass(_)) && (ratio_of(v) - 0.625).abs() < 1e-9);
        let v = check(&target("sim_atomic_rate/cswap"), &cswap, &all);
        assert!(matches!(v, Verdict::Miss(_)) && (ratio_of(v) - 100.0 / 170.0).abs() < 1e-9);
        assert!(matches!(
            check(&target("sim_atomic_rate/fadd"), &fadd, &all),
            Verdict::Pass(_)
        ));
    }

    #[test]
    fn a_paired_ratio_decides_and_the_medians_stay_beside_it() {
        // Goal: a ratio target with a paired measurement is checked against
        // the paired ratio, in the target's own units, and the medians'
        // verdict is kept for the table; a paired ratio for another
        // reference is ignored; paired files load from `paired/`.
        // Method: write at 100 ns, read at 170 ns (medians: 58.8 %, MISS);
        // paired cost ratio 1.6 (62.5 %, PASS). The fault target (cost at
        // most 1.15×) with medians 1.30× (MISS) and paired 1.12× (PASS).
        // A read pairing against another reference leaves the medians'
        // verdict alone.
        let pair = |bench: &str, reference: &str, median: f64| PairedRatio {
            bench: bench.into(),
            reference: reference.into(),
            paired: Paired {
                median,
                low: median * 0.95,
                high: median * 1.05,
                rounds: 40,
                bench_ns: 100.0 * median,
                reference_ns: 100.0,
            },
        };
        let write = m(
            "sim_rc_write_msg_rate/64",
            100.0,
            Some(Throughput::Elements(1)),
        );
        let read = m("sim_read_rate", 170.0, None);
        let none = m(
            "sim_fault_overhead/none_per_packet",
            100.0,
            Some(Throughput::Elements(1)),
        );
        let faults = m(
            "sim_fault_overhead/faults_per_packet",
            130.0,
            Some(Throughput::Elements(1)),
        );
        let all = [write, read, none, faults];
        let paired = [
            pair("sim_read_rate", "sim_rc_write_msg_rate/64", 1.6),
            pair(
                "sim_fault_overhead/faults_per_packet",
                "sim_fault_overhead/none_per_packet",
                1.12,
            ),
        ];
        let report = evaluate_paired(&all, &paired);
        let row = |id: &str| report.rows.iter().find(|r| r.id == id).expect(id);
        let read_row = row("sim_read_rate");
        assert!(matches!(read_row.verdict, Some(Verdict::Pass(v)) if (v - 0.625).abs() < 1e-9));
        assert!(
            matches!(read_row.unpaired, Some(Verdict::Miss(v)) if (v - 100.0 / 170.0).abs() < 1e-9)
        );
        assert_eq!(read_row.paired.map(|p| p.rounds), Some(40));
        let fault_row = row("sim_fault_overhead/faults_per_packet");
        assert!(matches!(fault_row.verdict, Some(Verdict::Pass(v)) if (v - 1.12).abs() < 1e-9));
        assert!(matches!(fault_row.unpaired, Some(Verdict::Miss(_))));
        let text = report.to_string();
        assert!(
            text.contains("62.50 % (p)") && text.contains("58.82 %"),
            "{text}"
        );
        let other = evaluate_paired(&all, &[pair("sim_read_rate", "phys_memcpy_hot/64", 1.0)]);
        let r = other.rows.iter().find(|r| r.id == "sim_read_rate").unwrap();
        assert!(matches!(r.verdict, Some(Verdict::Miss(_))) && r.paired.is_none());
        let dir = std::env::temp_dir().join(format!("verbsim-paired-{}", std::process::id()));
        for p in &paired {
            p.write(&dir).unwrap();
        }
        let mut loaded = load_paired(&dir).unwrap();
        loaded.sort_by(|a, b| a.bench.cmp(&b.bench));
        let mut expected = paired.to_vec();
        expected.sort_by(|a, b| a.bench.cmp(&b.bench));
        assert_eq!(loaded, expected);
        assert!(load(&dir).unwrap().is_empty(), "paired/ is not a benchmark");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(load_paired(&dir).unwrap().is_empty());
    }

    #[test]
    fn fabric_rows_hold_the_cross_process_cost_to_its_targets() {
        // Goal: the shared fabric's ping-pong, empty poll and perftest
        // bandwidth are cost targets against their single-process
        // references, the latency is reported. Method: a ping-pong at 40×
        // (missed, ≤ 8×), a poll at 2× (passed, ≤ 3×), a 64 KiB write at
        // 3× (passed, ≤ 4×), a latency at 20× (reported).
        let el = Some(Throughput::Elements(1));
        let all = [
            m("fabric_pingpong_rate/local", 4_000.0, el),
            m("fabric_pingpong_rate/fabric", 160_000.0, el),
            m("fabric_verb_cost/local_poll_cq", 50.0, el),
            m("fabric_verb_cost/fabric_poll_cq", 100.0, el),
            m("fabric_perftest/local_write_bw", 6_000.0, el),
            m("fabric_perftest/fabric_write_bw", 18_000.0, el),
            m("fabric_perftest/local_write_lat", 1_000.0, el),
            m("fabric_perftest/fabric_write_lat", 20_000.0, el),
        ];
        let v = check(&target("fabric_pingpong_rate/fabric"), &all[1], &all);
        assert!(
            matches!(v, Verdict::Miss(r) if (r - 40.0).abs() < 1e-9),
            "{v:?}"
        );
        let v = check(&target("fabric_verb_cost/fabric_poll_cq"), &all[3], &all);
        assert!(
            matches!(v, Verdict::Pass(r) if (r - 2.0).abs() < 1e-9),
            "{v:?}"
        );
        let v = check(&target("fabric_perftest/fabric_write_bw"), &all[5], &all);
        assert!(
            matches!(v, Verdict::Pass(r) if (r - 3.0).abs() < 1e-9),
            "{v:?}"
        );
        let v = check(&target("fabric_perftest/fabric_write_lat"), &all[7], &all);
        assert!(
            matches!(v, Verdict::Reported(r) if (r - 20.0).abs() < 1e-9),
            "{v:?}"
        );
        let report = evaluate(&all);
        assert_eq!((report.passed(), report.missed()), (2, 1));
        let text = report.to_string();
        assert!(
            text.lines()
                .any(|l| l.starts_with("fabric_verb_cost/fabric_query_port")
                    && l.ends_with("not run")),
            "{text}"
        );
    }

    #[test]
    fn fault_overhead_is_a_cost_multiple_of_the_fault_free_run() {
        // Goal: sim_fault_overhead/faults_per_packet passes at up to 1.15×
        // the time per packet of sim_fault_overhead/none_per_packet and
        // prints as a multiple; the whole-workload ratio (faults vs none)
        // is printed beside it as "reported", never counted.
        // Method: none at 200 ns; faults at 228 ns (1.14×) and 232 ns
        // (1.16×); whole workload at 600 vs 200 ns; the rendered rows.
        let t = target("sim_fault_overhead/faults_per_packet");
        let el = Some(Throughput::Elements(1));
        let none = m("sim_fault_overhead/none_per_packet", 200.0, el);
        let ok = m("sim_fault_overhead/faults_per_packet", 228.0, el);
        let bad = m("sim_fault_overhead/faults_per_packet", 232.0, el);
        let v = check(&t, &ok, core::slice::from_ref(&none));
        assert!(matches!(v, Verdict::Pass(_)) && (ratio_of(v) - 1.14).abs() < 1e-9);
        let v = check(&t, &bad, core::slice::from_ref(&none));
        assert!(matches!(v, Verdict::Miss(_)) && (ratio_of(v) - 1.16).abs() < 1e-9);
        let whole_none = m("sim_fault_overhead/none", 200.0, el);
        let whole = m("sim_fault_overhead/faults", 600.0, el);
        let v = check(
            &target("sim_fault_overhead/faults"),
            &whole,
            core::slice::from_ref(&whole_none),
        );
        assert!(
            matches!(v, Verdict::Reported(r) if (r - 3.0).abs() < 1e-9),
            "{v:?}"
        );
        let report = evaluate(&[none, bad, whole_none, whole]);
        assert_eq!((report.passed(), report.missed()), (0, 1));
        let text = report.to_string();
        let row = |id: &str| {
            text.lines()
                .find(|l| l.starts_with(id))
                .unwrap_or_else(|| panic!("no row {id} in {text}"))
                .to_owned()
        };
        let per = row("sim_fault_overhead/faults_per_packet");
        assert!(per.contains("1.16×") && per.ends_with("MISS"), "{per}");
        let whole = row("sim_fault_overhead/faults ");
        assert!(
            whole.contains("3.00×") && whole.ends_with("reported"),
            "{whole}"
        );
    }

    #[test]
    fn send_recv_sizes_use_their_own_copy_size_and_threshold() {
        // Goal: each send/recv size is compared with the random copy of the
        // same size, 50 % at 4 KiB and 80 % at 1 MiB. Method: copies at 10
        // GB/s; 4K at 5.5 GB/s passes; 1M at 7.5 GB/s misses; 1M against
        // the 64K copy alone has no reference.
        let gbps = |id: &str, bytes: u64, gb_per_s: f64| {
            m(id, bytes as f64 / gb_per_s, Some(Throughput::Bytes(bytes)))
        };
        let c4k = gbps("phys_memcpy_rand/4096", 4096, 10.0);
        let c64k = gbps("phys_memcpy_rand/65536", 65536, 10.0);
        let c1m = gbps("phys_memcpy_rand/1048576", 1 << 20, 10.0);
        let s4k = gbps("sim_send_recv_bw/4K", 4096, 5.5);
        let s1m = gbps("sim_send_recv_bw/1M", 1 << 20, 7.5);
        let all = [c4k, c64k.clone(), c1m];
        let v = check(&target("sim_send_recv_bw/4K"), &s4k, &all);
        assert!(matches!(v, Verdict::Pass(_)) && (ratio_of(v) - 0.55).abs() < 1e-9);
        let v = check(&target("sim_send_recv_bw/1M"), &s1m, &all);
        assert!(matches!(v, Verdict::Miss(_)) && (ratio_of(v) - 0.75).abs() < 1e-9);
        assert_eq!(
            check(&target("sim_send_recv_bw/1M"), &s1m, &[c64k]),
            Verdict::NoReference
        );
    }

    #[test]
    fn results_from_different_runs_are_starred() {
        // Goal: a ratio whose reference was written more than an hour apart
        // is flagged, not silently trusted. Method: the write rate and its
        // calibration written 2 h apart, then 10 min apart.
        let at = |mut x: Measurement, s: u64| {
            x.written_unix_s = Some(s);
            x
        };
        let hot = m("phys_memcpy_hot/64", 3.0, Some(Throughput::Bytes(64)));
        let write = m(
            "sim_rc_write_msg_rate/64",
            50.0,
            Some(Throughput::Elements(1)),
        );
        let far = evaluate(&[at(hot.clone(), 1_000), at(write.clone(), 8_200)]);
        let row = far.rows.iter().find(|r| r.id == write.id).expect("row");
        assert!(row.stale_reference);
        let text = far.to_string();
        assert!(
            text.contains("PASS*") && text.contains("another run?"),
            "{text}"
        );
        let near = evaluate(&[at(hot, 1_000), at(write.clone(), 1_600)]);
        assert!(!near.rows.iter().any(|r| r.stale_reference));
        assert!(!near.to_string().contains('*'));
    }

    fn target(id: &str) -> Target {
        *TARGETS.iter().find(|t| t.bench == id).expect("target")
    }

    #[test]
    fn write_rate_is_a_fraction_of_hot_copies_per_second() {
        // Goal: the 3 % rule divides WR/s by copies/s (not bytes/s).
        // Method: a 3 ns copy is 333 M copies/s; 3 % of it is 10 M WR/s, so
        // 1 024 WRs in 102.4 µs is exactly 10 M WR/s (3.0 %).
        let hot = m("phys_memcpy_hot/64", 3.0, Some(Throughput::Bytes(64)));
        let pass = m(
            "sim_rc_write_msg_rate/64",
            100_000.0,
            Some(Throughput::Elements(1024)),
        );
        let all = [hot.clone(), pass.clone()];
        match check(&target("sim_rc_write_msg_rate/64"), &pass, &all) {
            Verdict::Pass(r) => assert!((r - 0.0307).abs() < 1e-3, "ratio {r}"),
            v => panic!("{v:?}"),
        }
        let slow = m(
            "sim_rc_write_msg_rate/64",
            110_000.0,
            Some(Throughput::Elements(1024)),
        );
        assert!(matches!(
            check(
                &target("sim_rc_write_msg_rate/64"),
                &slow,
                &[hot, slow.clone()]
            ),
            Verdict::Miss(_)
        ));
    }

    #[test]
    fn bandwidth_compares_bytes_per_second_at_the_same_size() {
        // Goal: send/recv bandwidth is compared in bytes/s with the random
        // copy of the same size. Method: 64 KiB copy in 6.5 µs (~10 GB/s);
        // 64 SENDs of 64 KiB in 500 µs (~8.4 GB/s) is 83 % -> PASS at 80 %,
        // and in 540 µs (77 %) -> MISS.
        let copy = m(
            "phys_memcpy_rand/65536",
            6_500.0,
            Some(Throughput::Bytes(65536)),
        );
        let fast = m(
            "sim_send_recv_bw/64K",
            500_000.0,
            Some(Throughput::Bytes(64 * 65536)),
        );
        let slow = m(
            "sim_send_recv_bw/64K",
            540_000.0,
            Some(Throughput::Bytes(64 * 65536)),
        );
        let t = target("sim_send_recv_bw/64K");
        let Verdict::Pass(r) = check(&t, &fast, core::slice::from_ref(&copy)) else {
            panic!()
        };
        assert!((r - 0.832).abs() < 1e-3, "{r}");
        assert!(matches!(check(&t, &slow, &[copy]), Verdict::Miss(_)));
    }

    #[test]
    fn absolute_and_cost_rules_and_missing_references() {
        // Goal: absolute targets use the declared elements per second, cost
        // targets compare time per element, and a missing reference is
        // reported, not guessed. Method: synthetic numbers on each boundary.
        let lifecycle = m(
            "sim_qp_lifecycle_rate",
            999.0,
            Some(Throughput::Elements(1)),
        );
        assert!(matches!(
            check(&target("sim_qp_lifecycle_rate"), &lifecycle, &[]),
            Verdict::Pass(_)
        ));
        let modify = m(
            "sim_modify_qp_rate",
            300_000.0,
            Some(Throughput::Elements(5000)),
        );
        let Verdict::Miss(r) = check(&target("sim_modify_qp_rate"), &modify, &[]) else {
            panic!()
        };
        assert!((r - 1.6667e7).abs() < 1e4);
        let in_order = m("sim_ooo_placement/0", 1000.0, Some(Throughput::Elements(1)));
        let window8 = m("sim_ooo_placement/8", 1240.0, Some(Throughput::Elements(1)));
        let window64 = m(
            "sim_ooo_placement/64",
            1510.0,
            Some(Throughput::Elements(1)),
        );
        let all = [in_order, window8.clone(), window64.clone()];
        assert!(matches!(
            check(&target("sim_ooo_placement/8"), &window8, &all),
            Verdict::Pass(_)
        ));
        assert!(matches!(
            check(&target("sim_ooo_placement/64"), &window64, &all),
            Verdict::Miss(_)
        ));
        let read = m("sim_read_rate", 1.0, Some(Throughput::Elements(1)));
        assert_eq!(
            check(&target("sim_read_rate"), &read, &[]),
            Verdict::NoReference
        );
    }

    #[test]
    fn report_lists_calibration_first_and_unrun_targets_last() {
        // Goal: the table's shape. Method: evaluate two measurements and
        // look at the rows and the rendered text.
        let all = [
            m(
                "sim_qp_lifecycle_rate",
                500.0,
                Some(Throughput::Elements(1)),
            ),
            m("phys_chacha8_u64", 2.3, Some(Throughput::Elements(1))),
        ];
        let report = evaluate(&all);
        assert_eq!(report.rows[0].id, "phys_chacha8_u64");
        assert_eq!(report.rows[1].id, "sim_qp_lifecycle_rate");
        assert_eq!(report.passed(), 1);
        assert_eq!(report.rows.len(), 2 + TARGETS.len() - 1);
        let text = report.to_string();
        assert!(
            text.contains("calibration") && text.contains("PASS") && text.contains("not run"),
            "{text}"
        );
        assert!(text.contains("2.00 M/s"), "{text}");
    }

    #[test]
    fn reads_criterion_files() {
        // Goal: the parser reads what criterion 0.5 writes. Method: parse
        // copies of a real benchmark.json and estimates.json (abridged).
        let bench = json::parse(
            r#"{"group_id":"phys_memcpy_hot","function_id":"64","value_str":null,
               "throughput":{"Bytes":64},"full_id":"phys_memcpy_hot/64",
               "directory_name":"phys_memcpy_hot/64","title":"phys_memcpy_hot/64"}"#,
        )
        .unwrap();
        let estimates = json::parse(
            r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":3.01,"upper_bound":3.2},
               "point_estimate":3.1,"standard_error":0.05},
               "median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":2.9,"upper_bound":3.0},
               "point_estimate":2.95e0,"standard_error":0.01},"slope":null}"#,
        )
        .unwrap();
        let got = parse_measurement(&bench, &estimates).unwrap();
        assert_eq!(
            got,
            m("phys_memcpy_hot/64", 2.95, Some(Throughput::Bytes(64)))
        );
        assert!(
            json::parse(r#"{"a":"x\u00b5\n"}"#)
                .unwrap()
                .get("a")
                .unwrap()
                .as_str()
                == Some("xµ\n")
        );
        assert!(json::parse("{").is_err());
    }
}
