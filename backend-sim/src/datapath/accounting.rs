//! Work-queue slot accounting (data-path §1.2 "SQ occupancy").

/// Posting failed because every slot is in use (`ENOMEM` at post time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueFull;

/// Which work-queue slots are in use, as mlx5 counts them (M5-QP
/// `mlx5_wq_overflow`, M5-CQ): a WQE's slot is freed only when a CQE for it
/// **or for a later WQE of the same queue** is polled, so a send queue
/// posting only unsignalled WRs fills up and then refuses posts with
/// `ENOMEM` (at least one signalled WR per `max_send_wr` is needed).
///
/// WQEs are numbered by a 64-bit posting index that never wraps in
/// practice; `head` is the next index to post and `tail` the oldest
/// unfreed one, so `head - tail` slots are in use. The same type serves a
/// receive queue (every receive WQE completes, so its CQE frees it).
///
/// # Divergence from hardware
///
/// None intended: the simulator frees slots when the covering CQE is
/// polled, not when the operation finishes (§1.2 recommendation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SqAccounting {
    head: u64,
    tail: u64,
    capacity: u32,
}

impl SqAccounting {
    /// An empty queue of `capacity` slots (the QP's actual `max_send_wr`).
    pub const fn new(capacity: u32) -> Self {
        Self {
            head: 0,
            tail: 0,
            capacity,
        }
    }

    /// Takes a slot for a new WQE and returns its posting index.
    ///
    /// # Errors
    ///
    /// [`QueueFull`] when `outstanding() == capacity`.
    pub fn post(&mut self) -> Result<u64, QueueFull> {
        if self.outstanding() >= self.capacity {
            return Err(QueueFull);
        }
        let index = self.head;
        self.head += 1;
        Ok(index)
    }

    /// A CQE for WQE `index` was polled: it and every earlier WQE free their
    /// slots (`tail = index + 1`; an older CQE polled late changes nothing).
    ///
    /// # Panics
    ///
    /// If `index` was never posted (an invariant violation in the caller).
    pub fn complete_through(&mut self, index: u64) {
        assert!(
            index < self.head,
            "CQE for WQE {index} never posted (head {})",
            self.head
        );
        self.tail = self.tail.max(index + 1);
    }

    /// Slots in use.
    pub const fn outstanding(&self) -> u32 {
        (self.head - self.tail) as u32
    }

    /// The number of slots.
    pub const fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The posting index the next WQE will get.
    pub const fn head(&self) -> u64 {
        self.head
    }

    /// The oldest WQE whose slot is not yet freed.
    pub const fn tail(&self) -> u64 {
        self.tail
    }

    /// Entering RESET discards every WQE without completions and resets the
    /// producer/consumer indices (qp-state-machine §7); the capacity stays.
    pub fn reset(&mut self) {
        self.head = 0;
        self.tail = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsignalled_posts_fill_the_queue_sq_occupancy() {
        // Goal: §1.2 SQ occupancy: slots free only when a covering CQE is
        // polled, so max_send_wr unsignalled WRs fill the SQ and the next post
        // fails (ENOMEM at post time).
        // Method: capacity 4, post 4 (none completes), the 5th fails.
        let mut sq = SqAccounting::new(4);
        for i in 0..4 {
            assert_eq!(sq.post(), Ok(i));
        }
        assert_eq!(sq.outstanding(), 4);
        assert_eq!(sq.post(), Err(QueueFull));
    }

    #[test]
    fn later_cqe_frees_earlier_slots_tail_is_index_plus_one() {
        // Goal: "a WQE slot is freed only when a CQE for it or for a later WQE
        // of the same SQ is polled (tail = wqe_head[idx] + 1)".
        // Method: post 4, poll the CQE of WQE 2 (signalled), then a stale CQE
        // of WQE 0 (no effect), then WQE 3.
        let mut sq = SqAccounting::new(4);
        for _ in 0..4 {
            sq.post().expect("room");
        }
        sq.complete_through(2);
        assert_eq!((sq.tail(), sq.outstanding()), (3, 1));
        sq.complete_through(0);
        assert_eq!(sq.outstanding(), 1, "an older CQE frees nothing more");
        assert_eq!(sq.post(), Ok(4));
        sq.complete_through(4);
        assert_eq!(sq.outstanding(), 0);
        sq.reset();
        assert_eq!((sq.head(), sq.tail(), sq.capacity()), (0, 0, 4));
    }

    #[test]
    #[should_panic(expected = "never posted")]
    fn completing_an_unposted_wqe_is_an_invariant_violation() {
        // Goal: R10(c): a CQE for a WQE never posted is a caller bug → panic.
        // Method: complete index 0 on an empty queue.
        SqAccounting::new(1).complete_through(0);
    }
}
