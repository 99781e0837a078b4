//! One ServiceSet's round, and what it needs around it: the context every reconcile shares,
//! what wakes a ServiceSet, what must finish before the first round, and the writes the round
//! makes besides its children.
//!
//! - [`service_sets`]: one ServiceSet: gather the facts, then do the steps the pure core decides;
//!   and its retry policy;
//! - [`context`]: what every ServiceSet reconcile shares (client, caches, plugins, settings);
//! - [`prepare`]: what must finish before the first reconcile;
//! - [`triggers`]: what wakes a ServiceSet's reconcile;
//! - `settle`: a short wait that folds a burst of child changes into one reconcile;
//! - [`arbiter`]: the index of claims across ServiceSets and who wins them;
//! - [`target_health`]: service health on the target clusters (kcm 1.12's verifier);
//! - [`finalizer`]: the host's own finalizer on the ServiceSets it serves.

pub mod arbiter;
pub mod context;
pub mod finalizer;
pub mod prepare;
pub mod service_sets;
pub(super) mod settle;
pub mod target_health;
pub mod triggers;
