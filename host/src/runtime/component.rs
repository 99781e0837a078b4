//! What the host checks of a component before and after compiling it, and what it learns.

use super::bindings::{CONTRACT_VERSIONS, export_of};
use super::precompiled::Origin;

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

/// Facts about a loaded component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentInfo {
    /// Size in bytes.
    pub size: usize,
    /// Hex sha256 of the bytes.
    pub sha256: String,
    /// Names of the component's imports.
    pub imports: Vec<String>,
    /// Names of the component's exports.
    pub exports: Vec<String>,
    /// Whether it was compiled now, in this process before, or read precompiled from disk.
    pub origin: Origin,
}

/// Tells components from core modules and non-WASM bytes before compiling.
pub(super) fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    match bytes.get(..8) {
        Some([0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]) => Ok(()),
        Some([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]) => Err(LoadError::NotAComponent("a core module")),
        _ => Err(LoadError::NotAComponent("no WASM header")),
    }
}

/// Accepts only the contract's own interfaces and WASI; returns whether WASI is imported.
pub(super) fn check_imports(imports: &[String]) -> Result<bool, LoadError> {
    let mut wasi = false;
    for name in imports {
        if name.starts_with("wasi:") {
            wasi = true;
        } else if !name.starts_with("ksm:adapter/host@") {
            return Err(LoadError::UnsupportedImport(name.clone()));
        }
    }
    Ok(wasi)
}

/// The supported contract version whose plugin interface the component exports.
pub(super) fn contract_version(exports: &[String]) -> Result<&'static str, LoadError> {
    if let Some(version) = CONTRACT_VERSIONS.iter().find(|v| exports.contains(&export_of(v))) {
        return Ok(version);
    }
    match exports.iter().find_map(|e| e.strip_prefix("ksm:adapter/plugin@")) {
        Some(found) => Err(LoadError::UnsupportedContract { found: found.to_string() }),
        None => Err(LoadError::MissingExport),
    }
}
