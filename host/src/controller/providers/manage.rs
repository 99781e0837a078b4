//! `manage` mode (no kcm): the host evaluates every SMP naming it as adapter and writes its
//! status, at least every interval and soon after any SMP changes.

use super::super::plumbing::status_writer::{self, OnConflict};
use super::super::plumbing::watches::wait_listed;
use super::look::Providers;
use crate::conditions;
use crate::k0rdent::{StateManagementProvider, StateManagementProviderStatus};
use crate::smp::AdapterIdentity;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The SMPs `manage` mode writes, and how often.
pub struct Managed {
    /// Every SMP.
    pub smps: Store<StateManagementProvider>,
    /// This host: only the SMPs naming it as adapter are its to write.
    pub identity: AdapterIdentity,
    /// The longest wait between two evaluations of an SMP.
    pub interval: Duration,
    /// Notified when any SMP changes.
    pub changed: Arc<Notify>,
}

/// Evaluates every SMP naming this host as its adapter, at least every `interval` and soon
/// after any SMP changes, and writes its status when it changed; starts once `prepared`.
pub async fn run(client: Client, providers: Arc<Providers>, managed: Managed, prepared: watch::Receiver<bool>) {
    wait_listed(prepared).await;
    loop {
        for smp in managed.smps.state() {
            if !managed.identity.is_adapter_of(&smp) {
                continue;
            }
            if let Err(e) = manage_one(&client, &providers, &smp).await {
                tracing::warn!(smp = %smp.name_any(), "{e:#}");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(managed.interval) => {}
            () = managed.changed.notified() => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn manage_one(client: &Client, providers: &Providers, smp: &StateManagementProvider) -> anyhow::Result<()> {
    let evaluation = providers.evaluate(smp).await?;
    let old = smp.status.clone().unwrap_or_default();
    let status = StateManagementProviderStatus {
        ready: evaluation.ready,
        conditions: conditions::merge(&old.conditions, evaluation.conditions),
    };
    let api = Api::<StateManagementProvider>::all(client.clone());
    // Changed meanwhile: the change wakes the loop, which evaluates the new version.
    status_writer::write(&api, smp, status, OnConflict::AwaitChange).await?;
    Ok(())
}
