//! The host's own look at a StateManagementProvider: it fetches the adapter and provisioner
//! objects, the provisioner CRDs and its own permissions, and evaluates them with
//! [`smp::evaluate`](crate::smp::evaluate). In `observe` mode this explains an SMP that kcm
//! reports not ready; in `manage` mode (no kcm) the host writes the SMP status itself.
//!
//! - [`look`]: the evaluation and the cached diagnosis of an SMP;
//! - [`discovery`]: the objects an SMP references, and their kinds, discovered once;
//! - [`rbac`]: the permissions the host needs for an SMP, checked and cached;
//! - [`stamped`]: values cached per SMP version for a while;
//! - [`manage`]: `manage` mode's loop writing SMP status.

pub mod discovery;
pub mod look;
pub mod manage;
pub mod rbac;
pub mod stamped;
