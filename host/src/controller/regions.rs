//! Where a ServiceSet's children live: the management cluster, or a regional cluster (kcm 1.12,
//! see [`crate::plan::route`]). Per region one client and one set of child watches
//! ([`ChildKinds`]), made on first use, made again when the region's kubeconfig Secret changes,
//! and dropped, their watches stopped, once no ServiceSet used the region for
//! [`Reads::Watches`]'s idle time. A region's watches report to a health of their own: a region
//! that cannot be reached fails its ServiceSets, not the host's readiness.

use super::children::{ChildKinds, Waker};
use super::clusters::{Cluster, Clusters, Reads};
use super::watches::WatchHealth;
use crate::k0rdent::ServiceSet;
use crate::plan::children::owned_by;
use crate::plan::decide::ChildRef;
use crate::plan::route::Route;
use crate::serving::ServingPlugin;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How long a reconcile waits for a region's caches to list the plugin's kinds.
const LISTED_WITHIN: Duration = Duration::from_secs(15);

/// The management cluster's children and the regions in use.
pub struct Regions {
    management: Arc<ChildKinds>,
    clusters: Clusters,
    wake: Waker,
    held: Mutex<HashMap<String, Held>>,
}

struct Held {
    cluster: Arc<Cluster>,
    children: Arc<ChildKinds>,
    used: Instant,
}

/// The cluster one ServiceSet's children live on, and their cache there.
#[derive(Clone)]
pub struct Home {
    /// The region's name; `None` for the management cluster.
    pub region: Option<String>,
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// Its children: cache, apply, delete.
    pub children: Arc<ChildKinds>,
}

impl Home {
    /// Waits until the caches of the kinds `serving` creates and reads on this cluster hold a
    /// complete list; a region that does not list them within [`LISTED_WITHIN`] is reported as
    /// unreachable.
    pub async fn listed(&self, serving: &ServingPlugin) -> Result<(), String> {
        let listed = self.children.listed_with_reads(serving.kinds(), serving.reads());
        let Some(region) = &self.region else {
            listed.await;
            return Ok(());
        };
        tokio::time::timeout(LISTED_WITHIN, listed)
            .await
            .map_err(|_| format!("Region {region}: its objects were not listed within {}s", LISTED_WITHIN.as_secs()))
    }
}

impl Regions {
    /// No region yet; `management` holds the management cluster's children, `clusters` makes
    /// the regions' clients, changes to regional children wake their ServiceSet through `wake`.
    pub fn new(management: Arc<ChildKinds>, clusters: Clusters, wake: Waker) -> Self {
        Self { management, clusters, wake, held: Mutex::default() }
    }

    /// The home of a ServiceSet routed `route`, or why its region cannot be reached.
    pub async fn home(&self, route: &Route) -> Result<Home, String> {
        let access = match route {
            Route::Management => {
                self.sweep();
                return Ok(self.management_home());
            }
            Route::Region(access) => access,
        };
        let cluster = self
            .clusters
            .of(&self.clusters.here(), &access.secret, &access.key)
            .await
            .map_err(|e| format!("Region {}: {e}", access.name))?;
        self.sweep();
        let mut held = self.lock();
        let now = Instant::now();
        let entry = held.entry(access.name.clone()).or_insert_with(|| self.hold(&cluster, now));
        if !Arc::ptr_eq(&entry.cluster, &cluster) {
            // The kubeconfig Secret changed: new client, new watches.
            *entry = self.hold(&cluster, now);
        }
        entry.used = now;
        Ok(Home { region: Some(access.name.clone()), cluster, children: entry.children.clone() })
    }

    /// The children of `service_set` (owned by its uid, as [`deletion`](crate::plan::decide::deletion)
    /// picks them) cached on clusters other than `home`: left there by an earlier route (its
    /// Credential moved to another region), to be deleted.
    pub fn elsewhere(&self, home: &Home, service_set: &ServiceSet) -> Vec<(Arc<ChildKinds>, Vec<ChildRef>)> {
        let uid = service_set.metadata.uid.as_deref().unwrap_or_default();
        let mut others: Vec<Arc<ChildKinds>> = self.lock().values().map(|h| h.children.clone()).collect();
        others.push(self.management.clone());
        others
            .into_iter()
            .filter(|children| !Arc::ptr_eq(children, &home.children))
            .filter_map(|children| {
                let cached = children.cached(service_set);
                let left: Vec<ChildRef> = cached.iter().filter(|c| owned_by(c, uid)).map(ChildRef::of).collect();
                (!left.is_empty()).then_some((children, left))
            })
            .collect()
    }

    /// Whether service `service` of ServiceSet `namespace/name` has a cached child on any
    /// cluster (claims go to a service whose objects exist).
    pub fn any(&self, namespace: &str, name: &str, service: &str) -> bool {
        self.management.any(namespace, name, service)
            || self.lock().values().any(|held| held.children.any(namespace, name, service))
    }

    /// How many regions are held now (each one client and its watches).
    pub fn held(&self) -> usize {
        self.lock().len()
    }

    /// How many watches the regions held now run (one per kind on each).
    pub fn watches(&self) -> usize {
        self.lock().values().map(|held| held.children.watched()).sum()
    }

    fn management_home(&self) -> Home {
        Home { region: None, cluster: self.clusters.here(), children: self.management.clone() }
    }

    fn hold(&self, cluster: &Arc<Cluster>, now: Instant) -> Held {
        // Its own health: a region's failing watches are logged, never the host's readiness.
        let children = ChildKinds::new(cluster.client(), self.wake.clone(), Arc::new(WatchHealth::default()));
        Held { cluster: cluster.clone(), children: Arc::new(children), used: now }
    }

    /// Drops the regions no ServiceSet used for a while; their watches stop.
    fn sweep(&self) {
        let now = Instant::now();
        self.lock().retain(|_, held| now.duration_since(held.used) < Reads::Watches.idle());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::super::mock_api;
    use super::*;
    use crate::k0rdent::NamespacedName;
    use crate::plan::route::RegionAccess;
    use serde_json::json;

    /// A kubeconfig Secret of a cluster at `server` (never dialled: clients connect on use).
    fn secret(name: &str, version: &str, server: &str) -> serde_json::Value {
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
             clusters: [{{name: k, cluster: {{server: '{server}', insecure-skip-tls-verify: true}}}}]\n\
             users: [{{name: u, user: {{token: abc}}}}]\n"
        );
        use base64::Engine as _;
        let value = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": "kcm-system", "resourceVersion": version},
               "data": {"value": value}})
    }

    /// A HelmRelease of ServiceSet `team/prod`, created for the ServiceSet of uid `uid`.
    fn child(name: &str, uid: &str) -> serde_json::Value {
        use crate::plan::children::{
            MANAGED_LABEL, SERVICE_SET_LABEL, SERVICE_SET_NAMESPACE_LABEL, SERVICE_SET_UID_LABEL,
        };
        json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
               "metadata": {"name": name, "namespace": "team", "labels": {
                   MANAGED_LABEL: "true", SERVICE_SET_NAMESPACE_LABEL: "team", SERVICE_SET_LABEL: "prod",
                   SERVICE_SET_UID_LABEL: uid}}})
    }

    fn region(name: &str, secret: &str) -> Route {
        Route::Region(RegionAccess {
            name: name.into(),
            secret: NamespacedName::new("kcm-system", secret),
            key: "value".into(),
        })
    }

    fn regions(version: &'static std::sync::atomic::AtomicU32) -> Regions {
        let (management, _) = mock_api::client(move |line| {
            let version = version.load(std::sync::atomic::Ordering::SeqCst).to_string();
            match line {
                "GET /api/v1/namespaces/kcm-system/secrets/eu-kc" => {
                    Some((200, secret("eu-kc", &version, "https://127.0.0.1:1")))
                }
                "GET /api/v1/namespaces/kcm-system/secrets/us-kc" => {
                    Some((200, secret("us-kc", "1", "https://127.0.0.1:2")))
                }
                "PATCH /apis/helm.toolkit.fluxcd.io/v2/namespaces/team/helmreleases/prod.a" => {
                    Some((200, child("prod.a", "uid-1")))
                }
                "PATCH /apis/helm.toolkit.fluxcd.io/v2/namespaces/team/helmreleases/prod.b" => {
                    Some((200, child("prod.b", "uid-0")))
                }
                _ => None,
            }
        });
        let (wake, _) = futures::channel::mpsc::unbounded();
        let children = Arc::new(ChildKinds::new(&management, wake.clone(), Arc::default()));
        let allowed = [super::super::addresses::Class::Loopback].into_iter().collect();
        Regions::new(children, Clusters::new(management, 8, Reads::Watches, allowed), wake)
    }

    #[tokio::test]
    async fn one_client_and_one_cache_per_region_made_again_when_its_secret_changes() {
        static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let regions = regions(&VERSION);
        let management = regions.home(&Route::Management).await.unwrap();
        assert!(management.region.is_none() && regions.held() == 0, "the management cluster is no region");
        let eu = regions.home(&region("eu", "eu-kc")).await.unwrap();
        let again = regions.home(&region("eu", "eu-kc")).await.unwrap();
        assert!(Arc::ptr_eq(&eu.children, &again.children), "one cache per region");
        assert!(!Arc::ptr_eq(&eu.children, &management.children));
        regions.home(&region("us", "us-kc")).await.unwrap();
        assert_eq!(regions.held(), 2);
        VERSION.store(2, std::sync::atomic::Ordering::SeqCst);
        let changed = regions.home(&region("eu", "eu-kc")).await.unwrap();
        assert!(!Arc::ptr_eq(&eu.children, &changed.children), "a changed Secret: a new client and caches");
        assert_eq!(regions.held(), 2, "replaced, not added");
        let missing = regions.home(&region("ap", "ap-kc")).await.err().unwrap();
        assert_eq!(missing, "Region ap: Secret kcm-system/ap-kc not found");
    }

    #[tokio::test(start_paused = true)]
    async fn a_region_no_service_set_uses_is_dropped() {
        static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let regions = regions(&VERSION);
        regions.home(&region("eu", "eu-kc")).await.unwrap();
        tokio::time::advance(Reads::Watches.idle() / 2).await;
        regions.home(&region("us", "us-kc")).await.unwrap();
        tokio::time::advance(Reads::Watches.idle() / 2 + Duration::from_secs(1)).await;
        regions.home(&Route::Management).await.unwrap();
        assert_eq!(regions.held(), 1, "eu went unused for its idle time; us did not");
    }

    #[tokio::test]
    async fn what_an_earlier_route_left_elsewhere_is_found_only_for_the_service_sets_own_uid() {
        static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let regions = regions(&VERSION);
        let management = regions.home(&Route::Management).await.unwrap();
        let kind = ksm_plugin_sdk::contract::ObjectKind {
            group: "helm.toolkit.fluxcd.io".into(),
            version: "v2".into(),
            kind: "HelmRelease".into(),
            plural: "helmreleases".into(),
            namespaced: true,
        };
        management.children.ensure([&kind]);
        for name in ["prod.a", "prod.b"] {
            management.children.apply(&child(name, "")).await.unwrap(); // the answer is what is cached
        }
        let service_set: ServiceSet = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "prod", "namespace": "team", "uid": "uid-1"},
            "spec": {"provider": {"name": "ksm-flux"}},
        }))
        .unwrap();
        let eu = regions.home(&region("eu", "eu-kc")).await.unwrap();
        let left = regions.elsewhere(&eu, &service_set);
        let names: Vec<Vec<String>> = left.iter().map(|(_, c)| c.iter().map(|c| c.name.clone()).collect()).collect();
        assert_eq!(names, [["prod.a"]], "prod.b belongs to an earlier ServiceSet of that name");
        assert!(regions.elsewhere(&management, &service_set).is_empty(), "nothing on the region");
    }
}
