//! The kinds the plugins create: one cache per kind of the objects the host manages (by label),
//! and the writes — server-side apply under the field manager `ksm-adapter`, and delete.

use crate::k0rdent::ServiceSet;
use crate::plan::children::{
    APPLIED_HASH_ANNOTATION, MANAGED_LABEL, SERVICE_LABEL, SERVICE_SET_LABEL, SERVICE_SET_NAMESPACE_LABEL,
};
use crate::plan::reconcile::ChildRef;
use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use ksm_plugin_sdk::contract::ObjectKind;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The field manager of every server-side apply the host makes.
pub const FIELD_MANAGER: &str = "ksm-adapter";

/// One kind a plugin creates, with the cache of the objects the host manages.
struct ChildKind {
    resource: ApiResource,
    cache: Store<DynamicObject>,
    listed: watch::Receiver<bool>,
}

/// The kinds the loaded plugins create. Kinds are added as plugins load and stay cached for the
/// life of the process (a plugin that goes may leave children to clean up).
pub struct ChildKinds {
    client: Client,
    /// Wakes the ServiceSet a changed child belongs to.
    wake: Waker,
    kinds: RwLock<HashMap<(String, String), Arc<ChildKind>>>,
    /// What the API server answered to the host's latest applies, until the caches show the
    /// same content: a reconcile that runs before the watch delivers an applied child must
    /// not apply it again.
    applied: Applied,
    /// The cached children by ServiceSet (namespace, name), so a reconcile reads its own
    /// children instead of scanning every cached object. A superset: entries are checked
    /// against the cache when read.
    by_owner: ByOwner,
}

/// The channel that wakes a ServiceSet's reconcile.
pub type Waker = UnboundedSender<ObjectRef<ServiceSet>>;
/// Cached children by ServiceSet (namespace, name).
type ByOwner = Arc<Mutex<HashMap<(String, String), HashSet<ChildRef>>>>;
/// Answers of recent applies, with when they came.
type Applied = Arc<Mutex<HashMap<ChildRef, (Instant, Value)>>>;

/// How long an apply's answer stands in for a cache that has not caught up (a safety net: the
/// watch normally delivers the child within milliseconds, and its deletion clears the entry).
const APPLIED_TTL: Duration = Duration::from_secs(30);

impl ChildKinds {
    /// No kinds yet; changes to children will wake their ServiceSet through `wake`.
    pub fn new(client: &Client, wake: Waker) -> Self {
        Self {
            client: client.clone(),
            wake,
            kinds: RwLock::default(),
            applied: Arc::default(),
            by_owner: Arc::default(),
        }
    }

    /// Starts caching each of `kinds` not cached yet (a watch of the objects the host manages,
    /// on a task of its own); returns, for every one of `kinds`, the flag that turns true once
    /// its cache holds a complete list.
    pub fn ensure<'a>(&self, kinds: impl IntoIterator<Item = &'a ObjectKind>) -> Vec<watch::Receiver<bool>> {
        let mut known = self.kinds.write().unwrap();
        kinds
            .into_iter()
            .map(|kind| {
                let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
                let key = (gvk.api_version(), gvk.kind.clone());
                let child = known
                    .entry(key)
                    .or_insert_with(|| Arc::new(self.watch(ApiResource::from_gvk_with_plural(&gvk, &kind.plural))));
                child.listed.clone()
            })
            .collect()
    }

    /// Waits until the caches of `kinds` hold a complete list.
    pub async fn listed<'a>(&self, kinds: impl IntoIterator<Item = &'a ObjectKind>) {
        for mut flag in self.ensure(kinds) {
            let _ = flag.wait_for(|listed| *listed).await;
        }
    }

    fn watch(&self, resource: ApiResource) -> ChildKind {
        let writer = Writer::new(resource.clone());
        let cache = writer.as_reader();
        let config = watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true"));
        let (is_listed, listed) = watch::channel(false);
        let (forget, index, indexed, wake) =
            (self.applied.clone(), self.by_owner.clone(), resource.clone(), self.wake.clone());
        let events = watcher(Api::<DynamicObject>::all_with(self.client.clone(), &resource), config)
            .default_backoff()
            .modify(|object| object.managed_fields_mut().clear())
            .reflect(writer);
        tokio::spawn(events.for_each(move |event| {
            let Ok(event) = event else { return futures::future::ready(()) };
            super::mark_listed(&is_listed, &event);
            match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    if let Some((owner, child)) = owner_of(&indexed, object) {
                        caught_up(&forget, &child, object);
                        index.lock().unwrap().entry(owner.clone()).or_default().insert(child);
                        let _ = wake.unbounded_send(ObjectRef::new(&owner.1).within(&owner.0));
                    }
                }
                watcher::Event::Delete(object) => {
                    if let Some((owner, child)) = owner_of(&indexed, object) {
                        forget.lock().unwrap().remove(&child);
                        if let Some(children) = index.lock().unwrap().get_mut(&owner) {
                            children.remove(&child);
                        }
                        let _ = wake.unbounded_send(ObjectRef::new(&owner.1).within(&owner.0));
                    }
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            }
            futures::future::ready(())
        }));
        ChildKind { resource, cache, listed }
    }

    /// The cached children of `service_set` (found by the ServiceSet label), as JSON.
    /// Children the host applied but the caches do not show yet are taken from the apply's
    /// answer.
    pub fn cached(&self, service_set: &ServiceSet) -> Vec<Value> {
        let owner = (service_set.namespace().unwrap_or_default(), service_set.name_any());
        let refs = self.by_owner.lock().unwrap().get(&owner).cloned().unwrap_or_default();
        let mut children: Vec<Value> = refs
            .iter()
            .filter_map(|child| {
                let kind = self.find(&child.api_version, &child.kind)?;
                let key = ObjectRef::new_with(&child.name, kind.resource.clone()).within(&child.namespace);
                kind.cache.get(&key)
            })
            .filter(|o| owned_by(o, &owner))
            .filter_map(|object| serde_json::to_value(&*object).ok())
            .collect();
        children.sort_by_key(ChildRef::of);
        let mut applied = self.applied.lock().unwrap();
        applied.retain(|key, (at, answer)| {
            if at.elapsed() > APPLIED_TTL {
                return false;
            }
            let labels = &answer["metadata"]["labels"];
            if labels[SERVICE_SET_NAMESPACE_LABEL] != owner.0.as_str() || labels[SERVICE_SET_LABEL] != owner.1.as_str()
            {
                return true;
            }
            match children.iter_mut().find(|c| ChildRef::of(c) == *key) {
                Some(cached) if applied_hash(cached) == applied_hash(answer) => false, // the cache caught up
                Some(cached) => {
                    *cached = answer.clone();
                    true
                }
                None => {
                    children.push(answer.clone());
                    true
                }
            }
        });
        children
    }

    /// Whether service `service` of ServiceSet `namespace/name` has any cached child.
    pub fn any(&self, namespace: &str, name: &str, service: &str) -> bool {
        let owner = (namespace.to_string(), name.to_string());
        self.kinds.read().unwrap().values().any(|kind| {
            kind.cache
                .find(|o| owned_by(o, &owner) && o.labels().get(SERVICE_LABEL).is_some_and(|v| v == service))
                .is_some()
        })
    }

    /// The children of `service_set` that exist right now, read from the API server rather than
    /// the caches: what the host checks before it lets a ServiceSet go.
    pub async fn live(&self, service_set: &ServiceSet) -> kube::Result<Vec<ChildRef>> {
        let namespace = service_set.namespace().unwrap_or_default();
        let selector =
            format!("{SERVICE_SET_LABEL}={},{SERVICE_SET_NAMESPACE_LABEL}={namespace}", service_set.name_any());
        let params = ListParams::default().labels(&selector);
        let resources: Vec<ApiResource> = self.kinds.read().unwrap().values().map(|k| k.resource.clone()).collect();
        let mut found = Vec::new();
        for resource in resources {
            let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
            for object in api.list_metadata(&params).await? {
                found.push(ChildRef {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                    namespace: object.namespace().unwrap_or_default(),
                    name: object.name_any(),
                });
            }
        }
        Ok(found)
    }

    /// Whether the cached child `child` is already being deleted.
    pub fn is_deleting(&self, child: &ChildRef) -> bool {
        self.find(&child.api_version, &child.kind).is_some_and(|kind| {
            let key = ObjectRef::new_with(&child.name, kind.resource.clone()).within(&child.namespace);
            kind.cache.get(&key).is_some_and(|o| o.metadata.deletion_timestamp.is_some())
        })
    }

    /// Server-side applies `child` (forcing ownership of the fields it sets).
    pub async fn apply(&self, child: &Value) -> kube::Result<()> {
        let reference = ChildRef::of(child);
        let api = self.api(&reference)?;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut answer = api.patch(&reference.name, &params, &Patch::Apply(child)).await?;
        answer.managed_fields_mut().clear();
        if let Ok(answer) = serde_json::to_value(answer) {
            self.applied.lock().unwrap().insert(reference, (Instant::now(), answer));
        }
        Ok(())
    }

    /// Deletes `child`; one that is already gone is fine.
    pub async fn delete(&self, child: &ChildRef) -> kube::Result<()> {
        self.applied.lock().unwrap().remove(child);
        match self.api(child)?.delete(&child.name, &DeleteParams::background()).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            result => result.map(drop),
        }
    }

    fn find(&self, api_version: &str, kind: &str) -> Option<Arc<ChildKind>> {
        self.kinds.read().unwrap().get(&(api_version.to_string(), kind.to_string())).cloned()
    }

    fn api(&self, child: &ChildRef) -> kube::Result<Api<DynamicObject>> {
        let kind = self.find(&child.api_version, &child.kind).ok_or_else(|| {
            kube::Error::Service(
                format!("{} {} is not a kind the plugin declared", child.api_version, child.kind).into(),
            )
        })?;
        Ok(Api::namespaced_with(self.client.clone(), &child.namespace, &kind.resource))
    }
}

/// Drops the answer of an apply to `child` once the watch delivers what it applied: from then
/// on the cache tells the truth, and the answer would only hold memory.
fn caught_up(applied: &Applied, child: &ChildRef, object: &DynamicObject) {
    let mut applied = applied.lock().unwrap();
    let seen = object.annotations().get(APPLIED_HASH_ANNOTATION).map(String::as_str);
    if applied.get(child).is_some_and(|(_, answer)| applied_hash(answer) == seen) {
        applied.remove(child);
    }
}

/// The content hash the host stamped on a child it applied.
fn applied_hash(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][APPLIED_HASH_ANNOTATION].as_str()
}

/// The ServiceSet (namespace, name) a cached child belongs to, by its labels.
fn owner_key(object: &DynamicObject) -> Option<(String, String)> {
    let labels = object.labels();
    Some((labels.get(SERVICE_SET_NAMESPACE_LABEL)?.clone(), labels.get(SERVICE_SET_LABEL)?.clone()))
}

fn owned_by(object: &DynamicObject, owner: &(String, String)) -> bool {
    owner_key(object).as_ref() == Some(owner)
}

/// The ServiceSet (namespace, name) a cached child belongs to, and the child's reference.
fn owner_of(resource: &ApiResource, object: &DynamicObject) -> Option<((String, String), ChildRef)> {
    let namespace = object.metadata.namespace.clone()?;
    let owner = owner_key(object)?;
    let child = ChildRef {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        namespace: namespace.clone(),
        name: object.name_any(),
    };
    Some((owner, child))
}
