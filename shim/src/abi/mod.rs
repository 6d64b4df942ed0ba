//! The top layer: C entry points that hold no provider logic of their own.

mod helpers;
mod import;
mod kern_abi;
mod stubs;
