//! `ksm-floor-adapter`: the floor of `ksm-scale-bench` (see `ksm_scale::floor`).

use clap::Parser;
use ksm_scale::floor::{self, Options, Writes};
use ksm_scale::health::HealthArgs;
use ksm_scale::naive::ServeArgs;

/// Serves the ServiceSets of one namespace with the least any adapter must ask of the API
/// server: one list+watch of ServiceSets and one of HelmReleases, per ServiceSet one finalizer
/// patch, one create per HelmRelease and one status patch once every HelmRelease is Ready; no
/// GETs, no update of an unchanged object, no Events. A benchmark baseline, not an adapter to
/// deploy: no SMP gate, no deletion path, Helm services only.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// How to write a new HelmRelease and a deployed ServiceSet: `least` creates, and posts no
    /// Event; `applies` writes as ksm-adapter does (a server-side apply per new HelmRelease, one
    /// Event per ServiceSet deployed), to measure what those choices cost apart.
    #[arg(long, value_enum, default_value_t = Writes::Least)]
    writes: Writes,
    /// With `--health`: before the status, one look at the services' workloads on the target
    /// cluster (one list per kind a rule names per service namespace), as kcm 1.12 verifies them.
    #[command(flatten)]
    health: HealthArgs,
}

/// jemalloc, as `ksm-adapter` uses.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args { serve: ServeArgs { kubeconfig, namespace, concurrency }, writes, health } = Args::parse();
    floor::run(Options { kubeconfig, namespace, concurrency, writes, health: health.options() }).await
}
