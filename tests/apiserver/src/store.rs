//! The object store: objects, the global resourceVersion counter, write semantics and the watch event history.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::errors::{ApiError, ApiResult};
use crate::kinds::{Kind, Kinds, StorageKey};
use crate::selectors::Selector;

/// How many events are kept for resuming watches.
const HISTORY_LEN: usize = 10_000;

/// Which page of a list to return: at most `limit` objects, after the key `after`
/// (namespace, name) where the previous page ended, of a list that began at resourceVersion
/// `rv`.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub limit: Option<usize>,
    pub after: Option<(String, String)>,
    pub rv: Option<u64>,
}

/// One page of a list.
pub(crate) struct Listed {
    pub items: Vec<Value>,
    /// The resourceVersion the list began at: a watch from it sees every change made while
    /// the pages were read (objects on later pages may already show some of them).
    pub rv: u64,
    /// The key the next page starts after, when more objects match.
    pub next: Option<(String, String)>,
}

/// Identity of a stored object; `namespace` is empty for cluster-scoped kinds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ObjectKey {
    pub storage: StorageKey,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as kept in the history and fanned out to watchers.
#[derive(Debug)]
pub(crate) struct StoredEvent {
    pub storage: StorageKey,
    pub namespace: String,
    pub event_type: EventType,
    pub object: Value,
    /// The object before a modification (lets selector-filtered watches turn it into ADDED/DELETED).
    pub previous: Option<Value>,
}

/// A new watch: the events to replay, then the live ones, as of resourceVersion `rv`.
pub(crate) struct Subscription {
    pub replay: Vec<Arc<StoredEvent>>,
    pub rx: broadcast::Receiver<Arc<StoredEvent>>,
    pub rv: u64,
}

/// Which part of an object a write replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main resource: `status` is kept from the stored object when the kind has a status subresource.
    Main,
    /// The `status` subresource: only `status` changes.
    Status,
    /// Everything, including `status` and `managedFields` (server-side apply results and `put_object`).
    Whole,
}

/// Objects, resourceVersions and event history, guarded by one mutex in [`crate::Shared`].
pub(crate) struct Store {
    pub kinds: Kinds,
    objects: BTreeMap<ObjectKey, Value>,
    rv: u64,
    /// Watches from a resourceVersion below this get 410 Gone.
    min_watch_rv: u64,
    history: VecDeque<Arc<StoredEvent>>,
    events: broadcast::Sender<Arc<StoredEvent>>,
    next_uid: u64,
    /// SelfSubjectAccessReviews answered `allowed: false`: (verb, group, resource).
    pub denied: HashSet<(String, String, String)>,
}

pub(crate) fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or("")
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata is an object")
}

/// Whether `a` and `b` have the same fields but `skip` (both objects, compared without copies).
fn same_fields_but(a: &Value, b: &Value, skip: &[&str]) -> bool {
    let kept = |v| Value::as_object(v).into_iter().flatten().filter(|(k, _)| !skip.contains(&k.as_str()));
    kept(a).count() == kept(b).count() && kept(a).all(|(k, v)| b.get(k) == Some(v))
}

/// Whether `new` differs from `old` in what `generation` tracks: everything but metadata (and
/// status when it is a subresource).
fn generation_changes(kind: &Kind, new: &Value, old: &Value) -> bool {
    let skip: &[&str] =
        if kind.status_subresource { &["metadata", "apiVersion", "status"] } else { &["metadata", "apiVersion"] };
    !same_fields_but(new, old, skip)
}

/// Whether writing `new` over `old` changes nothing but resourceVersion and managedFields
/// timestamps.
fn is_noop(new: &Value, old: &Value) -> bool {
    let (new_meta, old_meta) = (&new["metadata"], &old["metadata"]);
    let same_managed_fields = match (new_meta["managedFields"].as_array(), old_meta["managedFields"].as_array()) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| match x.is_object() && y.is_object() {
                    true => same_fields_but(x, y, &["time"]),
                    false => x == y,
                })
        }
        _ => new_meta["managedFields"] == old_meta["managedFields"],
    };
    same_fields_but(new, old, &["apiVersion", "metadata"])
        && same_fields_but(new_meta, old_meta, &["resourceVersion", "managedFields"])
        && same_managed_fields
}

/// A stored object as `kind`'s version: borrowed when it already is.
pub(crate) fn rendered<'a>(kind: &Kind, obj: &'a Value) -> Cow<'a, Value> {
    if obj["apiVersion"] == *kind.api_version() && obj["kind"] == *kind.kind {
        return Cow::Borrowed(obj);
    }
    let mut obj = obj.clone();
    obj["apiVersion"] = json!(kind.api_version());
    obj["kind"] = json!(kind.kind);
    Cow::Owned(obj)
}

/// What kube-apiserver finds wrong with a label value: at most 63 characters, alphanumerics,
/// `-`, `_` and `.`, beginning and ending with an alphanumeric (or empty).
fn label_value_problem(value: &str) -> Option<&'static str> {
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    let allowed = |c: char| alphanumeric(c) || matches!(c, '-' | '_' | '.');
    let well_formed = value.starts_with(alphanumeric) && value.ends_with(alphanumeric) && value.chars().all(allowed);
    if value.len() > 63 {
        Some("must be no more than 63 characters")
    } else if value.is_empty() || well_formed {
        None
    } else {
        Some("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'")
    }
}

fn has_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty())
}

impl Store {
    pub fn new(events: broadcast::Sender<Arc<StoredEvent>>) -> Self {
        Self {
            kinds: Kinds::builtin(),
            objects: BTreeMap::new(),
            rv: 1,
            min_watch_rv: 0,
            history: VecDeque::new(),
            events,
            next_uid: 0,
            denied: HashSet::new(),
        }
    }

    fn key(kind: &Kind, namespace: Option<&str>, name: &str) -> ObjectKey {
        let namespace = if kind.namespaced { namespace.unwrap_or("").to_string() } else { String::new() };
        ObjectKey { storage: kind.storage(), namespace, name: name.to_string() }
    }

    /// A stored object rendered as `kind`'s version.
    fn render(kind: &Kind, obj: &Value) -> Value {
        rendered(kind, obj).into_owned()
    }

    fn emit(&mut self, event_type: EventType, key: &ObjectKey, object: Value, previous: Option<Value>) {
        let event = Arc::new(StoredEvent {
            storage: key.storage.clone(),
            namespace: key.namespace.clone(),
            event_type,
            object,
            previous,
        });
        self.history.push_back(event.clone());
        if self.history.len() > HISTORY_LEN
            && let Some(oldest) = self.history.pop_front()
        {
            self.min_watch_rv = meta_str(&oldest.object, "resourceVersion").parse().unwrap_or(0);
        }
        // No receivers is fine: nobody watches.
        let _ = self.events.send(event);
    }

    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    /// Forgets the event history: every resourceVersion issued so far becomes too old to watch from.
    pub fn compact(&mut self) {
        self.history.clear();
        self.rv += 1;
        self.min_watch_rv = self.rv;
    }

    pub fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> ApiResult<Value> {
        self.objects
            .get(&Self::key(kind, namespace, name))
            .map(|o| Self::render(kind, o))
            .ok_or_else(|| ApiError::not_found(&kind.plural, name))
    }

    /// Matching objects (all namespaces when `namespace` is `None`) in key order, at most
    /// `page.limit` of them after `page.after`; the list resourceVersion; and, when more match,
    /// where the next page starts (the last returned key).
    pub fn list(&self, kind: &Kind, namespace: Option<&str>, selector: &Selector, page: &Page) -> Listed {
        let storage = kind.storage();
        let start = match &page.after {
            Some((namespace, name)) => Bound::Excluded(ObjectKey {
                storage: storage.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
            }),
            None => {
                Bound::Included(ObjectKey { storage: storage.clone(), namespace: String::new(), name: String::new() })
            }
        };
        let mut matching = self
            .objects
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.storage == storage)
            .filter(|(k, o)| namespace.is_none_or(|ns| k.namespace == ns) && selector.matches(o));
        let limit = page.limit.unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last = None;
        for (key, object) in matching.by_ref().take(limit) {
            items.push(Self::render(kind, object));
            last = Some((key.namespace.clone(), key.name.clone()));
        }
        let next = matching.next().and(last);
        Listed { items, rv: page.rv.unwrap_or(self.rv), next }
    }

    /// Subscribes to changes of `kind` after `rv` (`None`: synthetic ADDED events for the current objects first).
    pub fn watch(&self, kind: &Kind, namespace: Option<&str>, rv: Option<u64>) -> ApiResult<Subscription> {
        let storage = kind.storage();
        let replay = match rv {
            None => self
                .objects
                .iter()
                .filter(|(k, _)| k.storage == storage && namespace.is_none_or(|ns| k.namespace == ns))
                .map(|(k, o)| {
                    Arc::new(StoredEvent {
                        storage: storage.clone(),
                        namespace: k.namespace.clone(),
                        event_type: EventType::Added,
                        object: o.clone(),
                        previous: None,
                    })
                })
                .collect(),
            Some(rv) if rv < self.min_watch_rv => {
                return Err(ApiError::gone(format!("too old resource version: {rv} ({})", self.min_watch_rv)));
            }
            Some(rv) => self
                .history
                .iter()
                .filter(|e| meta_str(&e.object, "resourceVersion").parse::<u64>().is_ok_and(|erv| erv > rv))
                .cloned()
                .collect(),
        };
        Ok(Subscription { replay, rx: self.events.subscribe(), rv: self.rv })
    }

    /// Whether a watcher's receiver has nothing pending, i.e. the current resourceVersion is safe to bookmark.
    pub fn bookmark_rv(&self, rx: &broadcast::Receiver<Arc<StoredEvent>>) -> Option<u64> {
        rx.is_empty().then_some(self.rv)
    }

    fn check_identity(kind: &Kind, namespace: Option<&str>, obj: &mut Value) -> ApiResult<()> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let meta = meta_mut(obj);
        if kind.namespaced {
            let path_ns = namespace.unwrap_or("");
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && !path_ns.is_empty() && ns != path_ns => {
                    return Err(ApiError::bad_request(format!(
                        "the namespace of the provided object ({ns}) does not match the namespace sent on the request ({path_ns})"
                    )));
                }
                Some(ns) if !ns.is_empty() => {}
                _ if path_ns.is_empty() => return Err(ApiError::bad_request("a namespace is required")),
                _ => drop(meta.insert("namespace".into(), json!(path_ns))),
            }
        } else {
            meta.remove("namespace");
        }
        if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default();
                if let Some(problem) = label_value_problem(value) {
                    return Err(ApiError::invalid(format!(
                        "metadata.labels: Invalid value: {value:?}: {problem} ({key})"
                    )));
                }
            }
        }
        obj["apiVersion"] = json!(kind.api_version());
        obj["kind"] = json!(kind.kind);
        Ok(())
    }

    pub fn create(&mut self, kind: &Kind, namespace: Option<&str>, mut obj: Value, part: Part) -> ApiResult<Value> {
        Self::check_identity(kind, namespace, &mut obj)?;
        self.next_uid += 1;
        let uid = self.next_uid;
        let meta = meta_mut(&mut obj);
        if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
            let prefix = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty());
            let prefix =
                prefix.ok_or_else(|| ApiError::invalid("metadata.name or metadata.generateName is required"))?;
            let name = format!("{prefix}{uid:05x}");
            meta.insert("name".into(), json!(name));
        }
        let name = meta["name"].as_str().unwrap_or_default().to_string();
        let key = Self::key(kind, meta.get("namespace").and_then(Value::as_str), &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&kind.plural, &name));
        }
        if kind.storage().holds_crds() {
            self.kinds.install_crd(&obj)?;
            obj["status"] = crd_status(&obj);
        } else if part != Part::Whole && kind.status_subresource {
            obj.as_object_mut().map(|o| o.remove("status"));
        }
        let rv = self.next_rv();
        let meta = meta_mut(&mut obj);
        for field in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
            meta.remove(field);
        }
        if part != Part::Whole {
            meta.remove("managedFields");
        }
        meta.insert("uid".into(), json!(format!("00000000-0000-4000-8000-{uid:012x}")));
        meta.insert("creationTimestamp".into(), json!(now()));
        meta.insert("generation".into(), json!(1));
        meta.insert("resourceVersion".into(), json!(rv));
        let response = Self::render(kind, &obj);
        self.objects.insert(key.clone(), obj.clone());
        self.emit(EventType::Added, &key, obj, None);
        Ok(response)
    }

    /// Replaces (part of) an existing object; a non-empty `metadata.resourceVersion` in `body` is a precondition.
    pub fn replace(
        &mut self,
        kind: &Kind,
        namespace: Option<&str>,
        name: &str,
        mut body: Value,
        part: Part,
    ) -> ApiResult<Value> {
        let key = Self::key(kind, namespace, name);
        let old = self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(&kind.plural, name))?;
        Self::check_identity(kind, namespace, &mut body)?;
        let body_name = meta_str(&body, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_rv = meta_str(&body, "resourceVersion");
        if !body_rv.is_empty() && body_rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(format!(
                "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                kind.plural, kind.group
            )));
        }
        let mut new = match part {
            Part::Status => {
                let mut new = old.clone();
                new["status"] = body.get("status").cloned().unwrap_or(Value::Null);
                if let Some(o) = new.as_object_mut() {
                    o.retain(|k, v| k != "status" || !v.is_null());
                }
                new
            }
            Part::Main | Part::Whole => {
                let mut new = body;
                if part == Part::Main {
                    if kind.status_subresource {
                        match old.get("status") {
                            Some(s) => new["status"] = s.clone(),
                            None => drop(new.as_object_mut().map(|o| o.remove("status"))),
                        }
                    }
                    match old["metadata"].get("managedFields") {
                        Some(mf) => drop(meta_mut(&mut new).insert("managedFields".into(), mf.clone())),
                        None => drop(meta_mut(&mut new).remove("managedFields")),
                    }
                }
                let new_meta = meta_mut(&mut new);
                for field in [
                    "name",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    match old["metadata"].get(field) {
                        Some(v) => new_meta.insert(field.into(), v.clone()),
                        None => new_meta.remove(field),
                    };
                }
                new
            }
        };
        if part != Part::Whole {
            crate::apply::disown_updated(&old, &mut new);
        }
        if is_noop(&new, &old) {
            return Ok(Self::render(kind, &old));
        }
        if kind.storage().holds_crds() && part != Part::Status {
            self.kinds.install_crd(&new)?;
        }
        if generation_changes(kind, &new, &old) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            meta_mut(&mut new).insert("generation".into(), json!(generation));
        }
        let rv = self.next_rv();
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
        let response = Self::render(kind, &new);
        if new["metadata"].get("deletionTimestamp").is_some() && !has_finalizers(&new) {
            self.remove(&key, new, true);
        } else {
            self.objects.insert(key.clone(), new.clone());
            self.emit(EventType::Modified, &key, new, Some(old));
        }
        Ok(response)
    }

    /// Deletes an object: marks it for deletion while it has finalizers, otherwise removes it at once.
    pub fn delete(&mut self, kind: &Kind, namespace: Option<&str>, name: &str, cascade: bool) -> ApiResult<Value> {
        let key = Self::key(kind, namespace, name);
        if !self.objects.contains_key(&key) {
            return Err(ApiError::not_found(&kind.plural, name));
        }
        Ok(Self::render(kind, &self.delete_key(&key, cascade)))
    }

    fn delete_key(&mut self, key: &ObjectKey, cascade: bool) -> Value {
        let old = self.objects[key].clone();
        if !has_finalizers(&old) {
            let rv = self.next_rv();
            let mut gone = old;
            meta_mut(&mut gone).insert("resourceVersion".into(), json!(rv));
            self.remove(key, gone.clone(), cascade);
            return gone;
        }
        if old["metadata"].get("deletionTimestamp").is_some() {
            return old;
        }
        let mut new = old.clone();
        let rv = self.next_rv();
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        let meta = meta_mut(&mut new);
        meta.insert("deletionTimestamp".into(), json!(now()));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        meta.insert("generation".into(), json!(generation));
        meta.insert("resourceVersion".into(), json!(rv));
        self.objects.insert(key.clone(), new.clone());
        self.emit(EventType::Modified, key, new.clone(), Some(old));
        new
    }

    /// Removes an object for good (its resourceVersion already bumped), then its CRD-defined kind and dependents.
    fn remove(&mut self, key: &ObjectKey, gone: Value, cascade: bool) {
        self.objects.remove(key);
        self.emit(EventType::Deleted, key, gone.clone(), None);
        if key.storage.holds_crds()
            && let Some(storage) = self.kinds.remove_crd(&gone)
        {
            let keys: Vec<ObjectKey> = self.objects.keys().filter(|k| k.storage == storage).cloned().collect();
            for k in keys {
                let mut obj = self.objects.remove(&k).expect("listed key");
                let rv = self.next_rv();
                meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv));
                self.emit(EventType::Deleted, &k, obj, None);
            }
        }
        let uid = meta_str(&gone, "uid");
        if !cascade || uid.is_empty() {
            return;
        }
        let owned_by = |o: &Value| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)))
        };
        let dependents: Vec<ObjectKey> =
            self.objects.iter().filter(|(_, o)| owned_by(o)).map(|(k, _)| k.clone()).collect();
        for dependent in dependents {
            if self.objects.contains_key(&dependent) {
                self.delete_key(&dependent, true);
            }
        }
    }

    /// Create-or-replace of a whole object, resolving its kind from `apiVersion`/`kind`.
    pub fn put(&mut self, obj: Value) -> ApiResult<Value> {
        let (api_version, kind_name) = (obj["apiVersion"].as_str().unwrap_or(""), obj["kind"].as_str().unwrap_or(""));
        let kind = self
            .kinds
            .by_kind(api_version, kind_name)
            .cloned()
            .ok_or_else(|| ApiError::not_found("kind", &format!("{api_version}/{kind_name}")))?;
        let (namespace, name) = (meta_str(&obj, "namespace").to_string(), meta_str(&obj, "name").to_string());
        let namespace = Some(namespace.as_str()).filter(|ns| !ns.is_empty());
        let mut obj = obj;
        meta_mut(&mut obj).remove("resourceVersion");
        if self.objects.contains_key(&Self::key(&kind, namespace, &name)) {
            self.replace(&kind, namespace, &name, obj, Part::Whole)
        } else {
            self.create(&kind, namespace, obj, Part::Whole)
        }
    }

    /// Looks an object up by `apiVersion` and `kind`.
    pub fn object(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let kind = self.kinds.by_kind(api_version, kind)?;
        self.get(kind, namespace, name).ok()
    }
}

/// The status a real API server gives an accepted CRD.
fn crd_status(crd: &Value) -> Value {
    let condition = |t: &str| json!({"type": t, "status": "True", "reason": t, "message": "simulated", "lastTransitionTime": now()});
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    json!({
        "acceptedNames": crd["spec"]["names"],
        "conditions": [condition("NamesAccepted"), condition("Established")],
        "storedVersions": storage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(spec: Value, status: Value, meta: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": spec, "status": status})
    }

    #[test]
    fn label_values_are_validated_as_kube_apiserver_does() {
        assert_eq!(label_value_problem(""), None);
        assert_eq!(label_value_problem("prod-eu-1.web_2"), None);
        assert!(label_value_problem(&"a".repeat(64)).unwrap().contains("63"));
        assert!(label_value_problem("-a").is_some() && label_value_problem("a b").is_some());
    }

    #[test]
    fn a_no_op_ignores_only_the_version_the_resource_version_and_managed_field_times() {
        let meta = |rv: &str, time: &str| json!({"name": "a", "resourceVersion": rv, "managedFields": [{"manager": "m", "time": time}]});
        let old = object(json!({"k": "v"}), json!({}), meta("1", "t1"));
        let mut same = object(json!({"k": "v"}), json!({}), meta("2", "t2"));
        same["apiVersion"] = json!("v1beta1");
        assert!(is_noop(&same, &old));
        let relabelled = object(json!({"k": "v"}), json!({}), json!({"name": "a", "labels": {"x": "y"}}));
        assert!(!is_noop(&relabelled, &old), "a metadata change is a write");
        let mut other_manager = old.clone();
        other_manager["metadata"]["managedFields"][0]["manager"] = json!("n");
        assert!(!is_noop(&other_manager, &old));
        assert!(!is_noop(&object(json!({"k": "w"}), json!({}), meta("1", "t1")), &old));
        let mut extra = old.clone();
        extra["spec"] = json!({});
        assert!(!is_noop(&extra, &old) && !is_noop(&old, &extra), "a field added or removed is a write");
    }

    #[test]
    fn the_generation_follows_everything_but_metadata_and_a_status_subresource() {
        let kinds = Kinds::builtin();
        let config_maps = kinds.by_kind("v1", "ConfigMap").unwrap();
        let old = object(json!({"k": "v"}), json!({"phase": "a"}), json!({"name": "a"}));
        let relabelled = object(json!({"k": "v"}), json!({"phase": "a"}), json!({"name": "a", "labels": {"x": "y"}}));
        assert!(!generation_changes(config_maps, &relabelled, &old));
        assert!(generation_changes(config_maps, &object(json!({"k": "w"}), json!({"phase": "a"}), json!({})), &old));
        let status = object(json!({"k": "v"}), json!({"phase": "b"}), json!({"name": "a"}));
        let mut subresource = config_maps.clone();
        subresource.status_subresource = true;
        assert!(!generation_changes(&subresource, &status, &old), "status is a subresource");
        subresource.status_subresource = false;
        assert!(generation_changes(&subresource, &status, &old), "status is part of the object");
    }
}
