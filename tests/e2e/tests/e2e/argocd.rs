//! Scenario 18: the Argo CD plugin, written in JavaScript and built from source, pulled from a
//! loopback registry (it is larger than a ConfigMap may be) and serving a `ksm-argocd` SMP beside
//! the built-in Flux plugin serving the scenario's own SMP. And Argo CD's own Application CRD,
//! on a real API server, against every Application of the plugin's golden cases.

use ksm_e2e::Scenario;
use ksm_test_harness::env::{Env, report};
use ksm_test_harness::fixtures::{self, ingress_service, yaml_documents};
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::service_state;
use ksm_test_harness::{Backend, Mode, WAIT};
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use std::path::Path;

const ARGOCD: &[u8] = include_bytes!(env!("KSM_ARGOCD_WASM"));

#[tokio::test(flavor = "multi_thread")]
async fn an_argocd_plugin_in_javascript_serves_beside_flux() {
    let registry = ksm_test_harness::registry::Registry::start();
    let t = Scenario::start("argocd", Mode::Observe).await;
    // The chart repository, which a ServiceTemplate's chartSpec only names: its URL reaches the
    // plugin through the sources the host hands it (contract 0.2.0), no config needed.
    t.create(json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
                    "metadata": {"name": "k0rdent-catalog", "namespace": t.namespace()},
                    "spec": {"url": "https://charts.example.com/k0rdent", "interval": "10m"}}))
        .await;
    let kinds = [("argoproj.io", "Application")];
    let provider = t.serve_plugin(&registry, ("argocd", ARGOCD), &kinds, json!({}), WAIT).await;

    // The ingress service goes to cluster "edge" through Argo CD; another cluster's goes through Flux.
    let mut edge = fixtures::service_set(t.namespace(), "edge", &provider, json!([ingress_service()]));
    edge["spec"]["provider"]["config"] = json!({"project": "default"}); // the fixture's config is Flux's
    t.create(edge).await;
    t.create_service_set("core", json!([ingress_service()])).await;
    let application = ObjRef::new(Kind::Application, t.namespace(), "edge.ingress-nginx");
    let app = t.wait_object("created by the Argo CD plugin", &application, WAIT, |_| true).await;
    assert_eq!(app["spec"]["destination"]["name"], "edge", "{app:#}");
    assert_eq!(app["spec"]["source"]["repoURL"], "https://charts.example.com/k0rdent");
    assert_eq!(app["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"], "edge");
    t.wait_converged("core").await;

    // Argo CD reports it synced (compared against its current spec) and healthy: Deployed. As
    // Argo CD writes it: with the object (its CRD has no status subresource), and the operation
    // and its start, which the CRD requires.
    let compared_to = json!({"source": app["spec"]["source"], "destination": app["spec"]["destination"]});
    let operation = json!({"operation": {"initiatedBy": {"automated": true}, "sync": {"revision": "4.11.3"}},
        "phase": "Succeeded", "message": "successfully synced (all tasks run)",
        "startedAt": fixtures::now(), "finishedAt": fixtures::now(), "syncResult": {"revision": "4.11.3"}});
    let status = json!({"sync": {"status": "Synced", "revision": "4.11.3", "comparedTo": compared_to},
        "health": {"status": "Healthy"}, "operationState": operation, "resourceHealthSource": "appTree"});
    t.merge_patch(&application, json!({ "status": status })).await;
    t.wait_service_set("edge", "ingress-nginx Deployed", |ss| service_state(ss, "ingress-nginx") == Some("Deployed"))
        .await;

    // The repository moves: the ServiceSets whose templates come from it are translated again.
    let repository = ObjRef::new(Kind::HelmRepository, t.namespace(), "k0rdent-catalog");
    t.merge_patch(&repository, json!({"spec": {"url": "https://charts.example.org/k0rdent"}})).await;
    t.wait_object("its repoURL follows the HelmRepository", &application, WAIT, |app| {
        app["spec"]["source"]["repoURL"] == "https://charts.example.org/k0rdent"
    })
    .await;
}

/// Argo CD's own Application CRD (v3.5.1, installed on a real API server) accepts every
/// Application of the plugin's golden cases and keeps every field of it: what `translate`
/// creates (`testdata/translate/*/expected.yaml`), and the status Argo CD writes that
/// `map-status` is tested on (`testdata/status/cases.yaml`; the CRD has no status subresource,
/// Argo CD writes status with the object). A field the schema refused or pruned would never
/// reach Argo CD, or never reach the plugin. Dry-run creates: nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn argo_cds_own_crd_keeps_every_application_of_the_golden_cases() {
    const TEST: &str = "argocd-schema";
    if Backend::selected() == Backend::Simulator {
        report(TEST, "skipped: it needs a real API server (the simulator does not validate against CRD schemas)");
        return;
    }
    let env = Env::start(TEST).await;
    let crd = env.must_get(&ObjRef::cluster(Kind::CustomResourceDefinition, "applications.argoproj.io")).await;
    let spec_schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert!(
        spec_schema["properties"]["destination"].is_object(),
        "the API server's Application CRD is not Argo CD's own (no schema of spec.destination): {spec_schema}"
    );
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/argocd-js/testdata");
    let api = env.api(Kind::Application, env.namespace());
    let dry_run = PostParams { dry_run: true, ..Default::default() };
    // What the API server would store of `object`, compared with what was sent.
    let check = async |mut object: Value, what: &str| -> Vec<String> {
        object["metadata"] = json!({"name": "golden", "namespace": env.namespace()});
        let sent: DynamicObject = serde_json::from_value(object.clone()).expect("an Application");
        match api.create(&dry_run, &sent).await {
            Ok(kept) => {
                let kept = serde_json::to_value(kept).expect("objects serialize");
                ["spec", "status"].iter().flat_map(|part| lost(&object[part], &kept[part], part, what)).collect()
            }
            Err(e) => vec![format!("{what}: refused: {e}")],
        }
    };
    let mut problems = Vec::new();

    let mut translated = 0;
    for case in std::fs::read_dir(testdata.join("translate")).expect("the translate cases") {
        let expected = case.expect("a case").path().join("expected.yaml");
        let text = std::fs::read_to_string(&expected).unwrap_or_else(|e| panic!("{}: {e}", expected.display()));
        let services = yaml_documents(&text).remove(0)["services"].as_array().cloned().unwrap_or_default();
        for object in services.iter().filter_map(|s| s["objects"].as_array()).flatten() {
            translated += 1;
            let what = format!("{} {}", expected.display(), object["metadata"]["name"]);
            problems.extend(check(object.clone(), &what).await);
        }
    }

    let cases_file = testdata.join("status/cases.yaml");
    let text = std::fs::read_to_string(&cases_file).unwrap_or_else(|e| panic!("{}: {e}", cases_file.display()));
    let mut statuses = 0;
    for case in yaml_documents(&text).remove(0).as_array().expect("a list of cases") {
        if case["object"].get("status").is_some() {
            statuses += 1;
            problems.extend(check(case["object"].clone(), &format!("status case {}", case["name"])).await);
        }
    }
    assert!(
        translated > 10 && statuses > 30,
        "too few golden Applications: {translated} translated, {statuses} statuses"
    );
    assert!(problems.is_empty(), "{} problems with Argo CD's own schema:\n{}", problems.len(), problems.join("\n"));
}

/// Where `kept` lacks or changed what was `sent` (at `path`), one line each, for `what`.
fn lost(sent: &Value, kept: &Value, path: &str, what: &str) -> Vec<String> {
    match (sent, kept) {
        (Value::Object(sent), Value::Object(kept)) => sent
            .iter()
            .flat_map(|(key, value)| match kept.get(key) {
                Some(kept) => lost(value, kept, &format!("{path}.{key}"), what),
                None => vec![format!("{what}: {path}.{key} pruned")],
            })
            .collect(),
        (Value::Array(sent), Value::Array(kept)) if sent.len() == kept.len() => sent
            .iter()
            .zip(kept)
            .enumerate()
            .flat_map(|(i, (s, k))| lost(s, k, &format!("{path}[{i}]"), what))
            .collect(),
        _ if sent == kept => vec![],
        _ => vec![format!("{what}: {path} sent {sent}, kept {kept}")],
    }
}
