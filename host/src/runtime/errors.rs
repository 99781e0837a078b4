//! The runtime's errors: setting it up ([`RuntimeError`]), loading a component
//! ([`LoadError`]), and why a precompiled component on disk is not used. A call's errors are
//! the plugin interface's ([`crate::plugin::CallError`]).

use super::bindings::{CONTRACT_VERSIONS, export_of};

/// Why the runtime could not be set up. The text is wasmtime's, its causes chained.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the engine's configuration (e.g. the instance pool it reserves).
    #[error(transparent)]
    Engine(wasmtime::Error),
    /// The contract's or WASI's imports could not be added to a linker.
    #[error(transparent)]
    Linker(wasmtime::Error),
}

/// Largest component the host compiles: compiling takes time and memory in proportion to the
/// size, and cannot be interrupted, so a bound on the size is the bound on both.
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// Why a component could not be loaded as a plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The component is larger than the host compiles.
    #[error("the component is {0} bytes, over the limit of {MAX_COMPONENT_BYTES} bytes")]
    TooLarge(usize),
    /// The bytes are a core module or not WASM at all.
    #[error("not a WASM component ({0}); build plugins with wasm-component-ld, componentize-py or componentize-js")]
    NotAComponent(&'static str),
    /// wasmtime could not compile the component.
    #[error("the component does not compile: {0}")]
    Compile(String),
    /// The component imports something the host does not provide.
    #[error("the component imports {0:?}; plugins may import only ksm:adapter/host and WASI")]
    UnsupportedImport(String),
    /// The component targets another contract version.
    #[error("the plugin targets contract {found}; this host supports {}", CONTRACT_VERSIONS.join(", "))]
    UnsupportedContract {
        /// The version the plugin declares.
        found: String,
    },
    /// The component does not export the plugin interface.
    #[error("the component does not export {}", CONTRACT_VERSIONS.iter().map(|v| export_of(v)).collect::<Vec<_>>().join(" or "))]
    MissingExport,
    /// The component could not be linked.
    #[error("the component cannot be linked: {0}")]
    Link(String),
    /// Calling `metadata` failed.
    #[error(transparent)]
    Metadata(#[from] crate::plugin::CallError),
}

/// Why a cache file is not used.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unusable {
    /// It cannot be read.
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// Not a file, or another user's: its code could be anyone's.
    #[error("not a file of the host's user (uid {user})")]
    NotOwn {
        /// The host's user.
        user: u32,
    },
    /// Others may write it.
    #[error("writable by others (mode {mode:o})")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// Shorter than the hash that heads it.
    #[error("shorter than its header")]
    Short,
    /// Its code is not what its hash says.
    #[error("its content does not match its hash (damaged or half-written)")]
    Damaged,
}
