//! The host's own permissions, checked with SelfSubjectAccessReviews (kcm creates roles for an
//! SMP; the host only asks the API server what it may do).

use crate::smp::RbacCheck;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};

/// One permission: a verb on a resource (optionally a subresource) of a group, in all namespaces
/// or in one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permission {
    /// Verb, e.g. `list`.
    pub verb: &'static str,
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
    /// Subresource, e.g. `status`.
    pub subresource: Option<&'static str>,
    /// Namespace; `None` for all namespaces or cluster-scoped resources.
    pub namespace: Option<String>,
}

impl Permission {
    /// `verbs` on `resource` of `group`, in every namespace.
    pub fn each(verbs: &[&'static str], group: &str, resource: &str) -> Vec<Self> {
        verbs
            .iter()
            .map(|verb| Self {
                verb,
                group: group.into(),
                resource: resource.into(),
                subresource: None,
                namespace: None,
            })
            .collect()
    }

    /// `update` on the status subresource of `resource`.
    pub fn status_update(group: &str, resource: &str) -> Self {
        Self {
            verb: "update",
            group: group.into(),
            resource: resource.into(),
            subresource: Some("status"),
            namespace: None,
        }
    }

    /// How a person names it: `list helmreleases.helm.toolkit.fluxcd.io`.
    pub fn describe(&self) -> String {
        let sub = self.subresource.map(|s| format!("/{s}")).unwrap_or_default();
        let group = if self.group.is_empty() { String::new() } else { format!(".{}", self.group) };
        let scope = self.namespace.as_ref().map(|ns| format!(" in namespace {ns}")).unwrap_or_default();
        format!("{} {}{sub}{group}{scope}", self.verb, self.resource)
    }
}

/// Asks the API server whether this host has every permission in `needed`.
pub async fn check(client: &Client, needed: &[Permission]) -> RbacCheck {
    let api = Api::<SelfSubjectAccessReview>::all(client.clone());
    let mut denied = Vec::new();
    for permission in needed {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(permission.verb.into()),
                    group: Some(permission.group.clone()),
                    resource: Some(permission.resource.clone()),
                    subresource: permission.subresource.map(String::from),
                    namespace: permission.namespace.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &review).await {
            Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => denied.push(permission.describe()),
            Err(e) => return RbacCheck::Unknown(format!("SelfSubjectAccessReview for {}: {e}", permission.describe())),
        }
    }
    if denied.is_empty() { RbacCheck::Allowed } else { RbacCheck::Denied(denied) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_are_named_as_a_person_would() {
        let list = &Permission::each(&["list"], "helm.toolkit.fluxcd.io", "helmreleases")[0];
        assert_eq!(list.describe(), "list helmreleases.helm.toolkit.fluxcd.io");
        let status = Permission::status_update("k0rdent.mirantis.com", "servicesets");
        assert_eq!(status.describe(), "update servicesets/status.k0rdent.mirantis.com");
        let mut get = Permission::each(&["get"], "apps", "deployments").remove(0);
        get.namespace = Some("kcm-system".into());
        assert_eq!(get.describe(), "get deployments.apps in namespace kcm-system");
    }
}
