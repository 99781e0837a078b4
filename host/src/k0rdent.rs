//! The k0rdent API (`k0rdent.mirantis.com/v1beta1`) as kube custom resources: the field names,
//! enums and scopes of kcm's CRDs. Nested spec types come from the plugin SDK, so the host and
//! plugins read ServiceSets and ServiceTemplates the same way.
//!
//! Status is read leniently: the caches decode every ServiceSet and SMP in the cluster, and one
//! object whose status another writer (kcm's own adapter, a newer kcm) filled differently must
//! not keep them from listing. A status entry or condition that does not decode is left out of
//! the host's view (the host computes the status of what it serves anew). (`deployed`, which
//! kcm's schema requires, is required here too.)

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use ksm_plugin_sdk::k0rdent::{Service, ServiceTemplateStatus, SourceSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An object's namespace and name: how Kubernetes keys the objects of a kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespacedName {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl NamespacedName {
    /// `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }

    /// The key of `object`, typed or as a cache holds it.
    pub fn of<K: kube::Resource>(object: &K) -> Self {
        let meta = object.meta();
        Self::new(meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
    }
}

impl std::fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A child object the host applied or deletes: `apiVersion`, `kind`, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChildRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ChildRef {
    /// The reference of an object.
    pub fn of(object: &serde_json::Value) -> Self {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        Self {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: text(&object["metadata"]["namespace"]),
            name: text(&object["metadata"]["name"]),
        }
    }
}

/// `Kind namespace/name`, as messages name a child.
impl std::fmt::Display for ChildRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// `ServiceSet.spec`: the services one cluster should get.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "k0rdent.mirantis.com",
    version = "v1beta1",
    kind = "ServiceSet",
    namespaced,
    status = "ServiceSetStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.cluster"}"#,
    printcolumn = r#"{"name":"Deployed","type":"boolean","jsonPath":".status.deployed"}"#,
    printcolumn = r#"{"name":"Services","type":"string","jsonPath":".status.conditions[?(@.type==\"ServicesInReadyState\")].message"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSetSpec {
    /// ClusterDeployment name in the ServiceSet's namespace; empty for self-management.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The MultiClusterService that produced this ServiceSet, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub multi_cluster_service: String,
    /// The state-management provider and its config.
    pub provider: ProviderSpec,
    /// The services.
    #[serde(default)]
    pub services: Vec<Service>,
}

/// `ServiceSet.spec.provider`: the plugin SDK's
/// [`ProviderSpec`](ksm_plugin_sdk::k0rdent::ProviderSpec) with `config` kept as text. The host
/// caches every ServiceSet it serves, and even a small config as `Value` maps was a large part
/// of each (docs/performance.md); plugins still read it as `Value`, from the JSON the host
/// hands them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// StateManagementProvider name.
    #[serde(default)]
    pub name: String,
    /// Provider-specific config (free JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "ksm_plugin_sdk::k0rdent::free_object")]
    pub config: Option<JsonText>,
    /// Deploy into the management cluster itself.
    #[serde(default)]
    pub self_management: bool,
}

impl ProviderSpec {
    /// The top-level field `key` of `config`, if any.
    pub fn config_field(&self, key: &str) -> Option<Value> {
        self.config.as_ref().and_then(|config| config.value().get_mut(key).map(Value::take))
    }
}

/// A JSON value kept as its compact text: a few bytes where `Value` maps take a whole B-tree
/// node each, however few their entries. It reads and writes as the JSON it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonText(Box<str>);

impl JsonText {
    /// The value.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("JsonText holds the text of a Value")
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> Self {
        Self(value.to_string().into_boxed_str())
    }
}

impl Serialize for JsonText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from)
    }
}

/// `ServiceSet.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSetStatus {
    /// The ClusterDeployment the services go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ObjectReference>,
    /// True when every service is Deployed.
    pub deployed: bool,
    /// The provider's state, copied from the StateManagementProvider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderState>,
    /// Conditions, keyed by type.
    #[serde(default, deserialize_with = "decodable", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// One entry per spec service.
    #[serde(default, deserialize_with = "decodable", skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceState>,
}

/// `ServiceSet.status.provider`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProviderState {
    /// The provider is ready.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
    /// The provider is suspended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspended: bool,
}

/// `ServiceSet.status.services[]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceState {
    /// How the service is deployed.
    #[serde(rename = "type")]
    pub service_type: ServiceType,
    /// Service name.
    pub name: String,
    /// Service namespace.
    pub namespace: String,
    /// ServiceTemplate name.
    pub template: String,
    /// The service's state.
    pub state: State,
    /// When `state` last changed.
    pub last_state_transition_time: Time,
    /// Once Deployed: the spec version (or the template name when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why the service failed (for `Failed` only, as kcm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// A fingerprint of what was last deployed and verified healthy: the sha256 of what the CD
    /// tool records as deployed; never empty on a Deployed service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_deployed_hash: Option<String>,
    /// For a service neither Deployed nor Failed, condition `Ready=False` says why (waiting for
    /// another ServiceSet, retrying after an error).
    #[serde(default, deserialize_with = "decodable", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// A service's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ServiceType {
    /// Helm chart.
    Helm,
    /// Kustomization.
    Kustomize,
    /// Plain resources.
    Resource,
}

/// A service's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum State {
    /// Deployed and healthy.
    Deployed,
    /// Being deployed.
    Provisioning,
    /// Failed; see `failureMessage`.
    Failed,
    /// Waiting.
    Pending,
    /// Being deleted.
    Deleting,
    /// Deleted.
    Deleted,
}

/// The entries of a list that decode as `T` (a missing or null list is empty).
fn decodable<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    let entries = Option::<Vec<Value>>::deserialize(deserializer)?.unwrap_or_default();
    Ok(entries.into_iter().filter_map(|entry| serde_json::from_value(entry).ok()).collect())
}

/// `StateManagementProvider.spec`: declares a provider and how to tell it is ready.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "k0rdent.mirantis.com",
    version = "v1beta1",
    kind = "StateManagementProvider",
    shortname = "smp",
    status = "StateManagementProviderStatus",
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Suspended","type":"boolean","jsonPath":".spec.suspend"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct StateManagementProviderSpec {
    /// Which ServiceSets this provider handles.
    pub selector: LabelSelector,
    /// The adapter workload.
    #[serde(default)]
    pub adapter: ResourceReference,
    /// The CD tool's workloads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provisioner: Vec<ResourceReference>,
    /// CRDs the CD tool must have installed.
    #[serde(default, rename = "provisionerCRDs", skip_serializing_if = "Vec::is_empty")]
    pub provisioner_crds: Vec<ProvisionerCrd>,
    /// Stop reconciling the provider's ServiceSets.
    #[serde(default)]
    pub suspend: bool,
}

/// A workload an SMP depends on, with a CEL rule telling when it is ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReference {
    /// `apiVersion` of the object.
    #[serde(default)]
    pub api_version: String,
    /// `kind` of the object.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// CEL over `self` (the object); empty = ready.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub readiness_rule: String,
}

/// `Kind namespace/name` (`Kind name` when cluster-scoped), as messages name it.
impl std::fmt::Display for ResourceReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.namespace.as_str() {
            "" => write!(f, "{} {}", self.kind, self.name),
            namespace => write!(f, "{} {namespace}/{}", self.kind, self.name),
        }
    }
}

/// A group/version and resources that must be served.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProvisionerCrd {
    /// API group.
    pub group: String,
    /// Version that must be listed in the CRD's `spec.versions`.
    pub version: String,
    /// Plural resource names.
    #[serde(default)]
    pub resources: Vec<String>,
}

/// `StateManagementProvider.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateManagementProviderStatus {
    /// True when no condition is False or Unknown.
    #[serde(default)]
    pub ready: bool,
    /// RBACReady, AdapterReady, ProvisionerReady, ProvisionerCRDsReady.
    #[serde(default, deserialize_with = "decodable", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// `ServiceTemplate.spec`: exactly one of `helm`, `kustomize`, `resources`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "k0rdent.mirantis.com",
    version = "v1beta1",
    kind = "ServiceTemplate",
    namespaced,
    shortname = "svctmpl",
    status = "ServiceTemplateStatus",
    printcolumn = r#"{"name":"Valid","type":"boolean","jsonPath":".status.valid"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplateSpec {
    /// A Helm chart (`chartSpec`, `chartRef` or `chartSource`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "ksm_plugin_sdk::k0rdent::free_object")]
    pub helm: Option<Value>,
    /// A kustomization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<SourceSpec>,
    /// Plain resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<SourceSpec>,
    /// Helm options (the base the service's options override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "ksm_plugin_sdk::k0rdent::free_object")]
    pub helm_options: Option<Value>,
    /// Template version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kubernetes versions the template supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_constraint: Option<String>,
}

/// `ClusterDeployment.spec`, only what routing reads: the Credential whose Region the cluster
/// lives in (kcm 1.12). The host never writes ClusterDeployments; other fields are not decoded.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "k0rdent.mirantis.com", version = "v1beta1", kind = "ClusterDeployment", namespaced)]
pub struct ClusterDeploymentSpec {
    /// Name of a Credential in the ClusterDeployment's namespace.
    #[serde(default)]
    pub credential: String,
}

/// `Credential.spec`, only what routing reads.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "k0rdent.mirantis.com", version = "v1beta1", kind = "Credential", namespaced)]
pub struct CredentialSpec {
    /// The Region the clusters of this Credential live in; empty: the management cluster.
    #[serde(default)]
    pub region: String,
}

/// `Region.spec` (cluster-scoped), only what routing reads: how to reach the regional cluster.
/// kcm requires exactly one of the two.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "k0rdent.mirantis.com", version = "v1beta1", kind = "Region")]
#[serde(rename_all = "camelCase")]
pub struct RegionSpec {
    /// A kubeconfig Secret in the system namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<SecretKeyRef>,
    /// A ClusterDeployment onboarded as the regional cluster (its `<name>-kubeconfig` Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_deployment: Option<ObjectName>,
}

/// A key of a Secret, as Flux's `SecretKeyReference`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The key; empty: `value`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

/// A namespaced object's name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectName {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
}

/// The CRDs of the k0rdent kinds the host serves, as YAML documents (what `ksm-adapter crds`
/// prints and `crds/` holds).
pub fn crds_yaml() -> String {
    use kube::CustomResourceExt;
    [ServiceSet::crd(), StateManagementProvider::crd(), ServiceTemplate::crd()]
        .iter()
        .map(|crd| format!("---\n{}", serde_norway::to_string(crd).expect("CRDs serialize")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crds_dir_is_up_to_date() {
        let committed = include_str!("../../crds/k0rdent.yaml");
        assert!(
            committed == crds_yaml(),
            "crds/k0rdent.yaml is stale: run `cargo run -p ksm-adapter -- crds --k0rdent > crds/k0rdent.yaml`"
        );
    }

    #[test]
    fn scopes_names_and_status_follow_kcm() {
        use kube::CustomResourceExt;
        let ss = serde_json::to_value(ServiceSet::crd()).unwrap();
        assert_eq!(ss["metadata"]["name"], "servicesets.k0rdent.mirantis.com");
        assert_eq!(ss["spec"]["scope"], "Namespaced");
        assert_eq!(ss["spec"]["versions"][0]["subresources"]["status"], json!({}));
        let smp = serde_json::to_value(StateManagementProvider::crd()).unwrap();
        assert_eq!(smp["spec"]["scope"], "Cluster");
        assert_eq!(smp["spec"]["names"]["shortNames"], json!(["smp"]));
        let st = serde_json::to_value(ServiceTemplate::crd()).unwrap();
        assert_eq!(st["spec"]["names"]["shortNames"], json!(["svctmpl"]));
        let status = &ss["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
        assert_eq!(status["required"], json!(["deployed"]));
        let service = &status["properties"]["services"]["items"];
        assert_eq!(
            service["properties"]["state"]["enum"],
            json!(["Deployed", "Provisioning", "Failed", "Pending", "Deleting", "Deleted"])
        );
        assert_eq!(service["properties"]["type"]["enum"], json!(["Helm", "Kustomize", "Resource"]));
        let config = &ss["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["provider"]
            ["properties"]["config"];
        assert_eq!(config["x-kubernetes-preserve-unknown-fields"], true);
    }

    #[test]
    fn status_serializes_with_kcm_field_names() {
        let status = ServiceSetStatus {
            deployed: false,
            provider: Some(ProviderState { ready: true, suspended: false }),
            services: vec![ServiceState {
                service_type: ServiceType::Helm,
                name: "ingress-nginx".into(),
                namespace: "ingress-nginx".into(),
                template: "ingress-nginx-4-11-3".into(),
                state: State::Provisioning,
                last_state_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                version: None,
                failure_message: None,
                last_deployed_hash: None,
                conditions: vec![],
            }],
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"deployed": false, "provider": {"ready": true}, "services": [{
                "type": "Helm", "name": "ingress-nginx", "namespace": "ingress-nginx",
                "template": "ingress-nginx-4-11-3", "state": "Provisioning",
                "lastStateTransitionTime": "1970-01-01T00:00:00Z"}]})
        );
    }

    /// The config the host keeps as text reads back as the JSON it was, through the JSON text
    /// the watch sends and through `Value` (how the host hands a ServiceSet to plugins), and an
    /// explicit `null` is no config, as before.
    #[test]
    fn provider_config_kept_as_text_reads_back_as_it_was() {
        let config = json!({"priority": 200, "remediation": {"retries": 3}, "interval": "5m", "tags": [1, "a", null]});
        let provider = json!({"name": "ksm-flux", "config": config, "selfManagement": true});
        let from_text: ProviderSpec = serde_json::from_str(&provider.to_string()).unwrap();
        let from_value: ProviderSpec = serde_json::from_value(provider.clone()).unwrap();
        assert_eq!(from_text, from_value);
        assert_eq!(serde_json::to_value(&from_text).unwrap(), provider);
        assert_eq!(from_text.config_field("priority"), Some(json!(200)));
        assert_eq!(from_text.config_field("remediation"), Some(json!({"retries": 3})));
        assert_eq!(from_text.config_field("missing"), None);
        let null: ProviderSpec = serde_json::from_value(json!({"name": "p", "config": null})).unwrap();
        assert_eq!(null.config, None);
        assert_eq!(serde_json::to_value(&null).unwrap(), json!({"name": "p", "selfManagement": false}));
    }

    /// kcm declares `lastStateTransitionTime` optional, a newer kcm may add states, and another
    /// writer may leave a condition without a reason: the ServiceSet still decodes.
    #[test]
    fn a_service_set_with_a_status_written_by_someone_else_still_decodes() {
        let object = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "other", "namespace": "kcm-system"},
            "spec": {"provider": {"name": "kcm-sveltos"}, "services": [{"name": "a", "template": "t"}]},
            "status": {
                "deployed": false,
                "services": [
                    {"type": "Helm", "name": "a", "namespace": "", "template": "t", "state": "Deployed"},
                    {"type": "Helm", "name": "b", "namespace": "", "template": "t", "state": "Upgrading",
                     "lastStateTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Helm", "name": "c", "namespace": "", "template": "t", "state": "Pending",
                     "lastStateTransitionTime": "2026-01-01T00:00:00Z"},
                ],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        });
        let service_set: ServiceSet = serde_json::from_value(object).expect("decodes");
        let status = service_set.status.unwrap();
        assert!(status.conditions.is_empty(), "the condition without reason and time is left out");
        let names: Vec<&str> = status.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c"], "entries that do not decode are left out, the others kept");
    }
}
