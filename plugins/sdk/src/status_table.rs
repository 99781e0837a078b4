//! The status table of golden tests (`status/cases.yaml`): each row is one service
//! (`ingress-nginx` of ServiceSet `kcm-system/prod-eu-1`) with one observed object and the state
//! `map-status` must return. Shared by the Flux plugin's own tests and the host's conformance
//! suite (`ksm-adapter plugin test --fixtures`), so both build the very same inputs.

use crate::contract::{ObservedObject, ServiceStatus, StatusError, StatusInput};
use crate::{k0rdent, names};
use serde::Deserialize;
use serde_json::{Value, json};

/// The namespace the rows' ServiceSet and template live in.
const SYSTEM_NAMESPACE: &str = "kcm-system";

/// One row of the status table: a service of ServiceSet `kcm-system/prod-eu-1` with one
/// observed object.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusCase {
    /// Case name.
    pub name: String,
    /// The kind of the service's template; none when the template is missing.
    pub template: Option<TemplateKind>,
    /// The service's `helmAction`, if set.
    #[serde(default)]
    pub helm_action: Option<String>,
    /// The observed HelmRelease or Kustomization; none when it does not exist yet.
    pub object: Option<Value>,
    /// What `map-status` must return.
    pub expect: StatusExpectation,
}

/// The kind of a status case's ServiceTemplate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateKind {
    /// `spec.helm`: the service has a HelmRelease.
    Helm,
    /// `spec.kustomize`: the service has a Kustomization.
    Kustomize,
    /// `spec.resources`: the service has a Kustomization.
    Resources,
}

/// The expected result of a status case.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusExpectation {
    /// The service state, e.g. `Failed`.
    pub state: String,
    /// The service type (`Helm`, `Kustomize`, `Resource`), when checked.
    #[serde(default, rename = "type")]
    pub service_type: Option<String>,
    /// A substring of the failure message; absent means there must be none.
    #[serde(default)]
    pub failure_message: Option<String>,
    /// The exact version; absent means there must be none.
    #[serde(default)]
    pub version: Option<String>,
    /// The exact `deployed-hash` (contract 0.2.0), when checked.
    #[serde(default)]
    pub deployed_hash: Option<String>,
}

/// ServiceSet, service and template names of the status cases.
const SERVICE_SET: &str = "prod-eu-1";
const SERVICE: &str = "ingress-nginx";
const TEMPLATE: &str = "ingress-nginx-4-11-3";

impl StatusCase {
    /// The `map-status` input of this case.
    pub fn input(&self) -> StatusInput {
        let service_set = json!({
            "apiVersion": k0rdent::API_VERSION,
            "kind": "ServiceSet",
            "metadata": {"name": SERVICE_SET, "namespace": SYSTEM_NAMESPACE},
            "spec": {
                "cluster": SERVICE_SET,
                "provider": {"name": "ksm-flux"},
                "services": [{
                    "name": SERVICE, "namespace": SERVICE, "template": TEMPLATE,
                    "helmAction": self.helm_action,
                }],
            },
        });
        let (kind, api_version) = match (&self.object, self.template) {
            (Some(object), _) => (str_field(object, "kind"), str_field(object, "apiVersion")),
            (None, Some(TemplateKind::Helm) | None) => ("HelmRelease", "helm.toolkit.fluxcd.io/v2"),
            (None, Some(_)) => ("Kustomization", "kustomize.toolkit.fluxcd.io/v1"),
        };
        StatusInput {
            service_set: service_set.to_string(),
            service: SERVICE.into(),
            template: self.template.map(|kind| template(kind).to_string()),
            observed: vec![ObservedObject {
                api_version: api_version.into(),
                kind: kind.into(),
                name: names::derived_name(&[SERVICE_SET, SERVICE], names::MAX_LABEL_LEN),
                namespace: SYSTEM_NAMESPACE.into(),
                object: self.object.as_ref().map(Value::to_string),
            }],
        }
    }

    /// Runs `map_status` on this case; the error names the case and describes every mismatch.
    pub fn run(
        &self,
        mut map_status: impl FnMut(StatusInput) -> Result<ServiceStatus, StatusError>,
    ) -> Result<(), String> {
        let status = map_status(self.input()).map_err(|e| format!("{}: {e}", self.name))?;
        self.compare(&status).map_err(|problems| format!("{}: {problems}", self.name))
    }

    /// Every mismatch between `status` and the expectation.
    pub fn compare(&self, status: &ServiceStatus) -> Result<(), String> {
        let expect = &self.expect;
        let mut problems = Vec::new();
        if status.state.as_str() != expect.state {
            problems.push(format!("state {} instead of {}", status.state.as_str(), expect.state));
        }
        let service_type = format!("{:?}", status.service_type);
        if expect.service_type.as_ref().is_some_and(|t| *t != service_type) {
            problems
                .push(format!("type {service_type} instead of {}", expect.service_type.as_deref().unwrap_or_default()));
        }
        let message_ok = match (&status.failure_message, &expect.failure_message) {
            (Some(actual), Some(expected)) => actual.contains(expected.as_str()),
            (actual, expected) => actual.is_none() && expected.is_none(),
        };
        if !message_ok {
            problems.push(format!(
                "failure message {:?} does not match {:?}",
                status.failure_message, expect.failure_message
            ));
        }
        if status.version != expect.version {
            problems.push(format!("version {:?} instead of {:?}", status.version, expect.version));
        }
        if expect.deployed_hash.is_some() && status.deployed_hash != expect.deployed_hash {
            problems.push(format!("deployed hash {:?} instead of {:?}", status.deployed_hash, expect.deployed_hash));
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }
}

/// The ServiceTemplate of a status case.
fn template(kind: TemplateKind) -> Value {
    let source = json!({"remoteSourceSpec": {"git": {"url": "https://github.com/example/apps", "ref": {"tag": "v1.0.0"}}}, "path": "./deploy"});
    let spec = match kind {
        TemplateKind::Helm => {
            json!({"helm": {"chartSpec": {"chart": "ingress-nginx", "version": "4.11.3"}}})
        }
        TemplateKind::Kustomize => json!({"kustomize": source}),
        TemplateKind::Resources => json!({"resources": source}),
    };
    json!({
        "apiVersion": k0rdent::API_VERSION,
        "kind": "ServiceTemplate",
        "metadata": {"name": TEMPLATE, "namespace": SYSTEM_NAMESPACE},
        "spec": spec,
        "status": {"valid": true},
    })
}

fn str_field<'a>(object: &'a Value, key: &str) -> &'a str {
    object[key].as_str().unwrap_or_default()
}
