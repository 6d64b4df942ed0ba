//! The application's memory lent to the simulator: what an MR over a
//! program's buffer reads and writes in place. A leaf of the transport
//! layer, used by the provider's MRs and by the fabric's tests alike.

use backend_sim::ExternalMemory;

/// The application's buffer, lent to the simulator for one MR.
#[derive(Debug)]
pub(crate) struct AppMemory {
    pub(crate) addr: usize,
    pub(crate) len: usize,
}

impl AppMemory {
    /// Memory at `addr`, `len` bytes, that outlives the MR it backs.
    pub(crate) fn new(addr: usize, len: usize) -> Self {
        Self { addr, len }
    }
}

// SAFETY: the buffer belongs to the application, which may touch it from
// any thread; the simulator only uses it under the shim's lock.
unsafe impl Send for AppMemory {}

impl AppMemory {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ibv_reg_mr`'s contract: the application keeps
        // [addr, addr+len) mapped until ibv_dereg_mr, which drops this
        // value; the simulator holds the slice only inside one verb call,
        // as a NIC's DMA reads it. Concurrent application writes are a
        // data race on hardware too (the verbs contract forbids them).
        unsafe { core::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`; the MR was registered with LOCAL_WRITE or
        // the simulator's access checks refuse the write before it happens.
        unsafe { core::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }
}

impl ExternalMemory for AppMemory {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.bytes()[offset..offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        self.bytes_mut()[offset..offset + src.len()].copy_from_slice(src);
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }
    fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        Some(self.bytes_mut())
    }
}
