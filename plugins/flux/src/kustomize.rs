//! Kustomize and resources services: a Flux `Kustomization` (`kustomize.toolkit.fluxcd.io/v1`)
//! using the source kcm created or found for the template (`status.sourceStatus`). kcm's
//! `driftIgnore`, `driftExclusions` and `maxConsecutiveFailures` fail such a service: a
//! Kustomization has nothing like them.

use crate::config::FluxConfig;
use crate::flux::{FluxObject, KubeConfigReference, SourceReference, kustomization_kind};
use crate::service::{Common, ResolvedTemplate, to_json};
use ksm_plugin_sdk::contract::ServiceError;
use ksm_plugin_sdk::k0rdent::SourceSpec;
use serde::Serialize;

/// Kinds a Kustomization `sourceRef` may have.
const SOURCE_KINDS: [&str; 4] = ["OCIRepository", "GitRepository", "Bucket", "ExternalArtifact"];

/// Kustomization `spec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KustomizationSpec {
    source_ref: SourceReference,
    #[serde(skip_serializing_if = "String::is_empty")]
    path: String,
    prune: bool,
    wait: bool,
    interval: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kube_config: Option<KubeConfigReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspend: Option<bool>,
}

/// `deploymentType` of a source whose objects go to the management cluster.
const LOCAL: &str = "Local";

/// The Kustomization of a kustomize or resources service whose template has `source`, as
/// JSON; with `deploymentType: Local` it has no `kubeConfig` (the management cluster). Without a service namespace or config `targetNamespace`, `targetNamespace` is
/// omitted and the resources keep their own namespaces.
pub fn kustomization(
    common: &Common,
    template: &ResolvedTemplate,
    source: &SourceSpec,
) -> Result<String, ServiceError> {
    let unsupported = |kind: &str| {
        ServiceError::UnsupportedSource(format!(
            "{}: a Flux Kustomization cannot use a {kind} source (sourceRef kinds are {})",
            template.id,
            SOURCE_KINDS.join(", ")
        ))
    };
    let config = common.config;
    let unhonoured = unhonoured_keys(config);
    if !unhonoured.is_empty() {
        return Err(ServiceError::InvalidService(format!(
            "service {:?}: a Flux Kustomization cannot honour the provider config's {}; deploy it from a \
             ServiceSet whose config leaves them out",
            common.service.name,
            unhonoured.join(", ")
        )));
    }
    if let Some(local) = &source.local_source_ref
        && !SOURCE_KINDS.contains(&local.kind.as_str())
    {
        return Err(unsupported(&local.kind));
    }
    let source_ref = template
        .status
        .source_status
        .as_ref()
        .ok_or_else(|| ServiceError::TemplateNotReady(format!("{} has no status.sourceStatus yet", template.id)))?;
    if !SOURCE_KINDS.contains(&source_ref.kind.as_str()) {
        return Err(unsupported(&source_ref.kind));
    }
    let spec = KustomizationSpec {
        source_ref: source_ref.into(),
        path: source.path.clone(),
        prune: config.prune,
        wait: config.wait,
        interval: config.interval.clone(),
        timeout: config.timeout.clone(),
        target_namespace: common.target_namespace.clone(),
        // `deploymentType: Local`: the objects go to the management cluster.
        kube_config: common.kube_config.clone().filter(|_| source.deployment_type.as_deref() != Some(LOCAL)),
        suspend: common.suspend,
    };
    to_json(&FluxObject::new(&kustomization_kind(), common.metadata.clone(), spec))
}

/// The kcm keys set in `config` that a Kustomization has no equivalent of, each with why. They
/// are refused: deploying without them would quietly correct or retry what they rule out.
fn unhonoured_keys(config: &FluxConfig) -> Vec<String> {
    const DRIFT: &str = "kustomize-controller corrects every drift, a Kustomization has no ignore rules";
    [
        ("driftIgnore", !config.drift_ignore.is_empty(), DRIFT),
        ("driftExclusions", !config.drift_exclusions.is_empty(), DRIFT),
        ("maxConsecutiveFailures", config.max_consecutive_failures.is_some(), "a Kustomization retries without limit"),
    ]
    .into_iter()
    .filter(|(_, set, _)| *set)
    .map(|(key, _, why)| format!("{key} ({why})"))
    .collect()
}
