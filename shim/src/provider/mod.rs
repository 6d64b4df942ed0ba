//! The middle layer: the provider's objects, queues, events, rdma_cm and
//! rsockets over the transport, in three tiers whose imports point down
//! (`shim/tests/layers.rs` checks them):
//!
//! * top: [`context`] (the `verbs_context` and the op table naming every
//!   family's ops), [`mlx5dv`], [`rdmacm`], [`rsocket`];
//! * the verb families, each importing only those before it: [`device`],
//!   [`events`], [`parent`], [`qpex`], [`mlx5`], [`cqex`], [`objects`],
//!   [`datapath`], [`qp`], [`dm`], [`ext`], [`addressing`];
//! * the registry: [`state`] over [`records`] and [`fds`].

pub(crate) mod addressing;
pub(crate) mod context;
pub(crate) mod cqex;
pub(crate) mod datapath;
pub(crate) mod device;
pub(crate) mod dm;
pub(crate) mod events;
pub(crate) mod ext;
pub(crate) mod fds;
pub(crate) mod mlx5;
pub(crate) mod mlx5dv;
pub(crate) mod objects;
pub(crate) mod parent;
pub(crate) mod qp;
pub(crate) mod qpex;
pub(crate) mod rdmacm;
pub(crate) mod records;
pub(crate) mod rsocket;
pub(crate) mod state;
