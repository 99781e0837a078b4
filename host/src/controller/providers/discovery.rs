//! The live objects an SMP references, and their kinds, each kind discovered once.

use crate::k0rdent::ResourceReference;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// Reads referenced objects, remembering each kind's API resource.
pub struct Discovery {
    client: Client,
    /// `apiVersion/kind` → the API resource and whether it is namespaced.
    kinds: Mutex<HashMap<String, (ApiResource, bool)>>,
}

impl Discovery {
    /// Nothing discovered yet.
    pub fn new(client: Client) -> Self {
        Self { client, kinds: Mutex::default() }
    }

    /// The live object `reference` points at, as JSON; `None` when it or its kind does not
    /// exist.
    pub async fn fetch(&self, reference: &ResourceReference) -> kube::Result<Option<Value>> {
        let Some((resource, namespaced)) = self.kind(reference).await? else { return Ok(None) };
        let api = match namespaced {
            true => Api::<DynamicObject>::namespaced_with(self.client.clone(), &reference.namespace, &resource),
            false => Api::<DynamicObject>::all_with(self.client.clone(), &resource),
        };
        Ok(api.get_opt(&reference.name).await?.and_then(|o| serde_json::to_value(o).ok()))
    }

    /// The API resource of a reference's kind and whether it is namespaced (discovered once);
    /// `None` when the API server does not serve the kind.
    pub async fn kind(&self, reference: &ResourceReference) -> kube::Result<Option<(ApiResource, bool)>> {
        let key = format!("{}/{}", reference.api_version, reference.kind);
        if let Some(found) = self.kinds.lock().unwrap().get(&key) {
            return Ok(Some(found.clone()));
        }
        let (group, version) = reference.api_version.rsplit_once('/').unwrap_or(("", &reference.api_version));
        match pinned_kind(&self.client, &GroupVersionKind::gvk(group, version, &reference.kind)).await {
            Ok((resource, capabilities)) => {
                let found = (resource, capabilities.scope == Scope::Namespaced);
                self.kinds.lock().unwrap().insert(key, found.clone());
                Ok(Some(found))
            }
            Err(kube::Error::Api(e)) if e.is_not_found() => Ok(None),
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
