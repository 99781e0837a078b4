//! Service health on the target cluster (kcm 1.12's verifier): once Flux says a Helm service is
//! Deployed, the host looks at the release's workloads on the ServiceSet's cluster, through its
//! kubeconfig Secret `<cluster>-kubeconfig`, by the rules of the ConfigMaps that apply. On
//! envtest a second API server plays the target cluster.

use k8s_openapi::ByteString;
use ksm_e2e::Scenario;
use ksm_e2e::fake_cluster::{FakeCluster, Misbehaviour};
use ksm_test_harness::adapter::http_get;
use ksm_test_harness::env::{another_cluster, kubeconfig_client};
use ksm_test_harness::fixtures::{cert_manager_service, ingress_service, workload};
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::objects::Objects;
use ksm_test_harness::status::{condition_message, service, service_state};
use ksm_test_harness::{Kind, Mode, ObjRef, TEST_NAMESPACE_LABEL};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The rules the chart ships as its cluster-wide defaults.
const DEFAULT_RULES: &str = include_str!("../../../../deploy/chart/files/health-rules.yaml");
/// Looks again at a demoted service this often (the default is 15 s).
const POLL: [&str; 2] = ["--health-poll-seconds", "1"];

fn rules(namespace: &str, name: &str, target: &str, rules: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace, "labels": {"k0rdent.mirantis.com/health-rule-target": target}},
           "data": {"rules": rules}})
}

/// The condition `type_` of the service `name` in a ServiceSet, if any.
fn service_condition(ss: &Value, name: &str, type_: &str) -> Option<Value> {
    let conditions = service(ss, name)?.get("conditions")?.as_array()?.clone();
    conditions.into_iter().find(|c| c["type"] == type_)
}

fn condition<'a>(ss: &'a Value, type_: &str) -> Option<&'a Value> {
    ss["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_is_provisioning_while_its_workload_on_the_target_cluster_is_unavailable() {
    let Some(target) = another_cluster("health", |_| false).await else { return };
    let t = Scenario::start_with("health", Mode::Observe, &POLL).await;
    let remote = Objects::new(kubeconfig_client(target.admin_kubeconfig()).await.expect("a client of the target"));
    let kubeconfig = std::fs::read_to_string(target.admin_kubeconfig()).expect("the target's kubeconfig");
    t.create(json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "web-kubeconfig", "namespace": t.namespace()},
                    "stringData": {"value": kubeconfig}}))
        .await;
    // The chart's rules as the tenant's defaults, and a broken rule for this cluster beside them.
    t.create(rules(t.namespace(), "defaults", "global", DEFAULT_RULES)).await;
    let broken = "- {group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: 'obj.status.('}";
    t.create(rules(t.namespace(), "broken", "web", broken)).await;

    // On the target: the release's Deployment wants one replica, which never runs (no kubelet).
    remote.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ingress-nginx"}})).await;
    let mut deployment = workload("ingress-nginx", "ingress-nginx-controller", 1);
    deployment["metadata"]["labels"]["app.kubernetes.io/instance"] = json!("ingress-nginx");
    remote.create(deployment).await;

    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    t.set_flux("web", "ingress-nginx", FluxState::Ready).await;
    let ss = t
        .wait_service_set("web", "ingress-nginx Provisioning, held by its Deployment's replicas", |ss| {
            // On envtest a first look may come before the target's deployment controller has
            // observed the Deployment ("generation 1 not observed yet"); the next look sees it.
            service_state(ss, "ingress-nginx") == Some("Provisioning")
                && service_condition(ss, "ingress-nginx", "ServiceHealthDeployment")
                    .is_some_and(|c| c["message"].as_str().is_some_and(|m| m.contains("replicas ready")))
        })
        .await;
    let health = service_condition(&ss, "ingress-nginx", "ServiceHealthDeployment").unwrap();
    assert_eq!((&health["status"], &health["reason"]), (&json!("False"), &json!("DeploymentUnhealthy")), "{health:#}");
    let message = health["message"].as_str().unwrap();
    let expected = format!(
        "Deployment ingress-nginx/ingress-nginx-controller: 0/1 replicas ready, 0 updated (rule {}/defaults#0)",
        t.namespace()
    );
    assert_eq!(message, expected);
    assert_eq!(ss["status"]["deployed"], false);
    assert_eq!(condition_message(&ss, "ServicesInReadyState"), "0/1");
    let rules_condition = condition(&ss, "ServiceSetHealthRules").expect("the rules condition");
    assert_eq!(
        (&rules_condition["status"], &rules_condition["reason"]),
        (&json!("False"), &json!("HealthRuleInvalid"))
    );
    let named = rules_condition["message"].as_str().unwrap();
    assert!(named.starts_with(&format!("{}/broken#0: healthy: ", t.namespace())), "{named}");
    assert!(!named.contains("defaults"), "the good rules are not named: {named}");
    // `explain` reads the same rules and workloads and comes to the same verdict.
    let explained = t.explain("web").await;
    let explained_service = &explained["services"][0];
    let (name, state) = (&explained_service["name"], &explained_service["state"]);
    assert_eq!((name, state), (&json!("ingress-nginx"), &json!("Provisioning")), "{explained:#}");
    assert_eq!(explained_service["health"], json!({"verdict": "Unhealthy", "why": [expected]}), "{explained:#}");
    assert_eq!(explained["statusUpToDate"], true, "{explained:#}");

    // Scaled to zero, the Deployment controller reports it rolled out: the service is Deployed.
    remote
        .merge_patch(
            &ObjRef::new(Kind::Deployment, "ingress-nginx", "ingress-nginx-controller"),
            json!({"spec": {"replicas": 0}}),
        )
        .await;
    let ss = t
        .wait_service_set("web", "ingress-nginx Deployed once its Deployment is available", |ss| {
            service_state(ss, "ingress-nginx") == Some("Deployed")
        })
        .await;
    assert_eq!(ss["status"]["deployed"], true);
    let conditions = service(&ss, "ingress-nginx").unwrap().get("conditions").and_then(Value::as_array).cloned();
    assert!(conditions.unwrap_or_default().is_empty(), "no health condition is left: {ss:#}");
    let explained = t.explain("web").await;
    assert_eq!(explained["services"][0]["health"], json!({"verdict": "Healthy"}), "{explained:#}");
    assert_eq!(explained["statusUpToDate"], true, "{explained:#}");
    drop(target);
}

/// Without the target's kubeconfig Secret the host cannot look: the service keeps Flux's
/// Deployed and says why (this needs no second cluster and runs everywhere).
#[tokio::test(flavor = "multi_thread")]
async fn a_target_cluster_that_cannot_be_read_holds_a_new_deployment_and_says_why() {
    let t = Scenario::start_with("health-unread", Mode::Observe, &POLL).await;
    t.create(rules(t.namespace(), "defaults", "global", DEFAULT_RULES)).await;
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    t.set_flux("web", "ingress-nginx", FluxState::Ready).await;
    let ss = t
        .wait_service_set("web", "ingress-nginx with ServiceHealth Unknown", |ss| {
            service_condition(ss, "ingress-nginx", "ServiceHealth").is_some()
        })
        .await;
    // Flux calls it Deployed, but it was never verified: no lastDeployedHash yet.
    assert_eq!(service_state(&ss, "ingress-nginx"), Some("Provisioning"), "{:#}", ss["status"]);
    assert!(service(&ss, "ingress-nginx").unwrap().get("lastDeployedHash").is_none(), "{:#}", ss["status"]);
    let health = service_condition(&ss, "ingress-nginx", "ServiceHealth").unwrap();
    assert_eq!((&health["status"], &health["reason"]), (&json!("Unknown"), &json!("TargetClusterUnreadable")));
    let message = health["message"].as_str().unwrap();
    assert!(message.ends_with(&format!("Secret {}/web-kubeconfig not found", t.namespace())), "{message}");
    let rules_condition = condition(&ss, "ServiceSetHealthRules").expect("the rules condition");
    assert_eq!((&rules_condition["status"], &rules_condition["reason"]), (&json!("True"), &json!("AllRulesValid")));
    let explained = t.explain("web").await;
    let health = &explained["services"][0]["health"];
    assert_eq!(health["verdict"], "Unknown", "{explained:#}");
    let why = health["why"][0].as_str().unwrap_or_default();
    assert!(why.ends_with(&format!("Secret {}/web-kubeconfig not found", t.namespace())), "{explained:#}");
    assert_eq!(explained["statusUpToDate"], true, "{explained:#}");
}

/// Issue 36: a tenant's rule that would run for hours, `L.all(a, L.all(b, L.all(c, true)))` with
/// `L` a literal list of 1,000 numbers, froze the host. Its estimated cost is over the budget: it
/// is not run, it is named in `ServiceSetHealthRules`, its ServiceSet's service counts it as
/// failed, `/healthz` answers within 1 s throughout, and another ServiceSet converges meanwhile.
/// The service goes to the management cluster (self-management), where its workload is: this
/// needs no second cluster and runs everywhere.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_rule_too_costly_to_run_fails_alone_and_the_host_keeps_serving() {
    let t = Scenario::start_with("health-budget", Mode::Observe, &POLL).await;
    let mut service = ingress_service();
    service["namespace"] = json!(t.namespace());
    let mut deployment = workload(t.namespace(), "ingress-nginx-controller", 0);
    deployment["metadata"]["labels"]["app.kubernetes.io/instance"] = json!("ingress-nginx");
    t.create(deployment).await;
    // Tier 2: the tenant's ConfigMap for the MultiClusterService that owns the ServiceSet.
    let list = format!("[{}]", (1..=1000).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let healthy = format!("{list}.all(a, {list}.all(b, {list}.all(c, true)))");
    let rule = json!([{"group": "apps", "version": "v1", "kind": "Deployment", "scope": "Namespaced",
                       "healthy": healthy}]);
    t.create(rules(t.namespace(), "hostile", "tenant-services", &rule.to_string())).await;

    let mut object = t.service_set_object("hostile", json!([service]));
    object["spec"]["cluster"] = json!("");
    object["spec"]["multiClusterService"] = json!("tenant-services");
    object["spec"]["provider"]["selfManagement"] = json!(true);
    t.create(object).await;
    t.wait_converged("hostile").await;
    t.set_flux("hostile", "ingress-nginx", FluxState::Ready).await;
    let source = format!("{}/hostile#0", t.namespace());
    let ss = t
        .wait_service_set("hostile", "the rule named and ingress-nginx held by it", |ss| {
            let named = condition(ss, "ServiceSetHealthRules")
                .is_some_and(|c| c["message"].as_str().is_some_and(|m| m.contains(&source)));
            named && service_condition(ss, "ingress-nginx", "ServiceHealthDeployment").is_some()
        })
        .await;
    let named = invalid_rules(&ss);
    assert!(named.starts_with(&format!("{source}: healthy: rule \"[1,2,3,")), "{named}");
    assert!(named.ends_with("is over the cost limit of 1000000"), "{named}");
    assert_eq!(service_state(&ss, "ingress-nginx"), Some("Provisioning"), "the rule counts as failed: {ss:#}");
    let health = service_condition(&ss, "ingress-nginx", "ServiceHealthDeployment").unwrap();
    let message = health["message"].as_str().unwrap();
    let object = format!("Deployment {}/ingress-nginx-controller: rule ", t.namespace());
    assert!(message.starts_with(&object) && message.ends_with(&format!("(rule {source})")), "{message}");
    assert_eq!(ss["status"]["deployed"], false);

    // The rule stays in place (looked at again every second): /healthz is polled for 10 s, and
    // meanwhile another ServiceSet is served from start to Deployed.
    let base = t.adapter().metrics_url();
    let healthz = tokio::spawn(async move {
        let mut answers = Vec::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            let asked = Instant::now();
            let answer = tokio::time::timeout(Duration::from_secs(1), http_get(&format!("{base}/healthz"))).await;
            answers.push((answer.map(|(code, _)| code), asked.elapsed()));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        answers
    });

    t.create_service_set("other", json!([cert_manager_service()])).await;
    t.wait_converged("other").await;
    t.set_flux("other", "cert-manager", FluxState::Ready).await;
    t.wait_service_set("other", "cert-manager Deployed", |ss| ss["status"]["deployed"] == true).await;

    let answers = healthz.await.expect("the /healthz poller");
    assert!(answers.len() >= 10, "polled over 10 s: {answers:?}");
    for (answer, took) in &answers {
        assert!(matches!(answer, Ok(200)), "/healthz answered {answer:?} after {took:?}: {answers:?}");
    }
    assert!(t.adapter_running(), "{}", t.adapter().failure_context());
}

/// Issue 36: on the management cluster a tenant's rules (from the ServiceSet's namespace) judge
/// only the objects of that namespace. A self-management ServiceSet in the tenant's namespace
/// has a service there and one in another namespace; the tenant's rules try to read a Secret of
/// the other namespace, by `scope: Cluster` and by judging the service there. Neither rule
/// reaches it: the first is not applied, the second judges only the tenant's own Secret, both
/// are named in `ServiceSetHealthRules` saying why, and nothing of the other Secret is in the
/// status. Runs on either backend: the management cluster is the test's API server.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_rules_on_the_management_cluster_judge_only_its_own_namespace() {
    let t = Scenario::start_with("health-tenant", Mode::Observe, &POLL).await;
    let ns = t.namespace().to_string();
    let other = format!("{ns}-other");
    t.create(json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": other, "labels": {TEST_NAMESPACE_LABEL: ns}}}))
        .await;
    let secret = |namespace: &str, name: &str, labels: Value, token: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace, "labels": labels},
               "data": {"token": base64_of(token)}})
    };
    const LOOT: &str = "not-the-tenants-to-read";
    t.create(secret(&ns, "own", json!({"app": "mine"}), "the-tenants-own")).await;
    t.create(secret(&other, "loot", json!({"app": "mine", "release": "theirs"}), LOOT)).await;
    let rule = |scope: &str, message: &str| {
        json!([{"group": "", "version": "v1", "kind": "Secret", "scope": scope, "healthy": "false", "message": message}])
            .to_string()
    };
    let everywhere = rule("Cluster", "'found ' + obj.metadata.name + ': ' + obj.data.token");
    let here = rule("Namespaced", "'read ' + obj.metadata.name + ': ' + obj.data.token");
    t.create(rules(&ns, "a-everywhere", "global", &everywhere)).await;
    t.create(rules(&ns, "b-namespaced", "global", &here)).await;

    let service = |name: &str, namespace: &str| {
        let mut service = ingress_service();
        (service["name"], service["namespace"]) = (json!(name), json!(namespace));
        service
    };
    let mut object = t.service_set_object("tenant", json!([service("mine", &ns), service("theirs", &other)]));
    object["spec"]["cluster"] = json!("");
    object["spec"]["provider"]["selfManagement"] = json!(true);
    t.create(object).await;
    t.wait_converged("tenant").await;
    for name in ["mine", "theirs"] {
        t.set_flux("tenant", name, FluxState::Ready).await;
    }
    let (everywhere, here) = (format!("{ns}/a-everywhere#0"), format!("{ns}/b-namespaced#0"));
    let ss = t
        .wait_service_set("tenant", "both rules named, mine held by its own Secret", |ss| {
            let named = condition(ss, "ServiceSetHealthRules")
                .and_then(|c| c["message"].as_str())
                .is_some_and(|m| m.contains(&everywhere) && m.contains(&here));
            named && service_condition(ss, "mine", "ServiceHealthSecret").is_some()
        })
        .await;
    let named = invalid_rules(&ss);
    let expected = format!(
        "{everywhere}: scope Cluster: on the management cluster a rule from namespace {ns} judges only objects \
         in {ns}; not applied; {here}: on the management cluster a rule from namespace {ns} judges only objects \
         in {ns}; not applied to service theirs in {other}"
    );
    assert_eq!(named, expected);
    let health = service_condition(&ss, "mine", "ServiceHealthSecret").unwrap();
    let own = base64_of("the-tenants-own");
    assert_eq!(health["message"], format!("Secret {ns}/own: read own: {own} (rule {here})"), "{health:#}");
    assert_eq!(service_state(&ss, "mine"), Some("Provisioning"));
    assert_eq!(service_state(&ss, "theirs"), Some("Deployed"), "no rule of the tenant judges it: {ss:#}");
    let status = ss["status"].to_string();
    for leak in [LOOT.to_string(), base64_of(LOOT), "loot".to_string()] {
        assert!(!status.contains(&leak), "the other namespace's Secret reached the status ({leak}): {status}");
    }
}

/// `text` as a Secret's `data` holds it.
fn base64_of(text: &str) -> String {
    serde_json::to_value(ByteString(text.as_bytes().to_vec())).unwrap().as_str().unwrap().to_string()
}

/// A target that trickles its answers a byte a second: the look at it ends at the deadline of
/// one read (10 s), not when the target is done, and says so, naming the target.
#[tokio::test(flavor = "multi_thread")]
async fn a_target_that_trickles_its_answers_is_given_up_at_the_deadline() {
    let target = FakeCluster::start(Misbehaviour::Trickles).await;
    misbehaving_target("health-trickle", &target, "no complete answer within 10s, the deadline of a read").await;
}

/// A target whose list of workloads is 100 MiB: the host stops reading at its cap (16 MiB for a
/// target's answer) and says so, naming the target.
#[tokio::test(flavor = "multi_thread")]
async fn a_target_whose_list_is_huge_is_refused_at_the_cap() {
    let target = FakeCluster::start(Misbehaviour::Huge(100 << 20)).await;
    misbehaving_target("health-huge", &target, "an answer larger than 16 MiB").await;
    let sent = target.largest_sent();
    assert!(sent > 16 << 20 && sent < 64 << 20, "the host stopped reading past its cap: {sent} bytes got out");
}

/// ServiceSet `web`, whose target is `target`, turns Deployed by Flux: its look at the target
/// ends within the deadline of one read (plus the margin of a loaded machine) with
/// `ServiceHealth` Unknown, in a bounded message naming the target's Secret and `why`; ServiceSet
/// `api` converges meanwhile and `/healthz` stays OK. The management cluster is either backend.
async fn misbehaving_target(test: &str, target: &FakeCluster, why: &str) {
    const LOOK: Duration = Duration::from_secs(10 + 15);
    let t = Scenario::start_with(test, Mode::Observe, &POLL).await;
    let kubeconfig = serde_json::to_value(ByteString(target.kubeconfig().into_bytes())).unwrap();
    t.create(json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "web-kubeconfig", "namespace": t.namespace()},
                    "data": {"value": kubeconfig}}))
        .await;
    let deployments = "- {group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: 'true'}";
    t.create(rules(t.namespace(), "deployments", "web", deployments)).await;
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    t.set_flux("web", "ingress-nginx", FluxState::Ready).await;
    let looking = Instant::now();

    // No rule applies to api's cluster: it converges while web's look waits on its target.
    t.create_service_set("api", json!([ingress_service()])).await;
    t.wait_converged("api").await;
    t.set_flux("api", "ingress-nginx", FluxState::Ready).await;
    t.wait_service_set("api", "ingress-nginx Deployed", |ss| service_state(ss, "ingress-nginx") == Some("Deployed"))
        .await;

    let ss = t
        .wait_for("web's target named unreadable", LOOK.saturating_sub(looking.elapsed()), async || {
            let ss = t.get(&t.service_set("web")).await.unwrap_or_default();
            match service_condition(&ss, "ingress-nginx", "ServiceHealth") {
                Some(_) => Ok(ss),
                None => Err(ss["status"].clone()),
            }
        })
        .await;
    assert_eq!(service_state(&ss, "ingress-nginx"), Some("Provisioning"), "a deployment not verified yet");
    let health = service_condition(&ss, "ingress-nginx", "ServiceHealth").unwrap();
    assert_eq!((&health["status"], &health["reason"]), (&json!("Unknown"), &json!("TargetClusterUnreadable")));
    let message = health["message"].as_str().unwrap();
    let secret = format!("Secret {}/web-kubeconfig", t.namespace());
    assert!(message.contains(&secret) && message.contains(why), "{message}");
    assert!(message.len() < 1024, "{} bytes: {message}", message.len());
    let (code, body) = http_get(&format!("{}/healthz", t.adapter().metrics_url())).await;
    assert_eq!(code, 200, "{body}");
}

/// The message of `ss`'s `ServiceSetHealthRules` condition, which must say rules are invalid.
fn invalid_rules(ss: &Value) -> &str {
    let rules = condition(ss, "ServiceSetHealthRules").expect("ServiceSetHealthRules");
    assert_eq!((&rules["status"], &rules["reason"]), (&json!("False"), &json!("HealthRuleInvalid")), "{rules:#}");
    rules["message"].as_str().expect("its message")
}
