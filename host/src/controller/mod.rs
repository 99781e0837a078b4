//! The Kubernetes I/O layer of `ksm-adapter run`: it watches ServiceSets and what they depend on,
//! gathers each ServiceSet's inputs from its caches and carries out what
//! [`plan::reconcile`](crate::plan::reconcile::reconcile) decides.
//!
//! - [`context`]: what every reconcile shares (client, plugin, caches, settings);
//! - [`reconciler`]: one ServiceSet, top to bottom, and the retry policy;
//! - [`backoff`]: failed rounds per ServiceSet, for that policy's backoff;
//! - [`arbiter`]: the index of claims across ServiceSets and who wins them;
//! - [`plugins`]: AdapterPlugins: fetch, compile, validate, hot reload, their status;
//! - [`children`]: the plugins' kinds: their watches, server-side apply and delete;
//! - `child_cache`: the objects of those kinds, as compact JSON by ServiceSet;
//! - [`config_maps`]: watches of the ConfigMaps AdapterPlugins name, by name;
//! - `settle`: a short wait that folds a burst of child changes into one reconcile;
//! - [`finalizer`]: the host's own finalizer on the ServiceSets it serves;
//! - [`status`]: ServiceSet status writes, only when the status changed;
//! - [`events`]: Kubernetes Events on transitions;
//! - [`leader`]: leader election on a Lease (one active replica);
//! - [`liveness`]: the reconciles running now, for `/healthz` to tell a stuck controller;
//! - [`watches`]: which watches fail and why, for the log and `/readyz`;
//! - `access`: the host's own permissions (SelfSubjectAccessReview);
//! - [`provider`]: the host's own look at an SMP (diagnosis, and `manage` mode's SMP status).

mod access;
pub mod arbiter;
pub mod backoff;
mod child_cache;
pub mod children;
pub mod config_maps;
pub mod context;
pub mod events;
pub mod finalizer;
pub mod leader;
pub mod liveness;
pub mod plugins;
pub mod provider;
pub mod reconciler;
mod settle;
pub mod status;
pub mod watches;

use crate::adapter_plugin::AdapterPlugin;
use crate::k0rdent::{ServiceSet, ServiceTemplate, StateManagementProvider};
use crate::metrics::Metrics;
use crate::plugin::Limits;
use crate::runtime::Runtime;
use crate::smp::AdapterIdentity;
use anyhow::Context as _;
use arbiter::Arbiter;
use backoff::Failures;
use children::ChildKinds;
use config_maps::ConfigMapWatches;
use context::{Caches, Context};
use futures::channel::mpsc::unbounded;
use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use plugins::Plugins;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use watches::WatchHealth;

/// Who writes StateManagementProvider status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// kcm evaluates SMPs and writes their status; the host reads `status.ready`.
    Observe,
    /// No kcm: the host evaluates the SMPs naming it as adapter and writes their status.
    Manage,
}

/// AdapterPlugins loaded (fetched, compiled, validated) at once.
const PLUGIN_LOADS: u16 = 4;

/// Plugin instances a controller reconciling `concurrency` ServiceSets at once holds at most at
/// once: one session per reconcile and one per plugin load.
pub fn plugin_instances(concurrency: u16) -> u32 {
    u32::from(concurrency) + u32::from(PLUGIN_LOADS)
}

/// The plugin serving, when no AdapterPlugin names it, an SMP whose `spec.provisionerCRDs` list
/// the CRDs that plugin's CD tool provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultPlugin {
    /// The built-in Flux plugin, for SMPs listing Flux's HelmRelease or Kustomization CRD.
    Flux,
    /// None: every SMP needs an AdapterPlugin.
    None,
}

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The adapter Deployment this host runs as.
    pub identity: AdapterIdentity,
    /// Who writes SMP status.
    pub mode: Mode,
    /// What serves an SMP that no AdapterPlugin names.
    pub default_plugin: DefaultPlugin,
    /// The namespace k0rdent runs in (self-management ServiceSets live there).
    pub system_namespace: String,
    /// ServiceSets reconciled at the same time.
    pub concurrency: u16,
    /// Every ServiceSet is reconciled again after this long even when nothing changed.
    pub resync: Duration,
    /// `manage` mode: SMPs are re-evaluated at least this often (kcm uses 10 s).
    pub smp_interval: Duration,
    /// How often an OCI plugin with `pullPolicy: Always` checks whether its tag moved.
    pub oci_poll: Duration,
    /// Where to serve `/metrics`, `/healthz` and `/readyz`; `None`: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// Label selector of the ServiceSets this process serves (sharding); `None`: all.
    pub shard_selector: Option<String>,
    /// Leader election: only the holder of this Lease runs; `None`: this process always runs.
    pub election: Option<leader::Election>,
}

impl Settings {
    /// Whether `smp` names this host as its adapter.
    pub fn is_adapter_of(&self, smp: &StateManagementProvider) -> bool {
        smp.spec.adapter.name == self.identity.name && smp.spec.adapter.namespace == self.identity.namespace
    }
}

/// Runs the controller until SIGTERM or Ctrl-C, then finishes the reconciles in flight.
/// Plugins come from AdapterPlugins, compiled by `runtime`; `limits` apply to those that set
/// none.
pub async fn run(
    client: Client,
    runtime: Runtime,
    limits: Limits,
    settings: Settings,
    metrics: Arc<Metrics>,
) -> anyhow::Result<()> {
    // Probes answer from the start: a standby waiting for the Lease is alive and ready to take
    // over; the leader is ready once its caches are listed and its plugins loaded.
    let serving: Arc<OnceLock<Arc<Context>>> = Arc::default();
    if let Some(addr) = settings.metrics_addr {
        serve_metrics(addr, metrics.clone(), serving.clone(), settings.election.is_some()).await?;
    }
    let leadership = match &settings.election {
        Some(election) => Some(leader::acquire(client.clone(), election.clone()).await?),
        None => None,
    };
    let (wake, woken) = unbounded();
    let arbiter = Arc::new(Arbiter::new(wake.clone()));
    // A shard sees only its ServiceSets: everything keyed by ServiceSet follows from that.
    let shard = match &settings.shard_selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => all(),
    };
    let released = arbiter.clone();
    let failures = Arc::new(Failures::default());
    let forgotten = failures.clone();
    let health = Arc::new(WatchHealth::default());
    let cache = |config| Cache { client: &client, config, health: health.clone() };
    let (service_sets, service_set_events, service_sets_listed) =
        cache(shard).start::<ServiceSet>(move |store, event| {
            // A ServiceSet gone by any path gives up its claims.
            if let watcher::Event::Delete(service_set) = event {
                released.release(service_set);
            }
            forgotten.forget_gone(store, event);
        });
    let (providers, provider_events, providers_listed) = cache(all()).start::<StateManagementProvider>(|_, _| {});
    let (templates, template_events, templates_listed) = cache(all()).start::<ServiceTemplate>(|_, _| {});
    let (gone, deleted_plugins) = unbounded();
    let plugin_failures = Arc::new(Failures::default());
    let forgotten = plugin_failures.clone();
    let (adapter_plugins, plugin_events, plugins_listed) = cache(all()).start::<AdapterPlugin>(move |store, event| {
        if let watcher::Event::Delete(plugin) = event {
            let _ = gone.unbounded_send(plugin.name_any());
        }
        forgotten.forget_gone(store, event);
    });
    let provider_changed = Arc::new(Notify::new());
    let notify = provider_changed.clone();
    let provider_events = provider_events.inspect(move |_| notify.notify_one());

    let (mode, concurrency) = (settings.mode, settings.concurrency);
    let (plugin_wake, plugins_woken) = unbounded();
    let caches = Caches {
        service_sets: service_sets.clone(),
        providers,
        templates,
        adapter_plugins: adapter_plugins.clone(),
        children: ChildKinds::new(&client, settle::settled(wake.clone(), settle::SETTLE), health.clone()),
        health,
        config_maps: ConfigMapWatches::new(client.clone(), adapter_plugins.clone(), plugin_wake.clone()),
    };
    let plugins = Plugins::new(runtime, limits, plugin_wake);
    let ctx = Arc::new(Context::new(
        client.clone(),
        plugins,
        settings,
        caches,
        (arbiter, wake),
        (failures, plugin_failures),
        metrics,
    ));
    let _ = serving.set(ctx.clone());
    let listed = vec![service_sets_listed, providers_listed, templates_listed];
    tokio::spawn(context::prepare(ctx.clone(), listed, plugins_listed));
    tokio::spawn({
        let ctx = ctx.clone();
        deleted_plugins.for_each(move |name: String| {
            plugins::forget(&ctx, &name);
            futures::future::ready(())
        })
    });
    if mode == Mode::Manage {
        tokio::spawn(provider::manage(ctx.clone(), provider_changed));
    }

    let service_set_events = service_set_events.predicate_filter(reconcile_worthy, PredicateConfig::default());
    let service_set_controller = Controller::for_stream(service_set_events, service_sets.clone())
        .with_config(controller::Config::default().concurrency(concurrency))
        .watches_stream(provider_events, {
            let service_sets = service_sets.clone();
            move |smp| users_of_provider(&service_sets, &smp)
        })
        .watches_stream(template_events, move |template| users_of_template(&service_sets, &template))
        .reconcile_on(woken)
        .shutdown_on_signal()
        .run(reconciler::reconcile, reconciler::error_policy, ctx.clone())
        .for_each(log_error);
    let plugin_controller = Controller::for_stream(plugin_events, adapter_plugins)
        .with_config(controller::Config::default().concurrency(PLUGIN_LOADS))
        .reconcile_on(plugins_woken)
        .shutdown_on_signal()
        .run(plugins::reconcile, |_, error, _| plugins::error_policy(error), ctx)
        .for_each(log_error);
    tracing::info!("controller started");
    let controllers = futures::future::join(service_set_controller, plugin_controller);
    let Some(leadership) = leadership else {
        controllers.await;
        tracing::info!("controller stopped");
        return Ok(());
    };
    let outcome = tokio::select! {
        _ = controllers => Ok(()),
        () = leadership.lost() => Err(anyhow::anyhow!("lost the leader Lease; exiting so that only the new leader writes")),
    };
    // Graceful shutdown (SIGTERM): reconciles in flight have finished; hand over at once.
    if let Err(e) = leadership.release().await {
        tracing::warn!("releasing the leader Lease: {e:#}");
    }
    tracing::info!("controller stopped");
    outcome
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr`, reading the controller's context once
/// `serving` holds it; until then `/readyz` answers `standby` (waiting for the Lease).
async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    serving: Arc<OnceLock<Arc<Context>>>,
    standby: bool,
) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("--metrics-bind-address {addr}"))?;
    let scraped = serving.clone();
    let refresh = Arc::new(move || {
        if let Some(ctx) = scraped.get() {
            ctx.metrics.service_sets(&ctx.service_set_states());
        }
    });
    let probed = serving.clone();
    let healthy = Arc::new(move || match probed.get() {
        Some(ctx) => ctx.in_flight.stuck(std::time::Instant::now(), liveness::STUCK_AFTER).map_or(Ok(()), Err),
        None => Ok(()),
    });
    let ready = Arc::new(move || match serving.get() {
        Some(ctx) => ctx.readiness(),
        None if standby => Ok(()),
        None => Err("starting".to_string()),
    });
    let probes = crate::metrics::Probes { refresh, healthy, ready };
    tokio::spawn(async move {
        if let Err(e) = crate::metrics::serve(listener, metrics, probes).await {
            tracing::error!("the metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}

async fn log_error<T, E: std::fmt::Display>(result: Result<T, E>) {
    if let Err(e) = result {
        tracing::debug!("{e}");
    }
}

/// Every object of a kind.
fn all() -> watcher::Config {
    watcher::Config::default()
}

/// A cache to start: of the objects `config` selects, its watch's failures reported to
/// `health`.
struct Cache<'a> {
    client: &'a Client,
    config: watcher::Config,
    health: Arc<WatchHealth>,
}

impl Cache<'_> {
    /// A cache of the objects of kind `K` (managedFields dropped: the host never reads them),
    /// the stream of its changes (which fills the cache, so it must be polled), and a flag that
    /// turns true once the cache holds a complete list (see [`observe`]). `on_event` sees every
    /// event, after the cache took it in.
    fn start<K>(
        self,
        on_event: impl Fn(&Store<K>, &watcher::Event<K>) + Send + 'static,
    ) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    {
        let (reader, writer) = reflector::store();
        let store = reader.clone();
        let (listed, is_listed) = watch::channel(false);
        let (kind, health) = (K::kind(&()).into_owned(), self.health);
        let events = watcher(Api::<K>::all(self.client.clone()), self.config)
            .default_backoff()
            .modify(|object| object.managed_fields_mut().clear())
            .reflect(writer)
            .inspect(move |event| {
                observe(&health, &kind, &listed, event);
                if let Ok(event) = event {
                    on_event(&store, event);
                }
            })
            .touched_objects();
        (reader, events, is_listed)
    }
}

/// Records what a watch of `kind` delivered: its health, and whether its cache holds a complete
/// list: at the end of a list, and also when the API server does not serve the kind at all
/// (404), which has no objects to list; the watch keeps retrying and lists the kind once its
/// CRD is installed.
fn observe<K>(
    health: &WatchHealth,
    kind: &str,
    listed: &watch::Sender<bool>,
    event: &Result<watcher::Event<K>, watcher::Error>,
) {
    health.observe(kind, event);
    let complete = match event {
        Ok(event) => matches!(event, watcher::Event::InitDone),
        Err(error) => watches::status_code(error) == Some(404),
    };
    if complete {
        listed.send_replace(true);
    }
}

/// What of a ServiceSet calls for a reconcile when it changes: its spec (generation), labels
/// (the SMP selector), annotations, finalizers and deletion. Status-only changes, i.e. the
/// host's own status writes, do not: each used to cost a full round of plugin calls that
/// decided nothing new. The cache still holds the latest status for the next round.
fn reconcile_worthy(service_set: &ServiceSet) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let meta = service_set.meta();
    let mut hasher = DefaultHasher::new();
    (meta.generation, &meta.labels, &meta.annotations, &meta.finalizers).hash(&mut hasher);
    meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()).hash(&mut hasher);
    Some(hasher.finish())
}

/// Waits until a cache's `listed` flag turns true (or its sender is gone).
async fn wait_listed(mut listed: watch::Receiver<bool>) {
    let _ = listed.wait_for(|listed| *listed).await;
}

/// The ServiceSets whose `spec.provider.name` is `smp`.
fn users_of_provider(service_sets: &Store<ServiceSet>, smp: &StateManagementProvider) -> Vec<ObjectRef<ServiceSet>> {
    let name = smp.name_any();
    service_sets
        .state()
        .iter()
        .filter(|ss| ss.spec.provider.name == name)
        .map(|ss| ObjectRef::from_obj(&**ss))
        .collect()
}

/// The ServiceSets in the template's namespace that use it.
fn users_of_template(service_sets: &Store<ServiceSet>, template: &ServiceTemplate) -> Vec<ObjectRef<ServiceSet>> {
    let (name, namespace) = (template.name_any(), template.namespace());
    service_sets
        .state()
        .iter()
        .filter(|ss| ss.namespace() == namespace && ss.spec.services.iter().any(|s| s.template == name))
        .map(|ss| ObjectRef::from_obj(&**ss))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service_set(patch: impl FnOnce(&mut serde_json::Value)) -> ServiceSet {
        let mut object = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "a", "namespace": "team", "generation": 1, "labels": {"x": "1"}},
            "spec": {"provider": {"name": "ksm-flux"}, "services": []},
            "status": {"deployed": false},
        });
        patch(&mut object);
        serde_json::from_value(object).unwrap()
    }

    #[test]
    fn only_status_changes_do_not_call_for_a_reconcile() {
        let base = reconcile_worthy(&service_set(|_| {}));
        assert_eq!(base, reconcile_worthy(&service_set(|o| o["status"]["deployed"] = json!(true))));
        for (what, change) in [
            ("spec", json!({"metadata": {"generation": 2}})),
            ("labels", json!({"metadata": {"labels": {"x": "2"}}})),
            ("annotations", json!({"metadata": {"annotations": {"note": "retry"}}})),
            ("finalizers", json!({"metadata": {"finalizers": ["ksm.k0rdent.mirantis.com/finalizer"]}})),
            ("deletion", json!({"metadata": {"deletionTimestamp": "2026-11-22T10:00:00Z"}})),
        ] {
            let changed = service_set(|o| {
                for (key, value) in change["metadata"].as_object().unwrap() {
                    o["metadata"][key] = value.clone();
                }
            });
            assert_ne!(base, reconcile_worthy(&changed), "a change of {what} calls for a reconcile");
        }
    }
}
