//! The plugin contract (`ksm:adapter@0.2.0`, see `wit/since_v0.2.0/adapter.wit`) as plain Rust types.
//!
//! Each type mirrors the WIT item of the same name; the WIT file documents the semantics.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The contract version these types implement (the WIT package version).
pub const CONTRACT_VERSION: &str = "0.2.0";

/// A Kubernetes object kind a plugin creates or reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectKind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Lower-case plural resource name.
    pub plural: String,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
}

impl ObjectKind {
    /// The `apiVersion` of objects of this kind (`group/version`, or `version` for core).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// What a plugin says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginMetadata {
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// Contract version the plugin was built against.
    pub contract_version: String,
    /// Kinds the plugin creates.
    pub creates: Vec<ObjectKind>,
    /// Kinds the plugin only reads.
    pub reads: Vec<ObjectKind>,
}

/// One problem in a ServiceSet's `spec.provider.config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigError {
    /// Dotted path of the offending field; empty for the config as a whole.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

/// A key of a Secret in the ServiceSet's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SecretKeyRef {
    /// Secret name.
    pub name: String,
    /// Key in the Secret's data.
    pub key: String,
}

/// A remote cluster that services are deployed to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RemoteCluster {
    /// The ClusterDeployment name.
    pub name: String,
    /// The Secret holding its kubeconfig.
    pub kubeconfig: SecretKeyRef,
}

/// Where the services of a ServiceSet are deployed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Target {
    /// The management cluster itself.
    SelfManagement,
    /// A remote cluster.
    Remote(RemoteCluster),
}

/// A ServiceTemplate a service references: the object as JSON, or none when missing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Template {
    /// Template name.
    pub name: String,
    /// The ServiceTemplate object as JSON, if it exists.
    pub object: Option<String>,
}

/// A Flux source object a template refers to (see [`crate::sources`]): `apiVersion`, `kind`,
/// `metadata` and `spec` as JSON, or none when it does not exist.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceObject {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The object as JSON, if it exists.
    pub object: Option<String>,
}

/// Everything `translate` needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranslateInput {
    /// The ServiceSet object as JSON.
    pub service_set: String,
    /// The referenced ServiceTemplates, each once.
    pub templates: Vec<Template>,
    /// The source objects the templates refer to, each once (none for a plugin of contract
    /// 0.1.0, which has no such field).
    #[serde(default)]
    pub sources: Vec<SourceObject>,
    /// Where the services go.
    pub target: Target,
    /// The namespace k0rdent runs in.
    pub system_namespace: String,
}

/// A k0rdent service state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ServiceState {
    /// Every object of the service is deployed and healthy.
    Deployed,
    /// The CD tool is working on it.
    Provisioning,
    /// It failed; `failure_message` says why.
    Failed,
    /// It waits for something (a template, an object not created yet).
    Pending,
    /// Its objects are being deleted.
    Deleting,
}

impl ServiceState {
    /// The name k0rdent uses for this state.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployed => "Deployed",
            Self::Provisioning => "Provisioning",
            Self::Failed => "Failed",
            Self::Pending => "Pending",
            Self::Deleting => "Deleting",
        }
    }
}

/// A k0rdent service type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ServiceType {
    /// A Helm chart.
    Helm,
    /// A kustomization.
    Kustomize,
    /// Plain resources.
    Resource,
}

/// Why one service could not be translated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ServiceError {
    /// The referenced ServiceTemplate does not exist. State: Pending.
    TemplateNotFound(String),
    /// The ServiceTemplate is not usable yet. State: Pending.
    TemplateNotReady(String),
    /// The template's source cannot be used by this CD tool. State: Failed.
    UnsupportedSource(String),
    /// The service's values are not valid. State: Failed.
    InvalidValues(String),
    /// Any other problem with the service's spec. State: Failed.
    InvalidService(String),
}

impl ServiceError {
    /// The service state this error puts the service in.
    pub fn state(&self) -> ServiceState {
        match self {
            Self::TemplateNotFound(_) | Self::TemplateNotReady(_) => ServiceState::Pending,
            Self::UnsupportedSource(_) | Self::InvalidValues(_) | Self::InvalidService(_) => ServiceState::Failed,
        }
    }

    /// The message for a person.
    pub fn message(&self) -> &str {
        match self {
            Self::TemplateNotFound(m)
            | Self::TemplateNotReady(m)
            | Self::UnsupportedSource(m)
            | Self::InvalidValues(m)
            | Self::InvalidService(m) => m,
        }
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// Something a service takes on its target exclusively (e.g. a Helm release); the host
/// arbitrates between services of different ServiceSets claiming the same thing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Claim {
    /// The target cluster, e.g. `<namespace>/<cluster>`, or `management`.
    pub target: String,
    /// What kind of thing is claimed, e.g. `helm-release`.
    pub kind: String,
    /// Its namespace on the target.
    pub namespace: String,
    /// Its name on the target.
    pub name: String,
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{} on {}", self.kind, self.namespace, self.name, self.target)
    }
}

/// The outcome for one service, in spec order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceTranslation {
    /// The service name.
    pub service: String,
    /// Its desired objects as JSON, or why there are none.
    pub outcome: Result<Vec<String>, ServiceError>,
    /// What the service claims on its target.
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// Why `translate` failed for the whole ServiceSet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TranslateError {
    /// `spec.provider.config` is invalid.
    InvalidConfig(Vec<ConfigError>),
    /// The input could not be understood.
    InvalidInput(String),
}

impl fmt::Display for TranslateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidConfig(errors) => {
                f.write_str("invalid provider config: ")?;
                join(f, errors)
            }
            Self::InvalidInput(m) => write!(f, "invalid input: {m}"),
        }
    }
}

/// Writes `items` separated by `; `.
pub fn join<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

/// An object a plugin produced for a service, as observed in the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedObject {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// The live object as JSON, or none when it does not exist yet.
    pub object: Option<String>,
}

/// Everything `map-status` needs for one service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusInput {
    /// The ServiceSet object as JSON.
    pub service_set: String,
    /// The service name.
    pub service: String,
    /// The ServiceTemplate as JSON, if it exists.
    pub template: Option<String>,
    /// The service's objects as observed.
    pub observed: Vec<ObservedObject>,
}

/// One service's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// The service's state.
    pub state: ServiceState,
    /// How the service is deployed.
    pub service_type: ServiceType,
    /// The version the CD tool reports as deployed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why the service failed or is being retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// When Deployed, a fingerprint of what the CD tool records as deployed (none from a plugin
    /// of contract 0.1.0: the host then fingerprints what it applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_hash: Option<String>,
}

/// Why `map-status` failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StatusError {
    /// The input could not be understood.
    InvalidInput(String),
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInput(m) => write!(f, "invalid input: {m}"),
        }
    }
}

/// Log levels of the host's `log` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warning.
    Warn,
    /// Error.
    Error,
}

/// What a plugin implements: the exports of the `plugin` interface.
///
/// Compiled natively, a plugin can be called directly (tests, benchmarks); compiled to WASM,
/// `export_plugin!` turns the implementation into the component's exports.
pub trait PluginApi {
    /// See `plugin.metadata` in the WIT.
    fn metadata() -> PluginMetadata;
    /// See `plugin.validate-config` in the WIT.
    fn validate_config(config: String) -> Result<(), Vec<ConfigError>>;
    /// See `plugin.translate` in the WIT.
    fn translate(input: TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError>;
    /// See `plugin.map-status` in the WIT.
    fn map_status(input: StatusInput) -> Result<ServiceStatus, StatusError>;
}
