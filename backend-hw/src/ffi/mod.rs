//! The raw C layer: every quirk of the C headers lives here, one module per
//! header (style rule R16).
//!
//! * [`verbs`] — the `static inline` verbs of `<infiniband/verbs.h>`
//!   (fast path and extended-context calls), restated once each, because
//!   rdma-sys 0.3's versions are unusable on 64-bit (see that module).
//! * [`mlx5dv`] — the mlx5 direct-verbs items of `<infiniband/mlx5dv.h>`
//!   that rdma-sys does not bind, declared by hand (feature `mlx5`).
//! * `layout` (tests only) — compares every hand-declared layout with the
//!   installed headers through a generated C program.
//!
//! Everything else (plain exported functions such as `ibv_alloc_pd`) is
//! called straight from `rdma_sys`.

pub(crate) mod posix;
pub(crate) mod verbs;

#[cfg(feature = "mlx5")]
pub(crate) mod mlx5dv;

#[cfg(all(test, feature = "mlx5"))]
mod layout;
