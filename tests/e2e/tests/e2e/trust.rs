//! Issue 45, the trust boundary: an actor writes everything its real rights let it write, as a
//! ServiceAccount whose token the real RBAC authorizer judges, and nothing it writes makes the
//! host do, outside the actor's namespace, what the actor could not do itself (docs/security.md).
//! The host meanwhile keeps serving: `/healthz` answers within 1 s and another ServiceSet
//! converges. These need envtest: the simulator has no authorizer to hold an actor to its rights.

use ksm_e2e::Scenario;
use ksm_test_harness::adapter::http_get;
use ksm_test_harness::env::{Backend, kubeconfig_client, report};
use ksm_test_harness::fixtures::{cert_manager_service, ingress_service};
use ksm_test_harness::objects::Objects;
use ksm_test_harness::status::{condition_message, service};
use ksm_test_harness::{Kind, Mode, ObjRef, TEST_NAMESPACE_LABEL, WAIT};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The host's record, on a ServiceSet, of the regions its children went to.
const REGIONS_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/regions";

/// The scenario of `test` (the adapter with `extra_args`), where it can hold an actor to its
/// rights; `None`, said, where it cannot.
async fn start(test: &str, extra_args: &[&str]) -> Option<Scenario> {
    if Backend::selected() != Backend::Envtest {
        report(test, "skipped: it needs envtest (a real RBAC authorizer and the TokenRequest API)");
        return None;
    }
    Some(Scenario::start_with(test, Mode::Observe, extra_args).await)
}

/// A client acting as ServiceAccount `name` of the test's namespace, bound there to a Role of
/// `rules` and nothing else.
async fn actor(t: &Scenario, name: &str, rules: Value) -> Objects {
    let ns = t.namespace();
    t.create(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}})).await;
    let metadata = json!({"name": name, "namespace": ns});
    t.create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata,
                    "rules": rules}))
        .await;
    t.create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata,
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}))
        .await;
    let plane = t.control_plane().await.expect("envtest");
    let admin = kubeconfig_client(t.kubeconfig()).await.expect("the test's client");
    let path = t.workdir().join(format!("{name}.kubeconfig"));
    let path = plane.service_account_kubeconfig(&admin, ns, name, &path).await.unwrap_or_else(|e| panic!("{e:#}"));
    Objects::new(kubeconfig_client(&path).await.expect("the actor's client"))
}

/// A loopback listener standing in for another namespace's cluster: it counts the connections
/// made to it and answers none.
struct Listener {
    address: std::net::SocketAddr,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Listener { address, connections, task }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls `/healthz` every 250 ms for `period`: how long each answer took, and its code.
fn poll_healthz(t: &Scenario, period: Duration) -> tokio::task::JoinHandle<Vec<(Option<u16>, Duration)>> {
    let url = format!("{}/healthz", t.adapter().metrics_url());
    tokio::spawn(async move {
        let (started, mut answers) = (Instant::now(), Vec::new());
        while started.elapsed() < period {
            let asked = Instant::now();
            let answer = tokio::time::timeout(Duration::from_secs(1), http_get(&url)).await;
            answers.push((answer.ok().map(|(code, _)| code), asked.elapsed()));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        answers
    })
}

/// Issue 45, items 1, 2 and 7: whoever may edit ServiceSets in one namespace (and nothing else)
/// writes a regions record naming another namespace's Secrets under Regions that do not exist:
/// one whose text is not a kubeconfig (its status quoted it), one a kubeconfig of a cluster (the
/// host connected with it). Nothing of the other namespace reaches anything the editor can read,
/// no connection is made, the names are forgotten; a record the editor then garbles does not hold
/// the finalizer of the ServiceSet it deletes.
#[tokio::test(flavor = "multi_thread")]
async fn a_service_set_editor_reaches_no_other_namespace() {
    let Some(t) = start("trust-editor", &[]).await else { return };
    let ns = t.namespace().to_string();
    let other = format!("{ns}-x");
    let secret_text = format!("hunter2-{ns}");
    let cluster = Listener::start().await;
    t.create(json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": other, "labels": {TEST_NAMESPACE_LABEL: ns}}}))
        .await;
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
         clusters: [{{name: k, cluster: {{server: 'http://{}'}}}}]\nusers: [{{name: u, user: {{token: '{secret_text}'}}}}]\n",
        cluster.address
    );
    for (name, value) in
        [("creds-raw", format!("token: '{secret_text}\nnot: [a kubeconfig\n")), ("prod-kubeconfig", kubeconfig)]
    {
        t.create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": other},
                        "stringData": {"value": value}}))
            .await;
    }
    let editor = actor(
        &t,
        "servicesets-editor",
        json!([{"apiGroups": ["k0rdent.mirantis.com"], "resources": ["servicesets"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]),
    )
    .await;
    let other_secret = ObjRef::new(Kind::Secret, &other, "creds-raw");
    let refused = editor.api(Kind::Secret, &other).get(&other_secret.name).await.unwrap_err();
    assert_eq!(ksm_test_harness::objects::error_code(&refused), Some(403), "the editor may not read it itself");

    let healthz = poll_healthz(&t, Duration::from_secs(15));
    let record = json!([{"region": "nope3", "secret": format!("{other}/creds-raw"), "key": "value"},
                        {"region": "nope4", "secret": format!("{other}/prod-kubeconfig"), "key": "value"}]);
    let mut forged = t.service_set_object("forged", json!([ingress_service()]));
    forged["metadata"]["annotations"] = json!({REGIONS_ANNOTATION: record.to_string()});
    editor.create(forged).await;
    t.create_service_set("bystander", json!([cert_manager_service()])).await;

    let ss = t
        .wait_service_set("forged", "served, the forged names forgotten", |ss| {
            ss["metadata"]["annotations"][REGIONS_ANNOTATION] == "[]" && ss["status"]["services"].is_array()
        })
        .await;
    t.wait_converged("bystander").await;
    tokio::time::sleep(Duration::from_secs(5)).await; // rounds enough for a read of the Secret to show
    let seen = editor.must_get(&t.service_set("forged")).await.to_string();
    for word in [secret_text.as_str(), "creds-raw", "prod-kubeconfig", other.as_str()] {
        assert!(!seen.contains(word), "the editor reads {word:?} in its ServiceSet: {seen}");
    }
    assert_eq!(cluster.connections.load(Ordering::SeqCst), 0, "no connection with the other namespace's kubeconfig");
    let log = std::fs::read_to_string(t.adapter().log_path()).unwrap_or_default();
    assert!(!log.contains(&secret_text), "the Secret's text reached even the host's log");
    assert!(ss["metadata"]["finalizers"].as_array().is_some_and(|f| f.contains(&json!(t.host_finalizer()))));

    // The editor garbles the record, then deletes the ServiceSet: the finalizer goes all the same.
    let forged_ref = t.service_set("forged");
    editor.merge_patch(&forged_ref, json!({"metadata": {"annotations": {REGIONS_ANNOTATION: "garbled{"}}})).await;
    editor.delete(&forged_ref).await;
    t.wait_gone(&forged_ref, WAIT).await;

    let answers = healthz.await.expect("the /healthz poller");
    assert!(answers.len() >= 10, "polled over 15 s: {answers:?}");
    for (answer, took) in &answers {
        assert_eq!(*answer, Some(200), "/healthz answered {answer:?} after {took:?}: {answers:?}");
    }
    assert_eq!(cluster.connections.load(Ordering::SeqCst), 0, "no connection with the other namespace's kubeconfig");
}

/// kcm's `kcm-namespace-admin` rules (shared/reference/api-facts.md, "Who writes what"): in its
/// namespace a namespace admin writes ClusterDeployments, ClusterIPAMClaims, Secrets,
/// Credentials, Service and ClusterTemplates, HelmCharts and HelmRepositories, and reads what the
/// viewer reads; no ConfigMaps, no ServiceSets.
fn namespace_admin_rules() -> Value {
    let edit = ["create", "delete", "get", "list", "patch", "update", "watch"];
    let create = ["create", "delete", "get", "list", "watch"];
    let read = ["get", "list", "watch"];
    json!([
        {"apiGroups": ["k0rdent.mirantis.com"], "resources": ["clusterdeployments", "clusteripamclaims"], "verbs": edit},
        {"apiGroups": ["k0rdent.mirantis.com"], "resources": ["credentials", "servicetemplates", "clustertemplates"],
         "verbs": create},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": create},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": read},
        {"apiGroups": ["helm.toolkit.fluxcd.io"], "resources": ["helmcharts", "helmrepositories"], "verbs": edit},
        {"apiGroups": ["k0rdent.mirantis.com"],
         "resources": ["servicetemplatechains", "clustertemplatechains", "clusterauditpolicies"], "verbs": read},
    ])
}

/// Issue 45, item 4: a namespace admin's `deploymentType: Local` template (its own Git URL)
/// became a Kustomization on the management cluster with neither `kubeConfig` nor
/// `serviceAccountName`, which kustomize-controller applies with its own cluster-wide rights.
/// Now it runs as the namespace's own account (`--local-service-account`, default `default`),
/// as Flux's `--default-service-account` lockdown does. The admin is held to its rights: it may
/// write neither a ServiceSet nor a ConfigMap.
#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_admins_local_template_runs_as_its_namespaces_account() {
    let Some(t) = start("trust-admin", &[]).await else { return };
    let ns = t.namespace().to_string();
    let admin = actor(&t, "namespace-admin", namespace_admin_rules()).await;
    for (kind, object) in [
        (Kind::ServiceSet, t.service_set_object("own", json!([ingress_service()]))),
        (
            Kind::ConfigMap,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rules", "namespace": ns}}),
        ),
    ] {
        let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
        let refused = admin.api(kind, &ns).create(&Default::default(), &object).await.unwrap_err();
        assert_eq!(ksm_test_harness::objects::error_code(&refused), Some(403), "{kind:?}: not the admin's to write");
    }

    // The admin's template, its own Git repository, deployed where the object is (Local); kcm
    // reports it valid and names the source it made.
    let template = "tenant-policies";
    admin
        .create(json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceTemplate",
                       "metadata": {"name": template, "namespace": ns},
                       "spec": {"resources": {"deploymentType": "Local", "path": "./policies",
                                "remoteSourceSpec": {"git": {"url": "https://git.example/tenant/policies",
                                                             "ref": {"tag": "v1.0.0"}, "interval": "10m"}}}}}))
        .await;
    let source = json!({"kind": "GitRepository", "name": template, "namespace": ns});
    t.set_status(&ObjRef::new(Kind::ServiceTemplate, &ns, template), json!({"valid": true, "sourceStatus": source}))
        .await;
    t.create_service_set("tenant", json!([{"name": "policies", "namespace": ns, "template": template}])).await;

    let kustomization = t
        .wait_for("the tenant's Kustomization", WAIT, async || match t.child("tenant", "policies").await {
            Some(child) if child["kind"] == "Kustomization" => Ok(child),
            other => Err(json!(other)),
        })
        .await;
    let spec = &kustomization["spec"];
    assert!(spec.get("kubeConfig").is_none(), "Local: on the management cluster: {kustomization:#}");
    assert_eq!(spec["serviceAccountName"], "default", "runs as the namespace's account: {kustomization:#}");
    assert_eq!(kustomization["metadata"]["namespace"], ns.as_str());
}

/// The most the host may hold resident through a tenant's huge answers and rule ConfigMaps
/// (measured: 110 MiB, a debug build): its own footprint and one look's total (32 MiB) a few
/// times over.
const PEAK_RSS: u64 = 256 << 20;

/// `count` health rules for Deployments, as a rule ConfigMap's `rules` text.
fn deployment_rules(count: usize) -> String {
    "- {group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: 'true'}\n".repeat(count)
}

/// Issue 45, items 5 and 6: a namespace admin's `<cluster>-kubeconfig` names a server it runs
/// (here a loopback one answering every list with 12 MiB and a next page), and whoever may
/// write ConfigMaps in the namespace writes two `global` rule ConfigMaps of 64 rules each. One
/// look reads no more than its total (32 MiB, then one answer more at most) and says so in the
/// status; the namespace's rules count once against its budget across ConfigMaps (the second
/// ConfigMap is named, not loaded); `/healthz` answers within 1 s and another ServiceSet
/// converges throughout, and the host's peak RSS stays under [`PEAK_RSS`].
#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_target_and_rules_cost_the_host_no_more_than_their_budgets() {
    let Some(t) = start("trust-budgets", &["--health-poll-seconds", "1"]).await else { return };
    let target = ksm_e2e::fake_cluster::FakeCluster::start(ksm_e2e::fake_cluster::Misbehaviour::Huge(12 << 20)).await;
    let ns = t.namespace().to_string();
    let admin = actor(&t, "namespace-admin", namespace_admin_rules()).await;
    let writer = actor(
        &t,
        "configmap-writer",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list", "watch"]}]),
    )
    .await;
    admin
        .create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-kubeconfig", "namespace": ns},
                       "stringData": {"value": target.kubeconfig()}}))
        .await;
    for name in ["rules-a", "rules-b"] {
        writer
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": ns,
                                        "labels": {"k0rdent.mirantis.com/health-rule-target": "global"}},
                           "data": {"rules": deployment_rules(64)}}))
            .await;
    }
    let healthz = poll_healthz(&t, Duration::from_secs(15));
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    t.set_flux("web", "ingress-nginx", ksm_test_harness::flux::FluxState::Ready).await;
    t.create_service_set("api", json!([cert_manager_service()])).await;
    t.wait_converged("api").await;

    let health = |ss: &Value| {
        let conditions = service(ss, "ingress-nginx")?["conditions"].as_array()?;
        conditions.iter().find(|c| c["type"] == "ServiceHealth").cloned()
    };
    let ss = t
        .wait_service_set("web", "its look stopped at the look's total", |ss| {
            health(ss).is_some_and(|c| c["message"].as_str().is_some_and(|m| m.contains("in one look")))
        })
        .await;
    let message = health(&ss).unwrap()["message"].as_str().unwrap().to_string();
    let spent =
        format!("not verified: the cluster of Secret {ns}/web-kubeconfig answered more than 32 MiB in one look");
    assert!(message.contains(&spent), "{message}");
    let sent = target.total_sent();
    assert!(sent <= (32 + 16) << 20, "one look read {sent} bytes from the tenant's server: {message}");
    let rules = condition_message(&ss, "ServiceSetHealthRules");
    assert!(rules.contains(&format!("{ns}/rules-b")) && rules.contains("not loaded"), "{ss:#}");
    assert!(!rules.contains(&format!("{ns}/rules-a")), "the first ConfigMap by name is loaded whole: {rules}");

    let answers = healthz.await.expect("the /healthz poller");
    for (answer, took) in &answers {
        assert_eq!(*answer, Some(200), "/healthz answered {answer:?} after {took:?}: {answers:?}");
    }
    let peak = t.adapter().peak_rss().expect("the host's peak RSS");
    eprintln!("trust-budgets: the host's peak RSS {} MiB", peak >> 20);
    assert!(peak < PEAK_RSS, "the host held {} MiB at its peak", peak >> 20);
}
