//! Builds the Flux plugin from source into a WASM component and hands its path to the host
//! (`KSM_FLUX_PLUGIN_WASM`), which embeds it so `ksm-adapter` works out of the box; and
//! compiles it ahead of time with the host's own engine configuration
//! (`KSM_FLUX_PLUGIN_CWASM`), so that the host starts without running cranelift for it.

use ksm_guest_build::{GuestTarget, build};
use std::path::{Path, PathBuf};

#[path = "src/runtime/engine.rs"]
mod engine;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ is inside the workspace");
    let wasm = build(root, "plugins/flux", "ksm-flux-plugin", GuestTarget::Unknown);
    println!("cargo:rustc-env=KSM_FLUX_PLUGIN_WASM={}", wasm.display());
    println!("cargo:rerun-if-changed=src/runtime/engine.rs");
    let bytes = std::fs::read(&wasm).expect("reading the Flux plugin component");
    let engine = wasmtime::Engine::new(&engine::config(1)).expect("the host's engine configuration");
    let code = engine.precompile_component(&bytes).expect("compiling the Flux plugin ahead of time");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("flux.cwasm");
    std::fs::write(&out, code).expect("writing the compiled Flux plugin");
    println!("cargo:rustc-env=KSM_FLUX_PLUGIN_CWASM={}", out.display());
}
