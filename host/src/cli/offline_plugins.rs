//! Which plugin serves each ServiceSet in `render`: the AdapterPlugins in the files, picked and
//! configured as the controller does (built-in and ConfigMap sources; OCI is not pulled
//! offline), or `--plugin` for every ServiceSet when the files declare none.

use super::plugin_args::{PluginArgs, load};
use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use ksm_adapter::adapter_plugin::{AdapterPlugin, Source};
use ksm_adapter::builtin;
use ksm_adapter::manifests::Manifests;
use ksm_adapter::plugin::Limits;
use ksm_adapter::runtime::Runtime;
use ksm_adapter::serving::{Assignment, ServingPlugin, assignment, limits, validate};
use std::sync::Arc;

/// The plugins of a render.
pub enum OfflinePlugins {
    /// No AdapterPlugin in the files: `--plugin` serves every provider.
    Only(Arc<ServingPlugin>),
    /// The AdapterPlugins in the files, each loaded or why not.
    Declared(Vec<(AdapterPlugin, Result<Arc<ServingPlugin>, String>)>),
}

impl OfflinePlugins {
    /// Loads the AdapterPlugins in `manifests`, or `--plugin` when there are none.
    pub fn load(runtime: &Runtime, manifests: &Manifests, args: &PluginArgs) -> anyhow::Result<Self> {
        let mut declared = Vec::new();
        for doc in manifests.documents.iter().filter(|d| d.object["kind"] == "AdapterPlugin") {
            let plugin: AdapterPlugin = serde_json::from_value(doc.object.clone())
                .with_context(|| format!("{}: not a valid AdapterPlugin", doc.origin))?;
            let loaded = load_declared(runtime, manifests, &plugin, args.limits.limits());
            declared.push((plugin, loaded));
        }
        if declared.is_empty() {
            let plugin = load(runtime, &args.plugin, args.limits.limits())?;
            return Ok(Self::Only(Arc::new(ServingPlugin::plain(Arc::new(plugin)))));
        }
        Ok(Self::Declared(declared))
    }

    /// The plugin serving StateManagementProvider `provider`, or why there is none.
    pub fn for_provider(&self, provider: &str) -> Result<Arc<ServingPlugin>, String> {
        let declared = match self {
            Self::Only(plugin) => return Ok(plugin.clone()),
            Self::Declared(declared) => declared,
        };
        let specs = declared.iter().map(|(p, _)| (p.metadata.name.as_deref().unwrap_or_default(), &p.spec));
        match assignment(specs, provider) {
            Assignment::One(name) => {
                let (_, loaded) =
                    declared.iter().find(|(p, _)| p.metadata.name.as_deref() == Some(&name)).expect("assigned");
                loaded.clone().map_err(|e| format!("AdapterPlugin {name:?}: {e}"))
            }
            other => Err(other.problem(provider).unwrap_or_default()),
        }
    }
}

fn load_declared(
    runtime: &Runtime,
    manifests: &Manifests,
    plugin: &AdapterPlugin,
    defaults: Limits,
) -> Result<Arc<ServingPlugin>, String> {
    let name = plugin.metadata.name.clone().unwrap_or_default();
    let bytes = match plugin.spec.source.get()? {
        Source::Builtin(builtin) => builtin::lookup(builtin)?.to_vec(),
        Source::ConfigMap(reference) => {
            let doc = manifests.find("v1", "ConfigMap", &reference.namespace, &reference.name).ok_or_else(|| {
                format!(
                    "spec.source.configMap: ConfigMap {}/{} is not in the files",
                    reference.namespace, reference.name
                )
            })?;
            let config_map: ConfigMap =
                serde_json::from_value(doc.object.clone()).map_err(|e| format!("{}: {e}", doc.origin))?;
            reference.bytes_in(&config_map)?
        }
        Source::Oci(oci) => {
            return Err(format!(
                "render does not pull from registries: `ksm-adapter plugin pull {} -o plugin.wasm`, then pass --plugin plugin.wasm without AdapterPlugins in the files",
                oci.url
            ));
        }
    };
    let wasm = runtime.load(&bytes, limits(&plugin.spec, defaults)).map_err(|e| e.to_string())?;
    let serving = ServingPlugin::configured(&name, Arc::new(wasm), &plugin.spec);
    validate(&serving, &plugin.spec)?;
    Ok(Arc::new(serving))
}
