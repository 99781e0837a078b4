//! Which ServiceSets this host serves: those whose SMP names this host as its adapter.

use std::collections::BTreeMap;

use super::selector::{InvalidRequirement, selector_matches};
use crate::k0rdent::StateManagementProvider;

/// The adapter workload this host runs as (its own Deployment's name and namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterIdentity {
    /// Deployment name.
    pub name: String,
    /// Deployment namespace.
    pub namespace: String,
}

impl AdapterIdentity {
    /// Whether `smp` names this host as its adapter (`spec.adapter.{name,namespace}`).
    pub fn is_adapter_of(&self, smp: &StateManagementProvider) -> bool {
        smp.spec.adapter.name == self.name && smp.spec.adapter.namespace == self.namespace
    }
}

/// An SMP naming this host whose `spec.selector` is not valid: whether it serves a ServiceSet
/// cannot be told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("StateManagementProvider {smp}: spec.selector: {source}")]
pub struct InvalidSelector {
    /// The SMP's name.
    pub smp: String,
    /// What is wrong with its selector.
    pub source: InvalidRequirement,
}

/// Whether this host handles a ServiceSet with `service_set_labels` whose provider is `smp`:
/// `spec.adapter.{name,namespace}` must equal `identity` and the labels must match
/// `spec.selector`. An SMP naming another adapter is `Ok(false)` without looking at its selector;
/// an invalid selector of one naming this host is an error.
pub fn serves(
    identity: &AdapterIdentity,
    smp: &StateManagementProvider,
    service_set_labels: &BTreeMap<String, String>,
) -> Result<bool, InvalidSelector> {
    if !identity.is_adapter_of(smp) {
        return Ok(false);
    }
    selector_matches(&smp.spec.selector, service_set_labels)
        .map_err(|source| InvalidSelector { smp: smp.metadata.name.clone().unwrap_or_default(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(selector: serde_json::Value) -> StateManagementProvider {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1",
            "kind": "StateManagementProvider",
            "metadata": {"name": "flux"},
            "spec": {
                "selector": selector,
                "adapter": {"apiVersion": "apps/v1", "kind": "Deployment",
                            "name": "ksm-adapter", "namespace": "kcm-system"},
            },
        }))
        .unwrap()
    }

    fn me() -> AdapterIdentity {
        AdapterIdentity { name: "ksm-adapter".into(), namespace: "kcm-system".into() }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn serves_when_identity_and_selector_match() {
        let smp = smp(json!({"matchLabels": {"ksm.k0rdent.mirantis.com/adapter": "flux-adapter"}}));
        let ours = labels(&[("ksm.k0rdent.mirantis.com/adapter", "flux-adapter")]);
        assert_eq!(serves(&me(), &smp, &ours), Ok(true));
        let theirs = labels(&[("ksm.k0rdent.mirantis.com/adapter", "kcm")]);
        assert_eq!(serves(&me(), &smp, &theirs), Ok(false));
    }

    #[test]
    fn other_adapter_name_or_namespace_is_not_served() {
        let smp = smp(json!({}));
        let other_name = AdapterIdentity { name: "kcm-controller-manager".into(), ..me() };
        assert_eq!(serves(&other_name, &smp, &labels(&[])), Ok(false));
        let other_ns = AdapterIdentity { namespace: "default".into(), ..me() };
        assert_eq!(serves(&other_ns, &smp, &labels(&[])), Ok(false));
        assert_eq!(serves(&me(), &smp, &labels(&[])), Ok(true), "empty selector matches all");
    }

    #[test]
    fn invalid_selector_is_an_error_only_for_our_smp() {
        let smp = smp(json!({"matchExpressions": [{"key": "env", "operator": "In"}]}));
        let err = serves(&me(), &smp, &labels(&[])).unwrap_err().to_string();
        assert!(err.starts_with("StateManagementProvider flux: spec.selector:"), "{err}");
        let other = AdapterIdentity { name: "other".into(), ..me() };
        assert_eq!(serves(&other, &smp, &labels(&[])), Ok(false));
    }
}
