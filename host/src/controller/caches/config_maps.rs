//! Watches of the ConfigMaps AdapterPlugins load their components from: one watch per named
//! ConfigMap (a field selector on its name, in its namespace), started when an AdapterPlugin
//! names it and stopped when none does, so the host never holds every ConfigMap in the
//! cluster. A change wakes the AdapterPlugins reading it.

use crate::adapter_plugin::AdapterPlugin;
use crate::controller::plumbing::watch_retry::backed_off;
use crate::k0rdent::NamespacedName;
use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use tokio::task::AbortHandle;

/// The watches of the ConfigMaps named by AdapterPlugins.
pub struct ConfigMapWatches {
    client: Client,
    plugins: Store<AdapterPlugin>,
    /// Wakes an AdapterPlugin's reconcile.
    wake: UnboundedSender<ObjectRef<AdapterPlugin>>,
    running: Mutex<HashMap<NamespacedName, AbortHandle>>,
}

impl ConfigMapWatches {
    /// No watches yet; they follow `plugins` at each [`sync`](Self::sync).
    pub fn new(client: Client, plugins: Store<AdapterPlugin>, wake: UnboundedSender<ObjectRef<AdapterPlugin>>) -> Self {
        Self { client, plugins, wake, running: Mutex::default() }
    }

    /// Starts a watch for every ConfigMap an AdapterPlugin names and stops those none names.
    pub fn sync(&self) {
        let named: BTreeSet<NamespacedName> = self.plugins.state().iter().filter_map(|p| named(p)).collect();
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|config_map, watch| {
            let keep = named.contains(config_map);
            if !keep {
                watch.abort();
            }
            keep
        });
        for config_map in named {
            if let std::collections::hash_map::Entry::Vacant(entry) = running.entry(config_map) {
                let watch = self.watch(entry.key());
                entry.insert(watch);
            }
        }
    }

    fn watch(&self, watched: &NamespacedName) -> AbortHandle {
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), &watched.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", watched.name));
        let (plugins, wake, watched) = (self.plugins.clone(), self.wake.clone(), watched.clone());
        let events = backed_off(watcher(api, config)).touched_objects();
        tokio::spawn(events.for_each(move |changed| {
            if changed.is_ok() {
                for plugin in plugins.state().iter().filter(|p| named(p).as_ref() == Some(&watched)) {
                    let _ = wake.unbounded_send(ObjectRef::from_obj(&**plugin));
                }
            }
            futures::future::ready(())
        }))
        .abort_handle()
    }
}

/// The ConfigMap `plugin` loads from, if any.
fn named(plugin: &AdapterPlugin) -> Option<NamespacedName> {
    plugin.spec.source.config_map.as_ref().map(|c| NamespacedName::new(c.namespace.clone(), c.name.clone()))
}
