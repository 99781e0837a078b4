//! Containment: a hostile plugin (built from source in `plugins/hostile`, once without WASI and
//! once for WASI preview 2) loops, exhausts memory, traps, floods its output and snoops; each
//! call ends in a typed error naming the plugin and the function, and the next call works.

use ksm_adapter::builtin;
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::{CallError, CallErrorKind, Function, Plugin};
use ksm_adapter::runtime::{LoadError, Runtime, WasmPlugin};
use ksm_plugin_sdk::contract::{Target, TranslateInput};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[path = "wat_plugin.rs"]
mod wat_plugin;

const PLAIN: &[u8] = include_bytes!(env!("KSM_HOSTILE_WASM"));
const WASI: &[u8] = include_bytes!(env!("KSM_HOSTILE_WASI_WASM"));

fn limits() -> Limits {
    Limits { timeout: Duration::from_millis(300), memory: 32 << 20, output: 1 << 20 }
}

/// Input whose ServiceSet name tells the hostile plugin how to behave.
fn input(behaviour: &str) -> TranslateInput {
    TranslateInput {
        service_set: json!({"metadata": {"name": behaviour, "namespace": "team-a"}, "spec": {}}).to_string(),
        templates: vec![],
        sources: vec![],
        target: Target::SelfManagement,
        system_namespace: "kcm-system".into(),
    }
}

fn call_error(plugin: &WasmPlugin, behaviour: &str) -> CallError {
    match plugin.translate(&input(behaviour)) {
        Err(e) => e,
        Ok(answer) => panic!("{behaviour}: expected a call error, got {answer:?}"),
    }
}

/// The plugin still answers honestly after misbehaving.
fn assert_recovers(plugin: &WasmPlugin) {
    let answer = plugin.translate(&input("honest")).expect("call after a failure").expect("translation");
    assert_eq!(answer[0].service, "honest");
}

/// Runs `test` on both builds of the hostile plugin, naming the build when it fails.
fn for_both_builds(test: impl Fn(&WasmPlugin)) {
    let runtime = Runtime::new().unwrap();
    for (build, bytes) in [("wasm32-unknown-unknown", PLAIN), ("wasm32-wasip2", WASI)] {
        let plugin = runtime.load(bytes, limits()).unwrap();
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(&plugin))) {
            eprintln!("failed with the {build} build");
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn an_infinite_loop_ends_in_a_timeout_within_the_deadline() {
    for_both_builds(|plugin| {
        let started = Instant::now();
        let error = call_error(plugin, "loop");
        let elapsed = started.elapsed();
        assert_eq!(error.kind, CallErrorKind::Timeout(limits().timeout));
        assert_eq!((error.plugin.as_str(), error.function), ("hostile", Function::Translate));
        assert_eq!(error.to_string(), "plugin \"hostile\": translate exceeded its time limit of 300ms");
        // The deadline is enforced in 10 ms epochs; allow generous scheduling slack on 2 cores.
        assert!(elapsed >= limits().timeout && elapsed < limits().timeout * 3, "{elapsed:?}");
        assert_recovers(plugin);
    });
}

#[test]
fn unbounded_memory_growth_ends_at_the_memory_limit() {
    for_both_builds(|plugin| {
        let error = call_error(plugin, "oom");
        assert_eq!(error.kind, CallErrorKind::MemoryLimit(32 << 20), "{error}");
        assert!(error.to_string().contains("exceeded its memory limit of 32 MiB"), "{error}");
        assert_recovers(plugin);
    });
}

#[test]
fn a_trap_is_an_error_not_a_host_panic() {
    for_both_builds(|plugin| {
        let error = call_error(plugin, "trap");
        let CallErrorKind::Trap(message) = &error.kind else { panic!("expected a trap, got {error}") };
        assert!(message.contains("unreachable"), "{message}");
        assert_recovers(plugin);
    });
}

#[test]
fn output_over_the_limit_is_refused() {
    // 8 MiB of text, more than twice the limit: stopped before it is copied into the host.
    for_both_builds(|plugin| {
        let error = call_error(plugin, "huge");
        assert_eq!(error.kind, CallErrorKind::OutputTooLarge { size: None, limit: 1 << 20 }, "{error}");
        assert!(error.to_string().contains("returned more than its output limit of 1048576 bytes"), "{error}");
        assert_recovers(plugin);
    });
    // Over the limit but within what may be copied: measured, then refused.
    let roomy = Limits { output: 5 << 20, ..limits() };
    let plugin = Runtime::new().unwrap().load(PLAIN, roomy).unwrap();
    let error = call_error(&plugin, "huge");
    let CallErrorKind::OutputTooLarge { size: Some(size), limit } = error.kind else { panic!("{error}") };
    assert!(size > 8 << 20 && limit == 5 << 20, "{size} {limit}");
}

/// Runs `f` and returns its result and the most bytes it held allocated on this thread at once.
fn peak_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = allocation::live();
    allocation::reset_peak();
    let result = f();
    (result, allocation::peak().saturating_sub(start).max(0) as usize)
}

/// Answers that cost a plugin a few KiB and would cost the host 512 MiB to copy (512 list entries
/// pointing at one 1 MiB string) are refused before the copy, from every function that returns a
/// list: the host allocates no more than the copy bound (twice the output limit).
#[test]
fn answers_that_would_amplify_in_the_copy_are_refused_before_copying() {
    use wat_plugin::{Amplify, component};
    let refused = CallErrorKind::OutputTooLarge { size: None, limit: limits().output };
    let bound = 2 * limits().output + (1 << 20);
    let runtime = Runtime::new().unwrap();

    let plugin = runtime.load(&component(&Amplify { kinds: 1, config_errors: 512, objects: 512 }), limits()).unwrap();
    assert_eq!(plugin.metadata().name, "wat-amplify");
    let (result, peak) = peak_allocation(|| plugin.translate(&input("amplify")));
    assert_eq!(result.unwrap_err().kind, refused);
    assert!(peak < bound, "translate made the host allocate {peak} bytes");
    let (result, peak) = peak_allocation(|| plugin.validate_config("{}"));
    assert_eq!(result.unwrap_err().kind, refused);
    assert!(peak < bound, "validate-config made the host allocate {peak} bytes");

    let amplified_metadata = component(&Amplify { kinds: 512, config_errors: 0, objects: 0 });
    // Compiled by the first load, so the second measures the call alone.
    assert!(runtime.load(&amplified_metadata, limits()).is_err());
    let (result, peak) = peak_allocation(|| runtime.load(&amplified_metadata, limits()));
    match result {
        Err(LoadError::Metadata(error)) => assert_eq!(error.kind, refused, "{error}"),
        other => panic!("expected the metadata call to be refused, got {:?}", other.map(|p| p.metadata().clone())),
    }
    assert!(peak < bound, "metadata made the host allocate {peak} bytes");
}

/// A global allocator that counts the bytes allocated by each thread.
mod allocation {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<i64> = const { Cell::new(0) };
        static PEAK: Cell<i64> = const { Cell::new(0) };
    }

    struct Counting;

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn track(delta: i64) {
        let _ = LIVE.try_with(|live| {
            live.set(live.get() + delta);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
        });
    }

    pub fn live() -> i64 {
        LIVE.with(Cell::get)
    }

    pub fn peak() -> i64 {
        PEAK.with(Cell::get)
    }

    pub fn reset_peak() {
        PEAK.with(|peak| peak.set(live()));
    }

    // SAFETY: every call is forwarded to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                track(layout.size() as i64);
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                track(layout.size() as i64);
            }
            p
        }

        unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
            unsafe { System.dealloc(p, layout) };
            track(-(layout.size() as i64));
        }

        unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
            let new = unsafe { System.realloc(p, layout, size) };
            if !new.is_null() {
                track(size as i64 - layout.size() as i64);
            }
            new
        }
    }
}

/// A component without WASI imports cannot even ask (see the imports test); one that imports
/// WASI gets a context that shows nothing.
#[test]
fn the_wasi_sandbox_shows_no_environment_files_or_network() {
    let plugin = Runtime::new().unwrap().load(WASI, limits()).unwrap();
    let answer = plugin.translate(&input("snoop")).unwrap().unwrap();
    let object: Value = serde_json::from_str(&answer[0].outcome.as_ref().unwrap()[0]).unwrap();
    let data = &object["data"];
    assert_eq!(data["envVars"], "0", "{data}");
    assert_eq!(data["args"], "0", "{data}");
    assert_eq!(data["rootDirReadable"], "false", "{data}");
    assert_eq!(data["etcPasswdReadable"], "false", "{data}");
    assert_eq!(data["tcpConnect"], "false", "{data}");
}

/// A host call blocked in WASI's `poll` is beyond the epoch deadline's reach; the sandbox's
/// clock subscriptions are ready at once instead, so a sleep holds no instance or thread.
#[test]
fn a_sleeping_plugin_never_blocks_its_call() {
    let plugin = Runtime::new().unwrap().load(WASI, limits()).unwrap();
    let started = Instant::now();
    let answer = plugin.translate(&input("sleep"));
    let elapsed = started.elapsed();
    assert!(elapsed < limits().timeout * 3, "the call took {elapsed:?}");
    assert_eq!(answer.expect("the call").expect("a translation")[0].service, "sleep");
}

#[test]
fn wasi_components_are_accepted_and_plain_ones_import_only_the_log() {
    let runtime = Runtime::new().unwrap();
    let wasi = runtime.load(WASI, limits()).unwrap();
    assert!(wasi.info().imports.iter().any(|i| i.starts_with("wasi:cli/")), "{:?}", wasi.info().imports);
    let plain = runtime.load(PLAIN, limits()).unwrap();
    assert_eq!(plain.info().imports, ["ksm:adapter/host@0.2.0"]);
    let flux = runtime.load(builtin::FLUX, Limits::default()).unwrap();
    assert!(flux.info().imports.is_empty(), "the Flux plugin imports nothing: {:?}", flux.info().imports);
}

#[test]
fn a_looping_call_does_not_hold_up_calls_on_other_threads() {
    let runtime = Runtime::new().unwrap();
    let slow = Limits { timeout: Duration::from_secs(2), ..limits() };
    let hostile = runtime.load(PLAIN, slow).unwrap();
    let honest = runtime.load(PLAIN, limits()).unwrap();
    std::thread::scope(|s| {
        let looping = s.spawn(|| call_error(&hostile, "loop"));
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        assert_recovers(&honest);
        assert!(started.elapsed() < Duration::from_secs(1), "blocked for {:?}", started.elapsed());
        assert_eq!(looping.join().unwrap().kind, CallErrorKind::Timeout(Duration::from_secs(2)));
    });
}

#[tokio::test(flavor = "current_thread")]
async fn a_looping_call_does_not_stall_the_async_executor() {
    let plugin: std::sync::Arc<dyn Plugin> =
        std::sync::Arc::new(Runtime::new().unwrap().load(PLAIN, limits()).unwrap());
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = ticks.clone();
    // On a single-threaded executor this ticker only runs if the plugin call is off the executor.
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let error = ksm_adapter::plugin::call_blocking(move || plugin.translate(&input("loop"))).await.unwrap_err();
    ticker.abort();
    assert_eq!(error.kind, CallErrorKind::Timeout(limits().timeout));
    let ticks = ticks.load(std::sync::atomic::Ordering::Relaxed);
    assert!(ticks >= 10, "the executor ran only {ticks} ticks during a 300 ms plugin call");
}

/// A component of many core modules, each with its own memory, would take the pool slots of
/// several plugins: it is refused when compiled, before any of it runs.
#[test]
fn a_component_needing_more_than_its_share_of_the_pool_is_refused() {
    let instances = "(core instance (instantiate $m))".repeat(5);
    let component = wat::parse_str(format!("(component (core module $m (memory 1)) {instances})")).unwrap();
    let err = Runtime::new().unwrap().load(&component, limits()).err().expect("refused");
    assert!(matches!(&err, LoadError::Compile(m) if m.contains("5 Wasm linear memories")), "{err}");
}

#[test]
fn bytes_that_are_not_a_component_are_refused_with_the_reason() {
    let runtime = Runtime::new().unwrap();
    let core_module = b"\0asm\x01\0\0\0";
    let err = runtime.load(core_module, limits()).err().expect("a core module is refused");
    assert!(matches!(err, LoadError::NotAComponent("a core module")), "{err}");
    assert!(err.to_string().contains("not a WASM component"), "{err}");
    let err = runtime.load(b"#!/bin/sh\n", limits()).err().unwrap();
    assert!(matches!(err, LoadError::NotAComponent(_)), "{err}");
}

/// `data.calls` of the `count` behaviour: how many calls the instance that answered has served.
fn calls_seen(plugin: &dyn Plugin) -> u32 {
    let answer = plugin.translate(&input("count")).expect("call").expect("translation");
    let objects = answer[0].outcome.as_ref().expect("objects");
    let object: Value = serde_json::from_str(&objects[0]).unwrap();
    object["data"]["calls"].as_str().unwrap().parse().unwrap()
}

#[test]
fn calls_outside_a_session_never_share_an_instance() {
    for_both_builds(|plugin| {
        assert_eq!([calls_seen(plugin), calls_seen(plugin)], [1, 1]);
    });
}

#[test]
fn a_session_shares_one_instance_and_the_next_session_starts_clean() {
    let runtime = Runtime::new().unwrap();
    let plugin = std::sync::Arc::new(runtime.load(PLAIN, limits()).unwrap());
    let session = plugin.clone().session();
    assert_eq!([calls_seen(&*session), calls_seen(&*session), calls_seen(&*session)], [1, 2, 3]);
    let next = plugin.clone().session();
    assert_eq!(calls_seen(&*next), 1, "a new session (the next ServiceSet) sees nothing of the last one");
}

#[test]
fn a_session_replaces_an_instance_whose_call_failed() {
    let runtime = Runtime::new().unwrap();
    let plugin = std::sync::Arc::new(runtime.load(PLAIN, limits()).unwrap());
    let session = plugin.clone().session();
    assert_eq!(calls_seen(&*session), 1);
    for behaviour in ["trap", "loop", "oom", "huge"] {
        let error = session.translate(&input(behaviour)).expect_err(behaviour);
        assert_eq!(error.function, Function::Translate, "{behaviour}");
        assert_eq!(calls_seen(&*session), 1, "after {behaviour}, the next call runs on a fresh instance");
    }
}
