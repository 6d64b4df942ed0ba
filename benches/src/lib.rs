//! # verbsim-benches
//!
//! The benchmark workloads of verbsim, generic over [`verbs_api::Verbs`]
//! (static dispatch), so the simulator and the hardware backend run the same
//! code; the calibration kernels (`phys_*`) the targets are ratios to; and
//! the ratio report.
//!
//! ## Quick start
//!
//! ```text
//! cargo bench -p verbsim-benches --bench sim                 # everything, full length
//! VERBSIM_BENCH_QUICK=1 cargo bench -p verbsim-benches --bench sim   # CI smoke run
//! cargo bench -p verbsim-benches --bench sim -- 'phys_|sim_qp_lifecycle|sim_modify'
//! cargo run -p verbsim-benches --bin bench-report           # the ratio table
//! ```
//!
//! `VERBSIM_BENCH_QUICK=1` shrinks every benchmark to 10 samples, 0.1 s of
//! warm-up and 0.3 s of measurement, so the whole binary runs in well under
//! two minutes on a 2-core machine; criterion's own `--warm-up-time`,
//! `--measurement-time` and `--sample-size` flags still override it.
//!
//! ## Benchmark ids (as `perf.md` names them)
//!
//! | id | workload |
//! |---|---|
//! | `phys_memcpy_hot/{64,4096,65536,1048576}` | [`calibration::HotCopy`] |
//! | `phys_memcpy_rand/{…}` | [`calibration::RandCopy`] over a touched 1 GiB span |
//! | `phys_chacha8_u64` | [`calibration::chacha8`] `next_u64` |
//! | `phys_heap_poppush/{1k,100k}` | [`calibration::EventHeap`] |
//! | `sim_qp_lifecycle_rate` | [`control::QpLifecycle`] |
//! | `sim_modify_qp_rate` | [`control::ModifyMix`] over [`control::ModifyPlan::standard`] |
//! | `sim_rc_write_msg_rate/{64,64_1GiB}` | [`data::MessageRate`] with [`data::MessageRateConfig::rc_write_64`] / [`data::MessageRateConfig::rc_write_64_1gib`] |
//! | `sim_send_recv_bw/{4K,64K,1M}` | [`data::SendRecvBw`] with [`data::SendRecvConfig::bw`] |
//! | `sim_read_rate` | [`data::MessageRate`] with [`data::MessageRateConfig::read_64`] |
//! | `sim_atomic_rate/{fadd,cswap}` | [`data::MessageRate`] with [`data::MessageRateConfig::atomic`] |
//! | `sim_fault_overhead/{none,faults}` | [`data::MessageRate`] with [`data::MessageRateConfig::fault_overhead`] (1 % drop, duplicate, delay through `sim_control`) |
//! | `sim_xrc_srq_fanin/{1,64,1024}` | [`xrc::XrcFanIn`]: that many XRC_INI QPs into one XRC SRQ, 64 B SEND |
//! | `fabric_pingpong_rate/{local,fabric}` | 64 B RC SEND ping-pong: both QPs in one process through the shim's C ABI / `ibv_rc_pingpong -s 64` as two processes on the shared fabric ([`fabric::PingPongPair`]) |
//! | `fabric_verb_cost/{local,fabric}_{poll_cq,query_port}` | one cheap verb in a child process ([`fabric::VerbCostChild`]), in process / as an RPC to the fabric |
//!
//! Every input is seeded (offset tables, modify plans, heap contents); only
//! the harness measures wall time. The data-path workloads also run over
//! several QP pairs and over UC and UD ([`data::Connection`]), which
//! `verbsim perf` exposes as `-q` and `-c`; the example `datapath` runs one
//! workload once on a fixed seed, for callgrind and for trace statistics.
//!
//! ## Ownership & cleanup
//!
//! A workload owns the verbs objects it creates and gives them back in its
//! `teardown`, which fails (`EBUSY` from `dealloc_pd`) if anything leaked.
//! Dropping a workload without `teardown` leaves the objects to the backend.
//!
//! ## Safety
//!
//! The crate denies `unsafe_code`; the two functions that post work
//! requests (`post_send`, `post_recv` are `unsafe fn`) allow it locally,
//! and [`data`] documents how the posting contract is kept.
#![deny(unsafe_code)]

pub mod calibration;
pub mod control;
pub mod data;
pub mod dc;
mod error;
pub mod fabric;
pub mod fixture;
pub mod paired;
pub mod report;
pub mod xrc;

pub use error::WorkloadError;

/// `true` when `VERBSIM_BENCH_QUICK` is set to anything but `0` or empty:
/// the benchmarks then run in smoke mode.
pub fn quick_mode() -> bool {
    std::env::var_os("VERBSIM_BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0")
}
