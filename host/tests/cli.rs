//! The `ksm-adapter` binary as a user runs it, on the `examples/` set.

mod common;

use common::ksm_adapter;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// Runs a command that must succeed and parses its YAML stream.
fn documents(args: &[&str]) -> Vec<Value> {
    let out = ksm_adapter(args);
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    serde_norway::Deserializer::from_str(&text).map(|d| Value::deserialize(d).unwrap()).collect()
}

fn service<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["services"].as_array().unwrap().iter().find(|s| s["service"] == name).unwrap()
}

#[test]
fn translate_prints_the_helm_release_of_the_readme_example() {
    let docs = documents(&["plugin", "translate", "--plugin", "builtin:flux", "-f", "examples/"]);
    assert_eq!(docs.len(), 2, "one document per ServiceSet");
    assert_eq!(docs[0]["serviceSet"], "kcm-system/prod-eu-1");
    let release = &service(&docs[0], "ingress-nginx")["objects"][0];
    assert_eq!(
        release,
        &json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": "prod-eu-1.ingress-nginx", "namespace": "kcm-system"},
            "spec": {
                "chartRef": {"kind": "HelmChart", "name": "ingress-nginx-4-11-3", "namespace": "kcm-system"},
                "install": {"createNamespace": true, "remediation": {"retries": 3}},
                "interval": "5m",
                "kubeConfig": {"secretRef": {"key": "value", "name": "prod-eu-1-kubeconfig"}},
                "releaseName": "ingress-nginx",
                "storageNamespace": "ingress-nginx",
                "targetNamespace": "ingress-nginx",
                "timeout": "10m",
                "upgrade": {"remediation": {"retries": 3}},
                "values": {"controller": {"replicaCount": 2, "service": {"type": "LoadBalancer"}}},
            }
        })
    );
    let kustomization = &service(&docs[0], "baseline-policies")["objects"][0];
    assert_eq!(kustomization["kind"], "Kustomization");
    assert_eq!(kustomization["spec"]["sourceRef"]["kind"], "GitRepository");
    let self_managed = &service(&docs[1], "ingress-nginx")["objects"][0];
    assert!(self_managed["spec"].get("kubeConfig").is_none(), "self-management has no kubeConfig");
}

#[test]
fn status_maps_the_observed_flux_objects() {
    let docs = documents(&["plugin", "status", "-f", "examples/"]);
    let states = |doc: &Value| -> Vec<(String, String)> {
        doc["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["service"].as_str().unwrap().into(), s["state"].as_str().unwrap().into()))
            .collect()
    };
    let owned = |pairs: &[(&str, &str)]| pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
    assert_eq!(
        states(&docs[0]),
        owned(&[("ingress-nginx", "Deployed"), ("cert-manager", "Failed"), ("baseline-policies", "Provisioning")])
    );
    assert_eq!(
        service(&docs[0], "cert-manager")["failureMessage"],
        "RetriesExceeded: Failed to install after 4 attempt(s)"
    );
    // generation 2 not yet observed: still in progress although Ready is True.
    assert_eq!(
        states(&docs[1]),
        owned(&[("ingress-nginx", "Provisioning"), ("podinfo", "Pending"), ("legacy-exporter", "Pending")])
    );
}

#[test]
fn translate_and_status_take_a_default_config_as_plugin_test_does() {
    // As an AdapterPlugin's spec.config: merged under each ServiceSet's own config, which wins.
    let config = r#"{"interval": "7m", "suspend": true}"#;
    let docs = documents(&["plugin", "translate", "-f", "examples/", "--config", config]);
    let spec = |doc: &Value| service(doc, "ingress-nginx")["objects"][0]["spec"].clone();
    let (own, defaults) = (spec(&docs[0]), spec(&docs[1]));
    assert_eq!(
        (&own["interval"], &own["suspend"]),
        (&json!("5m"), &json!(true)),
        "prod-eu-1 sets its interval: {own:#}"
    );
    assert_eq!((&defaults["interval"], &defaults["suspend"]), (&json!("7m"), &json!(true)), "{defaults:#}");

    // `plugin status` translates with it too: a config the plugin refuses fails every ServiceSet.
    let docs = documents(&["plugin", "status", "-f", "examples/", "--config", r#"{"intervall": "1m"}"#]);
    assert_eq!(docs.len(), 2);
    for doc in &docs {
        assert_eq!(doc["error"]["kind"], "InvalidConfig", "{doc:#}");
        assert_eq!(doc["error"]["errors"], json!(["intervall: unknown field"]), "{doc:#}");
    }

    let out = ksm_adapter(&["plugin", "status", "-f", "examples/", "--config", "{interval"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--config") && stderr.contains("not JSON"), "{stderr}");
}

#[test]
fn inspect_shows_a_component_with_zero_imports() {
    let docs = documents(&["plugin", "inspect", "builtin:flux"]);
    assert_eq!(docs[0]["metadata"]["name"], "flux");
    assert_eq!(docs[0]["metadata"]["contractVersion"], "0.2.0");
    assert_eq!(docs[0]["component"]["imports"], json!([]));
    assert_eq!(docs[0]["component"]["exports"], json!(["ksm:adapter/plugin@0.2.0"]));
    assert_eq!(docs[0]["component"]["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn errors_name_the_file_and_the_plugin() {
    let dir = std::env::temp_dir().join(format!("ksm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n").unwrap();
    let out = ksm_adapter(&["plugin", "translate", "-f", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("bad.yaml#1") && stderr.contains("not valid YAML"), "{stderr}");

    let missing = ksm_adapter(&["plugin", "inspect", "/nonexistent/plugin.wasm"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("reading plugin /nonexistent/plugin.wasm"));

    let not_wasm = dir.join("plugin.wasm");
    std::fs::write(&not_wasm, b"\0asm\x01\0\0\0").unwrap();
    let out = ksm_adapter(&["plugin", "inspect", not_wasm.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a WASM component (a core module)"), "{stderr}");

    let unknown = ksm_adapter(&["plugin", "inspect", "builtin:argo"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no built-in plugin \"argo\"; built-in plugins: flux"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ksm-adapter"))
        .args(["plugin", "translate", "-f", "examples/"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// The binary's jemalloc options reach jemalloc: the symbol it reads them from is named by
/// tikv-jemalloc-sys's prefix, and a wrong name would be ignored without a word.
#[test]
fn jemalloc_runs_with_the_binarys_two_arenas() {
    let out = Command::new(env!("CARGO_BIN_EXE_ksm-adapter"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = String::from_utf8_lossy(&out.stderr);
    assert!(stats.contains("opt.narenas: 2\n"), "jemalloc's statistics: {stats}");
}

#[test]
fn render_prints_what_the_controller_would_apply_and_write() {
    let docs = documents(&["render", "-f", "examples/"]);
    let prod = &docs[0];
    assert_eq!(prod["serviceSet"], "kcm-system/prod-eu-1");
    let applied: Vec<&str> =
        prod["apply"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(applied, ["prod-eu-1.ingress-nginx", "prod-eu-1.cert-manager", "prod-eu-1.baseline-policies"]);
    let metadata = &prod["apply"][0]["metadata"];
    assert_eq!(metadata["labels"]["ksm.k0rdent.mirantis.com/service"], "ingress-nginx");
    assert_eq!(metadata["ownerReferences"][0]["kind"], "ServiceSet");
    let status = &prod["status"];
    let states: Vec<&str> =
        status["services"].as_array().unwrap().iter().map(|s| s["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["Deployed", "Failed", "Provisioning"]);
    assert_eq!(status["services"][0]["version"], "ingress-nginx-4-11-3", "template name: the service has no version");
    assert_eq!(status["deployed"], false);
    assert_eq!(status["provider"], json!({"ready": true}));
    let ready = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ServicesInReadyState").unwrap();
    assert_eq!(ready["message"], "1/3");
    assert_eq!(
        status["cluster"],
        json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
               "namespace": "kcm-system", "name": "prod-eu-1"})
    );

    // Self-management: kcm's management target, a chartSource service and an uninstalled one.
    let management = &docs[1];
    assert_eq!(management["status"]["cluster"]["kind"], "SveltosCluster");
    assert_eq!(
        (&management["status"]["cluster"]["namespace"], &management["status"]["cluster"]["name"]),
        (&json!("mgmt"), &json!("mgmt"))
    );
    let podinfo = management["apply"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == "management-7f3a9c2e.podinfo")
        .unwrap();
    assert_eq!(
        podinfo["spec"]["chart"]["spec"],
        json!({"chart": "charts/podinfo", "sourceRef": {"kind": "GitRepository", "name": "podinfo-git-6-7-1", "namespace": "kcm-system"}})
    );
    let states: Vec<(&str, &str)> = management["status"]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("ingress-nginx", "Provisioning"), ("podinfo", "Pending"), ("legacy-exporter", "Deleted")]);
}

#[test]
fn render_explains_an_unready_provider_and_skips_foreign_service_sets() {
    let dir = std::env::temp_dir().join(format!("ksm-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("examples");
    for file in ["servicesets.yaml", "servicetemplates.yaml"] {
        std::fs::copy(root.join(file), dir.join(file)).unwrap();
    }
    let smp = std::fs::read_to_string(root.join("statemanagementprovider.yaml")).unwrap();
    std::fs::write(dir.join("smp.yaml"), smp.replace("  ready: true", "  ready: false")).unwrap();
    let docs = documents(&["render", "-f", dir.to_str().unwrap()]);
    assert_eq!(docs[0]["apply"], json!([]), "nothing changes while the provider is not ready");
    let condition =
        docs[0]["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ProviderReady").unwrap();
    assert_eq!(condition["reason"], "ProviderNotReady");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains(
            "AdapterReady=False (FailedToGetAdapter): adapter apps/v1 Deployment kcm-system/ksm-adapter not found"
        ),
        "{message}"
    );

    let foreign = documents(&["render", "--adapter-name", "other-adapter", "-f", dir.to_str().unwrap()]);
    assert_eq!(foreign[0]["servedByThisHost"], false);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A namespace admin's `deploymentType: Local` template (issue 45): its Kustomization, on the
/// management cluster without `kubeConfig`, runs as its namespace's local service account, not
/// as kustomize-controller; the system namespace's self-management and a remote target do not.
#[test]
fn render_runs_a_tenants_local_template_as_its_namespaces_service_account() {
    let dir = std::env::temp_dir().join(format!("ksm-render-tenant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("examples");
    for file in ["servicesets.yaml", "servicetemplates.yaml", "statemanagementprovider.yaml"] {
        std::fs::copy(root.join(file), dir.join(file)).unwrap();
    }
    let tenant = r#"
apiVersion: k0rdent.mirantis.com/v1beta1
kind: ServiceSet
metadata:
  name: prod-eu-1
  namespace: team-a
  uid: 5b7d9f1a-2c4e-4a6b-8d0f-1a3c5e7b9d2f
  labels: {ksm.k0rdent.mirantis.com/adapter: ksm-adapter}
spec:
  cluster: prod-eu-1
  provider: {name: ksm-flux}
  services:
    - {name: cluster-policies, namespace: kyverno, template: cluster-policies-1-0-0}
    - {name: podinfo, namespace: podinfo, template: podinfo-kustomize-6-7-1}
---
apiVersion: k0rdent.mirantis.com/v1beta1
kind: ServiceTemplate
metadata: {name: cluster-policies-1-0-0, namespace: team-a}
spec:
  kustomize:
    deploymentType: Local
    remoteSourceSpec:
      git: {url: "https://git.example.com/team-a/policies", ref: {tag: v1.0.0}, interval: 10m}
    path: ./policies
status:
  valid: true
  sourceStatus: {kind: GitRepository, name: cluster-policies-1-0-0, namespace: team-a}
---
apiVersion: k0rdent.mirantis.com/v1beta1
kind: ServiceTemplate
metadata: {name: podinfo-kustomize-6-7-1, namespace: team-a}
spec:
  kustomize:
    deploymentType: Remote
    remoteSourceSpec:
      git: {url: "https://github.com/stefanprodan/podinfo", ref: {tag: 6.7.1}, interval: 10m}
    path: ./kustomize
status:
  valid: true
  sourceStatus: {kind: GitRepository, name: podinfo-kustomize-6-7-1, namespace: team-a}
"#;
    std::fs::write(dir.join("tenant.yaml"), tenant).unwrap();
    let applied = |args: &[&str], service_set: &str, name: &str| {
        let docs = documents(&[&["render", "-f", dir.to_str().unwrap()], args].concat());
        let doc = docs.iter().find(|d| d["serviceSet"] == service_set).unwrap();
        doc["apply"].as_array().unwrap().iter().find(|o| o["metadata"]["name"] == name).unwrap()["spec"].clone()
    };
    let local = applied(&[], "team-a/prod-eu-1", "prod-eu-1.cluster-policies");
    assert_eq!(local.get("kubeConfig"), None, "Local: the management cluster");
    assert_eq!(local["serviceAccountName"], "default", "{local}");
    let remote = applied(&[], "team-a/prod-eu-1", "prod-eu-1.podinfo");
    assert!(remote["kubeConfig"].is_object() && remote.get("serviceAccountName").is_none(), "{remote}");
    let system = applied(&[], "kcm-system/management-7f3a9c2e", "management-7f3a9c2e.podinfo");
    assert!(system.get("kubeConfig").is_none() && system.get("serviceAccountName").is_none(), "{system}");
    let configured =
        applied(&["--local-service-account", "flux-tenant"], "team-a/prod-eu-1", "prod-eu-1.cluster-policies");
    assert_eq!(configured["serviceAccountName"], "flux-tenant");

    let out = ksm_adapter(&["render", "--local-service-account", "", "-f", dir.to_str().unwrap()]);
    assert!(!out.status.success(), "an empty account would leave Flux's own identity");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--local-service-account") && stderr.contains("not a service account name"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn render_arbitrates_a_release_two_service_sets_claim() {
    let dir = std::env::temp_dir().join(format!("ksm-render-conflict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("examples");
    for file in
        ["servicesets.yaml", "servicetemplates.yaml", "statemanagementprovider.yaml", "observed/helmreleases.yaml"]
    {
        std::fs::copy(root.join(file), dir.join(file.replace('/', "-"))).unwrap();
    }
    // A MultiClusterService's ServiceSet for the same cluster wants the same release, at a
    // higher priority.
    let mcs = r#"
apiVersion: k0rdent.mirantis.com/v1beta1
kind: ServiceSet
metadata:
  name: prod-eu-1-5e1f0c2a
  namespace: kcm-system
  labels: {ksm.k0rdent.mirantis.com/adapter: ksm-adapter}
spec:
  cluster: prod-eu-1
  multiClusterService: platform-ingress
  provider: {name: ksm-flux, config: {priority: 200}}
  services:
    - {name: ingress-nginx, namespace: ingress-nginx, template: ingress-nginx-4-11-3}
"#;
    std::fs::write(dir.join("mcs.yaml"), mcs).unwrap();
    let docs = documents(&["render", "-f", dir.to_str().unwrap()]);
    let doc = |name: &str| docs.iter().find(|d| d["serviceSet"] == format!("kcm-system/{name}")).unwrap();
    let state = |doc: &Value, service: &str| {
        doc["status"]["services"].as_array().unwrap().iter().find(|s| s["name"] == service).unwrap().clone()
    };

    // The cluster's own ServiceSet loses the release and says who won.
    let own = doc("prod-eu-1");
    let lost = state(own, "ingress-nginx");
    assert_eq!(lost["state"], "Failed");
    let message = lost["failureMessage"].as_str().unwrap();
    assert!(
        message.starts_with(r#"conflicts with kcm-system/prod-eu-1-5e1f0c2a service "ingress-nginx" (priority 200)"#),
        "{message}"
    );
    // Its observed HelmRelease carries its uid: provably its own, so it goes.
    assert_eq!(own["delete"], json!(["helm.toolkit.fluxcd.io/v2 HelmRelease kcm-system/prod-eu-1.ingress-nginx"]));
    assert_eq!(state(own, "cert-manager")["state"], "Failed", "unrelated services are unaffected (as before)");

    // The winner waits for that HelmRelease to be gone before applying its own: never two.
    let winner = doc("prod-eu-1-5e1f0c2a");
    assert_eq!(winner["apply"], json!([]));
    let waiting = state(winner, "ingress-nginx");
    assert_eq!(waiting["state"], "Pending");
    assert!(waiting.get("failureMessage").is_none(), "failureMessage is for Failed only, as kcm");
    let ready = &waiting["conditions"][0];
    assert_eq!(
        (&ready["type"], &ready["status"], &ready["reason"]),
        (&json!("Ready"), &json!("False"), &json!("Pending"))
    );
    assert!(
        ready["message"].as_str().unwrap().starts_with(r#"waiting for kcm-system/prod-eu-1 service "ingress-nginx""#)
    );
    std::fs::remove_dir_all(dir).unwrap();
}
