//! Translations kept by their input. A ServiceSet is translated again in the round its
//! children's watch events wake, and after a restart over a converged state the translation
//! that records its claims is repeated by its first reconcile. The same plugin under the same
//! policy, with the same input (the whole ServiceSet, its templates and target), answers the
//! same, since the contract makes `translate` deterministic. So the checked answer is kept, for
//! a bounded number of inputs, the oldest dropped first; a changed ServiceSet or template is a
//! new input.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Arc, Mutex};

/// How many translations are kept: the round a new ServiceSet's children wake comes well within
/// this many other translations, and at ~3 KiB each (kept as JSON text, a third of a parsed
/// value's memory) it bounds the memo near 3 MiB.
pub const KEPT: usize = 1024;

/// Translations as JSON text by key (see [`key`](Self::key)), the oldest dropped first.
pub struct TranslationMemo {
    /// Keyed with a random key per process, so that no one can craft inputs that collide.
    hasher: RandomState,
    capacity: usize,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_key: HashMap<u64, Arc<str>>,
    oldest_first: VecDeque<u64>,
}

impl Default for TranslationMemo {
    fn default() -> Self {
        Self::with_capacity(KEPT)
    }
}

impl TranslationMemo {
    /// A memo keeping at most `capacity` translations.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { hasher: RandomState::new(), capacity, kept: Mutex::default() }
    }

    /// The key of a translation: of what tells the plugin load and policy apart (a
    /// `ServingPlugin::id`) and of the plugin's whole input.
    pub fn key(&self, what: impl Hash) -> u64 {
        self.hasher.hash_one(what)
    }

    /// The translation kept under `key`, if any.
    pub fn get(&self, key: u64) -> Option<Arc<str>> {
        self.lock().by_key.get(&key).cloned()
    }

    /// Keeps `translation` under `key`, dropping the oldest beyond the capacity.
    pub fn keep(&self, key: u64, translation: Arc<str>) {
        let mut memo = self.lock();
        if memo.by_key.insert(key, translation).is_none() {
            memo.oldest_first.push_back(key);
        }
        while memo.oldest_first.len() > self.capacity {
            let oldest = memo.oldest_first.pop_front().expect("longer than the capacity");
            memo.by_key.remove(&oldest);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ServiceOutcome, translate};
    use super::*;
    use crate::plugin::{CallError, NativePlugin, Plugin};
    use crate::policy::Policy;
    use crate::serving::ServingPlugin;
    use ksm_flux_plugin::FluxPlugin;
    use ksm_plugin_sdk::contract::{
        ConfigError, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
        TranslateInput,
    };
    use serde_json::Value;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The Flux plugin, counting its translations.
    #[derive(Default)]
    struct Counted {
        flux: NativePlugin<FluxPlugin>,
        translations: AtomicUsize,
    }

    impl Plugin for Counted {
        fn metadata(&self) -> &PluginMetadata {
            self.flux.metadata()
        }
        fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
            self.flux.validate_config(config)
        }
        fn translate(
            &self,
            input: &TranslateInput,
        ) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
            self.translations.fetch_add(1, Ordering::Relaxed);
            self.flux.translate(input)
        }
        fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
            self.flux.map_status(input)
        }
        fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
            self
        }
    }

    fn service_set(name: &str) -> Value {
        json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
               "metadata": {"name": name, "namespace": "team", "uid": "u1", "resourceVersion": "7"},
               "spec": {"cluster": "prod", "provider": {"name": "ksm-flux"},
                        "services": [{"name": "ingress", "namespace": "ingress", "template": "ingress-4-11-3"}]}})
    }

    fn template(name: &str) -> Option<Value> {
        Some(json!({"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceTemplate",
                    "metadata": {"name": name, "namespace": "team"}, "spec": {"helm": {}},
                    "status": {"valid": true, "chartRef": {"kind": "HelmChart", "name": name, "namespace": "team"}}}))
    }

    #[test]
    fn the_same_input_is_translated_once_and_answers_the_same() {
        let plugin = Arc::new(Counted::default());
        let serving = ServingPlugin::plain(plugin.clone());
        let memo = TranslationMemo::default();
        let first = translate(&serving, Some(&memo), &service_set("a"), template, "kcm-system").unwrap();
        let again = translate(&serving.session(), Some(&memo), &service_set("a"), template, "kcm-system").unwrap();
        assert!(matches!(first[0].outcome, ServiceOutcome::Objects(ref o) if o.len() == 1), "{first:?}");
        assert_eq!(first, again, "the kept translation, as it was");
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 1);

        let mut changed = service_set("a");
        changed["metadata"]["resourceVersion"] = json!("8");
        translate(&serving, Some(&memo), &changed, template, "kcm-system").unwrap();
        let other_template = |name: &str| {
            let mut changed = template(name)?;
            changed["spec"]["helm"] = json!({"values": "x: 1"});
            Some(changed)
        };
        translate(&serving, Some(&memo), &service_set("a"), other_template, "kcm-system").unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 3, "a changed ServiceSet or template is asked again");
    }

    #[test]
    fn another_policy_or_plugin_load_translates_anew() {
        let plugin = Arc::new(Counted::default());
        let serving = ServingPlugin::plain(plugin.clone());
        let memo = TranslationMemo::default();
        translate(&serving, Some(&memo), &service_set("a"), template, "kcm-system").unwrap();
        let narrowed = serving.with_policy(Policy { allowed_kinds: Some(Default::default()), ..Policy::default() });
        let refused = translate(&narrowed, Some(&memo), &service_set("a"), template, "kcm-system").unwrap();
        assert!(matches!(refused[0].outcome, ServiceOutcome::Refused(_)), "checked under the new policy: {refused:?}");
        translate(&ServingPlugin::plain(plugin.clone()), Some(&memo), &service_set("a"), template, "kcm-system")
            .unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn the_oldest_translation_goes_first_once_the_memo_is_full() {
        let plugin = Arc::new(Counted::default());
        let serving = ServingPlugin::plain(plugin.clone());
        let memo = TranslationMemo::with_capacity(2);
        for name in ["a", "b", "c", "c", "b"] {
            translate(&serving, Some(&memo), &service_set(name), template, "kcm-system").unwrap();
        }
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 3, "b and c kept");
        translate(&serving, Some(&memo), &service_set("a"), template, "kcm-system").unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 4);
    }
}
