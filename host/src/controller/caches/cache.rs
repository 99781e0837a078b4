//! The caches the controllers read: one reflector per kind, its watch's failures reported to
//! [`WatchFailures`], and a flag that turns true once it holds a complete list.

use crate::controller::plumbing::watch_retry::backed_off;
use crate::controller::plumbing::watches::{WatchFailures, observe};
use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use std::sync::Arc;
use tokio::sync::watch;

/// Every object of a kind.
pub fn all() -> watcher::Config {
    watcher::Config::default()
}

/// A cache to start: of the objects `config` selects, its watch's failures reported to
/// `watch_failures`.
pub struct Cache<'a> {
    /// The client watching.
    pub client: &'a Client,
    /// Which objects.
    pub config: watcher::Config,
    /// Where the watch reports its failures.
    pub watch_failures: Arc<WatchFailures>,
}

impl Cache<'_> {
    /// A cache of the objects of kind `K` (managedFields dropped: the host never reads them),
    /// the stream of its changes (which fills the cache, so it must be polled), and a flag that
    /// turns true once the cache holds a complete list (see [`observe`]). `on_event` sees every
    /// event, after the cache took it in.
    pub fn start<K>(
        self,
        on_event: impl Fn(&Store<K>, &watcher::Event<K>) + Send + 'static,
    ) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    {
        let api = Api::<K>::all(self.client.clone());
        let (store, events, listed) = self.events_with(api, (), |object| object.managed_fields_mut().clear(), on_event);
        (store, events.touched_objects(), listed)
    }

    /// [`start`](Self::start), each object trimmed by `trim` (after the watch read its
    /// resourceVersion, before it is kept), its changes as the watch's events: which were
    /// listed, and when a list is complete.
    pub fn start_events<K>(
        self,
        trim: impl FnMut(&mut K) + Send + 'static,
        on_event: impl Fn(&Store<K>, &watcher::Event<K>) + Send + 'static,
    ) -> (Store<K>, impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    {
        let api = Api::<K>::all(self.client.clone());
        self.events_with(api, (), trim, on_event)
    }

    /// [`start`](Self::start) for a kind known at run time (`dyntype`, e.g. an
    /// [`ApiResource`](kube::core::ApiResource) of [`DynamicObject`](kube::api::DynamicObject)s)
    /// through `api`, each object trimmed by `trim` before it is kept.
    pub fn start_with<K>(
        self,
        api: Api<K>,
        dyntype: K::DynamicType,
        trim: impl FnMut(&mut K) + Send + 'static,
        on_event: impl Fn(&Store<K>, &watcher::Event<K>) + Send + 'static,
    ) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    {
        let (store, events, listed) = self.events_with(api, dyntype, trim, on_event);
        (store, events.touched_objects(), listed)
    }

    fn events_with<K>(
        self,
        api: Api<K>,
        dyntype: K::DynamicType,
        trim: impl FnMut(&mut K) + Send + 'static,
        on_event: impl Fn(&Store<K>, &watcher::Event<K>) + Send + 'static,
    ) -> (Store<K>, impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    {
        let writer = reflector::store::Writer::new(dyntype.clone());
        let reader = writer.as_reader();
        let store = reader.clone();
        let (listed, is_listed) = watch::channel(false);
        let (kind, watch_failures) = (K::kind(&dyntype).into_owned(), self.watch_failures);
        let events = backed_off(watcher(api, self.config)).modify(trim).reflect(writer).inspect(move |event| {
            observe(&watch_failures, &kind, &listed, event);
            if let Ok(event) = event {
                on_event(&store, event);
            }
        });
        (reader, events, is_listed)
    }
}
