//! Builds the plugins the e2e tests hand to the adapter as external components: the hostile
//! plugin (both builds: two valid digests for hot reload), the plugin whose metadata lies, and
//! the Argo CD plugin written in JavaScript (`plugins/argocd-js/build.sh`: npm and
//! componentize-qjs; needs Node.js and npm).

use ksm_guest_build::{GuestTarget, build};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let hostile = build(&root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Unknown);
    let hostile_wasi = build(&root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Wasip2);
    let liar = build(&root, "tests/plugins/liar", "ksm-liar-plugin", GuestTarget::Unknown);
    println!("cargo:rustc-env=KSM_HOSTILE_WASM={}", hostile.display());
    println!("cargo:rustc-env=KSM_HOSTILE_WASI_WASM={}", hostile_wasi.display());
    println!("cargo:rustc-env=KSM_LIAR_WASM={}", liar.display());
    println!("cargo:rustc-env=KSM_ARGOCD_WASM={}", argocd(&root).display());
}

/// Builds the JavaScript Argo CD plugin; panics with what to install when Node.js is missing.
fn argocd(root: &Path) -> PathBuf {
    let dir = root.join("plugins/argocd-js");
    for watched in ["src", "package.json", "package-lock.json", "build.sh", "../../wit"] {
        println!("cargo:rerun-if-changed={}", dir.join(watched).display());
    }
    let output = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("argocd.wasm");
    let status = Command::new("bash").arg(dir.join("build.sh")).arg(&output).status();
    match status {
        Ok(status) if status.success() => output,
        Ok(status) => panic!("plugins/argocd-js/build.sh failed ({status}); it needs Node.js 18+ and npm"),
        Err(e) => panic!("running plugins/argocd-js/build.sh: {e}; it needs bash, Node.js 18+ and npm"),
    }
}
