//! The objects a plugin reads (its metadata's `reads`) that belong to a service: those whose
//! `metadata.ownerReferences` name one of the service's own objects, e.g. the `ClusterSummary`
//! objects Sveltos creates for a `Profile` the plugin made. The CD tool, not the host, creates
//! them, so the owner reference is the one link the host can follow without asking the plugin.
//! `map-status` gets them after the service's own objects.

use ksm_plugin_sdk::contract::ObjectKind;
use serde_json::Value;

/// Whether `object` names `owner` (a live object) among its owner references: same API group,
/// kind and name, and the same uid when both carry one (a namespaced owner must also share the
/// object's namespace; a cluster-scoped owner has none).
pub fn owns(owner: &Value, object: &Value) -> bool {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (owner_meta, meta) = (&owner["metadata"], &object["metadata"]);
    let owner_namespace = text(&owner_meta["namespace"]);
    if !owner_namespace.is_empty() && owner_namespace != text(&meta["namespace"]) {
        return false;
    }
    let owner_group = group(&text(&owner["apiVersion"])).to_string();
    let owner_uid = text(&owner_meta["uid"]);
    meta["ownerReferences"].as_array().into_iter().flatten().any(|reference| {
        let uid = text(&reference["uid"]);
        group(&text(&reference["apiVersion"])) == owner_group
            && reference["kind"] == owner["kind"]
            && reference["name"] == owner_meta["name"]
            && (uid.is_empty() || owner_uid.is_empty() || uid == owner_uid)
    })
}

/// Whether `object` is of one of the kinds in `reads`.
pub fn is_read(reads: &[ObjectKind], object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    reads.iter().any(|k| k.kind == kind && api_version == join(&k.group, &k.version))
}

/// The objects among `candidates` of a kind in `reads` that `owner` owns, in a stable order
/// (apiVersion, kind, namespace, name): what an offline run (`render`, `plugin status`,
/// `plugin test`) finds in its files.
pub fn owned_by<'a>(
    reads: &[ObjectKind],
    owner: &Value,
    candidates: impl IntoIterator<Item = &'a Value>,
) -> Vec<Value> {
    let mut found: Vec<Value> =
        candidates.into_iter().filter(|c| is_read(reads, c) && owns(owner, c)).cloned().collect();
    found.sort_by_key(crate::k0rdent::ChildRef::of);
    found
}

fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

fn join(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile(uid: &str) -> Value {
        json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "Profile",
            "metadata": {"name": "web.nginx", "namespace": "team", "uid": uid}})
    }

    fn summary(name: &str, namespace: &str, owner: Value) -> Value {
        json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]}})
    }

    fn reference(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid})
    }

    fn cluster_summary_kind() -> ObjectKind {
        ObjectKind {
            group: "config.projectsveltos.io".into(),
            version: "v1beta1".into(),
            kind: "ClusterSummary".into(),
            plural: "clustersummaries".into(),
            namespaced: true,
        }
    }

    #[test]
    fn an_owner_is_named_by_group_kind_name_uid_and_namespace() {
        let owner = profile("u1");
        let named = reference("config.projectsveltos.io/v1beta1", "Profile", "web.nginx", "u1");
        assert!(owns(&owner, &summary("a", "team", named.clone())));
        let other_version = reference("config.projectsveltos.io/v1alpha1", "Profile", "web.nginx", "u1");
        assert!(owns(&owner, &summary("a", "team", other_version)), "versions of one group are one kind");
        assert!(!owns(&owner, &summary("a", "other", named)), "a namespaced owner owns only in its namespace");
        for (api_version, kind, name, uid) in [
            ("lib.projectsveltos.io/v1beta1", "Profile", "web.nginx", "u1"),
            ("config.projectsveltos.io/v1beta1", "ClusterProfile", "web.nginx", "u1"),
            ("config.projectsveltos.io/v1beta1", "Profile", "web.other", "u1"),
            ("config.projectsveltos.io/v1beta1", "Profile", "web.nginx", "u2"),
        ] {
            let object = summary("a", "team", reference(api_version, kind, name, uid));
            assert!(!owns(&owner, &object), "{api_version} {kind} {name} {uid}");
        }
        let mut cluster_scoped = profile("u1");
        cluster_scoped["metadata"].as_object_mut().unwrap().remove("namespace");
        let named = reference("config.projectsveltos.io/v1beta1", "Profile", "web.nginx", "u1");
        assert!(owns(&cluster_scoped, &summary("a", "elsewhere", named)));
    }

    #[test]
    fn only_objects_of_read_kinds_are_handed_over_in_a_stable_order() {
        let owner = profile("u1");
        let named = reference("config.projectsveltos.io/v1beta1", "Profile", "web.nginx", "u1");
        let mut configmap = summary("c", "team", named.clone());
        configmap["apiVersion"] = json!("v1");
        configmap["kind"] = json!("ConfigMap");
        let candidates = [summary("b", "team", named.clone()), configmap, summary("a", "team", named)];
        let found = owned_by(&[cluster_summary_kind()], &owner, &candidates);
        let names: Vec<_> = found.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(owned_by(&[], &owner, &candidates).is_empty(), "a plugin that reads nothing gets nothing");
    }
}
