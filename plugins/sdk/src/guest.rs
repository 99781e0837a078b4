//! Export glue for plugins compiled to WASM components.
//!
//! A plugin implements [`PluginApi`] and calls [`export_plugin!`](crate::export_plugin) once;
//! this module converts between the wit-bindgen types and the SDK's [`contract`] types, so plugin
//! code never touches generated bindings.

use crate::contract::{self as c, PluginApi};
use std::marker::PhantomData;

/// Generated bindings of the `adapter-plugin` world.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/since_v0.2.0",
        world: "adapter-plugin",
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "ksm_plugin_sdk::guest::bindings",
    });
}

use bindings::exports::ksm::adapter::plugin::{self as w, Guest};

/// Adapts a [`PluginApi`] implementation to the generated `Guest` trait.
pub struct Exports<P>(PhantomData<P>);

impl<P: PluginApi> Guest for Exports<P> {
    fn metadata() -> w::PluginMetadata {
        let m = P::metadata();
        w::PluginMetadata {
            name: m.name,
            version: m.version,
            contract_version: m.contract_version,
            creates: m.creates.into_iter().map(kind).collect(),
            reads: m.reads.into_iter().map(kind).collect(),
        }
    }

    fn validate_config(config: String) -> Result<(), Vec<w::ConfigError>> {
        P::validate_config(config).map_err(config_errors)
    }

    fn translate(input: w::TranslateInput) -> Result<Vec<w::ServiceTranslation>, w::TranslateError> {
        let input = c::TranslateInput {
            service_set: input.service_set,
            templates: input.templates.into_iter().map(|t| c::Template { name: t.name, object: t.object }).collect(),
            sources: input
                .sources
                .into_iter()
                .map(|s| c::SourceObject {
                    api_version: s.api_version,
                    kind: s.kind,
                    namespace: s.namespace,
                    name: s.name,
                    object: s.object,
                })
                .collect(),
            target: match input.target {
                w::Target::SelfManagement => c::Target::SelfManagement,
                w::Target::Remote(r) => c::Target::Remote(c::RemoteCluster {
                    name: r.name,
                    kubeconfig: c::SecretKeyRef { name: r.kubeconfig.name, key: r.kubeconfig.key },
                }),
            },
            system_namespace: input.system_namespace,
        };
        match P::translate(input) {
            Ok(services) => Ok(services
                .into_iter()
                .map(|s| w::ServiceTranslation {
                    service: s.service,
                    outcome: s.outcome.map_err(service_error),
                    claims: s
                        .claims
                        .into_iter()
                        .map(|c| w::Claim { target: c.target, kind: c.kind, namespace: c.namespace, name: c.name })
                        .collect(),
                })
                .collect()),
            Err(c::TranslateError::InvalidConfig(errors)) => {
                Err(w::TranslateError::InvalidConfig(config_errors(errors)))
            }
            Err(c::TranslateError::InvalidInput(m)) => Err(w::TranslateError::InvalidInput(m)),
        }
    }

    fn map_status(input: w::StatusInput) -> Result<w::ServiceStatus, w::StatusError> {
        let input = c::StatusInput {
            service_set: input.service_set,
            service: input.service,
            template: input.template,
            observed: input
                .observed
                .into_iter()
                .map(|o| c::ObservedObject {
                    api_version: o.api_version,
                    kind: o.kind,
                    name: o.name,
                    namespace: o.namespace,
                    object: o.object,
                })
                .collect(),
        };
        match P::map_status(input) {
            Ok(s) => Ok(w::ServiceStatus {
                state: match s.state {
                    c::ServiceState::Deployed => w::ServiceState::Deployed,
                    c::ServiceState::Provisioning => w::ServiceState::Provisioning,
                    c::ServiceState::Failed => w::ServiceState::Failed,
                    c::ServiceState::Pending => w::ServiceState::Pending,
                    c::ServiceState::Deleting => w::ServiceState::Deleting,
                },
                service_type: match s.service_type {
                    c::ServiceType::Helm => w::ServiceType::Helm,
                    c::ServiceType::Kustomize => w::ServiceType::Kustomize,
                    c::ServiceType::Resource => w::ServiceType::Resource,
                },
                version: s.version,
                failure_message: s.failure_message,
                deployed_hash: s.deployed_hash,
            }),
            Err(c::StatusError::InvalidInput(m)) => Err(w::StatusError::InvalidInput(m)),
        }
    }
}

fn kind(k: c::ObjectKind) -> w::ObjectKind {
    w::ObjectKind { group: k.group, version: k.version, kind: k.kind, plural: k.plural, namespaced: k.namespaced }
}

fn config_errors(errors: Vec<c::ConfigError>) -> Vec<w::ConfigError> {
    errors.into_iter().map(|e| w::ConfigError { path: e.path, message: e.message }).collect()
}

fn service_error(e: c::ServiceError) -> w::ServiceError {
    match e {
        c::ServiceError::TemplateNotFound(m) => w::ServiceError::TemplateNotFound(m),
        c::ServiceError::TemplateNotReady(m) => w::ServiceError::TemplateNotReady(m),
        c::ServiceError::UnsupportedSource(m) => w::ServiceError::UnsupportedSource(m),
        c::ServiceError::InvalidValues(m) => w::ServiceError::InvalidValues(m),
        c::ServiceError::InvalidService(m) => w::ServiceError::InvalidService(m),
    }
}

/// Writes a line to the host's log (rate-limited there). Importing this is optional: a plugin
/// that never calls it keeps a component with zero imports.
pub fn log(level: c::LogLevel, message: &str) {
    use bindings::ksm::adapter::host::{LogLevel, log};
    let level = match level {
        c::LogLevel::Debug => LogLevel::Debug,
        c::LogLevel::Info => LogLevel::Info,
        c::LogLevel::Warn => LogLevel::Warn,
        c::LogLevel::Error => LogLevel::Error,
    };
    log(level, message);
}

/// Exports a [`PluginApi`] implementation as the component's `ksm:adapter/plugin` interface.
///
/// ```ignore
/// struct MyPlugin;
/// impl ksm_plugin_sdk::contract::PluginApi for MyPlugin { /* ... */ }
/// ksm_plugin_sdk::export_plugin!(MyPlugin);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        type __KsmPluginExports = $crate::guest::Exports<$plugin>;
        $crate::guest::bindings::export_bindings!(__KsmPluginExports with_types_in $crate::guest::bindings);
    };
}
