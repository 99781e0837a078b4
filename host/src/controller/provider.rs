//! The host's own look at a StateManagementProvider: it fetches the adapter and provisioner
//! objects, the provisioner CRDs and its own permissions, and evaluates them with
//! [`smp::evaluate`]. In `observe` mode this explains an SMP that kcm reports not ready; in
//! `manage` mode (no kcm) the host writes the SMP status itself.

use super::access::{self, Permission};
use super::context::Context;
use crate::conditions;
use crate::k0rdent::{ResourceReference, StateManagementProvider, StateManagementProviderStatus};
use crate::smp::{self, RbacCheck, SmpEvaluation, SmpObservation};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Scope, pinned_kind};
use kube::{Resource, ResourceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a permission check holds (unless the SMP's generation changes).
const RBAC_TTL: Duration = Duration::from_secs(300);
/// How long a diagnosis of an unready SMP holds (unless the SMP changes).
const DIAGNOSIS_TTL: Duration = Duration::from_secs(10);

/// What the host learnt when it looked at SMPs: discovered kinds, permission checks and
/// diagnoses, so that many ServiceSets of one SMP cost one look.
#[derive(Default)]
pub struct ProviderCache {
    kinds: Mutex<HashMap<String, (ApiResource, bool)>>,
    rbac: Stamped<Option<i64>, RbacCheck>,
    diagnoses: Stamped<Option<String>, String>,
}

/// Values per SMP name, each for one version `V` of the SMP and good for a while.
struct Stamped<V, T>(Mutex<HashMap<String, (V, Instant, T)>>);

impl<V, T> Default for Stamped<V, T> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<V: PartialEq, T: Clone> Stamped<V, T> {
    /// The value for SMP `name` at `version`, if found less than `ttl` ago.
    fn get(&self, name: &str, version: &V, ttl: Duration) -> Option<T> {
        let map = self.0.lock().unwrap();
        let (v, at, value) = map.get(name)?;
        (v == version && at.elapsed() < ttl).then(|| value.clone())
    }

    fn put(&self, name: String, version: V, value: T) {
        self.0.lock().unwrap().insert(name, (version, Instant::now(), value));
    }
}

/// Why the host could not look at an SMP's objects.
#[derive(Debug, thiserror::Error)]
#[error("StateManagementProvider {smp:?}: reading {what}: {source}")]
pub struct LookError {
    smp: String,
    what: String,
    source: kube::Error,
}

/// The host's explanation of why `smp` is not ready (cached per SMP version for a few
/// seconds: every ServiceSet of an unready SMP asks).
pub async fn diagnosis(ctx: &Context, smp: &StateManagementProvider) -> String {
    let (name, version) = (smp.name_any(), smp.resource_version());
    if let Some(text) = ctx.provider_cache.diagnoses.get(&name, &version, DIAGNOSIS_TTL) {
        return text;
    }
    let text = match evaluate(ctx, smp).await {
        Ok(evaluation) => evaluation.diagnosis(),
        Err(e) => format!("the host could not check it: {e}"),
    };
    ctx.provider_cache.diagnoses.put(name, version, text.clone());
    text
}

/// Evaluates `smp` against the live objects, the way kcm does.
pub async fn evaluate(ctx: &Context, smp: &StateManagementProvider) -> Result<SmpEvaluation, LookError> {
    let name = smp.name_any();
    let look = |what: String| {
        let smp = name.clone();
        move |source| LookError { smp, what, source }
    };
    let adapter = fetch(ctx, &smp.spec.adapter).await.map_err(look(describe(&smp.spec.adapter)))?;
    let mut provisioners = Vec::new();
    for reference in &smp.spec.provisioner {
        provisioners.push(fetch(ctx, reference).await.map_err(look(describe(reference)))?);
    }
    let crd_api = Api::<CustomResourceDefinition>::all(ctx.client.clone());
    let mut crds = HashMap::new();
    for crd in &smp.spec.provisioner_crds {
        for resource in &crd.resources {
            let crd_name = format!("{resource}.{}", crd.group);
            let found = crd_api.get_opt(&crd_name).await.map_err(look(format!("CRD {crd_name}")))?;
            crds.insert(crd_name, found.and_then(|c| serde_json::to_value(c).ok()));
        }
    }
    let rbac = rbac(ctx, smp).await;
    let crd = |name: &str| crds.get(name).cloned().flatten();
    let observation = SmpObservation {
        adapter: adapter.as_ref(),
        provisioners: provisioners.iter().map(Option::as_ref).collect(),
        crds: &crd,
        rbac,
    };
    Ok(smp::evaluate(smp, &observation, &ctx.rules, Time(k8s_openapi::jiff::Timestamp::now())))
}

/// `manage` mode: evaluates every SMP naming this host as its adapter, at least every
/// `smp_interval` and soon after any SMP changes, and writes its status when it changed.
pub async fn manage(ctx: Arc<Context>, changed: Arc<Notify>) {
    ctx.ready().await;
    loop {
        for smp in ctx.caches.providers.state() {
            if !ctx.settings.is_adapter_of(&smp) {
                continue;
            }
            if let Err(e) = manage_one(&ctx, &smp).await {
                tracing::warn!(smp = %smp.name_any(), "{e:#}");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(ctx.settings.smp_interval) => {}
            () = changed.notified() => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn manage_one(ctx: &Context, smp: &StateManagementProvider) -> anyhow::Result<()> {
    let evaluation = evaluate(ctx, smp).await?;
    let old = smp.status.clone().unwrap_or_default();
    let status = StateManagementProviderStatus {
        ready: evaluation.ready,
        conditions: conditions::merge(&old.conditions, evaluation.conditions),
    };
    if smp.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut object = StateManagementProvider::new(&smp.name_any(), smp.spec.clone());
    object.meta_mut().resource_version = smp.resource_version();
    object.status = Some(status);
    let api = Api::<StateManagementProvider>::all(ctx.client.clone());
    match api.replace_status(&smp.name_any(), &PostParams::default(), &object).await {
        // Changed meanwhile: the change wakes the loop, which evaluates the new version.
        Err(kube::Error::Api(e)) if e.is_conflict() => Ok(()),
        result => result.map(drop).map_err(Into::into),
    }
}

/// The host's permissions for what `smp` and the plugin involve, checked at most every
/// [`RBAC_TTL`] per SMP generation.
async fn rbac(ctx: &Context, smp: &StateManagementProvider) -> RbacCheck {
    let (name, generation) = (smp.name_any(), smp.meta().generation);
    if let Some(check) = ctx.provider_cache.rbac.get(&name, &generation, RBAC_TTL) {
        return check;
    }
    let mut needed = host_permissions(ctx, smp);
    for reference in std::iter::once(&smp.spec.adapter).chain(&smp.spec.provisioner) {
        match kind(ctx, reference).await {
            Ok(Some((resource, namespaced))) => needed.push(Permission {
                verb: "get",
                group: resource.group,
                resource: resource.plural,
                subresource: None,
                namespace: namespaced.then(|| reference.namespace.clone()),
            }),
            // A kind that does not exist is reported by the adapter/provisioner checks.
            Ok(None) => {}
            Err(e) => return RbacCheck::Unknown(format!("discovering {}: {e}", describe(reference))),
        }
    }
    let check = access::check(&ctx.client, &needed).await;
    ctx.provider_cache.rbac.put(name, generation, check.clone());
    check
}

/// What the host itself does: read k0rdent objects and AdapterPlugins, own ServiceSets'
/// finalizers and status, write the kinds of the plugin serving `smp`, read CRDs, and in
/// `manage` mode write SMP status.
fn host_permissions(ctx: &Context, smp: &StateManagementProvider) -> Vec<Permission> {
    let k0rdent = "k0rdent.mirantis.com";
    let read = ["get", "list", "watch"];
    let mut needed = Permission::each(&["get", "list", "watch", "patch"], k0rdent, "servicesets");
    needed.push(Permission::status_update(k0rdent, "servicesets"));
    needed.extend(Permission::each(&read, k0rdent, "statemanagementproviders"));
    needed.extend(Permission::each(&read, k0rdent, "servicetemplates"));
    needed.extend(Permission::each(&["get"], "apiextensions.k8s.io", "customresourcedefinitions"));
    needed.extend(Permission::each(&read, crate::adapter_plugin::GROUP, "adapterplugins"));
    needed.push(Permission::status_update(crate::adapter_plugin::GROUP, "adapterplugins"));
    if ctx.settings.mode == super::Mode::Manage {
        needed.push(Permission::status_update(k0rdent, "statemanagementproviders"));
    }
    // No plugin serving the SMP yet is the ServiceSets' condition to report, not RBAC's.
    let serving = super::plugins::serving_for(ctx, &smp.name_any()).ok();
    for kind in serving.iter().flat_map(|s| s.kinds()) {
        needed.extend(Permission::each(
            &["get", "list", "watch", "create", "patch", "delete"],
            &kind.group,
            &kind.plural,
        ));
    }
    needed
}

/// The live object `reference` points at, as JSON; `None` when it or its kind does not exist.
async fn fetch(ctx: &Context, reference: &ResourceReference) -> kube::Result<Option<Value>> {
    let Some((resource, namespaced)) = kind(ctx, reference).await? else { return Ok(None) };
    let api = match namespaced {
        true => Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &reference.namespace, &resource),
        false => Api::<DynamicObject>::all_with(ctx.client.clone(), &resource),
    };
    Ok(api.get_opt(&reference.name).await?.and_then(|o| serde_json::to_value(o).ok()))
}

/// The API resource of a reference's kind and whether it is namespaced (discovered once);
/// `None` when the API server does not serve the kind.
async fn kind(ctx: &Context, reference: &ResourceReference) -> kube::Result<Option<(ApiResource, bool)>> {
    let key = format!("{}/{}", reference.api_version, reference.kind);
    if let Some(found) = ctx.provider_cache.kinds.lock().unwrap().get(&key) {
        return Ok(Some(found.clone()));
    }
    let (group, version) = reference.api_version.rsplit_once('/').unwrap_or(("", &reference.api_version));
    match pinned_kind(&ctx.client, &GroupVersionKind::gvk(group, version, &reference.kind)).await {
        Ok((resource, capabilities)) => {
            let found = (resource, capabilities.scope == Scope::Namespaced);
            ctx.provider_cache.kinds.lock().unwrap().insert(key, found.clone());
            Ok(Some(found))
        }
        Err(kube::Error::Api(e)) if e.is_not_found() => Ok(None),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn describe(reference: &ResourceReference) -> String {
    format!("{} {}/{}", reference.kind, reference.namespace, reference.name)
}
