//! Which status changes a person should see as Kubernetes Events: transitions only, never a
//! reconcile that changed nothing (as Flux controllers do).

use crate::adapter_plugin::AdapterPluginStatus;
use crate::conditions::types::SERVICES_READY;
use crate::k0rdent::{ServiceSetStatus, State};

/// One Event to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// A Warning (else Normal).
    pub warning: bool,
    /// Short PascalCase reason.
    pub reason: String,
    /// What happened, for a person.
    pub message: String,
}

/// Condition types whose changes are not worth an Event: `ServicesInReadyState` counts progress
/// (`1/3`, `2/3`, ...), which the `Deployed` Event sums up.
const QUIET_CONDITIONS: &[&str] = &[SERVICES_READY];

/// The Events for a ServiceSet whose status goes from `old` to `new`: a service that fails, a
/// condition that turns False (or changes its reason while False) or recovers, and the
/// ServiceSet becoming deployed. Progress (Pending → Provisioning → Deployed per service) makes
/// none: at thousands of ServiceSets every Event is an API request.
pub fn service_set_events(old: Option<&ServiceSetStatus>, new: &ServiceSetStatus) -> Vec<Note> {
    let mut notes = Vec::new();
    for service in new.services.iter().filter(|s| s.state == State::Failed) {
        let before = old.and_then(|o| o.services.iter().find(|s| s.name == service.name));
        if before.is_some_and(|b| b.state == State::Failed) {
            continue;
        }
        let from = before.map_or("new".to_string(), |b| format!("{:?}", b.state));
        let why = service.failure_message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
        notes.push(Note {
            warning: true,
            reason: "ServiceFailed".into(),
            message: format!("service {:?}: {from} → Failed{why}", service.name),
        });
    }
    for condition in new.conditions.iter().filter(|c| !QUIET_CONDITIONS.contains(&c.type_.as_str())) {
        let before = old.and_then(|o| o.conditions.iter().find(|c| c.type_ == condition.type_));
        let (was_false, is_false) = (before.is_some_and(|b| b.status == "False"), condition.status == "False");
        let reason_changed = before.is_none_or(|b| b.reason != condition.reason);
        if is_false && (!was_false || reason_changed) {
            let message = format!("{}: {}", condition.type_, condition.message);
            notes.push(Note { warning: true, reason: condition.reason.clone(), message });
        } else if was_false && !is_false {
            let message = format!("{} is {} again", condition.type_, condition.status);
            notes.push(Note { warning: false, reason: condition.reason.clone(), message });
        }
    }
    if new.deployed && !old.is_some_and(|o| o.deployed) {
        let message = format!("all {} services deployed", new.services.len());
        notes.push(Note { warning: false, reason: "Deployed".into(), message });
    }
    notes
}

/// The Events for an AdapterPlugin whose status goes from `old` to `new`: a version that starts
/// serving, and a new error.
pub fn adapter_plugin_events(old: Option<&AdapterPluginStatus>, new: &AdapterPluginStatus) -> Vec<Note> {
    let mut notes = Vec::new();
    if !new.sha256.is_empty() && old.is_none_or(|o| o.sha256 != new.sha256) {
        let plugin = new.plugin.as_ref().map(|p| format!("{} {}", p.name, p.version)).unwrap_or_default();
        let message = format!("plugin {plugin} (sha256 {}) serving", new.sha256);
        notes.push(Note { warning: false, reason: "PluginLoaded".into(), message });
    }
    if !new.error.is_empty() && old.is_none_or(|o| o.error != new.error) {
        let failed = new.conditions.iter().find(|c| c.status == "False");
        let reason = failed.map_or("ProviderContested", |c| c.reason.as_str());
        notes.push(Note { warning: true, reason: reason.into(), message: new.error.clone() });
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{self, Status};
    use crate::k0rdent::{ServiceState, ServiceType};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn status(state: State, translated: Status, deployed: bool) -> ServiceSetStatus {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        ServiceSetStatus {
            deployed,
            services: vec![ServiceState {
                service_type: ServiceType::Helm,
                name: "ingress".into(),
                namespace: "ingress".into(),
                template: "t".into(),
                state,
                last_state_transition_time: now.clone(),
                version: None,
                failure_message: (state == State::Failed).then(|| "chart not found".into()),
                last_deployed_hash: None,
                conditions: vec![],
            }],
            conditions: vec![conditions::new("ServicesTranslated", translated, "Why", "the reason", Some(1), &now)],
            ..Default::default()
        }
    }

    #[test]
    fn transitions_make_events_and_an_unchanged_status_none() {
        let provisioning = status(State::Provisioning, Status::True, false);
        assert_eq!(service_set_events(Some(&provisioning), &provisioning), vec![]);
        let failed = status(State::Failed, Status::False, false);
        let notes = service_set_events(Some(&provisioning), &failed);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].warning && notes[0].message.contains("Provisioning → Failed: chart not found"));
        assert_eq!((notes[1].reason.as_str(), notes[1].message.as_str()), ("Why", "ServicesTranslated: the reason"));
        let deployed = status(State::Deployed, Status::True, true);
        let notes = service_set_events(Some(&failed), &deployed);
        let reasons: Vec<&str> = notes.iter().map(|n| n.reason.as_str()).collect();
        assert_eq!(reasons, ["Why", "Deployed"], "recovery of the condition, and deployed");
        assert!(notes.iter().all(|n| !n.warning));
    }

    #[test]
    fn progress_makes_no_events() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let pending = status(State::Pending, Status::True, false);
        let mut provisioning = status(State::Provisioning, Status::True, false);
        let progress =
            |n: &str| conditions::new("ServicesInReadyState", Status::False, "NotAllReady", n, Some(1), &now);
        let mut before = pending.clone();
        before.conditions.push(progress("0/1"));
        provisioning.conditions.push(progress("1/2"));
        assert_eq!(service_set_events(Some(&before), &provisioning), vec![]);
        let mut changed_message = provisioning.clone();
        changed_message.conditions[0].message = "another message".into();
        assert_eq!(service_set_events(Some(&provisioning), &changed_message), vec![], "same reason: no Event");
    }

    #[test]
    fn a_plugin_says_when_a_version_serves_and_when_a_new_error_comes() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let serving = AdapterPluginStatus { ready: true, sha256: "abc".into(), ..Default::default() };
        assert_eq!(adapter_plugin_events(Some(&serving), &serving), vec![]);
        assert_eq!(adapter_plugin_events(None, &serving)[0].reason, "PluginLoaded");
        let failing = AdapterPluginStatus {
            error: "not a WASM component".into(),
            conditions: vec![conditions::new("Compiled", Status::False, "CompileFailed", "x", Some(2), &now)],
            ..serving.clone()
        };
        let notes = adapter_plugin_events(Some(&serving), &failing);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].warning && notes[0].reason == "CompileFailed");
    }
}
