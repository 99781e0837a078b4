//! **Service health verification** as kcm 1.12 does it (`verify.go` of its Sveltos adapter), the
//! duty both baselines take on with `--health` so that the benchmark measures them doing what
//! production does: a Helm service its CD tool calls Deployed stays Provisioning while one of
//! its workloads on the target cluster is unhealthy by the health rules.
//!
//! What is shared here, and what each baseline pays differently for:
//!
//! - **Rules** ([`RuleDoc`], [`compile`], [`RuleSet`]): ConfigMaps labelled [`RULE_TARGET_LABEL`]
//!   whose `rules` key is a YAML list of `{group, version, kind, scope, healthy, message}`, CEL
//!   over `obj` with the strings extension (kcm's `ext.Strings()`: the chart's Pod rule joins
//!   container names). Every rule of a kind must hold for an object to be healthy; a rule that
//!   does not compile is left out, the others still apply.
//! - **Discovery** ([`belongs_to`]): an object is a service's when one of
//!   [`DISCOVERY_LABELS`] equals the service's name.
//! - **The verdict** ([`judge`], [`unhealthy_among`]): pure, over the objects as JSON.
//! - **The target** ([`kubeconfig_secret_name`], [`client_from_kubeconfig`]): the kubeconfig in
//!   Secret `<spec.cluster>-kubeconfig`, key `value`, of the ServiceSet's namespace.
//! - **The looks**: [`look`], the floor's (one unfiltered list per kind a rule names per service
//!   namespace, then discovery on the client), and [`look_by_labels`], kcm's (per service, per
//!   kind, one list per discovery label, the union kept).
//!
//! Liberties, the same for both baselines:
//!
//! - **Any object being deleted is healthy.** kcm's code exempts only Pods being deleted (a
//!   terminating Pod is never Ready); the reference says objects, and for the other kinds of the
//!   chart's rules a deleting object is on its way out all the same.
//! - **A rule that fails to evaluate makes the object unhealthy** (its error the reason). kcm
//!   skips such a rule for the object and reports the error from the whole verification, which
//!   keeps the service from being called Deployed as well.
//! - **No object found leaves the service Deployed** (kcm 1.12; an earlier `verify.go` demoted
//!   such a service to Failed).
//! - **The listing version is the rule's**, its plural guessed from its kind (kcm resolves both
//!   with its RESTMapper, whose discovery is cached: lists are what it pays per look). A kind
//!   the target does not serve (404) lists nothing, as kcm treats a `NoKindMatchError`.
//! - **No conditions**: kcm writes one `ServiceHealth<Kind>` condition per unhealthy object and
//!   a `ServiceSetHealthRules` condition; the baselines only keep the service from Deployed.
//! - **CEL runs on the async worker**: the chart's rules take microseconds; ksm-adapter bounds
//!   and moves tenants' rules to threads, which the baselines need not.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cel::objects::{Key, Map};
use cel::{Context, Env, Program};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::Value;

/// The label that marks a ConfigMap of health rules; its value says whom they apply to.
pub const RULE_TARGET_LABEL: &str = "k0rdent.mirantis.com/health-rule-target";
/// [`RULE_TARGET_LABEL`]'s value for rules that apply to every ServiceSet (of the namespace).
pub const GLOBAL: &str = "global";
/// The key of a rule ConfigMap's data that holds the rules.
pub const RULES_KEY: &str = "rules";
/// The key of a kubeconfig Secret's data that holds the kubeconfig.
pub const KUBECONFIG_KEY: &str = "value";
/// The labels chart authors tag a release's objects with; any one equal to the service's name
/// makes an object the service's (kcm's `discoveryLabels`).
pub const DISCOVERY_LABELS: [&str; 4] = ["release", "app", "app.kubernetes.io/instance", "app.kubernetes.io/name"];
/// kcm's system namespace, where its shipped rules live.
pub const DEFAULT_SYSTEM_NAMESPACE: &str = "kcm-system";
/// Seconds before a ServiceSet with an unhealthy service is looked at again.
pub const DEFAULT_POLL_SECONDS: u64 = 15;

/// The health flags of both baselines' binaries.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// Verify services' health on their target clusters before calling them Deployed, as kcm
    /// 1.12 does.
    #[arg(long)]
    pub health: bool,
    /// The namespace of the global health rules (kcm's system namespace).
    #[arg(long, default_value = DEFAULT_SYSTEM_NAMESPACE)]
    pub system_namespace: String,
    /// Seconds after which a ServiceSet with an unhealthy (or unreadable) service is looked at again.
    #[arg(long, default_value_t = DEFAULT_POLL_SECONDS)]
    pub health_poll_seconds: u64,
}

impl HealthArgs {
    /// The options, `None` without `--health`.
    pub fn options(self) -> Option<Options> {
        self.health.then(|| Options {
            system_namespace: self.system_namespace,
            poll: Duration::from_secs(self.health_poll_seconds),
        })
    }
}

/// How to verify services' health.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where the global rules are.
    pub system_namespace: String,
    /// The delay before a ServiceSet with an unhealthy service is looked at again.
    pub poll: Duration,
}

/// A rule as a ConfigMap writes it (kcm's `ruleDoc`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RuleDoc {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub scope: String,
    pub healthy: String,
    pub message: String,
}

/// Whether a kind's objects live in namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// A compiled rule.
pub struct Rule {
    /// What it applies to (its version is the one listed).
    pub gvk: GroupVersionKind,
    pub scope: Scope,
    /// Where it was written: `<namespace>/<configmap>#<index>`.
    pub source: String,
    healthy: Program,
    message: Program,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({:?} {:?} from {})", self.gvk, self.scope, self.source)
    }
}

/// CEL's standard environment with the strings extension, as kcm's `celEnv`: built once.
fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings).expect("the strings extension declares each overload once");
        Arc::new(env)
    })
    .clone()
}

/// The rules of a ConfigMap's `rules` text, each with its source (`<origin>#<index>`); none when
/// the text is blank.
pub fn parse(text: &str, origin: &str) -> Result<Vec<(String, RuleDoc)>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let docs: Vec<RuleDoc> = serde_norway::from_str(text).map_err(|e| format!("{origin}: parse {RULES_KEY:?}: {e}"))?;
    Ok(docs.into_iter().enumerate().map(|(i, doc)| (format!("{origin}#{i}"), doc)).collect())
}

/// The rules of a ConfigMap (see [`parse`]); a ConfigMap without them has none.
pub fn parse_config_map(config_map: &ConfigMap) -> Result<Vec<(String, RuleDoc)>, String> {
    let origin = format!("{}/{}", config_map.namespace().unwrap_or_default(), config_map.name_any());
    let text = config_map.data.as_ref().and_then(|data| data.get(RULES_KEY)).map_or("", String::as_str);
    parse(text, &origin)
}

/// Compiles one rule, as kcm's `rulesFromDocs`: kind, version and a known scope are required,
/// and both expressions must compile.
pub fn compile(source: &str, doc: &RuleDoc) -> Result<Rule, String> {
    if doc.kind.is_empty() || doc.version.is_empty() {
        return Err(format!("{source}: kind and version are required"));
    }
    let scope = match doc.scope.as_str() {
        "Namespaced" => Scope::Namespaced,
        "Cluster" => Scope::Cluster,
        other => return Err(format!("{source}: scope must be \"Namespaced\" or \"Cluster\", got {other:?}")),
    };
    let env = env();
    let healthy = env.compile(&doc.healthy).map_err(|e| format!("{source}: healthy: {e}"))?;
    let message = env.compile(&doc.message).map_err(|e| format!("{source}: message: {e}"))?;
    let gvk = GroupVersionKind::gvk(&doc.group, &doc.version, &doc.kind);
    Ok(Rule { gvk, scope, source: source.to_string(), healthy, message })
}

/// Compiles every rule of `docs`: the rules that compile, and why each other does not.
pub fn compile_all(docs: &[(String, RuleDoc)]) -> (Vec<Arc<Rule>>, Vec<String>) {
    let (mut rules, mut errors) = (Vec::new(), Vec::new());
    for (source, doc) in docs {
        match compile(source, doc) {
            Ok(rule) => rules.push(Arc::new(rule)),
            Err(e) => errors.push(e),
        }
    }
    (rules, errors)
}

/// The rules of one kind (group and kind: the version does not matter), listed by the first
/// rule's version and scope, as kcm does.
#[derive(Debug)]
pub struct KindRules {
    pub resource: ApiResource,
    pub scope: Scope,
    pub rules: Vec<Arc<Rule>>,
}

/// Rules by kind, in the order their kinds first appear.
#[derive(Debug, Default)]
pub struct RuleSet {
    pub kinds: Vec<KindRules>,
}

impl RuleSet {
    /// `rules`, grouped by kind.
    pub fn new(rules: impl IntoIterator<Item = Arc<Rule>>) -> Self {
        let mut kinds: Vec<KindRules> = Vec::new();
        for rule in rules {
            let same = |k: &&mut KindRules| k.resource.group == rule.gvk.group && k.resource.kind == rule.gvk.kind;
            match kinds.iter_mut().find(same) {
                Some(kind) => kind.rules.push(rule),
                None => kinds.push(KindRules {
                    resource: ApiResource::from_gvk(&rule.gvk),
                    scope: rule.scope,
                    rules: vec![rule],
                }),
            }
        }
        Self { kinds }
    }
}

/// Why `object` is unhealthy by `rules` (all of one kind), `None` when it is healthy: every rule
/// holds, or it is being deleted (module doc). The first rule that does not hold gives the
/// reason: its message, or its error.
pub fn judge(rules: &[Arc<Rule>], object: &Value) -> Option<String> {
    if !object["metadata"]["deletionTimestamp"].is_null() {
        return None;
    }
    let mut context = Context::with_env(env());
    context.add_variable_from_value("obj", to_cel(object));
    for rule in rules {
        match rule.healthy.execute(&context) {
            Ok(cel::Value::Bool(true)) => continue,
            Ok(cel::Value::Bool(false)) => {
                let message = match rule.message.execute(&context) {
                    Ok(cel::Value::String(text)) => text.to_string(),
                    _ => String::new(),
                };
                return Some(format!("{message} (rule {})", rule.source));
            }
            Ok(other) => return Some(format!("healthy returned {other:?}, not a bool (rule {})", rule.source)),
            Err(e) => return Some(format!("evaluating healthy: {e} (rule {})", rule.source)),
        }
    }
    None
}

/// Whether `object` is service `service`'s: one of [`DISCOVERY_LABELS`] equals its name.
pub fn belongs_to(object: &Value, service: &str) -> bool {
    let labels = &object["metadata"]["labels"];
    DISCOVERY_LABELS.iter().any(|label| labels[*label] == service)
}

/// An unhealthy object of a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unhealthy {
    pub service: String,
    pub kind: String,
    /// `<namespace>/<name>`, or `<name>` for a cluster-scoped object.
    pub object: String,
    pub reason: String,
}

impl std::fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "service {}: {} {}: {}", self.service, self.kind, self.object, self.reason)
    }
}

/// The unhealthy objects of `services` among `listed`, objects of `kind`: each object judged once,
/// and reported for every service it belongs to; the objects of no service are left out.
pub fn unhealthy_among(kind: &KindRules, listed: &[Value], services: &[&str]) -> Vec<Unhealthy> {
    let mut found = Vec::new();
    for object in listed {
        let owners: Vec<&str> = services.iter().copied().filter(|service| belongs_to(object, service)).collect();
        if owners.is_empty() {
            continue;
        }
        let Some(reason) = judge(&kind.rules, object) else { continue };
        let (namespace, name) = (object["metadata"]["namespace"].as_str(), object["metadata"]["name"].as_str());
        let name = name.unwrap_or_default();
        let object = namespace.map_or_else(|| name.to_string(), |namespace| format!("{namespace}/{name}"));
        found.extend(owners.into_iter().map(|service| Unhealthy {
            service: service.to_string(),
            kind: kind.resource.kind.clone(),
            object: object.clone(),
            reason: reason.clone(),
        }));
    }
    found
}

/// A service to look at: its name and the namespace its release is installed in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Service {
    pub name: String,
    pub namespace: String,
}

impl Service {
    /// Service `service` of a ServiceSet's `spec.services`: its namespace defaults to its name,
    /// as the HelmRelease's `targetNamespace` does.
    pub fn of(service: &Value) -> Self {
        let name = service["name"].as_str().unwrap_or_default();
        let namespace = service["namespace"].as_str().filter(|ns| !ns.is_empty()).unwrap_or(name);
        Self { name: name.to_string(), namespace: namespace.to_string() }
    }
}

/// The floor's look at `services` on the target `client` serves: per kind of `rules`, ONE list
/// per service namespace (one in all for a cluster-scoped kind), unfiltered, the objects of the
/// services picked out on this side. The unhealthy objects; none: all healthy.
pub async fn look(client: &Client, rules: &RuleSet, services: &[Service]) -> Result<Vec<Unhealthy>, kube::Error> {
    let namespaces: BTreeSet<&str> = services.iter().map(|s| s.namespace.as_str()).collect();
    let mut unhealthy = Vec::new();
    for kind in &rules.kinds {
        let listings: Vec<(Option<&str>, Vec<&str>)> = match kind.scope {
            Scope::Cluster => vec![(None, services.iter().map(|s| s.name.as_str()).collect())],
            Scope::Namespaced => namespaces
                .iter()
                .map(|ns| {
                    (Some(*ns), services.iter().filter(|s| s.namespace == *ns).map(|s| s.name.as_str()).collect())
                })
                .collect(),
        };
        for (namespace, names) in listings {
            let listed = list(client, &kind.resource, namespace, &ListParams::default()).await?;
            unhealthy.extend(unhealthy_among(kind, &listed, &names));
        }
    }
    Ok(unhealthy)
}

/// kcm's look at one service (`collectVerdicts`): per kind of `rules`, one list per discovery
/// label with `labelSelector <label>=<service>`, in the service's namespace (cluster-wide for a
/// cluster-scoped kind), the union kept by namespace and name. The unhealthy objects.
pub async fn look_by_labels(
    client: &Client,
    rules: &RuleSet,
    service: &Service,
) -> Result<Vec<Unhealthy>, kube::Error> {
    let mut unhealthy = Vec::new();
    for kind in &rules.kinds {
        let namespace = (kind.scope == Scope::Namespaced).then_some(service.namespace.as_str());
        let mut seen = BTreeSet::new();
        let mut union = Vec::new();
        for label in DISCOVERY_LABELS {
            let params = ListParams::default().labels(&format!("{label}={}", service.name));
            for object in list(client, &kind.resource, namespace, &params).await? {
                let metadata = &object["metadata"];
                let key =
                    (metadata["namespace"].as_str().map(str::to_owned), metadata["name"].as_str().map(str::to_owned));
                if seen.insert(key) {
                    union.push(object);
                }
            }
        }
        unhealthy.extend(unhealthy_among(kind, &union, &[service.name.as_str()]));
    }
    Ok(unhealthy)
}

/// The objects of `resource` in `namespace` (`None`: all), as JSON; none when the target does
/// not serve the kind (404).
async fn list(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    params: &ListParams,
) -> Result<Vec<Value>, kube::Error> {
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    match api.list(params).await {
        Ok(list) => list.items.into_iter().map(|o| serde_json::to_value(o).map_err(kube::Error::SerdeError)).collect(),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The name of the Secret holding the kubeconfig of the cluster a ServiceSet targets
/// (`spec.cluster`), in the ServiceSet's namespace.
pub fn kubeconfig_secret_name(service_set: &DynamicObject) -> String {
    format!("{}-kubeconfig", service_set.data["spec"]["cluster"].as_str().unwrap_or_default())
}

/// The kubeconfig text a Secret holds under [`KUBECONFIG_KEY`].
pub fn kubeconfig_text(secret: &Secret) -> Result<String, String> {
    let value = secret.data.as_ref().and_then(|data| data.get(KUBECONFIG_KEY));
    let value = value.ok_or_else(|| format!("Secret {} has no {KUBECONFIG_KEY:?}", secret.name_any()))?;
    String::from_utf8(value.0.clone()).map_err(|e| format!("Secret {}: {e}", secret.name_any()))
}

/// A client of the cluster `kubeconfig` (YAML) points at, with its current context.
pub async fn client_from_kubeconfig(kubeconfig: &str) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Compiled rules per ConfigMap, each compiled once per resourceVersion (the floor's: its rules
/// come from a store, so only an edit costs a compile).
#[derive(Default)]
pub struct CompiledRules(Mutex<HashMap<String, Versioned<Compiled>>>);

/// The rules of one ConfigMap that compile.
type Compiled = Arc<Vec<Arc<Rule>>>;

/// What was made of an object at its resourceVersion (the first).
type Versioned<T> = (String, T);

impl CompiledRules {
    /// The rules of `config_maps` (as a store holds them), compiling only those whose
    /// resourceVersion is new, and forgetting ConfigMaps no longer there. A rule that does not
    /// compile is reported once, when compiled.
    pub fn rules<'a>(&self, config_maps: impl IntoIterator<Item = &'a ConfigMap>) -> RuleSet {
        let mut cache = self.0.lock().expect("rules lock");
        let mut live = Vec::new();
        let mut rules = Vec::new();
        for config_map in config_maps {
            let key = format!("{}/{}", config_map.namespace().unwrap_or_default(), config_map.name_any());
            let version = config_map.resource_version().unwrap_or_default();
            let compiled = match cache.get(&key) {
                Some((seen, compiled)) if *seen == version => compiled.clone(),
                _ => {
                    let compiled = Arc::new(compile_config_map(config_map));
                    cache.insert(key.clone(), (version, compiled.clone()));
                    compiled
                }
            };
            rules.extend(compiled.iter().cloned());
            live.push(key);
        }
        cache.retain(|key, _| live.contains(key));
        RuleSet::new(rules)
    }
}

/// The rules of a ConfigMap that compile; the errors are printed.
pub fn compile_config_map(config_map: &ConfigMap) -> Vec<Arc<Rule>> {
    let docs = parse_config_map(config_map).unwrap_or_else(|e| {
        eprintln!("health rules: {e}");
        Vec::new()
    });
    let (rules, errors) = compile_all(&docs);
    errors.iter().for_each(|e| eprintln!("health rules: {e}"));
    rules
}

/// Clients by kubeconfig Secret, each kept while the Secret's resourceVersion holds (the
/// floor's: the ServiceSets of a cluster share one).
#[derive(Default)]
pub struct Clients(Mutex<HashMap<String, Versioned<Client>>>);

impl Clients {
    /// The client of the kubeconfig `secret` holds, built when the Secret is new or changed.
    pub async fn client(&self, secret: &Secret) -> anyhow::Result<Client> {
        let (name, version) = (secret.name_any(), secret.resource_version().unwrap_or_default());
        if let Some((seen, client)) = self.0.lock().expect("clients lock").get(&name)
            && *seen == version
        {
            return Ok(client.clone());
        }
        let client = client_from_kubeconfig(&kubeconfig_text(secret).map_err(anyhow::Error::msg)?).await?;
        self.0.lock().expect("clients lock").insert(name, (version, client.clone()));
        Ok(client)
    }
}

/// A JSON value as a CEL value: integers become `int` (`uint` only beyond `i64`), as Kubernetes'
/// int64 fields are in cel-go.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => cel::Value::Map(Map {
            map: Arc::new(fields.iter().map(|(k, v)| (Key::from(k.clone()), to_cel(v))).collect()),
        }),
    }
}

/// A management cluster and a target for the baselines' tests with `--health`, both simulated.
#[cfg(test)]
pub(crate) mod rig {
    use std::path::PathBuf;

    use k8s_openapi::api::core::v1::Secret;
    use ksm_test_apiserver::TestApiServer;
    use ksm_test_harness::objects::Kind;
    use serde_json::{Value, json};

    /// The namespace of the ServiceSet.
    pub(crate) const NAMESPACE: &str = "ns";

    pub(crate) struct Rig {
        pub(crate) management: TestApiServer,
        pub(crate) target: TestApiServer,
        pub(crate) kubeconfig: PathBuf,
        dir: PathBuf,
    }

    impl Rig {
        /// The ServiceSet `c1` of `services` (for SMP `ksm-flux`, cluster `c1`), the chart's rules
        /// in `kcm-system`, the kubeconfig Secret of the target, and on the target a Deployment of
        /// service `a` in `a-ns`, 1 of 2 replicas ready.
        pub(crate) async fn start(test: &str, services: Value) -> Self {
            let management = TestApiServer::start(ksm_test_harness::env::crds()).await.expect("management");
            let target = TestApiServer::start(Vec::new()).await.expect("a target");
            let dir = std::env::temp_dir().join(format!("ksm-{test}-health-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a directory");
            let kubeconfig = dir.join("kubeconfig");
            std::fs::write(&kubeconfig, management.kubeconfig_yaml()).expect("a kubeconfig");
            let set = ksm_test_harness::fixtures::service_set(NAMESPACE, "c1", "ksm-flux", services);
            management.put_object(set).expect("put");
            let rules = include_str!("../../../deploy/chart/files/health-rules.yaml");
            management
                .put_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "kcm-default-health-rules", "namespace": "kcm-system",
                                 "labels": {super::RULE_TARGET_LABEL: super::GLOBAL}},
                    "data": {"rules": rules}}))
                .expect("put");
            let secret = Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some("c1-kubeconfig".into()),
                    namespace: Some(NAMESPACE.into()),
                    ..Default::default()
                },
                data: Some([("value".into(), k8s_openapi::ByteString(target.kubeconfig_yaml().into_bytes()))].into()),
                ..Default::default()
            };
            let mut secret = serde_json::to_value(secret).expect("a Secret");
            (secret["apiVersion"], secret["kind"]) = (json!("v1"), json!("Secret"));
            management.put_object(secret).expect("put");
            target.put_object(deployment("a", 1)).expect("put");
            Self { management, target, kubeconfig, dir }
        }

        /// Health options with a poll of 200 ms.
        pub(crate) fn health(&self) -> super::Options {
            super::Options { system_namespace: "kcm-system".into(), poll: std::time::Duration::from_millis(200) }
        }

        /// Whether the ServiceSet's status says it is deployed.
        pub(crate) fn deployed(&self) -> bool {
            let set = Kind::ServiceSet.resource();
            let set = self.management.object(&set.api_version, &set.kind, Some(NAMESPACE), "c1").expect("c1");
            set["status"]["deployed"] == true
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Deployment `web` of service `service` in `a-ns`, `ready` of 2 replicas ready.
    pub(crate) fn deployment(service: &str, ready: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "a-ns", "labels": {"app.kubernetes.io/instance": service}},
               "spec": {"replicas": 2},
               "status": {"observedGeneration": 1, "readyReplicas": ready, "updatedReplicas": 2}})
    }

    /// The looks `target` served whole, each `per_kind` lists of each of the six kinds of the
    /// chart's rules: an abort may cut the last look short, so that one counts on some kinds only.
    pub(crate) fn whole_looks(target: &ksm_test_apiserver::RequestCounts, per_kind: usize) -> usize {
        let lists: Vec<usize> = target.iter().filter(|(verb, ..)| *verb == "list").map(|(.., n)| n).collect();
        assert_eq!(lists.len(), 6, "the six kinds of the chart's rules: {target:?}");
        let looks = lists.iter().min().expect("six kinds") / per_kind;
        let whole_or_one_cut = per_kind * looks..=per_kind * (looks + 1);
        assert!(lists.iter().all(|n| whole_or_one_cut.contains(n)), "{per_kind} lists per kind a look: {target:?}");
        looks
    }

    /// Polls `check` every 50 ms until it holds, for up to `seconds`.
    pub(crate) async fn eventually(seconds: u64, check: impl Fn() -> bool) -> bool {
        for _ in 0..seconds * 20 {
            if check() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The rules the benchmark loads: the chart's defaults.
    const CHART_RULES: &str = include_str!("../../../deploy/chart/files/health-rules.yaml");

    fn chart_rules() -> RuleSet {
        let docs = parse(CHART_RULES, "kcm-system/kcm-default-health-rules").expect("the chart's rules parse");
        let (rules, errors) = compile_all(&docs);
        assert_eq!(errors, Vec::<String>::new());
        RuleSet::new(rules)
    }

    fn kind<'a>(rules: &'a RuleSet, name: &str) -> &'a KindRules {
        rules.kinds.iter().find(|k| k.resource.kind == name).expect("a kind of the rules")
    }

    /// A Deployment of service `service` in `a-ns`, `ready` of 2 replicas ready.
    fn deployment(name: &str, service: &str, ready: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "a-ns", "generation": 2,
                         "labels": {"app.kubernetes.io/instance": service}},
            "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "readyReplicas": ready, "updatedReplicas": 2},
        })
    }

    #[test]
    fn the_chart_rules_compile_to_six_kinds() {
        let rules = chart_rules();
        let kinds: Vec<(&str, &str, Scope)> =
            rules.kinds.iter().map(|k| (k.resource.kind.as_str(), k.resource.plural.as_str(), k.scope)).collect();
        assert_eq!(
            kinds,
            [
                ("Deployment", "deployments", Scope::Namespaced),
                ("StatefulSet", "statefulsets", Scope::Namespaced),
                ("DaemonSet", "daemonsets", Scope::Namespaced),
                ("Pod", "pods", Scope::Namespaced),
                ("PersistentVolumeClaim", "persistentvolumeclaims", Scope::Namespaced),
                ("PersistentVolume", "persistentvolumes", Scope::Cluster),
            ]
        );
        assert_eq!(kind(&rules, "Deployment").resource.api_version, "apps/v1");
        assert_eq!(kind(&rules, "Pod").resource.api_version, "v1");
    }

    #[test]
    fn a_deployment_is_healthy_when_all_its_replicas_are_ready() {
        let rules = chart_rules();
        let deployments = kind(&rules, "Deployment");
        assert_eq!(judge(&deployments.rules, &deployment("web", "a", 2)), None);
        let reason = judge(&deployments.rules, &deployment("web", "a", 1)).expect("unhealthy");
        assert!(reason.starts_with("1/2 replicas ready, 2 updated (rule kcm-system/"), "{reason}");
        let mut unobserved = deployment("web", "a", 2);
        unobserved["status"]["observedGeneration"] = json!(1);
        assert!(judge(&deployments.rules, &unobserved).expect("unhealthy").starts_with("generation 2 not observed"));
    }

    #[test]
    fn a_pod_rule_names_its_containers_that_are_not_ready() {
        let rules = chart_rules();
        let pod = json!({"metadata": {"name": "p"}, "status": {"phase": "Pending", "containerStatuses": [
            {"name": "app", "ready": false, "state": {"waiting": {"reason": "ImagePullBackOff"}}},
            {"name": "side", "ready": true},
        ]}});
        let reason = judge(&kind(&rules, "Pod").rules, &pod).expect("unhealthy");
        assert!(reason.starts_with("app: ImagePullBackOff (rule"), "{reason}");
        let done = json!({"metadata": {"name": "p"}, "status": {"phase": "Succeeded"}});
        assert_eq!(judge(&kind(&rules, "Pod").rules, &done), None);
    }

    #[test]
    fn an_object_being_deleted_is_healthy() {
        let rules = chart_rules();
        let mut deleting = deployment("web", "a", 0);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z");
        assert_eq!(judge(&kind(&rules, "Deployment").rules, &deleting), None);
    }

    #[test]
    fn only_the_objects_of_the_services_looked_at_are_judged() {
        let rules = chart_rules();
        let mut by_release = deployment("b-web", "other", 0);
        by_release["metadata"]["labels"] = json!({"release": "b"});
        let listed = [deployment("a-web", "a", 1), by_release, deployment("c-web", "c", 0), deployment("x", "a", 2)];
        let found = unhealthy_among(kind(&rules, "Deployment"), &listed, &["a", "b"]);
        let objects: Vec<(&str, &str)> = found.iter().map(|u| (u.service.as_str(), u.object.as_str())).collect();
        assert_eq!(objects, [("a", "a-ns/a-web"), ("b", "a-ns/b-web")], "c's is not looked at, x is healthy");
        assert_eq!(found[0].kind, "Deployment");
        assert!(belongs_to(&json!({"metadata": {"labels": {"app": "a"}}}), "a"));
        assert!(!belongs_to(&json!({"metadata": {"labels": {"helm.sh/chart": "a"}}}), "a"));
    }

    #[test]
    fn bad_rules_are_left_out_and_the_others_kept() {
        let text = "- {version: v1, kind: Pod, scope: Namespaced, healthy: 'true', message: 'string(1)'}\n\
                    - {version: v1, kind: Pod, scope: Global, healthy: 'true', message: 'string(1)'}\n\
                    - {version: v1, kind: Pod, scope: Namespaced, healthy: 'obj.(', message: 'string(1)'}\n\
                    - {kind: Pod, scope: Namespaced, healthy: 'true', message: 'string(1)'}\n";
        let (rules, errors) = compile_all(&parse(text, "ns/cm").expect("parses"));
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].source, "ns/cm#0");
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("ns/cm#1: scope"), "{errors:?}");
        assert!(parse("not: [a list", "ns/cm").is_err());
        assert_eq!(parse("  \n", "ns/cm"), Ok(Vec::new()));
    }

    #[test]
    fn rules_of_a_kind_all_apply_and_compile_once_per_resource_version() {
        let config_map = |name: &str, version: &str, healthy: &str| -> ConfigMap {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "kcm-system", "resourceVersion": version},
                "data": {"rules": format!("- {{group: apps, version: v1, kind: Deployment, scope: Namespaced, \
                                           healthy: \"{healthy}\", message: \"'{name}'\"}}")},
            }))
            .expect("a ConfigMap")
        };
        let compiled = CompiledRules::default();
        let (one, two) = (config_map("one", "1", "true"), config_map("two", "1", "obj.spec.replicas == 2"));
        let rules = compiled.rules([&one, &two]);
        assert_eq!((rules.kinds.len(), rules.kinds[0].rules.len()), (1, 2));
        let first = Arc::as_ptr(&rules.kinds[0].rules[0]);
        let mut three = deployment("web", "a", 3);
        three["spec"]["replicas"] = json!(3);
        assert_eq!(judge(&rules.kinds[0].rules, &three), Some("two (rule kcm-system/two#0)".into()));
        let again = compiled.rules([&one, &config_map("two", "2", "true")]);
        assert_eq!(Arc::as_ptr(&again.kinds[0].rules[0]), first, "one is not compiled again");
        assert_eq!(judge(&again.kinds[0].rules, &three), None);
        compiled.rules([&one]);
        assert_eq!(compiled.0.lock().expect("lock").len(), 1, "two is forgotten");
    }

    /// A target cluster holding `objects`, with the CRD-less built-in kinds.
    async fn target(objects: Vec<Value>) -> ksm_test_apiserver::TestApiServer {
        let server = ksm_test_apiserver::TestApiServer::start(Vec::new()).await.expect("a target");
        for object in objects {
            server.put_object(object).expect("put");
        }
        server
    }

    #[tokio::test]
    async fn both_looks_find_what_is_unhealthy_on_a_target() {
        let mut other = deployment("b-web", "b", 0);
        other["metadata"]["labels"] = json!({"app": "b"});
        let volume = json!({"apiVersion": "v1", "kind": "PersistentVolume",
                            "metadata": {"name": "pv-a", "labels": {"release": "a"}}, "status": {"phase": "Bound"}});
        let server = target(vec![deployment("a-web", "a", 1), deployment("a-db", "a", 2), other, volume]).await;
        let client = client_from_kubeconfig(&server.kubeconfig_yaml()).await.expect("a client");
        let rules = chart_rules();
        let (a, b) = (Service::of(&json!({"name": "a", "namespace": "a-ns"})), Service::of(&json!({"name": "b"})));

        server.reset_counts();
        let found = look(&client, &rules, &[a.clone(), b.clone()]).await.expect("a look");
        let objects: Vec<(&str, &str)> = found.iter().map(|u| (u.service.as_str(), u.object.as_str())).collect();
        assert_eq!(objects, [("a", "a-ns/a-web")], "b's Deployment is in a-ns, not in b's namespace");
        assert_eq!(
            server.requests().verb("list"),
            5 * 2 + 1,
            "one list per namespaced kind per namespace, one PV list"
        );

        server.reset_counts();
        let found = look_by_labels(&client, &rules, &a).await.expect("a look");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].reason, "1/2 replicas ready, 2 updated (rule kcm-system/kcm-default-health-rules#0)");
        assert_eq!(server.requests().verb("list"), 6 * 4, "one list per kind per discovery label");
        assert_eq!(look_by_labels(&client, &rules, &b).await.expect("a look"), []);
    }
}
