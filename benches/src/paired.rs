//! Paired measurement of a ratio target: the benchmark and its reference
//! run in alternation, and the ratio is taken round by round.
//!
//! Criterion measures each benchmark on its own, one after the other, a few
//! seconds to minutes apart. Every target of `perf.md` but two is a ratio
//! of two of them, and on a shared machine (the 2-core CI runners, a
//! laptop with a browser open) the load and the clock speed drift between
//! the two measurements: the same build gave a fault overhead per packet
//! of 0.88×, 1.10× and 1.30× in three full runs, and the READ rate 33 %
//! and 95 % of the WRITE rate. Drift of that kind moves both halves of a
//! ratio together when they run side by side.
//!
//! [`measure`] does that. It sizes a chunk of iterations of each side to
//! take about [`PairPlan::chunk`], then runs rounds of one chunk of each,
//! alternating which goes first (A B, B A, A B, …, so a steady drift
//! favours neither), until [`PairPlan::budget`] of measured time is spent
//! (at least [`PairPlan::min_rounds`] rounds). Rounds are grouped in blocks
//! of [`PairPlan::block`]; each block gives one cost ratio (the benchmark's
//! time per iteration over the reference's, from the block's sums), and the
//! result is their median with the quartiles. Blocks rather than single
//! rounds because a pipelined workload's step is lumpy: a call that only
//! posts is cheap and the next one, which reaps, dear, so one round's ratio
//! can be far off either way while a block's sum is not. The `sim` bench writes
//! one [`PairedRatio`] per ratio target under `<criterion dir>/paired/`
//! ([`PairedRatio::write`]); `bench-report` checks the target against it
//! instead of the quotient of the two medians when it is there
//! ([`crate::report::load_paired`]), and prints both.
//!
//! The steps are the same closures criterion times (`iter_custom`
//! routines: the time of `n` iterations), so a paired ratio means exactly
//! what the criterion one does: for instance the fault overhead per packet
//! divides the time by the packets the run put on the wire in both.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::report::json;

/// How long a paired measurement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairPlan {
    /// Measured time one chunk of each side aims at.
    pub chunk: Duration,
    /// Measured time (both sides) after which no new round starts.
    pub budget: Duration,
    /// Rounds run whatever the budget says.
    pub min_rounds: u32,
    /// Rounds never exceeded.
    pub max_rounds: u32,
    /// Rounds per block (the unit of the median).
    pub block: u32,
}

impl PairPlan {
    /// A full run: chunks of 10 ms, 3 s per pair, 40 to 400 rounds in
    /// blocks of 8 (about 19 blocks of 160 ms).
    pub const FULL: Self = Self {
        chunk: Duration::from_millis(10),
        budget: Duration::from_secs(3),
        min_rounds: 40,
        max_rounds: 400,
        block: 8,
    };

    /// The smoke run of `VERBSIM_BENCH_QUICK=1`: chunks of 4 ms, 0.6 s per
    /// pair, 20 to 200 rounds in blocks of 4 (about 19 blocks of 32 ms).
    pub const QUICK: Self = Self {
        chunk: Duration::from_millis(4),
        budget: Duration::from_millis(600),
        min_rounds: 20,
        max_rounds: 200,
        block: 4,
    };

    /// [`Self::QUICK`] under `VERBSIM_BENCH_QUICK=1`, else [`Self::FULL`].
    pub fn from_env() -> Self {
        if crate::quick_mode() {
            Self::QUICK
        } else {
            Self::FULL
        }
    }
}

/// The outcome of [`measure`]: cost ratios, the benchmark's time per
/// iteration over the reference's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paired {
    /// Median of the blocks' ratios.
    pub median: f64,
    /// First quartile.
    pub low: f64,
    /// Third quartile.
    pub high: f64,
    /// Rounds run.
    pub rounds: u32,
    /// The benchmark's median time per iteration over the blocks, ns.
    pub bench_ns: f64,
    /// The reference's median time per iteration over the blocks, ns.
    pub reference_ns: f64,
}

/// Iterations of `step` that take about `chunk` (doubling from 1, then
/// scaled to the chunk); these calls also warm the step up.
fn size_chunk(step: &mut impl FnMut(u64) -> Duration, chunk: Duration) -> u64 {
    let mut n = 1u64;
    loop {
        let t = step(n);
        if t >= chunk / 4 || n >= 1 << 40 {
            let per = t.as_secs_f64() / n as f64;
            return if per > 0.0 {
                ((chunk.as_secs_f64() / per) as u64).clamp(1, 1 << 40)
            } else {
                n
            };
        }
        n *= 2;
    }
}

/// Runs `bench` and `reference` in alternating rounds, as the module
/// documentation describes, and returns the median cost ratio with its
/// quartiles. Each step returns the time of `n` iterations, as a criterion
/// `iter_custom` routine does. `None` when a step measured no time at all
/// (nothing to divide by).
pub fn measure(
    plan: PairPlan,
    mut bench: impl FnMut(u64) -> Duration,
    mut reference: impl FnMut(u64) -> Duration,
) -> Option<Paired> {
    let na = size_chunk(&mut bench, plan.chunk);
    let nb = size_chunk(&mut reference, plan.chunk);
    let block = plan.block.max(1);
    let mut ratios = Vec::new();
    let (mut per_a, mut per_b) = (Vec::new(), Vec::new());
    let (mut sum_a, mut sum_b) = (0.0f64, 0.0f64);
    let mut spent = Duration::ZERO;
    let mut round = 0u32;
    // Whole blocks only: a block ends every `block` rounds.
    while round < plan.max_rounds
        && (round < plan.min_rounds || spent < plan.budget || round % block != 0)
    {
        let (ta, tb) = if round % 2 == 0 {
            let ta = bench(na);
            (ta, reference(nb))
        } else {
            let tb = reference(nb);
            (bench(na), tb)
        };
        spent += ta + tb;
        round += 1;
        sum_a += ta.as_secs_f64();
        sum_b += tb.as_secs_f64();
        if round % block == 0 {
            if sum_a > 0.0 && sum_b > 0.0 {
                let (a, b) = (sum_a / f64::from(block), sum_b / f64::from(block));
                per_a.push(a * 1e9 / na as f64);
                per_b.push(b * 1e9 / nb as f64);
                ratios.push((a / na as f64) / (b / nb as f64));
            }
            (sum_a, sum_b) = (0.0, 0.0);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    for v in [&mut ratios, &mut per_a, &mut per_b] {
        v.sort_by(f64::total_cmp);
    }
    let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Some(Paired {
        median: at(&ratios, 0.5),
        low: at(&ratios, 0.25),
        high: at(&ratios, 0.75),
        rounds: round,
        bench_ns: at(&per_a, 0.5),
        reference_ns: at(&per_b, 0.5),
    })
}

/// A paired ratio as the `sim` bench records it for `bench-report`.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedRatio {
    /// The benchmark's id, e.g. `sim_read_rate`.
    pub bench: String,
    /// The reference's id, e.g. `sim_rc_write_msg_rate/64`.
    pub reference: String,
    /// The measurement.
    pub paired: Paired,
}

impl PairedRatio {
    /// The directory paired ratios live in, under criterion's `dir`.
    pub fn dir(criterion: &Path) -> PathBuf {
        criterion.join("paired")
    }

    /// The file of `bench`'s paired ratio under criterion's `dir`.
    pub fn path(criterion: &Path, bench: &str) -> PathBuf {
        Self::dir(criterion).join(format!("{}.json", bench.replace('/', "@")))
    }

    /// The JSON text of the record.
    pub fn to_json(&self) -> String {
        let p = &self.paired;
        format!(
            "{{\"bench\": {:?}, \"reference\": {:?}, \"cost_ratio\": {}, \"low\": {}, \"high\": {}, \"rounds\": {}, \"bench_ns\": {}, \"reference_ns\": {}}}\n",
            self.bench, self.reference, p.median, p.low, p.high, p.rounds, p.bench_ns, p.reference_ns
        )
    }

    /// Parses [`Self::to_json`]'s text.
    ///
    /// # Errors
    /// What is missing or malformed.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let v = json::parse(text)?;
        let s = |k: &str| {
            v.get(k)
                .and_then(json::Value::as_str)
                .map(str::to_owned)
                .ok_or(format!("paired ratio without {k}"))
        };
        let f = |k: &str| {
            v.get(k)
                .and_then(json::Value::as_f64)
                .ok_or(format!("paired ratio without {k}"))
        };
        let cost_ratio = f("cost_ratio")?;
        if !(cost_ratio.is_finite() && cost_ratio > 0.0) {
            return Err(format!("paired cost ratio {cost_ratio} is not positive"));
        }
        Ok(Self {
            bench: s("bench")?,
            reference: s("reference")?,
            paired: Paired {
                median: cost_ratio,
                low: f("low")?,
                high: f("high")?,
                rounds: f("rounds")? as u32,
                bench_ns: f("bench_ns")?,
                reference_ns: f("reference_ns")?,
            },
        })
    }

    /// Writes the record to its file under criterion's `dir`.
    ///
    /// # Errors
    /// The I/O error.
    pub fn write(&self, criterion: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(Self::dir(criterion))?;
        std::fs::write(Self::path(criterion, &self.bench), self.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step costing `per_ns` per iteration scaled by a load factor that
    /// the shared `clock` (measured nanoseconds so far) drives: the machine
    /// slowing down and speeding up over time, in whole seconds.
    fn drifting(per_ns: f64, clock: &std::cell::Cell<f64>) -> impl FnMut(u64) -> Duration + '_ {
        move |n| {
            let load = if (clock.get() / 1e9) as u64 % 2 == 0 {
                1.0
            } else {
                1.6
            };
            let t = n as f64 * per_ns * load;
            clock.set(clock.get() + t);
            Duration::from_nanos(t as u64)
        }
    }

    #[test]
    fn paired_rounds_cancel_a_drift_that_separate_runs_do_not() {
        // Goal: the paired ratio is the true cost ratio under a load that
        // changes over time, where timing the two sides one after the
        // other is off by the load change.
        // Method: a benchmark at 300 ns per iteration and a reference at
        // 100 ns, their time scaled by 1.0 or 1.6 in alternate seconds of
        // a simulated clock (no real time is measured). Paired: the median
        // must be 3.0 within 1 %. Separately: the benchmark timed alone
        // for 1.2 s then the reference for 1 s (landing in different load
        // phases) gives a ratio off by the load step.
        let clock = std::cell::Cell::new(0.0);
        let p = measure(
            PairPlan::FULL,
            drifting(300.0, &clock),
            drifting(100.0, &clock),
        )
        .expect("a ratio");
        assert!((p.median - 3.0).abs() < 0.03, "{p:?}");
        assert!(p.rounds >= PairPlan::FULL.min_rounds);
        assert!(p.low <= p.median && p.median <= p.high);
        let clock = std::cell::Cell::new(0.0);
        let (mut a, mut b) = (drifting(300.0, &clock), drifting(100.0, &clock));
        let ta = a(4_000_000).as_secs_f64() / 4_000_000.0;
        let tb = b(10_000_000).as_secs_f64() / 10_000_000.0;
        assert!((ta / tb - 3.0).abs() > 0.5, "separate runs: {}", ta / tb);
    }

    #[test]
    fn rounds_respect_the_plan() {
        // Goal: at least min_rounds, at most max_rounds, and the budget
        // stops the rounds in between.
        // Method: constant steps of 1 µs per iteration; the quick plan's
        // 0.6 s budget with 4 ms chunks per side (8 ms a round) ends after
        // about 75 rounds, a whole number of blocks; a zero-time step gives
        // no ratio.
        let p = measure(
            PairPlan::QUICK,
            Duration::from_micros,
            Duration::from_micros,
        )
        .expect("a ratio");
        assert!((72..=80).contains(&p.rounds), "{p:?}");
        assert_eq!(p.rounds % PairPlan::QUICK.block, 0);
        assert!((p.median - 1.0).abs() < 1e-9);
        let none = measure(PairPlan::QUICK, Duration::from_micros, |_| Duration::ZERO);
        assert_eq!(none, None);
    }

    #[test]
    fn a_lumpy_step_is_measured_by_its_blocks() {
        // Goal: a pipelined step whose cost falls on every fourth call (the
        // others only post) is measured at its true average, not at the
        // cheap calls' cost.
        // Method: the benchmark costs nothing on three calls of four and
        // 4 × 200 ns per iteration on the fourth (200 ns on average); the
        // reference 100 ns per iteration. The ratio must be 2.0 within 5 %,
        // in the full and the quick plan.
        for plan in [PairPlan::FULL, PairPlan::QUICK] {
            let mut calls = 0u64;
            let p = measure(
                plan,
                |n| {
                    calls += 1;
                    let per = if calls % 4 == 0 { 800 } else { 0 };
                    Duration::from_nanos(n * per)
                },
                |n| Duration::from_nanos(n * 100),
            )
            .expect("a ratio");
            assert!((p.median - 2.0).abs() < 0.1, "{plan:?}: {p:?}");
        }
    }

    #[test]
    fn json_round_trips_and_refuses_nonsense() {
        // Goal: what the bench writes, the report reads back unchanged; a
        // non-positive ratio is refused.
        let r = PairedRatio {
            bench: "sim_read_rate".into(),
            reference: "sim_rc_write_msg_rate/64".into(),
            paired: Paired {
                median: 1.625,
                low: 1.5,
                high: 1.75,
                rounds: 42,
                bench_ns: 162.5,
                reference_ns: 100.0,
            },
        };
        assert_eq!(PairedRatio::from_json(&r.to_json()), Ok(r.clone()));
        let bad = r.to_json().replace("1.625", "-1");
        assert!(PairedRatio::from_json(&bad).is_err());
        assert!(PairedRatio::path(Path::new("/c"), "a/b").ends_with("paired/a@b.json"));
    }
}
