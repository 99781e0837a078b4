//! One ServiceSet's round: gather the facts from the caches, then ask the pure core for the next
//! step ([`crate::plan::step`]) and do it, until a step ends the round. Each step's I/O is a
//! function here; no decision is. Plus the retry policy when a round fails.

use super::context::Context;
use super::finalizer;
use crate::controller::caches::service_set_cache::CachedServiceSet;
use crate::controller::plugin_kinds::child_kinds::ChildKinds;
use crate::controller::plumbing::queue::Action;
use crate::controller::plumbing::status_writer::{self, OnConflict, Written};
use crate::controller::remote::homes::{Home, RegionError};
use crate::k0rdent::ChildRef;
use crate::k0rdent::NamespacedName;
use crate::k0rdent::{ServiceSet, ServiceSetStatus, StateManagementProvider};
use crate::metrics::MetricLabel;
use crate::plan::claims::ServiceClaims;
use crate::plan::decide::{self, Inputs, Plan, Refusal, Refusals, foreign_objects};
use crate::plan::events;
use crate::plan::gate::{Finalizers, Gate, gate};
use crate::plan::route::{RegionAccess, Route};
use crate::plan::step::{
    self, CarriedOut, Cleared, End, Facts, Failure, ManagementCleared, Progress, RegionsCleared, Step, Verified,
};
use crate::plugin::{CallError, call_blocking};
use crate::serving::ServingPlugin;
use crate::tenancy::Tenancy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
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
    /// The API server refused children the plugin produced, objects of their names are someone
    /// else's, or a cluster could not be cleared.
    #[error("objects not applied: {0}")]
    Refused(Refusals),
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
    crate::controller::plumbing::watches::wait_listed(ctx.prepared.clone()).await;
    let started = std::time::Instant::now();
    ctx.sweeps.started(cached.namespace(), cached.name());
    let _running = ctx.in_flight.enter(format!("ServiceSet {}", cached.at()));
    let span = tracing::info_span!("reconcile", serviceset = cached.logged());
    let round = async {
        let service_set = Arc::new(cached.unpack().map_err(Error::Uncached)?);
        round(&service_set, &ctx).await
    };
    let result = tracing::Instrument::instrument(round, span).await;
    ctx.metrics.reconciled("ServiceSet", started, result.as_ref().map(|_| ()).map_err(Error::metric_label));
    if result.is_ok() {
        ctx.failures.succeeded(&cached.key());
    }
    result
}

/// How long to wait before retrying a ServiceSet whose round failed: a lost race is retried
/// at once on the latest version; anything else backs off exponentially per ServiceSet.
pub fn error_policy(service_set: &CachedServiceSet, error: &Error, ctx: &Context) -> Action {
    let key = service_set.key();
    if let Error::Stale(e) = error {
        tracing::debug!(serviceset = service_set.logged(), "{e}; retrying");
        return Action::requeue(CONFLICT_RETRY);
    }
    let (failures, delay) = ctx.failures.failed(&key);
    let plugin = match error {
        Error::Plugin(e) => Some(e.plugin.as_str()),
        _ => None,
    };
    tracing::warn!(serviceset = service_set.logged(), plugin, retry_in = ?delay, failures, "{error}");
    Action::requeue(delay)
}

/// Gathers the facts, then asks the pure core for the next step and does it, until a step ends
/// the round (see [`step`]).
async fn round(service_set: &Arc<ServiceSet>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let api = Api::<ServiceSet>::namespaced(ctx.client.clone(), &service_set.namespace().unwrap_or_default());
    let smp = ctx.caches.smps.get(&ObjectRef::new(&service_set.spec.provider.name));
    let finalizers = Finalizers {
        mine: finalizer::has(service_set.as_ref(), &ctx.finalizer),
        legacy: finalizer::has(service_set.as_ref(), finalizer::LEGACY),
    };
    let route = ctx.route(service_set);
    let gate = gate(service_set, smp.as_deref(), &ctx.settings.identity, finalizers);
    let facts = Facts {
        placements: ctx.placements_of(service_set, route.as_ref().ok(), matches!(gate, Gate::CleanUp)),
        gate,
        serving: ctx.serving(service_set),
        route,
        provider: smp,
    };
    let mut done = Progress::default();
    let mut _slot = None; // held until the round ends
    loop {
        let step = step::next(service_set, &facts, &done, &now());
        tracing::trace!(step = step.name(), "next");
        match step {
            Step::AddFinalizer(regions) => {
                finalizer::add(&api, service_set, &ctx.finalizer, regions).await.map_err(stale_or_api)?;
                return Ok(Action::await_change()); // the write comes back through the watch
            }
            Step::RecordRegions(record) => {
                finalizer::record_regions(&api, service_set, record).await.map_err(stale_or_api)?;
                return Ok(Action::await_change()); // the write comes back through the watch
            }
            Step::Admit(route) => match ctx.homes.admit(&route) {
                Ok(slot) => (_slot, done.admitted) = (slot, Some(true)),
                Err(busy) => {
                    tracing::debug!("{busy}; retrying shortly");
                    done.admitted = Some(false);
                }
            },
            Step::ReachHome { route, serving } => done.home = Some(listed_home(&route, ctx, &serving).await),
            Step::Diagnose(smp) => done.diagnosis = Some(ctx.providers.diagnosis(&smp).await),
            Step::ListManagement => done.on_management = Some(ctx.homes.management().children.cached(service_set)),
            Step::Decide { home, serving, foreign, diagnosis } => {
                done.plan_knew_foreign = done.foreign.is_some();
                let decide = move |ss: &ServiceSet, inputs: &Inputs, tenancy: Tenancy<'_>| {
                    decide::decide(&serving, ss, inputs, tenancy, &now())
                };
                let provider = facts.provider.clone();
                let plan = on_inputs(service_set, provider, diagnosis, &home, ctx, foreign, decide).await;
                done.plan = Some(plan.map(Arc::new));
            }
            Step::CheckNames { home, unseen } => {
                done.foreign = Some(foreign_objects(service_set, &unseen, |child| home.children.existing(child)));
            }
            Step::CarryOut { home, plan } => {
                if plan.refused > 0 {
                    let plugin = facts.serving.as_ref().map_or("", |s| s.name.as_str());
                    ctx.metrics.plugin_errors(plugin, "policy", plan.refused as u64);
                }
                done.carried_out = Some(carry_out(&plan, &home).await?);
            }
            Step::ClearElsewhere { home, regions, management } => {
                done.cleared = Some(clear_elsewhere(service_set, &home, &regions, &management, ctx).await?);
            }
            Step::DecideStatus { home, serving, plan } => {
                let deferred = plan.deferred.clone().expect("a plan without a status deferred it");
                let decide = move |ss: &ServiceSet, inputs: &Inputs, _: Tenancy<'_>| {
                    decide::deferred_status(&serving, ss, &deferred, inputs, &now())
                };
                done.status = Some(on_inputs(service_set, None, None, &home, ctx, BTreeMap::new(), decide).await);
            }
            Step::VerifyHealth { home, mut status } => {
                let unsettled = ctx.target_health.verify(service_set, &home.cluster, &mut status, &now()).await;
                done.verified = Some(Verified { status, unsettled });
            }
            Step::ClearManagement { deletion } => {
                done.management_cleared = Some(clear_management(service_set, deletion, ctx).await?);
            }
            Step::ClearRegions { recorded, others } => {
                done.regions_cleared = Some(clear_regions(service_set, &recorded, &others, ctx).await);
            }
            Step::WriteStatus { status, notes, best_effort } => {
                match write_status(ctx, &api, service_set, status, &notes).await {
                    Err(e) if best_effort => tracing::warn!("writing the status: {e}"),
                    result => result?,
                }
                done.written = true;
            }
            Step::RemoveFinalizer => {
                ctx.arbiter.release(&NamespacedName::of(service_set.as_ref()));
                finalizer::remove(&api, service_set, &ctx.finalizer).await.map_err(stale_or_api)?;
                tracing::info!("children gone; finalizer removed");
                return Ok(Action::await_change());
            }
            Step::Release => {
                ctx.arbiter.release(&NamespacedName::of(service_set.as_ref()));
                return Ok(Action::await_change());
            }
            Step::Undecided(why) => {
                tracing::warn!("cannot tell whether this host serves it: {why}");
                return Ok(Action::await_change());
            }
            Step::End(end) => return ended(end, service_set, ctx),
        }
    }
}

/// The round's end as the controller's next action; a settled one is run again by the next
/// resync pass ([`crate::controller::plumbing::sweeps`]).
fn ended(end: End, service_set: &ServiceSet, ctx: &Context) -> Result<Action, Error> {
    let settings = &ctx.settings;
    match end {
        End::AwaitChange => Ok(Action::await_change()),
        End::Resync => {
            ctx.sweeps.settled(&service_set.namespace().unwrap_or_default(), &service_set.name_any());
            Ok(Action::await_change())
        }
        End::HealthPoll => Ok(Action::requeue(settings.health_poll.min(settings.resync))),
        End::Busy => Ok(Action::requeue(BUSY_RETRY)),
        End::Deleting(children) => {
            let names: Vec<String> = children.iter().map(ChildRef::to_string).collect();
            tracing::info!("waiting for {} to be gone", names.join(", "));
            Ok(Action::requeue(DELETION_POLL))
        }
        End::Failed(Failure::Plugin(call)) => Err(call.into()),
        End::Failed(Failure::Unreachable(why)) => Err(Error::Unreachable(why)),
        End::Failed(Failure::Refused(why)) => Err(Error::Refused(why)),
    }
}

/// The cluster of `route`, its caches of `serving`'s kinds listed, or why it cannot be reached.
async fn listed_home(route: &Route, ctx: &Context, serving: &ServingPlugin) -> Result<Home, RegionError> {
    let home = ctx.homes.home(route).await?;
    home.listed(serving).await?;
    Ok(home)
}

/// Runs `decide` (a plugin-calling decision: plugin calls are synchronous) on the blocking pool,
/// over the cached SMP (with its `diagnosis`), templates and children (on their home cluster),
/// knowing `foreign`.
async fn on_inputs<T: Send + 'static>(
    service_set: &Arc<ServiceSet>,
    smp: Option<Arc<StateManagementProvider>>,
    diagnosis: Option<String>,
    home: &Home,
    ctx: &Arc<Context>,
    foreign: BTreeMap<ChildRef, String>,
    decide: impl FnOnce(&ServiceSet, &Inputs, Tenancy) -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    let children = home.children.cached(service_set);
    let (kinds, regional) = (home.children.clone(), home.region.is_some());
    let (service_set, ctx) = (service_set.clone(), ctx.clone());
    call_blocking(move || {
        let namespace = service_set.namespace().unwrap_or_default();
        let template = |name: &str| ctx.template(&namespace, name);
        let has_objects = |NamespacedName { namespace, name }: &NamespacedName, service: &str| {
            ctx.homes.any(namespace, name, service)
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
            defer_status: true,
        };
        decide(&service_set, &inputs, ctx.settings.tenancy())
    })
    .await
}

/// Applies and deletes what the plan says on the children's home cluster. A child the API
/// server refuses is named in what comes back; other API errors fail the round.
async fn carry_out(plan: &Plan, home: &Home) -> Result<CarriedOut, Error> {
    let mut carried_out = CarriedOut { coming_back: false, refused: Vec::new() };
    for child in &plan.apply {
        match home.children.apply(child).await {
            Ok(changed) => carried_out.coming_back |= changed,
            Err(kube::Error::Api(e)) if step::refuses_child(e.code) => {
                carried_out.refused.push(Refusal::Rejected { child: ChildRef::of(child), message: e.message });
            }
            Err(e) => return Err(e.into()),
        }
    }
    delete_children(&plan.delete, &home.children).await?;
    Ok(carried_out)
}

/// Deletes what an earlier route left on other clusters than `home`: `management` on the
/// management cluster, and the ServiceSet's children on each of `regions` but `home`'s (listed:
/// its cache may be new). A region that holds none of the ServiceSet's children any more is
/// named for the record to forget; one that cannot be listed or written is named as refused.
async fn clear_elsewhere(
    service_set: &ServiceSet,
    home: &Home,
    regions: &[RegionAccess],
    management: &[ChildRef],
    ctx: &Context,
) -> Result<Cleared, Error> {
    delete_children(management, &ctx.homes.management().children).await?;
    let here = home.region.as_ref().map(|r| r.name.as_str());
    let mut cleared = Cleared { emptied: Vec::new(), refused: Vec::new() };
    for access in regions.iter().filter(|access| Some(access.name.as_str()) != here) {
        match clear_region(access, service_set, ctx).await {
            Ok(Some(left)) if left.is_empty() => cleared.emptied.push(access.name.clone()),
            Ok(_) => {} // going (their deletion comes back through the region's watch), or busy: next round
            Err(why) => cleared.refused.push(Refusal::Uncleared { why: why.to_string() }),
        }
    }
    Ok(cleared)
}

/// A deleted ServiceSet: carries out `deletion` on the management cluster; returns it with the
/// children still there.
async fn clear_management(
    service_set: &ServiceSet,
    deletion: Arc<Plan>,
    ctx: &Context,
) -> Result<ManagementCleared, Error> {
    let management = ctx.homes.management();
    delete_children(&deletion.delete, &management.children).await?;
    let remaining = management.children.live(service_set).await?.into_iter().map(|l| l.child).collect();
    Ok(ManagementCleared { deletion, remaining })
}

/// A deleted ServiceSet: deletes its children on the `recorded` regions and, best effort, on the
/// `others`; returns those still there, the recorded regions that could not be listed or
/// written, and whether a region had no slot free.
async fn clear_regions(
    service_set: &ServiceSet,
    recorded: &[RegionAccess],
    others: &[RegionAccess],
    ctx: &Context,
) -> RegionsCleared {
    let mut cleared = RegionsCleared::default();
    for (access, best_effort) in recorded.iter().map(|a| (a, false)).chain(others.iter().map(|a| (a, true))) {
        match clear_region(access, service_set, ctx).await {
            Ok(Some(left)) => cleared.remaining.extend(left),
            Ok(None) => cleared.busy = true,
            Err(why) if best_effort => tracing::info!("not swept for children the record does not name: {why}"),
            Err(why) => cleared.unreachable.push(why.to_string()),
        }
    }
    cleared
}

/// Deletes `service_set`'s children on the region `access`, within one of its reconcile slots
/// (see [`Homes::admit`](crate::controller::remote::homes::Homes::admit)); returns those still
/// there, or `None` when the region has no slot free.
async fn clear_region(
    access: &RegionAccess,
    service_set: &ServiceSet,
    ctx: &Context,
) -> Result<Option<Vec<ChildRef>>, RegionError> {
    let route = Route::Region(access.clone());
    let Ok(_slot) = ctx.homes.admit(&route) else { return Ok(None) };
    let home = ctx.homes.home(&route).await?;
    home.clear(service_set, &ctx.caches.children).await.map(Some)
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

/// Writes the status when it changed, and then publishes `notes`, its transitions, as Events.
async fn write_status(
    ctx: &Context,
    api: &Api<ServiceSet>,
    service_set: &ServiceSet,
    status: ServiceSetStatus,
    notes: &[events::Note],
) -> Result<(), Error> {
    let written = status_writer::write(api, service_set, status, OnConflict::Fail).await;
    if written.map_err(stale_or_api)? == Written::Replaced {
        tracing::debug!("status written");
        ctx.events.publish(service_set, "Reconcile", notes).await;
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
