//! The caches the controllers read from the management cluster: one reflector per kind, and the
//! kinds kept in a form of their own.
//!
//! - [`cache`]: a reflector per kind, its watch's failures reported, and when it is listed;
//! - [`service_set_cache`]: ServiceSets as the cache keeps them: packed, with what triggers read;
//! - [`sources`]: the Flux sources templates refer to, handed to plugins;
//! - [`config_maps`]: watches of the ConfigMaps AdapterPlugins name, by name.

pub mod cache;
pub mod config_maps;
pub mod service_set_cache;
pub mod sources;
