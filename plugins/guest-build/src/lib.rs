//! Builds a guest crate of this workspace into a WASM component, from a build script.
//!
//! The host embeds the Flux plugin and the tests use hostile plugins; both are built from source
//! by running a nested `cargo build` with the `plugin` profile into `target/guests` (a separate
//! target dir, so the outer cargo's lock is never waited on).
//!
//! `wasm32-unknown-unknown` is linked by the toolchain's `wasm-component-ld`, which yields a
//! component with zero imports; `wasm32-wasip2` yields a component that imports WASI.
//!
//! Knobs for machines where rustup cannot download the wasm target (see `.ci/run`):
//! - `KSM_GUEST_CARGO`, `KSM_GUEST_RUSTC`: the cargo and rustc to use (default: the ones
//!   running this build);
//! - `KSM_WASM_COMPONENT_LD`: the linker (default: the one in the rustc sysroot);
//! - `KSM_GUEST_BUILD_STD=1`: build std from source (`-Zbuild-std`, with `RUSTC_BOOTSTRAP=1`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The WASM target a guest is built for.
#[derive(Clone, Copy, Debug)]
pub enum GuestTarget {
    /// No WASI: the component has zero imports beyond what the guest itself calls.
    Unknown,
    /// WASI preview 2: the component imports `wasi:*` interfaces.
    Wasip2,
}

impl GuestTarget {
    fn triple(self) -> &'static str {
        match self {
            Self::Unknown => "wasm32-unknown-unknown",
            Self::Wasip2 => "wasm32-wasip2",
        }
    }
}

/// rustc flags of every guest. LLVM inlines more than its default for opt-level 3: each call
/// left in a guest's code costs more in WASM than natively, as the engine's compiler inlines
/// nothing and checks the stack limit and the epoch deadline on entry to every function
/// (docs/performance.md has what it gains and costs in size).
const GUEST_RUSTFLAGS: &[&str] = &["-Cllvm-args=-inline-threshold=500"];

/// The first bytes of a WASM component (magic, then the component-model layer and version).
pub const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// Builds `package` (whose sources are in `package_dir`, relative to `workspace_root`) for
/// `target` and returns the path of the component. Emits the `rerun-if-changed` lines for the
/// package, the SDK, the WIT and the workspace manifest (its `plugin` profile). Panics with the cargo output when the build fails: a build
/// script has no better way to report.
pub fn build(workspace_root: &Path, package_dir: &str, package: &str, target: GuestTarget) -> PathBuf {
    for dir in [package_dir, "plugins/sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", workspace_root.join(dir).display());
    }
    for file in ["Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", workspace_root.join(file).display());
    }
    for var in ["KSM_GUEST_CARGO", "KSM_GUEST_RUSTC", "KSM_WASM_COMPONENT_LD", "KSM_GUEST_BUILD_STD"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let target_dir = workspace_root.join("target").join("guests");
    let cargo = env::var("KSM_GUEST_CARGO").or_else(|_| env::var("CARGO")).unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(workspace_root)
        .args(["build", "--quiet", "--profile", "plugin", "--package", package, "--target", target.triple()])
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's settings are for the host, not for the guest.
    for var in
        ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET"]
    {
        cmd.env_remove(var);
    }
    cmd.env("CARGO_ENCODED_RUSTFLAGS", GUEST_RUSTFLAGS.join("\x1f"));
    match env::var("KSM_GUEST_RUSTC") {
        Ok(rustc) => cmd.env("RUSTC", rustc),
        Err(_) => cmd.env_remove("RUSTC"),
    };
    let build_std = env::var("KSM_GUEST_BUILD_STD").is_ok_and(|v| v == "1");
    if !build_std {
        ensure_rustup_target(target);
    }
    if let GuestTarget::Unknown = target {
        cmd.env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER", component_linker());
    }
    if build_std {
        cmd.env("RUSTC_BOOTSTRAP", "1").arg("-Zbuild-std=std,panic_abort");
    }

    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {cargo} to build guest {package}: {e}"));
    if !output.status.success() {
        panic!(
            "building guest {package} for {} failed (is the target installed? `rustup target add {}`):\n{}{}",
            target.triple(),
            target.triple(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let wasm = target_dir.join(target.triple()).join("plugin").join(format!("{}.wasm", package.replace('-', "_")));
    let bytes = std::fs::read(&wasm)
        .unwrap_or_else(|e| panic!("guest {package} built but {} is unreadable: {e}", wasm.display()));
    assert!(
        bytes.starts_with(&COMPONENT_HEADER),
        "{} is a core module, not a component: the linker was not wasm-component-ld",
        wasm.display()
    );
    wasm
}

/// Installs the rustup target when it is missing, so a fresh checkout builds with one command.
/// Without rustup (or when it fails) the build below reports the missing target.
fn ensure_rustup_target(target: GuestTarget) {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    let Ok(installed) = installed else { return };
    if String::from_utf8_lossy(&installed.stdout).lines().any(|t| t.trim() == target.triple()) {
        return;
    }
    println!("cargo:warning=installing the rustup target {} to build the WASM plugins", target.triple());
    let _ = Command::new("rustup").args(["target", "add", target.triple()]).status();
}

/// `wasm-component-ld` from `KSM_WASM_COMPONENT_LD`, else from the sysroot of the rustc in use.
fn component_linker() -> PathBuf {
    if let Ok(path) = env::var("KSM_WASM_COMPONENT_LD") {
        return path.into();
    }
    let rustc = env::var("KSM_GUEST_RUSTC").or_else(|_| env::var("RUSTC")).unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {rustc} --print sysroot: {e}"));
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let host = env::var("HOST").unwrap_or_else(|_| "x86_64-unknown-linux-gnu".into());
    let linker = Path::new(&sysroot).join("lib/rustlib").join(host).join("bin/wasm-component-ld");
    assert!(linker.exists(), "{} not found: set KSM_WASM_COMPONENT_LD", linker.display());
    linker
}
