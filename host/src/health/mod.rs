//! Service health on the target cluster, decided purely: kcm 1.12's verifier for this host.
//!
//! Once the CD tool says a Helm service is Deployed, the host looks at the service's workloads on
//! the cluster they went to and keeps the service `Provisioning` while any of them is unhealthy by
//! the CEL rules operators put in ConfigMaps. This module decides from what the I/O layer
//! (`controller/round/target_health.rs`) gathered:
//!
//! - [`rule_set`]: which rule ConfigMaps apply to a ServiceSet, and the rules they hold (a broken
//!   one named, never breaking the others) within each namespace's budget, a tenant's confined to
//!   its namespace where asked;
//! - [`look_budget`]: how much one look at a target may read in all, and whether it is spent;
//! - [`target`]: which cluster a ServiceSet's workloads are on, and whose rules are a tenant's
//!   there (confined to its namespace on the management cluster);
//! - [`verdict`]: the objects found against the rules within one look's cost budget, the
//!   service's state and conditions, and the ServiceSet's `ServiceSetHealthRules` condition.

#[cfg(test)]
mod golden;
pub mod look_budget;
pub mod rule_set;
pub mod target;
pub mod verdict;

/// The label selecting health-rule ConfigMaps; its value says to which ServiceSets they apply.
pub const TARGET_LABEL: &str = "k0rdent.mirantis.com/health-rule-target";
/// [`TARGET_LABEL`]'s value for rules applying to every ServiceSet (in the system namespace) or
/// to every ServiceSet of a namespace (in that namespace).
pub const GLOBAL: &str = "global";
/// The ConfigMap key holding the YAML list of rules.
pub const DATA_KEY: &str = "rules";
/// The labels chart authors put the release's identity in: an object with any of them equal to
/// the service name is one of the service's workloads.
pub const DISCOVERY_LABELS: [&str; 4] = ["release", "app", "app.kubernetes.io/instance", "app.kubernetes.io/name"];

/// Whether `object` is one of service `name`'s workloads: it carries one of the
/// [`DISCOVERY_LABELS`] with that name.
pub fn is_workload_of(object: &serde_json::Value, name: &str) -> bool {
    let labels = &object["metadata"]["labels"];
    DISCOVERY_LABELS.iter().any(|label| labels[label].as_str() == Some(name))
}
