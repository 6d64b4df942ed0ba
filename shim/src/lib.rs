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
//!
//! # Layout: three layers, imports only pointing down
//!
//! The crate has the shape of a user-space provider (rdma-core's rxe is
//! the model). Top to bottom:
//!
//! * `abi/`, the C boundary's entry points with no logic of their own:
//!   the generated stubs of unsupported functions (`stubs.rs`, written by
//!   `gen-stubs.py`), the pure helpers (`helpers.rs`), the kernel-ABI
//!   conversions (`kern_abi.rs`) and `ibv_import_*` (`import.rs`).
//! * `provider/`, the provider's logic. At its bottom the process's
//!   registry, `state.rs` (the engine, every pointer handed to C, the
//!   `Fail`/`Res` errno conventions, the device list, the fd watcher),
//!   over `records.rs` (what the registry keeps beside its objects) and
//!   `fds.rs` (eventfds). Above it the verb families: `device.rs`,
//!   `events.rs`, `parent.rs`, `qpex.rs` (the per-QP allocation and the
//!   `ibv_wr_*` builder), `mlx5.rs` (the `mlx5dv_qp_ex` builders, raw
//!   WQEs, mlx5's creation checks), `cqex.rs`, `objects.rs` (PDs, MRs,
//!   channels, CQs, SRQs, XRCDs, AHs), `datapath.rs` (post and poll, with
//!   the post-time checks), `qp.rs`, `dm.rs`, `ext.rs`, `addressing.rs`.
//!   At its top `context.rs` (the `verbs_context` and the op table that
//!   names every family's ops), `mlx5dv.rs` (libmlx5's entry points),
//!   `rdmacm/` (librdmacm) and `rsocket/` (rsockets over the verbs). The
//!   verb families keep their `export!` entry points beside their logic,
//!   as rxe keeps its verbs beside its ops table.
//! * The transport: [`fabric`] (the `Engine`: the world in this process
//!   or the shared fabric), `config.rs` (the environment), `appmem.rs`
//!   (the program's memory lent to either).
//!
//! Under all three, the primitives every function C calls uses: [`sys`]
//! (the generated C layouts), `guard.rs` (panics caught, `errno`, logging)
//! and `export.rs` (the symbol-version macros). [`driver`] is no part of
//! the library: a C client that loads it with `dlopen`, for benchmarks.
//! `shim/tests/layers.rs` keeps the shape: no import cycle between these
//! modules, no import from a lower layer into a higher one, no
//! hand-written file over 800 lines.
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
