//! End-to-end tests of `ksm-adapter run`: the real binary against the simulated API server of
//! `ksm-test-apiserver` (a fresh one per test), a real kube-apiserver started from
//! `KUBEBUILDER_ASSETS` (envtest, once per test binary), or a real cluster when
//! `KSM_E2E_KUBECONFIG` is set (a fresh namespace per test on both).
//!
//! This crate is a black box test: it does not link the `ksm-adapter` crate. It drives the binary
//! (`run` as the controller, `plugin translate` as the oracle for the children's content) and
//! plays the parts of kcm (SMP status) and Flux (HelmRelease status) itself. The API servers,
//! objects, fixtures and the adapter process come from `ksm-test-harness`, which the scale
//! benchmark (`tests/scale`) and the host's tests share; this library holds what only the
//! scenarios use, so that this crate is the end-to-end tests and nothing else:
//!
//! - [`chart`]: the Helm chart as Helm renders it, and the files it ships;
//! - [`expect`]: the children the plugin says a ServiceSet should have, and how a live child
//!   must look;
//! - [`fake_cluster`]: a fake API server of another cluster that answers badly;
//! - [`scenario`]: one test's set-up and its waits (with the adapter's log on failure);
//! - [`writes`]: counting the writes made during a period.
//!
//! Helpers panic (with the object and the error) instead of returning errors: a failing test is
//! a panic, which is what makes the adapter's log tail appear.

pub mod chart;
pub mod expect;
pub mod fake_cluster;
pub mod scenario;
pub mod writes;

use std::time::Duration;

use ksm_test_harness::{Backend, env};

pub use scenario::{ADAPTER_PLUGIN_CRD, Scenario};

/// How long a Flux status change may take to show in ServiceSet status (the contract says ~1 s;
/// the margin is for a loaded 2-core machine).
pub const STATUS_WAIT: Duration = Duration::from_secs(5);

/// For tests that need the simulated server (fault injection, `deny`, request counts): on a real
/// API server, reports the skip with its reason and returns true; the caller then returns early.
pub fn skip_unless_simulator(test: &str, needs: &str) -> bool {
    let skip = Backend::selected() != Backend::Simulator;
    if skip {
        env::report(test, &format!("skipped: it needs the simulated API server ({needs})"));
    }
    skip
}
