//! SMP condition types and reasons (kcm's, to the letter), and carrying over transition times.

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

/// A condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    True,
    False,
    Unknown,
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
        Condition {
            type_: type_.to_owned(),
            status: format!("{:?}", self.status),
            reason: self.reason.to_owned(),
            message: self.message,
            last_transition_time: now.clone(),
            observed_generation: generation,
        }
    }
}

/// `new`, each keeping the `lastTransitionTime` of the `old` condition of the same type when its
/// status is unchanged, so that an unchanged status serializes identically.
pub fn merge_conditions(old: &[Condition], new: Vec<Condition>) -> Vec<Condition> {
    new.into_iter()
        .map(|mut condition| {
            let same = old.iter().find(|o| o.type_ == condition.type_ && o.status == condition.status);
            if let Some(previous) = same {
                condition.last_transition_time = previous.last_transition_time.clone();
            }
            condition
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn condition(type_: &str, status: &str, time: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "R".into(),
            message: "m".into(),
            last_transition_time: at(time),
            observed_generation: Some(1),
        }
    }

    #[test]
    fn status_strings_are_kubernetes_ones() {
        for (check, status) in
            [(Check::passed("R", ""), "True"), (Check::failed("R", ""), "False"), (Check::unknown("R", ""), "Unknown")]
        {
            assert_eq!(check.into_condition(RBAC_READY, &at(0), Some(3)).status, status);
        }
    }

    #[test]
    fn merge_keeps_time_only_for_unchanged_status() {
        let old = vec![condition(RBAC_READY, "True", 10), condition(ADAPTER_READY, "True", 10)];
        let new = vec![
            condition(RBAC_READY, "True", 99),
            condition(ADAPTER_READY, "False", 99),
            condition(PROVISIONER_READY, "True", 99),
        ];
        let merged = merge_conditions(&old, new);
        let times: Vec<_> = merged.iter().map(|c| c.last_transition_time.clone()).collect();
        assert_eq!(times, vec![at(10), at(99), at(99)]);
        assert_eq!(merged[1].status, "False");
        assert_eq!(merge_conditions(&old, old.clone()), old, "no change, identical conditions");
    }
}
