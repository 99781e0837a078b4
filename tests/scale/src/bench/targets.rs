//! The health duty of a benchmark run, as production has it: kcm's default health rules in the
//! system namespace (the chart's `files/health-rules.yaml`), and each ServiceSet's cluster with a
//! kubeconfig Secret `<cluster>-kubeconfig` for a target API server (the simulated one, or a
//! second envtest control plane) that holds the workloads of its services, which the rules judge.
//!
//! Every ServiceSet has its own Secret (so an adapter holds a client per cluster, as it would),
//! all pointing at one target server. Its services are named `svc-<s>` in namespace `svc-<s>`,
//! whose workloads there (a Deployment, and on the simulator a Pod) are healthy; a share of
//! ServiceSets spread among the others (the *unhealthy* ones) name their services `flaky-<s>`,
//! whose Deployments want a replica that is not ready until [`Targets::heal`] makes them
//! healthy, once every other ServiceSet is deployed: an adapter must see them unhealthy first,
//! and look again.
//!
//! On envtest kube-controller-manager runs on the target, so a Deployment is made healthy by
//! scaling it to 0 (its controller reports it) and unhealthy with one replica (its Pod is never
//! scheduled); on the simulator, which runs no controller, the benchmark writes their status.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use ksm_test_harness::fixtures::{now, workload, workload_status};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::server::{ApiServer, Requests, Server};

/// The rules the chart installs as kcm's defaults.
pub const DEFAULT_RULES: &str = include_str!("../../../../deploy/chart/files/health-rules.yaml");
/// Where kcm keeps its cluster-wide rules (the adapters' default system namespace).
pub const SYSTEM_NAMESPACE: &str = "kcm-system";
/// The label selecting rule ConfigMaps, and its value for rules applying to every ServiceSet.
const RULES_LABEL: (&str, &str) = ("k0rdent.mirantis.com/health-rule-target", "global");

/// The health duty a run gives every adapter.
#[derive(Clone, Copy, Debug)]
pub struct HealthDuty {
    /// How soon an adapter looks again at a service found unhealthy (each adapter's
    /// `--health-poll-seconds`).
    pub poll: Duration,
    /// The share of ServiceSets, in percent, whose workloads are unhealthy until the others are
    /// deployed.
    pub unhealthy_percent: usize,
}

impl HealthDuty {
    /// How many of `service_sets` are the unhealthy ones.
    pub fn unhealthy(&self, service_sets: usize) -> usize {
        service_sets * self.percent() / 100
    }

    /// Whether ServiceSet `i` is one of the unhealthy ones: spread evenly among the others, so
    /// that an adapter taking them in order meets them all along, before the rest are deployed.
    pub fn is_unhealthy(&self, i: usize) -> bool {
        (i + 1) * self.percent() / 100 != i * self.percent() / 100
    }

    /// The name of service `s` of ServiceSet `i`.
    pub fn service_name(&self, i: usize, s: usize) -> String {
        let prefix = if self.is_unhealthy(i) { "flaky" } else { "svc" };
        format!("{prefix}-{s}")
    }

    fn percent(&self) -> usize {
        self.unhealthy_percent.min(100)
    }

    /// The adapter's flags for this duty: ksm-adapter's, or a baseline's.
    pub fn flags(&self, ours: bool) -> Vec<String> {
        let mut flags = vec!["--health-poll-seconds".to_string(), self.poll.as_secs().to_string()];
        if ours {
            // The targets listen on this machine, over http on the simulator.
            flags.extend(["--allow-cluster-addresses".into(), "http,loopback".into()]);
        } else {
            flags.extend(["--health".into(), "--system-namespace".into(), SYSTEM_NAMESPACE.into()]);
        }
        flags
    }

    /// What the management server holds for the duty besides the ServiceSets: the system
    /// namespace and its rule ConfigMap.
    pub fn management_objects(&self) -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "kcm-default-health-rules", "namespace": SYSTEM_NAMESPACE,
                                "labels": {RULES_LABEL.0: RULES_LABEL.1}},
                   "data": {"rules": DEFAULT_RULES}}),
        ]
    }
}

/// The fewest lists one look at a ServiceSet of `services` services (each in its own namespace)
/// makes under [`DEFAULT_RULES`]: one per namespaced kind per namespace, one per cluster-scoped
/// kind.
pub fn fewest_lists(services: usize) -> usize {
    let rules: Vec<Value> = serde_norway::from_str(DEFAULT_RULES).expect("the chart's rules are YAML");
    let kinds = |scope: &str| {
        let mut kinds: Vec<&Value> = rules.iter().filter(|r| r["scope"] == scope).map(|r| &r["kind"]).collect();
        kinds.dedup();
        kinds.len()
    };
    services * kinds("Namespaced") + kinds("Cluster")
}

/// The target server of a run, loaded.
pub(super) struct Targets {
    server: Server,
    /// The kubeconfig of the target server, as each Secret holds it.
    kubeconfig: String,
    real: bool,
}

impl Targets {
    /// Starts a target server of the kind `which` is, its kubeconfig written to `kubeconfig`,
    /// and loads the workloads of `services` services per ServiceSet: the healthy ones and the
    /// unhealthy share's.
    pub async fn start(which: &ApiServer, kubeconfig: &Path, services: usize) -> anyhow::Result<Self> {
        let (server, _) = Server::start(which, kubeconfig).await?;
        let real = matches!(which, ApiServer::Envtest(_));
        let mut text = std::fs::read_to_string(kubeconfig)?;
        if !real {
            text = with_authority(&text);
        }
        let targets = Self { server, kubeconfig: text, real };
        let mut objects = Vec::new();
        for s in 0..services {
            let namespace = format!("svc-{s}");
            objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}));
            objects.push(targets.deployment(&namespace, &format!("svc-{s}"), true));
            objects.push(targets.deployment(&namespace, &format!("flaky-{s}"), false));
            if !real {
                // On envtest a Pod needs its namespace's default ServiceAccount, which only a
                // controller envtest does not run would make: the Deployments are judged there.
                objects.push(pod(&namespace, &format!("svc-{s}")));
            }
        }
        targets.server.load(objects, std::iter::empty()).await?;
        targets.server.reset_counts();
        Ok(targets)
    }

    /// The Secret `<cluster>-kubeconfig` of ServiceSet `cluster` in `namespace`, for this target.
    pub fn secret(&self, namespace: &str, cluster: &str) -> Value {
        let value = serde_json::to_value(ByteString(self.kubeconfig.clone().into_bytes())).expect("bytes encode");
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": namespace},
               "data": {"value": value}})
    }

    /// Makes the unhealthy share's workloads of `services` services healthy.
    pub async fn heal(&self, services: usize) -> anyhow::Result<()> {
        for s in 0..services {
            let (namespace, name) = (format!("svc-{s}"), format!("flaky-{s}"));
            match &self.server {
                Server::Simulated(server) => {
                    // Scaled to 0, a new generation: observed at once, as its controller would.
                    let mut scaled = server.put_object(self.deployment(&namespace, &name, true))?;
                    scaled["status"]["observedGeneration"] = scaled["metadata"]["generation"].clone();
                    server.put_object(scaled)?;
                }
                Server::Real { client, .. } => {
                    let api = kube::Api::<Deployment>::namespaced(client.clone(), &namespace);
                    let scaled = Patch::Merge(json!({"spec": {"replicas": 0}}));
                    api.patch(&name, &PatchParams::default(), &scaled).await?;
                }
            }
        }
        Ok(())
    }

    /// The target's requests so far (its reads: on envtest kube-controller-manager's writes of
    /// the Deployments' status count too).
    pub async fn counts(&self) -> anyhow::Result<Requests> {
        self.server.counts().await
    }

    /// Deployment `name` of a release in `namespace` (labelled `app: <name>`), healthy or not:
    /// with its status on the simulator; scaled to 0 or 1 on envtest, for its controller to say.
    fn deployment(&self, namespace: &str, name: &str, healthy: bool) -> Value {
        let mut deployment = workload(namespace, name, u32::from(!healthy));
        if !self.real {
            deployment["metadata"]["generation"] = json!(1);
            let mut status = workload_status(1, healthy);
            if healthy {
                status = json!({"observedGeneration": 1, "replicas": 0});
            }
            deployment["status"] = status;
        }
        deployment
    }
}

/// The simulated server's kubeconfig `text` with a cluster CA, as a real cluster's kubeconfig
/// (Cluster API's, envtest's) carries one: without it a client verifies through the platform's
/// trust store, which kube loads for each client made, a cost production does not have.
fn with_authority(text: &str) -> String {
    let ca = ksm_test_harness::pki::Pki::named("target cluster");
    let der = serde_json::to_value(ByteString(ca.root_der().to_vec())).expect("bytes encode");
    let pem = format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", der.as_str().unwrap_or_default());
    let data = serde_json::to_value(ByteString(pem.into_bytes())).expect("bytes encode");
    let (before, after) = text.split_once("    server: ").expect("a kubeconfig with a server");
    format!("{before}    certificate-authority-data: {}\n    server: {after}", data.as_str().unwrap_or_default())
}

/// A Ready Pod of release `name` in `namespace`, never scheduled.
fn pod(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
           "spec": {"containers": [{"name": "main", "image": "registry.invalid/ksm-scale/none:0"}]},
           "status": pod_status()})
}

/// A running, Ready Pod's status.
fn pod_status() -> Value {
    json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unhealthy_share_is_spread_among_the_others() {
        let duty = HealthDuty { poll: Duration::from_secs(1), unhealthy_percent: 10 };
        let unhealthy: Vec<usize> = (0..100).filter(|i| duty.is_unhealthy(*i)).collect();
        assert_eq!(unhealthy, [9, 19, 29, 39, 49, 59, 69, 79, 89, 99]);
        assert_eq!(duty.unhealthy(100), 10);
        assert_eq!(duty.unhealthy(25), (0..25).filter(|i| duty.is_unhealthy(*i)).count());
        assert_eq!((duty.service_name(9, 2), duty.service_name(10, 0)), ("flaky-2".into(), "svc-0".into()));
        let none = HealthDuty { unhealthy_percent: 0, ..duty };
        assert!((0..100).all(|i| !none.is_unhealthy(i)));
    }

    #[test]
    fn a_look_lists_each_namespaced_kind_per_service_namespace_and_each_cluster_scoped_kind_once() {
        // Deployment, StatefulSet, DaemonSet, Pod, PersistentVolumeClaim; PersistentVolume.
        assert_eq!(fewest_lists(3), 3 * 5 + 1);
    }
}
