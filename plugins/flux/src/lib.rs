//! The built-in ksm-adapter plugin for Flux: ServiceSet services become `HelmRelease`
//! (`helm.toolkit.fluxcd.io/v2`) and `Kustomization` (`kustomize.toolkit.fluxcd.io/v1`) objects,
//! and their status maps back to k0rdent service states by the kstatus rules.
//!
//! Compiled natively it is a plain library (tests, benchmarks); compiled to
//! `wasm32-unknown-unknown` it exports the `ksm:adapter/plugin` interface.

mod config;
mod duration;
mod flux;
mod helm;
mod helm_options;
mod kustomize;
mod service;
mod status;
pub mod testdata;
mod translate;

#[cfg(test)]
mod golden_tests;

use config::FluxConfig;
use ksm_plugin_sdk::contract::{
    CONTRACT_VERSION, ConfigError, PluginApi, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError,
    StatusInput, TranslateError, TranslateInput,
};

/// The Flux plugin.
pub struct FluxPlugin;

impl PluginApi for FluxPlugin {
    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "flux".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract_version: CONTRACT_VERSION.into(),
            creates: vec![flux::helm_release_kind(), flux::kustomization_kind()],
            // The sources the objects reference are kcm's; the status of a HelmRelease or a
            // Kustomization already tells what went wrong with them. The host watches what a plugin
            // reads, so it reads nothing.
            reads: vec![],
        }
    }

    fn validate_config(config: String) -> Result<(), Vec<ConfigError>> {
        FluxConfig::from_json(&config).map(|_| ())
    }

    fn translate(input: TranslateInput) -> Result<Vec<ServiceTranslation>, TranslateError> {
        translate::translate(&input)
    }

    fn map_status(input: StatusInput) -> Result<ServiceStatus, StatusError> {
        status::map_status(&input)
    }
}

#[cfg(target_arch = "wasm32")]
ksm_plugin_sdk::export_plugin!(FluxPlugin);

/// A bump allocator: the host drops each instance after a call or a ServiceSet's session, so
/// freeing is wasted work (docs/performance.md has what dlmalloc cost).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: ksm_plugin_sdk::bump::BumpAllocator = ksm_plugin_sdk::bump::BumpAllocator::new();
