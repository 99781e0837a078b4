//! Scenario 8: deleting a ServiceSet waits for its children, including one Flux still holds.

use std::time::Duration;

use ksm_e2e::fixtures::two_services;
use ksm_e2e::status::{has_finalizer, is_deleting, service_state, spec_service_names};
use ksm_e2e::{FLUX_FINALIZER, HOST_FINALIZER, Mode, Scenario, WAIT};
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
            && has_finalizer(ss, HOST_FINALIZER)
            && spec_service_names(ss).iter().all(|s| service_state(ss, s) == Some("Deleting"))
    })
    .await;
    t.wait_gone(&free, WAIT).await;
    t.wait_object("deletion requested, held by Flux's finalizer", &held, WAIT, is_deleting).await;

    // While Flux holds the HelmRelease, the ServiceSet stays.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = t.must_get(&ss).await;
    assert!(has_finalizer(&still, HOST_FINALIZER), "the host waits for its children: {:#}", still["metadata"]);

    // Flux finishes: the HelmRelease goes, then the ServiceSet.
    t.clear_finalizers(&held).await;
    t.wait_gone(&held, WAIT).await;
    t.wait_gone(&ss, WAIT).await;
    assert!(t.children("web").await.is_empty());
}
