//! The host's bindings of contract 0.2.0 (`wit/since_v0.2.0`, frozen): the plugin's calls and
//! the `host` interface it may import, with conversions to and from the SDK's types, so that
//! nothing outside this module sees the generated types. New in this version: the template's
//! sources in `translate`, and `deployed-hash` from `map-status`.

use super::shared::contract_bindings;

contract_bindings!(path: "../wit/since_v0.2.0", version: "0.2.0");

/// Runs `f` on the input of `translate`, which borrows `i`'s text.
fn with_translate_input<R>(i: &c::TranslateInput, f: impl FnOnce(w::TranslateInput<'_>) -> R) -> R {
    let templates = templates(i);
    let sources: Vec<_> = i
        .sources
        .iter()
        .map(|s| w::SourceObject {
            api_version: &s.api_version,
            kind: &s.kind,
            namespace: &s.namespace,
            name: &s.name,
            object: s.object.as_deref(),
        })
        .collect();
    f(w::TranslateInput {
        service_set: &i.service_set,
        templates: &templates,
        sources: &sources,
        target: target(&i.target),
        system_namespace: &i.system_namespace,
    })
}

/// The `deployed-hash` of a status: what the plugin records as deployed.
fn deployed_hash(status: &w::ServiceStatus) -> Option<String> {
    status.deployed_hash.clone()
}
