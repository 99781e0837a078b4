//! Host bindings of the `adapter-plugin` world (contract 0.1.0) and conversions to the SDK's
//! contract types, so nothing outside this module sees generated types.

use ksm_plugin_sdk::contract as c;

wasmtime::component::bindgen!({
    path: "../wit",
    world: "adapter-plugin",
});

use exports::ksm::adapter::plugin as w;
pub use exports::ksm::adapter::plugin::Guest;
pub use ksm::adapter::host::LogLevel;

/// The exported interface name a plugin of this contract version exports.
pub const PLUGIN_EXPORT: &str = "ksm:adapter/plugin@0.1.0";

pub(super) fn metadata(m: w::PluginMetadata) -> c::PluginMetadata {
    let kinds = |kinds: Vec<w::ObjectKind>| {
        kinds
            .into_iter()
            .map(|k| c::ObjectKind {
                group: k.group,
                version: k.version,
                kind: k.kind,
                plural: k.plural,
                namespaced: k.namespaced,
            })
            .collect()
    };
    c::PluginMetadata {
        name: m.name,
        version: m.version,
        contract_version: m.contract_version,
        creates: kinds(m.creates),
        reads: kinds(m.reads),
    }
}

pub(super) fn config_errors(errors: Vec<w::ConfigError>) -> Vec<c::ConfigError> {
    errors.into_iter().map(|e| c::ConfigError { path: e.path, message: e.message }).collect()
}

pub(super) fn translate_input(i: &c::TranslateInput) -> w::TranslateInput {
    w::TranslateInput {
        service_set: i.service_set.clone(),
        templates: i.templates.iter().map(|t| w::Template { name: t.name.clone(), object: t.object.clone() }).collect(),
        target: match &i.target {
            c::Target::SelfManagement => w::Target::SelfManagement,
            c::Target::Remote(r) => w::Target::Remote(w::RemoteCluster {
                name: r.name.clone(),
                kubeconfig: w::SecretKeyRef { name: r.kubeconfig.name.clone(), key: r.kubeconfig.key.clone() },
            }),
        },
        system_namespace: i.system_namespace.clone(),
    }
}

pub(super) fn translation(
    result: Result<Vec<w::ServiceTranslation>, w::TranslateError>,
) -> Result<Vec<c::ServiceTranslation>, c::TranslateError> {
    match result {
        Ok(services) => Ok(services
            .into_iter()
            .map(|s| c::ServiceTranslation {
                service: s.service,
                outcome: s.outcome.map_err(|e| match e {
                    w::ServiceError::TemplateNotFound(m) => c::ServiceError::TemplateNotFound(m),
                    w::ServiceError::TemplateNotReady(m) => c::ServiceError::TemplateNotReady(m),
                    w::ServiceError::UnsupportedSource(m) => c::ServiceError::UnsupportedSource(m),
                    w::ServiceError::InvalidValues(m) => c::ServiceError::InvalidValues(m),
                    w::ServiceError::InvalidService(m) => c::ServiceError::InvalidService(m),
                }),
                claims: s
                    .claims
                    .into_iter()
                    .map(|c| c::Claim { target: c.target, kind: c.kind, namespace: c.namespace, name: c.name })
                    .collect(),
            })
            .collect()),
        Err(w::TranslateError::InvalidConfig(errors)) => Err(c::TranslateError::InvalidConfig(config_errors(errors))),
        Err(w::TranslateError::InvalidInput(m)) => Err(c::TranslateError::InvalidInput(m)),
    }
}

pub(super) fn status_input(i: &c::StatusInput) -> w::StatusInput {
    w::StatusInput {
        service_set: i.service_set.clone(),
        service: i.service.clone(),
        template: i.template.clone(),
        observed: i
            .observed
            .iter()
            .map(|o| w::ObservedObject {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
                namespace: o.namespace.clone(),
                object: o.object.clone(),
            })
            .collect(),
    }
}

pub(super) fn service_status(
    result: Result<w::ServiceStatus, w::StatusError>,
) -> Result<c::ServiceStatus, c::StatusError> {
    match result {
        Ok(s) => Ok(c::ServiceStatus {
            state: match s.state {
                w::ServiceState::Deployed => c::ServiceState::Deployed,
                w::ServiceState::Provisioning => c::ServiceState::Provisioning,
                w::ServiceState::Failed => c::ServiceState::Failed,
                w::ServiceState::Pending => c::ServiceState::Pending,
                w::ServiceState::Deleting => c::ServiceState::Deleting,
            },
            service_type: match s.service_type {
                w::ServiceType::Helm => c::ServiceType::Helm,
                w::ServiceType::Kustomize => c::ServiceType::Kustomize,
                w::ServiceType::Resource => c::ServiceType::Resource,
            },
            version: s.version,
            failure_message: s.failure_message,
        }),
        Err(w::StatusError::InvalidInput(m)) => Err(c::StatusError::InvalidInput(m)),
    }
}

/// Bytes of text in a translation (the output-size limit counts these).
pub(super) fn translation_size(result: &Result<Vec<w::ServiceTranslation>, w::TranslateError>) -> usize {
    match result {
        Ok(services) => services
            .iter()
            .map(|s| {
                s.service.len()
                    + match &s.outcome {
                        Ok(objects) => objects.iter().map(String::len).sum(),
                        Err(e) => service_error_len(e),
                    }
                    + s.claims
                        .iter()
                        .map(|c| c.target.len() + c.kind.len() + c.namespace.len() + c.name.len())
                        .sum::<usize>()
            })
            .sum(),
        Err(w::TranslateError::InvalidConfig(errors)) => errors.iter().map(|e| e.path.len() + e.message.len()).sum(),
        Err(w::TranslateError::InvalidInput(m)) => m.len(),
    }
}

fn service_error_len(e: &w::ServiceError) -> usize {
    match e {
        w::ServiceError::TemplateNotFound(m)
        | w::ServiceError::TemplateNotReady(m)
        | w::ServiceError::UnsupportedSource(m)
        | w::ServiceError::InvalidValues(m)
        | w::ServiceError::InvalidService(m) => m.len(),
    }
}
