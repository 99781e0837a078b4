//! What the host adds to every child object, and whether a child needs to be applied.
//!
//! The host (never the plugin) labels children with their ServiceSet and service and makes the
//! ServiceSet their controller owner. It also records a hash of what it applied: a child is
//! applied again only when the hash differs (the desired object changed, including fields that
//! were removed) or when a field the host sets has drifted in the live object.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Label on every child: the host manages it.
pub const MANAGED_LABEL: &str = "ksm.k0rdent.mirantis.com/managed";
/// Label on every child: the name of its ServiceSet.
pub const SERVICE_SET_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset";
/// Label on every child: the namespace of its ServiceSet (a child may be placed in another
/// namespace when its AdapterPlugin's `allowedNamespaces` permits).
pub const SERVICE_SET_NAMESPACE_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset-namespace";
/// Label on every child: the name of its service.
pub const SERVICE_LABEL: &str = "ksm.k0rdent.mirantis.com/service";
/// Annotation holding the hash of the object as the host last applied it.
pub const APPLIED_HASH_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/applied-hash";

/// The ServiceSet that owns children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// ServiceSet namespace.
    pub namespace: String,
    /// ServiceSet name.
    pub name: String,
    /// ServiceSet uid.
    pub uid: String,
}

/// Adds the host's labels, controller ownerReference (only in the ServiceSet's own namespace:
/// Kubernetes has no cross-namespace owners; the host deletes such children itself) and
/// applied-hash annotation to a child that passed the policy checks.
pub fn own(mut object: Value, owner: &Owner, service: &str) -> Value {
    let metadata = object["metadata"].as_object_mut().expect("policy checked metadata is an object");
    let same_namespace = metadata.get("namespace").and_then(Value::as_str) == Some(owner.namespace.as_str());
    let labels = entry_object(metadata, "labels");
    labels.insert(MANAGED_LABEL.into(), json!("true"));
    labels.insert(SERVICE_SET_LABEL.into(), json!(owner.name));
    labels.insert(SERVICE_SET_NAMESPACE_LABEL.into(), json!(owner.namespace));
    labels.insert(SERVICE_LABEL.into(), json!(service));
    if same_namespace {
        metadata.insert(
            "ownerReferences".into(),
            json!([{
                "apiVersion": ksm_plugin_sdk::k0rdent::API_VERSION,
                "kind": "ServiceSet",
                "name": owner.name,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
        );
    }
    let hash = content_hash(&object);
    let metadata = object["metadata"].as_object_mut().expect("still an object");
    entry_object(metadata, "annotations").insert(APPLIED_HASH_ANNOTATION.into(), json!(hash));
    object
}

/// Whether `object`'s controller ownerReference names the ServiceSet with `uid`.
pub fn controlled_by(object: &Value, uid: &str) -> bool {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|owner| owner["controller"] == true && owner["uid"] == uid && owner["kind"] == "ServiceSet")
}

/// Whether `desired` (from [`own`]) must be applied over `live`: it is absent, was applied from
/// different content, or a field the host sets differs in the live object.
pub fn needs_apply(desired: &Value, live: Option<&Value>) -> bool {
    let Some(live) = live else { return true };
    let hash = |v: &Value| v["metadata"]["annotations"][APPLIED_HASH_ANNOTATION].as_str().map(String::from);
    hash(desired) != hash(live) || !is_subset(desired, live)
}

/// Whether every field of `part` is in `whole` with the same value (objects compared key by
/// key, anything else exactly).
pub fn is_subset(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => p.iter().all(|(k, v)| w.get(k).is_some_and(|wv| is_subset(v, wv))),
        _ => part == whole,
    }
}

/// Hex sha256 (first 16 bytes) of the object's canonical JSON (keys sorted).
fn content_hash(object: &Value) -> String {
    hex::encode(&Sha256::digest(object.to_string().as_bytes())[..16])
}

fn entry_object<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    if !map.get(key).is_some_and(Value::is_object) {
        map.insert(key.into(), json!({}));
    }
    map[key].as_object_mut().expect("just made an object")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner { namespace: "kcm-system".into(), name: "prod-eu-1".into(), uid: "u-1".into() }
    }

    fn release(values: Value) -> Value {
        json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": "prod-eu-1-ingress", "namespace": "kcm-system", "labels": {"app": "x"}},
               "spec": {"interval": "10m", "values": values}})
    }

    #[test]
    fn children_get_labels_owner_and_hash() {
        let child = own(release(json!({"a": 1})), &owner(), "ingress");
        let labels = &child["metadata"]["labels"];
        assert_eq!(labels["app"], "x", "the plugin's own labels stay");
        assert_eq!(labels[MANAGED_LABEL], "true");
        assert_eq!(labels[SERVICE_SET_LABEL], "prod-eu-1");
        assert_eq!(labels[SERVICE_SET_NAMESPACE_LABEL], "kcm-system");
        assert_eq!(labels[SERVICE_LABEL], "ingress");
        let reference = &child["metadata"]["ownerReferences"][0];
        assert_eq!((reference["kind"].as_str(), reference["uid"].as_str()), (Some("ServiceSet"), Some("u-1")));
        assert_eq!(reference["controller"], true);
        assert_eq!(child["metadata"]["annotations"][APPLIED_HASH_ANNOTATION].as_str().unwrap().len(), 32);
    }

    #[test]
    fn a_child_in_another_namespace_has_no_owner_reference_but_names_its_service_set() {
        let mut object = release(json!({}));
        object["metadata"]["namespace"] = json!("flux-system");
        let child = own(object, &owner(), "ingress");
        assert!(child["metadata"].get("ownerReferences").is_none(), "Kubernetes has no cross-namespace owners");
        assert_eq!(child["metadata"]["labels"][SERVICE_SET_NAMESPACE_LABEL], "kcm-system");
    }

    #[test]
    fn unchanged_children_are_not_applied_again() {
        let desired = own(release(json!({"a": 1})), &owner(), "ingress");
        let mut live = desired.clone();
        live["status"] = json!({"observedGeneration": 1});
        live["metadata"]["resourceVersion"] = json!("42");
        assert!(!needs_apply(&desired, Some(&live)));
        assert!(needs_apply(&desired, None));
    }

    #[test]
    fn a_removed_field_or_drift_triggers_an_apply() {
        let before = own(release(json!({"a": 1, "b": 2})), &owner(), "ingress");
        let after = own(release(json!({"a": 1})), &owner(), "ingress");
        // A subset check alone would miss the removal: the new spec is inside the old one.
        assert!(is_subset(&after["spec"], &before["spec"]));
        assert!(needs_apply(&after, Some(&before)), "b was removed: the live object still has it");
        let mut drifted = after.clone();
        drifted["spec"]["interval"] = json!("1h");
        assert!(needs_apply(&after, Some(&drifted)), "someone changed a field the host owns");
    }
}
