//! What must finish before the first reconcile: every plugin loaded and every cache listed, then
//! the claims of every served ServiceSet recorded, so that the first reconciles arbitrate
//! against all of them rather than against whichever happened to come first.

use super::adapter_plugins::reconcile::PluginContext;
use super::context::Context;
use super::settings::PLUGIN_LOADS;
use super::watches::wait_listed;
use crate::k0rdent::ServiceSet;
use crate::plan::{self, TranslatedService};
use crate::plugin::call_blocking;
use futures::StreamExt;
use kube::{Resource, ResourceExt};
use std::sync::Arc;
use tokio::sync::watch;

/// Loads the built-in default plugin and this host's AdapterPlugins as soon as they and the SMPs
/// are listed (`owners_listed`), while the other caches list (`listed`); then records the claims
/// of every served ServiceSet; then turns `prepared` true, which lets reconciles run.
pub async fn prepare(
    ctx: Arc<Context>,
    plugins: Arc<PluginContext>,
    (listed, owners_listed): (Vec<watch::Receiver<bool>>, [watch::Receiver<bool>; 2]),
    prepared: watch::Sender<bool>,
) {
    let load = async {
        if let Err(message) = plugins.load_default().await {
            tracing::error!("{message}");
        }
        let ours = plugins.registry.ours_once_listed(owners_listed).await;
        // At once, so that one slow registry or unlisted kind holds up no other plugin.
        futures::stream::iter(ours)
            .for_each_concurrent(usize::from(PLUGIN_LOADS), |plugin| {
                let plugins = plugins.clone();
                async move {
                    if let (Err(failure), _) = plugins.sync(&plugin).await {
                        tracing::warn!(adapterplugin = %plugin.name_any(), step = ?failure.step, "{}", failure.message);
                    }
                }
            })
            .await;
    };
    futures::future::join(load, futures::future::join_all(listed.into_iter().map(wait_listed))).await;
    let served: Vec<Arc<ServiceSet>> = ctx
        .caches
        .service_sets
        .state()
        .into_iter()
        .filter(|cached| cached.meta().deletion_timestamp.is_none())
        .filter_map(|cached| cached.unpack().ok())
        .filter(|ss| ctx.serves(ss) == Some(true))
        .map(Arc::new)
        .collect();
    let count = served.len();
    ctx.translations.make_room_for(count);
    // Translating is CPU-bound and the claims are the same in any order: one batch per core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch = count.div_ceil(cores.min(usize::from(ctx.settings.concurrency)).max(1)).max(1);
    let batches = served.chunks(batch).map(|batch| {
        let (ctx, batch) = (ctx.clone(), batch.to_vec());
        call_blocking(move || record_claims(&ctx, &batch))
    });
    futures::future::join_all(batches).await;
    tracing::info!(servicesets = count, "caches listed, plugins loaded and claims recorded; reconciling");
    prepared.send_replace(true);
}

/// Records the claims of `service_sets`; one that cannot be translated now claims nothing
/// until it can.
fn record_claims(ctx: &Context, service_sets: &[Arc<ServiceSet>]) {
    for service_set in service_sets {
        let Ok(serving) = ctx.serving(service_set) else { continue };
        let Ok(json) = serde_json::to_value(&**service_set) else { continue };
        let namespace = service_set.namespace().unwrap_or_default();
        let template = |name: &str| ctx.template(&namespace, name);
        // Kept: where nothing changed since (a restart over a converged state), the first
        // reconcile translates the same input.
        let memo = Some(&ctx.translations);
        if let Ok(translated) = plan::translate(&serving, memo, &json, template, &ctx.settings.system_namespace) {
            let claims: Vec<_> = translated.iter().map(TranslatedService::service_claims).collect();
            ctx.arbiter.record(service_set, &claims);
        }
    }
}
