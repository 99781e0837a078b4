//! The cached ServiceSets, by namespace and name, filled from their watch. The host's own and
//! not kube-runtime's reflector: that one keys each object by an `ObjectRef` (96 bytes in its
//! table and two strings of their own) and holds the watch's type, whose `ObjectMeta` alone is
//! 360 bytes; here a ServiceSet takes its [`CachedServiceSet`] (96 bytes with its `Arc`) and
//! one pointer in the table, keyed by the name it holds (docs/performance.md).

use super::service_set_cache::{CachedServiceSet, WatchedServiceSet};
use crate::k0rdent::NamespacedName;
use kube::runtime::watcher;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The cached ServiceSets; clones share them.
#[derive(Clone, Default)]
pub struct ServiceSets(Arc<RwLock<HashSet<Entry>>>);

/// A ServiceSet in the table, hashed and compared by `namespace/name`.
struct Entry(Arc<CachedServiceSet>);

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.0.at()
    }
}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.at().hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.at() == other.0.at()
    }
}

impl Eq for Entry {}

impl ServiceSets {
    /// The ServiceSet `key`, if cached.
    pub fn get(&self, key: &NamespacedName) -> Option<Arc<CachedServiceSet>> {
        self.read().get(key.to_string().as_str()).map(|entry| entry.0.clone())
    }

    /// Every cached ServiceSet.
    pub fn state(&self) -> Vec<Arc<CachedServiceSet>> {
        self.read().iter().map(|entry| entry.0.clone()).collect()
    }

    /// The names of the cached ServiceSets that `wanted` picks.
    pub fn keys_where(&self, wanted: impl Fn(&CachedServiceSet) -> bool) -> Vec<NamespacedName> {
        self.read().iter().filter(|entry| wanted(&entry.0)).map(|entry| entry.0.key()).collect()
    }

    fn read(&self) -> RwLockReadGuard<'_, HashSet<Entry>> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashSet<Entry>> {
        self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A cache of exactly `service_sets` (tests).
#[cfg(test)]
impl FromIterator<CachedServiceSet> for ServiceSets {
    fn from_iter<I: IntoIterator<Item = CachedServiceSet>>(service_sets: I) -> Self {
        let store = Self::default();
        store.write().extend(service_sets.into_iter().map(|cached| Entry(cached.into())));
        store
    }
}

/// What fills [`ServiceSets`] from the watch's events. A list replaces the store's content only
/// once complete, as kube-runtime's reflector does: until then readers see the former one.
#[derive(Default)]
pub struct Writer {
    store: ServiceSets,
    /// The list under way.
    listing: Option<HashSet<Entry>>,
}

impl Writer {
    /// The store it fills.
    pub fn store(&self) -> ServiceSets {
        self.store.clone()
    }

    /// Takes `event` in.
    pub fn apply(&mut self, event: &watcher::Event<WatchedServiceSet>) {
        match event {
            watcher::Event::Apply(object) => {
                self.store.write().replace(Entry(object.cached().clone()));
            }
            watcher::Event::Delete(object) => {
                self.store.write().remove(object.cached().at());
            }
            watcher::Event::Init => self.listing = Some(HashSet::new()),
            watcher::Event::InitApply(object) => {
                self.listing.get_or_insert_default().replace(Entry(object.cached().clone()));
            }
            watcher::Event::InitDone => {
                *self.store.write() = self.listing.take().unwrap_or_default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn watched(name: &str, provider: &str) -> WatchedServiceSet {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": name, "namespace": "team", "resourceVersion": "1"},
            "spec": {"provider": {"name": provider}},
        }))
        .unwrap()
    }

    fn names(store: &ServiceSets) -> Vec<String> {
        let mut names: Vec<String> = store.state().iter().map(|ss| ss.name().to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn changes_replace_deletions_remove_and_a_list_replaces_all_once_complete() {
        let mut writer = Writer::default();
        let store = writer.store();
        writer.apply(&watcher::Event::Apply(watched("a", "ksm-flux")));
        writer.apply(&watcher::Event::Apply(watched("b", "ksm-flux")));
        writer.apply(&watcher::Event::Apply(watched("a", "ksm-argo")));
        assert_eq!(names(&store), ["a", "b"]);
        assert_eq!(store.get(&NamespacedName::new("team", "a")).unwrap().provider(), "ksm-argo", "the latest kept");
        assert_eq!(store.keys_where(|ss| ss.provider() == "ksm-flux"), [NamespacedName::new("team", "b")]);
        writer.apply(&watcher::Event::Delete(watched("b", "ksm-flux")));
        assert_eq!(names(&store), ["a"]);
        assert!(store.get(&NamespacedName::new("team", "b")).is_none());
        writer.apply(&watcher::Event::Init);
        writer.apply(&watcher::Event::InitApply(watched("c", "ksm-flux")));
        assert_eq!(names(&store), ["a"], "the former content until the list is complete");
        writer.apply(&watcher::Event::InitDone);
        assert_eq!(names(&store), ["c"], "a ServiceSet deleted while the watch was away is gone");
    }
}
