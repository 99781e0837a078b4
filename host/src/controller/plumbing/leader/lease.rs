//! The Lease as its watch sees it: who holds it and until when.

use super::election::Election;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::time::{Duration, Instant, SystemTime};

/// The Lease as last seen by the watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LeaseSnapshot {
    /// `spec.holderIdentity`; `None` when empty, absent, or the Lease does not exist.
    pub(super) holder: Option<String>,
    /// `spec.renewTime`.
    pub(super) renewed: Option<SystemTime>,
    /// `spec.leaseDurationSeconds`.
    pub(super) duration: Option<Duration>,
}

impl LeaseSnapshot {
    pub(super) fn of(lease: &Lease) -> Self {
        let Some(spec) = &lease.spec else { return Self::default() };
        Self {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renewed: spec.renew_time.as_ref().map(|t| SystemTime::from(t.0)),
            duration: spec.lease_duration_seconds.and_then(|s| u64::try_from(s).ok()).map(Duration::from_secs),
        }
    }
}

/// A watch of the one Lease.
pub(super) struct LeaseWatch {
    pub(super) events: BoxStream<'static, Result<watcher::Event<Lease>, watcher::Error>>,
    /// While (re)listing: the Lease found so far (`Some(default)`: none yet).
    pub(super) listing: Option<LeaseSnapshot>,
    /// What [`next`](Self::next) returned last.
    pub(super) last: LeaseSnapshot,
}

impl LeaseWatch {
    pub(super) fn new(client: Client, election: &Election) -> Self {
        let api = Api::<Lease>::namespaced(client, &election.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", election.lease_name));
        Self { events: watcher(api, config).default_backoff().boxed(), listing: None, last: LeaseSnapshot::default() }
    }

    /// The next state of the Lease. Cancel-safe; pending forever if the watch ends.
    pub(super) async fn next(&mut self) -> LeaseSnapshot {
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

/// Returns when the watch shows the Lease free (no holder); logs who holds it meanwhile.
/// Cancel-safe.
pub(super) async fn until_free(lease: &mut LeaseWatch, election: &Election, holder: &mut Option<String>) {
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
pub(super) fn instant_of(at: SystemTime) -> Instant {
    let (now, instant) = (SystemTime::now(), Instant::now());
    match at.duration_since(now) {
        Ok(ahead) => instant + ahead,
        Err(behind) => instant.checked_sub(behind.duration()).unwrap_or(instant),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

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
}
