//! The conformance suite (`ksm-adapter plugin test`) on the Argo CD and Fleet plugins written in
//! JavaScript and the Sveltos plugin written in Python, built from source by this package's
//! build script, each with its own golden cases.
//! (The Flux plugin's run is in `host/tests/plugin_test.rs`.)

use ksm_test_harness::adapter::binary;
use std::path::Path;
use std::process::Command;

/// Runs `ksm-adapter plugin test` on `wasm` with `config` and each of `fixtures` (directories of
/// golden cases, under `plugins/`); fails on any failed check or fewer than `at_least` checks.
fn passes(wasm: &str, config: &str, extra_args: &[&str], fixtures: &[&str], at_least: usize) {
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins");
    let mut command = Command::new(binary());
    command.args(["plugin", "test", wasm, "--config", config]).args(extra_args);
    for dir in fixtures {
        command.arg("--fixtures").arg(plugins.join(dir));
    }
    let output = command.output().expect("running ksm-adapter plugin test");
    let report = String::from_utf8_lossy(&output.stdout);
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(output.status.success() && failures.is_empty(), "{}\n{report}", failures.join("\n"));
    let summary = report.lines().last().unwrap_or_default();
    assert!(summary.ends_with("passed, 0 failed"), "{summary}");
    let passed: usize = summary.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(passed >= at_least, "only {passed} checks ran: {summary}");
}

#[test]
fn the_javascript_argocd_plugin_passes_the_conformance_suite() {
    // No operator setting: the chart repositories' URLs come from the HelmRepositories the host
    // hands the plugin (contract 0.2.0), among each case's objects.
    passes(env!("KSM_ARGOCD_WASM"), "{}", &[], &["argocd-js/testdata"], 100);
}

/// Its status cases with ClusterSummaries (`testdata/status/<case>/`) check `reads`: the objects
/// a Profile owns reach `map-status` as the controller hands them over. Its self-management
/// Profiles go to namespace `mgmt`, beside kcm's `SveltosCluster mgmt/mgmt`, which an operator
/// allows in the AdapterPlugin.
#[test]
fn the_python_sveltos_plugin_passes_the_conformance_suite() {
    // No operator setting: the chart repositories' URLs come from the HelmRepositories the host
    // hands the plugin (contract 0.2.0), among each case's objects.
    let fixtures = ["sveltos-py/testdata", "sveltos-py/testdata/status"];
    passes(env!("KSM_SVELTOS_WASM"), "{}", &["--allowed-namespace", "mgmt"], &fixtures, 100);
}

/// Its self-management objects go to Fleet's own workspace `fleet-local` (its `local` Cluster),
/// and one case places objects in the workspace `fleet-default` (config `workspace`): namespaces
/// an operator allows in the AdapterPlugin.
#[test]
fn the_javascript_fleet_plugin_passes_the_conformance_suite() {
    let namespaces = ["--allowed-namespace", "fleet-local", "--allowed-namespace", "fleet-default"];
    passes(env!("KSM_FLEET_WASM"), "{}", &namespaces, &["fleet-js/testdata"], 100);
}
