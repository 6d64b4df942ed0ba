//! Mapping the raw pointers in C events back to handles.
//!
//! `ibv_get_async_event` names a QP, CQ or SRQ by its C pointer,
//! `ibv_get_cq_event` names a CQ, and `rdma_get_cm_event` names
//! `rdma_cm_id`s. The backend answers with the *handle* the user holds, so
//! each context (and each CM event channel) keeps a [`PtrRegistry`]: C
//! address → `Weak` of the handle's inner.
//!
//! The registry never dereferences an address: it is only a key. A lookup
//! succeeds only if the inner is still alive *and* still owns a live object
//! at exactly that address ([`Live::is_live_at`]), so a destroyed object, or
//! an address the allocator gave to another object since, is never mistaken
//! for the handle. Entries whose inner is gone are pruned in amortised O(1).
//!
//! The classification of an async event's element (which member of
//! `ibv_async_event::element` is valid) follows `ibv_get_async_event` in
//! libibverbs, and is pure data ([`element_kind`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// What an inner says about the C object it owns.
pub(crate) trait Live {
    /// `true` while the inner owns a live C object at address `addr`.
    fn is_live_at(&self, addr: usize) -> bool;
}

/// C address → handle inner. See the module docs.
pub(crate) struct PtrRegistry<T> {
    map: BTreeMap<usize, Weak<T>>,
    /// Prune dead entries when the map reaches this size.
    prune_at: usize,
}

impl<T> Default for PtrRegistry<T> {
    fn default() -> Self {
        Self {
            map: BTreeMap::new(),
            prune_at: 16,
        }
    }
}

impl<T: Live> PtrRegistry<T> {
    /// Records that `obj` owns the C object at `addr` (replacing whatever an
    /// older, destroyed object at the same address left).
    pub(crate) fn insert(&mut self, addr: usize, obj: &Arc<T>) {
        self.map.insert(addr, Arc::downgrade(obj));
        if self.map.len() >= self.prune_at {
            self.map
                .retain(|&a, w| w.upgrade().is_some_and(|o| o.is_live_at(a)));
            self.prune_at = (self.map.len() * 2).max(16);
        }
    }

    /// The inner that owns the live object at `addr`, if any.
    pub(crate) fn get(&self, addr: usize) -> Option<Arc<T>> {
        let obj = self.map.get(&addr)?.upgrade()?;
        obj.is_live_at(addr).then_some(obj)
    }

    /// Forgets `addr` (after its object was destroyed).
    pub(crate) fn remove(&mut self, addr: usize) {
        self.map.remove(&addr);
    }

    /// Every live inner.
    #[cfg(test)]
    pub(crate) fn live(&self) -> Vec<Arc<T>> {
        self.map
            .iter()
            .filter_map(|(&a, w)| w.upgrade().filter(|o| o.is_live_at(a)))
            .collect()
    }

    /// Number of entries, live or not yet pruned.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Which member of `ibv_async_event::element` an event type fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ElementKind {
    Cq,
    Qp,
    Srq,
    Wq,
    /// `element.port_num` (port events).
    Port,
    /// The device (`IBV_EVENT_DEVICE_FATAL`, and types this crate does not
    /// know, whose element libibverbs also stores as `port_num`).
    Device,
}

/// The element kind of a raw `enum ibv_event_type` value, as
/// `ibv_get_async_event` decides it (and `ibv_ack_async_event` relies on).
pub(crate) fn element_kind(event_type: u32) -> ElementKind {
    match event_type {
        0 => ElementKind::Cq,                  // CQ_ERR
        1..=7 | 16 => ElementKind::Qp,         // QP_FATAL … PATH_MIG_ERR, QP_LAST_WQE_REACHED
        14 | 15 => ElementKind::Srq,           // SRQ_ERR, SRQ_LIMIT_REACHED
        19 => ElementKind::Wq,                 // WQ_FATAL
        9..=13 | 17 | 18 => ElementKind::Port, // PORT_ACTIVE … SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE
        _ => ElementKind::Device,              // DEVICE_FATAL (8) and unknown types
    }
}

/// An async event type `ibv_ack_async_event` counts against an object of
/// `kind` (any type of the class works: the ack only selects the counter).
pub(crate) fn ack_type_for(kind: ElementKind) -> u32 {
    match kind {
        ElementKind::Cq => 0,   // CQ_ERR
        ElementKind::Qp => 1,   // QP_FATAL
        ElementKind::Srq => 14, // SRQ_ERR
        ElementKind::Wq => 19,  // WQ_FATAL
        ElementKind::Port => 9, // PORT_ACTIVE (not counted)
        ElementKind::Device => 8,
    }
}

#[cfg(test)]
#[allow(clippy::arc_with_non_send_sync)] // the registry holds Weak<Arc> of !Sync inners, as in hw.rs
mod tests {
    use super::*;
    use core::cell::Cell;

    /// A stand-in inner: "owns" the object at `at` until `at` is set to 0.
    struct Fake {
        at: Cell<usize>,
    }
    impl Live for Fake {
        fn is_live_at(&self, addr: usize) -> bool {
            self.at.get() == addr && addr != 0
        }
    }
    fn fake(at: usize) -> Arc<Fake> {
        Arc::new(Fake { at: Cell::new(at) })
    }

    #[test]
    fn lookup_finds_only_live_objects_at_their_address() {
        // Goal: an event names a handle only while that handle's object is
        // alive at that address. Method: register, destroy, reuse, drop.
        let mut r = PtrRegistry::default();
        let a = fake(0x1000);
        r.insert(0x1000, &a);
        assert!(Arc::ptr_eq(&r.get(0x1000).unwrap(), &a));
        assert!(r.get(0x2000).is_none(), "unknown address");
        a.at.set(0); // destroyed through one handle; the inner lives on
        assert!(r.get(0x1000).is_none(), "destroyed object");
        let b = fake(0x1000); // the allocator reuses the address
        r.insert(0x1000, &b);
        assert!(Arc::ptr_eq(&r.get(0x1000).unwrap(), &b));
        drop(b); // last handle gone
        assert!(r.get(0x1000).is_none(), "dropped inner");
        r.remove(0x1000);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn dead_entries_are_pruned() {
        // Goal: the registry does not grow with objects long gone.
        let mut r = PtrRegistry::default();
        let keep = fake(1);
        r.insert(1, &keep);
        for i in 2..10_000 {
            r.insert(i, &fake(i)); // dropped at once
        }
        assert!(r.len() < 64, "{} entries left", r.len());
        assert_eq!(r.live().len(), 1);
    }

    #[test]
    fn element_kinds_follow_libibverbs() {
        // Goal: the union member read for each event type is the one
        // libibverbs wrote (reading the wrong one would be a bad pointer).
        assert_eq!(element_kind(0), ElementKind::Cq);
        for t in [1, 2, 3, 4, 5, 6, 7, 16] {
            assert_eq!(element_kind(t), ElementKind::Qp, "{t}");
        }
        assert_eq!(element_kind(14), ElementKind::Srq);
        assert_eq!(element_kind(15), ElementKind::Srq);
        assert_eq!(element_kind(19), ElementKind::Wq);
        for t in [9, 10, 11, 12, 13, 17, 18] {
            assert_eq!(element_kind(t), ElementKind::Port, "{t}");
        }
        assert_eq!(element_kind(8), ElementKind::Device);
        assert_eq!(element_kind(0x8000_0001), ElementKind::Device);
        for k in [
            ElementKind::Cq,
            ElementKind::Qp,
            ElementKind::Srq,
            ElementKind::Wq,
        ] {
            assert_eq!(element_kind(ack_type_for(k)), k);
        }
    }
}
