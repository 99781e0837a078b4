//! Plugins embedded in the host binary, so it works out of the box.

/// The Flux plugin component, built from `plugins/flux` by the build script.
pub const FLUX: &[u8] = include_bytes!(env!("KSM_FLUX_PLUGIN_WASM"));

/// The Flux plugin compiled ahead of time by the build script, with the host's engine
/// configuration (`runtime::engine`): no cranelift at start-up for the default plugin.
const FLUX_COMPILED: &[u8] = include_bytes!(env!("KSM_FLUX_PLUGIN_CWASM"));

/// The ahead-of-time code of the built-in plugin whose component is `bytes`, if it is one.
pub fn compiled_ahead(bytes: &[u8]) -> Option<&'static [u8]> {
    (bytes == FLUX).then_some(FLUX_COMPILED)
}

/// Returns the bytes of the built-in plugin `name` (`builtin:<name>` on the command line).
pub fn get(name: &str) -> Option<&'static [u8]> {
    match name {
        "flux" => Some(FLUX),
        _ => None,
    }
}

/// A name no built-in plugin has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no built-in plugin {name:?}; built-in plugins: {}", NAMES.join(", "))]
pub struct UnknownBuiltin {
    /// The name asked for.
    pub name: String,
}

/// The bytes of built-in plugin `name`, or an error listing the built-in plugins.
pub fn lookup(name: &str) -> Result<&'static [u8], UnknownBuiltin> {
    get(name).ok_or_else(|| UnknownBuiltin { name: name.into() })
}

/// Names of the built-in plugins.
pub const NAMES: &[&str] = &["flux"];
