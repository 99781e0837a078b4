//! The kinds the plugins create: one cache per kind of the objects the host manages (by label),
//! and the writes — server-side apply under the field manager `ksm-adapter`, and delete. Plus
//! the kinds the plugins read, cached for `map-status` (see [`ReadCache`]).

use super::child_cache::ChildCache;
use super::listed::Listed;
use super::read_cache::ReadCache;
use crate::controller::plumbing::watch_retry::backed_off;
use crate::controller::plumbing::watches::WatchFailures;
use crate::k0rdent::ChildRef;
use crate::k0rdent::{NamespacedName, ServiceSet};
use crate::plan::children::{
    APPLIED_HASH_ANNOTATION, MANAGED_LABEL, SERVICE_SET_LABEL, SERVICE_SET_NAMESPACE_LABEL, SERVICE_SET_UID_LABEL,
    label_value, recorded,
};
use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use ksm_plugin_sdk::contract::ObjectKind;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The field manager of every server-side apply the host makes.
pub const FIELD_MANAGER: &str = "ksm-adapter";

/// One kind a plugin creates or reads, and whether each of its watches holds a complete list.
struct ChildKind {
    resource: ApiResource,
    listed: Vec<watch::Receiver<bool>>,
}

/// The kinds the loaded plugins create, on one cluster. Kinds are added as plugins load and stay
/// cached while the `ChildKinds` lives (a plugin that goes may leave children to clean up); its
/// watches stop when it is dropped (a region no longer used).
pub struct ChildKinds {
    client: Client,
    /// Wakes the ServiceSet a changed child belongs to.
    wake: Waker,
    kinds: RwLock<HashMap<(String, String), Arc<ChildKind>>>,
    /// The kinds the plugins read (not written, and watched whole: the CD tool made them).
    reads: RwLock<HashMap<(String, String), Arc<ChildKind>>>,
    /// What the API server answered to the host's latest applies, until the caches show the
    /// same content: a reconcile that runs before the watch delivers an applied child must
    /// not apply it again.
    applied: Applied,
    /// The objects the host manages, of every kind.
    cache: Arc<Mutex<ChildCache>>,
    /// The objects of the kinds the plugins read that have owners.
    read_cache: Arc<Mutex<ReadCache>>,
    /// The objects of the kinds the plugins create that are not the host's (not labelled as
    /// its): only their references, so that a first apply never lands on one of them, without
    /// reading each name first (few exist: kcm's own releases, a user's).
    unmanaged: Arc<Mutex<HashSet<ChildRef>>>,
    /// Where the watches report their failures.
    watch_failures: Arc<WatchFailures>,
    /// The watches' tasks, stopped on drop.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for ChildKinds {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            task.abort();
        }
    }
}

/// The channel that wakes a ServiceSet's reconcile.
pub type Waker = UnboundedSender<NamespacedName>;
/// Answers of recent applies, with when they came.
type Applied = Arc<Mutex<HashMap<ChildRef, (Instant, Value)>>>;

/// How long an apply's answer stands in for a cache that has not caught up (a safety net: the
/// watch normally delivers the child within milliseconds, and its deletion clears the entry).
const APPLIED_TTL: Duration = Duration::from_secs(30);

impl ChildKinds {
    /// No kinds yet; changes to children will wake their ServiceSet through `wake`, and the
    /// watches report their failures to `watch_failures`.
    pub fn new(client: &Client, wake: Waker, watch_failures: Arc<WatchFailures>) -> Self {
        Self {
            client: client.clone(),
            wake,
            kinds: RwLock::default(),
            reads: RwLock::default(),
            applied: Arc::default(),
            cache: Arc::default(),
            read_cache: Arc::default(),
            unmanaged: Arc::default(),
            watch_failures,
            tasks: Mutex::default(),
        }
    }

    /// Starts caching each of `kinds` not cached yet (a watch of the objects the host manages,
    /// on a task of its own); returns, for every one of `kinds`, the flag that turns true once
    /// its cache holds a complete list.
    pub fn ensure<'a>(&self, kinds: impl IntoIterator<Item = &'a ObjectKind>) -> Vec<watch::Receiver<bool>> {
        self.ensure_as(Role::Creates, kinds)
    }

    /// As [`ensure`](Self::ensure), for kinds the plugins read.
    pub fn ensure_reads<'a>(&self, kinds: impl IntoIterator<Item = &'a ObjectKind>) -> Vec<watch::Receiver<bool>> {
        self.ensure_as(Role::Reads, kinds)
    }

    fn ensure_as<'a>(&self, role: Role, kinds: impl IntoIterator<Item = &'a ObjectKind>) -> Vec<watch::Receiver<bool>> {
        let resources = kinds.into_iter().map(|kind| {
            let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
            ApiResource::from_gvk_with_plural(&gvk, &kind.plural)
        });
        self.ensure_resources(role, resources)
    }

    fn ensure_resources(
        &self,
        role: Role,
        resources: impl IntoIterator<Item = ApiResource>,
    ) -> Vec<watch::Receiver<bool>> {
        let mut known = match role {
            Role::Creates | Role::Unmanaged => self.kinds.write().unwrap(),
            Role::Reads => self.reads.write().unwrap(),
        };
        resources
            .into_iter()
            .flat_map(|resource| {
                let key = (resource.api_version.clone(), resource.kind.clone());
                let child = known.entry(key).or_insert_with(|| {
                    let roles: &[Role] = match role {
                        Role::Creates => &[Role::Creates, Role::Unmanaged],
                        Role::Reads | Role::Unmanaged => &[role],
                    };
                    let listed = roles.iter().map(|role| self.watch(resource.clone(), *role)).collect();
                    Arc::new(ChildKind { resource, listed })
                });
                child.listed.clone()
            })
            .collect()
    }

    /// Starts caching every kind `other` creates (the management cluster's kinds are those of
    /// every plugin loaded): a region's children are looked for by all of them when they are to
    /// be deleted, whichever plugin serves the ServiceSet now.
    pub fn ensure_like(&self, other: &ChildKinds) {
        let resources: Vec<ApiResource> = other.kinds.read().unwrap().values().map(|k| k.resource.clone()).collect();
        self.ensure_resources(Role::Creates, resources);
    }

    /// How many kinds are watched.
    pub fn watched(&self) -> usize {
        self.kinds.read().unwrap().len()
    }

    /// Waits until the caches of `kinds` hold a complete list.
    pub async fn listed<'a>(&self, kinds: impl IntoIterator<Item = &'a ObjectKind>) {
        for flag in self.ensure(kinds) {
            crate::controller::plumbing::watches::wait_listed(flag).await;
        }
    }

    /// Waits until the caches of `creates` and `reads` hold a complete list: a plugin's
    /// `map-status` must not see a service's objects without what it reads about them.
    pub async fn listed_with_reads<'a>(
        &self,
        creates: impl IntoIterator<Item = &'a ObjectKind>,
        reads: impl IntoIterator<Item = &'a ObjectKind>,
    ) {
        self.listed(creates).await;
        for flag in self.ensure_reads(reads) {
            crate::controller::plumbing::watches::wait_listed(flag).await;
        }
    }

    /// The objects of the kinds the plugins read that `child` (live, with its uid) owns.
    pub fn owned_by(&self, child: &Value) -> Vec<Value> {
        let Some(uid) = child["metadata"]["uid"].as_str() else { return Vec::new() };
        let owned = self.read_cache.lock().unwrap().owned_by(uid);
        owned.into_iter().filter(|o| crate::plan::reads::owns(child, o)).collect()
    }

    /// Starts the watch of `resource` for `role`; returns the flag that turns true once it
    /// holds a complete list.
    fn watch(&self, resource: ApiResource, role: Role) -> watch::Receiver<bool> {
        let config = match role {
            Role::Creates => watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true")),
            Role::Unmanaged => watcher::Config::default().labels(&format!("{MANAGED_LABEL}!=true")),
            Role::Reads => watcher::Config::default(),
        };
        let (is_listed, listed) = watch::channel(false);
        let (applied, cache, kind, wake, watch_failures) = (
            self.applied.clone(),
            self.cache.clone(),
            resource.clone(),
            self.wake.clone(),
            self.watch_failures.clone(),
        );
        let (read_cache, unmanaged) = (self.read_cache.clone(), self.unmanaged.clone());
        // The objects seen since the (re)list began; at its end the others are gone.
        let mut relisted = Listed::default();
        let events = backed_off(watcher(Api::<DynamicObject>::all_with(self.client.clone(), &resource), config))
            .modify(|object| object.managed_fields_mut().clear());
        let task = tokio::spawn(events.for_each(move |event| {
            crate::controller::plumbing::watches::observe(&watch_failures, &kind.kind, &is_listed, &event);
            let Ok(event) = event else { return futures::future::ready(()) };
            let changed = match role {
                Role::Creates => on_child(event, &kind, &applied, &cache, &mut relisted),
                Role::Unmanaged => on_unmanaged(event, &kind, &unmanaged, &mut relisted),
                Role::Reads => {
                    let owners = on_read(event, &kind, &read_cache, &mut relisted);
                    let cache = cache.lock().unwrap();
                    owners.iter().filter_map(|owner| cache.owner(owner)).collect()
                }
            };
            for key in changed {
                let _ = wake.unbounded_send(key);
            }
            futures::future::ready(())
        }));
        self.tasks.lock().unwrap().push(task.abort_handle());
        listed
    }

    /// The cached children of `service_set` (found by the ServiceSet label), as JSON.
    /// Children the host applied but the caches do not show yet are taken from the apply's
    /// answer.
    pub fn cached(&self, service_set: &ServiceSet) -> Vec<Value> {
        let owner = NamespacedName::of(service_set);
        let mut children = self.cache.lock().unwrap().children_of(&owner);
        let mut applied = self.applied.lock().unwrap();
        applied.retain(|key, (at, answer)| {
            if at.elapsed() > APPLIED_TTL {
                return false;
            }
            let namespace = &answer["metadata"]["labels"][SERVICE_SET_NAMESPACE_LABEL];
            if namespace != owner.namespace.as_str() || recorded(answer, SERVICE_SET_LABEL) != Some(owner.name.as_str())
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
        children.sort_by_key(ChildRef::of);
        children
    }

    /// Whether ServiceSet `owner` has any cached child.
    pub fn holds(&self, owner: &NamespacedName) -> bool {
        self.cache.lock().unwrap().holds(owner)
    }

    /// Whether service `service` of ServiceSet `namespace/name` has any cached child.
    pub fn any(&self, namespace: &str, name: &str, service: &str) -> bool {
        let owner = NamespacedName::new(namespace, name);
        self.cache.lock().unwrap().any(&owner, service)
    }

    /// The children of `service_set` (by its uid) that exist right now, of every kind cached
    /// here, read from the API server rather than the caches: what the host checks before it
    /// lets a ServiceSet go. A kind the cluster does not serve has none.
    pub async fn live(&self, service_set: &ServiceSet) -> kube::Result<Vec<Live>> {
        let uid = service_set.uid().unwrap_or_default();
        let params = ListParams::default().labels(&format!("{SERVICE_SET_UID_LABEL}={}", label_value(&uid)));
        let resources: Vec<ApiResource> = self.kinds.read().unwrap().values().map(|k| k.resource.clone()).collect();
        let mut found = Vec::new();
        for resource in resources {
            let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
            let listed = match api.list_metadata(&params).await {
                Err(kube::Error::Api(status)) if status.is_not_found() => continue,
                listed => listed?,
            };
            for object in listed {
                let child = ChildRef {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                    namespace: object.namespace().unwrap_or_default(),
                    name: object.name_any(),
                };
                found.push(Live { child, deleting: object.metadata.deletion_timestamp.is_some() });
            }
        }
        Ok(found)
    }

    /// The object of `child`'s name as the caches hold it, whoever's it is: a child of any
    /// ServiceSet, or (only its kind and name) an object the host did not create; None when
    /// neither holds one. What the host looks at before the first apply of a name, without a
    /// request.
    pub fn existing(&self, child: &ChildRef) -> Option<Value> {
        if let Some(object) = self.cache.lock().unwrap().object(child) {
            return Some(object);
        }
        self.unmanaged.lock().unwrap().contains(child).then(|| {
            serde_json::json!({"apiVersion": child.api_version, "kind": child.kind,
                "metadata": {"name": child.name, "namespace": child.namespace}})
        })
    }

    /// Whether the cached child `child` is already being deleted.
    pub fn is_deleting(&self, child: &ChildRef) -> bool {
        self.cache.lock().unwrap().is_deleting(child)
    }

    /// Server-side applies `child` (forcing ownership of the fields it sets); returns whether
    /// the object changed (a new `resourceVersion`), i.e. whether its watch will bring it back
    /// and wake its ServiceSet.
    pub async fn apply(&self, child: &Value) -> kube::Result<bool> {
        let reference = ChildRef::of(child);
        let api = self.api(&reference)?;
        let before = self.resource_version(&reference);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut answer = api.patch(&reference.name, &params, &Patch::Apply(child)).await?;
        answer.managed_fields_mut().clear();
        let changed = answer.resource_version() != before;
        if let Ok(answer) = serde_json::to_value(answer) {
            self.applied.lock().unwrap().insert(reference, (Instant::now(), answer));
        }
        Ok(changed)
    }

    /// The `resourceVersion` of `child` as the host last saw it: its latest apply's answer, else
    /// the cache.
    fn resource_version(&self, child: &ChildRef) -> Option<String> {
        if let Some((_, answer)) = self.applied.lock().unwrap().get(child) {
            return answer["metadata"]["resourceVersion"].as_str().map(String::from);
        }
        self.cache.lock().unwrap().resource_version(child)
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

/// A child as the API server lists it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    /// Which.
    pub child: ChildRef,
    /// Whether it is being deleted already.
    pub deleting: bool,
}

/// What the host does with the objects of a kind.
#[derive(Clone, Copy)]
enum Role {
    /// Plugins create them: the host's own (by label), applied and deleted.
    Creates,
    /// Plugins create them, but these are not labelled as the host's: only their names are kept.
    Unmanaged,
    /// Plugins read them: the CD tool's, only cached.
    Reads,
}

/// Takes a watch event of a kind the plugins create into the cache; returns the ServiceSets
/// whose children changed.
fn on_child(
    event: watcher::Event<DynamicObject>,
    kind: &ApiResource,
    applied: &Applied,
    cache: &Mutex<ChildCache>,
    relisted: &mut Listed,
) -> Vec<NamespacedName> {
    on_event(
        event,
        kind,
        relisted,
        |child, object| {
            caught_up(applied, &child, object);
            cache.lock().unwrap().apply(child, object)
        },
        |child| {
            applied.lock().unwrap().remove(&child);
            cache.lock().unwrap().delete(&child).into_iter().collect()
        },
        |listed| cache.lock().unwrap().keep_listed(&kind.api_version, &kind.kind, &listed),
    )
}

/// Takes a watch event of an object of a kind the plugins create that is not the host's into
/// `unmanaged`; wakes nobody (a first apply looks there).
fn on_unmanaged(
    event: watcher::Event<DynamicObject>,
    kind: &ApiResource,
    unmanaged: &Mutex<HashSet<ChildRef>>,
    relisted: &mut Listed,
) -> Vec<NamespacedName> {
    on_event(
        event,
        kind,
        relisted,
        |child, _| {
            unmanaged.lock().unwrap().insert(child);
            Vec::new()
        },
        |child| {
            unmanaged.lock().unwrap().remove(&child);
            Vec::new()
        },
        |listed| {
            let of_kind = |c: &ChildRef| c.api_version == kind.api_version && c.kind == kind.kind;
            unmanaged.lock().unwrap().retain(|c| !of_kind(c) || listed.contains(c));
            Vec::new()
        },
    )
}

/// Takes a watch event of a kind the plugins read into the read cache; returns the owners whose
/// owned objects changed.
fn on_read(
    event: watcher::Event<DynamicObject>,
    kind: &ApiResource,
    cache: &Mutex<ReadCache>,
    relisted: &mut Listed,
) -> Vec<ChildRef> {
    on_event(
        event,
        kind,
        relisted,
        |read, object| cache.lock().unwrap().apply(read, object),
        |read| cache.lock().unwrap().delete(&read),
        |listed| cache.lock().unwrap().keep_listed(&kind.api_version, &kind.kind, &listed),
    )
}

/// One watch event of kind `kind`, for a cache: `apply` an object seen, `delete` one gone, and at
/// the end of a (re)list `keep` only the objects it held (`relisted` collects them meanwhile).
fn on_event<T>(
    event: watcher::Event<DynamicObject>,
    kind: &ApiResource,
    relisted: &mut Listed,
    apply: impl FnOnce(ChildRef, &DynamicObject) -> Vec<T>,
    delete: impl FnOnce(ChildRef) -> Vec<T>,
    keep: impl FnOnce(Listed) -> Vec<T>,
) -> Vec<T> {
    match event {
        watcher::Event::Apply(object) => apply(child_ref(kind, &object), &object),
        watcher::Event::InitApply(object) => {
            let child = child_ref(kind, &object);
            relisted.insert(&child);
            apply(child, &object)
        }
        watcher::Event::Delete(object) => delete(child_ref(kind, &object)),
        watcher::Event::Init => {
            *relisted = Listed::default();
            Vec::new()
        }
        watcher::Event::InitDone => keep(std::mem::take(relisted)),
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

/// The reference of `object`, of kind `resource`.
fn child_ref(resource: &ApiResource, object: &DynamicObject) -> ChildRef {
    ChildRef {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api;
    use serde_json::json;

    fn helm_release() -> ObjectKind {
        ObjectKind {
            group: "helm.toolkit.fluxcd.io".into(),
            version: "v2".into(),
            kind: "HelmRelease".into(),
            plural: "helmreleases".into(),
            namespaced: true,
        }
    }

    fn child(name: &str) -> Value {
        json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": "team", "labels": {
                MANAGED_LABEL: "true", SERVICE_SET_NAMESPACE_LABEL: "team", SERVICE_SET_LABEL: "prod",
            }, "annotations": {APPLIED_HASH_ANNOTATION: "h1"}},
            "spec": {"interval": "10m"},
        })
    }

    fn service_set() -> ServiceSet {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "prod", "namespace": "team", "uid": "uid-1"},
            "spec": {"provider": {"name": "ksm-flux"}},
        }))
        .unwrap()
    }

    fn kinds(client: Client) -> ChildKinds {
        let (wake, _) = futures::channel::mpsc::unbounded();
        let kinds = ChildKinds::new(&client, wake, Arc::default());
        kinds.ensure([&helm_release()]);
        kinds
    }

    #[tokio::test]
    async fn an_apply_is_forced_under_the_hosts_field_manager_and_seen_before_the_watch_delivers_it() {
        let (client, asked) = mock_api::client(|line| {
            let mut answer = child("prod.a");
            answer["metadata"]["resourceVersion"] = "7".into();
            (line == "PATCH /apis/helm.toolkit.fluxcd.io/v2/namespaces/team/helmreleases/prod.a")
                .then_some((200, answer))
        });
        let kinds = kinds(client);
        assert!(kinds.apply(&child("prod.a")).await.unwrap(), "a new object changed: its watch event will come");
        assert!(!kinds.apply(&child("prod.a")).await.unwrap(), "the same resourceVersion: nothing will come");
        let asked = asked.lock().unwrap().clone();
        let patch = asked.iter().find(|l| l.starts_with("PATCH")).unwrap();
        assert!(patch.contains("fieldManager=ksm-adapter") && patch.contains("force=true"), "{patch}");
        let cached = kinds.cached(&service_set());
        assert_eq!(cached.iter().map(|c| ChildRef::of(c).name).collect::<Vec<_>>(), ["prod.a"]);
    }

    /// A relist keeps the children it lists and forgets, at its end, the cached ones it no
    /// longer holds, waking their ServiceSets.
    #[test]
    fn a_relist_forgets_the_cached_children_it_no_longer_holds() {
        let kind = ApiResource::from_gvk(&GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease"));
        let (applied, cache, mut relisted) = (Applied::default(), Mutex::new(ChildCache::default()), Listed::default());
        let object = |name: &str| -> DynamicObject { serde_json::from_value(child(name)).unwrap() };
        let mut event = |event| on_child(event, &kind, &applied, &cache, &mut relisted);
        event(watcher::Event::Apply(object("prod.kept")));
        event(watcher::Event::Apply(object("prod.gone")));
        assert!(event(watcher::Event::Init).is_empty());
        event(watcher::Event::InitApply(object("prod.kept")));
        let prod = NamespacedName::new("team", "prod");
        assert_eq!(event(watcher::Event::InitDone), vec![prod.clone()], "the gone child's ServiceSet is woken");
        let names: Vec<_> = cache.lock().unwrap().children_of(&prod).iter().map(|c| ChildRef::of(c).name).collect();
        assert_eq!(names, ["prod.kept"]);
    }

    /// Before the first apply of a name the host looks in its caches, not at the API server:
    /// a child of any ServiceSet is there whole, an object the host did not create by name.
    #[tokio::test]
    async fn an_object_of_a_childs_name_is_found_in_the_caches_whoever_made_it() {
        let (client, asked) = mock_api::client(|_| None);
        let kinds = kinds(client);
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease"));
        let mut users: DynamicObject = serde_json::from_value(child("prod.users")).unwrap();
        users.labels_mut().clear();
        let mut relisted = Listed::default();
        on_unmanaged(watcher::Event::Apply(users.clone()), &resource, &kinds.unmanaged, &mut relisted);
        let theirs = kinds.existing(&ChildRef::of(&child("prod.users"))).expect("the user's object, by name");
        assert_eq!(theirs["metadata"]["name"], "prod.users");
        assert!(theirs["metadata"].get("labels").is_none(), "not the host's: foreign to every ServiceSet");
        on_child(
            watcher::Event::Apply(serde_json::from_value(child("prod.a")).unwrap()),
            &resource,
            &kinds.applied,
            &kinds.cache,
            &mut relisted,
        );
        let ours = kinds.existing(&ChildRef::of(&child("prod.a"))).expect("a child, whole");
        assert_eq!(ours["metadata"]["labels"][SERVICE_SET_LABEL], "prod");
        assert_eq!(kinds.existing(&ChildRef::of(&child("prod.new"))), None, "a free name");
        on_unmanaged(watcher::Event::Delete(users), &resource, &kinds.unmanaged, &mut relisted);
        assert_eq!(kinds.existing(&ChildRef::of(&child("prod.users"))), None, "gone: free again");
        assert!(
            !asked.lock().unwrap().iter().any(|l| l.starts_with("GET /apis/helm.toolkit.fluxcd.io/v2/namespaces")),
            "no request per name"
        );
    }

    #[tokio::test]
    async fn deleting_a_child_that_is_gone_is_fine_and_an_undeclared_kind_is_refused() {
        let (client, asked) = mock_api::client(|_| None);
        let kinds = kinds(client);
        let gone = ChildRef::of(&child("prod.a"));
        kinds.delete(&gone).await.unwrap();
        assert!(
            asked
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.starts_with("DELETE /apis/helm.toolkit.fluxcd.io/v2/namespaces/team/helmreleases/prod.a"))
        );
        let other = ChildRef { kind: "Application".into(), api_version: "argoproj.io/v1alpha1".into(), ..gone };
        let refused = kinds.delete(&other).await.unwrap_err();
        assert!(
            refused.to_string().contains("argoproj.io/v1alpha1 Application is not a kind the plugin declared"),
            "{refused}"
        );
    }
}
