//! Which plugin serves a ServiceSet, and with what: a loaded plugin together with the rules an
//! `AdapterPlugin` sets for it (policy narrowing, default provider config). Pure: the controller
//! loads plugins and keeps the assignments current; the planning core only sees a
//! [`ServingPlugin`].

use crate::adapter_plugin::AdapterPluginSpec;
use crate::k0rdent::StateManagementProvider;
use crate::plugin::Limits;
use crate::plugin::Plugin;
use crate::policy::{DEFAULT_OBJECTS_PER_SERVICE, Policy, Validation};
use ksm_plugin_sdk::contract::PluginMetadata;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A loaded plugin and the host's rules for it.
#[derive(Clone)]
pub struct ServingPlugin {
    /// The `AdapterPlugin` it was loaded from (the plugin's own name for offline commands).
    pub name: String,
    /// The plugin.
    pub plugin: Arc<dyn Plugin>,
    /// What the host accepts from it.
    pub policy: Policy,
    /// Default provider config, merged under each ServiceSet's own.
    pub config: Option<Value>,
    /// Tells this plugin load and policy apart from any other in what is kept of their answers
    /// ([`crate::plan::memo`]): each load and [`with_policy`](Self::with_policy) gets a new one,
    /// a [`session`](Self::session) keeps it.
    pub id: u64,
}

/// A new [`ServingPlugin::id`].
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl ServingPlugin {
    /// `plugin` with no narrowing and no default config (offline commands, tests).
    pub fn plain(plugin: Arc<dyn Plugin>) -> Self {
        Self { name: plugin.metadata().name.clone(), plugin, policy: Policy::default(), config: None, id: next_id() }
    }

    /// `plugin` under the rules of `AdapterPlugin` `name` with `spec`.
    pub fn configured(name: &str, plugin: Arc<dyn Plugin>, spec: &AdapterPluginSpec) -> Self {
        let limits = spec.limits.clone().unwrap_or_default();
        let policy = Policy {
            allowed_kinds: spec
                .allowed_kinds
                .as_ref()
                .map(|kinds| kinds.iter().map(|k| (k.group.clone(), k.kind.clone())).collect()),
            allowed_namespaces: spec.allowed_namespaces.clone().unwrap_or_default(),
            objects_per_service: limits.objects_per_service.map_or(DEFAULT_OBJECTS_PER_SERVICE, |n| n as usize),
            validations: validations(spec),
            service_account_names: spec.policy.iter().flat_map(|p| p.service_account_names.iter().cloned()).collect(),
        };
        Self { name: name.to_string(), plugin, policy, config: spec.config.clone(), id: next_id() }
    }

    /// The same plugin under `policy`.
    pub fn with_policy(&self, policy: Policy) -> Self {
        Self { policy, id: next_id(), ..self.clone() }
    }

    /// The same plugin and rules for the calls of one ServiceSet's reconcile (see
    /// [`Plugin::session`]).
    pub fn session(&self) -> Self {
        Self { plugin: self.plugin.clone().session(), ..self.clone() }
    }

    /// The plugin's metadata.
    pub fn metadata(&self) -> &PluginMetadata {
        self.plugin.metadata()
    }

    /// The kinds the plugin may create: those it declares, narrowed by the policy.
    pub fn kinds(&self) -> impl Iterator<Item = &ksm_plugin_sdk::contract::ObjectKind> {
        self.metadata().creates.iter().filter(|k| self.policy.allows_kind(&k.group, &k.kind))
    }

    /// The kinds the plugin reads (see [`crate::plan::reads`]); [`validate`] makes sure the
    /// policy allows each.
    pub fn reads(&self) -> impl Iterator<Item = &ksm_plugin_sdk::contract::ObjectKind> {
        self.metadata().reads.iter()
    }

    /// `service_set` (JSON) as the plugin sees it: without what the host itself writes on it
    /// ([`HOST_WRITTEN`] and the status), so that its own writes never make a new input (the
    /// finalizer it adds before the first apply would otherwise make every ServiceSet's first
    /// reconcile translate again what recording its claims translated); the default config
    /// merged under `spec.provider.config`.
    pub fn input_of(&self, service_set: &Value) -> Value {
        let mut service_set = service_set.clone();
        if let Some(object) = service_set.as_object_mut() {
            object.remove("status");
        }
        if let Some(metadata) = service_set.get_mut("metadata").and_then(Value::as_object_mut) {
            HOST_WRITTEN.iter().for_each(|field| drop(metadata.remove(*field)));
        }
        let Some(defaults) = &self.config else { return service_set };
        let own = service_set["spec"]["provider"]["config"].take();
        service_set["spec"]["provider"]["config"] = merge(defaults.clone(), own);
        service_set
    }
}

/// The ServiceSet's metadata fields that change when the host writes it (a finalizer, a status)
/// or that only the API server's bookkeeping reads: plugins do not see them.
pub const HOST_WRITTEN: [&str; 3] = ["resourceVersion", "finalizers", "managedFields"];

/// The rules of `spec.policy.validations`, named by their place.
fn validations(spec: &AdapterPluginSpec) -> Vec<Validation> {
    let rules = spec.policy.iter().flat_map(|p| p.validations.iter());
    rules
        .enumerate()
        .map(|(i, v)| Validation {
            origin: format!("spec.policy.validations[{i}]"),
            expression: v.expression.clone(),
            message: v.message.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| v.expression.clone()),
        })
        .collect()
}

/// Kinds whose CRDs in an SMP's `spec.provisionerCRDs` make it a Flux provider:
/// (group, plural).
const FLUX_CRDS: [(&str, &str); 2] =
    [("helm.toolkit.fluxcd.io", "helmreleases"), ("kustomize.toolkit.fluxcd.io", "kustomizations")];

/// Whether `smp` is for Flux: its `spec.provisionerCRDs` list HelmRelease's or Kustomization's.
pub fn is_flux_provider(smp: &StateManagementProvider) -> bool {
    smp.spec.provisioner_crds.iter().any(|crd| {
        FLUX_CRDS.iter().any(|(group, plural)| crd.group == *group && crd.resources.iter().any(|r| r == plural))
    })
}

/// Why a plugin may not serve under its AdapterPlugin's spec, naming the plugin, the kind and
/// the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// A plugin from a ConfigMap or an OCI registry, and no `spec.allowedKinds`.
    #[error(
        "spec.allowedKinds: a plugin from a ConfigMap or an OCI registry may create only the kinds listed there \
         (none by default); plugin {plugin:?} declares {declared}"
    )]
    KindsNotListed {
        /// The plugin's name.
        plugin: String,
        /// The kinds it declares, `group/Kind` joined.
        declared: String,
    },
    /// The plugin creates nothing.
    #[error("plugin {plugin:?} declares no kinds it creates")]
    NoKinds {
        /// The plugin's name.
        plugin: String,
    },
    /// The plugin creates a cluster-scoped kind.
    #[error(
        "plugin {plugin:?} declares cluster-scoped kind {group}/{kind}; plugins may create only namespaced objects"
    )]
    ClusterScoped {
        /// The plugin's name.
        plugin: String,
        /// The kind's group.
        group: String,
        /// The kind.
        kind: String,
    },
    /// The plugin reads Secrets.
    #[error("plugin {plugin:?} declares it reads {kind}: plugins never read Secrets")]
    ReadsSecrets {
        /// The plugin's name.
        plugin: String,
        /// The kind.
        kind: String,
    },
    /// The plugin reads a kind `spec.allowedKinds` does not list.
    #[error("spec.allowedKinds does not list {group}/{kind}, which plugin {plugin:?} reads")]
    ReadNotAllowed {
        /// The plugin's name.
        plugin: String,
        /// The kind's group.
        group: String,
        /// The kind.
        kind: String,
    },
    /// `spec.allowedKinds` allows none of the kinds the plugin creates.
    #[error("spec.allowedKinds leaves none of the kinds plugin {plugin:?} declares ({declared})")]
    NoneAllowed {
        /// The plugin's name.
        plugin: String,
        /// The kinds it declares, `group/Kind` joined.
        declared: String,
    },
}

/// The host's checks of a compiled plugin against its AdapterPlugin.
pub fn validate(serving: &ServingPlugin, spec: &AdapterPluginSpec) -> Result<(), Invalid> {
    let metadata = serving.metadata();
    let plugin = || metadata.name.clone();
    let declared = || metadata.creates.iter().map(|k| format!("{}/{}", k.group, k.kind)).collect::<Vec<_>>().join(", ");
    if spec.source.builtin.is_none() && spec.allowed_kinds.is_none() {
        return Err(Invalid::KindsNotListed { plugin: plugin(), declared: declared() });
    }
    if metadata.creates.is_empty() {
        return Err(Invalid::NoKinds { plugin: plugin() });
    }
    if let Some(kind) = metadata.creates.iter().find(|k| !k.namespaced) {
        return Err(Invalid::ClusterScoped { plugin: plugin(), group: kind.group.clone(), kind: kind.kind.clone() });
    }
    // The host watches what a plugin reads with its own permissions: only what the operator lets
    // the plugin touch, and never Secrets.
    if let Some(kind) = serving.reads().find(|k| k.group.is_empty() && k.kind == "Secret") {
        return Err(Invalid::ReadsSecrets { plugin: plugin(), kind: kind.kind.clone() });
    }
    if let Some(kind) = serving.reads().find(|k| !serving.policy.allows_kind(&k.group, &k.kind)) {
        return Err(Invalid::ReadNotAllowed { plugin: plugin(), group: kind.group.clone(), kind: kind.kind.clone() });
    }
    if serving.kinds().next().is_none() {
        return Err(Invalid::NoneAllowed { plugin: plugin(), declared: declared() });
    }
    Ok(())
}

/// The AdapterPlugin's limits over the host's `defaults`.
pub fn limits(spec: &AdapterPluginSpec, defaults: Limits) -> Limits {
    let Some(set) = &spec.limits else { return defaults };
    Limits {
        timeout: set.timeout_ms.map_or(defaults.timeout, Duration::from_millis),
        memory: set.memory_mib.map_or(defaults.memory, |mib| (mib as usize) << 20),
        output: set.output_kib.map_or(defaults.output, |kib| (kib as usize) << 10),
    }
}

/// `over` merged onto `under`: objects merge key by key (recursively), anything else in `over`
/// replaces what `under` has; a null `over` keeps `under`.
pub fn merge(under: Value, over: Value) -> Value {
    match (under, over) {
        (Value::Object(mut under), Value::Object(over)) => {
            for (key, value) in over {
                let merged = merge(under.remove(&key).unwrap_or(Value::Null), value);
                under.insert(key, merged);
            }
            Value::Object(under)
        }
        (under, Value::Null) => under,
        (_, over) => over,
    }
}

/// Who serves a provider, from the `AdapterPlugin` specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// No AdapterPlugin names the provider.
    Unserved,
    /// Exactly one AdapterPlugin names it.
    One(String),
    /// Several name it: none serves it until only one does.
    Contested(Vec<String>),
}

/// Which of `plugins` (name, spec) serves `provider`.
pub fn assignment<'a>(
    plugins: impl IntoIterator<Item = (&'a str, &'a AdapterPluginSpec)>,
    provider: &str,
) -> Assignment {
    let mut names: Vec<String> = plugins
        .into_iter()
        .filter(|(_, spec)| spec.providers.iter().any(|p| p == provider))
        .map(|(name, _)| name.to_string())
        .collect();
    names.sort();
    match names.len() {
        0 => Assignment::Unserved,
        1 => Assignment::One(names.remove(0)),
        _ => Assignment::Contested(names),
    }
}

/// Why no AdapterPlugin serves a provider.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unassigned {
    /// None names it.
    #[error(
        "no AdapterPlugin serves StateManagementProvider {provider:?}: declare one with spec.providers: [{provider:?}]"
    )]
    Unserved {
        /// The provider.
        provider: String,
    },
    /// Several name it.
    #[error(
        "AdapterPlugins {} all name StateManagementProvider {provider:?} in spec.providers; none serves it until only one does",
        .plugins.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
    )]
    Contested {
        /// The provider.
        provider: String,
        /// The AdapterPlugins naming it.
        plugins: Vec<String>,
    },
}

impl Assignment {
    /// The AdapterPlugin serving `provider`, or why none does (for a ServiceSet's condition).
    pub fn plugin(&self, provider: &str) -> Result<&str, Unassigned> {
        let provider = provider.to_string();
        match self {
            Self::One(name) => Ok(name),
            Self::Unserved => Err(Unassigned::Unserved { provider }),
            Self::Contested(plugins) => Err(Unassigned::Contested { provider, plugins: plugins.clone() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::CallError;
    use ksm_plugin_sdk::contract::{
        ConfigError, ObjectKind, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
        TranslateInput,
    };
    use serde_json::json;

    #[test]
    fn merge_keeps_defaults_the_service_set_does_not_set() {
        let merged = merge(
            json!({"priority": 100, "helm": {"timeout": "5m", "wait": true}}),
            json!({"helm": {"timeout": "10m"}, "stopOnConflict": true}),
        );
        assert_eq!(merged, json!({"priority": 100, "helm": {"timeout": "10m", "wait": true}, "stopOnConflict": true}));
        assert_eq!(merge(json!({"a": 1}), Value::Null), json!({"a": 1}));
    }

    #[test]
    fn a_plugin_sees_the_service_set_without_what_the_host_writes_on_it() {
        let plugin = Arc::new(crate::plugin::NativePlugin::<ksm_flux_plugin::FluxPlugin>::new());
        let service_set = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "a", "namespace": "team", "uid": "u1", "generation": 3, "resourceVersion": "42",
                         "labels": {"l": "v"}, "finalizers": ["ksm.k0rdent.mirantis.com/finalizer"],
                         "managedFields": [{"manager": "kcm"}]},
            "spec": {"provider": {"name": "ksm-flux", "config": {"priority": 7}}},
            "status": {"deployed": true},
        });
        let seen = json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
            "metadata": {"name": "a", "namespace": "team", "uid": "u1", "generation": 3, "labels": {"l": "v"}},
            "spec": {"provider": {"name": "ksm-flux", "config": {"priority": 7}}},
        });
        let plain = ServingPlugin::plain(plugin.clone());
        assert_eq!(plain.input_of(&service_set), seen);
        assert_eq!(plain.input_of(&seen), seen, "idempotent");
        let spec: AdapterPluginSpec =
            serde_json::from_value(json!({"source": {"builtin": "flux"}, "config": {"interval": "7m"}})).unwrap();
        let configured = ServingPlugin::configured("flux", plugin, &spec).input_of(&service_set);
        assert_eq!(configured["spec"]["provider"]["config"], json!({"interval": "7m", "priority": 7}));
        assert_eq!(configured["metadata"], seen["metadata"]);
    }

    /// A plugin that only declares `metadata`: what [`validate`] looks at.
    struct Declared(PluginMetadata);

    impl Plugin for Declared {
        fn metadata(&self) -> &PluginMetadata {
            &self.0
        }
        fn validate_config(&self, _: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
            unreachable!("validate looks at metadata only")
        }
        fn translate(&self, _: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
            unreachable!("validate looks at metadata only")
        }
        fn map_status(&self, _: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
            unreachable!("validate looks at metadata only")
        }
        fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
            self
        }
    }

    #[test]
    fn what_a_plugin_reads_must_be_allowed_and_never_secrets() {
        let kind = |group: &str, kind: &str| ObjectKind {
            group: group.into(),
            version: "v1beta1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        };
        let metadata = |reads| PluginMetadata {
            name: "sveltos".into(),
            version: "0.1.0".into(),
            contract_version: "0.1.0".into(),
            creates: vec![kind("config.projectsveltos.io", "Profile")],
            reads,
        };
        let allowed = |kinds: &[&str]| {
            let kinds =
                kinds.iter().map(|k| json!({"group": "config.projectsveltos.io", "kind": k})).collect::<Vec<_>>();
            serde_json::from_value::<AdapterPluginSpec>(json!({
                "providers": ["ksm-sveltos"], "source": {"oci": {"url": "r/p:1"}}, "allowedKinds": kinds,
            }))
            .unwrap()
        };
        let check = |reads, spec: &AdapterPluginSpec| {
            let plugin = Arc::new(Declared(metadata(reads)));
            validate(&ServingPlugin::configured("sveltos", plugin, spec), spec)
        };
        let summaries = vec![kind("config.projectsveltos.io", "ClusterSummary")];
        assert_eq!(check(summaries.clone(), &allowed(&["Profile", "ClusterSummary"])), Ok(()));
        let refused = check(summaries, &allowed(&["Profile"])).unwrap_err().to_string();
        assert_eq!(
            refused,
            "spec.allowedKinds does not list config.projectsveltos.io/ClusterSummary, which plugin \"sveltos\" reads"
        );
        let secrets = check(vec![kind("", "Secret")], &allowed(&["Profile"])).unwrap_err().to_string();
        assert!(secrets.contains("plugins never read Secrets"), "{secrets}");
    }

    #[test]
    fn a_provider_is_served_by_one_plugin_or_reported_unserved_or_contested() {
        let spec = |providers: &[&str]| AdapterPluginSpec {
            providers: providers.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        let (flux, argo, other) = (spec(&["ksm-flux"]), spec(&["ksm-argocd"]), spec(&["ksm-argocd", "x"]));
        let plugins = [("flux", &flux), ("argo", &argo), ("argo-2", &other)];
        assert_eq!(assignment(plugins, "ksm-flux"), Assignment::One("flux".into()));
        assert_eq!(assignment(plugins, "ksm-fleet"), Assignment::Unserved);
        let contested = assignment(plugins, "ksm-argocd");
        assert_eq!(contested, Assignment::Contested(vec!["argo".into(), "argo-2".into()]));
        let message = contested.plugin("ksm-argocd").unwrap_err().to_string();
        assert!(message.contains("\"argo\", \"argo-2\"") && message.contains("none serves it"), "{message}");
        let unserved = Assignment::Unserved.plugin("ksm-fleet").unwrap_err().to_string();
        assert!(unserved.contains("spec.providers: [\"ksm-fleet\"]"), "{unserved}");
    }
}
