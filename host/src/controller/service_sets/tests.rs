//! The round against an API server that expects its requests in order ([`mock_api::scenario`]):
//! one test per path a ServiceSet takes through it.

use super::super::context::tests::{Cached, context_with};
use super::super::mock_api::{self, Scenario};
use super::*;
use crate::plan::children::MANAGED_LABEL;
use serde_json::json;

const SERVICE_SET: &str = "/apis/k0rdent.mirantis.com/v1beta1/namespaces/team/servicesets/prod";
const HELM_RELEASES: &str = "/apis/helm.toolkit.fluxcd.io/v2/helmreleases";
const FINALIZER: &str = "ksm.k0rdent.mirantis.com/kcm-system.ksm-adapter";

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(kube::core::Status::failure("refused", reason).with_code(code).boxed())
}

#[test]
fn only_a_conflict_is_a_lost_race() {
    assert!(matches!(stale_or_api(api_error(409, "Conflict")), Error::Stale(_)));
    assert!(matches!(stale_or_api(api_error(422, "Invalid")), Error::Api(_)), "a refusal backs off");
    assert!(matches!(stale_or_api(api_error(500, "InternalError")), Error::Api(_)));
}

/// ServiceSet `team/prod` of two services, carrying `finalizers`.
fn service_set(finalizers: &[&str]) -> Arc<ServiceSet> {
    let services = json!([
        {"name": "ingress", "namespace": "ingress", "template": "ingress-1"},
        {"name": "metrics", "namespace": "metrics", "template": "metrics-1"},
    ]);
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "prod", "namespace": "team", "uid": "uid-1", "generation": 1,
                         "resourceVersion": "1", "finalizers": finalizers},
            "spec": {"provider": {"name": "ksm-flux"}, "services": services},
        }))
        .unwrap(),
    )
}

/// The caches of a host serving `team/prod` through the Flux provider `ksm-flux`.
fn cached() -> Cached {
    let template = |name: &str| {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceTemplate",
            "metadata": {"name": name, "namespace": "team"}, "spec": {"helm": {}},
            "status": {"valid": true, "chartRef": {"kind": "HelmChart", "name": name, "namespace": "team"}},
        }))
        .unwrap()
    };
    let smp = serde_json::from_value(json!({
        "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "StateManagementProvider",
        "metadata": {"name": "ksm-flux"},
        "spec": {"adapter": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ksm-adapter",
                             "namespace": "kcm-system", "readinessRule": "true"},
                 "provisionerCRDs": [{"group": "helm.toolkit.fluxcd.io", "version": "v2", "resources": ["helmreleases"]}],
                 "selector": {}},
        "status": {"ready": true},
    }))
    .unwrap();
    Cached { providers: vec![smp], templates: vec![template("ingress-1"), template("metrics-1")], ..Cached::default() }
}

/// A round of `service_set` against `server`'s `script`, which must see every request the
/// round makes (and the round no other): what the round returned.
async fn round_against(
    service_set: &Arc<ServiceSet>,
    ctx: &Arc<Context>,
    server: &mut Scenario,
    script: impl AsyncFnOnce(&mut Scenario),
) -> Result<Action, Error> {
    let verify = async {
        script(server).await;
        server.done().await;
    };
    let (result, ()) = tokio::join!(round(service_set, ctx), verify);
    result
}

/// The path of HelmRelease `name` in namespace `team`.
fn helm_release(name: &str) -> String {
    format!("/apis/helm.toolkit.fluxcd.io/v2/namespaces/team/helmreleases/{name}")
}

/// Expects the server-side apply of HelmRelease `name`, forced under the host's field manager,
/// and accepts it.
async fn applies(server: &mut Scenario, name: &str) {
    let apply = server.expect("PATCH", &helm_release(name)).await;
    assert_eq!(apply.query, "&force=true&fieldManager=ksm-adapter");
    assert_eq!(apply.body["metadata"]["labels"][MANAGED_LABEL], "true", "{}", apply.body);
    apply.accept();
}

/// Expects the write of the status, over the version read, and accepts it; the status written.
async fn writes_status(server: &mut Scenario) -> Value {
    let put = server.expect("PUT", &format!("{SERVICE_SET}/status")).await;
    assert_eq!(put.body["metadata"]["resourceVersion"], "1", "a write over the version read");
    let status = put.body["status"].clone();
    put.accept();
    status
}

/// The states of the services in `status`, by name.
fn states(status: &Value) -> Vec<(String, String)> {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    services.iter().map(|s| (s["name"].as_str().unwrap().into(), s["state"].as_str().unwrap().into())).collect()
}

#[tokio::test]
async fn a_new_service_set_gets_the_finalizer_then_its_children_then_its_status() {
    let (client, mut server) = mock_api::scenario(vec![]);
    let ctx = Arc::new(context_with(client, cached()).0);
    let new = service_set(&[]);
    let action = round_against(&new, &ctx, &mut server, async |server| {
        let patch = server.expect("PATCH", SERVICE_SET).await;
        assert_eq!(patch.body, json!({"metadata": {"finalizers": [FINALIZER], "resourceVersion": "1"}}));
        patch.answer(200, serde_json::to_value(&*service_set(&[FINALIZER])).unwrap());
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change(), "the finalizer comes back through the watch");
    let served = service_set(&[FINALIZER]);
    let action = round_against(&served, &ctx, &mut server, async |server| {
        applies(server, "prod.ingress").await;
        applies(server, "prod.metrics").await;
    })
    .await;
    assert_eq!(action.unwrap(), Action::requeue(ctx.settings.resync), "the children come back through the watch");
    let action = round_against(&served, &ctx, &mut server, async |server| {
        let status = writes_status(server).await;
        let provisioning = |name: &str| (name.to_string(), "Provisioning".to_string());
        assert_eq!(states(&status), [provisioning("ingress"), provisioning("metrics")], "{status}");
    })
    .await;
    assert_eq!(action.unwrap(), Action::requeue(ctx.settings.resync));
}
