//! The host's evaluation of an SMP against the live objects, the way kcm does it, and the
//! one-line diagnosis a ServiceSet of an unready SMP shows (cached: every such ServiceSet asks).

use super::discovery::Discovery;
use super::rbac;
use super::stamped::Stamped;
use crate::controller::adapter_plugins::registry::Registry;
use crate::controller::settings::Mode;
use crate::k0rdent::StateManagementProvider;
use crate::metrics::MetricLabel;
use crate::plugin::call_blocking;
use crate::rules::RuleCache;
use crate::smp::{self, RbacCheck, SmpEvaluation, SmpObservation};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a permission check holds (unless the SMP's generation changes).
const RBAC_TTL: Duration = Duration::from_secs(300);
/// How long a diagnosis of an unready SMP holds (unless the SMP changes).
const DIAGNOSIS_TTL: Duration = Duration::from_secs(10);

/// Why the host could not look at an SMP's objects.
#[derive(Debug, thiserror::Error)]
#[error("StateManagementProvider {smp:?}: reading {what}: {source}")]
pub struct LookError {
    smp: String,
    what: String,
    source: kube::Error,
}

/// The objects an SMP references could not be read.
impl MetricLabel for LookError {
    fn metric_label(&self) -> &'static str {
        "look"
    }
}

/// What the host needs to look at SMPs, and what it learnt.
pub struct Providers {
    client: Client,
    mode: Mode,
    /// Which plugin serves an SMP: its kinds are part of the permissions needed.
    registry: Arc<Registry>,
    discovery: Discovery,
    rules: Arc<RuleCache>,
    rbac: Stamped<Option<i64>, RbacCheck>,
    diagnoses: Stamped<Option<String>, String>,
}

impl Providers {
    /// Nothing looked at yet.
    pub fn new(client: Client, mode: Mode, registry: Arc<Registry>) -> Self {
        Self {
            discovery: Discovery::new(client.clone()),
            client,
            mode,
            registry,
            rules: Arc::new(RuleCache::new()),
            rbac: Stamped::default(),
            diagnoses: Stamped::default(),
        }
    }

    /// The host's explanation of why `smp` is not ready (cached per SMP version for a few
    /// seconds).
    pub async fn diagnosis(&self, smp: &StateManagementProvider) -> String {
        let (name, version) = (smp.name_any(), smp.resource_version());
        if let Some(text) = self.diagnoses.get(&name, &version, DIAGNOSIS_TTL) {
            return text;
        }
        let text = match self.evaluate(smp).await {
            Ok(evaluation) => evaluation.diagnosis(),
            Err(e) => format!("the host could not check it: {e}"),
        };
        self.diagnoses.put(name, version, text.clone());
        text
    }

    /// Evaluates `smp` against the live objects, the way kcm does.
    pub async fn evaluate(&self, smp: &StateManagementProvider) -> Result<SmpEvaluation, LookError> {
        let name = smp.name_any();
        let look = |what: String| {
            let smp = name.clone();
            move |source| LookError { smp, what, source }
        };
        let adapter = self.discovery.fetch(&smp.spec.adapter).await.map_err(look(smp.spec.adapter.to_string()))?;
        let mut provisioners = Vec::new();
        for reference in &smp.spec.provisioner {
            provisioners.push(self.discovery.fetch(reference).await.map_err(look(reference.to_string()))?);
        }
        let crd_api = Api::<CustomResourceDefinition>::all(self.client.clone());
        let mut crds = HashMap::new();
        for crd in &smp.spec.provisioner_crds {
            for resource in &crd.resources {
                let crd_name = format!("{resource}.{}", crd.group);
                let found = crd_api.get_opt(&crd_name).await.map_err(look(format!("CRD {crd_name}")))?;
                crds.insert(crd_name, found.and_then(|c| serde_json::to_value(c).ok()));
            }
        }
        let rbac = self.rbac(smp).await;
        let (smp, rules) = (smp.clone(), self.rules.clone());
        // Readiness rules are the SMP's authors': they run within their budget, off the executor.
        Ok(call_blocking(move || {
            let crd = |name: &str| crds.get(name).cloned().flatten();
            let observation = SmpObservation {
                adapter: adapter.as_ref(),
                provisioners: provisioners.iter().map(Option::as_ref).collect(),
                crds: &crd,
                rbac,
            };
            smp::evaluate(&smp, &observation, &rules, Time(k8s_openapi::jiff::Timestamp::now()))
        })
        .await)
    }

    /// The host's permissions for what `smp` and the plugin serving it involve, checked at most
    /// every [`RBAC_TTL`] per SMP generation.
    async fn rbac(&self, smp: &StateManagementProvider) -> RbacCheck {
        let (name, generation) = (smp.name_any(), smp.meta().generation);
        if let Some(check) = self.rbac.get(&name, &generation, RBAC_TTL) {
            return check;
        }
        // No plugin serving the SMP yet is the ServiceSets' condition to report, not RBAC's.
        let serving = self.registry.serving_for(&name).ok();
        let needed = rbac::host_permissions(
            self.mode,
            serving.iter().flat_map(|s| s.kinds()),
            serving.iter().flat_map(|s| s.reads()),
        );
        let check = rbac::check(&self.client, &self.discovery, smp, needed).await;
        self.rbac.put(name, generation, check.clone());
        check
    }
}
