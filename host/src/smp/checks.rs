//! The checks that state an SMP's conditions (kcm's types and reasons, to the letter: see
//! [`crate::conditions::types`] and [`crate::conditions::reasons`]).

use crate::conditions::{self, Status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

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
    use crate::conditions::types::RBAC_READY;
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
