//! The ConfigMaps AdapterPlugins load from (`controller::caches::config_maps`) against the
//! simulated API server (or envtest, or a real cluster): only a named ConfigMap is watched, its
//! changes wake the AdapterPlugins reading it, and its watch stops when no AdapterPlugin names it.

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, unbounded};
use k8s_openapi::api::core::v1::ConfigMap;
use ksm_adapter::adapter_plugin::AdapterPlugin;
use ksm_adapter::controller::caches::config_maps::ConfigMapWatches;
use ksm_test_harness::Env;
use ksm_test_harness::env::kubeconfig_client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use serde_json::json;
use std::time::Duration;

fn plugin(namespace: &str, config_map: &str) -> AdapterPlugin {
    serde_json::from_value(json!({
        "apiVersion": "ksm.k0rdent.mirantis.com/v1alpha1", "kind": "AdapterPlugin",
        "metadata": {"name": "from-config-map"},
        "spec": {"source": {"configMap": {"namespace": namespace, "name": config_map, "key": "plugin.wasm"}},
                 "providers": ["p"]},
    }))
    .unwrap()
}

/// The next wake within `wait`, if any.
async fn woken(wakes: &mut UnboundedReceiver<ObjectRef<AdapterPlugin>>, wait: Duration) -> Option<String> {
    tokio::time::timeout(wait, wakes.next()).await.ok().flatten().map(|r| r.name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_named_config_maps_are_watched_and_their_changes_wake_their_readers() {
    let env = Env::start("config-maps").await;
    let client = kubeconfig_client(env.kubeconfig()).await.expect("a kube client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), env.namespace());
    for name in ["named", "other"] {
        let config_map = serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "1"}})).unwrap();
        api.create(&PostParams::default(), &config_map).await.expect("creating a ConfigMap");
    }
    let (store, mut writer) = reflector::store();
    let reader = plugin(env.namespace(), "named");
    writer.apply_watcher_event(&watcher::Event::Apply(reader.clone()));
    let (wake, mut wakes) = unbounded();
    let watches = ConfigMapWatches::new(client, store, wake);
    watches.sync();
    // The watch's initial list wakes the reader once.
    assert_eq!(woken(&mut wakes, Duration::from_secs(10)).await.as_deref(), Some("from-config-map"));

    let change = |v: &str| Patch::Merge(json!({"data": {"v": v}}));
    api.patch("other", &PatchParams::default(), &change("2")).await.unwrap();
    api.patch("named", &PatchParams::default(), &change("2")).await.unwrap();
    assert_eq!(woken(&mut wakes, Duration::from_secs(10)).await.as_deref(), Some("from-config-map"));
    assert_eq!(woken(&mut wakes, Duration::from_millis(500)).await, None, "a change of another ConfigMap woke it");

    if let Some(server) = env.server() {
        let wide: Vec<_> =
            server.accesses().into_keys().filter(|a| a.resource == "configmaps" && a.namespace.is_none()).collect();
        assert!(wide.is_empty(), "ConfigMaps read across the cluster: {wide:?}");
    }

    // No AdapterPlugin names it any more: its watch stops.
    writer.apply_watcher_event(&watcher::Event::Delete(reader));
    watches.sync();
    api.patch("named", &PatchParams::default(), &change("3")).await.unwrap();
    assert_eq!(woken(&mut wakes, Duration::from_millis(500)).await, None, "a stopped watch woke it");
}
