//! Runs the golden cases of [`crate::testdata`] against the native build.
//!
//! `KSM_UPDATE_GOLDEN=1 cargo test -p ksm-flux-plugin` rewrites every `expected.yaml` from the
//! current output; review each change before keeping it.

use crate::FluxPlugin;
use crate::testdata::{EXPECTED_FILE, run_translate_case, status_cases, translate_case_dirs, translate_case_input};
use ksm_plugin_sdk::contract::PluginApi;
use ksm_plugin_sdk::report;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;

#[test]
fn translate_cases_match_their_expected_output() {
    let update = std::env::var("KSM_UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let dirs = translate_case_dirs().unwrap();
    assert!(dirs.len() >= 14, "only {} translate cases", dirs.len());
    let mut failures = Vec::new();
    for dir in dirs {
        if update {
            let input = translate_case_input(&dir).unwrap();
            let rendered = report::translation(&FluxPlugin::translate(input));
            fs::write(dir.join(EXPECTED_FILE), serde_norway::to_string(&rendered).unwrap()).unwrap();
        }
        let (actual, expected) = run_translate_case(&dir, FluxPlugin::translate).unwrap();
        if actual != expected {
            let actual = serde_norway::to_string(&actual).unwrap();
            failures.push(format!("{} differs; actual:\n{actual}", dir.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn translate_is_deterministic_and_creates_only_declared_kinds() {
    let creates = FluxPlugin::metadata().creates;
    for dir in translate_case_dirs().unwrap() {
        let input = translate_case_input(&dir).unwrap();
        let first = FluxPlugin::translate(input.clone());
        assert_eq!(first, FluxPlugin::translate(input), "{}", dir.display());
        let objects = first.iter().flatten().filter_map(|s| s.outcome.as_ref().ok()).flatten();
        for object in objects {
            let object: Value = serde_json::from_str(object).unwrap();
            assert!(
                creates.iter().any(|k| object["apiVersion"] == k.api_version() && object["kind"] == *k.kind),
                "{}: {object}",
                dir.display()
            );
            assert!(object["metadata"]["labels"].is_null() && object["metadata"]["ownerReferences"].is_null());
        }
    }
}

#[test]
fn status_cases_map_to_their_expected_state() {
    let cases = status_cases().unwrap();
    let failures: Vec<String> = cases.iter().filter_map(|case| case.run(FluxPlugin::map_status).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every condition reason Flux documents for HelmReleases and Kustomizations (api-facts.md).
const HELM_RELEASE_REASONS: &[&str] = &[
    "InstallSucceeded",
    "InstallFailed",
    "UpgradeSucceeded",
    "UpgradeFailed",
    "TestSucceeded",
    "TestFailed",
    "RollbackSucceeded",
    "RollbackFailed",
    "UninstallSucceeded",
    "UninstallFailed",
    "ArtifactFailed",
    "DependencyNotReady",
    "DriftDetected",
    "SourceNotReady",
    "ValuesError",
    "RetriesExceeded",
    "MissingRollbackTarget",
    "Progressing",
    "ProgressingWithRetry",
];
const KUSTOMIZATION_REASONS: &[&str] = &[
    "ArtifactFailed",
    "DependencyNotReady",
    "BuildFailed",
    "ReconciliationFailed",
    "PruneFailed",
    "HealthCheckFailed",
    "ReconciliationSucceeded",
    "Progressing",
    "ProgressingWithRetry",
];

#[test]
fn status_cases_cover_every_reason() {
    let cases = status_cases().unwrap();
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "status case names must be unique");
    for (kind, reasons) in [("HelmRelease", HELM_RELEASE_REASONS), ("Kustomization", KUSTOMIZATION_REASONS)] {
        let covered: BTreeSet<&str> = cases
            .iter()
            .filter_map(|c| c.object.as_ref())
            .filter(|o| o["kind"] == kind)
            .filter_map(|o| o["status"]["conditions"].as_array())
            .flatten()
            .filter_map(|c| c["reason"].as_str())
            .collect();
        let missing: Vec<&&str> = reasons.iter().filter(|r| !covered.contains(**r)).collect();
        assert!(missing.is_empty(), "{kind} reasons without a status case: {missing:?}");
    }
}

#[test]
fn metadata_describes_the_flux_kinds() {
    let metadata = FluxPlugin::metadata();
    assert_eq!(metadata.name, "flux");
    assert_eq!(metadata.contract_version, ksm_plugin_sdk::contract::CONTRACT_VERSION);
    let kinds = |ks: &[ksm_plugin_sdk::contract::ObjectKind]| {
        ks.iter().map(|k| format!("{} {}/{} {}", k.kind, k.api_version(), k.plural, k.namespaced)).collect::<Vec<_>>()
    };
    assert_eq!(
        kinds(&metadata.creates),
        [
            "HelmRelease helm.toolkit.fluxcd.io/v2/helmreleases true",
            "Kustomization kustomize.toolkit.fluxcd.io/v1/kustomizations true",
        ]
    );
    assert!(metadata.reads.is_empty(), "the host would watch every source object for nothing");
}

#[test]
fn validate_config_reports_every_error() {
    assert_eq!(FluxPlugin::validate_config("null".into()), Ok(()));
    let errors =
        FluxPlugin::validate_config(r#"{"interval": "5x", "intervall": "1m", "prune": "yes"}"#.into()).unwrap_err();
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors, ["interval: invalid duration \"5x\"", "intervall: unknown field", "prune: expected a boolean"]);
}
