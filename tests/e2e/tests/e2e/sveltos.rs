//! Scenario 22: kcm's Sveltos adapter as a plugin written in Python (componentize-py), pulled
//! from a loopback registry, serving a `ksm-sveltos` SMP beside the JavaScript Argo CD plugin and
//! the built-in Flux plugin, each on its own ServiceSet. The test plays Sveltos: the
//! ClusterSummary it writes, owned by the Profile the plugin made, reaches `map-status` through the
//! plugin's `reads` and sets the service's state and `lastDeployedHash`. The chart repository
//! reaches both plugins as the HelmRepository the host hands them (contract 0.2.0), without config.

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::{self, ingress_service};
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::{last_deployed_hash, service_state};
use ksm_test_harness::{Mode, WAIT};
use serde_json::{Value, json};
use std::time::Duration;

const SVELTOS: &[u8] = include_bytes!(env!("KSM_SVELTOS_WASM"));
const ARGOCD: &[u8] = include_bytes!(env!("KSM_ARGOCD_WASM"));

/// What Sveltos writes for `profile` on cluster `cluster`: a ClusterSummary it owns, with
/// `status`.
fn cluster_summary(profile: &Value, cluster: &str, status: Value) -> Value {
    let meta = &profile["metadata"];
    json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
        "metadata": {
            "name": format!("p--{}-capi-{cluster}", meta["name"].as_str().unwrap()),
            "namespace": meta["namespace"],
            "ownerReferences": [{"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "Profile",
                "name": meta["name"], "uid": meta["uid"], "controller": true}],
        },
        "spec": {"clusterName": cluster, "clusterNamespace": meta["namespace"], "clusterType": "Capi",
            "clusterProfileSpec": profile["spec"]},
        "status": status,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sveltos_plugin_in_python_serves_beside_argocd_and_flux() {
    let registry = ksm_test_harness::registry::Registry::start();
    let t = Scenario::start("sveltos", Mode::Observe).await;
    // CPython's component is the interpreter and its standard library: large, and slow for
    // cranelift to compile in a debug build on a busy machine (plugins/sveltos-py/README.md has
    // the figures).
    let compiled = Duration::from_secs(300);
    // The OCI registry the template's chart comes from, which its chartSpec only names.
    t.create(json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
                    "metadata": {"name": "k0rdent-catalog", "namespace": t.namespace()},
                    "spec": {"type": "oci", "url": "oci://registry.example.com/k0rdent/charts",
                             "secretRef": {"name": "catalog-auth"}, "interval": "10m"}}))
        .await;
    let kinds = [("config.projectsveltos.io", "Profile"), ("config.projectsveltos.io", "ClusterSummary")];
    let sveltos = t.serve_plugin(&registry, ("sveltos", SVELTOS), &kinds, json!({}), compiled).await;
    let kinds = [("argoproj.io", "Application")];
    let argocd = t.serve_plugin(&registry, ("argocd", ARGOCD), &kinds, json!({}), WAIT).await;

    for (name, provider, config) in [("edge", &sveltos, json!({})), ("apps", &argocd, json!({"project": "default"}))] {
        let mut service_set = fixtures::service_set(t.namespace(), name, provider, json!([ingress_service()]));
        service_set["spec"]["provider"]["config"] = config; // the fixture's config is Flux's
        t.create(service_set).await;
    }
    t.create_service_set("core", json!([ingress_service()])).await;
    let profile_ref = ObjRef::new(Kind::Profile, t.namespace(), "edge.ingress-nginx");
    let profile = t.wait_object("created by the Sveltos plugin", &profile_ref, WAIT, |_| true).await;
    assert_eq!(profile["spec"]["clusterRefs"][0]["name"], "edge", "{profile:#}");
    assert_eq!(profile["spec"]["helmCharts"][0]["releaseName"], "ingress-nginx", "{profile:#}");
    let chart = &profile["spec"]["helmCharts"][0];
    assert_eq!(chart["repositoryURL"], "oci://registry.example.com/k0rdent/charts", "{profile:#}");
    assert_eq!(chart["chartName"], "ingress-nginx", "an OCI chart is named alone: {profile:#}");
    let credentials = json!({"name": "catalog-auth", "namespace": t.namespace()});
    assert_eq!(chart["registryCredentialsConfig"]["credentials"], credentials, "{profile:#}");
    assert_eq!(profile["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"], "edge");
    t.wait_object(
        "created by the Argo CD plugin",
        &ObjRef::new(Kind::Application, t.namespace(), "apps.ingress-nginx"),
        WAIT,
        |_| true,
    )
    .await;
    t.wait_converged("core").await;
    let edge = t
        .wait_service_set("edge", "Provisioning: no ClusterSummary yet", |ss| {
            service_state(ss, "ingress-nginx") == Some("Provisioning")
        })
        .await;
    assert!(format!("{edge}").contains("ClusterSummary"), "the message says what is missing: {edge:#}");

    // Sveltos deploys the chart: its ClusterSummary, owned by the Profile, says Provisioned.
    let provisioned = json!({
        "featureSummaries": [{"featureID": "Helm", "status": "Provisioned", "hash": "aGFzaA=="}],
        // A values hash: Sveltos has installed the release with these values (kcm's rule).
        "helmReleaseSummaries": [{"releaseName": "ingress-nginx", "releaseNamespace": "ingress-nginx", "status": "Managing",
            "valuesHash": "dmFsdWVz"}],
    });
    let summary = cluster_summary(&profile, "edge", json!({}));
    let summary_ref = ObjRef::new(Kind::ClusterSummary, t.namespace(), summary["metadata"]["name"].as_str().unwrap());
    t.create(summary).await;
    t.set_status(&summary_ref, provisioned.clone()).await;
    let edge = t
        .wait_service_set("edge", "ingress-nginx Deployed", |ss| service_state(ss, "ingress-nginx") == Some("Deployed"))
        .await;
    let deployed = last_deployed_hash(&edge, "ingress-nginx");
    assert_eq!(deployed.len(), 64, "kcm: a Deployed service has a lastDeployedHash: {:#}", edge["status"]);

    // Sveltos upgrades the release with new values: the Profile is the same, but what Sveltos
    // deployed is new, and so is the fingerprint.
    let mut upgraded = provisioned;
    upgraded["helmReleaseSummaries"][0]["valuesHash"] = json!("bmV3IHZhbHVlcw==");
    t.set_status(&summary_ref, upgraded).await;
    t.wait_service_set("edge", "a new lastDeployedHash", |ss| {
        service_state(ss, "ingress-nginx") == Some("Deployed")
            && !["", &deployed].contains(&last_deployed_hash(ss, "ingress-nginx").as_str())
    })
    .await;

    // The repository moves: the Profile follows the HelmRepository.
    let repository = ObjRef::new(Kind::HelmRepository, t.namespace(), "k0rdent-catalog");
    t.merge_patch(&repository, json!({"spec": {"url": "oci://mirror.example.com/k0rdent/charts"}})).await;
    t.wait_object("its repositoryURL follows the HelmRepository", &profile_ref, WAIT, |p| {
        p["spec"]["helmCharts"][0]["repositoryURL"] == "oci://mirror.example.com/k0rdent/charts"
    })
    .await;

    // The release fails: the ClusterSummary's failure reaches the ServiceSet, with its message.
    let failed = json!({
        "featureSummaries": [{"featureID": "Helm", "status": "Failed", "failureMessage": "chart ingress-nginx: timed out waiting for the condition"}],
    });
    t.set_status(&summary_ref, failed).await;
    let edge = t
        .wait_service_set("edge", "ingress-nginx not Deployed", |ss| {
            service_state(ss, "ingress-nginx").is_some_and(|s| s != "Deployed")
        })
        .await;
    assert!(format!("{edge}").contains("timed out waiting for the condition"), "{edge:#}");
    let explained = t.explain("edge").await;
    assert_eq!(explained["plugin"]["servedBy"], sveltos.as_str(), "{explained:#}");
}
