//! The user guide, compiled as a user's crate: every Rust example of
//! docs/user-guide.md is a doctest of this crate, which depends on the
//! `verbsim` crate alone (and on proptest, which the guide tells users to
//! add for §12).
#![doc = include_str!("../user-guide.md")]
#![deny(unsafe_code)]
