//! # verbs-api
//!
//! One [`Verbs`] trait over the RDMA verbs API (libibverbs, mlx5 direct
//! verbs, librdmacm), with backend-neutral value types, one [`Error`] type,
//! and the QP transition table as pure data.
//!
//! Two backends implement it: `backend-sim` (a deterministic, seeded model
//! of an RDMA NIC and fabric) and `backend-hw` (libibverbs through
//! `rdma-sys`). Code written generic over `V: Verbs` runs on both, so a test
//! written against the simulator means the same on a ConnectX NIC.
//!
//! ## Conventions
//!
//! * Every method names the C function it mirrors; argument structs carry
//!   the C field names (`qp_state`, `max_send_wr`, `qp_access_flags`).
//! * Enums and flag sets know their C names ([`QpState::name`],
//!   [`AccessFlags::from_names`]) and keep unknown values as data
//!   (`Unknown(u32)`), never panicking on a value from hardware.
//! * `modify_qp` takes the state and an explicit [`QpAttrMask`] at run
//!   time, so illegal transitions can be attempted and compared.
//! * Work requests use raw scatter/gather entries (`{addr, length, lkey}`)
//!   and `{remote_addr, rkey}` exactly as on hardware: bad keys and
//!   out-of-range addresses are expressible, and produce the spec's errors.
//! * Posting is `unsafe fn` with the hardware contract in both backends.
//!
//! ## Errors
//!
//! [`Error`] carries the [`Verb`], an [`ErrorKind`] (the errno class both
//! backends agree on), the raw errno and a message. A verb a backend does
//! not implement returns [`ErrorKind::Unsupported`] with `ENOSYS`
//! ([`Error::is_not_implemented`]).
#![deny(unsafe_code)]

#[macro_use]
mod macros;

mod cm;
mod connect;
mod control;
mod device;
mod error;
mod ext;
mod mlx5dv;
mod qp;
mod resources;
pub mod transitions;
mod verbs;
mod wr;

pub use cm::*;
pub use connect::{connect_qp, ConnectOptions, Endpoint};
pub use control::*;
pub use device::*;
pub use error::*;
pub use ext::*;
pub use mlx5dv::*;
pub use qp::*;
pub use resources::*;
pub use transitions::*;
pub use verbs::*;
pub use wr::*;
