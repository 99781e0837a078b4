//! Where a test runs, chosen once per test binary by [`Backend::selected`]: a fresh simulated
//! API server per test, a real control plane started once per test binary from
//! `KUBEBUILDER_ASSETS` ([`crate::envtest`]), or a real cluster when `KSM_E2E_KUBECONFIG` is set.
//! Either way the test gets its own namespace, so scenarios read the same on all three.
//!
//! On a real API server the CRDs are the **upstream** ones (kcm's, Flux's, Sveltos's, Argo CD's,
//! from `KSM_E2E_UPSTREAM_CRDS`, by default `../shared/reference/crds` beside the workspace), so
//! that the real schemas validate everything the host and its plugins write; the host's
//! AdapterPlugin CRD comes from this repository. They are installed with server-side apply (field manager
//! `ksm-e2e`) unless the cluster already has them from someone else (kcm, Flux). Dropping the
//! [`Env`] deletes the namespace and the cluster-scoped objects the test labelled with it (SMPs,
//! AdapterPlugins, ClusterRoles and their bindings, other namespaces), after clearing the finalizers of what is left in the namespace.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Write as _;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ksm_test_apiserver::TestApiServer;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::envtest::{self, ControlPlane};
use crate::fixtures::yaml_documents;
use crate::objects::{Kind, ObjRef, Objects};
use crate::wait::wait_for;
use crate::{TEST_NAMESPACE_LABEL, WAIT};

/// The environment variable naming a real cluster's kubeconfig.
pub const KUBECONFIG_VAR: &str = "KSM_E2E_KUBECONFIG";
/// The environment variable naming the directory of upstream CRDs for real API servers.
pub const UPSTREAM_CRDS_VAR: &str = "KSM_E2E_UPSTREAM_CRDS";
/// Field manager of the CRDs the tests install on a real cluster.
const CRD_MANAGER: &str = "ksm-e2e";

/// Which API server the tests run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `ksm-test-apiserver`, a fresh one per test: fast, with fault injection and request counts.
    Simulator,
    /// etcd + kube-apiserver + kube-controller-manager from `KUBEBUILDER_ASSETS`, one per test
    /// binary.
    Envtest,
    /// The cluster of `KSM_E2E_KUBECONFIG`.
    Cluster,
}

impl Backend {
    /// `KSM_E2E_KUBECONFIG` set: the cluster; else `KUBEBUILDER_ASSETS` set: envtest; else the
    /// simulator.
    pub fn selected() -> Backend {
        let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
        if set(KUBECONFIG_VAR) {
            Backend::Cluster
        } else if set(envtest::ASSETS_VAR) {
            Backend::Envtest
        } else {
            Backend::Simulator
        }
    }

    /// `simulator`, `envtest` or `cluster`, as the run's report lines say it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Simulator => "simulator",
            Backend::Envtest => "envtest",
            Backend::Cluster => "cluster",
        }
    }
}

/// Prints one line of the run's report (`e2e[<backend>] <test>: <what>`) straight to stderr,
/// past the test harness's output capture, so that a run shows which scenarios ran where and
/// which were skipped and why (`.ci/run` counts them).
pub fn report(test: &str, what: &str) {
    let line = format!("e2e[{}] {test}: {what}\n", Backend::selected().name());
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The CRDs the simulator serves: the k0rdent stand-ins (ServiceSet, StateManagementProvider,
/// ServiceTemplate), the host's AdapterPlugin CRD and the Flux, Argo CD, Sveltos and Fleet test
/// CRDs (HelmRelease, Kustomization, Application, Profile, ClusterSummary, HelmOp).
pub fn crds() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    read_crds(&[
        dir.join("../../crds/k0rdent.yaml"),
        dir.join("../../crds/adapterplugin.yaml"),
        dir.join("fixtures/flux-crds.yaml"),
        dir.join("fixtures/argocd-crds.yaml"),
        dir.join("fixtures/sveltos-crds.yaml"),
        dir.join("fixtures/fleet-crds.yaml"),
    ])
}

/// The CRDs a real API server gets: every upstream CRD (kcm, Flux, Sveltos, Argo CD's
/// Application, so that their real schemas validate what the host and the plugins write) and
/// the host's AdapterPlugin CRD. Without an upstream directory the stand-ins are used, with a
/// note.
pub fn real_server_crds() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(upstream) = upstream_crds_dir() else {
        report("crds", "no upstream CRDs (../shared/reference/crds or KSM_E2E_UPSTREAM_CRDS): using the stand-ins");
        return crds();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&upstream)
        .unwrap_or_else(|e| panic!("reading {}: {e}", upstream.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml"))
        .collect();
    files.sort();
    files.push(dir.join("../../crds/adapterplugin.yaml"));
    let crds = read_crds(&files);
    assert!(
        crds.iter().any(|crd| crd["metadata"]["name"] == ARGOCD_APPLICATION_CRD),
        "{}: no CRD {ARGOCD_APPLICATION_CRD} (Argo CD's manifests/crds/application-crd.yaml)",
        upstream.display()
    );
    crds
}

/// Argo CD's Application CRD, which the upstream directory must hold.
const ARGOCD_APPLICATION_CRD: &str = "applications.argoproj.io";

/// `KSM_E2E_UPSTREAM_CRDS` (which must exist), else `../shared/reference/crds` beside the
/// workspace when it exists.
fn upstream_crds_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(UPSTREAM_CRDS_VAR).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(dir.is_dir(), "{UPSTREAM_CRDS_VAR}={} is not a directory", dir.display());
        return Some(dir);
    }
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/crds");
    default.is_dir().then_some(default)
}

fn read_crds(files: &[PathBuf]) -> Vec<Value> {
    files
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            yaml_documents(&text)
        })
        .collect()
}

/// A control plane of one test's own, with the real-server CRDs `wanted` keeps.
async fn own_control_plane(wanted: impl Fn(&Value) -> bool) -> ControlPlane {
    let assets = PathBuf::from(std::env::var_os(envtest::ASSETS_VAR).unwrap_or_default());
    let plane = ControlPlane::start(&assets).expect("a control plane of the test's own starts");
    plane.wait_ready().await.expect("the control plane gets ready");
    let objects = Objects::new(kubeconfig_client(plane.admin_kubeconfig()).await.expect("a client"));
    install_these_crds(&objects, real_server_crds().into_iter().filter(wanted).collect()).await;
    plane
}

/// Another cluster for a test of its own (a ServiceSet's target cluster, a region): a second
/// control plane with the real-server CRDs `crds` keeps, stopped when dropped. Only on envtest;
/// elsewhere `None`, and the run's report says the scenario was skipped.
pub async fn another_cluster(test: &str, crds: impl Fn(&Value) -> bool) -> Option<ControlPlane> {
    if Backend::selected() != Backend::Envtest {
        report(test, "skipped: needs a second API server (envtest) to play another cluster");
        return None;
    }
    Some(own_control_plane(crds).await)
}

/// The control plane of this test binary, started (and given the CRDs) by the first test that
/// asks. A failed start fails every test with the same message instead of starting again.
async fn control_plane() -> &'static ControlPlane {
    static PLANE: OnceCell<Result<ControlPlane, String>> = OnceCell::const_new();
    let plane = PLANE
        .get_or_init(async || {
            let assets = PathBuf::from(std::env::var_os(envtest::ASSETS_VAR).unwrap_or_default());
            let started = async {
                let plane = ControlPlane::start(&assets)?;
                plane.wait_ready().await?;
                let objects = Objects::new(kubeconfig_client(plane.admin_kubeconfig()).await?);
                install_crds(&objects).await;
                anyhow::Ok(plane)
            };
            started.await.map_err(|e| format!("{e:#}"))
        })
        .await;
    match plane {
        Ok(plane) => plane,
        Err(e) => panic!("the envtest control plane did not start: {e}"),
    }
}

/// One test's API server or cluster, its namespace and a client; derefs to [`Objects`].
pub struct Env {
    objects: Objects,
    backend: Backend,
    /// The simulated server, on [`Backend::Simulator`].
    server: Option<TestApiServer>,
    /// A control plane of this test's own (see [`Env::start_without_crd`]).
    own_plane: Option<ControlPlane>,
    namespace: String,
    kubeconfig: PathBuf,
    workdir: PathBuf,
}

impl Env {
    /// A fresh environment for the test `test` (a short name, part of the namespace name).
    pub async fn start(test: &str) -> Self {
        Self::start_on(test, None).await
    }

    /// An environment whose API server lacks the CRD `missing` (e.g.
    /// `adapterplugins.ksm.k0rdent.mirantis.com`): a fresh simulator, or on envtest a control
    /// plane of the test's own (the shared one has every CRD). `None` on a real cluster, whose
    /// CRDs the tests do not remove.
    pub async fn start_without_crd(test: &str, missing: &str) -> Option<Self> {
        if Backend::selected() == Backend::Cluster {
            report(test, &format!("skipped: needs an API server without the CRD {missing}"));
            return None;
        }
        Some(Self::start_on(test, Some(missing)).await)
    }

    async fn start_on(test: &str, missing: Option<&str>) -> Self {
        let namespace = unique_namespace(test);
        let workdir = std::env::temp_dir().join("ksm-e2e").join(&namespace);
        std::fs::create_dir_all(&workdir).unwrap_or_else(|e| panic!("creating {}: {e}", workdir.display()));
        let backend = Backend::selected();
        let wanted = |crd: &Value| missing.is_none_or(|m| crd["metadata"]["name"] != m);
        let (server, own_plane, kubeconfig) = match backend {
            Backend::Simulator => {
                let crds = crds().into_iter().filter(wanted).collect();
                let server = TestApiServer::start(crds).await.expect("the test API server starts");
                let path = workdir.join("kubeconfig.yaml");
                std::fs::write(&path, server.kubeconfig_yaml()).expect("writing the kubeconfig");
                (Some(server), None, path)
            }
            Backend::Envtest if missing.is_some() => {
                let plane = own_control_plane(|crd| wanted(crd)).await;
                let path = plane.admin_kubeconfig().to_path_buf();
                (None, Some(plane), path)
            }
            Backend::Envtest => (None, None, control_plane().await.admin_kubeconfig().to_path_buf()),
            Backend::Cluster => (None, None, cluster_kubeconfig().expect("KSM_E2E_KUBECONFIG")),
        };
        report(test, &format!("runs in namespace {namespace}"));
        let objects = Objects::new(client_for(&kubeconfig).await);
        let env = Self { objects, backend, server, own_plane, namespace, kubeconfig, workdir };
        if backend == Backend::Cluster {
            install_crds(&env.objects).await;
        }
        env.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": env.namespace}})).await;
        env
    }

    /// The test's namespace (also the adapter's `--adapter-namespace`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The simulated server, or `None` on a real API server.
    pub fn server(&self) -> Option<&TestApiServer> {
        self.server.as_ref()
    }

    /// Which API server this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether this is a real API server (envtest or a cluster).
    pub fn is_real_cluster(&self) -> bool {
        self.server.is_none()
    }

    /// How many lists of `resource` (plural) of API group `group` the API server has been asked
    /// for: counted by the simulator, or by the audit log of a control plane of the test's own
    /// ([`Env::start_without_crd`]); `None` where other tests' clients would count too.
    pub fn lists(&self, group: &str, resource: &str) -> Option<usize> {
        match (&self.server, &self.own_plane) {
            (Some(server), _) => Some(server.requests().get("list", resource)),
            (None, Some(plane)) => Some(plane.lists(group, resource)),
            (None, None) => None,
        }
    }

    /// The envtest control plane, on [`Backend::Envtest`].
    pub async fn control_plane(&self) -> Option<&'static ControlPlane> {
        match self.backend {
            Backend::Envtest => Some(control_plane().await),
            _ => None,
        }
    }

    /// The kubeconfig file for processes (the adapter binary).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A directory for this test's files (kubeconfig, adapter log, translate inputs); kept after
    /// the test for inspection.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// A reference to a namespaced object in the test's namespace.
    pub fn obj(&self, kind: Kind, name: &str) -> ObjRef {
        ObjRef::new(kind, &self.namespace, name)
    }
}

impl Deref for Env {
    type Target = Objects;

    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // A control plane of the test's own goes away with everything in it.
        if !self.is_real_cluster() || self.own_plane.is_some() {
            return;
        }
        let (kubeconfig, namespace) = (self.kubeconfig.clone(), self.namespace.clone());
        // Drop cannot await, and the test's runtime may be shutting down: clean up on a thread
        // with its own runtime and client. A failure there is reported, not raised.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(clean_up_cluster(&kubeconfig, &namespace));
        });
        if cleanup.join().is_err() {
            eprintln!("warning: cleaning up namespace {} failed; delete it by hand", self.namespace);
        }
    }
}

/// Installs the CRDs for a real API server ([`real_server_crds`]) that it does not have from
/// someone else, and waits until they are Established.
pub async fn install_crds(objects: &Objects) {
    install_these_crds(objects, real_server_crds()).await;
}

async fn install_these_crds(objects: &Objects, crds: Vec<Value>) {
    for crd in crds {
        let r = ObjRef::of(&crd);
        let theirs = objects.get(&r).await.is_some_and(|live| !managed_by(&live, CRD_MANAGER));
        if !theirs {
            objects.apply(crd, CRD_MANAGER).await;
        }
        wait_for(&format!("{r} Established"), WAIT, async || {
            let live = objects.get(&r).await.unwrap_or_default();
            let established = live["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            if established { Ok(()) } else { Err(live["status"].clone()) }
        })
        .await;
    }
}

/// Deletes the test's namespace (after clearing finalizers that nothing will remove now) and
/// the cluster-scoped objects labelled with it.
async fn clean_up_cluster(kubeconfig: &Path, namespace: &str) {
    let objects = Objects::new(client_for(kubeconfig).await);
    for kind in [Kind::ServiceSet, Kind::HelmRelease, Kind::Kustomization] {
        for object in objects.list(kind, namespace, "").await {
            objects.clear_finalizers(&ObjRef::of(&object)).await;
        }
    }
    objects.delete(&ObjRef::cluster(Kind::Namespace, namespace)).await;
    let labelled = format!("{TEST_NAMESPACE_LABEL}={namespace}");
    let cluster_scoped = [
        Kind::StateManagementProvider,
        Kind::AdapterPlugin,
        Kind::ClusterRoleBinding,
        Kind::ClusterRole,
        Kind::Namespace,
    ];
    for kind in cluster_scoped {
        for object in objects.list(kind, "", &labelled).await {
            // By the kind listed: a real API server's list items of built-in kinds have none.
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            objects.delete(&ObjRef::cluster(kind, name)).await;
        }
    }
}

/// The real cluster's kubeconfig path, if `KSM_E2E_KUBECONFIG` is set (a leading `~/` is
/// expanded).
fn cluster_kubeconfig() -> Option<PathBuf> {
    let value = std::env::var(KUBECONFIG_VAR).ok().filter(|v| !v.is_empty())?;
    Some(match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(value),
    })
}

/// A client for a kubeconfig file's current context (panics, as the harness's helpers do).
async fn client_for(kubeconfig: &Path) -> Client {
    kubeconfig_client(kubeconfig).await.unwrap_or_else(|e| panic!("{e:#}"))
}

/// A client for a kubeconfig file's current context.
pub async fn kubeconfig_client(kubeconfig: &Path) -> anyhow::Result<Client> {
    use anyhow::Context as _;
    let loaded = Kubeconfig::read_from(kubeconfig).with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(loaded, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("kubeconfig {}", kubeconfig.display()))?;
    Ok(Client::try_from(config)?)
}

/// Whether `manager` is among the object's field managers.
fn managed_by(object: &Value, manager: &str) -> bool {
    object["metadata"]["managedFields"].as_array().into_iter().flatten().any(|m| m["manager"] == manager)
}

/// `ksm-e2e-<test>-<6 hex digits>`, unique across tests and runs.
fn unique_namespace(test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let name = format!("ksm-e2e-{test}-{:06x}", hasher.finish() & 0xff_ffff);
    assert!(name.len() <= 63, "namespace name {name:?} is longer than 63 characters: shorten the test name");
    name
}
