//! Contending for the Lease until this replica holds it.

use super::election::{Election, Timing};
use super::leadership::Leadership;
use super::lease::{LeaseWatch, until_free};
use crate::retry;
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use std::time::SystemTime;

pub(super) fn manager_builder(client: &Client, election: &Election, timing: Timing) -> LeaseManagerBuilder {
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
