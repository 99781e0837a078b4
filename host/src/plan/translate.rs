//! Asking the plugin's `translate` for a ServiceSet's desired objects, and checking what it
//! returns against the host's policy: each service's outcome (its objects, its typed error, or
//! why the host refuses them) and what it claims on its target.

use super::claims::ServiceClaims;
use super::memo::TranslationMemo;
use crate::plugin::CallError;
use crate::policy::Facts;
use crate::serving::ServingPlugin;
use crate::tenancy::Tenancy;
use ksm_plugin_sdk::contract::{Claim, ServiceError, Template, TranslateError, TranslateInput};
use ksm_plugin_sdk::inputs;
use ksm_plugin_sdk::sources::SourceRef;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The outcome of translating one service, after the host's checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServiceOutcome {
    /// The service's desired objects, checked and parsed.
    Objects(Vec<Value>),
    /// The plugin's typed error for this service.
    Error(ServiceError),
    /// The plugin returned something the host refuses (see [`policy`](crate::policy)).
    Refused(String),
    /// A service of another ServiceSet holds what this one claims (see [`claims`](super::claims)).
    Conflict(String),
    /// An object the service needs exists and is someone else's (another ServiceSet's, or not
    /// created by the host): nothing is applied over it, and the service keeps what it has.
    Taken(String),
    /// Held back: applies nothing now and keeps what it has (it won a claim whose loser still
    /// has objects, or an earlier service lost a claim and the ServiceSet stops on conflict).
    Waiting(String),
}

/// One service's translation (serialized only to be kept, see [`memo`](super::memo)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranslatedService {
    /// Service name.
    pub service: String,
    /// What came of it.
    pub outcome: ServiceOutcome,
    /// What the service claims on its target (empty unless its objects passed the checks).
    pub claims: Vec<Claim>,
}

impl TranslatedService {
    /// What the service claims, for arbitration.
    pub fn service_claims(&self) -> ServiceClaims {
        ServiceClaims { service: self.service.clone(), claims: self.claims.clone() }
    }
}

/// Why a whole ServiceSet could not be translated.
#[derive(Debug, thiserror::Error)]
pub enum TranslateFailure {
    /// The ServiceSet's spec does not parse.
    #[error("ServiceSet spec is invalid: {0}")]
    InvalidServiceSet(#[from] serde_json::Error),
    /// The plugin rejected the ServiceSet (config or input).
    #[error("{0}")]
    Rejected(TranslateError),
    /// The plugin call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The plugin did not answer for exactly the ServiceSet's services.
    #[error("plugin {plugin:?} answered for services {got:?}, expected {expected:?}")]
    WrongServices {
        /// Plugin name.
        plugin: String,
        /// Services the plugin answered for.
        got: Vec<String>,
        /// Services in the spec.
        expected: Vec<String>,
    },
}

/// Translates `service_set` (the whole object) with `serving`, looking templates up with
/// `find_template` and the Flux sources they refer to with `find_source`, and checks every
/// returned object against the host's policy, under `tenancy` (the plugin is told its system
/// namespace; Flux's objects get its local service account). With `memo`, an input `serving`
/// translated before is answered from it (see [`memo`](super::memo); `tenancy` is the process's
/// own, so the key leaves it out).
pub fn translate(
    serving: &ServingPlugin,
    memo: Option<&TranslationMemo>,
    service_set: &Value,
    find_template: impl Fn(&str) -> Option<Value>,
    find_source: impl Fn(&SourceRef) -> Option<Value>,
    tenancy: Tenancy,
) -> Result<Vec<TranslatedService>, TranslateFailure> {
    // The policy's rules see the ServiceSet as the plugin does: a kept translation was checked
    // against nothing the key leaves out.
    translate_input(serving, memo, &serving.input_of(service_set), find_template, find_source, tenancy)
}

/// [`translate`], given the ServiceSet as the plugin sees it already ([`ServingPlugin::input_of`]).
pub fn translate_input(
    serving: &ServingPlugin,
    memo: Option<&TranslationMemo>,
    service_set: &Value,
    find_template: impl Fn(&str) -> Option<Value>,
    find_source: impl Fn(&SourceRef) -> Option<Value>,
    tenancy: Tenancy,
) -> Result<Vec<TranslatedService>, TranslateFailure> {
    let input = inputs::translate_input(service_set, find_template, find_source, tenancy.system_namespace)?;
    let Some(memo) = memo else { return translate_checked(serving, service_set, &input, tenancy) };
    let key = memo.key((serving.id, &input));
    if let Some(kept) = memo.get(key).and_then(|text| serde_json::from_slice(&text).ok()) {
        return Ok(kept);
    }
    let translated = translate_checked(serving, service_set, &input, tenancy)?;
    if let Ok(text) = serde_json::to_string(&translated) {
        memo.keep(key, &text);
    }
    Ok(translated)
}

/// [`translate`], given the plugin's `input`.
fn translate_checked(
    serving: &ServingPlugin,
    service_set: &Value,
    input: &TranslateInput,
    tenancy: Tenancy,
) -> Result<Vec<TranslatedService>, TranslateFailure> {
    let plugin = serving.plugin.as_ref();
    let translations = plugin.translate(input)?.map_err(TranslateFailure::Rejected)?;
    let expected = service_names(service_set);
    let got: Vec<String> = translations.iter().map(|t| t.service.clone()).collect();
    if got != expected {
        return Err(TranslateFailure::WrongServices { plugin: plugin.metadata().name.clone(), got, expected });
    }
    let namespace = service_set["metadata"]["namespace"].as_str().unwrap_or_default();
    let local = |service: &str| local_template(service_set, &input.templates, service);
    let facts = Facts { namespace, service_set, target: &input.target, local: &local, tenancy };
    Ok(translations
        .into_iter()
        .map(|t| {
            let outcome = match t.outcome {
                Err(error) => ServiceOutcome::Error(error),
                Ok(objects) => serving
                    .policy
                    .check_service(plugin.metadata(), &facts, &t.service, &objects)
                    .map_or_else(|refused| ServiceOutcome::Refused(refused.to_string()), ServiceOutcome::Objects),
            };
            let claims = if matches!(outcome, ServiceOutcome::Objects(_)) { t.claims } else { vec![] };
            TranslatedService { service: t.service, outcome, claims }
        })
        .collect())
}

/// Whether service `service` of `service_set` has a template that deploys to the management
/// cluster (kustomize or resources `deploymentType: Local`), among `templates`.
fn local_template(service_set: &Value, templates: &[Template], service: &str) -> bool {
    let services = service_set["spec"]["services"].as_array().into_iter().flatten();
    let Some(name) = services.filter(|s| s["name"] == service).find_map(|s| s["template"].as_str()) else {
        return false;
    };
    let Some(text) = templates.iter().find(|t| t.name == name).and_then(|t| t.object.as_deref()) else {
        return false;
    };
    let template: Value = serde_json::from_str(text).unwrap_or_default();
    ["kustomize", "resources"].iter().any(|source| template["spec"][source]["deploymentType"] == "Local")
}

/// The service names of a ServiceSet, in spec order.
pub fn service_names(service_set: &Value) -> Vec<String> {
    service_set["spec"]["services"]
        .as_array()
        .map(|services| services.iter().filter_map(|s| s["name"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}
