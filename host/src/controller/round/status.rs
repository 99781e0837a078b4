//! ServiceSet status writes: through the status subresource, only when the status changed, and
//! only over the version the plan was made from.

use crate::k0rdent::{ServiceSet, ServiceSetStatus};
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

/// Whether a status write happened.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// The status was already this one: no request made.
    Unchanged,
    /// The status was replaced.
    Replaced,
}

/// Replaces the status of `service_set` with `status` unless they are equal. The write carries
/// the `resourceVersion` that was read, so a ServiceSet changed meanwhile fails with 409
/// Conflict (and the reconcile is retried on the latest version) instead of losing a change.
pub async fn write(api: &Api<ServiceSet>, service_set: &ServiceSet, status: ServiceSetStatus) -> kube::Result<Written> {
    if service_set.status.as_ref() == Some(&status) {
        return Ok(Written::Unchanged);
    }
    let mut object = ServiceSet::new(&service_set.name_any(), service_set.spec.clone());
    object.meta_mut().namespace = service_set.namespace();
    object.meta_mut().resource_version = service_set.resource_version();
    object.status = Some(status);
    api.replace_status(&service_set.name_any(), &PostParams::default(), &object).await?;
    Ok(Written::Replaced)
}
