//! What both controllers (ServiceSets, AdapterPlugins) run on, beside their own work: one active
//! replica, the probes' view of them, the health of their watches, their retries, their Events,
//! their status writes and the host's own permissions.
//!
//! - [`leader`]: leader election on a Lease (one active replica);
//! - [`liveness`]: the reconciles running now, for `/healthz` to tell a stuck controller;
//! - [`watches`]: which watches fail and why, for the log and `/readyz`;
//! - [`watch_retry`]: when a failing watch tries again;
//! - [`backoff`]: failed rounds per object, for the retry backoff;
//! - [`event_publisher`]: Kubernetes Events on transitions, published;
//! - [`slots`]: at most so many holders per key (a region, a namespace) at once;
//! - [`queue`] and [`runner`]: the ServiceSet controller's queue (when each round is due) and
//!   the loop that runs its rounds;
//! - [`sweeps`]: passes over every ServiceSet (after a list, per resync), a few at a time;
//! - [`status_writer`]: status writes (ServiceSets, AdapterPlugins, SMPs), only when the status
//!   changed and over the version read;
//! - `access`: the host's own permissions (SelfSubjectAccessReview).

pub(super) mod access;
pub mod backoff;
pub mod event_publisher;
pub mod leader;
pub mod liveness;
pub mod queue;
pub mod runner;
pub mod slots;
pub mod status_writer;
pub mod sweeps;
pub mod watch_retry;
pub mod watches;
