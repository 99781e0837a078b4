//! The permissions the host needs for an SMP: its own (read k0rdent objects and AdapterPlugins,
//! own ServiceSets' finalizers and status, write the serving plugin's kinds, and in `manage`
//! mode SMP status) and reading the objects the SMP references.

use super::discovery::Discovery;
use crate::controller::plumbing::access::{self, Permission};
use crate::controller::settings::Mode;
use crate::k0rdent::StateManagementProvider;
use crate::smp::RbacCheck;
use ksm_plugin_sdk::contract::ObjectKind;
use kube::Client;

/// What the host itself does for an SMP in `mode`, served by a plugin creating `kinds` and
/// reading `reads` (watched, never fetched one by one).
pub fn host_permissions<'a>(
    mode: Mode,
    kinds: impl IntoIterator<Item = &'a ObjectKind>,
    reads: impl IntoIterator<Item = &'a ObjectKind>,
) -> Vec<Permission> {
    let k0rdent = "k0rdent.mirantis.com";
    let read = ["get", "list", "watch"];
    let mut needed = Permission::each(&["get", "list", "watch", "patch"], k0rdent, "servicesets");
    needed.push(Permission::status_update(k0rdent, "servicesets"));
    needed.extend(Permission::each(&read, k0rdent, "statemanagementproviders"));
    needed.extend(Permission::each(&read, k0rdent, "servicetemplates"));
    needed.extend(Permission::each(&["get"], "apiextensions.k8s.io", "customresourcedefinitions"));
    needed.extend(Permission::each(&read, crate::adapter_plugin::GROUP, "adapterplugins"));
    needed.push(Permission::status_update(crate::adapter_plugin::GROUP, "adapterplugins"));
    if mode == Mode::Manage {
        needed.push(Permission::status_update(k0rdent, "statemanagementproviders"));
    }
    for kind in kinds {
        needed.extend(Permission::each(
            &["get", "list", "watch", "create", "patch", "delete"],
            &kind.group,
            &kind.plural,
        ));
    }
    for kind in reads {
        needed.extend(Permission::each(&["list", "watch"], &kind.group, &kind.plural));
    }
    needed
}

/// Checks `needed` and reading the objects `smp` references (whose kinds `discovery` finds).
pub async fn check(
    client: &Client,
    discovery: &Discovery,
    smp: &StateManagementProvider,
    mut needed: Vec<Permission>,
) -> RbacCheck {
    for reference in std::iter::once(&smp.spec.adapter).chain(&smp.spec.provisioner) {
        match discovery.kind(reference).await {
            Ok(Some((resource, namespaced))) => needed.push(Permission {
                verb: "get",
                group: resource.group,
                resource: resource.plural,
                subresource: None,
                namespace: namespaced.then(|| reference.namespace.clone()),
            }),
            // A kind that does not exist is reported by the adapter/provisioner checks.
            Ok(None) => {}
            Err(e) => return RbacCheck::Unknown(format!("discovering {}: {e}", reference)),
        }
    }
    access::check(client, &needed).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helm_release() -> ObjectKind {
        ObjectKind {
            group: "helm.toolkit.fluxcd.io".into(),
            version: "v2".into(),
            kind: "HelmRelease".into(),
            plural: "helmreleases".into(),
            namespaced: true,
        }
    }

    fn described(permissions: &[Permission]) -> Vec<String> {
        permissions.iter().map(Permission::describe).collect()
    }

    #[test]
    fn the_host_needs_its_own_objects_and_the_plugins_kinds() {
        let observe = described(&host_permissions(Mode::Observe, &[helm_release()], &[]));
        for needed in [
            "patch servicesets.k0rdent.mirantis.com",
            "update servicesets/status.k0rdent.mirantis.com",
            "watch adapterplugins.ksm.k0rdent.mirantis.com",
            "create helmreleases.helm.toolkit.fluxcd.io",
            "delete helmreleases.helm.toolkit.fluxcd.io",
        ] {
            assert!(observe.iter().any(|p| p == needed), "{needed} in {observe:?}");
        }
        assert!(
            !observe.iter().any(|p| p.starts_with("update statemanagementproviders")),
            "observe mode writes no SMP"
        );
        let manage = described(&host_permissions(Mode::Manage, [], []));
        assert!(manage.iter().any(|p| p == "update statemanagementproviders/status.k0rdent.mirantis.com"));
        assert!(!manage.iter().any(|p| p.contains("helmreleases")), "no plugin serving: no kinds");
        let summaries = ObjectKind {
            group: "config.projectsveltos.io".into(),
            kind: "ClusterSummary".into(),
            plural: "clustersummaries".into(),
            ..helm_release()
        };
        let reading = described(&host_permissions(Mode::Observe, [], &[summaries]));
        let read: Vec<&String> = reading.iter().filter(|p| p.contains("clustersummaries")).collect();
        assert_eq!(
            read,
            ["list clustersummaries.config.projectsveltos.io", "watch clustersummaries.config.projectsveltos.io"]
        );
    }
}
