//! What every test of the whole `ksm-adapter` needs around it: an API server (the simulated one
//! of `ksm-test-apiserver`, a real one started from `KUBEBUILDER_ASSETS` — envtest —, or a real
//! cluster when `KSM_E2E_KUBECONFIG` is set) with the CRDs installed, the objects on it, the
//! k0rdent objects kcm would make, Flux's HelmRelease status, the `ksm-adapter` process and a
//! loopback OCI registry.
//!
//! A crate of its own so that dependencies stay one-way: the end-to-end tests (`tests/e2e`), the
//! scale benchmark and its baselines (`tests/scale`), and the host's own tests against an API
//! server (`host/tests`) each depend on it, and it on none of them. It links no `ksm-adapter` code: it
//! drives the binary, as a black box.
//!
//! - [`env`](mod@env): the backend, the per-test namespace, CRDs and cleanup;
//! - [`envtest`]: etcd, kube-apiserver and kube-controller-manager for a test binary;
//! - [`objects`]: the kinds the tests touch and object CRUD on the dynamic API;
//! - [`adapter`]: the `ksm-adapter run` process and its log;
//! - [`fixtures`]: StateManagementProviders, ServiceTemplates, ServiceSets, workloads;
//! - [`flux`]: Flux-style HelmRelease status;
//! - [`pki`]: a private Sigstore (CAs, leaf certificates, CT and Rekor logs) for keyless signatures;
//! - [`registry`]: a real OCI registry on loopback;
//! - [`status`]: reading conditions, service entries, finalizers and metadata;
//! - [`wait`]: polling until something holds.
//!
//! Helpers panic (with the object and the error) instead of returning errors: a failing test is
//! a panic, which is what makes the adapter's log tail appear.

pub mod adapter;
pub mod env;
pub mod envtest;
pub mod fixtures;
pub mod flux;
pub mod objects;
pub mod pki;
pub mod registry;
pub mod status;
pub mod wait;

use std::time::Duration;

pub use adapter::{Adapter, Mode};
pub use env::{Backend, Env};
pub use objects::{Kind, ObjRef};

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
