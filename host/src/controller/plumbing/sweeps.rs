//! Passes over the cached ServiceSets, fed to the controller a few at a time: one over all of
//! them after each complete list (the start, a re-list after a watch lost its place), and one per
//! resync period over those whose last round ended settled, spread over the period.
//!
//! Fed at once, as kube-runtime feeds a list's objects and per-object requeues, a start-up's or
//! a resync's 100,000 would wait in the controller's [queue](super::queue), and a change behind
//! every one due before it (docs/performance.md). Fed this way a pass holds at most `seats` of
//! them there at a time, and a change waits behind no more.

use crate::controller::caches::service_set_cache::CachedServiceSet;
use crate::controller::caches::service_set_store::ServiceSets;
use crate::k0rdent::NamespacedName;
use futures::Stream;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, sleep_until, timeout};

/// The longest a seat is held: one whose object the controller never reports back (it reports
/// every run, even of an object gone meanwhile) frees itself after this.
const HOLD_LIMIT: Duration = Duration::from_secs(300);

/// The passes' shared state: the seats, which ServiceSets are due a resync, and whether the
/// cache was listed again.
pub struct Sweeps {
    seats: Arc<Semaphore>,
    /// Seats held, by ServiceSet, since when.
    held: Mutex<HashMap<u64, (OwnedSemaphorePermit, Instant)>>,
    /// The ServiceSets whose last round ended settled: 8 bytes each.
    due: Mutex<HashSet<u64>>,
    relisted: Notify,
}

/// An object in the tables: a hash of its namespace and name (a collision costs at most an
/// extra or a skipped resync).
pub fn key(namespace: &str, name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (namespace, name).hash(&mut hasher);
    hasher.finish()
}

fn key_of(object: &CachedServiceSet) -> u64 {
    key(object.namespace(), object.name())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// When the `index`th of `count` runs in a pass spread over `period` from `start`.
fn paced(start: Instant, period: Duration, index: usize, count: usize) -> Instant {
    start + period.mul_f64(index as f64 / count.max(1) as f64)
}

impl Sweeps {
    /// Passes that hold at most `seats` ServiceSets in the controller's queue at once.
    pub fn new(seats: usize) -> Self {
        Self {
            seats: Arc::new(Semaphore::new(seats)),
            held: Mutex::default(),
            due: Mutex::default(),
            relisted: Notify::new(),
        }
    }

    /// Its round started: no resync pass runs it until a round ends settled (a failure has its
    /// own backoff, a wait its own requeue, a change its own wake).
    pub fn started(&self, namespace: &str, name: &str) {
        lock(&self.due).remove(&key(namespace, name));
    }

    /// Its round ended settled: the next resync pass runs it again.
    pub fn settled(&self, namespace: &str, name: &str) {
        lock(&self.due).insert(key(namespace, name));
    }

    /// Whether the next resync pass runs it.
    #[cfg(test)]
    pub fn is_due(&self, namespace: &str, name: &str) -> bool {
        lock(&self.due).contains(&key(namespace, name))
    }

    /// The cache holds a complete list again: the next pass is over all of it, at once.
    pub fn relisted(&self) {
        self.relisted.notify_one();
    }

    /// The controller ran it, or found it gone: its seat, if it held one, is free.
    pub fn finished(&self, namespace: &str, name: &str) {
        lock(&self.held).remove(&key(namespace, name));
    }

    /// A seat for `object`, once one is free; seats held past [`HOLD_LIMIT`] are freed.
    async fn seat(&self, object: u64) {
        let permit = loop {
            match timeout(HOLD_LIMIT / 10, self.seats.clone().acquire_owned()).await {
                Ok(permit) => break permit.expect("the seats are never closed"),
                Err(_) => lock(&self.held).retain(|_, (_, since)| since.elapsed() < HOLD_LIMIT),
            }
        };
        lock(&self.held).insert(object, (permit, Instant::now()));
    }

    /// The ServiceSets of `store` to run, pass after pass (see the module's doc), the first once
    /// the store is first listed; resync passes every `period`.
    pub fn passes(self: Arc<Self>, store: ServiceSets, period: Duration) -> impl Stream<Item = NamespacedName> + Send {
        let passing = Passing { sweeps: self, store, period, pass: VecDeque::new(), next_resync: None };
        futures::stream::unfold(passing, |mut passing| async move {
            let object = passing.next().await;
            Some((object, passing))
        })
    }
}

/// A pass under way: each object, when it is due.
type Pass = VecDeque<(Arc<CachedServiceSet>, Instant)>;

struct Passing {
    sweeps: Arc<Sweeps>,
    store: ServiceSets,
    period: Duration,
    pass: Pass,
    /// When the next resync pass starts: `None` until the store is first listed.
    next_resync: Option<Instant>,
}

impl Passing {
    /// The next object to run, once it is due and has a seat.
    async fn next(&mut self) -> NamespacedName {
        loop {
            let Some((object, at)) = self.pass.front().cloned() else {
                let next_resync = self.next_resync;
                let resync = async {
                    match next_resync {
                        Some(at) => sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let resync = tokio::select! {
                    biased;
                    () = self.sweeps.relisted.notified() => false,
                    () = resync => true,
                };
                self.start(resync);
                continue;
            };
            let sweeps = self.sweeps.clone();
            let seated = async move {
                sleep_until(at).await;
                sweeps.seat(key_of(&object)).await;
                object
            };
            let seated = tokio::select! {
                biased;
                () = self.sweeps.relisted.notified() => None,
                object = seated => Some(object),
            };
            match seated {
                Some(object) => {
                    self.pass.pop_front();
                    return object.key();
                }
                None => self.start(false),
            }
        }
    }

    /// Starts a pass: over every cached object at once, or (`resync`) over those due, spread over
    /// the period. Either way the next resync pass starts a period later.
    fn start(&mut self, resync: bool) {
        let now = Instant::now();
        self.next_resync = Some(now + self.period);
        let mut objects = self.store.state();
        if resync {
            let mut due = lock(&self.sweeps.due);
            objects.retain(|object| due.contains(&key_of(object)));
            // Forget the deleted, which no round will start again.
            *due = objects.iter().map(|object| key_of(object)).collect();
        }
        let count = objects.len();
        let at = |index| if resync { paced(now, self.period, index, count) } else { now };
        self.pass = objects.into_iter().enumerate().map(|(index, object)| (object, at(index))).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn store(names: &[&str]) -> ServiceSets {
        let service_set = |name: &&str| {
            let object = serde_json::json!({
                "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceSet",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"provider": {"name": "ksm-flux"}},
            });
            CachedServiceSet::pack(serde_json::from_value(object).unwrap()).unwrap()
        };
        names.iter().map(service_set).collect()
    }

    fn names(refs: &[NamespacedName]) -> Vec<String> {
        let mut names: Vec<String> = refs.iter().map(|r| r.name.clone()).collect();
        names.sort();
        names
    }

    /// Takes what the stream yields within `within` (of paused time).
    async fn yielded(
        stream: &mut (impl Stream<Item = NamespacedName> + Unpin),
        within: Duration,
    ) -> Vec<NamespacedName> {
        let mut out = vec![];
        let deadline = Instant::now() + within;
        while let Ok(Some(object)) = tokio::time::timeout_at(deadline, stream.next()).await {
            out.push(object);
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_after_a_list_runs_every_object_holding_at_most_its_seats() {
        let sweeps = Arc::new(Sweeps::new(2));
        let mut passes = Box::pin(sweeps.clone().passes(store(&["a", "b", "c", "d", "e"]), Duration::from_secs(600)));
        assert!(yielded(&mut passes, Duration::from_secs(1)).await.is_empty(), "nothing before the first list");
        sweeps.relisted();
        let first = yielded(&mut passes, Duration::from_secs(1)).await;
        assert_eq!(first.len(), 2, "two seats: {first:?}");
        sweeps.finished(&first[0].namespace, &first[0].name);
        let third = yielded(&mut passes, Duration::from_secs(1)).await;
        assert_eq!(third.len(), 1, "one seat freed: {third:?}");
        for object in first.iter().skip(1).chain(&third) {
            sweeps.finished(&object.namespace, &object.name);
        }
        let rest = yielded(&mut passes, Duration::from_secs(1)).await;
        let all: Vec<_> = first.into_iter().chain(third).chain(rest).collect();
        assert_eq!(names(&all), ["a", "b", "c", "d", "e"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resync_pass_runs_those_that_ended_settled_spread_over_the_period() {
        let sweeps = Arc::new(Sweeps::new(8));
        let period = Duration::from_secs(600);
        let mut passes = Box::pin(sweeps.clone().passes(store(&["a", "b", "c", "d"]), period));
        sweeps.relisted();
        for object in yielded(&mut passes, Duration::from_secs(1)).await {
            sweeps.finished(&object.namespace, &object.name);
        }
        for name in ["a", "b", "c"] {
            sweeps.started("ns", name);
            sweeps.settled("ns", name);
        }
        sweeps.started("ns", "c"); // a round of c under way: it has not settled again
        sweeps.settled("ns", "gone"); // deleted meanwhile
        assert!(yielded(&mut passes, period - Duration::from_secs(2)).await.is_empty(), "none before the period");
        let started = Instant::now();
        let mut times = vec![];
        let mut resynced = vec![];
        while let Ok(Some(object)) = tokio::time::timeout(period, passes.next()).await {
            times.push(started.elapsed());
            sweeps.finished(&object.namespace, &object.name);
            resynced.push(object);
            if resynced.len() == 2 {
                break;
            }
        }
        assert_eq!(names(&resynced), ["a", "b"]);
        // 1 s before the pass started; its second object 300 s after the first.
        assert_eq!(times, [Duration::from_secs(1), Duration::from_secs(301)]);
        assert_eq!(lock(&sweeps.due).len(), 2, "the deleted one is forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_starts_a_pass_over_all_at_once_even_during_a_resync() {
        let sweeps = Arc::new(Sweeps::new(8));
        let period = Duration::from_secs(600);
        let mut passes = Box::pin(sweeps.clone().passes(store(&["a", "b", "c"]), period));
        sweeps.relisted();
        for object in yielded(&mut passes, Duration::from_secs(1)).await {
            sweeps.settled(&object.namespace, &object.name);
            sweeps.finished(&object.namespace, &object.name);
        }
        let resync = yielded(&mut passes, period + Duration::from_secs(250)).await;
        assert_eq!(resync.len(), 2, "two of three, 250 s into a pass of 600: {resync:?}");
        for object in &resync {
            sweeps.finished(&object.namespace, &object.name);
        }
        sweeps.relisted();
        let all = yielded(&mut passes, Duration::from_secs(1)).await;
        assert_eq!(names(&all), ["a", "b", "c"], "all at once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_seat_never_reported_back_frees_itself() {
        let sweeps = Arc::new(Sweeps::new(1));
        let mut passes = Box::pin(sweeps.clone().passes(store(&["a", "b"]), Duration::from_secs(600)));
        sweeps.relisted();
        assert_eq!(yielded(&mut passes, HOLD_LIMIT - Duration::from_secs(1)).await.len(), 1);
        assert_eq!(yielded(&mut passes, HOLD_LIMIT).await.len(), 1, "the second, once the first's seat expired");
    }
}
