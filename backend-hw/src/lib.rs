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
//!
//! ## Not implemented (return `ENOSYS` "not implemented by the hw backend")
//!
//! `rdma_cm` verbs, `ibv_get_async_event`/`ibv_ack_async_event`,
//! `ibv_get_cq_event` (non-blocking needs `O_NONBLOCK` on the channel fd),
//! and `post_send` of DC work requests (`dc: Some`, which need the
//! `ibv_wr_*` API with `mlx5dv_wr_set_dc_addr`; the inline helper is
//! restated in `ffi::mlx5dv` but not wired yet).

mod errors;
mod ffi;
mod hw;
mod xrc_legacy;

pub use hw::{
    HwAh, HwCmChannel, HwCmId, HwCompChannel, HwContext, HwCq, HwMr, HwPd, HwQp, HwSrq, HwVerbs,
    HwXrcd,
};
