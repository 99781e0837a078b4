//! The host's bindings of the plugin contract, one module per released version, each generated
//! from that version's frozen WIT (`wit/since_v<version>/`), as Zed's extension host does. Every
//! version converts to the SDK's types, so the rest of the host is version-independent;
//! [`versioned`] picks a component's version from what it exports and dispatches its calls.
//!
//! Adding a version: see ARCHITECTURE.md, "A new contract version".

mod shared;
mod since_v0_1_0;
mod since_v0_2_0;
mod versioned;

pub use versioned::{CONTRACT_VERSIONS, PluginInstance, PluginPre, add_to_linker, export_of};
