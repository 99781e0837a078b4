//! `ksm-adapter plugin test`, the conformance suite, as a plugin author runs it: the built-in
//! Flux plugin passes with its own golden cases; a golden case whose expected output does not
//! match fails, naming the case and the difference.

mod common;

use common::{ksm_adapter, repo};
use std::path::{Path, PathBuf};
use std::process::Output;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh directory for one test, under cargo's scratch directory for integration tests.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-test").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copies the Flux golden case `case` into `<dir>/translate/<case>`.
fn copy_flux_case(case: &str, dir: &Path) -> PathBuf {
    let from = repo().join("plugins/flux/testdata/translate").join(case);
    let to = dir.join("translate").join(case);
    std::fs::create_dir_all(&to).unwrap();
    for file in ["input.yaml", "expected.yaml"] {
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
    to
}

#[test]
fn flux_passes_the_suite_with_its_golden_cases() {
    let out = ksm_adapter(&["plugin", "test", "builtin:flux", "--fixtures", "plugins/flux/testdata"]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!report.contains("\nFAIL"), "{report}");
    let passed = report.lines().filter(|l| l.starts_with("PASS")).count();
    assert!(report.ends_with(&format!("{passed} passed, 0 failed\n")), "{report}");
    for expected in [
        // the plugin's own checks
        "contract version: exports ksm:adapter/plugin@0.2.0",
        "validate-config: rejects {\"thisFieldDoesNotExist\": 1}: thisFieldDoesNotExist: unknown field",
        "validate-config: accepts {}",
        // the built-in, plugin-independent fixtures
        "conformance/several-services",
        "invariants: ingress-nginx objects, monitoring TemplateNotFound, cert-manager objects",
        "conformance/self-management",
        "conformance/unknown-config",
        "conformance/long-names",
        "deterministic: translated twice: byte-identical",
        "policy: the host accepts",
        // the golden cases, compared exactly
        "plugins/flux/testdata/translate/helm-paused",
        "expected output: matches expected.yaml",
        "plugins/flux/testdata/status/cases.yaml#helm-install-succeeded",
    ] {
        assert!(report.contains(expected), "no {expected:?} in\n{report}");
    }
    let golden = report.lines().filter(|l| l.contains("expected output: matches expected.yaml")).count();
    assert!(golden >= 14, "{golden} golden translate cases compared:\n{report}");
}

#[test]
fn an_edited_expected_output_fails_naming_the_case_and_the_difference() {
    let dir = scratch("edited-expected");
    let case = copy_flux_case("helm-paused", &dir);
    let expected = case.join("expected.yaml");
    let text = std::fs::read_to_string(&expected).unwrap();
    assert!(text.contains("suspend: true"), "{text}");
    std::fs::write(&expected, text.replacen("suspend: true", "suspend: false", 1)).unwrap();

    let out = ksm_adapter(&["plugin", "test", "builtin:flux", "--fixtures", dir.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failures.len(), 1, "{report}");
    let failure = failures[0];
    assert!(failure.contains(&case.display().to_string()), "the case is not named: {failure}");
    assert!(
        failure.contains(
            "expected output: differs from expected.yaml: services[ingress-nginx].objects[0].spec.suspend: expected false, got true"
        ),
        "{failure}"
    );
    assert!(report.ends_with(" passed, 1 failed\n"), "{report}");
}

#[test]
fn update_writes_the_expected_output_of_a_new_case() {
    let dir = scratch("update");
    let case = copy_flux_case("template-missing", &dir);
    let golden = std::fs::read_to_string(case.join("expected.yaml")).unwrap();
    std::fs::remove_file(case.join("expected.yaml")).unwrap();

    let out = ksm_adapter(&["plugin", "test", "builtin:flux", "--fixtures", dir.to_str().unwrap(), "--update"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("expected output: written to"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(case.join("expected.yaml")).unwrap(), golden);

    let out = ksm_adapter(&["plugin", "test", "builtin:flux", "--fixtures", case.to_str().unwrap()]);
    assert!(stdout(&out).contains("expected output: matches expected.yaml"), "{}", stdout(&out));
    assert!(out.status.success(), "{}", stdout(&out));
}

#[test]
fn a_fixtures_directory_without_cases_is_an_error() {
    let dir = scratch("empty");
    let out = ksm_adapter(&["plugin", "test", "builtin:flux", "--fixtures", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no cases"), "{stderr}");
}

#[test]
fn a_component_that_is_not_a_plugin_fails_the_load_check() {
    let dir = scratch("not-a-plugin");
    let path = dir.join("core-module.wasm");
    std::fs::write(&path, b"\0asm\x01\0\0\0").unwrap();
    let out = ksm_adapter(&["plugin", "test", path.to_str().unwrap()]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.starts_with("FAIL  plugin  load: loading plugin"), "{report}");
    assert!(report.contains("not a WASM component (a core module)"), "{report}");
    assert!(report.ends_with("0 passed, 1 failed\n"), "{report}");
}
