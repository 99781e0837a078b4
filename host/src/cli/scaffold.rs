//! `ksm-adapter plugin new`: creates a plugin project that builds and passes `plugin test` as
//! generated. The plugin is trivial but contract-correct: one ConfigMap per service carrying the
//! service's values, a provider config that rejects unknown fields, Deployed once the ConfigMap
//! exists. The templates are the files under `scaffold/`, compiled into the binary.
//!
//! - Rust: a crate of its own workspace depending on the SDK (`plugins/sdk`) of a ksm-adapter
//!   checkout by a relative path; `build.sh` builds `wasm32-unknown-unknown` linked by the
//!   toolchain's `wasm-component-ld` (a component with zero imports).
//! - JavaScript: `plugin.js`, `package.json` pinning componentize-qjs, `build.sh`, and the WIT
//!   of this host's contract in `wit/`.
//! - Python: `app.py` (standard library only), `build.sh` installing the pinned componentize-py
//!   into a venv, and the WIT in `wit/`. Every language a shipped plugin is written in is offered
//!   (Rust: Flux; JavaScript: Argo CD, Fleet; Python: Sveltos).

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use ksm_plugin_sdk::names::is_dns1123_label;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

/// The componentize-qjs version JavaScript plugins are built with (`npm view componentize-qjs
/// version`, checked when this was written).
pub const COMPONENTIZE_QJS: &str = "0.4.5";

/// The componentize-py version Python plugins are built with: the Sveltos plugin's
/// (`plugins/sveltos-py/build.sh`), whose components the host is tested to load (38 core
/// instances, within the pooling allocator's 48).
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// `(path in the project, template)`.
const RUST: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("scaffold/rust/Cargo.toml.tmpl")),
    ("src/lib.rs", include_str!("scaffold/rust/src/lib.rs")),
    ("build.sh", include_str!("scaffold/rust/build.sh")),
    ("README.md", include_str!("scaffold/rust/README.md")),
    (".gitignore", include_str!("scaffold/rust/gitignore")),
    ("testdata/translate/example/input.yaml", include_str!("scaffold/testdata/input.yaml")),
    ("testdata/translate/example/expected.yaml", include_str!("scaffold/testdata/expected.yaml")),
];

const JS: &[(&str, &str)] = &[
    ("package.json", include_str!("scaffold/js/package.json")),
    ("plugin.js", include_str!("scaffold/js/plugin.js")),
    ("build.sh", include_str!("scaffold/js/build.sh")),
    ("README.md", include_str!("scaffold/js/README.md")),
    (".gitignore", include_str!("scaffold/js/gitignore")),
    ("wit/adapter.wit", include_str!("../../../wit/since_v0.2.0/adapter.wit")),
    ("testdata/translate/example/input.yaml", include_str!("scaffold/testdata/input.yaml")),
    ("testdata/translate/example/expected.yaml", include_str!("scaffold/testdata/expected.yaml")),
];

const PYTHON: &[(&str, &str)] = &[
    ("app.py", include_str!("scaffold/python/app.py")),
    ("build.sh", include_str!("scaffold/python/build.sh")),
    ("README.md", include_str!("scaffold/python/README.md")),
    (".gitignore", include_str!("scaffold/python/gitignore")),
    ("wit/adapter.wit", include_str!("../../../wit/since_v0.2.0/adapter.wit")),
    ("testdata/translate/example/input.yaml", include_str!("scaffold/testdata/input.yaml")),
    ("testdata/translate/example/expected.yaml", include_str!("scaffold/testdata/expected.yaml")),
];

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name (its metadata name and package name): a DNS-1123 label starting with a
    /// letter, e.g. `argocd`.
    name: String,
    /// The language of the plugin.
    #[arg(long, value_enum)]
    lang: Lang,
    /// The directory to create the project in (default: `./<name>`); must not exist or be empty.
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Rust: the ksm-adapter checkout whose `plugins/sdk` the plugin depends on (by a relative
    /// path). Default: the checkout the current directory is in.
    #[arg(long, value_name = "PATH")]
    sdk_path: Option<PathBuf>,
}

/// Languages `plugin new` scaffolds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the ksm-plugin-sdk crate.
    Rust,
    /// JavaScript, built with componentize-qjs (QuickJS).
    Js,
    /// Python, built with componentize-py (CPython).
    Python,
}

/// Creates the project and says how to build and test it.
pub fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    if !is_dns1123_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        bail!("plugin name {name:?}: use lower-case letters, digits and '-', starting with a letter (at most 63)");
    }
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() && std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    // The SDK first: nothing is written when it cannot be found.
    let checkout = match args.lang {
        Lang::Rust => Some(checkout(args.sdk_path.as_deref())?),
        Lang::Js | Lang::Python => None,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let project = dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))?;
    let mut substitutions = vec![
        ("__NAME__", name.clone()),
        ("__CRATE__", name.replace('-', "_")),
        ("__COMPONENTIZE_QJS__", COMPONENTIZE_QJS.to_string()),
        ("__COMPONENTIZE_PY__", COMPONENTIZE_PY.to_string()),
    ];
    let (files, build) = match (args.lang, &checkout) {
        (Lang::Rust, Some(checkout)) => {
            let sdk = relative(&project, &checkout.join("plugins/sdk"));
            substitutions.push(("__SDK_PATH__", sdk.display().to_string()));
            // The versions the SDK is tested with; cargo drops what the plugin does not use.
            let lock = checkout.join("Cargo.lock");
            if lock.is_file() {
                std::fs::copy(&lock, project.join("Cargo.lock"))
                    .with_context(|| format!("copying {}", lock.display()))?;
            }
            (RUST, format!("target/wasm32-unknown-unknown/release/{}.wasm", name.replace('-', "_")))
        }
        (Lang::Python, _) => (PYTHON, format!("{name}.wasm")),
        _ => (JS, format!("{name}.wasm")),
    };
    for (path, template) in files {
        let text = substitutions.iter().fold(template.to_string(), |text, (from, to)| text.replace(from, to));
        write(&project.join(path), &text)?;
    }
    println!("created {} plugin {name:?} in {}", lang_name(args.lang), dir.display());
    println!("build and test it:");
    println!("  cd {} && ./build.sh", dir.display());
    println!("  ksm-adapter plugin test {} --fixtures {}", dir.join(build).display(), dir.join("testdata").display());
    Ok(ExitCode::SUCCESS)
}

fn lang_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "a Rust",
        Lang::Js => "a JavaScript",
        Lang::Python => "a Python",
    }
}

/// Writes `text` to `path` (creating its directory); scripts get the executable bit.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", path.display()))?;
    }
    Ok(())
}

/// The ksm-adapter checkout holding the SDK: `--sdk-path` (the checkout, or its `plugins/sdk`),
/// else the checkout the current directory is in.
fn checkout(sdk_path: Option<&Path>) -> anyhow::Result<PathBuf> {
    let is_checkout = |dir: &Path| dir.join("plugins/sdk/Cargo.toml").is_file() && dir.join("wit").is_dir();
    if let Some(path) = sdk_path {
        let path = path.canonicalize().with_context(|| format!("--sdk-path {}", path.display()))?;
        if is_checkout(&path) {
            return Ok(path);
        }
        if let Some(root) = path.parent().and_then(Path::parent).filter(|root| is_checkout(root)) {
            return Ok(root.to_path_buf());
        }
        bail!("--sdk-path {}: not a ksm-adapter checkout (no plugins/sdk/Cargo.toml and wit/)", path.display());
    }
    let cwd = std::env::current_dir()?;
    cwd.ancestors().find(|dir| is_checkout(dir)).map(Path::to_path_buf).ok_or_else(|| {
        anyhow::anyhow!(
            "{} is not inside a ksm-adapter checkout: pass --sdk-path <checkout> (the Rust plugin depends on its plugins/sdk)",
            cwd.display()
        )
    })
}

/// `to` relative to the directory `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path: PathBuf = std::iter::repeat_n(Component::ParentDir, from.len() - common).collect();
    path.extend(&to[common..]);
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(relative(Path::new("/a/b/c"), Path::new("/a/x/y")), Path::new("../../x/y"));
        assert_eq!(relative(Path::new("/a"), Path::new("/a/plugins/sdk")), Path::new("plugins/sdk"));
    }

    #[test]
    fn python_plugins_are_built_with_the_sveltos_plugins_componentize_py() {
        let sveltos = include_str!("../../../plugins/sveltos-py/build.sh");
        assert!(sveltos.contains(&format!("\ncomponentize_py_version={COMPONENTIZE_PY}\n")), "{sveltos}");
    }

    #[test]
    fn every_placeholder_of_the_templates_is_substituted() {
        let known = ["__NAME__", "__CRATE__", "__SDK_PATH__", "__COMPONENTIZE_QJS__", "__COMPONENTIZE_PY__"];
        for (path, template) in RUST.iter().chain(JS).chain(PYTHON) {
            let text = known.iter().fold(template.to_string(), |text, k| text.replace(k, "x"));
            let left = text
                .split("__")
                .skip(1)
                .find(|run| !run.is_empty() && run.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
            assert_eq!(left, None, "{path}: a placeholder is left");
        }
    }
}
