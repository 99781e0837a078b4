//! Plugins embedded in the host binary, so it works out of the box.

/// The Flux plugin component, built from `plugins/flux` by the build script.
pub const FLUX: &[u8] = include_bytes!(env!("KSM_FLUX_PLUGIN_WASM"));

/// Returns the bytes of the built-in plugin `name` (`builtin:<name>` on the command line).
pub fn get(name: &str) -> Option<&'static [u8]> {
    match name {
        "flux" => Some(FLUX),
        _ => None,
    }
}

/// The bytes of built-in plugin `name`, or an error listing the built-in plugins.
pub fn lookup(name: &str) -> Result<&'static [u8], String> {
    get(name).ok_or_else(|| format!("no built-in plugin {name:?}; built-in plugins: {}", NAMES.join(", ")))
}

/// Names of the built-in plugins.
pub const NAMES: &[&str] = &["flux"];
