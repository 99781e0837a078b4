//! The scale benchmark: the real `ksm-adapter run` (a child process, so its memory is its own)
//! against the simulated API server in this process, loaded with N ServiceSets × S services.
//! This process plays kcm (the SMP is ready) and Flux (every HelmRelease is marked Ready for its
//! generation as soon as it appears or changes), and measures:
//!
//! - time to converge: from the adapter's start until every ServiceSet reports `deployed`
//!   (seen through a watch, as kcm would);
//! - the adapter's API requests during convergence, by verb and per ServiceSet (the simulated
//!   server counts them; this process's own status writes and watch are left out);
//! - writes during a steady-state window after convergence (goal: 0);
//! - latency from a ServiceSet spec change to its HelmRelease's new spec (p50/p99);
//! - the adapter's peak RSS (`VmHWM`).
//!
//! Run it with `cargo run --release -p ksm-e2e --bin ksm-scale-bench -- --help`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use ksm_test_apiserver::TestApiServer;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::env::crds;
use crate::fixtures::{self, adapter_plugin, service_templates, smp, smp_status};
use crate::flux::FluxState;
use crate::objects::Kind;
use crate::{ADAPTER_NAME, SERVICE_SET_LABEL};

/// The namespace the benchmark works in.
const NAMESPACE: &str = "bench";
/// The SMP the ServiceSets name.
const SMP: &str = "ksm-flux";
/// Flux status writes in flight at once.
const FLUX_CONCURRENCY: usize = 16;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// ServiceSets.
    pub service_sets: usize,
    /// Services per ServiceSet.
    pub services: usize,
    /// Length of the steady-state window.
    pub steady: Duration,
    /// Spec changes whose latency is measured (one after the other).
    pub changes: usize,
    /// The longest convergence may take.
    pub timeout: Duration,
    /// The `ksm-adapter` binary.
    pub binary: PathBuf,
}

/// What was measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The options of the run.
    pub options: Options,
    /// From the adapter's start until every ServiceSet reported `deployed: true`.
    pub converge: Duration,
    /// The adapter's requests during convergence, by verb.
    pub requests: BTreeMap<String, usize>,
    /// Writes (create, update, patch, delete) during the steady-state window.
    pub steady_writes: usize,
    /// Spec change → HelmRelease updated, one per change, sorted.
    pub latencies: Vec<Duration>,
    /// The adapter's peak resident memory, in KiB.
    pub peak_rss_kib: u64,
}

/// Runs the benchmark.
pub async fn run(options: Options) -> anyhow::Result<Report> {
    let server = Arc::new(TestApiServer::start(crds()).await?);
    let workdir = std::env::temp_dir().join(format!("ksm-scale-bench-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    let kubeconfig = workdir.join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml())?;
    load(&server, &options)?;

    let client = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;
    let flux = tokio::spawn(play_flux(client.clone()));
    let (deployed_tx, mut deployed) = tokio::sync::watch::channel(0);
    let counter = tokio::spawn(count_deployed(client.clone(), deployed_tx));
    // Let this process's own list and watch happen before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.reset_counts();

    let started = Instant::now();
    let adapter = Adapter::start(&options.binary, &kubeconfig, &workdir)?;
    wait_converged(&options, &adapter, started, &mut deployed).await?;
    let converge = started.elapsed();
    let requests = adapter_requests(&server);

    tokio::time::sleep(Duration::from_secs(1)).await; // the last status writes come back
    server.reset_counts();
    tokio::time::sleep(options.steady).await;
    let steady_writes = adapter_requests(&server)
        .iter()
        .filter(|(verb, _)| matches!(verb.as_str(), "create" | "update" | "patch" | "delete"))
        .map(|(_, n)| n)
        .sum();

    let latencies = change_latencies(&server, &client, &options).await?;
    let peak_rss_kib = adapter.peak_rss_kib()?;
    flux.abort();
    counter.abort();
    Ok(Report { options, converge, requests, steady_writes, latencies, peak_rss_kib })
}

/// Puts the SMP (ready), the templates and the ServiceSets into the server directly.
fn load(server: &TestApiServer, options: &Options) -> anyhow::Result<()> {
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))?;
    let mut provider = smp(SMP, ADAPTER_NAME, NAMESPACE);
    provider["status"] = smp_status(true);
    server.put_object(provider)?;
    server.put_object(adapter_plugin(SMP, NAMESPACE, json!({"builtin": "flux"}), &[SMP]))?;
    let templates: Vec<Value> = service_templates(NAMESPACE);
    for template in &templates {
        server.put_object(template.clone())?;
    }
    for i in 0..options.service_sets {
        let services: Vec<Value> = (0..options.services)
            .map(|s| {
                let template = &templates[s % templates.len()]["metadata"]["name"];
                json!({"name": format!("svc-{s}"), "namespace": format!("svc-{s}"), "template": template,
                       "values": "replicaCount: 2\n"})
            })
            .collect();
        server.put_object(fixtures::service_set(NAMESPACE, &service_set_name(i), SMP, json!(services)))?;
    }
    Ok(())
}

fn service_set_name(i: usize) -> String {
    format!("cluster-{i:05}")
}

/// Plays Flux: marks every HelmRelease Ready for its current generation.
async fn play_flux(client: kube::Client) {
    let api = Api::<DynamicObject>::namespaced_with(client, NAMESPACE, &Kind::HelmRelease.resource());
    let status_api = api.clone();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .filter_map(|object| async move { object.ok() })
        .filter(|release| {
            let (generation, observed) =
                (release.metadata.generation, release.data["status"]["observedGeneration"].as_i64());
            std::future::ready(generation.is_some() && observed != generation)
        })
        .for_each_concurrent(FLUX_CONCURRENCY, |release| {
            let api = status_api.clone();
            async move {
                let name = release.metadata.name.clone().unwrap_or_default();
                let status = FluxState::Ready.helm_release_status(release.metadata.generation.unwrap_or(1));
                let patch = Patch::Merge(json!({"status": status}));
                if let Err(e) = api.patch_status(&name, &PatchParams::default(), &patch).await {
                    eprintln!("flux simulator: {name}: {e}");
                }
            }
        })
        .await;
}

/// The adapter's requests since the last reset, by verb (this process's HelmRelease status
/// writes left out: the adapter never writes HelmRelease status).
fn adapter_requests(server: &TestApiServer) -> BTreeMap<String, usize> {
    let mut by_verb = BTreeMap::new();
    for (verb, resource, count) in server.requests().iter() {
        if resource != "helmreleases/status" {
            *by_verb.entry(verb.to_string()).or_default() += count;
        }
    }
    by_verb
}

/// Follows ServiceSet status through a watch (started before counting, so not counted) and
/// resolves once every ServiceSet reports `deployed: true`. Polling every object instead would
/// cost this process CPU in proportion to N, on the machine the adapter is measured on.
async fn wait_converged(
    options: &Options,
    adapter: &Adapter,
    started: Instant,
    deployed: &mut tokio::sync::watch::Receiver<usize>,
) -> anyhow::Result<()> {
    loop {
        if *deployed.borrow() >= options.service_sets {
            return Ok(());
        }
        if started.elapsed() > options.timeout {
            let done = *deployed.borrow();
            bail!(
                "{} ServiceSets not deployed after {:?} (adapter log: {})",
                options.service_sets - done,
                options.timeout,
                adapter.log.display()
            );
        }
        if let Some(status) = adapter.exited() {
            bail!("ksm-adapter exited ({status}); log: {}", adapter.log.display());
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), deployed.changed()).await;
    }
}

/// Counts the ServiceSets whose status says `deployed: true`, from a watch.
async fn count_deployed(client: kube::Client, deployed: tokio::sync::watch::Sender<usize>) {
    let api = Api::<DynamicObject>::namespaced_with(client, NAMESPACE, &Kind::ServiceSet.resource());
    let mut done = std::collections::HashSet::new();
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff().applied_objects());
    while let Some(event) = events.next().await {
        let Ok(service_set) = event else { continue };
        let name = service_set.metadata.name.clone().unwrap_or_default();
        if service_set.data["status"]["deployed"] == true {
            done.insert(name);
        } else {
            done.remove(&name);
        }
        deployed.send_replace(done.len());
    }
}

/// Changes the values of the first service of `changes` ServiceSets, one at a time, and times
/// each until its HelmRelease carries the new values.
async fn change_latencies(
    server: &TestApiServer,
    client: &kube::Client,
    options: &Options,
) -> anyhow::Result<Vec<Duration>> {
    let service_sets = Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &Kind::ServiceSet.resource());
    let releases = Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &Kind::HelmRelease.resource());
    let mut latencies = Vec::new();
    for i in 0..options.changes.min(options.service_sets) {
        let name = service_set_name(i % options.service_sets);
        let selector = format!("{SERVICE_SET_LABEL}={name},ksm.k0rdent.mirantis.com/service=svc-0");
        let release = releases.list(&kube::api::ListParams::default().labels(&selector)).await?;
        let release =
            release.items.first().and_then(|r| r.metadata.name.clone()).context("the HelmRelease of svc-0")?;
        let mut object = service_sets.get(&name).await?;
        let mut services = object.data["spec"]["services"].take();
        services[0]["values"] = json!(format!("replicaCount: {}\n", 3 + i));
        let started = Instant::now();
        service_sets
            .patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"services": services}})))
            .await?;
        loop {
            let live = server.object(&Kind::HelmRelease.api_version(), "HelmRelease", Some(NAMESPACE), &release);
            if live.is_some_and(|r| r["spec"]["values"]["replicaCount"] == json!(3 + i)) {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("HelmRelease {release} not updated 30 s after its ServiceSet changed");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    Ok(latencies)
}

/// The adapter process.
struct Adapter {
    child: Child,
    log: PathBuf,
}

impl Adapter {
    fn start(binary: &PathBuf, kubeconfig: &PathBuf, workdir: &std::path::Path) -> anyhow::Result<Self> {
        let log = workdir.join("adapter.log");
        let file = std::fs::File::create(&log)?;
        let child = Command::new(binary)
            .args(["run", "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--adapter-name", ADAPTER_NAME, "--adapter-namespace", NAMESPACE, "--log-level", "warn"])
            // The scale smoke runs beside other tests' adapters.
            .args(["--metrics-bind-address", "off"])
            .env_remove("KSM_LOG")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self { child, log })
    }

    fn exited(&self) -> Option<String> {
        let pid = self.child.id();
        let alive = std::path::Path::new(&format!("/proc/{pid}/status")).exists();
        (!alive).then(|| format!("pid {pid} gone"))
    }

    fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).context("no VmHWM in /proc/<pid>/status")?;
        Ok(line.split_whitespace().nth(1).context("VmHWM value")?.parse()?)
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Report {
    /// Requests during convergence, all verbs.
    pub fn total_requests(&self) -> usize {
        self.requests.values().sum()
    }

    /// The latency at quantile `q` (0..=1).
    pub fn latency(&self, q: f64) -> Duration {
        let index = ((self.latencies.len() as f64 - 1.0) * q).round() as usize;
        self.latencies.get(index).copied().unwrap_or_default()
    }

    /// The report as a Markdown table.
    pub fn table(&self) -> String {
        let o = &self.options;
        let per = |n: usize| n as f64 / o.service_sets as f64;
        let mut rows = vec![
            (
                "ServiceSets × services".to_string(),
                format!("{} × {} ({} HelmReleases)", o.service_sets, o.services, o.service_sets * o.services),
            ),
            ("time to converge".into(), format!("{:.1} s", self.converge.as_secs_f64())),
            (
                "API requests while converging".into(),
                format!("{} ({:.2} per ServiceSet)", self.total_requests(), per(self.total_requests())),
            ),
        ];
        for (verb, n) in &self.requests {
            rows.push((format!("  {verb}"), format!("{n} ({:.2} per ServiceSet)", per(*n))));
        }
        rows.push((format!("writes in a {} s steady state", o.steady.as_secs()), self.steady_writes.to_string()));
        rows.push((
            format!("spec change → HelmRelease updated ({} changes)", self.latencies.len()),
            format!("p50 {:.1} ms, p99 {:.1} ms", ms(self.latency(0.5)), ms(self.latency(0.99))),
        ));
        rows.push(("peak RSS of ksm-adapter".into(), format!("{:.1} MiB", self.peak_rss_kib as f64 / 1024.0)));
        let mut out = String::from("| measure | value |\n|---|---|\n");
        for (name, value) in rows {
            out.push_str(&format!("| {name} | {value} |\n"));
        }
        out
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
