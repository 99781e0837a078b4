//! Kubernetes Events on ServiceSets and AdapterPlugins, for the transitions
//! [`plan::events`](crate::plan::events) picks. Best effort: an Event that cannot be written is
//! logged, never retried, and never fails a reconcile.
//!
//! Written as kube's `Recorder` writes them: an `events.k8s.io/v1` Event, patched into a series
//! when it repeats within six minutes. Unlike the `Recorder`, the cache keeps a hash, a count
//! and two times per Event (not the whole Event, nor its name, which the regarding object and
//! its creation time make), drops expired entries once a minute (not with a scan of the whole
//! cache on every publish), and keeps at most [`SERIES_MAX`] of them, as client-go's Event
//! correlator: a host deploying 100,000 ServiceSets within six minutes would otherwise keep an
//! entry for each.

use crate::plan::events::Note;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

/// How long after its last observation an Event can still grow into a series (as kube's).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// How often, at the most, the cache drops the entries past [`SERIES_TTL`].
const PRUNE_EVERY: SignedDuration = SignedDuration::from_mins(1);

/// The most Events the cache keeps (client-go's `maxLruCacheEntries`, in
/// `tools/record/events_cache.go`): a repeat of one it no longer keeps is a new Event.
const SERIES_MAX: usize = 4096;

/// Publishes Events as this host.
pub struct Events {
    /// Where the Events go.
    client: Client,
    /// Who they say reported them.
    reporter: Reporter,
    /// The recent Events, to patch a repeat into a series.
    series: Mutex<SeriesCache>,
}

impl Events {
    /// Events reported by controller `name` (the adapter Deployment).
    pub fn new(client: Client, name: &str) -> Self {
        let instance = std::env::var("HOSTNAME").ok().unwrap_or_else(|| name.into());
        let reporter = Reporter { controller: name.into(), instance };
        Self { client, reporter, series: Mutex::default() }
    }

    /// Publishes `notes` about `object`, the outcome of `action`.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, action: &str, notes: &[Note]) {
        let regarding = object.object_ref(&());
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        for note in notes {
            if let Err(e) = self.publish_one(&api, &regarding, action, note).await {
                tracing::debug!("publishing event {}: {e}", note.reason);
            }
        }
    }

    /// Publishes one Event: a series patch if the cache says it repeats (a new Event if that
    /// one is gone), else a new Event.
    async fn publish_one(
        &self,
        api: &Api<Event>,
        regarding: &ObjectReference,
        action: &str,
        note: &Note,
    ) -> Result<(), kube::Error> {
        let message = truncate(&note.message);
        let key = event_key(regarding, action, note.warning, &note.reason, &message);
        let now = Timestamp::now();
        let decision = self.cache().decide(key, now);
        if let Decision::Series { created, count } = decision {
            let series = EventSeries { count, last_observed_time: MicroTime(now) };
            let patch = Patch::Merge(serde_json::json!({ "series": series }));
            match api.patch(&event_name(&self.reporter, regarding, created), &PatchParams::default(), &patch).await {
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                result => return result.map(drop),
            }
        }
        let event = new_event(&self.reporter, regarding, action, note, message, now);
        api.create(&PostParams::default(), &event).await?;
        self.cache().created(key, now);
        Ok(())
    }

    /// The series cache, locked (never across an await).
    fn cache(&self) -> MutexGuard<'_, SeriesCache> {
        self.series.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Who reports the Events.
struct Reporter {
    /// `reportingController`: the adapter Deployment's name.
    controller: String,
    /// `reportingInstance`: the pod's hostname, else the controller's name.
    instance: String,
}

/// A new Event, with the fields kube's `Recorder` sets, created `now`.
fn new_event(
    reporter: &Reporter,
    regarding: &ObjectReference,
    action: &str,
    note: &Note,
    message: String,
    now: Timestamp,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(reporter, regarding, now)),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        action: Some(action.into()),
        reason: Some(note.reason.clone()),
        note: Some(message),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(reporter.instance.clone()),
        type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
        ..Event::default()
    }
}

/// The name of the Event about `regarding` created at `created`, as kube's `Recorder` names
/// it: `{regarding name}.{created in ns, hex}`.
fn event_name(reporter: &Reporter, regarding: &ObjectReference, created: Timestamp) -> String {
    let name = regarding.name.as_ref().unwrap_or(&reporter.controller);
    format!("{name}.{:x}", created.as_nanosecond())
}

/// The identity of an Event for series: its type, action, reason, note and regarding object
/// (uid, kind, namespace, name), hashed. A collision (~2⁻⁶⁴ a pair) patches the wrong series.
fn event_key(regarding: &ObjectReference, action: &str, warning: bool, reason: &str, message: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (warning, action, reason, message).hash(&mut hasher);
    (&regarding.uid, &regarding.kind, &regarding.namespace, &regarding.name).hash(&mut hasher);
    hasher.finish()
}

/// What the cache keeps of one published Event (its namespace is in its key: the regarding
/// object's).
#[derive(Debug)]
struct Published {
    /// When it was created, which names it ([`event_name`]).
    created: Timestamp,
    /// Its `series.count`: 1 until it repeats.
    count: i32,
    /// When it was last observed: created, or patched into its series.
    last: Timestamp,
}

impl Published {
    /// Whether a repeat at `now` still joins its series: last observed within [`SERIES_TTL`].
    fn live(&self, now: Timestamp) -> bool {
        self.last + SERIES_TTL > now
    }
}

/// How to publish one Event.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// Create a new Event.
    Create,
    /// Merge-patch the Event created at `created` with `series.count` = `count`.
    Series { created: Timestamp, count: i32 },
}

/// The Events published recently, by [`event_key`]: whether the next one is new or a repeat.
#[derive(Debug, Default)]
struct SeriesCache {
    /// By key, the Events last observed within [`SERIES_TTL`] (and expired ones not pruned yet).
    published: HashMap<u64, Published>,
    /// When expired entries are next dropped.
    next_prune: Timestamp,
}

impl SeriesCache {
    /// Publishing Event `key` at `now`: a series if it was last observed within [`SERIES_TTL`]
    /// (counted and observed now), else a new Event. Prunes at most once per [`PRUNE_EVERY`].
    fn decide(&mut self, key: u64, now: Timestamp) -> Decision {
        if now >= self.next_prune {
            self.drop_expired(now);
            self.next_prune = now + PRUNE_EVERY;
        }
        match self.published.get_mut(&key) {
            Some(p) if p.live(now) => {
                p.count += 1;
                p.last = now;
                Decision::Series { created: p.created, count: p.count }
            }
            _ => Decision::Create,
        }
    }

    /// Event `key` was created at `now`.
    fn created(&mut self, key: u64, now: Timestamp) {
        if self.published.len() >= SERIES_MAX && !self.published.contains_key(&key) {
            self.make_room(now);
        }
        self.published.insert(key, Published { created: now, count: 1, last: now });
    }

    /// Drops the expired entries, then, if the cache is still full, the half observed least
    /// recently: every kept entry was observed after every dropped one, and a full cache is
    /// halved once per [`SERIES_MAX`] / 2 new Events, not scanned on each.
    fn make_room(&mut self, now: Timestamp) {
        self.drop_expired(now);
        if self.published.len() >= SERIES_MAX {
            let mut lasts: Vec<Timestamp> = self.published.values().map(|p| p.last).collect();
            let middle = lasts.len() / 2;
            let (_, &mut median, _) = lasts.select_nth_unstable(middle);
            self.published.retain(|_, p| p.last > median);
        }
    }

    /// Drops the entries past [`SERIES_TTL`].
    fn drop_expired(&mut self, now: Timestamp) {
        self.published.retain(|_, p| p.live(now));
    }
}

/// Event notes are limited to 1 kB.
fn truncate(message: &str) -> String {
    if message.len() <= 1024 {
        return message.to_string();
    }
    format!("{}...", &message[..message.floor_char_boundary(1020)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ServiceSet `web` in `team`.
    fn web() -> ObjectReference {
        ObjectReference {
            api_version: Some("k0rdent.mirantis.com/v1beta1".into()),
            kind: Some("ServiceSet".into()),
            name: Some("web".into()),
            namespace: Some("team".into()),
            uid: Some("uid-1".into()),
            ..ObjectReference::default()
        }
    }

    /// The key of a Normal `Reconcile` Event on `web`.
    fn web_key(reason: &str, message: &str) -> u64 {
        event_key(&web(), "Reconcile", false, reason, message)
    }

    /// `minutes` after an arbitrary start.
    fn at(minutes: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_hours(1000) + SignedDuration::from_mins(minutes)
    }

    /// A cache that created an Event for `key` at `minutes`.
    fn cache_with(key: u64, minutes: i64) -> SeriesCache {
        let mut cache = SeriesCache::default();
        assert_eq!(cache.decide(key, at(minutes)), Decision::Create);
        cache.created(key, at(minutes));
        cache
    }

    /// A series decision for the Event created at `minutes`.
    fn series(minutes: i64, count: i32) -> Decision {
        Decision::Series { created: at(minutes), count }
    }

    #[test]
    fn a_repeat_within_the_ttl_is_a_series_counted_from_two() {
        let key = web_key("Deployed", "all 2 services deployed");
        let mut cache = cache_with(key, 0);
        assert_eq!(cache.decide(key, at(5)), series(0, 2));
        // The TTL runs from the last observation, not the creation.
        assert_eq!(cache.decide(key, at(10)), series(0, 3));
    }

    #[test]
    fn another_note_reason_type_or_object_is_another_event() {
        let key = web_key("Deployed", "all 2 services deployed");
        let mut cache = cache_with(key, 0);
        let mut other = web();
        other.uid = Some("uid-2".into());
        for different in [
            web_key("Deployed", "all 3 services deployed"),
            web_key("Progressing", "all 2 services deployed"),
            event_key(&web(), "Reconcile", true, "Deployed", "all 2 services deployed"),
            event_key(&web(), "Load", false, "Deployed", "all 2 services deployed"),
            event_key(&other, "Reconcile", false, "Deployed", "all 2 services deployed"),
        ] {
            assert_ne!(different, key);
            assert_eq!(cache.decide(different, at(1)), Decision::Create);
        }
    }

    #[test]
    fn a_repeat_after_the_ttl_is_a_new_event() {
        let key = web_key("Deployed", "all 2 services deployed");
        let mut cache = cache_with(key, 0);
        assert_eq!(cache.decide(key, at(6)), Decision::Create);
        cache.created(key, at(6));
        assert_eq!(cache.decide(key, at(7)), series(6, 2));
    }

    #[test]
    fn expired_entries_are_pruned_at_most_once_a_minute() {
        let (old, recent) = (web_key("Deployed", "old"), web_key("Deployed", "recent"));
        let seconds = |s: i64| at(0) + SignedDuration::from_secs(s);
        let mut cache = cache_with(old, 0);
        // A prune at 5:45 keeps `old`, which expires at 6:00; the next prune is due at 6:45.
        assert_eq!(cache.decide(recent, seconds(345)), Decision::Create);
        cache.created(recent, seconds(345));
        assert_eq!(cache.decide(old, seconds(390)), Decision::Create, "expired, though not pruned yet");
        assert_eq!(cache.published.len(), 2);
        cache.decide(web_key("Deployed", "probe"), seconds(405));
        assert_eq!(cache.published.keys().collect::<Vec<_>>(), [&recent]);
    }

    /// Deploying many ServiceSets within six minutes, the cache kept an entry for each one's
    /// Deployed Event: 4.1 of 95.0 MB live at 30,000 × 3 (a heap profile of `c560177`).
    #[test]
    fn a_full_cache_keeps_the_half_observed_last() {
        let seconds = |s: usize| at(0) + SignedDuration::from_secs(i64::try_from(s).unwrap());
        let key = |i: usize| web_key("Deployed", &format!("{i}"));
        let mut cache = SeriesCache::default();
        for i in 0..SERIES_MAX {
            assert_eq!(cache.decide(key(i), seconds(i / 100)), Decision::Create);
            cache.created(key(i), seconds(i / 100));
        }
        // The first one repeats: observed last now, it stays when the cache is halved.
        let last = SERIES_MAX / 100;
        assert_eq!(cache.decide(key(0), seconds(last)), series(0, 2));
        cache.created(key(SERIES_MAX), seconds(last));
        assert!(cache.published.len() <= SERIES_MAX / 2 + 1, "{} kept", cache.published.len());
        assert_eq!(cache.decide(key(1), seconds(last)), Decision::Create, "dropped: observed first");
        for kept in [0, SERIES_MAX - 1, SERIES_MAX] {
            assert!(matches!(cache.decide(key(kept), seconds(last)), Decision::Series { .. }), "{kept} kept");
        }
    }

    #[test]
    fn a_new_event_has_the_fields_kube_sets() {
        let reporter = Reporter { controller: "ksm-adapter".into(), instance: "ksm-adapter-0".into() };
        let note = Note { warning: true, reason: "ServiceFailed".into(), message: "refused".into() };
        let event = new_event(&reporter, &web(), "Reconcile", &note, "refused".into(), at(0));
        let nanos = at(0).as_nanosecond();
        assert_eq!(event.metadata.name.as_deref(), Some(format!("web.{nanos:x}").as_str()));
        let nameless = ObjectReference { name: None, ..web() };
        assert_eq!(event_name(&reporter, &nameless, at(0)), format!("ksm-adapter.{nanos:x}"), "a series patches it");
        assert_eq!(event.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(event.action.as_deref(), Some("Reconcile"));
        assert_eq!(event.reason.as_deref(), Some("ServiceFailed"));
        assert_eq!(event.note.as_deref(), Some("refused"));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.event_time, Some(MicroTime(at(0))));
        assert_eq!(event.regarding, Some(web()));
        assert_eq!(event.reporting_controller.as_deref(), Some("ksm-adapter"));
        assert_eq!(event.reporting_instance.as_deref(), Some("ksm-adapter-0"));
        assert!(event.series.is_none() && event.related.is_none());
    }

    #[test]
    fn long_notes_are_truncated_to_1_kb() {
        let message = "é".repeat(600);
        let note = truncate(&message);
        assert!(note.len() <= 1024 && note.ends_with("..."));
        assert_eq!(truncate("short"), "short");
    }
}
