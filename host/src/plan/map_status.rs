//! Asking the plugin's `map-status` for the state of one translated service, from the live
//! versions of its desired objects (or deciding it without the plugin when the service has no
//! objects to observe: its error, refusal, conflict or wait).

use super::children;
use super::translate::{ServiceOutcome, TranslatedService};
use crate::plugin::{CallError, Plugin};
use ksm_plugin_sdk::contract::{ObservedObject, ServiceState, ServiceStatus, ServiceType, StatusInput};
use serde_json::Value;

/// The state of one translated service: from the plugin's error or refusal, or from
/// `map-status` over the observed versions of its desired objects (`observe` finds the live
/// object by apiVersion, kind, namespace and name), followed by the objects of the plugin's
/// `reads` kinds each live one owns (`related`, see [`reads`](super::reads)). `service_set` is
/// the ServiceSet's JSON text (serialized once for all its services). A Deployed service whose
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
