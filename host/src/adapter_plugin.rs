//! The host's own API, `AdapterPlugin` (`ksm.k0rdent.mirantis.com/v1alpha1`, cluster-scoped):
//! which plugin serves which StateManagementProviders, where its bytes come from, and the limits
//! and narrowing the host applies to it.

use crate::signature::identity;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The API group of the host's own kinds.
pub const GROUP: &str = "ksm.k0rdent.mirantis.com";

/// What is wrong with an AdapterPlugin's spec, or with what its source holds, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// `spec.source` sets none of the sources, or more than one.
    #[error("spec.source: set exactly one of builtin, configMap and oci")]
    Source,
    /// The ConfigMap has no `binaryData` key of that name.
    #[error("spec.source.configMap: ConfigMap {namespace}/{name} has no binaryData key {key:?} (it has {keys:?})")]
    NoKey {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The key the spec names.
        key: String,
        /// The keys it has.
        keys: Vec<String>,
    },
    /// The component's bytes are not those `spec.source.configMap.sha256` pins.
    #[error(
        "spec.source.configMap.sha256: ConfigMap {namespace}/{name} key {key:?} has sha256:{actual}, not the pinned sha256:{expected}"
    )]
    NotPinned {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The key.
        key: String,
        /// The bytes' sha256.
        actual: String,
        /// The pinned sha256.
        expected: String,
    },
    /// A key of `spec.source.oci.verify` sets neither of its sources, or both.
    #[error("{field}: set exactly one of publicKey and secretKeyRef")]
    KeySource {
        /// The key's path.
        field: String,
    },
    /// `verify` sets neither keys nor keyless.
    #[error("spec.source.oci.verify: set keys, keyless or both")]
    NothingToVerify,
    /// `keyless` lists no identity.
    #[error("spec.source.oci.verify.keyless: list the accepted identities in allOf, anyOf or both")]
    NoIdentities,
    /// A subject sets neither of its matches, or both.
    #[error("{field}: set exactly one of equal and urlPrefix")]
    Subject {
        /// The subject's path.
        field: String,
    },
    /// `anyOf` asks for more matches than it lists rules, or none.
    #[error("spec.source.oci.verify.keyless.anyOf.minimumMatches: {minimum} of {listed} signatures can never match")]
    MinimumMatches {
        /// What it asks for.
        minimum: u32,
        /// How many rules it lists.
        listed: usize,
    },
}

/// `AdapterPlugin.spec`: a translation plugin and the providers it serves.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ksm.k0rdent.mirantis.com",
    version = "v1alpha1",
    kind = "AdapterPlugin",
    status = "AdapterPluginStatus",
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Providers","type":"string","jsonPath":".spec.providers"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".status.sha256"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AdapterPluginSpec {
    /// Where the plugin's `.wasm` component comes from: exactly one of `builtin`, `configMap`,
    /// `oci`.
    pub source: PluginSource,
    /// Names of the StateManagementProviders this plugin serves. One provider is served by at
    /// most one plugin: two plugins naming the same provider are both reported, and neither
    /// serves it.
    #[serde(default)]
    pub providers: Vec<String>,
    /// Default provider config, merged under each ServiceSet's `spec.provider.config` (the
    /// ServiceSet's keys win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "ksm_plugin_sdk::k0rdent::free_object")]
    pub config: Option<Value>,
    /// Sandbox limits per call; unset fields take the host's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PluginLimits>,
    /// The kinds the plugin may create (of those its metadata declares). A built-in plugin may
    /// create all it declares unless this narrows them; a plugin from a ConfigMap or an OCI
    /// registry may create none unless listed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_kinds: Option<Vec<AllowedKind>>,
    /// Namespaces, besides the ServiceSet's own, that the plugin's objects may be placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<Vec<String>>,
    /// Rules every object the plugin returns must pass before anything is applied, besides the
    /// host's own (and, for Flux's kinds, the built-in Flux rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<OutputPolicy>,
}

/// `AdapterPlugin.spec.policy`: rules over what the plugin's objects do, in the style of a
/// ValidatingAdmissionPolicy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputPolicy {
    /// CEL expressions that must be true for every object, with the variables `object` (the
    /// object), `serviceSet` (the ServiceSet as the plugin sees it: without status,
    /// resourceVersion, finalizers and managedFields) and `target` (`selfManagement` bool, `cluster`,
    /// and `kubeconfigSecret` `{name, key}` of a remote target; empty strings for
    /// self-management). An expression that fails to compile or evaluate refuses the object.
    #[serde(default)]
    pub validations: Vec<PolicyValidation>,
    /// Service accounts the CD tool may act as (Flux's `spec.serviceAccountName`) besides the
    /// host's local service account, which a Flux object without `spec.kubeConfig` outside the
    /// system namespace runs as (`ksm-adapter run --local-service-account`); none by default.
    #[serde(default)]
    pub service_account_names: Vec<String>,
}

/// One rule of [`OutputPolicy`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyValidation {
    /// A CEL expression that must evaluate to `true`.
    pub expression: String,
    /// What a refusal says; the expression itself when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `AdapterPlugin.spec.source`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.builtin), has(self.configMap), has(self.oci)].filter(x, x).size() == 1",
    "message": "exactly one of builtin, configMap and oci must be set"
}]))]
pub struct PluginSource {
    /// A plugin embedded in the host binary (`flux`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// A component stored in a ConfigMap's `binaryData` (ConfigMaps hold at most 1 MiB; use
    /// `oci` for larger plugins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A component in an OCI registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
}

/// The one source an AdapterPlugin names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<'a> {
    /// A plugin embedded in the host.
    Builtin(&'a str),
    /// A ConfigMap key.
    ConfigMap(&'a ConfigMapSource),
    /// An OCI artifact.
    Oci(&'a OciSource),
}

impl PluginSource {
    /// The source that is set, or an error naming the field unless exactly one is.
    pub fn get(&self) -> Result<Source<'_>, SpecError> {
        match (&self.builtin, &self.config_map, &self.oci) {
            (Some(name), None, None) => Ok(Source::Builtin(name)),
            (None, Some(config_map), None) => Ok(Source::ConfigMap(config_map)),
            (None, None, Some(oci)) => Ok(Source::Oci(oci)),
            _ => Err(SpecError::Source),
        }
    }
}

/// A ConfigMap key holding a component.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigMapSource {
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// The ConfigMap's name.
    pub name: String,
    /// The `binaryData` key.
    pub key: String,
    /// The hex sha256 (optionally `sha256:`-prefixed) the component's bytes must have: bytes
    /// that differ are refused, and the previous version keeps serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl ConfigMapSource {
    /// The component in `config_map` (this source's ConfigMap), or what is missing or wrong.
    pub fn bytes_in(&self, config_map: &ConfigMap) -> Result<Vec<u8>, SpecError> {
        let binary = config_map.binary_data.as_ref();
        match binary.and_then(|b| b.get(&self.key)) {
            Some(bytes) => self.pinned(&bytes.0).map(|()| bytes.0.clone()),
            None => Err(SpecError::NoKey {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                key: self.key.clone(),
                keys: binary.map(|b| b.keys().cloned().collect()).unwrap_or_default(),
            }),
        }
    }

    /// Whether `bytes` have the pinned sha256, if one is.
    fn pinned(&self, bytes: &[u8]) -> Result<(), SpecError> {
        let Some(expected) = &self.sha256 else { return Ok(()) };
        let expected = expected.strip_prefix("sha256:").unwrap_or(expected).to_ascii_lowercase();
        let actual = hex::encode(Sha256::digest(bytes));
        if expected == actual {
            return Ok(());
        }
        Err(SpecError::NotPinned {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            key: self.key.clone(),
            actual,
            expected,
        })
    }
}

/// A component in an OCI registry (CNCF `application/wasm` layout, or the older
/// `application/vnd.wasm.content.layer.v1+wasm`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciSource {
    /// `registry/repository:tag` or `registry/repository@sha256:<digest>`.
    pub url: String,
    /// The hex sha256 the component's bytes must have (checked after every pull).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A `kubernetes.io/dockerconfigjson` Secret in the host's namespace with the registry's
    /// credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
    /// `IfNotPresent` (default) pulls once per reference; `Always` re-resolves a tag
    /// periodically and loads what it points to now.
    #[serde(default)]
    pub pull_policy: PullPolicy,
    /// Requires cosign signatures of the pulled manifest digest, stored in the same repository
    /// (`cosign sign`, `ksm-adapter plugin sign`): by one of these keys, or keyless by accepted
    /// identities; checked before anything is compiled. Unset: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

/// `AdapterPlugin.spec.source.oci.verify`: who must have signed the plugin. With both `keys`
/// and `keyless`, both must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.keys) || has(self.keyless)",
    "message": "set keys, keyless or both"
}]))]
pub struct Verify {
    /// Public keys (PEM, as `cosign.pub`); a signature by any one of them is enough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub keys: Vec<VerifyKey>,
    /// Keyless signatures (`cosign sign` with a certificate from Fulcio or an own CA): the
    /// identities accepted, under the operator's own Sigstore trust root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyless: Option<KeylessVerify>,
}

/// `verify.keyless`: which certificate identities may sign, under which trust root. Nothing
/// is fetched from the internet; a signature is accepted only when its certificate chains to
/// the trust root at the signing time a Rekor entry proves, and carries an SCT of a CT log of
/// the trust root (unless opted out below).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.allOf) || has(self.anyOf)",
    "message": "list the accepted identities in allOf, anyOf or both"
}]))]
pub struct KeylessVerify {
    /// A key of a ConfigMap in the host's namespace holding the Sigstore trust root: a
    /// `trusted_root.json`, or a ClientTrustConfig (`trustedRoot`, as Kubewarden's
    /// `sigstoreTrustConfig`).
    pub trust_root: ConfigMapKeyRef,
    /// Identities that must each have signed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub all_of: Vec<IdentityRule>,
    /// Identities of which at least `minimumMatches` must have signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_of: Option<AnyOfIdentities>,
    /// Accepts certificates without an SCT of the trust root's CT logs (cosign's
    /// `--insecure-ignore-sct`), e.g. from a CA that logs to no CT log.
    #[serde(default, rename = "insecureIgnoreSCT", skip_serializing_if = "std::ops::Not::not")]
    pub insecure_ignore_sct: bool,
    /// Accepts signatures without a Rekor entry (cosign's `--insecure-ignore-tlog`): the
    /// certificate must then be valid now, since nothing proves when it signed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_ignore_tlog: bool,
}

impl KeylessVerify {
    /// The accepted identities, each named by its field, or what is wrong with them.
    pub fn rules(&self) -> Result<identity::Rules, SpecError> {
        let field = "spec.source.oci.verify.keyless";
        let rules = |list: &[IdentityRule], at: &str| -> Result<Vec<identity::Rule>, SpecError> {
            list.iter().enumerate().map(|(i, r)| r.rule(&format!("{at}[{i}]"))).collect()
        };
        let all_of = rules(&self.all_of, &format!("{field}.allOf"))?;
        let (any_of, minimum) = match &self.any_of {
            Some(any) => {
                let minimum = any.minimum_matches.unwrap_or(1);
                if minimum == 0 || minimum as usize > any.signatures.len() {
                    return Err(SpecError::MinimumMatches { minimum, listed: any.signatures.len() });
                }
                (rules(&any.signatures, &format!("{field}.anyOf.signatures"))?, minimum as usize)
            }
            None => (Vec::new(), 0),
        };
        if all_of.is_empty() && any_of.is_empty() {
            return Err(SpecError::NoIdentities);
        }
        Ok(identity::Rules { all_of, any_of, minimum })
    }
}

impl IdentityRule {
    fn rule(&self, field: &str) -> Result<identity::Rule, SpecError> {
        let subject = match (&self.subject.equal, &self.subject.url_prefix) {
            (Some(equal), None) => identity::Subject::Equal(equal.clone()),
            (None, Some(prefix)) => identity::Subject::UrlPrefix(prefix.clone()),
            _ => return Err(SpecError::Subject { field: format!("{field}.subject") }),
        };
        let (name, issuer) = (field.trim_start_matches("spec.source.oci.verify.").to_string(), self.issuer.clone());
        Ok(identity::Rule { name, issuer, subject, annotations: self.annotations.clone() })
    }
}

/// A key of a ConfigMap in the host's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name.
    pub name: String,
    /// The `data` key.
    pub key: String,
}

/// `keyless.anyOf`: identities of which at least `minimumMatches` must have signed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnyOfIdentities {
    /// How many of `signatures` must match; 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub minimum_matches: Option<u32>,
    /// The identities.
    #[schemars(length(min = 1))]
    pub signatures: Vec<IdentityRule>,
}

/// One accepted identity: the OIDC issuer and subject of a certificate (Kubewarden's
/// `genericIssuer`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IdentityRule {
    /// The OIDC issuer, exactly as the certificate's issuer extension names it.
    pub issuer: String,
    /// The subject: the certificate's SAN (URI or email).
    pub subject: SubjectMatch,
    /// Annotations the signature must carry (`cosign sign -a key=value`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// How a subject is matched: exactly, or under a URL prefix (a `/` is added when the prefix
/// does not end in one, so `https://github.com/acme` never matches `https://github.com/acme-evil`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.equal) != has(self.urlPrefix)",
    "message": "exactly one of equal and urlPrefix must be set"
}]))]
pub struct SubjectMatch {
    /// The subject, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equal: Option<String>,
    /// A URL every accepted subject lies under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_prefix: Option<String>,
}

/// One public key of `verify`: inline, or in a Secret of the host's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.publicKey) != has(self.secretKeyRef)",
    "message": "exactly one of publicKey and secretKeyRef must be set"
}]))]
pub struct VerifyKey {
    /// The PEM public key (`-----BEGIN PUBLIC KEY-----`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// A key of a Secret in the host's namespace holding the PEM public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,
}

/// A key of a Secret in the host's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The `data` key.
    pub key: String,
}

/// Where one key of [`Verify`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource<'a> {
    /// The PEM itself.
    Inline(&'a str),
    /// A Secret key in the host's namespace.
    Secret(&'a SecretKeyRef),
}

impl VerifyKey {
    /// The source that is set, or an error naming the field (`field` is this key's path)
    /// unless exactly one is.
    pub fn get(&self, field: &str) -> Result<KeySource<'_>, SpecError> {
        match (&self.public_key, &self.secret_key_ref) {
            (Some(pem), None) => Ok(KeySource::Inline(pem)),
            (None, Some(secret)) => Ok(KeySource::Secret(secret)),
            _ => Err(SpecError::KeySource { field: field.into() }),
        }
    }
}

/// When an OCI reference is pulled again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PullPolicy {
    /// Pull once per reference.
    #[default]
    IfNotPresent,
    /// Re-resolve the tag periodically.
    Always,
}

/// Per-call sandbox limits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginLimits {
    /// Wall-time limit of one call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// Linear-memory limit of one instance, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub memory_mib: Option<u64>,
    /// Limit on the text one call may return, in KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub output_kib: Option<u64>,
    /// Most objects one service may produce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub objects_per_service: Option<u32>,
}

/// A kind, by API group (empty for the core group) and kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AllowedKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    pub kind: String,
}

/// `AdapterPlugin.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdapterPluginStatus {
    /// True when the current spec's plugin is loaded and serving.
    #[serde(default)]
    pub ready: bool,
    /// `Fetched`, `Verified`, `Compiled`, `Validated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The hex sha256 of the component serving now (may be a previous version while a newer
    /// one fails).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
    /// The serving plugin's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginInfo>,
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The last error, in words a person can act on; empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// A loaded plugin's metadata, as shown in status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    /// The plugin's own name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The contract version it implements.
    pub contract_version: String,
    /// The kinds it may create (after `allowedKinds`), as `group/version Kind`.
    #[serde(default)]
    pub creates: Vec<String>,
}

/// The `AdapterPlugin` CRD as YAML: what `crds/adapterplugin.yaml` holds.
pub fn crd_yaml() -> String {
    use kube::CustomResourceExt;
    format!("---\n{}", serde_norway::to_string(&AdapterPlugin::crd()).expect("the CRD serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_map_source_pinned_by_sha256_refuses_other_bytes() {
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "argocd", "namespace": "kcm-system"},
            "binaryData": {"plugin.wasm": "AGFzbQ=="},
        }))
        .unwrap();
        let sha256 = hex::encode(Sha256::digest(b"\0asm"));
        let source = |pin: Option<String>| ConfigMapSource {
            namespace: "kcm-system".into(),
            name: "argocd".into(),
            key: "plugin.wasm".into(),
            sha256: pin,
        };
        assert_eq!(source(None).bytes_in(&config_map).unwrap(), b"\0asm");
        assert!(source(Some(format!("sha256:{}", sha256.to_uppercase()))).bytes_in(&config_map).is_ok());
        let error = source(Some("0".repeat(64))).bytes_in(&config_map).unwrap_err().to_string();
        assert!(error.contains(&format!("has sha256:{sha256}, not the pinned sha256:{}", "0".repeat(64))), "{error}");
        assert!(error.starts_with("spec.source.configMap.sha256: ConfigMap kcm-system/argocd"), "{error}");
    }

    #[test]
    fn crds_dir_is_up_to_date() {
        let committed = include_str!("../../crds/adapterplugin.yaml");
        assert!(
            committed == crd_yaml(),
            "crds/adapterplugin.yaml is stale: run `ksm-adapter crds --own > crds/adapterplugin.yaml`"
        );
    }

    #[test]
    fn the_crd_is_cluster_scoped_with_printer_columns_and_a_one_source_rule() {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(AdapterPlugin::crd()).unwrap();
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(crd["spec"]["group"], GROUP);
        let version = &crd["spec"]["versions"][0];
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Ready", "Providers", "Digest", "Age"]);
        let source = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["source"];
        assert!(source["x-kubernetes-validations"][0]["rule"].as_str().unwrap().contains("size() == 1"));
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["config"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            spec["source"]["properties"]["oci"]["properties"]["pullPolicy"]["enum"],
            json!(["IfNotPresent", "Always"])
        );
    }

    #[test]
    fn verify_keys_are_inline_or_in_a_secret_and_exactly_one() {
        let oci: OciSource = serde_json::from_value(json!({
            "url": "r/p:1",
            "verify": {"keys": [{"publicKey": "PEM"}, {"secretKeyRef": {"name": "signers", "key": "team.pub"}}, {}]}
        }))
        .unwrap();
        let keys = oci.verify.unwrap().keys;
        assert_eq!(keys[0].get("k").unwrap(), KeySource::Inline("PEM"));
        assert_eq!(
            keys[1].get("k").unwrap(),
            KeySource::Secret(&SecretKeyRef { name: "signers".into(), key: "team.pub".into() })
        );
        assert_eq!(
            keys[2].get("spec.source.oci.verify.keys[2]").unwrap_err().to_string(),
            "spec.source.oci.verify.keys[2]: set exactly one of publicKey and secretKeyRef"
        );

        use kube::CustomResourceExt;
        let crd = serde_json::to_value(AdapterPlugin::crd()).unwrap();
        let oci = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["source"]
            ["properties"]["oci"];
        let verify = &oci["properties"]["verify"];
        assert_eq!(verify["properties"]["keys"]["minItems"], 1);
        assert_eq!(verify["x-kubernetes-validations"][0]["rule"], "has(self.keys) || has(self.keyless)");
        let keyless = &verify["properties"]["keyless"];
        assert_eq!(keyless["required"], json!(["trustRoot"]));
        assert_eq!(keyless["x-kubernetes-validations"][0]["rule"], "has(self.allOf) || has(self.anyOf)");
        assert!(
            keyless["properties"]["insecureIgnoreSCT"].is_object()
                && keyless["properties"]["insecureIgnoreTlog"].is_object()
        );
        let subject = &keyless["properties"]["allOf"]["items"]["properties"]["subject"];
        assert_eq!(subject["x-kubernetes-validations"][0]["rule"], "has(self.equal) != has(self.urlPrefix)");
        let key = &verify["properties"]["keys"]["items"];
        assert!(key["x-kubernetes-validations"][0]["rule"].as_str().unwrap().contains("secretKeyRef"), "{key:#}");
    }

    #[test]
    fn specs_read_with_the_documented_field_names() {
        let spec: AdapterPluginSpec = serde_json::from_value(json!({
            "source": {"oci": {"url": "registry.local/ksm/argocd:1.0", "pullSecret": "regcred", "pullPolicy": "Always"}},
            "providers": ["ksm-argocd"],
            "limits": {"timeoutMs": 500, "objectsPerService": 4},
            "allowedKinds": [{"group": "argoproj.io", "kind": "Application"}],
            "allowedNamespaces": ["argocd"]
        }))
        .unwrap();
        let oci = spec.source.oci.unwrap();
        assert_eq!((oci.pull_policy, oci.pull_secret.as_deref()), (PullPolicy::Always, Some("regcred")));
        assert_eq!(oci.verify, None, "signatures are checked only when asked");
        assert_eq!(spec.limits.unwrap().objects_per_service, Some(4));
    }
}
