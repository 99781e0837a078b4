//! ServiceSets as the controller's cache keeps them: each packed (zstd against the first
//! ServiceSet seen of its shape, with a status or without, as the child cache packs children),
//! beside the few fields read without unpacking it: what names it, what the triggers match on
//! and what the metrics count. A typed ServiceSet is mostly small strings, conditions and a
//! one-label map, each an allocation of its own: far more memory than its packed text
//! (docs/performance.md); a reconcile unpacks its own ServiceSet once.
//!
//! The watch decodes straight into a [`WatchedServiceSet`] (its `Deserialize` packs), so no
//! typed copy outlives the event; the store keeps only its [`CachedServiceSet`], which holds no
//! `ObjectMeta` (360 bytes inline, nearly all empty, that kube's `Resource` trait asks of the
//! watch's type). The packer is the process's one: the dictionaries must be those a text was
//! packed with.

use crate::k0rdent::{NamespacedName, ServiceSet, State};
use crate::packed::{Packed, Packer};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

/// One ServiceSet in the cache: 80 bytes, names and hashes sharing an allocation each.
pub struct CachedServiceSet {
    /// `namespace/name` (neither may hold a `/`), then `spec.provider.name` from `provider_at`,
    /// then `spec.cluster` from `cluster_at`.
    names: Box<str>,
    provider_at: u32,
    cluster_at: u32,
    /// A hash of each template its services name, then of each finalizer: what a template's
    /// change wakes (a rare collision wakes one more ServiceSet, which then finds nothing to
    /// do) and what the metrics count (the host's finalizer), in 8 bytes, not a string each.
    /// The first `templates` are the templates'.
    hashes: Box<[u64]>,
    templates: u16,
    /// A hash of what of the object is not spec content or status (see [`Self::fingerprint`]).
    fingerprint: u64,
    /// Whether its deletion has started.
    deleting: bool,
    /// `status.deployed`, and whether a service is `Failed`.
    deployed: bool,
    failed: bool,
    /// The whole ServiceSet as packed JSON.
    packed: Packed,
}

impl CachedServiceSet {
    /// `service_set`, packed without its managedFields (the host never reads them, and they
    /// can outweigh the rest); fails only if zstd does or a name is too long to index.
    pub fn pack(mut service_set: ServiceSet) -> std::io::Result<Self> {
        service_set.metadata.managed_fields = None;
        let text = serde_json::to_string(&service_set)?;
        let packed = lock().pack(&text, service_set.status.is_some())?;
        let meta = &service_set.metadata;
        let status = service_set.status.as_ref();
        let mut hasher = DefaultHasher::new();
        (meta.generation, &meta.labels, &meta.annotations, &meta.finalizers).hash(&mut hasher);
        meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()).hash(&mut hasher);
        let spec = &service_set.spec;
        let templates = spec.services.iter().map(|s| &s.template);
        let finalizers = meta.finalizers.iter().flatten();
        let hashes: Box<[u64]> = templates.chain(finalizers).map(|text| text_hash(text)).collect();
        let invalid = |field: &str| std::io::Error::other(format!("{field} too long to cache"));
        let at = |text: &str, field| u32::try_from(text.len()).map_err(|_| invalid(field));
        let key = NamespacedName::of(&service_set).to_string();
        let provider_at = at(&key, "metadata.name")?;
        let names = format!("{key}{}{}", spec.provider.name, spec.cluster);
        Ok(Self {
            cluster_at: at(&names[..names.len() - spec.cluster.len()], "spec.provider.name")?,
            names: names.into(),
            provider_at,
            templates: u16::try_from(spec.services.len()).map_err(|_| invalid("spec.services"))?,
            hashes,
            fingerprint: hasher.finish(),
            deleting: meta.deletion_timestamp.is_some(),
            deployed: status.is_some_and(|s| s.deployed),
            failed: status.is_some_and(|s| s.services.iter().any(|s| s.state == State::Failed)),
            packed,
        })
    }

    /// The whole ServiceSet, as it was packed.
    pub fn unpack(&self) -> std::io::Result<ServiceSet> {
        let text = lock().unpack(&self.packed)?;
        Ok(serde_json::from_slice(&text)?)
    }

    /// `namespace/name`: what the store keys it by.
    pub fn at(&self) -> &str {
        &self.names[..self.provider_at as usize]
    }

    /// Its namespace.
    pub fn namespace(&self) -> &str {
        self.at().split_once('/').map_or("", |(namespace, _)| namespace)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.at().split_once('/').map_or(self.at(), |(_, name)| name)
    }

    /// Its namespace and name.
    pub fn key(&self) -> NamespacedName {
        NamespacedName::new(self.namespace(), self.name())
    }

    /// How the logs name it (see [`logged`]).
    pub fn logged(&self) -> String {
        logged(&self.key())
    }

    /// `spec.provider.name`.
    pub fn provider(&self) -> &str {
        &self.names[self.provider_at as usize..self.cluster_at as usize]
    }

    /// `spec.cluster`: the ClusterDeployment's name; empty for self-management.
    pub fn cluster(&self) -> &str {
        &self.names[self.cluster_at as usize..]
    }

    /// Whether its deletion has started.
    pub fn deleting(&self) -> bool {
        self.deleting
    }

    /// Whether one of its services uses the template `name` (or one whose name hashes alike).
    pub fn uses_template(&self, name: &str) -> bool {
        self.hashes[..usize::from(self.templates)].contains(&text_hash(name))
    }

    /// Whether it carries the finalizer `name` (or one whose name hashes alike).
    pub fn has_finalizer(&self, name: &str) -> bool {
        self.hashes[usize::from(self.templates)..].contains(&text_hash(name))
    }

    /// A hash of its generation (so of its spec), labels, annotations, finalizers and deletion:
    /// of everything but status, which only the host writes.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// `status.deployed`.
    pub fn deployed(&self) -> bool {
        self.deployed
    }

    /// Whether one of its services is `Failed` by its status.
    pub fn failed(&self) -> bool {
        self.failed
    }
}

impl std::fmt::Debug for CachedServiceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedServiceSet").field("at", &self.at()).field("provider", &self.provider()).finish()
    }
}

/// How the logs name the ServiceSet `key` (the field `serviceset`, docs/operations.md), as
/// kube-runtime names objects: `ServiceSet.v1beta1.k0rdent.mirantis.com/<name>.<namespace>`.
pub fn logged(key: &NamespacedName) -> String {
    kube::runtime::reflector::ObjectRef::<ServiceSet>::new(&key.name).within(&key.namespace).to_string()
}

/// A ServiceSet as its watch decodes it: the [`CachedServiceSet`] the store keeps, and the
/// metadata the watch reads (its resourceVersion, to resume from) until then.
#[derive(Clone, Debug)]
pub struct WatchedServiceSet {
    /// Name, namespace and resourceVersion only.
    metadata: ObjectMeta,
    cached: std::sync::Arc<CachedServiceSet>,
}

impl WatchedServiceSet {
    /// What the store keeps of it.
    pub fn cached(&self) -> &std::sync::Arc<CachedServiceSet> {
        &self.cached
    }
}

impl<'de> Deserialize<'de> for WatchedServiceSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let service_set = ServiceSet::deserialize(deserializer)?;
        let meta = &service_set.metadata;
        let metadata = ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            resource_version: meta.resource_version.clone(),
            ..ObjectMeta::default()
        };
        let cached = CachedServiceSet::pack(service_set).map_err(serde::de::Error::custom)?;
        Ok(Self { metadata, cached: cached.into() })
    }
}

impl Resource for WatchedServiceSet {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        ServiceSet::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        ServiceSet::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        ServiceSet::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        ServiceSet::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The hash of a template's or finalizer's name, the same in every process (SipHash with fixed
/// keys).
fn text_hash(name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    name.hash(&mut hasher);
    hasher.finish()
}

/// The process's ServiceSet packer: its dictionaries are the first ServiceSets packed without
/// a status and with one.
static PACKER: Mutex<Packer> = Mutex::new(Packer::new());

fn lock() -> std::sync::MutexGuard<'static, Packer> {
    PACKER.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use serde_json::json;

    fn service_set(name: &str, patch: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
        let mut object = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {
                "name": name, "namespace": "team", "uid": format!("uid-{name}"), "resourceVersion": "17",
                "generation": 2, "labels": {"k0rdent.mirantis.com/managed": "true"},
                "annotations": {"note": "x"}, "finalizers": ["ksm.k0rdent.mirantis.com/finalizer"],
                "managedFields": [{"manager": "kcm", "operation": "Apply", "apiVersion": "k0rdent.mirantis.com/v1beta1",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:cluster": {}}}}],
            },
            "spec": {
                "cluster": "prod-1",
                "provider": {"name": "ksm-flux", "config": {"priority": 7, "targetNamespace": "apps"}},
                "services": [
                    {"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3", "values": "replicaCount: 2"},
                    {"name": "dns", "namespace": "dns", "template": "dns-1-0-0"},
                ],
            },
            "status": {"deployed": false, "services": [
                {"type": "Helm", "name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3",
                 "state": "Failed", "lastStateTransitionTime": "2026-11-26T10:00:00Z", "failureMessage": "no chart"},
            ]},
        });
        patch(&mut object);
        object
    }

    #[test]
    fn unpacks_to_the_service_set_it_was_decoded_from_with_what_triggers_read_beside() {
        let self_managed_without_status = |o: &mut serde_json::Value| {
            o["spec"]["cluster"] = json!("");
            o.as_object_mut().unwrap().remove("status");
        };
        for (name, object) in [("a", service_set("a", |_| {})), ("b", service_set("b", self_managed_without_status))] {
            let mut typed: ServiceSet = serde_json::from_value(object.clone()).unwrap();
            let watched: WatchedServiceSet = serde_json::from_value(object).unwrap();
            assert_eq!(watched.resource_version().as_deref(), Some("17"), "for the watch to resume from");
            assert_eq!((watched.name_any(), watched.namespace()), (name.to_string(), Some("team".into())));
            let cached = watched.cached();
            let unpacked = cached.unpack().unwrap();
            assert_eq!(unpacked.metadata.managed_fields, None, "{name}: managedFields are not kept");
            typed.metadata.managed_fields = None;
            assert_eq!(
                serde_json::to_value(unpacked).unwrap(),
                serde_json::to_value(&typed).unwrap(),
                "{name}: nothing else lost, labels and config included"
            );
            assert_eq!((cached.at(), cached.namespace(), cached.name()), (&*format!("team/{name}"), "team", name));
            assert_eq!(cached.key(), NamespacedName::new("team", name));
            assert!(cached.has_finalizer("ksm.k0rdent.mirantis.com/finalizer") && !cached.has_finalizer("ksm"));
            assert!(16 + std::mem::size_of::<CachedServiceSet>() <= 96, "an Arc of it fits jemalloc's 96-byte class");
            assert_eq!(cached.provider(), "ksm-flux");
            assert_eq!(cached.cluster(), typed.spec.cluster);
            assert!(cached.uses_template("dns-1-0-0") && !cached.uses_template("dns"));
            assert!(!cached.deployed() && !cached.deleting());
            assert_eq!(cached.failed(), name == "a", "a Failed service in its status");
        }
    }

    #[test]
    fn a_deletion_and_every_field_but_status_change_the_fingerprint() {
        let cached = |patch: fn(&mut serde_json::Value)| {
            serde_json::from_value::<WatchedServiceSet>(service_set("a", patch)).unwrap().cached().clone()
        };
        let first = cached(|_| {});
        let deleting = cached(|o| o["metadata"]["deletionTimestamp"] = json!("2026-11-26T11:00:00Z"));
        assert!(deleting.deleting() && !first.deleting());
        assert_ne!(deleting.fingerprint(), first.fingerprint());
        assert_ne!(cached(|o| o["metadata"]["generation"] = json!(3)).fingerprint(), first.fingerprint());
        assert_eq!(cached(|o| o["status"]["deployed"] = json!(true)).fingerprint(), first.fingerprint());
    }
}
