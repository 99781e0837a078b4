//! Loading a fetched component: compiled off the async executor, then validated against its
//! AdapterPlugin spec and against the API server (the kinds it creates are served as declared,
//! and their caches list), so that a plugin serves only once the host can see what it made.

use crate::adapter_plugin::AdapterPlugin;
use crate::builtin;
use crate::controller::plugin_kinds::child_kinds::ChildKinds;
use crate::controller::plumbing::watches::WatchFailures;
use crate::metrics::{Metered, MetricLabel, Metrics};
use crate::plugin::{Limits, call_blocking};
use crate::runtime::{LoadError, Runtime};
use crate::serving::{Invalid, ServingPlugin, limits, validate};
use ksm_plugin_sdk::sources::source_kinds;
use kube::Client;
use kube::ResourceExt;
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::error::DiscoveryError;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// How often a load that waits for the caches of a plugin's kinds to list checks their watches
/// for failures (and notes that it still waits).
const LIST_WAIT: Duration = Duration::from_secs(15);

/// The name the built-in default plugin serves under (in messages and metrics).
pub const DEFAULT_PLUGIN_NAME: &str = "builtin-flux";

/// The step at which loading a version failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Getting the bytes.
    Fetch,
    /// Checking the signature `spec.source.oci.verify` asks for.
    Verify,
    /// Compiling them (includes reading the metadata and the contract version).
    Compile,
    /// The host's checks of the plugin's metadata against the AdapterPlugin.
    Validate,
}

/// Why loading a version failed: the step and a message naming what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// Where it failed.
    pub step: Step,
    /// Why.
    pub message: String,
}

impl Failure {
    /// A failure at `step`.
    pub fn at(step: Step, message: impl Into<String>) -> Self {
        Self { step, message: message.into() }
    }
}

/// The step that failed.
impl MetricLabel for Failure {
    fn metric_label(&self) -> &'static str {
        match self.step {
            Step::Fetch => "fetch",
            Step::Verify => "verify",
            Step::Compile => "compile",
            Step::Validate => "validate",
        }
    }
}

/// Why a compiled plugin may not serve: its spec's rules, or the API server's discovery and
/// the host's caches of its kinds.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The plugin breaks the rules of its AdapterPlugin.
    #[error(transparent)]
    Spec(#[from] Invalid),
    /// A kind the plugin creates or reads is not served.
    #[error(
        "the API server does not serve {api_version} {kind}, which plugin {plugin:?} {role}{}: is its CRD installed?",
        .discovery.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
    )]
    NotServed {
        /// The kind's `apiVersion`.
        api_version: String,
        /// The kind.
        kind: String,
        /// The plugin's name.
        plugin: String,
        /// `creates` or `reads`.
        role: &'static str,
        /// What discovery said, when it said why.
        #[source]
        discovery: Option<DiscoveryError>,
    },
    /// Discovery failed.
    #[error("discovering {api_version} {kind}: {source}")]
    Discovery {
        /// The kind's `apiVersion`.
        api_version: String,
        /// The kind.
        kind: String,
        /// Why.
        source: kube::Error,
    },
    /// A kind is served otherwise than the plugin declares it.
    #[error(
        "plugin {plugin:?} declares {api_version} {kind} as {} with plural {declared_plural:?}; the API server says {} with plural {served_plural:?}",
        scope(*.declared_namespaced),
        scope(*.served_namespaced)
    )]
    Mismatch {
        /// The plugin's name.
        plugin: String,
        /// The kind's `apiVersion`.
        api_version: String,
        /// The kind.
        kind: String,
        /// Whether the plugin declares it namespaced.
        declared_namespaced: bool,
        /// The plural it declares.
        declared_plural: String,
        /// Whether the API server serves it namespaced.
        served_namespaced: bool,
        /// The plural it serves.
        served_plural: String,
    },
    /// The watches of its kinds fail.
    #[error("cannot list the kinds plugin {plugin:?} creates and reads: {}", .failing.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotListed {
        /// The plugin's name.
        plugin: String,
        /// Each failing watch.
        failing: Vec<FailingWatch>,
    },
}

/// A watch of a plugin's kind that fails: its kind and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct FailingWatch {
    /// The kind watched.
    pub kind: String,
    /// Why its watch fails.
    pub message: String,
}

/// Why the built-in default plugin does not serve.
#[derive(Debug, thiserror::Error)]
pub enum DefaultError {
    /// It does not load.
    #[error("the built-in Flux plugin does not load: {0}")]
    Load(#[source] LoadError),
    /// Its kinds do not list.
    #[error(transparent)]
    Kinds(#[from] ValidateError),
}

/// What loading needs: the runtime and its default limits, the API server's discovery, and the
/// caches of the kinds plugins create.
pub struct Loader {
    runtime: Arc<Runtime>,
    /// Limits for AdapterPlugins that do not set their own.
    defaults: Limits,
    client: Client,
    children: Arc<ChildKinds>,
    watch_failures: Arc<WatchFailures>,
    metrics: Arc<Metrics>,
}

impl Loader {
    /// A loader compiling with `runtime`; `defaults` are the limits of AdapterPlugins that set
    /// none.
    pub fn new(
        runtime: Runtime,
        defaults: Limits,
        client: Client,
        (children, watch_failures): (Arc<ChildKinds>, Arc<WatchFailures>),
        metrics: Arc<Metrics>,
    ) -> Self {
        Self { runtime: Arc::new(runtime), defaults, client, children, watch_failures, metrics }
    }

    /// The built-in Flux plugin, once its kinds list.
    pub async fn builtin_flux(&self) -> Result<ServingPlugin, DefaultError> {
        let (runtime, limits) = (self.runtime.clone(), self.defaults);
        let wasm = call_blocking(move || runtime.load(builtin::FLUX, limits)).await.map_err(DefaultError::Load)?;
        let metered = Metered::new(Arc::new(wasm), DEFAULT_PLUGIN_NAME, self.metrics.clone());
        let serving = ServingPlugin::configured(DEFAULT_PLUGIN_NAME, Arc::new(metered), &Default::default());
        self.kinds_listed(&serving).await?;
        Ok(serving)
    }

    /// The plugin in `bytes` under the rules of `plugin`'s spec: compiled, validated, and its
    /// kinds served and listed.
    pub async fn load(&self, plugin: &AdapterPlugin, bytes: Arc<[u8]>) -> Result<ServingPlugin, Failure> {
        let name = plugin.name_any();
        let runtime = self.runtime.clone();
        let limits = limits(&plugin.spec, self.defaults);
        let wasm = match tokio::task::spawn_blocking(move || runtime.load(&bytes, limits)).await {
            Ok(Ok(wasm)) => wasm,
            Ok(Err(e)) => return Err(Failure::at(Step::Compile, e.to_string())),
            Err(e) => return Err(Failure::at(Step::Compile, format!("compiling failed: {e}"))),
        };
        let metered = Metered::new(Arc::new(wasm), &name, self.metrics.clone());
        let serving = ServingPlugin::configured(&name, Arc::new(metered), &plugin.spec);
        let validated = async {
            validate(&serving, &plugin.spec)?;
            self.check_kinds_served(&serving).await?;
            self.kinds_listed(&serving).await
        };
        validated.await.map_err(|e: ValidateError| Failure::at(Step::Validate, e.to_string()))?;
        Ok(serving)
    }

    /// The CRDs (`<plural>.<group>`) of the kinds `serving` creates or reads, and of the Flux
    /// sources plugins are handed, that the API server does not serve now: for its status, as
    /// their watches only warn once.
    pub fn unserved(&self, serving: &ServingPlugin) -> Vec<String> {
        let unserved = self.watch_failures.unserved();
        let sources = source_kinds();
        let needed = serving.kinds().chain(serving.reads()).chain(&sources);
        let crds: BTreeSet<String> =
            needed.filter(|k| unserved.contains(&k.kind)).map(|k| format!("{}.{}", k.plural, k.group)).collect();
        crds.into_iter().collect()
    }

    /// Waits until the caches of the plugin's kinds hold a complete list; a plugin must not
    /// serve before the host can see the objects it already made (see [`listed_unless_failing`]).
    async fn kinds_listed(&self, serving: &ServingPlugin) -> Result<(), ValidateError> {
        let listed = self.children.listed_with_reads(serving.kinds(), serving.reads());
        let failing = || {
            serving
                .kinds()
                .chain(serving.reads())
                .filter_map(|k| {
                    let failure = self.watch_failures.failure(&k.kind)?;
                    Some(FailingWatch { kind: k.kind.clone(), message: failure.message })
                })
                .collect()
        };
        let plugin = &serving.metadata().name;
        listed_unless_failing(listed, failing, plugin)
            .await
            .map_err(|failing| ValidateError::NotListed { plugin: plugin.clone(), failing })
    }

    /// Checks the plugin's kinds against the API server's discovery: served, same plural, and
    /// namespaced as declared (a plugin that calls a cluster-scoped kind namespaced would slip
    /// past the namespace rule).
    async fn check_kinds_served(&self, serving: &ServingPlugin) -> Result<(), ValidateError> {
        let plugin = &serving.metadata().name;
        let roles = serving.kinds().map(|k| (k, "creates")).chain(serving.reads().map(|k| (k, "reads")));
        for (kind, role) in roles {
            let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
            let (api_version, plugin) = (gvk.api_version(), plugin.clone());
            let not_served = |discovery| ValidateError::NotServed {
                api_version: api_version.clone(),
                kind: kind.kind.clone(),
                plugin: plugin.clone(),
                role,
                discovery,
            };
            let (resource, capabilities) = match pinned_kind(&self.client, &gvk).await {
                Ok(found) => found,
                Err(kube::Error::Api(e)) if e.is_not_found() => return Err(not_served(None)),
                Err(kube::Error::Discovery(e)) => return Err(not_served(Some(e))),
                Err(source) => return Err(ValidateError::Discovery { api_version, kind: kind.kind.clone(), source }),
            };
            let namespaced = capabilities.scope == Scope::Namespaced;
            if namespaced != kind.namespaced || resource.plural != kind.plural {
                return Err(ValidateError::Mismatch {
                    plugin,
                    api_version,
                    kind: kind.kind.clone(),
                    declared_namespaced: kind.namespaced,
                    declared_plural: kind.plural.clone(),
                    served_namespaced: namespaced,
                    served_plural: resource.plural,
                });
            }
        }
        Ok(())
    }
}

/// Waits for `listed`, asking every [`LIST_WAIT`] which watches are `failing`: any (e.g. a 403)
/// ends the wait with their messages; none notes that `plugin` still waits. A list that is only
/// long (a restart over 100,000 ServiceSets lists 300,000 HelmReleases, page by page) is no
/// failure: failing the load would flip every ServiceSet of the plugin to `PluginNotReady`.
async fn listed_unless_failing<F>(
    listed: impl Future<Output = ()>,
    failing: impl Fn() -> Vec<F>,
    plugin: &str,
) -> Result<(), Vec<F>> {
    tokio::pin!(listed);
    let started = tokio::time::Instant::now();
    while tokio::time::timeout(LIST_WAIT, &mut listed).await.is_err() {
        let failing = failing();
        if !failing.is_empty() {
            return Err(failing);
        }
        tracing::info!(plugin, waited = ?started.elapsed(), "still listing the kinds the plugin creates and reads");
    }
    Ok(())
}

fn scope(namespaced: bool) -> &'static str {
    if namespaced { "namespaced" } else { "cluster-scoped" }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found at 100,000 ServiceSets: a restart's list of 300,000 HelmReleases outlasted a fixed
    /// wait, and the load failed.
    #[tokio::test(start_paused = true)]
    async fn a_long_list_is_waited_for_and_a_failing_watch_ends_the_wait() {
        let long_list = tokio::time::sleep(LIST_WAIT * 5);
        assert_eq!(listed_unless_failing(long_list, Vec::<String>::new, "slow").await, Ok(()));

        let started = tokio::time::Instant::now();
        let failing =
            || (started.elapsed() > LIST_WAIT * 2).then(|| "HelmRelease: 403".to_string()).into_iter().collect();
        let never = std::future::pending();
        assert_eq!(listed_unless_failing(never, failing, "refused").await, Err(vec!["HelmRelease: 403".to_string()]));
        assert!(started.elapsed() < LIST_WAIT * 4, "named at the first check after the watch fails");
    }
}
