//! SMP condition types and reasons (kcm's, to the letter), and the checks that state them.

use crate::conditions::{self, Status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition type: the adapter can read what the SMP references.
pub const RBAC_READY: &str = "RBACReady";
/// Condition type: the adapter workload is ready.
pub const ADAPTER_READY: &str = "AdapterReady";
/// Condition type: every provisioner workload is ready.
pub const PROVISIONER_READY: &str = "ProvisionerReady";
/// Condition type: every provisioner CRD is installed with its version.
pub const PROVISIONER_CRDS_READY: &str = "ProvisionerCRDsReady";

/// kcm's condition reasons used here.
pub mod reason {
    /// RBAC checks passed.
    pub const RBAC_ENSURED: &str = "RBACEnsuredSuccessfully";
    /// Some permission is missing.
    pub const RBAC_NOT_READY: &str = "RBACNotReady";
    /// The permissions could not be checked.
    pub const RBAC_UNKNOWN: &str = "RBACUnknown";
    /// The adapter is ready.
    pub const ADAPTER_ENSURED: &str = "AdapterEnsuredSuccessfully";
    /// The adapter's readiness rule is false.
    pub const ADAPTER_NOT_READY: &str = "AdapterNotReady";
    /// The adapter object does not exist.
    pub const FAILED_TO_GET_ADAPTER: &str = "FailedToGetAdapter";
    /// Every provisioner is ready.
    pub const PROVISIONER_ENSURED: &str = "ProvisionerEnsuredSuccessfully";
    /// Some provisioner is missing or its rule is false.
    pub const PROVISIONER_NOT_READY: &str = "ProvisionerNotReady";
    /// Every provisioner CRD is there.
    pub const PROVISIONER_CRDS_ENSURED: &str = "ProvisionerCRDsEnsuredSuccessfully";
    /// Some CRD or CRD version is missing.
    pub const PROVISIONER_CRDS_NOT_READY: &str = "ProvisionerCRDsNotReady";
    /// A readiness rule did not compile, failed, or returned a non-bool.
    pub const FAILED_TO_EVALUATE_READINESS: &str = "FailedToEvaluateReadiness";
}

/// The outcome of one check, before it becomes a [`Condition`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Check {
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
}

impl Check {
    /// A passed check.
    pub fn passed(reason: &'static str, message: impl Into<String>) -> Self {
        Self { status: Status::True, reason, message: message.into() }
    }

    /// A failed check.
    pub fn failed(reason: &'static str, message: impl Into<String>) -> Self {
        Self { status: Status::False, reason, message: message.into() }
    }

    /// A check that could not be made.
    pub fn unknown(reason: &'static str, message: impl Into<String>) -> Self {
        Self { status: Status::Unknown, reason, message: message.into() }
    }

    /// The condition of type `type_` stating this check.
    pub fn into_condition(self, type_: &str, now: &Time, generation: Option<i64>) -> Condition {
        conditions::new(type_, self.status, self.reason, &self.message, generation, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn checks_state_their_status() {
        for (check, status) in
            [(Check::passed("R", ""), "True"), (Check::failed("R", ""), "False"), (Check::unknown("R", ""), "Unknown")]
        {
            assert_eq!(check.into_condition(RBAC_READY, &at(0), Some(3)).status, status);
        }
    }
}
