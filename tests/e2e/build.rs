//! Builds the plugins the e2e tests hand to the adapter as external components: the hostile
//! plugin (both builds: two valid digests for hot reload) and the plugin whose metadata lies.

use ksm_guest_build::{GuestTarget, build};
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let hostile = build(&root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Unknown);
    let hostile_wasi = build(&root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Wasip2);
    let liar = build(&root, "tests/plugins/liar", "ksm-liar-plugin", GuestTarget::Unknown);
    println!("cargo:rustc-env=KSM_HOSTILE_WASM={}", hostile.display());
    println!("cargo:rustc-env=KSM_HOSTILE_WASI_WASM={}", hostile_wasi.display());
    println!("cargo:rustc-env=KSM_LIAR_WASM={}", liar.display());
}
