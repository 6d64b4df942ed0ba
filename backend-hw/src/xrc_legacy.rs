//! Bookkeeping for the legacy OFED XRC receive-QP API, which upstream
//! libibverbs no longer has.
//!
//! The emulation (in `hw.rs`) creates an `IBV_QPT_XRC_RECV` QP in an XRCD
//! (`ibv_create_qp_ex`) or opens an existing one by number (`ibv_open_qp`);
//! this module only keeps, per receive QP, the set of simulated processes
//! ([`ProcessId`]) registered with it and the QP handle itself. It is a pure
//! data structure, generic over the handle, so it is tested without a device.
//!
//! Rules (those of the legacy API): the creating process is registered;
//! registering twice is `EEXIST`; unregistering a process that is not
//! registered, or an unknown QP, is `EINVAL`; when the last process
//! unregisters, the entry is removed and its handle handed back so that the
//! caller destroys the QP.

use std::collections::{BTreeMap, BTreeSet};

use verbs_api::errno::{EEXIST, EINVAL};
use verbs_api::ProcessId;

/// Identifies a legacy receive QP: the device it lives on and its number
/// (QP numbers are unique per device, whichever XRCD handle names them).
pub(crate) type RcvQpKey = (String, u32);

#[derive(Debug)]
struct Entry<T> {
    qp: T,
    /// The XRCD handle id it was created or opened through.
    xrcd_id: u64,
    processes: BTreeSet<ProcessId>,
}

/// The registration table. `T` is the QP handle kept alive while any
/// process is registered.
#[derive(Debug)]
pub(crate) struct LegacyXrcRegistry<T> {
    entries: BTreeMap<RcvQpKey, Entry<T>>,
}

impl<T> Default for LegacyXrcRegistry<T> {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
        }
    }
}

impl<T> LegacyXrcRegistry<T> {
    /// Records a receive QP just created (or opened) by `process`, which is
    /// registered with it. `EEXIST` if the key is already present.
    pub(crate) fn insert(
        &mut self,
        key: RcvQpKey,
        xrcd_id: u64,
        process: ProcessId,
        qp: T,
    ) -> Result<(), i32> {
        if self.entries.contains_key(&key) {
            return Err(EEXIST);
        }
        self.entries.insert(
            key,
            Entry {
                qp,
                xrcd_id,
                processes: BTreeSet::from([process]),
            },
        );
        Ok(())
    }

    /// The handle of a known receive QP.
    pub(crate) fn get(&self, key: &RcvQpKey) -> Option<&T> {
        self.entries.get(key).map(|e| &e.qp)
    }

    /// `true` when the key is known.
    pub(crate) fn contains(&self, key: &RcvQpKey) -> bool {
        self.entries.contains_key(key)
    }

    /// Registers `process` with a known QP: `EINVAL` for an unknown QP,
    /// `EEXIST` if already registered.
    pub(crate) fn register(&mut self, key: &RcvQpKey, process: ProcessId) -> Result<(), i32> {
        let e = self.entries.get_mut(key).ok_or(EINVAL)?;
        if e.processes.insert(process) {
            Ok(())
        } else {
            Err(EEXIST)
        }
    }

    /// Unregisters `process`. Returns the handle when that was the last
    /// registration (the entry is gone; the caller destroys the QP).
    pub(crate) fn unregister(
        &mut self,
        key: &RcvQpKey,
        process: ProcessId,
    ) -> Result<Option<T>, i32> {
        let e = self.entries.get_mut(key).ok_or(EINVAL)?;
        if !e.processes.remove(&process) {
            return Err(EINVAL);
        }
        if e.processes.is_empty() {
            Ok(self.entries.remove(key).map(|e| e.qp))
        } else {
            Ok(None)
        }
    }

    /// How many processes are registered with the QP (0 if unknown).
    #[cfg_attr(not(test), allow(dead_code))] // for diagnostics; used by the tests
    pub(crate) fn count(&self, key: &RcvQpKey) -> usize {
        self.entries.get(key).map_or(0, |e| e.processes.len())
    }

    /// `true` while `process` is registered with any receive QP created or
    /// opened through the XRCD handle `xrcd_id` (closing the domain is then
    /// `EBUSY`).
    pub(crate) fn process_uses_xrcd(&self, xrcd_id: u64, process: ProcessId) -> bool {
        self.entries
            .values()
            .any(|e| e.xrcd_id == xrcd_id && e.processes.contains(&process))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> RcvQpKey {
        ("mlx5_0".to_string(), n)
    }

    #[test]
    fn last_unregistration_hands_back_the_qp() {
        let (a, b) = (ProcessId(1), ProcessId(2));
        let mut r = LegacyXrcRegistry::default();
        r.insert(key(7), 1, a, "qp7").unwrap();
        assert_eq!(r.count(&key(7)), 1);
        r.register(&key(7), b).unwrap();
        assert_eq!(r.count(&key(7)), 2);
        assert_eq!(r.unregister(&key(7), a), Ok(None));
        assert!(r.contains(&key(7)));
        assert_eq!(r.unregister(&key(7), b), Ok(Some("qp7")));
        assert!(!r.contains(&key(7)));
        assert_eq!(r.count(&key(7)), 0);
    }

    #[test]
    fn errors_follow_the_legacy_api() {
        let (a, b) = (ProcessId(1), ProcessId(2));
        let mut r = LegacyXrcRegistry::default();
        assert_eq!(r.register(&key(1), a), Err(EINVAL));
        assert_eq!(r.unregister(&key(1), a), Err(EINVAL));
        r.insert(key(1), 9, a, ()).unwrap();
        assert_eq!(r.insert(key(1), 9, b, ()), Err(EEXIST));
        assert_eq!(r.register(&key(1), a), Err(EEXIST));
        assert_eq!(r.unregister(&key(1), b), Err(EINVAL));
        assert_eq!(r.count(&key(1)), 1, "a failed call changes nothing");
    }

    #[test]
    fn domain_busy_only_for_registered_processes() {
        let (a, b) = (ProcessId(1), ProcessId(2));
        let mut r = LegacyXrcRegistry::default();
        r.insert(key(3), 5, a, ()).unwrap();
        assert!(r.process_uses_xrcd(5, a));
        assert!(!r.process_uses_xrcd(5, b));
        assert!(!r.process_uses_xrcd(6, a));
        r.register(&key(3), b).unwrap();
        assert_eq!(r.unregister(&key(3), a), Ok(None));
        assert!(!r.process_uses_xrcd(5, a));
        assert!(r.process_uses_xrcd(5, b));
    }

    #[test]
    fn same_number_on_two_devices_is_two_qps() {
        let a = ProcessId(1);
        let mut r = LegacyXrcRegistry::default();
        r.insert(("mlx5_0".into(), 4), 1, a, 'x').unwrap();
        r.insert(("mlx5_1".into(), 4), 2, a, 'y').unwrap();
        assert_eq!(r.get(&("mlx5_1".into(), 4)), Some(&'y'));
    }
}
