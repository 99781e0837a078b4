//! Builds the plugins the e2e tests hand to the adapter as external components: the hostile
//! plugin (both builds: two valid digests for hot reload), the plugin whose metadata lies, and
//! the Argo CD and Fleet plugins written in JavaScript (`plugins/argocd-js/build.sh`,
//! `plugins/fleet-js/build.sh`: npm and componentize-qjs; need Node.js and npm) and the Sveltos plugin written in Python
//! (`plugins/sveltos-py/build.sh`: pip and componentize-py; needs python3 with venv or pip).

use ksm_guest_build::{GuestTarget, build};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the JavaScript plugins' build needs.
const NODE: &str = "Node.js 18+ and npm";

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let hostile = build(&root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Unknown);
    let hostile_wasi = build(&root, "tests/plugins/hostile", "ksm-hostile-plugin", GuestTarget::Wasip2);
    let liar = build(&root, "tests/plugins/liar", "ksm-liar-plugin", GuestTarget::Unknown);
    println!("cargo:rustc-env=KSM_HOSTILE_WASM={}", hostile.display());
    println!("cargo:rustc-env=KSM_HOSTILE_WASI_WASM={}", hostile_wasi.display());
    println!("cargo:rustc-env=KSM_LIAR_WASM={}", liar.display());
    let argocd = plugin(&root, "argocd-js", &["src", "package.json", "package-lock.json", "toolchain.sh"], NODE);
    println!("cargo:rustc-env=KSM_ARGOCD_WASM={}", argocd.display());
    // The Fleet plugin imports the Argo CD plugin's modules and builds with its toolchain.
    let argocd_parts = ["../argocd-js/src", "../argocd-js/package-lock.json", "../argocd-js/toolchain.sh"];
    let fleet = plugin(&root, "fleet-js", &[&["src", "package.json"][..], &argocd_parts].concat(), NODE);
    println!("cargo:rustc-env=KSM_FLEET_WASM={}", fleet.display());
    let sveltos = plugin(&root, "sveltos-py", &["src", "wit"], "python3 with pip (and venv)");
    println!("cargo:rustc-env=KSM_SVELTOS_WASM={}", sveltos.display());
}

/// Builds the plugin in `plugins/<name>` with its `build.sh` (rebuilt when `sources` change);
/// panics with what to install (`needs`) when it fails.
fn plugin(root: &Path, name: &str, sources: &[&str], needs: &str) -> PathBuf {
    let dir = root.join("plugins").join(name);
    for watched in sources.iter().chain(&["build.sh", "../../wit"]) {
        println!("cargo:rerun-if-changed={}", dir.join(watched).display());
    }
    let output = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join(format!("{name}.wasm"));
    let status = Command::new("bash").arg(dir.join("build.sh")).arg(&output).status();
    match status {
        Ok(status) if status.success() => output,
        Ok(status) => panic!("plugins/{name}/build.sh failed ({status}); it needs {needs}"),
        Err(e) => panic!("running plugins/{name}/build.sh: {e}; it needs bash and {needs}"),
    }
}
