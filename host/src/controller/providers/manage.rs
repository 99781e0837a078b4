//! `manage` mode (no kcm): the host evaluates every SMP naming it as adapter and writes its
//! status, at least every interval and soon after any SMP changes.

use super::look::{LookError, Providers};
use crate::conditions;
use crate::controller::plumbing::status_writer::{self, OnConflict, RoundError};
use crate::controller::plumbing::watches::wait_listed;
use crate::k0rdent::{StateManagementProvider, StateManagementProviderStatus};
use crate::metrics::{MetricLabel, Metrics};
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
    /// Where failed rounds are counted.
    pub metrics: Arc<Metrics>,
}

/// Why an SMP's round failed: the objects it references could not be read, or its status was
/// not written. The loop's next round tries again.
pub type Error = RoundError<LookError>;

/// Evaluates every SMP naming this host as its adapter, at least every `interval` and soon
/// after any SMP changes, and writes its status when it changed; starts once `prepared`.
pub async fn run(client: Client, providers: Arc<Providers>, managed: Managed, prepared: watch::Receiver<bool>) {
    wait_listed(prepared).await;
    loop {
        for smp in managed.smps.state() {
            if managed.identity.is_adapter_of(&smp) {
                manage(&client, &providers, &smp, &managed.metrics).await;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(managed.interval) => {}
            () = managed.changed.notified() => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// One round of `smp`: a failure is logged and counted.
async fn manage(client: &Client, providers: &Providers, smp: &StateManagementProvider, metrics: &Metrics) {
    if let Err(e) = manage_one(client, providers, smp).await {
        metrics.reconcile_failed("StateManagementProvider", e.metric_label());
        tracing::warn!(smp = %smp.name_any(), "{e}");
    }
}

/// Evaluates `smp` and writes its status when it changed.
async fn manage_one(client: &Client, providers: &Providers, smp: &StateManagementProvider) -> Result<(), Error> {
    let evaluation = providers.evaluate(smp).await.map_err(Error::Work)?;
    let old = smp.status.clone().unwrap_or_default();
    let status = StateManagementProviderStatus {
        ready: evaluation.ready,
        conditions: conditions::merge(&old.conditions, evaluation.conditions),
    };
    let api = Api::<StateManagementProvider>::all(client.clone());
    // Changed meanwhile: the change wakes the loop, which evaluates the new version.
    let written = status_writer::write(&api, smp, status, OnConflict::AwaitChange).await;
    written.map_err(|source| Error::WriteStatus { kind: "StateManagementProvider", source })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::adapter_plugins::registry::Registry;
    use crate::controller::mock_api;
    use crate::controller::settings::{DefaultPlugin, Mode};
    use kube::runtime::reflector;
    use serde_json::json;

    #[tokio::test]
    async fn a_status_the_api_server_refuses_is_counted_under_api() {
        let smp: StateManagementProvider = serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "StateManagementProvider",
            "metadata": {"name": "ksm-flux", "resourceVersion": "1"}, "spec": {"selector": {}},
        }))
        .unwrap();
        let refused = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid",
                             "message": "refused", "code": 422});
        let status = "PUT /apis/k0rdent.mirantis.com/v1beta1/statemanagementproviders/ksm-flux/status";
        let (client, asked) = mock_api::client(move |line| (line == status).then(|| (422, refused.clone())));
        let identity = AdapterIdentity { name: "ksm-adapter".into(), namespace: "kcm-system".into() };
        let registry = Registry::new((identity, DefaultPlugin::None), reflector::store().0, reflector::store().0);
        let providers = Providers::new(client.clone(), Mode::Manage, Arc::new(registry));
        let metrics = Metrics::default();
        manage(&client, &providers, &smp, &metrics).await;
        assert!(asked.lock().unwrap().iter().any(|line| line.starts_with(status)), "{asked:?}");
        assert_eq!(metrics.reconcile_errors("StateManagementProvider", "api"), 1);
        assert_eq!(metrics.reconcile_errors("StateManagementProvider", "look"), 0);
    }
}
