//! What every reconcile shares: the client, the plugin, the caches and the settings.

use super::Settings;
use super::children::ChildKinds;
use super::provider::ProviderCache;
use crate::k0rdent::{ServiceSet, ServiceTemplate, StateManagementProvider};
use crate::plugin::Plugin;
use crate::smp::RuleCache;
use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Shared state of the controller.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The translation plugin.
    pub plugin: Arc<dyn Plugin>,
    /// How the controller runs.
    pub settings: Settings,
    /// Every ServiceSet.
    pub service_sets: Store<ServiceSet>,
    /// Every StateManagementProvider.
    pub providers: Store<StateManagementProvider>,
    /// Every ServiceTemplate.
    pub templates: Store<ServiceTemplate>,
    /// The plugin's kinds: cached children, apply and delete.
    pub children: ChildKinds,
    /// Compiled CEL readiness rules.
    pub rules: RuleCache,
    /// What the host found when it looked at SMPs itself (discovery, RBAC, diagnoses).
    pub provider_cache: ProviderCache,
    /// Consecutive failed reconciles per ServiceSet, for the retry backoff.
    pub failures: Mutex<HashMap<ObjectRef<ServiceSet>, u32>>,
    /// Turns true once every cache holds a complete list.
    caches_ready: watch::Receiver<bool>,
}

impl Context {
    /// The context over the given caches (spawns the task that reports them ready).
    pub fn new(
        client: Client,
        plugin: Arc<dyn Plugin>,
        settings: Settings,
        service_sets: Store<ServiceSet>,
        providers: Store<StateManagementProvider>,
        templates: Store<ServiceTemplate>,
        children: ChildKinds,
    ) -> Self {
        let (ready, caches_ready) = watch::channel(false);
        let stores = (providers.clone(), templates.clone(), children.readiness());
        // A store's readiness wakes a single waiting task, so one task waits for each store
        // (the ServiceSet store is waited for by the controller itself before any reconcile)
        // and the reconciles wait on this channel.
        tokio::spawn(async move {
            let (providers, templates, children) = stores;
            let _ = providers.wait_until_ready().await;
            let _ = templates.wait_until_ready().await;
            children.await;
            let _ = ready.send(true);
        });
        Self {
            client,
            plugin,
            settings,
            service_sets,
            providers,
            templates,
            children,
            rules: RuleCache::new(),
            provider_cache: ProviderCache::default(),
            failures: Mutex::default(),
            caches_ready,
        }
    }

    /// Waits until every cache holds a complete list, so that a reconcile never mistakes a
    /// cache still loading for objects that do not exist.
    pub async fn caches_ready(&self) {
        let _ = self.caches_ready.clone().wait_for(|ready| *ready).await;
    }

    /// The ServiceTemplate `name` in `namespace`, as JSON.
    pub fn template(&self, namespace: &str, name: &str) -> Option<Value> {
        let template = self.templates.get(&ObjectRef::new(name).within(namespace))?;
        serde_json::to_value(&*template).ok()
    }
}
