//! rsockets (`rsocket(7)`): librdmacm's socket API over the simulated
//! connection manager and verbs.
//!
//! * [`api`]: `rsocket`, `rbind`, `rlisten`, `raccept`, `rconnect`,
//!   `rshutdown`, `rclose`, names, options, `rfcntl`.
//! * [`io`]: sending and receiving (`rsend` … `rreadv`) and direct
//!   placement (`riomap`, `riounmap`, `riowrite`).
//! * [`poll`]: `rpoll` and `rselect` over rsockets and ordinary file
//!   descriptors in one call (the CM event channel's and completion
//!   channels' fds included: the shim keeps those readable from the
//!   simulator's state, so a wait re-reads it while it sleeps).
//! * [`conn`]: one connection's resources and the stream protocol (see
//!   there); [`cm`]: connection management; [`table`]: the sockets.
//!
//! An rsocket's number is a real file descriptor the library owns (an
//! `eventfd`), so it never collides with a descriptor of the program's;
//! as with rdma-core, it is not for `poll(2)` or `read(2)` themselves.
//! Everything runs over the shim's own simulator calls (no C entry point
//! is called back), on ids and channels of its own that the program
//! never sees. [`dgram`]: `SOCK_DGRAM` over UD.

pub(crate) mod api;
pub(crate) mod cm;
pub(crate) mod conn;
pub(crate) mod dgram;
pub(crate) mod io;
pub(crate) mod poll;
pub(crate) mod table;
