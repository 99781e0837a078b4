//! The controller's parts, built from its settings: the management cluster's caches, the two
//! contexts the reconciles share (ServiceSets, AdapterPlugins), the tasks that run beside them,
//! and what triggers each controller. Built once, by [`super::run`], when this host leads.

use super::adapter_plugins::load::Loader;
use super::adapter_plugins::reconcile::PluginContext;
use super::adapter_plugins::registry::Registry;
use super::caches::config_maps::ConfigMapWatches;
use super::caches::management::{Events as WatchEvents, ManagementCaches};
use super::caches::service_set_cache::WatchedServiceSet;
use super::caches::service_set_store::ServiceSets;
use super::caches::sources::SourceEvents;
use super::plugin_kinds::child_kinds::{ChildKinds, Waker};
use super::plumbing::backoff::Failures;
use super::plumbing::event_publisher::Events;
use super::plumbing::liveness::InFlight;
use super::plumbing::slots::Slots;
use super::plumbing::sweeps::Sweeps;
use super::plumbing::watches::WatchFailures;
use super::providers;
use super::providers::look::Providers;
use super::providers::manage::Managed;
use super::remote::clusters::{Clusters, Reads};
use super::remote::homes::Homes;
use super::round::arbiter::Arbiter;
use super::round::context::{Caches, Context, TopologyCaches};
use super::round::target_health::TargetHealth;
use super::round::{finalizer, prepare, settle};
use super::settings::{Mode, Settings};
use crate::adapter_plugin::AdapterPlugin;
use crate::k0rdent::{ClusterDeployment, Credential, NamespacedName, Region, ServiceTemplate, StateManagementProvider};
use crate::metrics::Metrics;
use crate::plan::memo::TranslationMemo;
use crate::plugin::Limits;
use crate::rules::RuleCache;
use crate::runtime::Runtime;
use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::{Notify, watch};

/// A cache's changes, as a controller's trigger.
type Changes<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// What [`assemble`] built.
pub(super) struct Assembly {
    /// What every ServiceSet reconcile shares.
    pub ctx: Arc<Context>,
    /// What every AdapterPlugin reconcile shares.
    pub plugin_ctx: Arc<PluginContext>,
    /// What wakes ServiceSets.
    pub service_set_triggers: ServiceSetTriggers,
    /// What wakes AdapterPlugins.
    pub plugin_triggers: PluginTriggers,
}

/// The changes that wake ServiceSets: their own, and those of what they depend on.
pub(super) struct ServiceSetTriggers {
    /// Their own watch's events: changes wake them; a complete list starts a pass over all
    /// (see [`super::plumbing::sweeps`]).
    pub own: WatchEvents<WatchedServiceSet>,
    pub smps: Changes<StateManagementProvider>,
    pub templates: Changes<ServiceTemplate>,
    pub health_rules: Changes<ConfigMap>,
    pub cluster_deployments: Changes<ClusterDeployment>,
    pub credentials: Changes<Credential>,
    pub regions: Changes<Region>,
    pub sources: SourceEvents,
    /// ServiceSets named directly: a child's change (settled), a claim released.
    pub woken: UnboundedReceiver<NamespacedName>,
}

/// The changes that wake AdapterPlugins.
pub(super) struct PluginTriggers {
    /// The AdapterPlugins' cache.
    pub store: Store<AdapterPlugin>,
    pub own: Changes<AdapterPlugin>,
    /// AdapterPlugins named directly: their ConfigMap changed, an OCI tag to poll, an SMP naming
    /// them changed.
    pub woken: UnboundedReceiver<ObjectRef<AdapterPlugin>>,
}

/// Starts the caches and the tasks beside the controllers (readiness, forgetting deleted
/// plugins, `manage` mode's SMP status) and builds the contexts over them.
pub(super) fn assemble(
    client: Client,
    runtime: Runtime,
    limits: Limits,
    settings: Settings,
    metrics: Arc<Metrics>,
) -> Assembly {
    let (wake, woken) = unbounded();
    let (plugin_wake, plugins_woken) = unbounded();
    let (caches, kept) = start_caches(&client, &settings, wake.clone());
    let ManagementCaches {
        watch_failures,
        service_sets: (service_sets, service_set_events),
        smps: (smps, provider_events),
        templates: (templates, template_events),
        sources: (sources, source_events),
        health_rules: (health_rules, health_rule_events),
        cluster_deployments: (cluster_deployments, cluster_deployment_events),
        credentials: (credentials, credential_events),
        regions: (region_objects, region_events),
        adapter_plugins: (adapter_plugins, plugin_events),
        listed,
        owners_listed,
    } = caches;
    let provider_changed = Arc::new(Notify::new());
    let provider_events =
        provider_changes(provider_events, provider_changed.clone(), adapter_plugins.clone(), plugin_wake.clone());
    let unserved = watch_failures.unserved_changes();
    tokio::spawn(wake_plugins_on_unserved(unserved, adapter_plugins.clone(), plugin_wake.clone()));
    let (prepared_tx, prepared) = watch::channel(false);
    let child_wake = settle::settled(wake.clone(), settle::SETTLE);
    let registry = Arc::new(Registry::new(
        (settings.identity.clone(), settings.default_plugin),
        adapter_plugins.clone(),
        smps.clone(),
    ));
    let shared = Shared {
        children: Arc::new(ChildKinds::new(&client, child_wake.clone(), watch_failures.clone())),
        providers: Arc::new(Providers::new(client.clone(), settings.mode, registry.clone())),
        registry,
        events: Arc::new(Events::new(client.clone(), &settings.identity.name)),
        in_flight: Arc::default(),
        prepared,
        watch_failures,
        metrics,
    };
    let wakes = (wake, plugin_wake);
    let plugin_ctx = plugin_context(
        &client,
        &settings,
        (runtime, limits),
        &shared,
        (&service_sets, &adapter_plugins),
        wakes,
        kept.plugin_failures,
    );
    let managed = (settings.mode == Mode::Manage).then(|| Managed {
        smps: smps.clone(),
        identity: settings.identity.clone(),
        interval: settings.smp_interval,
        changed: provider_changed,
        metrics: shared.metrics.clone(),
    });
    let (target_health, homes) =
        other_clusters(&client, &settings, health_rules, (shared.children.clone(), child_wake));
    let caches = Caches {
        service_sets,
        smps,
        templates,
        children: shared.children.clone(),
        topology: TopologyCaches { cluster_deployments, credentials, regions: region_objects },
        sources,
        watch_failures: shared.watch_failures.clone(),
    };
    let ctx = service_set_context(&client, settings, shared, caches, (target_health, homes), kept.service_sets);
    let prepare = prepare::prepare(ctx.clone(), plugin_ctx.clone(), (listed, owners_listed), prepared_tx);
    spawn_beside(&client, (&ctx, &plugin_ctx), prepare, kept.deleted_plugins, managed);
    Assembly {
        ctx,
        plugin_ctx,
        service_set_triggers: ServiceSetTriggers {
            own: service_set_events,
            smps: provider_events,
            templates: template_events,
            health_rules: health_rule_events,
            cluster_deployments: cluster_deployment_events,
            credentials: credential_events,
            regions: region_events,
            sources: source_events,
            woken,
        },
        plugin_triggers: PluginTriggers { store: adapter_plugins, own: plugin_events, woken: plugins_woken },
    }
}

/// What both contexts share.
struct Shared {
    children: Arc<ChildKinds>,
    providers: Arc<Providers>,
    registry: Arc<Registry>,
    events: Arc<Events>,
    in_flight: Arc<InFlight>,
    prepared: watch::Receiver<bool>,
    watch_failures: Arc<WatchFailures>,
    metrics: Arc<Metrics>,
}

/// What the caches' event hooks keep, for the contexts and tasks built after them.
struct Kept {
    /// The ServiceSets' arbiter (a deleted ServiceSet gives up its claims) and retry counts.
    service_sets: (Arc<Arbiter>, Arc<Failures<NamespacedName>>),
    /// The AdapterPlugins' retry counts.
    plugin_failures: Arc<Failures<ObjectRef<AdapterPlugin>>>,
    /// The names of the AdapterPlugins deleted.
    deleted_plugins: UnboundedReceiver<String>,
}

/// Starts the management cluster's caches, with hooks that release a deleted ServiceSet's claims
/// and forget the retries of what is gone.
fn start_caches(
    client: &Client,
    settings: &Settings,
    wake: UnboundedSender<NamespacedName>,
) -> (ManagementCaches, Kept) {
    let arbiter = Arc::new(Arbiter::new(wake));
    let released = arbiter.clone();
    let failures = Arc::new(Failures::default());
    let forgotten = failures.clone();
    let (gone, deleted_plugins) = unbounded();
    let plugin_failures = Arc::new(Failures::default());
    let forgotten_plugins = plugin_failures.clone();
    let caches = ManagementCaches::start(
        client,
        settings.shard_selector.as_deref(),
        move |store, event| match event {
            // A ServiceSet gone by any path gives up its claims.
            watcher::Event::Delete(service_set) => {
                let key = service_set.cached().key();
                released.release(&key);
                forgotten.succeeded(&key);
            }
            watcher::Event::InitDone => forgotten.forget_uncached(|key| store.get(key).is_some()),
            _ => {}
        },
        move |store, event| {
            if let watcher::Event::Delete(plugin) = event {
                let _ = gone.unbounded_send(plugin.name_any());
            }
            forgotten_plugins.forget_gone(store, event);
        },
    );
    (caches, Kept { service_sets: (arbiter, failures), plugin_failures, deleted_plugins })
}

/// What every AdapterPlugin reconcile shares.
fn plugin_context(
    client: &Client,
    settings: &Settings,
    (runtime, limits): (Runtime, Limits),
    shared: &Shared,
    (service_sets, adapter_plugins): (&ServiceSets, &Store<AdapterPlugin>),
    (wake_service_sets, wake_plugins): (UnboundedSender<NamespacedName>, UnboundedSender<ObjectRef<AdapterPlugin>>),
    failures: Arc<Failures<ObjectRef<AdapterPlugin>>>,
) -> Arc<PluginContext> {
    let watched = (shared.children.clone(), shared.watch_failures.clone());
    Arc::new(PluginContext {
        client: client.clone(),
        namespace: settings.identity.namespace.clone(),
        registry: shared.registry.clone(),
        loader: Loader::new(runtime, limits, client.clone(), watched, shared.metrics.clone()),
        service_sets: service_sets.clone(),
        wake_service_sets,
        wake_plugins: wake_plugins.clone(),
        config_maps: ConfigMapWatches::new(client.clone(), adapter_plugins.clone(), wake_plugins),
        events: shared.events.clone(),
        metrics: shared.metrics.clone(),
        failures,
        in_flight: Arc::clone(&shared.in_flight),
        oci_poll: settings.oci_poll,
        prepared: shared.prepared.clone(),
    })
}

/// What every ServiceSet reconcile shares.
fn service_set_context(
    client: &Client,
    settings: Settings,
    shared: Shared,
    caches: Caches,
    (target_health, homes): (TargetHealth, Homes),
    (arbiter, failures): (Arc<Arbiter>, Arc<Failures<NamespacedName>>),
) -> Arc<Context> {
    Arc::new(Context {
        client: client.clone(),
        registry: shared.registry,
        providers: shared.providers,
        metrics: shared.metrics,
        events: shared.events,
        finalizer: finalizer::of(&settings.identity),
        sweeps: Arc::new(Sweeps::new(2 * usize::from(settings.concurrency))),
        settings,
        homes,
        caches,
        target_health,
        arbiter,
        translations: TranslationMemo::default(),
        failures,
        in_flight: shared.in_flight,
        prepared: shared.prepared,
    })
}

/// The tasks beside the controllers: the first listing (`prepare`), forgetting the plugins
/// deleted, and `manage` mode's SMP status.
fn spawn_beside(
    client: &Client,
    (ctx, plugin_ctx): (&Arc<Context>, &Arc<PluginContext>),
    prepare: impl std::future::Future<Output = ()> + Send + 'static,
    deleted_plugins: UnboundedReceiver<String>,
    managed: Option<Managed>,
) {
    tokio::spawn(prepare);
    tokio::spawn({
        let plugin_ctx = plugin_ctx.clone();
        deleted_plugins.for_each(move |name: String| {
            plugin_ctx.forget(&name);
            futures::future::ready(())
        })
    });
    if let Some(managed) = managed {
        tokio::spawn(providers::manage::run(client.clone(), ctx.providers.clone(), managed, ctx.prepared.clone()));
    }
}

/// The SMPs' changes, which also tell `manage` mode (`changed`) and wake the AdapterPlugins that
/// name the SMP: whether one is this host's to load follows its SMPs.
fn provider_changes(
    changes: Changes<StateManagementProvider>,
    changed: Arc<Notify>,
    adapter_plugins: Store<AdapterPlugin>,
    wake_plugins: UnboundedSender<ObjectRef<AdapterPlugin>>,
) -> Changes<StateManagementProvider> {
    changes
        .inspect(move |smp| {
            changed.notify_one();
            if let Ok(smp) = smp {
                for plugin in adapter_plugins.state().iter().filter(|p| p.spec.providers.contains(&smp.name_any())) {
                    let _ = wake_plugins.unbounded_send(ObjectRef::from_obj(&**plugin));
                }
            }
        })
        .boxed()
}

/// Wakes every AdapterPlugin when the kinds the API server does not serve change: each one's
/// status names the CRDs it needs that are not installed, until they are.
async fn wake_plugins_on_unserved(
    mut unserved: watch::Receiver<BTreeSet<String>>,
    adapter_plugins: Store<AdapterPlugin>,
    wake_plugins: UnboundedSender<ObjectRef<AdapterPlugin>>,
) {
    while unserved.changed().await.is_ok() {
        for plugin in adapter_plugins.state() {
            let _ = wake_plugins.unbounded_send(ObjectRef::from_obj(&*plugin));
        }
    }
}

/// The other clusters: target clusters' health (read by requests) and regions (watched, their
/// children's changes waking ServiceSets through `child_wake`).
fn other_clusters(
    client: &Client,
    settings: &Settings,
    health_rules: Store<ConfigMap>,
    (children, child_wake): (Arc<ChildKinds>, Waker),
) -> (TargetHealth, Homes) {
    let clusters =
        |reads| Clusters::new(client.clone(), settings.target_clusters, reads, settings.cluster_addresses.clone());
    // A quarter of the reconcile workers per region, and per namespace for looks at targets: one
    // that hangs, or a tenant with many slow targets, holds up only its own.
    let share = usize::from(settings.concurrency) / 4;
    let health_check = TargetHealth {
        clusters: Arc::new(clusters(Reads::Requests).shared_by_namespaces()),
        rules: health_rules,
        cel: Arc::new(RuleCache::new()),
        system_namespace: settings.system_namespace.clone(),
        looks: Slots::new(share),
    };
    let homes = Homes::new(children, clusters(Reads::Watches), child_wake, share);
    (health_check, homes)
}
