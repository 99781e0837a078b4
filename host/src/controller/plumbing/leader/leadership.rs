//! Holding the Lease: renewing it, noticing that it is lost, releasing it.

use super::election::{Election, Timing};
use super::lease::{LeaseSnapshot, LeaseWatch, instant_of};
use anyhow::Context as _;
use kube_lease_manager::LeaseManager;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// Why the lease is lost.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Lost {
    /// The watch shows another holder.
    #[error("the lease is held by {0}")]
    HeldBy(String),
    /// The watch shows no holder.
    #[error("the lease was cleared")]
    Cleared,
    /// A renewal found another replica holding it.
    #[error("another replica holds the lease")]
    Taken,
    /// No renewal was seen within the lease duration less the margin.
    #[error("no renewal succeeded in {0:?}")]
    NotRenewed(Duration),
}

/// What the watch tells a holder about its term.
pub(super) struct Term {
    pub(super) identity: String,
    pub(super) timing: Timing,
    /// When `acquire` started: a renewal of this identity before then belongs to an earlier term.
    pub(super) started: SystemTime,
    /// Whether the watch has shown a renewal of this term: until then, what it shows may
    /// predate the acquisition, and only the deadline (counted from the acquisition) applies.
    pub(super) confirmed: bool,
    /// When to give the lease up unless a renewal is seen.
    pub(super) deadline: Instant,
}

impl Term {
    pub(super) fn new(identity: &str, timing: Timing, started: SystemTime) -> Self {
        let deadline = Instant::now() + timing.lease() - timing.margin();
        Self { identity: identity.to_string(), timing, started, confirmed: false, deadline }
    }

    /// Takes in a state of the Lease; `Err` with the reason when it shows the lease lost.
    pub(super) fn see(&mut self, observed: &LeaseSnapshot) -> Result<(), Lost> {
        match observed.holder.as_deref() {
            Some(holder) if holder == self.identity => {
                if let Some(renewed) = observed.renewed.filter(|renewed| *renewed >= self.started) {
                    self.confirmed = true;
                    let expiry = instant_of(renewed + observed.duration.unwrap_or(self.timing.lease()));
                    self.deadline = expiry.checked_sub(self.timing.margin()).unwrap_or_else(Instant::now);
                }
                Ok(())
            }
            Some(holder) if self.confirmed => Err(Lost::HeldBy(holder.into())),
            None if self.confirmed => Err(Lost::Cleared),
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
    pub(super) lease_name: String,
    pub(super) identity: String,
    /// Turns true when the Lease is lost (the sender is dropped when the task ends).
    pub(super) lost: watch::Receiver<bool>,
    pub(super) release: Option<oneshot::Sender<Release>>,
    pub(super) task: JoinHandle<()>,
}

impl Leadership {
    pub(super) fn hold(
        manager: LeaseManager,
        lease: LeaseWatch,
        election: Election,
        timing: Timing,
        started: SystemTime,
    ) -> Self {
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
pub(super) enum End {
    Lost(Lost),
    Release(Release),
    Dropped,
}

/// The background task of a [`Leadership`]: renews through the crate, watches the Lease, and
/// ends on a loss or a release.
pub(super) async fn renew(
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
                    Ok(false) => return Lost::Taken,
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
                    Err(Lost::NotRenewed(timing.lease() - timing.margin()))
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
