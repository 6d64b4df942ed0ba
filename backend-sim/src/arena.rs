//! A generational arena: objects live in a `Vec`, handles are
//! `(index, generation)` pairs, a stale handle never reaches a new object.

use core::sync::atomic::{AtomicU32, Ordering};

/// A slot: the generation counts how often it was reused, from the
/// arena's salt.
#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Objects of one kind, addressed by index and generation.
///
/// Freed slots are reused last-freed-first, which is deterministic.
#[derive(Debug)]
pub(crate) struct Arena<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
    /// The generation a new slot starts at: distinct for every arena made
    /// in this process, so a handle of one world (or one arena) names
    /// nothing in another, even at the same index (issue #12 item 6).
    salt: u32,
}

/// Arenas made so far in this process (for [`Arena::salt`]).
static ARENAS_MADE: AtomicU32 = AtomicU32::new(0);

/// Spreads consecutive arena numbers over the generation space (the 32-bit
/// golden-ratio constant is odd, so 2^32 arenas get distinct salts). Two
/// arenas' salts differ by far more than any slot is reused in a run, so a
/// foreign handle's generation matches a slot only after ~2^30 reuses.
const SALT_STEP: u32 = 0x9e37_79b9;

impl<T> Default for Arena<T> {
    fn default() -> Self {
        // The salt never reaches a trace (traces name QPs by number and
        // other objects by index), so it costs no determinism.
        let n = ARENAS_MADE.fetch_add(1, Ordering::Relaxed);
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            salt: n.wrapping_add(1).wrapping_mul(SALT_STEP),
        }
    }
}

impl<T> Arena<T> {
    /// Bytes one slot occupies in the arena's vector.
    pub(crate) const fn slot_bytes(&self) -> usize {
        size_of::<Slot<T>>()
    }

    /// Stores `value`, returning its `(index, generation)`.
    pub(crate) fn insert(&mut self, value: T) -> (u32, u32) {
        self.live += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            debug_assert!(slot.value.is_none());
            slot.value = Some(value);
            (index, slot.generation)
        } else {
            let index = u32::try_from(self.slots.len()).expect("arena index fits in u32");
            self.slots.push(Slot {
                generation: self.salt,
                value: Some(value),
            });
            (index, self.salt)
        }
    }

    /// The index the next `insert` will use (for keys derived from it).
    pub(crate) fn next_index(&self) -> u32 {
        match self.free.last() {
            Some(&i) => i,
            None => u32::try_from(self.slots.len()).expect("arena index fits in u32"),
        }
    }

    /// The live object at `(index, generation)`.
    pub(crate) fn get(&self, index: u32, generation: u32) -> Option<&T> {
        self.slots
            .get(index as usize)
            .filter(|s| s.generation == generation)
            .and_then(|s| s.value.as_ref())
    }

    /// The live object at `(index, generation)`, mutably.
    pub(crate) fn get_mut(&mut self, index: u32, generation: u32) -> Option<&mut T> {
        self.slots
            .get_mut(index as usize)
            .filter(|s| s.generation == generation)
            .and_then(|s| s.value.as_mut())
    }

    /// The live object at `index`, whatever its generation, with the generation.
    pub(crate) fn get_by_index(&self, index: u32) -> Option<(u32, &T)> {
        self.slots
            .get(index as usize)
            .and_then(|s| s.value.as_ref().map(|v| (s.generation, v)))
    }

    /// The live object at `index`, mutably, with its generation.
    pub(crate) fn get_by_index_mut(&mut self, index: u32) -> Option<(u32, &mut T)> {
        self.slots.get_mut(index as usize).and_then(|s| {
            let generation = s.generation;
            s.value.as_mut().map(|v| (generation, v))
        })
    }

    /// Removes the object at `(index, generation)`; its handles go stale.
    pub(crate) fn remove(&mut self, index: u32, generation: u32) -> Option<T> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.live -= 1;
        Some(value)
    }

    /// How many objects are alive.
    /// Two distinct live objects by index, both writable (for copying
    /// between two MRs without a bounce buffer); `None` if `a == b` or
    /// either slot is empty.
    pub(crate) fn pair_by_index_mut(&mut self, a: u32, b: u32) -> Option<(&mut T, &mut T)> {
        let (a, b) = (a as usize, b as usize);
        if a == b || a >= self.slots.len() || b >= self.slots.len() {
            return None;
        }
        let (lo, hi, swap) = if a < b { (a, b, false) } else { (b, a, true) };
        let (left, right) = self.slots.split_at_mut(hi);
        let x = left[lo].value.as_mut()?;
        let y = right[0].value.as_mut()?;
        Some(if swap { (y, x) } else { (x, y) })
    }

    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Every live object with its index and generation, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (i as u32, s.generation, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handle_does_not_reach_reused_slot() {
        // Goal: a handle to a removed object never finds the slot's new object.
        // Method: insert, remove, insert again into the same slot, look up both.
        let mut a = Arena::default();
        let (i, g) = a.insert("old");
        assert_eq!(a.remove(i, g), Some("old"));
        let (i2, g2) = a.insert("new");
        assert_eq!(i, i2);
        assert_ne!(g, g2);
        assert_eq!(a.get(i, g), None);
        assert_eq!(a.get(i2, g2), Some(&"new"));
        assert_eq!(a.len(), 1);
        assert_eq!(a.remove(i, g), None);
    }

    #[test]
    fn a_handle_of_another_arena_names_nothing() {
        // Goal: issue #12 item 6: two worlds' arenas at the same index do
        // not share handles. Method: the same insertions in two arenas.
        let mut a = Arena::default();
        let mut b = Arena::default();
        let (ia, ga) = a.insert(1);
        let (ib, gb) = b.insert(2);
        assert_eq!(ia, ib);
        assert_ne!(ga, gb);
        assert_eq!(b.get(ia, ga), None);
        assert_eq!(b.remove(ia, ga), None);
        assert_eq!(b.get(ib, gb), Some(&2));
    }
}
