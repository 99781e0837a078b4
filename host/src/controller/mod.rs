//! The Kubernetes I/O layer of `ksm-adapter run`: it watches ServiceSets and what they depend on,
//! gathers each ServiceSet's inputs from its caches and carries out what the pure core
//! ([`plan::decide`](crate::plan::decide::decide)) decides. This file only wires the pieces;
//! none of them reaches back into it.
//!
//! - [`settings`]: how the controller runs;
//! - [`round`]: one ServiceSet's round (gather, decide, carry out), what wakes it and what it
//!   shares;
//! - [`caches`]: the management cluster's caches the controllers read;
//! - [`adapter_plugins`]: AdapterPlugins: fetch, load, the registry of what serves, their status;
//! - [`providers`]: the host's own look at an SMP (diagnosis, and `manage` mode's SMP status);
//! - [`plugin_kinds`]: the kinds the plugins create and read: their watches, caches and writes;
//! - [`remote`]: the other clusters: regions, target clusters' clients, every call bounded;
//! - [`plumbing`]: what both controllers run on: leader election, liveness, watch health,
//!   backoff, Events, the host's own permissions.

pub mod adapter_plugins;
pub mod caches;
#[cfg(test)]
mod mock_api;
pub mod plugin_kinds;
pub mod plumbing;
pub mod providers;
pub mod remote;
pub mod round;
mod settings;

pub use settings::{DefaultPlugin, Mode, Settings, plugin_instances};

use crate::k0rdent::NamespacedName;
use crate::metrics::Metrics;
use crate::plan::memo::TranslationMemo;
use crate::plugin::Limits;
use crate::rules::RuleCache;
use crate::runtime::Runtime;
use adapter_plugins::load::Loader;
use adapter_plugins::reconcile::PluginContext;
use adapter_plugins::registry::Registry;
use anyhow::Context as _;
use caches::config_maps::ConfigMapWatches;
use caches::management::ManagementCaches;
use futures::channel::mpsc::unbounded;
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, controller, watcher};
use kube::{Client, ResourceExt};
use plugin_kinds::children::ChildKinds;
use plumbing::backoff::Failures;
use plumbing::events::Events;
use plumbing::{leader, liveness};
use providers::look::Providers;
use providers::manage::Managed;
use remote::clusters::{Clusters, Reads};
use remote::regions::Regions;
use round::arbiter::Arbiter;
use round::context::{Caches, Context, TopologyCaches};
use round::health::HealthCheck;
use round::triggers::Through;
use round::{finalizer, prepare, service_sets, settle, triggers};
use settings::PLUGIN_LOADS;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, watch};

/// Runs the controller until SIGTERM or Ctrl-C, then finishes the reconciles in flight (a
/// standby waiting for the Lease has none: it returns at once).
/// Plugins come from AdapterPlugins, compiled by `runtime`; `limits` apply to those that set
/// none.
pub async fn run(
    client: Client,
    runtime: Runtime,
    limits: Limits,
    settings: Settings,
    metrics: Arc<Metrics>,
) -> anyhow::Result<()> {
    let stop = stop_signal()?;
    // Probes answer from the start: a standby waiting for the Lease is alive and ready to take
    // over; the leader is ready once its caches are listed and its plugins loaded.
    let serving: Arc<OnceLock<Arc<Context>>> = Arc::default();
    if let Some(addr) = settings.metrics_addr {
        serve_metrics(addr, metrics.clone(), serving.clone(), settings.election.is_some()).await?;
    }
    let leadership = match &settings.election {
        Some(election) => tokio::select! {
            acquired = leader::acquire(client.clone(), election.clone()) => Some(acquired?),
            () = stop.clone() => {
                tracing::info!("stopped while waiting for leadership");
                return Ok(());
            }
        },
        None => None,
    };
    let (wake, woken) = unbounded();
    let arbiter = Arc::new(Arbiter::new(wake.clone()));
    let released = arbiter.clone();
    let failures = Arc::new(Failures::default());
    let forgotten = failures.clone();
    let (gone, deleted_plugins) = unbounded();
    let plugin_failures = Arc::new(Failures::default());
    let forgotten_plugins = plugin_failures.clone();
    let ManagementCaches {
        health,
        service_sets: (service_sets, service_set_events),
        providers: (smps, provider_events),
        templates: (templates, template_events),
        sources: (sources, source_events),
        health_rules: (health_rules, health_rule_events),
        cluster_deployments: (cluster_deployments, cluster_deployment_events),
        credentials: (credentials, credential_events),
        regions: (region_objects, region_events),
        adapter_plugins: (adapter_plugins, plugin_events),
        listed,
        owners_listed,
    } = ManagementCaches::start(
        &client,
        settings.shard_selector.as_deref(),
        move |store, event| {
            // A ServiceSet gone by any path gives up its claims.
            if let watcher::Event::Delete(service_set) = event {
                released.release(&NamespacedName::of(service_set));
            }
            forgotten.forget_gone(store, event);
        },
        move |store, event| {
            if let watcher::Event::Delete(plugin) = event {
                let _ = gone.unbounded_send(plugin.name_any());
            }
            forgotten_plugins.forget_gone(store, event);
        },
    );
    let (plugin_wake, plugins_woken) = unbounded();
    let provider_changed = Arc::new(Notify::new());
    let (notify, named, wake_named) = (provider_changed.clone(), adapter_plugins.clone(), plugin_wake.clone());
    let provider_events = provider_events.inspect(move |smp| {
        notify.notify_one();
        // Whether an AdapterPlugin is this host's to load follows its SMPs.
        if let Ok(smp) = smp {
            for plugin in named.state().iter().filter(|p| p.spec.providers.contains(&smp.name_any())) {
                let _ = wake_named.unbounded_send(ObjectRef::from_obj(&**plugin));
            }
        }
    });

    let (prepared_tx, prepared) = watch::channel(false);
    let child_wake = settle::settled(wake.clone(), settle::SETTLE);
    let children = Arc::new(ChildKinds::new(&client, child_wake.clone(), health.clone()));
    let registry = Arc::new(Registry::new(
        (settings.identity.clone(), settings.default_plugin),
        adapter_plugins.clone(),
        smps.clone(),
    ));
    let providers = Arc::new(Providers::new(client.clone(), settings.mode, registry.clone()));
    let events = Arc::new(Events::new(client.clone(), &settings.identity.name));
    let in_flight = Arc::default();
    let plugin_ctx = Arc::new(PluginContext {
        client: client.clone(),
        namespace: settings.identity.namespace.clone(),
        registry: registry.clone(),
        loader: Loader::new(runtime, limits, client.clone(), (children.clone(), health.clone()), metrics.clone()),
        service_sets: service_sets.clone(),
        wake_service_sets: wake,
        wake_plugins: plugin_wake.clone(),
        config_maps: ConfigMapWatches::new(client.clone(), adapter_plugins.clone(), plugin_wake),
        events: events.clone(),
        metrics: metrics.clone(),
        failures: plugin_failures,
        in_flight: Arc::clone(&in_flight),
        oci_poll: settings.oci_poll,
        prepared: prepared.clone(),
    });
    let managed = (settings.mode == Mode::Manage).then(|| Managed {
        smps: smps.clone(),
        identity: settings.identity.clone(),
        interval: settings.smp_interval,
        changed: provider_changed,
        metrics: metrics.clone(),
    });
    let concurrency = settings.concurrency;
    let health_check = HealthCheck {
        clusters: Arc::new(Clusters::new(
            client.clone(),
            settings.target_clusters,
            Reads::Requests,
            settings.cluster_addresses.clone(),
        )),
        rules: health_rules,
        cel: Arc::new(RuleCache::new()),
        system_namespace: settings.system_namespace.clone(),
    };
    let regional =
        Clusters::new(client.clone(), settings.target_clusters, Reads::Watches, settings.cluster_addresses.clone());
    // A quarter of the reconcile workers per region: one that hangs holds up only its own.
    let regions = Regions::new(children.clone(), regional, child_wake, usize::from(concurrency) / 4);
    let system_namespace = settings.system_namespace.clone();
    let ctx = Arc::new(Context {
        client: client.clone(),
        registry,
        providers: providers.clone(),
        metrics,
        events,
        finalizer: finalizer::of(&settings.identity),
        settings,
        regions,
        caches: Caches {
            service_sets: service_sets.clone(),
            providers: smps,
            templates,
            children,
            topology: TopologyCaches { cluster_deployments, credentials, regions: region_objects },
            sources,
            health,
        },
        health: health_check,
        arbiter,
        translations: TranslationMemo::default(),
        failures,
        in_flight,
        prepared: prepared.clone(),
    });
    let _ = serving.set(ctx.clone());
    tokio::spawn(prepare::prepare(ctx.clone(), plugin_ctx.clone(), (listed, owners_listed), prepared_tx));
    tokio::spawn({
        let plugin_ctx = plugin_ctx.clone();
        deleted_plugins.for_each(move |name: String| {
            plugin_ctx.forget(&name);
            futures::future::ready(())
        })
    });
    if let Some(managed) = managed {
        tokio::spawn(providers::manage::run(client, providers, managed, prepared));
    }

    let service_set_events =
        service_set_events.predicate_filter(triggers::reconcile_worthy, PredicateConfig::default());
    let service_set_controller = Controller::for_stream(service_set_events, service_sets.clone())
        .with_config(controller::Config::default().concurrency(concurrency))
        .watches_stream(errors_reported(provider_events), {
            let service_sets = service_sets.clone();
            move |smp| triggers::users_of_provider(&service_sets, &smp)
        })
        .watches_stream(errors_reported(template_events), {
            let service_sets = service_sets.clone();
            move |template| triggers::users_of_template(&service_sets, &template)
        })
        .watches_stream(errors_reported(health_rule_events), {
            let service_sets = service_sets.clone();
            move |rules| triggers::users_of_health_rules(&service_sets, &rules, &system_namespace)
        })
        .watches_stream(routing(cluster_deployment_events), {
            let (service_sets, ctx) = (service_sets.clone(), ctx.clone());
            move |cd| {
                let cd = NamespacedName::of(&cd);
                triggers::routed_through(&service_sets, &ctx.caches.topology, &Through::ClusterDeployment(cd))
            }
        })
        .watches_stream(routing(credential_events), {
            let (service_sets, ctx) = (service_sets.clone(), ctx.clone());
            move |credential| {
                let credential = NamespacedName::of(&credential);
                triggers::routed_through(&service_sets, &ctx.caches.topology, &Through::Credential(credential))
            }
        })
        .watches_stream(routing(region_events), {
            let ctx = ctx.clone();
            move |region| {
                triggers::routed_through(&service_sets, &ctx.caches.topology, &Through::Region(region.name_any()))
            }
        })
        .reconcile_on(woken)
        .reconcile_on(routing(source_events).filter_map(|source| futures::future::ready(source.ok())).flat_map({
            // Sources are of several kinds: their users are woken directly, not as one kind's.
            let ctx = ctx.clone();
            move |source| futures::stream::iter(triggers::users_of_source(&ctx.caches, &source))
        }))
        .shutdown_on_signal()
        .graceful_shutdown_on(stop.clone())
        .run(service_sets::reconcile, service_sets::error_policy, ctx)
        .for_each(log_error);
    let plugin_controller = Controller::for_stream(plugin_events, adapter_plugins)
        .with_config(controller::Config::default().concurrency(PLUGIN_LOADS))
        .reconcile_on(plugins_woken)
        .shutdown_on_signal()
        .graceful_shutdown_on(stop)
        .run(adapter_plugins::reconcile::reconcile, adapter_plugins::reconcile::error_policy, plugin_ctx)
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

/// Resolves at the first SIGTERM or Ctrl-C (its clones with it). Listening from the start of
/// `run` lets a standby that waits for the Lease stop at once, exiting 0 as the leader does,
/// and keeps a signal that comes before kube's own handlers listen (`shutdown_on_signal`, which
/// also turns a second signal into a forced shutdown) from being lost.
fn stop_signal() -> anyhow::Result<Shared<BoxFuture<'static, ()>>> {
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let stop = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    Ok(stop.boxed().shared())
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
            let clients = [("region", ctx.regions.held()), ("target", ctx.health.clusters.held())];
            ctx.metrics.clusters(&clients, ctx.regions.watches());
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
        None => Err(crate::metrics::NotReady::Starting),
    });
    let probes = crate::metrics::Probes { refresh, healthy, ready };
    tokio::spawn(async move {
        if let Err(e) = crate::metrics::serve(listener, metrics, probes).await {
            tracing::error!("the metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}

/// A cache's changes as a trigger of the ServiceSet controller, without its errors: the cache
/// reports them ([`WatchHealth`](plumbing::watches::WatchHealth): the log and `/readyz`), and
/// handed to the controller they would back off every trigger at once, the ServiceSets' own
/// watch included (kube-runtime applies one backoff to all its triggers). A kind whose CRD is
/// missing (no Region before kcm 1.12) would then hold every ServiceSet's cache back.
fn errors_reported<K: Send + 'static>(
    events: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    events.filter(|event| futures::future::ready(event.is_ok()))
}

/// The changes of a routing object (ClusterDeployment, Credential, Region) that may move
/// children: spec changes only (a ClusterDeployment's status changes often).
fn routing<K: kube::Resource + Send + 'static>(
    events: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    errors_reported(events).predicate_filter(kube::runtime::predicates::generation, PredicateConfig::default())
}

/// Logs what a controller's stream reports besides the failed reconciles (which its
/// `error_policy` logs), e.g. a wake-up for an object gone meanwhile; a line about an object names
/// it in the field `serviceset` or `adapterplugin`.
async fn log_error<T, E: std::error::Error + 'static, Q: std::error::Error + 'static>(
    result: Result<T, controller::Error<E, Q>>,
) {
    const NOT_CACHED: &str = "woken for an object the cache does not hold (gone meanwhile, or not this host's)";
    match result {
        // Its error_policy logged it, with the ServiceSet's or AdapterPlugin's field (an
        // AdapterPlugin whose spec did not load says why in its status).
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(object)) => match object.dyntype.kind.as_str() {
            "ServiceSet" => tracing::debug!(serviceset = %object, "{NOT_CACHED}"),
            _ => tracing::debug!(adapterplugin = %object.name, "{NOT_CACHED}"),
        },
        Err(e) => tracing::debug!("{e}"),
    }
}
