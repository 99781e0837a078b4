//! Scenario 10 (simulated server only): injected 500s and 409s and dropped watches delay the
//! host but do not stop it converging, and deletion under faults leaves nothing behind.

use ksm_e2e::{Scenario, skip_unless_simulator};
use ksm_test_apiserver::TestApiServer;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::status::{condition_message, generation, uid};
use ksm_test_harness::{Kind, Mode, ObjRef, WAIT};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn converges_under_faults() {
    if skip_unless_simulator("converges_under_faults", "fault injection") {
        return;
    }
    let t = Scenario::start("faults", Mode::Observe).await;
    let server = t.server().expect("the simulated server");

    // Applies, finalizer and status writes fail first.
    server.fail_next("patch", 3, 500);
    server.fail_next("update", 3, 500);
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    t.drain_faults().await;

    // Watches drop and the status write that follows Flux's news meets a conflict.
    server.drop_watches();
    server.fail_next("update", 1, 409);
    server.fail_next("patch", 1, 409);
    for service in ["ingress-nginx", "cert-manager"] {
        set_flux_directly(server, &t.child_ref("web", service).await, FluxState::Ready);
    }
    t.wait_service_set("web", "deployed, 2/2", |ss| {
        ss["status"]["deployed"] == true && condition_message(ss, "ServicesInReadyState") == "2/2"
    })
    .await;
    t.drain_faults().await;

    // A change made right after the watches drop again still arrives.
    server.drop_watches();
    let mut services = two_services();
    services[1]["values"] = json!("crds:\n  enabled: false\n");
    t.merge_patch(&ss, json!({"spec": {"services": services}})).await;
    t.wait_converged("web").await;

    // Deletion with failing deletes and writes: nothing is orphaned.
    let owner = uid(&t.must_get(&ss).await).to_string();
    t.delete(&ss).await;
    server.fail_next("delete", 2, 500);
    server.fail_next("patch", 2, 500);
    server.fail_next("update", 2, 500);
    server.drop_watches();
    // Six failed rounds in a row back off 0.5 + 1 + 2 + 4 + 8 + 16 s before the seventh: give
    // the deletion twice the usual wait (the host's own status writes no longer wake it early).
    t.wait_gone(&ss, WAIT * 2).await;
    for kind in Kind::CHILDREN {
        for object in t.list(kind, t.namespace(), "").await {
            let owners = &object["metadata"]["ownerReferences"];
            let owned = owners.as_array().into_iter().flatten().any(|o| o["uid"] == owner.as_str());
            assert!(!owned, "orphaned child of the deleted ServiceSet: {object:#}");
        }
    }
    assert!(t.children("web").await.is_empty());
}

/// Plays Flux without going through HTTP, so the failures queued for the host are left to it.
fn set_flux_directly(server: &TestApiServer, child: &ObjRef, state: FluxState) {
    let mut object = server
        .object(&child.kind.api_version(), child.kind.name(), Some(&child.namespace), &child.name)
        .unwrap_or_else(|| panic!("{child} exists"));
    object["status"] = state.helm_release_status(generation(&object));
    server.put_object(object).unwrap_or_else(|e| panic!("writing the status of {child}: {e}"));
}
