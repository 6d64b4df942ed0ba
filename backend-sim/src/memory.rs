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
use core::ops::Range;

/// Memory lent to the simulator for the lifetime of one MR.
///
/// The simulator reads it (SEND, WRITE and READ-response sources, atomics)
/// and writes it (receives, WRITE and READ targets, atomics) only inside
/// verb calls, as the executor runs, by copies through [`read`] and
/// [`write`]; memory in the simulator's own address space may also offer
/// an in-place view ([`as_slice`]), which the simulator never keeps past a
/// call. The implementer promises that the memory stays valid, [`len`]
/// bytes long, until the value is dropped, which happens when the MR's slot
/// is freed (`ibv_dereg_mr`, or the last posted request naming a
/// deregistered MR is released).
///
/// Memory in another process (the shared fabric's clients) implements only
/// the copies; a copy that cannot be made (the process is gone) writes
/// nothing, and a read says so ([`try_read`]): the simulator then delivers
/// nothing of it (a SEND's receive does not complete, a READ response or
/// an atomic's answer is lost), never made-up bytes.
///
/// [`try_read`]: ExternalMemory::try_read
///
/// [`read`]: ExternalMemory::read
/// [`write`]: ExternalMemory::write
/// [`as_slice`]: ExternalMemory::as_slice
/// [`len`]: ExternalMemory::len
pub trait ExternalMemory: Send + fmt::Debug {
    /// The length in bytes.
    fn len(&self) -> usize;
    /// Whether the memory is empty (an MR never is).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `dst.len()` bytes from `offset` into `dst`
    /// (`offset + dst.len() <= len()`, checked by the caller).
    fn read(&self, offset: usize, dst: &mut [u8]);
    /// Copies `src` to `offset` (`offset + src.len() <= len()`).
    fn write(&mut self, offset: usize, src: &[u8]);
    /// [`read`], saying whether the bytes could be read at all: false when
    /// the memory is gone (its process died), so that the simulator puts
    /// nothing in their place. The default reads and says true.
    ///
    /// [`read`]: ExternalMemory::read
    fn try_read(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.read(offset, dst);
        true
    }
    /// The bytes in place, if they are in this address space.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
    /// The bytes in place, writable, if they are in this address space.
    fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        None
    }
}

/// The caller's memory after `ibv_dereg_mr` gave it back while requests
/// in flight still named it: reads zeroes, takes no writes, allocates
/// nothing (an implicit ODP MR spans the whole address space).
#[derive(Debug)]
pub(crate) struct Gone(pub(crate) usize);

impl ExternalMemory for Gone {
    fn len(&self) -> usize {
        self.0
    }
    fn read(&self, _offset: usize, dst: &mut [u8]) {
        dst.fill(0);
    }
    fn write(&mut self, _offset: usize, _src: &[u8]) {}
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

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Owned(v) => v.len(),
            Self::External(e) => e.len(),
        }
    }

    /// The bytes in place, where they can be seen so.
    pub(crate) fn slice(&self) -> Option<&[u8]> {
        match self {
            Self::Owned(v) => Some(v),
            Self::External(e) => e.as_slice(),
        }
    }

    /// The bytes in place, writable, where they can be seen so.
    pub(crate) fn slice_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Self::Owned(v) => Some(v),
            Self::External(e) => e.as_mut_slice(),
        }
    }

    /// Copies bytes at `offset` into `dst`.
    #[inline]
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) {
        match self {
            Self::Owned(v) => dst.copy_from_slice(&v[offset..offset + dst.len()]),
            Self::External(e) => e.read(offset, dst),
        }
    }

    /// Copies bytes at `offset` into `dst`; false (and `dst` unspecified)
    /// when the lender's memory could not be read ([`ExternalMemory::try_read`]).
    #[inline]
    pub(crate) fn try_read(&self, offset: usize, dst: &mut [u8]) -> bool {
        match self {
            Self::Owned(v) => {
                dst.copy_from_slice(&v[offset..offset + dst.len()]);
                true
            }
            Self::External(e) => e.try_read(offset, dst),
        }
    }

    /// Copies `src` to `offset`.
    #[inline]
    pub(crate) fn write(&mut self, offset: usize, src: &[u8]) {
        match self {
            Self::Owned(v) => v[offset..offset + src.len()].copy_from_slice(src),
            Self::External(e) => e.write(offset, src),
        }
    }

    /// Copies the bytes of `src` to `dst` within this memory (the ranges
    /// may overlap, as `memmove`).
    pub(crate) fn copy_within(&mut self, src: Range<usize>, dst: usize) {
        if let Some(v) = self.slice_mut() {
            v.copy_within(src, dst);
            return;
        }
        let mut bounce = vec![0u8; src.len()];
        self.read(src.start, &mut bounce);
        self.write(dst, &bounce);
    }
}

impl fmt::Debug for MrMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Owned(v) => write!(f, "Owned({} bytes)", v.len()),
            Self::External(e) => write!(f, "External({} bytes, {e:?})", e.len()),
        }
    }
}
