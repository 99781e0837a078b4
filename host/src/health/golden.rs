//! Golden cases of the chart's default health rules (`deploy/chart/files/health-rules.yaml`,
//! kcm 1.12's): for each of the six kinds, healthy and unhealthy objects with the verdict and
//! the message the service's condition carries, and each rule's cost on the largest objects it
//! will meet, within the budget the host enforces.

use super::rule_set::{self, GroupKind, RuleSet, Scope};
use super::verdict::{Found, Health, LOOK_COST_BUDGET, Observation, judge};
use crate::rules::{Budget, DEFAULT_COST_LIMIT, DEFAULT_DEADLINE, Limits, RuleCache, RuleError};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// The chart's default rules, loaded as the chart ships them (the operator's: not confined).
fn default_rules() -> RuleSet {
    let text = include_str!("../../../deploy/chart/files/health-rules.yaml");
    let config_map: ConfigMap = serde_json::from_value(
        json!({"metadata": {"namespace": "kcm-system", "name": "defaults"}, "data": {"rules": text}}),
    )
    .unwrap();
    let set = rule_set::load(&[&config_map], None, &RuleCache::new());
    assert_eq!(set.errors, []);
    set
}

/// kcm's six kinds, in the file's order: (group, kind, scope).
const KINDS: [(&str, &str, Scope); 6] = [
    ("apps", "Deployment", Scope::Namespaced),
    ("apps", "StatefulSet", Scope::Namespaced),
    ("apps", "DaemonSet", Scope::Namespaced),
    ("", "Pod", Scope::Namespaced),
    ("", "PersistentVolumeClaim", Scope::Namespaced),
    ("", "PersistentVolume", Scope::Cluster),
];

/// The group of `kind`, one of [`KINDS`].
fn group_kind(kind: &str) -> GroupKind {
    let (group, kind, _) = KINDS.iter().find(|(_, k, _)| *k == kind).unwrap_or_else(|| panic!("{kind}"));
    GroupKind { group: group.to_string(), kind: kind.to_string() }
}

/// One object of `kind` (`x`, generation 2, in namespace `apps` unless cluster-scoped) with
/// `fields` (spec, status, more metadata).
fn object(kind: &str, fields: Value) -> Value {
    let mut object = json!({"metadata": {"name": "x", "generation": 2}});
    if kind != "PersistentVolume" {
        object["metadata"]["namespace"] = json!("apps");
    }
    for (key, value) in fields.as_object().unwrap() {
        match (key.as_str(), value) {
            ("metadata", Value::Object(more)) => more.iter().for_each(|(k, v)| object["metadata"][k] = v.clone()),
            _ => object[key] = value.clone(),
        }
    }
    object
}

/// The verdict of the default rules on `object` of `kind`: `None` when healthy, else the
/// condition's message.
fn verdict(rules: &RuleSet, kind: &str, object: Value) -> Option<String> {
    let observation = Observation::Found(vec![Found { kind: group_kind(kind), objects: vec![object] }]);
    let now = Time(Timestamp::from_second(0).unwrap());
    let mut left = LOOK_COST_BUDGET;
    let (health, over_budget) = judge(rules, &observation, &RuleCache::new(), &now, &mut left);
    assert_eq!(over_budget, [], "{kind}");
    match health {
        Health::Healthy => None,
        Health::Unhealthy(conditions) => {
            assert_eq!(conditions.len(), 1, "{kind}: {conditions:?}");
            assert_eq!(conditions[0].type_, format!("ServiceHealth{kind}"));
            Some(conditions[0].message.clone())
        }
        Health::Unknown(why) | Health::Unjudged(why) | Health::Deferred(why) => panic!("{kind}: {why}"),
    }
}

/// A container status: `ready`, in `state` (e.g. `{"waiting": {"reason": "CrashLoopBackOff"}}`).
fn container(name: &str, ready: bool, state: Value) -> Value {
    json!({"name": name, "ready": ready, "state": state, "image": "registry.example/app:1", "restartCount": 0})
}

/// A Pod in `phase` with condition `Ready` of `ready` and these container statuses.
fn pod(phase: &str, ready: &str, containers: Vec<Value>) -> Value {
    json!({"status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}], "containerStatuses": containers}})
}

#[test]
fn the_defaults_are_kcms_six_kinds() {
    let rules = default_rules();
    let loaded: Vec<(&str, &str, Scope, usize)> = rules
        .kinds
        .iter()
        .map(|(kind, rules)| (kind.group.as_str(), kind.kind.as_str(), rules[0].scope, rules.len()))
        .collect();
    let mut expected: Vec<(&str, &str, Scope, usize)> = KINDS.iter().map(|&(g, k, s)| (g, k, s, 1)).collect();
    expected.sort_by_key(|&(g, k, _, _)| (g, k));
    assert_eq!(loaded, expected, "one rule for each of kcm's kinds, no Job rule");
}

#[test]
fn golden_cases_of_each_kind() {
    let rules = default_rules();
    let rule = |index: usize| format!("(rule kcm-system/defaults#{index})");
    let deployment = |replicas: Option<i64>, status: Value| {
        let spec = replicas.map_or(json!({}), |r| json!({"replicas": r}));
        object("Deployment", json!({"spec": spec, "status": status}))
    };
    let stateful_set = |status: Value| object("StatefulSet", json!({"spec": {"replicas": 2}, "status": status}));
    let daemon_set = |status: Value| object("DaemonSet", json!({"status": status}));
    let failed_owned_by = |owner: &str| {
        let mut failed =
            pod("Failed", "False", vec![container("app", false, json!({"terminated": {"reason": "Error"}}))]);
        failed["metadata"] = json!({"ownerReferences": [{"apiVersion": "v1", "kind": owner, "name": "o", "uid": "u"}]});
        object("Pod", failed)
    };
    let claim = |status: Value| object("PersistentVolumeClaim", json!({"status": status}));
    let volume = |status: Value| object("PersistentVolume", json!({"status": status}));
    let d = rule(0);
    let s = rule(1);
    let ds = rule(2);
    let p = rule(3);
    let pvc = rule(4);
    let pv = rule(5);
    let cases: Vec<(&str, &str, Value, Option<String>)> = vec![
        (
            "Deployment",
            "rolled out",
            deployment(Some(3), json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 3})),
            None,
        ),
        (
            "Deployment",
            "spec.replicas defaults to 1",
            deployment(None, json!({"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 1})),
            None,
        ),
        ("Deployment", "scaled to zero", deployment(Some(0), json!({"observedGeneration": 2})), None),
        (
            "Deployment",
            "the new generation not observed",
            deployment(Some(1), json!({"observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 1})),
            Some(format!("Deployment apps/x: generation 2 not observed yet {d}")),
        ),
        (
            "Deployment",
            "no status yet",
            deployment(Some(1), json!({})),
            Some(format!("Deployment apps/x: generation 2 not observed yet {d}")),
        ),
        (
            "Deployment",
            "replicas not ready",
            deployment(Some(3), json!({"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 3})),
            Some(format!("Deployment apps/x: 1/3 replicas ready, 3 updated {d}")),
        ),
        (
            "Deployment",
            "a rollout in progress",
            deployment(Some(3), json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 1})),
            Some(format!("Deployment apps/x: 3/3 replicas ready, 1 updated {d}")),
        ),
        (
            "Deployment",
            "more ready than wanted (scaling down)",
            deployment(Some(1), json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 1})),
            Some(format!("Deployment apps/x: 2/1 replicas ready, 1 updated {d}")),
        ),
        (
            "StatefulSet",
            "rolled out",
            stateful_set(json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2,
                                "currentRevision": "x-1", "updateRevision": "x-1"})),
            None,
        ),
        (
            "StatefulSet",
            "a rolling update in progress",
            stateful_set(json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2,
                                "currentRevision": "x-1", "updateRevision": "x-2"})),
            Some(format!("StatefulSet apps/x: rolling update from x-1 to x-2 in progress {s}")),
        ),
        (
            "StatefulSet",
            "no revisions reported",
            stateful_set(json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2})),
            Some(format!("StatefulSet apps/x: revisions not reported yet {s}")),
        ),
        (
            "StatefulSet",
            "replicas not ready",
            stateful_set(json!({"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 2,
                                "currentRevision": "x-1", "updateRevision": "x-1"})),
            Some(format!("StatefulSet apps/x: 1/2 replicas ready, 2 updated {s}")),
        ),
        (
            "StatefulSet",
            "the new generation not observed",
            stateful_set(json!({"observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 2,
                                "currentRevision": "x-1", "updateRevision": "x-1"})),
            Some(format!("StatefulSet apps/x: generation 2 not observed yet {s}")),
        ),
        (
            "DaemonSet",
            "rolled out",
            daemon_set(json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "numberReady": 3,
                              "updatedNumberScheduled": 3})),
            None,
        ),
        (
            "DaemonSet",
            "on no node (Kubernetes omits updatedNumberScheduled: 0)",
            daemon_set(json!({"observedGeneration": 2, "desiredNumberScheduled": 0, "numberReady": 0})),
            None,
        ),
        (
            "DaemonSet",
            "pods not ready",
            daemon_set(json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "numberReady": 2,
                              "updatedNumberScheduled": 3})),
            Some(format!("DaemonSet apps/x: 2/3 pods ready, 3 updated {ds}")),
        ),
        (
            "DaemonSet",
            "an update in progress",
            daemon_set(json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "numberReady": 3,
                              "updatedNumberScheduled": 1})),
            Some(format!("DaemonSet apps/x: 3/3 pods ready, 1 updated {ds}")),
        ),
        (
            "DaemonSet",
            "the new generation not observed",
            daemon_set(json!({"observedGeneration": 1, "desiredNumberScheduled": 3, "numberReady": 3,
                              "updatedNumberScheduled": 3})),
            Some(format!("DaemonSet apps/x: generation 2 not observed yet {ds}")),
        ),
        (
            "Pod",
            "ready",
            object("Pod", pod("Running", "True", vec![container("app", true, json!({"running": {}}))])),
            None,
        ),
        (
            "Pod",
            "succeeded",
            object(
                "Pod",
                pod(
                    "Succeeded",
                    "False",
                    vec![container("app", false, json!({"terminated": {"reason": "Completed"}}))],
                ),
            ),
            None,
        ),
        ("Pod", "failed, of a Job", failed_owned_by("Job"), None),
        ("Pod", "failed, of a ReplicaSet", failed_owned_by("ReplicaSet"), Some(format!("Pod apps/x: app: Error {p}"))),
        (
            "Pod",
            "containers waiting and one ready",
            object(
                "Pod",
                pod(
                    "Running",
                    "False",
                    vec![
                        container(
                            "app",
                            false,
                            json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}),
                        ),
                        container("proxy", true, json!({"running": {}})),
                        container("sidecar", false, json!({"waiting": {"reason": "ImagePullBackOff"}})),
                    ],
                ),
            ),
            Some(format!("Pod apps/x: app: CrashLoopBackOff, sidecar: ImagePullBackOff {p}")),
        ),
        (
            "Pod",
            "a container running, not ready (its readiness probe)",
            object("Pod", pod("Running", "False", vec![container("app", false, json!({"running": {}}))])),
            Some(format!("Pod apps/x: app: not ready {p}")),
        ),
        (
            "Pod",
            "every container ready, the pod not (a readiness gate)",
            object("Pod", pod("Running", "False", vec![container("app", true, json!({"running": {}}))])),
            Some(format!("Pod apps/x: phase Running, not ready {p}")),
        ),
        (
            "Pod",
            "pending, not scheduled",
            object(
                "Pod",
                json!({"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}}),
            ),
            Some(format!("Pod apps/x: phase Pending, not ready {p}")),
        ),
        ("PersistentVolumeClaim", "bound", claim(json!({"phase": "Bound"})), None),
        (
            "PersistentVolumeClaim",
            "pending",
            claim(json!({"phase": "Pending"})),
            Some(format!("PersistentVolumeClaim apps/x: phase Pending {pvc}")),
        ),
        (
            "PersistentVolumeClaim",
            "no phase",
            claim(json!({})),
            Some(format!("PersistentVolumeClaim apps/x: no phase reported {pvc}")),
        ),
        ("PersistentVolume", "bound", volume(json!({"phase": "Bound"})), None),
        (
            "PersistentVolume",
            "released",
            volume(json!({"phase": "Released"})),
            Some(format!("PersistentVolume x: phase Released {pv}")),
        ),
        (
            "PersistentVolume",
            "available, not claimed",
            volume(json!({"phase": "Available"})),
            Some(format!("PersistentVolume x: phase Available {pv}")),
        ),
    ];
    let mut wrong = Vec::new();
    for (kind, what, object, expected) in cases {
        let got = verdict(&rules, kind, object);
        if got != expected {
            wrong.push(format!("{kind}, {what}:\n  expected {expected:?}\n       got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} golden cases differ:\n{}", wrong.len(), wrong.join("\n"));
    for (_, kind, _) in KINDS {
        assert!(
            rules.kinds[&group_kind(kind)].iter().all(|r| !r.message.is_empty()),
            "{kind}: every default rule says why"
        );
    }
}

/// The estimated cost of `healthy` and of `message`, bound together on `object` as the verdict
/// binds them: a budget of 0 refuses each rule, naming its estimate.
fn costs(healthy: &str, message: &str, object: &Value) -> [u64; 2] {
    let cel = RuleCache::with_limits(Limits { cost: 0, deadline: DEFAULT_DEADLINE });
    let bound = cel.bind(&[healthy, message], &[("obj", object)]);
    let estimate = |refused: Option<RuleError>| match refused {
        Some(RuleError::OverBudget { budget: Budget::Cost { estimate, .. }, .. }) => estimate,
        other => panic!("not refused for its cost: {other:?}"),
    };
    [estimate(bound.first_failing(&[healthy]).and_then(|(_, e)| e)), estimate(bound.text(message).err())]
}

#[test]
fn each_default_rule_stays_within_the_cost_budget_on_the_largest_objects() {
    // 4 KiB: the most a container's termination message may be; 64 containers and as many
    // owner references and conditions, far beyond real pods; every other string as long.
    let long = "x".repeat(4096);
    let state = json!({"waiting": {"reason": long, "message": long}, "terminated": {"reason": long, "message": long}});
    let containers: Vec<Value> = (0..64).map(|i| container(&format!("{i}{long}"), false, state.clone())).collect();
    let conditions: Vec<Value> =
        (0..64).map(|i| json!({"type": format!("{i}{long}"), "status": "False", "message": long})).collect();
    let owners: Vec<Value> =
        (0..64).map(|i| json!({"kind": format!("{i}{long}"), "name": long, "uid": long})).collect();
    let status = json!({"phase": long, "conditions": conditions, "containerStatuses": containers,
        "observedGeneration": 1, "readyReplicas": 0, "updatedReplicas": 0, "currentRevision": long,
        "updateRevision": format!("{long}2"), "desiredNumberScheduled": 1, "numberReady": 0, "updatedNumberScheduled": 0});
    let largest = json!({"metadata": {"name": long, "namespace": "apps", "generation": 2, "ownerReferences": owners},
        "spec": {"replicas": 64}, "status": status});
    let rules = default_rules();
    let mut costs_by_kind = Vec::new();
    for (kind, kind_rules) in &rules.kinds {
        for rule in kind_rules {
            let [healthy, message] = costs(&rule.healthy, &rule.message, &largest);
            costs_by_kind.push(format!("{} healthy {healthy}, message {message}", kind.kind));
            assert!(
                healthy.max(message) <= DEFAULT_COST_LIMIT,
                "{}: estimated {healthy} and {message}, over the budget of {DEFAULT_COST_LIMIT}",
                rule.source
            );
        }
    }
    // The Pod's rules run in full on it: unhealthy, its 64 containers named with their reasons.
    let pod = &rules.kinds[&group_kind("Pod")][0];
    let cel = RuleCache::new();
    let bound = cel.bind(&[&pod.healthy, &pod.message], &[("obj", &largest)]);
    assert_eq!(bound.first_failing(&[&pod.healthy]), Some((0, None)), "{costs_by_kind:?}");
    let message = bound.text(&pod.message).unwrap().expect("a message");
    assert_eq!(message.matches(&format!(": {long}")).count(), 64, "{costs_by_kind:?}");
}

/// A look's budget ([`LOOK_COST_BUDGET`]) bounds what a tenant's rules may spend, not what the
/// operator's defaults need: it covers them on some 9,000 ordinary pods (about 1,000 each).
#[test]
fn a_looks_budget_covers_the_default_rules_on_thousands_of_ordinary_pods() {
    let waiting =
        json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}});
    let containers: Vec<Value> =
        ["app", "sidecar", "metrics"].iter().map(|n| container(n, false, waiting.clone())).collect();
    let mut ordinary = object("Pod", pod("Running", "False", containers));
    ordinary["metadata"]["ownerReferences"] = json!([{"kind": "ReplicaSet", "name": "web-5d4f8c7b9d", "uid": "u"}]);
    let rules = default_rules();
    let pods = &rules.kinds[&group_kind("Pod")];
    let texts: Vec<&str> = pods.iter().flat_map(|r| [r.healthy.as_str(), r.message.as_str()]).collect();
    let each = RuleCache::new().bind(&texts, &[("obj", &ordinary)]).estimate(&texts);
    assert!((500..2000).contains(&each), "{each}");
    assert!(LOOK_COST_BUDGET / each >= 5000, "{each}");
}
