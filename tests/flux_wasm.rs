//! The Flux plugin's golden cases (`plugins/flux/testdata`) through its real WASM build, as the
//! host embeds it, and against its native build: both must give the same answers.

use ksm_adapter::builtin;
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::{NativePlugin, Plugin};
use ksm_adapter::runtime::Runtime;
use ksm_flux_plugin::{FluxPlugin, testdata};
use std::sync::Arc;

/// The provider config of a case's ServiceSet, as `validate-config` takes it.
fn config_of(input: &ksm_plugin_sdk::contract::TranslateInput) -> String {
    serde_json::from_str::<serde_json::Value>(&input.service_set).unwrap()["spec"]["provider"]["config"].to_string()
}

fn flux() -> impl Plugin {
    Runtime::new().unwrap().load(builtin::FLUX, Limits::default()).unwrap()
}

#[test]
fn translate_cases_match_their_golden_output() {
    let plugin = flux();
    let dirs = testdata::translate_case_dirs().unwrap();
    assert!(dirs.len() >= 14, "expected the full case set, found {}", dirs.len());
    for dir in dirs {
        let (actual, expected) = testdata::run_translate_case(&dir, |input| plugin.translate(&input).unwrap()).unwrap();
        assert_eq!(actual, expected, "case {}", dir.display());
    }
}

#[test]
fn status_table_holds_through_wasm() {
    let plugin = flux();
    let cases = testdata::status_cases().unwrap();
    assert!(cases.len() >= 30, "expected the full status table, found {}", cases.len());
    let failures: Vec<String> =
        cases.iter().filter_map(|case| case.run(|input| plugin.map_status(&input).unwrap()).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn wasm_and_native_builds_agree_on_every_case() {
    let wasm = flux();
    let native = NativePlugin::<FluxPlugin>::new();
    assert_eq!(wasm.metadata(), native.metadata());
    for dir in testdata::translate_case_dirs().unwrap() {
        let input = testdata::translate_case_input(&dir).unwrap();
        assert_eq!(wasm.translate(&input).unwrap(), native.translate(&input).unwrap(), "case {}", dir.display());
        let config = config_of(&input);
        assert_eq!(wasm.validate_config(&config).unwrap(), native.validate_config(&config).unwrap());
    }
    for case in testdata::status_cases().unwrap() {
        assert_eq!(wasm.map_status(&case.input()).unwrap(), native.map_status(&case.input()).unwrap(), "{}", case.name);
    }
}

#[test]
fn config_errors_name_the_field_through_wasm() {
    let errors = flux().validate_config(r#"{"interval": "5x", "intervall": "1m"}"#).unwrap().unwrap_err();
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(messages.contains(&"interval: invalid duration \"5x\"".to_string()), "{messages:?}");
    assert!(messages.contains(&"intervall: unknown field".to_string()), "{messages:?}");
}

/// Bytes of linear memory a component's core modules start with.
fn initial_memory(component: &[u8]) -> usize {
    let mut bytes = 0;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        if let wasmparser::Payload::MemorySection(memories) = payload.unwrap() {
            bytes += memories.into_iter().map(|m| m.unwrap().initial as usize * 65536).sum::<usize>();
        }
    }
    bytes
}

/// An instance whose memory grows costs the host two changes of page protection (the pool
/// shrinks the slot back when it is reused), each a TLB shootdown across its threads
/// (docs/performance.md). So a reconcile's calls on one instance must fit in the memory the
/// plugin starts with: a limit of exactly that makes any growth an error.
#[test]
fn a_reconciles_calls_fit_in_the_initial_memory() {
    let initial = initial_memory(builtin::FLUX);
    let limits = Limits { memory: initial, ..Limits::default() };
    let plugin = Arc::new(Runtime::new().unwrap().load(builtin::FLUX, limits).unwrap());
    let status = testdata::status_cases().unwrap();
    for dir in testdata::translate_case_dirs().unwrap() {
        let session = plugin.clone().session();
        let input = testdata::translate_case_input(&dir).unwrap();
        let config = config_of(&input);
        let at = |what: &str| format!("case {}, {what}, in {initial} bytes", dir.display());
        // The answers are the golden cases' business; here only that each call ran.
        let _ = session.validate_config(&config).unwrap_or_else(|e| panic!("{}: {e}", at("validate-config")));
        let _ = session.translate(&input).unwrap_or_else(|e| panic!("{}: {e}", at("translate")));
        for case in &status[..3] {
            let _ = session.map_status(&case.input()).unwrap_or_else(|e| panic!("{}: {e}", at(&case.name)));
        }
    }
}
