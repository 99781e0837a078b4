//! `ksm-scale-bench`: the scale benchmark of `ksm-adapter run`, with the floor (the least any
//! adapter must ask of the API server) and the naive baseline of the k0rdent guide beside it
//! (see `ksm_scale::bench`, `ksm_scale::floor` and `ksm_scale::naive`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use ksm_scale::bench::{self, ApiServer, Baseline, BaselineKind, HealthDuty, Options, Report};

/// Runs the real `ksm-adapter run` against an API server holding N ServiceSets × S services — the
/// in-process simulated one, or a real kube-apiserver + etcd (`--apiserver envtest`) — plays Flux
/// (every HelmRelease becomes Ready), then does the same with each baseline against a fresh
/// server, and prints a table: time to converge, API requests by verb and resource, steady-state
/// writes, spec-change latency, peak RSS, CPU time (with kube-apiserver's and etcd's on a real
/// server), each with the ratio ksm-adapter / baseline.
///
/// The baselines (`--baseline`, both by default):
///
/// - the floor (`ksm-floor-adapter`): the least any adapter must ask of the API server — one
///   list+watch of ServiceSets and one of HelmReleases, per ServiceSet one finalizer patch, one
///   create per HelmRelease and one status patch once every HelmRelease is Ready, no GETs, no
///   update of an unchanged object, no Events: the limit;
///
/// - the floor writing as ksm-adapter chooses to (`--baseline floor-applies`, or `all`): a
///   server-side apply per new HelmRelease instead of a create, and one Event per ServiceSet
///   deployed, so that what those two choices cost is measured apart from the rest;
///
/// - the naive baseline (`ksm-naive-adapter`): the k0rdent guide's controller — GET + UPDATE per
///   child, a status update on every reconcile, a 30 s requeue.
///
/// Build the adapters first in the same profile, e.g.
/// `cargo build --release -p ksm-adapter -p ksm-scale && target/release/ksm-scale-bench`.
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
    /// Seconds ksm-adapter's convergence may take before the run fails.
    #[arg(long, default_value_t = 900)]
    timeout_seconds: u64,
    /// The `ksm-adapter` binary [default: $KSM_ADAPTER_BIN, else next to this executable].
    #[arg(long)]
    adapter: Option<PathBuf>,
    /// The baselines to measure after ksm-adapter, each against a fresh server (the floor first).
    #[arg(long, value_enum, default_value_t = BaselineArg::Both)]
    baseline: BaselineArg,
    /// Seconds each baseline's convergence may take; past it the run goes on with what was
    /// deployed [default: 3 × ksm-adapter's time, at least 60].
    #[arg(long)]
    baseline_timeout_seconds: Option<u64>,
    /// ServiceSets each baseline handles at once (ksm-adapter's default; controller-runtime's
    /// is 1).
    #[arg(long, default_value_t = ksm_scale::naive::DEFAULT_CONCURRENCY)]
    baseline_concurrency: u16,
    /// The naive baseline's requeue after a complete reconcile, in seconds (the guide's 30).
    #[arg(long, default_value_t = 30)]
    baseline_requeue_seconds: u64,
    /// The `ksm-naive-adapter` binary [default: $KSM_NAIVE_ADAPTER_BIN, else next to this
    /// executable].
    #[arg(long)]
    naive_adapter: Option<PathBuf>,
    /// The `ksm-floor-adapter` binary [default: $KSM_FLOOR_ADAPTER_BIN, else next to this
    /// executable].
    #[arg(long)]
    floor_adapter: Option<PathBuf>,
    /// Start ksm-adapter again over the converged state and measure its start-up (time to the
    /// first reconcile and until every ServiceSet was reconciled, writes, CPU, RSS).
    #[arg(long)]
    restart: bool,
    /// Append ksm-adapter's figures as one CSV row to this file (with a header when it is new),
    /// for `docs/perf/plot.py`.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// The API server: `simulator` (in this process) or `envtest` (etcd, kube-apiserver and
    /// kube-controller-manager from --envtest-assets, started fresh for each adapter, with the
    /// upstream CRDs of KSM_E2E_UPSTREAM_CRDS or ../shared/reference/crds).
    #[arg(long, value_enum, default_value_t = ApiServerArg::Simulator)]
    apiserver: ApiServerArg,
    /// The directory holding etcd, kube-apiserver and kube-controller-manager
    /// (`../shared/envtest/setup.sh` prints one).
    #[arg(long, env = "KUBEBUILDER_ASSETS")]
    envtest_assets: Option<PathBuf>,
    /// Give every adapter the health duty production has: kcm's default health rules (the
    /// chart's) in kcm-system, each ServiceSet's cluster with a kubeconfig Secret for a target
    /// API server of the same kind as --apiserver, whose workloads of the services the rules
    /// judge; the last --unhealthy-percent of ServiceSets unhealthy until the rest are deployed.
    #[arg(long)]
    health: bool,
    /// With --health: the share of ServiceSets, in percent, whose workloads are unhealthy until
    /// every other ServiceSet is deployed.
    #[arg(long, default_value_t = 10, requires = "health")]
    unhealthy_percent: usize,
    /// With --health: every adapter's --health-poll-seconds, how soon a service found unhealthy
    /// is looked at again (ksm-adapter's default).
    #[arg(long, default_value_t = 15, requires = "health")]
    health_poll_seconds: u64,
}

/// Which API server to run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ApiServerArg {
    /// The simulated API server, in this process.
    Simulator,
    /// A real kube-apiserver + etcd.
    Envtest,
}

/// Which baselines to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BaselineArg {
    /// The floor, then the naive baseline.
    Both,
    /// The least any adapter must ask of the API server (`ksm-floor-adapter`).
    Floor,
    /// The floor, writing as ksm-adapter chooses to (`ksm-floor-adapter --writes applies`).
    FloorApplies,
    /// The floor, the floor writing as ksm-adapter chooses to, then the naive baseline.
    All,
    /// The k0rdent guide's controller (`ksm-naive-adapter`).
    Naive,
    /// None: ksm-adapter only.
    Off,
}

impl BaselineArg {
    /// The baselines it names, in the order they run.
    fn kinds(self) -> &'static [BaselineKind] {
        match self {
            BaselineArg::Both => &[BaselineKind::Floor, BaselineKind::Naive],
            BaselineArg::Floor => &[BaselineKind::Floor],
            BaselineArg::FloorApplies => &[BaselineKind::FloorApplies],
            BaselineArg::All => &[BaselineKind::Floor, BaselineKind::FloorApplies, BaselineKind::Naive],
            BaselineArg::Naive => &[BaselineKind::Naive],
            BaselineArg::Off => &[],
        }
    }
}

/// jemalloc, as `ksm-adapter` uses: the simulated API server and Flux spend less of the
/// shared cores in allocation, leaving more of them to the adapter being measured.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let baselines = args
        .baseline
        .kinds()
        .iter()
        .map(|&kind| {
            let (flag, var) = match kind {
                BaselineKind::Floor | BaselineKind::FloorApplies => {
                    (args.floor_adapter.clone(), "KSM_FLOOR_ADAPTER_BIN")
                }
                BaselineKind::Naive => (args.naive_adapter.clone(), "KSM_NAIVE_ADAPTER_BIN"),
            };
            Ok(Baseline {
                kind,
                binary: binary(flag, var, kind.binary_name(), "ksm-scale")?,
                timeout: args.baseline_timeout_seconds.map(Duration::from_secs),
                concurrency: args.baseline_concurrency,
                requeue: Duration::from_secs(args.baseline_requeue_seconds),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let apiserver = match (args.apiserver, args.envtest_assets) {
        (ApiServerArg::Simulator, _) => ApiServer::Simulated,
        (ApiServerArg::Envtest, Some(assets)) => ApiServer::Envtest(assets),
        (ApiServerArg::Envtest, None) => {
            anyhow::bail!(
                "--apiserver envtest needs --envtest-assets or KUBEBUILDER_ASSETS (../shared/envtest/setup.sh)"
            )
        }
    };
    let options = Options {
        service_sets: args.servicesets,
        services: args.services,
        steady: Duration::from_secs(args.steady_seconds),
        changes: args.changes,
        timeout: Duration::from_secs(args.timeout_seconds),
        binary: binary(args.adapter, "KSM_ADAPTER_BIN", "ksm-adapter", "ksm-adapter")?,
        baselines,
        restart: args.restart,
        apiserver,
        health: args.health.then(|| HealthDuty {
            poll: Duration::from_secs(args.health_poll_seconds),
            unhealthy_percent: args.unhealthy_percent,
        }),
    };
    eprintln!("loading {} ServiceSets × {} services ...", options.service_sets, options.services);
    let ours = bench::run_ours(&options).await?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let mut report = Report { options: options.clone(), ours, baselines: Vec::new() };
    for baseline in &options.baselines {
        // A baseline may take many times as long: show the figures so far while it runs.
        eprintln!("the figures so far, before the {} baseline runs:\n\n{}", baseline.kind.name(), report.table());
        report.baselines.push(bench::run_baseline(&options, baseline, &report.ours).await?);
    }
    println!("ksm-scale-bench on {cpus} CPUs\n\n{}", report.table());
    if let Some(path) = args.csv {
        let new = !path.exists();
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        if new {
            writeln!(file, "{}", bench::CSV_HEADER)?;
        }
        writeln!(file, "{}", report.csv_row())?;
    }
    Ok(())
}

/// The binary `name`: `flag`, else the environment variable `var`, else next to this
/// executable; an error naming the `package` to build when it is not there.
fn binary(flag: Option<PathBuf>, var: &str, name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = match flag.or_else(|| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)) {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name(name),
    };
    anyhow::ensure!(
        path.is_file(),
        "no {name} binary at {} (build it: cargo build --release -p {package})",
        path.display()
    );
    Ok(path)
}
