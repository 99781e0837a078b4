//! The objects the scenarios create: StateManagementProviders, ServiceTemplates, ServiceSets
//! and the (simulated) workloads an SMP's readiness rules look at. Based on `examples/`.
//! Everything is a pure builder except [`set_workload_ready`].

use std::path::Path;

use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::env::Env;
use crate::objects::Kind;
use crate::status::generation;
use crate::wait::poll;
use crate::{ADAPTER_LABEL, TEST_NAMESPACE_LABEL, WAIT};

/// The value of [`ADAPTER_LABEL`] the test SMPs select.
pub const SELECTED: &str = "ksm-adapter";
/// Helm ServiceTemplate of ingress-nginx (in `fixtures/servicetemplates.yaml`).
pub const INGRESS_TEMPLATE: &str = "ingress-nginx-4-11-3";
/// Helm ServiceTemplate of cert-manager (in `fixtures/servicetemplates.yaml`).
pub const CERT_MANAGER_TEMPLATE: &str = "cert-manager-1-16-2";
/// The provisioner Deployment the test SMPs reference (Flux's helm-controller stands in).
pub const PROVISIONER_NAME: &str = "helm-controller";
/// The readiness rule of the test SMPs' adapter and provisioner: the Deployment's `Available`
/// condition. Unlike replica counts it is set by a real cluster's Deployment controller for a
/// Deployment scaled to zero, so the scenarios run unchanged on a real cluster (see
/// [`workload`]).
pub const READINESS_RULE: &str = r#"self.status.conditions.exists(c, c.type == "Available" && c.status == "True")"#;

/// The YAML documents of a multi-document text, as JSON values (empty documents skipped).
pub fn yaml_documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{text}")))
        .filter(|value| !value.is_null())
        .collect()
}

/// The Helm ServiceTemplates of `fixtures/servicetemplates.yaml` in `namespace`, with status.
pub fn service_templates(namespace: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/servicetemplates.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    yaml_documents(&text.replace("${NAMESPACE}", namespace))
}

/// A translate case of the Flux plugin's golden tests (`plugins/flux/testdata/translate/<case>`)
/// moved into `namespace` (from `team-a`): its ServiceTemplates, and its ServiceSet.
pub fn flux_golden_case(case: &str, namespace: &str) -> (Vec<Value>, Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/flux/testdata/translate")
        .join(case)
        .join("input.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let documents = yaml_documents(&text.replace("team-a", namespace));
    let service_set = documents.iter().find(|d| d["kind"] == "ServiceSet").expect("a ServiceSet").clone();
    (documents.into_iter().filter(|d| d["kind"] == "ServiceTemplate").collect(), service_set)
}

/// A StateManagementProvider `name` whose adapter is the Deployment `adapter` in `namespace`,
/// with one provisioner (the Deployment [`PROVISIONER_NAME`]), the Flux CRDs as provisioner
/// CRDs, and a selector on [`ADAPTER_LABEL`]` = `[`SELECTED`]. Labelled with the test's namespace
/// for cleanup. No status: kcm (or the test playing kcm) writes it.
pub fn smp(name: &str, adapter: &str, namespace: &str) -> Value {
    let reference = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": namespace,
               "readinessRule": READINESS_RULE})
    };
    json!({
        "apiVersion": "k0rdent.mirantis.com/v1beta1",
        "kind": "StateManagementProvider",
        "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: namespace}},
        "spec": {
            "selector": {"matchLabels": {ADAPTER_LABEL: SELECTED}},
            "adapter": reference(adapter),
            "provisioner": [reference(PROVISIONER_NAME)],
            "provisionerCRDs": [
                {"group": "helm.toolkit.fluxcd.io", "version": "v2", "resources": ["helmreleases"]},
                {"group": "kustomize.toolkit.fluxcd.io", "version": "v1", "resources": ["kustomizations"]},
            ],
            "suspend": false,
        },
    })
}

/// An AdapterPlugin `name` serving `providers` with the plugin from `source` (e.g.
/// `{"builtin": "flux"}`), labelled with the test's namespace for cleanup.
pub fn adapter_plugin(name: &str, namespace: &str, source: Value, providers: &[&str]) -> Value {
    json!({
        "apiVersion": "ksm.k0rdent.mirantis.com/v1alpha1",
        "kind": "AdapterPlugin",
        "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: namespace}},
        "spec": {"source": source, "providers": providers},
    })
}

/// SMP status as kcm writes it in observe mode (only `ready`; the host ignores conditions).
pub fn smp_status(ready: bool) -> Value {
    json!({"ready": ready})
}

/// A ServiceSet `name` in `namespace` for remote cluster `name`, served by `provider`,
/// labelled for the test SMPs' selector.
pub fn service_set(namespace: &str, name: &str, provider: &str, services: Value) -> Value {
    json!({
        "apiVersion": "k0rdent.mirantis.com/v1beta1",
        "kind": "ServiceSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {ADAPTER_LABEL: SELECTED}},
        "spec": {
            "cluster": name,
            "provider": {"name": provider, "config": {"interval": "5m", "remediation": {"retries": 3}}},
            "services": services,
        },
    })
}

/// Service `ingress-nginx` (no spec version: its status version is the template name).
pub fn ingress_service() -> Value {
    json!({"name": "ingress-nginx", "namespace": "ingress-nginx", "template": INGRESS_TEMPLATE,
           "values": "controller:\n  replicaCount: 2\n"})
}

/// Service `cert-manager` with spec version `v1.16.2`.
pub fn cert_manager_service() -> Value {
    json!({"name": "cert-manager", "namespace": "cert-manager", "template": CERT_MANAGER_TEMPLATE,
           "version": "v1.16.2", "values": "crds:\n  enabled: true\n", "helmOptions": {"atomic": true}})
}

/// The two services most scenarios deploy.
pub fn two_services() -> Value {
    json!([ingress_service(), cert_manager_service()])
}

/// An `apps/v1` Deployment standing in for the adapter or a provisioner. On the simulated
/// server nothing runs it: the test sets its status ([`workload_status`]). On a real cluster
/// it is made ready by scaling to zero (the Deployment controller reports `Available=True`) and
/// unready by wanting one replica of an image that cannot be pulled (`Available=False`).
pub fn workload(namespace: &str, name: &str, replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/ksm-e2e/none:0"}]},
            },
        },
    })
}

/// The status a Deployment controller would write for one wanted replica, available or not.
pub fn workload_status(generation: i64, ready: bool) -> Value {
    let condition = |status: &str, reason: &str| {
        json!({"type": "Available", "status": status, "reason": reason,
               "message": "simulated by the e2e tests", "lastTransitionTime": now(), "lastUpdateTime": now()})
    };
    if ready {
        json!({"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
               "availableReplicas": 1, "conditions": [condition("True", "MinimumReplicasAvailable")]})
    } else {
        json!({"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1,
               "conditions": [condition("False", "MinimumReplicasUnavailable")]})
    }
}

/// Makes the workload Deployment `name` in the test's namespace ready or unready (creating it
/// when absent): on the simulated server by writing its status, on a real cluster by scaling
/// it (see [`workload`]) and waiting until the Deployment controller reports it, so that what
/// the test does next (e.g. play kcm marking the SMP not ready) follows, as it would for real.
pub async fn set_workload_ready(env: &Env, name: &str, ready: bool) {
    let r = env.obj(Kind::Deployment, name);
    let live = env.get(&r).await;
    if env.is_real_cluster() {
        let replicas = u32::from(!ready);
        match live {
            None => drop(env.create(workload(env.namespace(), name, replicas)).await),
            Some(_) => drop(env.merge_patch(&r, json!({"spec": {"replicas": replicas}})).await),
        }
        let wanted = if ready { "True" } else { "False" };
        let reported = poll(&format!("{r} reported Available={wanted}"), WAIT, async || match env.get(&r).await {
            Some(live) if observed(&live) && available(&live) == Some(wanted) => Ok(()),
            Some(live) => Err(live),
            None => Err(json!("<object absent>")),
        })
        .await;
        if let Err(timed_out) = reported {
            panic!("{}", timed_out.report());
        }
    } else {
        let live = match live {
            Some(live) => live,
            None => env.create(workload(env.namespace(), name, 1)).await,
        };
        env.set_status(&r, workload_status(generation(&live), ready)).await;
    }
}

/// Whether the Deployment controller has seen `deployment`'s latest spec.
fn observed(deployment: &Value) -> bool {
    deployment["status"]["observedGeneration"].as_i64() >= Some(generation(deployment))
}

/// The status of `deployment`'s `Available` condition, if it has one.
fn available(deployment: &Value) -> Option<&str> {
    let conditions = deployment["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == "Available")?["status"].as_str()
}

/// The current time as Kubernetes writes it (seconds precision, UTC).
pub fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn templates_are_namespaced() {
        let templates = service_templates("ns-1");
        assert_eq!(templates.len(), 2);
        assert!(templates.iter().all(|t| t["metadata"]["namespace"] == "ns-1"));
        assert_eq!(templates[0]["status"]["chartRef"]["namespace"], "ns-1");
    }
}
