//! The Flux plugin's golden cases (`plugins/flux/testdata`) through its real WASM build, as the
//! host embeds it, and against its native build: both must give the same answers.

use ksm_adapter::builtin;
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::{NativePlugin, Plugin};
use ksm_adapter::runtime::Runtime;
use ksm_flux_plugin::{FluxPlugin, testdata};

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
        let config =
            serde_json::from_str::<serde_json::Value>(&input.service_set).unwrap()["spec"]["provider"]["config"]
                .to_string();
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
