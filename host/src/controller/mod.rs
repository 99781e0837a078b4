//! The Kubernetes I/O layer of `ksm-adapter run`: it watches ServiceSets and what they depend on,
//! gathers each ServiceSet's inputs from its caches and carries out what the pure core
//! ([`plan::step`](crate::plan::step) and [`plan::decide`](crate::plan::decide::decide)) decides.
//! This file runs the two controllers; none of the pieces reaches back into it.
//!
//! - [`settings`]: how the controller runs;
//! - `assembly`: the caches, contexts and triggers the controllers run on, built from the
//!   settings;
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
mod assembly;
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
use crate::plugin::Limits;
use crate::runtime::Runtime;
use adapter_plugins::reconcile::PluginContext;
use anyhow::Context as _;
use assembly::{Assembly, PluginTriggers, ServiceSetTriggers};
use caches::service_set_cache::logged;
use futures::future::{BoxFuture, Shared};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, controller, watcher};
use kube::{Client, ResourceExt};
use plumbing::queue::Action;
use plumbing::{leader, liveness, runner};
use round::context::Context;
use round::triggers::Through;
use round::{service_sets, triggers};
use settings::PLUGIN_LOADS;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio::signal::unix::{SignalKind, signal};

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
    let Assembly { ctx, plugin_ctx, service_set_triggers, plugin_triggers } =
        assembly::assemble(client, runtime, limits, settings, metrics);
    let _ = serving.set(ctx.clone());
    let service_set_controller = service_set_controller(ctx, service_set_triggers, stop.clone());
    let plugin_controller = plugin_controller(plugin_ctx, plugin_triggers, stop);
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

/// The ServiceSet controller: a round per ServiceSet woken by its own change or one of what it
/// depends on ([`triggers`]), `settings.concurrency` at a time, until `stop` (see
/// [`runner`](plumbing::runner)).
fn service_set_controller(
    ctx: Arc<Context>,
    triggers: ServiceSetTriggers,
    stop: Shared<BoxFuture<'static, ()>>,
) -> impl Future<Output = ()> {
    let service_sets = ctx.caches.service_sets.clone();
    let system_namespace = ctx.settings.system_namespace.clone();
    let own = triggers.own.filter_map({
        let (sweeps, mut own) = (ctx.sweeps.clone(), triggers::OwnChanges::default());
        move |event| futures::future::ready(own.wakes(event, &sweeps))
    });
    let routed = |ctx: &Arc<Context>| {
        let ctx = ctx.clone();
        move |through| triggers::routed_through(&ctx.caches.service_sets, &ctx.caches.topology, &through)
    };
    let (by_cd, by_credential, by_region) = (routed(&ctx), routed(&ctx), routed(&ctx));
    let wakes = futures::stream::select_all([
        own.boxed(),
        users(triggers.smps, {
            let service_sets = service_sets.clone();
            move |smp| triggers::users_of_provider(&service_sets, smp)
        }),
        users(triggers.templates, {
            let service_sets = service_sets.clone();
            move |template| triggers::users_of_template(&service_sets, template)
        }),
        users(triggers.health_rules, {
            let service_sets = service_sets.clone();
            move |rules| triggers::users_of_health_rules(&service_sets, rules, &system_namespace)
        }),
        users(routing(triggers.cluster_deployments), move |cd| {
            by_cd(Through::ClusterDeployment(NamespacedName::of(cd)))
        }),
        users(routing(triggers.credentials), move |c| by_credential(Through::Credential(NamespacedName::of(c)))),
        users(routing(triggers.regions), move |region| by_region(Through::Region(region.name_any()))),
        // Sources are of several kinds: their users are woken directly, not as one kind's.
        users(routing(triggers.sources), {
            let ctx = ctx.clone();
            move |source| triggers::users_of_source(&ctx.caches, source)
        }),
        triggers.woken.boxed(),
        ctx.sweeps.clone().passes(service_sets, ctx.settings.resync).boxed(),
    ]);
    let concurrency = ctx.settings.concurrency;
    runner::run(wakes, concurrency, stop, move |key| {
        let ctx = ctx.clone();
        async move {
            let then = match ctx.caches.service_sets.get(&key) {
                Some(cached) => match service_sets::reconcile(cached.clone(), ctx.clone()).await {
                    Ok(then) => then,
                    Err(error) => service_sets::error_policy(&cached, &error, &ctx),
                },
                None => {
                    tracing::debug!(serviceset = logged(&key), "{NOT_CACHED}");
                    Action::await_change()
                }
            };
            ctx.sweeps.finished(&key.namespace, &key.name);
            then
        }
    })
}

/// The ServiceSets each of `changes` wakes: `users_of` the object changed. A failed watch
/// wakes none: its cache reports it ([`WatchFailures`](plumbing::watches::WatchFailures): the
/// log and `/readyz`) and retries.
fn users<K: Send + 'static>(
    changes: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    users_of: impl Fn(&K) -> Vec<NamespacedName> + Send + 'static,
) -> BoxStream<'static, NamespacedName> {
    changes
        .filter_map(|changed| futures::future::ready(changed.ok()))
        .flat_map(move |changed| futures::stream::iter(users_of(&changed)))
        .boxed()
}

/// The AdapterPlugin controller: loads each plugin woken by its change or a poll, a few at a
/// time, until `stop`.
fn plugin_controller(
    plugin_ctx: Arc<PluginContext>,
    triggers: PluginTriggers,
    stop: Shared<BoxFuture<'static, ()>>,
) -> impl Future<Output = ()> {
    Controller::for_stream(triggers.own, triggers.store)
        .with_config(controller::Config::default().concurrency(PLUGIN_LOADS))
        .reconcile_on(triggers.woken)
        .shutdown_on_signal()
        .graceful_shutdown_on(stop)
        .run(adapter_plugins::reconcile::reconcile, adapter_plugins::reconcile::error_policy, plugin_ctx)
        .for_each(log_error)
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
            let clients = [("region", ctx.homes.held()), ("target", ctx.target_health.clusters.held())];
            ctx.metrics.clusters(&clients, ctx.homes.watches());
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

/// The changes of a routing object (ClusterDeployment, Credential, Region) that may move
/// children: spec changes only (a ClusterDeployment's status changes often).
fn routing<K: kube::Resource + Send + 'static>(
    events: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    events.predicate_filter(kube::runtime::predicates::generation, PredicateConfig::default())
}

/// What a round woken for an object the cache does not hold logs.
const NOT_CACHED: &str = "woken for an object the cache does not hold (gone meanwhile, or not this host's)";

/// Logs what the AdapterPlugin controller's stream reports besides the failed reconciles (which
/// its `error_policy` logs), e.g. a wake-up for an object gone meanwhile, in the field
/// `adapterplugin`.
async fn log_error<T, E: std::error::Error + 'static, Q: std::error::Error + 'static>(
    result: Result<T, controller::Error<E, Q>>,
) {
    match result {
        // Its error_policy logged it (an AdapterPlugin whose spec did not load says why in its
        // status).
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(object)) => tracing::debug!(adapterplugin = %object.name, "{NOT_CACHED}"),
        Err(e) => tracing::debug!("{e}"),
    }
}
