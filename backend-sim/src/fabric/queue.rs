//! The event queue: small `Copy` events ordered by `(time, sequence)`, and
//! the timer events the data path schedules in it.

use heap_entry::Entry;

use super::time::SimInstant;

/// A min-queue of events keyed by `(due time, insertion sequence)`.
///
/// Events due at the same instant come out in the order they were pushed:
/// every push takes the next value of a counter that never repeats, so the
/// key is unique and no tie is ever left to the heap's internal order.
/// The heap's storage is reused, so a queue in steady state does not
/// allocate. The heap is the queue's own (a binary min-heap in a `Vec`,
/// the children of slot `i` in slots `2i + 1` and `2i + 2`), so that
/// replacing the earliest event costs one look at its children when it
/// stays first. The number of queued events is bounded by the limit given at
/// construction: exceeding it is an error, not unbounded memory.
#[derive(Clone, Debug)]
pub struct EventQueue<E: Copy> {
    heap: Vec<Entry<E>>,
    next_seq: u64,
    limit: usize,
}

/// Returned by [`EventQueue::push`] when the queue already holds its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFull {
    /// The configured limit.
    pub limit: usize,
}

impl core::fmt::Display for QueueFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "event queue full ({} events)", self.limit)
    }
}

impl std::error::Error for QueueFull {}

impl<E: Copy> EventQueue<E> {
    /// An empty queue that holds at most `limit` events.
    pub fn new(limit: usize) -> Self {
        Self {
            heap: Vec::new(),
            next_seq: 0,
            limit,
        }
    }

    /// Schedules `event` at `at` and returns its sequence number.
    ///
    /// # Errors
    ///
    /// [`QueueFull`] when the queue already holds its limit.
    pub fn push(&mut self, at: SimInstant, event: E) -> Result<u64, QueueFull> {
        if self.heap.len() >= self.limit {
            return Err(QueueFull { limit: self.limit });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.insert(Entry {
            at: at.0,
            seq,
            event,
        });
        Ok(seq)
    }

    /// Takes the next sequence number without queueing anything, for an
    /// event kept outside the heap (in a FIFO whose head alone is in the
    /// heap, pushed with [`Self::push_reserved`]).
    pub(super) fn reserve_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Queues `event` under a sequence number from [`Self::reserve_seq`]
    /// (each used at most once while queued, so keys stay unique).
    pub(super) fn push_reserved(
        &mut self,
        at: SimInstant,
        seq: u64,
        event: E,
    ) -> Result<(), QueueFull> {
        debug_assert!(seq < self.next_seq);
        if self.heap.len() >= self.limit {
            return Err(QueueFull { limit: self.limit });
        }
        self.insert(Entry {
            at: at.0,
            seq,
            event,
        });
        Ok(())
    }

    /// The due time of the earliest event.
    pub fn next_time(&self) -> Option<SimInstant> {
        self.heap.first().map(|e| SimInstant(e.at))
    }

    /// Removes and returns the earliest event if it is due at or before
    /// `now`.
    pub fn pop_due(&mut self, now: SimInstant) -> Option<(SimInstant, E)> {
        if self.heap.first()?.at > now.0 {
            return None;
        }
        self.pop_next()
    }

    /// Removes and returns the earliest event, however far ahead it is.
    pub fn pop_next(&mut self) -> Option<(SimInstant, E)> {
        let last = self.heap.pop()?;
        let Some(top) = self.heap.first().copied() else {
            return Some((SimInstant(last.at), last.event));
        };
        self.sift_down_from_top(last);
        Some((SimInstant(top.at), top.event))
    }

    /// The earliest event if it is due at or before `now`, left in place.
    #[inline]
    pub(super) fn peek_due(&self, now: SimInstant) -> Option<(SimInstant, E)> {
        let top = self.heap.first()?;
        (top.at <= now.0).then_some((SimInstant(top.at), top.event))
    }

    /// Replaces the earliest event by `event` due at `at` with the reserved
    /// sequence number `seq`: one sift instead of a pop and a push, and the
    /// same order as popping it and pushing the replacement.
    #[inline]
    pub(super) fn replace_top(&mut self, at: SimInstant, seq: u64, event: E) {
        debug_assert!(seq < self.next_seq);
        if !self.heap.is_empty() {
            self.sift_down_from_top(Entry {
                at: at.0,
                seq,
                event,
            });
        }
    }

    /// Adds `entry` at the bottom and moves it up past every later parent.
    #[inline]
    fn insert(&mut self, entry: Entry<E>) {
        let mut i = self.heap.len();
        self.heap.push(entry);
        let heap = &mut self.heap[..];
        let key = entry.key();
        while i > 0 {
            let parent = (i - 1) / 2;
            if heap[parent].key() < key {
                break;
            }
            heap[i] = heap[parent];
            i = parent;
        }
        heap[i] = entry;
    }

    /// Puts `entry` in the top slot (the heap is not empty) and moves it
    /// down past every earlier child.
    #[inline]
    fn sift_down_from_top(&mut self, entry: Entry<E>) {
        let heap = &mut self.heap[..];
        let (len, key) = (heap.len(), entry.key());
        let mut i = 0;
        loop {
            let mut child = 2 * i + 1;
            if child >= len {
                break;
            }
            if child + 1 < len && heap[child + 1].key() < heap[child].key() {
                child += 1;
            }
            if key < heap[child].key() {
                break;
            }
            heap[i] = heap[child];
            i = child;
        }
        heap[i] = entry;
    }

    /// Events queued.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when no event is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The most events the queue may hold.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Drops every queued event (the sequence counter keeps counting).
    pub fn clear(&mut self) {
        self.heap.clear();
    }
}

/// The heap entry, compared by key only so the event type needs no `Ord`.
mod heap_entry {
    #[derive(Clone, Copy, Debug)]
    pub(super) struct Entry<E> {
        pub(super) at: u64,
        pub(super) seq: u64,
        pub(super) event: E,
    }

    impl<E> Entry<E> {
        /// The queue's order: due time, then sequence (unique), as one
        /// number (compared in one step).
        #[inline]
        pub(super) fn key(&self) -> u128 {
            (u128::from(self.at) << 64) | u128::from(self.seq)
        }
    }
}

/// The timers of the data path, in a fixed order so they can index an
/// array (`[T; TimerKind::COUNT]`) and be iterated as [`TimerKind::VALUES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKind {
    /// Requester: local ACK timeout (4.096 µs × 2^timeout) expired;
    /// retransmit from the oldest unacknowledged PSN or fail with
    /// `RETRY_EXC_ERR` (data-path.md §5.2).
    AckTimeout,
    /// Requester: the RNR wait announced by an RNR NAK is over; resend.
    RnrRetry,
    /// CQ event moderation (`cq_count`/`cq_period`) period expired.
    CqModeration,
    /// A world-level action scheduled at a virtual time (a scripted fault
    /// such as destroying a remote QP while packets are in flight); `owner`
    /// names the action in the world's own table.
    Scheduled,
}

impl TimerKind {
    /// Every kind, in index order.
    pub const VALUES: [Self; 4] = [
        Self::AckTimeout,
        Self::RnrRetry,
        Self::CqModeration,
        Self::Scheduled,
    ];
    /// The number of kinds.
    pub const COUNT: usize = Self::VALUES.len();

    /// The kind's position in [`Self::VALUES`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short lower-case name for traces.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AckTimeout => "ack_timeout",
            Self::RnrRetry => "rnr_retry",
            Self::CqModeration => "cq_moderation",
            Self::Scheduled => "scheduled",
        }
    }
}

/// A timer expiry delivered through the fabric's event queue.
///
/// Timers are never removed from the queue. To cancel one, the owner bumps
/// its own generation counter for that kind and ignores an expiry whose
/// `generation` is not the current one (lazy cancellation: a stale entry
/// costs one pop, and cancelling costs no search).
///
/// Re-arming on every event (an ACK timeout pushed back by each ACK) would
/// leave one stale entry per ACK in the queue until its far-off due time.
/// Keep at most one entry per owner and kind instead: store the current
/// deadline in the owner, schedule an entry only when none is queued, and
/// when it fires before a deadline that has since moved later, schedule it
/// again at that deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerEvent {
    /// Which timer.
    pub kind: TimerKind,
    /// The owner's index in its arena (a QP slot, a CQ slot), as the data
    /// path numbers it.
    pub owner: u32,
    /// The owner's generation for this timer when it was armed.
    pub generation: u32,
}

impl core::fmt::Display for TimerEvent {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "timer {} owner={} gen={}",
            self.kind.name(),
            self.owner,
            self.generation
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_orders_by_time_then_sequence() {
        // Goal: events come out by due time, and events due at the same time
        // come out in push order.
        // Method: push out of order with several ties, pop everything, and
        // compare with the expected sequence.
        let mut q = EventQueue::new(16);
        for (t, e) in [
            (30, 'a'),
            (10, 'b'),
            (30, 'c'),
            (20, 'd'),
            (10, 'e'),
            (30, 'f'),
        ] {
            q.push(SimInstant(t), e).unwrap();
        }
        assert_eq!(q.next_time(), Some(SimInstant(10)));
        let mut out = Vec::new();
        while let Some((t, e)) = q.pop_next() {
            out.push((t.0, e));
        }
        assert_eq!(
            out,
            [
                (10, 'b'),
                (10, 'e'),
                (20, 'd'),
                (30, 'a'),
                (30, 'c'),
                (30, 'f')
            ]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn pop_due_respects_now_and_limit_is_enforced() {
        // Goal: pop_due never returns an event from the future, and a full
        // queue refuses pushes instead of growing.
        // Method: queue two events, pop at an earlier and then later `now`;
        // fill a queue of limit 2 and push a third.
        let mut q = EventQueue::new(2);
        q.push(SimInstant(5), 1u8).unwrap();
        q.push(SimInstant(9), 2u8).unwrap();
        assert_eq!(q.push(SimInstant(1), 3u8), Err(QueueFull { limit: 2 }));
        assert_eq!(q.pop_due(SimInstant(4)), None);
        assert_eq!(q.pop_due(SimInstant(5)), Some((SimInstant(5), 1)));
        assert_eq!(q.pop_due(SimInstant(8)), None);
        assert_eq!(q.pop_due(SimInstant(100)), Some((SimInstant(9), 2)));
        assert_eq!(q.pop_due(SimInstant(100)), None);
    }

    #[test]
    fn heap_matches_a_sorted_model() {
        // Goal: the queue's own heap hands events out in (time, sequence)
        // order whatever mix of pushes, reserved pushes, top replacements
        // and pops led there, as a sorted set of the same keys would.
        // Method: 20 000 pseudo-random operations with many equal times,
        // mirrored on a BTreeMap keyed by (time, sequence); compare every
        // peek and pop and the length after each step.
        let mut q = EventQueue::new(1 << 12);
        let mut model = std::collections::BTreeMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..20_000u32 {
            let r = next();
            let at = SimInstant(r % 16);
            match (r >> 8) % 4 {
                0 | 1 if model.len() < 1 << 12 => {
                    let seq = q.push(at, step).unwrap();
                    model.insert((at.0, seq), step);
                }
                2 if !model.is_empty() => {
                    // A replacement due no earlier than the top it
                    // replaces, as the fabric's port heads are.
                    let (&(top_at, top_seq), _) = model.iter().next().unwrap();
                    let at = SimInstant(top_at.max(at.0));
                    let seq = q.reserve_seq();
                    q.replace_top(at, seq, step);
                    model.remove(&(top_at, top_seq));
                    model.insert((at.0, seq), step);
                }
                _ => {
                    let want = model.pop_first().map(|((t, _), e)| (SimInstant(t), e));
                    assert_eq!(q.pop_next(), want);
                }
            }
            let first = model.iter().next().map(|(&(t, _), &e)| (SimInstant(t), e));
            assert_eq!(q.peek_due(SimInstant(u64::MAX)), first);
            assert_eq!(q.len(), model.len());
        }
        while let Some(((t, _), e)) = model.pop_first() {
            assert_eq!(q.pop_next(), Some((SimInstant(t), e)));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn timer_kinds_index_their_table() {
        // Goal: VALUES lists every kind at its own index.
        // Method: check index() against the position in VALUES.
        for (i, k) in TimerKind::VALUES.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }
}
