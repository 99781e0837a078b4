//! The caches the controllers read from the management cluster: one reflector per kind, and the
//! kinds kept in a form of their own.
//!
//! - [`cache`]: a reflector per kind, its watch's failures reported, and when it is listed;
//! - [`service_set_cache`]: ServiceSets as the cache keeps them: packed, with what triggers read;
//! - [`service_set_store`]: the cached ServiceSets by namespace and name, filled from their watch;
//! - [`sources`]: the Flux sources templates refer to, handed to plugins;
//! - [`config_maps`]: watches of the ConfigMaps AdapterPlugins name, by name;
//! - [`management`]: every cache `ksm-adapter run` starts on the management cluster, at once.

pub mod cache;
pub mod config_maps;
pub mod management;
pub mod service_set_cache;
pub mod service_set_store;
pub mod sources;
