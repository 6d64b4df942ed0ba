//! Every benchmark of `perf.md` in one binary, so that the calibration
//! group (`phys_*`) and the simulator benchmarks are measured in the same
//! run and their ratios mean something.
//!
//! ```text
//! cargo bench -p verbsim-benches --bench sim [-- FILTER]
//! VERBSIM_BENCH_QUICK=1 cargo bench -p verbsim-benches --bench sim     # CI smoke mode
//! cargo run -p verbsim-benches --bin bench-report                      # ratios and targets
//! ```
//!
//! One iteration is one unit of what the id names (one copy, one random
//! number, one pop+push, one QP lifecycle, one modify, one work request,
//! one SEND), so the median is the cost of one unit; groups also declare
//! their throughput (bytes or elements) so criterion prints rates.
//!
//! The simulator runs with its trace off (as `SimConfig` allows for
//! benchmarks) and a fixed seed; every simulator benchmark has a simulator
//! of its own. A simulator benchmark whose set-up or first request fails is
//! skipped with a `SKIP` line on stderr (a backend without a data path
//! returns "not implemented"), never aborting the binary.
//!
//! `sim_fault_overhead/{none,faults}` run the `sim_rc_write_msg_rate/64`
//! workload with the QP timeout of the fault workload
//! ([`verbsim_benches::data::FAULT_ACK_TIMEOUT`]), without and with 1 %
//! drop, duplicate and delay rules installed through `sim_control`, side by
//! side in one group; bench-report prints the cost ratio.

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backend_sim::{SimConfig, SimVerbs};
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rand_chacha::rand_core::RngCore;
use verbsim_benches::calibration::{chacha8, EventHeap, HotCopy, RandCopy, RandSpan, COPY_SIZES};
use verbsim_benches::control::{ModifyMix, ModifyPlan, QpLifecycle};
use verbsim_benches::data::{
    MessageRate, MessageRateConfig, RateOp, SendRecvBw, SendRecvConfig, SCALE_PAIRS,
};
use verbsim_benches::fabric::{self, CheapVerb, PerftestPair, PingPongPair, VerbCostChild};
use verbsim_benches::paired::{self, PairPlan, PairedRatio};
use verbsim_benches::xrc::XrcFanIn;
use verbsim_benches::{quick_mode, report, WorkloadError};
use verbsim_shim::fabric::floor::{RelayFloor, RelayWait};

/// The criterion configuration: default, or the smoke settings of
/// `VERBSIM_BENCH_QUICK=1` (criterion's command-line flags still win).
fn config() -> Criterion {
    let c = Criterion::default();
    if quick_mode() {
        c.sample_size(10)
            .warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_millis(300))
    } else {
        c
    }
}

/// The simulator every `sim_*` benchmark runs on: default devices (two
/// ConnectX-6-like), seed 0, trace off.
fn sim() -> SimVerbs {
    SimVerbs::new(SimConfig {
        trace_enabled: false,
        ..SimConfig::default()
    })
}

// ---------------------------------------------------------------- filtering

/// Whether the command line's filter may select `id`.
///
/// Criterion runs only the benchmarks its filter selects, but the set-up of
/// a simulator benchmark (MRs up to 1 GiB, touched) happens before criterion
/// decides. This skips the set-up when the filter clearly excludes the id:
/// a filter made of plain `|`-separated words (optionally `^`-anchored) is
/// matched as substrings; any other regex is assumed to select everything
/// (criterion then decides, at the price of the set-up).
fn selected(id: &str) -> bool {
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        if arg.starts_with('-') {
            if !arg.contains('=') && FLAGS_WITH_VALUE.contains(&arg.as_str()) {
                args.next();
            }
            continue;
        }
        filter = Some(arg);
        break;
    }
    let Some(filter) = filter else { return true };
    let plain = |w: &str| {
        w.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '/'))
    };
    let words: Vec<&str> = filter
        .split('|')
        .map(|w| w.strip_prefix('^').unwrap_or(w))
        .collect();
    if !words.iter().all(|w| plain(w)) {
        return true;
    }
    words.iter().any(|w| id.contains(w))
}

/// Criterion flags followed by a value (so the value is not the filter).
const FLAGS_WITH_VALUE: &[&str] = &[
    "--warm-up-time",
    "--measurement-time",
    "--sample-size",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--save-baseline",
    "--baseline",
    "--baseline-lenient",
    "--load-baseline",
    "--profile-time",
    "--output-format",
    "--plotting-backend",
    "--color",
    "-c",
    "-s",
    "-b",
];

/// Builds a simulator workload and runs its probe; prints a SKIP line and
/// returns `None` when either fails.
fn prepare<W>(
    id: &str,
    v: &mut SimVerbs,
    build: impl FnOnce(&mut SimVerbs) -> Result<W, WorkloadError>,
    probe: impl FnOnce(&mut W, &mut SimVerbs) -> Result<(), WorkloadError>,
) -> Option<W> {
    if !selected(id) {
        return None;
    }
    let result = build(v).and_then(|mut w| probe(&mut w, v).map(|()| w));
    match result {
        Ok(w) => Some(w),
        Err(e) if e.is_not_implemented() => {
            eprintln!("SKIP {id}: the simulator does not implement this yet ({e})");
            None
        }
        Err(e) => {
            eprintln!("SKIP {id}: set-up or first run failed: {e}");
            None
        }
    }
}

/// Tears a workload down after its benchmark; a failure is reported, not
/// fatal (the numbers are already recorded).
fn finish(id: &str, torn_down: Result<(), WorkloadError>) {
    if let Err(e) = torn_down {
        eprintln!("WARN {id}: teardown failed: {e}");
    }
}

/// Times `iters` calls of a batched workload step (`iter_custom`).
fn timed(iters: u64, mut run: impl FnMut(u64)) -> Duration {
    let start = Instant::now();
    run(iters);
    start.elapsed()
}

/// Whether this is a benchmark run (`cargo bench` passes `--bench`), not
/// `cargo test` running the bench binary once per benchmark.
fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The paired measurement of `bench` against `reference`
/// ([`verbsim_benches::paired`]): each step is the time of `n` iterations,
/// the same routine as the benchmark's `iter_custom`. Written under
/// criterion's directory for `bench-report`; skipped when the filter
/// excludes `bench` or this is not a benchmark run.
///
/// Not for a reference that streams through memory (`phys_memcpy_rand`,
/// the 1 GiB WRITE and SEND/RECV targets): its chunk evicts the other
/// side's working set, which a workload measured alone keeps in the cache,
/// and the ratio then depends on the chunk length (`sim_send_recv_bw/1M`
/// measured 1.43× and 1.32× its reference with chunks of 10 ms and 1.16×
/// with 100 ms, against 0.78× from the two medians). Those targets keep
/// the medians' ratio.
fn pair(
    bench: &str,
    reference: &str,
    a: impl FnMut(u64) -> Duration,
    b: impl FnMut(u64) -> Duration,
) {
    if !bench_mode() || !selected(bench) {
        return;
    }
    let Some(p) = paired::measure(PairPlan::from_env(), a, b) else {
        eprintln!("WARN paired {bench}: a step measured no time");
        return;
    };
    eprintln!(
        "paired {bench} / {reference}: cost ratio {:.3} (quartiles {:.3} to {:.3}, {} rounds; {} and {} per iteration)",
        p.median,
        p.low,
        p.high,
        p.rounds,
        report::duration_text(p.bench_ns),
        report::duration_text(p.reference_ns)
    );
    let record = PairedRatio {
        bench: bench.to_owned(),
        reference: reference.to_owned(),
        paired: p,
    };
    if let Err(e) = record.write(&report::default_dir()) {
        eprintln!("WARN paired {bench}: not written: {e}");
    }
}

/// A hot 64 B copy step (`phys_memcpy_hot/{len}`'s routine) for [`pair`].
fn hot_copy_step(copy: &mut HotCopy) -> impl FnMut(u64) -> Duration + '_ {
    move |n| {
        timed(n, |n| {
            for _ in 0..n {
                copy.copy();
            }
        })
    }
}

/// Pairs the prepared cases of a group that `wanted` selects with its
/// first case, when that is the reference `first` (DC fan-out, XRC fan-in,
/// OOO placement); `run` is the workload's step.
fn pair_with_first<K: PartialEq, W>(
    prepared: &mut [(K, String, SimVerbs, W)],
    first: K,
    wanted: impl Fn(&K) -> bool,
    run: fn(&mut W, &mut SimVerbs, u64) -> Result<(), WorkloadError>,
) {
    let Some(((k, rid, rv, rw), rest)) = prepared.split_first_mut() else {
        return;
    };
    if *k != first {
        return;
    }
    for (_, id, v, w) in rest.iter_mut().filter(|p| wanted(&p.0)) {
        pair(
            id,
            rid,
            |n| timed(n, |n| run(w, v, n).expect(id)),
            |n| timed(n, |n| run(rw, rv, n).expect(rid)),
        );
    }
}

/// A message-rate step for [`pair`].
fn rate_step<'a>(
    v: &'a mut SimVerbs,
    w: &'a mut MessageRate<SimVerbs>,
    id: &'a str,
) -> impl FnMut(u64) -> Duration + 'a {
    move |n| timed(n, |n| w.run(v, n).expect(id))
}

// -------------------------------------------------------------- calibration

fn phys_memcpy_hot(c: &mut Criterion) {
    let mut group = c.benchmark_group("phys_memcpy_hot");
    for len in COPY_SIZES {
        let mut copy = None;
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(BenchmarkId::from_parameter(len), |b| {
            let copy = copy.get_or_insert_with(|| HotCopy::new(len));
            b.iter(|| copy.copy());
        });
    }
    group.finish();
}

fn phys_memcpy_rand(c: &mut Criterion) {
    // One touched 1 GiB span for every size, allocated only if one of them runs.
    let mut span: Option<RandSpan> = None;
    let mut group = c.benchmark_group("phys_memcpy_rand");
    for len in COPY_SIZES {
        let mut copy = None;
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(BenchmarkId::from_parameter(len), |b| {
            let span = span.get_or_insert_with(RandSpan::new);
            let copy = copy.get_or_insert_with(|| RandCopy::new(len));
            b.iter(|| copy.copy(span));
        });
    }
    group.finish();
}

fn phys_chacha8_u64(c: &mut Criterion) {
    let mut rng = chacha8();
    c.bench_function("phys_chacha8_u64", |b| b.iter(|| black_box(rng.next_u64())));
}

fn phys_heap_poppush(c: &mut Criterion) {
    let mut group = c.benchmark_group("phys_heap_poppush");
    group.throughput(Throughput::Elements(1));
    for (name, size) in [("1k", 1_000), ("100k", 100_000)] {
        let mut heap = None;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            let heap = heap.get_or_insert_with(|| EventHeap::new(size));
            b.iter(|| black_box(heap.pop_push()));
        });
    }
    group.finish();
}

// ------------------------------------------------------------- control path

fn sim_qp_lifecycle_rate(c: &mut Criterion) {
    const ID: &str = "sim_qp_lifecycle_rate";
    let mut v = sim();
    let Some(mut w) = prepare(ID, &mut v, QpLifecycle::new, |w, v| w.run(v)) else {
        return;
    };
    c.bench_function(ID, |b| b.iter(|| w.run(&mut v).expect(ID)));
    finish(ID, w.teardown(&mut v));
}

fn sim_modify_qp_rate(c: &mut Criterion) {
    const ID: &str = "sim_modify_qp_rate";
    let mut v = sim();
    let Some(mut w) = prepare(
        ID,
        &mut v,
        |v| ModifyMix::new(v, ModifyPlan::standard()),
        |w, v| w.run(v).map(|_| ()),
    ) else {
        return;
    };
    c.bench_function(ID, |b| {
        b.iter_custom(|iters| {
            timed(iters, |n| {
                black_box(w.run_steps(&mut v, n).expect(ID));
            })
        });
    });
    finish(ID, w.teardown(&mut v));
}

// ---------------------------------------------------------------- data path

/// Requests the probe of a data-path workload posts (and drains).
const PROBE_REQUESTS: u64 = 64;

/// A prepared message-rate workload: its id, simulator and workload.
type Prepared = (String, SimVerbs, MessageRate<SimVerbs>);

/// Prepares `cases` and benchmarks them in `group`; returns them, not yet
/// torn down, for the caller's paired measurements ([`finish_all`]).
fn message_rate(
    c: &mut Criterion,
    group: &str,
    cases: &[(&str, MessageRateConfig)],
) -> Vec<Prepared> {
    let ids: Vec<String> = cases
        .iter()
        .map(|(p, _)| {
            if p.is_empty() {
                group.to_owned()
            } else {
                format!("{group}/{p}")
            }
        })
        .collect();
    let mut prepared = Vec::new();
    for ((param, cfg), id) in cases.iter().zip(&ids) {
        let mut v = sim();
        let probe = |w: &mut MessageRate<SimVerbs>, v: &mut SimVerbs| {
            w.run(v, PROBE_REQUESTS)?;
            w.drain(v)
        };
        if let Some(w) = prepare(id, &mut v, |v| MessageRate::new(v, *cfg), probe) {
            prepared.push((*param, id.clone(), v, w));
        }
    }
    if prepared.is_empty() {
        return Vec::new();
    }
    let bench = |b: &mut criterion::Bencher<'_>,
                 v: &mut SimVerbs,
                 w: &mut MessageRate<SimVerbs>,
                 id: &str| {
        b.iter_custom(|iters| timed(iters, |n| w.run(v, n).expect(id)));
    };
    if cases.len() == 1 && cases[0].0.is_empty() {
        let (_, id, mut v, mut w) = prepared.pop().expect("one case");
        c.bench_function(&id, |b| bench(b, &mut v, &mut w, &id));
        return vec![(id, v, w)];
    }
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    for (param, id, v, w) in &mut prepared {
        g.bench_function(BenchmarkId::from_parameter(*param), |b| bench(b, v, w, id));
    }
    g.finish();
    prepared
        .into_iter()
        .map(|(_, id, v, w)| (id, v, w))
        .collect()
}

/// Tears down what [`message_rate`] returned.
fn finish_all(prepared: Vec<Prepared>) {
    for (id, mut v, w) in prepared {
        finish(&id, w.teardown(&mut v));
    }
}

/// A `sim_rc_write_msg_rate/64` workload of its own, for the paired
/// measurements of READ and atomics (`None` when it cannot be built).
fn write_reference() -> Option<Prepared> {
    let id = "sim_rc_write_msg_rate/64";
    let mut v = sim();
    let mut w = MessageRate::new(&mut v, MessageRateConfig::rc_write_64()).ok()?;
    w.run(&mut v, PROBE_REQUESTS).ok()?;
    w.drain(&mut v).ok()?;
    Some((id.to_owned(), v, w))
}

/// Pairs each of `prepared` with the write workload (READ and atomics).
fn pair_with_write(prepared: &mut [Prepared]) {
    if !bench_mode() || !prepared.iter().any(|(id, _, _)| selected(id)) {
        return;
    }
    let Some((wid, mut wv, mut ww)) = write_reference() else {
        eprintln!("WARN paired: the write reference could not be built");
        return;
    };
    for (id, v, w) in prepared.iter_mut() {
        pair(
            id,
            &wid,
            rate_step(v, w, id),
            rate_step(&mut wv, &mut ww, &wid),
        );
    }
    finish(&wid, ww.teardown(&mut wv));
}

fn sim_rc_write_msg_rate(c: &mut Criterion) {
    let mut prepared = message_rate(
        c,
        "sim_rc_write_msg_rate",
        &[
            ("64", MessageRateConfig::rc_write_64()),
            ("64_1GiB", MessageRateConfig::rc_write_64_1gib()),
        ],
    );
    // The 1 GiB variant is not paired: see `pair`.
    for (id, v, w) in prepared.iter_mut().filter(|p| p.0.ends_with("/64")) {
        let mut copy = HotCopy::new(64);
        pair(
            id,
            "phys_memcpy_hot/64",
            rate_step(v, w, id),
            hot_copy_step(&mut copy),
        );
    }
    finish_all(prepared);
}

fn sim_read_rate(c: &mut Criterion) {
    let mut prepared = message_rate(c, "sim_read_rate", &[("", MessageRateConfig::read_64())]);
    pair_with_write(&mut prepared);
    finish_all(prepared);
}

fn sim_atomic_rate(c: &mut Criterion) {
    let mut prepared = message_rate(
        c,
        "sim_atomic_rate",
        &[
            ("fadd", MessageRateConfig::atomic(RateOp::FetchAdd)),
            ("cswap", MessageRateConfig::atomic(RateOp::CompSwap)),
        ],
    );
    pair_with_write(&mut prepared);
    finish_all(prepared);
}

/// `sim_fault_overhead/{none,faults}` (one iteration is one work request)
/// and `sim_fault_overhead/{none,faults}_per_packet` (the same runs, one
/// iteration is one packet put on the wire, retransmissions included: the
/// target of perf.md, since go-back-N resends a window on hardware too).
fn sim_fault_overhead(c: &mut Criterion) {
    const GROUP: &str = "sim_fault_overhead";
    let mut prepared = Vec::new();
    for (param, faults) in [("none", false), ("faults", true)] {
        let id = format!("{GROUP}/{param}");
        let mut v = sim();
        let probe = |w: &mut MessageRate<SimVerbs>, v: &mut SimVerbs| {
            w.run(v, PROBE_REQUESTS)?;
            w.drain(v)
        };
        let cfg = MessageRateConfig::fault_overhead(faults);
        if let Some(mut w) = prepare(&id, &mut v, |v| MessageRate::new(v, cfg), probe) {
            // Packets per request of this workload, for the record.
            let (n, p0) = (20_000, v.world().packets_sent());
            if w.run(&mut v, n).is_ok() {
                let per = (v.world().packets_sent() - p0) as f64 / n as f64;
                eprintln!("{id}: {per:.4} packets on the wire per request");
            }
            prepared.push((param, id, v, w));
        }
    }
    if prepared.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    for (param, id, v, w) in &mut prepared {
        g.bench_function(BenchmarkId::from_parameter(*param), |b| {
            b.iter_custom(|iters| timed(iters, |n| w.run(v, n).expect(id)));
        });
    }
    // Runs `iters` requests and scales the time to `iters` packets: the
    // time per packet on the wire, whatever the retransmissions.
    let per_packet = |v: &mut SimVerbs, w: &mut MessageRate<SimVerbs>, id: &str, iters: u64| {
        let p0 = v.world().packets_sent();
        let t = timed(iters, |n| w.run(v, n).expect(id));
        let packets = (v.world().packets_sent() - p0).max(1);
        t.mul_f64(iters as f64 / packets as f64)
    };
    for (param, id, v, w) in &mut prepared {
        let name = format!("{param}_per_packet");
        g.bench_function(BenchmarkId::from_parameter(&name), |b| {
            b.iter_custom(|iters| per_packet(v, w, id, iters));
        });
    }
    g.finish();
    if let [(_, none_id, nv, nw), (_, faults_id, fv, fw)] = &mut prepared[..] {
        pair(
            &format!("{faults_id}_per_packet"),
            &format!("{none_id}_per_packet"),
            |n| per_packet(fv, fw, faults_id, n),
            |n| per_packet(nv, nw, none_id, n),
        );
        pair(
            faults_id,
            none_id,
            rate_step(fv, fw, faults_id),
            rate_step(nv, nw, none_id),
        );
    }
    for (_, id, mut v, w) in prepared {
        finish(&id, w.teardown(&mut v));
    }
}

fn sim_send_recv_bw(c: &mut Criterion) {
    const GROUP: &str = "sim_send_recv_bw";
    let mut prepared = Vec::new();
    for (param, size) in [("4K", 4096u32), ("64K", 65536), ("1M", 1 << 20)] {
        let id = format!("{GROUP}/{param}");
        let mut v = sim();
        let probe = |w: &mut SendRecvBw<SimVerbs>, v: &mut SimVerbs| {
            w.run(v, PROBE_REQUESTS)?;
            w.drain(v)
        };
        if let Some(w) = prepare(
            &id,
            &mut v,
            |v| SendRecvBw::new(v, SendRecvConfig::bw(size)),
            probe,
        ) {
            prepared.push((param, size, id, v, w));
        }
    }
    if prepared.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    for (param, size, id, v, w) in &mut prepared {
        g.throughput(Throughput::Bytes(u64::from(*size)));
        g.bench_function(BenchmarkId::from_parameter(*param), |b| {
            b.iter_custom(|iters| timed(iters, |n| w.run(v, n).expect(id)));
        });
    }
    g.finish();
    for (_, _, id, mut v, w) in prepared {
        finish(&id, w.teardown(&mut v));
    }
}

/// `sim_dc_fanout/{1,100,1000,10000}`: one iteration is one 64 B WRITE of
/// 8 DCIs round-robin over that many DCTs; also prints the simulator's
/// heap bytes per DCT (perf.md: at most 512).
fn sim_dc_fanout(c: &mut Criterion) {
    use verbsim_benches::dc::DcFanout;
    const GROUP: &str = "sim_dc_fanout";
    let mut prepared = Vec::new();
    for dcts in [1usize, 100, 1000, 10_000] {
        let id = format!("{GROUP}/{dcts}");
        let mut v = sim();
        let probe = |w: &mut DcFanout<SimVerbs>, v: &mut SimVerbs| w.run(v, PROBE_REQUESTS);
        if let Some(w) = prepare(&id, &mut v, |v| DcFanout::new(v, dcts), probe) {
            let world = v.world();
            let total: usize = w
                .dcts()
                .iter()
                .filter_map(|h| world.dct_heap_bytes(*h))
                .sum();
            eprintln!(
                "{id}: heap per DCT = {} B (target <= 512)",
                total / w.dcts().len().max(1)
            );
            prepared.push((dcts, id, v, w));
        }
    }
    if prepared.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    for (dcts, id, v, w) in &mut prepared {
        g.bench_function(BenchmarkId::from_parameter(*dcts), |b| {
            b.iter_custom(|iters| timed(iters, |n| w.run(v, n).expect(id)));
        });
    }
    g.finish();
    // The target: rate(10 000) against rate(1).
    pair_with_first(&mut prepared, 1, |&k| k == 10_000, DcFanout::run);
    for (_, id, mut v, w) in prepared {
        finish(&id, w.teardown(&mut v));
    }
}

/// `sim_ooo_placement/{0,8,64}`: one iteration is one 64 KiB WRITE in 16
/// packets; 0 is two plain RC QPs (in order), 8 and 64 two OOO_DP QPs with
/// that reorder window (ConnectX-7 profiles).
fn sim_ooo_placement(c: &mut Criterion) {
    use verbsim_benches::dc::OooWrite;
    const GROUP: &str = "sim_ooo_placement";
    let mut prepared = Vec::new();
    for window in [0u32, 8, 64] {
        let id = format!("{GROUP}/{window}");
        let mut v = SimVerbs::new(SimConfig {
            trace_enabled: false,
            devices: vec![
                backend_sim::DeviceProfile::connectx7(),
                backend_sim::DeviceProfile::connectx7(),
            ],
            ooo_window: window,
            ..SimConfig::default()
        });
        let probe = |w: &mut OooWrite<SimVerbs>, v: &mut SimVerbs| w.run(v, 4);
        if let Some(w) = prepare(&id, &mut v, |v| OooWrite::new(v, window > 0), probe) {
            prepared.push((window, id, v, w));
        }
    }
    if prepared.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    for (window, id, v, w) in &mut prepared {
        g.bench_function(BenchmarkId::from_parameter(*window), |b| {
            b.iter_custom(|iters| timed(iters, |n| w.run(v, n).expect(id)));
        });
    }
    g.finish();
    // The targets: windows 8 and 64 against the in-order cost.
    pair_with_first(&mut prepared, 0, |_| true, OooWrite::run);
    for (_, id, mut v, w) in prepared {
        finish(&id, w.teardown(&mut v));
    }
}

/// `sim_scale/events`: [`SCALE_PAIRS`] RC pairs (100 000 QPs alive) with
/// 100 000 64 B WRITEs in flight; one iteration is one event the fabric
/// hands to the world (a delivery or a timer), so the rate compares with
/// `phys_heap_poppush/100k`. Before any traffic it prints the heap bytes
/// per idle QP (perf.md: at most 2 KiB plus its rings).
fn sim_scale(c: &mut Criterion) {
    const ID: &str = "sim_scale/events";
    let mut v = sim();
    let build = |v: &mut SimVerbs| {
        let w = MessageRate::new(v, MessageRateConfig::scale())?;
        let world = v.world();
        let (mut n, mut own, mut rings) = (0usize, 0usize, 0usize);
        for (o, r) in w.qps().filter_map(|q| world.qp_heap_bytes(*q)) {
            n += 1;
            own += o;
            rings += r;
        }
        let n1 = n.max(1);
        eprintln!(
            "sim_scale: {n} QPs alive; heap per idle QP = {} B (target <= 2048) plus {} B of rings",
            own / n1,
            rings / n1
        );
        Ok(w)
    };
    // The probe fills the pipeline: two requests per pair in flight.
    let fill = 2 * u64::from(SCALE_PAIRS);
    let Some(mut w) = prepare(ID, &mut v, build, |w, v| w.run(v, fill)) else {
        return;
    };
    let mut g = c.benchmark_group("sim_scale");
    g.throughput(Throughput::Elements(1));
    // Runs `iters` requests and scales the time to `iters` events.
    let per_event = |v: &mut SimVerbs, w: &mut MessageRate<SimVerbs>, iters: u64| {
        let e0 = v.world().events_handled();
        let t = timed(iters, |n| w.run(v, n).expect(ID));
        let events = (v.world().events_handled() - e0).max(1);
        t.mul_f64(iters as f64 / events as f64)
    };
    g.bench_function("events", |b| {
        b.iter_custom(|iters| per_event(&mut v, &mut w, iters));
    });
    g.finish();
    if bench_mode() && selected(ID) {
        let mut heap = EventHeap::new(100_000);
        pair(
            ID,
            "phys_heap_poppush/100k",
            |n| per_event(&mut v, &mut w, n),
            |n| {
                timed(n, |n| {
                    for _ in 0..n {
                        black_box(heap.pop_push());
                    }
                })
            },
        );
    }
    finish(ID, w.teardown(&mut v));
}

/// `sim_xrc_srq_fanin/{1,64,1024}`: one 64 B SEND per iteration, round
/// robin over that many XRC_INI QPs, all landing in one XRC SRQ.
fn sim_xrc_srq_fanin(c: &mut Criterion) {
    const GROUP: &str = "sim_xrc_srq_fanin";
    let mut prepared = Vec::new();
    for n in [1usize, 64, 1024] {
        let id = format!("{GROUP}/{n}");
        let mut v = sim();
        let probe = |w: &mut XrcFanIn<SimVerbs>, v: &mut SimVerbs| {
            w.run(v, PROBE_REQUESTS)?;
            w.drain(v)
        };
        if let Some(w) = prepare(&id, &mut v, |v| XrcFanIn::new(v, n), probe) {
            prepared.push((n, id, v, w));
        }
    }
    if prepared.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    for (n, id, v, w) in &mut prepared {
        g.bench_function(BenchmarkId::from_parameter(*n), |b| {
            b.iter_custom(|iters| timed(iters, |k| w.run(v, k).expect(id)));
        });
    }
    g.finish();
    // The target: rate(1 024) against rate(1).
    pair_with_first(&mut prepared, 1, |&k| k == 1024, XrcFanIn::run);
    for (_, id, mut v, w) in prepared {
        finish(&id, w.teardown(&mut v));
    }
}

/// The drop-in library of this profile: the cdylib cargo built with this
/// bench (`target/release/deps/`), or the one `cargo build --release -p
/// verbsim-shim` put one level up.
fn shim_lib() -> Option<PathBuf> {
    std::env::current_exe().ok().and_then(|e| {
        let deps = e.parent()?;
        let here = deps.join("libverbsim_shim.so");
        Some(if here.is_file() {
            here
        } else {
            deps.parent()?.join("libverbsim_shim.so")
        })
    })
}

/// `shim_post_poll/{direct,shim}`: the `sim_rc_write_msg_rate/64` workload
/// through `SimVerbs` directly and through the drop-in library's C ABI
/// (`ibv_post_send`/`ibv_poll_cq` through the context's ops, the library
/// loaded with `dlopen`), side by side; bench-report prints the cost ratio.
/// The library is `libverbsim_shim.so` of this profile (`cargo build
/// --release -p verbsim-shim`); without it the `shim` case is skipped.
fn shim_post_poll(c: &mut Criterion) {
    let mut v = sim();
    let id = "shim_post_poll/direct";
    let probe = |w: &mut MessageRate<SimVerbs>, v: &mut SimVerbs| {
        w.run(v, PROBE_REQUESTS)?;
        w.drain(v)
    };
    let Some(mut direct) = prepare(
        id,
        &mut v,
        |v| MessageRate::new(v, MessageRateConfig::rc_write_64()),
        probe,
    ) else {
        return;
    };
    let lib = shim_lib();
    let shim = match lib.as_deref().map(verbsim_shim::driver::WriteRate::new) {
        Some(Ok(mut w)) => match w.run(PROBE_REQUESTS) {
            Ok(()) => Some(w),
            Err(e) => {
                eprintln!("SKIP shim_post_poll/shim: {e}");
                None
            }
        },
        Some(Err(e)) => {
            eprintln!(
                "SKIP shim_post_poll/shim: {e} (build it: cargo build --release -p verbsim-shim)"
            );
            None
        }
        None => None,
    };
    let mut g = c.benchmark_group("shim_post_poll");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::from_parameter("direct"), |b| {
        b.iter_custom(|iters| timed(iters, |n| direct.run(&mut v, n).expect(id)));
    });
    if let Some(mut w) = shim {
        g.bench_function(BenchmarkId::from_parameter("shim"), |b| {
            b.iter_custom(|iters| timed(iters, |n| w.run(n).expect("shim_post_poll/shim")));
        });
        g.finish();
        pair(
            "shim_post_poll/shim",
            id,
            |n| timed(n, |n| w.run(n).expect("shim_post_poll/shim")),
            rate_step(&mut v, &mut direct, id),
        );
    } else {
        g.finish();
    }
    finish(id, direct.teardown(&mut v));
}

/// Round trips of one `ibv_rc_pingpong` run at least: criterion asks for
/// as few as 1 per sample, too few for the program's `usec/iter` (which
/// includes its first, cold, round trip) to mean much.
const MIN_ROUND_TRIPS: u64 = 200;

/// The shared fabric of this bench run: a socket of its own, so
/// concurrent runs do not meet.
fn bench_fabric() -> String {
    format!("/tmp/verbsim-fabric-bench-{}.sock", std::process::id())
}

/// The release `verbsim` next to this bench's profile directory, with the
/// shim next to it (what `verbsim exec` loads).
fn release_verbsim() -> Result<PathBuf, String> {
    let dir = fabric::profile_dir().ok_or("cannot find this bench's target directory")?;
    let verbsim = fabric::file_in(&dir, "verbsim").ok_or_else(|| {
        format!(
            "no {}/verbsim (build it: cargo build --release -p verbsim-cli -p verbsim-shim)",
            dir.display()
        )
    })?;
    fabric::file_in(&dir, "libverbsim_shim.so").ok_or_else(|| {
        format!(
            "no {}/libverbsim_shim.so (build it: cargo build --release -p verbsim-shim)",
            dir.display()
        )
    })?;
    Ok(verbsim)
}

/// `fabric_pingpong_rate/{local,fabric}`: 64 B RC SEND ping-pong, one
/// iteration one round trip. `local`: both QPs in this process through the
/// drop-in library's C ABI ([`verbsim_shim::driver::SendPingPong`], the
/// library `dlopen`ed as for `shim_post_poll`). `fabric`: Debian's
/// `ibv_rc_pingpong -s 64` as server and client, two processes through
/// `verbsim exec --fabric` (release `verbsim` and shim); the time is the
/// client's `usec/iter` (wall clock, set-up excluded) over at least
/// [`MIN_ROUND_TRIPS`]. `relay_floor`: the same round trip through three
/// processes doing only what the fabric's mechanism does (a sleeping relay
/// woken by an eventfd doorbell, sides spinning on shared memory), no
/// simulator ([`RelayFloor`]): the least the fabric's design can cost here;
/// `relay_floor_spinning`: the same with a relay that never sleeps and
/// doorbells nobody rings, which the fabric must not do when idle.
/// Skipped with a SKIP line when `ibv_rc_pingpong` (Debian's
/// ibverbs-utils) or the release builds are missing.
fn fabric_pingpong_rate(c: &mut Criterion) {
    const GROUP: &str = "fabric_pingpong_rate";
    let local = if selected(&format!("{GROUP}/local")) {
        match shim_lib()
            .as_deref()
            .map(verbsim_shim::driver::SendPingPong::new)
        {
            Some(Ok(mut p)) => match p.run(PROBE_REQUESTS) {
                Ok(()) => Some(p),
                Err(e) => {
                    eprintln!("SKIP {GROUP}/local: {e}");
                    None
                }
            },
            Some(Err(e)) => {
                eprintln!(
                    "SKIP {GROUP}/local: {e} (build it: cargo build --release -p verbsim-shim)"
                );
                None
            }
            None => None,
        }
    } else {
        None
    };
    let pair = if selected(&format!("{GROUP}/fabric")) {
        let found = fabric::on_path("ibv_rc_pingpong")
            .ok_or_else(|| "ibv_rc_pingpong is not installed (Debian's ibverbs-utils)".to_owned())
            .and_then(|program| {
                let pair = PingPongPair {
                    verbsim: release_verbsim()?,
                    program,
                    fabric: bench_fabric(),
                };
                pair.run(PROBE_REQUESTS)?;
                Ok(pair)
            });
        match found {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("SKIP {GROUP}/fabric: {e}");
                None
            }
        }
    } else {
        None
    };
    let floors: Vec<(&str, RelayFloor)> = [
        ("relay_floor", RelayWait::Sleep),
        ("relay_floor_spinning", RelayWait::Spin),
    ]
    .into_iter()
    .filter(|(id, _)| selected(&format!("{GROUP}/{id}")))
    .filter_map(|(id, wait)| {
        let started = std::env::current_exe()
            .map_err(|e| format!("current_exe: {e}"))
            .and_then(|exe| RelayFloor::start(&exe, &[], wait))
            .and_then(|mut f| f.run(PROBE_REQUESTS).map(|()| f));
        match started {
            Ok(f) => Some((id, f)),
            Err(e) => {
                eprintln!("SKIP {GROUP}/{id}: {e}");
                None
            }
        }
    })
    .collect();
    if local.is_none() && pair.is_none() && floors.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    if let Some(mut p) = local {
        g.bench_function(BenchmarkId::from_parameter("local"), |b| {
            b.iter_custom(|iters| timed(iters, |n| p.run(n).expect("fabric_pingpong_rate/local")));
        });
    }
    for (id, mut f) in floors {
        g.bench_function(BenchmarkId::from_parameter(id), |b| {
            b.iter_custom(|iters| {
                timed(iters, |n| {
                    f.run(n)
                        .unwrap_or_else(|e| panic!("fabric_pingpong_rate/{id}: {e}"))
                })
            });
        });
    }
    if let Some(pair) = pair {
        g.bench_function(BenchmarkId::from_parameter("fabric"), |b| {
            b.iter_custom(|iters| {
                let usec = pair
                    .run(iters.max(MIN_ROUND_TRIPS))
                    .expect("fabric_pingpong_rate/fabric");
                Duration::from_secs_f64(usec * 1e-6 * iters as f64)
            });
        });
    }
    g.finish();
}

/// `fabric_verb_cost/{local,fabric}_{poll_cq,query_port}`: the cost of one
/// cheap verb through the drop-in library, in process and across
/// processes. Each side is a child process (this binary again) that loads
/// the release shim and calls the verb N times on request
/// ([`VerbCostChild`]): `local` without `VERBSIM_FABRIC` (a call into the
/// library), `fabric` with it (one RPC over the fabric's Unix socket, the
/// fabric started on demand by the release `verbsim`).
fn fabric_verb_cost(c: &mut Criterion) {
    const GROUP: &str = "fabric_verb_cost";
    if !selected(GROUP) {
        return;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("SKIP {GROUP}: cannot find this executable: {e}");
            return;
        }
    };
    let Some(shim) = shim_lib().filter(|p| p.is_file()) else {
        eprintln!(
            "SKIP {GROUP}: no release shim (build it: cargo build --release -p verbsim-shim)"
        );
        return;
    };
    let mut children = Vec::new();
    match VerbCostChild::start(&exe, &shim, &[]) {
        Ok(ch) => children.push(("local", ch)),
        Err(e) => eprintln!("SKIP {GROUP}/local_*: {e}"),
    }
    let fabric_env = release_verbsim().map(|v| (bench_fabric(), v.to_string_lossy().into_owned()));
    match fabric_env.and_then(|(sock, cmd)| {
        VerbCostChild::start(
            &exe,
            &shim,
            &[("VERBSIM_FABRIC", &sock), ("VERBSIM_FABRIC_CMD", &cmd)],
        )
    }) {
        Ok(ch) => children.push(("fabric", ch)),
        Err(e) => eprintln!("SKIP {GROUP}/fabric_*: {e}"),
    }
    if children.is_empty() {
        return;
    }
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    for (place, child) in &mut children {
        for verb in [CheapVerb::PollCq, CheapVerb::QueryPort] {
            let id = format!("{place}_{}", verb.word());
            g.bench_function(BenchmarkId::from_parameter(&id), |b| {
                b.iter_custom(|iters| {
                    child
                        .time(verb, iters)
                        .unwrap_or_else(|e| panic!("{GROUP}/{id}: {e}"))
                });
            });
        }
    }
    g.finish();
}

/// The child side of [`fabric_verb_cost`]: loads `shim`, says `READY` (or
/// why not) and serves requests on stdin/stdout; returns the exit status.
fn verb_cost_child(shim: &Path) -> i32 {
    let mut out = std::io::stdout().lock();
    let mut v = match verbsim_shim::driver::VerbCost::new(shim) {
        Ok(v) => v,
        Err(e) => {
            let _ = writeln!(out, "ERR {e}");
            return 1;
        }
    };
    if writeln!(out, "READY").and_then(|()| out.flush()).is_err() {
        return 1;
    }
    let served = fabric::serve_requests(std::io::stdin().lock(), out, |verb, n| match verb {
        CheapVerb::PollCq => v.poll_empty(n),
        CheapVerb::QueryPort => v.query_port(n),
    });
    i32::from(served.is_err())
}

/// Messages per sample of `fabric_perftest`'s bandwidth cases (each
/// sample starts a perftest pair, so fewer would time the start-up).
const PERFTEST_BW_MESSAGES: u64 = 2000;

/// Round trips per sample of `fabric_perftest`'s latency cases.
const PERFTEST_LAT_ITERS: u64 = 1000;

/// `fabric_perftest/{local,fabric}_{write_bw,write_lat}`: Debian's
/// perftest as server and client processes on the shared fabric
/// (`ib_write_bw -s 65536`, `ib_write_lat -s 2`, release `verbsim exec
/// --fabric`) beside `verbsim perf` running the same workload in one
/// process (`write_bw -s 65536 --post-list 1`, `write_lat -s 2`), both
/// wall clock. One iteration is one message (bandwidth: the time per 64
/// KiB message at the reported average bandwidth) or one `t_typical`
/// (latency); each sample is one run of the programs. Skipped with a SKIP
/// line when perftest or the release builds are missing.
fn fabric_perftest(c: &mut Criterion) {
    const GROUP: &str = "fabric_perftest";
    if !selected(GROUP) {
        return;
    }
    let pair = match release_verbsim() {
        Ok(verbsim) => PerftestPair {
            verbsim,
            fabric: bench_fabric(),
        },
        Err(e) => {
            eprintln!("SKIP {GROUP}: {e}");
            return;
        }
    };
    let have_perftest = ["ib_write_bw", "ib_write_lat"]
        .iter()
        .all(|p| fabric::on_path(p).is_some());
    if !have_perftest {
        eprintln!("SKIP {GROUP}/fabric_*: perftest is not installed (Debian's perftest)");
    }
    type Case = fn(&PerftestPair, u64) -> Result<Duration, String>;
    let cases: [(&str, u64, Case, bool); 4] = [
        (
            "local_write_bw",
            PERFTEST_BW_MESSAGES,
            PerftestPair::local_write_bw,
            true,
        ),
        (
            "fabric_write_bw",
            PERFTEST_BW_MESSAGES,
            PerftestPair::write_bw,
            have_perftest,
        ),
        (
            "local_write_lat",
            PERFTEST_LAT_ITERS,
            PerftestPair::local_write_lat,
            true,
        ),
        (
            "fabric_write_lat",
            PERFTEST_LAT_ITERS,
            PerftestPair::write_lat,
            have_perftest,
        ),
    ];
    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(1));
    g.sample_size(10);
    for (name, n, run, ok) in cases {
        if !ok || !selected(&format!("{GROUP}/{name}")) {
            continue;
        }
        if let Err(e) = run(&pair, n) {
            eprintln!("SKIP {GROUP}/{name}: {e}");
            continue;
        }
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                let per = run(&pair, n).unwrap_or_else(|e| panic!("{GROUP}/{name}: {e}"));
                Duration::from_secs_f64(per.as_secs_f64() * iters as f64)
            });
        });
    }
    g.finish();
}

/// The criterion groups; `criterion_group!` defines undocumented `pub fn`s.
#[allow(missing_docs, unreachable_pub)]
mod groups {
    use super::*;

    criterion_group! {
        name = calibration;
        config = config();
        targets = phys_memcpy_hot, phys_memcpy_rand, phys_chacha8_u64, phys_heap_poppush
    }

    criterion_group! {
        name = simulator;
        config = config();
        targets = sim_qp_lifecycle_rate, sim_modify_qp_rate, sim_rc_write_msg_rate, sim_send_recv_bw,
            sim_read_rate, sim_atomic_rate, sim_fault_overhead, sim_dc_fanout, sim_ooo_placement,
            sim_xrc_srq_fanin, sim_scale, shim_post_poll
    }

    criterion_group! {
        name = shared_fabric;
        config = config();
        targets = fabric_pingpong_rate, fabric_verb_cost, fabric_perftest
    }
}

/// `criterion_main!`, plus the child modes: with [`fabric::CHILD_ENV`] set
/// this binary is [`fabric_verb_cost`]'s child, with
/// [`verbsim_shim::fabric::floor::CHILD_ENV`] the relay floor's relay or
/// echoing side, not a benchmark.
fn main() {
    if let Some(code) = verbsim_shim::fabric::floor::child_main() {
        std::process::exit(code);
    }
    if let Some(shim) = std::env::var_os(fabric::CHILD_ENV) {
        std::process::exit(verb_cost_child(Path::new(&shim)));
    }
    groups::calibration();
    groups::simulator();
    groups::shared_fabric();
    Criterion::default().configure_from_args().final_summary();
}
