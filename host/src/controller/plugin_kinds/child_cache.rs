//! The cache of the children the host manages, of every kind: each object kept as JSON text
//! packed against its kind's first (a fraction of a `serde_json::Value` tree's memory, and of the
//! text's: docs/performance.md) and indexed by the ServiceSet it belongs to, so a reconcile reads
//! its own children without a scan.
//!
//! Filled from the watches of [`child_kinds`](super::child_kinds); the index is exact: a child
//! whose ServiceSet labels change moves to its new ServiceSet.

use super::listed::Listed;
use crate::k0rdent::ChildRef;
use crate::k0rdent::NamespacedName;
use crate::packed::{Packed, Packer};
use crate::plan::children::{SERVICE_LABEL, SERVICE_SET_LABEL, SERVICE_SET_NAMESPACE_LABEL};
use arcstr::ArcStr;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A child's reference as the cache keeps it, in one allocation that its entry and the table
/// of owners share through one pointer each: `kind:namespace/name`, its kind as the index of
/// its packer (a namespace holds neither `:` nor `/`, a name no `/`). A [`ChildRef`] takes five
/// allocations, two of them its kind's strings, on every child; an `Arc` of the kind and a
/// string took two (an `Arc<str>` takes two pointers in each place).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key(ArcStr);

impl Key {
    /// The key of `child`, whose kind is the `kind`th.
    fn of(kind: u16, child: &ChildRef) -> Self {
        Self(ArcStr::from(format!("{kind}:{}/{}", child.namespace, child.name)))
    }

    /// The index of its kind.
    fn kind(&self) -> usize {
        let (kind, _) = self.0.split_once(':').unwrap_or_default();
        kind.parse().expect("a key starts with its kind's index")
    }

    /// Namespace and name.
    fn parts(&self) -> (&str, &str) {
        let (_, at) = self.0.split_once(':').unwrap_or_default();
        at.split_once('/').unwrap_or(("", at))
    }
}

/// What the cache keeps of one child, in its ServiceSet's list: 40 bytes. Its service is read
/// from its text, only when a contested claim asks ([`ChildCache::any`]).
struct Cached {
    child: Key,
    /// Whether its deletion has started.
    deleting: bool,
    /// The whole object, managedFields left out, as packed JSON.
    packed: Packed,
}

/// The packer of one kind, with its apiVersion and kind.
struct Kind {
    api_version: String,
    kind: String,
    packer: Packer,
}

/// The cached children of every kind, by ServiceSet, and each child's ServiceSet. A child's
/// entry lives in its ServiceSet's `Vec` in reference order (a ServiceSet has a few children),
/// so the map over every child holds two pointers per child; the key and the ServiceSet's name
/// are each stored once and shared: the cache holds an entry for every child the host serves,
/// so its own tables, more than the packed texts, set its memory (docs/performance.md).
#[derive(Default)]
pub struct ChildCache {
    /// The ServiceSet of each child.
    owners: HashMap<Key, Arc<NamespacedName>>,
    /// Each ServiceSet's children, in reference order.
    by_owner: HashMap<Arc<NamespacedName>, Vec<Cached>>,
    /// The kinds seen (a few), in the order seen: a [`Key`]'s `kind` is an index here.
    kinds: Vec<Kind>,
}

impl ChildCache {
    /// Stores `object` as `child`; returns the ServiceSets whose children changed (its owner,
    /// and its former owner if its labels moved it). A child without ServiceSet labels is not
    /// the host's to track: it is dropped (and its former owner returned).
    pub fn apply(&mut self, child: ChildRef, object: &DynamicObject) -> Vec<NamespacedName> {
        let mut changed = self.delete(&child).into_iter().collect::<Vec<_>>();
        let Some(owner) = owner_of(object) else { return changed };
        let Ok(json) = serde_json::to_string(object) else { return changed };
        let with_status = object.data.get("status").is_some_and(|status| !status.is_null());
        let kind = self.kind_or_new(&child);
        let Ok(packed) = self.kinds[usize::from(kind)].packer.pack(&json, with_status) else { return changed };
        let key = Key::of(kind, &child);
        let owner = match self.by_owner.get_key_value(&owner) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(owner),
        };
        let entry = Cached { child: key.clone(), deleting: object.metadata.deletion_timestamp.is_some(), packed };
        let siblings = self.by_owner.entry(owner.clone()).or_default();
        // `delete` above took out any former entry: the key is not there.
        let kinds = &self.kinds;
        let at = siblings.binary_search_by(|c| order(kinds, &c.child, &key)).unwrap_or_else(|at| at);
        // Room for this one only: a ServiceSet's few children, not a doubling's slack.
        siblings.reserve_exact(1);
        siblings.insert(at, entry);
        self.owners.insert(key, owner.clone());
        if !changed.contains(&owner) {
            changed.push((*owner).clone());
        }
        changed
    }

    /// The index of `child`'s kind, added if new.
    fn kind_or_new(&mut self, child: &ChildRef) -> u16 {
        let at = kind_at(&self.kinds, &child.api_version, &child.kind).unwrap_or_else(|| {
            let (api_version, kind) = (child.api_version.clone(), child.kind.clone());
            self.kinds.push(Kind { api_version, kind, packer: Packer::new() });
            self.kinds.len() - 1
        });
        u16::try_from(at).expect("fewer than 65,536 child kinds")
    }

    /// The key of `child`, if its kind was ever seen.
    fn key(&self, child: &ChildRef) -> Option<Key> {
        let kind = u16::try_from(kind_at(&self.kinds, &child.api_version, &child.kind)?).ok()?;
        Some(Key::of(kind, child))
    }

    /// Forgets `child`; returns the ServiceSet it belonged to.
    pub fn delete(&mut self, child: &ChildRef) -> Option<NamespacedName> {
        self.remove(&self.key(child)?)
    }

    /// Forgets the child keyed `key`; returns the ServiceSet it belonged to.
    fn remove(&mut self, key: &Key) -> Option<NamespacedName> {
        let owner = self.owners.remove(key)?;
        if let Some(children) = self.by_owner.get_mut(&owner) {
            children.retain(|c| c.child != *key);
            if children.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
        Some((*owner).clone())
    }

    /// After a (re)list of kind `api_version`/`kind` that returned `listed`: forgets the
    /// children of that kind the list no longer holds; returns their ServiceSets.
    pub fn keep_listed(&mut self, api_version: &str, kind: &str, listed: &Listed) -> Vec<NamespacedName> {
        let Some(at) = kind_at(&self.kinds, api_version, kind) else { return Vec::new() };
        let gone: Vec<Key> = self
            .owners
            .keys()
            .filter(|key| key.kind() == at && !listed.contains(&self.child_ref(key)))
            .cloned()
            .collect();
        gone.iter().filter_map(|key| self.remove(key)).collect()
    }

    /// The reference `key` stands for.
    fn child_ref(&self, key: &Key) -> ChildRef {
        let Kind { api_version, kind, .. } = &self.kinds[key.kind()];
        let (namespace, name) = key.parts();
        ChildRef {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The children of ServiceSet `owner`, as JSON, in reference order.
    pub fn children_of(&mut self, owner: &NamespacedName) -> Vec<Value> {
        let Some(children) = self.by_owner.get(owner) else { return Vec::new() };
        let texts = children.iter().filter_map(|cached| unpack(&mut self.kinds, cached));
        texts.filter_map(|text| serde_json::from_slice(&text).ok()).collect()
    }

    /// Whether ServiceSet `owner` has any cached child.
    pub fn holds(&self, owner: &NamespacedName) -> bool {
        self.by_owner.get(owner).is_some_and(|children| !children.is_empty())
    }

    /// Whether service `service` of ServiceSet `owner` has any cached child (unpacking its
    /// children: only a contested claim asks).
    pub fn any(&mut self, owner: &NamespacedName, service: &str) -> bool {
        self.children_of(owner).iter().any(|o| crate::plan::children::recorded(o, SERVICE_LABEL) == Some(service))
    }

    /// The cached `child`, as JSON.
    pub fn object(&mut self, child: &ChildRef) -> Option<Value> {
        let key = self.key(child)?;
        let cached = find(&self.owners, &self.by_owner, &self.kinds, &key)?;
        serde_json::from_slice(&unpack(&mut self.kinds, cached)?).ok()
    }

    /// The ServiceSet the cached `child` belongs to.
    pub fn owner(&self, child: &ChildRef) -> Option<NamespacedName> {
        self.owners.get(&self.key(child)?).map(|owner| (**owner).clone())
    }

    /// The `resourceVersion` of the cached `child` (read from its text, skipping the rest).
    pub fn resource_version(&mut self, child: &ChildRef) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Object {
            metadata: Metadata,
        }
        #[derive(serde::Deserialize)]
        struct Metadata {
            #[serde(rename = "resourceVersion")]
            resource_version: Option<String>,
        }
        let key = self.key(child)?;
        let cached = find(&self.owners, &self.by_owner, &self.kinds, &key)?;
        let text = unpack(&mut self.kinds, cached)?;
        serde_json::from_slice::<Object>(&text).ok()?.metadata.resource_version
    }

    /// Whether the cached `child` is being deleted.
    pub fn is_deleting(&self, child: &ChildRef) -> bool {
        let key = self.key(child);
        key.and_then(|key| find(&self.owners, &self.by_owner, &self.kinds, &key)).is_some_and(|cached| cached.deleting)
    }
}

/// The entry of `key`, in its ServiceSet's list (borrowing only the tables, so that a caller
/// may unpack it with the kinds' packers).
fn find<'a>(
    owners: &HashMap<Key, Arc<NamespacedName>>,
    by_owner: &'a HashMap<Arc<NamespacedName>, Vec<Cached>>,
    kinds: &[Kind],
    key: &Key,
) -> Option<&'a Cached> {
    let siblings = by_owner.get(&**owners.get(key)?)?;
    siblings.binary_search_by(|c| order(kinds, &c.child, key)).ok().map(|at| &siblings[at])
}

/// Reference order of two keys: apiVersion, kind, namespace, name, as [`ChildRef`] orders.
fn order(kinds: &[Kind], a: &Key, b: &Key) -> std::cmp::Ordering {
    let kind = |key: &Key| {
        let kind = &kinds[key.kind()];
        (kind.api_version.as_str(), kind.kind.as_str())
    };
    (kind(a), a.parts()).cmp(&(kind(b), b.parts()))
}

/// The text of `cached`, unpacked by its kind's packer.
fn unpack(kinds: &mut [Kind], cached: &Cached) -> Option<Vec<u8>> {
    kinds.get_mut(cached.child.kind())?.packer.unpack(&cached.packed).ok()
}

/// Where the kind `api_version`/`kind` is in `kinds`.
fn kind_at(kinds: &[Kind], api_version: &str, kind: &str) -> Option<usize> {
    kinds.iter().position(|k| k.api_version == api_version && k.kind == kind)
}

/// The ServiceSet a child belongs to, by its labels.
fn owner_of(object: &DynamicObject) -> Option<NamespacedName> {
    Some(NamespacedName::new(
        object.labels().get(SERVICE_SET_NAMESPACE_LABEL)?.clone(),
        recorded(object, SERVICE_SET_LABEL)?.clone(),
    ))
}

/// The whole value the host recorded under `key`: the annotation when the label value had to be
/// shortened, else the label (as [`crate::plan::children::recorded`] reads a JSON object).
fn recorded<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a String> {
    object.annotations().get(key).or_else(|| object.labels().get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release(name: &str, owner: &str, service: &str) -> (ChildRef, DynamicObject) {
        let object = json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": "team", "labels": {
                SERVICE_SET_NAMESPACE_LABEL: "team", SERVICE_SET_LABEL: owner, SERVICE_LABEL: service,
            }},
            "spec": {"values": {"replicas": 2}},
        });
        (ChildRef::of(&object), serde_json::from_value(object).unwrap())
    }

    fn owner(name: &str) -> NamespacedName {
        NamespacedName::new("team", name)
    }

    #[test]
    fn a_key_is_one_pointer_and_gives_back_the_reference_it_stands_for() {
        assert_eq!((std::mem::size_of::<Key>(), std::mem::size_of::<Cached>()), (8, 40), "per child, in every table");
        let mut cache = ChildCache::default();
        let cluster_role = ChildRef {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "ClusterRole".into(),
            namespace: String::new(),
            name: "system:ksm:reader".into(),
        };
        let (release, _) = release("a-b", "a", "b");
        for child in [&release, &cluster_role] {
            let kind = cache.kind_or_new(child);
            let key = Key::of(kind, child);
            assert_eq!(cache.child_ref(&key), *child, "{key:?}");
            assert_eq!(key.kind(), usize::from(kind));
        }
    }

    #[test]
    fn children_are_found_by_their_service_set_with_their_whole_content() {
        let mut cache = ChildCache::default();
        let (b, object_b) = release("a-b", "a", "b");
        let (c, object_c) = release("a-c", "a", "c");
        assert_eq!(cache.apply(c, &object_c), vec![owner("a")]);
        cache.apply(b.clone(), &object_b);
        cache.apply(release("x-b", "x", "b").0, &release("x-b", "x", "b").1);
        let children = cache.children_of(&owner("a"));
        let names: Vec<_> = children.iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a-b", "a-c"]);
        assert_eq!(children[0]["spec"]["values"]["replicas"], 2);
        assert!(cache.any(&owner("a"), "c"));
        assert_eq!(cache.owner(&release("a-c", "a", "c").0), Some(owner("a")));
        assert!(!cache.any(&owner("a"), "d"));
        let (d, mut object_d) = release("a-d", "a", "d");
        object_d.metadata.resource_version = Some("42".into());
        cache.apply(d.clone(), &object_d);
        assert_eq!(cache.resource_version(&d).as_deref(), Some("42"));
        assert_eq!(cache.resource_version(&b), None, "stored without one");
        cache.apply(d.clone(), &object_d);
        assert_eq!(cache.by_owner[&owner("a")].capacity(), 3, "no room beyond its children, updates included");
    }

    #[test]
    fn children_of_several_kinds_come_back_whole_each_packed_against_its_own_kind() {
        let mut cache = ChildCache::default();
        let (release_ref, release_object) = release("a-web", "a", "web");
        let mut kustomization = serde_json::to_value(&release_object).unwrap();
        kustomization["apiVersion"] = json!("kustomize.toolkit.fluxcd.io/v1");
        kustomization["kind"] = json!("Kustomization");
        kustomization["metadata"]["name"] = json!("a-web-k");
        kustomization["spec"] = json!({"path": "./deploy", "prune": true});
        let kustomization_ref = ChildRef::of(&kustomization);
        cache.apply(kustomization_ref, &serde_json::from_value(kustomization.clone()).unwrap());
        cache.apply(release_ref, &release_object);
        let mut later = release_object.clone();
        later.data["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        cache.apply(ChildRef::of(&serde_json::to_value(&later).unwrap()), &later);
        let children = cache.children_of(&owner("a"));
        assert_eq!(children.len(), 2);
        assert!(children.contains(&kustomization), "{children:?}");
        assert!(children.contains(&serde_json::to_value(&later).unwrap()), "{children:?}");
    }

    #[test]
    fn children_come_in_reference_order_whichever_kind_was_seen_first() {
        let child = |(api_version, kind, namespace, name): (&str, &str, &str, &str)| {
            let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {
                "name": name, "namespace": namespace,
                "labels": {SERVICE_SET_NAMESPACE_LABEL: "team", SERVICE_SET_LABEL: "a", SERVICE_LABEL: "s"},
            }});
            (ChildRef::of(&object), serde_json::from_value::<DynamicObject>(object).unwrap())
        };
        // "a-b/x" sorts before "a/x" as text, after it as (namespace, name).
        let refs = [("v2", "Z", "a-b", "x"), ("v1", "K", "a", "y"), ("v2", "A", "a", "z"), ("v1", "K", "a-b", "x")];
        let mut cache = ChildCache::default();
        for (child, object) in refs.map(child).into_iter().chain([child(("v1", "K", "a", "x"))]) {
            cache.apply(child, &object);
        }
        let got: Vec<ChildRef> = cache.children_of(&owner("a")).iter().map(ChildRef::of).collect();
        let mut want: Vec<ChildRef> =
            refs.map(|r| child(r).0).into_iter().chain([child(("v1", "K", "a", "x")).0]).collect();
        want.sort();
        assert_eq!(got, want);
        for child in &want {
            assert_eq!(cache.owner(child), Some(owner("a")), "{child}");
            assert_eq!(cache.object(child).map(|o| ChildRef::of(&o)).as_ref(), Some(child));
        }
        let unseen_kind = ChildRef { kind: "Other".into(), ..want[0].clone() };
        assert_eq!((cache.owner(&unseen_kind), cache.delete(&unseen_kind)), (None, None));
    }

    #[test]
    fn a_child_relabelled_to_another_service_set_moves_and_wakes_both() {
        let mut cache = ChildCache::default();
        let (child, object) = release("r", "a", "s");
        cache.apply(child.clone(), &object);
        let (_, moved) = release("r", "b", "s");
        assert_eq!(cache.apply(child, &moved), vec![owner("a"), owner("b")]);
        assert!(cache.children_of(&owner("a")).is_empty());
        assert_eq!(cache.children_of(&owner("b")).len(), 1);
    }

    #[test]
    fn deletion_and_relist_forget_children_and_name_their_service_sets() {
        let mut cache = ChildCache::default();
        let (kept, object_kept) = release("a-kept", "a", "kept");
        let (gone, object_gone) = release("b-gone", "b", "gone");
        cache.apply(kept.clone(), &object_kept);
        cache.apply(gone.clone(), &object_gone);
        let mut deleting = object_kept.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        cache.apply(kept.clone(), &deleting);
        assert!(cache.is_deleting(&kept));
        let listed = [&kept].into_iter().collect();
        assert_eq!(cache.keep_listed("helm.toolkit.fluxcd.io/v2", "HelmRelease", &listed), vec![owner("b")]);
        assert_eq!(cache.keep_listed("other/v1", "HelmRelease", &Listed::default()), Vec::<NamespacedName>::new());
        assert_eq!(cache.delete(&kept), Some(owner("a")));
        assert_eq!(cache.delete(&kept), None);
        assert!(cache.children_of(&owner("a")).is_empty());
    }

    #[test]
    fn a_long_service_set_name_is_read_from_its_annotation() {
        let long = "l".repeat(253);
        let (child, mut object) = release("r", &crate::plan::children::label_value(&long), "s");
        object.annotations_mut().insert(SERVICE_SET_LABEL.into(), long.clone());
        assert_eq!(ChildCache::default().apply(child, &object), vec![owner(&long)]);
    }

    #[test]
    fn a_child_s_service_is_read_from_its_text_its_annotation_first() {
        let mut cache = ChildCache::default();
        let long = "s".repeat(80);
        let (child, mut object) = release("r", "a", &crate::plan::children::label_value(&long));
        object.annotations_mut().insert(SERVICE_LABEL.into(), long.clone());
        cache.apply(child, &object);
        assert!(cache.any(&owner("a"), &long), "the whole name, from the annotation");
        assert!(!cache.any(&owner("a"), &crate::plan::children::label_value(&long)));
        assert!(!cache.any(&owner("b"), &long));
        assert!(std::mem::size_of::<Cached>() <= 40, "an entry takes 40 bytes in its ServiceSet's list");
    }
}
