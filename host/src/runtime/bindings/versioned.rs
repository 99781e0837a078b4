//! A component's contract version, and its calls dispatched to that version's bindings.

use super::since_v0_1_0 as v0_1_0;
use super::since_v0_2_0 as v0_2_0;
use crate::runtime::sandbox::CallState;
use ksm_plugin_sdk::contract as c;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

/// The contract versions this host runs, oldest first; the last is the one the SDK builds.
pub const CONTRACT_VERSIONS: &[&str] = &[v0_1_0::VERSION, v0_2_0::VERSION];

/// The interface a plugin of contract `version` exports.
pub fn export_of(version: &str) -> String {
    format!("ksm:adapter/plugin@{version}")
}

/// Links the `host` interface of every supported version.
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    v0_1_0::add_to_linker(linker)?;
    v0_2_0::add_to_linker(linker)
}

/// A linked component, by the contract version it implements.
pub enum PluginPre {
    /// Contract 0.1.0.
    V0_1_0(v0_1_0::Pre),
    /// Contract 0.2.0.
    V0_2_0(v0_2_0::Pre),
}

impl PluginPre {
    /// The bindings of `version` (one of [`CONTRACT_VERSIONS`]) for the linked component `pre`.
    pub fn new(version: &str, pre: InstancePre<CallState>) -> wasmtime::Result<Self> {
        match version {
            v0_1_0::VERSION => Ok(Self::V0_1_0(v0_1_0::Pre::new(pre)?)),
            v0_2_0::VERSION => Ok(Self::V0_2_0(v0_2_0::Pre::new(pre)?)),
            other => Err(wasmtime::format_err!("contract {other} is not supported")),
        }
    }

    /// An instance in `store`.
    pub fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<PluginInstance> {
        match self {
            Self::V0_1_0(pre) => pre.instantiate(store).map(PluginInstance::V0_1_0),
            Self::V0_2_0(pre) => pre.instantiate(store).map(PluginInstance::V0_2_0),
        }
    }
}

/// An instance, by the contract version it implements.
pub enum PluginInstance {
    /// Contract 0.1.0.
    V0_1_0(v0_1_0::Instance),
    /// Contract 0.2.0.
    V0_2_0(v0_2_0::Instance),
}

impl PluginInstance {
    /// `metadata`.
    pub fn metadata(&self, store: &mut Store<CallState>) -> wasmtime::Result<c::PluginMetadata> {
        match self {
            Self::V0_1_0(instance) => instance.metadata(store),
            Self::V0_2_0(instance) => instance.metadata(store),
        }
    }

    /// `validate-config`.
    pub fn validate_config(
        &self,
        store: &mut Store<CallState>,
        config: &str,
    ) -> wasmtime::Result<Result<(), Vec<c::ConfigError>>> {
        match self {
            Self::V0_1_0(instance) => instance.validate_config(store, config),
            Self::V0_2_0(instance) => instance.validate_config(store, config),
        }
    }

    /// `translate`.
    pub fn translate(
        &self,
        store: &mut Store<CallState>,
        input: &c::TranslateInput,
    ) -> wasmtime::Result<Result<Vec<c::ServiceTranslation>, c::TranslateError>> {
        match self {
            Self::V0_1_0(instance) => instance.translate(store, input),
            Self::V0_2_0(instance) => instance.translate(store, input),
        }
    }

    /// `map-status`.
    pub fn map_status(
        &self,
        store: &mut Store<CallState>,
        input: &c::StatusInput,
    ) -> wasmtime::Result<Result<c::ServiceStatus, c::StatusError>> {
        match self {
            Self::V0_1_0(instance) => instance.map_status(store, input),
            Self::V0_2_0(instance) => instance.map_status(store, input),
        }
    }
}
