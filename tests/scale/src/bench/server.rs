//! The API server a benchmark run measures against: the simulated one in this process, or a
//! real kube-apiserver + etcd (envtest) started for the run. Either holds the loaded objects and
//! counts the adapter's requests by verb.
//!
//! On the real server the counts come from kube-apiserver's own `apiserver_request_total`,
//! limited to the resources the adapters use (k0rdent, Flux, AdapterPlugin, Events, ConfigMaps,
//! Secrets, CRDs; on a target cluster the kinds the health rules name) less HelmRelease status (this process plays Flux): kube-controller-manager's and the
//! API server's own requests stay out. A watch is counted when it ends, discovery not at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use ksm_test_apiserver::TestApiServer;
use ksm_test_harness::env::{crds, install_crds, kubeconfig_client};
use ksm_test_harness::envtest::ControlPlane;
use ksm_test_harness::objects::{Kind, ObjRef, Objects};
use serde_json::Value;

/// Objects created at once while loading a real API server.
const LOAD_CONCURRENCY: usize = 32;
/// The API groups whose requests count on a real server (with core ConfigMaps, Events, Secrets
/// and the core kinds the health rules name).
const COUNTED_GROUPS: [&str; 7] = [
    "apps",
    "k0rdent.mirantis.com",
    "helm.toolkit.fluxcd.io",
    "kustomize.toolkit.fluxcd.io",
    "ksm.k0rdent.mirantis.com",
    "events.k8s.io",
    "apiextensions.k8s.io",
];

/// Which API server to measure against.
#[derive(Clone, Debug)]
pub enum ApiServer {
    /// `ksm-test-apiserver` in this process.
    Simulated,
    /// etcd + kube-apiserver + kube-controller-manager from this assets directory.
    Envtest(PathBuf),
}

/// A running API server of either kind.
pub(super) enum Server {
    Simulated(TestApiServer),
    Real { plane: ControlPlane, client: kube::Client },
}

/// Requests by verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`) and resource
/// (its plural, with `/status` for the status subresource, e.g. `servicesets/status`), cumulative.
pub type Requests = BTreeMap<(String, String), usize>;

impl Server {
    /// Starts a server with the benchmark's CRDs and writes a kubeconfig for it (an
    /// administrator's, on a real server) to `kubeconfig`.
    pub async fn start(which: &ApiServer, kubeconfig: &Path) -> anyhow::Result<(Self, kube::Client)> {
        match which {
            ApiServer::Simulated => {
                let server = TestApiServer::start(crds()).await?;
                std::fs::write(kubeconfig, server.kubeconfig_yaml())?;
                let client = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;
                Ok((Server::Simulated(server), client))
            }
            ApiServer::Envtest(assets) => {
                let plane = ControlPlane::start(assets)?;
                plane.wait_ready().await?;
                std::fs::copy(plane.admin_kubeconfig(), kubeconfig)?;
                let client = kubeconfig_client(plane.admin_kubeconfig()).await?;
                install_crds(&Objects::new(client.clone())).await;
                Ok((Server::Real { plane, client: client.clone() }, client))
            }
        }
    }

    /// Stores `objects` in order (status included), then `bulk` (concurrently on a real server).
    pub async fn load(&self, objects: Vec<Value>, bulk: impl Iterator<Item = Value>) -> anyhow::Result<()> {
        match self {
            Server::Simulated(server) => {
                for object in objects.into_iter().chain(bulk) {
                    server.put_object(object)?;
                }
            }
            Server::Real { client, .. } => {
                let api = Objects::new(client.clone());
                for object in objects {
                    api.create(object).await;
                }
                futures::stream::iter(bulk)
                    .for_each_concurrent(LOAD_CONCURRENCY, |object| {
                        let api = api.clone();
                        async move {
                            api.create(object).await;
                        }
                    })
                    .await;
            }
        }
        Ok(())
    }

    /// The requests counted so far, by verb and resource.
    pub async fn counts(&self) -> anyhow::Result<Requests> {
        match self {
            Server::Simulated(server) => {
                let mut counts = Requests::new();
                for (verb, resource, count) in server.requests().iter() {
                    if resource != "helmreleases/status" {
                        *counts.entry((verb.to_string(), resource.to_string())).or_default() += count;
                    }
                }
                Ok(counts)
            }
            Server::Real { client, .. } => {
                let request = http::Request::get("/metrics").body(Vec::new()).expect("a request");
                let text = client.request_text(request).await.context("reading kube-apiserver's /metrics")?;
                Ok(counted_requests(&text))
            }
        }
    }

    /// Forgets the requests counted so far (the simulator; a real server's counts are read as
    /// differences).
    pub fn reset_counts(&self) {
        if let Server::Simulated(server) = self {
            server.reset_counts();
        }
    }

    /// The HelmRelease `name` of the benchmark's namespace, read as cheaply as the server allows.
    pub async fn helm_release(&self, namespace: &str, name: &str) -> Option<Value> {
        match self {
            Server::Simulated(server) => {
                server.object(&Kind::HelmRelease.api_version(), "HelmRelease", Some(namespace), name)
            }
            Server::Real { client, .. } => {
                Objects::new(client.clone()).get(&ObjRef::new(Kind::HelmRelease, namespace, name)).await
            }
        }
    }

    /// How often [`helm_release`](Self::helm_release) is polled while timing a change: on a real
    /// server each poll is a request that shares the cores with what is measured.
    pub fn poll_interval(&self) -> Duration {
        match self {
            Server::Simulated(_) => Duration::from_millis(1),
            Server::Real { .. } => Duration::from_millis(5),
        }
    }

    /// The real server's processes (kube-apiserver, etcd) with their pids; none for the simulator,
    /// which is this process.
    pub fn processes(&self) -> Vec<(&'static str, u32)> {
        match self {
            Server::Simulated(_) => Vec::new(),
            Server::Real { plane, .. } => ["kube-apiserver", "etcd"]
                .into_iter()
                .filter_map(|name| plane.pid(name).map(|pid| (name, pid)))
                .collect(),
        }
    }
}

/// The counted requests of a kube-apiserver `/metrics` text, by the simulator's verb and
/// resource names.
fn counted_requests(metrics: &str) -> Requests {
    let mut counts = Requests::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else { continue };
        let Some((labels, value)) = rest.rsplit_once("} ") else { continue };
        let label =
            |name: &str| labels.split(',').find_map(|pair| pair.strip_prefix(&format!("{name}=\""))?.strip_suffix('"'));
        let (group, resource, subresource) =
            (label("group").unwrap_or(""), label("resource").unwrap_or(""), label("subresource").unwrap_or(""));
        let counted = if group.is_empty() {
            matches!(
                resource,
                "configmaps" | "events" | "secrets" | "pods" | "persistentvolumeclaims" | "persistentvolumes"
            )
        } else {
            COUNTED_GROUPS.contains(&group)
        };
        if !counted || (resource == "helmreleases" && subresource == "status") {
            continue;
        }
        let verb = match label("verb").unwrap_or("") {
            "POST" => "create".to_string(),
            "PUT" => "update".to_string(),
            "PATCH" | "APPLY" => "patch".to_string(),
            other => other.to_lowercase(),
        };
        let count = value.trim().parse::<f64>().unwrap_or(0.0) as usize;
        let resource = match subresource {
            "" => resource.to_string(),
            subresource => format!("{resource}/{subresource}"),
        };
        *counts.entry((verb, resource)).or_default() += count;
    }
    counts
}

/// `now - before`, verb and resource by verb and resource.
pub(super) fn difference(now: &Requests, before: &Requests) -> Requests {
    now.iter()
        .map(|(key, n)| (key.clone(), n.saturating_sub(before.get(key).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_adapters_resources_by_verb_and_resource_and_leaves_flux_status_and_leases_out() {
        let metrics = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="helm.toolkit.fluxcd.io",resource="helmreleases",scope="resource",subresource="",verb="APPLY",version="v2"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="helm.toolkit.fluxcd.io",resource="helmreleases",scope="resource",subresource="status",verb="PATCH",version="v2"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="k0rdent.mirantis.com",resource="servicesets",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 20
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 99
apiserver_request_total{code="200",component="apiserver",dry_run="",group="k0rdent.mirantis.com",resource="servicesets",scope="cluster",subresource="",verb="LIST",version="v1beta1"} 1.5e+00
"#;
        let counts = counted_requests(metrics);
        let key = |verb: &str, resource: &str| (verb.to_string(), resource.to_string());
        let expected: Requests = [
            (key("create", "events"), 10),
            (key("list", "servicesets"), 1),
            (key("patch", "helmreleases"), 30),
            (key("update", "servicesets/status"), 20),
        ]
        .into();
        assert_eq!(counts, expected);
        let later: Requests = [(key("patch", "helmreleases"), 35), (key("list", "servicesets"), 1)].into();
        assert_eq!(difference(&later, &counts), [(key("patch", "helmreleases"), 5)].into());
    }
}
