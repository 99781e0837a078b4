//! The pure planning core: from a ServiceSet, its templates, the observed objects and a plugin,
//! decide each service's desired objects and its state. No I/O: the CLI and the controller
//! feed it objects and act on what it returns.

pub mod children;
pub mod claims;
pub mod decide;
pub mod events;
pub mod gate;
pub mod memo;
pub mod placements;
pub mod reads;
pub mod route;
pub mod status;

use crate::plugin::{CallError, Plugin};
use crate::policy::Facts;
use crate::serving::ServingPlugin;
use ksm_plugin_sdk::contract::{
    Claim, ObservedObject, ServiceError, ServiceState, ServiceStatus, ServiceType, StatusInput, Template,
    TranslateError, TranslateInput,
};
use ksm_plugin_sdk::inputs;
use ksm_plugin_sdk::sources::SourceRef;
use memo::TranslationMemo;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The outcome of translating one service, after the host's checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServiceOutcome {
    /// The service's desired objects, checked and parsed.
    Objects(Vec<Value>),
    /// The plugin's typed error for this service.
    Error(ServiceError),
    /// The plugin returned something the host refuses (see [`policy`]).
    Refused(String),
    /// A service of another ServiceSet holds what this one claims (see [`claims`]).
    Conflict(String),
    /// An object the service needs exists and is someone else's (another ServiceSet's, or not
    /// created by the host): nothing is applied over it, and the service keeps what it has.
    Taken(String),
    /// Held back: applies nothing now and keeps what it has (it won a claim whose loser still
    /// has objects, or an earlier service lost a claim and the ServiceSet stops on conflict).
    Waiting(String),
}

/// One service's translation (serialized only to be kept, see [`memo`]).
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
    pub fn service_claims(&self) -> claims::ServiceClaims {
        claims::ServiceClaims { service: self.service.clone(), claims: self.claims.clone() }
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
/// returned object against the host's policy. With `memo`, an input `serving` translated before
/// is answered from it (see [`memo`]).
pub fn translate(
    serving: &ServingPlugin,
    memo: Option<&TranslationMemo>,
    service_set: &Value,
    find_template: impl Fn(&str) -> Option<Value>,
    find_source: impl Fn(&SourceRef) -> Option<Value>,
    system_namespace: &str,
) -> Result<Vec<TranslatedService>, TranslateFailure> {
    // The policy's rules see the ServiceSet as the plugin does: a kept translation was checked
    // against nothing the key leaves out.
    let service_set = &serving.input_of(service_set);
    let input = inputs::translate_input(service_set, find_template, find_source, system_namespace)?;
    let Some(memo) = memo else { return translate_checked(serving, service_set, &input) };
    let key = memo.key((serving.id, &input));
    if let Some(kept) = memo.get(key).and_then(|text| serde_json::from_slice(&text).ok()) {
        return Ok(kept);
    }
    let translated = translate_checked(serving, service_set, &input)?;
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
    let facts = Facts { namespace, service_set, target: &input.target, local: &local };
    Ok(translations
        .into_iter()
        .map(|t| {
            let outcome = match t.outcome {
                Err(error) => ServiceOutcome::Error(error),
                Ok(objects) => serving
                    .policy
                    .check_service(plugin.metadata(), &facts, &t.service, &objects)
                    .map_or_else(ServiceOutcome::Refused, ServiceOutcome::Objects),
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

/// The state of one translated service: from the plugin's error or refusal, or from
/// `map-status` over the observed versions of its desired objects (`observe` finds the live
/// object by apiVersion, kind, namespace and name), followed by the objects of the plugin's
/// `reads` kinds each live one owns (`related`, see [`reads`]). `service_set` is the
/// ServiceSet's JSON text (serialized once for all its services). A Deployed service whose
/// plugin gives no `deployed-hash` gets the host's own: what it applied (the applied-hash
/// annotations of its live objects).
pub fn service_status(
    plugin: &dyn Plugin,
    service_set: &str,
    template: Option<&Value>,
    translated: &TranslatedService,
    observe: impl Fn(&str, &str, &str, &str) -> Option<Value>,
    related: impl Fn(&Value) -> Vec<Value>,
) -> Result<ServiceStatus, CallError> {
    let objects = match &translated.outcome {
        ServiceOutcome::Error(error) => {
            return Ok(error_status(template, error.state(), error.message()));
        }
        ServiceOutcome::Refused(message) | ServiceOutcome::Conflict(message) | ServiceOutcome::Taken(message) => {
            return Ok(error_status(template, ServiceState::Failed, message));
        }
        ServiceOutcome::Waiting(message) => return Ok(error_status(template, ServiceState::Pending, message)),
        ServiceOutcome::Objects(objects) => objects,
    };
    let reference = |o: &Value| {
        let field = |path: &[&str]| path.iter().fold(o, |v, k| &v[*k]).as_str().unwrap_or_default().to_string();
        let (api_version, kind) = (field(&["apiVersion"]), field(&["kind"]));
        (api_version, kind, field(&["metadata", "namespace"]), field(&["metadata", "name"]))
    };
    let live: Vec<_> = objects
        .iter()
        .map(|o| {
            let (api_version, kind, namespace, name) = reference(o);
            let object = observe(&api_version, &kind, &namespace, &name);
            (ObservedObject { api_version, kind, name, namespace, object: None }, object)
        })
        .collect();
    let read: Vec<Value> = live.iter().filter_map(|(_, object)| object.as_ref()).flat_map(&related).collect();
    let applied: Vec<&str> = live
        .iter()
        .filter_map(|(_, object)| {
            object.as_ref()?["metadata"]["annotations"][children::APPLIED_HASH_ANNOTATION].as_str()
        })
        .collect();
    let applied = format!("applied {}", applied.join(" "));
    let own =
        live.into_iter().map(|(observed, object)| ObservedObject { object: object.map(|v| v.to_string()), ..observed });
    let read = read.iter().map(|o| {
        let (api_version, kind, namespace, name) = reference(o);
        ObservedObject { api_version, kind, name, namespace, object: Some(o.to_string()) }
    });
    let observed = own.chain(read).collect();
    let input = StatusInput {
        service_set: service_set.into(),
        service: translated.service.clone(),
        template: template.map(Value::to_string),
        observed,
    };
    let mut status =
        plugin.map_status(&input)?.unwrap_or_else(|e| error_status(template, ServiceState::Failed, &e.to_string()));
    if status.state == ServiceState::Deployed && status.deployed_hash.is_none() {
        status.deployed_hash = Some(applied);
    }
    Ok(status)
}

fn error_status(template: Option<&Value>, state: ServiceState, message: &str) -> ServiceStatus {
    ServiceStatus {
        state,
        service_type: template.map_or(ServiceType::Helm, template_type),
        version: None,
        failure_message: Some(message.to_string()),
        deployed_hash: None,
    }
}

/// The k0rdent service type of a ServiceTemplate.
pub fn template_type(template: &Value) -> ServiceType {
    let spec = &template["spec"];
    if spec.get("kustomize").is_some() {
        ServiceType::Kustomize
    } else if spec.get("resources").is_some() {
        ServiceType::Resource
    } else {
        ServiceType::Helm
    }
}
