//! The Flux API pieces HelmReleases and Kustomizations share, and the object envelope.

use ksm_plugin_sdk::contract::ObjectKind;
use ksm_plugin_sdk::k0rdent::SourceRef;
use serde::Serialize;

/// The HelmRelease kind this plugin creates.
pub fn helm_release_kind() -> ObjectKind {
    kind("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases")
}

/// The Kustomization kind this plugin creates.
pub fn kustomization_kind() -> ObjectKind {
    kind("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations")
}

fn kind(group: &str, version: &str, kind: &str, plural: &str) -> ObjectKind {
    ObjectKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
    }
}

/// A Flux object as the plugin returns it: no labels or owner references (the host sets them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FluxObject<S> {
    /// `group/version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name and namespace.
    pub metadata: ObjectMeta,
    /// The kind's spec.
    pub spec: S,
}

impl<S: Serialize> FluxObject<S> {
    /// An object of `kind` with `metadata` and `spec`.
    pub fn new(kind: &ObjectKind, metadata: ObjectMeta, spec: S) -> Self {
        Self { api_version: kind.api_version(), kind: kind.kind.clone(), metadata, spec }
    }
}

/// `metadata` of a created object.
#[derive(Clone, Serialize)]
pub struct ObjectMeta {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
}

/// A reference to a Flux source (`chartRef`, `sourceRef`).
#[derive(Serialize)]
pub struct SourceReference {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace; empty means the referencing object's namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

impl From<&SourceRef> for SourceReference {
    fn from(r: &SourceRef) -> Self {
        Self { kind: r.kind.clone(), name: r.name.clone(), namespace: r.namespace.clone() }
    }
}

/// `spec.kubeConfig`: the Secret holding the target cluster's kubeconfig.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigReference {
    /// The Secret and its key.
    pub secret_ref: SecretKeyReference,
}

/// A key of a Secret in the object's namespace.
#[derive(Clone, Serialize)]
pub struct SecretKeyReference {
    /// Secret name.
    pub name: String,
    /// Key in the Secret.
    pub key: String,
}
