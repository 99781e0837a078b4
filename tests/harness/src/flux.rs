//! HelmRelease status as Flux's helm-controller writes it, for the states the scenarios
//! simulate (after `plugins/flux/testdata/status/cases.yaml`).

use serde_json::{Value, json};

use crate::fixtures::now;

/// A state of a HelmRelease, as helm-controller reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FluxState {
    /// `Ready=True` (InstallSucceeded) for the current generation.
    Ready,
    /// `Ready=False` with reason InstallFailed.
    InstallFailed,
    /// `Stalled=True` with reason RetriesExceeded.
    RetriesExceeded,
    /// `Reconciling=True` (Progressing), `Ready=Unknown`.
    Reconciling,
}

impl FluxState {
    /// The ServiceSet service `state` this maps to.
    pub fn service_state(self) -> &'static str {
        match self {
            FluxState::Ready => "Deployed",
            FluxState::InstallFailed | FluxState::RetriesExceeded => "Failed",
            FluxState::Reconciling => "Provisioning",
        }
    }

    /// A text the service's `failureMessage` must contain, for failed states.
    pub fn failure_reason(self) -> Option<&'static str> {
        match self {
            FluxState::InstallFailed => Some("InstallFailed"),
            FluxState::RetriesExceeded => Some("RetriesExceeded"),
            FluxState::Ready | FluxState::Reconciling => None,
        }
    }

    /// The HelmRelease status for this state, observed at `generation`.
    pub fn helm_release_status(self, generation: i64) -> Value {
        let condition = |type_: &str, status: &str, reason: &str, message: &str| {
            json!({"type": type_, "status": status, "reason": reason, "message": message,
                   "observedGeneration": generation, "lastTransitionTime": now()})
        };
        let conditions = match self {
            FluxState::Ready => vec![
                condition("Ready", "True", "InstallSucceeded", "Helm install succeeded"),
                condition("Released", "True", "InstallSucceeded", "Helm install succeeded"),
            ],
            FluxState::InstallFailed => vec![
                condition("Ready", "False", "InstallFailed", "Helm install failed: context deadline exceeded"),
                condition("Released", "False", "InstallFailed", "Helm install failed"),
            ],
            FluxState::RetriesExceeded => vec![
                condition("Stalled", "True", "RetriesExceeded", "Failed to install after 4 attempt(s)"),
                condition("Ready", "False", "InstallFailed", "Helm install failed"),
            ],
            FluxState::Reconciling => vec![
                condition("Reconciling", "True", "Progressing", "Running 'upgrade' action with timeout of 5m0s"),
                condition("Ready", "Unknown", "Progressing", "Running 'upgrade' action with timeout of 5m0s"),
            ],
        };
        let mut status = json!({"observedGeneration": generation, "conditions": conditions});
        if self == FluxState::Ready {
            status["history"] = json!([release_snapshot("sha256:values-1")]);
        }
        status
    }
}

/// A HelmRelease `status.history` entry as helm-controller writes it, of a release whose values
/// have the digest `config_digest`, last deployed now.
pub fn release_snapshot(config_digest: &str) -> Value {
    json!({"name": "release", "namespace": "default", "version": 1, "status": "deployed",
           "chartName": "chart", "chartVersion": "1.0.0", "appVersion": "1.0.0",
           "configDigest": config_digest, "digest": format!("sha256:release-of-{config_digest}"),
           "firstDeployed": now(), "lastDeployed": now()})
}
