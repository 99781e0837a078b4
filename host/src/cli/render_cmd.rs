//! `ksm-adapter render`: the controller's decision for every ServiceSet in some files, offline.

use super::offline_plugins::OfflinePlugins;
use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ksm_adapter::k0rdent::NamespacedName;
use ksm_adapter::k0rdent::{ServiceSet, StateManagementProvider};
use ksm_adapter::manifests::{Document, Manifests};
use ksm_adapter::plan::children::{SERVICE_LABEL, SERVICE_SET_LABEL, recorded};
use ksm_adapter::plan::claims::{ClaimIndex, Contender, ServiceClaims, arbitrate};
use ksm_adapter::plan::decide::{Inputs, decide, foreign_objects, not_routed};
use ksm_adapter::plan::route::{self, Route, Topology};
use ksm_adapter::plan::{self, TranslatedService, reads};
use ksm_adapter::rules::RuleCache;
use ksm_adapter::runtime::Runtime;
use ksm_adapter::smp::{self, AdapterIdentity, RbacCheck, SmpObservation};
use ksm_adapter::tenancy::Tenancy;
use ksm_plugin_sdk::sources::SourceRef;
use kube::ResourceExt;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// YAML/JSON files or directories: StateManagementProviders, ServiceSets, ServiceTemplates,
    /// the adapter/provisioner workloads and CRDs an SMP refers to, and observed CD-tool objects.
    #[arg(long = "filename", short = 'f', required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    identity: super::identity::IdentityArgs,
    #[command(flatten)]
    plugin: super::plugin_args::PluginArgs,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::new()?;
    let manifests = Manifests::read(&args.files)?;
    let plugins = OfflinePlugins::load(&runtime, &manifests, &args.plugin)?;
    let identity = args.identity.identity();
    let rules = RuleCache::new();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let tenancy = args.plugin.tenancy.tenancy();
    let claims = claim_index(&plugins, &manifests, &identity, tenancy)?;
    let mut found = false;
    for doc in manifests.k0rdent("ServiceSet") {
        found = true;
        let out = render_one(&plugins, &manifests, doc, &identity, &rules, &claims, tenancy, &now)
            .with_context(|| format!("ServiceSet {} ({})", doc.key(), doc.origin))?;
        super::plugin_cmd::print_yaml(&out)?;
    }
    if !found {
        bail!("no ServiceSet ({}) in {:?}", ksm_plugin_sdk::k0rdent::API_VERSION, args.files);
    }
    Ok(ExitCode::SUCCESS)
}

/// The claims of every ServiceSet in the files this host serves, as the controller records
/// them before its first reconcile.
pub(super) fn claim_index(
    plugins: &OfflinePlugins,
    manifests: &Manifests,
    identity: &AdapterIdentity,
    tenancy: Tenancy,
) -> anyhow::Result<ClaimIndex> {
    let mut index = ClaimIndex::default();
    for doc in manifests.k0rdent("ServiceSet") {
        let Ok(service_set) = serde_json::from_value::<ServiceSet>(doc.object.clone()) else { continue };
        let Some(smp) = provider(manifests, &service_set)? else { continue };
        if !smp::serves(identity, &smp, service_set.labels()).unwrap_or(false) {
            continue;
        }
        let Ok(plugin) = plugins.for_provider(&service_set.spec.provider.name, Some(&smp)) else { continue };
        let template = |name: &str| manifests.template(doc.namespace(), name).map(|d| d.object.clone());
        let source = |r: &SourceRef| manifests.source(r);
        if let Ok(translated) = plan::translate(&plugin, None, &doc.object, template, source, tenancy) {
            let claims: Vec<_> = translated.iter().map(TranslatedService::service_claims).collect();
            index.record(&Contender::of(&service_set), &claims);
        }
    }
    Ok(index)
}

/// The StateManagementProvider a ServiceSet names, if it is in the files.
pub(super) fn provider(
    manifests: &Manifests,
    service_set: &ServiceSet,
) -> anyhow::Result<Option<StateManagementProvider>> {
    let name = &service_set.spec.provider.name;
    manifests
        .k0rdent("StateManagementProvider")
        .find(|d| d.name() == name)
        .map(|d| serde_json::from_value::<StateManagementProvider>(d.object.clone()).with_context(|| d.origin.clone()))
        .transpose()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn render_one(
    plugins: &OfflinePlugins,
    manifests: &Manifests,
    doc: &Document,
    identity: &AdapterIdentity,
    rules: &RuleCache,
    claims: &ClaimIndex,
    tenancy: Tenancy,
    now: &Time,
) -> anyhow::Result<Value> {
    let service_set: ServiceSet = serde_json::from_value(doc.object.clone()).context("not a valid ServiceSet")?;
    let smp_name = &service_set.spec.provider.name;
    let smp = provider(manifests, &service_set)?;
    let labels = service_set.metadata.labels.clone().unwrap_or_default();
    if let Some(smp) = &smp
        && !smp::serves(identity, smp, &labels).map_err(|e| anyhow::anyhow!("{e}"))?
    {
        return Ok(json!({ "serviceSet": doc.key(), "servedByThisHost": false,
            "reason": format!("StateManagementProvider {smp_name:?} names adapter {}/{} or its selector does not match",
                smp.spec.adapter.namespace, smp.spec.adapter.name) }));
    }
    let plugin = match plugins.for_provider(smp_name, smp.as_ref()) {
        Ok(plugin) => plugin,
        Err(problem) => return Ok(json!({ "serviceSet": doc.key(), "servedByThisHost": true, "error": problem })),
    };
    // In observe mode kcm writes `status.ready`; when it says no, the host explains why.
    let unready = smp.as_ref().filter(|smp| !smp.status.as_ref().is_some_and(|s| s.ready));
    let diagnosis = unready.map(|smp| diagnose(smp, manifests, rules, now).diagnosis());
    let children: Vec<Value> = manifests
        .documents
        .iter()
        .filter(|d| d.namespace() == doc.namespace() && recorded(&d.object, SERVICE_SET_LABEL) == Some(doc.name()))
        .map(|d| d.object.clone())
        .collect();
    let template = |name: &str| manifests.template(doc.namespace(), name).map(|d| d.object.clone());
    let key = NamespacedName::of(&service_set);
    let has_objects = |NamespacedName { namespace, name }: &NamespacedName, service: &str| {
        manifests.documents.iter().any(|d| {
            d.namespace() == namespace
                && recorded(&d.object, SERVICE_SET_LABEL) == Some(name.as_str())
                && recorded(&d.object, SERVICE_LABEL) == Some(service)
        })
    };
    let arbitrate = |_: &[ServiceClaims]| arbitrate(claims, &key, has_objects);
    // As the controller does: children go where the ServiceSet's cluster is served from.
    let regional = match route(manifests, &service_set, tenancy.system_namespace) {
        Ok(route) => matches!(route, Route::Region(_)),
        Err(why) => return Ok(unrouted(doc, &service_set, &why, now)),
    };
    let reads = &plugin.metadata().reads;
    let related = |owner: &Value| reads::owned_by(reads, owner, manifests.documents.iter().map(|d| &d.object));
    let mut observed = Inputs {
        smp: smp.as_ref(),
        smp_diagnosis: diagnosis,
        template: &template,
        source: &|r| manifests.source(r),
        children: &children,
        foreign: &BTreeMap::new(),
        arbitrate: &arbitrate,
        related: &related,
        translations: None,
        regional,
        defer_status: false,
    };
    let mut plan = decide(&plugin, &service_set, &observed, tenancy, now)?;
    // As the controller does: an object in the files with the name of a first apply that is not
    // this ServiceSet's is never taken over.
    let foreign = foreign_objects(&service_set, &plan.unseen, |r| {
        manifests.find(&r.api_version, &r.kind, &r.namespace, &r.name).map(|d| d.object.clone())
    });
    if !foreign.is_empty() {
        observed.foreign = &foreign;
        plan = decide(&plugin, &service_set, &observed, tenancy, now)?;
    }
    Ok(json!({
        "serviceSet": doc.key(),
        "apply": plan.apply,
        "delete": plan.delete.iter().map(|r| format!("{} {} {}/{}", r.api_version, r.kind, r.namespace, r.name)).collect::<Vec<_>>(),
        "status": plan.status,
    }))
}

/// The decision for `service_set` (in `doc`) when the cluster its children live on cannot be
/// told or reached (`why`): nothing applied or deleted, the status says why.
pub(super) fn unrouted(doc: &Document, service_set: &ServiceSet, why: &str, now: &Time) -> Value {
    json!({ "serviceSet": doc.key(), "apply": [], "delete": [], "status": not_routed(service_set, why, now) })
}

/// Where `service_set`'s children live, from the ClusterDeployments, Credentials and Regions in
/// the files (as the controller routes it from its caches).
pub(super) fn route(manifests: &Manifests, service_set: &ServiceSet, system_namespace: &str) -> Result<Route, String> {
    fn object<T: DeserializeOwned>(manifests: &Manifests, kind: &str, key: &NamespacedName) -> Option<T> {
        let doc = manifests.find(ksm_plugin_sdk::k0rdent::API_VERSION, kind, &key.namespace, &key.name)?;
        serde_json::from_value(doc.object.clone()).ok()
    }
    let cluster_deployment = |key: &NamespacedName| object(manifests, "ClusterDeployment", key);
    let credential = |key: &NamespacedName| object(manifests, "Credential", key);
    let region = |name: &str| object(manifests, "Region", &NamespacedName::new("", name));
    let topology = Topology { cluster_deployment: &cluster_deployment, credential: &credential, region: &region };
    route::route(service_set, &topology, system_namespace).map_err(|e| e.to_string())
}

/// The host's own evaluation of an SMP from the workloads and CRDs in the files (RBAC cannot be
/// checked offline).
fn diagnose(smp: &StateManagementProvider, manifests: &Manifests, rules: &RuleCache, now: &Time) -> smp::SmpEvaluation {
    let find = |r: &ksm_adapter::k0rdent::ResourceReference| {
        manifests.find(&r.api_version, &r.kind, &r.namespace, &r.name).map(|d| &d.object)
    };
    let crd = |name: &str| {
        manifests.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", name).map(|d| d.object.clone())
    };
    let observation = SmpObservation {
        adapter: find(&smp.spec.adapter),
        provisioners: smp.spec.provisioner.iter().map(find).collect(),
        crds: &crd,
        rbac: RbacCheck::Unknown("not checked offline".into()),
    };
    smp::evaluate(smp, &observation, rules, now.clone())
}
