//! The host's own finalizer (kcm's built-in adapter has its own): it keeps a ServiceSet until
//! the host has deleted its children and seen them gone. Each adapter installation (Deployment
//! namespace and name) has its own, so that a second installation, or one whose SMP moved to
//! another, never releases a ServiceSet the first still has to clean up.

use crate::k0rdent::ServiceSet;
use crate::plan::children::label_value;
use crate::smp::AdapterIdentity;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

/// The finalizer every installation used before each had its own. A ServiceSet carrying it is
/// the business of the host its SMP names (or of any, once the SMP is gone), which replaces it
/// with its own.
pub const LEGACY: &str = "ksm.k0rdent.mirantis.com/finalizer";

/// The finalizer of the host `identity`: `ksm.k0rdent.mirantis.com/<namespace>.<name>`, the
/// part after `/` cut to 63 characters with a hash when longer.
pub fn of(identity: &AdapterIdentity) -> String {
    format!("ksm.k0rdent.mirantis.com/{}", label_value(&format!("{}.{}", identity.namespace, identity.name)))
}

/// Whether `service_set` carries `finalizer`.
pub fn has<K: kube::Resource>(service_set: &K, finalizer: &str) -> bool {
    service_set.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer`, replacing the [`LEGACY`] one.
pub async fn add(api: &Api<ServiceSet>, service_set: &ServiceSet, finalizer: &str) -> kube::Result<()> {
    let mut finalizers: Vec<String> = service_set.finalizers().iter().filter(|f| *f != LEGACY).cloned().collect();
    finalizers.push(finalizer.to_string());
    set(api, service_set, finalizers).await
}

/// Removes `finalizer` (and the [`LEGACY`] one), keeping everyone else's.
pub async fn remove(api: &Api<ServiceSet>, service_set: &ServiceSet, finalizer: &str) -> kube::Result<()> {
    let finalizers = service_set.finalizers().iter().filter(|f| *f != finalizer && *f != LEGACY).cloned().collect();
    set(api, service_set, finalizers).await
}

/// Writes the finalizer list only if the object is still the version that was read (a merge
/// patch carrying `resourceVersion` is a precondition), so another writer's finalizer is never
/// lost; a stale version fails with 409 Conflict, as every lost race does, and the reconcile is
/// retried on the latest one.
async fn set(api: &Api<ServiceSet>, service_set: &ServiceSet, finalizers: Vec<String>) -> kube::Result<()> {
    let version = service_set.meta().resource_version.clone().unwrap_or_default();
    let patch = json!({"metadata": {"resourceVersion": version, "finalizers": finalizers}});
    api.patch(&service_set.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_installation_has_its_own_qualified_finalizer() {
        let identity = |namespace: &str, name: &str| AdapterIdentity { namespace: namespace.into(), name: name.into() };
        let kcm = of(&identity("kcm-system", "ksm-adapter"));
        assert_eq!(kcm, "ksm.k0rdent.mirantis.com/kcm-system.ksm-adapter");
        assert_ne!(kcm, of(&identity("team-a", "ksm-adapter")));
        let long = of(&identity(&"n".repeat(63), &"a".repeat(253)));
        let name = long.strip_prefix("ksm.k0rdent.mirantis.com/").unwrap();
        assert!(name.len() <= 63 && name.ends_with(|c: char| c.is_ascii_alphanumeric()), "{long}");
    }
}
