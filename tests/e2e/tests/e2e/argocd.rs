//! Scenario 18: the Argo CD plugin, written in JavaScript and built from source, pulled from a
//! loopback registry (it is larger than a ConfigMap may be) and serving a `ksm-argocd` SMP beside
//! the built-in Flux plugin serving the scenario's own SMP.

use ksm_e2e::fixtures::{self, ingress_service};
use ksm_e2e::objects::{Kind, ObjRef};
use ksm_e2e::status::service_state;
use ksm_e2e::{Mode, Scenario, WAIT};
use serde_json::json;

const ARGOCD: &[u8] = include_bytes!(env!("KSM_ARGOCD_WASM"));

#[tokio::test(flavor = "multi_thread")]
async fn an_argocd_plugin_in_javascript_serves_beside_flux() {
    let registry = ksm_e2e::registry::Registry::start();
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

    // Argo CD reports it synced (compared against its current spec) and healthy: Deployed.
    let compared_to = json!({"source": app["spec"]["source"], "destination": app["spec"]["destination"]});
    let status = json!({"sync": {"status": "Synced", "revision": "4.11.3", "comparedTo": compared_to},
        "health": {"status": "Healthy"}, "operationState": {"phase": "Succeeded", "message": "successfully synced"}});
    t.set_status(&application, status).await;
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
