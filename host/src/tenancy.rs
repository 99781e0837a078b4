//! Who a Flux object runs as on the cluster it is on. helm- and kustomize-controller apply a
//! HelmRelease or Kustomization without `spec.kubeConfig` to their own cluster, with their own
//! cluster-wide rights unless `spec.serviceAccountName` names an account to impersonate. The
//! system namespace is the operator's; any other namespace's objects (a tenant's `deploymentType:
//! Local` template, self-management from a tenant's ServiceSet) run as an account of their own
//! namespace, which the host fills in before the policy judges them: Flux's
//! `--default-service-account`, on the host's side, since a plugin cannot be told the name.

use serde_json::Value;

/// API groups of the kinds whose controllers act with their own rights on what the objects
/// say: the built-in Flux rules and the local service account apply to them, whichever plugin
/// returns them.
pub const FLUX_GROUPS: [&str; 2] = ["helm.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"];

/// The account Flux's multi-tenancy lockdown impersonates (`--default-service-account=default`):
/// every namespace has it, with no rights until someone with rights there binds some.
pub const DEFAULT_LOCAL_SERVICE_ACCOUNT: &str = "default";

/// kcm's system namespace.
pub const DEFAULT_SYSTEM_NAMESPACE: &str = "kcm-system";

/// The operator's namespace, and the account Flux objects of every other namespace run as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tenancy<'a> {
    /// The namespace k0rdent runs in: its objects keep Flux's own identity.
    pub system_namespace: &'a str,
    /// The service account, in the object's namespace, that an object outside it runs as.
    pub local_service_account: &'a str,
}

impl Default for Tenancy<'static> {
    fn default() -> Self {
        Self { system_namespace: DEFAULT_SYSTEM_NAMESPACE, local_service_account: DEFAULT_LOCAL_SERVICE_ACCOUNT }
    }
}

/// Whether `object` is of a Flux kind (see [`FLUX_GROUPS`]).
pub fn is_flux(object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    api_version.split_once('/').is_some_and(|(group, _)| FLUX_GROUPS.contains(&group))
}

impl<'a> Tenancy<'a> {
    /// The account `object`, returned for a ServiceSet of namespace `owner`, must run as: the
    /// local service account for a Flux object without `spec.kubeConfig` (present at all, as
    /// CEL's `has` reads it) unless both it (its `metadata.namespace`, filled in by then) and its
    /// ServiceSet are in the system namespace, so that a tenant's ServiceSet placing an object
    /// there (an AdapterPlugin's `allowedNamespaces`) gains nothing; `None` for any other object.
    pub fn account_for(&self, owner: &str, object: &Value) -> Option<&'a str> {
        let operators =
            owner == self.system_namespace && object["metadata"]["namespace"].as_str() == Some(self.system_namespace);
        let local = is_flux(object) && object["spec"].get("kubeConfig").is_none() && !operators;
        local.then_some(self.local_service_account)
    }

    /// Sets `spec.serviceAccountName` of `object` (of a ServiceSet of namespace `owner`) to
    /// [`account_for`](Self::account_for) when it needs one and the plugin set none (absent, null
    /// or empty, which Flux reads as none); returns that account, for the policy. A `spec` that
    /// is no object is left for the policy to refuse.
    pub fn fill(&self, owner: &str, object: &mut Value) -> Option<&'a str> {
        let account = self.account_for(owner, object)?;
        let spec = object
            .as_object_mut()
            .map(|fields| fields.entry("spec").or_insert_with(|| Value::Object(Default::default())));
        if let Some(spec) = spec.and_then(Value::as_object_mut) {
            let set = spec.get("serviceAccountName").and_then(Value::as_str).is_some_and(|name| !name.is_empty());
            if !set {
                spec.insert("serviceAccountName".into(), Value::String(account.into()));
            }
        }
        Some(account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kustomization(namespace: &str, spec: Value) -> Value {
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "k", "namespace": namespace}, "spec": spec})
    }

    /// `object` filled for a ServiceSet of its own namespace.
    fn filled(mut object: Value) -> Value {
        let owner = object["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        Tenancy::default().fill(&owner, &mut object);
        object
    }

    #[test]
    fn a_flux_object_without_kubeconfig_outside_the_system_namespace_runs_as_the_local_account() {
        let tenant = filled(kustomization("team-a", json!({"path": "./policies"})));
        assert_eq!(tenant["spec"], json!({"path": "./policies", "serviceAccountName": "default"}));
        let release = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "r", "namespace": "team-a"}});
        assert_eq!(filled(release)["spec"], json!({"serviceAccountName": "default"}));
        let other = Tenancy { system_namespace: "ops", local_service_account: "flux-tenant" };
        let mut object = kustomization("kcm-system", json!({}));
        other.fill("kcm-system", &mut object);
        assert_eq!(
            object["spec"]["serviceAccountName"], "flux-tenant",
            "kcm-system is a tenant's when ops is the system's"
        );
        for none in [json!(null), json!("")] {
            let object = filled(kustomization("team-a", json!({"serviceAccountName": none})));
            assert_eq!(object["spec"]["serviceAccountName"], "default", "Flux reads {none} as none");
        }
    }

    #[test]
    fn the_system_namespace_remote_targets_a_plugins_own_account_and_other_kinds_are_left_alone() {
        let unchanged = [
            kustomization("kcm-system", json!({"path": "."})),
            kustomization("team-a", json!({"kubeConfig": {"secretRef": {"name": "c-kubeconfig"}}})),
            kustomization("team-a", json!({"kubeConfig": null})),
            kustomization("team-a", json!({"serviceAccountName": "deployer"})),
            kustomization("team-a", json!("not a map")),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team-a"}}),
            json!({"apiVersion": "kustomize.toolkit.fluxcd.io", "kind": "Kustomization", "metadata": {"namespace": "team-a"}}),
        ];
        for object in unchanged {
            assert_eq!(filled(object.clone()), object);
        }
    }

    #[test]
    fn the_account_an_object_must_run_as() {
        let tenancy = Tenancy::default();
        assert_eq!(tenancy.account_for("team-a", &kustomization("team-a", json!({}))), Some("default"));
        assert_eq!(tenancy.account_for("kcm-system", &kustomization("kcm-system", json!({}))), None);
        let remote = kustomization("team-a", json!({"kubeConfig": {"secretRef": {"name": "c-kubeconfig"}}}));
        assert_eq!(tenancy.account_for("team-a", &remote), None);
    }

    /// A tenant's ServiceSet whose AdapterPlugin lets it place objects in the system namespace
    /// gains nothing there: only the operator's own ServiceSets keep Flux's identity.
    #[test]
    fn a_tenants_object_in_the_system_namespace_still_runs_as_the_local_account() {
        let mut placed = kustomization("kcm-system", json!({"path": "."}));
        Tenancy::default().fill("team-a", &mut placed);
        assert_eq!(placed["spec"]["serviceAccountName"], "default");
    }
}
