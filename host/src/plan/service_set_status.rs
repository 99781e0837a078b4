//! The ServiceSet status the host writes: computed from the previous status and this round's
//! service states, so that an unchanged world gives an identical status (and no write).
//!
//! `lastDeployedHash` (kcm 1.12) is the sha256 of the fingerprint the plugin gives of what the
//! CD tool records as deployed (`deployed-hash`), or, from a plugin that gives none, of the
//! hashes of what the host applied for the service: the same deployment has the same one
//! whenever it was applied. It is stamped on a Deployed service, and the health verdict
//! ([`crate::health::verdict`]) takes a Deployed service back to Provisioning, with the hash it
//! had, until the deployment it names is verified; a service that is not Deployed keeps the last
//! one.

use crate::conditions::types::{SERVICE_READY, SERVICES_READY};
use crate::conditions::{self, bounded, reasons};
use crate::k0rdent::{ServiceSet, ServiceSetStatus, ServiceState, ServiceType, State};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ksm_plugin_sdk::contract::{ServiceState as PluginState, ServiceStatus, ServiceType as PluginType};
use ksm_plugin_sdk::k0rdent::Service;
use sha2::{Digest, Sha256};

/// `status.cluster` as kcm's own adapter writes it; kcm's MultiClusterService controller skips a
/// ServiceSet without it. The ServiceSet's ClusterDeployment, or for self-management (the
/// `selfManagement` flag, or no cluster named) kcm's pseudo-target `SveltosCluster mgmt/mgmt`.
pub fn cluster_reference(service_set: &ServiceSet) -> ObjectReference {
    let reference = |api_version: &str, kind: &str, namespace: &str, name: &str| ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..Default::default()
    };
    let spec = &service_set.spec;
    if spec.provider.self_management || spec.cluster.is_empty() {
        reference("lib.projectsveltos.io/v1beta1", "SveltosCluster", "mgmt", "mgmt")
    } else {
        let namespace = service_set.metadata.namespace.as_deref().unwrap_or_default();
        reference("k0rdent.mirantis.com/v1beta1", "ClusterDeployment", namespace, &spec.cluster)
    }
}

/// The status entry of one spec service, given its status this round. The transition time is
/// kept from `previous` unless the state changed; `version` is the spec version (or the
/// template name) once Deployed, as kcm's dependency gating requires, and `lastDeployedHash`
/// the fingerprint of `status.deployed_hash` (see the module docs). The plugin's message is
/// `failureMessage` for a Failed service (kcm sets it for Failed only), else the message of the
/// service's condition `Ready=False`, whose reason is the state.
pub fn service_state(
    service: &Service,
    status: &ServiceStatus,
    previous: Option<&ServiceState>,
    now: &Time,
) -> ServiceState {
    let state = state(status.state);
    let last_state_transition_time = match previous {
        Some(p) if p.state == state => p.last_state_transition_time.clone(),
        _ => now.clone(),
    };
    ServiceState {
        service_type: service_type(status.service_type),
        name: service.name.clone(),
        namespace: service.namespace.clone(),
        template: service.template.clone(),
        state,
        last_state_transition_time,
        version: (state == State::Deployed).then(|| service.expected_version().to_string()),
        failure_message: status.failure_message.as_deref().filter(|_| state == State::Failed).map(bounded),
        last_deployed_hash: match (state, &status.deployed_hash) {
            (State::Deployed, Some(deployed)) => Some(fingerprint(deployed)),
            _ => previous.and_then(|p| p.last_deployed_hash.clone()),
        },
        conditions: match status.failure_message.as_deref() {
            Some(note) if state != State::Failed => {
                let mut conditions = previous.map(|p| p.conditions.clone()).unwrap_or_default();
                conditions.retain(|c| c.type_ == SERVICE_READY);
                conditions::mark_false(&mut conditions, SERVICE_READY, &reasons::in_state(state), note, None, now);
                conditions
            }
            _ => Vec::new(),
        },
    }
}

/// The status entry of a spec service whose state the host decides, not the plugin: `Deleting`
/// while a ServiceSet is deleted, and for `helmAction: Uninstall` `Deleting` while any of the
/// service's objects exists, then `Deleted` (kcm's states). The transition time is kept from
/// `previous` unless the state changed.
pub fn host_decided(
    service: &Service,
    service_type: ServiceType,
    state: State,
    previous: Option<&ServiceState>,
    now: &Time,
) -> ServiceState {
    ServiceState {
        service_type,
        name: service.name.clone(),
        namespace: service.namespace.clone(),
        template: service.template.clone(),
        state,
        last_state_transition_time: match previous {
            Some(p) if p.state == state => p.last_state_transition_time.clone(),
            _ => now.clone(),
        },
        version: None,
        failure_message: None,
        last_deployed_hash: previous.and_then(|p| p.last_deployed_hash.clone()),
        conditions: Vec::new(),
    }
}

/// `lastDeployedHash` of a plugin's `deployed-hash`: its sha256, in hex.
fn fingerprint(deployed: &str) -> String {
    hex::encode(Sha256::digest(deployed.as_bytes()))
}

/// Sets `services`, `deployed` and the `ServicesInReadyState` condition of `status`.
pub fn set_services(status: &mut ServiceSetStatus, services: Vec<ServiceState>, generation: Option<i64>, now: &Time) {
    let ready = services.iter().filter(|s| s.state == State::Deployed).count();
    let total = services.len();
    status.deployed = ready == total;
    status.services = services;
    let message = format!("{ready}/{total}");
    let conditions = &mut status.conditions;
    if ready == total {
        conditions::mark_true(conditions, SERVICES_READY, reasons::SUCCEEDED, &message, generation, now);
    } else {
        conditions::mark_false(conditions, SERVICES_READY, reasons::SERVICES_NOT_READY, &message, generation, now);
    }
}

fn state(s: PluginState) -> State {
    match s {
        PluginState::Deployed => State::Deployed,
        PluginState::Provisioning => State::Provisioning,
        PluginState::Failed => State::Failed,
        PluginState::Pending => State::Pending,
        PluginState::Deleting => State::Deleting,
    }
}

/// The host's service type of the plugin's.
pub fn service_type(t: PluginType) -> ServiceType {
    match t {
        PluginType::Helm => ServiceType::Helm,
        PluginType::Kustomize => ServiceType::Kustomize,
        PluginType::Resource => ServiceType::Resource,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::MAX_MESSAGE;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn service(version: Option<&str>) -> Service {
        Service {
            name: "ingress-nginx".into(),
            namespace: "ingress-nginx".into(),
            template: "ingress-nginx-4-11-3".into(),
            version: version.map(String::from),
            ..Default::default()
        }
    }

    fn status(state: PluginState) -> ServiceStatus {
        let deployed_hash = (state == PluginState::Deployed).then(|| "chart 4.11.3, digest sha256:1".into());
        ServiceStatus {
            state,
            service_type: PluginType::Helm,
            version: Some("4.11.3".into()),
            failure_message: None,
            deployed_hash,
        }
    }

    #[test]
    fn the_deployed_hash_is_stamped_once_deployed_and_kept_until_the_next_deployment() {
        let pending = service_state(&service(None), &status(PluginState::Provisioning), None, &at(0));
        assert_eq!(pending.last_deployed_hash, None, "nothing deployed yet");
        let deployed = service_state(&service(None), &status(PluginState::Deployed), Some(&pending), &at(1));
        let stamped = deployed.last_deployed_hash.clone().unwrap();
        assert_eq!(stamped.len(), 64, "a sha256 in hex: {stamped}");
        let again = service_state(&service(None), &status(PluginState::Deployed), Some(&deployed), &at(2));
        assert_eq!(again, deployed, "the same deployment, re-applied later: the same entry");
        let upgrading = service_state(&service(None), &status(PluginState::Provisioning), Some(&deployed), &at(3));
        assert_eq!(upgrading.last_deployed_hash, Some(stamped.clone()), "the last deployment, until the next");
        let next = ServiceStatus {
            deployed_hash: Some("chart 4.12.0, digest sha256:2".into()),
            ..status(PluginState::Deployed)
        };
        let upgraded = service_state(&service(None), &next, Some(&upgrading), &at(4));
        assert_ne!(upgraded.last_deployed_hash, Some(stamped));
        let deleting = host_decided(&service(None), ServiceType::Helm, State::Deleting, Some(&upgraded), &at(5));
        assert_eq!(deleting.last_deployed_hash, upgraded.last_deployed_hash);
    }

    #[test]
    fn transition_time_changes_only_with_the_state() {
        let first = service_state(&service(None), &status(PluginState::Provisioning), None, &at(10));
        assert_eq!(first.last_state_transition_time, at(10));
        let same = service_state(&service(None), &status(PluginState::Provisioning), Some(&first), &at(20));
        assert_eq!(same, first, "an unchanged state gives an identical entry");
        let deployed = service_state(&service(None), &status(PluginState::Deployed), Some(&same), &at(30));
        assert_eq!(deployed.last_state_transition_time, at(30));
    }

    #[test]
    fn a_failure_message_is_bounded() {
        let long = "é".repeat(MAX_MESSAGE);
        let failed = ServiceStatus { failure_message: Some(long), ..status(PluginState::Failed) };
        let entry = service_state(&service(None), &failed, None, &at(0));
        assert!(entry.failure_message.unwrap().len() <= MAX_MESSAGE);
    }

    #[test]
    fn version_is_the_spec_version_or_template_once_deployed() {
        let provisioning = service_state(&service(Some("v1")), &status(PluginState::Provisioning), None, &at(0));
        assert_eq!(provisioning.version, None);
        let deployed = service_state(&service(Some("v1")), &status(PluginState::Deployed), None, &at(0));
        assert_eq!(deployed.version.as_deref(), Some("v1"), "the spec version, not the chart version");
        let no_version = service_state(&service(None), &status(PluginState::Deployed), None, &at(0));
        assert_eq!(no_version.version.as_deref(), Some("ingress-nginx-4-11-3"));
    }

    #[test]
    fn deployed_and_ready_condition_count_services() {
        let mut s = ServiceSetStatus::default();
        let deployed = service_state(&service(None), &status(PluginState::Deployed), None, &at(0));
        let failed = service_state(&service(None), &status(PluginState::Failed), None, &at(0));
        set_services(&mut s, vec![deployed.clone(), failed], Some(3), &at(5));
        assert!(!s.deployed);
        let c = &s.conditions[0];
        assert_eq!((c.type_.as_str(), c.status.as_str(), c.message.as_str()), (SERVICES_READY, "False", "1/2"));
        set_services(&mut s, vec![deployed.clone(), deployed], Some(3), &at(9));
        assert!(s.deployed);
        assert_eq!((s.conditions[0].status.as_str(), s.conditions[0].message.as_str()), ("True", "2/2"));
        assert_eq!(s.conditions[0].last_transition_time, at(9));
        set_services(&mut s, vec![], Some(3), &at(12));
        assert_eq!(s.conditions[0].last_transition_time, at(9), "True again: time kept");
        assert_eq!(s.conditions.len(), 1);
    }
}
