//! Status writes, as the host makes them for every kind whose status it writes (ServiceSets,
//! AdapterPlugins, and StateManagementProviders in `manage` mode): through the status
//! subresource, only when the status changed, and only over the version it was decided from.
//! And the error of a round that ends in one.

use crate::metrics::MetricLabel;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::core::object::HasStatus;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Why a round that ends in a status write failed: its own work, or the write.
#[derive(Debug, thiserror::Error)]
pub enum RoundError<E> {
    /// Its own work failed, as `E` says.
    #[error(transparent)]
    Work(E),
    /// The status it decided could not be written.
    #[error("writing {kind} status: {source}")]
    WriteStatus {
        /// The kind written.
        kind: &'static str,
        /// Why.
        source: kube::Error,
    },
}

impl<E: MetricLabel> MetricLabel for RoundError<E> {
    fn metric_label(&self) -> &'static str {
        match self {
            Self::Work(e) => e.metric_label(),
            Self::WriteStatus { .. } => "api",
        }
    }
}

/// What a write that lost a race with another writer (409 Conflict: the object changed since it
/// was read) comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConflict {
    /// An error: the caller retries at once on the latest version, without waiting for the watch.
    Fail,
    /// Nothing: the change comes back through the watch, and the status is decided again from it.
    AwaitChange,
}

/// Whether a status write happened.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// The status was already this one: no request made.
    Unchanged,
    /// The status was replaced.
    Replaced,
    /// The object changed meanwhile and [`OnConflict::AwaitChange`] left it to the watch.
    Superseded,
}

/// Replaces the status of `object` with `status` unless they are equal. The write carries the
/// `resourceVersion` that was read, so an object changed meanwhile fails with 409 Conflict
/// instead of losing a change; `on_conflict` says what that comes to. The body is the object's
/// name, namespace, version and spec, with the new status: nothing else of what was read is
/// sent back.
pub async fn write<K>(api: &Api<K>, object: &K, status: K::Status, on_conflict: OnConflict) -> kube::Result<Written>
where
    K: Resource + HasStatus + Clone + Serialize + DeserializeOwned + Debug,
    K::Status: PartialEq,
{
    if object.status() == Some(&status) {
        return Ok(Written::Unchanged);
    }
    let mut written = object.clone();
    *written.meta_mut() = ObjectMeta {
        name: object.meta().name.clone(),
        namespace: object.namespace(),
        resource_version: object.resource_version(),
        ..ObjectMeta::default()
    };
    *written.status_mut() = Some(status);
    match api.replace_status(&object.name_any(), &PostParams::default(), &written).await {
        Ok(_) => Ok(Written::Replaced),
        Err(kube::Error::Api(e)) if e.is_conflict() && on_conflict == OnConflict::AwaitChange => {
            Ok(Written::Superseded)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::{self, Scenario};
    use crate::k0rdent::{StateManagementProvider, StateManagementProviderStatus};
    use serde_json::json;

    const STATUS: &str = "/apis/k0rdent.mirantis.com/v1beta1/statemanagementproviders/flux/status";

    /// SMP `flux` of version 7, as a cache holds it, whose status is `ready`.
    fn smp(ready: bool) -> StateManagementProvider {
        serde_json::from_value(json!({
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "StateManagementProvider",
            "metadata": {"name": "flux", "resourceVersion": "7", "labels": {"team": "a"}, "generation": 3},
            "spec": {"selector": {}, "adapter": {"name": "ksm-adapter", "namespace": "kcm-system"}},
            "status": {"ready": ready},
        }))
        .unwrap()
    }

    fn ready() -> StateManagementProviderStatus {
        StateManagementProviderStatus { ready: true, conditions: vec![] }
    }

    /// A write of [`ready`] over [`smp`]`(false)` against `server`, which answers `code`: what the
    /// write returned, and what it sent.
    async fn write_answered(
        server: &mut Scenario,
        api: &Api<StateManagementProvider>,
        on_conflict: OnConflict,
        code: u16,
    ) -> (kube::Result<Written>, serde_json::Value) {
        let answer = async {
            let put = server.expect("PUT", STATUS).await;
            let sent = put.body.clone();
            let reason = if code == 409 { "Conflict" } else { "Invalid" };
            let refusal = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                                 "message": "refused", "code": code});
            match code {
                200 => put.accept(),
                _ => put.answer(code, refusal),
            }
            sent
        };
        let read = smp(false);
        tokio::join!(write(api, &read, ready(), on_conflict), answer)
    }

    #[tokio::test]
    async fn a_changed_status_is_written_over_the_version_read_with_nothing_else_of_the_object() {
        let (client, mut server) = mock_api::scenario(vec![]);
        let api = Api::all(client);
        let (written, sent) = write_answered(&mut server, &api, OnConflict::Fail, 200).await;
        assert_eq!(written.unwrap(), Written::Replaced);
        assert_eq!(sent["metadata"], json!({"name": "flux", "resourceVersion": "7"}));
        assert_eq!(sent["status"], json!({"ready": true}));
        assert_eq!(sent["spec"]["adapter"]["name"], "ksm-adapter");
        let unchanged = write(&api, &smp(true), ready(), OnConflict::Fail).await;
        assert_eq!(unchanged.unwrap(), Written::Unchanged);
        server.done().await;
    }

    #[tokio::test]
    async fn a_lost_race_is_an_error_or_left_to_the_watch_as_the_caller_says() {
        let (client, mut server) = mock_api::scenario(vec![]);
        let api = Api::all(client);
        let (failed, _) = write_answered(&mut server, &api, OnConflict::Fail, 409).await;
        assert!(matches!(failed, Err(kube::Error::Api(e)) if e.is_conflict()));
        let (left, _) = write_answered(&mut server, &api, OnConflict::AwaitChange, 409).await;
        assert_eq!(left.unwrap(), Written::Superseded);
        let (refused, _) = write_answered(&mut server, &api, OnConflict::AwaitChange, 422).await;
        assert!(refused.is_err(), "only a conflict is left to the watch");
    }
}
