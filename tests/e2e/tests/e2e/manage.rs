//! Scenario 7: in manage mode the host evaluates its own SMP and writes its status.

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::{READINESS_RULE, ingress_service, set_workload_ready};
use ksm_test_harness::status::{condition_is, condition_message};
use ksm_test_harness::{ADAPTER_NAME, Mode, WAIT};
use serde_json::{Value, json};

/// The four SMP conditions and the reason each has when True.
const READY_CONDITIONS: [(&str, &str); 4] = [
    ("RBACReady", "RBACEnsuredSuccessfully"),
    ("AdapterReady", "AdapterEnsuredSuccessfully"),
    ("ProvisionerReady", "ProvisionerEnsuredSuccessfully"),
    ("ProvisionerCRDsReady", "ProvisionerCRDsEnsuredSuccessfully"),
];

#[tokio::test(flavor = "multi_thread")]
async fn manage_mode() {
    let t = Scenario::start("manage", Mode::Manage).await;
    wait_smp_ready(&t).await;
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;

    // The adapter Deployment becomes unavailable.
    set_workload_ready(&t, ADAPTER_NAME, false).await;
    wait_smp_condition(&t, "AdapterReady", "AdapterNotReady").await;
    t.wait_service_set("web", "ProviderNotReady with the host's diagnosis", |ss| {
        condition_is(ss, "ProviderReady", "False", "ProviderNotReady")
            && condition_message(ss, "ProviderReady").contains("AdapterReady=False")
    })
    .await;
    set_workload_ready(&t, ADAPTER_NAME, true).await;
    wait_smp_ready(&t).await;
    t.wait_service_set("web", "ProviderReady again", |ss| condition_is(ss, "ProviderReady", "True", "ProviderReady"))
        .await;

    // A rule that reads a missing field cannot be evaluated. On the simulated server the host
    // also loses its permissions on HelmReleases; it checks permissions again when the SMP
    // changes (the checks are cached per SMP generation), i.e. with this change.
    let denied = deny_helm_releases(&t);
    let rule = |rule: &str| json!({"spec": {"adapter": {"readinessRule": rule}}});
    t.merge_patch(t.smp(), rule("self.status.noSuchField > 0")).await;
    let smp = wait_smp_condition(&t, "AdapterReady", "FailedToEvaluateReadiness").await;
    eprintln!("AdapterReady message: {}", condition_message(&smp, "AdapterReady"));
    t.merge_patch(t.smp(), rule(READINESS_RULE)).await;
    if !denied {
        ksm_test_harness::env::report(
            "manage_mode",
            "the RBACReady=False part skipped: it needs the simulator's `deny`",
        );
        wait_smp_ready(&t).await;
        return;
    }
    let smp = wait_smp_condition(&t, "RBACReady", "RBACNotReady").await;
    eprintln!("RBACReady message: {}", condition_message(&smp, "RBACReady"));
    let smp = t
        .wait_object("the good rule back, RBAC still denied", t.smp(), WAIT, |smp| {
            condition_is(smp, "AdapterReady", "True", "AdapterEnsuredSuccessfully")
                && condition_is(smp, "RBACReady", "False", "RBACNotReady")
        })
        .await;
    assert!(condition_message(&smp, "RBACReady").contains("helmreleases"), "{:#}", smp["status"]);
}

/// On the simulated server, makes every access review of HelmReleases answer "denied";
/// returns whether it could.
fn deny_helm_releases(t: &Scenario) -> bool {
    let Some(server) = t.server() else { return false };
    for verb in ["get", "list", "watch", "create", "update", "patch", "delete"] {
        server.deny(verb, "helm.toolkit.fluxcd.io", "helmreleases");
    }
    true
}

/// Waits until the host wrote `ready: true` with the four conditions True.
async fn wait_smp_ready(t: &Scenario) -> Value {
    t.wait_object("ready, four conditions True", t.smp(), WAIT, |smp| {
        smp["status"]["ready"] == true
            && READY_CONDITIONS.iter().all(|(type_, reason)| condition_is(smp, type_, "True", reason))
    })
    .await
}

/// Waits until the host wrote `ready: false` with condition `type_` False for `reason`.
async fn wait_smp_condition(t: &Scenario, type_: &str, reason: &str) -> Value {
    t.wait_object(&format!("not ready, {type_}=False ({reason})"), t.smp(), WAIT, |smp| {
        smp["status"]["ready"] == false && condition_is(smp, type_, "False", reason)
    })
    .await
}
