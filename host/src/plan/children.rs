//! What the host adds to every child object, whether a child is this ServiceSet's, and whether
//! a child needs to be applied.
//!
//! The host (never the plugin) labels children with their ServiceSet and service and, when they
//! live beside it, makes the ServiceSet their controller owner. It also records a hash of what it applied: a child is
//! applied again only when the hash differs (the desired object changed, including fields that
//! were removed) or when a field the host sets has drifted in the live object.
//!
//! Label values are at most 63 characters and ServiceSet names up to 253: a name that does not
//! fit is shortened in the label (stably, with a hash) and kept whole in the annotation of the
//! same key. What proves a child is a ServiceSet's is its uid (a name can be reused, a uid
//! cannot): the controller ownerReference, or without one (another namespace, another cluster)
//! the uid label.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Label on every child: the host manages it.
pub const MANAGED_LABEL: &str = "ksm.k0rdent.mirantis.com/managed";
/// Label on every child: the name of its ServiceSet (shortened to fit; see [`label_value`]).
pub const SERVICE_SET_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset";
/// Label on every child: the namespace of its ServiceSet (a child may be placed in another
/// namespace when its AdapterPlugin's `allowedNamespaces` permits).
pub const SERVICE_SET_NAMESPACE_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset-namespace";
/// Label on every child: the uid of its ServiceSet.
pub const SERVICE_SET_UID_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset-uid";
/// Label on every child: the name of its service (shortened to fit; see [`label_value`]).
pub const SERVICE_LABEL: &str = "ksm.k0rdent.mirantis.com/service";
/// Annotation holding the hash of the object as the host last applied it.
pub const APPLIED_HASH_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/applied-hash";
/// The longest label value.
const MAX_LABEL_VALUE: usize = 63;

/// The ServiceSet that owns children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// ServiceSet namespace.
    pub namespace: String,
    /// ServiceSet name.
    pub name: String,
    /// ServiceSet uid.
    pub uid: String,
    /// Whether its children live on its own cluster. An ownerReference is meaningful only
    /// within one cluster: on a regional cluster it would name an object that cluster does not
    /// have, and that cluster's garbage collector deletes the child (kcm's adapter drops it too).
    pub beside: bool,
}

/// Adds the host's labels, controller ownerReference (only in the ServiceSet's own namespace on
/// its own cluster: Kubernetes has no cross-namespace or cross-cluster owners; the host deletes
/// such children itself) and applied-hash annotation to a child that passed the policy checks.
/// A child that had a reference and no longer should loses it at its next apply: the host's
/// field manager stops setting it, so server-side apply removes it.
pub fn own(mut object: Value, owner: &Owner, service: &str) -> Value {
    let metadata = object["metadata"].as_object_mut().expect("policy checked metadata is an object");
    let same_namespace = metadata.get("namespace").and_then(Value::as_str) == Some(owner.namespace.as_str());
    let referenced = same_namespace && owner.beside;
    let labels = entry_object(metadata, "labels");
    labels.insert(MANAGED_LABEL.into(), json!("true"));
    labels.insert(SERVICE_SET_LABEL.into(), json!(label_value(&owner.name)));
    labels.insert(SERVICE_SET_NAMESPACE_LABEL.into(), json!(owner.namespace));
    labels.insert(SERVICE_SET_UID_LABEL.into(), json!(label_value(&owner.uid)));
    labels.insert(SERVICE_LABEL.into(), json!(label_value(service)));
    let whole = [(SERVICE_SET_LABEL, &owner.name), (SERVICE_LABEL, &service.to_string())];
    for (key, value) in whole.into_iter().filter(|(_, value)| label_value(value) != **value) {
        entry_object(metadata, "annotations").insert(key.into(), json!(value));
    }
    if referenced {
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

/// `value` as a label value: itself when it fits, else cut to 52 characters and ended with `-`
/// and 10 hex characters of its sha256, so that distinct long values stay distinct.
pub fn label_value(value: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    let edges = value.starts_with(alphanumeric) && value.ends_with(alphanumeric);
    if value.is_empty() || (value.len() <= MAX_LABEL_VALUE && edges && value.chars().all(allowed)) {
        return value.to_string();
    }
    let hash = hex::encode(&Sha256::digest(value.as_bytes())[..5]);
    let prefix: String = value.chars().filter(|c| allowed(*c)).take(52).collect();
    match prefix.trim_matches(|c: char| !alphanumeric(c)) {
        "" => hash,
        prefix => format!("{prefix}-{hash}"),
    }
}

/// The whole value the host recorded under `key` on a child: the annotation of that key when
/// the label had to be shortened, else the label.
pub fn recorded<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    let metadata = &object["metadata"];
    metadata["annotations"][key].as_str().or_else(|| metadata["labels"][key].as_str())
}

/// The service a child of this ServiceSet belongs to.
pub fn service_of(object: &Value) -> Option<&str> {
    recorded(object, SERVICE_LABEL)
}

/// Whether `object` is the child of the ServiceSet with `uid`: its controller ownerReference
/// says so, or, without one (another namespace or cluster), its uid label.
pub fn owned_by(object: &Value, uid: &str) -> bool {
    let mut references = object["metadata"]["ownerReferences"].as_array().into_iter().flatten();
    match references.find(|r| r["controller"] == true) {
        Some(controller) => controller["kind"] == "ServiceSet" && controller["uid"] == uid,
        None => object["metadata"]["labels"][SERVICE_SET_UID_LABEL] == label_value(uid).as_str(),
    }
}

/// Why the live object `live`, which has the name of a child of `owner`, is not that child: it
/// belongs to another ServiceSet, or the host did not create it. None when it is `owner`'s.
pub fn foreign(live: &Value, owner: &Owner) -> Option<String> {
    if owned_by(live, &owner.uid) {
        return None;
    }
    let labels = &live["metadata"]["labels"];
    let why = match (labels[MANAGED_LABEL].as_str(), recorded(live, SERVICE_SET_LABEL)) {
        (Some("true"), Some(name)) => {
            let namespace = labels[SERVICE_SET_NAMESPACE_LABEL].as_str().unwrap_or_default();
            let uid = labels[SERVICE_SET_UID_LABEL].as_str().unwrap_or("unknown");
            format!("it belongs to ServiceSet {namespace}/{name} (uid {uid})")
        }
        _ => "ksm-adapter did not create it".to_string(),
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (kind, namespace, name) =
        (text(&live["kind"]), text(&live["metadata"]["namespace"]), text(&live["metadata"]["name"]));
    Some(format!(
        "{kind} {namespace}/{name} exists and is not this ServiceSet's: {why}; ksm-adapter never takes over an \
         object it did not create (delete or rename it, or rename the service)"
    ))
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
        Owner { namespace: "kcm-system".into(), name: "prod-eu-1".into(), uid: "u-1".into(), beside: true }
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
    fn a_child_on_another_cluster_has_no_owner_reference_and_loses_a_stale_one() {
        let regional = Owner { beside: false, ..owner() };
        let child = own(release(json!({})), &regional, "ingress");
        assert!(child["metadata"].get("ownerReferences").is_none(), "its garbage collector would delete it");
        assert!(owned_by(&child, "u-1") && foreign(&child, &regional).is_none(), "the uid label proves it");
        let stale = own(release(json!({})), &owner(), "ingress");
        assert!(needs_apply(&child, Some(&stale)), "applied again without the reference, which SSA then removes");
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

    #[test]
    fn long_names_get_bounded_labels_and_whole_annotations() {
        let long = format!("{}.{}", "a".repeat(200), "b-c".repeat(17));
        let owner = Owner { name: long.clone(), ..owner() };
        let child = own(release(json!({})), &owner, "ingress");
        let label = child["metadata"]["labels"][SERVICE_SET_LABEL].as_str().unwrap();
        assert!(label.len() <= 63 && label.ends_with(|c: char| c.is_ascii_alphanumeric()), "{label}");
        assert_eq!(recorded(&child, SERVICE_SET_LABEL), Some(long.as_str()), "the whole name is kept");
        assert_eq!(service_of(&child), Some("ingress"));
        assert!(child["metadata"]["annotations"].get(SERVICE_LABEL).is_none(), "a fitting value needs no annotation");
        assert_ne!(label_value(&long), label_value(&format!("{long}x")), "distinct long names stay distinct");
        assert_eq!(label_value("prod-eu-1"), "prod-eu-1");
        let odd = label_value("-ünïcode-");
        assert!(odd.starts_with("ncode-") && odd.len() == 16, "non-ASCII never panics and is dropped: {odd}");
        assert_eq!(label_value("").len(), 0);
    }

    #[test]
    fn a_child_is_its_service_sets_by_uid_not_by_name() {
        let ours = own(release(json!({})), &owner(), "ingress");
        assert!(owned_by(&ours, "u-1") && foreign(&ours, &owner()).is_none());
        let mut elsewhere = release(json!({}));
        elsewhere["metadata"]["namespace"] = json!("flux-system");
        assert!(owned_by(&own(elsewhere, &owner(), "ingress"), "u-1"), "the uid label proves it across namespaces");

        let same_name_other_uid = Owner { uid: "u-2".into(), ..owner() };
        let why = foreign(&ours, &same_name_other_uid).unwrap();
        assert_eq!(
            why,
            "HelmRelease kcm-system/prod-eu-1-ingress exists and is not this ServiceSet's: it belongs to ServiceSet \
             kcm-system/prod-eu-1 (uid u-1); ksm-adapter never takes over an object it did not create (delete or \
             rename it, or rename the service)"
        );
        let users = release(json!({}));
        assert!(foreign(&users, &owner()).unwrap().contains(": ksm-adapter did not create it;"));
    }
}
