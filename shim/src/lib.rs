//! # verbsim-shim: a drop-in `libibverbs.so.1` over the simulator
//!
//! Built as a shared object whose SONAME is `libibverbs.so.1` and whose
//! exports carry rdma-core's symbol versions (`IBVERBS_1.0` … `1.14`,
//! `IBVERBS_PRIVATE_34`, `MLX5_1.*`, `RDMACM_1.*`, `EFA_1.*`). Put it (with
//! `libmlx5.so.1`, `librdmacm.so.1` and `libefa.so.1` as symlinks to the
//! same file, so one world serves them all) first on `LD_LIBRARY_PATH` and an
//! unmodified RDMA program runs on verbsim's simulator: `verbsim exec`
//! does exactly that.
//!
//! * One simulated world per process, configured from the environment
//!   (the `VERBSIM_*` variables of docs/drop-in.md).
//! * Objects are handed to C with the exact layouts of rdma-core 44's
//!   headers ([`sys`]), including the op tables the inline wrappers of
//!   `verbs.h` call through (`post_send`, `poll_cq`, `create_qp_ex`,
//!   `create_cq_ex`, the `ibv_wr_*` and `ibv_cq_ex` callbacks).
//! * Memory is the application's: an MR describes the caller's buffer and
//!   the simulator reads and writes it in place.
//! * Completion channels and contexts own real `eventfd`s, readable exactly
//!   while an event is pending; a blocking `ibv_get_cq_event` runs
//!   virtual time forward.
//! * Every entry point catches panics: no unwinding into C. Pointers the
//!   library did not hand out are `EINVAL`, never dereferenced.
//! * Functions the simulator does not model exist and fail with
//!   `EOPNOTSUPP` (NULL with `errno` for pointer returns), so programs that
//!   probe them skip.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

mod abi;
mod appmem;
mod config;
mod export;
pub mod fabric;
mod guard;
mod provider;

pub mod driver;

/// rdma-core 44's C layouts (bindgen output; see the module's header).
#[allow(
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unreachable_pub,
    unused_qualifications,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::use_self,
    clippy::undocumented_unsafe_blocks
)]
pub mod sys;
