//! The caches the controllers read: one reflector per kind, its watch's failures reported to
//! [`WatchFailures`], and a flag that turns true once it holds a complete list.

use super::service_set_cache::WatchedServiceSet;
use super::service_set_store::{self, ServiceSets};
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

    /// The ServiceSets' cache: the host's own [`ServiceSets`], not kube-runtime's store (see
    /// [`service_set_store`](super::service_set_store)), and its watch's events: which were
    /// listed, and when a list is complete; otherwise as [`start`](Self::start).
    pub fn start_service_sets(
        self,
        on_event: impl Fn(&ServiceSets, &watcher::Event<WatchedServiceSet>) + Send + 'static,
    ) -> (
        ServiceSets,
        impl Stream<Item = Result<watcher::Event<WatchedServiceSet>, watcher::Error>> + Send + 'static,
        watch::Receiver<bool>,
    ) {
        let api = Api::<WatchedServiceSet>::all(self.client.clone());
        let mut writer = service_set_store::Writer::default();
        let (store, reader) = (writer.store(), writer.store());
        let (events, listed) =
            self.watch(api, (), move |event| writer.apply(event), move |event| on_event(&reader, event));
        (store, events, listed)
    }

    fn events_with<K>(
        self,
        api: Api<K>,
        dyntype: K::DynamicType,
        mut trim: impl FnMut(&mut K) + Send + 'static,
        on_event: impl Fn(&Store<K>, &watcher::Event<K>) + Send + 'static,
    ) -> (Store<K>, impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    {
        let mut writer = reflector::store::Writer::new(dyntype.clone());
        let reader = writer.as_reader();
        let store = reader.clone();
        let take_in = move |event: &mut watcher::Event<K>| {
            if let watcher::Event::Apply(object) | watcher::Event::Delete(object) | watcher::Event::InitApply(object) =
                event
            {
                trim(object);
            }
            writer.apply_watcher_event(event);
        };
        let (events, listed) = self.watch(api, dyntype, take_in, move |event| on_event(&store, event));
        (reader, events, listed)
    }

    /// The watch's events, each taken in by `take_in` (which fills the cache), its failures
    /// reported, then seen by `on_event`; and the flag of a complete list.
    fn watch<K>(
        self,
        api: Api<K>,
        dyntype: K::DynamicType,
        mut take_in: impl FnMut(&mut watcher::Event<K>) + Send + 'static,
        on_event: impl Fn(&watcher::Event<K>) + Send + 'static,
    ) -> (impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static, watch::Receiver<bool>)
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    {
        let (listed, is_listed) = watch::channel(false);
        let (kind, watch_failures) = (K::kind(&dyntype).into_owned(), self.watch_failures);
        let events = backed_off(watcher(api, self.config)).map(move |mut event| {
            if let Ok(event) = &mut event {
                take_in(event);
            }
            observe(&watch_failures, &kind, &listed, &event);
            if let Ok(event) = &event {
                on_event(event);
            }
            event
        });
        (events, is_listed)
    }
}
