//! What serves for each AdapterPlugin now, and which plugin serves a StateManagementProvider:
//! the one AdapterPlugin naming it, else the built-in default when it applies.

use super::fetch::Fetched;
use crate::adapter_plugin::{AdapterPlugin, Verify};
use crate::controller::plumbing::watches::wait_listed;
use crate::controller::settings::DefaultPlugin;
use crate::k0rdent::StateManagementProvider;
use crate::policy::Policy;
use crate::serving::{Assignment, ServingPlugin, Unassigned, assignment, is_flux_provider};
use crate::smp::AdapterIdentity;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use tokio::sync::watch;

/// The version of an AdapterPlugin that serves now.
#[derive(Clone)]
pub struct Loaded {
    /// The plugin serving now, under `policy` or, while a later spec fails to load, under
    /// the narrowest of `policy` and that spec's.
    pub serving: Arc<ServingPlugin>,
    /// The policy of the spec it was loaded for.
    pub policy: Policy,
    /// The component, for a spec change that keeps it (and OCI `IfNotPresent`).
    pub fetched: Fetched,
    /// The AdapterPlugin generation it was loaded for.
    pub generation: Option<i64>,
    /// The signature it was verified with (`spec.source.oci.verify`), if any.
    pub verify: Option<Verify>,
    /// The fingerprint of the keys and trust root it was verified with, as they read then.
    pub keys: Option<String>,
    /// What verified its signature: the key, or the keyless rules and who matched them.
    pub verified: Option<String>,
    /// The providers that generation named.
    pub providers: Vec<String>,
}

/// Why no plugin serves a StateManagementProvider, for its ServiceSets' condition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unserved {
    /// No AdapterPlugin names it, or several do.
    #[error(transparent)]
    Unassigned(#[from] Unassigned),
    /// The AdapterPlugin naming it has not loaded.
    #[error("AdapterPlugin {plugin:?} serves StateManagementProvider {provider:?} but has no plugin loaded: {error}")]
    NotLoaded {
        /// The AdapterPlugin.
        plugin: String,
        /// The provider.
        provider: String,
        /// Why, as its status says (or that it has not loaded yet).
        error: String,
    },
    /// The built-in default serves it, and did not load.
    #[error(
        "StateManagementProvider {provider:?} is served by the built-in Flux plugin, which did not load (see the host's log)"
    )]
    DefaultNotLoaded {
        /// The provider.
        provider: String,
    },
}

/// The plugins loaded from AdapterPlugins, by AdapterPlugin name, and the built-in default.
pub struct Registry {
    loaded: RwLock<HashMap<String, Loaded>>,
    /// The built-in default for SMPs no AdapterPlugin names, once loaded.
    default: OnceLock<Arc<ServingPlugin>>,
    default_plugin: DefaultPlugin,
    /// This host: it loads only the AdapterPlugins naming an SMP that names it.
    identity: AdapterIdentity,
    /// Every AdapterPlugin.
    specs: Store<AdapterPlugin>,
    /// Every StateManagementProvider.
    providers: Store<StateManagementProvider>,
}

impl Registry {
    /// No plugins yet for the host `identity`; `specs` and `providers` are the caches
    /// assignments are read from.
    pub fn new(
        (identity, default_plugin): (AdapterIdentity, DefaultPlugin),
        specs: Store<AdapterPlugin>,
        providers: Store<StateManagementProvider>,
    ) -> Self {
        Self { loaded: RwLock::default(), default: OnceLock::new(), default_plugin, identity, specs, providers }
    }

    /// Whether `plugin` is this host's to load and report on: one of the SMPs it names names
    /// this host as adapter, or none of them exists yet. AdapterPlugins are cluster-scoped and
    /// every installation sees them all; only the hosts serving its providers load one and write
    /// its status, so that installations never contend for one status. One naming no existing
    /// SMP is reported by every host (each says the same), so that an operator sees how it
    /// loads before its SMP exists.
    pub fn is_ours(&self, plugin: &AdapterPlugin) -> bool {
        let smps: Vec<_> =
            plugin.spec.providers.iter().filter_map(|provider| self.providers.get(&ObjectRef::new(provider))).collect();
        smps.is_empty() || smps.iter().any(|smp| self.identity.is_adapter_of(smp))
    }

    /// What serves for the AdapterPlugin `name` now, if anything loaded.
    pub fn current(&self, name: &str) -> Option<Loaded> {
        self.loaded.read().unwrap().get(name).cloned()
    }

    /// `loaded` serves for the AdapterPlugin `name` from now on.
    pub fn serve(&self, name: String, loaded: Loaded) {
        self.loaded.write().unwrap().insert(name, loaded);
    }

    /// The AdapterPlugin `name` is gone: what it loaded serves no more.
    pub fn remove(&self, name: &str) -> Option<Loaded> {
        self.loaded.write().unwrap().remove(name)
    }

    /// Whether the built-in default is turned on.
    pub fn default_plugin(&self) -> DefaultPlugin {
        self.default_plugin
    }

    /// The built-in default serves from now on.
    pub fn serve_default(&self, serving: ServingPlugin) {
        let _ = self.default.set(Arc::new(serving));
    }

    /// Every AdapterPlugin.
    pub fn specs(&self) -> Vec<Arc<AdapterPlugin>> {
        self.specs.state()
    }

    /// The AdapterPlugins that are this host's, once the caches of AdapterPlugins and of SMPs
    /// both hold a complete list (`listed`): before the SMPs are listed none exists, and every
    /// AdapterPlugin (another installation's too) would look like this host's.
    pub async fn ours_once_listed(&self, listed: [watch::Receiver<bool>; 2]) -> Vec<Arc<AdapterPlugin>> {
        futures::future::join_all(listed.map(wait_listed)).await;
        self.specs().into_iter().filter(|p| self.is_ours(p)).collect()
    }

    /// The plugin serving StateManagementProvider `provider`, or why there is none (for the
    /// ServiceSet's condition).
    pub fn serving_for(&self, provider: &str) -> Result<Arc<ServingPlugin>, Unserved> {
        let specs = self.specs.state();
        let assigned = assign(&specs, provider);
        if assigned == Assignment::Unserved
            && let Some(default) = self.default_for(provider)
        {
            return default;
        }
        let name = assigned.plugin(provider)?;
        self.current(name).map(|l| l.serving).ok_or_else(|| {
            let error = specs
                .iter()
                .find(|p| p.name_any() == *name)
                .and_then(|p| p.status.as_ref())
                .map(|s| s.error.clone())
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "not loaded yet".into());
            Unserved::NotLoaded { plugin: name.into(), provider: provider.into(), error }
        })
    }

    /// Why the providers `plugin` names are contested by other AdapterPlugins, one line each.
    pub fn contested(&self, plugin: &AdapterPlugin) -> Vec<String> {
        let specs = self.specs.state();
        plugin
            .spec
            .providers
            .iter()
            .filter_map(|provider| match assign(&specs, provider).plugin(provider) {
                Err(contested @ Unassigned::Contested { .. }) => Some(contested.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The built-in default for `provider`, an SMP no AdapterPlugin names: `None` when the
    /// default does not apply to it (turned off, or not a Flux provider).
    fn default_for(&self, provider: &str) -> Option<Result<Arc<ServingPlugin>, Unserved>> {
        let smp = self.providers.get(&ObjectRef::new(provider))?;
        if self.default_plugin != DefaultPlugin::Flux || !is_flux_provider(&smp) {
            return None;
        }
        Some(self.default.get().cloned().ok_or_else(|| Unserved::DefaultNotLoaded { provider: provider.into() }))
    }
}

fn assign(specs: &[Arc<AdapterPlugin>], provider: &str) -> Assignment {
    assignment(specs.iter().map(|p| (p.metadata.name.as_deref().unwrap_or_default(), &p.spec)), provider)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::controller::adapter_plugins::fetch::Fetched;
    use crate::plugin::NativePlugin;
    use ksm_flux_plugin::FluxPlugin;
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher::Event;
    use serde_json::json;

    /// An AdapterPlugin `name` naming `providers`, with `error` in its status.
    pub fn adapter_plugin(name: &str, providers: &[&str], error: &str) -> AdapterPlugin {
        serde_json::from_value(json!({
            "apiVersion": "ksm.k0rdent.mirantis.com/v1alpha1", "kind": "AdapterPlugin",
            "metadata": {"name": name, "generation": 1},
            "spec": {"source": {"builtin": "flux"}, "providers": providers},
            "status": {"error": error},
        }))
        .unwrap()
    }

    /// The Flux plugin, loaded for generation 1 of an AdapterPlugin naming `providers`.
    pub fn loaded(providers: &[&str]) -> Loaded {
        let serving = ServingPlugin::plain(Arc::new(NativePlugin::<FluxPlugin>::new()));
        let fetched = Fetched { bytes: Arc::from(&b"component"[..]), sha256: "abc".into(), pulled: None };
        Loaded {
            policy: serving.policy.clone(),
            serving: Arc::new(serving),
            fetched,
            generation: Some(1),
            verify: None,
            keys: None,
            verified: None,
            providers: providers.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn identity() -> AdapterIdentity {
        AdapterIdentity { name: "ksm-adapter".into(), namespace: "kcm-system".into() }
    }

    fn smp(name: &str, flux: bool) -> StateManagementProvider {
        let crds = if flux {
            json!([{"group": "helm.toolkit.fluxcd.io", "version": "v2", "resources": ["helmreleases"]}])
        } else {
            json!([{"group": "argoproj.io", "version": "v1alpha1", "resources": ["applications"]}])
        };
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "StateManagementProvider",
            "metadata": {"name": name}, "spec": {"selector": {}, "provisionerCRDs": crds,
                "adapter": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ksm-adapter", "namespace": "kcm-system"}},
        }))
        .unwrap()
    }

    fn fill<K: kube::Resource<DynamicType = ()> + Clone>(objects: Vec<K>) -> Store<K> {
        let (store, mut writer): (Store<K>, Writer<K>) = reflector::store();
        for object in objects {
            writer.apply_watcher_event(&Event::Apply(object));
        }
        store
    }

    fn registry(default: DefaultPlugin, plugins: Vec<AdapterPlugin>) -> Registry {
        Registry::new((identity(), default), fill(plugins), fill(vec![smp("ksm-flux", true), smp("ksm-argo", false)]))
    }

    #[test]
    fn an_smp_no_adapter_plugin_names_gets_the_builtin_default_when_it_is_for_flux() {
        let registry = registry(DefaultPlugin::Flux, vec![]);
        let not_loaded = registry.serving_for("ksm-flux").err().unwrap().to_string();
        assert!(not_loaded.contains("built-in Flux plugin, which did not load"), "{not_loaded}");
        registry.serve_default(ServingPlugin::plain(Arc::new(NativePlugin::<FluxPlugin>::new())));
        assert!(registry.serving_for("ksm-flux").is_ok());
        let argo = registry.serving_for("ksm-argo").err().unwrap().to_string();
        assert!(argo.starts_with("no AdapterPlugin serves StateManagementProvider \"ksm-argo\""), "{argo}");
        let off = registry_with_default_off();
        assert!(off.serving_for("ksm-flux").err().unwrap().to_string().starts_with("no AdapterPlugin serves"));
    }

    fn registry_with_default_off() -> Registry {
        registry(DefaultPlugin::None, vec![])
    }

    #[test]
    fn the_one_adapter_plugin_naming_an_smp_serves_it_once_loaded() {
        let registry = registry(DefaultPlugin::Flux, vec![adapter_plugin("argo", &["ksm-argo"], "fetch failed")]);
        let waiting = registry.serving_for("ksm-argo").err().unwrap().to_string();
        assert!(waiting.ends_with("has no plugin loaded: fetch failed"), "{waiting}");
        registry.serve("argo".into(), loaded(&["ksm-argo"]));
        assert!(registry.serving_for("ksm-argo").is_ok());
        assert!(registry.remove("argo").is_some());
        assert!(registry.serving_for("ksm-argo").is_err(), "gone with its AdapterPlugin");
    }

    #[test]
    fn two_adapter_plugins_naming_one_smp_serve_it_neither() {
        let (a, b) = (adapter_plugin("a", &["ksm-flux"], ""), adapter_plugin("b", &["ksm-flux", "ksm-argo"], ""));
        let registry = registry(DefaultPlugin::Flux, vec![a.clone(), b.clone()]);
        registry.serve("a".into(), loaded(&["ksm-flux"]));
        let contested = registry.serving_for("ksm-flux").err().unwrap().to_string();
        assert!(contested.contains("none serves it until only one does"), "{contested}");
        assert_eq!(registry.contested(&a).len(), 1);
        assert_eq!(registry.contested(&b).len(), 1, "ksm-argo is b's alone");
    }

    #[test]
    fn only_adapter_plugins_naming_an_smp_of_this_host_are_its_own() {
        let registry = registry(DefaultPlugin::Flux, vec![]);
        assert!(registry.is_ours(&adapter_plugin("flux", &["ksm-flux"], "")));
        assert!(registry.is_ours(&adapter_plugin("both", &["gone", "ksm-argo"], "")));
        assert!(registry.is_ours(&adapter_plugin("gone", &["gone"], "")), "no SMP yet: reported by every host");
        let other = Registry::new(
            (AdapterIdentity { name: "other".into(), namespace: "kcm-system".into() }, DefaultPlugin::Flux),
            fill(vec![]),
            fill(vec![smp("ksm-flux", true)]),
        );
        assert!(!other.is_ours(&adapter_plugin("flux", &["ksm-flux"], "")), "another installation's SMP");
        assert!(!other.is_ours(&adapter_plugin("both", &["gone", "ksm-flux"], "")));
    }

    /// Found on a shared API server: a host that chose its AdapterPlugins when they were listed
    /// but the SMPs not yet took another installation's for its own, and its start waited a
    /// minute for that plugin (CPython) to compile.
    #[tokio::test]
    async fn a_host_chooses_its_adapter_plugins_only_once_the_smps_are_listed() {
        let (providers, mut writer): (Store<StateManagementProvider>, Writer<StateManagementProvider>) =
            reflector::store();
        let specs =
            fill(vec![adapter_plugin("theirs", &["ksm-theirs"], ""), adapter_plugin("flux", &["ksm-flux"], "")]);
        let registry = Registry::new((identity(), DefaultPlugin::Flux), specs, providers);
        let (plugins_listed, smps_listed) = (watch::channel(true), watch::channel(false));
        let chosen = registry.ours_once_listed([plugins_listed.1, smps_listed.1]);
        tokio::pin!(chosen);
        assert!(futures::poll!(&mut chosen).is_pending(), "the SMPs are not listed yet");
        let mut theirs = smp("ksm-theirs", true);
        theirs.spec.adapter.name = "another-adapter".into();
        for smp in [theirs, smp("ksm-flux", true)] {
            writer.apply_watcher_event(&Event::Apply(smp));
        }
        smps_listed.0.send_replace(true);
        let names: Vec<_> = chosen.await.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, ["flux"]);
    }
}
