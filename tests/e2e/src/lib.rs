//! End-to-end harness for `ksm-adapter run`: the real binary against the simulated API server of
//! `ksm-test-apiserver` (a fresh one per test), a real kube-apiserver started from
//! `KUBEBUILDER_ASSETS` (envtest, once per test binary), or a real cluster when
//! `KSM_E2E_KUBECONFIG` is set (a fresh namespace per test on both).
//!
//! This crate is a black box test: it does not link the `ksm-adapter` crate. It drives the binary
//! (`run` as the controller, `plugin translate` as the oracle for the children's content) and
//! plays the parts of kcm (SMP status) and Flux (HelmRelease status) itself.
//!
//! - [`env`](mod@env): the backend, the per-test namespace, CRDs and cleanup;
//! - [`envtest`]: etcd, kube-apiserver and kube-controller-manager for a test binary;
//! - [`fake_cluster`]: a fake API server of another cluster that answers badly;
//! - [`objects`]: the kinds the tests touch and object CRUD on the dynamic API;
//! - [`adapter`]: the `ksm-adapter run` process and its log;
//! - [`chart`]: the Helm chart as Helm renders it, and the files it ships;
//! - [`fixtures`]: StateManagementProviders, ServiceTemplates, ServiceSets, workloads;
//! - [`flux`]: Flux-style HelmRelease status;
//! - [`naive`]: the k0rdent guide's controller, the benchmark's baseline (`ksm-naive-adapter`);
//! - [`floor`]: the least any adapter must ask of the API server, the benchmark's other baseline
//!   (`ksm-floor-adapter`);
//! - [`expect`]: the children the plugin says a ServiceSet should have, and how a live child
//!   must look;
//! - [`scale`]: the scale benchmark (`ksm-scale-bench`);
//! - [`scenario`]: one test's set-up and its waits (with the adapter's log on failure);
//! - [`status`]: reading conditions, service entries, finalizers and metadata;
//! - [`wait`]: polling until something holds;
//! - [`writes`]: counting the writes made during a period.
//!
//! Helpers panic (with the object and the error) instead of returning errors: a failing test is
//! a panic, which is what makes the adapter's log tail appear.

pub mod adapter;
pub mod chart;
pub mod env;
pub mod envtest;
pub mod expect;
pub mod fake_cluster;
pub mod fixtures;
pub mod floor;
pub mod flux;
pub mod naive;
pub mod objects;
pub mod registry;
pub mod scale;
pub mod scenario;
pub mod status;
pub mod wait;
pub mod writes;

use std::time::Duration;

pub use adapter::{Adapter, Mode};
pub use env::{Backend, Env};
pub use objects::{Kind, ObjRef};
pub use scenario::Scenario;

/// `--adapter-name` of the adapter under test, and the name of its (simulated) Deployment.
pub const ADAPTER_NAME: &str = "ksm-adapter";
/// The label an SMP's selector matches on ServiceSets.
pub const ADAPTER_LABEL: &str = "ksm.k0rdent.mirantis.com/adapter";
/// The finalizer of adapter `name` in `namespace` on the ServiceSets it serves (one per
/// installation; the tests' names are short enough to be kept whole).
pub fn host_finalizer(namespace: &str, name: &str) -> String {
    let finalizer = format!("ksm.k0rdent.mirantis.com/{namespace}.{name}");
    assert!(finalizer.len() - "ksm.k0rdent.mirantis.com/".len() <= 63, "{finalizer} would be shortened");
    finalizer
}
/// Field manager of the host's server-side applies.
pub const FIELD_MANAGER: &str = "ksm-adapter";
/// Label on every child: managed by the host.
pub const MANAGED_LABEL: &str = "ksm.k0rdent.mirantis.com/managed";
/// Label on every child: its ServiceSet's name.
pub const SERVICE_SET_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset";
/// Label on every child: its service's name.
pub const SERVICE_LABEL: &str = "ksm.k0rdent.mirantis.com/service";
/// Label on every child: the uid of its ServiceSet.
pub const SERVICE_SET_UID_LABEL: &str = "ksm.k0rdent.mirantis.com/serviceset-uid";
/// Annotation on every child: the hash of what the host applied.
pub const APPLIED_HASH_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/applied-hash";
/// ServiceSet annotation pausing its CD-tool objects.
pub const PAUSE_ANNOTATION: &str = "k0rdent.mirantis.com/service-set-paused";
/// The finalizer Flux's controllers put on their objects.
pub const FLUX_FINALIZER: &str = "finalizers.fluxcd.io";
/// Label on the cluster-scoped objects a test creates (SMPs): the test's namespace, for cleanup.
pub const TEST_NAMESPACE_LABEL: &str = "ksm-e2e.k0rdent.mirantis.com/namespace";

/// The longest any single wait of a test lasts.
pub const WAIT: Duration = Duration::from_secs(30);
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
