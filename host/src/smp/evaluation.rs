//! kcm's evaluation of a StateManagementProvider from what the controller observed: the four
//! conditions, whether the SMP is ready, and a one-line diagnosis when it is not.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use super::checks::Check;
use super::observed::observed_fields;
use crate::conditions::Status;
use crate::conditions::reasons as reason;
use crate::conditions::types::{ADAPTER_READY, PROVISIONER_CRDS_READY, PROVISIONER_READY, RBAC_READY};
use crate::k0rdent::{ProvisionerCrd, ResourceReference, StateManagementProvider};
use crate::rules::RuleCache;

/// What the controller fetched for one SMP.
pub struct SmpObservation<'a> {
    /// The live adapter object (`None` = not found).
    pub adapter: Option<&'a Value>,
    /// The live provisioner objects, in the order of `spec.provisioner` (`None` = not found).
    pub provisioners: Vec<Option<&'a Value>>,
    /// The CRD named `<resource>.<group>` (`None` = absent).
    pub crds: &'a dyn Fn(&str) -> Option<Value>,
    /// The outcome of the host's own SelfSubjectAccessReviews.
    pub rbac: RbacCheck,
}

/// The outcome of the host's permission checks for what an SMP references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RbacCheck {
    /// Every needed verb is allowed.
    Allowed,
    /// The denied permissions, e.g. `list helmreleases.helm.toolkit.fluxcd.io`.
    Denied(Vec<String>),
    /// The checks could not be made; why.
    Unknown(String),
}

/// The SMP's conditions and readiness, as kcm would write them.
#[derive(Clone, Debug, PartialEq)]
pub struct SmpEvaluation {
    /// RBACReady, AdapterReady, ProvisionerReady, ProvisionerCRDsReady, in that order.
    pub conditions: Vec<Condition>,
    /// True when no condition is False or Unknown.
    pub ready: bool,
}

impl SmpEvaluation {
    /// One line naming every condition that is not True, as `Type=Status (Reason): message`,
    /// joined by ` | `; `ready` when there is none.
    pub fn diagnosis(&self) -> String {
        let problems: Vec<String> = self
            .conditions
            .iter()
            .filter(|c| c.status != "True")
            .map(|c| format!("{}={} ({}): {}", c.type_, c.status, c.reason, one_line(&c.message)))
            .collect();
        if problems.is_empty() { "ready".to_owned() } else { problems.join(" | ") }
    }
}

/// Evaluates `smp` the way kcm does: RBAC, adapter readiness rule, provisioner readiness rules
/// and provisioner CRDs, each a condition stamped with `now` and the SMP's generation.
pub fn evaluate(smp: &StateManagementProvider, obs: &SmpObservation, rules: &RuleCache, now: Time) -> SmpEvaluation {
    let checks = [
        (RBAC_READY, rbac_check(&obs.rbac)),
        (ADAPTER_READY, adapter_check(&smp.spec.adapter, obs.adapter, rules)),
        (PROVISIONER_READY, provisioners_check(&smp.spec.provisioner, &obs.provisioners, rules)),
        (PROVISIONER_CRDS_READY, crds_check(&smp.spec.provisioner_crds, obs.crds)),
    ];
    let ready = checks.iter().all(|(_, check)| check.status == Status::True);
    let conditions =
        checks.into_iter().map(|(type_, check)| check.into_condition(type_, &now, smp.metadata.generation)).collect();
    SmpEvaluation { conditions, ready }
}

/// RBACReady from the host's permission checks.
fn rbac_check(rbac: &RbacCheck) -> Check {
    match rbac {
        RbacCheck::Allowed => Check::passed(reason::RBAC_ENSURED, "all required permissions are granted"),
        RbacCheck::Denied(denied) => {
            Check::failed(reason::RBAC_NOT_READY, format!("missing permissions: {}", denied.join(", ")))
        }
        RbacCheck::Unknown(why) => {
            Check::unknown(reason::RBAC_UNKNOWN, format!("permissions could not be checked: {why}"))
        }
    }
}

/// The readiness of one referenced workload; each variant carries its message.
enum Workload {
    Ready(String),
    Missing(String),
    NotReady(String),
    Failed(String),
}

/// Looks at one workload: present, and its readiness rule true, false or failing.
fn workload(role: &str, reference: &ResourceReference, object: Option<&Value>, rules: &RuleCache) -> Workload {
    let who = format!("{role} {} {reference}", reference.api_version);
    let Some(object) = object else { return Workload::Missing(format!("{who} not found")) };
    let rule = &reference.readiness_rule;
    match rules.evaluate(rule, object) {
        Ok(true) => Workload::Ready(format!("{who} is ready")),
        Ok(false) => Workload::NotReady(format!("{who}: rule {rule:?} is false{}", observed(rule, object))),
        Err(e) => Workload::Failed(format!("{who}: {e}")),
    }
}

/// AdapterReady from the adapter object and its rule.
fn adapter_check(reference: &ResourceReference, object: Option<&Value>, rules: &RuleCache) -> Check {
    match workload("adapter", reference, object, rules) {
        Workload::Ready(message) => Check::passed(reason::ADAPTER_ENSURED, message),
        Workload::Missing(message) => Check::failed(reason::FAILED_TO_GET_ADAPTER, message),
        Workload::NotReady(message) => Check::failed(reason::ADAPTER_NOT_READY, message),
        Workload::Failed(message) => Check::failed(reason::FAILED_TO_EVALUATE_READINESS, message),
    }
}

/// ProvisionerReady: every provisioner present with a true rule. Naming each one that is not,
/// with FailedToEvaluateReadiness when any rule failed.
fn provisioners_check(references: &[ResourceReference], objects: &[Option<&Value>], rules: &RuleCache) -> Check {
    let outcomes: Vec<Workload> = references
        .iter()
        .enumerate()
        .map(|(i, reference)| workload("provisioner", reference, objects.get(i).copied().flatten(), rules))
        .collect();
    let failed = outcomes.iter().any(|o| matches!(o, Workload::Failed(_)));
    let (ready, problems): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(|o| matches!(o, Workload::Ready(_)));
    match (problems.is_empty(), failed) {
        (true, _) if ready.is_empty() => Check::passed(reason::PROVISIONER_ENSURED, "no provisioners declared"),
        (true, _) => Check::passed(reason::PROVISIONER_ENSURED, messages(&ready)),
        (false, true) => Check::failed(reason::FAILED_TO_EVALUATE_READINESS, messages(&problems)),
        (false, false) => Check::failed(reason::PROVISIONER_NOT_READY, messages(&problems)),
    }
}

/// The messages of `outcomes`, joined by `; `.
fn messages(outcomes: &[Workload]) -> String {
    let message = |o: &Workload| match o {
        Workload::Ready(m) | Workload::Missing(m) | Workload::NotReady(m) | Workload::Failed(m) => m.clone(),
    };
    outcomes.iter().map(message).collect::<Vec<_>>().join("; ")
}

/// ProvisionerCRDsReady: each `<resource>.<group>` CRD exists and lists the version.
fn crds_check(crds: &[ProvisionerCrd], lookup: &dyn Fn(&str) -> Option<Value>) -> Check {
    let wanted: Vec<(String, &str)> = crds
        .iter()
        .flat_map(|crd| crd.resources.iter().map(|r| (format!("{r}.{}", crd.group), crd.version.as_str())))
        .collect();
    let problems: Vec<String> =
        wanted.iter().filter_map(|(name, version)| crd_problem(name, version, lookup)).collect();
    if problems.is_empty() {
        let found: Vec<String> = wanted.iter().map(|(name, version)| format!("{name}/{version}")).collect();
        Check::passed(reason::PROVISIONER_CRDS_ENSURED, format!("CRDs installed: [{}]", found.join(", ")))
    } else {
        Check::failed(reason::PROVISIONER_CRDS_NOT_READY, problems.join("; "))
    }
}

/// What is wrong with CRD `name` for `version`, if anything.
fn crd_problem(name: &str, version: &str, lookup: &dyn Fn(&str) -> Option<Value>) -> Option<String> {
    let Some(crd) = lookup(name) else { return Some(format!("CRD {name} not found")) };
    let versions: Vec<&str> =
        crd["spec"]["versions"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
    (!versions.contains(&version))
        .then(|| format!("CRD {name} does not list version {version} (has [{}])", versions.join(", ")))
}

/// ` (field=value, …)` for the fields `rule` reads from `object`, or nothing.
fn observed(rule: &str, object: &Value) -> String {
    let fields = observed_fields(rule, object);
    if fields.is_empty() { String::new() } else { format!(" ({})", fields.join(", ")) }
}

/// `message` on one line: lines trimmed and joined by spaces.
fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use crate::smp::flux_rules::{ADAPTER as ADAPTER_RULE, PROVISIONER as PROVISIONER_RULE};

    fn flux_smp() -> StateManagementProvider {
        let workload = |name: &str, namespace: &str, rule: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                   "namespace": namespace, "readinessRule": rule})
        };
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1",
            "kind": "StateManagementProvider",
            "metadata": {"name": "ksm-flux", "generation": 7},
            "spec": {
                "selector": {"matchLabels": {"ksm.k0rdent.mirantis.com/adapter": "flux-adapter"}},
                "adapter": workload("ksm-adapter", "kcm-system", ADAPTER_RULE),
                "provisioner": [
                    workload("helm-controller", "flux-system", PROVISIONER_RULE),
                    workload("source-controller", "flux-system", PROVISIONER_RULE),
                ],
                "provisionerCRDs": [
                    {"group": "helm.toolkit.fluxcd.io", "version": "v2", "resources": ["helmreleases"]},
                    {"group": "source.toolkit.fluxcd.io", "version": "v1",
                     "resources": ["helmrepositories", "helmcharts"]},
                ],
            },
        }))
        .unwrap()
    }

    fn deployment(available: i64, ready: i64) -> Value {
        json!({"status": {"replicas": 1, "updatedReplicas": 1,
                          "availableReplicas": available, "readyReplicas": ready}})
    }

    fn installed_crds(name: &str) -> Option<Value> {
        let version = match name {
            "helmreleases.helm.toolkit.fluxcd.io" => "v2",
            "helmrepositories.source.toolkit.fluxcd.io" | "helmcharts.source.toolkit.fluxcd.io" => "v1",
            _ => return None,
        };
        Some(json!({"spec": {"versions": [{"name": "v1beta2"}, {"name": version}]}}))
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_700_000_000).unwrap())
    }

    struct Fixture {
        adapter: Option<Value>,
        provisioners: Vec<Option<Value>>,
        crds: fn(&str) -> Option<Value>,
        rbac: RbacCheck,
    }

    impl Default for Fixture {
        fn default() -> Self {
            Self {
                adapter: Some(deployment(1, 1)),
                provisioners: vec![Some(deployment(1, 1)), Some(deployment(1, 1))],
                crds: installed_crds,
                rbac: RbacCheck::Allowed,
            }
        }
    }

    impl Fixture {
        fn evaluate(&self, smp: &StateManagementProvider) -> SmpEvaluation {
            let obs = SmpObservation {
                adapter: self.adapter.as_ref(),
                provisioners: self.provisioners.iter().map(Option::as_ref).collect(),
                crds: &self.crds,
                rbac: self.rbac.clone(),
            };
            evaluate(smp, &obs, &RuleCache::new(), now())
        }

        fn run(&self) -> SmpEvaluation {
            self.evaluate(&flux_smp())
        }
    }

    fn condition<'a>(eval: &'a SmpEvaluation, type_: &str) -> &'a Condition {
        eval.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    /// Asserts `type_` has `status` and `reason`, and returns its message.
    fn expect(eval: &SmpEvaluation, type_: &str, status: &str, reason: &str) -> String {
        let c = condition(eval, type_);
        assert_eq!((c.status.as_str(), c.reason.as_str()), (status, reason), "{c:?}");
        assert!(!eval.ready);
        c.message.clone()
    }

    #[test]
    fn healthy_flux_smp_is_ready() {
        let eval = Fixture::default().run();
        assert!(eval.ready);
        let summary: Vec<_> =
            eval.conditions.iter().map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str())).collect();
        assert_eq!(
            summary,
            vec![
                ("RBACReady", "True", "RBACEnsuredSuccessfully"),
                ("AdapterReady", "True", "AdapterEnsuredSuccessfully"),
                ("ProvisionerReady", "True", "ProvisionerEnsuredSuccessfully"),
                ("ProvisionerCRDsReady", "True", "ProvisionerCRDsEnsuredSuccessfully"),
            ]
        );
        assert!(eval.conditions.iter().all(|c| c.observed_generation == Some(7) && c.last_transition_time == now()));
        assert_eq!(
            condition(&eval, ADAPTER_READY).message,
            "adapter apps/v1 Deployment kcm-system/ksm-adapter is ready"
        );
        assert!(condition(&eval, PROVISIONER_READY).message.contains("flux-system/source-controller is ready"));
        assert!(condition(&eval, PROVISIONER_CRDS_READY).message.contains("helmcharts.source.toolkit.fluxcd.io/v1"));
        assert_eq!(eval.diagnosis(), "ready");
    }

    #[test]
    fn empty_rules_and_no_provisioners_are_ready() {
        let mut smp = flux_smp();
        smp.spec.adapter.readiness_rule.clear();
        smp.spec.provisioner.clear();
        smp.spec.provisioner_crds.clear();
        let fixture = Fixture { adapter: Some(json!({})), provisioners: vec![], ..Default::default() };
        let eval = fixture.evaluate(&smp);
        assert!(eval.ready, "{}", eval.diagnosis());
        assert_eq!(condition(&eval, PROVISIONER_READY).message, "no provisioners declared");
    }

    #[test]
    fn rbac_denied_and_unknown() {
        let denied = vec![
            "list helmreleases.helm.toolkit.fluxcd.io".to_owned(),
            "watch helmcharts.source.toolkit.fluxcd.io".to_owned(),
        ];
        let eval = Fixture { rbac: RbacCheck::Denied(denied), ..Default::default() }.run();
        let message = expect(&eval, RBAC_READY, "False", "RBACNotReady");
        assert_eq!(
            message,
            "missing permissions: list helmreleases.helm.toolkit.fluxcd.io, watch helmcharts.source.toolkit.fluxcd.io"
        );
        let eval = Fixture { rbac: RbacCheck::Unknown("apiserver unreachable".into()), ..Default::default() }.run();
        let message = expect(&eval, RBAC_READY, "Unknown", "RBACUnknown");
        assert!(message.contains("apiserver unreachable"), "{message}");
    }

    #[test]
    fn adapter_absent_not_ready_or_failing() {
        let eval = Fixture { adapter: None, ..Default::default() }.run();
        let message = expect(&eval, ADAPTER_READY, "False", "FailedToGetAdapter");
        assert_eq!(message, "adapter apps/v1 Deployment kcm-system/ksm-adapter not found");

        let eval = Fixture { adapter: Some(deployment(0, 1)), ..Default::default() }.run();
        let message = expect(&eval, ADAPTER_READY, "False", "AdapterNotReady");
        assert!(
            message.starts_with(&format!(
                "adapter apps/v1 Deployment kcm-system/ksm-adapter: rule {ADAPTER_RULE:?} is false ("
            )),
            "{message}"
        );
        assert!(message.contains("self.status.availableReplicas=0, self.status.replicas=1"), "{message}");

        let eval = Fixture { adapter: Some(json!({"status": {}})), ..Default::default() }.run();
        let message = expect(&eval, ADAPTER_READY, "False", "FailedToEvaluateReadiness");
        assert!(message.contains("failed to evaluate: No such key: "), "{message}");
    }

    #[test]
    fn non_bool_adapter_rule_fails_to_evaluate() {
        let mut smp = flux_smp();
        smp.spec.adapter.readiness_rule = "self.status.readyReplicas".into();
        let eval = Fixture::default().evaluate(&smp);
        let message = expect(&eval, ADAPTER_READY, "False", "FailedToEvaluateReadiness");
        assert!(message.ends_with("not a bool"), "{message}");
    }

    #[test]
    fn provisioners_missing_or_not_ready_are_named() {
        let eval = Fixture { provisioners: vec![Some(deployment(1, 0)), None], ..Default::default() }.run();
        let message = expect(&eval, PROVISIONER_READY, "False", "ProvisionerNotReady");
        assert_eq!(
            message,
            format!(
                "provisioner apps/v1 Deployment flux-system/helm-controller: rule {PROVISIONER_RULE:?} is false \
             (self.status.availableReplicas=1, self.status.readyReplicas=0); \
             provisioner apps/v1 Deployment flux-system/source-controller not found"
            )
        );
        let eval = Fixture { provisioners: vec![Some(deployment(1, 1))], ..Default::default() }.run();
        let message = expect(&eval, PROVISIONER_READY, "False", "ProvisionerNotReady");
        assert_eq!(
            message, "provisioner apps/v1 Deployment flux-system/source-controller not found",
            "short observation list"
        );
    }

    #[test]
    fn provisioner_rule_error_fails_to_evaluate() {
        let eval = Fixture { provisioners: vec![Some(json!({})), None], ..Default::default() }.run();
        let message = expect(&eval, PROVISIONER_READY, "False", "FailedToEvaluateReadiness");
        assert!(message.contains("helm-controller: rule") && message.contains("failed to evaluate"), "{message}");
        assert!(message.contains("source-controller not found"), "{message}");
    }

    #[test]
    fn a_readiness_rule_over_its_budget_fails_to_evaluate_naming_the_workload_and_the_budget() {
        let list = format!("[{}]", (1..=1000).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        let mut smp = flux_smp();
        smp.spec.provisioner[1].readiness_rule = format!("{list}.all(a, {list}.all(b, {list}.all(c, true)))");
        let eval = Fixture::default().evaluate(&smp);
        let message = expect(&eval, PROVISIONER_READY, "False", "FailedToEvaluateReadiness");
        assert!(
            message.starts_with("provisioner apps/v1 Deployment flux-system/source-controller: rule \"[1,2,3,"),
            "{message}"
        );
        assert!(message.ends_with(" is over the cost limit of 1000000"), "{message}");
        assert_eq!(condition(&eval, ADAPTER_READY).status, "True", "the other rules are not affected");
    }

    #[test]
    fn crds_missing_or_without_version() {
        let eval = Fixture {
            crds: |name| installed_crds(name).filter(|_| !name.starts_with("helmcharts")),
            ..Default::default()
        }
        .run();
        let message = expect(&eval, PROVISIONER_CRDS_READY, "False", "ProvisionerCRDsNotReady");
        assert_eq!(message, "CRD helmcharts.source.toolkit.fluxcd.io not found");
        let old = |_: &str| Some(json!({"spec": {"versions": [{"name": "v1beta2"}]}}));
        let eval = Fixture { crds: old, ..Default::default() }.run();
        let message = expect(&eval, PROVISIONER_CRDS_READY, "False", "ProvisionerCRDsNotReady");
        assert!(
            message.starts_with("CRD helmreleases.helm.toolkit.fluxcd.io does not list version v2 (has [v1beta2]); "),
            "{message}"
        );
        assert_eq!(message.matches("does not list version").count(), 3);
    }

    #[test]
    fn diagnosis_names_every_non_true_condition_on_one_line() {
        let mut smp = flux_smp();
        smp.spec.adapter.readiness_rule = "self.status.readyReplicas > 0".into();
        let fixture = Fixture {
            adapter: Some(deployment(0, 0)),
            rbac: RbacCheck::Unknown("SelfSubjectAccessReview failed:\n  timeout".into()),
            ..Default::default()
        };
        assert_eq!(
            fixture.evaluate(&smp).diagnosis(),
            "RBACReady=Unknown (RBACUnknown): permissions could not be checked: SelfSubjectAccessReview failed: timeout | \
             AdapterReady=False (AdapterNotReady): adapter apps/v1 Deployment kcm-system/ksm-adapter: \
             rule \"self.status.readyReplicas > 0\" is false (self.status.readyReplicas=0)"
        );
    }
}
