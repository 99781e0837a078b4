//! Builds the Flux plugin from source into a WASM component and hands its path to the host
//! (`KSM_FLUX_PLUGIN_WASM`), which embeds it so `ksm-adapter` works out of the box.

use ksm_guest_build::{GuestTarget, build};
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ is inside the workspace");
    let wasm = build(root, "plugins/flux", "ksm-flux-plugin", GuestTarget::Unknown);
    println!("cargo:rustc-env=KSM_FLUX_PLUGIN_WASM={}", wasm.display());
}
