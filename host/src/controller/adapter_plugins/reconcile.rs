//! One AdapterPlugin: load its current spec when it is not what serves, write its status, and
//! wake the ServiceSets (and the other AdapterPlugins) a change affects.

use super::fetch::fetch;
use super::load::{DefaultError, Failure, Loader, Step};
use super::plugin_status;
use super::registry::{Loaded, Registry};
use super::verify::{Trust, required, trust, verify_with};
use crate::adapter_plugin::{AdapterPlugin, PullPolicy};
use crate::controller::caches::config_maps::ConfigMapWatches;
use crate::controller::caches::service_set_store::ServiceSets;
use crate::controller::plugin_kinds::child_kinds::Waker;
use crate::controller::plumbing::backoff::Failures;
use crate::controller::plumbing::event_publisher::Events;
use crate::controller::plumbing::liveness::InFlight;
use crate::controller::plumbing::status_writer::{self, OnConflict, RoundError, Written};
use crate::controller::plumbing::watches::wait_listed;
use crate::metrics::{MetricLabel, Metrics};
use crate::plan::events::adapter_plugin_events;
use crate::serving::ServingPlugin;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What the AdapterPlugin reconcile works with.
pub struct PluginContext {
    /// For status writes and fetching.
    pub client: Client,
    /// The host's namespace: pull secrets live there.
    pub namespace: String,
    /// What serves now.
    pub registry: Arc<Registry>,
    /// Compiles and validates.
    pub loader: Loader,
    /// Every ServiceSet, to wake those a change affects.
    pub service_sets: ServiceSets,
    /// Wakes a ServiceSet's reconcile.
    pub wake_service_sets: Waker,
    /// Wakes an AdapterPlugin's reconcile.
    pub wake_plugins: UnboundedSender<ObjectRef<AdapterPlugin>>,
    /// The ConfigMaps AdapterPlugins load from, watched by name.
    pub config_maps: ConfigMapWatches,
    /// Kubernetes Events on transitions.
    pub events: Arc<Events>,
    /// The process's metrics.
    pub metrics: Arc<Metrics>,
    /// Consecutive failed loads per AdapterPlugin, for the retry backoff.
    pub failures: Arc<Failures<ObjectRef<AdapterPlugin>>>,
    /// The reconciles running now, for `/healthz`.
    pub in_flight: Arc<InFlight>,
    /// How often an OCI plugin with `pullPolicy: Always` checks whether its tag moved.
    pub oci_poll: Duration,
    /// Turns true once the controller is prepared (see `prepare`).
    pub prepared: watch::Receiver<bool>,
}

/// What loading the current spec of an AdapterPlugin came to.
pub type Attempt = Result<(), Failure>;

impl PluginContext {
    /// Loads the built-in default plugin when it is turned on, and waits for its kinds to list.
    pub async fn load_default(&self) -> Result<(), DefaultError> {
        if self.registry.default_plugin() != crate::controller::settings::DefaultPlugin::Flux {
            return Ok(());
        }
        self.registry.serve_default(self.loader.builtin_flux().await?);
        tracing::info!(
            plugin = super::load::DEFAULT_PLUGIN_NAME,
            "the built-in Flux plugin serves SMPs for Flux that no AdapterPlugin names"
        );
        Ok(())
    }

    /// Loads the current spec of `plugin` unless it is what serves already; returns how that
    /// went and, when what serves changed, the providers whose ServiceSets it affects. When the
    /// spec fails to load, the previous version keeps serving, under the narrowest of its
    /// policy and the new spec's: a narrowing never waits for the rest of the change. A spec
    /// asking for a signature the previous version was not verified with, by the keys as they
    /// read now, stops it serving (a key rotated inside its Secret, or a Secret gone, included).
    pub async fn sync(&self, plugin: &AdapterPlugin) -> (Attempt, Option<BTreeSet<String>>) {
        let name = plugin.name_any();
        let previous = self.registry.current(&name);
        let trust = trust(&self.client, &self.namespace, plugin).await;
        let fingerprint = trust.as_ref().ok().and_then(|t| t.as_ref()).map(|t| t.fingerprint.clone());
        let (attempt, affected) = match trust {
            Ok(trust) => self.load(plugin, previous.clone(), trust.as_ref()).await,
            Err(e) => (Err(Failure::at(Step::Verify, e.to_string())), None),
        };
        let Some(previous) = previous.filter(|_| attempt.is_err()) else { return (attempt, affected) };
        let verified_otherwise = previous.verify.as_ref() != required(plugin) || previous.keys != fingerprint;
        if required(plugin).is_some() && verified_otherwise {
            tracing::warn!(adapterplugin = %name, "the spec asks for a signature the serving version was not verified with; it stops serving");
            self.registry.remove(&name);
            return (attempt, Some(previous.providers.into_iter().collect()));
        }
        let new = ServingPlugin::configured(&name, previous.serving.plugin.clone(), &plugin.spec).policy;
        let narrowest = previous.policy.narrowest(&new);
        if narrowest == previous.serving.policy {
            return (attempt, affected);
        }
        tracing::warn!(adapterplugin = %name, "the new spec did not load; the previous version serves under the narrowest of both policies");
        let serving = Arc::new(previous.serving.with_policy(narrowest));
        let providers = previous.providers.iter().cloned().collect();
        self.registry.serve(name, Loaded { serving, ..previous });
        (attempt, Some(providers))
    }

    /// Loads the current spec of `plugin`, verified with `trust` when it asks for a signature,
    /// unless `previous` is it (see [`sync`](Self::sync)).
    async fn load(
        &self,
        plugin: &AdapterPlugin,
        previous: Option<Loaded>,
        trust: Option<&Trust>,
    ) -> (Attempt, Option<BTreeSet<String>>) {
        let name = plugin.name_any();
        let fetched =
            match fetch(&self.client, &self.namespace, &plugin.spec, previous.as_ref().map(|p| &p.fetched)).await {
                Ok(fetched) => fetched,
                Err(e) => return (Err(Failure::at(Step::Fetch, e.to_string())), None),
            };
        let generation = plugin.meta().generation;
        let fingerprint = trust.map(|t| t.fingerprint.clone());
        if previous
            .as_ref()
            .is_some_and(|p| p.fetched.sha256 == fetched.sha256 && p.generation == generation && p.keys == fingerprint)
        {
            return (Ok(()), None);
        }
        let verified = match trust {
            Some(trust) => match verify_with(&self.client, &self.namespace, plugin, &fetched, trust).await {
                Ok(verified) => {
                    tracing::info!(adapterplugin = %name, %verified, "signature verified");
                    Some(verified.to_string())
                }
                Err(e) => return (Err(Failure::at(Step::Verify, e.to_string())), None),
            },
            None => None,
        };
        let serving = match self.loader.load(plugin, fetched.bytes.clone()).await {
            Ok(serving) => serving,
            Err(failure) => return (Err(failure), None),
        };
        let providers = plugin.spec.providers.clone();
        let mut affected: BTreeSet<String> = providers.iter().cloned().collect();
        affected.extend(previous.into_iter().flat_map(|p| p.providers));
        let policy = serving.policy.clone();
        let verify = required(plugin).cloned();
        let loaded = Loaded {
            serving: Arc::new(serving),
            policy,
            fetched,
            generation,
            verify,
            keys: fingerprint,
            verified,
            providers,
        };
        self.registry.serve(name.clone(), loaded);
        tracing::info!(adapterplugin = %name, "plugin loaded and serving");
        (Ok(()), Some(affected))
    }

    /// An AdapterPlugin is gone: its plugin stops serving, and what depended on it is woken.
    pub fn forget(&self, name: &str) {
        self.config_maps.sync();
        self.drop_plugin(name);
    }

    /// The plugin of AdapterPlugin `name` stops serving here (the AdapterPlugin is gone, or no
    /// longer this host's), and what depended on it is woken.
    fn drop_plugin(&self, name: &str) {
        self.metrics.plugin_gone(name);
        let Some(gone) = self.registry.remove(name) else { return };
        tracing::info!(adapterplugin = %name, "its plugin no longer serves on this host");
        self.wake(name, &gone.providers.into_iter().collect());
    }

    /// Wakes the ServiceSets of `providers`, and the other AdapterPlugins naming any of them
    /// (whether a provider is contested shows in their status).
    fn wake(&self, name: &str, providers: &BTreeSet<String>) {
        for service_set in self.service_sets.keys_where(|ss| providers.contains(ss.provider())) {
            let _ = self.wake_service_sets.unbounded_send(service_set);
        }
        for other in self.registry.specs() {
            if other.name_any() != name && other.spec.providers.iter().any(|p| providers.contains(p)) {
                let _ = self.wake_plugins.unbounded_send(ObjectRef::from_obj(&*other));
            }
        }
    }

    /// Writes the AdapterPlugin's status when it changed.
    async fn write_status(&self, plugin: &AdapterPlugin, attempt: &Attempt) -> kube::Result<()> {
        let name = plugin.name_any();
        let loaded = self.registry.current(&name);
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let unserved = loaded.as_ref().map(|l| self.loader.unserved(&l.serving)).unwrap_or_default();
        let contested = self.registry.contested(plugin);
        let status = plugin_status::decide(plugin, loaded.as_ref(), attempt, contested, &unserved, &now);
        self.metrics.plugin_ready(&name, status.ready);
        let notes = adapter_plugin_events(plugin.status.as_ref(), &status);
        let api = Api::<AdapterPlugin>::all(self.client.clone());
        // Changed meanwhile: the change comes back through the watch.
        if status_writer::write(&api, plugin, status, OnConflict::AwaitChange).await? == Written::Replaced {
            self.events.publish(plugin, "Load", &notes).await;
        }
        Ok(())
    }
}

/// Why an AdapterPlugin's round failed: its current spec did not load (the previous version,
/// if any, keeps serving, and the status says why), or its status was not written. It is
/// retried (see [`error_policy`]).
pub type Error = RoundError<Failure>;

/// Reconciles one AdapterPlugin: loads its current spec when needed, writes its status, wakes
/// the ServiceSets (and the other AdapterPlugins) a change affects.
pub async fn reconcile(plugin: Arc<AdapterPlugin>, ctx: Arc<PluginContext>) -> Result<Action, Error> {
    wait_listed(ctx.prepared.clone()).await;
    let started = std::time::Instant::now();
    let _running = ctx.in_flight.enter(format!("AdapterPlugin {}", plugin.name_any()));
    ctx.config_maps.sync();
    if !ctx.registry.is_ours(&plugin) {
        // Another installation's (an SMP change wakes it).
        ctx.drop_plugin(&plugin.name_any());
        return Ok(Action::await_change());
    }
    let (attempt, affected) = ctx.sync(&plugin).await;
    if let Some(providers) = affected {
        ctx.wake(&plugin.name_any(), &providers);
    }
    let written = ctx.write_status(&plugin, &attempt).await;
    let written = written.map_err(|source| Error::WriteStatus { kind: "AdapterPlugin", source });
    let result = written.and(attempt.map_err(Error::Work));
    ctx.metrics.reconciled("AdapterPlugin", started, result.as_ref().map(|_| ()).map_err(Error::metric_label));
    result?;
    ctx.failures.succeeded(&ObjectRef::from_obj(&*plugin));
    // A tag that may move, or keys read from Secrets that may be rotated: looked at again.
    let oci = plugin.spec.source.oci.as_ref();
    let polled = oci.is_some_and(|o| o.pull_policy == PullPolicy::Always);
    // Keys in Secrets and a trust root in a ConfigMap are read again, so rotations are seen.
    let read_from_objects =
        required(&plugin).is_some_and(|v| v.keyless.is_some() || v.keys.iter().any(|k| k.secret_key_ref.is_some()));
    Ok(if polled || read_from_objects { Action::requeue(ctx.oci_poll) } else { Action::await_change() })
}

/// How long to wait before retrying an AdapterPlugin whose round failed: a load backs off
/// exponentially per AdapterPlugin, a status write is tried again shortly.
pub fn error_policy(plugin: Arc<AdapterPlugin>, error: &Error, ctx: Arc<PluginContext>) -> Action {
    match error {
        // Fetching, compiling (metadata included) and validating may all fail for a while: a
        // registry down, a pool of instances busy, a CRD not installed yet.
        Error::Work(_) => Action::requeue(ctx.failures.failed(&ObjectRef::from_obj(&*plugin)).1),
        Error::WriteStatus { .. } => {
            tracing::warn!(adapterplugin = %plugin.name_any(), "{error}");
            Action::requeue(Duration::from_secs(5))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api;
    use crate::controller::plugin_kinds::child_kinds::ChildKinds;
    use crate::controller::plumbing::watches::WatchFailures;
    use crate::controller::settings::DefaultPlugin;
    use crate::plugin::Limits;
    use crate::runtime::Runtime;
    use crate::smp::AdapterIdentity;
    use kube::runtime::reflector;
    use serde_json::json;

    /// The context of a host that serves no plugin yet, whose API server is `client`'s.
    fn context(client: Client) -> Arc<PluginContext> {
        let metrics = Arc::new(Metrics::default());
        let watch_failures = Arc::new(WatchFailures::default());
        let (wake_service_sets, _) = futures::channel::mpsc::unbounded();
        let (wake_plugins, _) = futures::channel::mpsc::unbounded();
        let children = Arc::new(ChildKinds::new(&client, wake_service_sets.clone(), watch_failures.clone()));
        let identity = AdapterIdentity { name: "ksm-adapter".into(), namespace: "kcm-system".into() };
        let plugins = reflector::store().0;
        let runtime = Runtime::new().unwrap();
        Arc::new(PluginContext {
            namespace: "kcm-system".into(),
            registry: Arc::new(Registry::new((identity, DefaultPlugin::None), plugins.clone(), reflector::store().0)),
            loader: Loader::new(
                runtime,
                Limits::default(),
                client.clone(),
                (children, watch_failures),
                metrics.clone(),
            ),
            service_sets: ServiceSets::default(),
            wake_service_sets,
            config_maps: ConfigMapWatches::new(client.clone(), plugins, wake_plugins.clone()),
            wake_plugins,
            events: Arc::new(Events::new(client.clone(), "ksm-adapter")),
            metrics,
            failures: Arc::default(),
            in_flight: Arc::default(),
            oci_poll: Duration::from_secs(300),
            prepared: watch::channel(true).1,
            client,
        })
    }

    #[tokio::test]
    async fn a_spec_that_does_not_fetch_fails_the_round_under_fetch_and_backs_off() {
        let plugin = json!({"apiVersion": "ksm.k0rdent.mirantis.com/v1alpha1", "kind": "AdapterPlugin",
                            "metadata": {"name": "argo", "resourceVersion": "1"},
                            "spec": {"source": {"builtin": "argo"}, "providers": ["ksm-argocd"]}});
        let written = plugin.clone();
        let status = "PUT /apis/ksm.k0rdent.mirantis.com/v1alpha1/adapterplugins/argo/status";
        let (client, asked) = mock_api::client(move |line| (line == status).then(|| (200, written.clone())));
        let ctx = context(client);
        let plugin: Arc<AdapterPlugin> = Arc::new(serde_json::from_value(plugin).unwrap());
        let error = reconcile(plugin.clone(), ctx.clone()).await.unwrap_err();
        assert!(matches!(&error, Error::Work(failure) if failure.step == Step::Fetch), "{error}");
        assert!(error.to_string().starts_with("spec.source.builtin: no built-in plugin \"argo\""), "{error}");
        assert!(asked.lock().unwrap().iter().any(|line| line.starts_with(status)), "the status says why");
        assert_eq!(ctx.metrics.reconcile_errors("AdapterPlugin", "fetch"), 1);
        assert_eq!(error_policy(plugin, &error, ctx), Action::requeue(crate::retry::ROUNDS.after(1)));
    }
}
