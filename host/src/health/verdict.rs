//! The verdict on a service's workloads: the objects found on the target cluster against the
//! rules of their kind, and what that does to the status. Only a Helm service the CD tool calls
//! Deployed is checked; while any of its objects is unhealthy it is `Provisioning`, with one
//! `ServiceHealth<Kind>` condition per kind saying which objects and why. No object found keeps it
//! Deployed (kcm 1.12); so does a target cluster the host cannot read, or a look whose rules'
//! cost budget ran out before the service's objects were judged, with condition
//! `ServiceHealth=Unknown` saying why.

use super::rule_set::{GroupKind, LoadError, Rule, RuleSet};
use crate::conditions::types::{HEALTH_RULES, SERVICE_HEALTH, service_health};
use crate::conditions::{self, Status, reasons};
use crate::k0rdent::{ServiceSetStatus, ServiceState, ServiceType, State};
use crate::plan::service_set_status::set_services;
use crate::rules::{DEFAULT_COST_LIMIT, RuleCache, RuleError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Unhealthy objects named per condition; the rest are counted.
const MAX_OBJECTS: usize = 3;
/// The longest reason (an object's message) kept, in bytes.
const MAX_REASON: usize = 500;
/// Load errors listed in [`HEALTH_RULES`]; the rest are counted.
const MAX_ERRORS: usize = 10;
/// The longest [`HEALTH_RULES`] message, in bytes (under 20 KiB).
const MAX_RULES_MESSAGE: usize = 20 * 1024 - 1;
/// The most estimated cost the rules may run up on one look at a ServiceSet's services: every
/// rule that may run (`healthy` and `message`) on every object judged, summed. Kubernetes' budget
/// for all the validation rules on one object (`RuntimeCELCostBudget`), ten times one rule's
/// limit: at the ~60 ms the costliest shapes take at one rule's limit on this host
/// (docs/performance.md), under a second of an evaluator thread per look, however many rules a
/// tenant writes and objects its services have; it covers kcm's default Pod rule (about 1,000 on
/// an ordinary pod) on some 9,000 pods.
pub const LOOK_COST_BUDGET: u64 = 10 * DEFAULT_COST_LIMIT;

/// The objects of one kind found for a service (an object may come more than once, found by
/// several labels).
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// Their kind.
    pub kind: GroupKind,
    /// The objects, as JSON.
    pub objects: Vec<Value>,
}

/// What the host learned of one service's workloads.
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// The objects of every kind the rules name.
    Found(Vec<Found>),
    /// The target cluster could not be read: why.
    Unreadable(String),
    /// Not looked at now: its namespace ran as many looks as it may (why). No fact about the
    /// target: a verdict the status holds stands.
    Deferred(String),
}

/// The verdict on one service.
#[derive(Clone, Debug, PartialEq)]
pub enum Health {
    /// Every object found passes every rule of its kind (or none was found).
    Healthy,
    /// Some do not: one condition per kind.
    Unhealthy(Vec<Condition>),
    /// The target cluster could not be read: why.
    Unknown(String),
    /// The look's cost budget ran out before every object was judged, and none judged failed:
    /// why.
    Unjudged(String),
    /// Not looked at now ([`Observation::Deferred`]): why.
    Deferred(String),
}

impl Health {
    /// Whether the service should be looked at again soon rather than at the next resync. Not
    /// one the budget left unjudged: the next look would spend it on the same objects.
    pub fn unsettled(&self) -> bool {
        matches!(self, Health::Unhealthy(_) | Health::Unknown(_) | Health::Deferred(_))
    }
}

/// Whether `service` is checked: a Helm service the CD tool calls Deployed.
pub fn checked(service: &ServiceState) -> bool {
    service.state == State::Deployed && service.service_type == ServiceType::Helm
}

/// A look at a checked service, by the verdict the status on the API server holds on it. In the
/// order their looks go when their namespace is busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Look {
    /// At a deployment with no verdict yet (a new one, or a new `lastDeployedHash`).
    First,
    /// Again at a deployment held back by unhealthy workloads: it may make it Deployed.
    HeldBack,
    /// Again at a verified deployment: it can only confirm that or take it back.
    Again,
}

/// Which look a look at `service` is, as `previous` (the status on the API server) has it.
pub fn look(service: &ServiceState, previous: Option<&ServiceSetStatus>) -> Look {
    let before = before(previous, service);
    if !has_verdict(service, before) {
        Look::First
    } else if before.is_some_and(|b| b.state == State::Deployed) {
        Look::Again
    } else {
        Look::HeldBack
    }
}

/// Whether `before` (`service` as the status on the API server has it) holds a verdict on its
/// deployment, which a look not made now leaves standing: Deployed at the same
/// `lastDeployedHash` (verified, or kept by an unreadable target), or held back by unhealthy
/// workloads.
fn has_verdict(service: &ServiceState, before: Option<&ServiceState>) -> bool {
    let Some(before) = before else { return false };
    let unhealthy = before.conditions.iter().any(|c| c.type_.starts_with(SERVICE_HEALTH) && c.type_ != SERVICE_HEALTH);
    match before.state {
        State::Deployed => before.last_deployed_hash == service.last_deployed_hash,
        State::Provisioning => unhealthy,
        _ => false,
    }
}

/// `service` as `previous` has it.
fn before<'a>(previous: Option<&'a ServiceSetStatus>, service: &ServiceState) -> Option<&'a ServiceState> {
    previous?.services.iter().find(|s| (&s.name, &s.namespace) == (&service.name, &service.namespace))
}

/// The verdict on what was observed of one service, and the rules over their budget (each
/// named once, by its source), spending `left` of the look's cost budget ([`LOOK_COST_BUDGET`]):
/// once an object's rules would cost more than is left, no rule runs on it or on any object
/// after it. An object is judged only by the rules that may judge its
/// namespace ([`Rule::judges`]): a confined rule never sees, so its message never carries,
/// another namespace's object. An object being deleted counts as healthy (a rollout's
/// terminating pods are not a failure); a rule that fails to evaluate on an object, or exceeds
/// its budget, makes it unhealthy, with the error as the reason (its health could not be shown).
pub fn judge(
    rules: &RuleSet,
    observation: &Observation,
    cel: &RuleCache,
    now: &Time,
    left: &mut u64,
) -> (Health, Vec<LoadError>) {
    let found = match observation {
        Observation::Unreadable(why) => return (Health::Unknown(why.clone()), Vec::new()),
        Observation::Deferred(why) => return (Health::Deferred(why.clone()), Vec::new()),
        Observation::Found(found) => found,
    };
    let mut unhealthy: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
    let mut over_budget: BTreeMap<&str, String> = BTreeMap::new();
    let mut unjudged = false;
    'kinds: for Found { kind, objects } in found {
        let Some(kind_rules) = rules.kinds.get(kind) else { continue };
        let mut seen = BTreeSet::new();
        for object in objects {
            let reference = reference(object);
            if !seen.insert(reference.clone()) || object.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
            let judging: Vec<&Rule> = kind_rules.iter().filter(|rule| rule.judges(namespace)).collect();
            let healthy: Vec<&str> = judging.iter().map(|rule| rule.healthy.as_str()).collect();
            let texts: Vec<&str> =
                judging.iter().flat_map(|rule| [rule.healthy.as_str(), rule.message.as_str()]).collect();
            let bound = cel.bind(&texts, &[("obj", object)]);
            let estimate = bound.estimate(&texts);
            if estimate > *left {
                (*left, unjudged) = (0, true);
                break 'kinds;
            }
            *left -= estimate;
            let Some((i, error)) = bound.first_failing(&healthy) else { continue };
            let rule = judging[i];
            let reason = match error {
                Some(e) => {
                    if matches!(e, RuleError::OverBudget { .. }) {
                        over_budget.entry(&rule.source).or_insert_with(|| format!("healthy: {e}"));
                    }
                    e.to_string()
                }
                None => bound
                    .text(&rule.message)
                    .unwrap_or_else(|e| {
                        over_budget.entry(&rule.source).or_insert_with(|| format!("message: {e}"));
                        None
                    })
                    .unwrap_or_default(),
            };
            let reason = cut(&reason, MAX_REASON);
            let line = format!("{} {reference}: {reason} (rule {})", kind.kind, rule.source);
            unhealthy.entry(kind.kind.as_str()).or_default().insert(reference, line);
        }
    }
    let over_budget =
        over_budget.into_iter().map(|(source, message)| LoadError { source: source.to_string(), message }).collect();
    if unhealthy.is_empty() {
        if !unjudged {
            return (Health::Healthy, over_budget);
        }
        let why = format!(
            "the rules' estimated cost on this look at the ServiceSet's services reached the budget of \
             {LOOK_COST_BUDGET} before every object was judged"
        );
        return (Health::Unjudged(why), over_budget);
    }
    let conditions = unhealthy
        .into_iter()
        .map(|(kind, lines)| {
            let mut message: Vec<String> = lines.values().take(MAX_OBJECTS).cloned().collect();
            if lines.len() > MAX_OBJECTS {
                message.push(format!("…and {} more", lines.len() - MAX_OBJECTS));
            }
            let (type_, reason) = (service_health(kind), reasons::unhealthy(kind));
            conditions::new(&type_, Status::False, &reason, &message.join("; "), None, now)
        })
        .collect();
    (Health::Unhealthy(conditions), over_budget)
}

/// The verdict on each service's observation (by name and namespace, see [`judge`]), in one
/// look's cost budget ([`LOOK_COST_BUDGET`]) spent in that order, and the rules over their
/// budget, each named once.
pub fn judge_all(
    rules: &RuleSet,
    observations: &BTreeMap<(String, String), Observation>,
    cel: &RuleCache,
    now: &Time,
) -> (BTreeMap<(String, String), Health>, Vec<LoadError>) {
    let mut over_budget: Vec<LoadError> = Vec::new();
    let mut left = LOOK_COST_BUDGET;
    let verdicts = observations
        .iter()
        .map(|(service, observation)| {
            let (health, over) = judge(rules, observation, cel, now, &mut left);
            for error in over {
                if !over_budget.iter().any(|named| named.source == error.source) {
                    over_budget.push(error);
                }
            }
            (service.clone(), health)
        })
        .collect();
    (verdicts, over_budget)
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn reference(object: &Value) -> String {
    let field = |name: &str| object.pointer(&format!("/metadata/{name}")).and_then(Value::as_str).unwrap_or_default();
    match field("namespace") {
        "" => field("name").to_string(),
        namespace => format!("{namespace}/{}", field("name")),
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked as cut.
fn cut(text: &str, max: usize) -> String {
    const MARK: &str = "…";
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}{MARK}", &text[..text.floor_char_boundary(max - MARK.len())])
}

/// `status` with each verdict applied to its service (by name and namespace), and `deployed` and
/// `ServicesInReadyState` recomputed. A demoted service keeps its transition time from `previous`
/// (the status on the API server) when it was already `Provisioning`, and its conditions their
/// transition times; conditions left from an earlier verdict go.
pub fn apply(
    status: &mut ServiceSetStatus,
    verdicts: &BTreeMap<(String, String), Health>,
    previous: Option<&ServiceSetStatus>,
    generation: Option<i64>,
    now: &Time,
) {
    let services = std::mem::take(&mut status.services)
        .into_iter()
        .map(|service| {
            let before = before(previous, &service);
            match verdicts.get(&(service.name.clone(), service.namespace.clone())) {
                Some(health) => verified(service, health, before, now),
                None => service,
            }
        })
        .collect();
    set_services(status, services, generation, now);
}

/// One service after its verdict.
fn verified(mut service: ServiceState, health: &Health, before: Option<&ServiceState>, now: &Time) -> ServiceState {
    let ours = |c: &Condition| c.type_.starts_with(SERVICE_HEALTH);
    let earlier: Vec<Condition> =
        before.map(|b| b.conditions.iter().filter(|c| ours(c)).cloned().collect()).unwrap_or_default();
    service.conditions.retain(|c| !ours(c));
    let new = match health {
        Health::Healthy => Vec::new(),
        Health::Unknown(why) => {
            let message = format!(
                "the target cluster could not be read; only a deployment verified before stays Deployed: {why}"
            );
            vec![unverified(&mut service, before, reasons::TARGET_CLUSTER_UNREADABLE, &message, now)]
        }
        Health::Unjudged(why) => {
            let message = format!("{why}; only a deployment verified before stays Deployed");
            vec![unverified(&mut service, before, reasons::HEALTH_RULES_OVER_BUDGET, &message, now)]
        }
        Health::Unhealthy(found) => {
            held_back(&mut service, before, now);
            found.clone()
        }
        Health::Deferred(why) if !has_verdict(&service, before) => {
            let message = format!("not verified yet: {why}; it is looked at again soon");
            vec![unverified(&mut service, before, reasons::HEALTH_CHECK_QUEUED, &message, now)]
        }
        Health::Deferred(_) => {
            if before.is_some_and(|b| b.state != State::Deployed) {
                held_back(&mut service, before, now);
            }
            earlier.clone()
        }
    };
    service.conditions.extend(conditions::merge(&earlier, new));
    service
}

/// A service whose health could not be shown keeps its last verified deployment: a new one is
/// not Deployed yet. Its `ServiceHealth=Unknown` condition, with `reason` and `message`.
fn unverified(
    service: &mut ServiceState,
    before: Option<&ServiceState>,
    reason: &str,
    message: &str,
    now: &Time,
) -> Condition {
    let last = before.and_then(|b| b.last_deployed_hash.as_ref());
    if service.state == State::Deployed && service.last_deployed_hash.as_ref() != last {
        held_back(service, before, now);
    }
    conditions::new(SERVICE_HEALTH, Status::Unknown, reason, message, None, now)
}

/// Takes a service the CD tool calls Deployed back to Provisioning, with the version and
/// `lastDeployedHash` of the last deployment verified (`before`'s).
fn held_back(service: &mut ServiceState, before: Option<&ServiceState>, now: &Time) {
    service.state = State::Provisioning;
    service.version = None;
    service.last_deployed_hash = before.and_then(|b| b.last_deployed_hash.clone());
    service.last_state_transition_time = match before {
        Some(b) if b.state == State::Provisioning => b.last_state_transition_time.clone(),
        _ => now.clone(),
    };
}

/// [`HEALTH_RULES`]: True when every applicable rule loaded, else False naming what did not
/// (the first [`MAX_ERRORS`], the rest counted).
pub fn rules_condition(errors: &[LoadError], generation: Option<i64>, now: &Time) -> Condition {
    if errors.is_empty() {
        let message = "All health rules loaded successfully";
        return conditions::new(HEALTH_RULES, Status::True, reasons::ALL_RULES_VALID, message, generation, now);
    }
    let mut listed: Vec<String> = errors.iter().take(MAX_ERRORS).map(ToString::to_string).collect();
    if errors.len() > MAX_ERRORS {
        listed.push(format!("…and {} more", errors.len() - MAX_ERRORS));
    }
    let message = cut(&listed.join("; "), MAX_RULES_MESSAGE);
    conditions::new(HEALTH_RULES, Status::False, reasons::HEALTH_RULE_INVALID, &message, generation, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::rule_set::Scope;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    /// [`judge`] with a whole look's budget.
    fn judged(rules: &RuleSet, observation: &Observation, cel: &RuleCache, now: &Time) -> (Health, Vec<LoadError>) {
        let mut left = LOOK_COST_BUDGET;
        judge(rules, observation, cel, now, &mut left)
    }

    fn deployment_kind() -> GroupKind {
        GroupKind { group: "apps".into(), kind: "Deployment".into() }
    }

    fn rules() -> RuleSet {
        let rule = |healthy: &str, message: &str, source: &str| Rule {
            version: "v1".into(),
            scope: Scope::Namespaced,
            healthy: healthy.into(),
            message: message.into(),
            source: source.into(),
            confined_to: None,
        };
        let mut set = RuleSet::default();
        set.kinds.insert(
            deployment_kind(),
            vec![
                rule(
                    "obj.status.availableReplicas >= obj.spec.replicas",
                    "'available ' + string(obj.status.availableReplicas) + '/' + string(obj.spec.replicas)",
                    "kcm-system/defaults#0",
                ),
                rule(
                    "!has(obj.metadata.annotations) || !('broken' in obj.metadata.annotations)",
                    "'marked broken'",
                    "team/t#0",
                ),
            ],
        );
        set
    }

    fn deployment(name: &str, available: i64, replicas: i64) -> Value {
        json!({"metadata": {"namespace": "apps", "name": name}, "spec": {"replicas": replicas}, "status": {"availableReplicas": available}})
    }

    fn found(objects: Vec<Value>) -> Observation {
        Observation::Found(vec![Found { kind: deployment_kind(), objects }])
    }

    fn unhealthy(health: Health) -> Vec<Condition> {
        match health {
            Health::Unhealthy(conditions) => conditions,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_rule_of_the_kind_must_pass() {
        let (cel, now) = (RuleCache::new(), at(100));
        assert_eq!(judged(&rules(), &found(vec![deployment("web", 1, 1)]), &cel, &now).0, Health::Healthy);
        let conditions = unhealthy(judged(&rules(), &found(vec![deployment("web", 0, 2)]), &cel, &now).0);
        assert_eq!(conditions.len(), 1);
        assert_eq!((conditions[0].type_.as_str(), conditions[0].status.as_str()), ("ServiceHealthDeployment", "False"));
        assert_eq!(conditions[0].reason, "DeploymentUnhealthy");
        assert_eq!(conditions[0].message, "Deployment apps/web: available 0/2 (rule kcm-system/defaults#0)");
        let mut marked = deployment("web", 1, 1);
        marked["metadata"]["annotations"] = json!({"broken": "yes"});
        let conditions = unhealthy(judged(&rules(), &found(vec![marked]), &cel, &now).0);
        assert_eq!(
            conditions[0].message, "Deployment apps/web: marked broken (rule team/t#0)",
            "the second tier's rule adds to the first"
        );
    }

    #[test]
    fn nothing_found_or_only_objects_being_deleted_is_healthy() {
        let (cel, now) = (RuleCache::new(), at(100));
        assert_eq!(judged(&rules(), &found(vec![]), &cel, &now).0, Health::Healthy);
        assert_eq!(judged(&rules(), &Observation::Found(vec![]), &cel, &now).0, Health::Healthy);
        let mut going = deployment("old", 0, 1);
        going["metadata"]["deletionTimestamp"] = json!("2026-11-25T00:00:00Z");
        assert_eq!(judged(&rules(), &found(vec![going]), &cel, &now).0, Health::Healthy);
        let other = Observation::Found(vec![Found {
            kind: GroupKind { group: "x".into(), kind: "Y".into() },
            objects: vec![json!({})],
        }]);
        assert_eq!(judged(&rules(), &other, &cel, &now).0, Health::Healthy, "a kind without rules is not judged");
    }

    #[test]
    fn three_objects_are_named_the_rest_counted_each_once_and_reasons_bounded() {
        let (cel, now) = (RuleCache::new(), at(100));
        let mut objects: Vec<Value> = ["e", "d", "c", "b", "a"].iter().map(|n| deployment(n, 0, 1)).collect();
        objects.push(deployment("a", 0, 1));
        let conditions = unhealthy(judged(&rules(), &found(objects), &cel, &now).0);
        let message = &conditions[0].message;
        assert!(message.starts_with("Deployment apps/a: "), "sorted: {message}");
        assert_eq!(message.matches("Deployment apps/").count(), 3, "{message}");
        assert!(message.ends_with("; …and 2 more"), "five distinct objects: {message}");

        let mut long = rules();
        long.kinds.get_mut(&deployment_kind()).unwrap()[0].message = format!("'{}'", "é".repeat(400));
        let conditions = unhealthy(judged(&long, &found(vec![deployment("web", 0, 1)]), &cel, &now).0);
        let reason = conditions[0].message.trim_start_matches("Deployment apps/web: ");
        let reason = reason.split(" (rule ").next().unwrap();
        assert!(reason.len() <= 500 && reason.ends_with('…'), "{} bytes", reason.len());
    }

    #[test]
    fn a_rule_failing_to_evaluate_makes_the_object_unhealthy_with_the_error() {
        let (cel, now) = (RuleCache::new(), at(100));
        let fresh = json!({"metadata": {"namespace": "apps", "name": "web"}, "spec": {"replicas": 1}, "status": {}});
        let conditions = unhealthy(judged(&rules(), &found(vec![fresh]), &cel, &now).0);
        assert!(conditions[0].message.contains("failed to evaluate"), "{}", conditions[0].message);
    }

    /// `L.all(a, L.all(b, L.all(c, true)))`, `L` a literal list of 1,000 numbers: the rule that
    /// froze a host.
    fn freezing_rule() -> String {
        let list = format!("[{}]", (1..=1000).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        format!("{list}.all(a, {list}.all(b, {list}.all(c, true)))")
    }

    #[test]
    fn a_rule_over_its_budget_counts_as_failed_and_is_named_once() {
        let (cel, now) = (RuleCache::new(), at(100));
        let mut hostile = rules();
        let deployments = hostile.kinds.get_mut(&deployment_kind()).unwrap();
        deployments[1].healthy = freezing_rule();
        deployments[1].source = "team/hostile#0".into();
        let started = std::time::Instant::now();
        let (health, over_budget) =
            judged(&hostile, &found(vec![deployment("web", 1, 1), deployment("api", 1, 1)]), &cel, &now);
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "not run: {:?}", started.elapsed());
        let conditions = unhealthy(health);
        assert_eq!(conditions.len(), 1);
        for object in ["apps/api", "apps/web"] {
            let line = format!("Deployment {object}: rule \"[1,2,3,");
            assert!(conditions[0].message.contains(&line), "{object} failed: {}", conditions[0].message);
        }
        assert!(conditions[0].message.contains("over the cost limit of 1000000 (rule team/hostile#0)"));
        assert_eq!(over_budget.len(), 1, "named once: {over_budget:?}");
        assert_eq!(over_budget[0].source, "team/hostile#0");
        assert!(over_budget[0].message.starts_with("healthy: rule \"[1,2,3,"), "{}", over_budget[0].message);
        let message = &over_budget[0].message;
        assert!(message.contains("exceeds its budget: its estimated cost "), "{message}");
        assert!(message.ends_with(" is over the cost limit of 1000000"), "{message}");
        let condition = rules_condition(&over_budget, Some(1), &now);
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "HealthRuleInvalid"));
        assert!(condition.message.starts_with("team/hostile#0: healthy: rule "), "{}", condition.message);

        let services: BTreeMap<(String, String), Observation> = ["a", "b"]
            .into_iter()
            .map(|name| ((name.to_string(), "apps".to_string()), found(vec![deployment("web", 1, 1)])))
            .collect();
        let (verdicts, over_budget) = judge_all(&hostile, &services, &cel, &now);
        assert_eq!(verdicts.len(), 2);
        assert!(verdicts.values().all(|health| matches!(health, Health::Unhealthy(_))));
        assert_eq!(over_budget.len(), 1, "named once for all services: {over_budget:?}");

        let deployments = hostile.kinds.get_mut(&deployment_kind()).unwrap();
        deployments[1].healthy = "false".into();
        deployments[1].message = format!("{} ? 'too costly' : 'never'", freezing_rule());
        let (health, over_budget) = judged(&hostile, &found(vec![deployment("web", 1, 1)]), &cel, &now);
        let conditions = unhealthy(health);
        assert_eq!(conditions[0].message, "Deployment apps/web:  (rule team/hostile#0)", "a failing rule still fails");
        assert!(over_budget[0].message.starts_with("message: rule "), "{over_budget:?}");
    }

    #[test]
    fn a_look_runs_rules_within_its_cost_budget_and_the_services_it_leaves_unjudged_keep_their_state() {
        let (cel, now) = (RuleCache::new(), at(100));
        // Estimated at the square of the list's size, run to its first item: costly by its estimate.
        let healthy = "obj.spec.items.exists(i, obj.spec.items.exists(j, true)) && !has(obj.spec.bad)";
        let rule = Rule {
            version: "v1".into(),
            scope: Scope::Namespaced,
            healthy: healthy.into(),
            message: "'marked bad'".into(),
            source: "team/t#0".into(),
            confined_to: None,
        };
        let mut set = RuleSet::default();
        set.kinds.insert(deployment_kind(), vec![rule]);
        let items: Vec<usize> = (0..300).collect();
        let object = |name: &str| json!({"metadata": {"namespace": "apps", "name": name}, "spec": {"items": items}});
        let each =
            cel.bind(&[healthy, "'marked bad'"], &[("obj", &object("w0000"))]).estimate(&[healthy, "'marked bad'"]);
        let fits = usize::try_from(LOOK_COST_BUDGET / each).unwrap();
        assert!((10..1000).contains(&fits), "a rule of estimated cost {each}: {fits} objects fit");
        let mut bad = object("bad00");
        bad["spec"]["bad"] = json!(true);
        let observations: BTreeMap<(String, String), Observation> = [
            ("a", found((1..fits).map(|i| object(&format!("w{i:04}"))).collect())),
            ("b", found(vec![bad, object("w9999")])),
            ("c", found(vec![object("w0000")])),
        ]
        .into_iter()
        .map(|(name, observation)| ((name.to_string(), "apps".to_string()), observation))
        .collect();
        let (verdicts, over_budget) = judge_all(&set, &observations, &cel, &now);
        assert_eq!(over_budget, []);
        let verdict = |name: &str| &verdicts[&(name.to_string(), "apps".to_string())];
        assert_eq!(verdict("a"), &Health::Healthy, "within the budget");
        let Health::Unhealthy(conditions) = verdict("b") else { panic!("{:?}", verdict("b")) };
        assert_eq!(
            conditions[0].message, "Deployment apps/bad00: marked bad (rule team/t#0)",
            "the last object within the budget is judged; one judged unhealthy is a verdict"
        );
        let why = "the rules' estimated cost on this look at the ServiceSet's services reached the budget of 10000000 \
                   before every object was judged";
        assert_eq!(verdict("c"), &Health::Unjudged(why.into()), "nothing runs beyond the budget");
        assert!(!verdict("c").unsettled(), "the next look would spend the budget on the same objects");

        let verified = status(vec![state("c", State::Deployed, ServiceType::Helm, 10)]);
        let unjudged = BTreeMap::from([(("c".to_string(), "apps".to_string()), verdict("c").clone())]);
        let mut kept = verified.clone();
        apply(&mut kept, &unjudged, Some(&verified), Some(1), &at(100));
        let service = &kept.services[0];
        assert_eq!(service.state, State::Deployed, "the deployment verified before stays");
        let condition = &service.conditions[0];
        assert_eq!(
            (condition.type_.as_str(), condition.status.as_str(), condition.reason.as_str()),
            ("ServiceHealth", "Unknown", "HealthRulesOverBudget")
        );
        assert_eq!(condition.message, format!("{why}; only a deployment verified before stays Deployed"));
        let mut upgraded = verified.clone();
        upgraded.services[0].last_deployed_hash = Some("h2".into());
        apply(&mut upgraded, &unjudged, Some(&verified), Some(1), &at(100));
        let service = &upgraded.services[0];
        assert_eq!((service.state, service.last_deployed_hash.as_deref()), (State::Provisioning, Some("h")));
    }

    #[test]
    fn a_confined_rule_judges_only_the_objects_of_its_namespace_and_exports_nothing_else() {
        let (cel, now) = (RuleCache::new(), at(100));
        let secrets = GroupKind { group: String::new(), kind: "Secret".into() };
        let mut set = RuleSet::default();
        let exporting = Rule {
            version: "v1".into(),
            scope: Scope::Namespaced,
            healthy: "false".into(),
            message: "'token ' + obj.data.token".into(),
            source: "team/tenant#0".into(),
            confined_to: Some("team".into()),
        };
        set.kinds.insert(secrets.clone(), vec![exporting]);
        let secret = |namespace: Option<&str>, token: &str| {
            let mut secret = json!({"metadata": {"name": "s"}, "data": {"token": token}});
            if let Some(namespace) = namespace {
                secret["metadata"]["namespace"] = json!(namespace);
            }
            secret
        };
        let observed = |objects| Observation::Found(vec![Found { kind: secrets.clone(), objects }]);
        let elsewhere = observed(vec![secret(Some("kube-system"), "c2VjcmV0"), secret(None, "c2VjcmV0")]);
        assert_eq!(
            judged(&set, &elsewhere, &cel, &now),
            (Health::Healthy, Vec::new()),
            "another namespace's and a cluster-scoped object are not the tenant's to judge"
        );
        let conditions = unhealthy(judged(&set, &observed(vec![secret(Some("team"), "b3du")]), &cel, &now).0);
        assert_eq!(conditions[0].message, "Secret team/s: token b3du (rule team/tenant#0)", "its own namespace's");

        let mut beside = rules();
        beside.kinds.get_mut(&deployment_kind()).unwrap()[1].confined_to = Some("team".into());
        let mut marked = deployment("web", 1, 1);
        marked["metadata"]["annotations"] = json!({"broken": "yes"});
        assert_eq!(judged(&beside, &found(vec![marked]), &cel, &now).0, Health::Healthy, "apps is not team");
        let conditions = unhealthy(judged(&beside, &found(vec![deployment("web", 0, 1)]), &cel, &now).0);
        assert_eq!(
            conditions[0].message, "Deployment apps/web: available 0/1 (rule kcm-system/defaults#0)",
            "the operator's rule beside it still judges every namespace"
        );
    }

    #[test]
    fn an_unreadable_target_is_unknown() {
        let health = judged(
            &rules(),
            &Observation::Unreadable("Secret team/c-kubeconfig not found".into()),
            &RuleCache::new(),
            &at(1),
        )
        .0;
        assert_eq!(health, Health::Unknown("Secret team/c-kubeconfig not found".into()));
        assert!(health.unsettled() && !Health::Healthy.unsettled());
    }

    fn state(name: &str, state: State, service_type: ServiceType, since: i64) -> ServiceState {
        ServiceState {
            service_type,
            name: name.into(),
            namespace: "apps".into(),
            template: "t".into(),
            state,
            last_state_transition_time: at(since),
            version: (state == State::Deployed).then(|| "t".into()),
            failure_message: None,
            last_deployed_hash: (state == State::Deployed).then(|| "h".into()),
            conditions: Vec::new(),
        }
    }

    fn status(services: Vec<ServiceState>) -> ServiceSetStatus {
        let mut status = ServiceSetStatus::default();
        set_services(&mut status, services, Some(1), &at(0));
        status
    }

    fn verdicts(entries: &[(&str, Health)]) -> BTreeMap<(String, String), Health> {
        entries.iter().map(|(name, h)| ((name.to_string(), "apps".to_string()), h.clone())).collect()
    }

    #[test]
    fn an_unhealthy_service_is_provisioning_until_healthy_again() {
        let bad = unhealthy(judged(&rules(), &found(vec![deployment("web", 0, 1)]), &RuleCache::new(), &at(50)).0);
        let deployed = || {
            status(vec![
                state("web", State::Deployed, ServiceType::Helm, 10),
                state("db", State::Deployed, ServiceType::Helm, 10),
            ])
        };

        let mut first = deployed();
        apply(
            &mut first,
            &verdicts(&[("web", Health::Unhealthy(bad.clone())), ("db", Health::Healthy)]),
            None,
            Some(1),
            &at(50),
        );
        assert_eq!((first.services[0].state, first.services[0].version.as_deref()), (State::Provisioning, None));
        assert_eq!(first.services[0].last_state_transition_time, at(50));
        assert_eq!(first.services[0].conditions, bad);
        assert_eq!(first.services[1].state, State::Deployed);
        assert!(!first.deployed);
        assert_eq!(first.conditions[0].message, "1/2");

        let later = unhealthy(judged(&rules(), &found(vec![deployment("web", 0, 1)]), &RuleCache::new(), &at(90)).0);
        let mut second = deployed();
        apply(&mut second, &verdicts(&[("web", Health::Unhealthy(later))]), Some(&first), Some(1), &at(90));
        assert_eq!(second.services, first.services, "unchanged: the same status, times kept (no write)");

        let mut third = deployed();
        apply(&mut third, &verdicts(&[("web", Health::Healthy)]), Some(&second), Some(1), &at(120));
        assert_eq!((third.services[0].state, third.services[0].conditions.len()), (State::Deployed, 0));
        assert!(third.deployed);
    }

    #[test]
    fn an_unreadable_target_keeps_the_state_and_says_why() {
        let verified = status(vec![state("web", State::Deployed, ServiceType::Helm, 10)]);
        let mut status = verified.clone();
        let unknown = verdicts(&[("web", Health::Unknown("connection refused".into()))]);
        apply(&mut status, &unknown, Some(&verified), Some(1), &at(5));
        let service = &status.services[0];
        assert_eq!(service.state, State::Deployed, "the deployment verified before");
        assert_eq!(
            (service.conditions[0].type_.as_str(), service.conditions[0].status.as_str()),
            ("ServiceHealth", "Unknown")
        );
        assert!(service.conditions[0].message.ends_with("connection refused"));
        assert!(status.deployed);
    }

    /// kcm: `lastDeployedHash` names a deployment the CD tool and the health checks both call
    /// Deployed. A new one the checks fail, or cannot read, is Provisioning with the hash of the
    /// last verified one; once they pass, it is Deployed with its own.
    #[test]
    fn a_new_deployment_is_deployed_with_its_hash_only_once_verified() {
        let verified = status(vec![state("web", State::Deployed, ServiceType::Helm, 10)]);
        let upgraded = || {
            let mut next = status(vec![state("web", State::Deployed, ServiceType::Helm, 10)]);
            next.services[0].last_deployed_hash = Some("h2".into());
            next
        };
        let unreadable = verdicts(&[("web", Health::Unknown("connection refused".into()))]);
        let mut waiting = upgraded();
        apply(&mut waiting, &unreadable, Some(&verified), Some(1), &at(20));
        let service = &waiting.services[0];
        assert_eq!((service.state, service.last_deployed_hash.as_deref()), (State::Provisioning, Some("h")));
        assert_eq!(service.version, None, "version goes with the hash");

        let unhealthy =
            unhealthy(judged(&rules(), &found(vec![deployment("web", 0, 1)]), &RuleCache::new(), &at(20)).0);
        let mut failing = upgraded();
        apply(&mut failing, &verdicts(&[("web", Health::Unhealthy(unhealthy))]), Some(&verified), Some(1), &at(20));
        assert_eq!(failing.services[0].last_deployed_hash.as_deref(), Some("h"), "the last verified deployment");

        let mut passed = upgraded();
        apply(&mut passed, &verdicts(&[("web", Health::Healthy)]), Some(&failing), Some(1), &at(30));
        let service = &passed.services[0];
        assert_eq!((service.state, service.last_deployed_hash.as_deref()), (State::Deployed, Some("h2")));
    }

    /// Issue 48: a look not made because its namespace was busy wrote `ServiceHealth=Unknown`,
    /// then its clearing, and polled: under load each missed look cost two writes. A verdict the
    /// status holds stands, unchanged (nothing to write); a deployment with none is held back,
    /// saying why.
    #[test]
    fn a_deferred_look_leaves_the_last_verdict_and_holds_back_only_a_new_deployment() {
        let why = "namespace apps runs 2 looks at its targets already";
        let deferred = verdicts(&[("web", Health::Deferred(why.into()))]);
        let deployed = || status(vec![state("web", State::Deployed, ServiceType::Helm, 10)]);

        let verified = deployed();
        let mut again = deployed();
        apply(&mut again, &deferred, Some(&verified), Some(1), &at(20));
        assert_eq!(again, verified, "verified: as it was");

        let bad = unhealthy(judged(&rules(), &found(vec![deployment("web", 0, 1)]), &RuleCache::new(), &at(15)).0);
        let mut held = deployed();
        apply(&mut held, &verdicts(&[("web", Health::Unhealthy(bad))]), Some(&verified), Some(1), &at(15));
        let mut still = deployed();
        apply(&mut still, &deferred, Some(&held), Some(1), &at(30));
        assert_eq!(still.services, held.services, "held back by unhealthy workloads: as it was, times and all");
        assert_eq!(look(&deployed().services[0], Some(&verified)), Look::Again, "it can only confirm");
        assert_eq!(look(&deployed().services[0], Some(&held)), Look::HeldBack, "it may make it Deployed");
        assert_eq!(look(&deployed().services[0], None), Look::First);

        let mut upgraded = deployed();
        upgraded.services[0].last_deployed_hash = Some("h2".into());
        assert_eq!(look(&upgraded.services[0], Some(&verified)), Look::First, "a new hash has no verdict");
        let mut queued = upgraded.clone();
        apply(&mut queued, &deferred, Some(&verified), Some(1), &at(40));
        let service = &queued.services[0];
        assert_eq!((service.state, service.last_deployed_hash.as_deref()), (State::Provisioning, Some("h")));
        let condition = &service.conditions[0];
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("Unknown", "HealthCheckQueued"));
        assert_eq!(condition.message, format!("not verified yet: {why}; it is looked at again soon"));
        assert!(Health::Deferred(why.into()).unsettled(), "looked at again soon");
    }

    #[test]
    fn only_deployed_helm_services_are_checked() {
        assert!(checked(&state("a", State::Deployed, ServiceType::Helm, 0)));
        assert!(!checked(&state("a", State::Deployed, ServiceType::Kustomize, 0)));
        for s in [State::Provisioning, State::Failed, State::Pending, State::Deleting, State::Deleted] {
            assert!(!checked(&state("a", s, ServiceType::Helm, 0)), "{s:?} is never overridden");
        }
    }

    #[test]
    fn the_rules_condition_names_at_most_ten_errors_within_twenty_kib() {
        let ok = rules_condition(&[], Some(3), &at(1));
        assert_eq!(
            (ok.status.as_str(), ok.reason.as_str(), ok.observed_generation),
            ("True", "AllRulesValid", Some(3))
        );
        let errors: Vec<LoadError> =
            (0..12).map(|i| LoadError { source: format!("team/cm#{i}"), message: "x".repeat(4000) }).collect();
        let bad = rules_condition(&errors, Some(3), &at(1));
        assert_eq!((bad.status.as_str(), bad.reason.as_str()), ("False", "HealthRuleInvalid"));
        assert!(bad.message.len() < 20 * 1024, "{}", bad.message.len());
        assert!(bad.message.starts_with("team/cm#0: xxx"));
        let few = rules_condition(&errors[..2], None, &at(1));
        assert_eq!(few.message, format!("team/cm#0: {}; team/cm#1: {}", "x".repeat(4000), "x".repeat(4000)));
        let many: Vec<LoadError> =
            (0..12).map(|i| LoadError { source: format!("team/cm#{i}"), message: "bad".into() }).collect();
        let listed = rules_condition(&many, None, &at(1)).message;
        assert!(listed.contains("team/cm#9: bad; …and 2 more") && !listed.contains("cm#10"), "{listed}");
    }
}
