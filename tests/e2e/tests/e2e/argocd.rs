//! Scenario 18: the Argo CD plugin, written in JavaScript and built from source, pulled from a
//! loopback registry (it is larger than a ConfigMap may be) and serving a `ksm-argocd` SMP beside
//! the built-in Flux plugin serving the scenario's own SMP. And Argo CD's own Application CRD,
//! on a real API server, against every Application of the plugin's golden cases.

use super::schema::{all_kept_whole, golden_objects};
use ksm_e2e::Scenario;
use ksm_test_harness::env::{Env, report};
use ksm_test_harness::fixtures::{self, ingress_service};
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::service_state;
use ksm_test_harness::{Backend, Mode, WAIT};
use serde_json::json;

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
/// reach Argo CD, or never reach the plugin.
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
    let (translated, statuses) = golden_objects("argocd-js");
    assert!(
        translated.len() > 10 && statuses.len() > 30,
        "too few golden Applications: {} translated, {} statuses",
        translated.len(),
        statuses.len()
    );
    let problems = all_kept_whole(&env, Kind::Application, translated.into_iter().chain(statuses)).await;
    assert!(problems.is_empty(), "{} problems with Argo CD's own schema:\n{}", problems.len(), problems.join("\n"));
}
