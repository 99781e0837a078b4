//! The WASM plugin runtime: one wasmtime [`Engine`] for all plugins, each component compiled
//! once per content digest, and a fresh, limited store for every call. Instances live in
//! wasmtime's pooling allocator: their memory slots are mapped once and reset in place, not
//! mapped and unmapped per instance (unmapping cost a TLB-shootdown IPI to every core).
//!
//! Sandbox: components get only the contract's `host.log` import; a component that imports
//! WASI (other languages' toolchains produce such components) is linked against a deny-all
//! WASI context: no preopened directories, environment, arguments, network or stdin, clock
//! subscriptions that never block, and its stdout/stderr goes to the host log. Wall time is bounded by epoch interruption, linear memory
//! by a limiter, output by a bound on the bytes copied into the host (checked before each copy)
//! and a size check; any of them ends the call with a typed [`CallError`] and leaves the runtime
//! ready for the next call.
//!
//! [`CallError`]: crate::plugin::CallError

mod bindings;
mod component;
mod engine;
mod epoch;
mod errors;
mod guest_log;
mod precompiled;
mod sandbox;
mod wasm_plugin;

pub use bindings::{CONTRACT_VERSIONS, export_of};
pub use component::ComponentInfo;
pub use errors::{LoadError, MAX_COMPONENT_BYTES, RuntimeError};
pub use precompiled::{DiskCache, Origin};
pub use wasm_plugin::WasmPlugin;

use crate::plugin::Limits;
use bindings::PluginPre;
use component::{check_header, check_imports, contract_version};
use epoch::EpochTicker;
use sandbox::CallState;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

/// Plugin instances that may exist at once with [`Runtime::new`] (commands that call plugins
/// one at a time).
const DEFAULT_INSTANCES: u32 = 16;

/// Compiled components kept in memory (the least recently used go first); a plugin that serves
/// keeps its own, so this only decides what a reload of the same bytes may reuse.
const COMPILED_IN_MEMORY: usize = 16;

/// The runtime shared by all plugins.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    wasi_linker: Linker<CallState>,
    compiled: Mutex<Compiled>,
    disk: Option<DiskCache>,
    /// Shared with every loaded plugin: timeouts keep working while any plugin is alive.
    ticker: Arc<EpochTicker>,
}

impl Runtime {
    /// Creates the engine, the linkers and the epoch ticker; components are compiled once per
    /// process.
    pub fn new() -> Result<Self, RuntimeError> {
        Self::with_options(None, DEFAULT_INSTANCES)
    }

    /// Like [`Runtime::new`], with room for `instances` plugin instances at once (one per
    /// concurrent call or session; instantiating beyond it fails) and, with `disk`, compiled
    /// components that survive restarts.
    pub fn with_options(disk: Option<DiskCache>, instances: u32) -> Result<Self, RuntimeError> {
        let engine = Engine::new(&engine::config(instances)).map_err(RuntimeError::Engine)?;
        let mut linker = Linker::new(&engine);
        bindings::add_to_linker(&mut linker).map_err(RuntimeError::Linker)?;
        let mut wasi_linker = linker.clone();
        wasmtime_wasi::p2::add_to_linker_sync(&mut wasi_linker).map_err(RuntimeError::Linker)?;
        sandbox::never_block(&mut wasi_linker).map_err(RuntimeError::Linker)?;
        let ticker = Arc::new(EpochTicker::start(engine.clone()));
        Ok(Self { engine, linker, wasi_linker, compiled: Mutex::default(), disk, ticker })
    }

    /// Loads a plugin component: compiles it (once per digest), checks its imports and
    /// contract version, and reads its metadata under `limits`.
    pub fn load(&self, bytes: &[u8], limits: Limits) -> Result<WasmPlugin, LoadError> {
        if bytes.len() > MAX_COMPONENT_BYTES {
            return Err(LoadError::TooLarge(bytes.len()));
        }
        check_header(bytes)?;
        let sha256 = hex::encode(Sha256::digest(bytes));
        let (component, origin) = self.compile(&sha256, bytes)?;
        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let wasi = check_imports(&imports)?;
        let version = contract_version(&exports)?;
        let linker = if wasi { &self.wasi_linker } else { &self.linker };
        let pre = linker.instantiate_pre(&component).map_err(|e| LoadError::Link(format!("{e:#}")))?;
        let pre = PluginPre::new(version, pre).map_err(|e| LoadError::Link(format!("{e:#}")))?;
        let info = ComponentInfo { size: bytes.len(), sha256, imports, exports, origin };
        let plugin = WasmPlugin::new(self.engine.clone(), self.ticker.clone(), pre, wasi, limits, info)?;
        let found = &crate::plugin::Plugin::metadata(&plugin).contract_version;
        // The metadata must say the version the exports implement.
        if found != version {
            return Err(LoadError::UnsupportedContract { found: found.clone() });
        }
        Ok(plugin)
    }

    fn compile(&self, sha256: &str, bytes: &[u8]) -> Result<(Component, Origin), LoadError> {
        if let Some(component) = self.compiled.lock().unwrap_or_else(|e| e.into_inner()).get(sha256) {
            return Ok((component, Origin::Memory));
        }
        let compiled = match (self.built_in(bytes), &self.disk) {
            (Some(component), _) => Ok((component, Origin::BuiltIn)),
            (None, Some(disk)) => disk.load(&self.engine, sha256, bytes),
            (None, None) => Component::new(&self.engine, bytes).map(|c| (c, Origin::Compiled)),
        };
        let (component, origin) = compiled.map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        self.compiled.lock().unwrap_or_else(|e| e.into_inner()).insert(sha256, component.clone());
        Ok((component, origin))
    }

    /// The code the build compiled ahead of time when `bytes` are a built-in plugin's, unless
    /// it does not fit this engine (another CPU than the build's): then it is compiled as any.
    fn built_in(&self, bytes: &[u8]) -> Option<Component> {
        let code = crate::builtin::compiled_ahead(bytes)?;
        // SAFETY: `code` is what `precompile_component` wrote, in this binary's build script, for
        // these very bytes under `engine::config`; wasmtime checks that it fits this engine.
        match unsafe { Component::deserialize(&self.engine, code) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::info!(
                    "the built-in plugin's ahead-of-time code does not fit this machine, compiling it: {e:#}"
                );
                None
            }
        }
    }
}

/// Compiled components by sha256, at most [`COMPILED_IN_MEMORY`], with when each was last used.
#[derive(Default)]
struct Compiled {
    components: HashMap<String, (Component, u64)>,
    clock: u64,
}

impl Compiled {
    fn get(&mut self, sha256: &str) -> Option<Component> {
        self.clock += 1;
        let (component, used) = self.components.get_mut(sha256)?;
        *used = self.clock;
        Some(component.clone())
    }

    fn insert(&mut self, sha256: &str, component: Component) {
        self.clock += 1;
        self.components.insert(sha256.to_string(), (component, self.clock));
        if self.components.len() > COMPILED_IN_MEMORY {
            let oldest = self.components.iter().min_by_key(|(_, (_, used))| *used).map(|(sha, _)| sha.clone());
            self.components.remove(&oldest.expect("the map is not empty"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_modules_and_garbage_are_refused_before_compiling() {
        assert!(matches!(check_header(b"\0asm\x01\0\0\0rest"), Err(LoadError::NotAComponent("a core module"))));
        assert!(matches!(check_header(b"hello"), Err(LoadError::NotAComponent(_))));
    }

    #[test]
    fn imports_beyond_the_contract_and_wasi_are_refused() {
        assert!(!check_imports(&["ksm:adapter/host@0.1.0".into()]).unwrap());
        assert!(check_imports(&["wasi:cli/stdout@0.2.6".into()]).unwrap());
        let err = check_imports(&["evil:net/socket".into()]).unwrap_err();
        assert!(err.to_string().contains("evil:net/socket"), "{err}");
    }

    #[test]
    fn another_contract_version_is_named() {
        assert_eq!(contract_version(&["ksm:adapter/plugin@0.1.0".into()]).unwrap(), "0.1.0");
        assert_eq!(contract_version(&["ksm:adapter/plugin@0.2.0".into()]).unwrap(), "0.2.0");
        let err = contract_version(&["ksm:adapter/plugin@0.3.0".into()]).unwrap_err();
        assert_eq!(err.to_string(), "the plugin targets contract 0.3.0; this host supports 0.1.0, 0.2.0");
        let missing = contract_version(&[]).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "the component does not export ksm:adapter/plugin@0.1.0 or ksm:adapter/plugin@0.2.0"
        );
    }

    #[test]
    fn instances_beyond_the_pool_fail_to_instantiate_and_freed_slots_are_reused() {
        use crate::plugin::{CallErrorKind, Plugin};
        let runtime = Runtime::with_options(None, 2).unwrap();
        let plugin = Arc::new(runtime.load(crate::builtin::FLUX, Limits::default()).unwrap());
        for _ in 0..10 {
            plugin.validate_config("{}").unwrap().unwrap();
        }
        let holding: Vec<_> = (0..2).map(|_| plugin.clone().session()).collect();
        for session in &holding {
            session.validate_config("{}").unwrap().unwrap();
        }
        let third = plugin.clone().session();
        let err = third.validate_config("{}").unwrap_err();
        assert!(matches!(&err.kind, CallErrorKind::Instantiate(m) if m.contains("concurrent")), "{err}");
        drop(holding);
        third.validate_config("{}").unwrap().unwrap();
    }

    /// Page faults taken so far by the calling thread.
    fn minor_faults() -> i64 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` is a valid out-pointer for one `rusage`.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) }, 0);
        // SAFETY: getrusage filled it.
        unsafe { usage.assume_init() }.ru_minflt
    }

    #[test]
    fn a_reused_pool_slot_faults_nothing_back_in() {
        use crate::plugin::Plugin;
        use ksm_flux_plugin::testdata;
        // One slot: every call gets the slot the previous one freed.
        let runtime = Runtime::with_options(None, 1).unwrap();
        let plugin = runtime.load(crate::builtin::FLUX, Limits::default()).unwrap();
        let input = testdata::translate_case_input(&testdata::translate_dir().join("helm-chart-source")).unwrap();
        let call = || plugin.translate(&input).unwrap().unwrap();
        for _ in 0..20 {
            call();
        }
        let (calls, before) = (200, minor_faults());
        for _ in 0..calls {
            call();
        }
        let faults = minor_faults() - before;
        assert!(faults < calls / 4, "{faults} page faults in {calls} calls on a warm slot");
    }

    #[test]
    fn the_built_in_plugin_loads_from_the_code_compiled_with_the_build_and_no_other_does() {
        for instances in [1, 64] {
            let runtime = Runtime::with_options(None, instances).unwrap();
            let flux = runtime.load(crate::builtin::FLUX, Limits::default()).unwrap();
            assert_eq!(flux.info().origin, Origin::BuiltIn, "the build's engine configuration is the runtime's");
        }
        let other = precompiled::tests::variant(0);
        let runtime = Runtime::new().unwrap();
        assert_eq!(runtime.load(&other, Limits::default()).unwrap().info().origin, Origin::Compiled);
    }

    #[test]
    fn components_over_the_size_limit_are_refused_before_compiling() {
        let mut huge = crate::builtin::FLUX.to_vec();
        huge.resize(MAX_COMPONENT_BYTES + 1, 0);
        let err = Runtime::new().unwrap().load(&huge, Limits::default()).err().expect("refused");
        assert!(matches!(err, LoadError::TooLarge(n) if n == MAX_COMPONENT_BYTES + 1), "{err}");
    }

    #[test]
    fn the_compiled_components_in_memory_are_bounded_least_recently_used_first() {
        let runtime = Runtime::new().unwrap();
        let engine = &runtime.engine;
        let component = Component::new(engine, crate::builtin::FLUX).unwrap();
        let mut compiled = Compiled::default();
        for n in 0..COMPILED_IN_MEMORY {
            compiled.insert(&n.to_string(), component.clone());
        }
        assert!(compiled.get("0").is_some(), "0 is used again: now the most recent");
        compiled.insert("new", component);
        assert_eq!(compiled.components.len(), COMPILED_IN_MEMORY);
        assert!(compiled.get("1").is_none(), "the least recently used went");
        assert!(compiled.get("0").is_some() && compiled.get("new").is_some());
    }
}
