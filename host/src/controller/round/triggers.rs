//! What wakes a ServiceSet's reconcile: a change of its own that matters, of its provider, of
//! a template it uses, of health rules that may apply to it, or of what routes its children (its
//! ClusterDeployment, their Credential, its Region).

use super::context::{Caches, TopologyCaches};
use crate::controller::caches::service_set_cache::{CachedServiceSet, WatchedServiceSet};
use crate::controller::caches::service_set_store::ServiceSets;
use crate::controller::plumbing::sweeps::{self, Sweeps};
use crate::k0rdent::{NamespacedName, ServiceTemplate, StateManagementProvider};
use k8s_openapi::api::core::v1::ConfigMap;
use ksm_plugin_sdk::sources::{SourceRef, sources_of};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use std::collections::HashMap;

/// Of the ServiceSets' own watch events, those that wake one: an object added, or changed in
/// what calls for a reconcile: its spec (generation), labels (the SMP selector), annotations,
/// finalizers or deletion, i.e. its [fingerprint](CachedServiceSet::fingerprint). Status-only
/// changes, i.e. the host's own status writes, do not: each used to cost a full round of plugin
/// calls that decided nothing new (the cache still holds the latest status for the next round).
/// A list's objects wake none: a complete list starts a pass over all of them instead, a few
/// at a time ([`Sweeps`]).
#[derive(Default)]
pub struct OwnChanges {
    /// Each ServiceSet's last fingerprint, by [`sweeps::key`]: 16 bytes each.
    fingerprints: HashMap<u64, u64>,
}

impl OwnChanges {
    /// The ServiceSet `event` wakes, if any (a failed watch wakes none: it is reported, and
    /// retried, by the cache).
    pub fn wakes(
        &mut self,
        event: Result<watcher::Event<WatchedServiceSet>, watcher::Error>,
        sweeps: &Sweeps,
    ) -> Option<NamespacedName> {
        let key = |object: &CachedServiceSet| sweeps::key(object.namespace(), object.name());
        match event {
            Ok(watcher::Event::Apply(object)) => {
                let object = object.cached();
                let changed = self.fingerprints.insert(key(object), object.fingerprint()) != Some(object.fingerprint());
                changed.then(|| object.key())
            }
            Ok(watcher::Event::Delete(object)) => {
                self.fingerprints.remove(&key(object.cached()));
                None // gone from the cache: nothing to run (its claims go with it: the arbiter)
            }
            Ok(watcher::Event::Init) => {
                self.fingerprints = HashMap::new(); // forget the deleted while the watch was away
                None
            }
            Ok(watcher::Event::InitApply(object)) => {
                self.fingerprints.insert(key(object.cached()), object.cached().fingerprint());
                None
            }
            Ok(watcher::Event::InitDone) => {
                sweeps.relisted();
                None
            }
            Err(_) => None,
        }
    }
}

/// The ServiceSets whose `spec.provider.name` is `smp`.
pub fn users_of_provider(service_sets: &ServiceSets, smp: &StateManagementProvider) -> Vec<NamespacedName> {
    let name = smp.name_any();
    service_sets.keys_where(|ss| ss.provider() == name)
}

/// The ServiceSets in the template's namespace that use it.
pub fn users_of_template(service_sets: &ServiceSets, template: &ServiceTemplate) -> Vec<NamespacedName> {
    let (name, namespace) = (template.name_any(), template.namespace().unwrap_or_default());
    service_sets.keys_where(|ss| ss.namespace() == namespace && ss.uses_template(&name))
}

/// The ServiceSets a health-rule ConfigMap may apply to: every one for a ConfigMap in the
/// system namespace, else those in its namespace (which rules apply is decided in the round).
pub fn users_of_health_rules(
    service_sets: &ServiceSets,
    rules: &ConfigMap,
    system_namespace: &str,
) -> Vec<NamespacedName> {
    let namespace = rules.namespace().unwrap_or_default();
    let everywhere = namespace == system_namespace;
    service_sets.keys_where(|ss| everywhere || ss.namespace() == namespace)
}

/// The ServiceSets using a template that refers to the Flux source `source` (directly, or
/// through the HelmChart it makes; see [`ksm_plugin_sdk::sources`]): what plugins are handed of
/// it changed.
pub fn users_of_source(caches: &Caches, source: &DynamicObject) -> Vec<NamespacedName> {
    let (kind, namespace) = (source.types.as_ref().map(|t| t.kind.as_str()), source.namespace());
    let changed = SourceRef {
        kind: kind.unwrap_or_default().to_string(),
        namespace: namespace.unwrap_or_default(),
        name: source.name_any(),
    };
    let refers = |template: &ServiceTemplate| {
        let Ok(template) = serde_json::to_value(template) else { return false };
        let found = sources_of([&template], |r| caches.sources.get(r));
        found.iter().any(|s| {
            (s.kind.as_str(), s.namespace.as_str(), s.name.as_str())
                == (&*changed.kind, &*changed.namespace, &*changed.name)
        })
    };
    let templates = caches.templates.state();
    templates.iter().filter(|t| refers(t)).flat_map(|t| users_of_template(&caches.service_sets, t)).collect()
}

/// One of the objects a ServiceSet's route goes through.
pub enum Through {
    /// A ClusterDeployment.
    ClusterDeployment(NamespacedName),
    /// A Credential.
    Credential(NamespacedName),
    /// A Region.
    Region(String),
}

/// The ServiceSets whose route goes (or, `changed` being new, may now go) through `changed`.
pub fn routed_through(service_sets: &ServiceSets, topology: &TopologyCaches, changed: &Through) -> Vec<NamespacedName> {
    let through = |service_set: &CachedServiceSet| {
        let namespace = service_set.namespace();
        let cd = NamespacedName::new(namespace, service_set.cluster());
        if let Through::ClusterDeployment(changed) = changed {
            return *changed == cd;
        }
        let Some(cd) = topology.cluster_deployments.get(&ObjectRef::new(&cd.name).within(&cd.namespace)) else {
            return false;
        };
        let credential = NamespacedName::new(namespace, &cd.spec.credential);
        match changed {
            Through::Credential(changed) => *changed == credential,
            Through::Region(changed) => topology
                .credentials
                .get(&ObjectRef::new(&credential.name).within(&credential.namespace))
                .is_some_and(|c| c.spec.region == *changed),
            Through::ClusterDeployment(_) => false,
        }
    };
    service_sets.keys_where(|ss| !ss.cluster().is_empty() && through(ss))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn service_set_json(patch: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
        let mut object = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "a", "namespace": "team", "generation": 1, "labels": {"x": "1"}},
            "spec": {"provider": {"name": "ksm-flux"}, "services": []},
            "status": {"deployed": false},
        });
        patch(&mut object);
        object
    }

    fn service_set(patch: impl FnOnce(&mut serde_json::Value)) -> WatchedServiceSet {
        serde_json::from_value(service_set_json(patch)).unwrap()
    }

    fn service_sets(objects: Vec<serde_json::Value>) -> ServiceSets {
        objects.into_iter().map(|o| CachedServiceSet::pack(serde_json::from_value(o).unwrap()).unwrap()).collect()
    }

    #[test]
    fn only_changes_that_matter_wake_a_service_set_and_a_list_wakes_none() {
        let sweeps = Sweeps::new(1);
        let mut own = OwnChanges::default();
        let mut wakes = |event: watcher::Event<WatchedServiceSet>| {
            let fingerprint = match &event {
                watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
                    o.cached().fingerprint()
                }
                _ => 0,
            };
            own.wakes(Ok(event), &sweeps).map(|woken| (woken.name, fingerprint))
        };
        let base = service_set(|_| {});
        assert_eq!(wakes(watcher::Event::Init), None);
        assert_eq!(wakes(watcher::Event::InitApply(base.clone())), None, "a list's objects go in a pass");
        assert_eq!(wakes(watcher::Event::InitDone), None);
        let status = service_set(|o| o["status"]["deployed"] = json!(true));
        assert_eq!(wakes(watcher::Event::Apply(status)), None, "the host's own status write");
        for (what, change) in [
            ("spec", json!({"metadata": {"generation": 2}})),
            ("labels", json!({"metadata": {"labels": {"x": "2"}}})),
            ("annotations", json!({"metadata": {"annotations": {"note": "retry"}}})),
            ("finalizers", json!({"metadata": {"finalizers": ["ksm.k0rdent.mirantis.com/finalizer"]}})),
            ("deletion", json!({"metadata": {"deletionTimestamp": "2026-11-22T10:00:00Z"}})),
        ] {
            let changed = service_set(|o| {
                for (key, value) in change["metadata"].as_object().unwrap() {
                    o["metadata"][key] = value.clone();
                }
            });
            let fingerprint = changed.cached().fingerprint();
            assert_eq!(wakes(watcher::Event::Apply(changed.clone())), Some(("a".into(), fingerprint)), "{what}");
            assert_eq!(wakes(watcher::Event::Apply(changed)), None, "{what} again: no change");
            let back = Some(("a".into(), base.cached().fingerprint()));
            assert_eq!(wakes(watcher::Event::Apply(base.clone())), back, "back");
        }
        let woken = Some(("a".into(), base.cached().fingerprint()));
        assert_eq!(wakes(watcher::Event::Delete(base.clone())), None, "gone from the cache");
        assert_eq!(wakes(watcher::Event::Apply(base.clone())), woken, "new again");
        assert_eq!(wakes(watcher::Event::Init), None);
        assert_eq!(wakes(watcher::Event::InitDone), None, "a re-list forgets what it does not hold");
        assert_eq!(wakes(watcher::Event::Apply(base.clone())), woken);
    }

    #[tokio::test(start_paused = true)]
    async fn a_complete_list_starts_a_pass_over_all() {
        let sweeps = Arc::new(Sweeps::new(4));
        let store = service_sets(vec![service_set_json(|_| {})]);
        let mut passes = Box::pin(sweeps.clone().passes(store, std::time::Duration::from_secs(600)));
        let mut own = OwnChanges::default();
        let next = tokio::time::timeout(std::time::Duration::from_secs(1), futures::StreamExt::next(&mut passes));
        assert!(next.await.is_err(), "no pass before the list is complete");
        assert!(own.wakes(Ok(watcher::Event::InitDone), &sweeps).is_none());
        let next = tokio::time::timeout(std::time::Duration::from_secs(1), futures::StreamExt::next(&mut passes));
        assert_eq!(next.await.unwrap().unwrap().name, "a");
    }

    fn store<K>(objects: Vec<serde_json::Value>) -> kube::runtime::reflector::Store<K>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned,
    {
        let (store, mut writer) = kube::runtime::reflector::store();
        for object in objects {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(serde_json::from_value(object).unwrap()));
        }
        store
    }

    #[test]
    fn a_routing_change_wakes_the_service_sets_routed_through_it() {
        let object = |kind: &str, name: &str, spec: serde_json::Value| {
            json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": kind,
                   "metadata": {"name": name, "namespace": "team"}, "spec": spec})
        };
        let service_sets = service_sets(vec![
            service_set_json(|o| o["spec"]["cluster"] = json!("web")),
            service_set_json(|o| {
                o["metadata"]["name"] = json!("b");
                o["spec"]["cluster"] = json!("db");
            }),
            service_set_json(|o| o["metadata"]["name"] = json!("self")),
        ]);
        let topology = TopologyCaches {
            cluster_deployments: store(vec![
                object("ClusterDeployment", "web", json!({"credential": "eu"})),
                object("ClusterDeployment", "db", json!({"credential": "local"})),
            ]),
            credentials: store(vec![
                object("Credential", "eu", json!({"region": "eu-1"})),
                object("Credential", "local", json!({})),
            ]),
            regions: store(vec![]),
        };
        let woken = |changed: Through| {
            let mut names: Vec<String> =
                routed_through(&service_sets, &topology, &changed).into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        assert_eq!(woken(Through::ClusterDeployment(NamespacedName::new("team", "db"))), ["b"]);
        assert_eq!(woken(Through::Credential(NamespacedName::new("team", "eu"))), ["a"]);
        assert_eq!(woken(Through::Credential(NamespacedName::new("other", "eu"))), Vec::<String>::new());
        assert_eq!(woken(Through::Region("eu-1".into())), ["a"]);
        assert_eq!(woken(Through::Region("us-1".into())), Vec::<String>::new());
    }
}
