//! Rust SDK for ksm-adapter plugins.
//!
//! - [`contract`]: the types of the WIT contract (`wit/since_v0.2.0/adapter.wit`) as plain Rust, shared by
//!   the host and by plugins compiled natively (for tests and benchmarks);
//! - [`k0rdent`]: the parts of the k0rdent API (ServiceSet, ServiceTemplate) a plugin reads;
//! - [`names`]: Kubernetes name rules and stable name shortening;
//! - [`sources`]: the Flux source objects a template refers to, as plugins are handed them;
//! - [`inputs`] and [`report`]: building contract inputs from k0rdent objects and rendering
//!   outputs readably, the same way in the host, its CLI and golden tests;
//! - [`status_table`]: rows of the golden status tables, for plugin tests and the host's suite;
//! - `bump` (`wasm32` only): a bump allocator for plugin instances, which live for a few calls;
//! - `guest` (feature `guest`): the wit-bindgen glue that exports a [`contract::PluginApi`]
//!   implementation as a WASM component: `ksm_plugin_sdk::export_plugin!(MyPlugin);`.

#[cfg(any(target_arch = "wasm32", test))]
pub mod bump;
pub mod contract;
pub mod inputs;
pub mod k0rdent;
pub mod names;
pub mod report;
pub mod sources;
pub mod status_table;

#[cfg(feature = "guest")]
pub mod guest;
