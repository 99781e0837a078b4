//! Where a ServiceSet's children live: the management cluster, or a regional cluster (kcm 1.12,
//! see [`crate::plan::route`]). Per region one client and one set of child watches
//! ([`ChildKinds`]), made on first use, made again when the region's kubeconfig Secret changes,
//! and dropped, their watches stopped, once no ServiceSet used the region for
//! [`Reads::Watches`]'s idle time. A region's watches report to a health of their own: a region
//! that cannot be reached fails its ServiceSets, not the host's readiness.

use super::clusters::{Cluster, ClusterError, Clusters, Reads};
use crate::controller::plugin_kinds::child_kinds::{ChildKinds, Live, Waker};
use crate::controller::plumbing::slots::{Slot, Slots};
use crate::controller::plumbing::watches::WatchFailures;
use crate::k0rdent::{ChildRef, NamespacedName, ServiceSet};
use crate::plan::route::{RegionAccess, Route};
use crate::serving::ServingPlugin;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How long a reconcile waits for a region's caches to list the plugin's kinds, and for a
/// region to list a ServiceSet's children before they are deleted.
const LISTED_WITHIN: Duration = Duration::from_secs(15);

/// Why a region does not serve a ServiceSet's round now, naming it.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// Its client cannot be made.
    #[error("Region {region}: {source}")]
    Unreachable {
        /// The Region.
        region: String,
        /// Why.
        source: ClusterError,
    },
    /// Its caches did not list within [`LISTED_WITHIN`].
    #[error("Region {region}: its objects were not listed within {}s", LISTED_WITHIN.as_secs())]
    NotListed {
        /// The Region (`the management cluster` when it is that).
        region: String,
    },
    /// Its objects could not be listed.
    #[error("Region {region}: listing its objects: {source}")]
    List {
        /// The Region (`the management cluster` when it is that).
        region: String,
        /// Why.
        source: kube::Error,
    },
    /// A child could not be deleted.
    #[error("Region {region}: deleting {child}: {source}")]
    Delete {
        /// The Region (`the management cluster` when it is that).
        region: String,
        /// The child.
        child: ChildRef,
        /// Why.
        source: Box<kube::Error>,
    },
}

/// A region whose reconcile slots are all taken (see [`Homes::admit`]).
#[derive(Debug, thiserror::Error)]
#[error("Region {region}: {per_region} reconciles of its ServiceSets are running already")]
pub struct Busy {
    /// The Region.
    pub region: String,
    /// How many reconciles one region runs at once.
    pub per_region: usize,
}

/// The management cluster's children and the regions in use.
pub struct Homes {
    management: Arc<ChildKinds>,
    clusters: Clusters,
    wake: Waker,
    held: Mutex<HashMap<String, Held>>,
    /// The reconciles each region runs now (see [`Homes::admit`]).
    slots: Slots,
}

struct Held {
    cluster: Arc<Cluster>,
    children: Arc<ChildKinds>,
    used: Instant,
}

/// The cluster one ServiceSet's children live on, and their cache there.
#[derive(Clone)]
pub struct Home {
    /// The region and how it is reached; `None` for the management cluster.
    pub region: Option<RegionAccess>,
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// Its children: cache, apply, delete.
    pub children: Arc<ChildKinds>,
}

impl Home {
    /// Waits until the caches of the kinds `serving` creates and reads on this cluster hold a
    /// complete list; a region that does not list them within [`LISTED_WITHIN`] is reported as
    /// unreachable.
    pub async fn listed(&self, serving: &ServingPlugin) -> Result<(), RegionError> {
        let listed = self.children.listed_with_reads(serving.kinds(), serving.reads());
        let Some(region) = &self.region else {
            listed.await;
            return Ok(());
        };
        tokio::time::timeout(LISTED_WITHIN, listed)
            .await
            .map_err(|_| RegionError::NotListed { region: region.name.clone() })
    }

    /// Deletes `service_set`'s children on this cluster, found by listing it (within
    /// [`LISTED_WITHIN`]) for every kind `kinds` creates, not from a cache, which may have been
    /// made a moment ago; returns those still there (their deletion may take a while: Flux
    /// uninstalls first), or why the cluster could not be listed or written.
    pub async fn clear(&self, service_set: &ServiceSet, kinds: &ChildKinds) -> Result<Vec<ChildRef>, RegionError> {
        let name = self.region.as_ref().map_or("the management cluster", |r| r.name.as_str());
        let region = || name.to_string();
        self.children.ensure_like(kinds);
        let live = tokio::time::timeout(LISTED_WITHIN, self.children.live(service_set))
            .await
            .map_err(|_| RegionError::NotListed { region: region() })?
            .map_err(|source| RegionError::List { region: region(), source })?;
        for Live { child, .. } in live.iter().filter(|l| !l.deleting) {
            let deleted = self.children.delete(child).await;
            deleted.map_err(|e| RegionError::Delete { region: region(), child: child.clone(), source: Box::new(e) })?;
            tracing::info!("deleted {child} on Region {name}");
        }
        Ok(live.into_iter().map(|l| l.child).collect())
    }
}

impl Homes {
    /// No region yet; `management` holds the management cluster's children, `clusters` makes
    /// the regions' clients, changes to regional children wake their ServiceSet through `wake`;
    /// one region runs at most `per_region` reconciles at once.
    pub fn new(management: Arc<ChildKinds>, clusters: Clusters, wake: Waker, per_region: usize) -> Self {
        Self { management, clusters, wake, held: Mutex::default(), slots: Slots::new(per_region) }
    }

    /// A slot for one reconcile whose children live on `route`: at most `per_region` at once per
    /// region, so that a region that hangs costs only its own ServiceSets' reconciles, never the
    /// others' workers. `Ok(None)` for the management cluster; `Err` naming the region when its
    /// slots are taken (the caller retries shortly, without holding a worker).
    pub fn admit(&self, route: &Route) -> Result<Option<Slot>, Busy> {
        let Route::Region(access) = route else { return Ok(None) };
        let slot = self.slots.take(&access.name);
        slot.map(Some).ok_or_else(|| Busy { region: access.name.clone(), per_region: self.slots.per_key() })
    }

    /// The home of a ServiceSet routed `route`, or why its region cannot be reached.
    pub async fn home(&self, route: &Route) -> Result<Home, RegionError> {
        let access = match route {
            Route::Management => {
                self.sweep();
                return Ok(self.management());
            }
            Route::Region(access) => access,
        };
        let cluster = self
            .clusters
            .of(&self.clusters.here(), &access.secret, &access.key)
            .await
            .map_err(|source| RegionError::Unreachable { region: access.name.clone(), source })?;
        self.sweep();
        let mut held = self.lock();
        let now = Instant::now();
        let entry = held.entry(access.name.clone()).or_insert_with(|| self.hold(&cluster, now));
        if !Arc::ptr_eq(&entry.cluster, &cluster) {
            // The kubeconfig Secret changed: new client, new watches.
            *entry = self.hold(&cluster, now);
        }
        entry.used = now;
        Ok(Home { region: Some(access.clone()), cluster, children: entry.children.clone() })
    }

    /// The management cluster: its children's caches always hold every child of every kind the
    /// loaded plugins create.
    pub fn management(&self) -> Home {
        Home { region: None, cluster: self.clusters.here(), children: self.management.clone() }
    }

    /// Whether service `service` of ServiceSet `namespace/name` has a cached child on any
    /// cluster (claims go to a service whose objects exist).
    pub fn any(&self, namespace: &str, name: &str, service: &str) -> bool {
        self.management.any(namespace, name, service)
            || self.lock().values().any(|held| held.children.any(namespace, name, service))
    }

    /// The regions held now whose caches hold a child of ServiceSet `owner`: what the host knows
    /// of its children however the record on it was edited.
    pub fn holding(&self, owner: &NamespacedName) -> Vec<String> {
        self.lock().iter().filter(|(_, held)| held.children.holds(owner)).map(|(name, _)| name.clone()).collect()
    }

    /// How many regions are held now (each one client and its watches).
    pub fn held(&self) -> usize {
        self.lock().len()
    }

    /// How many watches the regions held now run (one per kind on each).
    pub fn watches(&self) -> usize {
        self.lock().values().map(|held| held.children.watched()).sum()
    }

    fn hold(&self, cluster: &Arc<Cluster>, now: Instant) -> Held {
        // Its own health: a region's failing watches are logged, never the host's readiness.
        let children = ChildKinds::new(cluster.client(), self.wake.clone(), Arc::new(WatchFailures::default()));
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
    use super::*;
    use crate::controller::mock_api;
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

    fn homes(version: &'static std::sync::atomic::AtomicU32) -> Homes {
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
        let allowed = [crate::controller::remote::addresses::Class::Loopback].into_iter().collect();
        Homes::new(children, Clusters::new(management, 8, Reads::Watches, allowed), wake, 2)
    }

    #[tokio::test(start_paused = true)]
    async fn one_client_and_one_cache_per_region_made_again_when_its_secret_changes() {
        static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let homes = homes(&VERSION);
        let management = homes.home(&Route::Management).await.unwrap();
        assert!(management.region.is_none() && homes.held() == 0, "the management cluster is no region");
        let eu = homes.home(&region("eu", "eu-kc")).await.unwrap();
        let again = homes.home(&region("eu", "eu-kc")).await.unwrap();
        assert!(Arc::ptr_eq(&eu.children, &again.children), "one cache per region");
        assert!(!Arc::ptr_eq(&eu.children, &management.children));
        homes.home(&region("us", "us-kc")).await.unwrap();
        assert_eq!(homes.held(), 2);
        VERSION.store(2, std::sync::atomic::Ordering::SeqCst);
        let unread = homes.home(&region("eu", "eu-kc")).await.unwrap();
        assert!(Arc::ptr_eq(&eu.children, &unread.children), "the Secret is not read again at once");
        tokio::time::advance(crate::controller::remote::clusters::SECRET_FRESH).await;
        let changed = homes.home(&region("eu", "eu-kc")).await.unwrap();
        assert!(!Arc::ptr_eq(&eu.children, &changed.children), "a changed Secret: a new client and caches");
        assert_eq!(homes.held(), 2, "replaced, not added");
        let missing = homes.home(&region("ap", "ap-kc")).await.err().unwrap().to_string();
        assert_eq!(missing, "Region ap: Secret kcm-system/ap-kc not found");
    }

    #[tokio::test(start_paused = true)]
    async fn a_region_no_service_set_uses_is_dropped() {
        static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let homes = homes(&VERSION);
        homes.home(&region("eu", "eu-kc")).await.unwrap();
        tokio::time::advance(Reads::Watches.idle() / 2).await;
        homes.home(&region("us", "us-kc")).await.unwrap();
        tokio::time::advance(Reads::Watches.idle() / 2 + Duration::from_secs(1)).await;
        homes.home(&Route::Management).await.unwrap();
        assert_eq!(homes.held(), 1, "eu went unused for its idle time; us did not");
    }

    #[tokio::test]
    async fn a_region_takes_at_most_its_share_of_reconciles() {
        static VERSION: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let homes = homes(&VERSION);
        assert!(homes.admit(&Route::Management).unwrap().is_none(), "the management cluster takes no slot");
        let (first, second) = (homes.admit(&region("eu", "eu-kc")).unwrap(), homes.admit(&region("eu", "eu-kc")));
        assert!(first.is_some() && second.is_ok());
        let busy = homes.admit(&region("eu", "eu-kc")).unwrap_err().to_string();
        assert_eq!(busy, "Region eu: 2 reconciles of its ServiceSets are running already");
        assert!(homes.admit(&region("us", "us-kc")).is_ok(), "another region has slots of its own");
        drop(first);
        assert!(homes.admit(&region("eu", "eu-kc")).is_ok(), "a finished reconcile frees its slot");
    }

    /// A region's children are found by listing it for every kind the plugins create, not from
    /// its cache (made a moment ago, after a restart or a rotated Secret): those not being
    /// deleted are deleted, and all are returned until they are gone. A kind the region does
    /// not serve has none.
    #[tokio::test]
    async fn clearing_a_region_lists_it_and_deletes_what_is_not_going_yet() {
        let listed = json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [
            {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
             "metadata": {"name": "prod.a", "namespace": "team"}},
            {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
             "metadata": {"name": "prod.b", "namespace": "team", "deletionTimestamp": "2026-11-27T10:00:00Z"}}]});
        let (region_client, asked) = mock_api::client(move |line| match line {
            "GET /apis/helm.toolkit.fluxcd.io/v2/helmreleases" => Some((200, listed.clone())),
            "DELETE /apis/helm.toolkit.fluxcd.io/v2/namespaces/team/helmreleases/prod.a" => Some((200, json!({}))),
            _ => None, // Kustomizations: not served there
        });
        let (management_client, _) = mock_api::client(|_| None);
        let (wake, _) = futures::channel::mpsc::unbounded();
        let management = ChildKinds::new(&management_client, wake.clone(), Arc::default());
        let kind = |group: &str, version: &str, kind: &str, plural: &str| ksm_plugin_sdk::contract::ObjectKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
        };
        let helm = kind("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases");
        let kustomize = kind("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations");
        management.ensure([&helm, &kustomize]);
        let home = Home {
            region: match region("eu", "eu-kc") {
                Route::Region(access) => Some(access),
                Route::Management => unreachable!(),
            },
            cluster: Clusters::new(management_client.clone(), 1, Reads::Watches, Default::default()).here(),
            children: Arc::new(ChildKinds::new(&region_client, wake, Arc::default())),
        };
        let service_set: ServiceSet = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "prod", "namespace": "team", "uid": "uid-1"},
            "spec": {"provider": {"name": "ksm-flux"}},
        }))
        .unwrap();
        let left = home.clear(&service_set, &management).await.unwrap();
        let names: Vec<&str> = left.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["prod.a", "prod.b"], "both are there until they are gone");
        let asked = asked.lock().unwrap().clone();
        let deletes: Vec<&String> = asked.iter().filter(|l| l.starts_with("DELETE")).collect();
        assert_eq!(deletes.len(), 1, "prod.b is being deleted already: {asked:#?}");
        assert!(deletes[0].contains("/helmreleases/prod.a"), "{deletes:?}");
        let selector = "labelSelector=ksm.k0rdent.mirantis.com%2Fserviceset-uid%3Duid-1";
        assert!(
            asked
                .iter()
                .any(|l| l.starts_with("GET /apis/helm.toolkit.fluxcd.io/v2/helmreleases?") && l.contains(selector)),
            "{asked:#?}"
        );
    }
}
