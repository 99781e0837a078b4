//! What the host checks of a component before and after compiling it, and what it learns.

use super::bindings::{CONTRACT_VERSIONS, export_of};
use super::errors::LoadError;
use super::precompiled::Origin;

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
