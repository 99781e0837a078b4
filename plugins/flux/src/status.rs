//! `map-status`: a service's observed Flux objects to its k0rdent state.
//!
//! Each object is judged by the kstatus rules Flux follows, in order:
//! 1. `metadata.deletionTimestamp` set: Deleting;
//! 2. `status.observedGeneration` missing or not `metadata.generation`: Provisioning;
//! 3. `Reconciling=True`: Provisioning; `Stalled=True`: Failed;
//! 4. `Ready=True`: Deployed; `Ready=False` with a failure reason: Failed; else Provisioning.
//!
//! While an object is in progress (rules 2 and 3) but its `Ready` condition is False with a
//! failure reason, the failure message says `retrying: <reason>: <message>`. A Stalled object's
//! failure message starts with the cause, which Flux keeps in `Ready`'s message (helm-controller's
//! Stalled says only "Failed to install after N attempt(s)"), followed by the Stalled note.
//! A missing object is Pending, and the worst state of a service's objects wins:
//! Failed > Deleting > Provisioning > Pending > Deployed.
//!
//! A Deployed service's `deployed-hash` is what Flux records of what it deployed, per object: a
//! HelmRelease's latest `status.history` entry (chart name and version, app version, the digests
//! of its values and of the release) and a Kustomization's last applied revision (and its
//! origin's). Times are left out: a re-applied release is the same deployment.
//!
//! A service with `helmAction: Uninstall` is Deleting while any of its objects still exists
//! and Pending (with no failure message) once none does; the host, which sees the service's
//! objects too, reports it `Deleting` and then `Deleted`.

use crate::translate::UNINSTALL;
use ksm_plugin_sdk::contract::{ObservedObject, ServiceState, ServiceStatus, ServiceType, StatusError, StatusInput};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

/// Maps the observed objects of `input.service` to its status.
pub fn map_status(input: &StatusInput) -> Result<ServiceStatus, StatusError> {
    let service_set: ServiceSetServices = parse(&input.service_set, "the ServiceSet")?;
    let template_type = match &input.template {
        Some(text) => parse::<TemplateSources>(text, "the ServiceTemplate")?.spec.service_type(),
        None => None,
    };
    let service_type = template_type
        .or_else(|| input.observed.first().and_then(|o| FluxKind::of(&o.kind)).map(FluxKind::service_type))
        .unwrap_or(ServiceType::Helm);
    let uninstalling = service_set
        .spec
        .services
        .iter()
        .any(|s| s.name == input.service && s.helm_action.as_deref() == Some(UNINSTALL));
    let health = if uninstalling {
        let present = input.observed.iter().any(|o| o.object.is_some());
        Health::state(if present { ServiceState::Deleting } else { ServiceState::Pending })
    } else {
        let healths = input.observed.iter().map(observed_health).collect::<Result<Vec<_>, _>>()?;
        worst(healths)
    };
    Ok(ServiceStatus {
        state: health.state,
        service_type,
        version: health.version,
        failure_message: health.failure_message,
        deployed_hash: health.deployed.filter(|_| health.state == ServiceState::Deployed),
    })
}

/// What `map-status` reads of the ServiceSet: its services' names and actions. Parsing only
/// these skips the rest of the object (values, helm options) that each of a ServiceSet's
/// `map-status` calls would otherwise build and drop.
#[derive(Deserialize)]
struct ServiceSetServices<'a> {
    #[serde(borrow)]
    spec: ServiceActions<'a>,
}

/// `ServiceSet.spec`, its services only.
#[derive(Deserialize)]
struct ServiceActions<'a> {
    #[serde(default, borrow)]
    services: Vec<ServiceAction<'a>>,
}

/// `ServiceSet.spec.services[]`: the name and `helmAction`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceAction<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    helm_action: Option<Cow<'a, str>>,
}

/// What `map-status` reads of a ServiceTemplate: which sources its spec has.
#[derive(Deserialize)]
struct TemplateSources {
    spec: Sources,
}

/// `ServiceTemplate.spec`: which of `helm`, `kustomize`, `resources` it has.
#[derive(Deserialize)]
struct Sources {
    #[serde(default)]
    helm: Option<IgnoredAny>,
    #[serde(default)]
    kustomize: Option<IgnoredAny>,
    #[serde(default)]
    resources: Option<IgnoredAny>,
}

impl Sources {
    /// The service type of a template: by which of `helm`, `kustomize`, `resources` it has.
    fn service_type(&self) -> Option<ServiceType> {
        if self.helm.is_some() {
            Some(ServiceType::Helm)
        } else if self.kustomize.is_some() {
            Some(ServiceType::Kustomize)
        } else if self.resources.is_some() {
            Some(ServiceType::Resource)
        } else {
            None
        }
    }
}

/// The kinds this plugin creates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FluxKind {
    HelmRelease,
    Kustomization,
}

impl FluxKind {
    fn of(kind: &str) -> Option<Self> {
        match kind {
            "HelmRelease" => Some(Self::HelmRelease),
            "Kustomization" => Some(Self::Kustomization),
            _ => None,
        }
    }

    fn service_type(self) -> ServiceType {
        match self {
            Self::HelmRelease => ServiceType::Helm,
            Self::Kustomization => ServiceType::Kustomize,
        }
    }

    /// Whether `Ready=False` with `reason` means the object failed (rather than being in
    /// progress). For HelmReleases a succeeded rollback or uninstall counts: it was a
    /// remediation, and the desired release is not deployed.
    fn is_failure(self, reason: &str) -> bool {
        let reasons: &[&str] = match self {
            Self::HelmRelease => &[
                "InstallFailed",
                "UpgradeFailed",
                "TestFailed",
                "RollbackFailed",
                "UninstallFailed",
                "ArtifactFailed",
                "ValuesError",
                "RetriesExceeded",
                "MissingRollbackTarget",
                "RollbackSucceeded",
                "UninstallSucceeded",
            ],
            Self::Kustomization => {
                &["ArtifactFailed", "BuildFailed", "ReconciliationFailed", "PruneFailed", "HealthCheckFailed"]
            }
        };
        reasons.contains(&reason)
    }
}

/// The parts of a live HelmRelease or Kustomization that tell its health.
#[derive(Deserialize)]
struct LiveObject<'a> {
    #[serde(default)]
    metadata: LiveMetadata,
    #[serde(default, borrow)]
    status: Option<LiveStatus<'a>>,
}

/// `metadata` of a live Flux object: what tells whether it is current or going.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LiveMetadata {
    generation: Option<i64>,
    #[serde(default)]
    deletion_timestamp: Option<IgnoredAny>,
}

/// `status` of a live Flux object.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LiveStatus<'a> {
    observed_generation: Option<i64>,
    #[serde(default, borrow)]
    conditions: Vec<Condition<'a>>,
    /// HelmRelease release history, newest first.
    #[serde(default)]
    history: Vec<Snapshot>,
    /// Kustomization: the source revision last applied, and where it came from.
    #[serde(default)]
    last_applied_revision: Option<String>,
    #[serde(default)]
    last_applied_origin_revision: Option<String>,
}

/// A `metav1.Condition`.
#[derive(Deserialize)]
struct Condition<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(default, borrow)]
    reason: Cow<'a, str>,
    #[serde(default, borrow)]
    message: Cow<'a, str>,
}

impl Condition<'_> {
    /// `<reason>: <message>`, or whichever of the two is set.
    fn describe(&self) -> String {
        match (&*self.reason, &*self.message) {
            (reason, "") => reason.to_string(),
            ("", message) => message.to_string(),
            (reason, message) => format!("{reason}: {message}"),
        }
    }
}

/// An entry of HelmRelease `status.history`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Snapshot {
    chart_name: Option<String>,
    chart_version: Option<String>,
    app_version: Option<String>,
    /// The digest of the release's values.
    config_digest: Option<String>,
    /// The digest of the release.
    digest: Option<String>,
}

impl Snapshot {
    /// What the entry says was deployed, times left out.
    fn deployed(&self) -> String {
        let field = |value: &Option<String>| value.as_deref().unwrap_or_default().to_string();
        format!(
            "chart {} {}, app {}, values {}, release {}",
            field(&self.chart_name),
            field(&self.chart_version),
            field(&self.app_version),
            field(&self.config_digest),
            field(&self.digest)
        )
    }
}

/// The state of one object or of the whole service.
struct Health {
    state: ServiceState,
    failure_message: Option<String>,
    version: Option<String>,
    /// What Flux records as deployed, when it says Ready.
    deployed: Option<String>,
}

impl Health {
    fn state(state: ServiceState) -> Self {
        Self { state, failure_message: None, version: None, deployed: None }
    }

    fn failed(message: String) -> Self {
        Self { failure_message: Some(message), ..Self::state(ServiceState::Failed) }
    }
}

/// Why a Stalled object failed: `Ready`'s cause first, then the Stalled note, unless the Stalled
/// message already says it all.
fn stalled_message(stalled: &Condition, ready: Option<&Condition>) -> String {
    match ready.filter(|r| r.status == "False" && !r.message.is_empty() && !stalled.message.contains(&*r.message)) {
        Some(cause) => format!("{} ({})", cause.describe(), stalled.describe()),
        None => stalled.describe(),
    }
}

/// The health of one observed object; Pending when it does not exist.
fn observed_health(observed: &ObservedObject) -> Result<Health, StatusError> {
    let Some(text) = &observed.object else {
        return Ok(Health::state(ServiceState::Pending));
    };
    let id = format!("{} \"{}/{}\"", observed.kind, observed.namespace, observed.name);
    let kind = FluxKind::of(&observed.kind)
        .ok_or_else(|| StatusError::InvalidInput(format!("{id}: not a kind this plugin creates")))?;
    let health = health(kind, &parse(text, &id)?);
    Ok(Health { deployed: health.deployed.map(|deployed| format!("{id}: {deployed}")), ..health })
}

/// The health of a live object by the kstatus rules (see the module docs).
fn health(kind: FluxKind, object: &LiveObject) -> Health {
    if object.metadata.deletion_timestamp.is_some() {
        return Health::state(ServiceState::Deleting);
    }
    let status = object.status.as_ref();
    let condition = |kind: &str| status.and_then(|s| s.conditions.iter().find(|c| c.kind == kind));
    let is_true = |kind: &str| condition(kind).filter(|c| c.status == "True");
    let ready = condition("Ready");
    let ready_failure = ready.filter(|c| c.status == "False" && kind.is_failure(&c.reason));
    let in_progress = Health {
        failure_message: ready_failure.map(|c| format!("retrying: {}", c.describe())),
        ..Health::state(ServiceState::Provisioning)
    };
    let observed_generation = status.and_then(|s| s.observed_generation);
    if observed_generation.is_none() || observed_generation != object.metadata.generation {
        return in_progress;
    }
    if is_true("Reconciling").is_some() {
        return in_progress;
    }
    if let Some(stalled) = is_true("Stalled") {
        return Health::failed(stalled_message(stalled, ready));
    }
    if let Some(failure) = ready_failure {
        return Health::failed(failure.describe());
    }
    if ready.is_some_and(|c| c.status == "True") {
        let latest = status.and_then(|s| s.history.first());
        let (version, deployed) = match kind {
            FluxKind::HelmRelease => (latest.and_then(|h| h.chart_version.clone()), latest.map(Snapshot::deployed)),
            FluxKind::Kustomization => {
                let applied = status.and_then(|s| s.last_applied_revision.as_deref());
                let origin = status.and_then(|s| s.last_applied_origin_revision.as_deref()).unwrap_or_default();
                (None, applied.map(|revision| format!("revision {revision}, origin {origin}")))
            }
        };
        return Health { version, deployed, ..Health::state(ServiceState::Deployed) };
    }
    in_progress
}

/// The worst of several healths (Pending when there are none), with the first failure
/// message and version among the objects in that state.
fn worst(healths: Vec<Health>) -> Health {
    let rank = |state: &ServiceState| match state {
        ServiceState::Deployed => 0,
        ServiceState::Pending => 1,
        ServiceState::Provisioning => 2,
        ServiceState::Deleting => 3,
        ServiceState::Failed => 4,
    };
    let state = healths.iter().map(|h| h.state).max_by_key(rank).unwrap_or(ServiceState::Pending);
    healths.into_iter().filter(|h| h.state == state).fold(Health::state(state), |worst, h| Health {
        state,
        failure_message: worst.failure_message.or(h.failure_message),
        version: worst.version.or(h.version),
        deployed: match (worst.deployed, h.deployed) {
            (Some(all), Some(one)) => Some(format!("{all}\n{one}")),
            (all, one) => all.or(one),
        },
    })
}

fn parse<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, StatusError> {
    serde_json::from_str(text).map_err(|e| StatusError::InvalidInput(format!("{what} cannot be read: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const SERVICE_SET: &str = r#"{"metadata": {"name": "prod-eu-1", "namespace": "kcm-system"},
        "spec": {"services": [{"name": "web", "namespace": "web", "template": "web-1"}]}}"#;

    fn release(ready: &str, reason: &str) -> Value {
        json!({"kind": "HelmRelease", "metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": "m"}],
            "history": [{"chartVersion": "1.0.0"}]}})
    }

    fn observed(kind: &str, object: Option<Value>) -> ObservedObject {
        ObservedObject {
            api_version: "v".into(),
            kind: kind.into(),
            name: "prod-eu-1-web".into(),
            namespace: "kcm-system".into(),
            object: object.map(|o| o.to_string()),
        }
    }

    fn status(observed: Vec<ObservedObject>) -> Result<ServiceStatus, StatusError> {
        map_status(&StatusInput { service_set: SERVICE_SET.into(), service: "web".into(), template: None, observed })
    }

    #[test]
    fn the_worst_object_wins() {
        let deployed = || observed("HelmRelease", Some(release("True", "InstallSucceeded")));
        let all_deployed = status(vec![deployed(), deployed()]).unwrap();
        assert_eq!((all_deployed.state, all_deployed.version.as_deref()), (ServiceState::Deployed, Some("1.0.0")));
        assert_eq!(status(vec![deployed(), observed("HelmRelease", None)]).unwrap().state, ServiceState::Pending);
        let failed = status(vec![
            observed("HelmRelease", Some(release("Unknown", "Progressing"))),
            observed("HelmRelease", Some(release("False", "UpgradeFailed"))),
            deployed(),
        ])
        .unwrap();
        assert_eq!(failed.state, ServiceState::Failed);
        assert_eq!(failed.failure_message.as_deref(), Some("UpgradeFailed: m"));
        assert_eq!(failed.version, None);
    }

    #[test]
    fn a_deployed_service_is_fingerprinted_by_what_flux_records_without_times() {
        let mut deployed = release("True", "UpgradeSucceeded");
        deployed["status"]["history"] = json!([{"chartName": "ingress-nginx", "chartVersion": "4.11.3",
            "appVersion": "1.11.3", "configDigest": "sha256:values", "digest": "sha256:release",
            "firstDeployed": "2026-11-27T10:00:00Z", "lastDeployed": "2026-11-27T10:00:00Z", "status": "deployed"}]);
        let hash = |object: &Value| status(vec![observed("HelmRelease", Some(object.clone()))]).unwrap().deployed_hash;
        let first = hash(&deployed).expect("a fingerprint once deployed");
        assert_eq!(
            first,
            "HelmRelease \"kcm-system/prod-eu-1-web\": chart ingress-nginx 4.11.3, app 1.11.3, values sha256:values, \
             release sha256:release"
        );
        let mut reapplied = deployed.clone();
        reapplied["status"]["history"][0]["lastDeployed"] = json!("2026-11-28T10:00:00Z");
        assert_eq!(hash(&reapplied), Some(first.clone()), "the time of the last apply is not part of it");
        let mut new_values = deployed.clone();
        new_values["status"]["history"][0]["configDigest"] = json!("sha256:other");
        assert_ne!(hash(&new_values), Some(first), "new values are a new deployment");
        assert_eq!(hash(&release("Unknown", "Progressing")), None, "nothing while it is not deployed");
        let kustomization = json!({"kind": "Kustomization", "metadata": {"generation": 1}, "status": {
            "observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded"}],
            "lastAppliedRevision": "main@sha1:abc", "lastAppliedOriginRevision": "v1.2.0@sha1:abc"}});
        let applied = status(vec![observed("Kustomization", Some(kustomization))]).unwrap().deployed_hash;
        assert_eq!(
            applied.as_deref(),
            Some("Kustomization \"kcm-system/prod-eu-1-web\": revision main@sha1:abc, origin v1.2.0@sha1:abc")
        );
    }

    #[test]
    fn escaped_text_in_conditions_and_service_names_is_read_unescaped() {
        let mut failed = release("False", "InstallFailed");
        failed["status"]["conditions"][0]["message"] = json!("chart \"web\" failed\nat line 2");
        let input = StatusInput {
            service_set: SERVICE_SET.replace(r#""name": "web""#, r#""name": "w\u0065b", "helmAction": "Inst\u0061ll""#),
            service: "web".into(),
            template: None,
            observed: vec![observed("HelmRelease", Some(failed))],
        };
        let status = map_status(&input).unwrap();
        assert_eq!(status.state, ServiceState::Failed);
        assert_eq!(status.failure_message.as_deref(), Some("InstallFailed: chart \"web\" failed\nat line 2"));
        let uninstalling =
            StatusInput { service_set: input.service_set.replace("Inst\\u0061ll", "Uninst\\u0061ll"), ..input };
        assert_eq!(map_status(&uninstalling).unwrap().state, ServiceState::Deleting, "{}", uninstalling.service_set);
    }

    #[test]
    fn no_observed_objects_is_pending() {
        let pending = status(vec![]).unwrap();
        assert_eq!((pending.state, pending.service_type), (ServiceState::Pending, ServiceType::Helm));
    }

    #[test]
    fn unreadable_input_is_an_error_naming_the_object() {
        let bad = observed("HelmRelease", None);
        let bad = ObservedObject { object: Some("{".into()), ..bad };
        let StatusError::InvalidInput(message) = status(vec![bad]).unwrap_err();
        assert!(message.starts_with("HelmRelease \"kcm-system/prod-eu-1-web\" cannot be read"), "{message}");
        let StatusError::InvalidInput(message) = status(vec![observed("Deployment", Some(json!({})))]).unwrap_err();
        assert_eq!(message, "Deployment \"kcm-system/prod-eu-1-web\": not a kind this plugin creates");
    }
}
