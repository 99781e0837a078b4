//! The single checks of the suite, each returning what passed or why it failed.

use super::fixtures::{TranslateCase, TranslateInvariants};
use crate::cli::json_diff::differences_summary;
use ksm_plugin_sdk::contract::{
    ConfigError, ObservedObject, ServiceError, ServiceStatus, ServiceTranslation, StatusInput, TranslateError,
};
use ksm_plugin_sdk::names::{MAX_LABEL_LEN, is_dns1123_label, is_dns1123_subdomain, is_label_key, is_label_value};
use ksm_plugin_sdk::report;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Plugin metadata a host can serve.
pub(super) fn check_metadata(metadata: &ksm_plugin_sdk::contract::PluginMetadata) -> Result<String, String> {
    let mut problems = Vec::new();
    if !is_dns1123_label(&metadata.name) {
        problems.push(format!("name {:?} is not a DNS-1123 label", metadata.name));
    }
    if !is_semver(&metadata.version) {
        problems.push(format!("version {:?} is not semver (e.g. 1.2.3)", metadata.version));
    }
    if metadata.creates.is_empty() {
        problems.push("`creates` is empty: the plugin may return no object at all".into());
    }
    for (list, kinds) in [("creates", &metadata.creates), ("reads", &metadata.reads)] {
        for k in kinds {
            let what = format!("{list} {} {}", k.api_version(), k.kind);
            if k.version.is_empty() || k.kind.is_empty() {
                problems.push(format!("{what}: version and kind must be set"));
            }
            if !is_dns1123_label(&k.plural) {
                problems.push(format!("{what}: plural {:?} is not a lower-case resource name", k.plural));
            }
            if list == "creates" && !k.namespaced {
                problems.push(format!("{what}: cluster-scoped; the host refuses every object of such a kind"));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let kinds: Vec<String> = metadata.creates.iter().map(|k| format!("{} {}", k.api_version(), k.kind)).collect();
    Ok(format!("{} {} creates {}", metadata.name, metadata.version, kinds.join(", ")))
}

/// `MAJOR.MINOR.PATCH`, optionally with `-pre` and `+build`.
pub(super) fn is_semver(version: &str) -> bool {
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a config error names `field` (at its path or in its message).
pub(super) fn names_field(error: &ConfigError, field: &str) -> bool {
    error.path.split('.').any(|p| p == field) || error.message.contains(field)
}

pub(super) fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

pub(super) fn list(items: &BTreeSet<String>) -> String {
    items.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// `1 object`, `2 objects`.
pub(super) fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

pub(super) fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// Every `(service, object text)` of a translation.
pub(super) fn objects_of(services: &[ServiceTranslation]) -> impl Iterator<Item = (&str, &String)> {
    services
        .iter()
        .filter_map(|s| s.outcome.as_ref().ok().map(|o| (s.service.as_str(), o)))
        .flat_map(|(service, objects)| objects.iter().map(move |o| (service, o)))
}

pub(super) fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter().fold(value, |v, k| &v[*k]).as_str().unwrap_or_default()
}

/// What a translation answered, in a few words.
pub(super) fn summary(result: &Result<Vec<ServiceTranslation>, TranslateError>) -> String {
    match result {
        Err(TranslateError::InvalidConfig(errors)) => format!("InvalidConfig ({})", join(errors)),
        Err(TranslateError::InvalidInput(message)) => format!("InvalidInput ({message})"),
        Ok(services) => {
            let each: Vec<String> = services
                .iter()
                .map(|s| match &s.outcome {
                    Ok(objects) => format!("{} {}", s.service, count(objects.len(), "object")),
                    Err(e) => {
                        format!("{} {}", s.service, report::service_error(e)["kind"].as_str().unwrap_or_default())
                    }
                })
                .collect();
            format!("{}: {}", count(services.len(), "service"), each.join(", "))
        }
    }
}

/// About the number of bytes of text in a translation (what the output limit counts).
pub(super) fn answer_size(result: &Result<Vec<ServiceTranslation>, TranslateError>) -> usize {
    match result {
        Ok(services) => services
            .iter()
            .map(|s| {
                s.service.len()
                    + match &s.outcome {
                        Ok(objects) => objects.iter().map(String::len).sum(),
                        Err(e) => e.message().len(),
                    }
            })
            .sum(),
        Err(TranslateError::InvalidConfig(errors)) => errors.iter().map(|e| e.path.len() + e.message.len()).sum(),
        Err(TranslateError::InvalidInput(message)) => message.len(),
    }
}

/// Two translations of the same input must be byte-identical.
pub(super) fn deterministic(
    first: &Result<Vec<ServiceTranslation>, TranslateError>,
    second: &Result<Vec<ServiceTranslation>, TranslateError>,
) -> Result<String, String> {
    if first == second {
        return Ok("translated twice: byte-identical".into());
    }
    let differences = differences_summary(&report::translation(first), &report::translation(second));
    if differences.is_empty() {
        return Err("translated twice: the same objects, but their JSON text differs (e.g. key order)".into());
    }
    Err(format!("translated twice, the second answer differs: {differences}"))
}

/// The names of the objects: DNS-1123 subdomains of at most 63 characters (CD tools put object
/// names into label values, e.g. Flux's `helm.toolkit.fluxcd.io/name`, Argo CD's instance
/// label), label keys and values as Kubernetes requires, and no object twice in a ServiceSet.
pub(super) fn check_names(service_set: &Value, services: &[ServiceTranslation]) -> Result<String, String> {
    let namespace = str_at(service_set, &["metadata", "namespace"]);
    let mut problems = Vec::new();
    let mut seen: BTreeMap<(String, String, String, String), &str> = BTreeMap::new();
    let mut longest = 0;
    for (service, text) in objects_of(services) {
        let Ok(object) = serde_json::from_str::<Value>(text) else { continue };
        let name = str_at(&object, &["metadata", "name"]);
        let kind = str_at(&object, &["kind"]);
        let what = format!("{kind} {name:?} (service {service:?})");
        longest = longest.max(name.len());
        if !is_dns1123_subdomain(name) {
            problems.push(format!("{what}: metadata.name is not a DNS-1123 subdomain (lower-case, at most 253)"));
        } else if name.len() > MAX_LABEL_LEN {
            problems.push(format!(
                "{what}: metadata.name has {} characters, over {MAX_LABEL_LEN}: CD tools use object names as label values (shorten with a stable hash, e.g. ksm_plugin_sdk::names::service_object_name)",
                name.len()
            ));
        }
        if let Some(labels) = object["metadata"]["labels"].as_object() {
            for (key, value) in labels {
                if !is_label_key(key) {
                    problems.push(format!("{what}: label key {key:?} is not a valid qualified name"));
                }
                if !value.as_str().is_some_and(is_label_value) {
                    problems.push(format!("{what}: label {key:?} has value {value}, not a valid label value"));
                }
            }
        }
        let group = str_at(&object, &["apiVersion"]).rsplit_once('/').map_or("", |(g, _)| g).to_string();
        let object_namespace = match str_at(&object, &["metadata", "namespace"]) {
            "" => namespace,
            ns => ns,
        };
        let key = (group, kind.to_string(), object_namespace.to_string(), name.to_string());
        if let Some(other) = seen.insert(key, service) {
            problems
                .push(format!("{what}: the same object as one of service {other:?}; two services would fight over it"));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    if seen.is_empty() {
        return Ok("no objects".into());
    }
    Ok(format!("{} (all distinct), valid names of at most {longest} characters", count(seen.len(), "object")))
}

/// Services whose template is missing get `TemplateNotFound`.
pub(super) fn missing_templates(
    service_set: &Value,
    missing: &BTreeSet<&str>,
    services: &[ServiceTranslation],
) -> Result<String, String> {
    let specs = service_set["spec"]["services"].as_array().cloned().unwrap_or_default();
    let mut problems = Vec::new();
    let mut good = Vec::new();
    for spec in &specs {
        let (service, template) = (str_at(spec, &["name"]), str_at(spec, &["template"]));
        if !missing.contains(template) {
            continue;
        }
        match services.iter().find(|s| s.service == service).map(|s| &s.outcome) {
            Some(Err(ServiceError::TemplateNotFound(_))) => good.push(service.to_string()),
            // Nothing to deploy (e.g. an uninstalled service) needs no template.
            Some(Ok(objects)) if objects.is_empty() => good.push(format!("{service} (no objects)")),
            Some(Err(other)) => problems.push(format!(
                "service {service:?} (template {template:?} does not exist) gets {} instead of TemplateNotFound",
                report::service_error(other)["kind"].as_str().unwrap_or_default()
            )),
            Some(Ok(_)) => problems.push(format!(
                "service {service:?} gets objects although its template {template:?} does not exist (expected TemplateNotFound)"
            )),
            None => problems.push(format!("service {service:?}: no answer")),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(format!("services whose template does not exist get TemplateNotFound or nothing: {}", good.join(", ")))
}

/// The `map-status` input of `service` with `objects` (as the host checked them) observed
/// through `observe`.
pub(super) fn status_input(
    case: &TranslateCase,
    service: &str,
    template: Option<&Value>,
    objects: &[Value],
    observe: impl Fn(&Value) -> Option<Value>,
) -> StatusInput {
    StatusInput {
        service_set: case.service_set.to_string(),
        service: service.to_string(),
        template: template.map(Value::to_string),
        observed: objects
            .iter()
            .map(|o| ObservedObject {
                api_version: str_at(o, &["apiVersion"]).into(),
                kind: str_at(o, &["kind"]).into(),
                name: str_at(o, &["metadata", "name"]).into(),
                namespace: str_at(o, &["metadata", "namespace"]).into(),
                object: observe(o).map(|o| o.to_string()),
            })
            .collect(),
    }
}

pub(super) fn find_observed(
    observed: &[Value],
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<Value> {
    observed
        .iter()
        .find(|o| {
            o["apiVersion"] == api_version
                && o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"] == namespace
        })
        .cloned()
}

pub(super) fn state_of(status: &Result<ServiceStatus, String>) -> &'static str {
    status.as_ref().map_or("error", |s| s.state.as_str())
}

/// The case's plugin-independent expectations.
pub(super) fn check_invariants(
    invariants: &TranslateInvariants,
    result: &Result<Vec<ServiceTranslation>, TranslateError>,
) -> Result<String, String> {
    if let Some(field) = &invariants.invalid_config {
        return match result {
            Err(TranslateError::InvalidConfig(errors)) if errors.iter().any(|e| names_field(e, field)) => {
                Ok(format!("the ServiceSet fails with InvalidConfig naming {field}: {}", join(errors)))
            }
            Err(TranslateError::InvalidConfig(errors)) => {
                Err(format!("InvalidConfig, but no error names {field}: {}", join(errors)))
            }
            other => Err(format!("expected InvalidConfig naming {field}, got {}", summary(other))),
        };
    }
    let Some(expected) = &invariants.services else { return Ok("nothing to check".into()) };
    let services = match result {
        Ok(services) => services,
        Err(e) => return Err(format!("the whole ServiceSet failed ({e}); expected an answer per service")),
    };
    let mut problems = Vec::new();
    for want in expected {
        let outcome = match services.iter().find(|s| s.service == want.service).map(|s| &s.outcome) {
            None => "no answer".to_string(),
            Some(Ok(objects)) if objects.is_empty() => "no objects".to_string(),
            Some(Ok(_)) => "objects".to_string(),
            Some(Err(e)) => report::service_error(e)["kind"].as_str().unwrap_or_default().to_string(),
        };
        if outcome != want.outcome {
            let why = if want.outcome == "objects" { " (one failing service must not fail the others)" } else { "" };
            problems.push(format!("service {:?}: expected {}, got {outcome}{why}", want.service, want.outcome));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let each: Vec<String> = expected.iter().map(|s| format!("{} {}", s.service, s.outcome)).collect();
    Ok(each.join(", "))
}

/// Compares `actual` with the content of `file`.
pub(super) fn compare(expected: &Value, actual: &Value, file: &str) -> Result<String, String> {
    if expected == actual {
        return Ok(format!("matches {file}"));
    }
    Err(format!("differs from {file}: {}", differences_summary(expected, actual)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_semver() {
        assert!(is_semver("0.1.0") && is_semver("1.2.3-rc.1+build") && !is_semver("1.2"));
    }
}
