//! What must finish before the first reconcile: every plugin loaded and every cache listed, then
//! the claims of every served ServiceSet recorded, so that the first reconciles arbitrate
//! against all of them rather than against whichever happened to come first.

use super::context::Context;
use crate::controller::adapter_plugins::reconcile::PluginContext;
use crate::controller::caches::service_set_cache::CachedServiceSet;
use crate::controller::plumbing::watches::wait_listed;
use crate::controller::settings::PLUGIN_LOADS;
use crate::plan::translate::{TranslatedService, translate};
use crate::plugin::call_blocking;
use futures::StreamExt;
use kube::ResourceExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
        if let Err(e) = plugins.load_default().await {
            tracing::error!("{e}");
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
    // Each ServiceSet is unpacked only while its batch translates it: all of them unpacked at
    // once, in proportion to the ServiceSets served, set the adapter's peak RSS
    // (docs/performance.md).
    let listed: Vec<Arc<CachedServiceSet>> =
        ctx.caches.service_sets.state().into_iter().filter(|cached| !cached.deleting()).collect();
    // Translating is CPU-bound and the claims are the same in any order: one batch per core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let batch = listed.len().div_ceil(cores.min(usize::from(ctx.settings.concurrency)).max(1)).max(1);
    let served = Arc::new(AtomicUsize::new(0));
    let batches = listed.chunks(batch).map(|batch| {
        let (ctx, batch, served) = (ctx.clone(), batch.to_vec(), served.clone());
        call_blocking(move || record_claims(&ctx, &batch, &served))
    });
    futures::future::join_all(batches).await;
    let count = served.load(Ordering::Relaxed);
    tracing::info!(servicesets = count, "caches listed, plugins loaded and claims recorded; reconciling");
    prepared.send_replace(true);
}

/// Records the claims of those of `service_sets` this host serves, counting them in `served`;
/// one that cannot be translated now claims nothing until it can.
fn record_claims(ctx: &Context, service_sets: &[Arc<CachedServiceSet>], served: &AtomicUsize) {
    for cached in service_sets {
        let Ok(service_set) = cached.unpack() else { continue };
        if ctx.serves(&service_set) != Some(true) {
            continue;
        }
        // Room for every served ServiceSet's translation: each first reconcile asks it again.
        ctx.translations.make_room_for(served.fetch_add(1, Ordering::Relaxed) + 1);
        let Ok(serving) = ctx.serving(&service_set) else { continue };
        let Ok(json) = serde_json::to_value(&service_set) else { continue };
        let namespace = service_set.namespace().unwrap_or_default();
        let template = |name: &str| ctx.template(&namespace, name);
        // Kept: where nothing changed since (a restart over a converged state), the first
        // reconcile translates the same input.
        let memo = Some(&ctx.translations);
        let source = |source: &_| ctx.source(source);
        if let Ok(translated) = translate(&serving, memo, &json, template, source, ctx.settings.tenancy()) {
            let claims: Vec<_> = translated.iter().map(TranslatedService::service_claims).collect();
            ctx.arbiter.record(&service_set, &claims);
        }
    }
}
