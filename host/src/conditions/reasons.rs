//! Every condition reason the host writes, by the condition type (see [`super::types`]) it is
//! written with. Where a reason is kcm's (v1.12), the string is kcm's to the letter.

use crate::k0rdent::State;

// ProviderReady.

/// `ProviderReady=True`: the SMP exists, is ready and is not suspended.
pub const PROVIDER_READY: &str = "ProviderReady";
/// `ProviderReady=False`: no SMP has the name `spec.provider.name` gives.
pub const PROVIDER_NOT_FOUND: &str = "ProviderNotFound";
/// `ProviderReady=False`: the SMP is suspended.
pub const PROVIDER_SUSPENDED: &str = "ProviderSuspended";
/// `ProviderReady=False`: the SMP is not ready (with the host's diagnosis, when it has one).
pub const PROVIDER_NOT_READY: &str = "ProviderNotReady";

// ServicesTranslated and ServicesInReadyState.

/// `ServicesTranslated=True`: every service translated; `ServicesInReadyState=True`: every
/// service is Deployed.
pub const SUCCEEDED: &str = "Succeeded";
/// `ServicesTranslated=False`: some services the plugin could not translate, or whose objects
/// the host refused, each named in the message.
pub const SERVICE_ERRORS: &str = "ServiceErrors";
/// `ServicesTranslated=False`: the plugin rejected `spec.provider.config`.
pub const INVALID_CONFIG: &str = "InvalidConfig";
/// `ServicesTranslated=False`: the ServiceSet's spec does not parse, or the plugin rejected it.
pub const INVALID_SERVICE_SET: &str = "InvalidServiceSet";
/// `ServicesTranslated=False`: the plugin call failed, or its answer does not match the spec's
/// services.
pub const PLUGIN_ERROR: &str = "PluginError";
/// `ServicesTranslated=False`: no loaded AdapterPlugin serves the ServiceSet's provider.
pub const PLUGIN_NOT_READY: &str = "PluginNotReady";
/// `ServicesInReadyState=False`: some service is not Deployed.
pub const SERVICES_NOT_READY: &str = "ServicesNotReady";

// ObjectsApplied.

/// `ObjectsApplied=False`: the API server refused a child, or an object of a child's name is
/// someone else's.
pub const APPLY_FAILED: &str = "ApplyFailed";
/// `ObjectsApplied=False`: the children's cluster cannot be told or reached (a Region,
/// Credential or kubeconfig Secret is missing or wrong, or the regional cluster does not answer).
pub const REGION_UNREACHABLE: &str = "RegionUnreachable";

// ServiceSetHealthRules.

/// `ServiceSetHealthRules=True`: every health rule that applies loaded.
pub const ALL_RULES_VALID: &str = "AllRulesValid";
/// `ServiceSetHealthRules=False`: some health rules did not load, named in the message.
pub const HEALTH_RULE_INVALID: &str = "HealthRuleInvalid";

// A service's Ready and ServiceHealth conditions.

/// A service's `Ready=False`: its state, e.g. `Provisioning`.
pub fn in_state(state: State) -> String {
    format!("{state:?}")
}
/// A service's `ServiceHealth<Kind>=False`: `<Kind>Unhealthy`, objects of the kind are unhealthy.
pub fn unhealthy(kind: &str) -> String {
    format!("{kind}Unhealthy")
}
/// A service's `ServiceHealth=Unknown`: its target cluster could not be read.
pub const TARGET_CLUSTER_UNREADABLE: &str = "TargetClusterUnreadable";
/// A service's `ServiceHealth=Unknown`: the look's health-rule cost budget ran out before its
/// objects were judged.
pub const HEALTH_RULES_OVER_BUDGET: &str = "HealthRulesOverBudget";
/// A service's `ServiceHealth=Unknown`: its deployment is not verified yet, as its namespace runs
/// as many looks at its targets as it may.
pub const HEALTH_CHECK_QUEUED: &str = "HealthCheckQueued";

// AdapterPlugin: Fetched, Verified, Compiled, Validated.

/// `Fetched=True`.
pub const FETCHED: &str = "Fetched";
/// `Fetched=False`: the component could not be fetched.
pub const FETCH_FAILED: &str = "FetchFailed";
/// `Verified=True`: the signature the spec asks for was verified.
pub const VERIFIED: &str = "Verified";
/// `Verified=False`: the signature is missing or does not verify.
pub const VERIFICATION_FAILED: &str = "VerificationFailed";
/// `Verified=True`: the spec asks for no signature (`spec.source.oci.verify` is not set).
pub const NOT_REQUIRED: &str = "NotRequired";
/// `Compiled=True`.
pub const COMPILED: &str = "Compiled";
/// `Compiled=False`: the component did not compile, or its metadata or contract version could
/// not be read.
pub const COMPILE_FAILED: &str = "CompileFailed";
/// `Validated=True`.
pub const VALIDATED: &str = "Validated";
/// `Validated=False`: the plugin's metadata does not pass the host's checks against the
/// AdapterPlugin.
pub const VALIDATION_FAILED: &str = "ValidationFailed";
/// `Unknown` on each step after a failed one.
pub const NOT_REACHED: &str = "NotReached";

// StateManagementProvider (kcm's, to the letter).

/// kcm's `RBACReady=True`: the RBAC checks passed.
pub const RBAC_ENSURED: &str = "RBACEnsuredSuccessfully";
/// kcm's `RBACReady=False`: some permission is missing.
pub const RBAC_NOT_READY: &str = "RBACNotReady";
/// kcm's `RBACReady=Unknown`: the permissions could not be checked.
pub const RBAC_UNKNOWN: &str = "RBACUnknown";
/// kcm's `AdapterReady=True`: the adapter is ready.
pub const ADAPTER_ENSURED: &str = "AdapterEnsuredSuccessfully";
/// kcm's `AdapterReady=False`: the adapter's readiness rule is false.
pub const ADAPTER_NOT_READY: &str = "AdapterNotReady";
/// kcm's `AdapterReady=False`: the adapter object does not exist.
pub const FAILED_TO_GET_ADAPTER: &str = "FailedToGetAdapter";
/// kcm's `ProvisionerReady=True`: every provisioner is ready.
pub const PROVISIONER_ENSURED: &str = "ProvisionerEnsuredSuccessfully";
/// kcm's `ProvisionerReady=False`: some provisioner is missing or its rule is false.
pub const PROVISIONER_NOT_READY: &str = "ProvisionerNotReady";
/// kcm's `ProvisionerCRDsReady=True`: every provisioner CRD is there.
pub const PROVISIONER_CRDS_ENSURED: &str = "ProvisionerCRDsEnsuredSuccessfully";
/// kcm's `ProvisionerCRDsReady=False`: some CRD or CRD version is missing.
pub const PROVISIONER_CRDS_NOT_READY: &str = "ProvisionerCRDsNotReady";
/// kcm's `AdapterReady=False` or `ProvisionerReady=False`: a readiness rule did not compile,
/// failed, or returned a non-bool.
pub const FAILED_TO_EVALUATE_READINESS: &str = "FailedToEvaluateReadiness";
