//! Where a ServiceSet's workloads are judged, and whose rules are a tenant's there.

use crate::k0rdent::{NamespacedName, ServiceSet};
use crate::plan::route::cluster_kubeconfig;
use kube::ResourceExt;

/// The kubeconfig Secret of the cluster `service_set`'s services go to (`<cluster>-kubeconfig`,
/// as kcm); `None` for the management cluster (self-management, or no `spec.cluster`).
pub fn kubeconfig_secret(service_set: &ServiceSet) -> Option<NamespacedName> {
    let spec = &service_set.spec;
    let remote = !spec.provider.self_management && !spec.cluster.is_empty();
    remote.then(|| cluster_kubeconfig(&service_set.namespace().unwrap_or_default(), &spec.cluster))
}

/// The namespace whose rules are a tenant's and are confined to it: `service_set`'s, when its
/// workloads are on the management cluster, which the host reads with its own broad RBAC, and
/// it is not `system_namespace` (whose rules are the operator's). On another cluster the host
/// reads with the credentials of that cluster's kubeconfig Secret, which sit in the ServiceSet's
/// namespace: the rules read no more than those credentials may.
pub fn tenant<'s>(service_set: &'s ServiceSet, system_namespace: &str) -> Option<&'s str> {
    let namespace = service_set.metadata.namespace.as_deref()?;
    (kubeconfig_secret(service_set).is_none() && namespace != system_namespace).then_some(namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service_set(namespace: &str, cluster: &str, self_management: bool) -> ServiceSet {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"namespace": namespace, "name": "s"},
            "spec": {"cluster": cluster, "provider": {"name": "ksm-flux", "selfManagement": self_management}},
        }))
        .unwrap()
    }

    #[test]
    fn a_tenants_rules_are_confined_on_the_management_cluster_only() {
        let remote = service_set("team", "prod", false);
        assert_eq!(kubeconfig_secret(&remote), Some(NamespacedName::new("team", "prod-kubeconfig")));
        assert_eq!(
            tenant(&remote, "kcm-system"),
            None,
            "another cluster: its kubeconfig's credentials bound the reads"
        );
        for management in [service_set("team", "", false), service_set("team", "prod", true)] {
            assert_eq!(kubeconfig_secret(&management), None);
            assert_eq!(tenant(&management, "kcm-system"), Some("team"));
        }
        assert_eq!(tenant(&service_set("kcm-system", "", true), "kcm-system"), None, "the operator's rules");
    }
}
