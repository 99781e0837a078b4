//! Clients of clusters other than the one the host runs in, built from kubeconfig Secrets: made
//! on first use, made again when the Secret changes, at most `capacity` at once (the least
//! recently used goes first) and dropped once unused for a while ([`Reads::idle`]). One client per Secret,
//! whatever the number of ServiceSets reading through it. A kubeconfig comes from whoever can
//! write Secrets, so it may not make the host run a command or read its own files (its
//! ServiceAccount token among them) nor send it to an address the operator did not allow
//! ([`super::addresses`]), and every call through it is bounded in time and bytes
//! ([`super::bounded`]).
//!
//! A Secret is read on the cluster the caller names: the management cluster, or a regional one
//! (where a regional cluster's children keep their kubeconfig Secrets, as in kcm 1.12).

use super::addresses::{Allowed, Refused, Resolver};
use super::bounded::{BoundedLayer, Limits};
use super::listed::{self, Listed};
use crate::health::rule_set::{GroupKind, Scope};
use crate::k0rdent::NamespacedName;
use futures::FutureExt;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::core::GroupVersion;
use kube::{Api, Client, Config, discovery};
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// The clients held at most by default.
pub const CAPACITY: usize = 64;
/// Objects one list request asks for at most: a look lists a kind in a namespace (not only the
/// services' own workloads), and follows the next page until its budget is spent.
const PAGE: u32 = 500;
/// How long a kind the cluster does not serve is not looked for again.
const UNSERVED_FOR: Duration = Duration::from_secs(60);
/// Kinds whose place one cluster's client remembers at most (health rules name a handful); the
/// least recently used is forgotten first and looked for again on its next use.
const KINDS_HELD: usize = 64;
/// Group versions whose resources one cluster's client remembers at most.
const VERSIONS_HELD: usize = 16;
/// Bounds on a connection to another cluster: one that does not answer must not hold a reconcile.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the clients are for, which says how long and how large a call may be and how long an
/// unused client is kept.
#[derive(Clone, Copy, Debug)]
pub enum Reads {
    /// Single requests (a target cluster's workloads): a silent cluster must not hold a reconcile.
    Requests,
    /// Watches too (a regional cluster's CD-tool objects): a watch is quiet until something
    /// changes, for up to the 290 s kube's watcher asks the API server to hold it.
    Watches,
}

impl Reads {
    /// The bounds of every call. A target's reads are pages of at most [`PAGE`] objects
    /// and discovery; a region's are pages of up to 500 CD-tool objects (kube's watcher), and
    /// its writes one object each.
    pub fn limits(self) -> Limits {
        match self {
            Reads::Requests => {
                Limits { read: Duration::from_secs(10), write: Duration::from_secs(10), answer: 16 << 20 }
            }
            Reads::Watches => {
                Limits { read: Duration::from_secs(30), write: Duration::from_secs(10), answer: 64 << 20 }
            }
        }
    }

    /// The longest wait for the next byte: what ends a silent watch, which has no deadline.
    fn read_timeout(self) -> Duration {
        match self {
            Reads::Requests => self.limits().read,
            Reads::Watches => Duration::from_secs(295),
        }
    }

    /// A client unused this long is dropped: for watches, longer than two resyncs (600 s by
    /// default) so that a quiet region's caches are not listed again at every resync.
    pub fn idle(self) -> Duration {
        match self {
            Reads::Requests => Duration::from_secs(10 * 60),
            Reads::Watches => Duration::from_secs(30 * 60),
        }
    }
}

/// How long what a kubeconfig Secret read said stands: its client is used, or its absence
/// reported, without reading it again. A health check every few seconds (while a service is
/// unhealthy) and every round of a regional ServiceSet would otherwise read it each time, more
/// often than a ServiceSet's own requests; a change is seen within this time.
pub(super) const SECRET_FRESH: Duration = Duration::from_secs(30);

/// Why a kubeconfig Secret cannot be used, as a read of it found (kept for [`SECRET_FRESH`]).
#[derive(Clone, Debug, thiserror::Error)]
pub enum SecretUnusable {
    /// It cannot be read.
    #[error("reading Secret {secret}{on}: {source}")]
    Read {
        /// The Secret.
        secret: NamespacedName,
        /// ` on <the cluster>` it was read on; empty for the management cluster.
        on: String,
        /// Why.
        source: Arc<kube::Error>,
    },
    /// It does not exist.
    #[error("Secret {secret} not found{on}")]
    NotFound {
        /// The Secret.
        secret: NamespacedName,
        /// ` on <the cluster>` it was looked for on; empty for the management cluster.
        on: String,
    },
}

/// Why the cluster of a kubeconfig Secret cannot be reached, naming the Secret and its key.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The Secret cannot be used.
    #[error(transparent)]
    Secret(#[from] SecretUnusable),
    /// The Secret has no such key.
    #[error("Secret {secret} has no key {key:?}")]
    NoKey {
        /// The Secret.
        secret: NamespacedName,
        /// The key.
        key: String,
    },
    /// The key's value is not text.
    #[error("Secret {secret} key {key:?} is not UTF-8")]
    NotUtf8 {
        /// The Secret.
        secret: NamespacedName,
        /// The key.
        key: String,
    },
    /// The kubeconfig cannot be used.
    #[error("Secret {secret} key {key:?}: {source}")]
    Kubeconfig {
        /// The Secret.
        secret: NamespacedName,
        /// The key.
        key: String,
        /// Why.
        source: Box<Unusable>,
    },
}

/// What a kubeconfig should say instead of a certificate-authority file.
const INLINE_CA: &str = "use certificate-authority-data";

/// Why a kubeconfig gives no client the host may use.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// It does not parse. Only where: the parser's own text quotes the Secret's content.
    #[error("not a kubeconfig: its YAML does not parse{0}")]
    Parse(Place),
    /// A user runs a command or reads a file of the host's (which user is not said: its name is
    /// the Secret's text).
    #[error("a user uses {0}, which the host does not allow: put the credentials inline")]
    NotInline(&'static str),
    /// A cluster's certificate authority is a file of the host's.
    #[error("a cluster uses certificate-authority (a file), which the host does not allow: {}", INLINE_CA)]
    CaFile,
    /// kube does not make a configuration of it. Only which part: kube's text quotes the
    /// Secret's content (a context's name, a URL, a certificate's bytes).
    #[error("not a usable kubeconfig: {}", unusable_part(.0))]
    Config(KubeconfigError),
    /// It names a proxy (not quoted: the URL is the Secret's content, and may hold credentials).
    #[error("the host reaches other clusters without a proxy, and this one sets proxy-url")]
    Proxy,
    /// Its server may not be connected to.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// Its server's host name did not resolve in time.
    #[error("the server's host name did not resolve within {}s", CONNECT_TIMEOUT.as_secs())]
    Unresolved,
    /// kube makes no client of it.
    #[error("no client: {0}")]
    NoClient(#[source] kube::Error),
}

/// Where a kubeconfig's YAML stops parsing: line and column, never the text there.
#[derive(Debug)]
pub struct Place(Option<(u64, u64)>);

impl Place {
    fn of(error: &KubeconfigError) -> Self {
        match error {
            KubeconfigError::Parse(yaml) => Place(yaml.location().map(|at| (at.line(), at.column()))),
            _ => Place(None),
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some((line, column)) => write!(f, " (line {line}, column {column})"),
            None => Ok(()),
        }
    }
}

/// The part of a kubeconfig kube could not use, without what it says there.
fn unusable_part(error: &KubeconfigError) -> &'static str {
    match error {
        KubeconfigError::CurrentContextNotSet => "no current-context",
        KubeconfigError::LoadContext(_) => "its current-context names no context",
        KubeconfigError::LoadClusterOfContext(_) => "its context names no cluster",
        KubeconfigError::MissingClusterUrl => "its cluster has no server",
        KubeconfigError::ParseClusterUrl(_) => "its cluster's server is not a URL",
        KubeconfigError::ParseProxyUrl(_) => "its proxy-url is not a URL",
        KubeconfigError::LoadCertificateAuthority(_) => "certificate-authority-data does not load",
        KubeconfigError::LoadClientCertificate(_) => "client-certificate-data does not load",
        KubeconfigError::LoadClientKey(_) => "client-key-data does not load",
        KubeconfigError::ParseCertificates(_) => "a certificate is not PEM",
        _ => "kube cannot use it",
    }
}

/// The clients of other clusters.
pub struct Clusters {
    capacity: usize,
    /// The most clients the Secrets of one namespace hold, when tenants write them (see
    /// [`Clusters::shared_by_namespaces`]).
    per_namespace: Option<usize>,
    reads: Reads,
    allowed: Arc<Allowed>,
    pool: Mutex<HashMap<SecretAt, Pooled>>,
    read: Mutex<SecretReads>,
    here: Arc<Cluster>,
}

/// A kubeconfig Secret, on the cluster named (`""`: the management cluster).
type SecretAt = (String, NamespacedName);

/// What a read of a kubeconfig Secret said: its resourceVersion, or why it cannot be used.
type SecretRead = Result<String, Box<SecretUnusable>>;

/// The latest read of each kubeconfig Secret, for [`SECRET_FRESH`]. The stale ones are dropped
/// every quarter of that, not at every read: a look reads a Secret, and going over every read
/// of the last [`SECRET_FRESH`] at each would cost a step per read, and a clock read each.
#[derive(Default)]
struct SecretReads {
    by_secret: HashMap<SecretAt, (Instant, SecretRead)>,
    next_prune: Option<Instant>,
}

impl SecretReads {
    /// What the latest read of `secret` said, if it was less than [`SECRET_FRESH`] ago.
    fn fresh(&self, secret: &SecretAt) -> Option<SecretRead> {
        let (at, outcome) = self.by_secret.get(secret)?;
        (at.elapsed() < SECRET_FRESH).then(|| outcome.clone())
    }

    /// Remembers what a read of `secret` said now; when due, drops the stale reads and the
    /// room a burst of reads left.
    fn remember(&mut self, secret: &SecretAt, outcome: SecretRead) {
        let now = Instant::now();
        if self.next_prune.is_none_or(|due| now >= due) {
            self.by_secret.retain(|_, (at, _)| now.duration_since(*at) < SECRET_FRESH);
            self.by_secret.shrink_to(2 * self.by_secret.len());
            self.next_prune = Some(now + SECRET_FRESH / 4);
        }
        self.by_secret.insert(secret.clone(), (now, outcome));
    }
}

struct Pooled {
    resource_version: String,
    cluster: Arc<Cluster>,
    used: Instant,
}

impl Clusters {
    /// No client yet; `management` is the cluster of [`Clusters::here`]; the clients made read
    /// as `reads` says and connect to the addresses `allowed` allows besides the safe ones.
    pub fn new(management: Client, capacity: usize, reads: Reads, allowed: Allowed) -> Self {
        let here = Arc::new(Cluster::new(String::new(), management));
        let (pool, read) = (Mutex::default(), Mutex::default());
        Self { capacity: capacity.max(1), per_namespace: None, reads, allowed: Arc::new(allowed), pool, read, here }
    }

    /// These clients, with the Secrets of one namespace holding at most a quarter of them: where
    /// tenants write the kubeconfigs (targets' `<cluster>-kubeconfig`), one with many clusters
    /// evicts its own clients, never all the others'. Regions' clients (an operator's Secrets,
    /// often all in the system namespace) are not shared so.
    pub fn shared_by_namespaces(self) -> Self {
        Self { per_namespace: Some((self.capacity / 4).max(1)), ..self }
    }

    /// The cluster the host runs in.
    pub fn here(&self) -> Arc<Cluster> {
        self.here.clone()
    }

    /// How many clients of other clusters are held now.
    pub fn held(&self) -> usize {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The cluster whose kubeconfig is key `key` of Secret `secret` on cluster `on`, or why it
    /// cannot be reached.
    pub async fn of(&self, on: &Cluster, secret: &NamespacedName, key: &str) -> Result<Arc<Cluster>, ClusterError> {
        let at = (on.name.clone(), secret.clone());
        match self.fresh(&at) {
            Some(Ok(version)) => {
                if let Some(cluster) = self.pooled(&at, &version) {
                    return Ok(cluster);
                }
            }
            Some(Err(why)) => return Err((*why).into()),
            None => {}
        }
        let found = self.read_secret(on, secret).await;
        self.remember(
            &at,
            found
                .as_ref()
                .map(|s| s.metadata.resource_version.clone().unwrap_or_default())
                .map_err(|e| Box::new(e.clone())),
        );
        let found = found?;
        let version = found.metadata.resource_version.clone().unwrap_or_default();
        if let Some(cluster) = self.pooled(&at, &version) {
            return Ok(cluster);
        }
        let bytes = found.data.as_ref().and_then(|data| data.get(key)).map(|b| b.0.as_slice());
        let text = bytes.ok_or_else(|| ClusterError::NoKey { secret: secret.clone(), key: key.into() })?;
        let text =
            std::str::from_utf8(text).map_err(|_| ClusterError::NotUtf8 { secret: secret.clone(), key: key.into() })?;
        let origin = format!("Secret {secret} key {key:?}");
        let client = client(text, self.reads, &Resolver::new(self.allowed.clone(), &origin))
            .await
            .map_err(|e| ClusterError::Kubeconfig { secret: secret.clone(), key: key.into(), source: Box::new(e) })?;
        let cluster = Arc::new(Cluster::new(format!("the cluster of Secret {secret}{}", on.on()), client));
        self.keep(at, version, cluster.clone());
        Ok(cluster)
    }

    /// Secret `secret` as it is on `on`, or why it cannot be used.
    async fn read_secret(&self, on: &Cluster, secret: &NamespacedName) -> Result<Secret, SecretUnusable> {
        let api = Api::<Secret>::namespaced(on.client.clone(), &secret.namespace);
        match api.get_opt(&secret.name).await {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err(SecretUnusable::NotFound { secret: secret.clone(), on: on.on() }),
            Err(e) => Err(SecretUnusable::Read { secret: secret.clone(), on: on.on(), source: Arc::new(e) }),
        }
    }

    /// What the latest read of `secret` said, if it was read less than [`SECRET_FRESH`] ago.
    fn fresh(&self, secret: &SecretAt) -> Option<SecretRead> {
        self.read.lock().unwrap_or_else(|e| e.into_inner()).fresh(secret)
    }

    /// Remembers what a read of `secret` said.
    fn remember(&self, secret: &SecretAt, outcome: SecretRead) {
        self.read.lock().unwrap_or_else(|e| e.into_inner()).remember(secret, outcome);
    }

    /// The pooled cluster of `secret` if made from its version `version`.
    fn pooled(&self, secret: &SecretAt, version: &str) -> Option<Arc<Cluster>> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let pooled = pool.get_mut(secret).filter(|p| p.resource_version == version)?;
        pooled.used = Instant::now();
        Some(pooled.cluster.clone())
    }

    /// Pools `cluster`, first dropping the idle ones and, when full, the least recently used.
    fn keep(&self, secret: SecretAt, resource_version: String, cluster: Arc<Cluster>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        pool.retain(|_, p| now.duration_since(p.used) < self.reads.idle());
        pool.remove(&secret);
        if let Some(share) = self.per_namespace {
            let namespace = secret.1.namespace.clone();
            let mut own: HashMap<SecretAt, Instant> =
                pool.iter().filter(|(k, _)| k.1.namespace == namespace).map(|(k, p)| (k.clone(), p.used)).collect();
            make_room(&mut own, share, |used| *used);
            pool.retain(|k, _| k.1.namespace != namespace || own.contains_key(k));
        }
        make_room(&mut pool, self.capacity, |p| p.used);
        pool.insert(secret, Pooled { resource_version, cluster, used: now });
    }
}

/// Makes room in `map` for one more entry, at most `capacity`: the least recently `used` goes
/// first.
fn make_room<K: Clone + Eq + Hash, V>(map: &mut HashMap<K, V>, capacity: usize, used: impl Fn(&V) -> Instant) {
    while map.len() >= capacity.max(1) {
        let Some(oldest) = map.iter().min_by_key(|(_, v)| used(v)).map(|(k, _)| k.clone()) else { return };
        map.remove(&oldest);
    }
}

/// One cluster's client, and where it serves the kinds the host looked for.
pub struct Cluster {
    /// How messages name it; empty for the management cluster.
    name: String,
    client: Client,
    /// At most [`KINDS_HELD`], each with when it was last used.
    kinds: Mutex<HashMap<GroupKind, (Served, Instant)>>,
    /// The resources of each group version discovered, at most [`VERSIONS_HELD`], each with when
    /// it was last used: the kinds of one group version the rules name (Deployment, StatefulSet,
    /// DaemonSet) cost one discovery request, not one each.
    versions: Mutex<HashMap<String, (Resources, Instant)>>,
}

/// The resources of one group version.
type Resources = Arc<Vec<ApiResource>>;

/// Where a kind is served, or since when it is known not to be.
#[derive(Clone)]
enum Served {
    At(ApiResource),
    Not(Instant),
}

impl Cluster {
    fn new(name: String, client: Client) -> Self {
        Self { name, client, kinds: Mutex::default(), versions: Mutex::default() }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// ` on <the cluster>` in messages; nothing for the management cluster.
    pub fn on(&self) -> String {
        if self.name.is_empty() { String::new() } else { format!(" on {}", self.name) }
    }

    /// A page of the objects of `kind` in `namespace` or (scope `Cluster`) anywhere, from the
    /// token `page` of the one before (`None`: the first): of at most [`PAGE`] asked for, the
    /// first `most` that `wanted` keeps, all it keeps counted, the answer's bytes and the next
    /// page's token. A kind the cluster does not serve has none.
    pub async fn list(
        &self,
        (kind, version, scope): (&GroupKind, &str, Scope),
        namespace: &str,
        page: Option<&str>,
        most: usize,
        wanted: &(dyn Fn(&serde_json::Value) -> bool + Sync),
    ) -> Result<Listed, kube::Error> {
        let Some(resource) = self.resource(kind, version).await? else { return Ok(Listed::default()) };
        let api: Api<DynamicObject> = match scope {
            Scope::Namespaced => Api::namespaced_with(self.client.clone(), namespace, &resource),
            Scope::Cluster => Api::all_with(self.client.clone(), &resource),
        };
        let mut params = ListParams::default().limit(PAGE);
        params.continue_token = page.map(str::to_string);
        let mut request =
            kube::core::Request::new(api.resource_url()).list(&params).map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("list");
        let text = self.client.request_text(request).await?;
        listed::parse(&text, most, wanted).map_err(kube::Error::SerdeError)
    }

    /// Discovers the group versions `versions` (group, version) at once, each once: lists that
    /// go together then find their kinds' places known rather than each discover the same group
    /// version. A discovery that fails here is tried again, and reported, by the list needing it.
    pub async fn discover(&self, versions: &BTreeSet<(&str, &str)>) {
        let discovering: Vec<_> =
            versions.iter().map(|(group, version)| self.version_resources(group, version).boxed()).collect();
        futures::future::join_all(discovering).await;
    }

    /// Where `kind` is served: at `version` when the cluster serves it there, else at the
    /// group's preferred version; `None` when not at all. Learned once per kind, while held.
    async fn resource(&self, kind: &GroupKind, version: &str) -> Result<Option<ApiResource>, kube::Error> {
        let known = self.kinds.lock().unwrap_or_else(|e| e.into_inner()).get_mut(kind).map(|(served, used)| {
            *used = Instant::now();
            served.clone()
        });
        match known {
            Some(Served::At(resource)) => return Ok(Some(resource)),
            Some(Served::Not(since)) if since.elapsed() < UNSERVED_FOR => return Ok(None),
            _ => {}
        }
        let at_version = self.version_resources(&kind.group, version).await?;
        let served = match at_version.iter().find(|r| r.kind == kind.kind) {
            Some(resource) => Some(resource.clone()),
            None => match discovery::group(&self.client, &kind.group).await {
                Ok(group) => group.recommended_kind(&kind.kind).map(|(resource, _)| resource),
                Err(kube::Error::Discovery(_)) => None,
                Err(e) => return Err(e),
            },
        };
        let entry = served.clone().map_or(Served::Not(Instant::now()), Served::At);
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        kinds.remove(kind);
        make_room(&mut kinds, KINDS_HELD, |(_, used)| *used);
        kinds.insert(kind.clone(), (entry, Instant::now()));
        Ok(served)
    }

    /// The resources the cluster serves at `group`/`version`, discovered once while held
    /// (none when it does not serve that version: then the group's preferred one is looked for).
    async fn version_resources(&self, group: &str, version: &str) -> Result<Resources, kube::Error> {
        let key = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        if let Some((resources, used)) = self.versions.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&key) {
            *used = Instant::now();
            return Ok(resources.clone());
        }
        let resources = match discovery::pinned_group(&self.client, &GroupVersion::gv(group, version)).await {
            Ok(served) => served.versioned_resources(version).into_iter().map(|(resource, _)| resource).collect(),
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(kube::Error::Discovery(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        let resources = Arc::new(resources);
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        make_room(&mut versions, VERSIONS_HELD, |(_, used)| *used);
        versions.insert(key, (resources.clone(), Instant::now()));
        Ok(resources)
    }
}

/// A client for the kubeconfig `text`, once it is known to need nothing from the host's
/// machine and to point at an address `resolver` allows.
async fn client(text: &str, reads: Reads, resolver: &Resolver) -> Result<Client, Unusable> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| Unusable::Parse(Place::of(&e)))?;
    self_contained(&kubeconfig)?;
    let config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.map_err(Unusable::Config)?;
    if config.proxy_url.is_some() {
        // The connection would go to the proxy, whose address the host does not check.
        return Err(Unusable::Proxy);
    }
    if let Some(host) = resolver.check_server(&config.cluster_url)? {
        let resolved = tokio::time::timeout(CONNECT_TIMEOUT, resolver.check(&host)).await;
        resolved.map_err(|_| Unusable::Unresolved)??;
    }
    bounded_client(config, reads, resolver.clone()).map_err(Unusable::NoClient)
}

/// kube's client stack (as `ClientBuilder::try_from` builds it, retries of 429, 503 and 504
/// included) with the connector resolving through `resolver` and every call bounded by
/// `reads`' limits.
fn bounded_client(config: Config, reads: Reads, resolver: Resolver) -> kube::Result<Client> {
    let mut http = HttpConnector::new_with_resolver(resolver);
    http.enforce_http(false);
    let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_read_timeout(Some(reads.read_timeout()));
    connector.set_write_timeout(Some(reads.limits().write));
    let connections = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(BoundedLayer(reads.limits()))
        .option_layer(config.default_retry.then(|| RetryLayer::new(RetryPolicy::server_retry())))
        .map_err(BoxError::from)
        .service(connections);
    Ok(Client::new(service, config.default_namespace))
}

/// Refuses a kubeconfig that would run a command (`exec`, `auth-provider`) or read a file of the
/// host's (`tokenFile`, `client-certificate`, `client-key`, `certificate-authority`): whoever
/// writes the Secret could otherwise run code in the host or send it the host's own credentials.
fn self_contained(kubeconfig: &Kubeconfig) -> Result<(), Unusable> {
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else { continue };
        let refused = [
            ("exec", user.exec.is_some()),
            ("auth-provider", user.auth_provider.is_some()),
            ("tokenFile", user.token_file.is_some()),
            ("client-certificate", user.client_certificate.is_some()),
            ("client-key", user.client_key.is_some()),
        ];
        if let Some((field, _)) = refused.iter().find(|(_, set)| *set) {
            return Err(Unusable::NotInline(field));
        }
    }
    for named in &kubeconfig.clusters {
        if named.cluster.as_ref().is_some_and(|c| c.certificate_authority.is_some()) {
            return Err(Unusable::CaFile);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::Log;
    use crate::controller::remote::addresses::Class;
    use serde_json::json;

    fn kubeconfig(user: &str, cluster: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
             clusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:6443', {cluster}}}}}]\n\
             users: [{{name: u, user: {{{user}}}}}]\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_kubeconfig_may_not_run_commands_or_read_the_hosts_files() {
        assert!(self_contained(&kubeconfig("token: abc", "insecure-skip-tls-verify: true")).is_ok());
        assert!(
            self_contained(&kubeconfig(
                "client-certificate-data: YQ==, client-key-data: YQ==",
                "certificate-authority-data: YQ=="
            ))
            .is_ok()
        );
        for (user, field) in [
            ("exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}", "exec"),
            ("auth-provider: {name: gcp}", "auth-provider"),
            ("tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", "tokenFile"),
            ("client-certificate: /etc/cert.pem, client-key-data: YQ==", "client-certificate"),
            ("client-key: /etc/key.pem, client-certificate-data: YQ==", "client-key"),
        ] {
            let err = self_contained(&kubeconfig(user, "insecure-skip-tls-verify: true")).unwrap_err().to_string();
            assert!(err.contains(&format!("uses {field}")), "{user}: {err}");
        }
        let err =
            self_contained(&kubeconfig("token: abc", "certificate-authority: /etc/ca.pem")).unwrap_err().to_string();
        assert!(err.contains("certificate-authority-data"), "{err}");
    }

    #[tokio::test]
    async fn clients_are_bounded_and_the_least_recently_used_goes_first() {
        let (management, _) = crate::controller::mock_api::client(|_| None);
        let clusters = Clusters::new(management.clone(), 2, Reads::Requests, Allowed::default());
        let key = |name: &str| (String::new(), NamespacedName::new("team", name));
        let cluster = || Arc::new(Cluster::new("c".into(), management.clone()));
        clusters.keep(key("a"), "1".into(), cluster());
        clusters.keep(key("b"), "1".into(), cluster());
        assert!(clusters.pooled(&key("a"), "1").is_some(), "a used: b is now the least recent");
        clusters.keep(key("c"), "1".into(), cluster());
        assert_eq!(clusters.held(), 2);
        assert!(clusters.pooled(&key("b"), "1").is_none());
        assert!(clusters.pooled(&key("a"), "1").is_some() && clusters.pooled(&key("c"), "1").is_some());
        assert!(clusters.pooled(&key("a"), "2").is_none(), "a changed Secret makes a new client");
        clusters.keep(key("a"), "2".into(), cluster());
        assert_eq!(clusters.held(), 2, "replaced, not added");
    }

    /// Issue 45: a tenant writing many `<cluster>-kubeconfig` Secrets evicted every other
    /// namespace's clients. Shared by namespaces, one namespace holds at most a quarter of them.
    #[tokio::test]
    async fn a_namespace_holds_at_most_its_share_of_the_clients() {
        let (management, _) = crate::controller::mock_api::client(|_| None);
        let clusters = Clusters::new(management.clone(), 8, Reads::Requests, Allowed::default()).shared_by_namespaces();
        let key = |namespace: &str, name: &str| (String::new(), NamespacedName::new(namespace, name));
        let cluster = || Arc::new(Cluster::new("c".into(), management.clone()));
        clusters.keep(key("other", "o"), "1".into(), cluster());
        for i in 0..20 {
            clusters.keep(key("team", &format!("c{i}")), "1".into(), cluster());
        }
        assert_eq!(clusters.held(), 3, "the other namespace's client and two of team's");
        assert!(clusters.pooled(&key("other", "o"), "1").is_some(), "never evicted by team");
        assert!(
            clusters.pooled(&key("team", "c19"), "1").is_some() && clusters.pooled(&key("team", "c0"), "1").is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn kinds_looked_for_are_bounded_and_the_least_recently_used_is_forgotten_first() {
        // The cluster serves no API group: each kind looked for is remembered as not served.
        let (client, asked) = crate::controller::mock_api::client(|line| {
            (line == "GET /apis").then(|| (200, serde_json::json!({"kind": "APIGroupList", "groups": []})))
        });
        let cluster = Cluster::new("c".into(), client);
        let kind = |n: usize| GroupKind { group: format!("g{n}.example.com"), kind: "K".into() };
        let look = async |n: usize| {
            tokio::time::advance(Duration::from_millis(1)).await;
            let before = asked.lock().unwrap().len();
            assert_eq!(cluster.resource(&kind(n), "v1").await.unwrap(), None);
            asked.lock().unwrap().len() > before
        };
        for n in 0..KINDS_HELD {
            assert!(look(n).await, "kind {n} is looked for");
        }
        assert!(!look(0).await, "kind 0 is remembered, and now the most recently used");
        assert!(look(KINDS_HELD).await);
        assert_eq!(cluster.kinds.lock().unwrap().len(), KINDS_HELD, "one more kind, one forgotten");
        assert!(!look(0).await, "kind 0 was used recently: kept");
        assert!(look(1).await, "kind 1 was the least recently used: forgotten, looked for again");
    }

    /// A kubeconfig Secret whose `value` names the cluster at `server`, with a proxy if given.
    fn kubeconfig_secret(server: &str, proxy: Option<&str>) -> serde_json::Value {
        let proxy = proxy.map(|p| format!(", proxy-url: '{p}'")).unwrap_or_default();
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
             clusters: [{{name: k, cluster: {{server: '{server}'{proxy}}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\n"
        );
        let value = serde_json::to_value(k8s_openapi::ByteString(text.into_bytes())).unwrap();
        serde_json::json!({"apiVersion": "v1", "kind": "Secret", "data": {"value": value},
                           "metadata": {"name": "web-kubeconfig", "namespace": "team", "resourceVersion": "1"}})
    }

    /// The client of the cluster `secret` names, with `allowed`, or why there is none.
    async fn of(secret: serde_json::Value, allowed: &[Class]) -> Result<Arc<Cluster>, ClusterError> {
        let (management, _) = crate::controller::mock_api::client(move |line| {
            (line == "GET /api/v1/namespaces/team/secrets/web-kubeconfig").then(|| (200, secret.clone()))
        });
        let clusters = Clusters::new(management, 4, Reads::Requests, allowed.iter().copied().collect());
        clusters.of(&clusters.here(), &NamespacedName::new("team", "web-kubeconfig"), "value").await
    }

    /// Each class is judged in `addresses`; here the judgement reaches the client, naming the
    /// Secret, the key, the class and the flag value, never the server the Secret holds.
    #[tokio::test]
    async fn a_kubeconfig_pointing_at_a_refused_address_is_refused_naming_the_secret_key_and_class() {
        let refused = async |server: &str, proxy: Option<&str>| {
            let err = of(kubeconfig_secret(server, proxy), &[]).await.err().unwrap().to_string();
            let host = proxy.unwrap_or(server).parse::<http::Uri>().unwrap().host().unwrap().to_string();
            assert!(!err.contains(&host), "{server}: the Secret's text is not quoted: {err}");
            err
        };
        let named = "Secret team/web-kubeconfig key \"value\": the server is a loopback address, which the host \
                     does not connect to unless --allow-cluster-addresses names loopback";
        assert_eq!(refused("https://127.0.0.1:6443", None).await, named);
        assert!(of(kubeconfig_secret("https://127.0.0.1:6443", None), &[Class::Loopback]).await.is_ok());
        let private = refused("https://10.0.0.1:6443", None).await;
        assert!(
            private.ends_with(
                "the server is a private address, which the host does not connect to unless \
                                   --allow-cluster-addresses names private"
            ),
            "{private}"
        );
        assert!(of(kubeconfig_secret("https://10.0.0.1:6443", None), &[Class::Private]).await.is_ok());
        // `localhost` is refused by its name; allowed, it is resolved (from the hosts file) and judged by
        // its addresses.
        let err = refused("https://localhost:6443", None).await;
        assert!(err.starts_with(
            "Secret team/web-kubeconfig key \"value\": the server's host name is reserved for a loopback address"
        ));
        assert!(of(kubeconfig_secret("https://localhost:6443", None), &[Class::Loopback]).await.is_ok());
        assert!(refused("http://203.0.113.7", None).await.contains("plain http"));
        assert!(of(kubeconfig_secret("https://203.0.113.7:6443", None), &[]).await.is_ok());
        let err = refused("https://203.0.113.7", Some("http://203.0.113.8:3128")).await;
        assert!(err.ends_with("without a proxy, and this one sets proxy-url"), "{err}");
        assert!(!err.contains("203.0.113.8"), "the proxy URL is the Secret's text: {err}");
    }

    /// A Secret's content never reaches an error (a status quotes it): issue 45 saw a token in a
    /// ServiceSet's status through the YAML parser's excerpt. The error says what and where.
    #[tokio::test]
    async fn an_unusable_kubeconfig_is_named_by_what_and_where_never_by_its_text() {
        let secret = |text: &str| {
            let value = serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec())).unwrap();
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "data": {"value": value},
                               "metadata": {"name": "web-kubeconfig", "namespace": "team", "resourceVersion": "1"}})
        };
        let not_yaml = "token: 'hunter2-secret-text\nclusters: [\n";
        let err = of(secret(not_yaml), &[]).await.err().unwrap().to_string();
        assert!(
            err.starts_with("Secret team/web-kubeconfig key \"value\": not a kubeconfig: its YAML does not parse"),
            "{err}"
        );
        assert!(err.contains("(line "), "the place is named: {err}");
        let no_context = "apiVersion: v1\nkind: Config\ncurrent-context: hunter2-secret-text\nclusters: []\n";
        let err = of(secret(no_context), &[]).await.err().unwrap().to_string();
        assert!(err.ends_with("not a usable kubeconfig: its current-context names no context"), "{err}");
        let bad_server = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                          contexts: [{name: c, context: {cluster: k, user: u}}]\n\
                          clusters: [{name: k, cluster: {server: 'https://hunter2 secret text'}}]\n\
                          users: [{name: u, user: {token: t}}]\n";
        let err = of(secret(bad_server), &[]).await.err().unwrap().to_string();
        assert!(err.ends_with("not a usable kubeconfig: its cluster's server is not a URL"), "{err}");
        for err in [err, of(secret(not_yaml), &[]).await.err().unwrap().to_string()] {
            assert!(!err.contains("hunter2"), "the Secret's text reached the error: {err}");
        }
    }

    /// A kubeconfig Secret is read at most once per [`SECRET_FRESH`], whether it was there or
    /// not: a health check every few seconds reuses what the last read said.
    #[tokio::test(start_paused = true)]
    async fn a_secret_is_read_once_while_what_it_said_is_fresh() {
        let present = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let served = present.clone();
        let secret = kubeconfig_secret("https://203.0.113.7:6443", None);
        let (management, asked) = crate::controller::mock_api::client(move |line| {
            let wanted = line == "GET /api/v1/namespaces/team/secrets/web-kubeconfig";
            (wanted && served.load(std::sync::atomic::Ordering::SeqCst)).then(|| (200, secret.clone()))
        });
        let clusters = Clusters::new(management, 4, Reads::Requests, Allowed::default());
        let at = NamespacedName::new("team", "web-kubeconfig");
        let reads = || asked.lock().unwrap().iter().filter(|l| l.contains("/secrets/web-kubeconfig")).count();
        for _ in 0..3 {
            let err = clusters.of(&clusters.here(), &at, "value").await.err().unwrap().to_string();
            assert_eq!(err, "Secret team/web-kubeconfig not found");
        }
        assert_eq!(reads(), 1, "a missing Secret is remembered");
        present.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::advance(SECRET_FRESH).await;
        let first = clusters.of(&clusters.here(), &at, "value").await.unwrap();
        let again = clusters.of(&clusters.here(), &at, "value").await.unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(reads(), 2, "found once it appeared, then not read again while fresh");
    }

    /// Stale reads are dropped a quarter of [`SECRET_FRESH`] apart, not at every read.
    #[tokio::test(start_paused = true)]
    async fn stale_secret_reads_are_dropped_when_due() {
        let mut reads = SecretReads::default();
        let at = |name: &str| (String::new(), NamespacedName::new("team", name));
        let second = Duration::from_secs(1);
        reads.remember(&at("a"), Ok("1".into()));
        tokio::time::advance(SECRET_FRESH).await;
        assert!(reads.fresh(&at("a")).is_none());
        reads.remember(&at("b"), Ok("2".into()));
        assert_eq!(reads.by_secret.len(), 1, "a went: {:?}", reads.by_secret.keys());
        tokio::time::advance(SECRET_FRESH - second).await;
        reads.remember(&at("c"), Ok("3".into()));
        tokio::time::advance(2 * second).await;
        reads.remember(&at("d"), Ok("4".into()));
        assert!(reads.fresh(&at("b")).is_none(), "stale, so never served");
        assert_eq!(reads.by_secret.len(), 3, "b is held until the next prune is due: {:?}", reads.by_secret.keys());
        tokio::time::advance(SECRET_FRESH / 4).await;
        reads.remember(&at("e"), Ok("5".into()));
        assert_eq!(reads.by_secret.len(), 3, "b went: {:?}", reads.by_secret.keys());
        assert_eq!(reads.fresh(&at("c")).and_then(Result::ok).as_deref(), Some("3"));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_clients_are_dropped() {
        let (management, _) = crate::controller::mock_api::client(|_| None);
        let clusters = Clusters::new(management.clone(), 8, Reads::Requests, Allowed::default());
        let cluster = || Arc::new(Cluster::new("c".into(), management.clone()));
        clusters.keep((String::new(), NamespacedName::new("team", "a")), "1".into(), cluster());
        tokio::time::advance(Reads::Requests.idle() + Duration::from_secs(1)).await;
        clusters.keep((String::new(), NamespacedName::new("team", "b")), "1".into(), cluster());
        assert_eq!(clusters.held(), 1);
    }

    /// Issue 48: each kind the rules name was discovered on its own (the group list and its
    /// versions: 12 requests for the chart's six kinds); a group version is discovered once, and
    /// a version the cluster does not serve falls back to the group's preferred one.
    #[tokio::test]
    async fn a_group_versions_kinds_cost_one_discovery_request() {
        let resource =
            |name: &str, kind: &str| json!({"name": name, "namespaced": true, "kind": kind, "verbs": ["list"]});
        let (client, asked) = crate::controller::mock_api::client(move |line| match line {
            "GET /apis/apps/v1" => Some((
                200,
                json!({"kind": "APIResourceList", "groupVersion": "apps/v1",
                "resources": [resource("deployments", "Deployment"), resource("statefulsets", "StatefulSet"),
                              resource("daemonsets", "DaemonSet")]}),
            )),
            "GET /apis" => Some((
                200,
                json!({"kind": "APIGroupList", "groups": [{"name": "apps",
                "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]}),
            )),
            _ if line.starts_with("GET /apis/apps/v1/namespaces/team/") => {
                Some((200, json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []})))
            }
            _ => None,
        });
        let cluster = Cluster::new(String::new(), client);
        let all = |_: &serde_json::Value| true;
        for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
            let kind = GroupKind { group: "apps".into(), kind: kind.into() };
            cluster.list((&kind, "v1", Scope::Namespaced), "team", None, 10, &all).await.unwrap();
        }
        let discovery = |asked: &Log| {
            asked.lock().unwrap().iter().filter(|l| !l.contains("/namespaces/")).cloned().collect::<Vec<_>>()
        };
        assert_eq!(discovery(&asked), ["GET /apis/apps/v1"]);
        assert_eq!(asked.lock().unwrap().len(), 4, "one discovery, three lists");

        let old = GroupKind { group: "apps".into(), kind: "ReplicaSet".into() };
        let listed = cluster.list((&old, "v1beta2", Scope::Namespaced), "team", None, 10, &all).await.unwrap();
        assert_eq!(listed, Listed::default(), "served nowhere: none");
        assert_eq!(
            discovery(&asked)[1..],
            ["GET /apis/apps/v1beta2", "GET /apis", "GET /apis/apps/v1"],
            "an unserved version: the group's preferred one is looked at"
        );
    }
}
