//! What every ServiceSet reconcile shares: the client, the caches it gathers its inputs from,
//! the plugins and provider checks it asks, and the settings.

use super::arbiter::Arbiter;
use super::target_health::TargetHealth;
use crate::controller::adapter_plugins::registry::{Registry, Unserved};
use crate::controller::caches::service_set_store::ServiceSets;
use crate::controller::caches::sources::Sources;
use crate::controller::plugin_kinds::child_kinds::ChildKinds;
use crate::controller::plumbing::backoff::Failures;
use crate::controller::plumbing::event_publisher::Events;
use crate::controller::plumbing::liveness::InFlight;
use crate::controller::plumbing::sweeps::Sweeps;
use crate::controller::plumbing::watches::WatchFailures;
use crate::controller::providers::look::Providers;
use crate::controller::remote::homes::Homes;
use crate::controller::settings::Settings;
use crate::k0rdent::{
    ClusterDeployment, Credential, NamespacedName, Region, ServiceSet, ServiceTemplate, StateManagementProvider,
};
use crate::metrics::{Metrics, NotReady};
use crate::plan::memo::TranslationMemo;
use crate::plan::placements::{self, Placements};
use crate::plan::route::{self, Route, RouteError, Topology};
use crate::serving::ServingPlugin;
use crate::smp;
use ksm_plugin_sdk::sources::SourceRef;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::watch;

/// The caches a ServiceSet reconcile reads.
pub struct Caches {
    /// Every ServiceSet.
    pub service_sets: ServiceSets,
    /// Every StateManagementProvider.
    pub smps: Store<StateManagementProvider>,
    /// Every ServiceTemplate.
    pub templates: Store<ServiceTemplate>,
    /// The plugins' kinds on the management cluster: cached children, apply and delete.
    pub children: Arc<ChildKinds>,
    /// What says where a ServiceSet's children live.
    pub topology: TopologyCaches,
    /// The Flux sources templates refer to.
    pub sources: Sources,
    /// Which of the watches filling these caches fail.
    pub watch_failures: Arc<WatchFailures>,
}

/// The objects that say where a ServiceSet's children live (kcm 1.12 regions), decoded only as
/// far as routing reads them.
pub struct TopologyCaches {
    /// Every ClusterDeployment.
    pub cluster_deployments: Store<ClusterDeployment>,
    /// Every Credential.
    pub credentials: Store<Credential>,
    /// Every Region.
    pub regions: Store<Region>,
}

/// Shared state of the ServiceSet controller.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Which plugin serves which SMP.
    pub registry: Arc<Registry>,
    /// The host's own look at SMPs.
    pub providers: Arc<Providers>,
    /// The process's metrics.
    pub metrics: Arc<Metrics>,
    /// Kubernetes Events on transitions.
    pub events: Arc<Events>,
    /// How the controller runs.
    pub settings: Settings,
    /// The caches.
    pub caches: Caches,
    /// Service health on the target clusters.
    pub target_health: TargetHealth,
    /// The clusters children live on: the management cluster and the regions in use.
    pub homes: Homes,
    /// Claims across ServiceSets.
    pub arbiter: Arc<Arbiter>,
    /// Translations kept from earlier rounds (see [`crate::plan::memo`]).
    pub translations: TranslationMemo,
    /// Consecutive failed reconciles per ServiceSet, for the retry backoff.
    pub failures: Arc<Failures<NamespacedName>>,
    /// The reconciles running now, for `/healthz`.
    pub in_flight: Arc<InFlight>,
    /// This installation's finalizer on the ServiceSets it serves.
    pub finalizer: String,
    /// Turns true once the controller is prepared (see `prepare`): every cache holds a complete
    /// list and the claim index holds every served ServiceSet's claims.
    pub prepared: watch::Receiver<bool>,
    /// The passes over every ServiceSet: after a list, and the resyncs.
    pub sweeps: Arc<Sweeps>,
}

impl Context {
    /// Whether the host is ready to serve (for `/readyz`): it is prepared and no watch fails,
    /// but for a CRD other than k0rdent's that is not installed (see [`WatchFailures::blocking`]);
    /// else what is missing.
    pub fn readiness(&self) -> Result<(), NotReady> {
        let k0rdent = [ServiceSet::kind(&()), StateManagementProvider::kind(&()), ServiceTemplate::kind(&())];
        let mut problems = self.caches.watch_failures.blocking(&k0rdent.iter().map(|k| k.as_ref()).collect::<Vec<_>>());
        if !*self.prepared.borrow() {
            problems.insert(0, "caches not listed or plugins not loaded yet".into());
        }
        if problems.is_empty() { Ok(()) } else { Err(NotReady::Waiting(problems)) }
    }

    /// The served ServiceSets (those carrying the host's finalizer) by state, for metrics.
    pub fn service_set_states(&self) -> [(&'static str, i64); 3] {
        let (mut deployed, mut failed, mut progressing) = (0, 0, 0);
        for service_set in self.caches.service_sets.state().iter().filter(|ss| ss.has_finalizer(&self.finalizer)) {
            if service_set.deployed() {
                deployed += 1;
            } else if service_set.failed() {
                failed += 1;
            } else {
                progressing += 1;
            }
        }
        [("Deployed", deployed), ("Failed", failed), ("Progressing", progressing)]
    }

    /// The Flux source `source`, as plugins are handed it.
    pub fn source(&self, source: &SourceRef) -> Option<Value> {
        self.caches.sources.get(source)
    }

    /// The ServiceTemplate `name` in `namespace`, as JSON.
    pub fn template(&self, namespace: &str, name: &str) -> Option<Value> {
        let template = self.caches.templates.get(&ObjectRef::new(name).within(namespace))?;
        serde_json::to_value(&*template).ok()
    }

    /// Where `service_set`'s children live, from the cached ClusterDeployments, Credentials and
    /// Regions, or why that cannot be told.
    pub fn route(&self, service_set: &ServiceSet) -> Result<Route, RouteError> {
        let caches = &self.caches.topology;
        let cluster_deployment = |n: &NamespacedName| {
            caches.cluster_deployments.get(&ObjectRef::new(&n.name).within(&n.namespace)).map(|o| (*o).clone())
        };
        let credential = |n: &NamespacedName| {
            caches.credentials.get(&ObjectRef::new(&n.name).within(&n.namespace)).map(|o| (*o).clone())
        };
        let region = |name: &str| caches.regions.get(&ObjectRef::new(name)).map(|o| (*o).clone());
        let topology = Topology { cluster_deployment: &cluster_deployment, credential: &credential, region: &region };
        route::route(service_set, &topology, &self.settings.system_namespace)
    }

    /// The regions `service_set`'s children may be on besides the management cluster (see
    /// [`placements`]): those recorded on it, those the caches see its children on and the one
    /// it is routed to now (`route`), each reached as its Region says now; when `deleting` and
    /// the record is not trusted, every other Region too.
    pub fn placements_of(&self, service_set: &ServiceSet, route: Option<&Route>, deleting: bool) -> Placements {
        let system_namespace = &self.settings.system_namespace;
        let by_name = |name: &str| {
            let region = self.caches.topology.regions.get(&ObjectRef::new(name))?;
            route::access(name, &region, system_namespace).ok()
        };
        let every = || {
            let regions = self.caches.topology.regions.state();
            regions.iter().filter_map(|r| route::access(&r.name_any(), r, system_namespace).ok()).collect()
        };
        let holding = self.homes.holding(&NamespacedName::of(service_set));
        let regions = placements::Regions { by_name: &by_name, holding, every: &every };
        let placements = placements::placements(service_set, route, &regions, deleting);
        if let Some(why) = &placements.untrusted {
            tracing::warn!("{why}: not trusted");
        }
        placements
    }

    /// The plugin serving `service_set`'s provider, or why there is none.
    pub fn serving(&self, service_set: &ServiceSet) -> Result<Arc<ServingPlugin>, Unserved> {
        self.registry.serving_for(&service_set.spec.provider.name)
    }

    /// Whether this host serves `service_set` (its SMP names this host and its selector
    /// matches); `None` when the SMP does not exist or its selector is invalid.
    pub fn serves(&self, service_set: &ServiceSet) -> Option<bool> {
        let smp = self.caches.smps.get(&ObjectRef::new(&service_set.spec.provider.name))?;
        smp::serves(&self.settings.identity, &smp, service_set.labels()).ok()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::controller::caches::service_set_cache::CachedServiceSet;
    use crate::controller::mock_api;
    use crate::controller::remote::clusters::Reads;
    use crate::controller::settings::{DefaultPlugin, Mode};
    use crate::plugin::NativePlugin;
    use crate::smp::AdapterIdentity;
    use ksm_flux_plugin::FluxPlugin;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;
    use std::time::Duration;

    fn service_set(name: &str, finalizer: &str, status: serde_json::Value) -> ServiceSet {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": name, "namespace": "team", "finalizers": [finalizer]},
            "spec": {"provider": {"name": "ksm-flux"}},
            "status": status,
        }))
        .unwrap()
    }

    /// What the caches of a test [`Context`] hold.
    #[derive(Default)]
    pub struct Cached {
        pub service_sets: Vec<ServiceSet>,
        pub providers: Vec<StateManagementProvider>,
        pub templates: Vec<ServiceTemplate>,
        pub cluster_deployments: Vec<ClusterDeployment>,
        pub credentials: Vec<Credential>,
        pub regions: Vec<Region>,
    }

    /// A cache holding `objects`.
    fn store<K>(objects: Vec<K>) -> Store<K>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let (store, mut writer) = reflector::store();
        for object in objects {
            writer.apply_watcher_event(&Event::Apply(object));
        }
        store
    }

    fn context(service_sets: Vec<ServiceSet>) -> (Context, watch::Sender<bool>) {
        context_with(mock_api::client(|_| None).0, Cached { service_sets, ..Cached::default() })
    }

    /// The context of the host `kcm-system/ksm-adapter` in observe mode, whose API server is
    /// `client`, its caches holding `cached`, the built-in Flux plugin (natively) serving the
    /// Flux providers.
    pub fn context_with(client: Client, cached: Cached) -> (Context, watch::Sender<bool>) {
        let identity = AdapterIdentity { name: "ksm-adapter".into(), namespace: "kcm-system".into() };
        let settings = Settings {
            identity: identity.clone(),
            mode: Mode::Observe,
            default_plugin: DefaultPlugin::Flux,
            system_namespace: "kcm-system".into(),
            local_service_account: crate::tenancy::DEFAULT_LOCAL_SERVICE_ACCOUNT.into(),
            concurrency: 4,
            resync: Duration::from_secs(600),
            smp_interval: Duration::from_secs(10),
            oci_poll: Duration::from_secs(300),
            health_poll: Duration::from_secs(15),
            target_clusters: 4,
            cluster_addresses: Default::default(),
            metrics_addr: None,
            shard_selector: None,
            election: None,
        };
        let providers = store(cached.providers);
        let registry =
            Arc::new(Registry::new((identity.clone(), DefaultPlugin::Flux), reflector::store().0, providers.clone()));
        registry.serve_default(ServingPlugin::plain(Arc::new(NativePlugin::<FluxPlugin>::new())));
        let (wake, _) = futures::channel::mpsc::unbounded();
        let watch_failures = Arc::new(WatchFailures::default());
        let (prepared_tx, prepared) = watch::channel(false);
        let children = Arc::new(ChildKinds::new(&client, wake.clone(), watch_failures.clone()));
        let clusters =
            |reads| crate::controller::remote::clusters::Clusters::new(client.clone(), 4, reads, Default::default());
        let ctx = Context {
            providers: Arc::new(Providers::new(client.clone(), Mode::Observe, registry.clone())),
            events: Arc::new(Events::new(client.clone(), "ksm-adapter")),
            caches: Caches {
                service_sets: cached.service_sets.into_iter().map(|s| CachedServiceSet::pack(s).unwrap()).collect(),
                smps: providers,
                templates: store(cached.templates),
                children: children.clone(),
                topology: TopologyCaches {
                    cluster_deployments: store(cached.cluster_deployments),
                    credentials: store(cached.credentials),
                    regions: store(cached.regions),
                },
                sources: Default::default(),
                watch_failures,
            },
            homes: Homes::new(children, clusters(Reads::Watches), wake, 2),
            target_health: TargetHealth {
                clusters: Arc::new(clusters(Reads::Requests)),
                rules: reflector::store().0,
                cel: Arc::new(crate::rules::RuleCache::new()),
                system_namespace: "kcm-system".into(),
                looks: crate::controller::plumbing::slots::Slots::new(1),
            },
            client,
            registry,
            metrics: Arc::default(),
            finalizer: crate::controller::round::finalizer::of(&identity),
            settings,
            arbiter: Arc::new(Arbiter::new(futures::channel::mpsc::unbounded().0)),
            translations: TranslationMemo::default(),
            failures: Arc::default(),
            in_flight: Arc::default(),
            prepared,
            sweeps: Arc::new(crate::controller::plumbing::sweeps::Sweeps::new(8)),
        };
        (ctx, prepared_tx)
    }

    #[tokio::test]
    async fn the_host_is_ready_once_prepared() {
        let (ctx, prepared) = context(vec![]);
        let waiting = vec!["caches not listed or plugins not loaded yet".to_string()];
        assert_eq!(ctx.readiness(), Err(NotReady::Waiting(waiting)));
        prepared.send_replace(true);
        assert_eq!(ctx.readiness(), Ok(()));
    }

    #[tokio::test]
    async fn only_served_service_sets_count_by_state() {
        let mine = "ksm.k0rdent.mirantis.com/kcm-system.ksm-adapter";
        let failed = json!({"deployed": false, "services": [{"name": "a", "namespace": "a", "template": "t", "state": "Failed", "type": "Helm",
            "lastStateTransitionTime": "2026-11-25T00:00:00Z"}]});
        let (ctx, _) = context(vec![
            service_set("deployed", mine, json!({"deployed": true})),
            service_set("failed", mine, failed),
            service_set("new", mine, json!({"deployed": false})),
            service_set("theirs", "example.com/other", json!({"deployed": true})),
        ]);
        assert_eq!(ctx.service_set_states(), [("Deployed", 1), ("Failed", 1), ("Progressing", 1)]);
    }
}
