//! rsockets (`rsocket(7)`): librdmacm's socket API over the simulated
//! connection manager and verbs.
//!
//! * [`poll`]: `rpoll` and `rselect` over rsockets and ordinary file
//!   descriptors in one call (the CM event channel's and completion
//!   channels' fds included: the shim keeps those readable from the
//!   simulator's state, so a wait re-reads it while it sleeps).
//!
//! An rsocket's number is a real file descriptor the library owns (an
//! `eventfd`), so it never collides with a descriptor of the program's.

pub(crate) mod poll;
pub(crate) mod table;
