//! Consecutive failed rounds per object (ServiceSet, AdapterPlugin), for the retry backoff. An
//! entry leaves when a round succeeds or the object is gone, so the map holds only live, failing
//! objects. The waits are [`retry::ROUNDS`].

use crate::retry;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::watcher;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Failed rounds by object, keyed by `Q`.
pub struct Failures<Q>(Mutex<HashMap<Q, u32>>);

impl<Q> Default for Failures<Q> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<Q: Clone + Eq + Hash> Failures<Q> {
    /// Counts a failed round of `key`; returns how many in a row and how long to wait before
    /// the next.
    pub fn failed(&self, key: &Q) -> (u32, Duration) {
        let mut map = self.lock();
        let count = map.entry(key.clone()).or_insert(0);
        *count += 1;
        (*count, retry::ROUNDS.after(*count))
    }

    /// Forgets `key`'s failures after a round that succeeded, or once it is gone.
    pub fn succeeded(&self, key: &Q) {
        self.lock().remove(key);
    }

    /// Forgets the objects no longer `cached`: after a relist, which reports no deletions.
    pub fn forget_uncached(&self, cached: impl Fn(&Q) -> bool) {
        self.lock().retain(|key, _| cached(key));
    }

    /// Objects with failures on record.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Q, u32>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K: Lookup<DynamicType = ()> + Clone> Failures<ObjectRef<K>> {
    /// Forgets objects that are gone: the one a `Delete` event names, and after a relist
    /// (which reports no deletions) those no longer in `store`, which already holds the list.
    pub fn forget_gone(&self, store: &Store<K>, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Delete(object) => self.succeeded(&ObjectRef::from_obj(object)),
            watcher::Event::InitDone => self.forget_uncached(|key| store.get(key).is_some()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k0rdent::ServiceSet;
    use kube::runtime::reflector;

    fn service_set(name: &str) -> ServiceSet {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"provider": {"name": "ksm-flux"}},
        }))
        .unwrap()
    }

    #[test]
    fn entries_of_deleted_service_sets_leave_the_map() {
        let (store, mut writer) = reflector::store();
        let failures = Failures::<ObjectRef<ServiceSet>>::default();
        let [a, b, c] = ["a", "b", "c"].map(service_set);
        for ss in [&a, &b, &c] {
            writer.apply_watcher_event(&watcher::Event::Apply(ss.clone()));
            failures.failed(&ObjectRef::from_obj(ss));
        }
        assert_eq!(failures.failed(&ObjectRef::from_obj(&a)), (2, retry::ROUNDS.after(2)));
        // Deleted while watched.
        failures.forget_gone(&store, &watcher::Event::Delete(b.clone()));
        assert_eq!(failures.len(), 2);
        // Deleted while the watch was down: the relist no longer holds it.
        for event in [watcher::Event::Init, watcher::Event::InitApply(a.clone()), watcher::Event::InitDone] {
            writer.apply_watcher_event(&event);
            failures.forget_gone(&store, &event);
        }
        assert_eq!(failures.len(), 1);
        failures.succeeded(&ObjectRef::from_obj(&a));
        assert_eq!(failures.len(), 0);
    }
}
