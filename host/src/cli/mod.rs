//! Command-line interface.

mod conformance;
mod explain_cmd;
mod identity;
mod json_diff;
mod offline_plugins;
mod plugin_args;
mod plugin_cmd;
mod plugin_sign;
mod registry_args;
mod render_cmd;
mod run_cmd;
mod scaffold;
mod tenancy_args;

use clap::{Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

/// ksm-adapter: runs k0rdent ServiceSets through sandboxed WASM translation plugins.
///
/// The host does everything generic (watching, SMP checks, applying, status); a plugin per CD
/// tool (Flux is built in) translates ServiceSets into that tool's objects and maps their status
/// back. The `plugin` commands run plugins offline, with no cluster.
#[derive(Debug, Parser)]
#[command(name = "ksm-adapter", version, propagate_version = true)]
pub struct Cli {
    /// Log level (overridden by the KSM_LOG environment variable, e.g. `KSM_LOG=debug`).
    #[arg(long, global = true, value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,
    /// Log format: `text` for people, `json` (one object per line) for log collectors.
    #[arg(long, global = true, value_enum, env = "KSM_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// Log formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Log levels.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// Normal operation.
    Info,
    /// Detailed.
    Debug,
}

impl LogLevel {
    /// The tracing filter for this level.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
            // The host's own debug lines; wasmtime's and the HTTP stack's would bury them.
            Self::Debug => "info,ksm_adapter=debug",
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plugins: inspect, translate and map status offline; test (the conformance suite); new
    /// (scaffold); push and pull (OCI registries).
    #[command(subcommand)]
    Plugin(plugin_cmd::PluginCommand),
    /// Runs the controller: serves the ServiceSets whose StateManagementProvider names this
    /// host as its adapter, applying the plugin's objects and writing ServiceSet status.
    Run(run_cmd::RunArgs),
    /// Prints, offline, what the controller would do for every ServiceSet in the files: whether
    /// this host serves it, the provider's readiness as the host evaluates it, the objects it
    /// would apply and delete, and the ServiceSet status it would write.
    Render(render_cmd::RenderArgs),
    /// Explains one ServiceSet from the live cluster (kubeconfig): whether this host serves it
    /// and with which plugin, the provider gate with the host's own diagnosis, each service's
    /// children (applied, pending, drifted, to delete), its state and why (claims lost included),
    /// and whether the status is up to date. The decision `render` makes offline.
    Explain(explain_cmd::ExplainArgs),
    /// Prints CRDs as YAML: those of the k0rdent kinds the host serves (ServiceSet,
    /// StateManagementProvider, ServiceTemplate; in a k0rdent cluster kcm installs them) and the
    /// host's own `AdapterPlugin`. What `crds/` holds.
    Crds {
        /// Only the host's own CRD (`AdapterPlugin`).
        #[arg(long, conflicts_with = "k0rdent")]
        own: bool,
        /// Only the k0rdent CRDs.
        #[arg(long)]
        k0rdent: bool,
    },
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plugin(command) => plugin_cmd::run(command),
        Command::Run(args) => run_cmd::run(args),
        Command::Render(args) => render_cmd::run(args),
        Command::Explain(args) => explain_cmd::run(args),
        Command::Crds { own, k0rdent } => {
            if !own {
                print!("{}", ksm_adapter::k0rdent::crds_yaml());
            }
            if !k0rdent {
                print!("{}", ksm_adapter::adapter_plugin::crd_yaml());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
