//! Scenarios 5 and 6 (observe mode): the provider gate, and ServiceSets this adapter does not
//! serve.

use std::collections::BTreeMap;
use std::time::Duration;

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::{self, set_workload_ready, two_services};
use ksm_test_harness::status::{condition_is, condition_is_current, condition_message, resource_version};
use ksm_test_harness::{ADAPTER_LABEL, ADAPTER_NAME, Mode, ObjRef};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn provider_suspended_and_not_ready() {
    let t = Scenario::start("provider", Mode::Observe).await;
    let ss = t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    let deployed = child_versions(&t, "web").await;

    // Suspended: the state is copied, nothing is applied, not even a spec change.
    t.set_smp_suspended(true).await;
    t.wait_service_set("web", "provider suspended", |ss| {
        ss["status"]["provider"]["suspended"] == true && condition_is(ss, "ProviderReady", "False", "ProviderSuspended")
    })
    .await;
    let mut services = two_services();
    services[0]["values"] = json!("controller:\n  replicaCount: 5\n");
    t.merge_patch(&ss, json!({"spec": {"services": services}})).await;
    t.wait_service_set("web", "the changed spec seen while suspended", |ss| {
        condition_is(ss, "ProviderReady", "False", "ProviderSuspended") && condition_is_current(ss, "ProviderReady")
    })
    .await;
    assert_eq!(child_versions(&t, "web").await, deployed, "no child changes while the provider is suspended");

    // Not ready (kcm says so); the host explains why in the condition message.
    set_workload_ready(&t, ADAPTER_NAME, false).await;
    t.set_smp_ready(false).await;
    t.set_smp_suspended(false).await;
    let status = t
        .wait_service_set("web", "ProviderNotReady naming the failing SMP condition", |ss| {
            condition_is(ss, "ProviderReady", "False", "ProviderNotReady")
                && condition_message(ss, "ProviderReady").contains("AdapterReady=False")
                // Both are omitempty: false is absent.
                && ss["status"]["provider"]["ready"] != true
                && ss["status"]["provider"]["suspended"] != true
        })
        .await;
    eprintln!("ProviderNotReady message: {}", condition_message(&status, "ProviderReady"));
    assert_eq!(child_versions(&t, "web").await, deployed, "no child changes while the provider is not ready");

    // Ready again: the pending spec change is applied.
    set_workload_ready(&t, ADAPTER_NAME, true).await;
    t.set_smp_ready(true).await;
    let expected = t.wait_converged("web").await;
    assert_eq!(expected.object_of("ingress-nginx")["spec"]["values"], json!({"controller": {"replicaCount": 5}}));
    let status = t.must_get(&ss).await;
    assert!(condition_is(&status, "ProviderReady", "True", "ProviderReady"), "{:#}", status["status"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn not_served() {
    let t = Scenario::start("not-served", Mode::Observe).await;
    // Labels the SMP's selector does not match.
    let mut unlabelled = t.service_set_object("other-labels", two_services());
    unlabelled["metadata"]["labels"][ADAPTER_LABEL] = json!("someone-else");
    t.create(unlabelled).await;
    // An SMP whose adapter is another Deployment.
    let other = t.create_smp("other", "other-adapter", Some(true)).await;
    t.create(fixtures::service_set(t.namespace(), "other-adapter", &other.name, two_services())).await;

    // Created last and converged: the adapter has seen the others.
    t.create_service_set("served", two_services()).await;
    t.wait_converged("served").await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    for name in ["other-labels", "other-adapter"] {
        let ss = t.must_get(&t.service_set(name)).await;
        let finalizers = ss["metadata"]["finalizers"].as_array().map_or(0, Vec::len);
        assert_eq!(finalizers, 0, "{name}: not served, no finalizer: {:#}", ss["metadata"]);
        assert!(ss["status"].is_null(), "{name}: not served, no status: {:#}", ss["status"]);
        assert!(t.children(name).await.is_empty(), "{name}: not served, no children");
    }
    let other = t.must_get(&other).await;
    assert_eq!(other["status"], fixtures::smp_status(true), "another adapter's SMP is left alone");
}

/// resourceVersion of every child of a ServiceSet.
async fn child_versions(t: &Scenario, service_set: &str) -> BTreeMap<ObjRef, String> {
    let children: Vec<Value> = t.children(service_set).await;
    children.iter().map(|c| (ObjRef::of(c), resource_version(c).to_string())).collect()
}
