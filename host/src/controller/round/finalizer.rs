//! The host's own finalizer (kcm's built-in adapter has its own): it keeps a ServiceSet until
//! the host has deleted its children and seen them gone. Each adapter installation (Deployment
//! namespace and name) has its own, so that a second installation, or one whose SMP moved to
//! another, never releases a ServiceSet the first still has to clean up. Beside it, the host's
//! one other write to a ServiceSet's metadata: the record of the regions its children went to
//! ([`placements`](crate::plan::placements)).

use crate::k0rdent::ServiceSet;
use crate::plan::children::label_value;
use crate::plan::placements::REGIONS_ANNOTATION;
use crate::smp::AdapterIdentity;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

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

/// Adds `finalizer`, replacing the [`LEGACY`] one; with `regions`, records them in the same
/// write (a new ServiceSet whose children go to a region costs no extra request).
pub async fn add(
    api: &Api<ServiceSet>,
    service_set: &ServiceSet,
    finalizer: &str,
    regions: Option<String>,
) -> kube::Result<()> {
    let mut finalizers: Vec<String> = service_set.finalizers().iter().filter(|f| *f != LEGACY).cloned().collect();
    finalizers.push(finalizer.to_string());
    let mut metadata = json!({"finalizers": finalizers});
    if let Some(regions) = regions {
        metadata["annotations"] = json!({REGIONS_ANNOTATION: regions});
    }
    patch(api, service_set, metadata).await
}

/// Records the regions of `service_set`'s children (see
/// [`placements`](crate::plan::placements)): before the first apply to a region, and once a
/// region it left holds none of them.
pub async fn record_regions(api: &Api<ServiceSet>, service_set: &ServiceSet, regions: String) -> kube::Result<()> {
    patch(api, service_set, json!({"annotations": {REGIONS_ANNOTATION: regions}})).await
}

/// Removes `finalizer` (and the [`LEGACY`] one), keeping everyone else's.
pub async fn remove(api: &Api<ServiceSet>, service_set: &ServiceSet, finalizer: &str) -> kube::Result<()> {
    let finalizers: Vec<String> =
        service_set.finalizers().iter().filter(|f| *f != finalizer && *f != LEGACY).cloned().collect();
    patch(api, service_set, json!({"finalizers": finalizers})).await
}

/// Writes `metadata` only if the object is still the version that was read (a merge patch
/// carrying `resourceVersion` is a precondition), so another writer's finalizer or annotation
/// is never lost; a stale version fails with 409 Conflict, as every lost race does, and the
/// reconcile is retried on the latest one.
async fn patch(api: &Api<ServiceSet>, service_set: &ServiceSet, mut metadata: Value) -> kube::Result<()> {
    metadata["resourceVersion"] = json!(service_set.meta().resource_version.clone().unwrap_or_default());
    let patch = json!({ "metadata": metadata });
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
