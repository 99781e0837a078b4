//! The Helm chart (deploy/chart) as the tests see it: what `.ci/helm-check.py --rbac-out`
//! renders with Helm itself (RBAC rules, the container's arguments and environment, the shards'
//! Deployments), and the files the chart ships (alerting rules, dashboard).
//!
//! The rendered facts come from `target/chart-rbac.json`, written by `.ci/run`, or are rendered
//! here (once per test process) when that file is missing or older than the chart.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use ksm_test_harness::adapter::Mode;
use serde_json::Value;

/// Flags of the chart's container that a host started here does not take from the chart, and why.
const NOT_TAKEN: [(&str, &str); 3] = [
    ("--mode", "the harness passes it: `Container::mode`"),
    ("--metrics-bind-address", "each host gets a free loopback port"),
    ("--plugin-cache-dir", "a pod's emptyDir path"),
];

/// `ksm-adapter run` as one of the chart's Deployments starts it, made runnable by the harness.
#[derive(Debug, Clone)]
pub struct Container {
    /// The Deployment's name.
    pub name: String,
    /// Its `--mode`.
    pub mode: Mode,
    /// Its other arguments after `run`, but those of [`NOT_TAKEN`].
    pub args: Vec<String>,
}

impl Container {
    fn of(name: &str, container: &Value) -> Self {
        let all = strings(&container["args"]);
        assert_eq!(all.first().map(String::as_str), Some("run"), "{name}: the chart's container args {all:?}");
        let value = |flag: &str| all.iter().find_map(|a| a.strip_prefix(&format!("{flag}=")));
        let mode = match value("--mode") {
            Some("observe") => Mode::Observe,
            Some("manage") => Mode::Manage,
            other => panic!("{name}: the chart passes --mode={other:?}"),
        };
        let taken = |arg: &&String| !NOT_TAKEN.iter().any(|(flag, _)| arg.split('=').next() == Some(flag));
        Self { name: name.to_string(), mode, args: all[1..].iter().filter(taken).cloned().collect() }
    }

    /// [`args`](Self::args) as the harness takes them.
    pub fn args(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }
}

/// The container of the chart's Deployment with the default values.
pub fn default_container() -> Container {
    Container::of("the default Deployment", &rendered()["container"])
}

/// The label key that assigns ServiceSets to shards, and the containers of the shards' Deployments
/// (shard 0 first), as the chart renders them for `.ci/helm-check.py`'s sharded values.
pub fn sharded() -> (String, Vec<Container>) {
    let all = rendered();
    let sharded = &all["sharded"];
    let key =
        sharded["labelKey"].as_str().unwrap_or_else(|| panic!("{}: no sharded.labelKey", rendered_file().display()));
    let deployments = sharded["deployments"].as_array().into_iter().flatten();
    let containers = deployments.map(|d| Container::of(d["name"].as_str().unwrap_or_default(), d)).collect();
    (key.to_string(), containers)
}

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file the chart ships, `deploy/chart/files/<name>`, as text.
pub fn file(name: &str) -> String {
    let path = workspace().join("deploy/chart/files").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The file `.ci/helm-check.py --rbac-out` wrote: `target/chart-rbac.json` when it is newer than
/// everything it is made from; otherwise the chart is rendered now, into the temporary directory.
pub fn rendered_file() -> PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(find_or_render).clone()
}

/// [`rendered_file`], parsed.
pub fn rendered() -> Value {
    let path = rendered_file();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The strings of the array at `value` (empty when it is not one).
pub fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
}

fn find_or_render() -> PathBuf {
    let root = workspace();
    let ready = root.join("target/chart-rbac.json");
    let sources = newest_mtime(&root.join("deploy/chart")).max(mtime(&root.join(".ci/helm-check.py")));
    if mtime(&ready) > sources {
        return ready;
    }
    let out = std::env::temp_dir().join("ksm-e2e").join(format!("chart-rbac-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let result =
        Command::new("python3").arg(".ci/helm-check.py").arg("--rbac-out").arg(&out).current_dir(&root).output();
    let install = "the chart is rendered by Helm through helm-python-sdk: \
                   `pip install helm-python-sdk==0.2.2 PyYAML` (CI installs them in .ci/run), then \
                   `python3 .ci/helm-check.py --rbac-out target/chart-rbac.json`";
    let output = result.unwrap_or_else(|e| panic!("running python3 .ci/helm-check.py: {e}\n{install}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        out.is_file(),
        "python3 .ci/helm-check.py did not write {} ({}):\n{stderr}{}\n{install}",
        out.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout)
    );
    if !output.status.success() {
        // The facts are written before the other checks fail; those fail CI on their own.
        eprintln!("warning: .ci/helm-check.py reports failures (its rendered chart is used all the same):\n{stderr}");
    }
    out
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

fn newest_mtime(dir: &Path) -> SystemTime {
    let mut newest = mtime(dir);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        newest = newest.max(if path.is_dir() { newest_mtime(&path) } else { mtime(&path) });
    }
    newest
}
