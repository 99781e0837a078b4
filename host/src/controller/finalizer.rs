//! The host's own finalizer (kcm's built-in adapter has its own): it keeps a ServiceSet until
//! the host has deleted its children and seen them gone.

use crate::k0rdent::ServiceSet;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

/// The finalizer the host puts on every ServiceSet it serves.
pub const FINALIZER: &str = "ksm.k0rdent.mirantis.com/finalizer";

/// Whether `service_set` carries the host's finalizer.
pub fn has(service_set: &ServiceSet) -> bool {
    service_set.finalizers().iter().any(|f| f == FINALIZER)
}

/// Adds the host's finalizer.
pub async fn add(api: &Api<ServiceSet>, service_set: &ServiceSet) -> kube::Result<()> {
    let mut finalizers = service_set.finalizers().to_vec();
    finalizers.push(FINALIZER.to_string());
    set(api, service_set, finalizers).await
}

/// Removes the host's finalizer, keeping everyone else's.
pub async fn remove(api: &Api<ServiceSet>, service_set: &ServiceSet) -> kube::Result<()> {
    let finalizers = service_set.finalizers().iter().filter(|f| *f != FINALIZER).cloned().collect();
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
