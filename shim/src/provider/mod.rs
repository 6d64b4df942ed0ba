//! The middle layer: the provider's objects, queues, events, rdma_cm and
//! rsockets over the transport.

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
