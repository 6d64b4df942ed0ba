//! verbsim: RDMA verbs, testable and measurable anywhere.
//!
//! One dependency for users (issue #17 item 5) instead of the workspace's
//! crate names:
//!
//! * [`api`] — the `Verbs` trait, its value types and errors, the QP
//!   transition table, `connect_qp` (crate `verbs-api`);
//! * [`sim`] — the deterministic, seeded simulator `SimVerbs` (crate
//!   `backend-sim`);
//! * [`conformance`] — the `.verbs` script runner, the swarm and its
//!   property-test strategy (crate `conformance`);
//! * `hw` (feature `hw`) — the hardware backend over libibverbs, librdmacm
//!   and mlx5dv (crate `backend-hw`);
//! * [`prelude`] — the trait and the types most tests name.
//!
//! ```
//! use verbsim::prelude::*;
//!
//! let mut sim = SimVerbs::from_env(); // VERBS_SIM_SEED, else seed 0
//! let ctx = sim.open_device(0, ProcessId(0)).unwrap();
//! let pd = sim.alloc_pd(&ctx).unwrap();
//! sim.dealloc_pd(&pd).unwrap();
//! sim.close_device(&ctx).unwrap();
//! assert!(sim.live_objects().is_empty());
//! ```
#![deny(unsafe_code)]

pub use backend_sim as sim;
pub use conformance;
pub use verbs_api as api;

/// The hardware backend (`HwVerbs`) over libibverbs, librdmacm and mlx5dv.
#[cfg(feature = "hw")]
pub use backend_hw as hw;

/// The trait, its types and the simulator, for `use verbsim::prelude::*`.
pub mod prelude {
    pub use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
    pub use verbs_api::*;

    #[cfg(feature = "hw")]
    pub use backend_hw::HwVerbs;
}
