//! Scenarios 1 and 2: a ServiceSet is deployed as the plugin translates it, and Flux's status
//! on its HelmReleases shows in its status.

use std::time::Instant;

use ksm_e2e::{STATUS_WAIT, Scenario};
use ksm_test_harness::Mode;
use ksm_test_harness::fixtures::{CERT_MANAGER_TEMPLATE, INGRESS_TEMPLATE, two_services};
use ksm_test_harness::flux::{FluxState, release_snapshot};
use ksm_test_harness::status::{condition_is, condition_message, generation, service, service_state};
use serde_json::{Value, json};

const SERVICES: [&str; 2] = ["ingress-nginx", "cert-manager"];

#[tokio::test(flavor = "multi_thread")]
async fn deploy() {
    let t = Scenario::start("deploy", Mode::Observe).await;
    t.create_service_set("web", two_services()).await;

    // Children exactly as translated, with the host's labels, owner and field manager.
    let expected = t.wait_converged("web").await;
    let ingress = expected.object_of("ingress-nginx");
    assert_eq!(ingress["kind"], "HelmRelease", "the oracle itself: {ingress:#}");
    assert_eq!(ingress["metadata"]["namespace"], t.namespace());
    assert_eq!(
        ingress["spec"]["chartRef"],
        json!({"kind": "HelmChart", "name": INGRESS_TEMPLATE, "namespace": t.namespace()})
    );
    assert_eq!(ingress["spec"]["releaseName"], "ingress-nginx");
    assert_eq!(ingress["spec"]["values"], json!({"controller": {"replicaCount": 2}}));
    assert_eq!(expected.object_of("cert-manager")["spec"]["chartRef"]["name"], CERT_MANAGER_TEMPLATE);

    let ss = t
        .wait_service_set("web", "services Pending/Provisioning, 0/2", |ss| {
            SERVICES.iter().all(|s| matches!(service_state(ss, s), Some("Pending" | "Provisioning")))
                && condition_message(ss, "ServicesInReadyState") == "0/2"
        })
        .await;
    assert_eq!(ss["status"]["provider"]["ready"], true, "{:#}", ss["status"]);
    assert!(condition_is(&ss, "ProviderReady", "True", "ProviderReady"), "{:#}", ss["status"]);
    assert_eq!(ss["status"]["deployed"], false);
    for (name, template) in SERVICES.iter().zip([INGRESS_TEMPLATE, CERT_MANAGER_TEMPLATE]) {
        let entry = service(&ss, name).expect("a status entry per service");
        assert_eq!((entry["type"].as_str(), entry["namespace"].as_str()), (Some("Helm"), Some(*name)), "{entry:#}");
        assert_eq!(entry["template"], template);
        assert!(entry["lastStateTransitionTime"].is_string(), "{entry:#}");
    }
    // status.cluster, which kcm's MultiClusterService controller needs to count the cluster.
    let cluster_deployment = json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
                                    "name": "web", "namespace": t.namespace()});
    assert_eq!(ss["status"]["cluster"], cluster_deployment, "{:#}", ss["status"]);
}

/// A ServiceSet a MultiClusterService produced for the management cluster (kcm names it
/// `management-<hash>`) reports kcm's management pseudo-target as `status.cluster`.
#[tokio::test(flavor = "multi_thread")]
async fn a_multi_cluster_service_set_reports_its_cluster() {
    let t = Scenario::start("mcs-cluster", Mode::Observe).await;
    let mut object =
        t.service_set_object("management-5f2c9a1e", json!([ksm_test_harness::fixtures::ingress_service()]));
    object["spec"]["cluster"] = json!("");
    object["spec"]["multiClusterService"] = json!("global-ingress");
    object["spec"]["provider"]["selfManagement"] = json!(true);
    t.create(object).await;
    let ss =
        t.wait_service_set("management-5f2c9a1e", "status.cluster set", |ss| ss["status"]["cluster"].is_object()).await;
    let management = json!({"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
                            "name": "mgmt", "namespace": "mgmt"});
    assert_eq!(ss["status"]["cluster"], management, "{:#}", ss["status"]);
    t.wait_converged("management-5f2c9a1e").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn flux_status_mapping() {
    let t = Scenario::start("flux-status", Mode::Observe).await;
    t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;

    for name in SERVICES {
        t.set_flux("web", name, FluxState::Ready).await;
    }
    let started = Instant::now();
    let ss = t
        .wait_object("all Deployed, 2/2", &t.service_set("web"), STATUS_WAIT, |ss| {
            SERVICES.iter().all(|s| service_state(ss, s) == Some("Deployed"))
                && ss["status"]["deployed"] == true
                && condition_is(ss, "ServicesInReadyState", "True", "Succeeded")
                && condition_message(ss, "ServicesInReadyState") == "2/2"
        })
        .await;
    eprintln!("Flux Ready reached ServiceSet status after {:?}", started.elapsed());
    assert_eq!(
        service(&ss, "ingress-nginx").unwrap()["version"],
        INGRESS_TEMPLATE,
        "no spec version: the template name"
    );
    assert_eq!(service(&ss, "cert-manager").unwrap()["version"], "v1.16.2", "the spec version");
    let untouched = service(&ss, "cert-manager").unwrap()["lastStateTransitionTime"].clone();
    // kcm: a Deployed service always has a lastDeployedHash, a fingerprint of what Flux deployed.
    let hash = |ss: &Value, name: &str| {
        service(ss, name).unwrap()["lastDeployedHash"].as_str().unwrap_or_default().to_string()
    };
    let deployed = hash(&ss, "ingress-nginx");
    assert!(deployed.len() == 64 && hash(&ss, "cert-manager").len() == 64, "{:#}", ss["status"]);

    for state in [FluxState::InstallFailed, FluxState::RetriesExceeded, FluxState::Reconciling] {
        t.set_flux("web", "ingress-nginx", state).await;
        let started = Instant::now();
        let ss = t
            .wait_object(
                &format!("ingress-nginx {} after Flux {state:?}", state.service_state()),
                &t.service_set("web"),
                STATUS_WAIT,
                |ss| maps_to(ss, "ingress-nginx", state) && condition_message(ss, "ServicesInReadyState") == "1/2",
            )
            .await;
        eprintln!("Flux {state:?} reached ServiceSet status after {:?}", started.elapsed());
        assert_eq!(ss["status"]["deployed"], false, "{:#}", ss["status"]);
        assert!(condition_is(&ss, "ServicesInReadyState", "False", "ServicesNotReady"), "{:#}", ss["status"]);
        let cert_manager = service(&ss, "cert-manager").unwrap();
        assert_eq!(cert_manager["lastStateTransitionTime"], untouched, "changes only when the state changes");
        assert_eq!(hash(&ss, "ingress-nginx"), deployed, "the last deployment, until the next one");
    }

    // Flux upgrades the release with new values: a new deployment, a new fingerprint.
    let r = t.child_ref("web", "ingress-nginx").await;
    let mut upgraded = FluxState::Ready.helm_release_status(generation(&t.must_get(&r).await));
    upgraded["history"] = json!([release_snapshot("sha256:values-2"), release_snapshot("sha256:values-1")]);
    t.set_status(&r, upgraded).await;
    let ss = t
        .wait_object("ingress-nginx Deployed with a new lastDeployedHash", &t.service_set("web"), STATUS_WAIT, |ss| {
            service_state(ss, "ingress-nginx") == Some("Deployed") && hash(ss, "ingress-nginx") != deployed
        })
        .await;
    assert_eq!(hash(&ss, "ingress-nginx").len(), 64);
}

/// Whether service `name` shows what Flux `state` maps to (state, and failure reason if any).
fn maps_to(ss: &Value, name: &str, state: FluxState) -> bool {
    let Some(entry) = service(ss, name) else { return false };
    let message = ksm_test_harness::status::service_note(entry);
    entry["state"] == state.service_state() && state.failure_reason().is_none_or(|reason| message.contains(reason))
}
