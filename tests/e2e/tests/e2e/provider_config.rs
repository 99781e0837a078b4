//! kcm's keys in `spec.provider.config` (kcm's adapter reads `driftIgnore`, `driftExclusions`,
//! `maxConsecutiveFailures` there): the Flux plugin's mappings reach a HelmRelease that Flux's
//! schema keeps whole, and a key a Kustomization cannot honour is reported. The ServiceSets are
//! the plugin's golden cases.

use ksm_e2e::Scenario;
use ksm_test_harness::Mode;
use ksm_test_harness::status::{condition_is, condition_message, service, service_state};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn drift_keys_and_max_failures_reach_the_helm_release() {
    let t = Scenario::start("kcm-keys", Mode::Observe).await;
    t.create_flux_golden_case("helm-kcm-drift-and-retries", "drift").await;
    t.wait_converged("drift").await;

    // The live object: a field Flux's HelmRelease schema lacked would have been pruned.
    let live = t.child("drift", "ingress-nginx").await.expect("the HelmRelease");
    let spec = &live["spec"];
    assert_eq!(spec["driftDetection"]["mode"], "enabled", "{spec:#}");
    let ignore = spec["driftDetection"]["ignore"].as_array().expect("ignore rules");
    assert_eq!(ignore.len(), 4, "two driftExclusions, two driftIgnore: {ignore:#?}");
    assert_eq!(
        ignore[0],
        json!({"paths": ["/spec/replicas"],
            "target": {"kind": "Deployment", "labelSelector": "app.kubernetes.io/name=ingress-nginx"}})
    );
    assert_eq!(
        ignore[2],
        json!({"paths": [""], "target": {"group": "apps", "version": "v1", "kind": "Deployment",
            "namespace": "ingress-nginx", "name": "ingress-nginx-controller"}}),
        "a driftIgnore selector ignores its whole objects"
    );
    assert_eq!(spec["install"]["remediation"]["retries"], 2, "3 consecutive failures: 2 retries");
    assert_eq!(spec["upgrade"]["remediation"]["retries"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_a_kustomization_cannot_honour_is_reported() {
    let t = Scenario::start("kcm-keys-refused", Mode::Observe).await;
    t.create_flux_golden_case("kustomize-kcm-keys-refused", "mixed").await;
    let mixed = t
        .wait_service_set("mixed", "ServicesTranslated False (ServiceErrors), podinfo Failed", |ss| {
            condition_is(ss, "ServicesTranslated", "False", "ServiceErrors")
                && service_state(ss, "podinfo") == Some("Failed")
        })
        .await;
    let message = condition_message(&mixed, "ServicesTranslated");
    assert!(
        message.contains("podinfo") && message.contains("driftIgnore") && message.contains("maxConsecutiveFailures"),
        "the condition names the service and the keys: {message:?}"
    );
    let failure = service(&mixed, "podinfo").expect("podinfo's status")["failureMessage"].as_str().unwrap_or_default();
    assert!(failure.contains("driftIgnore"), "{failure:?}");

    // The Helm service honours the keys; the Kustomize one gets no object.
    t.wait_children_match("mixed").await;
    let release = t.child("mixed", "ingress-nginx").await.expect("the HelmRelease");
    assert_eq!(release["spec"]["driftDetection"]["mode"], "enabled");
    assert!(t.child("mixed", "podinfo").await.is_none(), "no Kustomization without the keys");
}
