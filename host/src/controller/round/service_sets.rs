//! One ServiceSet, top to bottom: gather its inputs from the caches, let the pure core decide
//! (whether it is this host's, the plan, the status), carry the decision out. Plus the retry
//! policy when a round fails.

use super::super::caches::service_set_cache::CachedServiceSet;
use super::super::plugin_kinds::children::ChildKinds;
use super::super::plumbing::status_writer::{self, OnConflict, Written};
use super::super::remote::regions::{Home, RegionError};
use super::context::Context;
use super::finalizer;
use crate::conditions::reasons;
use crate::k0rdent::NamespacedName;
use crate::k0rdent::{ServiceSet, ServiceSetStatus, StateManagementProvider};
use crate::metrics::MetricLabel;
use crate::plan::claims::ServiceClaims;
use crate::plan::decide::{self, ChildRef, Inputs, Plan, deletion, foreign_objects};
use crate::plan::events;
use crate::plan::gate::{Finalizers, Gate, gate};
use crate::plan::placements;
use crate::plan::route::{RegionAccess, Route};
use crate::plugin::{CallError, call_blocking};
use crate::serving::ServingPlugin;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The wait before retrying a write that lost a race with another writer.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);
/// The wait before retrying a ServiceSet whose region runs as many reconciles as it may.
const BUSY_RETRY: Duration = Duration::from_secs(1);
/// How often a ServiceSet being deleted checks whether its children are gone (their deletion
/// also wakes it through the watch).
const DELETION_POLL: Duration = Duration::from_secs(5);

/// Why a reconcile round failed; the ServiceSet is retried (see [`error_policy`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API request failed.
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
    /// The ServiceSet changed since it was read; the next round reads the latest version.
    #[error("ServiceSet changed while it was being reconciled: {0}")]
    Stale(kube::Error),
    /// The plugin call failed (trap, timeout, limit).
    #[error(transparent)]
    Plugin(#[from] CallError),
    /// The API server refused children the plugin produced, or objects of their names are
    /// someone else's.
    #[error("objects not applied: {0}")]
    Refused(String),
    /// The cluster the children live on cannot be told or reached (a region).
    #[error("{0}")]
    Unreachable(String),
    /// The cached ServiceSet could not be read back (a defect: it was packed by this process).
    #[error("the cached ServiceSet cannot be read back: {0}")]
    Uncached(#[source] std::io::Error),
}

impl MetricLabel for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Self::Api(_) => "api",
            Self::Stale(_) => "conflict",
            Self::Plugin(_) => "plugin",
            Self::Refused(_) => "refused",
            Self::Unreachable(_) => "unreachable",
            Self::Uncached(_) => "uncached",
        }
    }
}

/// Reconciles one ServiceSet.
pub async fn reconcile(cached: Arc<CachedServiceSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    super::super::plumbing::watches::wait_listed(ctx.prepared.clone()).await;
    let started = std::time::Instant::now();
    let key = ObjectRef::from_obj(&*cached);
    let _running =
        ctx.in_flight.enter(format!("ServiceSet {}/{}", cached.namespace().unwrap_or_default(), cached.name_any()));
    let span = tracing::info_span!("reconcile", serviceset = %key);
    let round = async {
        let service_set = Arc::new(cached.unpack().map_err(Error::Uncached)?);
        round(&service_set, &ctx).await
    };
    let result = tracing::Instrument::instrument(round, span).await;
    ctx.metrics.reconciled("ServiceSet", started, result.as_ref().map(|_| ()).map_err(Error::metric_label));
    if result.is_ok() {
        ctx.failures.succeeded(&key);
    }
    result
}

/// How long to wait before retrying a ServiceSet whose round failed: a lost race is retried
/// at once on the latest version; anything else backs off exponentially per ServiceSet.
pub fn error_policy(service_set: Arc<CachedServiceSet>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(&*service_set);
    if let Error::Stale(e) = error {
        tracing::debug!(serviceset = %key, "{e}; retrying");
        return Action::requeue(CONFLICT_RETRY);
    }
    let (failures, delay) = ctx.failures.failed(&key);
    let plugin = match error {
        Error::Plugin(e) => Some(e.plugin.as_str()),
        _ => None,
    };
    tracing::warn!(serviceset = %key, plugin, retry_in = ?delay, failures, "{error}");
    Action::requeue(delay)
}

/// Gathers, decides, carries out: first whether the ServiceSet is this host's, then its plan.
async fn round(service_set: &Arc<ServiceSet>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let api = Api::<ServiceSet>::namespaced(ctx.client.clone(), &service_set.namespace().unwrap_or_default());
    let smp = ctx.caches.providers.get(&ObjectRef::new(&service_set.spec.provider.name));
    let finalizers = Finalizers {
        mine: finalizer::has(service_set.as_ref(), &ctx.finalizer),
        legacy: finalizer::has(service_set.as_ref(), finalizer::LEGACY),
    };
    match gate(service_set, smp.as_deref(), &ctx.settings.identity, finalizers) {
        Gate::Leave => Ok(Action::await_change()),
        Gate::Release => {
            ctx.arbiter.release(&NamespacedName::of(service_set.as_ref()));
            Ok(Action::await_change())
        }
        Gate::Undecided(why) => {
            tracing::warn!("cannot tell whether this host serves it: {why}");
            Ok(Action::await_change())
        }
        Gate::CleanUp => clean_up(service_set, ctx, &api).await,
        Gate::AddFinalizer => {
            // A region its children will go to is recorded in the same write, before any apply.
            let regions = match ctx.route(service_set) {
                Ok(Route::Region(access)) => placements::recording(service_set, &access),
                _ => None,
            };
            finalizer::add(&api, service_set, &ctx.finalizer, regions).await.map_err(stale_or_api)?;
            Ok(Action::await_change()) // the finalizer's write comes back through the watch
        }
        Gate::Serve => plan_and_carry_out(service_set, smp, ctx, &api).await,
    }
}

/// A ServiceSet this host serves: the plugin serving its provider plans it, and the plan is
/// carried out. Without a plugin, or when the plugin fails outright, its children stay as they
/// are and the status says why (a plugin change wakes it again).
///
/// When every apply went through and one changed an object, no status is written: the changed
/// children come back through their watch and wake this ServiceSet after the settle, and that
/// round writes the status from what the API server holds. A new ServiceSet thus costs one
/// status write, not two (`Provisioning` then `Deployed`) when the CD tool is quick, and the
/// round that applies does not ask the plugin for a status it would not write (the plan defers
/// it; the rare round that needs it after all plans again).
async fn plan_and_carry_out(
    service_set: &Arc<ServiceSet>,
    smp: Option<Arc<StateManagementProvider>>,
    ctx: &Arc<Context>,
    api: &Api<ServiceSet>,
) -> Result<Action, Error> {
    let serving = match ctx.serving(service_set) {
        Ok(serving) => serving,
        Err(problem) => {
            let status = decide::not_translated(service_set, reasons::PLUGIN_NOT_READY, &problem.to_string(), &now());
            write_status(ctx, api, service_set, status).await?;
            return Ok(Action::await_change());
        }
    };
    let route = match ctx.route(service_set) {
        Ok(route) => route,
        Err(why) => return unreachable(ctx, api, service_set, why).await,
    };
    let _slot = match ctx.regions.admit(&route) {
        Ok(slot) => slot,
        Err(busy) => {
            tracing::debug!("{busy}; retrying shortly");
            return Ok(Action::requeue(BUSY_RETRY));
        }
    };
    if let Route::Region(access) = &route
        && let Some(record) = placements::recording(service_set, access)
    {
        // Recorded before the first apply there: deleting and moving the children read it.
        finalizer::record_regions(api, service_set, record).await.map_err(stale_or_api)?;
        return Ok(Action::await_change()); // the record comes back through the watch
    }
    let home = match listed_home(&route, ctx, &serving).await {
        Ok(home) => home,
        Err(why) => return unreachable(ctx, api, service_set, why).await,
    };
    let Planned { plan, foreign } = match plan_owned(service_set, smp.clone(), &serving, &home, ctx).await? {
        Ok(planned) => planned,
        Err(call) => return plugin_failed(ctx, api, service_set, call).await,
    };
    if plan.refused > 0 {
        ctx.metrics.plugin_errors(&serving.name, "policy", plan.refused as u64);
    }
    let mut refused: Vec<String> = foreign.values().cloned().collect();
    let coming_back = carry_out(&plan, &home, &mut refused).await?;
    let left = clear_elsewhere(service_set, &home, ctx, &mut refused).await?;
    if let Some(record) = placements::forgetting(service_set, &left) {
        finalizer::record_regions(api, service_set, record).await.map_err(stale_or_api)?;
        return Ok(Action::await_change()); // the record comes back through the watch
    }
    if coming_back && refused.is_empty() {
        return Ok(Action::requeue(ctx.settings.resync));
    }
    let status = match plan.status {
        Some(status) => status,
        None => match decide_blocking(service_set, smp, &serving, &home, ctx, foreign, false).await {
            Ok(plan) => plan.status.expect("planned without deferring the status"),
            Err(call) => return plugin_failed(ctx, api, service_set, call).await,
        },
    };
    finish(status, &refused, service_set, &home, ctx, api).await
}

/// The plugin failed outright (trap, timeout, limit): the status says so and the round fails.
async fn plugin_failed(
    ctx: &Context,
    api: &Api<ServiceSet>,
    service_set: &ServiceSet,
    call: CallError,
) -> Result<Action, Error> {
    let status = decide::not_translated(service_set, reasons::PLUGIN_ERROR, &call.to_string(), &now());
    if let Err(e) = write_status(ctx, api, service_set, status).await {
        tracing::warn!("writing PluginError to the status: {e}");
    }
    Err(call.into())
}

/// The cluster of `route`, its caches of `serving`'s kinds listed, or why it cannot be reached.
async fn listed_home(route: &Route, ctx: &Context, serving: &ServingPlugin) -> Result<Home, RegionError> {
    let home = ctx.regions.home(route).await?;
    home.listed(serving).await?;
    Ok(home)
}

/// Says in the status why the children's cluster cannot be told or reached; the round backs off.
async fn unreachable(
    ctx: &Context,
    api: &Api<ServiceSet>,
    service_set: &ServiceSet,
    why: impl std::fmt::Display,
) -> Result<Action, Error> {
    let why = why.to_string();
    write_status(ctx, api, service_set, decide::not_routed(service_set, &why, &now())).await?;
    Err(Error::Unreachable(why))
}

/// A plan, and the objects of its children's names that are someone else's, with why (no
/// watch tells when they go: the round is retried while any is).
struct Planned {
    plan: Plan,
    foreign: BTreeMap<ChildRef, String>,
}

/// Plans, deferring the status; then, before the first apply of any name, looks in the caches
/// for an object of that name (they hold every object of the kind, the host's whole and the
/// others by name): one that is not this ServiceSet's is never applied over, and the plan is
/// made again knowing it (its service fails, naming the object and its owner).
async fn plan_owned(
    service_set: &Arc<ServiceSet>,
    smp: Option<Arc<StateManagementProvider>>,
    serving: &Arc<ServingPlugin>,
    home: &Home,
    ctx: &Arc<Context>,
) -> Result<Result<Planned, CallError>, Error> {
    let first = match decide_blocking(service_set, smp.clone(), serving, home, ctx, BTreeMap::new(), true).await {
        Ok(plan) if !plan.unseen.is_empty() => plan,
        result => return Ok(result.map(|plan| Planned { plan, foreign: BTreeMap::new() })),
    };
    let foreign = foreign_objects(service_set, &first.unseen, |child| home.children.existing(child));
    if foreign.is_empty() {
        return Ok(Ok(Planned { plan: first, foreign }));
    }
    let replanned = decide_blocking(service_set, smp, serving, home, ctx, foreign.clone(), true).await;
    Ok(replanned.map(|plan| Planned { plan, foreign }))
}

/// Runs [`decide::decide`] on the blocking pool (plugin calls are synchronous), over the cached
/// SMP, templates and children (on their home cluster); `defer_status` as
/// [`Inputs::defer_status`].
async fn decide_blocking(
    service_set: &Arc<ServiceSet>,
    smp: Option<Arc<StateManagementProvider>>,
    serving: &Arc<ServingPlugin>,
    home: &Home,
    ctx: &Arc<Context>,
    foreign: BTreeMap<ChildRef, String>,
    defer_status: bool,
) -> Result<Plan, CallError> {
    let unready = smp.as_ref().filter(|s| !s.spec.suspend && !s.status.as_ref().is_some_and(|st| st.ready));
    let diagnosis = match unready {
        Some(smp) => Some(ctx.providers.diagnosis(smp).await),
        None => None,
    };
    let children = home.children.cached(service_set);
    let (kinds, regional) = (home.children.clone(), home.region.is_some());
    let (service_set, ctx, serving) = (service_set.clone(), ctx.clone(), serving.clone());
    call_blocking(move || {
        let namespace = service_set.namespace().unwrap_or_default();
        let template = |name: &str| ctx.template(&namespace, name);
        let has_objects = |NamespacedName { namespace, name }: &NamespacedName, service: &str| {
            ctx.regions.any(namespace, name, service)
        };
        let arbitrate = |claims: &[ServiceClaims]| ctx.arbiter.arbitrate(&service_set, claims, has_objects);
        let related = |child: &Value| kinds.owned_by(child);
        let inputs = Inputs {
            smp: smp.as_deref(),
            smp_diagnosis: diagnosis,
            template: &template,
            source: &|source| ctx.source(source),
            children: &children,
            foreign: &foreign,
            arbitrate: &arbitrate,
            related: &related,
            translations: Some(&ctx.translations),
            regional,
            defer_status,
        };
        decide::decide(&serving, &service_set, &inputs, &ctx.settings.system_namespace, &now())
    })
    .await
}

/// Applies and deletes what the plan says on the children's home cluster; returns whether an
/// apply changed an object (its watch will bring it back). A child the API server refuses is
/// added to `refused`; other API errors stop the round and retry it.
async fn carry_out(plan: &Plan, home: &Home, refused: &mut Vec<String>) -> Result<bool, Error> {
    let mut coming_back = false;
    for child in &plan.apply {
        match home.children.apply(child).await {
            Ok(changed) => coming_back |= changed,
            Err(kube::Error::Api(e)) if matches!(e.code, 400 | 403 | 404 | 422) => {
                refused.push(format!("{}: {}", ChildRef::of(child), e.message));
            }
            Err(e) => return Err(e.into()),
        }
    }
    delete_children(&plan.delete, &home.children).await?;
    Ok(coming_back)
}

/// Deletes what an earlier route left on other clusters than `home`: on the management cluster
/// (its cache holds every child) and on every region recorded on the ServiceSet (listed: its
/// cache may be new). Returns the recorded regions that hold none of its children any more, for
/// the record to forget; one that cannot be listed or written is named in `refused` and kept.
async fn clear_elsewhere(
    service_set: &ServiceSet,
    home: &Home,
    ctx: &Context,
    refused: &mut Vec<String>,
) -> Result<Vec<String>, Error> {
    if home.region.is_some() {
        let management = ctx.regions.management();
        let left = deletion(service_set, &management.children.cached(service_set), &now()).delete;
        delete_children(&left, &management.children).await?;
    }
    let here = home.region.as_ref().map(|r| r.name.as_str());
    let mut emptied = Vec::new();
    // Besides the recorded regions, only the current route's, which is `home`'s.
    for access in ctx.regions_of(service_set).unwrap_or_default() {
        if Some(access.name.as_str()) == here {
            continue;
        }
        match clear_region(&access, service_set, ctx).await {
            Ok(left) if left.is_empty() => emptied.push(access.name),
            Ok(_) => {} // going: their deletion comes back through the region's watch
            Err(why) => refused.push(why.to_string()),
        }
    }
    Ok(emptied)
}

/// Deletes `service_set`'s children on the region `access`; returns those still there.
async fn clear_region(
    access: &RegionAccess,
    service_set: &ServiceSet,
    ctx: &Context,
) -> Result<Vec<ChildRef>, RegionError> {
    let home = ctx.regions.home(&Route::Region(access.clone())).await?;
    home.clear(service_set, &ctx.caches.children).await
}

/// Checks the health of the services the CD tool calls Deployed on their target cluster
/// (looking again soon while one is unsettled), then writes `status`. Children the API server
/// refused, and objects of their names that are someone else's (`refused`), are reported in the
/// status (condition [`APPLIED`](crate::conditions::types::APPLIED)) and retried with backoff.
async fn finish(
    mut status: ServiceSetStatus,
    refused: &[String],
    service_set: &ServiceSet,
    home: &Home,
    ctx: &Context,
    api: &Api<ServiceSet>,
) -> Result<Action, Error> {
    let now = now();
    let unsettled = ctx.health.verify(service_set, &home.cluster, &mut status, &now).await;
    decide::applied(&mut status, refused, service_set.meta().generation, &now);
    write_status(ctx, api, service_set, status).await?;
    match (refused.is_empty(), unsettled) {
        (true, false) => Ok(Action::requeue(ctx.settings.resync)),
        (true, true) => Ok(Action::requeue(ctx.settings.health_poll.min(ctx.settings.resync))),
        (false, _) => Err(Error::Refused(refused.join("; "))),
    }
}

/// A ServiceSet being deleted: services go `Deleting`, children are deleted on the management
/// cluster and on every region they may be on (recorded on the ServiceSet, or routed to now),
/// and the finalizer goes only once each of these clusters lists none of them (Flux uninstalls
/// before its objects go). No plugin is involved: the children are found by their labels. A
/// region that cannot be listed holds the finalizer, and the status names it.
async fn clean_up(service_set: &Arc<ServiceSet>, ctx: &Arc<Context>, api: &Api<ServiceSet>) -> Result<Action, Error> {
    let now = now();
    let management = ctx.regions.management();
    let plan = deletion(service_set, &management.children.cached(service_set), &now);
    delete_children(&plan.delete, &management.children).await?;
    let mut remaining: Vec<ChildRef> =
        management.children.live(service_set).await?.into_iter().map(|l| l.child).collect();
    let mut unreachable = Vec::new();
    match ctx.regions_of(service_set) {
        Ok(regions) => {
            for access in regions {
                match clear_region(&access, service_set, ctx).await {
                    Ok(left) => remaining.extend(left),
                    Err(why) => unreachable.push(why.to_string()),
                }
            }
        }
        Err(why) => unreachable.push(why.to_string()),
    }
    let mut status = plan.status.expect("a deletion plan has a status");
    if !unreachable.is_empty() {
        let why = format!("{}; the finalizer stays until its objects there are deleted", unreachable.join("; "));
        decide::region_unreachable(&mut status, &why, service_set.metadata.generation, &now);
        write_status(ctx, api, service_set, status).await?;
        return Err(Error::Unreachable(why));
    }
    write_status(ctx, api, service_set, status).await?;
    if !remaining.is_empty() {
        let names: Vec<String> = remaining.iter().map(ChildRef::to_string).collect();
        tracing::info!("waiting for {} to be gone", names.join(", "));
        return Ok(Action::requeue(DELETION_POLL));
    }
    // Its claims go only now, so a waiting loser never installs beside an uninstalling winner.
    ctx.arbiter.release(&NamespacedName::of(service_set.as_ref()));
    finalizer::remove(api, service_set, &ctx.finalizer).await.map_err(stale_or_api)?;
    tracing::info!("children gone; finalizer removed");
    Ok(Action::await_change())
}

/// Deletes children of `kinds`, skipping those already being deleted (no write while Flux
/// uninstalls).
async fn delete_children(children: &[ChildRef], kinds: &ChildKinds) -> Result<(), Error> {
    for child in children.iter().filter(|c| !kinds.is_deleting(c)) {
        kinds.delete(child).await?;
        tracing::info!("deleted {child}");
    }
    Ok(())
}

/// Writes the status when it changed, and publishes the transitions as Events.
async fn write_status(
    ctx: &Context,
    api: &Api<ServiceSet>,
    service_set: &ServiceSet,
    status: ServiceSetStatus,
) -> Result<(), Error> {
    let notes = events::service_set_events(service_set.status.as_ref(), &status);
    let written = status_writer::write(api, service_set, status, OnConflict::Fail).await;
    if written.map_err(stale_or_api)? == Written::Replaced {
        tracing::debug!("status written");
        ctx.events.publish(service_set, "Reconcile", &notes).await;
    }
    Ok(())
}

/// Only 409 Conflict (a stale resourceVersion) means the ServiceSet changed since it was read.
/// Anything else, 422 included (the API server refused the content), is an error that backs off:
/// retrying it at once would repeat the same refusal forever.
fn stale_or_api(e: kube::Error) -> Error {
    match &e {
        kube::Error::Api(status) if status.is_conflict() => Error::Stale(e),
        _ => Error::Api(e),
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests;
