//! Which plugin serves each ServiceSet in `render`: the AdapterPlugins in the files, picked and
//! configured as the controller does (built-in and ConfigMap sources; OCI is not pulled
//! offline), with `--plugin` for the Flux providers none names; or `--plugin` for every
//! ServiceSet when the files declare none.

use super::plugin_args::{PluginArgs, load};
use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use ksm_adapter::adapter_plugin::{AdapterPlugin, Source};
use ksm_adapter::builtin;
use ksm_adapter::k0rdent::StateManagementProvider;
use ksm_adapter::manifests::Manifests;
use ksm_adapter::plugin::Limits;
use ksm_adapter::runtime::Runtime;
use ksm_adapter::serving::{Assignment, ServingPlugin, assignment, is_flux_provider, limits, validate};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The plugins of a render.
pub enum OfflinePlugins {
    /// No AdapterPlugin in the files: `--plugin` serves every provider.
    Only(Arc<ServingPlugin>),
    /// The AdapterPlugins in the files, each loaded or why not; `--plugin` serves the Flux
    /// providers none names (as `run --default-plugin flux` does).
    Declared(Vec<(AdapterPlugin, Result<Arc<ServingPlugin>, String>)>, Arc<ServingPlugin>),
}

impl OfflinePlugins {
    /// Loads the AdapterPlugins in `manifests`, or `--plugin` when there are none.
    pub fn load(runtime: &Runtime, manifests: &Manifests, args: &PluginArgs) -> anyhow::Result<Self> {
        Self::load_pulled(runtime, manifests, args, &BTreeMap::new())
    }

    /// As [`load`](Self::load), with the components of OCI sources already pulled (and their
    /// signatures checked), or why they were not, by AdapterPlugin.
    pub fn load_pulled(
        runtime: &Runtime,
        manifests: &Manifests,
        args: &PluginArgs,
        pulled: &BTreeMap<String, Result<Vec<u8>, String>>,
    ) -> anyhow::Result<Self> {
        let mut declared = Vec::new();
        for doc in manifests.documents.iter().filter(|d| d.object["kind"] == "AdapterPlugin") {
            let plugin: AdapterPlugin = serde_json::from_value(doc.object.clone())
                .with_context(|| format!("{}: not a valid AdapterPlugin", doc.origin))?;
            let loaded = load_declared(runtime, manifests, pulled, &plugin, args.limits.limits());
            declared.push((plugin, loaded));
        }
        let plugin = Arc::new(ServingPlugin::plain(Arc::new(load(runtime, &args.plugin, args.limits.limits())?)));
        if declared.is_empty() {
            return Ok(Self::Only(plugin));
        }
        Ok(Self::Declared(declared, plugin))
    }

    /// The plugin serving StateManagementProvider `provider` (`smp`, when in the files), or why
    /// there is none.
    pub fn for_provider(
        &self,
        provider: &str,
        smp: Option<&StateManagementProvider>,
    ) -> Result<Arc<ServingPlugin>, String> {
        let (declared, default) = match self {
            Self::Only(plugin) => return Ok(plugin.clone()),
            Self::Declared(declared, default) => (declared, default),
        };
        let specs = declared.iter().map(|(p, _)| (p.metadata.name.as_deref().unwrap_or_default(), &p.spec));
        match assignment(specs, provider) {
            Assignment::Unserved if smp.is_some_and(is_flux_provider) => Ok(default.clone()),
            assigned => {
                let name = assigned.plugin(provider).map_err(|e| e.to_string())?;
                let (_, loaded) =
                    declared.iter().find(|(p, _)| p.metadata.name.as_deref() == Some(name)).expect("assigned");
                loaded.clone().map_err(|e| format!("AdapterPlugin {name:?}: {e}"))
            }
        }
    }
}

fn load_declared(
    runtime: &Runtime,
    manifests: &Manifests,
    pulled: &BTreeMap<String, Result<Vec<u8>, String>>,
    plugin: &AdapterPlugin,
    defaults: Limits,
) -> Result<Arc<ServingPlugin>, String> {
    let name = plugin.metadata.name.clone().unwrap_or_default();
    let bytes = match plugin.spec.source.get().map_err(|e| e.to_string())? {
        Source::Builtin(builtin) => builtin::lookup(builtin).map_err(|e| e.to_string())?.to_vec(),
        Source::ConfigMap(reference) => {
            let doc = manifests.find("v1", "ConfigMap", &reference.namespace, &reference.name).ok_or_else(|| {
                format!(
                    "spec.source.configMap: ConfigMap {}/{} is not in the files",
                    reference.namespace, reference.name
                )
            })?;
            let config_map: ConfigMap =
                serde_json::from_value(doc.object.clone()).map_err(|e| format!("{}: {e}", doc.origin))?;
            reference.bytes_in(&config_map).map_err(|e| e.to_string())?
        }
        Source::Oci(_) if pulled.contains_key(&name) => pulled[&name].clone()?,
        Source::Oci(oci) => {
            return Err(format!(
                "render does not pull from registries: `ksm-adapter plugin pull {} -o plugin.wasm`, then pass --plugin plugin.wasm without AdapterPlugins in the files",
                oci.url
            ));
        }
    };
    let wasm = runtime.load(&bytes, limits(&plugin.spec, defaults)).map_err(|e| e.to_string())?;
    let serving = ServingPlugin::configured(&name, Arc::new(wasm), &plugin.spec);
    validate(&serving, &plugin.spec).map_err(|e| e.to_string())?;
    Ok(Arc::new(serving))
}
