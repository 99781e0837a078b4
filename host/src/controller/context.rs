//! What every reconcile shares: the client, the plugins, the caches and the settings; and the
//! preparation that must finish before the first reconcile.

use super::arbiter::Arbiter;
use super::backoff::Failures;
use super::children::{ChildKinds, Waker};
use super::config_maps::ConfigMapWatches;
use super::events::Events;
use super::liveness::InFlight;
use super::plugins::{self, Plugins};
use super::provider::ProviderCache;
use super::watches::WatchHealth;
use super::{Settings, wait_listed};
use crate::adapter_plugin::AdapterPlugin;
use crate::k0rdent::{ServiceSet, ServiceTemplate, State, StateManagementProvider};
use crate::metrics::Metrics;
use crate::plan;
use crate::plugin::call_blocking;
use crate::serving::ServingPlugin;
use crate::smp::{self, RuleCache};
use futures::StreamExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::watch;

/// The caches the controller reads.
pub struct Caches {
    /// Every ServiceSet.
    pub service_sets: Store<ServiceSet>,
    /// Every StateManagementProvider.
    pub providers: Store<StateManagementProvider>,
    /// Every ServiceTemplate.
    pub templates: Store<ServiceTemplate>,
    /// Every AdapterPlugin.
    pub adapter_plugins: Store<AdapterPlugin>,
    /// The plugins' kinds: cached children, apply and delete.
    pub children: ChildKinds,
    /// Which of the watches filling these caches fail.
    pub health: Arc<WatchHealth>,
    /// The ConfigMaps AdapterPlugins load from, watched by name.
    pub config_maps: ConfigMapWatches,
}

/// Shared state of the controller.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The plugins loaded from AdapterPlugins.
    pub plugins: Plugins,
    /// Wakes a ServiceSet's reconcile.
    pub wake: Waker,
    /// The process's metrics.
    pub metrics: Arc<Metrics>,
    /// Kubernetes Events on transitions.
    pub events: Events,
    /// How the controller runs.
    pub settings: Settings,
    /// The caches.
    pub caches: Caches,
    /// Claims across ServiceSets.
    pub arbiter: Arc<Arbiter>,
    /// Compiled CEL readiness rules.
    pub rules: RuleCache,
    /// What the host found when it looked at SMPs itself (discovery, RBAC, diagnoses).
    pub provider_cache: ProviderCache,
    /// Consecutive failed reconciles per ServiceSet, for the retry backoff.
    pub failures: Arc<Failures<ServiceSet>>,
    /// Consecutive failed loads per AdapterPlugin, for the retry backoff.
    pub plugin_failures: Arc<Failures<AdapterPlugin>>,
    /// The reconciles running now, for `/healthz`.
    pub in_flight: InFlight,
    /// This installation's finalizer on the ServiceSets it serves.
    pub finalizer: String,
    /// Turns true once [`prepare`] is done.
    ready: watch::Sender<bool>,
}

impl Context {
    /// The context over the given caches.
    pub fn new(
        client: Client,
        plugins: Plugins,
        settings: Settings,
        caches: Caches,
        (arbiter, wake): (Arc<Arbiter>, Waker),
        (failures, plugin_failures): (Arc<Failures<ServiceSet>>, Arc<Failures<AdapterPlugin>>),
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            plugins,
            wake,
            metrics,
            events: Events::new(client.clone(), &settings.identity.name),
            finalizer: super::finalizer::of(&settings.identity),
            client,
            settings,
            caches,
            arbiter,
            rules: RuleCache::new(),
            provider_cache: ProviderCache::default(),
            failures,
            plugin_failures,
            in_flight: InFlight::default(),
            ready: watch::channel(false).0,
        }
    }

    /// Waits until [`prepare`] is done: every cache holds a complete list (so a reconcile
    /// never mistakes a cache still loading for objects that do not exist) and the claim index
    /// holds every served ServiceSet's claims.
    pub async fn ready(&self) {
        let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
    }

    /// Whether the host is ready to serve (for `/readyz`): [`prepare`] is done and no watch
    /// fails, but for a CRD other than k0rdent's that is not installed (see
    /// [`WatchHealth::blocking`]); else what is missing.
    pub fn readiness(&self) -> Result<(), String> {
        let k0rdent = [ServiceSet::kind(&()), StateManagementProvider::kind(&()), ServiceTemplate::kind(&())];
        let mut problems = self.caches.health.blocking(&k0rdent.iter().map(|k| k.as_ref()).collect::<Vec<_>>());
        if !*self.ready.borrow() {
            problems.insert(0, "caches not listed or plugins not loaded yet".into());
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }

    /// The served ServiceSets (those carrying the host's finalizer) by state, for metrics.
    pub fn service_set_states(&self) -> [(&'static str, i64); 3] {
        let (mut deployed, mut failed, mut progressing) = (0, 0, 0);
        for service_set in
            self.caches.service_sets.state().iter().filter(|ss| super::finalizer::has(ss, &self.finalizer))
        {
            let status = service_set.status.as_ref();
            if status.is_some_and(|s| s.deployed) {
                deployed += 1;
            } else if status.is_some_and(|s| s.services.iter().any(|s| s.state == State::Failed)) {
                failed += 1;
            } else {
                progressing += 1;
            }
        }
        [("Deployed", deployed), ("Failed", failed), ("Progressing", progressing)]
    }

    /// The ServiceTemplate `name` in `namespace`, as JSON.
    pub fn template(&self, namespace: &str, name: &str) -> Option<Value> {
        let template = self.caches.templates.get(&ObjectRef::new(name).within(namespace))?;
        serde_json::to_value(&*template).ok()
    }

    /// The plugin serving `service_set`'s provider, or why there is none.
    pub fn serving(&self, service_set: &ServiceSet) -> Result<Arc<ServingPlugin>, String> {
        plugins::serving_for(self, &service_set.spec.provider.name)
    }

    /// Whether this host serves `service_set` (its SMP names this host and its selector
    /// matches); `None` when the SMP does not exist or its selector is invalid.
    pub fn serves(&self, service_set: &ServiceSet) -> Option<bool> {
        let smp = self.caches.providers.get(&ObjectRef::new(&service_set.spec.provider.name))?;
        smp::serves(&self.settings.identity, &smp, service_set.labels()).ok()
    }
}

/// Loads the built-in default plugin and every AdapterPlugin as soon as they are listed
/// (`plugins_listed`), while the other caches list (`listed`); then records the claims of every served ServiceSet, so that the first
/// reconciles arbitrate against all of them rather than against whichever happened to come
/// first; then lets reconciles run.
pub async fn prepare(ctx: Arc<Context>, listed: Vec<watch::Receiver<bool>>, plugins_listed: watch::Receiver<bool>) {
    let load = async {
        if let Err(message) = plugins::load_default(&ctx).await {
            tracing::error!("{message}");
        }
        wait_listed(plugins_listed).await;
        // At once, so that one slow registry or unlisted kind holds up no other plugin.
        futures::stream::iter(ctx.caches.adapter_plugins.state())
            .for_each_concurrent(usize::from(super::PLUGIN_LOADS), |plugin| {
                let ctx = ctx.clone();
                async move {
                    if let (Err((step, message)), _) = plugins::sync(&ctx, &plugin).await {
                        tracing::warn!(adapterplugin = %plugin.name_any(), ?step, "{message}");
                    }
                }
            })
            .await;
    };
    futures::future::join(load, futures::future::join_all(listed.into_iter().map(wait_listed))).await;
    let served: Vec<Arc<ServiceSet>> = ctx
        .caches
        .service_sets
        .state()
        .into_iter()
        .filter(|ss| ss.metadata.deletion_timestamp.is_none() && ctx.serves(ss) == Some(true))
        .collect();
    let count = served.len();
    // Translating is CPU-bound and the claims are the same in any order: one batch per core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch = count.div_ceil(cores.min(usize::from(ctx.settings.concurrency)).max(1)).max(1);
    let batches = served.chunks(batch).map(|batch| {
        let (ctx, batch) = (ctx.clone(), batch.to_vec());
        call_blocking(move || record_claims(&ctx, &batch))
    });
    futures::future::join_all(batches).await;
    tracing::info!(servicesets = count, "caches listed, plugins loaded and claims recorded; reconciling");
    ctx.ready.send_replace(true);
}

/// Records the claims of `service_sets`; one that cannot be translated now claims nothing
/// until it can.
fn record_claims(ctx: &Context, service_sets: &[Arc<ServiceSet>]) {
    for service_set in service_sets {
        let Ok(serving) = ctx.serving(service_set) else { continue };
        let Ok(json) = serde_json::to_value(&**service_set) else { continue };
        let namespace = service_set.namespace().unwrap_or_default();
        let template = |name: &str| ctx.template(&namespace, name);
        if let Ok(translated) = plan::translate(&serving, &json, template, &ctx.settings.system_namespace) {
            let claims: Vec<_> = translated.into_iter().map(|t| (t.service, t.claims)).collect();
            ctx.arbiter.record(service_set, &claims);
        }
    }
}
