//! Reading objects: conditions, ServiceSet service entries, finalizers, metadata.

use serde_json::Value;

/// The condition of `type_` in `status.conditions`.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// Whether the condition of `type_` has this `status` (`"True"`, `"False"`, `"Unknown"`) and
/// `reason`.
pub fn condition_is(object: &Value, type_: &str, status: &str, reason: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

/// A condition's message (`""` when absent).
pub fn condition_message<'a>(object: &'a Value, type_: &str) -> &'a str {
    condition(object, type_).and_then(|c| c["message"].as_str()).unwrap_or_default()
}

/// Whether the condition of `type_` was written for the object's current generation.
pub fn condition_is_current(object: &Value, type_: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["observedGeneration"].as_i64() == Some(generation(object)))
}

/// The `status.services[]` entry of service `name`.
pub fn service<'a>(service_set: &'a Value, name: &str) -> Option<&'a Value> {
    service_set["status"]["services"].as_array()?.iter().find(|s| s["name"] == name)
}

/// The `state` of service `name` in ServiceSet status.
pub fn service_state<'a>(service_set: &'a Value, name: &str) -> Option<&'a str> {
    service(service_set, name)?["state"].as_str()
}

/// The `lastDeployedHash` of service `name` in ServiceSet status, empty when it has none.
pub fn last_deployed_hash(service_set: &Value, name: &str) -> String {
    service(service_set, name).and_then(|s| s["lastDeployedHash"].as_str()).unwrap_or_default().to_string()
}

/// The names of the services in `status.services`, in order.
pub fn status_service_names(service_set: &Value) -> Vec<&str> {
    service_set["status"]["services"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str()).collect()
}

/// The names of the services in `spec.services`, in order.
pub fn spec_service_names(service_set: &Value) -> Vec<&str> {
    service_set["spec"]["services"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str()).collect()
}

/// Whether `metadata.finalizers` holds `finalizer`.
pub fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

/// `metadata.generation` (0 when absent).
pub fn generation(object: &Value) -> i64 {
    object["metadata"]["generation"].as_i64().unwrap_or_default()
}

/// `metadata.resourceVersion`.
pub fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"].as_str().unwrap_or_default()
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}

/// The whole value the host recorded under `key` on a child: the annotation of that key when
/// the label value had to be shortened (over 63 characters), else the label.
pub fn recorded<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    let metadata = &object["metadata"];
    metadata["annotations"][key].as_str().or_else(|| metadata["labels"][key].as_str())
}

/// Why a service entry is in its state: `failureMessage` when Failed, else the message of the
/// service's condition `Ready`.
pub fn service_note(service: &Value) -> &str {
    let ready = service["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Ready");
    service["failureMessage"].as_str().or_else(|| ready.and_then(|c| c["message"].as_str())).unwrap_or_default()
}
