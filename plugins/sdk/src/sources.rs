//! The Flux source objects a ServiceTemplate refers to (contract 0.2.0, `translate-input.sources`):
//! which they are, and what of each a plugin is handed. The host finds them in its caches, the CLI
//! in its files; both go through [`sources_of`].

use crate::contract::{ObjectKind, SourceObject};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// The API group of Flux's sources.
pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";

/// The source kinds handed to plugins (all `source.toolkit.fluxcd.io/v1`). A ConfigMap or Secret
/// `localSourceRef` is not among them: a Secret's content never crosses to a plugin.
pub const SOURCE_KINDS: [(&str, &str); 5] = [
    ("HelmChart", "helmcharts"),
    ("HelmRepository", "helmrepositories"),
    ("GitRepository", "gitrepositories"),
    ("Bucket", "buckets"),
    ("OCIRepository", "ocirepositories"),
];

/// The source kinds as object kinds, for the host's caches.
pub fn source_kinds() -> Vec<ObjectKind> {
    SOURCE_KINDS
        .iter()
        .map(|(kind, plural)| ObjectKind {
            group: SOURCE_GROUP.into(),
            version: "v1".into(),
            kind: (*kind).into(),
            plural: (*plural).into(),
            namespaced: true,
        })
        .collect()
}

/// A source object by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceRef {
    /// One of [`SOURCE_KINDS`].
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// The sources `templates` (ServiceTemplate objects) refer to, each once, found with `find`:
/// `status.chartRef` (the HelmChart kcm made), `spec.helm.chartRef`, the repository of
/// `spec.helm.chartSpec.sourceRef`, `status.sourceStatus` and the `localSourceRef`s of Flux
/// source kinds, plus the source of every HelmChart found
/// (`spec.sourceRef`, in the chart's namespace). A reference without a namespace is in its
/// template's. Each object is handed as [`handed`] keeps it; one not found has none.
pub fn sources_of<'a>(
    templates: impl IntoIterator<Item = &'a Value>,
    find: impl Fn(&SourceRef) -> Option<Value>,
) -> Vec<SourceObject> {
    let mut refs = BTreeSet::new();
    for template in templates {
        let namespace = template["metadata"]["namespace"].as_str().unwrap_or_default();
        let (spec, status) = (&template["spec"], &template["status"]);
        // kcm writes the status; whoever may write the template (a namespace admin) writes the
        // spec, whose references stay in the template's namespace, as Flux's
        // `--no-cross-namespace-refs` keeps a tenant's (docs/security.md).
        let by_kcm = [&status["chartRef"], &status["sourceStatus"]];
        let by_tenant = [
            &spec["helm"]["chartRef"],
            &spec["helm"]["chartSpec"]["sourceRef"],
            &spec["helm"]["chartSource"]["localSourceRef"],
            &spec["kustomize"]["localSourceRef"],
            &spec["resources"]["localSourceRef"],
        ];
        refs.extend(by_kcm.into_iter().filter_map(|r| reference(r, Some(namespace))));
        refs.extend(by_tenant.into_iter().filter_map(|r| reference(r, None).map(|r| r.within(namespace))));
    }
    let mut sources = Vec::new();
    let mut seen = BTreeSet::new();
    let mut queue: Vec<SourceRef> = refs.into_iter().rev().collect();
    while let Some(source) = queue.pop() {
        if !seen.insert(source.clone()) {
            continue;
        }
        let object = find(&source);
        if let Some(chart) = object.as_ref().filter(|_| source.kind == "HelmChart") {
            // A HelmChart's source is in its own namespace (Flux's `LocalHelmChartSourceReference`).
            queue.extend(reference(&chart["spec"]["sourceRef"], None).map(|r| r.within(&source.namespace)));
        }
        sources.push(SourceObject {
            api_version: format!("{SOURCE_GROUP}/v1"),
            kind: source.kind,
            namespace: source.namespace,
            name: source.name,
            object: object.map(|o| handed(&o).to_string()),
        });
    }
    sources
}

/// The source `source` among `objects`, as plugins are handed it: how the CLI and the golden
/// cases find sources in their files.
pub fn find<'a>(objects: impl IntoIterator<Item = &'a Value>, source: &SourceRef) -> Option<Value> {
    let api_version = format!("{SOURCE_GROUP}/v1");
    let found = objects.into_iter().find(|o| {
        o["apiVersion"] == api_version.as_str()
            && o["kind"] == source.kind.as_str()
            && o["metadata"]["namespace"] == source.namespace.as_str()
            && o["metadata"]["name"] == source.name.as_str()
    })?;
    Some(handed(found))
}

/// A `{kind, name, namespace}` reference to a source, the namespace defaulting to `namespace`
/// (`None`: empty, for [`SourceRef::within`] to set); `None` when it names no Flux source kind.
fn reference(value: &Value, namespace: Option<&str>) -> Option<SourceRef> {
    let kind = value["kind"].as_str()?;
    let name = value["name"].as_str().filter(|n| !n.is_empty())?;
    let named = value["namespace"].as_str().filter(|n| !n.is_empty());
    SOURCE_KINDS.iter().any(|(k, _)| *k == kind).then(|| SourceRef {
        kind: kind.into(),
        namespace: named.or(namespace).unwrap_or_default().into(),
        name: name.into(),
    })
}

impl SourceRef {
    /// The same reference in `namespace`, whatever namespace it named.
    fn within(self, namespace: &str) -> Self {
        SourceRef { namespace: namespace.into(), ..self }
    }
}

/// What a plugin is handed of a source object: `apiVersion`, `kind`, `metadata` (name,
/// namespace, labels, annotations) and `spec`; never its status, which changes at every fetch
/// and would make every translation new.
pub fn handed(object: &Value) -> Value {
    let metadata = &object["metadata"];
    let mut kept = Map::new();
    for field in ["name", "namespace", "labels", "annotations"] {
        if let Some(value) = metadata.get(field) {
            kept.insert(field.into(), value.clone());
        }
    }
    json!({"apiVersion": object["apiVersion"], "kind": object["kind"], "metadata": kept, "spec": object["spec"]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, namespace: &str, name: &str, spec: Value) -> Value {
        json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": kind,
               "metadata": {"name": name, "namespace": namespace, "uid": "u", "managedFields": [{}]},
               "spec": spec, "status": {"artifact": {"revision": "sha256:1"}}})
    }

    #[test]
    fn a_helm_template_hands_its_chart_and_the_repository_the_chart_comes_from() {
        let template = json!({"metadata": {"name": "ingress", "namespace": "kcm-system"},
            "spec": {"helm": {"chartSpec": {"chart": "ingress-nginx"}}},
            "status": {"chartRef": {"kind": "HelmChart", "name": "ingress", "namespace": "kcm-system"}}});
        let chart = object(
            "HelmChart",
            "kcm-system",
            "ingress",
            json!({"chart": "ingress-nginx", "sourceRef": {"kind": "HelmRepository", "name": "k0rdent-catalog"}}),
        );
        let repository = object(
            "HelmRepository",
            "kcm-system",
            "k0rdent-catalog",
            json!({"url": "oci://ghcr.io/k0rdent/catalog/charts", "type": "oci", "secretRef": {"name": "creds"}}),
        );
        let find = |r: &SourceRef| match r.kind.as_str() {
            "HelmChart" => Some(chart.clone()),
            "HelmRepository" => Some(repository.clone()),
            _ => None,
        };
        let sources = sources_of([&template, &template], find);
        let names: Vec<(&str, &str)> = sources.iter().map(|s| (s.kind.as_str(), s.name.as_str())).collect();
        assert_eq!(names, [("HelmChart", "ingress"), ("HelmRepository", "k0rdent-catalog")], "each once");
        let handed: Value = serde_json::from_str(sources[1].object.as_deref().unwrap()).unwrap();
        assert_eq!(handed["spec"]["url"], "oci://ghcr.io/k0rdent/catalog/charts");
        assert_eq!(handed["spec"]["secretRef"]["name"], "creds", "a Secret is named, never read");
        assert!(handed.get("status").is_none() && handed["metadata"].get("uid").is_none(), "{handed}");
        assert_eq!(handed["metadata"]["namespace"], "kcm-system");
    }

    #[test]
    fn sources_of_kustomize_and_chart_source_templates_and_what_is_not_a_flux_source() {
        let kustomize = json!({"metadata": {"name": "k", "namespace": "team"},
            "spec": {"kustomize": {"localSourceRef": {"kind": "GitRepository", "name": "repo"}, "path": "./"}},
            "status": {"sourceStatus": {"kind": "GitRepository", "name": "repo", "namespace": "team"}}});
        let secret = json!({"metadata": {"name": "s", "namespace": "team"},
            "spec": {"resources": {"localSourceRef": {"kind": "Secret", "name": "manifests"}}}});
        let sources = sources_of([&kustomize, &secret], |_| None);
        assert_eq!(sources.len(), 1, "{sources:?}");
        assert_eq!((sources[0].kind.as_str(), sources[0].namespace.as_str()), ("GitRepository", "team"));
        assert_eq!(sources[0].object, None, "not found: named, without an object");
    }

    /// Issue 45: a namespace admin's template named another namespace's source in its spec, and
    /// the plugin was handed that source (its URL, its Secret's name). A spec's reference stays in
    /// the template's namespace; kcm's status may name another (a template in the system
    /// namespace's chart).
    #[test]
    fn a_templates_spec_reaches_no_other_namespaces_source() {
        let template = json!({"metadata": {"name": "t", "namespace": "team"},
            "spec": {"helm": {"chartRef": {"kind": "OCIRepository", "name": "theirs", "namespace": "other"}}},
            "status": {"chartRef": {"kind": "HelmChart", "name": "shared", "namespace": "kcm-system"}}});
        let chart = object(
            "HelmChart",
            "kcm-system",
            "shared",
            json!({"sourceRef": {"kind": "HelmRepository", "name": "repo", "namespace": "other"}}),
        );
        let find = |r: &SourceRef| (r.kind == "HelmChart").then(|| chart.clone());
        let found: Vec<(String, String)> =
            sources_of([&template], find).into_iter().map(|s| (s.kind, s.namespace)).collect();
        let expected = [("HelmChart", "kcm-system"), ("HelmRepository", "kcm-system"), ("OCIRepository", "team")];
        assert_eq!(found, expected.map(|(k, n)| (k.to_string(), n.to_string())));
    }
}
