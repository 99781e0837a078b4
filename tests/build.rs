//! Builds the test plugins from source: the hostile plugin once without WASI (zero imports)
//! and once for WASI preview 2 (imports WASI, which the host links deny-all).

use ksm_guest_build::{GuestTarget, build};
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace");
    let plain = build(root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Unknown);
    let wasi = build(root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Wasip2);
    println!("cargo:rustc-env=KSM_HOSTILE_WASM={}", plain.display());
    println!("cargo:rustc-env=KSM_HOSTILE_WASI_WASM={}", wasi.display());
}
