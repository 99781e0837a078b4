//! What the host does not own it never takes over or deletes, and a ServiceSet with a name of
//! 253 characters (kcm allows it; a label value holds 63) lives from creation to deletion.

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::status::service;
use ksm_test_harness::{Kind, MANAGED_LABEL, Mode, WAIT};
use serde_json::json;

/// A HelmRelease someone else made, with the name the Flux plugin gives a service's child: the
/// service fails naming it, the other service deploys, and the object is left exactly as it
/// was, also when the ServiceSet goes.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_of_a_childs_name_is_never_taken_over_or_deleted() {
    let t = Scenario::start("ownership", Mode::Observe).await;
    let theirs = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web.ingress-nginx", "namespace": t.namespace(), "labels": {"team": "theirs"}},
        "spec": {"interval": "1h", "chart": {"spec": {"chart": "theirs", "sourceRef": {"kind": "HelmRepository", "name": "theirs"}}}},
    });
    t.create(theirs.clone()).await;
    let theirs_ref = t.obj(Kind::HelmRelease, "web.ingress-nginx");
    let before = t.must_get(&theirs_ref).await;

    let ss = t.create_service_set("web", two_services()).await;
    let failed = t.wait_service_state("web", "ingress-nginx", "Failed", WAIT).await;
    let message = service(&failed, "ingress-nginx").unwrap()["failureMessage"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "HelmRelease {}/web.ingress-nginx exists and is not this ServiceSet's: ksm-adapter did not create it",
            t.namespace()
        )),
        "{message}"
    );
    t.wait_for("cert-manager's HelmRelease", WAIT, async || match t.child("web", "cert-manager").await {
        Some(child) => Ok(child),
        None => Err(json!(null)),
    })
    .await;

    let after = t.must_get(&theirs_ref).await;
    assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "never written");
    assert!(after["metadata"]["labels"].get(MANAGED_LABEL).is_none());

    t.delete(&ss).await;
    t.wait_gone(&ss, WAIT).await;
    let survived = t.must_get(&theirs_ref).await;
    assert_eq!(survived["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "never deleted");
}

/// A 253-character ServiceSet name: children are applied (their labels hold a shortened name,
/// their annotations the whole one), status is written, and deletion completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_service_set_with_a_253_character_name_lives_and_goes() {
    let t = Scenario::start("long-name", Mode::Observe).await;
    let name = format!("{}.{}", "a".repeat(200), "b".repeat(52));
    assert_eq!(name.len(), 253);
    let ss = t.create_service_set(&name, two_services()).await;
    t.wait_converged(&name).await;
    assert_eq!(t.children(&name).await.len(), 2);
    t.delete(&ss).await;
    t.wait_gone(&ss, WAIT).await;
    assert!(t.children(&name).await.is_empty());
}
