//! A readable rendering of plugin outputs: what `ksm-adapter plugin translate/status` print and
//! what golden files hold. Objects are shown as parsed JSON, errors with their kind and the
//! service state they lead to.

use crate::contract::{ServiceError, ServiceStatus, ServiceTranslation, TranslateError};
use serde_json::{Value, json};

/// Renders the result of `translate`. An object that is not valid JSON is shown as a string
/// under `invalidJson` (the host rejects it before applying anything).
pub fn translation(result: &Result<Vec<ServiceTranslation>, TranslateError>) -> Value {
    match result {
        Ok(services) => json!({ "services": services.iter().map(service).collect::<Vec<_>>() }),
        Err(TranslateError::InvalidConfig(errors)) => json!({ "error": {
            "kind": "InvalidConfig",
            "errors": errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }}),
        Err(TranslateError::InvalidInput(message)) => {
            json!({ "error": { "kind": "InvalidInput", "message": message } })
        }
    }
}

fn service(t: &ServiceTranslation) -> Value {
    let mut rendered = match &t.outcome {
        Ok(objects) => json!({
            "service": t.service,
            "objects": objects.iter().map(|o| parse_object(o)).collect::<Vec<_>>(),
        }),
        Err(error) => json!({ "service": t.service, "error": service_error(error) }),
    };
    if !t.claims.is_empty() {
        rendered["claims"] = json!(t.claims.iter().map(ToString::to_string).collect::<Vec<_>>());
    }
    rendered
}

fn parse_object(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!({ "invalidJson": text }))
}

/// Renders a service error with its kind and the state it leads to.
pub fn service_error(error: &ServiceError) -> Value {
    let kind = match error {
        ServiceError::TemplateNotFound(_) => "TemplateNotFound",
        ServiceError::TemplateNotReady(_) => "TemplateNotReady",
        ServiceError::UnsupportedSource(_) => "UnsupportedSource",
        ServiceError::InvalidValues(_) => "InvalidValues",
        ServiceError::InvalidService(_) => "InvalidService",
    };
    json!({ "kind": kind, "state": error.state().as_str(), "message": error.message() })
}

/// Renders one service's status.
pub fn status(service: &str, status: &ServiceStatus) -> Value {
    let mut v = json!({
        "service": service,
        "state": status.state.as_str(),
        "type": format!("{:?}", status.service_type),
    });
    if let Some(version) = &status.version {
        v["version"] = json!(version);
    }
    if let Some(message) = &status.failure_message {
        v["failureMessage"] = json!(message);
    }
    v
}
