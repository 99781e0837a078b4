//! Where a test runs: a fresh simulated API server, or a real cluster when `KSM_E2E_KUBECONFIG`
//! is set. Either way the test gets its own namespace, so scenarios read the same on both.
//!
//! On a real cluster the CRDs are installed once (server-side apply, field manager `ksm-e2e`)
//! unless the cluster already has them from someone else (kcm, Flux), and dropping the [`Env`]
//! deletes the namespace and the cluster-scoped objects the test labelled with it (SMPs), after
//! clearing the finalizers of what is left in the namespace.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ksm_test_apiserver::TestApiServer;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

use crate::fixtures::yaml_documents;
use crate::objects::{Kind, ObjRef, Objects};
use crate::wait::wait_for;
use crate::{TEST_NAMESPACE_LABEL, WAIT};

/// The environment variable naming a real cluster's kubeconfig.
pub const KUBECONFIG_VAR: &str = "KSM_E2E_KUBECONFIG";
/// Field manager of the CRDs the tests install on a real cluster.
const CRD_MANAGER: &str = "ksm-e2e";

/// The k0rdent CRDs (ServiceSet, StateManagementProvider, ServiceTemplate), the host's
/// AdapterPlugin CRD and the Flux and Argo CD test CRDs (HelmRelease, Kustomization, Application).
pub fn crds() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        dir.join("../../crds/k0rdent.yaml"),
        dir.join("../../crds/adapterplugin.yaml"),
        dir.join("fixtures/flux-crds.yaml"),
        dir.join("fixtures/argocd-crds.yaml"),
    ]
    .iter()
    .flat_map(|path| {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        yaml_documents(&text)
    })
    .collect()
}

enum Backend {
    Server(TestApiServer),
    Cluster,
}

/// One test's API server or cluster, its namespace and a client; derefs to [`Objects`].
pub struct Env {
    objects: Objects,
    backend: Backend,
    namespace: String,
    kubeconfig: PathBuf,
    workdir: PathBuf,
}

impl Env {
    /// A fresh environment for the test `test` (a short name, part of the namespace name).
    pub async fn start(test: &str) -> Self {
        let namespace = unique_namespace(test);
        let workdir = std::env::temp_dir().join("ksm-e2e").join(&namespace);
        std::fs::create_dir_all(&workdir).unwrap_or_else(|e| panic!("creating {}: {e}", workdir.display()));
        let (backend, kubeconfig) = match cluster_kubeconfig() {
            Some(path) => (Backend::Cluster, path),
            None => {
                let server = TestApiServer::start(crds()).await.expect("the test API server starts");
                let path = workdir.join("kubeconfig.yaml");
                std::fs::write(&path, server.kubeconfig_yaml()).expect("writing the kubeconfig");
                (Backend::Server(server), path)
            }
        };
        let objects = Objects::new(client_for(&kubeconfig).await);
        let env = Self { objects, backend, namespace, kubeconfig, workdir };
        if env.is_real_cluster() {
            env.install_crds().await;
        }
        env.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": env.namespace}})).await;
        env
    }

    /// The test's namespace (also the adapter's `--adapter-namespace`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The simulated server, or `None` on a real cluster.
    pub fn server(&self) -> Option<&TestApiServer> {
        match &self.backend {
            Backend::Server(server) => Some(server),
            Backend::Cluster => None,
        }
    }

    /// Whether this is a real cluster.
    pub fn is_real_cluster(&self) -> bool {
        self.server().is_none()
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

    /// Installs the CRDs the cluster does not have from someone else, and waits until they are
    /// Established.
    async fn install_crds(&self) {
        for crd in crds() {
            let r = ObjRef::of(&crd);
            let theirs = self.get(&r).await.is_some_and(|live| !managed_by(&live, CRD_MANAGER));
            if !theirs {
                self.apply(crd, CRD_MANAGER).await;
            }
            wait_for(&format!("{r} Established"), WAIT, async || {
                let live = self.get(&r).await.unwrap_or_default();
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
}

impl Deref for Env {
    type Target = Objects;

    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if !self.is_real_cluster() {
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
    for kind in [Kind::StateManagementProvider, Kind::AdapterPlugin] {
        for object in objects.list(kind, "", &labelled).await {
            objects.delete(&ObjRef::of(&object)).await;
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
