//! Translations kept by their input. A ServiceSet is translated again in the round its
//! children's watch events wake, and after a start over existing ServiceSets the translation
//! that records its claims is repeated by its first reconcile. The same plugin under the same
//! policy, with the same input (the whole ServiceSet, its templates and target), answers the
//! same, since the contract makes `translate` deterministic. So the checked answer is kept, for
//! a bounded number of inputs, the oldest dropped first; a changed ServiceSet or template is a
//! new input.
//!
//! Each is kept as JSON text packed against the first kept ([`crate::packed`]): the
//! translations of one plugin differ in little but names, so one packs to a few dozen bytes,
//! and the memo can hold one per ServiceSet for less than [`KEPT`] unpacked texts took.

use crate::packed::{Packed, Packer};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Mutex;

/// How many translations are kept at least: the round a new ServiceSet's children wake comes
/// well within this many other translations. A start over more ServiceSets than this keeps one
/// per ServiceSet (see [`TranslationMemo::make_room_for`]).
pub const KEPT: usize = 1024;

/// Translations as packed JSON text by key (see [`key`](TranslationMemo::key)), the oldest
/// dropped first.
pub struct TranslationMemo {
    /// Keyed with a random key per process, so that no one can craft inputs that collide.
    hasher: RandomState,
    kept: Mutex<Kept>,
}

struct Kept {
    capacity: usize,
    by_key: HashMap<u64, Packed>,
    oldest_first: VecDeque<u64>,
    /// Its dictionary is the first translation kept.
    packer: Packer,
}

impl Default for TranslationMemo {
    fn default() -> Self {
        Self::with_capacity(KEPT)
    }
}

impl TranslationMemo {
    /// A memo keeping at most `capacity` translations.
    pub fn with_capacity(capacity: usize) -> Self {
        let kept = Kept { capacity, by_key: HashMap::new(), oldest_first: VecDeque::new(), packer: Packer::new() };
        Self { hasher: RandomState::new(), kept: Mutex::new(kept) }
    }

    /// Keeps at least `count` translations from now on: before the first reconciles the claims
    /// of every served ServiceSet are recorded by translating it, and each first reconcile
    /// translates the same input again; with room for them all, none is asked twice.
    pub fn make_room_for(&self, count: usize) {
        let mut memo = self.lock();
        memo.capacity = memo.capacity.max(count);
    }

    /// The key of a translation: of what tells the plugin load and policy apart (a
    /// `ServingPlugin::id`) and of the plugin's whole input.
    pub fn key(&self, what: impl Hash) -> u64 {
        self.hasher.hash_one(what)
    }

    /// The translation kept under `key`, if any, as JSON text.
    pub fn get(&self, key: u64) -> Option<Vec<u8>> {
        let mut memo = self.lock();
        let Kept { by_key, packer, .. } = &mut *memo;
        packer.unpack(by_key.get(&key)?).ok()
    }

    /// Keeps `translation` (JSON text) under `key`, dropping the oldest beyond the capacity.
    pub fn keep(&self, key: u64, translation: &str) {
        let mut guard = self.lock();
        let memo = &mut *guard;
        // A translation is not an object: it has no status.
        let Ok(packed) = memo.packer.pack(translation, false) else { return };
        if memo.by_key.insert(key, packed).is_none() {
            memo.oldest_first.push_back(key);
        }
        while memo.oldest_first.len() > memo.capacity {
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
    use super::*;
    use crate::plan::{ServiceOutcome, translate};
    use crate::plugin::{CallError, NativePlugin, Plugin};
    use crate::policy::Policy;
    use crate::serving::ServingPlugin;
    use crate::tenancy::Tenancy;
    use ksm_flux_plugin::FluxPlugin;
    use ksm_plugin_sdk::contract::{
        ConfigError, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
        TranslateInput,
    };
    use serde_json::Value;
    use serde_json::json;
    use std::sync::Arc;
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

    fn no_source(_: &ksm_plugin_sdk::sources::SourceRef) -> Option<Value> {
        None
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
        let first =
            translate(&serving, Some(&memo), &service_set("a"), template, no_source, Tenancy::default()).unwrap();
        let again =
            translate(&serving.session(), Some(&memo), &service_set("a"), template, no_source, Tenancy::default())
                .unwrap();
        assert!(matches!(first[0].outcome, ServiceOutcome::Objects(ref o) if o.len() == 1), "{first:?}");
        assert_eq!(first, again, "the kept translation, as it was");
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 1);

        let mut written = service_set("a");
        written["metadata"]["resourceVersion"] = json!("8");
        written["metadata"]["finalizers"] = json!(["ksm.k0rdent.mirantis.com/finalizer"]);
        written["status"] = json!({"deployed": false});
        translate(&serving, Some(&memo), &written, template, no_source, Tenancy::default()).unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 1, "the host's own writes are no new input");

        let mut changed = service_set("a");
        changed["metadata"]["labels"] = json!({"team": "b"});
        translate(&serving, Some(&memo), &changed, template, no_source, Tenancy::default()).unwrap();
        let other_template = |name: &str| {
            let mut changed = template(name)?;
            changed["spec"]["helm"] = json!({"values": "x: 1"});
            Some(changed)
        };
        translate(&serving, Some(&memo), &service_set("a"), other_template, no_source, Tenancy::default()).unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 3, "a changed ServiceSet or template is asked again");
    }

    #[test]
    fn another_policy_or_plugin_load_translates_anew() {
        let plugin = Arc::new(Counted::default());
        let serving = ServingPlugin::plain(plugin.clone());
        let memo = TranslationMemo::default();
        translate(&serving, Some(&memo), &service_set("a"), template, no_source, Tenancy::default()).unwrap();
        let narrowed = serving.with_policy(Policy { allowed_kinds: Some(Default::default()), ..Policy::default() });
        let refused =
            translate(&narrowed, Some(&memo), &service_set("a"), template, no_source, Tenancy::default()).unwrap();
        assert!(matches!(refused[0].outcome, ServiceOutcome::Refused(_)), "checked under the new policy: {refused:?}");
        translate(
            &ServingPlugin::plain(plugin.clone()),
            Some(&memo),
            &service_set("a"),
            template,
            no_source,
            Tenancy::default(),
        )
        .unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn the_oldest_translation_goes_first_once_the_memo_is_full() {
        let plugin = Arc::new(Counted::default());
        let serving = ServingPlugin::plain(plugin.clone());
        let memo = TranslationMemo::with_capacity(2);
        for name in ["a", "b", "c", "c", "b"] {
            translate(&serving, Some(&memo), &service_set(name), template, no_source, Tenancy::default()).unwrap();
        }
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 3, "b and c kept");
        translate(&serving, Some(&memo), &service_set("a"), template, no_source, Tenancy::default()).unwrap();
        assert_eq!(plugin.translations.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn room_made_for_every_service_set_keeps_each_translation_until_its_first_reconcile() {
        let plugin = Arc::new(Counted::default());
        let serving = ServingPlugin::plain(plugin.clone());
        let memo = TranslationMemo::with_capacity(2);
        let names: Vec<String> = (0..5).map(|i| format!("ss-{i}")).collect();
        memo.make_room_for(names.len());
        memo.make_room_for(1);
        let claims: Vec<_> = names
            .iter()
            .map(|name| {
                translate(&serving, Some(&memo), &service_set(name), template, no_source, Tenancy::default()).unwrap()
            })
            .collect();
        for (name, recorded) in names.iter().zip(&claims) {
            let reconciled =
                translate(&serving, Some(&memo), &service_set(name), template, no_source, Tenancy::default()).unwrap();
            assert_eq!(&reconciled, recorded, "{name}: the kept translation, unpacked whole");
        }
        assert_eq!(plugin.translations.load(Ordering::Relaxed), names.len(), "none asked twice");
    }
}
