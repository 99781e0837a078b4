//! Service health on the target cluster (kcm 1.12's verifier): once Flux says a Helm service is
//! Deployed, the host looks at the release's workloads on the ServiceSet's cluster, through its
//! kubeconfig Secret `<cluster>-kubeconfig`, by the rules of the ConfigMaps that apply. On
//! envtest a second API server plays the target cluster.

use ksm_e2e::env::{another_cluster, kubeconfig_client};
use ksm_e2e::fixtures::{ingress_service, workload};
use ksm_e2e::flux::FluxState;
use ksm_e2e::objects::Objects;
use ksm_e2e::status::{condition_message, service, service_state};
use ksm_e2e::{Kind, Mode, ObjRef, Scenario};
use serde_json::{Value, json};

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
        .wait_service_set("web", "ingress-nginx Provisioning, held by its Deployment", |ss| {
            service_state(ss, "ingress-nginx") == Some("Provisioning")
                && service_condition(ss, "ingress-nginx", "ServiceHealthDeployment").is_some()
        })
        .await;
    let health = service_condition(&ss, "ingress-nginx", "ServiceHealthDeployment").unwrap();
    assert_eq!((&health["status"], &health["reason"]), (&json!("False"), &json!("DeploymentUnhealthy")), "{health:#}");
    let message = health["message"].as_str().unwrap();
    let expected = format!(
        "Deployment ingress-nginx/ingress-nginx-controller: 0/1 replicas available (rule {}/defaults#0)",
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

    // Scaled to zero, the Deployment controller reports it available: the service is Deployed.
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
async fn a_target_cluster_that_cannot_be_read_keeps_the_cd_tools_state_and_says_why() {
    let t = Scenario::start_with("health-unread", Mode::Observe, &POLL).await;
    t.create(rules(t.namespace(), "defaults", "global", DEFAULT_RULES)).await;
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    t.set_flux("web", "ingress-nginx", FluxState::Ready).await;
    let ss = t
        .wait_service_set("web", "ingress-nginx Deployed with ServiceHealth Unknown", |ss| {
            service_condition(ss, "ingress-nginx", "ServiceHealth").is_some()
        })
        .await;
    assert_eq!(service_state(&ss, "ingress-nginx"), Some("Deployed"));
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
