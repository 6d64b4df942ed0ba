//! Where an MR's bytes live: in the World, or in memory the caller lends.
//!
//! `ibv_reg_mr` on hardware names the application's own buffer; the NIC
//! reads and writes it by DMA while the program runs. The simulator's
//! ordinary MRs own a zeroed buffer instead ([`World::reg_mr`]), which is
//! what the trait's users want. The drop-in `libibverbs.so.1` needs the
//! hardware meaning: [`World::reg_mr_external`] registers memory the caller
//! owns through the safe [`ExternalMemory`] trait. The `unsafe` that turns
//! a C pointer into such memory lives in the drop-in library, not here.
//!
//! [`World::reg_mr`]: crate::World::reg_mr
//! [`World::reg_mr_external`]: crate::World::reg_mr_external

use core::fmt;
use core::ops::{Deref, DerefMut};

/// Memory lent to the simulator for the lifetime of one MR.
///
/// The simulator reads it (SEND, WRITE and READ-response sources, atomics)
/// and writes it (receives, WRITE and READ targets, atomics) only inside
/// verb calls, as the executor runs; it never keeps a slice past a call.
/// The implementer promises that the slices stay valid, `len` bytes long,
/// until the value is dropped, which happens when the MR's slot is freed
/// (`ibv_dereg_mr`, or the last posted request naming a deregistered MR is
/// released).
pub trait ExternalMemory: Send + fmt::Debug {
    /// The bytes, to read.
    fn as_slice(&self) -> &[u8];
    /// The bytes, to write.
    fn as_mut_slice(&mut self) -> &mut [u8];
}

/// An MR's bytes: owned by the World, or lent by the caller.
pub(crate) enum MrMemory {
    /// Zeroed bytes the World allocated (`World::reg_mr`).
    Owned(Vec<u8>),
    /// The caller's memory (`World::reg_mr_external`).
    External(Box<dyn ExternalMemory>),
}

impl MrMemory {
    /// Whether the bytes are the caller's.
    pub(crate) fn is_external(&self) -> bool {
        matches!(self, Self::External(_))
    }
}

impl fmt::Debug for MrMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Owned(v) => write!(f, "Owned({} bytes)", v.len()),
            Self::External(e) => write!(f, "External({} bytes, {e:?})", e.as_slice().len()),
        }
    }
}

impl Deref for MrMemory {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Owned(v) => v,
            Self::External(e) => e.as_slice(),
        }
    }
}

impl DerefMut for MrMemory {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Self::Owned(v) => v,
            Self::External(e) => e.as_mut_slice(),
        }
    }
}
