//! One reconcile decision for one ServiceSet: what to apply, what to delete and which status
//! to write, from the ServiceSet, its provider, its templates and its live children. Pure: the
//! controller gathers the inputs and carries the plan out.

use super::children::{self, Owner};
use super::claims::{Arbitration, ServiceClaims, stops_on_conflict};
use super::map_status::service_status;
use super::memo::TranslationMemo;
use super::service_set_status;
use super::translate::{ServiceOutcome, TranslateFailure, TranslatedService, translate_input};
use crate::conditions::types::{APPLIED, PROVIDER_READY, TRANSLATED};
use crate::conditions::{self, reasons};
use crate::k0rdent::{
    ChildRef, ProviderState, ServiceSet, ServiceSetStatus, ServiceState, ServiceType, State, StateManagementProvider,
};
use crate::plugin::CallError;
use crate::serving::ServingPlugin;
use crate::tenancy::Tenancy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use ksm_plugin_sdk::contract::ServiceStatus;
use ksm_plugin_sdk::sources::SourceRef;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// `helmAction` of a service whose objects are to be removed while it stays listed.
const UNINSTALL: &str = "Uninstall";

/// What the controller gathered for one ServiceSet.
pub struct Inputs<'a> {
    /// The StateManagementProvider named by `spec.provider.name`, if it exists.
    pub smp: Option<&'a StateManagementProvider>,
    /// The host's own explanation of why the provider is not ready, when it is not.
    pub smp_diagnosis: Option<String>,
    /// ServiceTemplates by name, in the ServiceSet's namespace.
    pub template: &'a dyn Fn(&str) -> Option<Value>,
    /// The Flux sources templates refer to (see [`ksm_plugin_sdk::sources`]).
    pub source: &'a dyn Fn(&SourceRef) -> Option<Value>,
    /// The ServiceSet's live children (found by the ServiceSet labels, not through the plugin;
    /// only those its uid owns count as its own).
    pub children: &'a [Value],
    /// Objects that have the name of a child to apply but are someone else's, with why (the
    /// controller looks before a name's first apply): their services fail, nothing is taken over.
    pub foreign: &'a BTreeMap<ChildRef, String>,
    /// Arbitration of claims against the other ServiceSets: given what this ServiceSet's
    /// services claim now, the services that lose (see [`claims`](super::claims)).
    pub arbitrate: &'a dyn Fn(&[ServiceClaims]) -> Arbitration,
    /// The objects of the plugin's `reads` kinds that a live child owns (see
    /// [`reads`](super::reads)), for `map-status`.
    pub related: &'a dyn Fn(&Value) -> Vec<Value>,
    /// Translations kept from earlier rounds (see [`memo`](super::memo)); `None`: ask the plugin.
    pub translations: Option<&'a TranslationMemo>,
    /// Whether the children live on another cluster than the ServiceSet (a region, see
    /// [`route`](super::route)): they are its by their uid label alone (see [`Owner::beside`]).
    pub regional: bool,
    /// Whether a plan that applies something leaves its status out ([`Plan::status`] `None`):
    /// the controller writes no status in a round whose applies change objects (their watch
    /// events bring the next round, which does), so asking the plugin to map the status of
    /// objects about to change would be wasted; it plans again in the rare round that needs it.
    pub defer_status: bool,
}

/// The decision for one ServiceSet.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Children to apply (server-side), only those that changed.
    pub apply: Vec<Value>,
    /// Children to delete.
    pub delete: Vec<ChildRef>,
    /// The children in `apply` this ServiceSet has no object of yet: before their first apply
    /// the controller checks that no one else's object has the name (see [`Inputs::foreign`]).
    pub unseen: Vec<ChildRef>,
    /// The status to write (written only when it differs from the current one); `None` when it
    /// was deferred (see [`Inputs::defer_status`]).
    pub status: Option<ServiceSetStatus>,
    /// What a deferred status is decided from, when it was deferred (see [`deferred_status`]).
    pub deferred: Option<Box<Deferred>>,
    /// Services whose output the host refused (see [`crate::policy`]), for metrics.
    pub refused: usize,
}

/// What [`decide`] knew when it deferred the status: the plugin's input, the services'
/// translation as settled, and the status so far (provider and cluster). The status is decided
/// from it later without translating again.
#[derive(Clone, Debug, PartialEq)]
pub struct Deferred {
    /// The ServiceSet as the plugin sees it.
    input: Value,
    /// The services' translation, taken names and claims settled.
    translated: Vec<TranslatedService>,
    /// The status before the services' states.
    status: ServiceSetStatus,
}

/// Decides what to do for `service_set`, one phase after another: a deleted ServiceSet's
/// [`deletion`]; else whether its provider lets it go on, the plugin's translation, the services
/// whose objects someone else holds, the claims against other ServiceSets, what that does to the
/// children and, unless deferred, the status, under `tenancy` (see [`translate`]). A plugin call
/// that fails (trap, timeout, limit) is returned as an error for the controller to retry;
/// everything else ends in a plan.
pub fn decide(
    serving: &ServingPlugin,
    service_set: &ServiceSet,
    observed: &Inputs,
    tenancy: Tenancy,
    now: &Time,
) -> Result<Plan, CallError> {
    if service_set.metadata.deletion_timestamp.is_some() {
        return Ok(deletion(service_set, observed.children, now));
    }
    let mut status = service_set.status.clone().unwrap_or_default();
    status.cluster = Some(service_set_status::cluster_reference(service_set));
    let generation = service_set.metadata.generation;
    if !provider_ready(service_set, observed, &mut status, now) {
        return Ok(Plan::status_only(status));
    }
    let serving = &serving.session();
    // As the plugin sees it: the AdapterPlugin's default config merged in (translate does the
    // same, idempotently), so that map-status reads the same config.
    let json = serving.input_of(&serde_json::to_value(service_set).expect("a ServiceSet serializes"));
    let Some(mut translated) = translation(serving, &json, observed, tenancy, &mut status, generation, now)? else {
        return Ok(Plan::status_only(status));
    };
    let owner = owner_of(service_set, !observed.regional);
    // Labelled with this name but owned by another uid (an earlier ServiceSet of the same name):
    // never applied over, never deleted.
    let (ours, theirs): (Vec<&Value>, Vec<&Value>) =
        observed.children.iter().partition(|c| children::owned_by(c, &owner.uid));
    fail_taken(&mut translated, &theirs, observed.foreign, &owner);
    settle_claims(&mut translated, service_set, observed.arbitrate);
    let plan = child_changes(&translated, &ours, &owner);
    let deferred = Deferred { input: json, translated, status };
    if observed.defer_status && !plan.apply.is_empty() {
        return Ok(Plan { deferred: Some(Box::new(deferred)), ..plan });
    }
    let status = services_status(serving, service_set, deferred, observed, now)?;
    Ok(Plan { status: Some(status), ..plan })
}

/// The status a plan deferred, from the children in `observed` as they are now (after the plan
/// was carried out): each service's state as the plugin maps it from its live objects. The
/// plugin is not asked to translate again.
pub fn deferred_status(
    serving: &ServingPlugin,
    service_set: &ServiceSet,
    deferred: &Deferred,
    observed: &Inputs,
    now: &Time,
) -> Result<ServiceSetStatus, CallError> {
    services_status(&serving.session(), service_set, deferred.clone(), observed, now)
}

/// The status with each service's state mapped from the children of `observed` it owns.
fn services_status(
    serving: &ServingPlugin,
    service_set: &ServiceSet,
    Deferred { input, translated, mut status }: Deferred,
    observed: &Inputs,
    now: &Time,
) -> Result<ServiceSetStatus, CallError> {
    let owner = owner_of(service_set, !observed.regional);
    let ours: Vec<&Value> = observed.children.iter().filter(|c| children::owned_by(c, &owner.uid)).collect();
    let found = map_statuses(serving, &input, &translated, &ours, service_set, observed)?;
    let generation = service_set.metadata.generation;
    let states = service_states(service_set, &found, &ours, &status.services, now);
    service_set_status::set_services(&mut status, states, generation, now);
    translated_condition(&mut status.conditions, &translated, generation, now);
    Ok(status)
}

/// Whether the provider lets the ServiceSet be reconciled now, recorded in `status`: the
/// provider's state and [`PROVIDER_READY`].
fn provider_ready(service_set: &ServiceSet, observed: &Inputs, status: &mut ServiceSetStatus, now: &Time) -> bool {
    let generation = service_set.metadata.generation;
    let stop = provider_state(service_set, observed, status);
    let conditions = &mut status.conditions;
    match &stop {
        Ok(()) => conditions::mark_true(conditions, PROVIDER_READY, reasons::PROVIDER_READY, "", generation, now),
        Err(unfit) => {
            conditions::mark_false(conditions, PROVIDER_READY, unfit.reason(), &unfit.to_string(), generation, now)
        }
    }
    stop.is_ok()
}

/// The plugin's translation, checked (`None` when the spec, the config or the plugin's answer
/// does not translate: recorded in `status` as [`TRANSLATED`] `False`, nothing else is decided);
/// a failed plugin call is the error.
fn translation(
    serving: &ServingPlugin,
    json: &Value,
    observed: &Inputs,
    tenancy: Tenancy,
    status: &mut ServiceSetStatus,
    generation: Option<i64>,
    now: &Time,
) -> Result<Option<Vec<TranslatedService>>, CallError> {
    let template = |name: &str| (observed.template)(name);
    match translate_input(serving, observed.translations, json, template, observed.source, tenancy) {
        Ok(translated) => Ok(Some(translated)),
        Err(TranslateFailure::Call(e)) => Err(e),
        Err(failure) => {
            let message = failure.to_string();
            let reason = failure_reason(&failure);
            conditions::mark_false(&mut status.conditions, TRANSLATED, reason, &message, generation, now);
            Ok(None)
        }
    }
}

/// Fails the services with an object someone else holds (`foreign`, or one of `theirs`): nothing
/// is applied over it, and the service claims nothing.
fn fail_taken(
    translated: &mut [TranslatedService],
    theirs: &[&Value],
    foreign: &BTreeMap<ChildRef, String>,
    owner: &Owner,
) {
    let taken = |key: &ChildRef| {
        let theirs = theirs.iter().find(|c| ChildRef::of(c) == *key);
        foreign.get(key).cloned().or_else(|| theirs.and_then(|c| children::foreign(c, owner)))
    };
    for service in translated {
        let ServiceOutcome::Objects(objects) = &service.outcome else { continue };
        if let Some(why) = objects.iter().find_map(|o| taken(&ChildRef::of(o))) {
            service.outcome = ServiceOutcome::Taken(why);
            service.claims.clear();
        }
    }
}

/// Settles the services' claims against the other ServiceSets (`arbitrate`): a loser
/// conflicts, a winner whose loser still has objects waits, and with `stopOnConflict` every
/// service with objects after the first loser waits too.
fn settle_claims(
    translated: &mut [TranslatedService],
    service_set: &ServiceSet,
    arbitrate: &dyn Fn(&[ServiceClaims]) -> Arbitration,
) {
    let claims: Vec<ServiceClaims> = translated.iter().map(TranslatedService::service_claims).collect();
    let arbitration = arbitrate(&claims);
    let mut stopped_by: Option<String> = None;
    for service in translated {
        if let Some(loss) = arbitration.losses.get(&service.service) {
            service.outcome = ServiceOutcome::Conflict(loss.to_string());
            if stops_on_conflict(service_set) && stopped_by.is_none() {
                stopped_by = Some(service.service.clone());
            }
        } else if let Some(message) = arbitration.waiting.get(&service.service) {
            service.outcome = ServiceOutcome::Waiting(message.clone());
        } else if let (Some(first), ServiceOutcome::Objects(_)) = (&stopped_by, &service.outcome) {
            let message = format!("not applied: stopOnConflict is set and service {first:?} lost a conflict");
            service.outcome = ServiceOutcome::Waiting(message);
        }
    }
}

/// What the services' outcomes do to the children (`ours`): the plan without its status. The
/// objects that changed are applied, the children no service keeps are deleted.
fn child_changes(translated: &[TranslatedService], ours: &[&Value], owner: &Owner) -> Plan {
    let (mut apply, mut unseen, mut keep) = (vec![], vec![], BTreeSet::new());
    for service in translated {
        match &service.outcome {
            ServiceOutcome::Objects(objects) => {
                for object in objects {
                    let child = children::own(object.clone(), owner, &service.service);
                    let key = ChildRef::of(&child);
                    let current = live(ours, &key);
                    if children::needs_apply(&child, current) {
                        if current.is_none() {
                            unseen.push(key.clone());
                        }
                        apply.push(child);
                    }
                    keep.insert(key);
                }
            }
            // A service that cannot be translated now keeps what it has (a typo in values must
            // not uninstall a running release), as does one held back.
            ServiceOutcome::Error(_)
            | ServiceOutcome::Refused(_)
            | ServiceOutcome::Waiting(_)
            | ServiceOutcome::Taken(_) => keep.extend(children_of(ours, &service.service)),
            // The loser of a claim applies nothing and removes what it has.
            ServiceOutcome::Conflict(_) => {}
        }
    }
    let delete = ours.iter().map(|c| ChildRef::of(c)).filter(|r| !keep.contains(r)).collect();
    let refused = translated.iter().filter(|t| matches!(t.outcome, ServiceOutcome::Refused(_))).count();
    Plan { apply, delete, unseen, status: None, deferred: None, refused }
}

/// Each service's status as the plugin maps it from the service's live objects (see
/// [`service_status`]), in spec order.
fn map_statuses(
    serving: &ServingPlugin,
    json: &Value,
    translated: &[TranslatedService],
    ours: &[&Value],
    service_set: &ServiceSet,
    observed: &Inputs,
) -> Result<Vec<ServiceStatus>, CallError> {
    let json = json.to_string();
    let observe = |a: &str, k: &str, ns: &str, n: &str| {
        live(ours, &ChildRef { api_version: a.into(), kind: k.into(), namespace: ns.into(), name: n.into() }).cloned()
    };
    translated
        .iter()
        .zip(&service_set.spec.services)
        .map(|(service, spec)| {
            let template = (observed.template)(&spec.template);
            service_status(serving.plugin.as_ref(), &json, template.as_ref(), service, observe, observed.related)
        })
        .collect()
}

/// Each spec service's status entry (`previous`: the entries written last): the plugin's `found`
/// status, or the host's own for a service being uninstalled (`Deleting` while any of its
/// children exists, then `Deleted`).
fn service_states(
    service_set: &ServiceSet,
    found: &[ServiceStatus],
    ours: &[&Value],
    previous: &[ServiceState],
    now: &Time,
) -> Vec<ServiceState> {
    service_set
        .spec
        .services
        .iter()
        .zip(found)
        .map(|(spec, found)| {
            let previous = previous.iter().find(|s| s.name == spec.name);
            if spec.helm_action.as_deref() == Some(UNINSTALL) {
                let present = children_of(ours, &spec.name).next().is_some();
                let state = if present { State::Deleting } else { State::Deleted };
                service_set_status::host_decided(
                    spec,
                    service_set_status::service_type(found.service_type),
                    state,
                    previous,
                    now,
                )
            } else {
                service_set_status::service_state(spec, found, previous, now)
            }
        })
        .collect()
}

/// Sets [`TRANSLATED`] in `conditions`: `True`, or `False` naming each service the plugin could
/// not translate or whose objects the host refused.
fn translated_condition(
    conditions: &mut Vec<Condition>,
    translated: &[TranslatedService],
    generation: Option<i64>,
    now: &Time,
) {
    let errors: Vec<String> = translated
        .iter()
        .filter_map(|service| match &service.outcome {
            ServiceOutcome::Error(e) => Some(format!("{}: {}", service.service, e.message())),
            ServiceOutcome::Refused(message) => Some(format!("{}: {message}", service.service)),
            _ => None,
        })
        .collect();
    match errors.is_empty() {
        true => conditions::mark_true(conditions, TRANSLATED, reasons::SUCCEEDED, "", generation, now),
        false => {
            let message = errors.join("; ");
            conditions::mark_false(conditions, TRANSLATED, reasons::SERVICE_ERRORS, &message, generation, now)
        }
    }
}

/// The child `key` among `ours`, as it is now.
fn live<'a>(ours: &[&'a Value], key: &ChildRef) -> Option<&'a Value> {
    ours.iter().find(|c| ChildRef::of(c) == *key).copied()
}

/// The objects among `unseen` (a plan's first applies) that exist and are not `service_set`'s,
/// with why; `live` finds an object as it is now.
pub fn foreign_objects(
    service_set: &ServiceSet,
    unseen: &[ChildRef],
    live: impl Fn(&ChildRef) -> Option<Value>,
) -> BTreeMap<ChildRef, String> {
    let owner = owner_of(service_set, true);
    unseen.iter().filter_map(|key| Some((key.clone(), children::foreign(&live(key)?, &owner)?))).collect()
}

fn owner_of(service_set: &ServiceSet, beside: bool) -> Owner {
    Owner {
        namespace: service_set.metadata.namespace.clone().unwrap_or_default(),
        name: service_set.metadata.name.clone().unwrap_or_default(),
        uid: service_set.metadata.uid.clone().unwrap_or_default(),
        beside,
    }
}

impl Plan {
    /// A plan that only writes `status`.
    fn status_only(status: ServiceSetStatus) -> Self {
        Plan { apply: vec![], delete: vec![], unseen: vec![], status: Some(status), deferred: None, refused: 0 }
    }
}

/// Why the provider stops the ServiceSet from being reconciled now.
#[derive(Debug, thiserror::Error)]
enum ProviderUnfit {
    /// No StateManagementProvider of that name.
    #[error("StateManagementProvider {name:?} not found")]
    NotFound { name: String },
    /// `spec.suspend` is set.
    #[error("StateManagementProvider {name:?} is suspended")]
    Suspended { name: String },
    /// Not ready; with the host's diagnosis, when it has one.
    #[error("StateManagementProvider {name:?} is not ready{}", .diagnosis.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    NotReady { name: String, diagnosis: Option<String> },
}

impl ProviderUnfit {
    /// The reason [`PROVIDER_READY`] says it with.
    fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => reasons::PROVIDER_NOT_FOUND,
            Self::Suspended { .. } => reasons::PROVIDER_SUSPENDED,
            Self::NotReady { .. } => reasons::PROVIDER_NOT_READY,
        }
    }
}

/// Copies the provider's state into the status; says why reconciling must stop, if it must.
fn provider_state(
    service_set: &ServiceSet,
    observed: &Inputs,
    status: &mut ServiceSetStatus,
) -> Result<(), ProviderUnfit> {
    let name = service_set.spec.provider.name.clone();
    let Some(smp) = observed.smp else {
        status.provider = None;
        return Err(ProviderUnfit::NotFound { name });
    };
    let ready = smp.status.as_ref().is_some_and(|s| s.ready);
    status.provider = Some(ProviderState { ready, suspended: smp.spec.suspend });
    if smp.spec.suspend {
        return Err(ProviderUnfit::Suspended { name });
    }
    if !ready {
        return Err(ProviderUnfit::NotReady { name, diagnosis: observed.smp_diagnosis.clone() });
    }
    Ok(())
}

fn failure_reason(failure: &TranslateFailure) -> &'static str {
    match failure {
        TranslateFailure::Rejected(ksm_plugin_sdk::contract::TranslateError::InvalidConfig(_)) => {
            reasons::INVALID_CONFIG
        }
        TranslateFailure::Rejected(_) | TranslateFailure::InvalidServiceSet(_) => reasons::INVALID_SERVICE_SET,
        TranslateFailure::Call(_) | TranslateFailure::WrongServices { .. } => reasons::PLUGIN_ERROR,
    }
}

/// The ServiceSet is being deleted: every service is Deleting and every child it owns among
/// `children` goes. Needs no plugin.
pub fn deletion(service_set: &ServiceSet, children: &[Value], now: &Time) -> Plan {
    let mut status = service_set.status.clone().unwrap_or_default();
    status.cluster = Some(service_set_status::cluster_reference(service_set));
    let states = service_set
        .spec
        .services
        .iter()
        .map(|spec| {
            let previous = status.services.iter().find(|s| s.name == spec.name);
            let service_type = previous.map_or(ServiceType::Helm, |p| p.service_type);
            service_set_status::host_decided(spec, service_type, State::Deleting, previous, now)
        })
        .collect();
    service_set_status::set_services(&mut status, states, service_set.metadata.generation, now);
    Plan { delete: owned(service_set, children), ..Plan::status_only(status) }
}

/// The children among `children` that `service_set` owns by its uid: what its deletion, or a
/// route away from their cluster, deletes.
pub fn owned(service_set: &ServiceSet, children: &[Value]) -> Vec<ChildRef> {
    let uid = service_set.metadata.uid.as_deref().unwrap_or_default();
    children.iter().filter(|c| children::owned_by(c, uid)).map(ChildRef::of).collect()
}

/// The status of a ServiceSet that cannot be planned now (no plugin serves its provider:
/// `PluginNotReady`; the plugin failed outright: `PluginError`): its children stay as they
/// are, and [`TRANSLATED`] says why.
pub fn not_translated(service_set: &ServiceSet, reason: &str, message: &str, now: &Time) -> ServiceSetStatus {
    held(service_set, TRANSLATED, reason, message, now)
}

/// The status of a ServiceSet whose children's cluster cannot be told or reached: its
/// children stay as they are, and [`APPLIED`] says why (see [`region_unreachable`]).
pub fn not_routed(service_set: &ServiceSet, message: &str, now: &Time) -> ServiceSetStatus {
    let mut status = service_set.status.clone().unwrap_or_default();
    region_unreachable(&mut status, message, service_set.metadata.generation, now);
    status
}

/// Says in `status` why a cluster the children live on cannot be told or reached (reason
/// `RegionUnreachable`: a Region, Credential or kubeconfig Secret is missing or wrong, or the
/// regional cluster does not answer).
pub fn region_unreachable(status: &mut ServiceSetStatus, message: &str, generation: Option<i64>, now: &Time) {
    conditions::mark_false(&mut status.conditions, APPLIED, reasons::REGION_UNREACHABLE, message, generation, now);
}

/// The ServiceSet's status as it is, with condition `type_` False for `reason`.
fn held(service_set: &ServiceSet, type_: &str, reason: &str, message: &str, now: &Time) -> ServiceSetStatus {
    let mut status = service_set.status.clone().unwrap_or_default();
    conditions::mark_false(&mut status.conditions, type_, reason, message, service_set.metadata.generation, now);
    status
}

/// Why an object was not applied, or a cluster not cleared, in a round that goes on: named in
/// [`APPLIED`], and the round backs off.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// An object of the child's name is someone else's (see [`foreign_objects`]).
    #[error("{why}")]
    Taken {
        /// The child not applied.
        child: ChildRef,
        /// Whose the object is, in words.
        why: String,
    },
    /// The API server refused the child (see [`step::refuses_child`](super::step::refuses_child)).
    #[error("{child}: {message}")]
    Rejected {
        /// The child not applied.
        child: ChildRef,
        /// The API server's message.
        message: String,
    },
    /// A cluster an earlier route left children on could not be listed or written.
    #[error("{why}")]
    Uncleared {
        /// The cluster and what failed, as the controller tells it.
        why: String,
    },
}

/// A round's refusals, shown one after the other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refusals(pub Vec<Refusal>);

impl std::fmt::Display for Refusals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self.0.iter().map(Refusal::to_string).collect();
        f.write_str(&each.join("; "))
    }
}

/// Records in a planned `status` how carrying the plan out went: `refused` lists the children
/// the API server refused or someone else holds ([`APPLIED`] `False`), none removes the
/// condition.
pub fn applied(status: &mut ServiceSetStatus, refused: &Refusals, generation: Option<i64>, now: &Time) {
    if refused.0.is_empty() {
        conditions::remove(&mut status.conditions, APPLIED);
    } else {
        let message = refused.to_string();
        conditions::mark_false(&mut status.conditions, APPLIED, reasons::APPLY_FAILED, &message, generation, now);
    }
}

fn children_of<'a>(children: &'a [&'a Value], service: &'a str) -> impl Iterator<Item = ChildRef> + 'a {
    children.iter().filter(move |c| children::service_of(c) == Some(service)).map(|c| ChildRef::of(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k0rdent::NamespacedName;
    use crate::k0rdent::{ServiceSetSpec, StateManagementProviderSpec, StateManagementProviderStatus};
    use crate::plan::children::SERVICE_LABEL;
    use crate::plugin::NativePlugin;
    use k8s_openapi::jiff::Timestamp;
    use ksm_flux_plugin::FluxPlugin;
    use ksm_plugin_sdk::contract::Claim;
    use serde_json::json;

    fn flux() -> ServingPlugin {
        ServingPlugin::plain(std::sync::Arc::new(NativePlugin::<FluxPlugin>::new()))
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn service_set(services: Value) -> ServiceSet {
        let spec: ServiceSetSpec = serde_json::from_value(json!({
            "cluster": "prod-eu-1", "provider": {"name": "ksm-flux"}, "services": services,
        }))
        .unwrap();
        let mut ss = ServiceSet::new("prod-eu-1", spec);
        ss.metadata.namespace = Some("kcm-system".into());
        ss.metadata.uid = Some("uid-1".into());
        ss.metadata.generation = Some(1);
        ss
    }

    fn ingress() -> Value {
        json!([{"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3"}])
    }

    fn smp(ready: bool, suspend: bool) -> StateManagementProvider {
        let spec: StateManagementProviderSpec =
            serde_json::from_value(json!({"selector": {}, "suspend": suspend})).unwrap();
        let mut smp = StateManagementProvider::new("ksm-flux", spec);
        smp.status = Some(StateManagementProviderStatus { ready, conditions: vec![] });
        smp
    }

    fn template(name: &str) -> Option<Value> {
        (name == "ingress-4-11-3").then(|| {
            json!({"metadata": {"name": name, "namespace": "kcm-system"}, "spec": {"helm": {}},
                   "status": {"valid": true, "chartRef": {"kind": "HelmChart", "name": name, "namespace": "kcm-system"}}})
        })
    }

    fn plan(ss: &ServiceSet, smp: Option<&StateManagementProvider>, children: &[Value]) -> Plan {
        plan_deferring(ss, smp, children, false)
    }

    fn plan_deferring(
        ss: &ServiceSet,
        smp: Option<&StateManagementProvider>,
        children: &[Value],
        defer_status: bool,
    ) -> Plan {
        let observed = Inputs {
            smp,
            smp_diagnosis: Some("AdapterReady=False".into()),
            template: &template,
            source: &|_| None,
            children,
            foreign: &BTreeMap::new(),
            arbitrate: &|_| Arbitration::default(),
            related: &|_| vec![],
            translations: None,
            regional: false,
            defer_status,
        };
        decide(&flux(), ss, &observed, Tenancy::default(), &at(100)).unwrap()
    }

    fn status(plan: &Plan) -> &ServiceSetStatus {
        plan.status.as_ref().expect("a status, not deferred")
    }

    fn condition<'a>(plan: &'a Plan, type_: &str) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        status(plan).conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn an_adapter_plugins_config_is_a_default_under_the_service_sets_own() {
        let spec: crate::adapter_plugin::AdapterPluginSpec = serde_json::from_value(
            json!({"source": {"builtin": "flux"}, "config": {"interval": "7m", "timeout": "3m"}}),
        )
        .unwrap();
        let plugin = std::sync::Arc::new(NativePlugin::<FluxPlugin>::new());
        let serving = ServingPlugin::configured("flux", plugin, &spec);
        let ready = smp(true, false);
        let observed = Inputs {
            smp: Some(&ready),
            smp_diagnosis: None,
            template: &template,
            source: &|_| None,
            children: &[],
            foreign: &BTreeMap::new(),
            arbitrate: &|_| Arbitration::default(),
            related: &|_| vec![],
            translations: None,
            regional: false,
            defer_status: false,
        };
        let mut ss = service_set(ingress());
        ss.spec.provider.config = Some(json!({"timeout": "9m"}).into());
        let p = decide(&serving, &ss, &observed, Tenancy::default(), &at(100)).unwrap();
        assert_eq!(p.apply[0]["spec"]["interval"], "7m", "the AdapterPlugin's default");
        assert_eq!(p.apply[0]["spec"]["timeout"], "9m", "the ServiceSet's own value wins");
    }

    #[test]
    fn a_deferred_status_is_left_out_only_of_a_plan_that_applies() {
        let ready = smp(true, false);
        let ss = service_set(ingress());
        let decide_with = |children: &[Value], defer: bool| plan_deferring(&ss, Some(&ready), children, defer);
        let (whole, deferred) = (decide_with(&[], false), decide_with(&[], true));
        assert_eq!(deferred.status, None, "the round that applies writes no status");
        assert_eq!(
            (&deferred.apply, &deferred.delete, &deferred.unseen, deferred.refused),
            (&whole.apply, &whole.delete, &whole.unseen, whole.refused),
            "the same work, without the status"
        );
        let live = whole.apply.clone();
        let settled = decide_with(&live, true);
        assert!(settled.apply.is_empty(), "{:?}", settled.apply);
        assert_eq!(settled.status, decide_with(&live, false).status, "nothing to apply: the status is made");
        assert!(settled.status.is_some());
    }

    #[test]
    fn a_deferred_status_is_decided_from_the_plan_without_translating_again() {
        let ready = smp(true, false);
        let ss = service_set(ingress());
        let deferred = plan_deferring(&ss, Some(&ready), &[], true).deferred.expect("deferred: the plan applies");
        let live = plan(&ss, Some(&ready), &[]).apply;
        let observed = Inputs {
            smp: None, // not read again: the provider's state is in the deferred status
            smp_diagnosis: None,
            template: &template,
            source: &|_| panic!("the plugin's input is not built again"),
            children: &live,
            foreign: &BTreeMap::new(),
            arbitrate: &|_| panic!("claims are not arbitrated again"),
            related: &|_| vec![],
            translations: None,
            regional: false,
            defer_status: true,
        };
        let status = deferred_status(&flux(), &ss, &deferred, &observed, &at(100)).unwrap();
        assert_eq!(Some(status), plan(&ss, Some(&ready), &live).status, "as a whole plan over the same children");
    }

    #[test]
    fn a_new_service_set_applies_owned_children_and_waits_for_them() {
        let ready = smp(true, false);
        let p = plan(&service_set(ingress()), Some(&ready), &[]);
        assert_eq!(p.apply.len(), 1);
        assert_eq!(p.apply[0]["metadata"]["labels"][SERVICE_LABEL], "ingress");
        assert_eq!(p.apply[0]["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert!(p.delete.is_empty());
        assert_eq!(status(&p).services[0].state, State::Pending, "not created yet");
        assert_eq!(status(&p).provider, Some(ProviderState { ready: true, suspended: false }));
        assert_eq!(condition(&p, "ServicesInReadyState").message, "0/1");
        assert_eq!(condition(&p, TRANSLATED).status, "True");
    }

    #[test]
    fn a_service_that_loses_its_claim_applies_nothing_and_removes_only_its_own_child() {
        use crate::plan::claims::{Contender, Loss};
        use std::collections::BTreeMap;
        let ready = smp(true, false);
        let ss = service_set(ingress());
        let own = plan(&ss, Some(&ready), &[]).apply.remove(0);
        let mut foreign = own.clone();
        foreign["metadata"]["name"] = json!("left-by-someone-else");
        foreign["metadata"]["ownerReferences"][0]["uid"] = json!("uid-2");
        let release = Claim {
            target: "kcm-system/prod-eu-1".into(),
            kind: "helm-release".into(),
            namespace: "ingress".into(),
            name: "ingress".into(),
        };
        let winner = Contender { key: NamespacedName::new("team-a", "winner"), priority: 200, created: None };
        let arbitrate = |claims: &[ServiceClaims]| {
            assert_eq!(
                claims,
                [ServiceClaims { service: "ingress".into(), claims: vec![release.clone()] }],
                "the Flux plugin claims the release"
            );
            let loss = Loss { claim: release.clone(), winner: winner.clone(), winner_service: "ingress".into() };
            Arbitration { losses: BTreeMap::from([("ingress".to_string(), loss)]), waiting: BTreeMap::new() }
        };
        let children = [own.clone(), foreign];
        let observed = Inputs {
            smp: Some(&ready),
            smp_diagnosis: None,
            template: &template,
            source: &|_| None,
            children: &children,
            foreign: &BTreeMap::new(),
            arbitrate: &arbitrate,
            related: &|_| vec![],
            translations: None,
            regional: false,
            defer_status: false,
        };
        let p = decide(&flux(), &ss, &observed, Tenancy::default(), &at(100)).unwrap();
        assert!(p.apply.is_empty(), "the loser applies nothing");
        assert_eq!(p.delete, [ChildRef::of(&own)], "only the loser's own object goes");
        let service = &status(&p).services[0];
        assert_eq!(service.state, State::Failed);
        let message = service.failure_message.as_deref().unwrap();
        assert!(message.starts_with(r#"conflicts with team-a/winner service "ingress" (priority 200)"#), "{message}");
        assert_eq!(condition(&p, TRANSLATED).status, "True", "a lost claim is not a translation error");
    }

    #[test]
    fn stop_on_conflict_holds_back_the_services_after_the_first_loser() {
        use crate::plan::claims::{Contender, Loss};
        use std::collections::BTreeMap;
        let ready = smp(true, false);
        let services = json!([
            {"name": "first", "namespace": "a", "template": "ingress-4-11-3"},
            {"name": "loser", "namespace": "b", "template": "ingress-4-11-3"},
            {"name": "after", "namespace": "c", "template": "ingress-4-11-3"},
        ]);
        let mut ss = service_set(services);
        let run = |ss: &ServiceSet| {
            let arbitrate = |claims: &[ServiceClaims]| {
                let loss = Loss {
                    claim: claims[1].claims[0].clone(),
                    winner: Contender { key: NamespacedName::new("team-a", "winner"), priority: 200, created: None },
                    winner_service: "loser".into(),
                };
                Arbitration { losses: BTreeMap::from([("loser".to_string(), loss)]), waiting: BTreeMap::new() }
            };
            let observed = Inputs {
                smp: Some(&ready),
                smp_diagnosis: None,
                template: &template,
                source: &|_| None,
                children: &[],
                foreign: &BTreeMap::new(),
                arbitrate: &arbitrate,
                related: &|_| vec![],
                translations: None,
                regional: false,
                defer_status: false,
            };
            decide(&flux(), ss, &observed, Tenancy::default(), &at(100)).unwrap()
        };
        let applied = |p: &Plan| -> Vec<String> {
            p.apply.iter().map(|c| c["metadata"]["labels"][SERVICE_LABEL].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(applied(&run(&ss)), ["first", "after"], "by default only the loser is held back");
        ss.spec.provider.config = Some(json!({"stopOnConflict": true}).into());
        let stopped = run(&ss);
        assert_eq!(applied(&stopped), ["first"], "services before the conflict still apply");
        let after = &status(&stopped).services[2];
        assert_eq!(after.state, State::Pending);
        assert!(after.failure_message.is_none(), "failureMessage is for Failed only");
        assert!(after.conditions[0].message.contains("stopOnConflict"), "{after:?}");
    }

    #[test]
    fn the_same_world_again_applies_nothing_and_writes_the_same_status() {
        let ready = smp(true, false);
        let mut ss = service_set(ingress());
        let first = plan(&ss, Some(&ready), &[]);
        let mut live = first.apply[0].clone();
        live["metadata"]["generation"] = json!(1);
        live["status"] = json!({"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True", "reason": "InstallSucceeded"}]});
        let second = plan(&ss, Some(&ready), std::slice::from_ref(&live));
        assert!(second.apply.is_empty() && second.delete.is_empty());
        assert_eq!(status(&second).services[0].state, State::Deployed);
        assert_eq!(status(&second).services[0].version.as_deref(), Some("ingress-4-11-3"));
        ss.status = second.status.clone();
        let third = plan(&ss, Some(&ready), std::slice::from_ref(&live));
        assert_eq!(third.status, second.status, "steady state: identical status, so no write");
    }

    #[test]
    fn removed_and_uninstalled_services_lose_their_children_but_broken_ones_keep_them() {
        let ready = smp(true, false);
        let first = plan(
            &service_set(json!([
            {"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3"},
            {"name": "gone", "namespace": "x", "template": "ingress-4-11-3"},
            {"name": "broken", "namespace": "y", "template": "ingress-4-11-3"}])),
            Some(&ready),
            &[],
        );
        let live = first.apply.clone();
        let second = plan(
            &service_set(json!([
            {"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3", "helmAction": "Uninstall"},
            {"name": "broken", "namespace": "y", "template": "ingress-4-11-3", "values": "a: [unclosed"}])),
            Some(&ready),
            &live,
        );
        let deleted: Vec<&str> = second.delete.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(deleted, ["prod-eu-1.ingress", "prod-eu-1.gone"]);
        assert_eq!(status(&second).services[0].state, State::Deleting, "uninstalling while its object exists");
        let gone: Vec<Value> = live.iter().filter(|c| c["metadata"]["name"] == "prod-eu-1.broken").cloned().collect();
        let third = plan(
            &service_set(json!([
            {"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3", "helmAction": "Uninstall"}])),
            Some(&ready),
            &gone,
        );
        assert_eq!(status(&third).services[0].state, State::Deleted, "uninstalled: its objects are gone");
        assert!(!status(&third).deployed, "a Deleted service is not Deployed");
        assert_eq!(status(&second).services[1].state, State::Failed);
        assert!(
            condition(&second, TRANSLATED).message.starts_with("broken: service \"broken\": values are not valid YAML")
        );
    }

    #[test]
    fn status_cluster_names_the_cluster_deployment_or_kcms_management_target() {
        let reference = |p: &Plan| {
            let r = status(p).cluster.clone().expect("status.cluster is set");
            (r.api_version.unwrap(), r.kind.unwrap(), r.namespace.unwrap(), r.name.unwrap())
        };
        let ready = smp(true, false);
        let text = |a: &str, b: &str, c: &str, d: &str| (a.to_string(), b.to_string(), c.to_string(), d.to_string());
        let cd = text("k0rdent.mirantis.com/v1beta1", "ClusterDeployment", "kcm-system", "prod-eu-1");
        assert_eq!(reference(&plan(&service_set(ingress()), Some(&ready), &[])), cd);
        assert_eq!(reference(&plan(&service_set(ingress()), None, &[])), cd, "also when the provider is missing");
        let mut management = service_set(ingress());
        management.spec.cluster = String::new();
        management.spec.provider.self_management = true;
        let mgmt = text("lib.projectsveltos.io/v1beta1", "SveltosCluster", "mgmt", "mgmt");
        assert_eq!(reference(&plan(&management, Some(&ready), &[])), mgmt);
        assert_eq!(reference(&deletion(&management, &[], &at(1))), mgmt);
    }

    #[test]
    fn an_unready_or_suspended_provider_changes_nothing() {
        for (smp, reason) in [(smp(false, false), "ProviderNotReady"), (smp(true, true), "ProviderSuspended")] {
            let p = plan(&service_set(ingress()), Some(&smp), &[]);
            assert!(p.apply.is_empty() && p.delete.is_empty());
            assert_eq!(condition(&p, PROVIDER_READY).reason, reason);
        }
        let p = plan(&service_set(ingress()), Some(&smp(false, false)), &[]);
        assert_eq!(
            condition(&p, PROVIDER_READY).message,
            "StateManagementProvider \"ksm-flux\" is not ready: AdapterReady=False"
        );
        assert_eq!(status(&p).provider, Some(ProviderState { ready: false, suspended: false }));
        let p = plan(&service_set(ingress()), None, &[]);
        assert_eq!(condition(&p, PROVIDER_READY).reason, "ProviderNotFound");
    }

    #[test]
    fn an_invalid_config_is_a_condition_and_applies_nothing() {
        let ready = smp(true, false);
        let mut ss = service_set(ingress());
        ss.spec.provider.config = Some(json!({"interval": "5x"}).into());
        let p = plan(&ss, Some(&ready), &[]);
        assert!(p.apply.is_empty() && p.delete.is_empty());
        let c = condition(&p, TRANSLATED);
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("InvalidConfig", "invalid provider config: interval: invalid duration \"5x\"")
        );
    }

    #[test]
    fn deletion_marks_services_deleting_and_deletes_every_child() {
        let ready = smp(true, false);
        let live = plan(&service_set(ingress()), Some(&ready), &[]).apply;
        let mut ss = service_set(ingress());
        ss.metadata.deletion_timestamp = Some(at(50));
        let p = plan(&ss, None, &live);
        assert_eq!(p.delete.len(), 1);
        assert_eq!(status(&p).services[0].state, State::Deleting);
    }

    #[test]
    fn an_object_of_a_childs_name_that_is_someone_elses_is_never_applied_over_nor_deleted() {
        let ready = smp(true, false);
        let ss = service_set(json!([
            {"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3"},
            {"name": "other", "namespace": "other", "template": "ingress-4-11-3"}]));
        let first = plan(&ss, Some(&ready), &[]);
        assert_eq!(first.unseen, first.apply.iter().map(ChildRef::of).collect::<Vec<_>>(), "both are first applies");

        // A user's HelmRelease has the name of the ingress service's child.
        let users = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "prod-eu-1.ingress", "namespace": "kcm-system"}});
        let foreign = foreign_objects(&ss, &first.unseen, |r| (r.name == "prod-eu-1.ingress").then(|| users.clone()));
        assert_eq!(foreign.len(), 1);
        let observed = Inputs {
            smp: Some(&ready),
            smp_diagnosis: None,
            template: &template,
            source: &|_| None,
            children: &[],
            foreign: &foreign,
            arbitrate: &|claims| {
                assert_eq!(claims.iter().filter(|s| !s.claims.is_empty()).count(), 1, "no claim for a taken service");
                Arbitration::default()
            },
            related: &|_| vec![],
            translations: None,
            regional: false,
            defer_status: false,
        };
        let p = decide(&flux(), &ss, &observed, Tenancy::default(), &at(100)).unwrap();
        let applied: Vec<&str> = p.apply.iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(applied, ["prod-eu-1.other"], "the other service goes on");
        let taken = &status(&p).services[0];
        assert_eq!(taken.state, State::Failed);
        assert!(
            taken.failure_message.as_deref().unwrap().starts_with(
                "HelmRelease kcm-system/prod-eu-1.ingress exists and is not this ServiceSet's: ksm-adapter did not create it"
            ),
            "{taken:?}"
        );

        // A child labelled with this ServiceSet's name but owned by an earlier one of that name.
        let mut earlier = first.apply[0].clone();
        earlier["metadata"]["ownerReferences"][0]["uid"] = json!("uid-0");
        earlier["metadata"]["labels"][crate::plan::children::SERVICE_SET_UID_LABEL] = json!("uid-0");
        let mut renamed = ss.clone();
        renamed.spec.services.retain(|s| s.name == "other");
        let p = plan(&renamed, Some(&ready), std::slice::from_ref(&earlier));
        assert!(p.delete.is_empty(), "not this ServiceSet's to delete: {:?}", p.delete);
        let p = plan(&ss, Some(&ready), std::slice::from_ref(&earlier));
        assert_eq!(p.apply.len(), 1, "only the other service applies");
        assert!(status(&p).services[0].failure_message.as_deref().unwrap().contains("(uid uid-0)"));
        let mut deleted = ss.clone();
        deleted.metadata.deletion_timestamp = Some(at(50));
        assert!(deletion(&deleted, std::slice::from_ref(&earlier), &at(100)).delete.is_empty());
    }

    #[test]
    fn a_service_set_that_cannot_be_planned_keeps_its_status_and_says_why() {
        let mut ss = service_set(json!([{"name": "a", "template": "t"}]));
        ss.status = Some(ServiceSetStatus { deployed: true, ..Default::default() });
        let status = not_translated(&ss, "PluginNotReady", "no AdapterPlugin serves \"ksm-flux\"", &at(5));
        assert!(status.deployed, "nothing else changes");
        let c = status.conditions.iter().find(|c| c.type_ == TRANSLATED).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "PluginNotReady"));
    }

    #[test]
    fn refused_children_are_recorded_until_every_child_applies() {
        let mut status = ServiceSetStatus::default();
        let child = ChildRef {
            api_version: "helm.toolkit.fluxcd.io/v2".into(),
            kind: "HelmRelease".into(),
            namespace: "a".into(),
            name: "b".into(),
        };
        let rejected = Refusal::Rejected { child, message: "spec.chart: Required value".into() };
        applied(&mut status, &Refusals(vec![rejected]), Some(2), &at(5));
        let c = status.conditions.iter().find(|c| c.type_ == APPLIED).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "ApplyFailed"));
        assert!(c.message.contains("spec.chart"));
        applied(&mut status, &Refusals::default(), Some(2), &at(6));
        assert!(status.conditions.iter().all(|c| c.type_ != APPLIED));
    }
}
