//! The parts of the k0rdent API (`k0rdent.mirantis.com/v1beta1`) that plugins read.
//!
//! Field names are the exact JSON names of the k0rdent CRDs. Unknown fields are ignored, so
//! newer k0rdent versions keep parsing.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The k0rdent API group and version.
pub const API_VERSION: &str = "k0rdent.mirantis.com/v1beta1";
/// Annotation that pauses reconciliation of a ServiceSet's CD-tool objects (any value).
pub const PAUSE_ANNOTATION: &str = "k0rdent.mirantis.com/service-set-paused";

/// The metadata fields plugins use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Object namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Set when the object is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
}

/// A Kubernetes object with typed spec and status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object<S, T = Value> {
    /// Object metadata.
    #[serde(default)]
    pub metadata: Metadata,
    /// Spec.
    pub spec: S,
    /// Status, when present.
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub status: Option<T>,
}

/// A ServiceSet: the services one cluster should get.
pub type ServiceSet = Object<ServiceSetSpec>;
/// A ServiceTemplate: how to deploy one service.
pub type ServiceTemplate = Object<ServiceTemplateSpec, ServiceTemplateStatus>;

/// `ServiceSet.spec`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSetSpec {
    /// ClusterDeployment name in the ServiceSet's namespace; empty for self-management.
    #[serde(default)]
    pub cluster: String,
    /// The MultiClusterService that produced this ServiceSet, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub multi_cluster_service: String,
    /// The state-management provider and its config.
    #[serde(default)]
    pub provider: ProviderSpec,
    /// The services.
    #[serde(default)]
    pub services: Vec<Service>,
}

impl ServiceSetSpec {
    /// Whether services go to the management cluster itself.
    pub fn is_self_management(&self) -> bool {
        self.provider.self_management || self.cluster.is_empty()
    }
}

/// `ServiceSet.spec.provider`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// StateManagementProvider name.
    #[serde(default)]
    pub name: String,
    /// Provider-specific config (free JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "free_object"))]
    pub config: Option<Value>,
    /// Deploy into the management cluster itself.
    #[serde(default)]
    pub self_management: bool,
}

/// `ServiceSet.spec.services[]`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// Helm release name.
    pub name: String,
    /// Release namespace.
    #[serde(default)]
    pub namespace: String,
    /// ServiceTemplate name.
    pub template: String,
    /// Desired version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Helm values as a YAML string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<String>,
    /// Where more values come from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<ValuesFrom>,
    /// Helm options overriding the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "free_object"))]
    pub helm_options: Option<Value>,
    /// `Install` (default) or `Uninstall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["Install", "Uninstall"])))]
    pub helm_action: Option<String>,
}

impl Service {
    /// The version k0rdent expects in status once Deployed: the spec version, or the
    /// template name when none is given.
    pub fn expected_version(&self) -> &str {
        self.version.as_deref().filter(|v| !v.is_empty()).unwrap_or(&self.template)
    }
}

/// `ServiceSet.spec.services[].valuesFrom[]`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValuesFrom {
    /// `ConfigMap` or `Secret`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["ConfigMap", "Secret"])))]
    pub kind: String,
    /// Object name in the ServiceSet's namespace.
    pub name: String,
}

/// `ServiceTemplate.spec`: exactly one of `helm`, `kustomize`, `resources`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplateSpec {
    /// A Helm chart (`chartSpec`, `chartRef` or `chartSource`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "free_object"))]
    pub helm: Option<Value>,
    /// A kustomization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<SourceSpec>,
    /// Plain resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<SourceSpec>,
    /// Helm options (the base the service's options override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "free_object"))]
    pub helm_options: Option<Value>,
    /// Template version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A kustomize/resources source of a ServiceTemplate.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceSpec {
    /// An existing source object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_source_ref: Option<SourceRef>,
    /// A source kcm creates (git, bucket or oci).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "free_object"))]
    pub remote_source_spec: Option<Value>,
    /// `Local` or `Remote`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_type: Option<String>,
    /// Path inside the source.
    #[serde(default)]
    pub path: String,
}

/// A reference to a source object.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    /// Kind, e.g. `GitRepository` or `ConfigMap`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
}

/// `ServiceTemplate.status`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplateStatus {
    /// Whether kcm found the template valid.
    #[serde(default)]
    pub valid: bool,
    /// Why it is not valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_error: Option<String>,
    /// Helm templates: the Flux HelmChart to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_ref: Option<SourceRef>,
    /// Helm templates: the chart version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version: Option<String>,
    /// Kustomize/resources templates: the Flux source kcm created or found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_status: Option<SourceRef>,
}

/// Schema of a free-form JSON object (kept as is by the API server).
#[cfg(feature = "schema")]
pub fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}
