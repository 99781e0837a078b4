//! Which plugin an offline command runs, with which default config and under which limits: the
//! flags and the loading they share.

use anyhow::{Context, bail};
use clap::Args;
use ksm_adapter::builtin;
use ksm_adapter::plugin::{Limits, Plugin};
use ksm_adapter::runtime::{Runtime, WasmPlugin};
use ksm_adapter::serving::ServingPlugin;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Which plugin to run, where, and under which limits.
#[derive(Debug, Args)]
pub struct PluginArgs {
    /// `builtin:flux` or the path of a `.wasm` component.
    #[arg(long, short = 'p', default_value = "builtin:flux")]
    pub plugin: String,
    #[command(flatten)]
    pub tenancy: super::tenancy_args::TenancyArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The provider config an AdapterPlugin would give the plugin.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Default provider config (JSON) merged under every ServiceSet's `spec.provider.config`, as
    /// an AdapterPlugin's `spec.config` is: for plugins that need operator settings (e.g. the
    /// Argo CD plugin's `helmRepositories`).
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    config: Option<Value>,
}

impl ConfigArgs {
    /// `plugin`, served with this default config and no other policy.
    pub fn serving(&self, plugin: Arc<dyn Plugin>) -> ServingPlugin {
        ServingPlugin { config: self.config.clone(), ..ServingPlugin::plain(plugin) }
    }
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

/// Per-call limits of the sandbox.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Wall-time limit of one plugin call, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Linear-memory limit of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64)]
    memory_limit_mib: usize,
    /// Limit on the text one plugin call may return, in KiB.
    #[arg(long, default_value_t = 4096)]
    output_limit_kib: usize,
}

impl LimitArgs {
    /// The limits these flags set.
    pub fn limits(&self) -> Limits {
        Limits {
            timeout: Duration::from_millis(self.timeout_ms),
            memory: self.memory_limit_mib << 20,
            output: self.output_limit_kib << 10,
        }
    }
}

/// Loads `builtin:<name>` or a `.wasm` file.
pub fn load(runtime: &Runtime, spec: &str, limits: Limits) -> anyhow::Result<WasmPlugin> {
    let bytes = plugin_bytes(spec)?;
    runtime.load(&bytes, limits).with_context(|| format!("loading plugin {spec}"))
}

/// The bytes of `builtin:<name>` or of a `.wasm` file.
pub fn plugin_bytes(spec: &str) -> anyhow::Result<Vec<u8>> {
    Ok(match spec.strip_prefix("builtin:") {
        Some(name) => match builtin::get(name) {
            Some(bytes) => bytes.to_vec(),
            None => bail!("no built-in plugin {name:?}; built-in plugins: {}", builtin::NAMES.join(", ")),
        },
        None => std::fs::read(spec).with_context(|| format!("reading plugin {spec}"))?,
    })
}
