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
use crate::plugin::call_blocking;
use crate::rules::RuleCache;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
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
    pub cel: Arc<RuleCache>,
    /// Where the cluster-wide rules live.
    pub system_namespace: String,
}

impl HealthCheck {
    /// Applies the health verdict to `status` (the status this round is about to write for
    /// `service_set`, whose children live on `home`): `ServiceSetHealthRules` when any rule
    /// ConfigMap applies (naming the rules that did not load or exceed their budget), and each
    /// checked service demoted while unhealthy. True when a service should be looked at again
    /// soon (it is unhealthy, or its target could not be read): no watch tells when a workload on
    /// another cluster recovers. Loading and running the rules happens on blocking threads.
    pub async fn verify(
        &self,
        service_set: &ServiceSet,
        home: &Cluster,
        status: &mut ServiceSetStatus,
        now: &Time,
    ) -> bool {
        let config_maps = self.rules.state();
        let applying = rule_set::applicable(config_maps, service_set, &self.system_namespace);
        if applying.is_empty() {
            conditions::remove(&mut status.conditions, RULES_CONDITION);
            return false;
        }
        let cel = self.cel.clone();
        let rules = Arc::new(call_blocking(move || rule_set::load(&applying, &cel)).await);
        let generation = service_set.metadata.generation;
        let checked: Vec<(String, String)> = status
            .services
            .iter()
            .filter(|s| verdict::checked(s))
            .map(|s| (s.name.clone(), s.namespace.clone()))
            .collect();
        let mut errors = rules.errors.clone();
        let mut unsettled = false;
        if !checked.is_empty() && !rules.kinds.is_empty() {
            let target = self.target(service_set, home).await;
            let mut observations = BTreeMap::new();
            for (name, namespace) in checked {
                let observation = match &target {
                    Ok(cluster) => observe(cluster, &rules, &name, &namespace).await,
                    Err(why) => Observation::Unreadable(why.clone()),
                };
                observations.insert((name, namespace), observation);
            }
            let (cel, at) = (self.cel.clone(), now.clone());
            let (verdicts, over_budget) =
                call_blocking(move || verdict::judge_all(&rules, &observations, &cel, &at)).await;
            errors.extend(over_budget);
            verdict::apply(status, &verdicts, service_set.status.as_ref(), generation, now);
            unsettled = verdicts.values().any(Health::unsettled);
        }
        conditions::set(&mut status.conditions, verdict::rules_condition(&errors, generation, now));
        unsettled
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
