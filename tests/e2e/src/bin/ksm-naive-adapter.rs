//! `ksm-naive-adapter`: the k0rdent guide's ServiceSet controller, the baseline of
//! `ksm-scale-bench` (see `ksm_e2e::naive`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ksm_e2e::naive::{self, Options};

/// Serves the ServiceSets of one namespace with the naive algorithm of the k0rdent guide "Build
/// your own KSM provider": GET + UPDATE of every HelmRelease and a ServiceSet status update on
/// every reconcile, requeued every 30 s. A benchmark baseline, not an adapter to deploy: it has
/// no deletion path and handles Helm templates only.
#[derive(Debug, Parser)]
struct Args {
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else in-cluster].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The namespace whose ServiceSets are served.
    #[arg(long)]
    namespace: String,
    /// ServiceSets reconciled concurrently (controller-runtime's default is 1; the default here
    /// is ksm-adapter's, so that the baseline is not slowed down by less concurrency).
    #[arg(long, default_value_t = ksm_e2e::naive::DEFAULT_CONCURRENCY)]
    concurrency: u16,
    /// Seconds after which a reconciled ServiceSet is reconciled again (the guide's 30 s).
    #[arg(long, default_value_t = 30)]
    requeue_seconds: u64,
}

/// jemalloc, as `ksm-adapter` uses, so that the baseline is not slowed down by a slower allocator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    naive::run(Options {
        kubeconfig: args.kubeconfig,
        namespace: args.namespace,
        concurrency: args.concurrency,
        requeue: Duration::from_secs(args.requeue_seconds),
    })
    .await
}
