//! A deliberately misbehaving plugin for the runtime's containment tests.
//!
//! `translate` behaves according to the ServiceSet's name:
//! - `loop`: spins forever (the host must time it out);
//! - `oom`: allocates until memory runs out (the host must stop it at its limit);
//! - `trap`: panics (a trap);
//! - `huge`: returns ~8 MiB of output (over the host's output limit);
//! - `sleep` (WASI build): sleeps 20 s (a host call blocked in `poll`, which the epoch
//!   deadline cannot interrupt), then answers like an honest plugin;
//! - `snoop` (WASI build): reports what it can see of the environment, filesystem and network,
//!   and prints to stdout and the host log;
//! - `forbidden-kind`: a ClusterRoleBinding (a kind it does not declare);
//! - `cluster-scoped`: a Namespace;
//! - `other-namespace`: a ConfigMap in `kube-system`;
//! - `owner-refs`: a ConfigMap claiming an owner;
//! - `bad-json`: text that is not JSON;
//! - `long-error`: fails with a 40,000-character message (over what a condition message may
//!   hold on a real API server);
//! - `count`: a ConfigMap whose `data.calls` counts the `translate` calls this instance served
//!   (state kept between calls: what the host's sessions must confine to one ServiceSet);
//! - `sources`: a ConfigMap whose `data.sources` lists the sources it was handed (contract 0.2.0);
//! - anything else: one ConfigMap per service, like an honest plugin.
//!
//! `map-status` says Deployed, fingerprinted by how many objects it was shown.

use ksm_plugin_sdk::contract::*;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU32, Ordering};

/// `translate` calls served by this instance.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// The hostile plugin.
pub struct Hostile;

impl PluginApi for Hostile {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract_version: CONTRACT_VERSION.into(),
            creates: vec![ObjectKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
            }],
            reads: vec![],
        }
    }

    fn validate_config(_config: String) -> Result<(), Vec<ConfigError>> {
        Ok(())
    }

    fn translate(input: TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError> {
        let service_set: Value =
            serde_json::from_str(&input.service_set).map_err(|e| TranslateError::InvalidInput(e.to_string()))?;
        let name = service_set["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        if name == "long-error" {
            return Err(TranslateError::InvalidInput(format!("refused: {}", "x".repeat(40_000))));
        }
        let objects = match name.as_str() {
            "loop" => spin(),
            "oom" => exhaust_memory(),
            "trap" => panic!("hostile plugin panicked on purpose"),
            "huge" => vec!["x".repeat(8 << 20)],
            "snoop" => vec![snoop().to_string()],
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(20));
                vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()]
            }
            "forbidden-kind" => vec![json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "take-over"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}).to_string()],
            "cluster-scoped" => vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hostile"}}).to_string()],
            "other-namespace" => vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "kube-system"}}).to_string()],
            "owner-refs" => vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "kube-system", "uid": "x"}]}}).to_string()],
            "bad-json" => vec!["{\"apiVersion\": ".to_string()],
            "sources" => {
                let handed: Vec<String> =
                    input.sources.iter().map(|s| format!("{} {}/{}", s.kind, s.namespace, s.name)).collect();
                vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                    "data": {"sources": handed.join(", ")}}).to_string()]
            }
            "count" => vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                "data": {"calls": calls.to_string()}}).to_string()],
            _ => vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()],
        };
        Ok(vec![ServiceTranslation { service: name, outcome: Ok(objects), claims: vec![] }])
    }

    fn map_status(input: StatusInput) -> Result<ServiceStatus, StatusError> {
        Ok(ServiceStatus {
            state: ServiceState::Deployed,
            service_type: ServiceType::Resource,
            version: None,
            failure_message: None,
            deployed_hash: Some(format!("{} objects", input.observed.len())),
        })
    }
}

fn spin() -> Vec<String> {
    let mut n = 0u64;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

fn exhaust_memory() -> Vec<String> {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
    }
}

/// What the sandbox lets the plugin see; the host's tests expect nothing.
fn snoop() -> Value {
    println!("hello from the hostile plugin's stdout");
    #[cfg(target_arch = "wasm32")]
    ksm_plugin_sdk::guest::log(LogLevel::Warn, "hello from the hostile plugin's log import");
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "snoop"},
        "data": {
            "envVars": std::env::vars().count().to_string(),
            "args": std::env::args().count().to_string(),
            "rootDirReadable": std::fs::read_dir("/").is_ok().to_string(),
            "etcPasswdReadable": std::fs::read("/etc/passwd").is_ok().to_string(),
            "tcpConnect": std::net::TcpStream::connect("127.0.0.1:1").is_ok().to_string(),
        }
    })
}

#[cfg(target_arch = "wasm32")]
ksm_plugin_sdk::export_plugin!(Hostile);
