//! Whether a ServiceSet is this host's to reconcile now, and what that calls for: decided from
//! its provider, its finalizers and whether it is being deleted, before any plugin is asked.

use crate::k0rdent::{ServiceSet, StateManagementProvider};
use crate::smp::{self, AdapterIdentity};
use kube::ResourceExt;

/// What a ServiceSet's reconcile does first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Not this host's: nothing to do until it changes.
    Leave,
    /// Its provider no longer sends it to this host: its claims go, its children stay.
    Release,
    /// Whether this host serves it cannot be told (an invalid SMP selector): wait for a change.
    Undecided(String),
    /// Being deleted, and this host's: delete its children, then drop the finalizer.
    CleanUp,
    /// This host's, but its finalizer is not on yet: add it first.
    AddFinalizer,
    /// This host's, its finalizer on: serve it (decide its plan and carry it out).
    Serve,
}

/// The finalizers a ServiceSet carries that matter to this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finalizers {
    /// This installation's own.
    pub mine: bool,
    /// The one every installation shared before each had its own.
    pub legacy: bool,
}

/// The gate of `service_set`, whose provider is `smp` (`None`: not found), for the host
/// `identity`. Another installation's finalizer is never this host's; the shared legacy one is
/// the business of the host the SMP names (of any, once the SMP is gone). A ServiceSet this
/// host served keeps being reconciled after its SMP is gone, to be told so.
pub fn gate(
    service_set: &ServiceSet,
    smp: Option<&StateManagementProvider>,
    identity: &AdapterIdentity,
    finalizers: Finalizers,
) -> Gate {
    let legacy = finalizers.legacy && smp.is_none_or(|smp| identity.is_adapter_of(smp));
    let ours = finalizers.mine || legacy;
    if service_set.metadata.deletion_timestamp.is_some() {
        // Ours to clean up even if the SMP is gone or no longer names this host.
        return if ours { Gate::CleanUp } else { Gate::Leave };
    }
    match smp.map(|smp| smp::serves(identity, smp, service_set.labels())) {
        Some(Ok(true)) => {}
        Some(Ok(false)) => return Gate::Release,
        Some(Err(e)) => return Gate::Undecided(e.to_string()),
        None if ours => {}
        None => return Gate::Leave,
    }
    if finalizers.mine { Gate::Serve } else { Gate::AddFinalizer }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn identity() -> AdapterIdentity {
        AdapterIdentity { name: "ksm-adapter".into(), namespace: "kcm-system".into() }
    }

    fn smp(adapter: &str, selector: serde_json::Value) -> StateManagementProvider {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "StateManagementProvider",
            "metadata": {"name": "ksm-flux"},
            "spec": {"adapter": {"apiVersion": "apps/v1", "kind": "Deployment", "name": adapter, "namespace": "kcm-system",
                                 "readinessRule": "true"},
                     "selector": selector},
        }))
        .unwrap()
    }

    fn service_set(deleting: bool) -> ServiceSet {
        let mut object = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "prod", "namespace": "team", "labels": {"env": "prod"}},
            "spec": {"provider": {"name": "ksm-flux"}},
        });
        if deleting {
            object["metadata"]["deletionTimestamp"] = json!("2026-11-25T10:00:00Z");
        }
        serde_json::from_value(object).unwrap()
    }

    const NONE: Finalizers = Finalizers { mine: false, legacy: false };
    const MINE: Finalizers = Finalizers { mine: true, legacy: false };
    const LEGACY: Finalizers = Finalizers { mine: false, legacy: true };

    #[test]
    fn a_service_set_of_this_host_gets_the_finalizer_then_a_plan() {
        let ours = smp("ksm-adapter", json!({}));
        assert_eq!(gate(&service_set(false), Some(&ours), &identity(), NONE), Gate::AddFinalizer);
        assert_eq!(gate(&service_set(false), Some(&ours), &identity(), MINE), Gate::Serve);
        assert_eq!(gate(&service_set(false), Some(&ours), &identity(), LEGACY), Gate::AddFinalizer, "replaced by ours");
    }

    #[test]
    fn another_hosts_or_an_unselected_service_set_is_released_or_left() {
        let theirs = smp("other-adapter", json!({}));
        assert_eq!(gate(&service_set(false), Some(&theirs), &identity(), NONE), Gate::Release);
        let unselected = smp("ksm-adapter", json!({"matchLabels": {"env": "dev"}}));
        assert_eq!(gate(&service_set(false), Some(&unselected), &identity(), MINE), Gate::Release);
        assert_eq!(gate(&service_set(false), None, &identity(), NONE), Gate::Leave, "no SMP, never ours");
        assert_eq!(gate(&service_set(false), None, &identity(), MINE), Gate::Serve, "told its SMP is gone");
        let invalid = smp("ksm-adapter", json!({"matchExpressions": [{"key": "env", "operator": "Near"}]}));
        assert!(matches!(gate(&service_set(false), Some(&invalid), &identity(), MINE), Gate::Undecided(_)));
    }

    #[test]
    fn only_this_hosts_deleted_service_sets_are_cleaned_up() {
        let ours = smp("ksm-adapter", json!({}));
        let theirs = smp("other-adapter", json!({}));
        assert_eq!(gate(&service_set(true), Some(&theirs), &identity(), MINE), Gate::CleanUp, "even if the SMP moved");
        assert_eq!(gate(&service_set(true), None, &identity(), MINE), Gate::CleanUp, "even if the SMP is gone");
        assert_eq!(gate(&service_set(true), Some(&ours), &identity(), NONE), Gate::Leave);
        assert_eq!(gate(&service_set(true), Some(&ours), &identity(), LEGACY), Gate::CleanUp);
        assert_eq!(gate(&service_set(true), Some(&theirs), &identity(), LEGACY), Gate::Leave, "the named host's");
        assert_eq!(
            gate(&service_set(true), None, &identity(), LEGACY),
            Gate::CleanUp,
            "any host's once the SMP is gone"
        );
    }
}
