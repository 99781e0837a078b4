//! The narrow interface the host calls plugins through.
//!
//! The planning core only knows [`Plugin`]; the WASM runtime implements it for sandboxed
//! components and [`NativePlugin`] for a plugin crate linked into the process (tests and
//! benchmarks). A call either reaches the plugin and returns its answer (which may be the
//! plugin's own typed error), or fails as a [`CallError`] (trap, timeout, limit).

use ksm_plugin_sdk::contract::{
    ConfigError, PluginApi, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput,
    TranslateError, TranslateInput,
};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Per-call limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall time of one call.
    pub timeout: Duration,
    /// Linear memory of one instance, in bytes.
    pub memory: usize,
    /// Bytes of text one call may return.
    pub output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(1), memory: 64 << 20, output: 4 << 20 }
    }
}

/// The plugin functions, for error messages and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    /// `metadata`
    Metadata,
    /// `validate-config`
    ValidateConfig,
    /// `translate`
    Translate,
    /// `map-status`
    MapStatus,
}

impl Function {
    /// The WIT name of the function.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Metadata => "metadata",
            Self::ValidateConfig => "validate-config",
            Self::Translate => "translate",
            Self::MapStatus => "map-status",
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call did not produce an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallErrorKind {
    /// The call ran longer than its wall-time limit.
    Timeout(Duration),
    /// The plugin tried to grow its memory past the limit (bytes).
    MemoryLimit(usize),
    /// The answer was larger than the output limit.
    OutputTooLarge {
        /// Bytes of text returned, when known: an answer whose copy into the host would exceed
        /// the bound is stopped before it is copied, so its size is never learnt.
        size: Option<usize>,
        /// The limit in bytes.
        limit: usize,
    },
    /// The plugin trapped (panic, unreachable, out-of-bounds access, ...).
    Trap(String),
    /// A fresh instance could not be created.
    Instantiate(String),
}

impl CallErrorKind {
    /// A short label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "timeout",
            Self::MemoryLimit(_) => "memory",
            Self::OutputTooLarge { .. } => "output",
            Self::Trap(_) => "trap",
            Self::Instantiate(_) => "instantiate",
        }
    }
}

/// A failed plugin call, naming the plugin and the function.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plugin {plugin:?}: {function} {}", describe(kind))]
pub struct CallError {
    /// Plugin name.
    pub plugin: String,
    /// The function called.
    pub function: Function,
    /// What went wrong.
    pub kind: CallErrorKind,
}

fn describe(kind: &CallErrorKind) -> String {
    match kind {
        CallErrorKind::Timeout(limit) => format!("exceeded its time limit of {limit:?}"),
        CallErrorKind::MemoryLimit(limit) => {
            format!("exceeded its memory limit of {} MiB", limit / (1 << 20))
        }
        CallErrorKind::OutputTooLarge { size: Some(size), limit } => {
            format!("returned {size} bytes, over the output limit of {limit} bytes")
        }
        CallErrorKind::OutputTooLarge { size: None, limit } => {
            format!("returned more than its output limit of {limit} bytes")
        }
        CallErrorKind::Trap(message) => format!("trapped: {message}"),
        CallErrorKind::Instantiate(message) => format!("could not be instantiated: {message}"),
    }
}

/// A translation plugin, as the host sees it.
pub trait Plugin: Send + Sync {
    /// The plugin's metadata (read once at load time).
    fn metadata(&self) -> &PluginMetadata;
    /// Checks a ServiceSet's `spec.provider.config` (JSON text).
    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError>;
    /// Translates a ServiceSet into desired objects per service.
    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError>;
    /// Maps one service's observed objects to its state.
    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError>;
    /// This plugin for the calls of one ServiceSet's reconcile. They may share one instance:
    /// they all carry that ServiceSet's data, so nothing a plugin keeps can reach another
    /// ServiceSet. Drop the session at the end of the reconcile; a new one starts clean.
    fn session(self: Arc<Self>) -> Arc<dyn Plugin>;
}

/// Runs a plugin call on tokio's blocking pool: plugin calls are synchronous and CPU-bound (up
/// to their time limit), so a slow or looping plugin never stalls the async executor.
pub async fn call_blocking<R: Send + 'static>(call: impl FnOnce() -> R + Send + 'static) -> R {
    match tokio::task::spawn_blocking(call).await {
        Ok(result) => result,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// A plugin crate linked into the host process: no sandbox, no limits. For tests and for
/// benchmarking a plugin against its own WASM build.
pub struct NativePlugin<P> {
    metadata: PluginMetadata,
    plugin: PhantomData<fn() -> P>,
}

impl<P: PluginApi> NativePlugin<P> {
    /// Wraps plugin `P`.
    pub fn new() -> Self {
        Self { metadata: P::metadata(), plugin: PhantomData }
    }
}

impl<P: PluginApi> Default for NativePlugin<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: PluginApi + 'static> Plugin for NativePlugin<P> {
    fn metadata(&self) -> &PluginMetadata {
        &self.metadata
    }

    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        Ok(P::validate_config(config.to_string()))
    }

    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        Ok(P::translate(input.clone()))
    }

    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        Ok(P::map_status(input.clone()))
    }

    /// Native plugins have no instances: the session is the plugin itself.
    fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
        self
    }
}
