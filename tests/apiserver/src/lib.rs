//! A **simulated** Kubernetes API server for tests, served in-process over plain HTTP on `127.0.0.1`.
//!
//! It implements, in memory, the parts of the API that ksm-adapter and kube-rs use — discovery, CRUD, list,
//! watch, patches, server-side apply, the status subresource, finalizers and owner-reference cascading — with
//! fault injection and request counting for tests. It is the fast backend; the e2e suite also runs every
//! scenario on a real kube-apiserver v1.32 with the upstream CRDs (envtest, `ksm_test_harness::envtest`), and
//! what a scenario there showed to differ is either modelled here or listed below.
//!
//! # Found on the real API server
//!
//! - A condition message over 32,768 bytes (`metav1.Condition`'s `maxLength`) makes kube-apiserver refuse the
//!   whole status write with 422; this server accepts it (no schema validation, below). The host cuts its
//!   messages (the `long-error` case of the e2e hostile-plugin scenario shows it on envtest).
//! - A failed JSON patch `test` operation is 422 `Invalid` with an empty message there and here; a merge patch
//!   carrying a stale `metadata.resourceVersion` is 409 `Conflict` there and here, which is what the host's
//!   finalizer writes rely on.
//! - Requests by a user the chart's RBAC does not allow are 403 there; this server allows everything
//!   (below): the e2e RBAC scenario runs the adapter as its ServiceAccount on envtest.
//! - A label value over 63 characters (a child labelled with a 253-character ServiceSet name) is 422 there and
//!   here: label values are validated.
//! - A CRD's defaults are applied there (a HelmRelease's `chart.spec` gets `reconcileStrategy: ChartVersion` and
//!   `version: "*"`), not here (no defaulting, below): the e2e suite compares a child's spec as a superset of what
//!   was applied, and the host's drift check does the same.
//! - Listing a kind of a group no CRD installs is a plain-text `404 page not found` there (a Status with no
//!   reason once parsed), a `NotFound` Status here: a client must go by the 404, as `explain` does (the
//!   no-AdapterPlugin-CRD scenario showed it on envtest).
//!
//! # Deviations from real Kubernetes
//!
//! - **Transport and auth**: plain HTTP/1.1 only, no TLS, no authentication or authorization (every request is
//!   allowed; SelfSubjectAccessReview answers `allowed: true` unless [`TestApiServer::deny`] was called for its
//!   exact verb, group and resource). No admission, no webhooks, no rate limiting (except [`TestApiServer::fail_next`]).
//! - **Kinds**: only installed CRDs and the built-ins Namespace, ConfigMap, Secret, Event (core and
//!   `events.k8s.io/v1`, stored separately), `apps/v1` Deployment, StatefulSet and DaemonSet, Pod,
//!   PersistentVolumeClaim, PersistentVolume, CustomResourceDefinition, `coordination.k8s.io/v1`
//!   Lease and SelfSubjectAccessReview (create only, not stored). Nothing acts on objects: no controllers (a
//!   Deployment never gets pods or status), no namespace lifecycle (deleting a Namespace does not delete its
//!   contents), and creating in a namespace that does not exist succeeds.
//! - **No validation** beyond identity and label values: no OpenAPI schema validation, pruning, defaulting or CEL rules; CRD
//!   validation only checks group, names, scope, versions and that `metadata.name` is `{plural}.{group}`. A
//!   `metadata.resourceVersion` sent on create is ignored (Kubernetes rejects it); an apply body's `apiVersion` and
//!   `kind` are not checked against the URL.
//! - **Versions**: all served versions of a CRD share one storage; objects are returned with the requested
//!   `apiVersion` but otherwise unconverted (no conversion webhooks). The preferred version of a group in
//!   discovery is the first served one in registration order, not the highest by version priority.
//! - **Discovery**: only the legacy documents (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/{g}`,
//!   `/apis/{g}/{v}`); no aggregated discovery (`apidiscovery.k8s.io`), no OpenAPI (`/openapi/*`), no
//!   categories; verbs never include `deletecollection`.
//! - **Metadata**: `uid` is a counter formatted like a UUID; `creationTimestamp`/`deletionTimestamp` have second
//!   precision. `generation` is kept for every kind (real built-ins such as ConfigMap have none): 1 at create, +1
//!   when anything but `metadata` (and `status` when the kind has a status subresource) changes, +1 when
//!   `deletionTimestamp` is set. A write that changes nothing but managedFields timestamps is a no-op (no new
//!   resourceVersion, no event), as in Kubernetes.
//! - **Status subresource**: on create, `status` is dropped for kinds with a status subresource; writes to the
//!   main resource keep the stored `status`; writes to `/status` change only `status`.
//! - **List**: `limit` and `continue` page through the objects in (namespace, name) order. Every page
//!   carries the first page's resourceVersion, but later pages are read from the latest state
//!   (kube-apiserver serves them from the first page's snapshot): a watch from that resourceVersion
//!   still sees every change, some of them already shown. The continue token is
//!   `rv/namespace/name`, not opaque, and never expires (no 410); no `remainingItemCount`. `resourceVersion`/`resourceVersionMatch` on list are ignored (always the latest state). Field selectors
//!   support only `metadata.name` and `metadata.namespace` (others → 400).
//! - **Watch**: the history keeps the last 10,000 events (plus [`TestApiServer::compact_history`] to expire every
//!   resourceVersion issued so far); a watch from an older resourceVersion gets one `ERROR` event with a 410
//!   `Expired` Status. `resourceVersion` absent, `""` or `"0"` starts with synthetic ADDED events for all current
//!   objects. With `sendInitialEvents=true` (streaming lists) the synthetic ADDED events
//!   are sent whatever the `resourceVersion`, then a BOOKMARK annotated `k8s.io/initial-events-end`. Bookmarks
//!   (with `allowWatchBookmarks=true`) come every second when the watcher has no pending events. The default
//!   watch timeout is 30 minutes. A watch from a resourceVersion newer than the current one just waits.
//! - **Patches**: strategic merge patch is applied as a JSON merge patch (no `$patch` directives, no merge keys:
//!   lists are replaced whole). Any JSON patch failure, including a failed `test` op, is 422 `Invalid`.
//! - **Server-side apply** (module `apply`): each Apply manager owns the *leaf* paths (scalars
//!   and lists) of its last applied configuration, recorded in `managedFields` as a simplified `FieldsV1` (no
//!   `.` or `k:`/`v:` entries). Lists are atomic (no `listType=map`/`set` merging, e.g. conditions or containers
//!   are owned whole). Maps merge key by key. Only `labels`, `annotations`, `finalizers` and `ownerReferences`
//!   of `metadata` can be applied. Conflicts arise only with other *Apply* managers owning an overlapping path
//!   with a different value; `Update` operations (PUT, merge/JSON patch) are not recorded as managers, so they
//!   never cause conflicts; as in Kubernetes, a field an update sets, changes or removes is no longer owned by the
//!   Apply managers that had it (Kubernetes would make the updater its owner). A field a manager stops applying is
//!   removed unless another Apply manager owns it (parent maps left empty are kept). `dryRun` is ignored everywhere.
//! - **Delete**: `DeleteOptions` are ignored except `propagationPolicy: Orphan`; `Foreground` is treated as
//!   `Background`. Garbage collection runs synchronously when an object is removed: every object whose
//!   `ownerReferences` names its uid is deleted (with the same finalizer rules), in any namespace. `deletecollection`
//!   is 405. The delete response is always the object, never a `Status`.
//! - **Representations**: JSON only; `Accept` is ignored, so metadata-only (`PartialObjectMetadata`) and `Table`
//!   requests get full objects (kube-rs `Api<PartialObjectMeta<K>>` still works: it ignores the extra fields).
//! - **Errors**: failures are `metav1.Status` objects with `reason` and `code` but no `details`.
//! - **Requests** are counted by (verb, resource) — resource includes `/status` — before fault injection;
//!   non-resource paths (discovery) count as verb `get` with the path (e.g. `/apis`) as resource. They are also
//!   recorded as RBAC sees them ([`TestApiServer::accesses`]): by user — the `Impersonate-User` header (a
//!   kubeconfig's `as:`), since there is no authentication — verb, API group, resource, subresource and namespace.

mod apply;
mod discovery;
mod errors;
mod http;
mod kinds;
mod patch;
mod selectors;
mod store;
mod watch;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch as signal};
use tokio::task::{JoinHandle, JoinSet};

use crate::store::{Part, Store};

/// Capacity of the event fan-out channel; a watcher lagging further behind gets a 410 `ERROR` event.
const FAN_OUT_CAPACITY: usize = 16_384;

/// State shared by the server's connections and the [`TestApiServer`] handle.
pub(crate) struct Shared {
    store: Mutex<Store>,
    /// Bumped by [`TestApiServer::drop_watches`]; every watch stream ends when it changes.
    drop_watches: signal::Sender<()>,
    counts: Mutex<BTreeMap<(String, String), usize>>,
    accesses: Mutex<BTreeMap<Access, usize>>,
    reviews: Mutex<BTreeMap<Access, usize>>,
    /// Injected failures (HTTP status codes) still to serve, by verb.
    faults: Mutex<HashMap<String, VecDeque<u16>>>,
    /// `host:port`, for `/api`'s `serverAddressByClientCIDRs`.
    address: String,
}

impl Shared {
    fn count(&self, verb: &str, resource: &str) {
        *self.counts.lock().expect("counts lock").entry((verb.to_string(), resource.to_string())).or_default() += 1;
    }

    fn record(&self, access: Access) {
        *self.accesses.lock().expect("accesses lock").entry(access).or_default() += 1;
    }

    fn record_review(&self, access: Access) {
        *self.reviews.lock().expect("reviews lock").entry(access).or_default() += 1;
    }

    fn take_fault(&self, verb: &str) -> Option<u16> {
        self.faults.lock().expect("faults lock").get_mut(verb)?.pop_front()
    }
}

/// Snapshot of how many requests were served, by (verb, resource).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(BTreeMap<(String, String), usize>);

impl RequestCounts {
    /// Requests with this verb (`get list watch create update patch delete`) on this resource
    /// (plural, with `/status` for the subresource, e.g. `"servicesets/status"`).
    pub fn get(&self, verb: &str, resource: &str) -> usize {
        self.0.get(&(verb.to_string(), resource.to_string())).copied().unwrap_or(0)
    }

    /// Requests with this verb on any resource.
    pub fn verb(&self, verb: &str) -> usize {
        self.0.iter().filter(|((v, _), _)| v == verb).map(|(_, n)| n).sum()
    }

    /// Every (verb, resource, count).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, usize)> {
        self.0.iter().map(|((v, r), n)| (v.as_str(), r.as_str(), *n))
    }
}

/// One kind of request as RBAC sees it (see [`TestApiServer::accesses`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// The `Impersonate-User` header (e.g. `system:serviceaccount:ns:name`); empty without one.
    pub user: String,
    /// `get list watch create update patch delete deletecollection`; `get` for non-resource paths.
    pub verb: String,
    /// API group; empty for the core group and for non-resource paths.
    pub group: String,
    /// Plural resource name, without the subresource; empty for non-resource paths.
    pub resource: String,
    /// Subresource (`status`), if any.
    pub subresource: Option<String>,
    /// Namespace of a namespaced request; `None` for cluster-scoped resources, requests across all namespaces
    /// and non-resource paths.
    pub namespace: Option<String>,
    /// The path of a non-resource request (discovery, e.g. `/apis`); `None` for resource requests.
    pub non_resource_path: Option<String>,
}

/// A running simulated API server; dropping it closes the listener and every connection, including watches.
pub struct TestApiServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    accept: JoinHandle<()>,
}

impl TestApiServer {
    /// Starts serving on 127.0.0.1 with a random port on the current tokio runtime; `crds` are
    /// CustomResourceDefinition objects (JSON values) installed at start (more can be created later via the API).
    pub async fn start(crds: Vec<Value>) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let (events, _) = broadcast::channel(FAN_OUT_CAPACITY);
        let mut store = Store::new(events);
        let crd_kind = store
            .kinds
            .by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            .cloned()
            .expect("CustomResourceDefinition is built in");
        for crd in crds {
            let name = crd["metadata"]["name"].as_str().unwrap_or("").to_string();
            store.create(&crd_kind, None, crd, Part::Main).with_context(|| format!("installing CRD {name:?}"))?;
        }
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            drop_watches: signal::channel(()).0,
            counts: Mutex::default(),
            accesses: Mutex::default(),
            reviews: Mutex::default(),
            faults: Mutex::default(),
            address: address.to_string(),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Self { shared, address, accept })
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A kubeconfig (YAML) pointing at [`url`](Self::url) without auth, for running a real binary against the server.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {url}\n\
             users:\n- name: test\n  user: {{}}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\n\
             current-context: test\npreferences: {{}}\n",
            url = self.url()
        )
    }

    /// Snapshot of the request counts since start or the last [`reset_counts`](Self::reset_counts).
    pub fn requests(&self) -> RequestCounts {
        RequestCounts(self.shared.counts.lock().expect("counts lock").clone())
    }

    /// Every kind of request served since start or the last [`reset_counts`](Self::reset_counts), with how many
    /// times, as RBAC would authorize it: by user, verb, group, resource, subresource and namespace. Counted like
    /// [`requests`](Self::requests) (before fault injection, failures included). A client is told apart by the
    /// user it impersonates (kubeconfig `as:`), e.g. a controller under test from the test's own client.
    pub fn accesses(&self) -> BTreeMap<Access, usize> {
        self.shared.accesses.lock().expect("accesses lock").clone()
    }

    /// The permissions asked about in SelfSubjectAccessReviews since start or the last
    /// [`reset_counts`](Self::reset_counts), with how many times: `user` is who asked (as in
    /// [`accesses`](Self::accesses)), the other fields are the review's `spec.resourceAttributes` (or
    /// `nonResourceAttributes`: verb and path).
    pub fn access_reviews(&self) -> BTreeMap<Access, usize> {
        self.shared.reviews.lock().expect("reviews lock").clone()
    }

    /// Sets every request count back to zero (and forgets the [`accesses`](Self::accesses) and
    /// [`access_reviews`](Self::access_reviews)).
    pub fn reset_counts(&self) {
        self.shared.counts.lock().expect("counts lock").clear();
        self.shared.accesses.lock().expect("accesses lock").clear();
        self.shared.reviews.lock().expect("reviews lock").clear();
    }

    /// Makes the next `n` resource requests with `verb` (on any resource; not discovery) fail with HTTP `status`
    /// (e.g. 500, 409, 429) and a `metav1.Status` body; 429 responses carry `Retry-After: 1`. Adds to failures
    /// already queued. Note that kube-rs clients retry 429, 503 and 504 by default.
    pub fn fail_next(&self, verb: &str, n: usize, status: u16) {
        let mut faults = self.shared.faults.lock().expect("faults lock");
        faults.entry(verb.to_string()).or_default().extend(std::iter::repeat_n(status, n));
    }

    /// Makes SelfSubjectAccessReviews for exactly this verb, API group (`""` for core) and resource answer
    /// `allowed: false`.
    pub fn deny(&self, verb: &str, group: &str, resource: &str) {
        let mut store = self.shared.store.lock().expect("store lock");
        store.denied.insert((verb.to_string(), group.to_string(), resource.to_string()));
    }

    /// Ends every open watch stream (clients see the connection's body end and re-watch).
    pub fn drop_watches(&self) {
        self.shared.drop_watches.send_replace(());
    }

    /// Forgets the watch event history and ends every open watch: resuming from any resourceVersion issued so
    /// far then gets a 410 `Expired` ERROR event, so clients must re-list.
    pub fn compact_history(&self) {
        self.shared.store.lock().expect("store lock").compact();
        self.drop_watches();
    }

    /// The stored object (as `api_version`), bypassing HTTP; `namespace` is ignored for cluster-scoped kinds.
    pub fn object(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.shared.store.lock().expect("store lock").object(api_version, kind, namespace, name)
    }

    /// Creates or wholly replaces an object (including `status`), bypassing HTTP, resourceVersion preconditions
    /// and the status subresource split (e.g. to simulate Flux writing status); bumps the resourceVersion and
    /// notifies watchers like any write. Returns the stored object.
    pub fn put_object(&self, obj: Value) -> anyhow::Result<Value> {
        Ok(self.shared.store.lock().expect("store lock").put(obj)?)
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_watches();
    }
}

/// Accepts connections until aborted; aborting it drops the `JoinSet`, which ends every connection too.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| http::handle(shared.clone(), request));
                    // A connection error (e.g. the client hanging up mid-watch) only ends that connection.
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
            Some(_) = connections.join_next() => {}
        }
    }
}
