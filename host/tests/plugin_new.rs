//! `ksm-adapter plugin new`: a scaffolded plugin builds and passes `plugin test` as generated,
//! in Rust (a crate outside this workspace, depending on plugins/sdk by a relative path), in
//! JavaScript (componentize-qjs from npm) and in Python (componentize-py from PyPI). Each runs the project's own `build.sh`, as an author
//! would. The Rust build shares `target/plugin-new` between runs, so only the first is slow.

mod common;

use common::{ksm_adapter, repo};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Scaffolds plugin `name` in `lang` into a fresh directory (run from the checkout, so the Rust
/// SDK path defaults to it) and returns the directory.
fn scaffold(lang: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-new").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let out = ksm_adapter(&["plugin", "new", "--lang", lang, name, "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "plugin new failed:\n{}", text(&out));
    assert!(text(&out).contains("./build.sh"), "{}", text(&out));
    dir
}

/// Runs the project's `build.sh` and returns the component it built (the last line it prints).
fn build(dir: &Path, configure: impl FnOnce(&mut Command)) -> PathBuf {
    let started = Instant::now();
    let mut command = Command::new(dir.join("build.sh"));
    command.current_dir(dir);
    configure(&mut command);
    let out = command.output().expect("running build.sh");
    assert!(out.status.success(), "build.sh in {} failed:\n{}", dir.display(), text(&out));
    eprintln!("{}: built in {:.1?}", dir.display(), started.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let wasm = dir.join(stdout.lines().last().expect("build.sh prints the component's path").trim());
    assert!(wasm.is_file(), "{} was not built:\n{}", wasm.display(), text(&out));
    wasm
}

/// `plugin test` with the scaffold's own golden case: every check passes.
fn assert_passes(wasm: &Path, dir: &Path) {
    let out =
        ksm_adapter(&["plugin", "test", wasm.to_str().unwrap(), "--fixtures", dir.join("testdata").to_str().unwrap()]);
    let report = text(&out);
    assert!(out.status.success(), "plugin test failed:\n{report}");
    assert!(!report.contains("\nFAIL"), "{report}");
    assert!(report.contains(" passed, 0 failed\n"), "{report}");
    assert!(report.contains("conformance/several-services"), "{report}");
    assert!(
        report.lines().any(|l| l.contains("translate/example") && l.contains("expected output: matches expected.yaml")),
        "{report}"
    );
}

#[test]
fn a_scaffolded_rust_plugin_builds_and_passes_the_suite() {
    let dir = scaffold("rust", "scaffold-rust");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("[workspace]"), "{manifest}");
    let sdk = manifest.lines().find(|l| l.starts_with("ksm-plugin-sdk")).unwrap();
    assert!(sdk.contains("path = \"../"), "a relative path to the checkout's SDK: {sdk}");
    assert!(dir.join("Cargo.lock").is_file(), "the checkout's lock file is copied");

    let wasm = build(&dir, |command| {
        // The outer cargo's settings are for the host; a shared target dir keeps reruns quick.
        for var in ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
            command.env_remove(var);
        }
        command.env("CARGO_TARGET_DIR", repo().join("target/plugin-new"));
    });
    assert!(wasm.ends_with("wasm32-unknown-unknown/release/scaffold_rust.wasm"), "{}", wasm.display());
    assert_passes(&wasm, &dir);
    let inspect = text(&ksm_adapter(&["plugin", "inspect", wasm.to_str().unwrap()]));
    assert!(inspect.contains("name: scaffold-rust") && inspect.contains("kind: ConfigMap"), "{inspect}");
}

#[test]
fn a_scaffolded_javascript_plugin_builds_and_passes_the_suite() {
    let npm = Command::new("npm").arg("--version").output();
    assert!(
        npm.as_ref().is_ok_and(|out| out.status.success()),
        "npm is not installed: install Node.js (20 or later) with npm to build the JavaScript scaffold \
         (its build.sh installs componentize-qjs from npm), e.g. `apt-get install nodejs npm`"
    );
    let dir = scaffold("js", "scaffold-js");
    let package = std::fs::read_to_string(dir.join("package.json")).unwrap();
    assert!(package.contains("\"componentize-qjs\": \"0.4.5\""), "{package}");
    assert!(dir.join("wit/adapter.wit").is_file());

    let wasm = build(&dir, |_| {});
    assert_eq!(wasm, dir.join("scaffold-js.wasm"));
    assert_passes(&wasm, &dir);

    // The same plugin claiming another contract version is refused, naming both versions.
    let source = std::fs::read_to_string(dir.join("plugin.js")).unwrap();
    let claimed = source.replacen(r#"const CONTRACT_VERSION = "0.2.0";"#, r#"const CONTRACT_VERSION = "0.3.0";"#, 1);
    assert_ne!(source, claimed);
    std::fs::write(dir.join("plugin.js"), claimed).unwrap();
    let wasm = build(&dir, |_| {});
    let out = ksm_adapter(&["plugin", "test", wasm.to_str().unwrap()]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  plugin  contract version: ")
            && report.contains("the plugin targets contract 0.3.0; this host supports 0.1.0, 0.2.0"),
        "{report}"
    );
}

#[test]
fn a_scaffolded_python_plugin_builds_and_passes_the_suite() {
    let venv = Command::new("python3").args(["-c", "import ensurepip, venv"]).output();
    assert!(
        venv.as_ref().is_ok_and(|out| out.status.success()),
        "python3 with venv is not installed: install Python 3.10 or later with venv to build the Python \
         scaffold (its build.sh installs componentize-py from PyPI into a venv), e.g. `apt-get install python3-venv`"
    );
    let dir = scaffold("python", "scaffold-py");
    let build_script = std::fs::read_to_string(dir.join("build.sh")).unwrap();
    assert!(build_script.contains("version=0.25.1\n"), "componentize-py pinned: {build_script}");
    assert!(dir.join("wit/adapter.wit").is_file());

    let wasm = build(&dir, |_| {});
    assert_eq!(wasm, dir.join("scaffold-py.wasm"));
    assert_passes(&wasm, &dir);
    let inspect = text(&ksm_adapter(&["plugin", "inspect", wasm.to_str().unwrap()]));
    assert!(inspect.contains("name: scaffold-py") && inspect.contains("kind: ConfigMap"), "{inspect}");
}

#[test]
fn an_existing_directory_and_a_bad_name_are_refused() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-new").join("taken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep.txt"), "mine").unwrap();
    let out = ksm_adapter(&["plugin", "new", "--lang", "js", "taken", "--dir", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("exists and is not empty"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine");

    let out = ksm_adapter(&["plugin", "new", "--lang", "rust", "My_Plugin"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("plugin name \"My_Plugin\""), "{}", text(&out));
}
