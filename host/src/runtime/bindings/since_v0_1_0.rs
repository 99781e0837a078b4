//! The host's bindings of contract 0.1.0 (`wit/since_v0.1.0`, frozen): the plugin's calls and
//! the `host` interface it may import, with conversions to and from the SDK's types, so that
//! nothing outside this module sees the generated types. A plugin of this version is handed no
//! sources and gives no `deployed-hash` (the host fingerprints what it applied).

use super::shared::contract_bindings;

contract_bindings!(path: "../wit/since_v0.1.0", version: "0.1.0");

/// Runs `f` on the input of `translate`, which borrows `i`'s text.
fn with_translate_input<R>(i: &c::TranslateInput, f: impl FnOnce(w::TranslateInput<'_>) -> R) -> R {
    let templates = templates(i);
    f(w::TranslateInput {
        service_set: &i.service_set,
        templates: &templates,
        target: target(&i.target),
        system_namespace: &i.system_namespace,
    })
}

/// The `deployed-hash` of a status: a plugin of 0.1.0 gives none: the host fingerprints what it applied.
fn deployed_hash(_: &w::ServiceStatus) -> Option<String> {
    None
}
