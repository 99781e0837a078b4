//! A loaded plugin component, implementing [`Plugin`]: every call gets a fresh store and
//! instance, or, within a [`Plugin::session`] (one ServiceSet's reconcile), the calls share one
//! instance, so no state leaks between ServiceSets. Every call runs under the plugin's limits
//! and its errors are classified; an instance whose call failed is never called again.

use super::bindings::{PluginInstance, PluginPre};
use super::component::ComponentInfo;
use super::epoch::{EpochTicker, deadline_ticks};
use super::errors::LoadError;
use super::guest_log::GuestLog;
use super::sandbox::CallState;
use crate::plugin::Limits;
use crate::plugin::{CallError, CallErrorKind, Function, Plugin};
use ksm_plugin_sdk::contract::{
    ConfigError, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
    TranslateInput,
};
use std::sync::{Arc, Mutex};
use wasmtime::{Engine, Store, Trap};

/// A plugin component ready to be called.
pub struct WasmPlugin {
    engine: Engine,
    /// Keeps the epoch advancing (and so timeouts working) even if the runtime is dropped.
    _ticker: Arc<EpochTicker>,
    pre: PluginPre,
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
        pre: PluginPre,
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
        let metadata = plugin.call(&mut None, Function::Metadata, |p, s| p.metadata(s), |m| m.name.len())?;
        plugin.log = Arc::new(GuestLog::new(metadata.name.clone()));
        plugin.metadata = metadata;
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

    /// A fresh store and instance under the plugin's limits.
    fn instantiate(&self) -> Result<Instance, CallErrorKind> {
        let state = if self.wasi {
            CallState::with_wasi(self.limits.memory, self.log.clone())
        } else {
            CallState::new(self.limits.memory, self.log.clone())
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_hostcall_fuel(copy_bound(self.limits.output));
        store.set_epoch_deadline(deadline_ticks(self.limits.timeout));
        match self.pre.instantiate(&mut store) {
            Ok(bindings) => Ok(Instance { store, bindings }),
            Err(e) => Err(match self.classify(&store, e) {
                CallErrorKind::Trap(message) => CallErrorKind::Instantiate(message),
                other => other,
            }),
        }
    }

    /// Runs `f` under the plugin's limits on the instance in `slot`, instantiating one if the
    /// slot is empty; a failed call empties the slot. `size` tells how many bytes of text the
    /// answer holds.
    fn call<R>(
        &self,
        slot: &mut Option<Instance>,
        function: Function,
        f: impl FnOnce(&PluginInstance, &mut Store<CallState>) -> wasmtime::Result<R>,
        size: impl FnOnce(&R) -> usize,
    ) -> Result<R, CallError> {
        let error = |kind| CallError { plugin: self.metadata.name.clone(), function, kind };
        let instance = match slot {
            Some(instance) => instance,
            None => slot.insert(self.instantiate().map_err(error)?),
        };
        instance.store.set_epoch_deadline(deadline_ticks(self.limits.timeout));
        let result = f(&instance.bindings, &mut instance.store).map_err(|e| self.classify(&instance.store, e));
        instance.store.data().flush_output();
        let answer = result.map_err(|kind| {
            *slot = None;
            error(kind)
        })?;
        let bytes = size(&answer);
        if bytes > self.limits.output {
            *slot = None;
            return Err(error(CallErrorKind::OutputTooLarge { size: Some(bytes), limit: self.limits.output }));
        }
        Ok(answer)
    }

    fn validate_config_on(
        &self,
        slot: &mut Option<Instance>,
        config: &str,
    ) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        self.call(
            slot,
            Function::ValidateConfig,
            |p, s| p.validate_config(s, config),
            |r| r.as_ref().err().map_or(0, |errors| config_errors_size(errors)),
        )
    }

    fn translate_on(
        &self,
        slot: &mut Option<Instance>,
        input: &TranslateInput,
    ) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        self.call(slot, Function::Translate, |p, s| p.translate(s, input), translation_size)
    }

    fn map_status_on(
        &self,
        slot: &mut Option<Instance>,
        input: &StatusInput,
    ) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        self.call(
            slot,
            Function::MapStatus,
            |p, s| p.map_status(s, input),
            |r| match r {
                Ok(s) => s.version.as_ref().map_or(0, String::len) + s.failure_message.as_ref().map_or(0, String::len),
                Err(StatusError::InvalidInput(m)) => m.len(),
            },
        )
    }

    /// Tells a timeout, a memory limit and an answer too large to copy from other traps.
    fn classify(&self, store: &Store<CallState>, error: wasmtime::Error) -> CallErrorKind {
        if store.data().limiter.exceeded {
            return CallErrorKind::MemoryLimit(self.limits.memory);
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => CallErrorKind::Timeout(self.limits.timeout),
            Some(trap) => CallErrorKind::Trap(trap.to_string()),
            // wasmtime's error type for exhausted hostcall fuel is private; its message is not.
            None if error.root_cause().to_string().starts_with(FUEL_EXHAUSTED) => {
                CallErrorKind::OutputTooLarge { size: None, limit: self.limits.output }
            }
            None => CallErrorKind::Trap(error.root_cause().to_string()),
        }
    }
}

/// Bytes of text in config errors (the output limit counts the text a plugin returns).
fn config_errors_size(errors: &[ConfigError]) -> usize {
    errors.iter().map(|e| e.path.len() + e.message.len()).sum()
}

/// Bytes of text in a translation.
fn translation_size(result: &Result<Vec<ServiceTranslation>, TranslateError>) -> usize {
    match result {
        Ok(services) => services
            .iter()
            .map(|s| {
                let outcome = match &s.outcome {
                    Ok(objects) => objects.iter().map(String::len).sum(),
                    Err(e) => e.message().len(),
                };
                let claims: usize =
                    s.claims.iter().map(|c| c.target.len() + c.kind.len() + c.namespace.len() + c.name.len()).sum();
                s.service.len() + outcome + claims
            })
            .sum(),
        Err(TranslateError::InvalidConfig(errors)) => config_errors_size(errors),
        Err(TranslateError::InvalidInput(m)) => m.len(),
    }
}

/// How wasmtime's error for exhausted hostcall fuel begins.
const FUEL_EXHAUSTED: &str = "too much data is being copied between the host and the guest";

/// Bytes the host may allocate to copy one answer (or one `log` message) out of a plugin:
/// wasmtime counts them ("hostcall fuel") and stops the copy before it allocates more. Without
/// this bound, a list of a million entries that all point at one string in the plugin's memory
/// would be copied a million times before the output limit is checked. Twice the output limit:
/// the text plus the host's own list and record structures.
fn copy_bound(output: usize) -> usize {
    output.saturating_mul(2)
}

/// A store and the plugin instantiated in it.
struct Instance {
    store: Store<CallState>,
    bindings: PluginInstance,
}

impl Plugin for WasmPlugin {
    fn metadata(&self) -> &PluginMetadata {
        &self.metadata
    }

    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        self.validate_config_on(&mut None, config)
    }

    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        self.translate_on(&mut None, input)
    }

    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        self.map_status_on(&mut None, input)
    }

    fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
        Arc::new(Session { plugin: self, instance: Mutex::new(None) })
    }
}

/// The calls of one ServiceSet's reconcile, on one instance made at the first call.
struct Session {
    plugin: Arc<WasmPlugin>,
    instance: Mutex<Option<Instance>>,
}

impl Session {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Instance>> {
        // A panic while holding the slot cannot leave a half-made instance: take it anew.
        self.instance.lock().unwrap_or_else(|poisoned| {
            let mut slot = poisoned.into_inner();
            *slot = None;
            slot
        })
    }
}

impl Plugin for Session {
    fn metadata(&self) -> &PluginMetadata {
        &self.plugin.metadata
    }

    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        self.plugin.validate_config_on(&mut self.slot(), config)
    }

    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        self.plugin.translate_on(&mut self.slot(), input)
    }

    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        self.plugin.map_status_on(&mut self.slot(), input)
    }

    fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
        self.plugin.clone().session()
    }
}
