//! Leader election: of several replicas of `ksm-adapter run`, one writes at a time.
//!
//! The replicas contend for a `coordination.k8s.io/v1` Lease through the crate
//! [`kube_lease_manager`]. How the crate writes the Lease is what makes the election safe:
//!
//! - taking a free Lease is a server-side apply, **not forced**, of `holderIdentity`, `acquireTime`,
//!   `renewTime` and `leaseDurationSeconds` by the field manager `ksm-adapter-leader-<identity>`:
//!   when two replicas take it at once, the second apply conflicts (409) with the first one's
//!   ownership of `holderIdentity`, so only one wins;
//! - renewing (`renewTime`), releasing (those four fields set to null) and clearing a Lease that
//!   expired are strategic merge patches; a field an update removes is no longer owned by anyone,
//!   which is what lets the next apply succeed;
//! - no write carries a `resourceVersion` precondition.
//!
//! On its own the crate only reads the Lease when the state it last read expires: a standby
//! would notice a release only when the holder's lease would have expired anyway, and a holder
//! would notice that someone else holds the Lease only at its next renewal. This module also
//! **watches** the Lease, so that
//!
//! - a standby tries again as soon as the Lease becomes free (fast hand-over on
//!   [`Leadership::release`]);
//! - a holder learns at once that another identity holds the Lease, and gives up when its own
//!   renewals have not been seen in time: [`Leadership::lost`] resolves a margin (a sixth of the
//!   duration) *before* the Lease would expire, so the holder stops writing before a standby may
//!   take over.
//!
//! Timing: the crate counts in whole seconds; the holder renews every third of the duration and
//! retries failed renewals every second (or more often for short durations).

use std::time::{Duration, Instant, SystemTime};

use crate::retry;
use anyhow::{Context as _, bail};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// The lease duration of [`Election::new`]: a standby takes over at most this long after the
/// holder stopped renewing without releasing (a crash).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The shortest lease duration (the crate counts whole seconds and renews before expiry).
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(2);

/// Settings of leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// Namespace of the Lease (usually the adapter's own namespace).
    pub namespace: String,
    /// Name of the Lease: the replicas that contend share it.
    pub lease_name: String,
    /// This replica's identity, written to `spec.holderIdentity`. It must be unique per
    /// process, not only per pod (a restarted container must not resume its predecessor's
    /// term): see [`unique_identity`].
    pub identity: String,
    /// How long the Lease stays valid after its last renewal (`spec.leaseDurationSeconds`;
    /// rounded up to whole seconds, at least [`MIN_LEASE_DURATION`]); default
    /// [`DEFAULT_LEASE_DURATION`].
    pub lease_duration: Duration,
}

impl Election {
    /// An election for the Lease `lease_name` in `namespace` as `identity`, with the
    /// [`DEFAULT_LEASE_DURATION`].
    pub fn new(namespace: impl Into<String>, lease_name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
        }
    }

    fn check(&self) -> anyhow::Result<Timing> {
        for (what, value) in
            [("namespace", &self.namespace), ("lease name", &self.lease_name), ("identity", &self.identity)]
        {
            if value.is_empty() {
                bail!("leader election needs a {what}");
            }
        }
        Timing::of(self.lease_duration)
    }
}

/// An identity unique to this process: `base` (e.g. the pod name) and a suffix from the start
/// time and process id, `<base>_<hex>`, as client-go does with a UUID.
pub fn unique_identity(base: &str) -> String {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = nanos ^ (u64::from(std::process::id()) << 40) ^ call.rotate_right(8);
    format!("{base}_{suffix:016x}")
}

/// The lease timings, in the crate's whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timing {
    /// `leaseDurationSeconds`.
    duration: u64,
    /// The crate's grace: the holder renews this long before the Lease would expire.
    grace: u64,
}

impl Timing {
    fn of(lease_duration: Duration) -> anyhow::Result<Self> {
        if lease_duration < MIN_LEASE_DURATION {
            bail!("the lease duration ({lease_duration:?}) must be at least {MIN_LEASE_DURATION:?}");
        }
        let duration = lease_duration.as_secs() + u64::from(lease_duration.subsec_nanos() > 0);
        let interval = (duration / 3).max(1);
        Ok(Self { duration, grace: duration - interval })
    }

    fn lease(self) -> Duration {
        Duration::from_secs(self.duration)
    }

    /// Time between two renewals.
    fn interval(self) -> Duration {
        Duration::from_secs(self.duration - self.grace)
    }

    /// How long before the Lease would expire the holder declares it lost.
    fn margin(self) -> Duration {
        self.lease() / 6
    }

    /// Time between two attempts at a failed renewal.
    fn retry(self) -> Duration {
        (self.interval() / 2).min(Duration::from_secs(1))
    }
}

/// The Lease as last seen by the watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct LeaseSnapshot {
    /// `spec.holderIdentity`; `None` when empty, absent, or the Lease does not exist.
    holder: Option<String>,
    /// `spec.renewTime`.
    renewed: Option<SystemTime>,
    /// `spec.leaseDurationSeconds`.
    duration: Option<Duration>,
}

impl LeaseSnapshot {
    fn of(lease: &Lease) -> Self {
        let Some(spec) = &lease.spec else { return Self::default() };
        Self {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renewed: spec.renew_time.as_ref().map(|t| SystemTime::from(t.0)),
            duration: spec.lease_duration_seconds.and_then(|s| u64::try_from(s).ok()).map(Duration::from_secs),
        }
    }
}

/// A watch of the one Lease.
struct LeaseWatch {
    events: BoxStream<'static, Result<watcher::Event<Lease>, watcher::Error>>,
    /// While (re)listing: the Lease found so far (`Some(default)`: none yet).
    listing: Option<LeaseSnapshot>,
    /// What [`next`](Self::next) returned last.
    last: LeaseSnapshot,
}

impl LeaseWatch {
    fn new(client: Client, election: &Election) -> Self {
        let api = Api::<Lease>::namespaced(client, &election.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", election.lease_name));
        Self { events: watcher(api, config).default_backoff().boxed(), listing: None, last: LeaseSnapshot::default() }
    }

    /// The next state of the Lease. Cancel-safe; pending forever if the watch ends.
    async fn next(&mut self) -> LeaseSnapshot {
        loop {
            let observed = match self.events.next().await {
                Some(Ok(watcher::Event::Apply(lease))) => LeaseSnapshot::of(&lease),
                Some(Ok(watcher::Event::Delete(_))) => LeaseSnapshot::default(),
                Some(Ok(watcher::Event::Init)) => {
                    self.listing = Some(LeaseSnapshot::default());
                    continue;
                }
                Some(Ok(watcher::Event::InitApply(lease))) => {
                    self.listing = Some(LeaseSnapshot::of(&lease));
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => match self.listing.take() {
                    Some(observed) => observed,
                    None => continue,
                },
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching the leader-election lease failed; retrying");
                    continue;
                }
                None => std::future::pending().await,
            };
            self.last.clone_from(&observed);
            return observed;
        }
    }
}

fn manager_builder(client: &Client, election: &Election, timing: Timing) -> LeaseManagerBuilder {
    LeaseManagerBuilder::new(client.clone(), election.lease_name.clone())
        .with_namespace(election.namespace.clone())
        .with_identity(election.identity.clone())
        // Stable and readable in managedFields (the crate's default has a random suffix).
        .with_field_manager(format!("ksm-adapter-leader-{}", election.identity))
        .with_duration(timing.duration)
        .with_grace(timing.grace)
}

/// Waits until this process holds the lease; returns a Leadership that keeps renewing it in the background.
///
/// Creates the Lease if it does not exist. Failures of the API server are logged and retried
/// (the process waits as a standby); only invalid settings (an empty name, namespace or
/// identity, a duration under [`MIN_LEASE_DURATION`]) are errors. Dropping the future gives up
/// the attempt.
pub async fn acquire(client: Client, election: Election) -> anyhow::Result<Leadership> {
    let timing = election.check()?;
    let started = SystemTime::now();
    let mut lease = LeaseWatch::new(client.clone(), &election);
    let mut manager: Option<LeaseManager> = None;
    let mut failures = 0;
    let mut holder: Option<String> = None;
    tracing::debug!(lease = %election.lease_name, namespace = %election.namespace, identity = %election.identity, "contending for leadership");
    loop {
        let current = match manager.take() {
            Some(current) => current,
            None => match manager_builder(&client, &election, timing).build().await {
                Ok(built) => built,
                Err(e) => {
                    tracing::warn!(lease = %election.lease_name, error = %e, "preparing the leader-election lease failed; retrying");
                    failures += 1;
                    tokio::time::sleep(retry::LEASE.after(failures)).await;
                    continue;
                }
            },
        };
        let step = tokio::select! {
            changed = current.changed() => Some(changed),
            () = until_free(&mut lease, &election, &mut holder) => None,
        };
        match step {
            Some(Ok(true)) => {
                tracing::info!(lease = %election.lease_name, namespace = %election.namespace, identity = %election.identity, "leadership acquired");
                return Ok(Leadership::hold(current, lease, election, timing, started));
            }
            Some(Ok(false)) => manager = Some(current),
            Some(Err(e)) => {
                tracing::warn!(lease = %election.lease_name, error = %e, "contending for the leader-election lease failed; retrying");
                failures += 1;
                tokio::time::sleep(retry::LEASE.after(failures)).await;
                manager = Some(current);
            }
            // Free: a fresh manager reads the Lease at once (the crate would wait for the
            // previous holder's expiry). Same identity, so nothing taken meanwhile is lost.
            None => tracing::debug!(lease = %election.lease_name, "the leader-election lease is free: trying now"),
        }
    }
}

/// Returns when the watch shows the Lease free (no holder); logs who holds it meanwhile.
/// Cancel-safe.
async fn until_free(lease: &mut LeaseWatch, election: &Election, holder: &mut Option<String>) {
    loop {
        let observed = lease.next().await;
        if observed.holder != *holder {
            if let Some(held_by) = observed.holder.as_deref().filter(|h| *h != election.identity) {
                tracing::info!(lease = %election.lease_name, holder = %held_by, "waiting for leadership");
            }
            holder.clone_from(&observed.holder);
        }
        if observed.holder.is_none() {
            return;
        }
    }
}

/// `at` (on the system clock) as an [`Instant`].
fn instant_of(at: SystemTime) -> Instant {
    let (now, instant) = (SystemTime::now(), Instant::now());
    match at.duration_since(now) {
        Ok(ahead) => instant + ahead,
        Err(behind) => instant.checked_sub(behind.duration()).unwrap_or(instant),
    }
}

/// What the watch tells a holder about its term.
struct Term {
    identity: String,
    timing: Timing,
    /// When `acquire` started: a renewal of this identity before then belongs to an earlier term.
    started: SystemTime,
    /// Whether the watch has shown a renewal of this term: until then, what it shows may
    /// predate the acquisition, and only the deadline (counted from the acquisition) applies.
    confirmed: bool,
    /// When to give the lease up unless a renewal is seen.
    deadline: Instant,
}

impl Term {
    fn new(identity: &str, timing: Timing, started: SystemTime) -> Self {
        let deadline = Instant::now() + timing.lease() - timing.margin();
        Self { identity: identity.to_string(), timing, started, confirmed: false, deadline }
    }

    /// Takes in a state of the Lease; `Err` with the reason when it shows the lease lost.
    fn see(&mut self, observed: &LeaseSnapshot) -> Result<(), String> {
        match observed.holder.as_deref() {
            Some(holder) if holder == self.identity => {
                if let Some(renewed) = observed.renewed.filter(|renewed| *renewed >= self.started) {
                    self.confirmed = true;
                    let expiry = instant_of(renewed + observed.duration.unwrap_or(self.timing.lease()));
                    self.deadline = expiry.checked_sub(self.timing.margin()).unwrap_or_else(Instant::now);
                }
                Ok(())
            }
            Some(holder) if self.confirmed => Err(format!("the lease is held by {holder}")),
            None if self.confirmed => Err("the lease was cleared".to_string()),
            _ => Ok(()),
        }
    }
}

/// A release request: where to send its result.
type Release = oneshot::Sender<anyhow::Result<()>>;

/// This process holds the Lease; a background task keeps renewing it until it is lost,
/// released or dropped.
///
/// Dropping a Leadership stops the renewals *without* releasing: a standby takes over once the
/// Lease expires, as after a crash. Call [`release`](Self::release) for a fast hand-over.
#[derive(Debug)]
pub struct Leadership {
    lease_name: String,
    identity: String,
    /// Turns true when the Lease is lost (the sender is dropped when the task ends).
    lost: watch::Receiver<bool>,
    release: Option<oneshot::Sender<Release>>,
    task: JoinHandle<()>,
}

impl Leadership {
    fn hold(manager: LeaseManager, lease: LeaseWatch, election: Election, timing: Timing, started: SystemTime) -> Self {
        let (lost_tx, lost) = watch::channel(false);
        let (release, release_rx) = oneshot::channel();
        let (lease_name, identity) = (election.lease_name.clone(), election.identity.clone());
        let task = tokio::spawn(renew(manager, lease, election, timing, started, lost_tx, release_rx));
        Self { lease_name, identity, lost, release: Some(release), task }
    }

    /// Resolves when the lease is lost (another replica took it or renewals failed): the caller must stop writing.
    ///
    /// "Renewals failed" means no renewal of this holder was seen for the lease duration minus
    /// a sixth: this resolves before a standby may take the Lease over.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        // An error means the task ended without saying so (it panicked): lost as well.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// Whether the lease is lost (see [`lost`](Self::lost)), without waiting.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow() || self.task.is_finished()
    }

    /// Releases the lease at once (graceful shutdown: fast hand-over), consuming self.
    ///
    /// Stops the renewals and clears the Lease's holder, so that a standby takes over within
    /// moments instead of after the lease duration. Does nothing (and succeeds) when the lease
    /// is already lost; on an error the Lease simply expires.
    pub async fn release(mut self) -> anyhow::Result<()> {
        let Some(request) = self.release.take() else { return Ok(()) };
        let (reply, result) = oneshot::channel();
        if request.send(reply).is_err() {
            tracing::debug!(lease = %self.lease_name, identity = %self.identity, "leadership already lost: nothing to release");
            return Ok(());
        }
        // No answer: the task ended on a loss at the same moment.
        result.await.unwrap_or(Ok(()))
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How holding the Lease ended.
enum End {
    Lost(String),
    Release(Release),
    Dropped,
}

/// The background task of a [`Leadership`]: renews through the crate, watches the Lease, and
/// ends on a loss or a release.
async fn renew(
    manager: LeaseManager,
    mut lease: LeaseWatch,
    election: Election,
    timing: Timing,
    started: SystemTime,
    lost: watch::Sender<bool>,
    mut release: oneshot::Receiver<Release>,
) {
    let Election { lease_name, identity, .. } = &election;
    let end = {
        let renewals = async {
            loop {
                match manager.changed().await {
                    Ok(true) => {}
                    Ok(false) => return "another replica holds the lease".to_string(),
                    Err(e) => {
                        tracing::warn!(lease = %lease_name, error = %e, "renewing the leader-election lease failed; retrying");
                        tokio::time::sleep(timing.retry()).await;
                    }
                }
            }
        };
        tokio::pin!(renewals);
        let mut term = Term::new(identity, timing, started);
        // The watch may have shown the acquisition already, while acquiring.
        let mut seen = term.see(&lease.last);
        loop {
            if let Err(reason) = seen {
                break End::Lost(reason);
            }
            seen = tokio::select! {
                reason = &mut renewals => Err(reason),
                observed = lease.next() => term.see(&observed),
                () = tokio::time::sleep_until(term.deadline.into()) => {
                    Err(format!("no renewal succeeded in {:?}", timing.lease() - timing.margin()))
                }
                request = &mut release => break request.map_or(End::Dropped, End::Release),
            };
        }
    };
    match end {
        End::Lost(reason) => {
            tracing::info!(lease = %lease_name, identity = %identity, %reason, "leadership lost");
            lost.send_replace(true);
        }
        End::Release(reply) => {
            let result = manager.release().await.context("releasing the leader-election lease");
            match &result {
                Ok(()) => tracing::info!(lease = %lease_name, identity = %identity, "leadership released"),
                Err(e) => {
                    tracing::warn!(lease = %lease_name, error = %format!("{e:#}"), "releasing the lease failed: it will expire")
                }
            }
            lost.send_replace(true);
            let _ = reply.send(result);
        }
        End::Dropped => {
            tracing::debug!(lease = %lease_name, identity = %identity, "leadership dropped: the lease will expire");
            lost.send_replace(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    #[test]
    fn renewals_come_every_third_of_the_duration() {
        let default = Timing::of(DEFAULT_LEASE_DURATION).unwrap();
        assert_eq!(default, Timing { duration: 15, grace: 10 });
        assert_eq!(default.interval(), Duration::from_secs(5));
        assert_eq!(default.margin(), Duration::from_millis(2500));
        assert_eq!(default.retry(), Duration::from_secs(1));

        let short = Timing::of(Duration::from_secs(2)).unwrap();
        assert_eq!(short, Timing { duration: 2, grace: 1 });
        assert_eq!(short.retry(), Duration::from_millis(500));
        assert_eq!(Timing::of(Duration::from_millis(2500)).unwrap(), Timing { duration: 3, grace: 2 });
    }

    #[test]
    fn invalid_settings_are_refused() {
        assert!(Timing::of(Duration::from_millis(1999)).is_err());
        assert!(Election::new("ns", "lease", "").check().is_err());
        assert!(Election::new("", "lease", "me").check().is_err());
        assert!(Election::new("ns", "lease", "me").check().is_ok());
    }

    #[test]
    fn an_empty_holder_is_no_holder() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let lease = |holder: &str| Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(at.try_into().unwrap())),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        assert_eq!(LeaseSnapshot::of(&lease("")).holder, None);
        let held = LeaseSnapshot::of(&lease("me"));
        assert_eq!(
            held,
            LeaseSnapshot { holder: Some("me".into()), renewed: Some(at), duration: Some(Duration::from_secs(15)) }
        );
        assert_eq!(LeaseSnapshot::of(&Lease::default()), LeaseSnapshot::default());
    }

    #[test]
    fn identities_are_unique() {
        let (first, second) = (unique_identity("pod-a"), unique_identity("pod-a"));
        assert!(first.starts_with("pod-a_") && first.len() == "pod-a_".len() + 16, "{first}");
        assert_ne!(first, second);
    }
}
