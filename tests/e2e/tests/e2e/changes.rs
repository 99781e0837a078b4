//! Scenarios 3 and 4: spec changes, removed and uninstalled services, and the pause annotation
//! reach the children.

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::status::status_service_names;
use ksm_test_harness::{Mode, PAUSE_ANNOTATION, WAIT};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn spec_changes() {
    let t = Scenario::start("changes", Mode::Observe).await;
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;

    // A service's values change: its HelmRelease follows.
    let mut services = two_services();
    services[0]["values"] = json!("controller:\n  replicaCount: 3\n");
    t.merge_patch(&ss, json!({"spec": {"services": services}})).await;
    let expected = t.wait_converged("web").await;
    assert_eq!(expected.object_of("ingress-nginx")["spec"]["values"], json!({"controller": {"replicaCount": 3}}));

    // A service leaves the spec: its HelmRelease is deleted, its status entry goes.
    let removed = t.child_ref("web", "cert-manager").await;
    t.merge_patch(&ss, json!({"spec": {"services": [services[0]]}})).await;
    t.wait_gone(&removed, WAIT).await;
    let expected = t.wait_converged("web").await;
    assert_eq!(expected.objects().len(), 1);

    // helmAction Uninstall: the HelmRelease is deleted, the service stays listed, Deleted (kcm's
    // state for an uninstalled service).
    let uninstalled = t.child_ref("web", "ingress-nginx").await;
    services[0]["helmAction"] = json!("Uninstall");
    t.merge_patch(&ss, json!({"spec": {"services": [services[0]]}})).await;
    t.wait_gone(&uninstalled, WAIT).await;
    let expected = t.wait_converged("web").await;
    assert!(expected.objects().is_empty(), "Uninstall translates to no object: {:#}", expected.translation);
    let status = t.wait_service_state("web", "ingress-nginx", "Deleted", WAIT).await;
    assert_eq!(status["status"]["deployed"], false, "an uninstalled service is not deployed");
    assert_eq!(status_service_names(&status), ["ingress-nginx"]);
    assert!(t.children("web").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn pause() {
    let t = Scenario::start("pause", Mode::Observe).await;
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;

    t.merge_patch(&ss, json!({"metadata": {"annotations": {PAUSE_ANNOTATION: "true"}}})).await;
    let expected = t.wait_children_match("web").await;
    for (service, object) in expected.objects() {
        assert_eq!(object["spec"]["suspend"], true, "{service} is suspended while paused");
    }

    t.merge_patch(&ss, json!({"metadata": {"annotations": {PAUSE_ANNOTATION: null}}})).await;
    t.wait_children_match("web").await;
    for child in t.children("web").await {
        assert!(child["spec"].get("suspend").is_none(), "resumed: no suspend field: {:#}", child["spec"]);
    }
}
