//! Scenario 11: a ServiceSet the plugin rejects gets the plugin's reason in its status, and
//! does not hold up another ServiceSet of the namespace.

use ksm_e2e::Scenario;
use ksm_e2e::expect::Expected;
use ksm_test_harness::Mode;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::status::{condition_is, condition_message};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn invalid_config_is_isolated() {
    let t = Scenario::start("bad-input", Mode::Observe).await;
    let mut bad = t.service_set_object("bad-config", two_services());
    bad["spec"]["provider"]["config"] = json!({"unknownField": 1});
    t.create(bad).await;
    t.create_service_set("good", two_services()).await;

    t.wait_converged("good").await;
    let bad = t
        .wait_service_set("bad-config", "ServicesTranslated False (InvalidConfig)", |ss| {
            condition_is(ss, "ServicesTranslated", "False", "InvalidConfig")
        })
        .await;
    let message = condition_message(&bad, "ServicesTranslated");
    assert!(message.contains("unknownField"), "the plugin's message names the field: {message:?}");
    assert!(t.children("bad-config").await.is_empty());

    let expected = Expected::translate(&t, "bad-config").await;
    assert_eq!(expected.error().map(|e| &e["kind"]), Some(&json!("InvalidConfig")), "{:#}", expected.translation);
}

/// A child the API server refuses (422, e.g. the CD tool's CRD rejects a field) is named in
/// condition `ObjectsApplied`, retried, and the condition goes once the apply succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_child_is_reported_then_retried() {
    if ksm_e2e::skip_unless_simulator("a_refused_child_is_reported_then_retried", "fault injection") {
        return;
    }
    let t = Scenario::start("refused", Mode::Observe).await;
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;

    // The next patches the adapter makes are applies of the changed HelmRelease (the spec is
    // changed behind HTTP, so the injected failures are left to the adapter).
    let server = t.server().expect("the simulated server");
    let mut changed = t.must_get(&ss).await;
    changed["spec"]["services"][0]["values"] = json!("controller:\n  replicaCount: 5\n");
    server.fail_next("patch", 3, 422); // refused three times: visible for seconds (backoff)
    server.put_object(changed).expect("changing the ServiceSet");
    let refused = t
        .wait_service_set("web", "ObjectsApplied False (ApplyFailed)", |ss| {
            condition_is(ss, "ObjectsApplied", "False", "ApplyFailed")
        })
        .await;
    let message = condition_message(&refused, "ObjectsApplied");
    assert!(message.contains("HelmRelease") && message.contains("injected failure"), "{message:?}");

    t.wait_converged("web").await;
    t.wait_service_set("web", "ObjectsApplied gone after the retry", |ss| {
        ksm_test_harness::status::condition(ss, "ObjectsApplied").is_none()
    })
    .await;
}

/// A ServiceSet whose status another writer filled in a shape the host's types lack (a state a
/// newer kcm may add, no `lastStateTransitionTime`, a condition without a reason) does not stop
/// the ServiceSet cache: a ServiceSet created after it converges.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_the_host_cannot_read_does_not_stop_the_cache() {
    if ksm_e2e::skip_unless_simulator("unreadable-status", "kcm v1.12's schema refuses such a status") {
        return;
    }
    let t = Scenario::start("unreadable", Mode::Observe).await;
    let mut theirs = t.service_set_object("kcm-served", two_services());
    theirs["spec"]["provider"]["name"] = json!("kcm-sveltos");
    t.create(theirs).await;
    let status = json!({
        "deployed": false,
        "services": [{"type": "Helm", "name": "ingress-nginx", "namespace": "", "template": "t", "state": "Upgrading"}],
        "conditions": [{"type": "Ready", "status": "True"}],
    });
    t.set_status(&t.service_set("kcm-served"), status).await;
    t.create_service_set("good", two_services()).await;
    t.wait_converged("good").await;
}
