//! The Flux source objects templates refer to, which contract 0.2.0 hands to plugins
//! ([`ksm_plugin_sdk::sources`]): one cache per source kind on the management cluster, each
//! object kept only as far as plugins are handed it (metadata and spec: a source's status
//! changes at every fetch).

use super::cache::{Cache, all};
use crate::controller::plumbing::watches::WatchFailures;
use futures::{Stream, StreamExt};
use ksm_plugin_sdk::sources::{SourceRef, handed, source_kinds};
use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::watch;

/// The caches of the source kinds (none by default).
#[derive(Default)]
pub struct Sources {
    stores: Vec<(String, ApiResource, Store<DynamicObject>)>,
}

/// A change of a source object, for the triggers.
pub type SourceEvents = std::pin::Pin<Box<dyn Stream<Item = Result<DynamicObject, watcher::Error>> + Send>>;

impl Sources {
    /// Starts a cache per source kind, its watch's failures reported to `watch_failures` (a kind whose
    /// CRD is not installed, e.g. Bucket, counts as listed and empty, and is looked for again every
    /// few minutes); returns the caches, their
    /// changes (which fill them, so they must be polled) and each cache's listed flag.
    pub fn start(
        client: &Client,
        watch_failures: &Arc<WatchFailures>,
    ) -> (Self, SourceEvents, Vec<watch::Receiver<bool>>) {
        let (mut stores, mut events, mut listed) = (Vec::new(), Vec::new(), Vec::new());
        for kind in source_kinds() {
            let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, &kind.plural);
            let cache = Cache { client, config: all(), watch_failures: watch_failures.clone() };
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            let (store, changes, is_listed) = cache.start_with(api, resource.clone(), trim, |_, _| {});
            stores.push((kind.kind, resource, store));
            events.push(changes.boxed());
            listed.push(is_listed);
        }
        (Self { stores }, futures::stream::select_all(events).boxed(), listed)
    }

    /// The source `source` as plugins are handed it, if it is cached.
    pub fn get(&self, source: &SourceRef) -> Option<Value> {
        let (_, resource, store) = self.stores.iter().find(|(kind, _, _)| *kind == source.kind)?;
        let key = ObjectRef::new_with(&source.name, resource.clone()).within(&source.namespace);
        let mut object = serde_json::to_value(&*store.get(&key)?).ok()?;
        // A list's items may come without their type.
        (object["apiVersion"], object["kind"]) = (resource.api_version.clone().into(), resource.kind.clone().into());
        Some(handed(&object))
    }
}

/// Keeps of a source only what plugins are handed: no status, no managedFields.
fn trim(object: &mut DynamicObject) {
    object.managed_fields_mut().clear();
    if let Some(fields) = object.data.as_object_mut() {
        fields.remove("status");
    }
}
