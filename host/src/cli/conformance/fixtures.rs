//! The cases the suite runs: the built-in, plugin-independent fixtures of `tests/conformance/`,
//! and the plugin's own golden cases read from disk.

use anyhow::{Context, bail};
use ksm_plugin_sdk::k0rdent;
use ksm_plugin_sdk::sources::{self, SourceRef};
use ksm_plugin_sdk::status_table::StatusCase;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The system namespace every case runs with (as the golden cases).
pub(super) const SYSTEM_NAMESPACE: &str = "kcm-system";
/// A field no plugin knows.
pub(super) const UNKNOWN_FIELD: &str = "thisFieldDoesNotExist";
/// The input file of a translate case.
pub(super) const INPUT_FILE: &str = "input.yaml";
/// The expected `translate` result of a case (rendered by `report::translation`).
pub(super) const EXPECTED_FILE: &str = "expected.yaml";
/// The expected service states of a case whose input holds observed objects.
pub(super) const EXPECTED_STATUS_FILE: &str = "expected-status.yaml";
/// Plugin-independent expectations of a case (the built-in fixtures).
pub(super) const INVARIANTS_FILE: &str = "invariants.yaml";

macro_rules! builtin {
    ($name:literal) => {
        (
            concat!("conformance/", $name),
            include_str!(concat!("../../../../tests/conformance/", $name, "/input.yaml")),
            include_str!(concat!("../../../../tests/conformance/", $name, "/invariants.yaml")),
        )
    };
}

/// The built-in fixtures: `(name, input.yaml, invariants.yaml)`.
pub(super) const BUILTIN: &[(&str, &str, &str)] =
    &[builtin!("several-services"), builtin!("self-management"), builtin!("unknown-config"), builtin!("long-names")];

/// A case to run.
pub(super) enum Fixture {
    Translate(TranslateCase),
    Status(StatusCase),
}

/// A translate case: a ServiceSet, its templates, observed objects, and what to compare.
pub(super) struct TranslateCase {
    /// The case's directory (cases read from disk).
    pub(super) dir: Option<PathBuf>,
    pub(super) service_set: Value,
    pub(super) templates: Vec<Value>,
    pub(super) observed: Vec<Value>,
    pub(super) expected: Option<Value>,
    pub(super) expected_status: Option<Value>,
    pub(super) invariants: Option<Invariants>,
}

impl TranslateCase {
    pub(super) fn template(&self, name: &str) -> Option<Value> {
        self.templates.iter().find(|t| t["metadata"]["name"] == name).cloned()
    }

    /// The Flux source `source`, among the case's other objects (as plugins get it).
    pub(super) fn source(&self, source: &SourceRef) -> Option<Value> {
        sources::find(&self.observed, source)
    }

    /// The template of service `service`, by the ServiceSet's spec.
    pub(super) fn template_of(&self, service: &str) -> Option<Value> {
        let services = self.service_set["spec"]["services"].as_array()?;
        let spec = services.iter().find(|s| s["name"] == service)?;
        self.template(spec["template"].as_str()?)
    }
}

/// `invariants.yaml`: what any plugin must answer for a case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Invariants {
    pub(super) translate: TranslateInvariants,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TranslateInvariants {
    /// The outcome of each service, in spec order.
    #[serde(default)]
    pub(super) services: Option<Vec<ServiceInvariant>>,
    /// The ServiceSet fails with InvalidConfig naming this field.
    #[serde(default)]
    pub(super) invalid_config: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServiceInvariant {
    pub(super) service: String,
    /// `objects`, or the kind of the service error.
    pub(super) outcome: String,
}

/// Reads the YAML documents of `text`.
pub(super) fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut documents = Vec::new();
    for document in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| e.to_string())?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

pub(super) fn parse_case(
    name: &str,
    input: &str,
    expected: Option<&str>,
    expected_status: Option<&str>,
    invariants: Option<&str>,
) -> Result<TranslateCase, String> {
    let documents = yaml_documents(input).map_err(|e| format!("{INPUT_FILE}: {e}"))?;
    let is = |d: &Value, kind: &str| d["kind"] == kind && d["apiVersion"] == k0rdent::API_VERSION;
    let mut service_sets = documents.iter().filter(|d| is(d, "ServiceSet"));
    let (Some(service_set), None) = (service_sets.next(), service_sets.next()) else {
        return Err(format!("{name}: {INPUT_FILE} must hold exactly one ServiceSet ({})", k0rdent::API_VERSION));
    };
    let parse = |file: &str, text: Option<&str>| -> Result<Option<Value>, String> {
        text.map(|t| serde_norway::from_str(t).map_err(|e| format!("{file}: {e}"))).transpose()
    };
    let invariants = invariants
        .map(|t| serde_norway::from_str::<Invariants>(t).map_err(|e| format!("{INVARIANTS_FILE}: {e}")))
        .transpose()?;
    Ok(TranslateCase {
        dir: None,
        service_set: service_set.clone(),
        templates: documents.iter().filter(|d| is(d, "ServiceTemplate")).cloned().collect(),
        observed: documents.iter().filter(|d| !is(d, "ServiceSet") && !is(d, "ServiceTemplate")).cloned().collect(),
        expected: parse(EXPECTED_FILE, expected)?,
        expected_status: parse(EXPECTED_STATUS_FILE, expected_status)?,
        invariants,
    })
}

/// Reads the translate case in `dir`.
pub(super) fn read_case(dir: &Path) -> Result<TranslateCase, String> {
    let read = |file: &str| -> Result<Option<String>, String> {
        let path = dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    };
    let input = read(INPUT_FILE)?.ok_or_else(|| format!("{}: no {INPUT_FILE}", dir.display()))?;
    let (expected, status, invariants) = (read(EXPECTED_FILE)?, read(EXPECTED_STATUS_FILE)?, read(INVARIANTS_FILE)?);
    let case =
        parse_case(&dir.display().to_string(), &input, expected.as_deref(), status.as_deref(), invariants.as_deref())?;
    Ok(TranslateCase { dir: Some(dir.to_path_buf()), ..case })
}

/// The cases under `dir`, each named by its path: `dir` itself as a case (it has `input.yaml`),
/// or the golden layout (`translate/<case>/`, `status/cases.yaml`), or case directories.
pub(super) fn discover(dir: &Path) -> anyhow::Result<Vec<(String, Result<Fixture, String>)>> {
    if !dir.is_dir() {
        bail!("--fixtures {}: not a directory", dir.display());
    }
    let translate_case = |dir: &Path| (dir.display().to_string(), read_case(dir).map(Fixture::Translate));
    if dir.join(INPUT_FILE).is_file() {
        return Ok(vec![translate_case(dir)]);
    }
    let mut cases = Vec::new();
    for cases_dir in [dir.join("translate"), dir.to_path_buf()] {
        if !cases_dir.is_dir() {
            continue;
        }
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
            .with_context(|| format!("reading {}", cases_dir.display()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        dirs.retain(|d| d.join(INPUT_FILE).is_file());
        dirs.sort();
        cases.extend(dirs.iter().map(|d| translate_case(d)));
    }
    for file in [dir.join("status").join("cases.yaml"), dir.join("cases.yaml")] {
        if file.is_file() {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            match serde_norway::from_str::<Vec<StatusCase>>(&text) {
                Ok(rows) => cases.extend(
                    rows.into_iter().map(|row| (format!("{}#{}", file.display(), row.name), Ok(Fixture::Status(row)))),
                ),
                Err(e) => cases.push((file.display().to_string(), Err(format!("{}: {e}", file.display())))),
            }
        }
    }
    if cases.is_empty() {
        bail!(
            "--fixtures {}: no cases (expected {INPUT_FILE}, translate/<case>/{INPUT_FILE}, <case>/{INPUT_FILE} or status/cases.yaml)",
            dir.display()
        );
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_fixtures_parse() {
        for (name, input, invariants) in BUILTIN {
            let case = parse_case(name, input, None, None, Some(invariants)).unwrap();
            assert!(case.invariants.is_some(), "{name}");
            assert!(!case.templates.is_empty(), "{name}");
        }
    }
}
