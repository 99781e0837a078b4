//! What every version's bindings share: generated from the same shape of WIT, each version's
//! types differ only where the version changed. [`contract_bindings!`] writes the linker glue,
//! the instance wrapper and the conversions every version has, over the generated module of the
//! version it is expanded in; each version writes only the conversions that changed
//! (`with_translate_input`, `deployed_hash`).

/// Expands, in a version's module, to the bindings of the WIT at `path` (its `bindgen!`), its
/// `VERSION`, `add_to_linker`, `Pre`, `Instance` and the conversions every version shares; the
/// module writes `with_translate_input` and `deployed_hash`, which differ.
macro_rules! contract_bindings {
    (path: $path:literal, version: $version:literal) => {
        use crate::runtime::sandbox::CallState;
        use ksm_plugin_sdk::contract as c;
        use wasmtime::Store;
        use wasmtime::component::{HasSelf, InstancePre, Linker};

        // The plugin's inputs borrow the host's text: lowering copies it into the plugin's
        // memory, so an owned copy first would only be thrown away.
        wasmtime::component::bindgen!({
            path: $path,
            world: "adapter-plugin",
            ownership: Borrowing { duplicate_if_necessary: true },
        });

        use exports::ksm::adapter::plugin as w;
        use ksm::adapter::host::LogLevel;

        /// The contract version of these bindings.
        pub const VERSION: &str = $version;

        /// Links the contract's `host` interface (the plugin's `log`).
        pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
            AdapterPlugin::add_to_linker::<CallState, HasSelf<CallState>>(linker, |state| state)
        }

        impl ksm::adapter::host::Host for CallState {
            fn log(&mut self, level: LogLevel, message: String) {
                let level = match level {
                    LogLevel::Debug => tracing::Level::DEBUG,
                    LogLevel::Info => tracing::Level::INFO,
                    LogLevel::Warn => tracing::Level::WARN,
                    LogLevel::Error => tracing::Level::ERROR,
                };
                self.guest_log().line(level, &message);
            }
        }

        /// A component of this version, linked and ready to instantiate.
        pub struct Pre(AdapterPluginPre<CallState>);

        impl Pre {
            /// Checks that the linked component has this version's exports.
            pub fn new(pre: InstancePre<CallState>) -> wasmtime::Result<Self> {
                AdapterPluginPre::new(pre).map(Self)
            }

            /// An instance in `store`.
            pub fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Instance> {
                self.0.instantiate(store).map(Instance)
            }
        }

        /// An instance of a component of this version.
        pub struct Instance(AdapterPlugin);

        impl Instance {
            /// `metadata`.
            pub fn metadata(&self, store: &mut Store<CallState>) -> wasmtime::Result<c::PluginMetadata> {
                self.0.ksm_adapter_plugin().call_metadata(store).map(metadata)
            }

            /// `validate-config`.
            pub fn validate_config(
                &self,
                store: &mut Store<CallState>,
                config: &str,
            ) -> wasmtime::Result<Result<(), Vec<c::ConfigError>>> {
                Ok(self.0.ksm_adapter_plugin().call_validate_config(store, config)?.map_err(config_errors))
            }

            /// `translate`.
            pub fn translate(
                &self,
                store: &mut Store<CallState>,
                input: &c::TranslateInput,
            ) -> wasmtime::Result<Result<Vec<c::ServiceTranslation>, c::TranslateError>> {
                let plugin = self.0.ksm_adapter_plugin();
                with_translate_input(input, |input| plugin.call_translate(store, input)).map(translation)
            }

            /// `map-status`.
            pub fn map_status(
                &self,
                store: &mut Store<CallState>,
                input: &c::StatusInput,
            ) -> wasmtime::Result<Result<c::ServiceStatus, c::StatusError>> {
                let observed: Vec<_> = input.observed.iter().map(observed_object).collect();
                let input = w::StatusInput {
                    service_set: &input.service_set,
                    service: &input.service,
                    template: input.template.as_deref(),
                    observed: &observed,
                };
                self.0.ksm_adapter_plugin().call_map_status(store, input).map(service_status)
            }
        }

        fn metadata(m: w::PluginMetadata) -> c::PluginMetadata {
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

        fn config_errors(errors: Vec<w::ConfigError>) -> Vec<c::ConfigError> {
            errors.into_iter().map(|e| c::ConfigError { path: e.path, message: e.message }).collect()
        }

        fn translation(
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
                Err(w::TranslateError::InvalidConfig(errors)) => {
                    Err(c::TranslateError::InvalidConfig(config_errors(errors)))
                }
                Err(w::TranslateError::InvalidInput(m)) => Err(c::TranslateError::InvalidInput(m)),
            }
        }

        fn observed_object(o: &c::ObservedObject) -> w::ObservedObject<'_> {
            w::ObservedObject {
                api_version: &o.api_version,
                kind: &o.kind,
                name: &o.name,
                namespace: &o.namespace,
                object: o.object.as_deref(),
            }
        }

        fn service_status(
            result: Result<w::ServiceStatus, w::StatusError>,
        ) -> Result<c::ServiceStatus, c::StatusError> {
            match result {
                Ok(s) => Ok(c::ServiceStatus {
                    deployed_hash: deployed_hash(&s),
                    state: state(s.state),
                    service_type: service_type(s.service_type),
                    version: s.version,
                    failure_message: s.failure_message,
                }),
                Err(w::StatusError::InvalidInput(m)) => Err(c::StatusError::InvalidInput(m)),
            }
        }

        fn templates(i: &c::TranslateInput) -> Vec<w::Template<'_>> {
            i.templates.iter().map(|t| w::Template { name: &t.name, object: t.object.as_deref() }).collect()
        }

        fn target(target: &c::Target) -> w::Target<'_> {
            match target {
                c::Target::SelfManagement => w::Target::SelfManagement,
                c::Target::Remote(r) => w::Target::Remote(w::RemoteCluster {
                    name: &r.name,
                    kubeconfig: w::SecretKeyRef { name: &r.kubeconfig.name, key: &r.kubeconfig.key },
                }),
            }
        }

        fn state(state: w::ServiceState) -> c::ServiceState {
            match state {
                w::ServiceState::Deployed => c::ServiceState::Deployed,
                w::ServiceState::Provisioning => c::ServiceState::Provisioning,
                w::ServiceState::Failed => c::ServiceState::Failed,
                w::ServiceState::Pending => c::ServiceState::Pending,
                w::ServiceState::Deleting => c::ServiceState::Deleting,
            }
        }

        fn service_type(service_type: w::ServiceType) -> c::ServiceType {
            match service_type {
                w::ServiceType::Helm => c::ServiceType::Helm,
                w::ServiceType::Kustomize => c::ServiceType::Kustomize,
                w::ServiceType::Resource => c::ServiceType::Resource,
            }
        }
    };
}

pub(super) use contract_bindings;
