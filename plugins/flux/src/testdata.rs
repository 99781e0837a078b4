//! The plugin's golden test cases, shared by its native tests and the host's WASM tests, so
//! both builds are held to the very same expectations. Native builds only.
//!
//! - Translate cases: one directory per case under [`translate_dir`], with `input.yaml` (one
//!   ServiceSet and the ServiceTemplates it uses, as YAML documents) and `expected.yaml`
//!   (the result rendered by [`ksm_plugin_sdk::report::translation`]). Run one with
//!   [`run_translate_case`] and compare the two values it returns.
//! - Status cases: the table [`status_cases_file`], one observed HelmRelease or Kustomization
//!   per case with the state it must map to. Load it with [`status_cases`] and run each case
//!   with [`StatusCase::run`].
//!
//! The plugin is passed as a closure, so the same cases run natively
//! (`|input| FluxPlugin::translate(input)`) and through a WASM instance (a closure calling
//! into the component). The closures are `FnMut`, so they may hold a mutable store.

use ksm_plugin_sdk::contract::{
    ObservedObject, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError, TranslateInput,
};
use ksm_plugin_sdk::{inputs, k0rdent, names, report};
use serde::Deserialize;
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};

/// The input file of a translate case.
pub const INPUT_FILE: &str = "input.yaml";
/// The expected-output file of a translate case.
pub const EXPECTED_FILE: &str = "expected.yaml";
/// The system namespace the translate cases run with.
pub const SYSTEM_NAMESPACE: &str = "kcm-system";

/// The directory holding one subdirectory per translate case.
pub fn translate_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/translate")
}

/// The translate case directories, sorted by name.
pub fn translate_case_dirs() -> Result<Vec<PathBuf>, String> {
    let dir = translate_dir();
    let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut dirs = entries
        .map(|entry| entry.map(|e| e.path()).map_err(|e| format!("{}: {e}", dir.display())))
        .filter(|path| path.as_ref().map_or(true, |p| p.is_dir()))
        .collect::<Result<Vec<_>, _>>()?;
    dirs.sort();
    Ok(dirs)
}

/// The `translate` input of the case in `dir`: its ServiceSet, the ServiceTemplates it names
/// (missing ones as none) and the target derived from the ServiceSet, with
/// [`SYSTEM_NAMESPACE`].
pub fn translate_case_input(dir: &Path) -> Result<TranslateInput, String> {
    let path = dir.join(INPUT_FILE);
    let documents = read_yaml_documents(&path)?;
    let service_sets: Vec<&Value> = documents.iter().filter(|d| d["kind"] == "ServiceSet").collect();
    let [service_set] = service_sets[..] else {
        return Err(format!("{}: expected exactly one ServiceSet, found {}", path.display(), service_sets.len()));
    };
    let find_template = |name: &str| {
        documents.iter().find(|d| d["kind"] == "ServiceTemplate" && d["metadata"]["name"] == name).cloned()
    };
    inputs::translate_input(service_set, find_template, SYSTEM_NAMESPACE)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The expected rendering of the case in `dir` (its `expected.yaml`).
pub fn expected_translation(dir: &Path) -> Result<Value, String> {
    let path = dir.join(EXPECTED_FILE);
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_norway::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs `translate` on the case in `dir` and returns `(actual, expected)`: the rendered result
/// and the content of `expected.yaml`. The case passes when the two are equal.
pub fn run_translate_case(
    dir: &Path,
    mut translate: impl FnMut(TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError>,
) -> Result<(Value, Value), String> {
    let actual = report::translation(&translate(translate_case_input(dir)?));
    Ok((actual, expected_translation(dir)?))
}

/// The status case table.
pub fn status_cases_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/status/cases.yaml")
}

/// The status cases, in file order.
pub fn status_cases() -> Result<Vec<StatusCase>, String> {
    let path = status_cases_file();
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_norway::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One row of the status table: a service of ServiceSet `kcm-system/prod-eu-1` with one
/// observed object.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusCase {
    /// Case name.
    pub name: String,
    /// The kind of the service's template; none when the template is missing.
    pub template: Option<TemplateKind>,
    /// The service's `helmAction`, if set.
    #[serde(default)]
    pub helm_action: Option<String>,
    /// The observed HelmRelease or Kustomization; none when it does not exist yet.
    pub object: Option<Value>,
    /// What `map-status` must return.
    pub expect: StatusExpectation,
}

/// The kind of a status case's ServiceTemplate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateKind {
    /// `spec.helm`: the service has a HelmRelease.
    Helm,
    /// `spec.kustomize`: the service has a Kustomization.
    Kustomize,
    /// `spec.resources`: the service has a Kustomization.
    Resources,
}

/// The expected result of a status case.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusExpectation {
    /// The service state, e.g. `Failed`.
    pub state: String,
    /// The service type (`Helm`, `Kustomize`, `Resource`), when checked.
    #[serde(default, rename = "type")]
    pub service_type: Option<String>,
    /// A substring of the failure message; absent means there must be none.
    #[serde(default)]
    pub failure_message: Option<String>,
    /// The exact version; absent means there must be none.
    #[serde(default)]
    pub version: Option<String>,
}

/// ServiceSet, service and template names of the status cases.
const SERVICE_SET: &str = "prod-eu-1";
const SERVICE: &str = "ingress-nginx";
const TEMPLATE: &str = "ingress-nginx-4-11-3";

impl StatusCase {
    /// The `map-status` input of this case.
    pub fn input(&self) -> StatusInput {
        let service_set = json!({
            "apiVersion": k0rdent::API_VERSION,
            "kind": "ServiceSet",
            "metadata": {"name": SERVICE_SET, "namespace": SYSTEM_NAMESPACE},
            "spec": {
                "cluster": SERVICE_SET,
                "provider": {"name": "ksm-flux"},
                "services": [{
                    "name": SERVICE, "namespace": SERVICE, "template": TEMPLATE,
                    "helmAction": self.helm_action,
                }],
            },
        });
        let (kind, api_version) = match (&self.object, self.template) {
            (Some(object), _) => (str_field(object, "kind"), str_field(object, "apiVersion")),
            (None, Some(TemplateKind::Helm) | None) => ("HelmRelease", "helm.toolkit.fluxcd.io/v2"),
            (None, Some(_)) => ("Kustomization", "kustomize.toolkit.fluxcd.io/v1"),
        };
        StatusInput {
            service_set: service_set.to_string(),
            service: SERVICE.into(),
            template: self.template.map(|kind| template(kind).to_string()),
            observed: vec![ObservedObject {
                api_version: api_version.into(),
                kind: kind.into(),
                name: names::derived_name(&[SERVICE_SET, SERVICE], names::MAX_LABEL_LEN),
                namespace: SYSTEM_NAMESPACE.into(),
                object: self.object.as_ref().map(Value::to_string),
            }],
        }
    }

    /// Runs `map_status` on this case; the error describes every mismatch.
    pub fn run(
        &self,
        mut map_status: impl FnMut(StatusInput) -> Result<ServiceStatus, StatusError>,
    ) -> Result<(), String> {
        let status = map_status(self.input()).map_err(|e| format!("{}: {e}", self.name))?;
        let expect = &self.expect;
        let mut problems = Vec::new();
        if status.state.as_str() != expect.state {
            problems.push(format!("state {} instead of {}", status.state.as_str(), expect.state));
        }
        let service_type = format!("{:?}", status.service_type);
        if expect.service_type.as_ref().is_some_and(|t| *t != service_type) {
            problems.push(format!("type {service_type} instead of {:?}", expect.service_type));
        }
        let message_ok = match (&status.failure_message, &expect.failure_message) {
            (Some(actual), Some(expected)) => actual.contains(expected.as_str()),
            (actual, expected) => actual.is_none() && expected.is_none(),
        };
        if !message_ok {
            problems.push(format!(
                "failure message {:?} does not match {:?}",
                status.failure_message, expect.failure_message
            ));
        }
        if status.version != expect.version {
            problems.push(format!("version {:?} instead of {:?}", status.version, expect.version));
        }
        if problems.is_empty() { Ok(()) } else { Err(format!("{}: {}", self.name, problems.join("; "))) }
    }
}

/// The ServiceTemplate of a status case.
fn template(kind: TemplateKind) -> Value {
    let source = json!({"remoteSourceSpec": {"git": {"url": "https://github.com/example/apps", "ref": {"tag": "v1.0.0"}}}, "path": "./deploy"});
    let spec = match kind {
        TemplateKind::Helm => {
            json!({"helm": {"chartSpec": {"chart": "ingress-nginx", "version": "4.11.3"}}})
        }
        TemplateKind::Kustomize => json!({"kustomize": source}),
        TemplateKind::Resources => json!({"resources": source}),
    };
    json!({
        "apiVersion": k0rdent::API_VERSION,
        "kind": "ServiceTemplate",
        "metadata": {"name": TEMPLATE, "namespace": SYSTEM_NAMESPACE},
        "spec": spec,
        "status": {"valid": true},
    })
}

fn str_field<'a>(object: &'a Value, key: &str) -> &'a str {
    object[key].as_str().unwrap_or_default()
}

/// Reads every non-empty YAML document of the file at `path`.
fn read_yaml_documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut documents = Vec::new();
    for document in serde_norway::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).map_err(|e| format!("{}: {e}", path.display()))?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}
