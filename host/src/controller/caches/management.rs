//! The caches `ksm-adapter run` starts on the management cluster, all at once: of each kind the
//! store the controllers read and the stream of its changes (which fills the store, so it must
//! be polled), and the flags that turn true once the caches hold complete lists.

use super::cache::{Cache, all};
use super::service_set_cache::WatchedServiceSet;
use super::service_set_store::ServiceSets;
use super::sources::{SourceEvents, Sources};
use crate::adapter_plugin::AdapterPlugin;
use crate::controller::plumbing::watches::WatchFailures;
use crate::k0rdent::{ClusterDeployment, Credential, Region, ServiceTemplate, StateManagementProvider};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use std::sync::Arc;
use tokio::sync::watch;

/// A kind's cache and the stream of its changes, errors included (the cache reports them to
/// [`WatchFailures`]).
pub type Cached<K> = (Store<K>, BoxStream<'static, Result<K, watcher::Error>>);

/// A watch's events, errors included.
pub type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The management cluster's caches, started.
pub struct ManagementCaches {
    /// Which of their watches fail.
    pub watch_failures: Arc<WatchFailures>,
    /// The ServiceSets of this host's shard, and their watch's events.
    pub service_sets: (ServiceSets, Events<WatchedServiceSet>),
    /// Every StateManagementProvider.
    pub smps: Cached<StateManagementProvider>,
    /// Every ServiceTemplate.
    pub templates: Cached<ServiceTemplate>,
    /// The Flux sources templates refer to.
    pub sources: (Sources, SourceEvents),
    /// The ConfigMaps labelled as health rules.
    pub health_rules: Cached<ConfigMap>,
    /// Every ClusterDeployment.
    pub cluster_deployments: Cached<ClusterDeployment>,
    /// Every Credential.
    pub credentials: Cached<Credential>,
    /// Every Region.
    pub regions: Cached<Region>,
    /// Every AdapterPlugin.
    pub adapter_plugins: Cached<AdapterPlugin>,
    /// Whether each cache the ServiceSets read holds a complete list.
    pub listed: Vec<watch::Receiver<bool>>,
    /// Whether the AdapterPlugins' and the SMPs' caches hold complete lists: which AdapterPlugins
    /// are this host's follows the SMPs they name.
    pub owners_listed: [watch::Receiver<bool>; 2],
}

impl ManagementCaches {
    /// Starts every cache, the ServiceSets' of the shard `shard_selector` selects (`None`: every
    /// ServiceSet). `on_service_set` and `on_adapter_plugin` see every event of their kind, after
    /// the cache took it in.
    pub fn start(
        client: &Client,
        shard_selector: Option<&str>,
        on_service_set: impl Fn(&ServiceSets, &watcher::Event<WatchedServiceSet>) + Send + 'static,
        on_adapter_plugin: impl Fn(&Store<AdapterPlugin>, &watcher::Event<AdapterPlugin>) + Send + 'static,
    ) -> Self {
        // A shard sees only its ServiceSets: everything keyed by ServiceSet follows from that.
        let shard = match shard_selector {
            Some(selector) => watcher::Config::default().labels(selector),
            None => all(),
        };
        let watch_failures = Arc::new(WatchFailures::default());
        let cache = |config| Cache { client, config, watch_failures: watch_failures.clone() };
        let (service_sets, service_set_events, service_sets_listed) = cache(shard).start_service_sets(on_service_set);
        let (smps, provider_events, providers_listed) = cache(all()).start::<StateManagementProvider>(|_, _| {});
        let (templates, template_events, templates_listed) = cache(all()).start::<ServiceTemplate>(|_, _| {});
        let (sources, source_events, sources_listed) = Sources::start(client, &watch_failures);
        let (health_rules, health_rule_events, health_rules_listed) =
            cache(watcher::Config::default().labels(crate::health::TARGET_LABEL)).start::<ConfigMap>(|_, _| {});
        let (cluster_deployments, cluster_deployment_events, cluster_deployments_listed) =
            cache(all()).start::<ClusterDeployment>(|_, _| {});
        let (credentials, credential_events, credentials_listed) = cache(all()).start::<Credential>(|_, _| {});
        let (regions, region_events, regions_listed) = cache(all()).start::<Region>(|_, _| {});
        let (adapter_plugins, plugin_events, plugins_listed) = cache(all()).start::<AdapterPlugin>(on_adapter_plugin);
        let owners_listed = [plugins_listed, providers_listed.clone()];
        let mut listed = vec![
            service_sets_listed,
            providers_listed,
            templates_listed,
            health_rules_listed,
            cluster_deployments_listed,
            credentials_listed,
            regions_listed,
        ];
        listed.extend(sources_listed);
        Self {
            watch_failures,
            service_sets: (service_sets, service_set_events.boxed()),
            smps: (smps, provider_events.boxed()),
            templates: (templates, template_events.boxed()),
            sources: (sources, source_events),
            health_rules: (health_rules, health_rule_events.boxed()),
            cluster_deployments: (cluster_deployments, cluster_deployment_events.boxed()),
            credentials: (credentials, credential_events.boxed()),
            regions: (regions, region_events.boxed()),
            adapter_plugins: (adapter_plugins, plugin_events.boxed()),
            listed,
            owners_listed,
        }
    }
}
