//! Scenario 23: the Fleet plugin, written in JavaScript and built from source, pulled from a
//! loopback registry and serving a `ksm-fleet` SMP: ServiceSets become Fleet HelmOps targeting
//! the Fleet Cluster of each ServiceSet's cluster. The test plays Fleet, writing the status Fleet
//! aggregates from a cluster's BundleDeployment: one cluster's ready, another's failed, each
//! mapped to its ServiceSet; then an uninstall and a deletion. On a real API server, Fleet's own
//! HelmOp CRD validates what the plugin creates, and keeps every HelmOp of its golden cases whole.

use super::schema::{Golden, all_kept_whole, golden_objects};
use ksm_e2e::Scenario;
use ksm_test_harness::env::{Env, report};
use ksm_test_harness::fixtures::{self, ingress_service};
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::{last_deployed_hash, service, service_state};
use ksm_test_harness::{Backend, Mode, WAIT};
use serde_json::{Value, json};

const FLEET: &[u8] = include_bytes!(env!("KSM_FLEET_WASM"));

/// What Fleet writes on a HelmOp whose one target cluster's BundleDeployment is Ready.
fn ready(version: &str) -> Value {
    json!({
        "desiredReadyClusters": 1, "readyClusters": 1, "version": version,
        "summary": {"desiredReady": 1, "ready": 1},
        "display": {"readyBundleDeployments": "1/1"},
        "conditions": [{"type": "Ready", "status": "True", "lastUpdateTime": fixtures::now()}],
    })
}

/// What Fleet writes when the agent on `cluster` (`<namespace>/<name>`) fails to install.
fn err_applied(cluster: &str, message: &str) -> Value {
    json!({
        "desiredReadyClusters": 1, "readyClusters": 0,
        "summary": {"desiredReady": 1, "errApplied": 1,
            "nonReadyResources": [{"name": cluster, "bundleState": "ErrApplied", "message": message}]},
        "display": {"readyBundleDeployments": "0/1", "state": "ErrApplied", "error": true, "message": message},
        "conditions": [{"type": "Ready", "status": "False", "message": message, "lastUpdateTime": fixtures::now()}],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_plugin_in_javascript_deploys_through_helmops() {
    let registry = ksm_test_harness::registry::Registry::start();
    let t = Scenario::start("fleet", Mode::Observe).await;
    // The chart repository a template's chartSpec only names, handed to the plugin by the host.
    t.create(json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
                    "metadata": {"name": "k0rdent-catalog", "namespace": t.namespace()},
                    "spec": {"url": "https://charts.example.com/k0rdent", "interval": "10m"}}))
        .await;
    let kinds = [("fleet.cattle.io", "HelmOp")];
    // The operator registered cluster "core" with Fleet as "core-fleet"; "edge" under its own name.
    let config = json!({"clusters": {"core": "core-fleet"}, "correctDrift": true});
    let provider = t.serve_plugin(&registry, ("fleet", FLEET), &kinds, config, WAIT).await;
    for name in ["edge", "core"] {
        let mut service_set = fixtures::service_set(t.namespace(), name, &provider, json!([ingress_service()]));
        service_set["spec"]["provider"]["config"] = json!(null); // the fixture's config is Flux's
        t.create(service_set).await;
    }

    let edge_op = ObjRef::new(Kind::HelmOp, t.namespace(), "edge.ingress-nginx");
    let op = t.wait_object("created by the Fleet plugin", &edge_op, WAIT, |_| true).await;
    assert_eq!(op["spec"]["targets"], json!([{"clusterName": "edge"}]), "{op:#}");
    let helm = &op["spec"]["helm"];
    assert_eq!(helm["repo"], "https://charts.example.com/k0rdent", "{op:#}");
    assert_eq!((&helm["chart"], &helm["releaseName"]), (&json!("ingress-nginx"), &json!("ingress-nginx")), "{op:#}");
    assert_eq!(helm["values"], json!({"controller": {"replicaCount": 2}}), "values as an object: {op:#}");
    assert_eq!(op["spec"]["defaultNamespace"], "ingress-nginx", "{op:#}");
    assert_eq!(op["spec"]["correctDrift"], json!({"enabled": true}), "the AdapterPlugin's config: {op:#}");
    assert_eq!(op["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"], "edge");
    let core_op = ObjRef::new(Kind::HelmOp, t.namespace(), "core.ingress-nginx");
    let op = t.wait_object("created for the other cluster", &core_op, WAIT, |_| true).await;
    assert_eq!(op["spec"]["targets"], json!([{"clusterName": "core-fleet"}]), "the configured mapping: {op:#}");

    // No BundleDeployment yet: Provisioning, saying which Fleet Cluster it waits for.
    let edge = t
        .wait_service_set("edge", "Provisioning", |ss| service_state(ss, "ingress-nginx") == Some("Provisioning"))
        .await;
    let waiting = format!("Fleet Cluster \\\"{}/edge\\\" registered?", t.namespace());
    assert!(format!("{edge}").contains(&waiting), "the message names the Cluster: {edge:#}");

    // Fleet deploys to edge: its BundleDeployment is Ready. Deployed, with a fingerprint.
    t.set_status(&edge_op, ready("4.11.3")).await;
    let edge = t
        .wait_service_set("edge", "ingress-nginx Deployed", |ss| service_state(ss, "ingress-nginx") == Some("Deployed"))
        .await;
    let deployed = last_deployed_hash(&edge, "ingress-nginx");
    assert_eq!(deployed.len(), 64, "kcm: a Deployed service has a lastDeployedHash: {:#}", edge["status"]);

    // Fleet resolves a newer chart for the same HelmOp: a new deployment, a new fingerprint.
    t.set_status(&edge_op, ready("4.11.4")).await;
    t.wait_service_set("edge", "a new lastDeployedHash", |ss| {
        service_state(ss, "ingress-nginx") == Some("Deployed")
            && !["", &deployed].contains(&last_deployed_hash(ss, "ingress-nginx").as_str())
    })
    .await;

    // The agent on core fails: Failed, with its error, on core's ServiceSet only.
    let cause = "failed to install release: Deployment.apps \"ingress-nginx-controller\" is invalid";
    t.set_status(&core_op, err_applied(&format!("{}/core-fleet", t.namespace()), cause)).await;
    let core = t
        .wait_service_set("core", "ingress-nginx Failed", |ss| service_state(ss, "ingress-nginx") == Some("Failed"))
        .await;
    let message = service(&core, "ingress-nginx").and_then(|s| s["failureMessage"].as_str()).unwrap_or_default();
    assert!(
        message.contains("ErrApplied on Fleet Cluster") && message.contains("ingress-nginx-controller\" is invalid"),
        "{core:#}"
    );
    assert_eq!(service_state(&t.must_get(&t.service_set("edge")).await, "ingress-nginx"), Some("Deployed"));

    // Uninstall on edge: the HelmOp goes (Fleet removes the release), the service ends Deleted.
    let mut uninstall = ingress_service();
    uninstall["helmAction"] = json!("Uninstall");
    t.merge_patch(&t.service_set("edge"), json!({"spec": {"services": [uninstall]}})).await;
    t.wait_gone(&edge_op, WAIT).await;
    t.wait_service_set("edge", "ingress-nginx Deleted", |ss| service_state(ss, "ingress-nginx") == Some("Deleted"))
        .await;

    // Deleting core's ServiceSet deletes its HelmOp, then the ServiceSet goes.
    t.delete(&t.service_set("core")).await;
    t.wait_gone(&core_op, WAIT).await;
    t.wait_gone(&t.service_set("core"), WAIT).await;
}

/// Fleet's own HelmOp CRD (v0.16, installed on a real API server) accepts every HelmOp of the
/// plugin's golden cases and keeps every field of it: what `translate` creates
/// (`testdata/translate/*/expected.yaml`) and the status Fleet writes that `map-status` is
/// tested on (`testdata/status/cases.yaml`, through the status subresource as Fleet writes it).
#[tokio::test(flavor = "multi_thread")]
async fn fleets_own_crd_keeps_every_helmop_of_the_golden_cases() {
    const TEST: &str = "fleet-schema";
    if Backend::selected() == Backend::Simulator {
        report(TEST, "skipped: it needs a real API server (the simulator does not validate against CRD schemas)");
        return;
    }
    let env = Env::start(TEST).await;
    let crd = env.must_get(&ObjRef::cluster(Kind::CustomResourceDefinition, "helmops.fleet.cattle.io")).await;
    let spec_schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert!(
        spec_schema["properties"]["helm"].is_object(),
        "the API server's HelmOp CRD is not Fleet's own (no schema of spec.helm): {spec_schema}"
    );
    let is_helm_op = |(object, _): &Golden| object["kind"] == "HelmOp";
    let (translated, statuses) = golden_objects("fleet-js");
    let (translated, statuses): (Vec<_>, Vec<_>) =
        (translated.into_iter().filter(is_helm_op).collect(), statuses.into_iter().filter(is_helm_op).collect());
    assert!(
        translated.len() >= 8 && statuses.len() >= 12,
        "too few golden HelmOps: {} translated, {} statuses",
        translated.len(),
        statuses.len()
    );
    let problems = all_kept_whole(&env, Kind::HelmOp, translated.into_iter().chain(statuses)).await;
    assert!(problems.is_empty(), "{} problems with Fleet's own schema:\n{}", problems.len(), problems.join("\n"));
}
