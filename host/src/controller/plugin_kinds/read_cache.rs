//! The cache of the objects plugins read (their metadata's `reads`, e.g. Sveltos'
//! `ClusterSummary`): the CD tool creates them, so they carry none of the host's labels; what ties
//! one to a ServiceSet is an owner reference to one of its children (see [`crate::plan::reads`]).
//! Only objects with owner references are kept, as compact JSON, indexed by their owners' uids.

use super::listed::Listed;
use crate::k0rdent::ChildRef;
use kube::api::DynamicObject;
use serde_json::Value;
use std::collections::HashMap;

/// What the cache keeps of one object.
struct Entry {
    /// Its owners, as children of the host would be referenced, with their uids.
    owners: Vec<(ChildRef, Box<str>)>,
    /// The whole object, managedFields left out.
    json: Box<str>,
}

/// The cached objects of the kinds plugins read, by reference and by owner uid.
#[derive(Default)]
pub struct ReadCache {
    objects: HashMap<ChildRef, Entry>,
    by_owner: HashMap<Box<str>, Vec<ChildRef>>,
}

impl ReadCache {
    /// Stores `object` as `read`; returns the owners whose owned objects changed (former and
    /// current), for the caller to wake their ServiceSets. An object without owners is not kept.
    pub fn apply(&mut self, read: ChildRef, object: &DynamicObject) -> Vec<ChildRef> {
        let mut changed = self.delete(&read);
        let namespace = read.namespace.clone();
        let owners: Vec<(ChildRef, Box<str>)> = object
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| {
                let owner = ChildRef {
                    api_version: o.api_version.clone(),
                    kind: o.kind.clone(),
                    namespace: namespace.clone(),
                    name: o.name.clone(),
                };
                (owner, o.uid.clone().into_boxed_str())
            })
            .collect();
        let Ok(json) = serde_json::to_string(object) else { return changed };
        if owners.is_empty() {
            return changed;
        }
        for (owner, uid) in &owners {
            self.by_owner.entry(uid.clone()).or_default().push(read.clone());
            changed.push(owner.clone());
        }
        self.objects.insert(read, Entry { owners, json: json.into_boxed_str() });
        changed
    }

    /// Forgets `read`; returns its owners.
    pub fn delete(&mut self, read: &ChildRef) -> Vec<ChildRef> {
        let Some(entry) = self.objects.remove(read) else { return Vec::new() };
        for (_, uid) in &entry.owners {
            if let Some(owned) = self.by_owner.get_mut(uid) {
                owned.retain(|r| r != read);
                if owned.is_empty() {
                    self.by_owner.remove(uid);
                }
            }
        }
        entry.owners.into_iter().map(|(owner, _)| owner).collect()
    }

    /// After a (re)list of kind `api_version`/`kind` that returned `listed`: forgets the objects
    /// of that kind the list no longer holds; returns their owners.
    pub fn keep_listed(&mut self, api_version: &str, kind: &str, listed: &Listed) -> Vec<ChildRef> {
        let gone: Vec<ChildRef> = self
            .objects
            .keys()
            .filter(|r| r.api_version == api_version && r.kind == kind && !listed.contains(r))
            .cloned()
            .collect();
        gone.iter().flat_map(|read| self.delete(read)).collect()
    }

    /// The objects owned by the object with `uid`, as JSON, in reference order.
    pub fn owned_by(&self, uid: &str) -> Vec<Value> {
        let mut owned: Vec<&ChildRef> = self.by_owner.get(uid).into_iter().flatten().collect();
        owned.sort();
        owned.into_iter().filter_map(|r| serde_json::from_str(&self.objects.get(r)?.json).ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(name: &str, owners: &[(&str, &str)]) -> (ChildRef, DynamicObject) {
        let references: Vec<Value> = owners
            .iter()
            .map(|(owner, uid)| {
                json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "Profile", "name": owner, "uid": uid})
            })
            .collect();
        let object = json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": name, "namespace": "team", "ownerReferences": references},
            "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned"}]},
        });
        (ChildRef::of(&object), serde_json::from_value(object).unwrap())
    }

    fn names(objects: &[Value]) -> Vec<&str> {
        objects.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn objects_are_found_by_their_owners_uid_and_name_their_owners_when_they_change() {
        let mut cache = ReadCache::default();
        let (b, object_b) = summary("b", &[("web.nginx", "u1")]);
        let (a, object_a) = summary("a", &[("web.nginx", "u1"), ("web.other", "u2")]);
        let changed = cache.apply(b.clone(), &object_b);
        assert_eq!(changed.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["web.nginx"]);
        assert_eq!((changed[0].namespace.as_str(), changed[0].kind.as_str()), ("team", "Profile"));
        cache.apply(a.clone(), &object_a);
        assert_eq!(names(&cache.owned_by("u1")), ["a", "b"]);
        assert_eq!(names(&cache.owned_by("u2")), ["a"]);
        assert_eq!(cache.owned_by("u1")[0]["status"]["featureSummaries"][0]["status"], "Provisioned");

        let (_, moved) = summary("a", &[("web.other", "u2")]);
        let changed = cache.apply(a.clone(), &moved);
        assert!(changed.iter().any(|o| o.name == "web.nginx"), "the former owner is named too");
        assert_eq!(names(&cache.owned_by("u1")), ["b"]);
        assert_eq!(cache.delete(&b).len(), 1);
        assert!(cache.owned_by("u1").is_empty());
    }

    #[test]
    fn objects_without_owners_are_not_kept_and_a_relist_forgets_the_gone() {
        let mut cache = ReadCache::default();
        let (orphan, object) = summary("orphan", &[]);
        assert!(cache.apply(orphan.clone(), &object).is_empty());
        assert!(cache.delete(&orphan).is_empty(), "it was never kept");
        let (kept, object_kept) = summary("kept", &[("p", "u1")]);
        let (gone, object_gone) = summary("gone", &[("q", "u2")]);
        cache.apply(kept.clone(), &object_kept);
        cache.apply(gone, &object_gone);
        let owners =
            cache.keep_listed("config.projectsveltos.io/v1beta1", "ClusterSummary", &[&kept].into_iter().collect());
        assert_eq!(owners.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["q"]);
        assert!(cache.owned_by("u2").is_empty());
        assert_eq!(names(&cache.owned_by("u1")), ["kept"]);
    }
}
