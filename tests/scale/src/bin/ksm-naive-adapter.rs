//! `ksm-naive-adapter`: the k0rdent guide's ServiceSet controller, the baseline of
//! `ksm-scale-bench` (see `ksm_scale::naive`).

use std::time::Duration;

use clap::Parser;
use ksm_scale::health::HealthArgs;
use ksm_scale::naive::{self, Options, ServeArgs};

/// Serves the ServiceSets of one namespace with the naive algorithm of the k0rdent guide "Build
/// your own KSM provider": GET + UPDATE of every HelmRelease and a ServiceSet status update on
/// every reconcile, requeued every 30 s. A benchmark baseline, not an adapter to deploy: it has
/// no deletion path and handles Helm templates only.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// Seconds after which a reconciled ServiceSet is reconciled again (the guide's 30 s).
    #[arg(long, default_value_t = 30)]
    requeue_seconds: u64,
    /// With `--health`: on every reconcile, the health of its Deployed services on the target
    /// cluster, verified as kcm 1.12 does (rule ConfigMaps listed, kubeconfig Secret fetched, four
    /// lists per rule kind per service).
    #[command(flatten)]
    health: HealthArgs,
}

/// jemalloc, as `ksm-adapter` uses, so that the baseline is not slowed down by a slower allocator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args { serve, requeue_seconds, health } = Args::parse();
    naive::run(Options {
        kubeconfig: serve.kubeconfig,
        namespace: serve.namespace,
        concurrency: serve.concurrency,
        requeue: Duration::from_secs(requeue_seconds),
        health: health.options(),
    })
    .await
}
