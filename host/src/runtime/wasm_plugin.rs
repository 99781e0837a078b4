//! A loaded plugin component, implementing [`Plugin`]: every call gets a fresh store and
//! instance (no state leaks between ServiceSets), the plugin's limits, and error classification.

use super::bindings::{self, AdapterPluginPre, Guest};
use super::guest_log::GuestLog;
use super::sandbox::CallState;
use super::{ComponentInfo, EpochTicker, Limits, LoadError, Runtime};
use crate::plugin::{CallError, CallErrorKind, Function, Plugin};
use ksm_plugin_sdk::contract::{
    ConfigError, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
    TranslateInput,
};
use std::sync::Arc;
use wasmtime::{Engine, Store, Trap};

/// A plugin component ready to be called.
pub struct WasmPlugin {
    engine: Engine,
    /// Keeps the epoch advancing (and so timeouts working) even if the runtime is dropped.
    _ticker: Arc<EpochTicker>,
    pre: AdapterPluginPre<CallState>,
    wasi: bool,
    limits: Limits,
    info: ComponentInfo,
    metadata: PluginMetadata,
    log: Arc<GuestLog>,
}

impl WasmPlugin {
    pub(super) fn new(
        engine: Engine,
        ticker: Arc<EpochTicker>,
        pre: AdapterPluginPre<CallState>,
        wasi: bool,
        limits: Limits,
        info: ComponentInfo,
    ) -> Result<Self, LoadError> {
        let log = Arc::new(GuestLog::new(format!("sha256:{}", &info.sha256[..12])));
        let placeholder = PluginMetadata {
            name: format!("sha256:{}", &info.sha256[..12]),
            version: String::new(),
            contract_version: String::new(),
            creates: vec![],
            reads: vec![],
        };
        let mut plugin = Self { engine, _ticker: ticker, pre, wasi, limits, info, metadata: placeholder, log };
        let metadata = plugin.call(Function::Metadata, |g, s| g.call_metadata(s), |m| m.name.len())?;
        plugin.log = Arc::new(GuestLog::new(metadata.name.clone()));
        plugin.metadata = bindings::metadata(metadata);
        Ok(plugin)
    }

    /// Facts about the component (size, digest, imports, exports).
    pub fn info(&self) -> &ComponentInfo {
        &self.info
    }

    /// The limits each call runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Runs `f` on a fresh instance in a fresh store under the plugin's limits. `size` tells
    /// how many bytes of text the answer holds.
    fn call<R>(
        &self,
        function: Function,
        f: impl FnOnce(&Guest, &mut Store<CallState>) -> wasmtime::Result<R>,
        size: impl FnOnce(&R) -> usize,
    ) -> Result<R, CallError> {
        let state = if self.wasi {
            CallState::with_wasi(self.limits.memory, self.log.clone())
        } else {
            CallState::new(self.limits.memory, self.log.clone())
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(Runtime::deadline_ticks(self.limits.timeout));
        let error = |kind| CallError { plugin: self.metadata.name.clone(), function, kind };

        let result = match self.pre.instantiate(&mut store) {
            Ok(instance) => f(instance.ksm_adapter_plugin(), &mut store).map_err(|e| self.classify(&store, e)),
            Err(e) => Err(match self.classify(&store, e) {
                CallErrorKind::Trap(message) => CallErrorKind::Instantiate(message),
                other => other,
            }),
        };
        store.data().flush_output();
        let answer = result.map_err(error)?;
        let bytes = size(&answer);
        if bytes > self.limits.output {
            return Err(error(CallErrorKind::OutputTooLarge { size: bytes, limit: self.limits.output }));
        }
        Ok(answer)
    }

    /// Tells a timeout and a memory limit from other traps.
    fn classify(&self, store: &Store<CallState>, error: wasmtime::Error) -> CallErrorKind {
        if store.data().limiter.exceeded {
            return CallErrorKind::MemoryLimit(self.limits.memory);
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallErrorKind::Timeout(self.limits.timeout),
            Some(trap) => CallErrorKind::Trap(trap.to_string()),
            None => CallErrorKind::Trap(error.root_cause().to_string()),
        }
    }
}

impl Plugin for WasmPlugin {
    fn metadata(&self) -> &PluginMetadata {
        &self.metadata
    }

    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        let result = self.call(
            Function::ValidateConfig,
            |g, s| g.call_validate_config(s, config),
            |r| r.as_ref().err().map_or(0, |errors| errors.iter().map(|e| e.path.len() + e.message.len()).sum()),
        )?;
        Ok(result.map_err(bindings::config_errors))
    }

    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        let input = bindings::translate_input(input);
        let result = self.call(Function::Translate, |g, s| g.call_translate(s, &input), bindings::translation_size)?;
        Ok(bindings::translation(result))
    }

    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        let input = bindings::status_input(input);
        let result = self.call(
            Function::MapStatus,
            |g, s| g.call_map_status(s, &input),
            |r| match r {
                Ok(s) => s.version.as_ref().map_or(0, String::len) + s.failure_message.as_ref().map_or(0, String::len),
                Err(bindings::exports::ksm::adapter::plugin::StatusError::InvalidInput(m)) => m.len(),
            },
        )?;
        Ok(bindings::service_status(result))
    }
}
