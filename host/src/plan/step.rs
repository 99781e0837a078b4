//! A ServiceSet's round as steps. From what the round knew when it started ([`Facts`]) and what
//! its steps so far brought back ([`Progress`]), [`next`] decides the one thing to do next; the
//! controller does it, records what came of it in the progress and asks again, until a step
//! ends the round. Every decision of the round is made here; the controller's loop only does
//! the I/O each step names (helm-controller's `actionForState` has this shape).
//!
//! `H` is the controller's handle on the cluster the children live on (their "home"): the core
//! only passes it from the step that reached it to the steps that use it. `S` and `E` are the
//! controller's errors for a provider no plugin serves and a home out of reach: the core only
//! says them in the status.

use super::decide::{self, Plan, Refusal, Refusals};
use super::events::{Note, service_set_events};
use super::gate::Gate;
use super::placements::{self, Placements};
use super::route::{RegionAccess, Route, RouteError};
use crate::conditions::reasons;
use crate::k0rdent::ChildRef;
use crate::k0rdent::{ServiceSet, ServiceSetStatus, StateManagementProvider};
use crate::plugin::CallError;
use crate::serving::ServingPlugin;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::Arc;

/// What the round knows before its first step, read from the caches.
pub struct Facts<S> {
    /// Whether the ServiceSet is this host's, and what that calls for.
    pub gate: Gate,
    /// The plugin serving its provider, or why there is none.
    pub serving: Result<Arc<ServingPlugin>, S>,
    /// The cluster its children go to, or why that cannot be told.
    pub route: Result<Route, RouteError>,
    /// The regions its children may be on besides the management cluster.
    pub placements: Placements,
    /// The StateManagementProvider its `spec.provider.name` names, if it exists.
    pub provider: Option<Arc<StateManagementProvider>>,
}

/// What the round's steps brought back so far; each field is filled by the step it names.
pub struct Progress<H, E> {
    /// [`Step::Admit`]: whether a slot among the reconciles against the region was free.
    pub admitted: Option<bool>,
    /// [`Step::Diagnose`]: why the provider is not ready, as the host tells.
    pub diagnosis: Option<String>,
    /// [`Step::ListManagement`]: the ServiceSet's children on the management cluster.
    pub on_management: Option<Vec<Value>>,
    /// [`Step::ReachHome`]: the children's cluster with its caches listed, or why it cannot be
    /// reached.
    pub home: Option<Result<H, E>>,
    /// [`Step::Decide`]: the latest plan, or the plugin's failure.
    pub plan: Option<Result<Arc<Plan>, CallError>>,
    /// Whether the latest plan was made knowing [`Progress::foreign`].
    pub plan_knew_foreign: bool,
    /// [`Step::CheckNames`]: the objects of the plan's new names that are someone else's, with
    /// why.
    pub foreign: Option<BTreeMap<ChildRef, String>>,
    /// [`Step::CarryOut`]: how applying and deleting went.
    pub carried_out: Option<CarriedOut>,
    /// [`Step::ClearElsewhere`]: what clearing other clusters left.
    pub cleared: Option<Cleared>,
    /// [`Step::DecideStatus`]: the status the plan deferred, or the plugin's failure.
    pub status: Option<Result<ServiceSetStatus, CallError>>,
    /// [`Step::VerifyHealth`]: the status with the target cluster's health in it.
    pub verified: Option<Verified>,
    /// [`Step::ClearManagement`]: a deleted ServiceSet's status and its children left on the
    /// management cluster.
    pub management_cleared: Option<ManagementCleared>,
    /// [`Step::ClearRegions`]: a deleted ServiceSet's children left on its regions.
    pub regions_cleared: Option<RegionsCleared>,
    /// [`Step::WriteStatus`]: the status was written (when it changed).
    pub written: bool,
}

impl<H, E> Default for Progress<H, E> {
    fn default() -> Self {
        Progress {
            admitted: None,
            diagnosis: None,
            on_management: None,
            home: None,
            plan: None,
            plan_knew_foreign: false,
            foreign: None,
            carried_out: None,
            cleared: None,
            status: None,
            verified: None,
            management_cleared: None,
            regions_cleared: None,
            written: false,
        }
    }
}

/// What [`Step::CarryOut`] brought back.
pub struct CarriedOut {
    /// An apply changed an object: its watch brings it back and wakes the ServiceSet.
    pub coming_back: bool,
    /// The children the API server refused, with why.
    pub refused: Vec<Refusal>,
}

/// What [`Step::ClearElsewhere`] brought back.
pub struct Cleared {
    /// The recorded regions that hold none of the ServiceSet's children any more.
    pub emptied: Vec<String>,
    /// The clusters that could not be listed or written, with why.
    pub refused: Vec<Refusal>,
}

/// What [`Step::VerifyHealth`] brought back.
pub struct Verified {
    /// The status with each Deployed service's health on its target cluster.
    pub status: ServiceSetStatus,
    /// A service's health is not settled yet: look again soon.
    pub unsettled: bool,
}

/// What [`Step::ClearManagement`] brought back.
pub struct ManagementCleared {
    /// The deletion it carried out (its status: every service `Deleting`).
    pub deletion: Arc<Plan>,
    /// The children still on the management cluster (Flux uninstalls before they go).
    pub remaining: Vec<ChildRef>,
}

/// What [`Step::ClearRegions`] brought back.
#[derive(Default)]
pub struct RegionsCleared {
    /// The children still on the regions.
    pub remaining: Vec<ChildRef>,
    /// The recorded regions that could not be listed or written, with why.
    pub unreachable: Vec<String>,
    /// A region ran as many reconciles as it may: the clearing is tried again shortly.
    pub busy: bool,
}

/// The one thing the round does next.
pub enum Step<H> {
    /// Add the host's finalizer, with the record of the region the children will go to
    /// (before any apply there). Ends the round: the write comes back through the watch.
    AddFinalizer(Option<String>),
    /// Record on the ServiceSet the regions its children are on (before the first apply on a
    /// new one; without those it left). Ends the round: the write comes back through the watch.
    RecordRegions(String),
    /// Take a slot among the reconciles against the children's region.
    Admit(Route),
    /// Reach the children's cluster and wait until its caches of the plugin's kinds are listed.
    ReachHome { route: Route, serving: Arc<ServingPlugin> },
    /// Ask why the provider is not ready (its checks, as the host tells them), for the status.
    Diagnose(Arc<StateManagementProvider>),
    /// Read the ServiceSet's children on the management cluster (its cache holds every child),
    /// for the deletion that clears them there.
    ListManagement,
    /// Ask the plugin for the plan ([`decide::decide`]), knowing `foreign` and the provider's
    /// `diagnosis`; with its status deferred (see [`decide::Inputs::defer_status`]).
    Decide { home: H, serving: Arc<ServingPlugin>, foreign: BTreeMap<ChildRef, String>, diagnosis: Option<String> },
    /// Look in the caches for objects of the plan's new names (`unseen`) that are someone
    /// else's: none is ever applied over.
    CheckNames { home: H, unseen: Vec<ChildRef> },
    /// Apply and delete the plan's children on their cluster; a child the API server refuses is
    /// named in [`APPLIED`](crate::conditions::types::APPLIED), other API errors fail the round.
    CarryOut { home: H, plan: Arc<Plan> },
    /// Delete the children an earlier route left on other clusters: `management`'s on the
    /// management cluster, and those on the `regions` recorded besides `home`'s.
    ClearElsewhere { home: H, regions: Vec<RegionAccess>, management: Vec<ChildRef> },
    /// Ask the plugin for the status `plan` deferred (each service's state, from the children as
    /// they are now; see [`decide::deferred_status`]).
    DecideStatus { home: H, serving: Arc<ServingPlugin>, plan: Arc<Plan> },
    /// Check on the target cluster the health of the services the CD tool calls Deployed.
    VerifyHealth { home: H, status: ServiceSetStatus },
    /// A deleted ServiceSet: carry out its `deletion` ([`decide::deletion`]) on the management
    /// cluster, list the children left.
    ClearManagement { deletion: Arc<Plan> },
    /// A deleted ServiceSet: delete its children on the `recorded` regions and, best effort,
    /// on the `others` (see [`Placements`]), list those left.
    ClearRegions { recorded: Vec<RegionAccess>, others: Vec<RegionAccess> },
    /// Write `status` when it changed, publishing `notes` (its transitions, as Events) once it
    /// is. A failed write fails the round, unless `best_effort` (the round fails anyway, for a
    /// reason of its own).
    WriteStatus { status: ServiceSetStatus, notes: Vec<Note>, best_effort: bool },
    /// A deleted ServiceSet whose children are gone everywhere: release its claims, remove the
    /// finalizer. Ends the round.
    RemoveFinalizer,
    /// Its provider no longer sends it to this host: release its claims (its children stay).
    /// Ends the round.
    Release,
    /// Whether this host serves it cannot be told (said why): wait for a change.
    Undecided(String),
    /// The round ends.
    End(End),
}

impl<H> Step<H> {
    /// The step's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Step::AddFinalizer(_) => "AddFinalizer",
            Step::RecordRegions(_) => "RecordRegions",
            Step::Admit(_) => "Admit",
            Step::Diagnose(_) => "Diagnose",
            Step::ListManagement => "ListManagement",
            Step::ReachHome { .. } => "ReachHome",
            Step::Decide { .. } => "Decide",
            Step::CheckNames { .. } => "CheckNames",
            Step::CarryOut { .. } => "CarryOut",
            Step::ClearElsewhere { .. } => "ClearElsewhere",
            Step::DecideStatus { .. } => "DecideStatus",
            Step::VerifyHealth { .. } => "VerifyHealth",
            Step::ClearManagement { .. } => "ClearManagement",
            Step::ClearRegions { .. } => "ClearRegions",
            Step::WriteStatus { .. } => "WriteStatus",
            Step::RemoveFinalizer => "RemoveFinalizer",
            Step::Release => "Release",
            Step::Undecided(_) => "Undecided",
            Step::End(_) => "End",
        }
    }
}

/// The step's name (its data can be whole plans and statuses).
impl<H> std::fmt::Debug for Step<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::End(end) => write!(f, "End({end:?})"),
            step => f.write_str(step.name()),
        }
    }
}

/// How a round ends: when the ServiceSet is looked at again.
#[derive(Debug, PartialEq)]
pub enum End {
    /// When it, or something it watches, changes.
    AwaitChange,
    /// After the resync period (a change of its children wakes it sooner).
    Resync,
    /// Soon: a service's health is not settled yet.
    HealthPoll,
    /// Shortly: its region runs as many reconciles as it may.
    Busy,
    /// Soon: these children of a deleted ServiceSet are still going (their deletion wakes it
    /// too).
    Deleting(Vec<ChildRef>),
    /// The round failed; it is retried with backoff.
    Failed(Failure),
}

/// Why a round failed (besides an API request that failed, which the controller returns as it
/// comes).
#[derive(Debug, PartialEq)]
pub enum Failure {
    /// The plugin failed outright (trap, timeout, limit).
    Plugin(CallError),
    /// The cluster the children live on cannot be told or reached, in the words of the
    /// controller's error: the core is generic over it and only says it (`E: Display`).
    Unreachable(String),
    /// The API server refused children, objects of their names are someone else's, or a cluster
    /// could not be cleared.
    Refused(Refusals),
}

/// The next step of `service_set`'s round at `now`.
pub fn next<H: Clone, E: Display, S: Display>(
    service_set: &ServiceSet,
    facts: &Facts<S>,
    done: &Progress<H, E>,
    now: &Time,
) -> Step<H> {
    match &facts.gate {
        Gate::Leave => Step::End(End::AwaitChange),
        Gate::Release => Step::Release,
        Gate::Undecided(why) => Step::Undecided(why.clone()),
        Gate::AddFinalizer => Step::AddFinalizer(match &facts.route {
            Ok(Route::Region(access)) => placements::recording(service_set, access),
            _ => None,
        }),
        Gate::CleanUp => clean_up(service_set, facts, done, now),
        Gate::Serve => serve(service_set, facts, done, now),
    }
}

/// A ServiceSet this host serves: reach the children's cluster, plan, carry the plan out,
/// report. Without a plugin, or when the plugin fails outright, its children stay as they are
/// and the status says why (a plugin change wakes it again).
///
/// When every apply went through and one changed an object, no status is written: the changed
/// children come back through their watch and wake the ServiceSet after the settle, and that
/// round writes the status from what the API server holds. A new ServiceSet thus costs one
/// status write, not two, when the CD tool is quick; the plan defers the status, and only a
/// round that writes it asks the plugin for it.
fn serve<H: Clone, E: Display, S: Display>(
    service_set: &ServiceSet,
    facts: &Facts<S>,
    done: &Progress<H, E>,
    now: &Time,
) -> Step<H> {
    let serving = match &facts.serving {
        Ok(serving) => serving,
        Err(problem) => {
            let status = decide::not_translated(service_set, reasons::PLUGIN_NOT_READY, &problem.to_string(), now);
            return report(service_set, done, status, End::AwaitChange);
        }
    };
    let route = match &facts.route {
        Ok(route) => route,
        Err(why) => return unreachable(service_set, done, why, now),
    };
    match done.admitted {
        None => return Step::Admit(route.clone()),
        Some(false) => return Step::End(End::Busy),
        Some(true) => {}
    }
    if let Route::Region(access) = route
        && let Some(record) = placements::recording(service_set, access)
    {
        return Step::RecordRegions(record);
    }
    let home = match &done.home {
        None => return Step::ReachHome { route: route.clone(), serving: serving.clone() },
        Some(Err(why)) => return unreachable(service_set, done, why, now),
        Some(Ok(home)) => home,
    };
    if let Some(smp) = unready(facts.provider.as_ref())
        && done.diagnosis.is_none()
    {
        return Step::Diagnose(smp.clone());
    }
    let (foreign, diagnosis) = (done.foreign.clone().unwrap_or_default(), done.diagnosis.clone());
    let plan = match &done.plan {
        None => return Step::Decide { home: home.clone(), serving: serving.clone(), foreign, diagnosis },
        Some(Err(call)) => return plugin_failed(service_set, done, call, now),
        Some(Ok(plan)) => plan,
    };
    if done.foreign.is_none() && !plan.unseen.is_empty() {
        return Step::CheckNames { home: home.clone(), unseen: plan.unseen.clone() };
    }
    if !foreign.is_empty() && !done.plan_knew_foreign {
        return Step::Decide { home: home.clone(), serving: serving.clone(), foreign, diagnosis };
    }
    let Some(carried_out) = &done.carried_out else {
        return Step::CarryOut { home: home.clone(), plan: plan.clone() };
    };
    let Some(cleared) = &done.cleared else {
        // Children in a region: none stays on the management cluster (an earlier route's).
        let management = match (route, &done.on_management) {
            (Route::Region(_), None) => return Step::ListManagement,
            (Route::Region(_), Some(children)) => decide::owned(service_set, children),
            (Route::Management, _) => vec![],
        };
        return Step::ClearElsewhere { home: home.clone(), regions: facts.placements.recorded.clone(), management };
    };
    if let Some(record) = placements::forgetting(service_set, cleared.emptied.iter().chain(&facts.placements.unknown)) {
        return Step::RecordRegions(record);
    }
    let taken = foreign.iter().map(|(child, why)| Refusal::Taken { child: child.clone(), why: why.clone() });
    let refused =
        Refusals(taken.chain(carried_out.refused.iter().cloned()).chain(cleared.refused.iter().cloned()).collect());
    if carried_out.coming_back && refused.0.is_empty() {
        return Step::End(End::Resync);
    }
    let status = match (&plan.status, &done.status) {
        (Some(status), _) | (None, Some(Ok(status))) => status,
        (None, None) => return Step::DecideStatus { home: home.clone(), serving: serving.clone(), plan: plan.clone() },
        (None, Some(Err(call))) => return plugin_failed(service_set, done, call, now),
    };
    let Some(verified) = &done.verified else {
        return Step::VerifyHealth { home: home.clone(), status: status.clone() };
    };
    let mut status = verified.status.clone();
    decide::applied(&mut status, &refused, service_set.metadata.generation, now);
    let end = match (refused.0.is_empty(), verified.unsettled) {
        (true, false) => End::Resync,
        (true, true) => End::HealthPoll,
        (false, _) => End::Failed(Failure::Refused(refused)),
    };
    report(service_set, done, status, end)
}

/// A ServiceSet being deleted: services go `Deleting`, children are deleted on the management
/// cluster and on every region they may be on, and the finalizer goes only once each of these
/// clusters lists none of them (Flux uninstalls before its objects go). No plugin is involved:
/// the children are found by their labels. A recorded region that cannot be listed holds the
/// finalizer, and the status names it; the other Regions are swept best effort, so that a record
/// someone edited neither holds the finalizer nor hides children (see [`Placements`]).
fn clean_up<H, E, S>(service_set: &ServiceSet, facts: &Facts<S>, done: &Progress<H, E>, now: &Time) -> Step<H> {
    let Some(management) = &done.management_cleared else {
        let Some(children) = &done.on_management else { return Step::ListManagement };
        return Step::ClearManagement { deletion: Arc::new(decide::deletion(service_set, children, now)) };
    };
    let status = management.deletion.status.clone().expect("a deletion plan has a status");
    let regions = &facts.placements;
    let Some(cleared) = &done.regions_cleared else {
        if regions.recorded.is_empty() && regions.others.is_empty() {
            return after_clearing(service_set, status, management, &RegionsCleared::default(), done, now);
        }
        return Step::ClearRegions { recorded: regions.recorded.clone(), others: regions.others.clone() };
    };
    after_clearing(service_set, status, management, cleared, done, now)
}

/// A deleted ServiceSet once its clusters were cleared: the `status` of its deletion, then wait
/// for its children to go, then the finalizer.
fn after_clearing<H, E>(
    service_set: &ServiceSet,
    mut status: ServiceSetStatus,
    management: &ManagementCleared,
    regions: &RegionsCleared,
    done: &Progress<H, E>,
    now: &Time,
) -> Step<H> {
    if !regions.unreachable.is_empty() {
        let why =
            format!("{}; the finalizer stays until its objects there are deleted", regions.unreachable.join("; "));
        decide::region_unreachable(&mut status, &why, service_set.metadata.generation, now);
        return report(service_set, done, status, End::Failed(Failure::Unreachable(why)));
    }
    let remaining: Vec<ChildRef> = management.remaining.iter().chain(&regions.remaining).cloned().collect();
    match (done.written, remaining.is_empty(), regions.busy) {
        (false, _, _) => write(service_set, status, false),
        (true, false, _) => Step::End(End::Deleting(remaining)),
        (true, true, true) => Step::End(End::Busy),
        // Its claims go only now, so a waiting loser never installs beside an uninstalling winner.
        (true, true, false) => Step::RemoveFinalizer,
    }
}

/// The provider, when it is neither suspended nor ready: the status says why, from its diagnosis.
fn unready(provider: Option<&Arc<StateManagementProvider>>) -> Option<&Arc<StateManagementProvider>> {
    provider.filter(|smp| !smp.spec.suspend && !smp.status.as_ref().is_some_and(|s| s.ready))
}

/// Whether an API answer of `code` to a child's apply refuses that child (its content, its kind,
/// the host's rights to it): named in [`APPLIED`](crate::conditions::types::APPLIED), the round
/// goes on. Any other error fails the round.
pub fn refuses_child(code: u16) -> bool {
    matches!(code, 400 | 403 | 404 | 422)
}

/// Writes `status`, then ends as `end`.
fn report<H, E>(service_set: &ServiceSet, done: &Progress<H, E>, status: ServiceSetStatus, end: End) -> Step<H> {
    if done.written { Step::End(end) } else { write(service_set, status, false) }
}

/// Writes `status` with the Events of its transitions from `service_set`'s status.
fn write<H>(service_set: &ServiceSet, status: ServiceSetStatus, best_effort: bool) -> Step<H> {
    let notes = service_set_events(service_set.status.as_ref(), &status);
    Step::WriteStatus { status, notes, best_effort }
}

/// The children's cluster cannot be told or reached: [`APPLIED`](crate::conditions::types::APPLIED)
/// says why (`RegionUnreachable`), the round backs off.
fn unreachable<H, E>(service_set: &ServiceSet, done: &Progress<H, E>, why: &dyn Display, now: &Time) -> Step<H> {
    let why = why.to_string();
    let status = decide::not_routed(service_set, &why, now);
    report(service_set, done, status, End::Failed(Failure::Unreachable(why)))
}

/// The plugin failed outright: [`TRANSLATED`](crate::conditions::types::TRANSLATED) says so
/// (`PluginError`), the round fails with the plugin's error (a failed status write only logged).
fn plugin_failed<H, E>(service_set: &ServiceSet, done: &Progress<H, E>, call: &CallError, now: &Time) -> Step<H> {
    if done.written {
        return Step::End(End::Failed(Failure::Plugin(call.clone())));
    }
    let status = decide::not_translated(service_set, reasons::PLUGIN_ERROR, &call.to_string(), now);
    write(service_set, status, true)
}

#[cfg(test)]
mod tests;
