//! The calibration kernels (`phys_*`): what this machine does per copy, per
//! random number and per event-queue operation, measured in the same binary
//! and the same run as the simulator benchmarks so that every target in
//! `perf.md` is a ratio of two numbers taken under the same load.
//!
//! The kernels live here (not in the bench file) so that the `verbsim perf`
//! command can measure them too.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The seed of every calibration input (offset tables, heap contents).
pub const CALIBRATION_SEED: u64 = 0x000c_a11b_7a7e;

/// Copy sizes of `phys_memcpy_hot` and `phys_memcpy_rand`.
pub const COPY_SIZES: [usize; 4] = [64, 4096, 65536, 1_048_576];

/// The span `phys_memcpy_rand` copies into: 1 GiB.
pub const RAND_SPAN_BYTES: usize = 1 << 30;

/// Entries of a random offset table: 2²⁰ (a 64 MiB footprint at 64 B per
/// copy, twice the last-level cache here, so revisits miss).
pub const RAND_TABLE_LEN: usize = 1 << 20;

/// Page size assumed when pre-touching buffers.
pub const PAGE_BYTES: usize = 4096;

/// `count` offsets in `[0, span - len]`, each a multiple of `align`, drawn
/// from ChaCha8 seeded with `seed`.
///
/// # Panics
/// If `len > span`, `align` is 0, or `span` exceeds `u32::MAX + 1`.
pub fn random_offsets(seed: u64, count: usize, span: usize, len: usize, align: usize) -> Vec<u32> {
    assert!(
        len <= span && align > 0 && span <= 1 << 32,
        "bad offset table shape"
    );
    let slots = ((span - len) / align + 1) as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| ((rng.next_u64() % slots) as usize * align) as u32)
        .collect()
}

/// `count` offsets walking `[0, span)` in steps of `len`, wrapping.
///
/// # Panics
/// If `len` is 0 or `len > span`.
pub fn sequential_offsets(count: usize, span: usize, len: usize) -> Vec<u32> {
    assert!(len > 0 && len <= span, "bad offset table shape");
    let slots = span / len;
    // A wrapping counter, not `i % slots` per entry: the tables hold a
    // million entries and are built once per workload, which otherwise
    // shows up in instruction counts of whole runs (callgrind).
    let mut slot = 0usize;
    (0..count)
        .map(|_| {
            let at = slot * len;
            slot += 1;
            if slot == slots {
                slot = 0;
            }
            at as u32
        })
        .collect()
}

/// Writes one byte per page so that later accesses never page-fault.
pub fn touch_pages(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(PAGE_BYTES) {
        buf[i] = 1;
    }
    black_box(buf);
}

/// `phys_memcpy_hot/N`: copies between two `N`-byte buffers that stay in
/// cache.
pub struct HotCopy {
    source: Vec<u8>,
    target: Vec<u8>,
}

impl HotCopy {
    /// Two buffers of `len` bytes, touched.
    pub fn new(len: usize) -> Self {
        Self {
            source: vec![0xa5; len],
            target: vec![0x5a; len],
        }
    }

    /// One copy.
    #[inline]
    pub fn copy(&mut self) {
        black_box(&mut self.target[..]).copy_from_slice(black_box(&self.source[..]));
    }
}

/// The 1 GiB span of `phys_memcpy_rand`, allocated and touched once.
pub struct RandSpan {
    span: Vec<u8>,
}

impl RandSpan {
    /// Allocates [`RAND_SPAN_BYTES`] and touches every page (about a quarter
    /// of a second; do it once per process).
    pub fn new() -> Self {
        let mut span = vec![0u8; RAND_SPAN_BYTES];
        touch_pages(&mut span);
        Self { span }
    }
}

impl Default for RandSpan {
    fn default() -> Self {
        Self::new()
    }
}

/// `phys_memcpy_rand/N`: copies `N` bytes from a hot source to a random
/// `min(N, 4096)`-aligned offset in the 1 GiB span, the offsets taken in
/// order from a seeded table (so no random number is drawn while timing).
/// The direction matches an RDMA WRITE spread over a large MR.
pub struct RandCopy {
    source: Vec<u8>,
    offsets: Vec<u32>,
    cursor: usize,
}

impl RandCopy {
    /// A copier of `len` bytes (at most [`RAND_SPAN_BYTES`]) into a [`RandSpan`].
    pub fn new(len: usize) -> Self {
        let offsets = random_offsets(
            CALIBRATION_SEED ^ len as u64,
            RAND_TABLE_LEN,
            RAND_SPAN_BYTES,
            len,
            len.min(PAGE_BYTES),
        );
        Self {
            source: vec![0xa5; len],
            offsets,
            cursor: 0,
        }
    }

    /// One copy into `span`, at the next offset of the table.
    #[inline]
    pub fn copy(&mut self, span: &mut RandSpan) {
        let at = self.offsets[self.cursor] as usize;
        self.cursor = (self.cursor + 1) & (RAND_TABLE_LEN - 1);
        let len = self.source.len();
        black_box(&mut span.span[at..at + len]).copy_from_slice(black_box(&self.source[..]));
    }
}

/// `phys_heap_poppush/{1k,100k}`: an event queue at steady size — pop the
/// earliest `(time, sequence)` and push one at `time + delay`, the delays
/// taken in order from a seeded table.
pub struct EventHeap {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    delays: Vec<u64>,
    cursor: usize,
    sequence: u64,
}

/// Entries of [`EventHeap`]'s delay table.
const DELAY_TABLE_LEN: usize = 1 << 16;

impl EventHeap {
    /// A heap of `size` events with seeded times in `0..1 ms` (ns).
    pub fn new(size: usize) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(CALIBRATION_SEED ^ size as u64);
        let heap = (0..size as u64)
            .map(|seq| Reverse((rng.next_u64() % 1_000_000, seq)))
            .collect();
        let delays = (0..DELAY_TABLE_LEN)
            .map(|_| rng.next_u64() % 1_000_000)
            .collect();
        Self {
            heap,
            delays,
            cursor: 0,
            sequence: size as u64,
        }
    }

    /// One pop and one push; returns the popped time.
    #[inline]
    pub fn pop_push(&mut self) -> u64 {
        let Some(Reverse((time, _))) = self.heap.pop() else {
            return 0;
        };
        let delay = self.delays[self.cursor];
        self.cursor = (self.cursor + 1) & (DELAY_TABLE_LEN - 1);
        self.heap.push(Reverse((time + delay, self.sequence)));
        self.sequence += 1;
        time
    }

    /// The number of events in the heap.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// `true` when the heap is empty.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// `phys_chacha8_u64`: the generator, seeded.
pub fn chacha8() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(CALIBRATION_SEED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_tables_stay_inside_and_aligned_and_repeat() {
        // Goal: every copy stays inside the span, aligned, and the table is
        // the same for the same seed. Method: check a table of each kind.
        let a = random_offsets(7, 10_000, 1 << 20, 4096, 4096);
        assert!(a
            .iter()
            .all(|&o| o as usize % 4096 == 0 && o as usize + 4096 <= 1 << 20));
        assert_eq!(a, random_offsets(7, 10_000, 1 << 20, 4096, 4096));
        assert_ne!(a, random_offsets(8, 10_000, 1 << 20, 4096, 4096));
        let s = sequential_offsets(10, 256, 64);
        assert_eq!(s, [0, 64, 128, 192, 0, 64, 128, 192, 0, 64]);
    }

    #[test]
    fn event_heap_keeps_its_size_and_time_order() {
        // Goal: pop+push is an event queue at steady size. Method: pop many
        // times; sizes never change and popped times never go back.
        let mut heap = EventHeap::new(1000);
        let mut last = 0;
        for _ in 0..100_000 {
            let t = heap.pop_push();
            assert!(t >= last);
            last = t;
        }
        assert_eq!(heap.len(), 1000);
    }
}
