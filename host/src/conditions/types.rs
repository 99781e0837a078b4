//! Every condition type the host writes, by the object it is written on. Where a type is kcm's
//! (v1.12), the string is kcm's to the letter: kcm and kubectl read them.

// ServiceSet `status.conditions`.

/// Whether the ServiceSet's StateManagementProvider lets it be reconciled: `True` when the SMP
/// exists, is ready and is not suspended; `False` saying which of these fails.
pub const PROVIDER_READY: &str = "ProviderReady";
/// Whether the plugin translated the ServiceSet: `False` for a spec, provider config or plugin
/// answer that does not translate, a plugin that does not serve or failed, or a service the
/// plugin could not translate or whose objects the host refused.
pub const TRANSLATED: &str = "ServicesTranslated";
/// Set `False` when the API server refused a child the plugin produced (e.g. the CD tool's CRD
/// rejects a field), an object of a child's name is someone else's, or the children's cluster
/// (a Region) cannot be told or reached; absent when every child was applied.
pub const APPLIED: &str = "ObjectsApplied";
/// kcm's: how many services are Deployed, message `"<ready>/<total>"` (kubectl's "Services"
/// column); `True` when all are.
pub const SERVICES_READY: &str = "ServicesInReadyState";
/// kcm's: whether every health rule ConfigMap that applies to the ServiceSet loaded; present only
/// when any applies.
pub const HEALTH_RULES: &str = "ServiceSetHealthRules";

// Conditions of one service (`status.services[].conditions`).

/// On a service that is neither Deployed nor Failed and has a message from the plugin: `False`,
/// with the service's state as the reason.
pub const SERVICE_READY: &str = "Ready";
/// kcm's prefix of the health verdict's conditions on a service, `ServiceHealth<Kind>` (see
/// [`service_health`]); alone, `Unknown` when the target cluster could not be read.
pub const SERVICE_HEALTH: &str = "ServiceHealth";

/// kcm's `ServiceHealth<Kind>`: `False` while objects of `kind` of the service are unhealthy.
pub fn service_health(kind: &str) -> String {
    format!("{SERVICE_HEALTH}{kind}")
}

// AdapterPlugin `status.conditions`, one per step of a load, in order.

/// The plugin's component was fetched (built in, ConfigMap or OCI).
pub const FETCHED: &str = "Fetched";
/// The fetched component's signature was verified, or none is asked for.
pub const VERIFIED: &str = "Verified";
/// The component compiled.
pub const COMPILED: &str = "Compiled";
/// The plugin's metadata passed the host's checks against the AdapterPlugin.
pub const VALIDATED: &str = "Validated";

// StateManagementProvider `status.conditions` (kcm's, written where kcm does not run).

/// kcm's: the adapter can read what the SMP references.
pub const RBAC_READY: &str = "RBACReady";
/// kcm's: the adapter workload is ready.
pub const ADAPTER_READY: &str = "AdapterReady";
/// kcm's: every provisioner workload is ready.
pub const PROVISIONER_READY: &str = "ProvisionerReady";
/// kcm's: every provisioner CRD is installed with its version.
pub const PROVISIONER_CRDS_READY: &str = "ProvisionerCRDsReady";
