//! Leader election: of several replicas of `ksm-adapter run`, one writes at a time.
//!
//! The replicas contend for a `coordination.k8s.io/v1` Lease through the crate
//! [`kube_lease_manager`]. How the crate writes the Lease is what makes the election safe:
//!
//! - taking a free Lease is a server-side apply, **not forced**, of `holderIdentity`, `acquireTime`,
//!   `renewTime` and `leaseDurationSeconds` by the field manager `ksm-adapter-leader-<identity>`:
//!   when two replicas take it at once, the second apply conflicts (409) with the first one's
//!   ownership of `holderIdentity`, so only one wins;
//! - renewing (`renewTime`), releasing (those four fields set to null) and clearing a Lease that
//!   expired are strategic merge patches; a field an update removes is no longer owned by anyone,
//!   which is what lets the next apply succeed;
//! - no write carries a `resourceVersion` precondition.
//!
//! On its own the crate only reads the Lease when the state it last read expires: a standby
//! would notice a release only when the holder's lease would have expired anyway, and a holder
//! would notice that someone else holds the Lease only at its next renewal. This module also
//! **watches** the Lease, so that
//!
//! - a standby tries again as soon as the Lease becomes free (fast hand-over on
//!   [`Leadership::release`]);
//! - a holder learns at once that another identity holds the Lease, and gives up when its own
//!   renewals have not been seen in time: [`Leadership::lost`] resolves a margin (a sixth of the
//!   duration) *before* the Lease would expire, so the holder stops writing before a standby may
//!   take over.
//!
//! Timing: the crate counts in whole seconds; the holder renews every third of the duration and
//! retries failed renewals every second (or more often for short durations).
//!
//! - `election`: the settings of an election and the timing they give;
//! - `lease`: the Lease as the watch sees it;
//! - `acquire`: contending until this replica holds the Lease;
//! - `leadership`: holding it: renewing, noticing its loss, releasing it.

mod acquire;
mod election;
mod leadership;
mod lease;

pub use acquire::acquire;
pub use election::{DEFAULT_LEASE_DURATION, Election, MIN_LEASE_DURATION, unique_identity};
pub use leadership::Leadership;
