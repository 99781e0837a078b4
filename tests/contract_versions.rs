//! The contract's versions: every frozen WIT (`wit/since_v<version>/`) is a version the host
//! runs, with its own bindings module; the version string agrees everywhere it is written (the
//! WIT package, the SDK, the JavaScript plugins, the scaffolds); and a plugin built against each
//! supported version — not only the newest — loads and answers every call.

use ksm_adapter::plugin::{Limits, Plugin};
use ksm_adapter::runtime::{CONTRACT_VERSIONS, Runtime};
use ksm_plugin_sdk::contract::{CONTRACT_VERSION, ServiceState, SourceObject, StatusInput, Target, TranslateInput};
use serde_json::json;
use std::path::{Path, PathBuf};

#[allow(dead_code)]
mod wat_plugin;

/// The hostile test plugin (no WASI), built with the SDK: the newest contract version.
const HOSTILE: &[u8] = include_bytes!(env!("KSM_HOSTILE_WASM"));

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The versions frozen under `wit/`, oldest first.
fn frozen() -> Vec<String> {
    let mut versions: Vec<String> = std::fs::read_dir(repo().join("wit"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("since_v").map(String::from))
        .collect();
    versions.sort_by_key(|v| v.split('.').map(|n| n.parse::<u32>().unwrap()).collect::<Vec<_>>());
    versions
}

/// The string literal assigned to `name` in `source` (`name = "x"`).
fn literal<'a>(source: &'a str, name: &str) -> &'a str {
    let at = source.find(&format!("{name} = \"")).unwrap_or_else(|| panic!("no {name} = \"...\""));
    source[at..].split('"').nth(1).unwrap()
}

#[test]
fn every_frozen_version_is_supported_with_its_own_bindings() {
    let frozen = frozen();
    assert_eq!(frozen, CONTRACT_VERSIONS, "wit/since_v*/ and the host's supported versions");
    for version in &frozen {
        let wit = read(&format!("wit/since_v{version}/adapter.wit"));
        assert!(wit.contains(&format!("package ksm:adapter@{version};")), "wit/since_v{version} declares {version}");
        let bindings = format!("host/src/runtime/bindings/since_v{}.rs", version.replace('.', "_"));
        assert!(read(&bindings).contains(&format!("path: \"../wit/since_v{version}\"")), "{bindings}");
    }
}

#[test]
fn the_version_string_agrees_everywhere_it_is_written() {
    let newest = CONTRACT_VERSIONS.last().unwrap();
    assert_eq!(CONTRACT_VERSION, *newest, "the SDK builds the newest version");
    for (file, name) in [
        ("plugins/argocd-js/src/plugin.js", "CONTRACT_VERSION"),
        ("plugins/fleet-js/src/plugin.js", "CONTRACT_VERSION"),
        ("host/src/cli/scaffold/js/plugin.js", "CONTRACT_VERSION"),
        ("host/src/cli/scaffold/python/app.py", "CONTRACT_VERSION"),
    ] {
        assert_eq!(literal(&read(file), name), CONTRACT_VERSION, "{file}");
    }
    let wit = format!("wit/since_v{CONTRACT_VERSION}");
    for (file, reference) in [
        ("plugins/sdk/src/guest.rs", format!("../../{wit}")),
        ("plugins/argocd-js/build.sh", format!("../../{wit}/adapter.wit")),
        ("plugins/fleet-js/build.sh", format!("../../{wit}/adapter.wit")),
        ("host/src/cli/scaffold.rs", format!("../../../{wit}/adapter.wit")),
    ] {
        assert!(read(file).contains(&reference), "{file} builds against {reference}");
    }
}

#[test]
fn a_plugin_built_against_each_supported_version_answers_every_call() {
    let runtime = Runtime::new().unwrap();
    // Contract 0.1.0: a component written by hand against that version's frozen WIT; 0.2.0: the
    // hostile test plugin, built with the SDK (its honest behaviours).
    let plain = wat_plugin::Amplify { kinds: 1, config_errors: 0, objects: 0 };
    let built: Vec<(&str, Vec<u8>, usize)> =
        vec![("0.1.0", wat_plugin::component(&plain), 0), ("0.2.0", HOSTILE.to_vec(), 1)];
    let versions: Vec<&str> = built.iter().map(|(v, _, _)| *v).collect();
    assert_eq!(versions, CONTRACT_VERSIONS, "a plugin for every supported version");
    for (version, component, objects) in built {
        let plugin = runtime.load(&component, Limits::default()).unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(plugin.metadata().contract_version, version);
        assert!(plugin.info().exports.contains(&ksm_adapter::runtime::export_of(version)));
        assert_eq!(plugin.validate_config("{}").unwrap(), Ok(()));
        let input = TranslateInput {
            service_set: json!({"metadata": {"name": "a"}}).to_string(),
            templates: vec![],
            sources: vec![],
            target: Target::SelfManagement,
            system_namespace: "kcm-system".into(),
        };
        let services = plugin.translate(&input).unwrap().unwrap();
        assert_eq!(services.len(), 1, "{version}");
        assert_eq!(services[0].outcome.as_ref().map(Vec::len), Ok(objects), "{version}");
        let status = StatusInput { service_set: "{}".into(), service: "{}".into(), template: None, observed: vec![] };
        assert_eq!(plugin.map_status(&status).unwrap().unwrap().state, ServiceState::Deployed, "{version}");
    }
}

/// What 0.2.0 added crosses the boundary both ways: the sources a plugin is handed, and the
/// `deployed-hash` it gives; a 0.1.0 plugin gives none (the host then fingerprints itself).
#[test]
fn contract_0_2_0_hands_sources_and_takes_a_deployed_hash() {
    let runtime = Runtime::new().unwrap();
    let plugin = runtime.load(HOSTILE, Limits::default()).unwrap();
    let source = SourceObject {
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: "HelmRepository".into(),
        namespace: "kcm-system".into(),
        name: "k0rdent-catalog".into(),
        object: Some(json!({"spec": {"url": "oci://ghcr.io/k0rdent/catalog/charts"}}).to_string()),
    };
    let input = TranslateInput {
        service_set: json!({"metadata": {"name": "sources"}}).to_string(),
        templates: vec![],
        sources: vec![source],
        target: Target::SelfManagement,
        system_namespace: "kcm-system".into(),
    };
    let services = plugin.translate(&input).unwrap().unwrap();
    let object: serde_json::Value = serde_json::from_str(&services[0].outcome.as_ref().unwrap()[0]).unwrap();
    assert_eq!(object["data"]["sources"], "HelmRepository kcm-system/k0rdent-catalog");
    let status = StatusInput { service_set: "{}".into(), service: "a".into(), template: None, observed: vec![] };
    assert_eq!(plugin.map_status(&status).unwrap().unwrap().deployed_hash.as_deref(), Some("0 objects"));
    let older = runtime
        .load(
            &wat_plugin::component(&wat_plugin::Amplify { kinds: 1, config_errors: 0, objects: 0 }),
            Limits::default(),
        )
        .unwrap();
    assert_eq!(older.map_status(&status).unwrap().unwrap().deployed_hash, None, "0.1.0 has no such field");
}

/// `kebab-case` as Rust writes a type (`PascalCase`) or a field (`snake_case`).
fn rust_name(kebab: &str, pascal: bool) -> String {
    if !pascal {
        return kebab.replace('-', "_");
    }
    kebab.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

/// The names declared in the body of `pub struct name` / `pub enum name` in `source`: a struct's
/// `pub` fields, an enum's variants.
fn rust_members(source: &str, keyword: &str, name: &str) -> Option<Vec<String>> {
    let start = source.find(&format!("pub {keyword} {name} {{"))?;
    let body = &source[start..source[start..].find("\n}")? + start];
    let members = body.lines().skip(1).map(str::trim).filter(|l| !l.starts_with("//") && !l.starts_with('#'));
    Some(
        members
            .filter_map(|l| match keyword {
                "struct" => l.strip_prefix("pub ")?.split(':').next().map(String::from),
                _ => l.split(['(', ',', ' ', '{']).next().filter(|v| !v.is_empty()).map(String::from),
            })
            .collect(),
    )
}

#[test]
fn the_sdk_types_mirror_the_newest_wit_item_by_item() {
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve.push_dir(repo().join(format!("wit/since_v{CONTRACT_VERSION}"))).unwrap();
    let sdk = read("plugins/sdk/src/contract.rs");
    let mut checked = 0;
    for (_, interface) in resolve.interfaces.iter().filter(|(_, i)| i.package == Some(package)) {
        for (name, id) in &interface.types {
            let (keyword, members): (&str, Vec<String>) = match &resolve.types[*id].kind {
                wit_parser::TypeDefKind::Record(r) => {
                    ("struct", r.fields.iter().map(|f| rust_name(&f.name, false)).collect())
                }
                wit_parser::TypeDefKind::Variant(v) => {
                    ("enum", v.cases.iter().map(|c| rust_name(&c.name, true)).collect())
                }
                wit_parser::TypeDefKind::Enum(e) => {
                    ("enum", e.cases.iter().map(|c| rust_name(&c.name, true)).collect())
                }
                other => panic!("{name}: a {other:?} has no SDK mirror check yet"),
            };
            let rust = rust_name(name, true);
            let found = rust_members(&sdk, keyword, &rust).unwrap_or_else(|| panic!("the SDK has no {keyword} {rust}"));
            assert_eq!(found, members, "SDK {keyword} {rust} against WIT {name}");
            checked += 1;
        }
    }
    assert!(checked >= 19, "only {checked} WIT types found");
}
