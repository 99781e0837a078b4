//! The kinds the plugin creates: one cache per kind of the objects the host manages (by label),
//! and the writes — server-side apply under the field manager `ksm-adapter`, and delete.

use crate::k0rdent::ServiceSet;
use crate::plan::children::{APPLIED_HASH_ANNOTATION, MANAGED_LABEL, SERVICE_LABEL, SERVICE_SET_LABEL};
use crate::plan::reconcile::ChildRef;
use futures::{Stream, StreamExt};
use ksm_plugin_sdk::contract::PluginMetadata;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The field manager of every server-side apply the host makes.
pub const FIELD_MANAGER: &str = "ksm-adapter";

/// One kind the plugin creates, with the cache of the objects the host manages.
struct ChildKind {
    resource: ApiResource,
    cache: Store<DynamicObject>,
}

/// The plugin's kinds.
pub struct ChildKinds {
    client: Client,
    kinds: Vec<ChildKind>,
    /// What the API server answered to the host's latest applies, until the caches show the
    /// same content: a reconcile that runs before the watch delivers an applied child must
    /// not apply it again.
    applied: Applied,
    /// The cached children by ServiceSet (namespace, name), so a reconcile reads its own
    /// children instead of scanning every cached object. A superset: entries are checked
    /// against the cache when read.
    by_owner: ByOwner,
}

/// Cached children by ServiceSet (namespace, name).
type ByOwner = Arc<Mutex<HashMap<(String, String), HashSet<ChildRef>>>>;
/// Answers of recent applies, with when they came.
type Applied = Arc<Mutex<HashMap<ChildRef, (Instant, Value)>>>;

/// How long an apply's answer stands in for a cache that has not caught up (a safety net: the
/// watch normally delivers the child within milliseconds, and its deletion clears the entry).
const APPLIED_TTL: Duration = Duration::from_secs(30);

/// A stream of changes to one child kind, for the controller to map to owners.
pub type ChildEvents = std::pin::Pin<Box<dyn Stream<Item = Result<DynamicObject, watcher::Error>> + Send>>;

impl ChildKinds {
    /// Starts caching every kind the plugin declares it creates; returns the kinds, per kind
    /// the stream of changes (which fills the cache, so it must be polled) and the flag that
    /// turns true once the cache holds a complete list.
    pub fn watch(
        client: &Client,
        metadata: &PluginMetadata,
    ) -> (Self, Vec<(ApiResource, ChildEvents)>, Vec<watch::Receiver<bool>>) {
        let mut kinds = Vec::new();
        let mut events = Vec::new();
        let mut flags = Vec::new();
        let applied: Applied = Arc::default();
        let by_owner: ByOwner = Arc::default();
        for kind in &metadata.creates {
            let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, &kind.plural);
            let writer = Writer::new(resource.clone());
            let cache = writer.as_reader();
            let config = watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true"));
            let (listed, is_listed) = watch::channel(false);
            let forget = applied.clone();
            let (index, indexed) = (by_owner.clone(), resource.clone());
            let stream = watcher(Api::<DynamicObject>::all_with(client.clone(), &resource), config)
                .default_backoff()
                .modify(|object| object.managed_fields_mut().clear())
                .reflect(writer)
                .inspect(move |event| {
                    if let Ok(event) = event {
                        super::mark_listed(&listed, event);
                        match event {
                            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                                if let Some((owner, child)) = owner_of(&indexed, object) {
                                    index.lock().unwrap().entry(owner).or_default().insert(child);
                                }
                            }
                            watcher::Event::Delete(object) => {
                                if let Some((owner, child)) = owner_of(&indexed, object) {
                                    forget.lock().unwrap().remove(&child);
                                    if let Some(children) = index.lock().unwrap().get_mut(&owner) {
                                        children.remove(&child);
                                    }
                                }
                            }
                            watcher::Event::Init | watcher::Event::InitDone => {}
                        }
                    }
                })
                .touched_objects();
            flags.push(is_listed);
            events.push((resource.clone(), Box::pin(stream) as ChildEvents));
            kinds.push(ChildKind { resource, cache });
        }
        (Self { client: client.clone(), kinds, applied, by_owner }, events, flags)
    }

    /// The cached children of `service_set` (found by the ServiceSet label), as JSON.
    /// Children the host applied but the caches do not show yet are taken from the apply's
    /// answer.
    pub fn cached(&self, service_set: &ServiceSet) -> Vec<Value> {
        let (name, namespace) = (service_set.name_any(), service_set.namespace());
        let owner = (namespace.clone().unwrap_or_default(), name.clone());
        let refs = self.by_owner.lock().unwrap().get(&owner).cloned().unwrap_or_default();
        let mut children: Vec<Value> = refs
            .iter()
            .filter_map(|child| {
                let kind = self.find(&child.api_version, &child.kind)?;
                let key = ObjectRef::new_with(&child.name, kind.resource.clone()).within(&child.namespace);
                kind.cache.get(&key)
            })
            .filter(|o| o.labels().get(SERVICE_SET_LABEL) == Some(&name))
            .filter_map(|object| serde_json::to_value(&*object).ok())
            .collect();
        children.sort_by_key(ChildRef::of);
        let mut applied = self.applied.lock().unwrap();
        let hash = |v: &Value| v["metadata"]["annotations"][APPLIED_HASH_ANNOTATION].clone();
        applied.retain(|key, (at, answer)| {
            if at.elapsed() > APPLIED_TTL {
                return false;
            }
            if key.namespace != namespace.as_deref().unwrap_or_default()
                || answer["metadata"]["labels"][SERVICE_SET_LABEL] != name.as_str()
            {
                return true;
            }
            match children.iter_mut().find(|c| ChildRef::of(c) == *key) {
                Some(cached) if hash(cached) == hash(answer) => false, // the cache caught up
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
        self.kinds.iter().any(|kind| {
            kind.cache
                .find(|o| {
                    o.metadata.namespace.as_deref() == Some(namespace)
                        && o.labels().get(SERVICE_SET_LABEL).is_some_and(|v| v == name)
                        && o.labels().get(SERVICE_LABEL).is_some_and(|v| v == service)
                })
                .is_some()
        })
    }

    /// The children of `service_set` that exist right now, read from the API server rather than
    /// the caches: what the host checks before it lets a ServiceSet go.
    pub async fn live(&self, service_set: &ServiceSet) -> kube::Result<Vec<ChildRef>> {
        let namespace = service_set.namespace().unwrap_or_default();
        let params = ListParams::default().labels(&format!("{SERVICE_SET_LABEL}={}", service_set.name_any()));
        let mut found = Vec::new();
        for kind in &self.kinds {
            let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), &namespace, &kind.resource);
            for object in api.list_metadata(&params).await? {
                found.push(ChildRef {
                    api_version: kind.resource.api_version.clone(),
                    kind: kind.resource.kind.clone(),
                    namespace: namespace.clone(),
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

    fn find(&self, api_version: &str, kind: &str) -> Option<&ChildKind> {
        self.kinds.iter().find(|k| k.resource.api_version == api_version && k.resource.kind == kind)
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

/// The ServiceSet (namespace, name) a cached child belongs to, by its label, and its reference.
fn owner_of(resource: &ApiResource, object: &DynamicObject) -> Option<((String, String), ChildRef)> {
    let namespace = object.metadata.namespace.clone()?;
    let owner = object.labels().get(SERVICE_SET_LABEL)?.clone();
    let child = ChildRef {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        namespace: namespace.clone(),
        name: object.name_any(),
    };
    Some(((namespace, owner), child))
}
