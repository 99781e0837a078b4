//! Helm services: a Flux `HelmRelease` (`helm.toolkit.fluxcd.io/v2`) using the HelmChart kcm
//! created for the template (`status.chartRef`, for `chartSpec` and `chartRef` templates), or,
//! for a `chartSource` template, the source kcm created or was given (`status.sourceStatus`): a
//! GitRepository or Bucket holds the chart at `spec.helm.chartSource.path` (HelmRelease
//! `spec.chart.spec`), an OCIRepository is the chart (`spec.chartRef`).

use crate::config::{DriftExclusion, FluxConfig};
use crate::flux::{FluxObject, KubeConfigReference, SourceReference, helm_release_kind};
use crate::helm_options::{HelmOptions, Install, Uninstall, Upgrade};
use crate::service::{Common, ResolvedTemplate, to_json};
use ksm_plugin_sdk::contract::ServiceError;
use ksm_plugin_sdk::k0rdent::Service;
use serde::Serialize;
use serde_json::Value;

/// Longest Helm release name.
const MAX_RELEASE_NAME_LEN: usize = 53;
/// Kinds a HelmRelease `chartRef` may have.
const CHART_REF_KINDS: [&str; 3] = ["OCIRepository", "HelmChart", "ExternalArtifact"];
/// Source kinds whose artifact holds a chart at a path (HelmRelease `spec.chart.spec.sourceRef`).
const CHART_SOURCE_KINDS: [&str; 2] = ["GitRepository", "Bucket"];
/// Kinds a HelmRelease `valuesFrom` entry may have.
const VALUES_FROM_KINDS: [&str; 2] = ["ConfigMap", "Secret"];

/// HelmRelease `spec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HelmReleaseSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    chart_ref: Option<SourceReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chart: Option<ChartTemplate>,
    interval: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    release_name: String,
    target_namespace: String,
    storage_namespace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    kube_config: Option<KubeConfigReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspend: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    values_from: Vec<ValuesReference>,
    install: Install,
    #[serde(skip_serializing_if = "Option::is_none")]
    upgrade: Option<Upgrade>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uninstall: Option<Uninstall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_history: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drift_detection: Option<DriftDetection>,
}

/// HelmRelease `spec.chart`: a chart at a path in a source.
#[derive(Serialize)]
struct ChartTemplate {
    spec: ChartTemplateSpec,
}

/// HelmRelease `spec.chart.spec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChartTemplateSpec {
    chart: String,
    source_ref: SourceReference,
}

/// Where the HelmRelease finds its chart: `spec.chartRef` or `spec.chart`.
enum Chart {
    Ref(SourceReference),
    InSource(ChartTemplate),
}

/// HelmRelease `spec.valuesFrom[]`.
#[derive(Serialize)]
struct ValuesReference {
    kind: String,
    name: String,
}

/// HelmRelease `spec.driftDetection`.
#[derive(Serialize)]
struct DriftDetection {
    mode: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ignore: Vec<DriftExclusion>,
}

/// The ignore-rule path of the whole object (RFC 6901's empty pointer): helm-controller leaves
/// the object out of drift detection, as one annotated `helm.toolkit.fluxcd.io/driftDetection:
/// disabled` (fluxcd/pkg `jsondiff.IgnorePathRoot`). `"/"` would be a field named "".
const WHOLE_OBJECT: &str = "";

/// HelmRelease `spec.driftDetection`: the config's mode, and as ignore rules kcm's
/// `driftExclusions` and, as whole objects, its `driftIgnore`. kcm's keys ask for drift
/// correction, so they enable it unless the config's `driftDetection` says otherwise.
fn drift_detection(config: &FluxConfig) -> Option<DriftDetection> {
    let whole_objects = config
        .drift_ignore
        .iter()
        .map(|target| DriftExclusion { paths: vec![WHOLE_OBJECT.into()], target: Some(target.clone()) });
    let ignore: Vec<DriftExclusion> = config.drift_exclusions.iter().cloned().chain(whole_objects).collect();
    let mode = config.drift_detection.clone().or_else(|| (!ignore.is_empty()).then(|| "enabled".into()))?;
    Some(DriftDetection { mode, ignore })
}

/// The Helm release a HelmRelease installs: its `spec.storageNamespace` (where Helm keeps the
/// release) and `spec.releaseName`.
pub struct ReleaseId {
    /// Where Helm keeps the release.
    pub storage_namespace: String,
    /// The release's name.
    pub name: String,
}

/// The HelmRelease of a Helm service, as JSON, and the release it installs.
pub fn release(common: &Common, template: &ResolvedTemplate) -> Result<(String, ReleaseId), ServiceError> {
    let service = common.service;
    let config = common.config;
    let chart = chart(template)?;
    if service.name.len() > MAX_RELEASE_NAME_LEN {
        return invalid(
            service,
            format!("release name {:?} is longer than {MAX_RELEASE_NAME_LEN} characters", service.name),
        );
    }
    let Some(namespace) = common.target_namespace.clone() else {
        return invalid(service, "no namespace is set and the provider config has no targetNamespace");
    };
    let options = HelmOptions::merged(template.spec.helm_options.as_ref(), service.helm_options.as_ref())
        .or_else(|e| invalid(service, format!("helmOptions: {e}")))?;
    let remediation = config.helm_remediation();
    let (chart_ref, chart) = match chart {
        Chart::Ref(reference) => (Some(reference), None),
        Chart::InSource(template) => (None, Some(template)),
    };
    let spec = HelmReleaseSpec {
        chart_ref,
        chart,
        interval: config.interval.clone(),
        timeout: options.timeout().map(str::to_string).or_else(|| config.timeout.clone()),
        release_name: service.name.clone(),
        target_namespace: namespace.clone(),
        storage_namespace: namespace,
        kube_config: common.kube_config.clone(),
        suspend: common.suspend,
        values: values(service)?,
        values_from: values_from(service)?,
        install: options.install(&remediation),
        upgrade: options.upgrade(&remediation),
        uninstall: options.uninstall(),
        max_history: options.max_history(),
        drift_detection: drift_detection(config),
    };
    let id = ReleaseId { storage_namespace: spec.storage_namespace.clone(), name: spec.release_name.clone() };
    Ok((to_json(&FluxObject::new(&helm_release_kind(), common.metadata.clone(), spec))?, id))
}

/// The chart of a Helm template: `status.chartRef`, or for a `chartSource` template its
/// `status.sourceStatus` and path.
fn chart(template: &ResolvedTemplate) -> Result<Chart, ServiceError> {
    let chart_source = template.spec.helm.as_ref().and_then(|helm| helm.get("chartSource"));
    let (field, reference) = match chart_source {
        Some(_) => ("status.sourceStatus", template.status.source_status.as_ref()),
        None => ("status.chartRef", template.status.chart_ref.as_ref()),
    };
    let reference =
        reference.ok_or_else(|| ServiceError::TemplateNotReady(format!("{} has no {field} yet", template.id)))?;
    let kind = reference.kind.as_str();
    match chart_source {
        Some(source) if CHART_SOURCE_KINDS.contains(&kind) => {
            let path = source.get("path").and_then(Value::as_str).unwrap_or_default();
            let chart = path.trim_start_matches("./").trim_end_matches('/');
            if chart.is_empty() {
                return Err(ServiceError::InvalidService(format!(
                    "{}: spec.helm.chartSource.path is empty: a {kind} needs the chart's path in it",
                    template.id
                )));
            }
            let spec = ChartTemplateSpec { chart: chart.to_string(), source_ref: reference.into() };
            Ok(Chart::InSource(ChartTemplate { spec }))
        }
        Some(_) if kind == "OCIRepository" => Ok(Chart::Ref(reference.into())),
        None if CHART_REF_KINDS.contains(&kind) => Ok(Chart::Ref(reference.into())),
        _ => {
            let allowed = match chart_source {
                Some(_) => "GitRepository, Bucket, OCIRepository".to_string(),
                None => CHART_REF_KINDS.join(", "),
            };
            Err(ServiceError::UnsupportedSource(format!(
                "{}: {field} kind {kind:?} is not one of {allowed}",
                template.id
            )))
        }
    }
}

/// A [`ServiceError::InvalidService`] naming `service`.
fn invalid<T>(service: &Service, problem: impl std::fmt::Display) -> Result<T, ServiceError> {
    Err(ServiceError::InvalidService(format!("service {:?}: {problem}", service.name)))
}

/// The service's `values` YAML as JSON: none when blank or null, an error unless a mapping.
fn values(service: &Service) -> Result<Option<Value>, ServiceError> {
    let Some(text) = service.values.as_deref().filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let problem = |p: String| ServiceError::InvalidValues(format!("service {:?}: values {p}", service.name));
    let value: Value = serde_norway::from_str(text).map_err(|e| problem(format!("are not valid YAML: {e}")))?;
    let kind = match value {
        Value::Null => return Ok(None),
        Value::Object(_) => return Ok(Some(value)),
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
    };
    Err(problem(format!("must be a mapping, not {kind}")))
}

/// The service's `valuesFrom`, in order; each must be a ConfigMap or Secret.
fn values_from(service: &Service) -> Result<Vec<ValuesReference>, ServiceError> {
    service
        .values_from
        .iter()
        .map(|v| {
            if VALUES_FROM_KINDS.contains(&v.kind.as_str()) {
                Ok(ValuesReference { kind: v.kind.clone(), name: v.name.clone() })
            } else {
                invalid(service, format!("valuesFrom {:?} has kind {:?}, not ConfigMap or Secret", v.name, v.kind))
            }
        })
        .collect()
}
