//! AdapterPlugins: each one's component is fetched (built in, ConfigMap or OCI registry),
//! compiled off the async executor and validated; the plugin serving an AdapterPlugin is
//! switched atomically; its status tells what happened; the ServiceSets a change affects are
//! woken. A version that fails to fetch, compile or validate leaves the previous good version
//! serving, under the narrowest of both specs' policies, and the status says so.

use super::DefaultPlugin;
use super::context::Context;
use crate::adapter_plugin::{AdapterPlugin, AdapterPluginStatus, PluginInfo, PullPolicy, Source};
use crate::builtin;
use crate::conditions::{self, Status};
use crate::k0rdent::StateManagementProvider;
use crate::metrics::Metered;
use crate::oci::{self, Credentials};
use crate::plan::events::adapter_plugin_events;
use crate::plugin::Limits;
use crate::policy::Policy;
use crate::runtime::Runtime;
use crate::serving::{Assignment, ServingPlugin, assignment, limits, validate};
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

/// How long a load waits for the caches of a plugin's kinds to list.
const LIST_WAIT: Duration = Duration::from_secs(15);

/// The plugins loaded from AdapterPlugins, by AdapterPlugin name.
pub struct Plugins {
    runtime: Arc<Runtime>,
    /// Limits for AdapterPlugins that do not set their own.
    defaults: Limits,
    loaded: RwLock<HashMap<String, Loaded>>,
    /// The built-in default for SMPs no AdapterPlugin names (see [`DefaultPlugin`]), once loaded.
    default: OnceLock<Arc<ServingPlugin>>,
    /// Wakes AdapterPlugins (whose status depends on others naming the same provider).
    wake: UnboundedSender<ObjectRef<AdapterPlugin>>,
}

/// The version of an AdapterPlugin that serves now.
#[derive(Clone)]
struct Loaded {
    /// The plugin serving now, under `policy` or, while a later spec fails to load, under
    /// the narrowest of `policy` and that spec's.
    serving: Arc<ServingPlugin>,
    /// The policy of the spec it was loaded for.
    policy: Policy,
    /// The component, for a spec change that keeps it (and OCI `IfNotPresent`).
    bytes: Arc<[u8]>,
    sha256: String,
    /// The AdapterPlugin generation it was loaded for.
    generation: Option<i64>,
    /// The providers that generation named.
    providers: Vec<String>,
    /// OCI: the reference and manifest digest it was pulled at.
    pulled: Option<(String, String)>,
}

/// The step at which loading a version failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Getting the bytes.
    Fetch,
    /// Compiling them (includes reading the metadata and the contract version).
    Compile,
    /// The host's checks of the plugin's metadata against the AdapterPlugin.
    Validate,
}

impl Step {
    const ALL: [Step; 3] = [Step::Fetch, Step::Compile, Step::Validate];

    /// Condition type, reason when it succeeded, reason when it failed.
    fn condition(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Step::Fetch => ("Fetched", "Fetched", "FetchFailed"),
            Step::Compile => ("Compiled", "Compiled", "CompileFailed"),
            Step::Validate => ("Validated", "Validated", "ValidationFailed"),
        }
    }
}

/// What loading the current spec of an AdapterPlugin came to.
pub type Attempt = Result<(), (Step, String)>;

impl Plugins {
    /// No plugins yet; `defaults` are the limits of AdapterPlugins that set none.
    pub fn new(runtime: Runtime, defaults: Limits, wake: UnboundedSender<ObjectRef<AdapterPlugin>>) -> Self {
        Self { runtime: Arc::new(runtime), defaults, loaded: RwLock::default(), default: OnceLock::new(), wake }
    }

    /// The plugin serving for the AdapterPlugin `name`, if one loaded.
    pub fn get(&self, name: &str) -> Option<Arc<ServingPlugin>> {
        self.loaded.read().unwrap().get(name).map(|l| l.serving.clone())
    }

    fn current(&self, name: &str) -> Option<Loaded> {
        self.loaded.read().unwrap().get(name).cloned()
    }
}

/// The name the built-in default plugin serves under (in messages and metrics).
pub const DEFAULT_PLUGIN_NAME: &str = "builtin-flux";

/// Kinds whose CRDs in an SMP's `spec.provisionerCRDs` make it a Flux provider:
/// (group, plural).
const FLUX_CRDS: [(&str, &str); 2] =
    [("helm.toolkit.fluxcd.io", "helmreleases"), ("kustomize.toolkit.fluxcd.io", "kustomizations")];

/// Whether `smp` is for Flux: its `spec.provisionerCRDs` list HelmRelease's or Kustomization's.
pub fn is_flux_provider(smp: &StateManagementProvider) -> bool {
    smp.spec.provisioner_crds.iter().any(|crd| {
        FLUX_CRDS.iter().any(|(group, plural)| crd.group == *group && crd.resources.iter().any(|r| r == plural))
    })
}

/// The plugin serving StateManagementProvider `provider`, or why there is none (for the
/// ServiceSet's condition).
pub fn serving_for(ctx: &Context, provider: &str) -> Result<Arc<ServingPlugin>, String> {
    let specs = ctx.caches.adapter_plugins.state();
    let assigned =
        assignment(specs.iter().map(|p| (p.metadata.name.as_deref().unwrap_or_default(), &p.spec)), provider);
    if assigned == Assignment::Unserved
        && let Some(default) = default_for(ctx, provider)
    {
        return default;
    }
    let Assignment::One(name) = &assigned else {
        return Err(assigned.problem(provider).unwrap_or_default());
    };
    ctx.plugins.get(name).ok_or_else(|| {
        let error = specs
            .iter()
            .find(|p| p.name_any() == *name)
            .and_then(|p| p.status.as_ref())
            .map(|s| s.error.clone())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "not loaded yet".into());
        format!("AdapterPlugin {name:?} serves StateManagementProvider {provider:?} but has no plugin loaded: {error}")
    })
}

/// The built-in default for `provider`, an SMP no AdapterPlugin names: `None` when the default
/// does not apply to it (turned off, or not a Flux provider).
fn default_for(ctx: &Context, provider: &str) -> Option<Result<Arc<ServingPlugin>, String>> {
    let smp = ctx.caches.providers.get(&ObjectRef::new(provider))?;
    if ctx.settings.default_plugin != DefaultPlugin::Flux || !is_flux_provider(&smp) {
        return None;
    }
    Some(ctx.plugins.default.get().cloned().ok_or_else(|| {
        format!("StateManagementProvider {provider:?} is served by the built-in Flux plugin, which did not load (see the host's log)")
    }))
}

/// Loads the built-in default plugin when it is turned on, and waits for its kinds to list.
pub async fn load_default(ctx: &Context) -> Result<(), String> {
    if ctx.settings.default_plugin != DefaultPlugin::Flux {
        return Ok(());
    }
    let (runtime, limits) = (ctx.plugins.runtime.clone(), ctx.plugins.defaults);
    let wasm = crate::plugin::call_blocking(move || runtime.load(builtin::FLUX, limits))
        .await
        .map_err(|e| format!("the built-in Flux plugin does not load: {e}"))?;
    let metered = Metered::new(Arc::new(wasm), DEFAULT_PLUGIN_NAME, ctx.metrics.clone());
    let serving = ServingPlugin::configured(DEFAULT_PLUGIN_NAME, Arc::new(metered), &Default::default());
    kinds_listed(ctx, &serving).await?;
    let _ = ctx.plugins.default.set(Arc::new(serving));
    tracing::info!("the built-in Flux plugin serves SMPs for Flux that no AdapterPlugin names");
    Ok(())
}

/// Loads the current spec of `plugin` unless it is what serves already; returns how that went
/// and, when what serves changed, the providers whose ServiceSets it affects. When the spec
/// fails to load, the previous version keeps serving, under the narrowest of its policy and the
/// new spec's: a narrowing never waits for the rest of the change.
pub async fn sync(ctx: &Context, plugin: &AdapterPlugin) -> (Attempt, Option<BTreeSet<String>>) {
    let name = plugin.name_any();
    let previous = ctx.plugins.current(&name);
    let (attempt, affected) = load(ctx, plugin, previous.clone()).await;
    let Some(previous) = previous.filter(|_| attempt.is_err()) else { return (attempt, affected) };
    let new = ServingPlugin::configured(&name, previous.serving.plugin.clone(), &plugin.spec).policy;
    let narrowest = previous.policy.narrowest(&new);
    if narrowest == previous.serving.policy {
        return (attempt, affected);
    }
    tracing::warn!(adapterplugin = %name, "the new spec did not load; the previous version serves under the narrowest of both policies");
    let serving = Arc::new(ServingPlugin { policy: narrowest, ..(*previous.serving).clone() });
    let providers = previous.providers.iter().cloned().collect();
    ctx.plugins.loaded.write().unwrap().insert(name, Loaded { serving, ..previous });
    (attempt, Some(providers))
}

/// Loads the current spec of `plugin` unless `previous` is it (see [`sync`]).
async fn load(ctx: &Context, plugin: &AdapterPlugin, previous: Option<Loaded>) -> (Attempt, Option<BTreeSet<String>>) {
    let name = plugin.name_any();
    let (bytes, pulled) = match fetch(ctx, plugin, previous.as_ref()).await {
        Ok(fetched) => fetched,
        Err(message) => return (Err((Step::Fetch, message)), None),
    };
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let generation = plugin.meta().generation;
    if previous.as_ref().is_some_and(|p| p.sha256 == sha256 && p.generation == generation) {
        return (Ok(()), None);
    }
    let (runtime, component) = (ctx.plugins.runtime.clone(), bytes.clone());
    let limits = limits(&plugin.spec, ctx.plugins.defaults);
    let wasm = match tokio::task::spawn_blocking(move || runtime.load(&component, limits)).await {
        Ok(Ok(wasm)) => wasm,
        Ok(Err(e)) => return (Err((Step::Compile, e.to_string())), None),
        Err(e) => return (Err((Step::Compile, format!("compiling failed: {e}"))), None),
    };
    let metered = Metered::new(Arc::new(wasm), &name, ctx.metrics.clone());
    let serving = ServingPlugin::configured(&name, Arc::new(metered), &plugin.spec);
    if let Err(message) = validate(&serving, &plugin.spec) {
        return (Err((Step::Validate, message)), None);
    }
    if let Err(message) = check_kinds_served(ctx, &serving).await {
        return (Err((Step::Validate, message)), None);
    }
    if let Err(message) = kinds_listed(ctx, &serving).await {
        return (Err((Step::Validate, message)), None);
    }
    let providers = plugin.spec.providers.clone();
    let mut affected: BTreeSet<String> = providers.iter().cloned().collect();
    affected.extend(previous.into_iter().flat_map(|p| p.providers));
    let policy = serving.policy.clone();
    let loaded = Loaded { serving: Arc::new(serving), policy, bytes, sha256, generation, providers, pulled };
    ctx.plugins.loaded.write().unwrap().insert(name.clone(), loaded);
    tracing::info!(adapterplugin = %name, "plugin loaded and serving");
    (Ok(()), Some(affected))
}

/// Reconciles one AdapterPlugin: loads its current spec when needed, writes its status, wakes
/// the ServiceSets (and the other AdapterPlugins) a change affects.
pub async fn reconcile(plugin: Arc<AdapterPlugin>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    ctx.ready().await;
    let started = std::time::Instant::now();
    let _running = ctx.in_flight.enter(format!("AdapterPlugin {}", plugin.name_any()));
    ctx.caches.config_maps.sync();
    let (attempt, affected) = sync(&ctx, &plugin).await;
    if let Some(providers) = affected {
        wake(&ctx, &plugin.name_any(), &providers);
    }
    let written = write_status(&ctx, &plugin, &attempt).await;
    ctx.metrics.reconciled("AdapterPlugin", started, written.is_ok() && attempt.is_ok());
    written?;
    let polled = plugin.spec.source.oci.as_ref().is_some_and(|o| o.pull_policy == PullPolicy::Always);
    let key = ObjectRef::from_obj(&*plugin);
    Ok(match &attempt {
        // Fetching, compiling (metadata included) and validating may all fail for a while: a
        // registry down, a pool of instances busy, a CRD not installed yet.
        Err(_) => Action::requeue(ctx.plugin_failures.failed(&key).1),
        Ok(()) => {
            ctx.plugin_failures.succeeded(&key);
            if polled { Action::requeue(ctx.settings.oci_poll) } else { Action::await_change() }
        }
    })
}

/// An AdapterPlugin is gone: its plugin stops serving, and what depended on it is woken.
pub fn forget(ctx: &Context, name: &str) {
    ctx.metrics.plugin_gone(name);
    ctx.caches.config_maps.sync();
    let Some(gone) = ctx.plugins.loaded.write().unwrap().remove(name) else { return };
    tracing::info!(adapterplugin = %name, "AdapterPlugin deleted; its plugin no longer serves");
    wake(ctx, name, &gone.providers.into_iter().collect());
}

/// Wakes the ServiceSets of `providers`, and the other AdapterPlugins naming any of them
/// (whether a provider is contested shows in their status).
fn wake(ctx: &Context, name: &str, providers: &BTreeSet<String>) {
    for service_set in ctx.caches.service_sets.state() {
        if providers.contains(&service_set.spec.provider.name) {
            let _ = ctx.wake.unbounded_send(ObjectRef::from_obj(&*service_set));
        }
    }
    for other in ctx.caches.adapter_plugins.state() {
        if other.name_any() != name && other.spec.providers.iter().any(|p| providers.contains(p)) {
            let _ = ctx.plugins.wake.unbounded_send(ObjectRef::from_obj(&*other));
        }
    }
}

/// The component's bytes and, from OCI, the reference and manifest digest they were pulled at.
/// OCI `IfNotPresent` pulls a reference once; `Always` pulls when the tag moved.
async fn fetch(
    ctx: &Context,
    plugin: &AdapterPlugin,
    previous: Option<&Loaded>,
) -> Result<(Arc<[u8]>, Option<(String, String)>), String> {
    match plugin.spec.source.get()? {
        Source::Builtin(name) => {
            builtin::lookup(name).map(|bytes| (Arc::from(bytes), None)).map_err(|e| format!("spec.source.builtin: {e}"))
        }
        Source::ConfigMap(reference) => {
            let api = Api::<ConfigMap>::namespaced(ctx.client.clone(), &reference.namespace);
            let what = format!("ConfigMap {}/{}", reference.namespace, reference.name);
            let config_map = api.get_opt(&reference.name).await.map_err(|e| format!("reading {what}: {e}"))?;
            let config_map = config_map.ok_or_else(|| format!("spec.source.configMap: {what} not found"))?;
            Ok((Arc::from(reference.bytes_in(&config_map)?), None))
        }
        Source::Oci(source) => {
            let credentials = credentials(ctx, &source.url, source.pull_secret.as_deref()).await?;
            let same_reference = previous.and_then(|p| p.pulled.as_ref()).filter(|(url, _)| *url == source.url);
            if let (Some(previous), Some((_, digest))) = (previous, same_reference) {
                let unchanged = match source.pull_policy {
                    PullPolicy::IfNotPresent => true,
                    PullPolicy::Always => {
                        oci::resolve(&source.url, &credentials).await.map_err(|e| e.to_string())? == *digest
                    }
                };
                if unchanged && source.sha256.as_ref().is_none_or(|sha| *sha == previous.sha256) {
                    return Ok((previous.bytes.clone(), previous.pulled.clone()));
                }
            }
            let pulled = oci::pull(&source.url, &credentials, source.sha256.as_deref(), oci::PullBounds::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok((Arc::from(pulled.bytes), Some((source.url.clone(), pulled.manifest_digest))))
        }
    }
}

/// The registry credentials in the pull secret (a `kubernetes.io/dockerconfigjson` Secret in
/// the host's namespace), or none.
async fn credentials(ctx: &Context, url: &str, secret: Option<&str>) -> Result<Credentials, String> {
    let Some(secret) = secret else { return Ok(Credentials::anonymous()) };
    let namespace = &ctx.settings.identity.namespace;
    let what = format!("spec.source.oci.pullSecret: Secret {namespace}/{secret}");
    let found = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .get_opt(secret)
        .await
        .map_err(|e| format!("reading {what}: {e}"))?
        .ok_or_else(|| format!("{what} not found"))?;
    let data = found.data.unwrap_or_default();
    let ByteString(config) =
        data.get(".dockerconfigjson").ok_or_else(|| format!("{what} has no .dockerconfigjson key"))?;
    let registry = oci::registry(url).map_err(|e| e.to_string())?;
    Credentials::from_dockerconfigjson(config, &registry).map_err(|e| format!("{what}: {e}"))
}

/// Waits, at most [`LIST_WAIT`], until the caches of the plugin's kinds hold a complete list;
/// a plugin must not serve before the host can see the objects it already made. A watch that
/// cannot list (e.g. 403) fails the load, naming the kind and the API server's answer.
pub async fn kinds_listed(ctx: &Context, serving: &ServingPlugin) -> Result<(), String> {
    if tokio::time::timeout(LIST_WAIT, ctx.caches.children.listed(serving.kinds())).await.is_ok() {
        return Ok(());
    }
    let failing: Vec<String> = serving
        .kinds()
        .filter_map(|k| ctx.caches.health.failure(&k.kind).map(|f| format!("{}: {}", k.kind, f.message)))
        .collect();
    let why = if failing.is_empty() { "no complete list yet".to_string() } else { failing.join("; ") };
    Err(format!(
        "cannot list the kinds plugin {:?} creates within {}s: {why}",
        serving.metadata().name,
        LIST_WAIT.as_secs()
    ))
}

/// Checks the plugin's kinds against the API server's discovery: served, same plural, and
/// namespaced as declared (a plugin that calls a cluster-scoped kind namespaced would slip past
/// the namespace rule).
async fn check_kinds_served(ctx: &Context, serving: &ServingPlugin) -> Result<(), String> {
    let plugin = &serving.metadata().name;
    for kind in serving.kinds() {
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let what = format!("{} {}", gvk.api_version(), kind.kind);
        let (resource, capabilities) = match pinned_kind(&ctx.client, &gvk).await {
            Ok(found) => found,
            Err(kube::Error::Api(e)) if e.is_not_found() => {
                return Err(format!(
                    "the API server does not serve {what}, which plugin {plugin:?} creates: is its CRD installed?"
                ));
            }
            Err(kube::Error::Discovery(e)) => {
                return Err(format!(
                    "the API server does not serve {what}, which plugin {plugin:?} creates ({e}): is its CRD installed?"
                ));
            }
            Err(e) => return Err(format!("discovering {what}: {e}")),
        };
        let namespaced = capabilities.scope == Scope::Namespaced;
        if namespaced != kind.namespaced || resource.plural != kind.plural {
            return Err(format!(
                "plugin {plugin:?} declares {what} as {} with plural {:?}; the API server says {} with plural {:?}",
                scope(kind.namespaced),
                kind.plural,
                scope(namespaced),
                resource.plural
            ));
        }
    }
    Ok(())
}

fn scope(namespaced: bool) -> &'static str {
    if namespaced { "namespaced" } else { "cluster-scoped" }
}

/// Writes the AdapterPlugin's status when it changed.
async fn write_status(ctx: &Context, plugin: &AdapterPlugin, attempt: &Attempt) -> kube::Result<()> {
    let name = plugin.name_any();
    let loaded = ctx.plugins.current(&name);
    let status = status(ctx, plugin, loaded.as_ref(), attempt, &Time(k8s_openapi::jiff::Timestamp::now()));
    ctx.metrics.plugin_ready(&name, status.ready);
    if plugin.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let notes = adapter_plugin_events(plugin.status.as_ref(), &status);
    let mut object = AdapterPlugin::new(&name, plugin.spec.clone());
    object.meta_mut().resource_version = plugin.resource_version();
    object.status = Some(status);
    let api = Api::<AdapterPlugin>::all(ctx.client.clone());
    match api.replace_status(&name, &PostParams::default(), &object).await {
        // Changed meanwhile: the change comes back through the watch.
        Err(kube::Error::Api(e)) if e.is_conflict() => Ok(()),
        Err(e) => Err(e),
        Ok(_) => {
            ctx.events.publish(plugin, "Load", &notes).await;
            Ok(())
        }
    }
}

/// The status of `plugin`: what serves, how the latest attempt went, and whether a provider it
/// names is contested.
fn status(
    ctx: &Context,
    plugin: &AdapterPlugin,
    loaded: Option<&Loaded>,
    attempt: &Attempt,
    now: &Time,
) -> AdapterPluginStatus {
    let generation = plugin.meta().generation;
    let mut status = plugin.status.clone().unwrap_or_default();
    let failed = attempt.as_ref().err().map(|(step, _)| *step);
    for step in Step::ALL {
        let (type_, ok, bad) = step.condition();
        let c = match (failed, attempt) {
            (Some(at), Err((_, message))) if at == step => {
                conditions::new(type_, Status::False, bad, message, generation, now)
            }
            (Some(at), _) if (at as u8) < (step as u8) => {
                conditions::new(type_, Status::Unknown, "NotReached", "an earlier step failed", generation, now)
            }
            _ => conditions::new(type_, Status::True, ok, "", generation, now),
        };
        conditions::set(&mut status.conditions, c);
    }
    let specs = ctx.caches.adapter_plugins.state();
    let contested: Vec<String> = plugin
        .spec
        .providers
        .iter()
        .filter_map(|provider| {
            let assigned =
                assignment(specs.iter().map(|p| (p.metadata.name.as_deref().unwrap_or_default(), &p.spec)), provider);
            matches!(assigned, Assignment::Contested(_)).then(|| assigned.problem(provider).unwrap_or_default())
        })
        .collect();
    let current = loaded.is_some_and(|l| l.generation == generation);
    status.ready = attempt.is_ok() && current && contested.is_empty();
    status.sha256 = loaded.map(|l| l.sha256.clone()).unwrap_or_default();
    status.plugin = loaded.map(|l| info(&l.serving));
    status.observed_generation = generation;
    let mut errors: Vec<String> = contested;
    if let Err((_, message)) = attempt {
        errors.insert(
            0,
            match loaded {
                Some(l) => format!("{message} (the previous version, sha256 {}, keeps serving)", l.sha256),
                None => message.clone(),
            },
        );
    }
    status.error = errors.join("; ");
    status
}

fn info(serving: &ServingPlugin) -> PluginInfo {
    let metadata = serving.metadata();
    PluginInfo {
        name: metadata.name.clone(),
        version: metadata.version.clone(),
        contract_version: metadata.contract_version.clone(),
        creates: serving.kinds().map(|k| format!("{}/{} {}", k.group, k.version, k.kind)).collect(),
    }
}

/// A status write that failed is tried again shortly.
pub fn error_policy(error: &kube::Error) -> Action {
    tracing::warn!("writing AdapterPlugin status: {error}");
    Action::requeue(Duration::from_secs(5))
}
