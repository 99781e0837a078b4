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

use ksm_plugin_sdk::contract::{ServiceTranslation, TranslateError, TranslateInput};
pub use ksm_plugin_sdk::status_table::{StatusCase, StatusExpectation, TemplateKind};
use ksm_plugin_sdk::{inputs, report, sources};
use serde::Deserialize;
use serde_json::Value;
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
/// (missing ones as none), the Flux sources they refer to among the case's objects, and the
/// target derived from the ServiceSet, with [`SYSTEM_NAMESPACE`].
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
    let find_source = |source: &sources::SourceRef| sources::find(&documents, source);
    inputs::translate_input(service_set, find_template, find_source, SYSTEM_NAMESPACE)
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
