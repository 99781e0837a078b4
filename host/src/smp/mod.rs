//! StateManagementProvider checks, pure (no I/O): the controller fetches the objects and passes
//! them in.
//!
//! - [`selector`]: Kubernetes label-selector matching;
//! - [`adapter`]: this host as an SMP's adapter, and which ServiceSets it serves;
//! - [`evaluation`]: kcm's SMP conditions and a one-line diagnosis;
//! - [`checks`]: the checks that state an SMP's conditions (kcm's types and reasons).

pub mod adapter;
pub mod checks;
pub mod evaluation;
mod observed;
pub mod selector;

pub use adapter::{AdapterIdentity, serves};
pub use evaluation::{RbacCheck, SmpEvaluation, SmpObservation, evaluate};
pub use selector::selector_matches;

/// The readiness rules kcm's Flux SMP uses, shared by the tests of this module.
#[cfg(test)]
pub(crate) mod flux_rules {
    /// The adapter Deployment's rule.
    pub const ADAPTER: &str = "self.status.availableReplicas == self.status.replicas && \
        self.status.availableReplicas == self.status.updatedReplicas && \
        self.status.availableReplicas == self.status.readyReplicas";
    /// The provisioner Deployments' rule.
    pub const PROVISIONER: &str = "self.status.availableReplicas > 0 && self.status.readyReplicas > 0";
}
