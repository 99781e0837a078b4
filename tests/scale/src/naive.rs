//! The **naive baseline** of the scale benchmark: the ServiceSet controller of the k0rdent guide
//! "Build your own KSM provider" (`Reconcile`, `reconcileServices`, `createHelmRelease` and
//! `collectServiceStatuses`), ported from Go and controller-runtime to Rust, so that
//! `ksm-scale-bench` can measure ksm-adapter against the algorithm the guide teaches, in the same
//! run and on the same simulated API server.
//!
//! Like the guide's `For(ServiceSet).Owns(HelmRelease).Owns(Kustomization)`, it watches the
//! ServiceSets of one namespace (every event queues the ServiceSet) and the metadata of their
//! HelmReleases and Kustomizations (every event queues the child's controller owner). Workers
//! take ServiceSets from a port of client-go's work queue (module `queue`), as
//! controller-runtime does, and every reconcile of a ServiceSet:
//!
//! 1. GETs the ServiceSet (not found: done); without the finalizer
//!    `flux.k0rdent.mirantis.com/serviceset` it adds it with an UPDATE and returns (the watch
//!    event of that update brings the next reconcile);
//! 2. GETs the StateManagementProvider of `spec.provider.name`, skips the ServiceSet if the SMP's
//!    `matchLabels` selector does not match it, copies `ready`/`suspended` into
//!    `status.provider`, and when the SMP is not ready or suspended UPDATEs status and returns;
//! 3. per service: GETs its ServiceTemplate, skips it unless `status.valid`, and creates or
//!    updates the HelmRelease `{serviceset}-{service}` as `createHelmRelease` does: GET, then
//!    CREATE on 404, else UPDATE (PUT) the fetched object with the guide's mutation applied;
//! 4. per service: GETs the HelmRelease and the Kustomization `{serviceset}-{service}` and derives
//!    the service's state (`collectServiceStatuses`), `lastStateTransitionTime` being now;
//! 5. with `--health`, verifies the health of the services step 4 calls Deployed on the target
//!    cluster, as kcm 1.12 does (module `health`: list the rule ConfigMaps, GET the kubeconfig
//!    Secret, four lists per rule kind per service), an unhealthy service being `Provisioning`;
//! 6. UPDATEs ServiceSet status — on every reconcile — and requeues after 30 s, or after
//!    `--health-poll-seconds` when a service is unhealthy.
//!
//! Liberties taken, each also noted where it happens:
//!
//! - **The work queue** is client-go's semantics (FIFO, deduplicated, a key added while it is
//!   being processed comes back once processing is done, delayed adds keep the earliest time),
//!   not `kube::runtime::Controller`'s scheduler. When every worker is busy, that scheduler moves
//!   due requests into a `HashSet` and takes them in hash order, so under saturation some
//!   ServiceSets starve (docs/performance.md, "the naive baseline"). The guide's controller would
//!   not starve like that, so the baseline must not either.
//! - **Reads go to the API server.** The issue defines the baseline as "GET + UPDATE per child":
//!   controller-runtime's default (cached) client would serve these GETs from its informers, so
//!   the GET counts are those of an uncached client; the writes are the same either way.
//! - **Concurrency** is a flag (default [`DEFAULT_CONCURRENCY`], as `ksm-adapter run --concurrency`).
//!   controller-runtime's default `MaxConcurrentReconciles` is 1; the baseline gets the same
//!   concurrency as ksm-adapter to be fair.
//! - **No client-side rate limit** (client-go's QPS/burst): it would only slow the baseline down.
//! - **Errors** (e.g. 409 conflicts) requeue the ServiceSet after a per-ServiceSet delay that
//!   starts at 5 ms and doubles up to 1000 s, reset by a successful reconcile: controller-runtime's
//!   per-item exponential rate limiter (its overall 10 qps bucket is left out).
//! - **No deletion path** (`reconcileDelete`): the benchmark never deletes a ServiceSet.
//! - **Helm templates only**: Kustomize and Resources templates are skipped (the benchmark has
//!   none); Kustomizations are still watched and read, as the guide does.
//! - **Values** are the service's `values` YAML parsed into JSON. The guide puts the YAML text as
//!   raw JSON into `spec.values`, which does not encode; this is what it means to do.
//! - **Always UPDATE**: `controllerutil.CreateOrUpdate` skips the update when the mutated object
//!   equals the fetched one, but in the guide's code it never does — its mutation sets
//!   `spec.values` to the service's raw text while the fetched object carries the values
//!   re-encoded by the API server — so every child is PUT on every reconcile. The API server
//!   (real or simulated) makes an unchanged PUT a no-op: no new resourceVersion, no event.
//! - **Chart source**: `spec.chart.spec.sourceRef` from the template's `status.sourceStatus` as
//!   in the guide; templates without one (the benchmark's, like kcm's Helm templates, carry
//!   `status.chartRef`) get `spec.chartRef` from `status.chartRef`, so that the HelmRelease names
//!   a chart at all.
//! - **Provider config** `interval`/`timeout` are used when they parse as Go durations, kept as
//!   written (Go would print them normalised, e.g. `5m0s`).
//! - **The requeue period** is a flag (default 30 s, the guide's), so that a short smoke run can
//!   see the periodic writes.
//! - **Health verification** is not in the guide: it is kcm's, and the guide's controller would
//!   call it the way kcm's adapter does, with the same client (uncached reads); its own
//!   liberties are in module `health`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use ksm_test_harness::fixtures::now;
use ksm_test_harness::objects::Kind;
use ksm_test_harness::{MANAGED_LABEL, SERVICE_LABEL, SERVICE_SET_LABEL};
use kube::api::{Api, DynamicObject, PartialObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::task::JoinSet;

mod health;
pub(crate) mod queue;

use queue::Queue;

/// The guide's finalizer on the ServiceSets it serves.
pub const FINALIZER: &str = "flux.k0rdent.mirantis.com/serviceset";
/// The first retry delay after a failed reconcile (controller-runtime's).
const FIRST_RETRY: Duration = Duration::from_millis(5);
/// The longest retry delay after failed reconciles (controller-runtime's).
const MAX_RETRY: Duration = Duration::from_secs(1000);
/// HelmRelease `spec.interval` unless the provider config sets one.
const DEFAULT_INTERVAL: &str = "10m0s";
/// HelmRelease `spec.timeout` unless the provider config sets one.
const DEFAULT_TIMEOUT: &str = "5m0s";
/// Reasons of a HelmRelease `Ready=False` condition that make the service Failed.
const HELM_FAILURES: [&str; 2] = ["InstallFailed", "UpgradeFailed"];
/// Reasons of a Kustomization `Ready=False` condition that make the service Failed.
const KUSTOMIZE_FAILURES: [&str; 2] = ["ReconciliationFailed", "BuildFailed"];

/// The baseline's concurrency unless told otherwise: `ksm-adapter run --concurrency`'s default,
/// so that the baseline is not slowed down by less concurrency (the scale smoke test checks that
/// the two agree).
pub const DEFAULT_CONCURRENCY: u16 = 8;

/// How to run the baseline controller.
#[derive(Clone, Debug)]
pub struct Options {
    /// Kubeconfig file; `None`: `$KUBECONFIG`, `~/.kube/config` or in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// The namespace whose ServiceSets are served.
    pub namespace: String,
    /// ServiceSets reconciled at once.
    pub concurrency: u16,
    /// The requeue after a complete reconcile (the guide's 30 s).
    pub requeue: Duration,
    /// Whether, and how, it verifies the health of Deployed services.
    pub health: Option<crate::health::Options>,
}

/// Runs the controller until SIGINT or SIGTERM.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let client = client(options.kubeconfig.as_ref()).await?;
    let ctx = Arc::new(Context::new(client.clone(), &options));
    let queue = Arc::new(Queue::default());
    let mut tasks = JoinSet::new();
    tasks.spawn(enqueue_service_sets(ctx.service_sets.clone(), queue.clone()));
    for kind in [Kind::HelmRelease, Kind::Kustomization] {
        let metadata = Api::namespaced_with(client.clone(), &options.namespace, &kind.resource());
        tasks.spawn(enqueue_owners(metadata, queue.clone()));
    }
    for _ in 0..options.concurrency.max(1) {
        tasks.spawn(work(ctx.clone(), queue.clone()));
    }
    terminated().await
}

/// Returns on SIGINT or SIGTERM.
pub(crate) async fn terminated() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    Ok(())
}

/// The command line of both baselines' binaries: what they serve, and how many ServiceSets at once.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else in-cluster].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace whose ServiceSets are served.
    #[arg(long)]
    pub namespace: String,
    /// ServiceSets handled concurrently (controller-runtime's default is 1; the default here is
    /// ksm-adapter's, so that the baseline is not slowed down by less concurrency).
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    pub concurrency: u16,
}

/// `For(ServiceSet)`: every event of a ServiceSet (initial list included) queues it.
async fn enqueue_service_sets(api: Api<DynamicObject>, queue: Arc<Queue>) {
    let events = watcher(api, watcher::Config::default()).default_backoff().touched_objects();
    events
        .for_each(|event| {
            match event {
                Ok(service_set) => queue.add(&service_set.name_any()),
                Err(e) => eprintln!("watching ServiceSets: {e}"),
            }
            std::future::ready(())
        })
        .await;
}

/// `Owns(HelmRelease)`, `Owns(Kustomization)`: every event of a child (metadata only) queues
/// its controller owner, if that is a ServiceSet.
async fn enqueue_owners(api: Api<PartialObjectMeta<DynamicObject>>, queue: Arc<Queue>) {
    let owner = Kind::ServiceSet.resource();
    let events = watcher(api, watcher::Config::default()).default_backoff().touched_objects();
    events
        .for_each(|event| {
            match event {
                Ok(child) => child
                    .owner_references()
                    .iter()
                    .filter(|r| r.controller == Some(true) && r.kind == owner.kind)
                    .filter(|r| r.api_version.rsplit_once('/').is_some_and(|(group, _)| group == owner.group))
                    .for_each(|r| queue.add(&r.name)),
                Err(e) => eprintln!("watching children: {e}"),
            }
            std::future::ready(())
        })
        .await;
}

/// A worker: reconciles the queue's keys one at a time, requeueing after the reconcile's delay
/// or, after an error, the retry delay.
async fn work(ctx: Arc<Context>, queue: Arc<Queue>) {
    loop {
        let name = queue.get().await;
        match reconcile_service_set(&ctx, &name).await {
            Ok(requeue) => {
                ctx.failures.lock().expect("failures lock").remove(&name);
                if let Some(after) = requeue {
                    queue.add_after(&name, after);
                }
            }
            Err(error) => queue.add_after(&name, ctx.failed(&name, &error)),
        }
        queue.done(&name);
    }
}

/// A client for `kubeconfig`, else the usual inference.
pub(crate) async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<Client> {
    match kubeconfig {
        Some(path) => ksm_test_harness::env::kubeconfig_client(path).await,
        None => Ok(Client::try_from(kube::Config::infer().await?)?),
    }
}

/// A reconcile's failure: an API error, or a ServiceSet the guide's code cannot use.
#[derive(Debug)]
pub enum Error {
    /// A request failed (including 404 on a template or SMP, 409 on a stale resourceVersion).
    Api(kube::Error),
    /// Invalid input, e.g. `values` that are not YAML or a provider config of the wrong shape.
    Invalid(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Api(e) => write!(f, "{e}"),
            Error::Invalid(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Api(e)
    }
}

/// The APIs the controller uses and its per-ServiceSet failure counts.
struct Context {
    service_sets: Api<DynamicObject>,
    providers: Api<DynamicObject>,
    templates: Api<DynamicObject>,
    releases: Api<DynamicObject>,
    kustomizations: Api<DynamicObject>,
    requeue: Duration,
    /// Failed reconciles in a row, by ServiceSet name (for the retry delay).
    failures: Mutex<HashMap<String, u32>>,
    /// With `--health`.
    health: Option<health::Health>,
}

impl Context {
    /// Counts a failed reconcile of `name`, logs it, and returns the delay before its retry.
    fn failed(&self, name: &str, error: &Error) -> Duration {
        let failures = {
            let mut failures = self.failures.lock().expect("failures lock");
            let count = failures.entry(name.to_string()).or_default();
            *count += 1;
            *count
        };
        eprintln!("reconciling ServiceSet {name} (failure {failures}): {error}");
        retry_delay(failures)
    }

    fn new(client: Client, options: &Options) -> Self {
        let namespaced = |kind: Kind| Api::namespaced_with(client.clone(), &options.namespace, &kind.resource());
        Self {
            service_sets: namespaced(Kind::ServiceSet),
            providers: Api::all_with(client.clone(), &Kind::StateManagementProvider.resource()),
            templates: namespaced(Kind::ServiceTemplate),
            releases: namespaced(Kind::HelmRelease),
            kustomizations: namespaced(Kind::Kustomization),
            requeue: options.requeue,
            failures: Mutex::default(),
            health: options.health.as_ref().map(|options| health::Health::new(client.clone(), options)),
        }
    }
}

/// The guide's provider configuration (`FluxProviderConfig`); other fields are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ProviderConfig {
    interval: String,
    timeout: String,
    suspend: bool,
}

/// The delay before the retry after `failures` failed reconciles in a row (≥ 1).
pub(crate) fn retry_delay(failures: u32) -> Duration {
    FIRST_RETRY.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1))).min(MAX_RETRY)
}

/// The guide's `Reconcile`, without its deletion path: when to reconcile again (`None`: on
/// the next event).
async fn reconcile_service_set(ctx: &Context, name: &str) -> Result<Option<Duration>, Error> {
    let Some(mut service_set) = ctx.service_sets.get_opt(name).await? else {
        return Ok(None);
    };
    if !service_set.finalizers().iter().any(|f| f == FINALIZER) {
        service_set.finalizers_mut().push(FINALIZER.to_string());
        ctx.service_sets.replace(name, &PostParams::default(), &service_set).await?;
        return Ok(None);
    }
    let provider = ctx.providers.get(service_set.data["spec"]["provider"]["name"].as_str().unwrap_or("")).await?;
    if !selector_matches(&service_set, &provider) {
        return Ok(None);
    }
    let (ready, suspended) = (provider.data["status"]["ready"] == true, provider.data["spec"]["suspend"] == true);
    service_set.data["status"]["provider"] = json!({"ready": ready, "suspended": suspended});
    if !ready || suspended {
        ctx.service_sets.replace_status(name, &PostParams::default(), &service_set).await?;
        return Ok(None);
    }
    let config = provider_config(&service_set)?;
    reconcile_services(ctx, &service_set, &config).await?;
    collect_service_statuses(ctx, &mut service_set).await?;
    let mut requeue = ctx.requeue;
    if let Some(health) = &ctx.health
        && health.verify(&mut service_set).await?
    {
        requeue = health.poll;
    }
    ctx.service_sets.replace_status(name, &PostParams::default(), &service_set).await?;
    Ok(Some(requeue))
}

/// The guide's `labelsMatchSelector`: the SMP's `spec.selector.matchLabels` (no selector: all).
fn selector_matches(service_set: &DynamicObject, provider: &DynamicObject) -> bool {
    let labels = service_set.labels();
    let wanted = provider.data["spec"]["selector"]["matchLabels"].as_object();
    wanted.into_iter().flatten().all(|(key, value)| labels.get(key).map(String::as_str) == value.as_str())
}

/// `spec.provider.config` as the guide's `FluxProviderConfig`.
pub(crate) fn provider_config(service_set: &DynamicObject) -> Result<ProviderConfig, Error> {
    match &service_set.data["spec"]["provider"]["config"] {
        Value::Null => Ok(ProviderConfig::default()),
        config => ProviderConfig::deserialize(config)
            .map_err(|e| Error::Invalid(format!("failed to parse provider config: {e}"))),
    }
}

/// `spec.services`, cloned (status is written into the ServiceSet while they are walked).
pub(crate) fn services(service_set: &DynamicObject) -> Vec<Value> {
    service_set.data["spec"]["services"].as_array().cloned().unwrap_or_default()
}

/// A string field of a service (`""` when absent).
pub(crate) fn field<'a>(service: &'a Value, name: &str) -> &'a str {
    service[name].as_str().unwrap_or("")
}

/// `{serviceset}-{service}`: the name of a service's HelmRelease or Kustomization.
pub(crate) fn child_name(service_set: &DynamicObject, service: &Value) -> String {
    format!("{}-{}", service_set.name_any(), field(service, "name"))
}

/// The guide's `reconcileServices`: each service with a valid Helm template gets its
/// HelmRelease created or updated (Kustomize and Resources templates: skipped, see the module
/// doc).
async fn reconcile_services(ctx: &Context, service_set: &DynamicObject, config: &ProviderConfig) -> Result<(), Error> {
    for service in services(service_set) {
        let template = ctx.templates.get(field(&service, "template")).await?;
        if template.data["status"]["valid"] != true {
            continue;
        }
        if !template.data["spec"]["helm"].is_null() {
            create_helm_release(ctx, service_set, &service, &template, config).await?;
        }
    }
    Ok(())
}

/// The guide's `createHelmRelease`: `controllerutil.CreateOrUpdate` as GET, then CREATE on 404
/// (with the controller ownerReference) or UPDATE of the fetched object (always: see the module
/// doc), the guide's mutation applied either way.
async fn create_helm_release(
    ctx: &Context,
    service_set: &DynamicObject,
    service: &Value,
    template: &DynamicObject,
    config: &ProviderConfig,
) -> Result<(), Error> {
    let name = child_name(service_set, service);
    match ctx.releases.get_opt(&name).await? {
        None => {
            let mut release = DynamicObject::new(&name, &Kind::HelmRelease.resource())
                .within(service_set.namespace().as_deref().unwrap_or(""));
            release.metadata.owner_references = Some(vec![controller_reference(service_set)]);
            mutate_helm_release(&mut release, service_set, service, &template.data["status"], config)?;
            ctx.releases.create(&PostParams::default(), &release).await?;
        }
        Some(mut release) => {
            mutate_helm_release(&mut release, service_set, service, &template.data["status"], config)?;
            ctx.releases.replace(&name, &PostParams::default(), &release).await?;
        }
    }
    Ok(())
}

/// `controllerutil.SetControllerReference`: the ServiceSet as controller owner.
pub(crate) fn controller_reference(service_set: &DynamicObject) -> OwnerReference {
    let resource = Kind::ServiceSet.resource();
    OwnerReference {
        api_version: resource.api_version,
        kind: resource.kind,
        name: service_set.name_any(),
        uid: service_set.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The mutation function of the guide's `createHelmRelease`, over a new or fetched HelmRelease,
/// with the chart from the ServiceTemplate's status (`template_status`).
pub(crate) fn mutate_helm_release(
    release: &mut DynamicObject,
    service_set: &DynamicObject,
    service: &Value,
    template_status: &Value,
    config: &ProviderConfig,
) -> Result<(), Error> {
    let name = field(service, "name");
    let labels = release.labels_mut();
    labels.insert(MANAGED_LABEL.into(), "true".into());
    labels.insert(SERVICE_SET_LABEL.into(), service_set.name_any());
    labels.insert(SERVICE_LABEL.into(), name.into());
    let spec = &mut release.data["spec"];
    spec["releaseName"] = json!(name);
    spec["targetNamespace"] = json!(Some(field(service, "namespace")).filter(|ns| !ns.is_empty()).unwrap_or(name));
    spec["interval"] = json!(go_duration_or(&config.interval, DEFAULT_INTERVAL));
    spec["timeout"] = json!(go_duration_or(&config.timeout, DEFAULT_TIMEOUT));
    set_chart(spec, template_status);
    let values = field(service, "values");
    if !values.is_empty() {
        spec["values"] =
            serde_norway::from_str(values).map_err(|e| Error::Invalid(format!("values of service {name}: {e}")))?;
    }
    // Go's `Suspend bool` with `omitempty`: false is left out.
    match spec.as_object_mut() {
        Some(spec) if !config.suspend => drop(spec.remove("suspend")),
        _ => spec["suspend"] = json!(true),
    }
    Ok(())
}

/// The chart: `chart.spec.sourceRef` from `status.sourceStatus` (the guide); without one,
/// `chartRef` from `status.chartRef` (see the module doc); neither: left as it is.
fn set_chart(spec: &mut Value, template_status: &Value) {
    let source = &template_status["sourceStatus"];
    if source.is_object() {
        let reference = json!({"kind": source["kind"], "name": source["name"], "namespace": source["namespace"]});
        spec["chart"] = json!({"spec": {"sourceRef": reference}});
    } else if template_status["chartRef"].is_object() {
        spec["chartRef"] = template_status["chartRef"].clone();
    }
}

/// `text` if it is a Go duration (`time.ParseDuration`), else `default`.
fn go_duration_or<'a>(text: &'a str, default: &'a str) -> &'a str {
    if is_go_duration(text) { text } else { default }
}

/// Whether `text` parses with Go's `time.ParseDuration`: `0`, or numbers with units, e.g. `5m`,
/// `1h30m`, `1.5s`, optionally signed.
fn is_go_duration(text: &str) -> bool {
    const UNITS: [&str; 8] = ["ns", "us", "µs", "μs", "ms", "h", "m", "s"];
    let mut rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if digits == 0 || &rest[..digits] == "." {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = UNITS.iter().find(|unit| rest.starts_with(**unit)) else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

/// The guide's `collectServiceStatuses`: per service, GET its HelmRelease and its Kustomization
/// and derive its state; `status.deployed` when every service is Deployed.
async fn collect_service_statuses(ctx: &Context, service_set: &mut DynamicObject) -> Result<(), Error> {
    let mut states = Vec::new();
    for service in services(service_set) {
        let name = child_name(service_set, &service);
        let mut state = json!({
            "name": field(&service, "name"),
            "template": field(&service, "template"),
            "version": field(&service, "template"),
            "state": "Provisioning",
            "lastStateTransitionTime": now(),
        });
        if !field(&service, "namespace").is_empty() {
            state["namespace"] = service["namespace"].clone();
        }
        if let Some(release) = ctx.releases.get_opt(&name).await? {
            state["type"] = json!("Helm");
            apply_ready_condition(&mut state, &release, &HELM_FAILURES);
        }
        if let Some(kustomization) = ctx.kustomizations.get_opt(&name).await? {
            state["type"] = json!("Kustomize");
            apply_ready_condition(&mut state, &kustomization, &KUSTOMIZE_FAILURES);
        }
        states.push(state);
    }
    let deployed = states.iter().all(|state| state["state"] == "Deployed");
    service_set.data["status"]["services"] = json!(states);
    service_set.data["status"]["deployed"] = json!(deployed);
    Ok(())
}

/// The child's `Ready` condition: `True` → Deployed; `False` with one of `failures` as reason →
/// Failed with the condition's message; otherwise the state is left as it is.
fn apply_ready_condition(state: &mut Value, child: &DynamicObject, failures: &[&str]) {
    let conditions = child.data["status"]["conditions"].as_array();
    let Some(ready) = conditions.into_iter().flatten().find(|c| c["type"] == "Ready") else {
        return;
    };
    if ready["status"] == "True" {
        state["state"] = json!("Deployed");
    } else if failures.iter().any(|reason| ready["reason"] == *reason) {
        state["state"] = json!("Failed");
        state["failureMessage"] = ready["message"].clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        for valid in ["0", "5m", "1h30m", "1.5s", "300ms", "-2h", "10m0s"] {
            assert!(is_go_duration(valid), "{valid}");
        }
        for invalid in ["", "5", "m", "1x", "1.5", ".s", "5 m"] {
            assert!(!is_go_duration(invalid), "{invalid}");
        }
    }

    #[test]
    fn retry_delays_double_from_5_ms_to_1000_s() {
        assert_eq!(retry_delay(1), Duration::from_millis(5));
        assert_eq!(retry_delay(4), Duration::from_millis(40));
        assert_eq!(retry_delay(40), MAX_RETRY);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_health_an_unhealthy_service_is_provisioning_until_healthy() {
        use crate::health::rig::{self, Rig};
        use ksm_test_harness::fixtures::{INGRESS_TEMPLATE, service_templates, smp};
        let services = json!([{"name": "a", "namespace": "a-ns", "template": INGRESS_TEMPLATE}]);
        let rig = Rig::start("naive", services).await;
        let mut provider = smp("ksm-flux", "adapter", rig::NAMESPACE);
        provider["status"] = json!({"ready": true});
        rig.management.put_object(provider).expect("put");
        service_templates(rig::NAMESPACE).into_iter().for_each(|t| drop(rig.management.put_object(t).expect("put")));
        let options = Options {
            kubeconfig: Some(rig.kubeconfig.clone()),
            namespace: rig::NAMESPACE.into(),
            concurrency: 2,
            requeue: Duration::from_secs(30),
            health: Some(rig.health()),
        };
        let naive = tokio::spawn(run(options));
        let release = Kind::HelmRelease.resource();
        let created = || rig.management.object(&release.api_version, &release.kind, Some(rig::NAMESPACE), "c1-a");
        assert!(rig::eventually(10, || created().is_some()).await, "the HelmRelease is created");
        let mut ready = created().expect("the HelmRelease");
        ready["status"] = ksm_test_harness::flux::FluxState::Ready.helm_release_status(1);
        rig.management.put_object(ready).expect("put");

        // Polled (not the 30 s requeue) while unhealthy: looked at at least twice.
        assert!(rig::eventually(10, || rig.target.requests().verb("list") >= 2 * 24).await, "polled");
        let set = Kind::ServiceSet.resource();
        let status = rig.management.object(&set.api_version, &set.kind, Some(rig::NAMESPACE), "c1").expect("c1");
        assert_eq!(status["status"]["services"][0]["state"], "Provisioning", "{status}");
        assert!(!rig.deployed());
        rig.target.put_object(rig::deployment("a", 2)).expect("put");
        assert!(rig::eventually(10, || rig.deployed()).await, "deployed once healthy");
        naive.abort();

        let (targets, managed) = (rig.target.requests(), rig.management.requests());
        let looks = rig::whole_looks(&targets, 4);
        assert!(managed.get("get", "secrets") >= looks, "a GET of the kubeconfig per look: {managed:?}");
        assert!(managed.get("list", "configmaps") >= 2 * looks, "tiers 1 and 2 listed per look: {managed:?}");
    }

    #[test]
    fn a_helm_release_as_the_guide_builds_it() {
        let set: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
        }))
        .expect("a ServiceSet");
        let template: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceTemplate",
            "metadata": {"name": "t"},
            "status": {"valid": true, "chartRef": {"kind": "HelmChart", "name": "t", "namespace": "ns"}},
        }))
        .expect("a ServiceTemplate");
        let service = json!({"name": "svc", "template": "t", "values": "replicaCount: 2\n"});
        let config = ProviderConfig { interval: "5m".into(), ..ProviderConfig::default() };
        let mut release = DynamicObject::new("c1-svc", &Kind::HelmRelease.resource());
        mutate_helm_release(&mut release, &set, &service, &template.data["status"], &config).expect("mutated");
        assert_eq!(release.labels()[SERVICE_SET_LABEL], "c1");
        assert_eq!(
            release.data["spec"],
            json!({"releaseName": "svc", "targetNamespace": "svc", "interval": "5m", "timeout": "5m0s",
                   "chartRef": {"kind": "HelmChart", "name": "t", "namespace": "ns"},
                   "values": {"replicaCount": 2}})
        );
        assert_eq!(controller_reference(&set).kind, "ServiceSet");
    }
}
