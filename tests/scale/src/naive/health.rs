//! The naive baseline's health duty (`--health`): kcm 1.12's verifier (`verify.go` of its Sveltos
//! adapter) as a controller written the guide's way runs it, on every reconcile, for each
//! service the status it is about to write calls Deployed:
//!
//! 1. lists the rule ConfigMaps labelled `k0rdent.mirantis.com/health-rule-target=global`: tier 1
//!    in the system namespace, tier 2 in the ServiceSet's namespace (unless that is the system
//!    namespace); parses each once per resourceVersion, as kcm's `ruleParseCache`, and compiles
//!    every rule again, as kcm's `rulesFromDocs` does each reconcile;
//! 2. GETs the kubeconfig Secret `<spec.cluster>-kubeconfig` and builds a new client of the target;
//! 3. per Deployed service, per kind a rule names, one list per discovery label
//!    (`labelSelector <label>=<service>`, four per kind), the union kept by namespace and name,
//!    each object judged by every rule of its kind ([`health::look_by_labels`]);
//! 4. a service with an unhealthy object is `Provisioning` in the status it updates, and the
//!    ServiceSet is reconciled again after `--health-poll-seconds` instead of the requeue.
//!
//! Liberties, besides [`crate::health`]'s:
//!
//! - **No tier 3**: the rules labelled with the name of the ServiceSet's owning
//!   MultiClusterService or ClusterDeployment; the benchmark's ServiceSets have no owner, so kcm
//!   skips the list as well.
//! - **A target it cannot read** (no Secret, a bad kubeconfig, a failed list) leaves the
//!   services it could not look at `Provisioning` and brings the poll, as an unhealthy workload
//!   does, rather than failing the reconcile into the retry delays: the status is still written.
//! - **Kustomize services are not verified**, as kcm verifies only Helm services (the benchmark
//!   has none).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::health::{self, RuleDoc, RuleSet, Service};

/// The ConfigMaps' parsed rules, by `<namespace>/<name>`, at the resourceVersion they were
/// parsed at.
type Parsed = HashMap<String, (String, Arc<Vec<(String, RuleDoc)>>)>;

/// What the baseline verifies health with.
pub(crate) struct Health {
    client: Client,
    system_namespace: String,
    /// The delay before a ServiceSet with an unhealthy service is reconciled again.
    pub(crate) poll: Duration,
    parsed: Mutex<Parsed>,
}

impl Health {
    pub(crate) fn new(client: Client, options: &health::Options) -> Self {
        Self {
            client,
            system_namespace: options.system_namespace.clone(),
            poll: options.poll,
            parsed: Mutex::default(),
        }
    }

    /// Verifies the health of the services `service_set`'s status calls Deployed, demoting the
    /// unhealthy ones (and those it could not look at) to Provisioning. Whether it demoted any.
    pub(crate) async fn verify(&self, service_set: &mut DynamicObject) -> Result<bool, kube::Error> {
        let deployed = deployed_services(&service_set.data["status"]);
        if deployed.is_empty() {
            return Ok(false);
        }
        let rules = self.rules(service_set).await?;
        if rules.kinds.is_empty() {
            return Ok(false);
        }
        let name = service_set.name_any();
        let client = match self.target(service_set).await {
            Ok(client) => client,
            Err(e) => {
                eprintln!("ServiceSet {name}: its target cannot be read: {e:#}");
                return Ok(demote(&mut service_set.data["status"], &deployed));
            }
        };
        let mut unhealthy = Vec::new();
        for service in deployed {
            match health::look_by_labels(&client, &rules, &service).await {
                Ok(found) if found.is_empty() => {}
                Ok(found) => {
                    eprintln!("ServiceSet {name}: {} unhealthy, first {}", found.len(), found[0]);
                    unhealthy.push(service);
                }
                Err(e) => {
                    eprintln!("ServiceSet {name}: service {}: its target cannot be read: {e}", service.name);
                    unhealthy.push(service);
                }
            }
        }
        Ok(demote(&mut service_set.data["status"], &unhealthy))
    }

    /// Tiers 1 and 2 of the rules that apply to `service_set`, listed, parsed (once per
    /// ConfigMap resourceVersion) and compiled.
    async fn rules(&self, service_set: &DynamicObject) -> Result<RuleSet, kube::Error> {
        let namespace = service_set.namespace().unwrap_or_default();
        let mut namespaces = vec![self.system_namespace.as_str()];
        if namespace != self.system_namespace {
            namespaces.push(&namespace);
        }
        let selector = format!("{}={}", health::RULE_TARGET_LABEL, health::GLOBAL);
        let mut docs = Vec::new();
        for namespace in namespaces {
            let api = Api::<ConfigMap>::namespaced(self.client.clone(), namespace);
            for config_map in api.list(&ListParams::default().labels(&selector)).await? {
                docs.extend(self.parsed(&config_map).iter().cloned());
            }
        }
        let (rules, errors) = health::compile_all(&docs);
        errors.iter().for_each(|e| eprintln!("health rules: {e}"));
        Ok(RuleSet::new(rules))
    }

    /// The rules of `config_map`, parsed unless they were at its resourceVersion.
    fn parsed(&self, config_map: &ConfigMap) -> Arc<Vec<(String, RuleDoc)>> {
        let key = format!("{}/{}", config_map.namespace().unwrap_or_default(), config_map.name_any());
        let version = config_map.resource_version().unwrap_or_default();
        let mut parsed = self.parsed.lock().expect("parsed lock");
        if let Some((seen, docs)) = parsed.get(&key)
            && *seen == version
        {
            return docs.clone();
        }
        let docs = Arc::new(health::parse_config_map(config_map).unwrap_or_else(|e| {
            eprintln!("health rules: {e}");
            Vec::new()
        }));
        parsed.insert(key, (version, docs.clone()));
        docs
    }

    /// A new client of `service_set`'s target, from its kubeconfig Secret, fetched.
    async fn target(&self, service_set: &DynamicObject) -> anyhow::Result<Client> {
        let namespace = service_set.namespace().unwrap_or_default();
        let secret = Api::<Secret>::namespaced(self.client.clone(), &namespace)
            .get(&health::kubeconfig_secret_name(service_set))
            .await?;
        let kubeconfig = health::kubeconfig_text(&secret).map_err(anyhow::Error::msg)?;
        health::client_from_kubeconfig(&kubeconfig).await
    }
}

/// The services a ServiceSet's status calls Deployed (Helm ones: kcm verifies no others).
fn deployed_services(status: &Value) -> Vec<Service> {
    let entries = status["services"].as_array().into_iter().flatten();
    entries.filter(|e| e["state"] == "Deployed" && e["type"] == "Helm").map(Service::of).collect()
}

/// Makes `services` `Provisioning` in `status`, and `deployed` false if any was. Whether any was.
fn demote(status: &mut Value, services: &[Service]) -> bool {
    let mut demoted = false;
    for entry in status["services"].as_array_mut().into_iter().flatten() {
        if entry["state"] == "Deployed" && services.contains(&Service::of(entry)) {
            entry["state"] = json!("Provisioning");
            demoted = true;
        }
    }
    if demoted {
        status["deployed"] = json!(false);
    }
    demoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_deployed_helm_services_are_verified_and_the_unhealthy_demoted() {
        let mut status = json!({"deployed": true, "services": [
            {"name": "a", "namespace": "a-ns", "type": "Helm", "state": "Deployed"},
            {"name": "b", "type": "Helm", "state": "Deployed"},
            {"name": "c", "type": "Helm", "state": "Provisioning"},
            {"name": "k", "type": "Kustomize", "state": "Deployed"},
        ]});
        let deployed = deployed_services(&status);
        let names: Vec<(&str, &str)> = deployed.iter().map(|s| (s.name.as_str(), s.namespace.as_str())).collect();
        assert_eq!(names, [("a", "a-ns"), ("b", "b")]);
        assert!(!demote(&mut status.clone(), &[]));
        assert!(demote(&mut status, &deployed[1..]));
        assert_eq!(status["deployed"], false);
        let states: Vec<&Value> = status["services"].as_array().unwrap().iter().map(|e| &e["state"]).collect();
        assert_eq!(states, ["Deployed", "Provisioning", "Provisioning", "Deployed"]);
    }
}
