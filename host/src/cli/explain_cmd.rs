//! `ksm-adapter explain <namespace>/<serviceset>`: "why is my service not deployed?" answered
//! from the live cluster. It reads what the controller would read (the ServiceSet, every
//! ServiceSet it may contend with for a claim, the templates, the provider and what it refers to,
//! what routes the ServiceSet, the AdapterPlugins and their components, the ServiceSet's children
//! and what the plugin reads about them), makes the same pure decision `render` makes offline,
//! judges the health of its Deployed services as the controller would, and says, per service,
//! where it stands and why.
//!
//! Where the controller does I/O, `explain` calls the controller's own code: a component from an
//! OCI registry is fetched and its signature checked as `spec.source.oci.verify` asks (a plugin
//! the controller would refuse is never run); children on a regional cluster are read through
//! the Region's kubeconfig Secret ([`Clusters`]); service health on the target cluster through
//! its `<cluster>-kubeconfig` Secret ([`TargetHealth`]).

use super::offline_plugins::OfflinePlugins;
use super::render_cmd;
use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ksm_adapter::adapter_plugin::{AdapterPlugin, Source};
use ksm_adapter::conditions::types::PROVIDER_READY;
use ksm_adapter::controller::adapter_plugins::{fetch::fetch, verify::verify};
use ksm_adapter::controller::plumbing::slots::Slots;
use ksm_adapter::controller::remote::clusters::{Cluster, Clusters, Reads};
use ksm_adapter::controller::round::target_health::TargetHealth;
use ksm_adapter::health::TARGET_LABEL;
use ksm_adapter::health::verdict::Health;
use ksm_adapter::k0rdent::ChildRef;
use ksm_adapter::k0rdent::{ServiceSet, ServiceSetStatus, StateManagementProvider};
use ksm_adapter::manifests::{Document, Manifests};
use ksm_adapter::plan::children::{
    SERVICE_LABEL, SERVICE_SET_LABEL, SERVICE_SET_NAMESPACE_LABEL, label_value, recorded,
};
use ksm_adapter::plan::route::{RegionAccess, Route};
use ksm_adapter::rules::RuleCache;
use ksm_adapter::runtime::Runtime;
use ksm_plugin_sdk::contract::ObjectKind;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The ServiceSet, as `<namespace>/<name>`.
    service_set: String,
    /// Kubeconfig file to use [default: $KUBECONFIG, else ~/.kube/config, else the in-cluster
    /// service account].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    identity: super::identity::IdentityArgs,
    #[command(flatten)]
    plugin: super::plugin_args::PluginArgs,
    #[command(flatten)]
    other_clusters: super::run_cmd::OtherClusterArgs,
}

/// Clients of other clusters explain makes at most: the region and the target.
const CLUSTERS: usize = 2;

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let Some((namespace, name)) = args.service_set.split_once('/') else {
        bail!("expected <namespace>/<serviceset>, got {:?}", args.service_set);
    };
    let runtime = Runtime::new()?;
    let identity = args.identity.identity();
    let tenancy = args.plugin.tenancy.tenancy();
    let system_namespace = tenancy.system_namespace;
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let explained = tokio.block_on(async {
        let client = Client::try_from(super::run_cmd::kube_config(args.kubeconfig.as_ref()).await?)?;
        let mut gathered = Gathered::default();
        let service_set = gathered.k0rdent(&client, namespace, name).await?;
        let pulled = gathered.plugins(&client, &identity.namespace).await?;
        let manifests = gathered.manifests();
        let plugins = OfflinePlugins::load_pulled(&runtime, &manifests, &args.plugin, &pulled.components)?;
        let allowed = args.other_clusters.allowed();
        let clusters = Arc::new(Clusters::new(client.clone(), CLUSTERS, Reads::Requests, allowed));
        let route = render_cmd::route(&manifests, &service_set, system_namespace);
        let region = match &route {
            Ok(Route::Region(access)) => Some(access.clone()),
            _ => None,
        };
        let mut home = reach(&clusters, route).await;
        let smp = render_cmd::provider(&manifests, &service_set)?;
        if let (Ok(serving), Ok(cluster)) =
            (plugins.for_provider(&service_set.spec.provider.name, smp.as_ref()), home.clone())
        {
            let metadata = serving.metadata();
            let listed = gathered.children(cluster.client(), &service_set, serving.kinds(), &metadata.reads).await;
            match (listed, &region) {
                (Err(e), Some(access)) => home = Err(format!("Region {}: listing its objects: {e:#}", access.name)),
                (listed, _) => listed?,
            }
        }
        let manifests = gathered.manifests();
        let doc =
            manifests.find(ksm_plugin_sdk::k0rdent::API_VERSION, "ServiceSet", namespace, name).expect("gathered");
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let health = TargetHealth {
            clusters,
            rules: health_rules(&client).await?,
            cel: Arc::new(RuleCache::new()),
            system_namespace: system_namespace.to_string(),
            looks: Slots::new(1),
        };
        let claims = render_cmd::claim_index(&plugins, &manifests, &identity, tenancy)?;
        let mut decision =
            render_cmd::render_one(&plugins, &manifests, doc, &identity, &health.cel, &claims, tenancy, &now)?;
        let mut learned = Learned {
            signatures: pulled.signatures,
            region: region.map(|r| region_of(&r, &home)),
            ..Learned::default()
        };
        if let Some(status) = decision.get("status").cloned() {
            // As the controller does: a plan needs the children's cluster, and the health of what
            // it deploys is judged before the status is written.
            match &home {
                Err(why) => decision = render_cmd::unrouted(doc, &service_set, why, &now),
                Ok(cluster) => {
                    let mut status: ServiceSetStatus = serde_json::from_value(status)?;
                    let verdicts = health.judge(&service_set, cluster, &status, &now).await;
                    verdicts.apply(&service_set, &mut status, &now);
                    decision["status"] = serde_json::to_value(status)?;
                    learned.health = verdicts.services;
                }
            }
        }
        anyhow::Ok(explain(&manifests, doc, &plugins, decision, &learned))
    })?;
    super::plugin_cmd::print_yaml(&explained)?;
    Ok(ExitCode::SUCCESS)
}

/// The cluster the children live on by `route`: the management cluster, or the regional one
/// through its kubeconfig Secret; or why it cannot be told or reached (as the controller says it).
async fn reach(clusters: &Clusters, route: Result<Route, String>) -> Result<Arc<Cluster>, String> {
    match route? {
        Route::Management => Ok(clusters.here()),
        Route::Region(access) => clusters
            .of(&clusters.here(), &access.secret, &access.key)
            .await
            .map_err(|e| format!("Region {}: {e}", access.name)),
    }
}

/// The Region the children live in, its kubeconfig, and why it cannot be reached, if so.
fn region_of(access: &RegionAccess, home: &Result<Arc<Cluster>, String>) -> Value {
    let mut region = json!({"name": access.name, "kubeconfig": format!("Secret {} key {}", access.secret, access.key)});
    if let Err(why) = home {
        region["problem"] = json!(why);
    }
    region
}

/// The health-rule ConfigMaps (labelled [`TARGET_LABEL`]) of every namespace, as the controller
/// caches them.
async fn health_rules(client: &Client) -> anyhow::Result<reflector::Store<ConfigMap>> {
    let listed = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default().labels(TARGET_LABEL))
        .await
        .with_context(|| format!("listing the health-rule ConfigMaps (label {TARGET_LABEL})"))?;
    let (store, mut writer) = reflector::store();
    for config_map in listed.items {
        writer.apply_watcher_event(&watcher::Event::Apply(config_map));
    }
    Ok(store)
}

/// What explain learned besides the decision.
#[derive(Default)]
struct Learned {
    /// The key that verified the signature of each AdapterPlugin's component, by AdapterPlugin.
    signatures: BTreeMap<String, String>,
    /// The Region the children live in (see [`region_of`]); `None`: the management cluster.
    region: Option<Value>,
    /// The health verdict on each checked service, by name and namespace.
    health: BTreeMap<(String, String), Health>,
}

/// The components of the AdapterPlugins from OCI registries.
#[derive(Default)]
struct Pulled {
    /// By AdapterPlugin: the component, fetched and verified as the controller does, or why not.
    components: BTreeMap<String, Result<Vec<u8>, String>>,
    /// By AdapterPlugin: the key that verified its signature, for those whose spec asks for one.
    signatures: BTreeMap<String, String>,
}

/// The live objects `explain` decides from, with where each came from.
#[derive(Default)]
struct Gathered {
    objects: Vec<(String, Value)>,
}

impl Gathered {
    fn add(&mut self, origin: &str, object: Value) {
        self.objects.push((origin.to_string(), object));
    }

    fn manifests(&self) -> Manifests {
        let documents =
            self.objects.iter().map(|(origin, object)| Document { origin: origin.clone(), object: object.clone() });
        Manifests { documents: documents.collect() }
    }

    /// The ServiceSet and those that may contend with it for a claim (the ones with the same
    /// target: a claim names its target cluster), the ServiceTemplates, the SMPs, what the
    /// ServiceSet's SMP refers to, and what routes the ServiceSet.
    async fn k0rdent(&mut self, client: &Client, namespace: &str, name: &str) -> anyhow::Result<ServiceSet> {
        let found = Api::<ServiceSet>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .with_context(|| format!("reading ServiceSet {namespace}/{name}"))?;
        let Some(service_set) = found else { bail!("ServiceSet {namespace}/{name} does not exist") };
        let contends = |other: &Value| {
            serde_json::from_value::<ServiceSet>(other.clone()).is_ok_and(|o| target(&o) == target(&service_set))
        };
        for kind in ["ServiceSet", "ServiceTemplate", "StateManagementProvider"] {
            let resource = k0rdent_resource(kind);
            for object in list(client, &resource, ListParams::default()).await? {
                if kind != "ServiceSet" || contends(&object) {
                    self.add(&format!("cluster {kind}"), object);
                }
            }
        }
        let smp = self.objects.iter().find(|(_, o)| {
            o["kind"] == "StateManagementProvider" && o["metadata"]["name"] == service_set.spec.provider.name.as_str()
        });
        let smp = smp.map(|(_, o)| serde_json::from_value::<StateManagementProvider>(o.clone())).transpose()?;
        // kcm's word that it is ready stands; otherwise the host diagnoses why not.
        if let Some(smp) = smp.filter(|s| !s.status.as_ref().is_some_and(|s| s.ready)) {
            self.referenced(client, &smp).await;
        }
        self.topology(client, &service_set).await?;
        Ok(service_set)
    }

    /// What routes `service_set` (see [`ksm_adapter::plan::route`]), as far as it exists: the
    /// ClusterDeployment of its cluster, that one's Credential, and the Region the Credential
    /// names.
    async fn topology(&mut self, client: &Client, service_set: &ServiceSet) -> anyhow::Result<()> {
        let spec = &service_set.spec;
        if spec.provider.self_management {
            return Ok(());
        }
        let namespace = service_set.namespace().unwrap_or_default();
        let Some(cd) = self.k0rdent_object(client, "ClusterDeployment", &namespace, &spec.cluster).await? else {
            return Ok(());
        };
        let credential = cd["spec"]["credential"].as_str().unwrap_or_default();
        let Some(credential) = self.k0rdent_object(client, "Credential", &namespace, credential).await? else {
            return Ok(());
        };
        let region = credential["spec"]["region"].as_str().unwrap_or_default();
        self.k0rdent_object(client, "Region", "", region).await?;
        Ok(())
    }

    /// The k0rdent `kind` object `name` of `namespace` (`""`: a cluster-scoped kind), gathered
    /// when it exists; none for an empty name or a kind the API server does not serve (no
    /// Region before kcm 1.12).
    async fn k0rdent_object(
        &mut self,
        client: &Client,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Option<Value>> {
        if name.is_empty() {
            return Ok(None);
        }
        let resource = k0rdent_resource(kind);
        let (api, key): (Api<DynamicObject>, _) = match namespace {
            "" => (Api::all_with(client.clone(), &resource), name.to_string()),
            namespace => (Api::namespaced_with(client.clone(), namespace, &resource), format!("{namespace}/{name}")),
        };
        let found = match api.get_opt(name).await {
            Ok(found) => found.map(without_managed_fields),
            Err(kube::Error::Api(e)) if e.code == 404 => None,
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {kind} {key}"))),
        };
        if let Some(object) = &found {
            self.add(&format!("cluster {kind}"), object.clone());
        }
        Ok(found)
    }

    /// The adapter and provisioner workloads and the CRDs `smp` refers to, for the host's own
    /// diagnosis when kcm says the SMP is not ready. What cannot be read is left out: the
    /// diagnosis then names it as missing.
    async fn referenced(&mut self, client: &Client, smp: &StateManagementProvider) {
        let discovery = kube::Discovery::new(client.clone());
        let Ok(discovery) = discovery.run().await else { return };
        for reference in std::iter::once(&smp.spec.adapter).chain(&smp.spec.provisioner) {
            let (group, version) = split_api_version(&reference.api_version);
            let gvk = GroupVersionKind::gvk(group, version, &reference.kind);
            let Some((resource, _)) = discovery.resolve_gvk(&gvk) else { continue };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &reference.namespace, &resource);
            if let Ok(Some(object)) = api.get_opt(&reference.name).await {
                self.add("cluster", without_managed_fields(object));
            }
        }
        let crds = Api::<DynamicObject>::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
                "customresourcedefinitions",
            ),
        );
        for crd in &smp.spec.provisioner_crds {
            for resource in &crd.resources {
                if let Ok(Some(object)) = crds.get_opt(&format!("{resource}.{}", crd.group)).await {
                    self.add("cluster", without_managed_fields(object));
                }
            }
        }
    }

    /// The AdapterPlugins naming the providers of the gathered ServiceSets (the others serve
    /// nothing the decision looks at), the ConfigMaps their components are in, and the components
    /// of those from OCI registries, fetched and verified as the controller does (`host_namespace`
    /// holds their pull and key Secrets).
    async fn plugins(&mut self, client: &Client, host_namespace: &str) -> anyhow::Result<Pulled> {
        let providers: Vec<Value> = self
            .objects
            .iter()
            .filter(|(_, o)| o["kind"] == "ServiceSet")
            .map(|(_, o)| o["spec"]["provider"]["name"].clone())
            .collect();
        let resource = ApiResource::erase::<AdapterPlugin>(&());
        let plugins = match list(client, &resource, ListParams::default()).await {
            Ok(plugins) => plugins,
            Err(e) if not_served(&e) => Vec::new(), // no AdapterPlugin CRD: the built-in Flux plugin serves
            Err(e) => return Err(e),
        };
        let mut pulled = Pulled::default();
        for object in plugins {
            let plugin: AdapterPlugin = serde_json::from_value(object.clone())?;
            if !plugin.spec.providers.iter().any(|p| providers.contains(&json!(p))) {
                continue;
            }
            self.add("cluster AdapterPlugin", object);
            match plugin.spec.source.get() {
                Ok(Source::ConfigMap(reference)) => {
                    let config_maps = Api::<DynamicObject>::namespaced_with(
                        client.clone(),
                        &reference.namespace,
                        &ApiResource::erase::<ConfigMap>(&()),
                    );
                    if let Ok(Some(config_map)) = config_maps.get_opt(&reference.name).await {
                        self.add("cluster", without_managed_fields(config_map));
                    }
                }
                Ok(Source::Oci(_)) => {
                    let component = match fetch(client, host_namespace, &plugin.spec, None).await {
                        Ok(fetched) => match verify(client, host_namespace, &plugin, &fetched).await {
                            Ok(verified) => {
                                pulled.signatures.extend(verified.map(|v| (plugin.name_any(), v.to_string())));
                                Ok(fetched.bytes.to_vec())
                            }
                            Err(e) => Err(format!("not verified: {e}")),
                        },
                        Err(e) => Err(format!("not fetched: {e}")),
                    };
                    pulled.components.insert(plugin.name_any(), component);
                }
                _ => {}
            }
        }
        Ok(pulled)
    }

    /// The children of `service_set` (by its labels) of the kinds its plugin creates, and the
    /// objects of the kinds it reads (the decision keeps those its children own).
    async fn children<'a>(
        &mut self,
        client: &Client,
        service_set: &ServiceSet,
        creates: impl Iterator<Item = &'a ObjectKind>,
        reads: &[ObjectKind],
    ) -> anyhow::Result<()> {
        let labels = format!(
            "{SERVICE_SET_NAMESPACE_LABEL}={},{SERVICE_SET_LABEL}={}",
            service_set.namespace().unwrap_or_default(),
            label_value(&service_set.name_any())
        );
        for kind in creates {
            for object in list(client, &resource_of(kind), ListParams::default().labels(&labels)).await? {
                self.add(&format!("cluster {}", kind.kind), object);
            }
        }
        for kind in reads {
            for object in list(client, &resource_of(kind), ListParams::default()).await? {
                if object["metadata"]["ownerReferences"].is_array() {
                    self.add(&format!("cluster {}", kind.kind), object);
                }
            }
        }
        Ok(())
    }
}

/// The decision, explained: `render`'s output with, per service, its children (applied,
/// pending, drifted, to delete), its state and why, its health on the target cluster, and what
/// the host would change in the ServiceSet's status.
fn explain(
    manifests: &Manifests,
    doc: &Document,
    plugins: &OfflinePlugins,
    decision: Value,
    learned: &Learned,
) -> Value {
    let service_set = &doc.object;
    let provider = service_set["spec"]["provider"]["name"].as_str().unwrap_or_default();
    let mut out = json!({ "serviceSet": doc.key() });
    if decision["servedByThisHost"] == false {
        out["servedByThisHost"] = json!(false);
        out["why"] = decision["reason"].clone();
        return out;
    }
    let smp = serde_json::from_value::<ServiceSet>(service_set.clone())
        .ok()
        .and_then(|s| render_cmd::provider(manifests, &s).ok().flatten());
    out["plugin"] = match plugins.for_provider(provider, smp.as_ref()) {
        Ok(serving) => {
            let m = serving.metadata();
            let mut plugin = json!({"servedBy": serving.name, "plugin": format!("{} {}", m.name, m.version)});
            if let Some(key) = learned.signatures.get(&serving.name) {
                plugin["signature"] = json!(format!("verified with {key}"));
            }
            plugin
        }
        Err(problem) => json!({"problem": problem}),
    };
    if let Some(error) = decision.get("error") {
        out["problem"] = error.clone();
        return out;
    }
    let status = &decision["status"];
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let condition = |t: &str| conditions.iter().find(|c| c["type"] == t).cloned();
    out["provider"] = json!({"name": provider, "condition": condition(PROVIDER_READY)});
    if let Some(cluster) = service_set["spec"]["cluster"].as_str().filter(|c| !c.is_empty()) {
        out["cluster"] = json!(cluster);
    }
    if let Some(region) = &learned.region {
        out["region"] = region.clone();
    }
    let live: Vec<&Value> = manifests
        .documents
        .iter()
        .filter(|d| d.object["metadata"]["labels"][SERVICE_SET_NAMESPACE_LABEL] == doc.namespace())
        .filter(|d| recorded(&d.object, SERVICE_SET_LABEL) == Some(doc.name()))
        .map(|d| &d.object)
        .collect();
    let to_apply: BTreeMap<ChildRef, &Value> =
        decision["apply"].as_array().into_iter().flatten().map(|c| (ChildRef::of(c), c)).collect();
    let to_delete: Vec<String> =
        decision["delete"].as_array().into_iter().flatten().filter_map(|d| d.as_str().map(String::from)).collect();
    let services = status["services"].as_array().cloned().unwrap_or_default();
    let live_services = service_set["status"]["services"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = service_set["spec"]["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str().map(String::from))
        .collect();
    out["services"] = names
        .iter()
        .map(|service| {
            let state = services.iter().find(|s| s["name"] == service.as_str());
            let mut children = Vec::new();
            for child in live.iter().filter(|c| recorded(c, SERVICE_LABEL) == Some(service.as_str())) {
                let reference = ChildRef::of(child);
                let what = reference.to_string();
                let listed =
                    format!("{} {} {}/{}", reference.api_version, reference.kind, reference.namespace, reference.name);
                let state = if to_delete.contains(&listed) {
                    "to delete: no longer desired"
                } else if child["metadata"]["deletionTimestamp"].is_string() {
                    "being deleted"
                } else if to_apply.contains_key(&reference) {
                    "drifted: differs from what the plugin asks for, would be applied again"
                } else {
                    "applied, up to date"
                };
                children.push(json!({"object": what, "state": state}));
            }
            let desired = to_apply.iter().filter(|(_, c)| recorded(c, SERVICE_LABEL) == Some(service.as_str()));
            for (reference, _) in desired.filter(|(r, _)| !live.iter().any(|c| ChildRef::of(c) == **r)) {
                children.push(json!({"object": reference.to_string(), "state": "pending: not created yet"}));
            }
            let live_state = live_services.iter().find(|s| s["name"] == service.as_str()).map(|s| s["state"].clone());
            let decided = state.map(|s| s["state"].clone()).unwrap_or(json!("unknown"));
            let mut explained = json!({
                "name": service,
                "state": decided,
                "why": state.and_then(|s| s.get("failureMessage")).cloned().unwrap_or(Value::Null),
                "children": children,
            });
            if live_state.as_ref().is_some_and(|live| *live != explained["state"]) {
                explained["statusSays"] = live_state.unwrap_or_default();
            }
            let namespace = state.and_then(|s| s["namespace"].as_str()).unwrap_or_default();
            if let Some(health) = learned.health.get(&(service.clone(), namespace.to_string())) {
                explained["health"] = health_of(health);
            }
            explained
        })
        .collect();
    let problems: Vec<Value> = conditions.iter().filter(|c| c["status"] != "True").cloned().collect();
    if !problems.is_empty() {
        out["conditions"] = json!(problems);
    }
    out["statusUpToDate"] = json!(same_status(&service_set["status"], status));
    out
}

/// Whether the live status says what the decision says: each service's state and message, and
/// the conditions the decision sets, the health verdict's included (the host adds what it learns
/// applying a plan: the children the API server refused).
fn same_status(live: &Value, decided: &Value) -> bool {
    let services = |status: &Value| -> Vec<(Value, Value, Value)> {
        let services = status["services"].as_array().into_iter().flatten();
        services.map(|s| (s["name"].clone(), s["state"].clone(), s["failureMessage"].clone())).collect()
    };
    let decided_conditions = decided["conditions"].as_array().into_iter().flatten();
    let conditions_agree = decided_conditions.into_iter().all(|c| {
        let live = live["conditions"].as_array().into_iter().flatten().find(|l| l["type"] == c["type"]);
        live.is_some_and(|l| l["status"] == c["status"] && l["reason"] == c["reason"] && l["message"] == c["message"])
    });
    services(live) == services(decided) && conditions_agree
}

/// A service's health verdict: `Healthy`, or `Unhealthy`, `Unknown` or `Unjudged` and why.
fn health_of(health: &Health) -> Value {
    match health {
        Health::Healthy => json!({"verdict": "Healthy"}),
        Health::Unhealthy(conditions) => {
            json!({"verdict": "Unhealthy", "why": conditions.iter().map(|c| &c.message).collect::<Vec<_>>()})
        }
        Health::Unknown(why) => json!({"verdict": "Unknown", "why": [why]}),
        Health::Unjudged(why) => json!({"verdict": "Unjudged", "why": [why]}),
        Health::Deferred(why) => json!({"verdict": "Deferred", "why": [why]}),
    }
}

/// Where a ServiceSet's services go, as claims name it: the management cluster (`None`), or a
/// cluster of its namespace.
fn target(service_set: &ServiceSet) -> Option<(String, String)> {
    let spec = &service_set.spec;
    let remote = !spec.provider.self_management && !spec.cluster.is_empty();
    remote.then(|| (service_set.namespace().unwrap_or_default(), spec.cluster.clone()))
}

fn k0rdent_resource(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("k0rdent.mirantis.com", "v1beta1", kind);
    ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
}

fn resource_of(kind: &ObjectKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind), &kind.plural)
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// Every object of `resource` that `params` select, as JSON with apiVersion and kind set.
async fn list(client: &Client, resource: &ApiResource, params: ListParams) -> anyhow::Result<Vec<Value>> {
    let api = Api::<DynamicObject>::all_with(client.clone(), resource);
    let listed =
        api.list(&params).await.map_err(|e| anyhow::Error::new(e).context(format!("listing {}", resource.plural)))?;
    Ok(listed
        .items
        .into_iter()
        .map(|mut object| {
            object.types =
                Some(kube::core::TypeMeta { api_version: resource.api_version.clone(), kind: resource.kind.clone() });
            without_managed_fields(object)
        })
        .collect())
}

fn without_managed_fields(mut object: DynamicObject) -> Value {
    object.managed_fields_mut().clear();
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// Whether listing failed because the API server does not serve the kind: a 404, which a real
/// kube-apiserver answers for a group no CRD installs with a plain `404 page not found` (no
/// Status reason NotFound).
fn not_served(error: &anyhow::Error) -> bool {
    matches!(error.downcast_ref::<kube::Error>(), Some(kube::Error::Api(e)) if e.code == 404)
}
