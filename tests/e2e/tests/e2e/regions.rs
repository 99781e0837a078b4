//! Regional clusters (kcm 1.12): a ServiceSet whose ClusterDeployment's Credential names a Region
//! is served on the regional cluster, reached through the Region's kubeconfig Secret: its
//! HelmRelease is applied, watched and deleted there, and its status comes back from there. On
//! envtest a second API server plays the region.

use ksm_e2e::adapter::http_get;
use ksm_e2e::env::{another_cluster, kubeconfig_client, report};
use ksm_e2e::fixtures::ingress_service;
use ksm_e2e::flux::FluxState;
use ksm_e2e::objects::Objects;
use ksm_e2e::status::{generation, service_state};
use ksm_e2e::{Backend, Kind, MANAGED_LABEL, Mode, ObjRef, Scenario, WAIT};
use serde_json::{Value, json};

/// The Flux CRDs, which the CD tool on the region serves.
fn flux_crd(crd: &Value) -> bool {
    crd["spec"]["group"].as_str().is_some_and(|group| group.ends_with(".toolkit.fluxcd.io"))
}

/// The ClusterDeployment `name`, whose Credential `credential` names `region` (empty: none).
fn cluster(namespace: &str, name: &str, credential: &str, region: &str) -> [Value; 2] {
    let credential_object = json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "Credential",
        "metadata": {"name": credential, "namespace": namespace},
        "spec": {"identityRef": {"apiVersion": "v1", "kind": "Secret", "name": "identity", "namespace": namespace},
                 "region": region}});
    let cd = json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": "aws-standalone-cp-1-0-0", "credential": credential}});
    [credential_object, cd]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_regional_service_sets_helm_release_lives_on_the_region_and_its_status_comes_back() {
    let Some(region) = another_cluster("regions", flux_crd).await else { return };
    let t = Scenario::start("regions", Mode::Observe).await;
    let ns = t.namespace().to_string();
    let remote = Objects::new(kubeconfig_client(region.admin_kubeconfig()).await.expect("a client of the region"));
    remote.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await;

    // The region is onboarded from a ClusterDeployment: its kubeconfig Secret on management.
    let kubeconfig = std::fs::read_to_string(region.admin_kubeconfig()).expect("the region's kubeconfig");
    t.create(json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "eu-mgmt-kubeconfig", "namespace": ns},
                    "stringData": {"value": kubeconfig}}))
        .await;
    let region_name = format!("{ns}-eu");
    t.create(json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "Region",
                    "metadata": {"name": region_name},
                    "spec": {"clusterDeployment": {"name": "eu-mgmt", "namespace": ns}}}))
        .await;
    for object in cluster(&ns, "web", "eu-credential", &region_name) {
        t.create(object).await;
    }
    let [_, api_cd] = cluster(&ns, "api", "eu-credential", &region_name);
    t.create(api_cd).await;
    // A cluster without a region beside it stays on the management cluster.
    for object in cluster(&ns, "local", "local-credential", "") {
        t.create(object).await;
    }

    t.create_service_set("web", json!([ingress_service()])).await;
    t.create_service_set("api", json!([ingress_service()])).await;
    t.create_service_set("local", json!([ingress_service()])).await;
    let managed = format!("{MANAGED_LABEL}=true");
    let release = t
        .wait_for("the HelmReleases of web and api on the region", WAIT, async || {
            let found = remote.list(Kind::HelmRelease, &ns, &managed).await;
            let web = found.iter().find(|r| r["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"] == "web");
            match web {
                Some(release) if found.len() == 2 => Ok(release.clone()),
                _ => Err(json!(found)),
            }
        })
        .await;
    // The child cluster's kubeconfig Secret is the one on the region, of the same name.
    assert_eq!(release["spec"]["kubeConfig"]["secretRef"]["name"], "web-kubeconfig", "{release:#}");
    assert_eq!(release["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"], "web", "{release:#}");
    t.wait_converged("local").await;
    let here = t.children("web").await;
    assert!(here.is_empty(), "nothing of web on the management cluster: {here:#?}");
    assert_eq!(t.children("local").await.len(), 1, "local is served on the management cluster");
    // Two ServiceSets through one region: one client, one watch per kind the Flux plugin creates.
    let (code, metrics) = http_get(&format!("{}/metrics", t.adapter().metrics_url())).await;
    assert_eq!(code, 200);
    for series in [r#"ksm_cluster_clients{purpose="region"} 1"#, "ksm_region_watches 2"] {
        assert!(metrics.lines().any(|line| line == series), "{series} missing from /metrics:\n{metrics}");
    }

    // Flux on the region reports the release ready: the status comes back.
    let r = ObjRef::of(&release);
    remote.set_status(&r, FluxState::Ready.helm_release_status(generation(&release))).await;
    let ss = t
        .wait_service_set("web", "ingress-nginx Deployed from the region's HelmRelease", |ss| {
            service_state(ss, "ingress-nginx") == Some("Deployed")
        })
        .await;
    assert_eq!(ss["status"]["deployed"], true);

    // Deleted: the HelmRelease goes from the region, then the ServiceSet.
    t.delete(&t.service_set("web")).await;
    t.wait_for("the region's HelmRelease to be gone", WAIT, async || match remote.get(&r).await {
        Some(object) => Err(object),
        None => Ok(()),
    })
    .await;
    t.wait_gone(&t.service_set("web"), WAIT).await;
    drop(region);
}

/// A Credential naming a Region that does not exist: the ServiceSet says so, naming the Region
/// and the field, and nothing is applied anywhere.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_region_is_named_in_the_status_and_nothing_is_applied() {
    let Some(t) = with_kcm_crds("regions-missing").await else { return };
    let ns = t.namespace().to_string();
    for object in cluster(&ns, "web", "eu-credential", "nowhere") {
        t.create(object).await;
    }
    t.create_service_set("web", json!([ingress_service()])).await;
    let message = unreachable_region(&t, "web").await;
    assert_eq!(message, format!("Region nowhere (spec.region of Credential {ns}/eu-credential) not found"));
    assert!(t.children("web").await.is_empty());
}

/// A Region whose kubeconfig points at the cloud's metadata address (which the adapters of the
/// tests do not allow): refused before any connection, named in the status like an unreachable
/// region, and nothing is applied.
#[tokio::test(flavor = "multi_thread")]
async fn a_region_at_a_refused_address_is_named_in_the_status_and_nothing_is_applied() {
    let Some(t) = with_kcm_crds("regions-refused").await else { return };
    let ns = t.namespace().to_string();
    let kubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
        contexts: [{name: c, context: {cluster: k, user: u}}]\n\
        clusters: [{name: k, cluster: {server: 'https://169.254.169.254'}}]\nusers: [{name: u, user: {token: t}}]\n";
    t.create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "eu-mgmt-kubeconfig", "namespace": ns},
                    "stringData": {"value": kubeconfig}}))
        .await;
    let region_name = format!("{ns}-eu");
    t.create(json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "Region", "metadata": {"name": region_name},
                    "spec": {"clusterDeployment": {"name": "eu-mgmt", "namespace": ns}}}))
        .await;
    for object in cluster(&ns, "web", "eu-credential", &region_name) {
        t.create(object).await;
    }
    t.create_service_set("web", json!([ingress_service()])).await;
    let message = unreachable_region(&t, "web").await;
    let refused = format!(
        "Region {region_name}: Secret {ns}/eu-mgmt-kubeconfig key \"value\": server https://169.254.169.254/ \
         connects to 169.254.169.254: a cloud metadata address, which the host does not connect to unless \
         --allow-cluster-addresses names metadata"
    );
    assert!(message.contains(&refused), "{message}");
    assert!(t.children("web").await.is_empty());
}

/// The scenario `test` where kcm's ClusterDeployment, Credential and Region CRDs are served
/// (envtest); elsewhere the skip is reported.
async fn with_kcm_crds(test: &str) -> Option<Scenario> {
    if Backend::selected() != Backend::Envtest {
        report(test, "skipped: needs kcm's ClusterDeployment, Credential and Region CRDs (envtest)");
        return None;
    }
    Some(Scenario::start(test, Mode::Observe).await)
}

/// The message of ServiceSet `name`'s condition `ObjectsApplied=False` (`RegionUnreachable`),
/// once it is written.
async fn unreachable_region(t: &Scenario, name: &str) -> String {
    let objects_applied = |ss: &Value| -> Option<Value> {
        let conditions = ss["status"]["conditions"].as_array()?;
        conditions.iter().find(|c| c["type"] == "ObjectsApplied" && c["reason"] == "RegionUnreachable").cloned()
    };
    let ss =
        t.wait_service_set(name, "ObjectsApplied False, RegionUnreachable", |ss| objects_applied(ss).is_some()).await;
    let condition = objects_applied(&ss).unwrap();
    assert_eq!(condition["status"], "False", "{condition:#}");
    condition["message"].as_str().unwrap_or_default().to_string()
}

/// Management, region and target, three API servers: the health of a regional ServiceSet's
/// service is read on its target cluster through the kubeconfig Secret on the region (where kcm
/// keeps it), not on the management cluster.
#[tokio::test(flavor = "multi_thread")]
async fn a_regional_services_health_is_read_through_the_kubeconfig_on_the_region() {
    let Some(region) = another_cluster("regions-health", flux_crd).await else { return };
    let Some(target) = another_cluster("regions-health", |_| false).await else { return };
    let t = Scenario::start_with("regions-health", Mode::Observe, &["--health-poll-seconds", "1"]).await;
    let ns = t.namespace().to_string();
    let on_region = Objects::new(kubeconfig_client(region.admin_kubeconfig()).await.expect("a client of the region"));
    let on_target = Objects::new(kubeconfig_client(target.admin_kubeconfig()).await.expect("a client of the target"));
    let read = |path: &std::path::Path| std::fs::read_to_string(path).expect("a kubeconfig");

    let region_name = format!("{ns}-eu");
    t.create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "eu-mgmt-kubeconfig", "namespace": ns},
                    "stringData": {"value": read(region.admin_kubeconfig())}}))
        .await;
    t.create(json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "Region", "metadata": {"name": region_name},
                    "spec": {"clusterDeployment": {"name": "eu-mgmt", "namespace": ns}}}))
        .await;
    for object in cluster(&ns, "web", "eu-credential", &region_name) {
        t.create(object).await;
    }
    let rules = include_str!("../../../../deploy/chart/files/health-rules.yaml");
    t.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "defaults", "namespace": ns, "labels": {"k0rdent.mirantis.com/health-rule-target": "global"}},
                    "data": {"rules": rules}}))
        .await;
    // The child cluster's kubeconfig lives on the region only.
    on_region.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await;
    on_region
        .create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-kubeconfig", "namespace": ns},
                       "stringData": {"value": read(target.admin_kubeconfig())}}))
        .await;
    // On the target: the release's Deployment wants a replica that never runs (no kubelet).
    on_target.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ingress-nginx"}})).await;
    let mut deployment = ksm_e2e::fixtures::workload("ingress-nginx", "ingress-nginx-controller", 1);
    deployment["metadata"]["labels"]["app.kubernetes.io/instance"] = json!("ingress-nginx");
    on_target.create(deployment).await;

    t.create_service_set("web", json!([ingress_service()])).await;
    let managed = format!("{MANAGED_LABEL}=true");
    let release = t
        .wait_for("the HelmRelease of web on the region", WAIT, async || {
            let mut found = on_region.list(Kind::HelmRelease, &ns, &managed).await;
            found.pop().ok_or_else(|| json!(found))
        })
        .await;
    on_region.set_status(&ObjRef::of(&release), FluxState::Ready.helm_release_status(generation(&release))).await;
    let ss = t
        .wait_service_set("web", "ingress-nginx Provisioning, held by its Deployment on the target", |ss| {
            service_state(ss, "ingress-nginx") == Some("Provisioning")
                && ss["status"]["services"][0]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "ServiceHealthDeployment"))
        })
        .await;
    let conditions = ss["status"]["services"][0]["conditions"].as_array().unwrap();
    let health = conditions.iter().find(|c| c["type"] == "ServiceHealthDeployment").unwrap();
    assert_eq!(health["reason"], "DeploymentUnhealthy", "{health:#}");
    assert!(
        health["message"].as_str().unwrap().starts_with("Deployment ingress-nginx/ingress-nginx-controller: 0/1"),
        "{health:#}"
    );
    drop((region, target));
}
