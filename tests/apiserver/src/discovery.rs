//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}` and `/apis/{group}/{version}`.

use serde_json::{Value, json};

use crate::kinds::Kinds;

/// The Kubernetes version the server claims to be.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-ksm-test-apiserver",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "simulated",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

/// `/api`: the core group's versions.
pub(crate) fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

/// A named group's discovery entry; the first served version (in registration order) is preferred.
fn group(kinds: &Kinds, name: &str) -> Option<Value> {
    let mut versions: Vec<&str> = Vec::new();
    for k in kinds.all().iter().filter(|k| k.group == name) {
        if !versions.contains(&k.version.as_str()) {
            versions.push(&k.version);
        }
    }
    let entry = |v: &str| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    let preferred = versions.first()?;
    Some(json!({
        "name": name,
        "versions": versions.iter().map(|v| entry(v)).collect::<Vec<_>>(),
        "preferredVersion": entry(preferred),
    }))
}

/// `/apis/{group}`.
pub(crate) fn api_group(kinds: &Kinds, name: &str) -> Option<Value> {
    let mut g = group(kinds, name)?;
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// `/apis`: every named group.
pub(crate) fn api_groups(kinds: &Kinds) -> Value {
    let mut names: Vec<&str> = Vec::new();
    for k in kinds.all().iter().filter(|k| !k.group.is_empty()) {
        if !names.contains(&k.group.as_str()) {
            names.push(&k.group);
        }
    }
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": names.iter().filter_map(|n| group(kinds, n)).collect::<Vec<_>>(),
    })
}

/// `/api/v1` or `/apis/{group}/{version}`: the resources of one group version, `None` when it is not served.
pub(crate) fn resources(kinds: &Kinds, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for k in kinds.all().iter().filter(|k| k.group == group && k.version == version) {
        resources.push(json!({
            "name": k.plural,
            "singularName": k.singular,
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": k.verbs(),
            "shortNames": k.short_names,
        }));
        if k.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}))
}
