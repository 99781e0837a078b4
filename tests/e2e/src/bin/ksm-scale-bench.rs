//! `ksm-scale-bench`: the scale benchmark of `ksm-adapter run` (see `ksm_e2e::scale`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ksm_e2e::scale::{self, Options};

/// Runs the real `ksm-adapter run` against an in-process simulated API server holding N
/// ServiceSets × S services, plays Flux (every HelmRelease becomes Ready), and prints a table:
/// time to converge, API requests by verb, steady-state writes, spec-change latency, peak RSS.
///
/// Build the adapter first in the same profile, e.g.
/// `cargo build --release -p ksm-adapter -p ksm-e2e && target/release/ksm-scale-bench`.
#[derive(Debug, Parser)]
struct Args {
    /// ServiceSets to load.
    #[arg(long, default_value_t = 10_000)]
    servicesets: usize,
    /// Services per ServiceSet.
    #[arg(long, default_value_t = 3)]
    services: usize,
    /// Seconds of the steady-state window after convergence.
    #[arg(long, default_value_t = 10)]
    steady_seconds: u64,
    /// Spec changes whose latency is measured.
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// Seconds convergence may take before the run fails.
    #[arg(long, default_value_t = 900)]
    timeout_seconds: u64,
    /// The `ksm-adapter` binary [default: $KSM_ADAPTER_BIN, else next to this executable].
    #[arg(long)]
    adapter: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let binary = match args.adapter.or_else(|| std::env::var_os("KSM_ADAPTER_BIN").map(PathBuf::from)) {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name("ksm-adapter"),
    };
    anyhow::ensure!(
        binary.is_file(),
        "no ksm-adapter binary at {} (build it: cargo build --release -p ksm-adapter)",
        binary.display()
    );
    let options = Options {
        service_sets: args.servicesets,
        services: args.services,
        steady: Duration::from_secs(args.steady_seconds),
        changes: args.changes,
        timeout: Duration::from_secs(args.timeout_seconds),
        binary,
    };
    eprintln!("loading {} ServiceSets × {} services ...", options.service_sets, options.services);
    let report = scale::run(options).await?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    println!("ksm-scale-bench on {cpus} CPUs\n\n{}", report.table());
    Ok(())
}
