//! Gathers what the health verdict ([`crate::health`]) needs and writes it into the status the
//! round is about to write: the rule ConfigMaps applying to the ServiceSet (from a cache of the
//! labelled ones), and each checked service's workloads on its target cluster, read through the
//! ServiceSet's kubeconfig Secret (`<cluster>-kubeconfig`, key `value`, as kcm; on the regional
//! cluster for a ServiceSet served through a region) or, for self-management, on the management
//! cluster, where a tenant's rules list only in the tenant's namespace.

use crate::conditions::{self, types::HEALTH_RULES};
use crate::controller::plumbing::slots::Slots;
use crate::controller::remote::clusters::{Cluster, Clusters};
use crate::health::DISCOVERY_LABELS;
use crate::health::look_budget::{Spending, Spent};
use crate::health::rule_set::{self, RuleSet};
use crate::health::target;
use crate::health::verdict::{self, Found, Health, Observation};
use crate::k0rdent::{ServiceSet, ServiceSetStatus};
use crate::plan::route::KUBECONFIG_KEY;
use crate::plugin::call_blocking;
use crate::rules::RuleCache;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long one look at a target cluster (all of one ServiceSet's checked services) may take:
/// each call has its deadline ([`crate::controller::remote::clusters::Reads::limits`]), but a cluster that answers
/// each just in time must not hold the reconcile for as many deadlines as it makes calls.
const LOOK_WITHIN: Duration = Duration::from_secs(30);

/// What the health check reads.
pub struct TargetHealth {
    /// The clients of the target clusters.
    pub clusters: Arc<Clusters>,
    /// The ConfigMaps labelled [`crate::health::TARGET_LABEL`].
    pub rules: Store<ConfigMap>,
    /// The rules' compilations.
    pub cel: Arc<RuleCache>,
    /// Where the cluster-wide rules live.
    pub system_namespace: String,
    /// The looks each ServiceSet namespace runs now: a tenant's many slow targets hold only its
    /// share of the reconcile workers.
    pub looks: Slots,
}

impl TargetHealth {
    /// Applies the health verdict to `status` (the status this round is about to write for
    /// `service_set`, whose children live on `home`): `ServiceSetHealthRules` when any rule
    /// ConfigMap applies (naming the rules that did not load, exceed their budget or, confined
    /// to a tenant's namespace, do not apply to a service), and each checked service demoted
    /// while unhealthy. True when a service should be looked at again
    /// soon (it is unhealthy, or its target could not be read): no watch tells when a workload on
    /// another cluster recovers. Loading and running the rules happens on blocking threads.
    pub async fn verify(
        &self,
        service_set: &ServiceSet,
        home: &Cluster,
        status: &mut ServiceSetStatus,
        now: &Time,
    ) -> bool {
        let verdicts = self.judge(service_set, home, status, now).await;
        verdicts.apply(service_set, status, now);
        verdicts.unsettled()
    }

    /// The verdicts on the services of `status` that are checked (see [`verdict::checked`]),
    /// by the rule ConfigMaps applying to `service_set`, whose children live on `home`.
    /// `explain` shows them; [`verify`](Self::verify) applies them.
    pub async fn judge(
        &self,
        service_set: &ServiceSet,
        home: &Cluster,
        status: &ServiceSetStatus,
        now: &Time,
    ) -> Verdicts {
        let config_maps = self.rules.state();
        let applying = rule_set::applicable(config_maps, service_set, &self.system_namespace);
        let mut verdicts = Verdicts { rules: None, services: BTreeMap::new() };
        if applying.is_empty() {
            return verdicts;
        }
        let cel = self.cel.clone();
        let tenant = target::tenant(service_set, &self.system_namespace).map(str::to_string);
        let rules = Arc::new(call_blocking(move || rule_set::load(&applying, tenant.as_deref(), &cel)).await);
        let generation = service_set.metadata.generation;
        let checked: Vec<(String, String)> = status
            .services
            .iter()
            .filter(|s| verdict::checked(s))
            .map(|s| (s.name.clone(), s.namespace.clone()))
            .collect();
        let mut errors = rules.errors.clone();
        errors.extend(rules.unjudged(&checked));
        if !checked.is_empty() && !rules.kinds.is_empty() {
            let observations = self.look(service_set, home, &rules, &checked).await;
            let observations: BTreeMap<_, _> = checked.into_iter().zip(observations).collect();
            let (cel, at) = (self.cel.clone(), now.clone());
            let (services, over_budget) =
                call_blocking(move || verdict::judge_all(&rules, &observations, &cel, &at)).await;
            errors.extend(over_budget);
            verdicts.services = services;
        }
        verdicts.rules = Some(verdict::rules_condition(&errors, generation, now));
        verdicts
    }

    /// What each of the `checked` services (name, namespace) of `service_set` looks like on
    /// its target cluster, in one look of at most [`LOOK_WITHIN`] that reads at most its budget
    /// ([`crate::health::look_budget`]): the services not looked at by then are not verified,
    /// and the look says why.
    async fn look(
        &self,
        service_set: &ServiceSet,
        home: &Cluster,
        rules: &RuleSet,
        checked: &[(String, String)],
    ) -> Vec<Observation> {
        let namespace = service_set.namespace().unwrap_or_default();
        let Some(_slot) = self.looks.take(&namespace) else {
            let (per_namespace, looks) =
                (self.looks.per_key(), if self.looks.per_key() == 1 { "look" } else { "looks" });
            let why =
                format!("not verified now: namespace {namespace} runs {per_namespace} {looks} at its targets already");
            return vec![Observation::Unreadable(why); checked.len()];
        };
        let secret = target::kubeconfig_secret(service_set);
        let target =
            secret.as_ref().map_or("the management cluster".to_string(), |s| format!("the cluster of Secret {s}"));
        let mut observations = Vec::with_capacity(checked.len());
        let looking = async {
            let cluster = match &secret {
                None => self.clusters.here(),
                Some(secret) => match self.clusters.of(home, secret, KUBECONFIG_KEY).await {
                    Ok(cluster) => cluster,
                    Err(why) => {
                        observations.resize(checked.len(), Observation::Unreadable(why.to_string()));
                        return;
                    }
                },
            };
            let mut spending = Spending::default();
            for (name, namespace) in checked {
                match observe(&cluster, rules, name, namespace, &mut spending).await {
                    Ok(observation) => observations.push(observation),
                    Err(spent) => {
                        let why =
                            format!("not verified: {target} answered {spent} in one look, the most the host reads");
                        observations.resize(checked.len(), Observation::Unreadable(why));
                        return;
                    }
                }
            }
        };
        if tokio::time::timeout(LOOK_WITHIN, looking).await.is_err() {
            let why = format!("{target} was not read within {}s", LOOK_WITHIN.as_secs());
            observations.resize(checked.len(), Observation::Unreadable(why));
        }
        observations
    }
}

/// The health verdicts on one ServiceSet's services.
pub struct Verdicts {
    /// [`HEALTH_RULES`], when any rule ConfigMap applies.
    rules: Option<Condition>,
    /// Each checked service's verdict, by name and namespace.
    pub services: BTreeMap<(String, String), Health>,
}

impl Verdicts {
    /// Writes them into `status`, a status of `service_set`.
    pub fn apply(&self, service_set: &ServiceSet, status: &mut ServiceSetStatus, now: &Time) {
        match &self.rules {
            Some(condition) => conditions::set(&mut status.conditions, condition.clone()),
            None => conditions::remove(&mut status.conditions, HEALTH_RULES),
        }
        if !self.services.is_empty() {
            let generation = service_set.metadata.generation;
            verdict::apply(status, &self.services, service_set.status.as_ref(), generation, now);
        }
    }

    /// Whether a service should be looked at again soon: it is unhealthy, or its target could
    /// not be read.
    pub fn unsettled(&self) -> bool {
        self.services.values().any(Health::unsettled)
    }
}

/// The objects of every kind `rules` list for the service ([`RuleSet::listing`]) that carry any
/// of the [`DISCOVERY_LABELS`] with the service's name, in its namespace (or anywhere, for a
/// cluster-scoped kind), each answer counted against the look's `spending`: the bound passed,
/// once it is.
async fn observe(
    cluster: &Cluster,
    rules: &RuleSet,
    name: &str,
    namespace: &str,
    spending: &mut Spending,
) -> Result<Observation, Spent> {
    let mut found = Vec::new();
    for (kind, rule) in rules.listing(namespace) {
        let mut objects = Vec::new();
        for label in DISCOVERY_LABELS {
            let most = spending.objects_left();
            match cluster.list(kind, &rule.version, rule.scope, namespace, (label, name), most).await {
                Ok(listed) => {
                    spending.spend(listed.bytes, listed.count)?;
                    objects.extend(listed.objects);
                }
                Err(e) => {
                    let on = cluster.on();
                    let why = format!("listing {} labelled {label}={name}{on}: {e}", kind.kind);
                    return Ok(Observation::Unreadable(why));
                }
            }
        }
        found.push(Found { kind: kind.clone(), objects });
    }
    Ok(Observation::Found(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::remote::clusters::Reads;
    use crate::health::look_budget::{LOOK_BYTES, LOOK_OBJECTS};
    use crate::health::rule_set::GroupKind;
    use kube::runtime::reflector;
    use serde_json::{Value, json};

    /// A health check reading through `client`, the ServiceSet `mgmt` (self-management: its
    /// workloads are on the management cluster) and its rules: one on Deployments.
    fn checking(client: kube::Client) -> (TargetHealth, ServiceSet, RuleSet) {
        let clusters = Arc::new(Clusters::new(client, 4, Reads::Requests, Default::default()));
        let check = TargetHealth {
            clusters,
            rules: reflector::store().0,
            cel: Arc::new(RuleCache::new()),
            system_namespace: "kcm-system".into(),
            looks: Slots::new(1),
        };
        let service_set: ServiceSet = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "mgmt", "namespace": "kcm-system"},
            "spec": {"provider": {"name": "ksm-flux", "selfManagement": true}},
        }))
        .unwrap();
        let deployments = GroupKind { group: "apps".into(), kind: "Deployment".into() };
        let rules: Vec<ConfigMap> =
            vec![serde_json::from_value(json!({
            "metadata": {"name": "rules", "namespace": "kcm-system"},
            "data": {"rules": "- {group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: 'true'}"},
        }))
        .unwrap()];
        let rules = rule_set::load(&rules.iter().collect::<Vec<_>>(), None, &check.cel);
        assert!(rules.kinds.contains_key(&deployments), "{:?}", rules.errors);
        (check, service_set, rules)
    }

    /// Services `a` and `b` of namespace `team`.
    fn checked() -> [(String, String); 2] {
        [("a".to_string(), "team".to_string()), ("b".to_string(), "team".to_string())]
    }

    #[tokio::test(start_paused = true)]
    async fn a_look_at_a_cluster_that_never_answers_ends_within_its_bound() {
        // The management cluster's client has no deadline of its own: only the look's ends it.
        let silent = tower::service_fn(|_: http::Request<kube::client::Body>| {
            futures::future::pending::<Result<http::Response<kube::client::Body>, std::convert::Infallible>>()
        });
        let (check, service_set, rules) = checking(kube::Client::new(silent, "default"));
        let start = tokio::time::Instant::now();
        let observations = check.look(&service_set, &check.clusters.here(), &rules, &checked()).await;
        assert_eq!(start.elapsed(), LOOK_WITHIN);
        let why = "the management cluster was not read within 30s".to_string();
        assert_eq!(observations, [Observation::Unreadable(why.clone()), Observation::Unreadable(why)]);
    }

    /// What a look at services `a` and `b` sees of a cluster that serves Deployments and
    /// answers every list with `items` (ignoring its `limit`), and how many lists it asked.
    async fn look_at(items: Vec<Value>) -> (Vec<Observation>, usize) {
        let (client, asked) = crate::controller::mock_api::client(move |line| match line {
            "GET /apis" => Some((
                200,
                json!({"kind": "APIGroupList", "groups": [{"name": "apps",
                "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]}),
            )),
            "GET /apis/apps/v1" => Some((
                200,
                json!({"kind": "APIResourceList", "groupVersion": "apps/v1",
                "resources": [{"name": "deployments", "singularName": "deployment", "namespaced": true,
                               "kind": "Deployment", "verbs": ["list"]}]}),
            )),
            "GET /apis/apps/v1/namespaces/team/deployments" => {
                Some((200, json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {}, "items": items})))
            }
            _ => None,
        });
        let (check, service_set, rules) = checking(client);
        let observations = check.look(&service_set, &check.clusters.here(), &rules, &checked()).await;
        let lists = asked.lock().unwrap().iter().filter(|l| l.contains("/deployments?")).count();
        (observations, lists)
    }

    /// The objects of the one kind a look found for a service.
    fn found(observation: &Observation) -> usize {
        let Observation::Found(found) = observation else { panic!("{observation:?}") };
        found.iter().map(|f| f.objects.len()).sum()
    }

    #[tokio::test]
    async fn a_look_stops_once_its_answers_hold_more_objects_than_its_budget() {
        // Each list answers 2,000 objects: `a`'s four lists hold 8,000, `b`'s second passes 10,000.
        let items = (0..LOOK_OBJECTS / 5).map(|i| json!({"metadata": {"name": format!("d{i}"), "namespace": "team"}}));
        let (observations, lists) = look_at(items.collect()).await;
        assert_eq!(found(&observations[0]), 4 * LOOK_OBJECTS / 5, "a is judged");
        let why = "not verified: the management cluster answered more than 10000 objects in one look, the most the \
                   host reads";
        assert_eq!(observations[1], Observation::Unreadable(why.into()));
        assert_eq!(lists, 6, "the look stopped at the list that passed the bound");
    }

    #[tokio::test]
    async fn a_look_stops_once_its_answers_hold_more_bytes_than_its_budget() {
        // Each list answers 3 objects of 2 MiB: `a`'s four lists hold 24 MiB, `b`'s second passes 32.
        let large = "x".repeat(2 << 20);
        let items = (0..3).map(|i| json!({"metadata": {"name": format!("d{i}"), "annotations": {"pad": large}}}));
        let (observations, lists) = look_at(items.collect()).await;
        assert_eq!(found(&observations[0]), 12, "a is judged");
        let why = format!(
            "not verified: the management cluster answered more than {} MiB in one look, the most the host reads",
            LOOK_BYTES >> 20
        );
        assert_eq!(observations[1], Observation::Unreadable(why));
        assert_eq!(lists, 6, "the look stopped at the list that passed the bound");
    }

    /// Issue 45: a tenant's many ServiceSets with slow targets could hold every reconcile worker
    /// in looks. A namespace runs at most its share of looks at once; the others are not looked
    /// at now (their verified deployments stay Deployed) and are looked at again soon.
    #[tokio::test]
    async fn a_namespace_runs_at_most_its_share_of_looks_at_once() {
        let (client, asked) = crate::controller::mock_api::client(|_| None);
        let (check, service_set, rules) = checking(client);
        let running = check.looks.take("kcm-system").expect("a free slot");
        let observations = check.look(&service_set, &check.clusters.here(), &rules, &checked()).await;
        let why = "not verified now: namespace kcm-system runs 1 look at its targets already".to_string();
        assert_eq!(observations, [Observation::Unreadable(why.clone()), Observation::Unreadable(why)]);
        assert!(asked.lock().unwrap().is_empty(), "nothing read");
        drop(running);
        check.look(&service_set, &check.clusters.here(), &rules, &checked()).await;
        assert!(!asked.lock().unwrap().is_empty(), "its turn: the look reads");
    }
}
