//! The conformance suite (`ksm-adapter plugin test`) on the Argo CD plugin written in
//! JavaScript, built from source by this package's build script, with its own golden cases.
//! (The Flux plugin's run is in `host/tests/plugin_test.rs`.)

use ksm_e2e::adapter::binary;
use std::path::Path;
use std::process::Command;

#[test]
fn the_javascript_argocd_plugin_passes_the_conformance_suite() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/argocd-js/testdata");
    // The chart repositories' URLs, which ServiceTemplates only name: operator settings, as in
    // the plugin's AdapterPlugin `spec.config`.
    let config = r#"{"helmRepositories": {"k0rdent-catalog": "https://charts.example.com/k0rdent", "jetstack": "https://charts.jetstack.io"}}"#;
    let output = Command::new(binary())
        .args(["plugin", "test", env!("KSM_ARGOCD_WASM"), "--config", config, "--fixtures"])
        .arg(&fixtures)
        .output()
        .expect("running ksm-adapter plugin test");
    let report = String::from_utf8_lossy(&output.stdout);
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(output.status.success() && failures.is_empty(), "{}\n{report}", failures.join("\n"));
    let summary = report.lines().last().unwrap_or_default();
    assert!(summary.ends_with("passed, 0 failed"), "{summary}");
    let passed: usize = summary.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(passed > 100, "only {passed} checks ran: {summary}");
}
