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
}

impl Context {
    /// The context over the given caches.
    pub fn new(
        client: Client,
        plugin: Arc<dyn Plugin>,
        settings: Settings,
        service_sets: Store<ServiceSet>,
        providers: Store<StateManagementProvider>,
        templates: Store<ServiceTemplate>,
        children: ChildKinds,
    ) -> Self {
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
        }
    }

    /// Waits until every cache holds a complete list, so that a reconcile never mistakes a
    /// cache still loading for objects that do not exist.
    pub async fn caches_ready(&self) {
        let _ = self.service_sets.wait_until_ready().await;
        let _ = self.providers.wait_until_ready().await;
        let _ = self.templates.wait_until_ready().await;
        self.children.ready().await;
    }

    /// The ServiceTemplate `name` in `namespace`, as JSON.
    pub fn template(&self, namespace: &str, name: &str) -> Option<Value> {
        let template = self.templates.get(&ObjectRef::new(name).within(namespace))?;
        serde_json::to_value(&*template).ok()
    }
}
