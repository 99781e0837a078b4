//! The kinds the tests touch and object CRUD on kube's dynamic API, as JSON values.
//!
//! Every helper panics with the object and the API error when a call fails for good: a test
//! failure is a panic, so the adapter's log is printed (see [`crate::adapter`]). Transient
//! failures — HTTP 500 and 409 `Conflict` (not `AlreadyExists`), as injected by the fault tests or
//! caused by a concurrent writer — are retried.

use std::fmt;
use std::time::Duration;

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

/// A kind the tests read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `k0rdent.mirantis.com/v1beta1` ServiceSet.
    ServiceSet,
    /// `k0rdent.mirantis.com/v1beta1` ServiceTemplate.
    ServiceTemplate,
    /// `k0rdent.mirantis.com/v1beta1` StateManagementProvider (cluster-scoped).
    StateManagementProvider,
    /// `ksm.k0rdent.mirantis.com/v1alpha1` AdapterPlugin (cluster-scoped).
    AdapterPlugin,
    /// `helm.toolkit.fluxcd.io/v2` HelmRelease.
    HelmRelease,
    /// `kustomize.toolkit.fluxcd.io/v1` Kustomization.
    Kustomization,
    /// `source.toolkit.fluxcd.io/v1` HelmRepository.
    HelmRepository,
    /// `argoproj.io/v1alpha1` Application.
    Application,
    /// `apps/v1` Deployment.
    Deployment,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `v1` Namespace (cluster-scoped).
    Namespace,
    /// `events.k8s.io/v1` Event.
    Event,
    /// `apiextensions.k8s.io/v1` CustomResourceDefinition (cluster-scoped).
    CustomResourceDefinition,
    /// `v1` ServiceAccount.
    ServiceAccount,
    /// `rbac.authorization.k8s.io/v1` ClusterRole (cluster-scoped).
    ClusterRole,
    /// `rbac.authorization.k8s.io/v1` ClusterRoleBinding (cluster-scoped).
    ClusterRoleBinding,
    /// `rbac.authorization.k8s.io/v1` Role.
    Role,
    /// `rbac.authorization.k8s.io/v1` RoleBinding.
    RoleBinding,
    /// `v1` Secret.
    Secret,
    /// `k0rdent.mirantis.com/v1beta1` ClusterDeployment.
    ClusterDeployment,
    /// `k0rdent.mirantis.com/v1beta1` Credential.
    Credential,
    /// `k0rdent.mirantis.com/v1beta1` Region (cluster-scoped).
    Region,
    /// `config.projectsveltos.io/v1beta1` Profile.
    Profile,
    /// `config.projectsveltos.io/v1beta1` ClusterSummary.
    ClusterSummary,
    /// `fleet.cattle.io/v1alpha1` HelmOp.
    HelmOp,
    /// `v1` Pod.
    Pod,
}

/// Group, version, kind, plural, namespaced.
type Parts = (&'static str, &'static str, &'static str, &'static str, bool);

impl Kind {
    /// The kinds of children the Flux plugin creates.
    pub const CHILDREN: [Kind; 2] = [Kind::HelmRelease, Kind::Kustomization];

    const ALL: [Kind; 26] = [
        Kind::ServiceSet,
        Kind::ServiceTemplate,
        Kind::StateManagementProvider,
        Kind::AdapterPlugin,
        Kind::HelmRelease,
        Kind::Kustomization,
        Kind::HelmRepository,
        Kind::Application,
        Kind::Deployment,
        Kind::ConfigMap,
        Kind::Namespace,
        Kind::Event,
        Kind::CustomResourceDefinition,
        Kind::ServiceAccount,
        Kind::ClusterRole,
        Kind::ClusterRoleBinding,
        Kind::Role,
        Kind::RoleBinding,
        Kind::Secret,
        Kind::ClusterDeployment,
        Kind::Credential,
        Kind::Region,
        Kind::Profile,
        Kind::ClusterSummary,
        Kind::HelmOp,
        Kind::Pod,
    ];

    fn parts(self) -> Parts {
        match self {
            Kind::ServiceSet => ("k0rdent.mirantis.com", "v1beta1", "ServiceSet", "servicesets", true),
            Kind::ServiceTemplate => ("k0rdent.mirantis.com", "v1beta1", "ServiceTemplate", "servicetemplates", true),
            Kind::StateManagementProvider => {
                ("k0rdent.mirantis.com", "v1beta1", "StateManagementProvider", "statemanagementproviders", false)
            }
            Kind::AdapterPlugin => ("ksm.k0rdent.mirantis.com", "v1alpha1", "AdapterPlugin", "adapterplugins", false),
            Kind::HelmRelease => ("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", true),
            Kind::Kustomization => ("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations", true),
            Kind::HelmRepository => ("source.toolkit.fluxcd.io", "v1", "HelmRepository", "helmrepositories", true),
            Kind::Application => ("argoproj.io", "v1alpha1", "Application", "applications", true),
            Kind::Deployment => ("apps", "v1", "Deployment", "deployments", true),
            Kind::ConfigMap => ("", "v1", "ConfigMap", "configmaps", true),
            Kind::Namespace => ("", "v1", "Namespace", "namespaces", false),
            Kind::Event => ("events.k8s.io", "v1", "Event", "events", true),
            Kind::CustomResourceDefinition => {
                ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false)
            }
            Kind::ServiceAccount => ("", "v1", "ServiceAccount", "serviceaccounts", true),
            Kind::ClusterRole => ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false),
            Kind::ClusterRoleBinding => {
                ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false)
            }
            Kind::Role => ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
            Kind::RoleBinding => ("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true),
            Kind::Secret => ("", "v1", "Secret", "secrets", true),
            Kind::ClusterDeployment => {
                ("k0rdent.mirantis.com", "v1beta1", "ClusterDeployment", "clusterdeployments", true)
            }
            Kind::Credential => ("k0rdent.mirantis.com", "v1beta1", "Credential", "credentials", true),
            Kind::Region => ("k0rdent.mirantis.com", "v1beta1", "Region", "regions", false),
            Kind::Profile => ("config.projectsveltos.io", "v1beta1", "Profile", "profiles", true),
            Kind::ClusterSummary => ("config.projectsveltos.io", "v1beta1", "ClusterSummary", "clustersummaries", true),
            Kind::HelmOp => ("fleet.cattle.io", "v1alpha1", "HelmOp", "helmops", true),
            Kind::Pod => ("", "v1", "Pod", "pods", true),
        }
    }

    /// `apiVersion`, e.g. `helm.toolkit.fluxcd.io/v2`.
    pub fn api_version(self) -> String {
        let (group, version, ..) = self.parts();
        if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
    }

    /// `kind`, e.g. `HelmRelease`.
    pub fn name(self) -> &'static str {
        self.parts().2
    }

    /// The resource (plural), e.g. `helmreleases`.
    pub fn plural(self) -> &'static str {
        self.parts().3
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        self.parts().4
    }

    /// kube's description of the resource.
    pub fn resource(self) -> ApiResource {
        let (group, version, kind, plural, _) = self.parts();
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }

    /// The kind of an `apiVersion` and `kind`, if the tests know it.
    pub fn of(api_version: &str, kind: &str) -> Option<Kind> {
        Self::ALL.into_iter().find(|k| k.api_version() == api_version && k.name() == kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The identity of one object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjRef {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace; empty for cluster-scoped kinds.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ObjRef {
    /// A namespaced object.
    pub fn new(kind: Kind, namespace: &str, name: &str) -> Self {
        Self { kind, namespace: namespace.to_string(), name: name.to_string() }
    }

    /// A cluster-scoped object.
    pub fn cluster(kind: Kind, name: &str) -> Self {
        Self::new(kind, "", name)
    }

    /// The identity of an object given as JSON; panics for kinds the tests do not know.
    pub fn of(object: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let (api_version, kind) = (text(&object["apiVersion"]), text(&object["kind"]));
        let kind = Kind::of(&api_version, &kind).unwrap_or_else(|| panic!("unknown kind {api_version} {kind}"));
        let namespace = if kind.namespaced() { text(&object["metadata"]["namespace"]) } else { String::new() };
        Self { kind, namespace, name: text(&object["metadata"]["name"]) }
    }
}

impl fmt::Display for ObjRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.namespace.as_str() {
            "" => write!(f, "{} {}", self.kind, self.name),
            ns => write!(f, "{} {ns}/{}", self.kind, self.name),
        }
    }
}

/// The HTTP status of a failed API call, if the server answered.
pub fn error_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether a failed call is worth repeating: a 500, or a 409 that is not `AlreadyExists`.
fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 500 || (status.code == 409 && status.reason != "AlreadyExists"),
        _ => false,
    }
}

/// Runs `op` until it succeeds or fails for good (at most 10 attempts, 100 ms apart).
async fn retry<T>(what: &str, mut op: impl AsyncFnMut() -> kube::Result<T>) -> T {
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(value) => return value,
            Err(e) if attempt < 10 && transient(&e) => attempt += 1,
            Err(e) => panic!("{what}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn dynamic(object: Value) -> DynamicObject {
    serde_json::from_value(object).expect("an object with apiVersion, kind and metadata")
}

fn json_of(object: DynamicObject) -> Value {
    serde_json::to_value(object).expect("objects serialize")
}

/// Object CRUD through a kube client, as JSON values.
#[derive(Clone)]
pub struct Objects {
    client: Client,
}

impl Objects {
    /// Wraps a client.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// The dynamic API of `kind` in `namespace` (all namespaces when empty or cluster-scoped).
    pub fn api(&self, kind: Kind, namespace: &str) -> Api<DynamicObject> {
        let resource = kind.resource();
        if kind.namespaced() && !namespace.is_empty() {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        }
    }

    fn api_of(&self, r: &ObjRef) -> Api<DynamicObject> {
        self.api(r.kind, &r.namespace)
    }

    /// The object, or `None` when it does not exist.
    pub async fn get(&self, r: &ObjRef) -> Option<Value> {
        let api = self.api_of(r);
        retry(&format!("GET {r}"), async || api.get_opt(&r.name).await).await.map(json_of)
    }

    /// The object; panics when it does not exist.
    pub async fn must_get(&self, r: &ObjRef) -> Value {
        self.get(r).await.unwrap_or_else(|| panic!("{r} does not exist"))
    }

    /// Objects of `kind` in `namespace` (all when empty) matching a label selector (`""`: all).
    pub async fn list(&self, kind: Kind, namespace: &str, labels: &str) -> Vec<Value> {
        let api = self.api(kind, namespace);
        let params = if labels.is_empty() { ListParams::default() } else { ListParams::default().labels(labels) };
        let list = retry(&format!("LIST {kind} in {namespace:?} ({labels})"), async || api.list(&params).await).await;
        list.items.into_iter().map(json_of).collect()
    }

    /// Creates an object, then writes its `status`, if it has one, through the status
    /// subresource (create drops `status`). Returns the stored object.
    pub async fn create(&self, mut object: Value) -> Value {
        let r = ObjRef::of(&object);
        let status = object.as_object_mut().and_then(|o| o.remove("status"));
        let api = self.api_of(&r);
        let body = dynamic(object);
        let created = retry(&format!("CREATE {r}"), async || api.create(&PostParams::default(), &body).await).await;
        match status {
            Some(status) => self.set_status(&r, status).await,
            None => json_of(created),
        }
    }

    /// Applies a JSON merge patch (`null` removes a field; lists are replaced whole).
    pub async fn merge_patch(&self, r: &ObjRef, patch: Value) -> Value {
        let api = self.api_of(r);
        let patch = Patch::Merge(patch);
        let patched =
            retry(&format!("PATCH {r}"), async || api.patch(&r.name, &PatchParams::default(), &patch).await).await;
        json_of(patched)
    }

    /// Server-side applies `object` as `manager`, forcing conflicts.
    pub async fn apply(&self, object: Value, manager: &str) -> Value {
        let r = ObjRef::of(&object);
        let api = self.api_of(&r);
        let patch = Patch::Apply(object);
        let params = PatchParams::apply(manager).force();
        json_of(retry(&format!("APPLY {r}"), async || api.patch(&r.name, &params, &patch).await).await)
    }

    /// Replaces the object's whole `status` through the status subresource (read, replace,
    /// write with the read resourceVersion; repeated on conflict). Returns the stored object.
    pub async fn set_status(&self, r: &ObjRef, status: Value) -> Value {
        let api = self.api_of(r);
        let write = async || {
            let mut object = json_of(api.get(&r.name).await?);
            object["status"] = status.clone();
            api.replace_status(&r.name, &PostParams::default(), &dynamic(object)).await
        };
        json_of(retry(&format!("PUT {r} status"), write).await)
    }

    /// Deletes the object (background propagation); false when it did not exist.
    pub async fn delete(&self, r: &ObjRef) -> bool {
        let api = self.api_of(r);
        let delete = async || match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(e) if error_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(e),
        };
        retry(&format!("DELETE {r}"), delete).await
    }

    /// Removes every finalizer of the object, if it exists.
    pub async fn clear_finalizers(&self, r: &ObjRef) {
        let api = self.api_of(r);
        let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let clear = async || match api.patch(&r.name, &PatchParams::default(), &patch).await {
            Ok(_) => Ok(()),
            Err(e) if error_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(e),
        };
        retry(&format!("PATCH {r} finalizers"), clear).await
    }
}
