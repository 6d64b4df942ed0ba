//! # backend-hw
//!
//! The hardware backend of verbsim: [`HwVerbs`] implements
//! [`verbs_api::Verbs`] over libibverbs (and libmlx5 with the default `mlx5`
//! feature) through `rdma-sys` 0.3 plus a hand-written FFI layer
//! (`src/ffi/`: the header's `static inline` verbs restated, and the mlx5dv
//! items rdma-sys lacks, both checked against the installed C headers by
//! layout tests).
//!
//! On a machine without RDMA (no `ib_uverbs`, as on every development and CI
//! machine of this project) `ibv_get_device_list` fails with `ENOSYS`;
//! [`HwVerbs::new`] then returns [`verbs_api::ErrorKind::NoDevice`] with a
//! message naming the cause, and every verb fails the same way. Nothing
//! panics.
//!
//! ## Ownership, drop order and teardown policy
//!
//! * Every handle wraps an `Arc` of an inner that owns one C object and holds
//!   an `Arc` of each parent: QP → PD, send CQ, recv CQ, SRQ, XRCD; MR → PD;
//!   SRQ → PD, CQ, XRCD; CQ → completion channel; AH → PD; every object →
//!   its device context. A parent is therefore never destroyed in C before
//!   its children.
//! * In each inner the owned C object is the first field, so it is
//!   destroyed before the parents (later fields) are released. An MR is
//!   deregistered before its buffer is freed, and the buffer before the PD
//!   is released. A CQ is destroyed before its channel is released.
//! * The explicit destroy verbs (`dealloc_pd`, `destroy_qp`, …) report C's
//!   error (e.g. `EBUSY`) and leave the object intact; afterwards every
//!   clone of the handle is stale and using it is an `EINVAL` error.
//!   `close_device` is `EBUSY` while any object of the context is alive
//!   (C would leave them dangling).
//! * When the last handle is dropped without an explicit destroy, `Drop`
//!   destroys the object; if C refuses, the error is printed to stderr and
//!   the object leaked. Unlike rust-ibverbs we never panic in `Drop`: a
//!   panic during unwinding aborts, and a leak is recoverable.
//! * Handles are `!Send`: the backend is used from one thread (`&mut self`
//!   on every verb).
//! * Objects librdmacm creates for an `rdma_cm_id` (its device context,
//!   default PD, the QP of `rdma_create_qp` and the CQs and completion
//!   channels it creates when none are given) are *borrowed* handles: usable
//!   like any other, never destroyed through them (`EBUSY`), and marked
//!   stale when librdmacm destroys them (`rdma_destroy_qp`,
//!   `rdma_destroy_id`, or dropping the id's last handle, which destroys its
//!   QP first). A CM id keeps its event channel alive;
//!   `rdma_destroy_event_channel` is `EBUSY` while ids exist.
//!
//! ## Events (all non-blocking)
//!
//! `get_async_event`, `get_cq_event` and `rdma_get_cm_event` set
//! `O_NONBLOCK` on the descriptor they read (`async_fd`, the completion
//! channel's fd at creation, the CM channel's fd at creation) and return
//! `Ok(None)` on `EAGAIN`. Elements come back as the handles the user holds,
//! through a per-context registry of live QPs, CQs and SRQs by address (a
//! pointer is only a key; it is looked into only while libibverbs
//! guarantees it is live). libibverbs and librdmacm make destroy wait
//! *forever* for unacknowledged events; here an explicit destroy with events
//! outstanding is `EBUSY`, over-acknowledging is `EINVAL`, and `Drop`
//! acknowledges what is left before destroying. A CM event is copied out
//! (private data included) and its C event is kept until
//! `rdma_ack_cm_event`; the new id of a `CONNECT_REQUEST` becomes a new
//! [`HwCmId`].
//!
//! ## DC work requests
//!
//! `post_send` on a DCI goes through the extended-QP API (`ibv_wr_start`,
//! the opcode builder, `mlx5dv_wr_set_dc_addr[_stream]`,
//! `ibv_wr_set_sge_list`/`_inline_data_list`, `ibv_wr_complete`); the DCI
//! must be created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`. `bad_wr` differs
//! from `ibv_post_send` where the API forces it: checks the backend can
//! make up front stop at the offending request (the ones before it are
//! posted), but a failure only the provider sees fails `ibv_wr_complete`
//! and the **whole batch** is dropped (`bad_wr` = first of the batch).
//!
//! ## Thread safety
//!
//! Handles are `!Send` (they hold `Cell`s and raw pointers); the backend is
//! driven from one thread through `&mut self`, which also serialises
//! polling and posting as libibverbs requires per CQ/QP.
//!
//! ## rdma-sys 0.3 defects worked around (`src/ffi/`)
//!
//! * Its extended-context check compares `abi_compat` with `u32::MAX`
//!   instead of `UINTPTR_MAX`, so every extended verb fails or takes the
//!   legacy path on 64-bit; `ffi::verbs` restates those inlines.
//! * Its `ibv_create_srq_ex` turns an XRC SRQ request into a basic SRQ.
//! * Its inline verbs (`ibv_post_send`, `ibv_wr_*`, …) `unwrap()` provider
//!   function pointers; ours return `EOPNOTSUPP` for a NULL entry.
//! * Its `ibv_async_event::event_type` is a Rust enum, so an event type it
//!   lacks would be undefined behaviour; we hand libibverbs a struct with a
//!   `u32` there (`ffi::verbs::ibv_async_event_raw`, layout-tested).
//! * It binds no mlx5dv and no `fcntl`/socket address types: `ffi::mlx5dv`
//!   and `ffi::posix` declare the few items needed, layout-tested against
//!   the installed headers.
//!
//! librdmacm itself dereferences an id's device in `rdma_resolve_route`,
//! `rdma_connect`, `rdma_accept` and `rdma_create_qp` without checking it;
//! the backend answers `EINVAL` for an id not bound to a device yet.
//!
//! ## Known limits
//!
//! * After `RDMA_CM_EVENT_DEVICE_REMOVAL`, librdmacm may close the device
//!   context once its last id is gone; objects the user created on that
//!   context must be destroyed first.
//! * Legacy XRC receive QPs are emulated (see `xrc_legacy`).
//! * [`raw::RawWrite`] exists for the `hw_post_poll_overhead` benchmark.

mod backend;
mod cm;
mod convert;
mod create;
#[cfg(feature = "mlx5")]
mod dc;
mod dm;
mod errors;
mod events;
mod ext;
mod ffi;
mod handles;
mod hw;
#[cfg(feature = "mlx5")]
mod mlx5;
mod post;
pub mod raw;
mod registry;
mod sockaddr;
mod xrc_legacy;
mod xrcd;

pub use backend::HwVerbs;
pub use cm::{HwCmChannel, HwCmId};
pub use handles::{
    HwAh, HwCompChannel, HwContext, HwCq, HwDm, HwMr, HwMw, HwPd, HwQp, HwSrq, HwXrcd,
};
