//! The registry of served kinds: built-in kinds plus those defined by installed CRDs.

use serde_json::Value;

use crate::errors::{ApiError, ApiResult};

/// Where objects of a kind are stored: all served versions of a group/plural share one storage.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StorageKey {
    pub group: String,
    pub plural: String,
}

impl StorageKey {
    /// Whether this is the storage of CustomResourceDefinitions, whose writes change the served kinds.
    pub fn holds_crds(&self) -> bool {
        self.group == "apiextensions.k8s.io" && self.plural == "customresourcedefinitions"
    }
}

/// One served group/version/resource.
#[derive(Debug, Clone)]
pub(crate) struct Kind {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// Only `create` is served (SelfSubjectAccessReview).
    pub create_only: bool,
    /// Set for kinds defined by a CRD: the CRD's `metadata.name`.
    pub crd: Option<String>,
}

impl Kind {
    pub fn storage(&self) -> StorageKey {
        StorageKey { group: self.group.clone(), plural: self.plural.clone() }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            vec!["create"]
        } else {
            vec!["create", "delete", "get", "list", "patch", "update", "watch"]
        }
    }
}

/// All served kinds.
#[derive(Debug)]
pub(crate) struct Kinds {
    kinds: Vec<Kind>,
}

fn builtin(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool, status: bool) -> Kind {
    Kind {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        short_names: Vec::new(),
        namespaced,
        status_subresource: status,
        create_only: false,
        crd: None,
    }
}

impl Kinds {
    pub fn builtin() -> Self {
        let mut ssar =
            builtin("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false, false);
        ssar.create_only = true;
        let kinds = vec![
            builtin("", "v1", "namespaces", "Namespace", false, true),
            builtin("", "v1", "configmaps", "ConfigMap", true, false),
            builtin("", "v1", "secrets", "Secret", true, false),
            builtin("", "v1", "events", "Event", true, false),
            builtin("events.k8s.io", "v1", "events", "Event", true, false),
            builtin("apps", "v1", "deployments", "Deployment", true, true),
            // The workloads service health reads (the chart's default rules).
            builtin("apps", "v1", "statefulsets", "StatefulSet", true, true),
            builtin("apps", "v1", "daemonsets", "DaemonSet", true, true),
            builtin("", "v1", "pods", "Pod", true, true),
            builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, true),
            builtin("", "v1", "persistentvolumes", "PersistentVolume", false, true),
            builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false, true),
            builtin("coordination.k8s.io", "v1", "leases", "Lease", true, false),
            ssar,
        ];
        Self { kinds }
    }

    pub fn all(&self) -> &[Kind] {
        &self.kinds
    }

    pub fn by_resource(&self, group: &str, version: &str, plural: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.group == group && k.version == version && k.plural == plural)
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.api_version() == api_version && k.kind == kind)
    }

    /// Serves every `served` version of a CRD, replacing what an earlier revision of it served.
    pub fn install_crd(&mut self, crd: &Value) -> ApiResult<()> {
        let kinds = kinds_of_crd(crd)?;
        let name = crd_name(crd);
        self.kinds.retain(|k| k.crd.as_deref() != Some(name));
        self.kinds.extend(kinds);
        Ok(())
    }

    /// Stops serving a CRD's kinds; returns the storage they used.
    pub fn remove_crd(&mut self, crd: &Value) -> Option<StorageKey> {
        let name = crd_name(crd);
        let storage = self.kinds.iter().find(|k| k.crd.as_deref() == Some(name)).map(Kind::storage);
        self.kinds.retain(|k| k.crd.as_deref() != Some(name));
        storage
    }
}

fn crd_name(crd: &Value) -> &str {
    crd["metadata"]["name"].as_str().unwrap_or_default()
}

fn string_at<'a>(value: &'a Value, pointer: &str) -> ApiResult<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::invalid(format!("CustomResourceDefinition: {pointer} is required")))
}

/// The kinds a CRD defines, validated as far as serving them needs.
pub(crate) fn kinds_of_crd(crd: &Value) -> ApiResult<Vec<Kind>> {
    let group = string_at(crd, "/spec/group")?;
    let plural = string_at(crd, "/spec/names/plural")?;
    let kind = string_at(crd, "/spec/names/kind")?;
    let expected = format!("{plural}.{group}");
    if crd_name(crd) != expected {
        return Err(ApiError::invalid(format!("CustomResourceDefinition metadata.name must be {expected:?}")));
    }
    let singular =
        crd.pointer("/spec/names/singular").and_then(Value::as_str).unwrap_or(&kind.to_lowercase()).to_string();
    let short_names: Vec<String> = crd
        .pointer("/spec/names/shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let namespaced = match crd.pointer("/spec/scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => return Err(ApiError::invalid(format!("CustomResourceDefinition spec.scope {other:?} is invalid"))),
    };
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).filter(|v| !v.is_empty());
    let versions = versions.ok_or_else(|| ApiError::invalid("CustomResourceDefinition spec.versions is required"))?;
    let mut kinds = Vec::new();
    for v in versions {
        let version = string_at(v, "/name")?;
        if v["served"].as_bool() != Some(true) {
            continue;
        }
        kinds.push(Kind {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: singular.clone(),
            kind: kind.into(),
            short_names: short_names.clone(),
            namespaced,
            status_subresource: v.pointer("/subresources/status").is_some(),
            create_only: false,
            crd: Some(expected.clone()),
        });
    }
    Ok(kinds)
}
