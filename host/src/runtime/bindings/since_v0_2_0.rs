//! The host's bindings of contract 0.2.0 (`wit/since_v0.2.0`, frozen): the plugin's calls and
//! the `host` interface it may import, with conversions to and from the SDK's types, so that
//! nothing outside this module sees the generated types. New in this version: the template's
//! sources in `translate`, and `deployed-hash` from `map-status`.

use super::shared::contract_bindings;

contract_bindings!(path: "../wit/since_v0.2.0", version: "0.2.0");

fn translate_input(i: &c::TranslateInput) -> w::TranslateInput {
    w::TranslateInput {
        service_set: i.service_set.clone(),
        templates: templates(i),
        sources: i
            .sources
            .iter()
            .map(|s| w::SourceObject {
                api_version: s.api_version.clone(),
                kind: s.kind.clone(),
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                object: s.object.clone(),
            })
            .collect(),
        target: target(&i.target),
        system_namespace: i.system_namespace.clone(),
    }
}

/// The `deployed-hash` of a status: what the plugin records as deployed.
fn deployed_hash(status: &w::ServiceStatus) -> Option<String> {
    status.deployed_hash.clone()
}
