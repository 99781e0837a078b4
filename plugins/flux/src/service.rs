//! What the objects of one service share, once `translate` has resolved its inputs: the
//! HelmRelease and Kustomization builders start from it.

use crate::config::FluxConfig;
use crate::flux::{KubeConfigReference, ObjectMeta};
use ksm_plugin_sdk::contract::ServiceError;
use ksm_plugin_sdk::k0rdent::{Service, ServiceTemplateSpec, ServiceTemplateStatus};
use serde::Serialize;

/// A service's ServiceTemplate, found, readable and valid.
pub struct ResolvedTemplate {
    /// `ServiceTemplate "<namespace>/<name>"`, for messages.
    pub id: String,
    /// Its spec.
    pub spec: ServiceTemplateSpec,
    /// Its status.
    pub status: ServiceTemplateStatus,
}

/// What every Flux object of a service shares.
pub struct Common<'a> {
    /// The service.
    pub service: &'a Service,
    /// The provider config.
    pub config: &'a FluxConfig,
    /// Object name and namespace.
    pub metadata: ObjectMeta,
    /// Where the service's resources go: its namespace, else the config's `targetNamespace`.
    pub target_namespace: Option<String>,
    /// The remote cluster's kubeconfig; none for self-management.
    pub kube_config: Option<KubeConfigReference>,
    /// `Some(true)` when the ServiceSet is paused or the config suspends; else omitted.
    pub suspend: Option<bool>,
}

/// Serializes a created object to JSON text.
pub fn to_json(object: &impl Serialize) -> Result<String, ServiceError> {
    serde_json::to_string(object)
        .map_err(|e| ServiceError::InvalidService(format!("the object cannot be serialized: {e}")))
}
