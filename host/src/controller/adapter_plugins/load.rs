//! Loading a fetched component: compiled off the async executor, then validated against its
//! AdapterPlugin spec and against the API server (the kinds it creates are served as declared,
//! and their caches list), so that a plugin serves only once the host can see what it made.

use super::super::plugin_kinds::children::ChildKinds;
use super::super::plumbing::watches::WatchHealth;
use crate::adapter_plugin::AdapterPlugin;
use crate::builtin;
use crate::metrics::{Metered, Metrics};
use crate::plugin::{Limits, call_blocking};
use crate::runtime::Runtime;
use crate::serving::{ServingPlugin, limits, validate};
use kube::Client;
use kube::ResourceExt;
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
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

    /// The step that failed, as `ksm_reconcile_errors_total` counts it.
    pub fn metric_label(&self) -> &'static str {
        match self.step {
            Step::Fetch => "fetch",
            Step::Verify => "verify",
            Step::Compile => "compile",
            Step::Validate => "validate",
        }
    }
}

/// What loading needs: the runtime and its default limits, the API server's discovery, and the
/// caches of the kinds plugins create.
pub struct Loader {
    runtime: Arc<Runtime>,
    /// Limits for AdapterPlugins that do not set their own.
    defaults: Limits,
    client: Client,
    children: Arc<ChildKinds>,
    health: Arc<WatchHealth>,
    metrics: Arc<Metrics>,
}

impl Loader {
    /// A loader compiling with `runtime`; `defaults` are the limits of AdapterPlugins that set
    /// none.
    pub fn new(
        runtime: Runtime,
        defaults: Limits,
        client: Client,
        (children, health): (Arc<ChildKinds>, Arc<WatchHealth>),
        metrics: Arc<Metrics>,
    ) -> Self {
        Self { runtime: Arc::new(runtime), defaults, client, children, health, metrics }
    }

    /// The built-in Flux plugin, once its kinds list.
    pub async fn builtin_flux(&self) -> Result<ServingPlugin, String> {
        let (runtime, limits) = (self.runtime.clone(), self.defaults);
        let wasm = call_blocking(move || runtime.load(builtin::FLUX, limits))
            .await
            .map_err(|e| format!("the built-in Flux plugin does not load: {e}"))?;
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
        validated.await.map_err(|message| Failure::at(Step::Validate, message))?;
        Ok(serving)
    }

    /// Waits until the caches of the plugin's kinds hold a complete list; a plugin must not
    /// serve before the host can see the objects it already made (see [`listed_unless_failing`]).
    async fn kinds_listed(&self, serving: &ServingPlugin) -> Result<(), String> {
        let listed = self.children.listed_with_reads(serving.kinds(), serving.reads());
        let failing = || {
            serving
                .kinds()
                .chain(serving.reads())
                .filter_map(|k| self.health.failure(&k.kind).map(|f| format!("{}: {}", k.kind, f.message)))
                .collect()
        };
        let plugin = &serving.metadata().name;
        listed_unless_failing(listed, failing, plugin).await.map_err(|failing| {
            format!("cannot list the kinds plugin {plugin:?} creates and reads: {}", failing.join("; "))
        })
    }

    /// Checks the plugin's kinds against the API server's discovery: served, same plural, and
    /// namespaced as declared (a plugin that calls a cluster-scoped kind namespaced would slip
    /// past the namespace rule).
    async fn check_kinds_served(&self, serving: &ServingPlugin) -> Result<(), String> {
        let plugin = &serving.metadata().name;
        let roles = serving.kinds().map(|k| (k, "creates")).chain(serving.reads().map(|k| (k, "reads")));
        for (kind, role) in roles {
            let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
            let what = format!("{} {}", gvk.api_version(), kind.kind);
            let not_served = |detail: String| {
                format!(
                    "the API server does not serve {what}, which plugin {plugin:?} {role}{detail}: is its CRD installed?"
                )
            };
            let (resource, capabilities) = match pinned_kind(&self.client, &gvk).await {
                Ok(found) => found,
                Err(kube::Error::Api(e)) if e.is_not_found() => return Err(not_served(String::new())),
                Err(kube::Error::Discovery(e)) => return Err(not_served(format!(" ({e})"))),
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
}

/// Waits for `listed`, asking every [`LIST_WAIT`] which watches are `failing`: any (e.g. a 403)
/// ends the wait with their messages; none notes that `plugin` still waits. A list that is only
/// long (a restart over 100,000 ServiceSets lists 300,000 HelmReleases, page by page) is no
/// failure: failing the load would flip every ServiceSet of the plugin to `PluginNotReady`.
async fn listed_unless_failing(
    listed: impl Future<Output = ()>,
    failing: impl Fn() -> Vec<String>,
    plugin: &str,
) -> Result<(), Vec<String>> {
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
        assert_eq!(listed_unless_failing(long_list, Vec::new, "slow").await, Ok(()));

        let started = tokio::time::Instant::now();
        let failing =
            || (started.elapsed() > LIST_WAIT * 2).then(|| "HelmRelease: 403".to_string()).into_iter().collect();
        let never = std::future::pending();
        assert_eq!(listed_unless_failing(never, failing, "refused").await, Err(vec!["HelmRelease: 403".to_string()]));
        assert!(started.elapsed() < LIST_WAIT * 4, "named at the first check after the watch fails");
    }
}
