//! Who Flux's objects run as: the flags `run` and the offline commands share, so that `render`
//! shows offline what `run` applies.

use clap::Args;
use ksm_adapter::tenancy::{DEFAULT_LOCAL_SERVICE_ACCOUNT, DEFAULT_SYSTEM_NAMESPACE, Tenancy};
use ksm_plugin_sdk::names::is_dns1123_subdomain;

/// The system namespace, and the account Flux objects of every other namespace run as.
#[derive(Debug, Args)]
pub struct TenancyArgs {
    /// The namespace k0rdent runs in (self-management ServiceSets live there).
    #[arg(long, default_value = DEFAULT_SYSTEM_NAMESPACE)]
    pub system_namespace: String,
    /// The service account a Flux HelmRelease or Kustomization without `spec.kubeConfig` runs as
    /// outside the system namespace (a tenant's `deploymentType: Local` template or
    /// self-management: on the management cluster, or on a regional cluster for a ServiceSet
    /// there), in the object's own namespace. Without it helm- and kustomize-controller would
    /// apply it with their own cluster-wide rights. The host sets `spec.serviceAccountName` to it
    /// when the plugin set none, and refuses any other name that the AdapterPlugin's
    /// `spec.policy.serviceAccountNames` does not list. `default`, as Flux's multi-tenancy
    /// lockdown does (`--default-service-account=default`): every namespace has that account,
    /// and it may do nothing until someone allowed to grant rights in the namespace binds some.
    #[arg(long, default_value = DEFAULT_LOCAL_SERVICE_ACCOUNT, value_parser = service_account)]
    local_service_account: String,
}

impl TenancyArgs {
    /// What these flags say.
    pub fn tenancy(&self) -> Tenancy<'_> {
        Tenancy { system_namespace: &self.system_namespace, local_service_account: &self.local_service_account }
    }

    /// The service account, owned (for the controller's settings).
    pub fn local_service_account(&self) -> String {
        self.local_service_account.clone()
    }
}

/// A service account name, as Kubernetes requires it.
fn service_account(name: &str) -> Result<String, String> {
    match is_dns1123_subdomain(name) {
        true => Ok(name.to_string()),
        false => Err("not a service account name (a DNS-1123 subdomain)".into()),
    }
}
