//! The round against an API server that expects its requests in order ([`mock_api::scenario`]):
//! one test per path a ServiceSet takes through it.

use super::*;
use crate::conditions::types::APPLIED;
use crate::controller::mock_api::{self, Asked, Scenario};
use crate::controller::round::context::tests::{Cached, context_with};
use crate::plan::children::{
    MANAGED_LABEL, SERVICE_LABEL, SERVICE_SET_LABEL, SERVICE_SET_NAMESPACE_LABEL, SERVICE_SET_UID_LABEL,
};
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

/// ServiceSet `team/prod` of two services, version 1, with `over` merged onto it.
fn service_set(over: Value) -> Arc<ServiceSet> {
    let services = json!([
        {"name": "ingress", "namespace": "ingress", "template": "ingress-1"},
        {"name": "metrics", "namespace": "metrics", "template": "metrics-1"},
    ]);
    let object = json!({
        "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
        "metadata": {"name": "prod", "namespace": "team", "uid": "uid-1", "generation": 1, "resourceVersion": "1"},
        "spec": {"provider": {"name": "ksm-flux"}, "services": services},
    });
    Arc::new(serde_json::from_value(crate::serving::merge(object, over)).unwrap())
}

/// [`service_set`] carrying the host's finalizer.
fn served() -> Arc<ServiceSet> {
    service_set(json!({"metadata": {"finalizers": [FINALIZER]}}))
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
    let params: Vec<&str> = apply.query.split('&').collect();
    assert!(params.contains(&"fieldManager=ksm-adapter") && params.contains(&"force=true"), "{}", apply.query);
    assert_eq!(apply.body["metadata"]["labels"][MANAGED_LABEL], "true", "{}", apply.body);
    apply.accept();
}

/// Expects the write of the status over version `version`, the one read; the request.
async fn writes_status(server: &mut Scenario, version: &str) -> Asked {
    let put = server.expect("PUT", &format!("{SERVICE_SET}/status")).await;
    assert_eq!(put.body["metadata"]["resourceVersion"], version, "a write over the version read");
    put
}

/// Expects the write of the status over version 1 and accepts it; the status written.
async fn writes_status_once(server: &mut Scenario) -> Value {
    let put = writes_status(server, "1").await;
    let status = put.body["status"].clone();
    put.accept();
    status
}

/// Expects a Warning Event `reason` about `team/prod` whose note says `note`, and accepts it.
async fn warns(server: &mut Scenario, reason: &str, note: &str) {
    let event = server.expect("POST", "/apis/events.k8s.io/v1/namespaces/team/events").await;
    assert_eq!((&event.body["type"], &event.body["reason"]), (&json!("Warning"), &json!(reason)), "{}", event.body);
    assert_eq!(event.body["regarding"]["name"], "prod");
    assert!(event.body["note"].as_str().unwrap().contains(note), "{}", event.body);
    event.accept();
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
    let new = service_set(Value::Null);
    let action = round_against(&new, &ctx, &mut server, async |server| {
        let patch = server.expect("PATCH", SERVICE_SET).await;
        assert_eq!(patch.body, json!({"metadata": {"finalizers": [FINALIZER], "resourceVersion": "1"}}));
        patch.answer(200, serde_json::to_value(&*served()).unwrap());
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change(), "the finalizer comes back through the watch");
    let served = served();
    let action = round_against(&served, &ctx, &mut server, async |server| {
        applies(server, "prod.ingress").await;
        applies(server, "prod.metrics").await;
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change(), "the children come back through the watch");
    assert!(due_a_resync(&ctx, &served), "and the resync pass runs it again");
    let action = round_against(&served, &ctx, &mut server, async |server| {
        let status = writes_status_once(server).await;
        let provisioning = |name: &str| (name.to_string(), "Provisioning".to_string());
        assert_eq!(states(&status), [provisioning("ingress"), provisioning("metrics")], "{status}");
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change());
    assert!(due_a_resync(&ctx, &served));
}

/// Whether the next resync pass runs `service_set` again (its last round ended settled).
fn due_a_resync(ctx: &Context, service_set: &ServiceSet) -> bool {
    ctx.sweeps.is_due(&service_set.namespace().unwrap_or_default(), &service_set.name_any())
}

/// The condition `type_` of `status`.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    let conditions = status["conditions"].as_array().unwrap();
    conditions.iter().find(|c| c["type"] == type_).unwrap_or_else(|| panic!("no {type_}: {status}"))
}

#[tokio::test]
async fn a_name_someone_else_holds_is_never_applied_over_and_the_status_names_it() {
    let users = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                       "metadata": {"name": "prod.ingress", "namespace": "team", "resourceVersion": "5"}});
    let (client, mut server) = mock_api::scenario(vec![(HELM_RELEASES, users)]);
    let ctx = Arc::new(context_with(client, cached()).0);
    let result = round_against(&served(), &ctx, &mut server, async |server| {
        applies(server, "prod.metrics").await;
        let status = writes_status_once(server).await;
        let state = |name: &str, state: &str| (name.to_string(), state.to_string());
        assert_eq!(states(&status), [state("ingress", "Failed"), state("metrics", "Provisioning")], "{status}");
        let applied = condition(&status, APPLIED);
        assert_eq!(applied["status"], "False", "{status}");
        assert!(applied["message"].as_str().unwrap().contains("prod.ingress"), "{status}");
        let theirs = "HelmRelease team/prod.ingress exists and is not this ServiceSet's";
        warns(server, "ServiceFailed", theirs).await;
        warns(server, "ApplyFailed", theirs).await;
    })
    .await;
    let Err(error @ Error::Refused(_)) = result else { panic!("{result:?}") };
    assert!(error.to_string().contains("prod.ingress"), "{error}");
}

#[tokio::test]
async fn a_region_that_cannot_be_reached_is_named_in_the_status() {
    let mut cached = cached();
    fn object<K: serde::de::DeserializeOwned>(kind: &str, name: &str, namespace: Option<&str>, spec: Value) -> K {
        let metadata = json!({"name": name, "namespace": namespace});
        serde_json::from_value(json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": kind,
                                      "metadata": metadata, "spec": spec}))
        .unwrap()
    }
    cached.cluster_deployments = vec![object("ClusterDeployment", "web", Some("team"), json!({"credential": "cred"}))];
    cached.credentials = vec![object("Credential", "cred", Some("team"), json!({"region": "eu"}))];
    cached.regions = vec![object("Region", "eu", None, json!({"kubeConfig": {"name": "eu-kubeconfig"}}))];
    let (client, mut server) = mock_api::scenario(vec![]);
    let ctx = Arc::new(context_with(client, cached).0);
    let record = r#"[{"region":"eu","secret":"kcm-system/eu-kubeconfig","key":"value"}]"#;
    let regional = service_set(json!({"metadata": {"finalizers": [FINALIZER], "annotations": {
        crate::plan::placements::REGIONS_ANNOTATION: record}}, "spec": {"cluster": "web"}}));
    let result = round_against(&regional, &ctx, &mut server, async |server| {
        let secret = "/api/v1/namespaces/kcm-system/secrets/eu-kubeconfig";
        server.expect("GET", secret).await.answer(404, mock_api::not_found(secret));
        let status = writes_status_once(server).await;
        let applied = condition(&status, APPLIED);
        assert_eq!((&applied["status"], &applied["reason"]), (&json!("False"), &json!("RegionUnreachable")));
        assert!(applied["message"].as_str().unwrap().contains("Secret kcm-system/eu-kubeconfig not found"), "{status}");
        warns(server, "RegionUnreachable", "Region eu: Secret kcm-system/eu-kubeconfig not found").await;
    })
    .await;
    let Err(Error::Unreachable(why)) = result else { panic!("{result:?}") };
    assert!(why.starts_with("Region eu: "), "{why}");
}

/// Issue 45: a record naming another namespace's Secret under a region that does not exist made
/// the host read that Secret on every round and quote it in the status. Now the name is forgotten
/// and no Secret is read: the round applies, then writes the record without it.
#[tokio::test]
async fn a_forged_record_reads_no_secret_and_is_forgotten() {
    let (client, mut server) = mock_api::scenario(vec![]);
    let ctx = Arc::new(context_with(client, cached()).0);
    let record = r#"[{"region":"nope3","secret":"other-team/creds-raw","key":"value"}]"#;
    let forged = service_set(json!({"metadata": {"finalizers": [FINALIZER], "annotations": {
        crate::plan::placements::REGIONS_ANNOTATION: record}}}));
    let action = round_against(&forged, &ctx, &mut server, async |server| {
        applies(server, "prod.ingress").await;
        applies(server, "prod.metrics").await;
        let patch = server.expect("PATCH", SERVICE_SET).await;
        let annotations = &patch.body["metadata"]["annotations"];
        assert_eq!(annotations[crate::plan::placements::REGIONS_ANNOTATION], "[]", "{}", patch.body);
        patch.answer(200, serde_json::to_value(&*forged).unwrap());
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change(), "the record's write comes back through the watch");
}

#[tokio::test]
async fn a_deleted_service_set_loses_its_children_then_the_finalizer() {
    let child = |service: &str| {
        json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": format!("prod.{service}"), "namespace": "team", "resourceVersion": "3",
                            "labels": {MANAGED_LABEL: "true", SERVICE_SET_LABEL: "prod", SERVICE_SET_NAMESPACE_LABEL: "team",
                                       SERVICE_SET_UID_LABEL: "uid-1", SERVICE_LABEL: service}}})
    };
    let held = vec![(HELM_RELEASES, child("ingress")), (HELM_RELEASES, child("metrics"))];
    let (client, mut server) = mock_api::scenario(held);
    let ctx = Arc::new(context_with(client, cached()).0);
    let deleted =
        service_set(json!({"metadata": {"finalizers": [FINALIZER], "deletionTimestamp": "2026-11-27T10:00:00Z"}}));
    // As the host's preparation does: the management cluster caches every kind a plugin creates.
    let serving = ctx.serving(&deleted).unwrap();
    ctx.caches.children.listed(serving.kinds()).await;
    let mut kinds: Vec<String> =
        serving.kinds().map(|k| format!("/apis/{}/{}/{}", k.group, k.version, k.plural)).collect();
    let action = round_against(&deleted, &ctx, &mut server, async |server| {
        for name in ["prod.ingress", "prod.metrics"] {
            let delete = server.expect("DELETE", &helm_release(name)).await;
            assert_eq!(delete.body["propagationPolicy"], "Background");
            delete.answer(200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}));
        }
        while !kinds.is_empty() {
            let live = server.expect_one_of("GET", &mut kinds).await;
            assert!(live.query.contains("serviceset-uid%3Duid-1"), "{}", live.query);
            live.answer(
                200,
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                                    "metadata": {}, "items": []}),
            );
        }
        let status = writes_status_once(server).await;
        let deleting = |name: &str| (name.to_string(), "Deleting".to_string());
        assert_eq!(states(&status), [deleting("ingress"), deleting("metrics")], "{status}");
        let patch = server.expect("PATCH", SERVICE_SET).await;
        assert_eq!(patch.body, json!({"metadata": {"finalizers": [], "resourceVersion": "1"}}));
        patch.answer(200, serde_json::to_value(&*deleted).unwrap());
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change(), "gone once the finalizer is");
}

#[tokio::test]
async fn a_status_write_that_lost_a_race_is_retried_at_once_and_written_again() {
    let (client, mut server) = mock_api::scenario(vec![]);
    let ctx = Arc::new(context_with(client, cached()).0);
    let applied = round_against(&served(), &ctx, &mut server, async |server| {
        applies(server, "prod.ingress").await;
        applies(server, "prod.metrics").await;
    })
    .await;
    assert!(applied.is_ok(), "{applied:?}");
    let mut lost = None;
    let result = round_against(&served(), &ctx, &mut server, async |server| {
        let put = writes_status(server, "1").await;
        lost = Some(put.body["status"].clone());
        let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict",
                              "message": "the object has been modified", "code": 409});
        put.answer(409, conflict);
    })
    .await;
    let Err(error @ Error::Stale(_)) = result else { panic!("{result:?}") };
    let cached = CachedServiceSet::pack((*served()).clone()).unwrap();
    assert_eq!(error_policy(&cached, &error, &ctx), Action::requeue(CONFLICT_RETRY), "no backoff");
    let latest = service_set(json!({"metadata": {"finalizers": [FINALIZER], "resourceVersion": "2"}}));
    let action = round_against(&latest, &ctx, &mut server, async |server| {
        let put = writes_status(server, "2").await;
        let verdicts = |status: &Value| {
            let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
            let conditions: Vec<Value> =
                conditions.iter().map(|c| json!([c["type"], c["status"], c["reason"]])).collect();
            (states(status), conditions)
        };
        let lost = lost.as_ref().expect("a status was lost");
        assert_eq!(verdicts(&put.body["status"]), verdicts(lost), "the same status, over the latest version");
        put.accept();
    })
    .await;
    assert_eq!(action.unwrap(), Action::await_change());
    assert!(due_a_resync(&ctx, &latest));
}
