//! Gathers what the health verdict ([`crate::health`]) needs and writes it into the status the
//! round is about to write: the rule ConfigMaps applying to the ServiceSet (from a cache of the
//! labelled ones), and each checked service's workloads on its target cluster, read through the
//! ServiceSet's kubeconfig Secret (`<cluster>-kubeconfig`, key `value`, as kcm; on the regional
//! cluster for a ServiceSet served through a region) or, for self-management, on the management
//! cluster, where a tenant's rules list only in the tenant's namespace.

use crate::conditions::{self, types::HEALTH_RULES};
use crate::controller::plumbing::slots::{Slots, Turn};
use crate::controller::remote::clusters::{Cluster, Clusters};
use crate::controller::remote::listed::Listed;
use crate::health::is_workload_of;
use crate::health::look_budget::{LOOK_OBJECTS, Spending, Spent};
use crate::health::rule_set::{self, GroupKind, Rule, RuleSet, Scope};
use crate::health::target;
use crate::health::verdict::{self, Found, Health, Look, Observation};
use crate::k0rdent::{ServiceSet, ServiceSetStatus};
use crate::plan::route::KUBECONFIG_KEY;
use crate::plugin::call_blocking;
use crate::rules::RuleCache;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How long one look at a target cluster (all of one ServiceSet's checked services) may take:
/// each call has its deadline ([`crate::controller::remote::clusters::Reads::limits`]), but a cluster that answers
/// each just in time must not hold the reconcile for as many deadlines as it makes calls.
const LOOK_WITHIN: Duration = Duration::from_secs(30);
/// How long a look waits for one of its namespace's slots: a look at a target that answers is
/// over in milliseconds, so a busy namespace's next look waits its turn rather than report its
/// services unverified; one whose looks hang gives up soon, holding its worker no longer.
const SLOT_WITHIN: Duration = Duration::from_secs(1);

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
        let (previous, mut look) = (service_set.status.as_ref(), Look::Again);
        let mut checked: Vec<(String, String)> = Vec::new();
        for service in status.services.iter().filter(|s| verdict::checked(s)) {
            look = look.min(verdict::look(service, previous));
            checked.push((service.name.clone(), service.namespace.clone()));
        }
        let mut errors = rules.errors.clone();
        errors.extend(rules.unjudged(&checked));
        if !checked.is_empty() && !rules.kinds.is_empty() {
            let observations = self.look(service_set, home, &rules, &checked, look).await;
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
    /// and the look says why. When its namespace runs its share of looks, a [`Look::First`] waits
    /// at most [`SLOT_WITHIN`] for a slot; a [`Look::HeldBack`] waits too, but only while no
    /// first look does; a [`Look::Again`] takes a free slot. A look without a slot is
    /// [`Observation::Deferred`]. Under load, new deployments are verified first, then the held
    /// back ones, and a slot freed goes to a waiting look before one looking again.
    async fn look(
        &self,
        service_set: &ServiceSet,
        home: &Cluster,
        rules: &RuleSet,
        checked: &[(String, String)],
        look: Look,
    ) -> Vec<Observation> {
        let namespace = service_set.namespace().unwrap_or_default();
        let slot = match look {
            Look::First => self.looks.wait_for(&namespace, SLOT_WITHIN, Turn::First).await,
            Look::HeldBack => self.looks.wait_for(&namespace, SLOT_WITHIN, Turn::After).await,
            Look::Again => self.looks.take(&namespace),
        };
        let Some(_slot) = slot else {
            let (per_namespace, looks) =
                (self.looks.per_key(), if self.looks.per_key() == 1 { "look" } else { "looks" });
            let why = format!("namespace {namespace} runs {per_namespace} {looks} at its targets already");
            return vec![Observation::Deferred(why); checked.len()];
        };
        let secret = target::kubeconfig_secret(service_set);
        let target =
            secret.as_ref().map_or("the management cluster".to_string(), |s| format!("the cluster of Secret {s}"));
        let looking = async {
            let cluster = match &secret {
                None => self.clusters.here(),
                Some(secret) => match self.clusters.of(home, secret, KUBECONFIG_KEY).await {
                    Ok(cluster) => cluster,
                    Err(why) => return vec![Observation::Unreadable(why.to_string()); checked.len()],
                },
            };
            let spent = |spent| format!("not verified: {target} answered {spent} in one look, the most the host reads");
            observe(&cluster, rules, checked, spent).await
        };
        match tokio::time::timeout(LOOK_WITHIN, looking).await {
            Ok(observations) => observations,
            Err(_) => {
                let why = format!("{target} was not read within {}s", LOOK_WITHIN.as_secs());
                vec![Observation::Unreadable(why); checked.len()]
            }
        }
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

/// Lists one look has under way at once: its lists (a kind per namespace of its services) go
/// two by two, not one round trip after another, which at a remote cluster's latency is most of
/// a look's time. Two answers of a target's 16 MiB cap are the look's byte budget
/// ([`crate::health::look_budget::LOOK_BYTES`]): a hostile target makes a look hold no more at
/// once than it may read in all.
const LISTS_AT_ONCE: usize = 2;

/// One list of a look: `kind` as `rule` lists it, in `namespace` (`""`: anywhere), keeping the
/// workloads of `services`.
struct List<'a> {
    kind: &'a GroupKind,
    rule: &'a Rule,
    namespace: &'a str,
    services: &'a BTreeSet<&'a str>,
}

/// What `cluster` holds of each of the `checked` services (name, namespace), in their order: per
/// service namespace, one list of each kind `rules` name there (one per look for a
/// cluster-scoped kind), paged, keeping the objects that are a checked service's workloads
/// ([`is_workload_of`]). The kinds' groups are discovered first, then the lists' first pages
/// are asked [`LISTS_AT_ONCE`] at a time; the answers are counted against the look's budget in
/// the lists' order, so the verdict does not hang on which answer came first: once it is
/// spent, the services not yet observed are [`Observation::Unreadable`] for `spent`'s reason.
/// One list per kind and namespace, not one per discovery label and service, as kcm's verifier
/// makes.
async fn observe(
    cluster: &Cluster,
    rules: &RuleSet,
    checked: &[(String, String)],
    spent: impl Fn(Spent) -> String,
) -> Vec<Observation> {
    let mut names: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, namespace) in checked {
        names.entry(namespace).or_default().insert(name);
    }
    let everywhere: BTreeSet<&str> = checked.iter().map(|(name, _)| name.as_str()).collect();
    let mut lists: Vec<List> = Vec::new();
    let mut cluster_wide: BTreeMap<&GroupKind, usize> = BTreeMap::new();
    // Each namespace's lists, as indexes into `lists`.
    let mut namespaces: Vec<(&str, Vec<usize>)> = Vec::new();
    for (namespace, services) in &names {
        let mut own = Vec::new();
        for (kind, rule) in rules.listing(namespace) {
            let mut add = |namespace, services| {
                lists.push(List { kind, rule, namespace, services });
                lists.len() - 1
            };
            own.push(match rule.scope {
                Scope::Namespaced => add(namespace, services),
                Scope::Cluster => *cluster_wide.entry(kind).or_insert_with(|| add("", &everywhere)),
            });
        }
        namespaces.push((namespace, own));
    }
    let versions = lists.iter().map(|list| (list.kind.group.as_str(), list.rule.version.as_str())).collect();
    cluster.discover(&versions).await;
    let mut spending = Spending::default();
    let mut answers: Vec<Result<Vec<Value>, String>> = Vec::with_capacity(lists.len());
    let mut stopped = None;
    // Collected and boxed: a closure held across an await keeps the look's future from being
    // proven Send for every lifetime.
    let first_pages: Vec<_> = lists.iter().map(|list| page(cluster, list, None, LOOK_OBJECTS).boxed()).collect();
    let mut first_pages = futures::stream::iter(first_pages).buffered(LISTS_AT_ONCE);
    while let Some(first) = first_pages.next().await {
        match all_pages(cluster, &lists[answers.len()], first, &mut spending).await {
            Ok(answer) => answers.push(answer),
            Err(over) => {
                stopped = Some(spent(over));
                break;
            }
        }
    }
    let found: BTreeMap<&str, Listing> = namespaces
        .into_iter()
        .filter(|(_, own)| own.iter().all(|&i| i < answers.len()))
        .map(|(namespace, own)| {
            let kinds = own.iter().map(|&i| match &answers[i] {
                Ok(objects) => Ok((lists[i].kind, objects.as_slice())),
                Err(why) => Err(why.as_str()),
            });
            (namespace, kinds.collect())
        })
        .collect();
    let observation = |(name, namespace): &(String, String)| match found.get(namespace.as_str()) {
        Some(Ok(kinds)) => Observation::Found(
            kinds
                .iter()
                .map(|&(kind, objects)| Found {
                    kind: kind.clone(),
                    objects: objects.iter().filter(|o| is_workload_of(o, name)).cloned().collect(),
                })
                .collect(),
        ),
        Some(Err(why)) => Observation::Unreadable(why.to_string()),
        None => Observation::Unreadable(stopped.clone().unwrap_or_default()),
    };
    checked.iter().map(observation).collect()
}

/// What a look found in one namespace: each kind's objects (all the namespace's services', a
/// cluster-scoped kind's shared by every namespace), or why it could not list them.
type Listing<'a> = Result<Vec<(&'a GroupKind, &'a [Value])>, &'a str>;

/// The page of `list` from the token `token` (`None`: the first), of at most `most` objects kept,
/// or why the cluster could not be read.
async fn page(cluster: &Cluster, list: &List<'_>, token: Option<&str>, most: usize) -> Result<Listed, String> {
    let wanted = |object: &Value| list.services.iter().any(|name| is_workload_of(object, name));
    let listing = (list.kind, list.rule.version.as_str(), list.rule.scope);
    cluster.list(listing, list.namespace, token, most, &wanted).await.map_err(|e| {
        let place = if list.namespace.is_empty() { String::new() } else { format!(" in {}", list.namespace) };
        format!("listing {}{place}{}: {e}", list.kind.kind, cluster.on())
    })
}

/// Every object of `list`, from its `first` page on, each page counted against `spending`: the
/// bound passed, once it is; why the cluster could not be read, when it could not.
async fn all_pages(
    cluster: &Cluster,
    list: &List<'_>,
    first: Result<Listed, String>,
    spending: &mut Spending,
) -> Result<Result<Vec<Value>, String>, Spent> {
    let mut objects = Vec::new();
    let mut listed = first;
    loop {
        let answer = match listed {
            Ok(answer) => answer,
            Err(why) => return Ok(Err(why)),
        };
        spending.spend(answer.bytes, answer.count)?;
        objects.extend(answer.objects);
        let Some(next) = answer.next else { return Ok(Ok(objects)) };
        listed = page(cluster, list, Some(&next), spending.objects_left()).await;
    }
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
        let observations = check.look(&service_set, &check.clusters.here(), &rules, &checked(), Look::First).await;
        assert_eq!(start.elapsed(), LOOK_WITHIN);
        let why = "the management cluster was not read within 30s".to_string();
        assert_eq!(observations, [Observation::Unreadable(why.clone()), Observation::Unreadable(why)]);
    }

    /// What a look at `services` (name, namespace) sees of a cluster that serves Deployments
    /// and answers every list in namespace `ns` with `answer(ns, page)` (the page of the list
    /// so far in that namespace, from 0; ignoring its `limit`), and the lists it asked, in order.
    async fn look_at(
        services: &[(&str, &str)],
        answer: impl Fn(&str, usize) -> Value + Send + Sync + 'static,
    ) -> (Vec<Observation>, Vec<String>) {
        let (observations, lists, _) = look_after(Duration::ZERO, services, answer).await;
        (observations, lists)
    }

    /// [`look_at`] a cluster answering each request after `delay`, and how long the look took.
    async fn look_after(
        delay: Duration,
        services: &[(&str, &str)],
        answer: impl Fn(&str, usize) -> Value + Send + Sync + 'static,
    ) -> (Vec<Observation>, Vec<String>, Duration) {
        let pages = std::sync::Mutex::new(BTreeMap::<String, usize>::new());
        let (client, asked) = crate::controller::mock_api::client_answering_after(delay, move |line| match line {
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
            _ => {
                let ns = line.strip_prefix("GET /apis/apps/v1/namespaces/")?.strip_suffix("/deployments")?;
                let mut pages = pages.lock().unwrap();
                let page = pages.entry(ns.to_string()).or_default();
                *page += 1;
                Some((200, answer(ns, *page - 1)))
            }
        });
        let (check, service_set, rules) = checking(client);
        let services: Vec<(String, String)> = services.iter().map(|(n, ns)| (n.to_string(), ns.to_string())).collect();
        let started = tokio::time::Instant::now();
        let observations = check.look(&service_set, &check.clusters.here(), &rules, &services, Look::First).await;
        let lists = asked.lock().unwrap().iter().filter(|l| l.contains("/deployments?")).cloned().collect();
        (observations, lists, started.elapsed())
    }

    /// A Deployment list answer of `items`, with `next` as its continue token.
    fn deployments(items: impl IntoIterator<Item = Value>, next: &str) -> Value {
        let items: Vec<Value> = items.into_iter().collect();
        json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {"continue": next}, "items": items})
    }

    /// Deployment `name` labelled `label: value`.
    fn deployment(name: &str, (label, value): (&str, &str)) -> Value {
        json!({"metadata": {"name": name, "labels": {label: value}}})
    }

    /// The names of the objects of the one kind a look found for a service.
    fn found(observation: &Observation) -> Vec<String> {
        let Observation::Found(found) = observation else { panic!("{observation:?}") };
        found.iter().flat_map(|f| &f.objects).map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect()
    }

    /// Issue 48: kcm's verifier lists each kind once per discovery label per service; a look
    /// lists each kind once per namespace of its services, whatever the labels, and tells each
    /// service its own workloads, by any of the discovery labels.
    #[tokio::test]
    async fn a_look_lists_a_kind_once_per_namespace_and_tells_each_service_its_workloads() {
        let (observations, lists) = look_at(&[("a", "team"), ("b", "team"), ("c", "other")], |ns, _| match ns {
            "team" => deployments(
                [
                    deployment("a-web", ("app.kubernetes.io/instance", "a")),
                    deployment("a-db", ("release", "a")),
                    deployment("b-web", ("app", "b")),
                    deployment("unrelated", ("app.kubernetes.io/instance", "z")),
                ],
                "",
            ),
            _ => deployments([deployment("c", ("app.kubernetes.io/name", "c")), deployment("a", ("app", "a"))], ""),
        })
        .await;
        assert_eq!(lists.len(), 2, "one list per namespace: {lists:?}");
        assert!(lists.iter().all(|l| !l.contains("labelSelector")), "{lists:?}");
        assert_eq!(found(&observations[0]), ["a-web", "a-db"]);
        assert_eq!(found(&observations[1]), ["b-web"]);
        assert_eq!(found(&observations[2]), ["c"], "a's name in another namespace is not a's");
    }

    /// Issue 48: a look's lists went one round trip after another, so at a remote cluster's
    /// latency a look took some twenty. Its kinds' group is discovered once, then its lists go
    /// [`LISTS_AT_ONCE`] at a time.
    #[tokio::test(start_paused = true)]
    async fn a_looks_lists_go_two_at_a_time_after_one_discovery() {
        let services = [("a", "team"), ("b", "zoo"), ("c", "other")];
        let (observations, lists, took) =
            look_after(Duration::from_secs(1), &services, |_, _| deployments([deployment("d", ("app", "a"))], ""))
                .await;
        assert_eq!(lists.len(), 3, "{lists:?}");
        assert_eq!(LISTS_AT_ONCE, 2);
        assert_eq!(took, Duration::from_secs(3), "one round trip to discover apps/v1, two for the three lists");
        assert_eq!(found(&observations[0]), ["d"]);
        assert!(found(&observations[1]).is_empty());
    }

    #[tokio::test]
    async fn a_look_follows_a_lists_pages() {
        let (observations, lists) = look_at(&[("a", "team")], |_, page| match page {
            0 => deployments([deployment("first", ("app", "a"))], "page-2"),
            _ => deployments([deployment("second", ("app", "a"))], ""),
        })
        .await;
        assert_eq!(found(&observations[0]), ["first", "second"]);
        assert_eq!(lists.len(), 2);
        assert!(lists[1].contains("continue=page-2"), "{lists:?}");
    }

    #[tokio::test]
    async fn a_look_stops_once_its_answers_hold_more_of_its_services_objects_than_its_budget() {
        // Each namespace answers 6,000 of its service's objects and as many others, which do not
        // count: `a`'s fit the budget, `b`'s pass it.
        let (observations, lists) = look_at(&[("a", "team"), ("b", "zoo")], |ns, _| {
            let service = if ns == "team" { "a" } else { "b" };
            let own = (0..6_000).map(|i| deployment(&format!("d{i}"), ("app", service)));
            let others = (0..6_000).map(|i| deployment(&format!("o{i}"), ("app", "other")));
            deployments(own.chain(others), "")
        })
        .await;
        assert_eq!(found(&observations[0]).len(), 6_000, "a is judged");
        let why = "not verified: the management cluster answered more than 10000 objects in one look, the most the \
                   host reads";
        assert_eq!(observations[1], Observation::Unreadable(why.into()));
        assert_eq!(lists.len(), 2, "the look stopped at the list that passed the bound");
        assert_eq!(LOOK_OBJECTS, 10_000);
    }

    #[tokio::test]
    async fn a_look_stops_once_its_answers_hold_more_bytes_than_its_budget() {
        // Each namespace answers 10 objects of 2 MiB, none the services': 20 MiB, then 40.
        let large = "x".repeat(2 << 20);
        let (observations, lists) = look_at(&[("a", "team"), ("b", "zoo")], move |_, _| {
            let items = (0..10).map(|i| json!({"metadata": {"name": format!("d{i}"), "annotations": {"pad": large}}}));
            deployments(items, "")
        })
        .await;
        assert_eq!(found(&observations[0]).len(), 0, "a is judged: none of its workloads");
        let why = format!(
            "not verified: the management cluster answered more than {} MiB in one look, the most the host reads",
            LOOK_BYTES >> 20
        );
        assert_eq!(observations[1], Observation::Unreadable(why));
        assert_eq!(lists.len(), 2, "the look stopped at the list that passed the bound");
    }

    /// Issue 45: a tenant's many ServiceSets with slow targets could hold every reconcile worker
    /// in looks. A namespace runs at most its share of looks at once; the others are deferred,
    /// one that may deploy once it has waited its bound for a slot, and are looked at again soon.
    /// Issue 48: a look again at verified deployments does not wait, so that under load the
    /// looks that may deploy get the slots; and a look again at a held-back deployment waits only
    /// while no first look does: at 100,000 ServiceSets in one namespace, 1,000 held back and
    /// polled every 15 s waited in line with the first looks and held the workers they needed.
    #[tokio::test(start_paused = true)]
    async fn a_namespace_runs_at_most_its_share_of_looks_at_once_and_first_looks_go_first() {
        let (client, asked) = crate::controller::mock_api::client(|_| None);
        let (check, service_set, rules) = checking(client);
        let here = check.clusters.here();
        let running = check.looks.take("kcm-system").expect("a free slot");
        let why = "namespace kcm-system runs 1 look at its targets already".to_string();
        let deferred = [Observation::Deferred(why.clone()), Observation::Deferred(why)];
        for (look, waited) in [(Look::First, SLOT_WITHIN), (Look::HeldBack, SLOT_WITHIN), (Look::Again, Duration::ZERO)]
        {
            let started = tokio::time::Instant::now();
            let observations = check.look(&service_set, &here, &rules, &checked(), look).await;
            assert_eq!(started.elapsed(), waited, "{look:?}");
            assert_eq!(observations, deferred);
        }
        let (started, services) = (tokio::time::Instant::now(), checked());
        let held_back = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let observations = check.look(&service_set, &here, &rules, &services, Look::HeldBack).await;
            (started.elapsed(), observations)
        };
        let (first, (gave_way, observations)) =
            tokio::join!(check.look(&service_set, &here, &rules, &services, Look::First), held_back);
        assert_eq!(gave_way, Duration::from_millis(100), "a first look waits: a held-back one does not");
        assert_eq!((first, observations), (deferred.to_vec(), deferred.to_vec()));
        assert!(asked.lock().unwrap().is_empty(), "nothing read");
        drop(running);
        check.look(&service_set, &here, &rules, &checked(), Look::Again).await;
        assert!(!asked.lock().unwrap().is_empty(), "its turn: the look reads");
    }
}
