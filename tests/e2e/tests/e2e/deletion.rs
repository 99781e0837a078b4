//! Scenario 8: deleting a ServiceSet waits for its children, including one Flux still holds.

use std::time::Duration;

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::status::{has_finalizer, is_deleting, service_state, spec_service_names};
use ksm_test_harness::wait::wait_for;
use ksm_test_harness::{Adapter, FLUX_FINALIZER, Mode, WAIT};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn deletion_waits_for_children() {
    let t = Scenario::start("deletion", Mode::Observe).await;
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    let held = t.child_ref("web", "ingress-nginx").await;
    let free = t.child_ref("web", "cert-manager").await;
    t.merge_patch(&held, json!({"metadata": {"finalizers": [FLUX_FINALIZER]}})).await;

    t.delete(&ss).await;
    t.wait_service_set("web", "deleting, every service Deleting, host finalizer kept", |ss| {
        is_deleting(ss)
            && has_finalizer(ss, &t.host_finalizer())
            && spec_service_names(ss).iter().all(|s| service_state(ss, s) == Some("Deleting"))
    })
    .await;
    t.wait_gone(&free, WAIT).await;
    t.wait_object("deletion requested, held by Flux's finalizer", &held, WAIT, is_deleting).await;

    // While Flux holds the HelmRelease, the ServiceSet stays.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = t.must_get(&ss).await;
    assert!(has_finalizer(&still, &t.host_finalizer()), "the host waits for its children: {:#}", still["metadata"]);

    // Flux finishes: the HelmRelease goes, then the ServiceSet.
    t.clear_finalizers(&held).await;
    t.wait_gone(&held, WAIT).await;
    t.wait_gone(&ss, WAIT).await;
    assert!(t.children("web").await.is_empty());
}

/// Two adapter installations: one never releases the other's finalizer, so a ServiceSet whose
/// host is down stays, children and all, until that host is back to clean up.
#[tokio::test(flavor = "multi_thread")]
async fn another_installation_never_releases_the_hosts_finalizer() {
    let t = Scenario::start("two-hosts", Mode::Observe).await;
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    let child = t.child_ref("web", "ingress-nginx").await;
    let other = Adapter::start_named(&t, "other-adapter", Mode::Observe, &[]);
    // The host goes down; the ServiceSet is deleted while only the other installation runs.
    t.adapter().terminate();
    wait_for("the host to exit after SIGTERM", WAIT, async || t.adapter().exited().ok_or(json!("running"))).await;
    t.delete(&ss).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = t.must_get(&ss).await;
    assert!(is_deleting(&still) && has_finalizer(&still, &t.host_finalizer()), "released: {:#}", still["metadata"]);
    assert!(t.get(&child).await.is_some(), "the other installation deleted the host's child");
    assert!(other.exited().is_none(), "{}", other.failure_context());

    // The host is back: it cleans up and lets the ServiceSet go.
    let back = t.start_another_adapter(&[]);
    wait_for("the host back to clean up", WAIT, async || match (t.get(&child).await, t.get(&ss).await) {
        (None, None) => Ok(()),
        _ => Err(json!(back.log_tail(5))),
    })
    .await;
}
