//! Regional clusters (kcm 1.12): a ServiceSet whose ClusterDeployment's Credential names a Region
//! is served on the regional cluster, reached through the Region's kubeconfig Secret: its
//! HelmRelease is applied, watched and deleted there, and its status comes back from there. On
//! envtest a second control plane plays the region, as a real one runs: kube-controller-manager
//! with its garbage collector, and the CRDs kcm installs there (k0rdent's and Flux's).

use ksm_e2e::Scenario;
use ksm_test_harness::adapter::http_get;
use ksm_test_harness::env::{another_cluster, kubeconfig_client, report};
use ksm_test_harness::fixtures::ingress_service;
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::objects::Objects;
use ksm_test_harness::status::{generation, service_state};
use ksm_test_harness::{Backend, Kind, MANAGED_LABEL, Mode, ObjRef, WAIT};
use serde_json::{Value, json};
use std::time::Duration;

/// The host's record, on a ServiceSet, of the regions its children went to.
const REGIONS_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/regions";

/// The CRDs of a regional cluster: Flux's, which the CD tool there serves, and k0rdent's, which
/// kcm installs there. With k0rdent's, the region's garbage collector resolves an
/// ownerReference to a ServiceSet, finds none there and deletes the object.
fn region_crd(crd: &Value) -> bool {
    crd["spec"]["group"]
        .as_str()
        .is_some_and(|group| group.ends_with(".toolkit.fluxcd.io") || group == "k0rdent.mirantis.com")
}

/// Waits until the region's garbage collector deletes a HelmRelease whose owner, a ServiceSet of
/// the test's namespace, does not exist there: it watches HelmReleases by then (it learns new
/// kinds at its discovery resync, every 30 s), so a HelmRelease that named its ServiceSet as
/// owner would be deleted as well.
async fn collects_orphans(t: &Scenario, remote: &Objects) {
    let probe = remote
        .create(json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "orphan", "namespace": t.namespace(), "ownerReferences": [{
                "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet", "name": "web",
                "uid": "00000000-0000-4000-8000-000000000000", "controller": true}]},
            "spec": {"interval": "10m", "chartRef": {"kind": "OCIRepository", "name": "orphan"}}}))
        .await;
    let probe = ObjRef::of(&probe);
    t.wait_for(
        "the region's garbage collector to delete an orphaned HelmRelease",
        Duration::from_secs(120),
        async || match remote.get(&probe).await {
            Some(object) => Err(object),
            None => Ok(()),
        },
    )
    .await;
}

/// Onboards the cluster of `region` as Region `<namespace>-eu` from a ClusterDeployment: its
/// kubeconfig Secret `eu-mgmt-kubeconfig` on management, and the test's namespace there;
/// returns the Region's name and a client of the region.
async fn onboard(t: &Scenario, region: &ksm_test_harness::envtest::ControlPlane) -> (String, Objects) {
    let ns = t.namespace();
    let remote = Objects::new(kubeconfig_client(region.admin_kubeconfig()).await.expect("a client of the region"));
    remote.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await;
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
    (region_name, remote)
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
    let Some(region) = another_cluster("regions", region_crd).await else { return };
    let t = Scenario::start("regions", Mode::Observe).await;
    let ns = t.namespace().to_string();
    let (region_name, remote) = onboard(&t, &region).await;
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
    // `explain` reads the children where they are, through the Region's kubeconfig Secret.
    let explained = t.explain("web").await;
    assert_eq!(explained["region"]["name"], region_name.as_str(), "{explained:#}");
    assert_eq!(explained["region"]["kubeconfig"], format!("Secret {ns}/eu-mgmt-kubeconfig key value"), "{explained:#}");
    let service = &explained["services"][0];
    assert_eq!(service["state"], "Deployed", "{explained:#}");
    let child = format!("HelmRelease {ns}/{}", release["metadata"]["name"].as_str().unwrap());
    assert_eq!(service["children"], json!([{"object": child, "state": "applied, up to date"}]), "{explained:#}");
    assert_eq!(explained["statusUpToDate"], true, "{explained:#}");

    // An ownerReference names an object of one cluster: the region has no ServiceSet of that
    // uid, and its garbage collector would delete the HelmReleases (and the host create them
    // again, in a loop). They carry none, and stay as they are: same uid, not written again.
    collects_orphans(&t, &remote).await;
    let settled = remote.list(Kind::HelmRelease, &ns, &managed).await;
    for release in &settled {
        assert!(release["metadata"].get("ownerReferences").is_none(), "{release:#}");
    }
    let versions = |releases: &[Value]| -> Vec<(Value, Value)> {
        let mut seen: Vec<_> =
            releases.iter().map(|r| (r["metadata"]["uid"].clone(), r["metadata"]["resourceVersion"].clone())).collect();
        seen.sort_by_key(|(uid, _)| uid.to_string());
        seen
    };
    let before = versions(&settled);
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = versions(&remote.list(Kind::HelmRelease, &ns, &managed).await);
        assert_eq!(
            now,
            before,
            "after {:?}: the region's HelmReleases were deleted, created or written",
            start.elapsed()
        );
    }

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
        "Region {region_name}: Secret {ns}/eu-mgmt-kubeconfig key \"value\": the server is a cloud metadata \
         address, which the host does not connect to unless --allow-cluster-addresses names metadata"
    );
    assert!(message.contains(&refused) && !message.contains("169.254.169.254"), "{message}");
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
    let Some(region) = another_cluster("regions-health", region_crd).await else { return };
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
    let mut deployment = ksm_test_harness::fixtures::workload("ingress-nginx", "ingress-nginx-controller", 1);
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
    // Until the target's deployment controller observes the Deployment, the rule says its
    // generation is not observed yet (also true); then that its replica is not available.
    let unavailable = "Deployment ingress-nginx/ingress-nginx-controller: 0/1";
    let ss = t
        .wait_service_set("web", "ingress-nginx Provisioning, held by its Deployment on the target", |ss| {
            service_state(ss, "ingress-nginx") == Some("Provisioning")
                && ss["status"]["services"][0]["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == "ServiceHealthDeployment"
                            && c["message"].as_str().is_some_and(|m| m.starts_with(unavailable))
                    })
                })
        })
        .await;
    let conditions = ss["status"]["services"][0]["conditions"].as_array().unwrap();
    let health = conditions.iter().find(|c| c["type"] == "ServiceHealthDeployment").unwrap();
    assert_eq!(health["reason"], "DeploymentUnhealthy", "{health:#}");
    // `explain` comes to the same verdict through the same two kubeconfigs.
    let explained = t.explain("web").await;
    assert_eq!(explained["region"]["name"], region_name.as_str(), "{explained:#}");
    let service = &explained["services"][0];
    assert_eq!(service["state"], "Provisioning", "{explained:#}");
    assert_eq!(service["health"], json!({"verdict": "Unhealthy", "why": [health["message"]]}), "{explained:#}");
    assert_eq!(explained["statusUpToDate"], true, "{explained:#}");
    drop((region, target));
}

/// Children are deleted where they are, not where the route points now, and never left behind:
/// after a host restart (the region's caches are new), after the region's kubeconfig Secret is
/// rewritten (a new client and new caches), after the ClusterDeployment is deleted first (the
/// route points at the management cluster), and while the region does not answer (the finalizer
/// stays, the status names the region, and the children go once it answers again).
#[tokio::test(flavor = "multi_thread")]
async fn regional_children_are_deleted_where_they_are() {
    let Some(region) = another_cluster("regions-deletion", region_crd).await else { return };
    let mut t = Scenario::start("regions-deletion", Mode::Observe).await;
    let ns = t.namespace().to_string();
    let (region_name, remote) = onboard(&t, &region).await;
    let [credential, _] = cluster(&ns, "w1", "eu-credential", &region_name);
    t.create(credential).await;
    let names = ["restarted", "rotated", "unrouted", "unanswered"];
    for name in names {
        let [_, cd] = cluster(&ns, name, "eu-credential", &region_name);
        t.create(cd).await;
        t.create_service_set(name, json!([ingress_service()])).await;
    }
    let on_region = async |name: &str| {
        let selector = format!("{MANAGED_LABEL}=true,ksm.k0rdent.mirantis.com/serviceset={name}");
        remote.list(Kind::HelmRelease, &ns, &selector).await
    };
    for name in names {
        t.wait_for(&format!("the HelmRelease of {name} on the region"), WAIT, async || {
            let found = on_region(name).await;
            if found.len() == 1 { Ok(()) } else { Err(json!(found)) }
        })
        .await;
        let ss = t.must_get(&t.service_set(name)).await;
        let record = ss["metadata"]["annotations"][REGIONS_ANNOTATION].as_str().unwrap_or_default().to_string();
        assert!(record.contains(&format!(r#""region":"{region_name}""#)), "the region is recorded: {ss:#}");
    }
    let gone_everywhere = async |t: &Scenario, name: &str| {
        t.wait_for(&format!("the HelmRelease of {name} gone from the region"), WAIT, async || {
            let found = on_region(name).await;
            if found.is_empty() { Ok(()) } else { Err(json!(found)) }
        })
        .await;
        t.wait_gone(&t.service_set(name), WAIT).await;
        assert!(t.children(name).await.is_empty(), "nothing of {name} on the management cluster");
    };

    // The region's kubeconfig Secret is rewritten (same cluster, new text): new client, new caches.
    let kubeconfig = std::fs::read_to_string(region.admin_kubeconfig()).expect("the region's kubeconfig");
    let secret = t.obj(Kind::Secret, "eu-mgmt-kubeconfig");
    t.merge_patch(&secret, json!({"stringData": {"value": format!("{kubeconfig}\n# rotated\n")}})).await;
    t.delete(&t.service_set("rotated")).await;
    gone_everywhere(&t, "rotated").await;

    // The region hangs: the finalizer stays and the status says why, until it answers again.
    region.pause("kube-apiserver", true);
    let deleted = std::time::Instant::now();
    t.delete(&t.service_set("unanswered")).await;
    let ss = t
        .wait_service_set("unanswered", "ObjectsApplied False, RegionUnreachable, naming the region", |ss| {
            ss["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == "ObjectsApplied"
                        && c["reason"] == "RegionUnreachable"
                        && c["message"].as_str().is_some_and(|m| m.contains(&format!("Region {region_name}")))
                })
            })
        })
        .await;
    let held =
        |ss: &Value| ss["metadata"]["finalizers"].as_array().is_some_and(|f| f.contains(&json!(t.host_finalizer())));
    assert!(held(&ss), "{ss:#}");
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(deleted.elapsed())).await;
    let ss = t.must_get(&t.service_set("unanswered")).await;
    assert!(held(&ss), "20 s after the deletion the finalizer holds: {ss:#}");
    region.pause("kube-apiserver", false);
    gone_everywhere(&t, "unanswered").await;

    // A restart: the new process holds no cache of the region when the deletions come, one of a
    // ServiceSet routed there, one whose ClusterDeployment went first (its route now says the
    // management cluster).
    t.restart_adapter(&[]).await;
    t.delete(&t.obj(Kind::ClusterDeployment, "unrouted")).await;
    t.delete(&t.service_set("unrouted")).await;
    t.delete(&t.service_set("restarted")).await;
    gone_everywhere(&t, "restarted").await;
    gone_everywhere(&t, "unrouted").await;
    drop(region);
}
