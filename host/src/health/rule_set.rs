//! Health rules from ConfigMaps: which ConfigMaps apply to a ServiceSet (kcm's three tiers, all
//! additive) and the rules they hold, each checked and compiled on its own so that a broken one
//! is named by its source and never breaks the others. Whoever may write ConfigMaps in a
//! namespace may write many, so the rules one namespace gives a ServiceSet are bounded across
//! its ConfigMaps ([`MAX_NAMESPACE_RULES`], [`MAX_NAMESPACE_BYTES`]), the operator's apart.
//!
//! On the management cluster the host reads with its own broad RBAC, so a tenant's rules (from
//! the ServiceSet's namespace, when that is not the system namespace) are *confined* to that
//! namespace: they judge only its objects, so their `message` can carry nothing of an object the
//! tenant could not read itself; one with `scope: Cluster`, or for a service in another
//! namespace, is not applied and is named.

use super::{DATA_KEY, GLOBAL, TARGET_LABEL};
use crate::k0rdent::ServiceSet;
use crate::rules::{CompileError, RuleCache};
use k8s_openapi::api::core::v1::ConfigMap;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::Deref;

/// The most kinds the rules of one ServiceSet may name: each kind costs four list requests per
/// service on the target cluster, and tenants write the rules of their namespace.
pub const MAX_KINDS: usize = 16;
/// The most bytes of rules the ConfigMaps of one namespace may give one ServiceSet, all of them
/// together: parsed on every check of the ServiceSet, and far more than the rules of every
/// workload kind need (the chart's defaults for kcm's six kinds take a small part of it). Per
/// namespace, not per ConfigMap, as whoever may write ConfigMaps in a namespace may write many;
/// the operator's (the system namespace's) budget is its own, so a tenant cannot crowd them out.
pub const MAX_NAMESPACE_BYTES: usize = 64 * 1024;
/// The most rules the ConfigMaps of one namespace may give one ServiceSet, all of them together:
/// every object of a kind is run against all of its rules (see [`MAX_NAMESPACE_BYTES`]).
pub const MAX_NAMESPACE_RULES: usize = 64;

/// Whether a kind's objects live in namespaces (listed in the service's namespace) or not
/// (listed cluster-wide).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// In the service's namespace.
    Namespaced,
    /// Cluster-wide.
    Cluster,
}

/// A kind as rules name it: the version says where to list it, not which objects apply.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
}

/// One rule, ready to evaluate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The version to list the kind at, if the target cluster serves it.
    pub version: String,
    /// Where to list the kind.
    pub scope: Scope,
    /// CEL over `obj`: true when the object is healthy.
    pub healthy: String,
    /// CEL over `obj`: why it is not (best effort).
    pub message: String,
    /// Where it came from: `<namespace>/<configmap>#<index>`.
    pub source: String,
    /// The one namespace whose objects it may judge (a tenant's rule on the management
    /// cluster); `None`: whatever its kind's listing finds.
    pub confined_to: Option<String>,
}

impl Rule {
    /// Whether the rule may judge an object in `namespace` (`None`: a cluster-scoped object).
    pub fn judges(&self, namespace: Option<&str>) -> bool {
        self.confined_to.as_deref().is_none_or(|confined| Some(confined) == namespace)
    }
}

/// A ConfigMap or rule the host could not use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// `<namespace>/<configmap>` or `<namespace>/<configmap>#<index>`.
    pub source: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.source, self.message)
    }
}

/// Why a ConfigMap's rules, or one of its rules, cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// The ConfigMap holds more bytes than its namespace's budget has left.
    #[error(
        "{DATA_KEY:?} holds {bytes} bytes, more than the {} left of namespace {}'s budget of \
         {MAX_NAMESPACE_BYTES} bytes per ServiceSet ({COUNTED}); not loaded",
        .left.bytes, .left.namespace
    )]
    TooLarge {
        /// Its bytes.
        bytes: usize,
        /// What its namespace's budget has left.
        left: Left,
    },
    /// Its rules are not a YAML list.
    #[error("parse {DATA_KEY:?}: {0}")]
    Unparsable(#[source] serde_norway::Error),
    /// It holds more rules than its namespace's budget has left.
    #[error(
        "{DATA_KEY:?} holds {rules} rules, more than the {} left of namespace {}'s budget of \
         {MAX_NAMESPACE_RULES} rules per ServiceSet ({COUNTED}); not loaded",
        .left.rules, .left.namespace
    )]
    TooMany {
        /// Its rules.
        rules: usize,
        /// What its namespace's budget has left.
        left: Left,
    },
    /// A document that is not a rule.
    #[error("not a rule: {0}")]
    NotARule(#[source] serde_json::Error),
    /// A rule without kind or version.
    #[error("kind and version are required")]
    NoKind,
    /// A scope other than `Namespaced` or `Cluster`.
    #[error("scope must be \"Namespaced\" or \"Cluster\", got {0:?}")]
    Scope(String),
    /// A rule of scope `Cluster` confined to a namespace (its own).
    #[error("scope Cluster: {}; not applied", confinement(.0))]
    Confined(String),
    /// A rule without `healthy`.
    #[error("healthy is required")]
    NoHealthy,
    /// `healthy` does not compile.
    #[error("healthy: {0}")]
    Healthy(#[source] CompileError),
    /// `message` does not compile.
    #[error("message: {0}")]
    Message(#[source] CompileError),
}

/// The order in which a namespace's ConfigMaps spend its budget, as [`applicable`] sorts them:
/// the same ConfigMaps load every time, whatever order they are listed in.
const COUNTED: &str = "its ConfigMaps counted by tier, then name";

/// What is left of one namespace's budget ([`MAX_NAMESPACE_BYTES`], [`MAX_NAMESPACE_RULES`])
/// for one ServiceSet's rules.
#[derive(Clone, Debug)]
pub struct Left {
    /// The namespace.
    pub namespace: String,
    /// Bytes of rules.
    pub bytes: usize,
    /// Rules.
    pub rules: usize,
}

impl Left {
    /// The whole budget of `namespace`.
    fn all_of(namespace: &str) -> Self {
        Self { namespace: namespace.to_string(), bytes: MAX_NAMESPACE_BYTES, rules: MAX_NAMESPACE_RULES }
    }

    /// The rule documents of a ConfigMap's `text`, when they fit in what is left, which they
    /// spend: its bytes once parsed (loaded or not: parsing is the work bounded), its rules once
    /// loaded.
    fn spend(&mut self, text: &str) -> Result<Vec<Value>, Unusable> {
        if text.len() > self.bytes {
            return Err(Unusable::TooLarge { bytes: text.len(), left: self.clone() });
        }
        self.bytes -= text.len();
        let docs = serde_norway::from_str::<Vec<Value>>(text).map_err(Unusable::Unparsable)?;
        if docs.len() > self.rules {
            return Err(Unusable::TooMany { rules: docs.len(), left: self.clone() });
        }
        self.rules -= docs.len();
        Ok(docs)
    }
}

/// The rules applying to one ServiceSet, by kind (an object must pass every rule of its kind),
/// and what could not be loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleSet {
    /// The rules of each kind, in source order.
    pub kinds: BTreeMap<GroupKind, Vec<Rule>>,
    /// The ConfigMaps and rules left out, and why.
    pub errors: Vec<LoadError>,
}

impl RuleSet {
    /// The kinds to list for a service in `namespace`, each with the first rule that may judge
    /// its objects there: its version and scope say where to list. A kind whose rules are all
    /// confined to another namespace is not listed at all.
    pub fn listing<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = (&'a GroupKind, &'a Rule)> + 'a {
        self.kinds
            .iter()
            .filter_map(move |(kind, rules)| Some((kind, rules.iter().find(|r| r.judges(Some(namespace)))?)))
    }

    /// The confined rules that judge none of `services` (name, namespace) in another namespace,
    /// each named once with those services.
    pub fn unjudged(&self, services: &[(String, String)]) -> Vec<LoadError> {
        let confined = self.kinds.values().flatten().filter_map(|rule| Some((rule, rule.confined_to.as_deref()?)));
        confined
            .filter_map(|(rule, namespace)| {
                let elsewhere: Vec<String> = services
                    .iter()
                    .filter(|(_, service_namespace)| service_namespace != namespace)
                    .map(|(name, service_namespace)| format!("service {name} in {service_namespace}"))
                    .collect();
                (!elsewhere.is_empty()).then(|| LoadError {
                    source: rule.source.clone(),
                    message: format!("{}; not applied to {}", confinement(namespace), elsewhere.join(", ")),
                })
            })
            .collect()
    }
}

/// Why a rule confined to `namespace` does not apply somewhere.
fn confinement(namespace: &str) -> String {
    format!("on the management cluster a rule from namespace {namespace} judges only objects in {namespace}")
}

/// One rule as written in a ConfigMap.
#[derive(Deserialize)]
struct RuleDoc {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    scope: String,
    #[serde(default)]
    healthy: String,
    #[serde(default)]
    message: String,
}

/// The ConfigMaps (of those labelled [`TARGET_LABEL`]) whose rules apply to `service_set`, in
/// tier order: `global` in the system namespace (cluster-wide defaults), `global` in the
/// ServiceSet's namespace (tenant defaults), then those naming the ClusterDeployment or
/// MultiClusterService that owns it (the ServiceSet's own name is generated; its owner's is not).
pub fn applicable<C: Deref<Target = ConfigMap>>(
    config_maps: impl IntoIterator<Item = C>,
    service_set: &ServiceSet,
    system_namespace: &str,
) -> Vec<C> {
    let namespace = service_set.metadata.namespace.as_deref().unwrap_or_default();
    let owner = owner_name(service_set);
    let tier = |config_map: &ConfigMap| {
        let in_namespace = config_map.metadata.namespace.as_deref() == Some(namespace);
        let in_system = config_map.metadata.namespace.as_deref() == Some(system_namespace);
        match config_map.metadata.labels.as_ref()?.get(TARGET_LABEL)?.as_str() {
            GLOBAL if in_system => Some(0),
            GLOBAL if in_namespace => Some(1),
            target if in_namespace && Some(target) == owner => Some(2),
            _ => None,
        }
    };
    let mut applying: Vec<(u8, C)> =
        config_maps.into_iter().filter_map(|config_map| Some((tier(&config_map)?, config_map))).collect();
    applying.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.metadata.name.cmp(&y.metadata.name)));
    applying.into_iter().map(|(_, config_map)| config_map).collect()
}

/// The name of the ClusterDeployment or MultiClusterService that owns `service_set`: its owner
/// reference, as kcm sets it, else what its spec names.
fn owner_name(service_set: &ServiceSet) -> Option<&str> {
    let owners = service_set.metadata.owner_references.as_deref().unwrap_or_default();
    let owned = owners.iter().find(|o| matches!(o.kind.as_str(), "MultiClusterService" | "ClusterDeployment"));
    let spec = &service_set.spec;
    let named = [&spec.multi_cluster_service, &spec.cluster].into_iter().find(|name| !name.is_empty());
    owned.map(|o| o.name.as_str()).or(named.map(String::as_str))
}

/// The rules `config_maps` hold, each checked (kind, version, scope, `healthy` required) and its
/// CEL compiled; whatever fails is left out and named in [`RuleSet::errors`]. Kinds beyond
/// [`MAX_KINDS`] are left out too, and, whole, the ConfigMaps beyond what their namespace's
/// budget has left ([`MAX_NAMESPACE_BYTES`], [`MAX_NAMESPACE_RULES`]; spent in the order of
/// `config_maps`, [`applicable`]'s). The rules of ConfigMaps in `tenant` (see
/// [`super::target::tenant`]) are confined to it, and those of scope `Cluster` left out.
pub fn load<C: Deref<Target = ConfigMap>>(config_maps: &[C], tenant: Option<&str>, cel: &RuleCache) -> RuleSet {
    let mut set = RuleSet::default();
    let mut budgets: BTreeMap<&str, Left> = BTreeMap::new();
    for config_map in config_maps {
        let namespace = config_map.metadata.namespace.as_deref().unwrap_or_default();
        let name = format!("{namespace}/{}", config_map.metadata.name.as_deref().unwrap_or_default());
        let confined_to = tenant.filter(|tenant| *tenant == namespace);
        let text = config_map.data.as_ref().and_then(|data| data.get(DATA_KEY)).map(String::as_str).unwrap_or("");
        if text.trim().is_empty() {
            continue;
        }
        let left = budgets.entry(namespace).or_insert_with(|| Left::all_of(namespace));
        let docs = match left.spend(text) {
            Ok(docs) => docs,
            Err(e) => {
                set.errors.push(LoadError { source: name, message: e.to_string() });
                continue;
            }
        };
        for (index, doc) in docs.into_iter().enumerate() {
            let source = format!("{name}#{index}");
            match rule(doc, source.clone(), confined_to, cel) {
                Ok((kind, rule)) => add(&mut set, kind, rule),
                Err(e) => set.errors.push(LoadError { source, message: e.to_string() }),
            }
        }
    }
    set
}

/// `rule` under its kind, unless that would name more than [`MAX_KINDS`] kinds.
fn add(set: &mut RuleSet, kind: GroupKind, rule: Rule) {
    if set.kinds.len() >= MAX_KINDS && !set.kinds.contains_key(&kind) {
        let message = format!("{}: more than {MAX_KINDS} kinds have rules; this one is left out", kind.kind);
        set.errors.push(LoadError { source: rule.source, message });
        return;
    }
    set.kinds.entry(kind).or_default().push(rule);
}

/// One rule document, checked and compiled; confined to `confined_to`, where one of scope
/// `Cluster` is refused.
fn rule(doc: Value, source: String, confined_to: Option<&str>, cel: &RuleCache) -> Result<(GroupKind, Rule), Unusable> {
    let doc: RuleDoc = serde_json::from_value(doc).map_err(Unusable::NotARule)?;
    if doc.kind.is_empty() || doc.version.is_empty() {
        return Err(Unusable::NoKind);
    }
    let scope = match doc.scope.as_str() {
        "Namespaced" => Scope::Namespaced,
        "Cluster" => Scope::Cluster,
        other => return Err(Unusable::Scope(other.into())),
    };
    if let (Scope::Cluster, Some(namespace)) = (scope, confined_to) {
        return Err(Unusable::Confined(namespace.into()));
    }
    if doc.healthy.trim().is_empty() {
        return Err(Unusable::NoHealthy);
    }
    cel.check(&doc.healthy).map_err(Unusable::Healthy)?;
    cel.check(&doc.message).map_err(Unusable::Message)?;
    let kind = GroupKind { group: doc.group, kind: doc.kind };
    let confined_to = confined_to.map(str::to_string);
    Ok((kind, Rule { version: doc.version, scope, healthy: doc.healthy, message: doc.message, source, confined_to }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map(namespace: &str, name: &str, target: &str, rules: &str) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"namespace": namespace, "name": name, "labels": {TARGET_LABEL: target}},
            "data": {DATA_KEY: rules},
        }))
        .unwrap()
    }

    fn service_set(namespace: &str, owner: Option<(&str, &str)>, cluster: &str) -> ServiceSet {
        let owners: Vec<Value> = owner
            .map(|(kind, name)| json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": kind, "name": name, "uid": "u"}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"namespace": namespace, "name": "generated-x1", "ownerReferences": owners},
            "spec": {"cluster": cluster, "provider": {"name": "ksm-flux"}},
        }))
        .unwrap()
    }

    const DEPLOYMENT: &str = r#"
- group: apps
  version: v1
  kind: Deployment
  scope: Namespaced
  healthy: "has(obj.status.availableReplicas) && obj.status.availableReplicas >= obj.spec.replicas"
  message: "'available ' + string(obj.status.availableReplicas)"
"#;

    fn names(config_maps: &[&ConfigMap]) -> Vec<String> {
        config_maps
            .iter()
            .map(|c| format!("{}/{}", c.metadata.namespace.as_deref().unwrap(), c.metadata.name.as_deref().unwrap()))
            .collect()
    }

    #[test]
    fn the_three_tiers_apply_in_order_and_nothing_else() {
        let all = [
            config_map("team", "z-owner", "prod-cluster", ""),
            config_map("team", "tenant", GLOBAL, ""),
            config_map("kcm-system", "defaults", GLOBAL, ""),
            config_map("kcm-system", "other-owner", "prod-cluster", ""),
            config_map("other", "elsewhere", GLOBAL, ""),
            config_map("team", "someone-else", "dev-cluster", ""),
        ];
        let owned = service_set("team", Some(("ClusterDeployment", "prod-cluster")), "prod-cluster");
        assert_eq!(
            names(&applicable(&all, &owned, "kcm-system")),
            ["kcm-system/defaults", "team/tenant", "team/z-owner"]
        );
        let by_mcs = service_set("team", Some(("MultiClusterService", "dev-cluster")), "prod-cluster");
        assert_eq!(
            names(&applicable(&all, &by_mcs, "kcm-system")),
            ["kcm-system/defaults", "team/tenant", "team/someone-else"],
            "the owner reference wins over the cluster the spec names"
        );
        let unowned = service_set("team", None, "dev-cluster");
        assert_eq!(
            names(&applicable(&all, &unowned, "kcm-system")),
            ["kcm-system/defaults", "team/tenant", "team/someone-else"]
        );
        let in_system = service_set("kcm-system", None, "");
        assert_eq!(names(&applicable(&all, &in_system, "kcm-system")), ["kcm-system/defaults"]);
    }

    #[test]
    fn rules_load_by_kind_with_their_source() {
        let cms =
            [config_map("kcm-system", "defaults", GLOBAL, DEPLOYMENT), config_map("team", "t", GLOBAL, DEPLOYMENT)];
        let set = load(&cms.iter().collect::<Vec<_>>(), None, &RuleCache::new());
        assert_eq!(set.errors, []);
        let kind = GroupKind { group: "apps".into(), kind: "Deployment".into() };
        let rules = &set.kinds[&kind];
        assert_eq!(rules.iter().map(|r| r.source.as_str()).collect::<Vec<_>>(), ["kcm-system/defaults#0", "team/t#0"]);
        assert_eq!((rules[0].version.as_str(), rules[0].scope), ("v1", Scope::Namespaced));
    }

    #[test]
    fn a_tenants_rules_are_confined_to_its_namespace_and_named_where_they_do_not_apply() {
        let secrets = r#"
- {group: "", version: v1, kind: Secret, scope: Cluster, healthy: "false", message: "obj.data.token"}
- {group: "", version: v1, kind: Secret, scope: Namespaced, healthy: "false", message: "obj.data.token"}
- {group: "", version: v1, kind: PersistentVolume, scope: Namespaced, healthy: "false"}
"#;
        let volumes = "- {group: '', version: v1, kind: PersistentVolume, scope: Cluster, healthy: 'true'}";
        let cms = [config_map("kcm-system", "defaults", GLOBAL, volumes), config_map("team", "t", GLOBAL, secrets)];
        let set = load(&cms.iter().collect::<Vec<_>>(), Some("team"), &RuleCache::new());
        let messages: Vec<String> = set.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            ["team/t#0: scope Cluster: on the management cluster a rule from namespace team judges only objects in \
              team; not applied"]
        );
        let secret = GroupKind { group: String::new(), kind: "Secret".into() };
        let volume = GroupKind { group: String::new(), kind: "PersistentVolume".into() };
        assert_eq!(set.kinds[&secret][0].confined_to.as_deref(), Some("team"));
        let volumes: Vec<(&str, Option<&str>)> =
            set.kinds[&volume].iter().map(|r| (r.source.as_str(), r.confined_to.as_deref())).collect();
        assert_eq!(volumes, [("kcm-system/defaults#0", None), ("team/t#2", Some("team"))], "the operator's is not");

        let listed = |namespace| -> Vec<(String, String)> {
            set.listing(namespace).map(|(kind, rule)| (kind.kind.clone(), rule.source.clone())).collect()
        };
        assert_eq!(
            listed("team"),
            [("PersistentVolume".into(), "kcm-system/defaults#0".into()), ("Secret".into(), "team/t#1".into())]
        );
        assert_eq!(
            listed("kube-system"),
            [("PersistentVolume".into(), "kcm-system/defaults#0".into())],
            "the tenant's Secrets are not listed in another namespace"
        );

        let services = [("web".to_string(), "team".to_string()), ("db".to_string(), "kube-system".to_string())];
        let unjudged: Vec<String> = set.unjudged(&services).iter().map(ToString::to_string).collect();
        let why = "on the management cluster a rule from namespace team judges only objects in team";
        assert_eq!(
            unjudged,
            [
                format!("team/t#2: {why}; not applied to service db in kube-system"),
                format!("team/t#1: {why}; not applied to service db in kube-system"),
            ]
        );
        assert_eq!(set.unjudged(&services[..1]), [], "every service is in the tenant's namespace");

        let unconfined = load(&cms.iter().collect::<Vec<_>>(), None, &RuleCache::new());
        assert_eq!(unconfined.errors, [], "on another cluster a tenant's rule of scope Cluster applies");
        assert!(unconfined.kinds.values().flatten().all(|rule| rule.confined_to.is_none()));
        assert_eq!(unconfined.unjudged(&services), []);
    }

    #[test]
    fn a_broken_rule_or_config_map_is_named_and_the_others_load() {
        let broken = r#"
- {group: apps, version: v1, kind: StatefulSet, scope: Namespaced, healthy: "obj.status.("}
- {group: apps, version: v1, kind: DaemonSet, scope: Everywhere, healthy: "true"}
- {group: "", kind: Pod, scope: Namespaced, healthy: "true"}
- {group: batch, version: v1, kind: Job, scope: Namespaced, healthy: ""}
- {group: batch, version: v1, kind: Job, scope: Namespaced, healthy: "true", message: "'a' +"}
- just a string
- {group: "", version: v1, kind: Pod, scope: Namespaced, healthy: "obj.status.phase == 'Running'"}
"#;
        let cms = [
            config_map("team", "a-broken", GLOBAL, broken),
            config_map("team", "b-not-yaml", GLOBAL, "- [unclosed"),
            config_map("team", "c-good", GLOBAL, DEPLOYMENT),
            config_map("team", "d-empty", GLOBAL, "  \n"),
        ];
        let set = load(&cms.iter().collect::<Vec<_>>(), None, &RuleCache::new());
        let sources: Vec<&str> = set.errors.iter().map(|e| e.source.as_str()).collect();
        assert_eq!(
            sources,
            [
                "team/a-broken#0",
                "team/a-broken#1",
                "team/a-broken#2",
                "team/a-broken#3",
                "team/a-broken#4",
                "team/a-broken#5",
                "team/b-not-yaml"
            ]
        );
        let messages: Vec<String> = set.errors.iter().map(ToString::to_string).collect();
        assert!(messages[0].starts_with("team/a-broken#0: healthy: "), "{}", messages[0]);
        assert!(messages[1].contains("got \"Everywhere\""), "{}", messages[1]);
        assert!(messages[2].ends_with("kind and version are required"), "{}", messages[2]);
        assert!(messages[3].ends_with("healthy is required"), "{}", messages[3]);
        assert!(messages[4].contains(": message: "), "{}", messages[4]);
        assert!(messages[5].contains("not a rule"), "{}", messages[5]);
        assert!(messages[6].starts_with("team/b-not-yaml: parse \"rules\": "), "{}", messages[6]);
        let kinds: Vec<&str> = set.kinds.keys().map(|k| k.kind.as_str()).collect();
        assert_eq!(kinds, ["Pod", "Deployment"], "the good rules load beside the broken ones (by group, then kind)");
    }

    #[test]
    fn a_config_map_over_its_namespaces_whole_budget_is_not_loaded_and_named_with_the_budget() {
        let rule = "- {group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: 'true'}\n";
        let padding = format!("# {}\n", "x".repeat(MAX_NAMESPACE_BYTES));
        let cms = [
            config_map("team", "a-large", GLOBAL, &format!("{rule}{padding}")),
            config_map("team", "b-many", GLOBAL, &rule.repeat(MAX_NAMESPACE_RULES + 1)),
            config_map("team", "c-at-the-caps", GLOBAL, &rule.repeat(MAX_NAMESPACE_RULES)),
        ];
        let set = load(&cms.iter().collect::<Vec<_>>(), None, &RuleCache::new());
        let messages: Vec<String> = set.errors.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        let size = rule.len() + padding.len();
        assert_eq!(
            messages[0],
            format!(
                "team/a-large: \"rules\" holds {size} bytes, more than the 65536 left of namespace team's budget of \
                 65536 bytes per ServiceSet (its ConfigMaps counted by tier, then name); not loaded"
            )
        );
        assert_eq!(
            messages[1],
            "team/b-many: \"rules\" holds 65 rules, more than the 64 left of namespace team's budget of 64 rules per \
             ServiceSet (its ConfigMaps counted by tier, then name); not loaded"
        );
        let kind = GroupKind { group: "apps".into(), kind: "Deployment".into() };
        assert_eq!(set.kinds[&kind].len(), MAX_NAMESPACE_RULES, "only the ConfigMap within the budget loads");
        assert!(set.kinds[&kind].iter().all(|rule| rule.source.starts_with("team/c-at-the-caps#")));
    }

    /// `n` rules of distinct text for Deployments, from `from` on.
    fn deployment_rules(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| {
                format!("- {{group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: '{i} > 0'}}\n")
            })
            .collect()
    }

    /// The sources of the Deployment rules `set` loaded, by ConfigMap, with their counts.
    fn loaded(set: &RuleSet) -> Vec<(String, usize)> {
        let kind = GroupKind { group: "apps".into(), kind: "Deployment".into() };
        let mut counts: Vec<(String, usize)> = Vec::new();
        for rule in set.kinds.get(&kind).into_iter().flatten() {
            let config_map = rule.source.split('#').next().unwrap().to_string();
            match counts.last_mut() {
                Some((last, n)) if *last == config_map => *n += 1,
                _ => counts.push((config_map, 1)),
            }
        }
        counts
    }

    #[test]
    fn a_namespace_gives_a_service_set_at_most_its_budget_of_rules_across_its_config_maps() {
        let owner = service_set("team", Some(("ClusterDeployment", "prod")), "prod");
        let all = [
            config_map("team", "b-global", GLOBAL, &deployment_rules(0, MAX_NAMESPACE_RULES)),
            config_map("team", "a-global", GLOBAL, &deployment_rules(100, MAX_NAMESPACE_RULES)),
            config_map("team", "c-owner", "prod", &deployment_rules(200, 1)),
            config_map("kcm-system", "defaults", GLOBAL, &deployment_rules(300, MAX_NAMESPACE_RULES)),
        ];
        let applying = applicable(&all, &owner, "kcm-system");
        let set = load(&applying, Some("team"), &RuleCache::new());
        assert_eq!(
            loaded(&set),
            [("kcm-system/defaults".into(), MAX_NAMESPACE_RULES), ("team/a-global".into(), MAX_NAMESPACE_RULES)],
            "the operator's budget is its own; the tenant's first ConfigMap by name takes all of its own"
        );
        let messages: Vec<String> = set.errors.iter().map(ToString::to_string).collect();
        let why = |n| {
            format!(
                "\"rules\" holds {n} rules, more than the 0 left of namespace team's budget of 64 rules per ServiceSet \
                 (its ConfigMaps counted by tier, then name); not loaded"
            )
        };
        assert_eq!(messages, [format!("team/b-global: {}", why(64)), format!("team/c-owner: {}", why(1))]);
        let again = load(&applicable(all.iter().rev(), &owner, "kcm-system"), Some("team"), &RuleCache::new());
        assert_eq!(again, set, "the same rules win whatever order the cache lists them in");

        let bytes = |n| format!("{}# {}\n", deployment_rules(400, 1), "x".repeat(n));
        let by_size = [
            config_map("team", "a", GLOBAL, &bytes(MAX_NAMESPACE_BYTES / 2)),
            config_map("team", "b", GLOBAL, &bytes(MAX_NAMESPACE_BYTES / 2)),
            config_map("team", "c", GLOBAL, &deployment_rules(500, 2)),
        ];
        let set = load(&applicable(&by_size, &owner, "kcm-system"), Some("team"), &RuleCache::new());
        assert_eq!(loaded(&set), [("team/a".into(), 1), ("team/c".into(), 2)], "what fits in what is left loads");
        let left = MAX_NAMESPACE_BYTES - by_size[0].data.as_ref().unwrap()[DATA_KEY].len();
        let size = by_size[1].data.as_ref().unwrap()[DATA_KEY].len();
        assert_eq!(
            set.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "team/b: \"rules\" holds {size} bytes, more than the {left} left of namespace team's budget of 65536 \
                 bytes per ServiceSet (its ConfigMaps counted by tier, then name); not loaded"
            )]
        );
    }

    /// The compiled-rule cache holds far more than one look's rules ([`MAX_NAMESPACE_RULES`],
    /// [`MAX_NAMESPACE_BYTES`] of text from each namespace): the rules of a tenant that writes
    /// ConfigMaps without end leave the operator's compiled.
    #[test]
    fn one_namespaces_rules_do_not_evict_the_operators_compiled_rules() {
        let cel = RuleCache::new();
        let operators = config_map("kcm-system", "defaults", GLOBAL, &deployment_rules(0, MAX_NAMESPACE_RULES));
        let tenants = (0..20).map(|i| {
            let rules = deployment_rules(1000 + i * MAX_NAMESPACE_RULES, MAX_NAMESPACE_RULES);
            config_map("team", &format!("t{i:02}"), GLOBAL, &rules)
        });
        let all: Vec<ConfigMap> = std::iter::once(operators.clone()).chain(tenants).collect();
        let set = load(&applicable(&all, &service_set("team", None, ""), "kcm-system"), Some("team"), &cel);
        let compiled = cel.compiled();
        assert_eq!(load(&[&operators], None, &cel).errors, []);
        assert_eq!(cel.compiled(), compiled, "the operator's rules were still compiled");
        assert_eq!(compiled, 2 * MAX_NAMESPACE_RULES, "the operator's rules and the tenant's budget");
        assert_eq!(set.errors.len(), 19, "{:?}", set.errors.first());
    }

    /// Issue 45: tenants' looks running at once evicted the operator's compiled rules, which
    /// every look then compiled again. The chart's `--concurrency` looks at once, each at its
    /// namespace's whole budget of rules with messages, leave them compiled.
    #[test]
    fn tenants_looks_at_once_do_not_evict_the_operators_compiled_rules() {
        let rules = |from: usize| -> String {
            (from..from + MAX_NAMESPACE_RULES)
                .map(|i| format!("- {{group: apps, version: v1, kind: Deployment, scope: Namespaced, healthy: '{i} > 0', message: '\"m{i}\"'}}\n"))
                .collect()
        };
        let cel = RuleCache::new();
        let operators = config_map("kcm-system", "defaults", GLOBAL, &rules(0));
        assert_eq!(load(&[&operators], None, &cel).errors, []);
        const CONCURRENCY: usize = 8; // the chart's default
        for n in 1..=CONCURRENCY {
            let tenant = config_map(&format!("team-{n}"), "rules", GLOBAL, &rules(n * 1000));
            assert_eq!(load(&[&tenant], Some(&format!("team-{n}")), &cel).errors, []);
        }
        let compiled = cel.compiled();
        assert_eq!(compiled, (CONCURRENCY + 1) * 2 * MAX_NAMESPACE_RULES, "every text compiled once");
        load(&[&operators], None, &cel);
        assert_eq!(cel.compiled(), compiled, "the operator's rules were still compiled");
    }

    #[test]
    fn kinds_are_bounded() {
        let rules: String = (0..MAX_KINDS + 2)
            .map(|i| format!("- {{group: example.com, version: v1, kind: K{i:02}, scope: Cluster, healthy: 'true'}}\n"))
            .collect();
        let cm = config_map("team", "many", GLOBAL, &rules);
        let set = load(&[&cm], None, &RuleCache::new());
        assert_eq!(set.kinds.len(), MAX_KINDS);
        assert_eq!(set.errors.len(), 2);
        assert!(set.errors[0].message.contains("more than 16 kinds"), "{}", set.errors[0]);
    }
}
