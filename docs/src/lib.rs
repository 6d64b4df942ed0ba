//! The verbsim documentation as a crate, for rustdoc. The user guide's
//! Rust examples are compiled and run by the crate `docs/user-examples`,
//! which depends on the `verbsim` crate alone, as a user's crate does.
#![deny(unsafe_code)]

/// The script format reference (no Rust examples; included for rustdoc).
#[doc = include_str!("../script-format.md")]
pub mod script_format {}

/// The architecture overview.
#[doc = include_str!("../architecture.md")]
pub mod architecture {}

/// Semantics and the divergence-from-hardware table.
#[doc = include_str!("../divergence.md")]
pub mod divergence {}

/// The hardware backend: build, device selection, benchmarks against perftest.
#[doc = include_str!("../hardware.md")]
pub mod hardware {}

/// mlx5 direct verbs: DC (DCI/DCT, keys, streams) and OOO data placement.
#[doc = include_str!("../dc-ooo.md")]
pub mod dc_ooo {}

/// XRC and the legacy XRC API in the simulator, and their divergences.
#[doc = include_str!("../xrc.md")]
pub mod xrc {}

/// The simulated connection manager (rdma_cm): address plan, states,
/// events in virtual time, `rdma_create_qp`, divergences.
#[doc = include_str!("../rdma-cm.md")]
pub mod rdma_cm {}

/// Swarm testing: random valid and invalid calls with invariants after
/// each, shrinking to scripts, `verbsim fuzz` and its coverage counters.
#[doc = include_str!("../swarm.md")]
pub mod swarm {}
