//! The **floor** of the scale benchmark: the least any adapter must ask of the API server to
//! serve ServiceSets, so that `ksm-scale-bench` can print the limit beside ksm-adapter's figures.
//!
//! It keeps one list+watch per kind it needs — the ServiceSets of one namespace and their
//! HelmReleases — in two reflector stores, and makes only the writes serving needs:
//!
//! - per ServiceSet, one JSON patch adding its finalizer;
//! - per service, one create of its HelmRelease (the naive baseline's HelmRelease, built by the
//!   same code: [`crate::naive::mutate_helm_release`]); a merge patch of it only when its spec or
//!   labels differ from what the ServiceSet asks for (a spec change);
//! - per ServiceSet, one merge patch of its status once every HelmRelease is Ready for its
//!   generation, and none while the status already says so. The status is what kcm's contract asks
//!   of any adapter (`api-facts.md`): `cluster` (without it kcm's MultiClusterService controller
//!   skips the ServiceSet), `provider.ready`, the `ServicesInReadyState` condition (the kubectl
//!   column), `deployed`, and every service `Deployed` with its `version` and `lastDeployedHash`.
//!
//! No GETs (everything is read from the stores), no update of an unchanged object, no Events, no
//! status before the services are Deployed. What it decides is pure ([`decide`]); a memory of the
//! writes made but not yet seen in the stores ([`Pending`]) keeps a lagging store from making a
//! write twice.
//!
//! Liberties, each cheaper than what an adapter must really do, so the floor stays a floor:
//!
//! - **No ServiceTemplates, SMP or provider gate**: every ServiceSet of the namespace is served;
//!   a Helm template's chart is the `HelmChart` of the template's name in the ServiceSet's
//!   namespace, as kcm names it (the benchmark's templates carry exactly that `status.chartRef`).
//!   Watching the templates would cost one list and one watch per run, not per ServiceSet.
//! - **No deletion path, no failure states, no Kustomizations**: the benchmark needs none.
//! - **Errors** requeue the ServiceSet after the naive baseline's retry delays.
//!
//! With `--health` ([`Options::health`]) it also verifies services' health on their target
//! clusters before writing the status, as kcm 1.12 does ([`crate::health`]), with the least
//! that asks of the API servers:
//!
//! - two more list+watches, in stores like the others: the ConfigMaps labelled
//!   `k0rdent.mirantis.com/health-rule-target=global` of the system namespace (the rules, each
//!   ConfigMap compiled once per resourceVersion) and the Secrets of the served namespace (the
//!   kubeconfigs: no GETs). One client per kubeconfig Secret, kept while its resourceVersion
//!   holds, serves every ServiceSet of that cluster;
//! - a look only when the status is due (every HelmRelease Ready, the status not yet written):
//!   ONE list per kind a rule names per distinct service namespace of the ServiceSet (one per
//!   cluster-scoped kind), unfiltered, the services' objects picked out by their labels on this
//!   side ([`health::look`]);
//! - all healthy: the status, as without `--health`; else no write, and the ServiceSet is
//!   looked at again after `--health-poll-seconds`. A target it cannot read (no Secret, no
//!   answer) counts as unhealthy.
//!
//! Liberties of its own: only the global rules of the system namespace are read (kcm's tiers 2
//! and 3, in the ServiceSet's namespace, would be one more store of ConfigMaps; the benchmark has
//! none); a ConfigMap or Secret event queues no ServiceSet (the poll brings them back).
//!
//! With `--writes applies` ([`Writes::Applies`]) it writes as ksm-adapter chooses to instead: a
//! server-side apply per new HelmRelease and one Event per ServiceSet deployed, so that what
//! those choices cost the API server is measured apart from the rest of ksm-adapter.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use ksm_test_harness::SERVICE_SET_LABEL;
use ksm_test_harness::fixtures::now;
use ksm_test_harness::objects::Kind;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::health::{self, Clients, CompiledRules, Service, Unhealthy};
use crate::naive::queue::Queue;
use crate::naive::{
    self, ProviderConfig, child_name, controller_reference, field, mutate_helm_release, provider_config,
};

/// The floor's finalizer on the ServiceSets it serves.
pub const FINALIZER: &str = "floor.ksm.k0rdent.mirantis.com/serviceset";

/// How to run the floor.
#[derive(Clone, Debug)]
pub struct Options {
    /// Kubeconfig file; `None`: `$KUBECONFIG`, `~/.kube/config` or in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// The namespace whose ServiceSets are served.
    pub namespace: String,
    /// ServiceSets handled at once.
    pub concurrency: u16,
    /// How it writes a new HelmRelease and a deployed ServiceSet.
    pub writes: Writes,
    /// Whether, and how, it verifies services' health before writing the status.
    pub health: Option<health::Options>,
}

/// How the floor writes a new HelmRelease and a deployed ServiceSet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Writes {
    /// The least: a create per HelmRelease, no Event.
    #[default]
    Least,
    /// As ksm-adapter does: a server-side apply (forced, as ksm-adapter's) per new HelmRelease
    /// and, after the status, one `events.k8s.io/v1` Event `Deployed` about the ServiceSet.
    Applies,
}

/// One write the floor makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Adds [`FINALIZER`] to the ServiceSet: a JSON patch.
    Finalizer(Value),
    /// Creates a HelmRelease.
    Create(Box<DynamicObject>),
    /// Merge-patches the HelmRelease `name` to what the ServiceSet asks for.
    Update { name: String, patch: Value },
    /// Merge-patches the ServiceSet's status (`patch` is the whole body, `{"status": ...}`).
    Status(Value),
}

impl Write {
    /// What the write is to: one pending write per target.
    fn target(&self) -> String {
        match self {
            Write::Finalizer(_) => "finalizer".into(),
            Write::Create(release) => format!("release/{}", release.name_any()),
            Write::Update { name, .. } => format!("release/{name}"),
            Write::Status(_) => "status".into(),
        }
    }

    /// What the write says, less what changes from one decision to the next (the status's
    /// transition times): two writes with the same fingerprint write the same.
    fn fingerprint(&self) -> Value {
        match self {
            Write::Finalizer(patch) | Write::Update { patch, .. } => patch.clone(),
            Write::Create(release) => json!([release.metadata.labels, release.data["spec"]]),
            Write::Status(patch) => json!([patch["status"]["deployed"], services_of(&patch["status"])]),
        }
    }
}

/// Decides the writes that serve `service_set`, given its HelmReleases by name (`release`) and
/// the time to stamp a status with: the finalizer when it is missing, a create per missing
/// HelmRelease, a patch per HelmRelease that differs from what the ServiceSet asks for, and —
/// only when none of those is due and every HelmRelease is Ready for its generation — the status
/// `Deployed`, unless it is written already. A ServiceSet being deleted gets nothing; a service
/// whose values are not YAML gets no HelmRelease (and so the ServiceSet no status).
pub fn decide(
    service_set: &DynamicObject,
    release: impl Fn(&str) -> Option<Arc<DynamicObject>>,
    now: &str,
) -> Vec<Write> {
    if service_set.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let mut writes = Vec::new();
    if !service_set.finalizers().iter().any(|f| f == FINALIZER) {
        writes.push(Write::Finalizer(finalizer_patch(service_set)));
    }
    let config = provider_config(service_set).unwrap_or_else(|_| ProviderConfig::default());
    let services = naive::services(service_set);
    let (mut ready, mut hashes) = (true, Vec::with_capacity(services.len()));
    for service in &services {
        let Some(wanted) = helm_release(service_set, service, &config) else {
            ready = false;
            continue;
        };
        let name = wanted.name_any();
        match release(&name) {
            None => writes.push(Write::Create(Box::new(wanted))),
            Some(live) if !is_subset(&wanted.data["spec"], &live.data["spec"]) || !has_labels(&live, &wanted) => {
                let patch = json!({"metadata": {"labels": wanted.metadata.labels}, "spec": wanted.data["spec"]});
                writes.push(Write::Update { name, patch });
            }
            Some(live) => {
                ready &= is_ready(&live);
                hashes.push(live.data["status"][DEPLOYED_HASH].clone());
            }
        }
    }
    if writes.iter().any(|w| matches!(w, Write::Create(_) | Write::Update { .. })) || !ready {
        return writes;
    }
    let status = deployed_status(service_set, &services, &hashes, now);
    let written = &service_set.data["status"];
    if written["deployed"] != true || services_of(written) != services_of(&status) {
        writes.push(Write::Status(json!({"status": status})));
    }
    writes
}

/// The JSON patch that adds [`FINALIZER`] to the ServiceSet's finalizers, creating the list when
/// there is none.
fn finalizer_patch(service_set: &DynamicObject) -> Value {
    match &service_set.metadata.finalizers {
        Some(finalizers) if !finalizers.is_empty() => {
            json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}])
        }
        _ => json!([{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}]),
    }
}

/// The HelmRelease of `service`, as the naive baseline builds it, its chart the HelmChart named
/// after the service's template (module doc); `None` when its values are not YAML.
fn helm_release(service_set: &DynamicObject, service: &Value, config: &ProviderConfig) -> Option<DynamicObject> {
    let namespace = service_set.namespace().unwrap_or_default();
    let mut release =
        DynamicObject::new(&child_name(service_set, service), &Kind::HelmRelease.resource()).within(&namespace);
    release.metadata.owner_references = Some(vec![controller_reference(service_set)]);
    let chart = json!({"chartRef": {"kind": "HelmChart", "name": field(service, "template"), "namespace": namespace}});
    mutate_helm_release(&mut release, service_set, service, &chart, config).ok()?;
    Some(release)
}

/// Whether every field of `wanted` is in `live` with the same value (objects compared field by
/// field, so that defaults the API server adds do not count as a difference).
fn is_subset(wanted: &Value, live: &Value) -> bool {
    match (wanted, live) {
        (Value::Object(wanted), Value::Object(live)) => {
            wanted.iter().all(|(key, value)| live.get(key).is_some_and(|live| is_subset(value, live)))
        }
        _ => wanted == live,
    }
}

/// Whether `live` carries every label of `wanted`.
fn has_labels(live: &DynamicObject, wanted: &DynamicObject) -> bool {
    wanted.labels().iter().all(|(key, value)| live.labels().get(key) == Some(value))
}

/// Whether Flux says the HelmRelease is Ready for its current generation.
fn is_ready(release: &DynamicObject) -> bool {
    let status = &release.data["status"];
    let observed = status["observedGeneration"].as_i64();
    let ready =
        status["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True");
    ready && observed.is_some() && observed == release.metadata.generation
}

/// The status of a ServiceSet whose services are all Deployed, stamped `now`: what kcm's contract
/// asks of any adapter (module doc), each service's `lastDeployedHash` from `hashes` (one per
/// service, as [`trim_release`] keeps it).
fn deployed_status(service_set: &DynamicObject, services: &[Value], hashes: &[Value], now: &str) -> Value {
    let entries: Vec<Value> = services
        .iter()
        .zip(hashes)
        .map(|(service, hash)| {
            let (name, template) = (field(service, "name"), field(service, "template"));
            let namespace = Some(field(service, "namespace")).filter(|ns| !ns.is_empty()).unwrap_or(name);
            let version = Some(field(service, "version")).filter(|v| !v.is_empty()).unwrap_or(template);
            json!({"name": name, "namespace": namespace, "template": template, "type": "Helm", "state": "Deployed",
                   "version": version, "lastStateTransitionTime": now, "lastDeployedHash": hash})
        })
        .collect();
    let count = format!("{0}/{0}", entries.len());
    let ready = json!({"type": "ServicesInReadyState", "status": "True", "reason": "Succeeded", "message": count,
                       "observedGeneration": service_set.metadata.generation, "lastTransitionTime": now});
    json!({"cluster": cluster_reference(service_set), "provider": {"ready": true}, "conditions": [ready],
           "deployed": true, "services": entries})
}

/// `status.cluster`, as kcm's adapter writes it: the ClusterDeployment the ServiceSet serves, or
/// the management cluster's SveltosCluster for self-management.
fn cluster_reference(service_set: &DynamicObject) -> Value {
    if service_set.data["spec"]["provider"]["selfManagement"] == true {
        return json!({"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
                      "name": "mgmt", "namespace": "mgmt"});
    }
    json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
           "name": field(&service_set.data["spec"], "cluster"), "namespace": service_set.namespace()})
}

/// A fingerprint of what Flux says it deployed (its last release), as `lastDeployedHash`: the hex
/// SHA-256 of the release's `status.history[0]`, or of its spec before it has any.
fn deployed_hash(release: &DynamicObject) -> String {
    let history = &release.data["status"]["history"][0];
    let deployed = if history.is_null() { &release.data["spec"] } else { history };
    hex::encode(Sha256::digest(deployed.to_string()))
}

/// A status's services as the floor compares them: what it writes, less the transition times.
fn services_of(status: &Value) -> Vec<Value> {
    let keys = ["name", "namespace", "template", "type", "state", "version", "lastDeployedHash"];
    let entries = status["services"].as_array().into_iter().flatten();
    entries.map(|entry| keys.iter().map(|key| (key.to_string(), entry[*key].clone())).collect::<Value>()).collect()
}

/// Writes made but not yet seen in the stores, by ServiceSet, then by target: a decision that
/// repeats one of them (its store lags) is not written again; one the stores caught up with is
/// no longer decided, and forgotten.
#[derive(Default)]
pub struct Pending(Mutex<HashMap<String, HashMap<String, Value>>>);

impl Pending {
    /// The writes of `decided` for ServiceSet `name` that are not pending already, and forgets the
    /// pending writes no longer decided.
    fn due(&self, name: &str, decided: Vec<Write>) -> Vec<Write> {
        let mut pending = self.0.lock().expect("pending lock");
        let Some(mine) = pending.get_mut(name) else { return decided };
        mine.retain(|target, _| decided.iter().any(|w| w.target() == *target));
        let due = decided.into_iter().filter(|w| mine.get(&w.target()) != Some(&w.fingerprint())).collect();
        if mine.is_empty() {
            pending.remove(name);
        }
        due
    }

    /// Remembers that `write` to ServiceSet `name` was made.
    fn made(&self, name: &str, write: &Write) {
        let mut pending = self.0.lock().expect("pending lock");
        pending.entry(name.to_string()).or_default().insert(write.target(), write.fingerprint());
    }
}

/// Runs the floor until SIGINT or SIGTERM.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let client = naive::client(options.kubeconfig.as_ref()).await?;
    let queue = Arc::new(Queue::default());
    let mut tasks = JoinSet::new();
    let (service_sets, service_set_writer) = store(&Kind::ServiceSet.resource());
    let (releases, release_writer) = store(&Kind::HelmRelease.resource());
    let api = |kind: Kind| Api::<DynamicObject>::namespaced_with(client.clone(), &options.namespace, &kind.resource());
    let (service_set_api, release_api) = (api(Kind::ServiceSet), api(Kind::HelmRelease));
    let enqueue = queue.clone();
    let touched = move |set: &DynamicObject| enqueue.add(&set.name_any());
    tasks.spawn(follow(
        service_set_api.clone(),
        watcher::Config::default(),
        service_set_writer,
        trim_service_set,
        touched,
    ));
    let enqueue = queue.clone();
    tasks.spawn(follow(
        release_api.clone(),
        watcher::Config::default(),
        release_writer,
        trim_release,
        move |release| {
            if let Some(owner) = release.labels().get(SERVICE_SET_LABEL) {
                enqueue.add(owner);
            }
        },
    ));
    let health = options.health.as_ref().map(|health| watch_health(&client, &options.namespace, health, &mut tasks));
    let ctx = Arc::new(Context {
        namespace: options.namespace.clone(),
        service_set_resource: Kind::ServiceSet.resource(),
        release_resource: Kind::HelmRelease.resource(),
        service_sets,
        releases,
        service_set_api,
        release_api,
        pending: Pending::default(),
        writes: options.writes,
        event_api: Api::namespaced_with(client.clone(), &options.namespace, &event_resource()),
        failures: Mutex::default(),
        health,
    });
    for _ in 0..options.concurrency.max(1) {
        tasks.spawn(work(ctx.clone(), queue.clone()));
    }
    naive::terminated().await
}

/// The stores health verification reads, their list+watches spawned on `tasks`: the global rule
/// ConfigMaps of the system namespace and the Secrets of `namespace`.
fn watch_health(client: &Client, namespace: &str, options: &health::Options, tasks: &mut JoinSet<()>) -> Health {
    let (config_maps, config_map_writer) = reflector::store();
    let (secrets, secret_writer) = reflector::store();
    let rules = Api::<ConfigMap>::namespaced(client.clone(), &options.system_namespace);
    let selector = format!("{}={}", health::RULE_TARGET_LABEL, health::GLOBAL);
    let config = watcher::Config::default().labels(&selector);
    tasks.spawn(follow(rules, config.clone(), config_map_writer, trim_meta, |_| {}));
    let secret_api = Api::<Secret>::namespaced(client.clone(), namespace);
    tasks.spawn(follow(secret_api, watcher::Config::default(), secret_writer, trim_meta, |_| {}));
    Health { poll: options.poll, config_maps, secrets, compiled: CompiledRules::default(), clients: Clients::default() }
}

/// Drops an object's managed fields and annotations (a ConfigMap's or a Secret's: what the floor
/// keeps is its data).
fn trim_meta<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
    object.meta_mut().annotations = None;
}

/// A store of objects of `resource` and its writer.
fn store(resource: &ApiResource) -> (Store<DynamicObject>, reflector::store::Writer<DynamicObject>) {
    let writer = reflector::store::Writer::new(resource.clone());
    (writer.as_reader(), writer)
}

/// What the floor keeps of a ServiceSet in its store: no managed fields or annotations, and of
/// its status only `deployed` and `services`, so that its memory is no more than what it decides
/// from.
fn trim_service_set(service_set: &mut DynamicObject) {
    trim(service_set, |status| json!({"deployed": status["deployed"], "services": status["services"]}));
}

/// What the floor keeps of a HelmRelease in its store: no managed fields or annotations, and of
/// its status only `observedGeneration`, the `Ready` condition and its [`deployed_hash`] (as
/// [`DEPLOYED_HASH`]).
fn trim_release(release: &mut DynamicObject) {
    let hash = deployed_hash(release);
    trim(release, |status| {
        let conditions = status["conditions"].as_array().into_iter().flatten();
        let ready: Vec<&Value> = conditions.filter(|c| c["type"] == "Ready").collect();
        json!({"observedGeneration": status["observedGeneration"], "conditions": ready, DEPLOYED_HASH: hash})
    });
}

/// Where [`trim_release`] keeps a HelmRelease's [`deployed_hash`] in the floor's store.
const DEPLOYED_HASH: &str = "deployedHash";

/// Drops the object's managed fields and annotations, and replaces its status, if any, with
/// `keep` of it.
fn trim(object: &mut DynamicObject, keep: impl Fn(&Value) -> Value) {
    object.metadata.managed_fields = None;
    object.metadata.annotations = None;
    if let Some(status) = object.data.get_mut("status") {
        *status = keep(status);
    }
}

/// The one list+watch of `api` (as `config` selects), into `writer`'s store, each object
/// `trim`med first; `touched` sees every object that changed.
async fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    trim: fn(&mut K),
    touched: impl Fn(&K),
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let events = watcher(api, config).default_backoff().modify(trim);
    let events = reflector::reflector(writer, events);
    events
        .touched_objects()
        .for_each(|event| {
            match event {
                Ok(object) => touched(&object),
                Err(e) => eprintln!("watching: {e}"),
            }
            std::future::ready(())
        })
        .await;
}

/// The stores, the APIs written to, and what the workers remember.
struct Context {
    namespace: String,
    /// The kinds of the stores' keys.
    service_set_resource: ApiResource,
    release_resource: ApiResource,
    service_sets: Store<DynamicObject>,
    releases: Store<DynamicObject>,
    service_set_api: Api<DynamicObject>,
    release_api: Api<DynamicObject>,
    pending: Pending,
    writes: Writes,
    /// The Events of the namespace (for [`Writes::Applies`]).
    event_api: Api<DynamicObject>,
    /// Failed rounds in a row, by ServiceSet name (for the retry delay).
    failures: Mutex<HashMap<String, u32>>,
    /// What health verification reads from, with `--health`.
    health: Option<Health>,
}

/// The stores and caches of health verification.
struct Health {
    /// The delay before a ServiceSet with an unhealthy service is looked at again.
    poll: Duration,
    /// The global rule ConfigMaps of the system namespace.
    config_maps: Store<ConfigMap>,
    /// The Secrets of the served namespace (the kubeconfigs among them).
    secrets: Store<Secret>,
    compiled: CompiledRules,
    clients: Clients,
}

impl Health {
    /// Once the rules and the Secrets are listed.
    async fn ready(&self) -> bool {
        self.config_maps.wait_until_ready().await.is_ok() && self.secrets.wait_until_ready().await.is_ok()
    }

    /// The floor's look at the services of `service_set` on its target ([`health::look`]): the
    /// unhealthy objects, or why the target cannot be read.
    async fn look(&self, service_set: &DynamicObject) -> anyhow::Result<Vec<Unhealthy>> {
        let rules = self.compiled.rules(self.config_maps.state().iter().map(|c| &**c));
        if rules.kinds.is_empty() {
            return Ok(Vec::new());
        }
        let name = health::kubeconfig_secret_name(service_set);
        let namespace = service_set.namespace().unwrap_or_default();
        let key = ObjectRef::new(&name).within(&namespace);
        let secret = self.secrets.get(&key).ok_or_else(|| anyhow::anyhow!("no Secret {namespace}/{name}"))?;
        let client = self.clients.client(&secret).await?;
        let services: Vec<Service> = naive::services(service_set).iter().map(Service::of).collect();
        Ok(health::look(&client, &rules, &services).await?)
    }
}

/// A worker: once both stores are listed, serves the queue's ServiceSets one at a time.
async fn work(ctx: Arc<Context>, queue: Arc<Queue>) {
    if ctx.service_sets.wait_until_ready().await.is_err() || ctx.releases.wait_until_ready().await.is_err() {
        return;
    }
    if let Some(health) = &ctx.health
        && !health.ready().await
    {
        return;
    }
    loop {
        let name = queue.get().await;
        match serve(&ctx, &name).await {
            Ok(again) => {
                ctx.failures.lock().expect("failures lock").remove(&name);
                if let Some(after) = again {
                    queue.add_after(&name, after);
                }
            }
            Err(error) => {
                let failures = {
                    let mut failures = ctx.failures.lock().expect("failures lock");
                    let count = failures.entry(name.clone()).or_default();
                    *count += 1;
                    *count
                };
                eprintln!("serving ServiceSet {name} (failure {failures}): {error}");
                queue.add_after(&name, naive::retry_delay(failures));
            }
        }
        queue.done(&name);
    }
}

/// Decides from the stores and makes the writes that are due: the finalizer, then the
/// HelmReleases at once, then — with `--health`, once a look finds every service healthy — the
/// status. When to serve the ServiceSet again (`None`: on the next event).
async fn serve(ctx: &Context, name: &str) -> Result<Option<Duration>, kube::Error> {
    let key = |name: &str, resource: &ApiResource| ObjectRef::new_with(name, resource.clone()).within(&ctx.namespace);
    let Some(service_set) = ctx.service_sets.get(&key(name, &ctx.service_set_resource)) else {
        return Ok(None);
    };
    let release = |name: &str| ctx.releases.get(&key(name, &ctx.release_resource));
    let writes = ctx.pending.due(name, decide(&service_set, release, &now()));
    let (releases, others): (Vec<Write>, Vec<Write>) =
        writes.into_iter().partition(|w| matches!(w, Write::Create(_) | Write::Update { .. }));
    let (finalizer, status): (Vec<Write>, Vec<Write>) =
        others.into_iter().partition(|w| matches!(w, Write::Finalizer(_)));
    for write in finalizer {
        write_one(ctx, name, &write).await?;
    }
    let results = futures::future::join_all(releases.iter().map(|write| write_one(ctx, name, write))).await;
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    if let Some(health) = &ctx.health
        && !status.is_empty()
        && !healthy(health, &service_set).await
    {
        return Ok(Some(health.poll));
    }
    for write in status {
        write_one(ctx, name, &write).await?;
    }
    Ok(None)
}

/// Whether a look finds every service of `service_set` healthy; if not, says why.
async fn healthy(health: &Health, service_set: &DynamicObject) -> bool {
    let name = service_set.name_any();
    match health.look(service_set).await {
        Ok(unhealthy) if unhealthy.is_empty() => true,
        Ok(unhealthy) => {
            eprintln!("ServiceSet {name}: {} unhealthy, first {}", unhealthy.len(), unhealthy[0]);
            false
        }
        Err(e) => {
            eprintln!("ServiceSet {name}: its target cannot be read: {e:#}");
            false
        }
    }
}

/// Makes one write for ServiceSet `name` and remembers it.
async fn write_one(ctx: &Context, name: &str, write: &Write) -> Result<(), kube::Error> {
    let params = PatchParams::default();
    match write {
        Write::Finalizer(patch) => {
            let patch: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(kube::Error::SerdeError)?;
            ctx.service_set_api.patch(name, &params, &Patch::<()>::Json(patch)).await?;
        }
        Write::Create(release) if ctx.writes == Writes::Applies => {
            let params = PatchParams::apply(FINALIZER).force();
            ctx.release_api.patch(&release.name_any(), &params, &Patch::Apply(release)).await?;
        }
        Write::Create(release) => {
            ctx.release_api.create(&PostParams::default(), release).await?;
        }
        Write::Update { name, patch } => {
            ctx.release_api.patch(name, &params, &Patch::Merge(patch)).await?;
        }
        Write::Status(patch) => {
            ctx.service_set_api.patch_status(name, &params, &Patch::Merge(patch)).await?;
            if ctx.writes == Writes::Applies {
                ctx.event_api.create(&PostParams::default(), &deployed_event(&ctx.namespace, name)).await?;
            }
        }
    }
    ctx.pending.made(name, write);
    Ok(())
}

/// `events.k8s.io/v1` Events.
fn event_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk("events.k8s.io", "v1", "Event"), "events")
}

/// The Event ksm-adapter posts when ServiceSet `name` is deployed, with the fields its recorder
/// sets.
fn deployed_event(namespace: &str, name: &str) -> DynamicObject {
    let resource = Kind::ServiceSet.resource();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut event = DynamicObject::new(&format!("{name}.{nanos:x}"), &event_resource()).within(namespace);
    event.data = json!({
        "action": "Reconcile",
        "reason": "Deployed",
        "note": format!("all services of ServiceSet {namespace}/{name} are deployed"),
        "eventTime": now().replace('Z', ".000000Z"),
        "type": "Normal",
        "regarding": {"apiVersion": resource.api_version, "kind": resource.kind, "namespace": namespace, "name": name},
        "reportingController": "ksm-floor-adapter",
        "reportingInstance": "ksm-floor-adapter",
    });
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::rig::{self, Rig};
    use ksm_test_harness::flux::FluxState;
    use ksm_test_harness::{MANAGED_LABEL, SERVICE_LABEL};

    const NOW: &str = "2026-11-27T10:00:00Z";

    fn service_set(finalizers: &[&str], status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "u1", "generation": 1, "finalizers": finalizers},
            "spec": {"cluster": "c1", "provider": {"name": "ksm-flux", "config": {"interval": "5m"}}, "services": [
                {"name": "a", "namespace": "a-ns", "template": "t-a", "values": "replicaCount: 2\n"},
                {"name": "b", "template": "t-b", "version": "1.2.3"},
            ]},
            "status": status,
        }))
        .expect("a ServiceSet")
    }

    /// The HelmReleases the floor creates for `set`, with Flux's status (`Some`: Ready for
    /// `observed`) and generation 1, as the floor's store keeps them.
    fn releases(set: &DynamicObject, observed: Option<i64>) -> HashMap<String, Arc<DynamicObject>> {
        decide(set, |_| None, NOW)
            .into_iter()
            .filter_map(|write| match write {
                Write::Create(mut release) => {
                    release.metadata.generation = Some(1);
                    if let Some(observed) = observed {
                        release.data["status"] = FluxState::Ready.helm_release_status(observed);
                    }
                    trim_release(&mut release);
                    Some((release.name_any(), Arc::new(*release)))
                }
                _ => None,
            })
            .collect()
    }

    fn of(releases: &HashMap<String, Arc<DynamicObject>>) -> impl Fn(&str) -> Option<Arc<DynamicObject>> + '_ {
        |name| releases.get(name).cloned()
    }

    #[test]
    fn a_new_service_set_gets_its_finalizer_and_its_helm_releases_and_no_status() {
        let set = service_set(&["other"], json!({}));
        let writes = decide(&set, |_| None, NOW);
        assert_eq!(
            writes[0],
            Write::Finalizer(json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}]))
        );
        let created: Vec<&DynamicObject> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Create(release) => Some(&**release),
                _ => None,
            })
            .collect();
        assert_eq!(writes.len(), 3, "{writes:?}");
        assert_eq!(created[0].name_any(), "c1-a");
        assert_eq!(created[0].labels()[SERVICE_SET_LABEL], "c1");
        assert_eq!(created[0].labels()[SERVICE_LABEL], "a");
        assert_eq!(created[0].labels()[MANAGED_LABEL], "true");
        assert_eq!(created[0].data["spec"]["chartRef"], json!({"kind": "HelmChart", "name": "t-a", "namespace": "ns"}));
        assert_eq!(created[0].data["spec"]["values"], json!({"replicaCount": 2}));
        assert_eq!(created[0].owner_references()[0].name, "c1");
        let without = service_set(&[], json!({}));
        let Write::Finalizer(patch) = &decide(&without, |_| None, NOW)[0] else { panic!("a finalizer first") };
        assert_eq!(patch, &json!([{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}]));
    }

    #[test]
    fn the_status_waits_until_every_helm_release_is_ready_for_its_generation() {
        let set = service_set(&[FINALIZER], json!({}));
        assert_eq!(decide(&set, of(&releases(&set, None)), NOW), [], "not Ready: nothing to write");
        assert_eq!(decide(&set, of(&releases(&set, Some(0))), NOW), [], "Ready for an older generation");
        let ready = releases(&set, Some(1));
        let writes = decide(&set, of(&ready), NOW);
        let hash = |name: &str| ready[name].data["status"][DEPLOYED_HASH].clone();
        let expected = json!({"status": {
            "cluster": {"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
                        "name": "c1", "namespace": "ns"},
            "provider": {"ready": true},
            "conditions": [{"type": "ServicesInReadyState", "status": "True", "reason": "Succeeded",
                            "message": "2/2", "observedGeneration": 1, "lastTransitionTime": NOW}],
            "deployed": true, "services": [
            {"name": "a", "namespace": "a-ns", "template": "t-a", "type": "Helm", "state": "Deployed",
             "version": "t-a", "lastStateTransitionTime": NOW, "lastDeployedHash": hash("c1-a")},
            {"name": "b", "namespace": "b", "template": "t-b", "type": "Helm", "state": "Deployed",
             "version": "1.2.3", "lastStateTransitionTime": NOW, "lastDeployedHash": hash("c1-b")},
        ]}});
        assert_eq!(writes, [Write::Status(expected.clone())]);

        // Written: nothing more, whenever it was written.
        let mut written = expected["status"].clone();
        written["services"][0]["lastStateTransitionTime"] = json!("2026-11-26T00:00:00Z");
        written["provider"] = json!({"ready": true});
        let converged = service_set(&[FINALIZER], written);
        assert_eq!(decide(&converged, of(&ready), "2026-11-28T00:00:00Z"), []);
    }

    #[test]
    fn a_release_flux_reports_anew_is_a_new_status() {
        let mut ready = releases(&service_set(&[FINALIZER], json!({})), Some(1));
        let Write::Status(written) = decide(&service_set(&[FINALIZER], json!({})), of(&ready), NOW).remove(0) else {
            panic!("the status")
        };
        let converged = service_set(&[FINALIZER], written["status"].clone());
        assert_eq!(decide(&converged, of(&ready), NOW), []);
        let hash = &written["status"]["services"][0]["lastDeployedHash"];
        assert_eq!(hash.as_str().map(str::len), Some(64), "a hex SHA-256: {hash}");

        let mut upgraded = FluxState::Ready.helm_release_status(1);
        upgraded["history"][0]["chartVersion"] = json!("2.0.0");
        let release = Arc::make_mut(ready.get_mut("c1-a").expect("c1-a"));
        release.data["status"] = upgraded;
        trim_release(release);
        let writes = decide(&converged, of(&ready), NOW);
        let [Write::Status(rewritten)] = writes.as_slice() else { panic!("the status again: {writes:?}") };
        assert_ne!(&rewritten["status"]["services"][0]["lastDeployedHash"], hash);
        assert_eq!(rewritten["status"]["services"][1], written["status"]["services"][1]);
    }

    #[test]
    fn a_spec_change_patches_only_the_helm_release_it_changes() {
        let mut set = service_set(&[FINALIZER], json!({}));
        let mut live = releases(&set, Some(1));
        // The API server's defaults are no difference.
        Arc::make_mut(live.get_mut("c1-b").expect("c1-b")).data["spec"]["upgrade"] = json!({"remediation": {}});
        assert_eq!(decide(&set, of(&live), NOW).len(), 1, "only the status");
        set.data["spec"]["services"][0]["values"] = json!("replicaCount: 5\n");
        let writes = decide(&set, of(&live), NOW);
        let [Write::Update { name, patch }] = writes.as_slice() else { panic!("one update: {writes:?}") };
        assert_eq!(name, "c1-a");
        assert_eq!(patch["spec"]["values"], json!({"replicaCount": 5}));
    }

    #[test]
    fn the_stores_keep_only_what_the_floor_decides_from() {
        let set = service_set(&[FINALIZER], json!({}));
        let mut release = releases(&set, Some(1)).remove("c1-a").map(Arc::unwrap_or_clone).expect("c1-a");
        release.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        let before = release.clone();
        trim_release(&mut release);
        assert!(release.metadata.annotations.is_none());
        assert_eq!(release.data["status"]["conditions"].as_array().map(Vec::len), Some(1));
        assert!(release.data["status"]["history"].is_null());
        assert_eq!((is_ready(&release), &release.data["spec"]), (is_ready(&before), &before.data["spec"]));
        assert_eq!(release.data["status"][DEPLOYED_HASH], deployed_hash(&before), "the hash of its history is kept");
        let mut set = service_set(&[FINALIZER], json!({"deployed": true, "services": [], "conditions": [{}]}));
        trim_service_set(&mut set);
        assert_eq!(set.data["status"], json!({"deployed": true, "services": []}));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_health_the_status_waits_until_the_workloads_are_healthy() {
        let rig = Rig::start("floor", json!([{"name": "a", "namespace": "a-ns", "template": "t-a"}])).await;
        let options = Options {
            kubeconfig: Some(rig.kubeconfig.clone()),
            namespace: rig::NAMESPACE.into(),
            concurrency: 2,
            writes: Writes::Least,
            health: Some(rig.health()),
        };
        let floor = tokio::spawn(run(options));
        let release = Kind::HelmRelease.resource();
        let created = || rig.management.object(&release.api_version, &release.kind, Some(rig::NAMESPACE), "c1-a");
        assert!(rig::eventually(10, || created().is_some()).await, "the HelmRelease is created");
        let mut ready = created().expect("the HelmRelease");
        ready["status"] = FluxState::Ready.helm_release_status(1);
        rig.management.put_object(ready).expect("put");

        assert!(rig::eventually(10, || rig.target.requests().verb("list") >= 12).await, "looked at twice");
        assert!(!rig.deployed(), "not deployed while a Deployment is unhealthy");
        rig.target.put_object(rig::deployment("a", 2)).expect("put");
        assert!(rig::eventually(10, || rig.deployed()).await, "deployed once healthy");
        floor.abort();

        let (targets, managed) = (rig.target.requests(), rig.management.requests());
        rig::whole_looks(&targets, 1);
        assert_eq!(targets.verb("get") + targets.verb("watch"), 0, "{targets:?}");
        let watched = ["configmaps", "secrets"].map(|resource| managed.get("list", resource));
        assert_eq!((watched, managed.verb("get")), ([1, 1], 0), "one list of each, no GETs: {managed:?}");
    }

    #[test]
    fn a_service_set_being_deleted_gets_nothing() {
        let mut set = service_set(&[], json!({}));
        set.metadata.deletion_timestamp = serde_json::from_value(json!(NOW)).expect("a time");
        assert_eq!(decide(&set, |_| None, NOW), []);
    }

    #[test]
    fn a_write_made_is_not_made_again_until_the_store_shows_it() {
        let pending = Pending::default();
        let set = service_set(&[], json!({}));
        let decided = decide(&set, |_| None, NOW);
        assert_eq!(pending.due("c1", decided.clone()).len(), 3);
        decided.iter().for_each(|write| pending.made("c1", write));
        assert_eq!(pending.due("c1", decided.clone()), [], "the stores lag: nothing is due again");
        // The finalizer is seen: it is forgotten; the HelmReleases still lag.
        let set = service_set(&[FINALIZER], json!({}));
        assert_eq!(pending.due("c1", decide(&set, |_| None, NOW)), []);
        assert_eq!(pending.0.lock().expect("lock")["c1"].len(), 2);
        // A status decided again at another time is the same write.
        let (services, hashes) = (naive::services(&set), [json!("h1"), json!("h2")]);
        let status = |now: &str| Write::Status(json!({"status": deployed_status(&set, &services, &hashes, now)}));
        pending.made("c1", &status(NOW));
        assert_eq!(pending.due("c1", vec![status("2026-11-28T00:00:00Z")]), []);
        assert_eq!(pending.0.lock().expect("lock")["c1"].len(), 1, "the HelmReleases are forgotten");
    }
}
