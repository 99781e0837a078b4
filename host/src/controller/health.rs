//! Gathers what the health verdict ([`crate::health`]) needs and writes it into the status the
//! round is about to write: the rule ConfigMaps applying to the ServiceSet (from a cache of the
//! labelled ones), and each checked service's workloads on its target cluster, read through the
//! ServiceSet's kubeconfig Secret (`<cluster>-kubeconfig`, key `value`, as kcm; on the regional
//! cluster for a ServiceSet served through a region) or, for self-management, on the management
//! cluster.

use super::clusters::{Cluster, Clusters};
use crate::conditions;
use crate::health::DISCOVERY_LABELS;
use crate::health::rule_set::{self, RuleSet};
use crate::health::verdict::{self, Found, Health, Observation, RULES_CONDITION};
use crate::k0rdent::{NamespacedName, ServiceSet, ServiceSetStatus};
use crate::plan::route::KUBECONFIG_KEY;
use crate::rules::RuleCache;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the health check reads.
pub struct HealthCheck {
    /// The clients of the target clusters.
    pub clusters: Arc<Clusters>,
    /// The ConfigMaps labelled [`crate::health::TARGET_LABEL`].
    pub rules: Store<ConfigMap>,
    /// The rules' compilations.
    pub cel: RuleCache,
    /// Where the cluster-wide rules live.
    pub system_namespace: String,
}

impl HealthCheck {
    /// Applies the health verdict to `status` (the status this round is about to write for
    /// `service_set`, whose children live on `home`): `ServiceSetHealthRules` when any rule
    /// ConfigMap applies, and each checked service demoted while unhealthy. True when a service should be looked at again soon (it
    /// is unhealthy, or its target could not be read): no watch tells when a workload on another
    /// cluster recovers.
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
        let applying = rule_set::applicable(config_maps.iter().map(|c| &**c), service_set, &self.system_namespace);
        let mut verdicts = Verdicts { rules: None, services: BTreeMap::new() };
        if applying.is_empty() {
            return verdicts;
        }
        let rules = rule_set::load(&applying, &self.cel);
        verdicts.rules = Some(verdict::rules_condition(&rules.errors, service_set.metadata.generation, now));
        let checked: Vec<(String, String)> = status
            .services
            .iter()
            .filter(|s| verdict::checked(s))
            .map(|s| (s.name.clone(), s.namespace.clone()))
            .collect();
        if checked.is_empty() || rules.kinds.is_empty() {
            return verdicts;
        }
        let target = self.target(service_set, home).await;
        for (name, namespace) in checked {
            let observation = match &target {
                Ok(cluster) => observe(cluster, &rules, &name, &namespace).await,
                Err(why) => Observation::Unreadable(why.clone()),
            };
            verdicts.services.insert((name, namespace), verdict::judge(&rules, &observation, &self.cel, now));
        }
        verdicts
    }

    /// The cluster `service_set`'s services go to, its kubeconfig Secret read on `home`.
    async fn target(&self, service_set: &ServiceSet, home: &Cluster) -> Result<Arc<Cluster>, String> {
        let spec = &service_set.spec;
        if spec.provider.self_management || spec.cluster.is_empty() {
            return Ok(self.clusters.here());
        }
        let secret =
            NamespacedName::new(service_set.namespace().unwrap_or_default(), format!("{}-kubeconfig", spec.cluster));
        self.clusters.of(home, &secret, KUBECONFIG_KEY).await
    }
}

/// The health verdicts on one ServiceSet's services.
pub struct Verdicts {
    /// [`RULES_CONDITION`], when any rule ConfigMap applies.
    rules: Option<Condition>,
    /// Each checked service's verdict, by name and namespace.
    pub services: BTreeMap<(String, String), Health>,
}

impl Verdicts {
    /// Writes them into `status`, a status of `service_set`.
    pub fn apply(&self, service_set: &ServiceSet, status: &mut ServiceSetStatus, now: &Time) {
        match &self.rules {
            Some(condition) => conditions::set(&mut status.conditions, condition.clone()),
            None => conditions::remove(&mut status.conditions, RULES_CONDITION),
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

/// The objects of every kind `rules` name that carry any of the [`DISCOVERY_LABELS`] with the
/// service's name, in its namespace (or anywhere, for a cluster-scoped kind).
async fn observe(cluster: &Cluster, rules: &RuleSet, name: &str, namespace: &str) -> Observation {
    let mut found = Vec::new();
    for (kind, kind_rules) in &rules.kinds {
        let rule = &kind_rules[0];
        let mut objects = Vec::new();
        for label in DISCOVERY_LABELS {
            match cluster.list(kind, &rule.version, rule.scope, namespace, (label, name)).await {
                Ok(listed) => objects.extend(listed),
                Err(e) => {
                    return Observation::Unreadable(format!("listing {} labelled {label}={name}: {e}", kind.kind));
                }
            }
        }
        found.push(Found { kind: kind.clone(), objects });
    }
    Observation::Found(found)
}
