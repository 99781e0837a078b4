//! The scale benchmark: the real `ksm-adapter run` (a child process, so its memory is its own)
//! against an API server loaded with N ServiceSets × S services — the simulated one in this
//! process, or a real kube-apiserver + etcd (envtest, [`server`]) — then, in the same run,
//! against a fresh server loaded identically each, the baselines: the **floor**
//! (`ksm-floor-adapter`, the least any adapter must ask of the API server: see [`crate::floor`])
//! and the **naive baseline** (`ksm-naive-adapter`, the k0rdent guide's controller: see
//! [`crate::naive`]).
//! This process plays kcm (the SMP is ready) and Flux (every HelmRelease is marked Ready for its
//! generation as soon as it appears or changes), and measures, for each:
//!
//! - time to converge: from the adapter's start until every ServiceSet reports `deployed`
//!   (seen through a watch, as kcm would);
//! - the adapter's API requests during convergence, by verb and resource and per ServiceSet (the
//!   server counts them; this process's own status writes and watch are left out);
//! - writes during a steady-state window after convergence (goal: 0);
//! - latency from a ServiceSet spec change to its HelmRelease's new spec (p50/p99);
//! - the adapter's peak RSS (`VmHWM`);
//! - CPU time of the adapter, of this process and, on a real server, of kube-apiserver and etcd.
//!
//! ksm-adapter must converge within its timeout (else the run fails). Each baseline gets its own
//! timeout; if it does not converge in time, the run records how many ServiceSets were deployed
//! and measures the rest anyway, and the ratios of time and requests are bounds.
//!
//! Run it with `cargo run --release -p ksm-scale --bin ksm-scale-bench -- --help`.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use ksm_test_harness::fixtures::{self, adapter_plugin, service_templates, smp, smp_status};
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::objects::Kind;
use ksm_test_harness::{ADAPTER_NAME, SERVICE_LABEL, SERVICE_SET_LABEL};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

mod server;
mod targets;

pub use server::ApiServer;
pub use server::Requests;
use server::{Server, difference};
pub use targets::HealthDuty;
use targets::Targets;

/// The namespace the benchmark works in.
const NAMESPACE: &str = "bench";
/// The SMP the ServiceSets name.
const SMP: &str = "ksm-flux";
/// Flux status writes in flight at once.
const FLUX_CONCURRENCY: usize = 16;
/// How long a spec change may take to reach its HelmRelease; longer counts as timed out.
const CHANGE_LIMIT: Duration = Duration::from_secs(30);
/// Timed-out changes after which the rest are counted as timed out without being made.
const GIVE_UP_AFTER: usize = 3;
/// The least convergence timeout of the baseline when none is given.
const MIN_BASELINE_TIMEOUT: Duration = Duration::from_secs(60);
/// The verbs the table always shows (others only when they occur).
const VERBS: [&str; 6] = ["get", "list", "watch", "create", "update", "patch"];

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// ServiceSets.
    pub service_sets: usize,
    /// Services per ServiceSet.
    pub services: usize,
    /// Length of the steady-state window.
    pub steady: Duration,
    /// Spec changes whose latency is measured (one after the other).
    pub changes: usize,
    /// The longest ksm-adapter's convergence may take.
    pub timeout: Duration,
    /// The `ksm-adapter` binary.
    pub binary: PathBuf,
    /// The baselines to run after ksm-adapter, in order (the table shows them in this order).
    pub baselines: Vec<Baseline>,
    /// Whether to start ksm-adapter again over the converged state and measure its start-up.
    pub restart: bool,
    /// The API server to run against.
    pub apiserver: ApiServer,
    /// The health duty every adapter is given, if any: rules, a target per ServiceSet, an
    /// unhealthy share ([`targets`]).
    pub health: Option<HealthDuty>,
}

impl Options {
    /// The name of service `s` of ServiceSet `i`.
    pub fn service_name(&self, i: usize, s: usize) -> String {
        match &self.health {
            Some(duty) => duty.service_name(i, s),
            None => format!("svc-{s}"),
        }
    }
}

/// A baseline ksm-adapter is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaselineKind {
    /// The least any adapter must ask of the API server (`ksm-floor-adapter`, [`crate::floor`]).
    Floor,
    /// The floor writing as ksm-adapter chooses to: a server-side apply per new HelmRelease and
    /// an Event per ServiceSet deployed (`ksm-floor-adapter --writes applies`).
    FloorApplies,
    /// The k0rdent guide's controller (`ksm-naive-adapter`, [`crate::naive`]).
    Naive,
}

impl BaselineKind {
    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            BaselineKind::Floor => "floor",
            BaselineKind::FloorApplies => "floor-applies",
            BaselineKind::Naive => "naive",
        }
    }

    /// Its binary's name.
    pub fn binary_name(self) -> &'static str {
        match self {
            BaselineKind::Floor | BaselineKind::FloorApplies => "ksm-floor-adapter",
            BaselineKind::Naive => "ksm-naive-adapter",
        }
    }
}

/// How to run a baseline.
#[derive(Clone, Debug)]
pub struct Baseline {
    /// Which one.
    pub kind: BaselineKind,
    /// Its binary (`ksm-floor-adapter`, `ksm-naive-adapter`).
    pub binary: PathBuf,
    /// How long its convergence may take; `None`: 3 × ksm-adapter's time, at least 60 s.
    pub timeout: Option<Duration>,
    /// ServiceSets it handles at once ([`crate::naive::DEFAULT_CONCURRENCY`] by default, as
    /// ksm-adapter).
    pub concurrency: u16,
    /// The naive baseline's requeue after a complete reconcile (the guide's 30 s); the floor has
    /// none.
    pub requeue: Duration,
}

impl Baseline {
    /// The convergence timeout, given how long ksm-adapter took.
    pub fn timeout_after(&self, ours: Duration) -> Duration {
        self.timeout.unwrap_or_else(|| (ours * 3).max(MIN_BASELINE_TIMEOUT))
    }
}

/// What was measured: ksm-adapter's measures and the baselines'.
#[derive(Clone, Debug)]
pub struct Report {
    /// The options of the run.
    pub options: Options,
    /// ksm-adapter's.
    pub ours: Measures,
    /// The baselines', in the order of [`Options::baselines`] (those measured so far).
    pub baselines: Vec<Measures>,
}

/// What was measured of one adapter.
#[derive(Clone, Debug)]
pub struct Measures {
    /// From the adapter's start until every ServiceSet reported `deployed: true`, or until the
    /// timeout when [`converged`](Self::converged) is false.
    pub converge: Duration,
    /// Whether every ServiceSet reported `deployed: true` in time.
    pub converged: bool,
    /// ServiceSets that reported `deployed: true` when convergence was measured.
    pub deployed: usize,
    /// The adapter's requests during convergence, by verb and resource.
    pub requests: Requests,
    /// Writes (create, update, patch, delete) during the steady-state window.
    pub steady_writes: usize,
    /// Spec change → HelmRelease updated, one per change, sorted; a change that timed out
    /// counts as the 30 s limit.
    pub latencies: Vec<Duration>,
    /// Changes whose HelmRelease did not carry the new values within 30 s (or did not exist).
    pub latency_timeouts: usize,
    /// The adapter's peak resident memory, in KiB.
    pub peak_rss_kib: u64,
    /// What the server holds once converged, by kind.
    pub stored: Stored,
    /// CPU time the adapter process used while converging (user + system): its own cost,
    /// apart from the simulated server and Flux simulator that share the machine.
    pub converge_cpu: Duration,
    /// CPU time this process (the simulated API server if it is the one, the Flux simulator and
    /// the watch that counts deployed ServiceSets) used over the same window.
    pub simulator_cpu: Duration,
    /// CPU time of a real API server's processes (kube-apiserver, etcd) over the same window.
    pub server_cpu: Vec<(&'static str, Duration)>,
    /// ksm-adapter started again over what it converged, when asked for.
    pub restart: Option<Restart>,
    /// The adapter's requests to the target server while converging, with a health duty.
    pub target_requests: Requests,
    /// From the adapter's start until the unhealthy share was made healthy, with a health duty
    /// that has one.
    pub healed_after: Option<Duration>,
    /// How often a ServiceSet's status said `deployed: true` after `false` (as far as a watch
    /// saw): each time took a status write more than one.
    pub held_back: usize,
}

/// The mean size of a ServiceSet and of a HelmRelease as the server holds them once converged
/// (JSON, managed fields included): what each write and watch event carries, which a real
/// server's CPU follows.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stored {
    /// Bytes per ServiceSet.
    pub service_set: usize,
    /// Bytes per HelmRelease.
    pub helm_release: usize,
}

impl Stored {
    /// Reads every ServiceSet and HelmRelease of the benchmark's namespace, a page at a time.
    async fn read(client: &kube::Client) -> anyhow::Result<Self> {
        let mean = |kind: Kind| async move {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &kind.resource());
            let (mut bytes, mut objects, mut page) = (0, 0, ListParams::default().limit(500));
            loop {
                let list = api.list(&page).await?;
                objects += list.items.len();
                bytes += list.items.iter().map(|o| serde_json::to_vec(o).map_or(0, |text| text.len())).sum::<usize>();
                match list.metadata.continue_ {
                    Some(token) if !token.is_empty() => page = page.continue_token(&token),
                    _ => return anyhow::Ok(bytes.checked_div(objects).unwrap_or(0)),
                }
            }
        };
        Ok(Self { service_set: mean(Kind::ServiceSet).await?, helm_release: mean(Kind::HelmRelease).await? })
    }
}

/// A second start of ksm-adapter over the state the first one converged: what start-up costs
/// when there is nothing to do.
#[derive(Clone, Debug)]
pub struct Restart {
    /// Start → the first ServiceSet reconciled.
    pub first_reconcile: Duration,
    /// Start → every ServiceSet reconciled (counted on its `/metrics`): steady again.
    pub steady: Duration,
    /// Its writes from the start until a second after it was steady (goal: 0).
    pub writes: usize,
    /// Its requests over the same span, by verb and resource.
    pub requests: Requests,
    /// Its CPU time until steady.
    pub cpu: Duration,
    /// Its peak RSS, in KiB.
    pub peak_rss_kib: u64,
}

/// Runs the benchmark: ksm-adapter, then the baselines.
pub async fn run(options: Options) -> anyhow::Result<Report> {
    let ours = run_ours(&options).await?;
    let mut baselines = Vec::new();
    for baseline in &options.baselines {
        baselines.push(run_baseline(&options, baseline, &ours).await?);
    }
    Ok(Report { options, ours, baselines })
}

/// Measures ksm-adapter; an error when it did not converge within its timeout.
pub async fn run_ours(options: &Options) -> anyhow::Result<Measures> {
    let ours = Contender::Ours(&options.binary);
    let measured = measure(options, &ours, options.timeout, &workdir()?).await?;
    if !measured.converged {
        bail!(
            "{} ServiceSets not deployed after {:?} (adapter log: {})",
            options.service_sets - measured.deployed,
            options.timeout,
            ours.log(&workdir()?).display()
        );
    }
    Ok(measured)
}

/// Measures `baseline`, with a convergence timeout from ksm-adapter's measures (`ours`).
pub async fn run_baseline(options: &Options, baseline: &Baseline, ours: &Measures) -> anyhow::Result<Measures> {
    let timeout = baseline.timeout_after(ours.converge);
    measure(options, &Contender::Baseline(baseline), timeout, &workdir()?).await
}

/// The directory of this run's logs.
fn workdir() -> std::io::Result<PathBuf> {
    let workdir = std::env::temp_dir().join(format!("ksm-scale-bench-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    Ok(workdir)
}

/// An adapter the benchmark measures.
enum Contender<'a> {
    /// `ksm-adapter run`, this binary.
    Ours(&'a Path),
    /// A baseline: `ksm-floor-adapter`, `ksm-naive-adapter`.
    Baseline(&'a Baseline),
}

impl Contender<'_> {
    /// Its binary's name, which names its log and kubeconfig too.
    fn name(&self) -> &'static str {
        match self {
            Contender::Ours(_) => "ksm-adapter",
            Contender::Baseline(baseline) => baseline.kind.name(),
        }
    }

    /// Where its stdout and stderr go.
    fn log(&self, workdir: &Path) -> PathBuf {
        workdir.join(format!("{}.log", self.name()))
    }

    /// Its command line against the server of `kubeconfig`, with the flags of `health`;
    /// ksm-adapter serves `/metrics` on `metrics` if given.
    fn command(&self, kubeconfig: &Path, metrics: Option<SocketAddr>, health: Option<&HealthDuty>) -> Command {
        let mut command = self.bare_command(kubeconfig, metrics);
        if let Some(duty) = health {
            command.args(duty.flags(matches!(self, Contender::Ours(_))));
        }
        command
    }

    /// Its command line without a health duty.
    fn bare_command(&self, kubeconfig: &Path, metrics: Option<SocketAddr>) -> Command {
        match self {
            Contender::Ours(binary) => {
                let mut command = Command::new(binary);
                // Off unless asked for: the scale smoke runs beside other tests' adapters.
                let metrics = metrics.map_or("off".to_string(), |address| address.to_string());
                command
                    .args(["run", "--kubeconfig"])
                    .arg(kubeconfig)
                    .args(["--adapter-name", ADAPTER_NAME, "--adapter-namespace", NAMESPACE, "--log-level", "warn"])
                    .args(["--metrics-bind-address", &metrics])
                    .env_remove("KSM_LOG");
                command
            }
            Contender::Baseline(baseline) => {
                let mut command = Command::new(&baseline.binary);
                command.arg("--kubeconfig").arg(kubeconfig).args(["--namespace", NAMESPACE]);
                command.args(["--concurrency", &baseline.concurrency.to_string()]);
                match baseline.kind {
                    BaselineKind::Naive => {
                        command.args(["--requeue-seconds", &baseline.requeue.as_secs().to_string()]);
                    }
                    BaselineKind::FloorApplies => {
                        command.args(["--writes", "applies"]);
                    }
                    BaselineKind::Floor => {}
                }
                command
            }
        }
    }
}

/// Measures one adapter against a fresh server, giving its convergence `timeout`.
async fn measure(
    options: &Options,
    contender: &Contender<'_>,
    timeout: Duration,
    workdir: &Path,
) -> anyhow::Result<Measures> {
    let bench = Bench::start(options, workdir.join(format!("{}-kubeconfig.yaml", contender.name()))).await?;
    let processes = bench.server.processes();
    let cpu_of_server =
        || -> anyhow::Result<Vec<Duration>> { processes.iter().map(|(_, pid)| cpu_time(&pid.to_string())).collect() };
    let counts_before = bench.server.counts().await?;
    let server_started = cpu_of_server()?;
    let started = Instant::now();
    let simulator_started = cpu_time("self")?;
    let health = options.health.as_ref();
    let target_before = bench.target_counts().await?;
    let adapter = Adapter::start(contender.command(&bench.kubeconfig, None, health), contender.log(workdir))?;
    let healer = bench.heal_when_the_rest_are_deployed(options, started);
    let deployed = wait_converged(options.service_sets, timeout, &adapter, started, bench.statuses.clone()).await?;
    let held_back = bench.statuses.borrow().held_back;
    let converge = started.elapsed();
    let target_requests = difference(&bench.settled_target_counts().await?, &target_before);
    let healed_after = match healer {
        Some(healer) if healer.is_finished() => healer.await??,
        Some(healer) => {
            healer.abort();
            None
        }
        None => None,
    };
    let converge_cpu = cpu_time(&adapter.child.id().to_string())?;
    let simulator_cpu = cpu_time("self")?.saturating_sub(simulator_started);
    let server_cpu = processes
        .iter()
        .zip(cpu_of_server()?.iter().zip(&server_started))
        .map(|((name, _), (now, before))| (*name, now.saturating_sub(*before)))
        .collect();
    let requests = difference(&bench.server.counts().await?, &counts_before);
    let steady_writes = bench.steady_writes(options.steady).await?;
    let stored = Stored::read(&bench.client).await?;
    let (latencies, latency_timeouts) = change_latencies(&bench.server, &bench.client, options).await?;
    let peak_rss_kib = adapter.peak_rss_kib()?;
    if options.restart {
        // The last change's status write comes after the settle: let it land before the kill.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    drop(adapter);
    let restart = match contender {
        Contender::Ours(_) if options.restart => Some(restart(options, contender, &bench, workdir).await?),
        _ => None,
    };
    Ok(Measures {
        converge,
        converged: deployed >= options.service_sets,
        deployed,
        requests,
        steady_writes,
        latencies,
        latency_timeouts,
        peak_rss_kib,
        stored,
        converge_cpu,
        simulator_cpu,
        server_cpu,
        restart,
        target_requests,
        healed_after,
        held_back,
    })
}

/// Starts ksm-adapter again over the state the first one converged, and measures until it has
/// reconciled every ServiceSet once (its `/metrics` counts them), and a second more.
async fn restart(
    options: &Options,
    contender: &Contender<'_>,
    bench: &Bench,
    workdir: &Path,
) -> anyhow::Result<Restart> {
    let metrics = ksm_test_harness::adapter::free_port();
    let before = bench.server.counts().await?;
    let started = Instant::now();
    let log = workdir.join(format!("{}-restart.log", contender.name()));
    let adapter = Adapter::start(contender.command(&bench.kubeconfig, Some(metrics), options.health.as_ref()), log)?;
    let url = format!("http://{metrics}/metrics");
    let mut first_reconcile = None;
    let steady = loop {
        if let Some(status) = adapter.exited() {
            bail!("the restarted adapter exited ({status}); log: {}", adapter.log.display());
        }
        anyhow::ensure!(
            started.elapsed() < options.timeout,
            "the restarted adapter did not reconcile every ServiceSet"
        );
        let reconciled = reconciled(&url).await;
        if reconciled > 0 && first_reconcile.is_none() {
            first_reconcile = Some(started.elapsed());
        }
        if reconciled >= options.service_sets {
            break started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let cpu = cpu_time(&adapter.child.id().to_string())?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let requests = difference(&bench.server.counts().await?, &before);
    let writes = writes(&requests);
    Ok(Restart {
        first_reconcile: first_reconcile.unwrap_or(steady),
        steady,
        writes,
        requests,
        cpu,
        peak_rss_kib: adapter.peak_rss_kib()?,
    })
}

/// ServiceSet reconciles (ok or not) on the `/metrics` at `url`; 0 while it does not answer.
async fn reconciled(url: &str) -> usize {
    let address = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_string();
    if tokio::net::TcpStream::connect(&address).await.is_err() {
        return 0;
    }
    let (_, body) = ksm_test_harness::adapter::http_get(url).await;
    body.lines()
        .filter(|line| line.starts_with(r#"ksm_reconciles_total{kind="ServiceSet""#))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as usize
}

/// Whether `verb` writes.
fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch" | "delete")
}

/// The writes (create, update, patch, delete) among `requests`.
fn writes(requests: &Requests) -> usize {
    requests.iter().filter(|((verb, _), _)| is_write(verb)).map(|(_, n)| n).sum()
}

/// `requests` by verb.
fn by_verb(requests: &Requests) -> BTreeMap<String, usize> {
    let mut verbs = BTreeMap::new();
    for ((verb, _), n) in requests {
        *verbs.entry(verb.clone()).or_default() += n;
    }
    verbs
}

/// The CPU time of process `pid` (a number, or `self`) so far: `utime + stime` of
/// `/proc/<pid>/stat`, in clock ticks of 10 ms.
fn cpu_time(pid: &str) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at field 3 (`state`).
    let after_name = stat.rsplit_once(") ").context("no command name in /proc/<pid>/stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> { Ok(fields.get(i).context("short /proc/<pid>/stat")?.parse()?) };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the name.
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// A loaded server with this process playing Flux and counting deployed ServiceSets; dropping
/// it stops both and the server.
struct Bench {
    server: Server,
    /// The target server, with a health duty.
    targets: Option<std::sync::Arc<Targets>>,
    client: kube::Client,
    kubeconfig: PathBuf,
    /// What the ServiceSets' statuses said so far.
    statuses: watch::Receiver<Statuses>,
    tasks: Vec<JoinHandle<()>>,
}

impl Bench {
    /// Starts and loads a server, writes its kubeconfig, starts Flux and the counter, and
    /// resets the request counts once their own list and watch are done.
    async fn start(options: &Options, kubeconfig: PathBuf) -> anyhow::Result<Self> {
        let (server, client) = Server::start(&options.apiserver, &kubeconfig).await?;
        let targets = match &options.health {
            Some(_) => {
                let path = kubeconfig.with_extension("target.yaml");
                Some(std::sync::Arc::new(Targets::start(&options.apiserver, &path, options.services).await?))
            }
            None => None,
        };
        load(&server, targets.as_deref(), options).await?;
        let (statuses_tx, statuses) = watch::channel(Statuses::default());
        let tasks =
            vec![tokio::spawn(play_flux(client.clone())), tokio::spawn(follow_statuses(client.clone(), statuses_tx))];
        // Let this process's own list and watch happen before counting.
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.reset_counts();
        Ok(Self { server, targets, client, kubeconfig, statuses, tasks })
    }

    /// The target server's requests so far; none without a health duty.
    async fn target_counts(&self) -> anyhow::Result<Requests> {
        match &self.targets {
            Some(targets) => targets.counts().await,
            None => Ok(Requests::new()),
        }
    }

    /// The targets' counts once no request has come for a while (at most a few seconds): the
    /// last ServiceSet's status can land while another's look is half-way through its lists,
    /// and a look is counted whole or not at all.
    async fn settled_target_counts(&self) -> anyhow::Result<Requests> {
        let mut counts = self.target_counts().await?;
        if self.targets.is_none() {
            return Ok(counts);
        }
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.target_counts().await?;
            if now == counts {
                break;
            }
            counts = now;
        }
        Ok(counts)
    }

    /// With a health duty that has an unhealthy share: a task that makes it healthy once every
    /// other ServiceSet is deployed, and returns when that was, from `started`.
    fn heal_when_the_rest_are_deployed(
        &self,
        options: &Options,
        started: Instant,
    ) -> Option<JoinHandle<anyhow::Result<Option<Duration>>>> {
        let (duty, targets) = (options.health?, self.targets.clone()?);
        let (rest, services) = (options.service_sets - duty.unhealthy(options.service_sets), options.services);
        if rest == options.service_sets {
            return None;
        }
        let mut statuses = self.statuses.clone();
        Some(tokio::spawn(async move {
            statuses.wait_for(|seen| seen.deployed >= rest).await?;
            targets.heal(services).await?;
            Ok(Some(started.elapsed()))
        }))
    }

    /// The adapter's writes (create, update, patch, delete) in a window of length `steady`,
    /// which starts a second from now (the last status writes come back).
    async fn steady_writes(&self, steady: Duration) -> anyhow::Result<usize> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = self.server.counts().await?;
        tokio::time::sleep(steady).await;
        Ok(writes(&difference(&self.server.counts().await?, &before)))
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// Stores the namespace, the SMP (ready), the AdapterPlugin, the templates and the ServiceSets;
/// with a health duty, the rules and each ServiceSet's kubeconfig Secret for `targets`.
async fn load(server: &Server, targets: Option<&Targets>, options: &Options) -> anyhow::Result<()> {
    let mut provider = smp(SMP, ADAPTER_NAME, NAMESPACE);
    provider["status"] = smp_status(true);
    let templates: Vec<Value> = service_templates(NAMESPACE);
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        provider,
        adapter_plugin(SMP, NAMESPACE, json!({"builtin": "flux"}), &[SMP]),
    ];
    objects.extend(templates.iter().cloned());
    objects.extend(options.health.iter().flat_map(HealthDuty::management_objects));
    let name = |i: usize, s: usize| options.service_name(i, s);
    let service_sets = (0..options.service_sets).map(|i| {
        let services: Vec<Value> = (0..options.services)
            .map(|s| {
                let template = &templates[s % templates.len()]["metadata"]["name"];
                json!({"name": name(i, s), "namespace": format!("svc-{s}"), "template": template,
                       "values": "replicaCount: 2\n"})
            })
            .collect();
        fixtures::service_set(NAMESPACE, &service_set_name(i), SMP, json!(services))
    });
    let secrets =
        targets.into_iter().flat_map(|t| (0..options.service_sets).map(|i| t.secret(NAMESPACE, &service_set_name(i))));
    server.load(objects, service_sets.chain(secrets)).await
}

fn service_set_name(i: usize) -> String {
    format!("cluster-{i:05}")
}

/// Plays Flux: marks every HelmRelease Ready for its current generation.
async fn play_flux(client: kube::Client) {
    let api = Api::<DynamicObject>::namespaced_with(client, NAMESPACE, &Kind::HelmRelease.resource());
    let status_api = api.clone();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .filter_map(|object| async move { object.ok() })
        .filter(|release| {
            let (generation, observed) =
                (release.metadata.generation, release.data["status"]["observedGeneration"].as_i64());
            std::future::ready(generation.is_some() && observed != generation)
        })
        .for_each_concurrent(FLUX_CONCURRENCY, |release| {
            let api = status_api.clone();
            async move {
                let name = release.metadata.name.clone().unwrap_or_default();
                let status = FluxState::Ready.helm_release_status(release.metadata.generation.unwrap_or(1));
                let patch = Patch::Merge(json!({"status": status}));
                if let Err(e) = api.patch_status(&name, &PatchParams::default(), &patch).await {
                    eprintln!("flux simulator: {name}: {e}");
                }
            }
        })
        .await;
}

/// Follows ServiceSet status through a watch (started before counting, so not counted) and
/// returns how many report `deployed: true` once all do or `timeout` has passed since `started`.
/// Polling every object instead would cost this process CPU in proportion to N, on the machine
/// the adapter is measured on. Fails if the adapter exits.
async fn wait_converged(
    service_sets: usize,
    timeout: Duration,
    adapter: &Adapter,
    started: Instant,
    mut statuses: watch::Receiver<Statuses>,
) -> anyhow::Result<usize> {
    loop {
        let done = statuses.borrow().deployed;
        if done >= service_sets || started.elapsed() > timeout {
            return Ok(done);
        }
        if let Some(status) = adapter.exited() {
            bail!("the adapter exited ({status}); log: {}", adapter.log.display());
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), statuses.changed()).await;
    }
}

/// What the ServiceSets' statuses said, as a watch saw them.
#[derive(Clone, Copy, Debug, Default)]
struct Statuses {
    /// ServiceSets whose status says `deployed: true`.
    deployed: usize,
    /// How often a ServiceSet's status said `deployed: true` after `false`.
    held_back: usize,
}

/// Follows the ServiceSets' statuses through a watch into `statuses`.
async fn follow_statuses(client: kube::Client, statuses: watch::Sender<Statuses>) {
    let api = Api::<DynamicObject>::namespaced_with(client, NAMESPACE, &Kind::ServiceSet.resource());
    let (mut done, mut held, mut held_back) = (HashSet::new(), HashSet::new(), 0);
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff().applied_objects());
    while let Some(event) = events.next().await {
        let Ok(service_set) = event else { continue };
        let name = service_set.metadata.name.clone().unwrap_or_default();
        match service_set.data["status"]["deployed"].as_bool() {
            Some(true) => {
                held_back += usize::from(held.remove(&name));
                done.insert(name);
            }
            deployed => {
                done.remove(&name);
                if deployed == Some(false) {
                    held.insert(name);
                }
            }
        }
        statuses.send_replace(Statuses { deployed: done.len(), held_back });
    }
}

/// Changes the values of the first service of `changes` ServiceSets, one at a time, and times
/// each until its HelmRelease carries the new values: the latencies, sorted (a timed-out change
/// counts as [`CHANGE_LIMIT`]), and how many timed out (after [`GIVE_UP_AFTER`] timeouts the
/// remaining changes are counted as timed out without being made).
async fn change_latencies(
    server: &Server,
    client: &kube::Client,
    options: &Options,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let service_sets = Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &Kind::ServiceSet.resource());
    let releases = Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &Kind::HelmRelease.resource());
    let (mut latencies, mut timeouts) = (Vec::new(), 0);
    for i in 0..options.changes.min(options.service_sets) {
        // Past a few timeouts the adapter is evidently swamped: count the remaining changes as
        // timed out rather than wait the limit for each (a saturated baseline would otherwise
        // wait the limit thousands of times).
        let latency = match timeouts {
            0..GIVE_UP_AFTER => {
                change_latency(server, &service_sets, &releases, i, &options.service_name(i, 0)).await?
            }
            _ => None,
        };
        timeouts += usize::from(latency.is_none());
        latencies.push(latency.unwrap_or(CHANGE_LIMIT));
    }
    latencies.sort();
    Ok((latencies, timeouts))
}

/// Changes the values of the first service (`service`) of ServiceSet `i` and times it until its HelmRelease
/// (found by the host's labels, which the baseline sets too) carries them; `None` when that
/// takes longer than [`CHANGE_LIMIT`] or the HelmRelease does not exist (a baseline that did
/// not converge).
async fn change_latency(
    server: &Server,
    service_sets: &Api<DynamicObject>,
    releases: &Api<DynamicObject>,
    i: usize,
    service: &str,
) -> anyhow::Result<Option<Duration>> {
    let name = service_set_name(i);
    let selector = format!("{SERVICE_SET_LABEL}={name},{SERVICE_LABEL}={service}");
    // From kube-apiserver's watch cache (resourceVersion 0): a consistent LIST makes etcd 3.4 read
    // every HelmRelease of the namespace, which takes far longer than the change it measures.
    let listed = releases.list(&ListParams::default().labels(&selector).match_any()).await?;
    let Some(release) = listed.items.first().and_then(|r| r.metadata.name.clone()) else {
        return Ok(None);
    };
    let mut object = service_sets.get(&name).await?;
    let mut services = object.data["spec"]["services"].take();
    let replicas = json!(3 + i);
    services[0]["values"] = json!(format!("replicaCount: {replicas}\n"));
    let started = Instant::now();
    service_sets.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"services": services}}))).await?;
    while started.elapsed() <= CHANGE_LIMIT {
        let live = server.helm_release(NAMESPACE, &release).await;
        if live.is_some_and(|r| r["spec"]["values"]["replicaCount"] == replicas) {
            return Ok(Some(started.elapsed()));
        }
        tokio::time::sleep(server.poll_interval()).await;
    }
    Ok(None)
}

/// An adapter process; killed when dropped.
struct Adapter {
    child: Child,
    log: PathBuf,
}

impl Adapter {
    /// Starts `command` with stdin closed and stdout and stderr to `log`.
    fn start(mut command: Command, log: PathBuf) -> anyhow::Result<Self> {
        let file = std::fs::File::create(&log)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {}", command.get_program().to_string_lossy()))?;
        Ok(Self { child, log })
    }

    /// Why it is gone, if it is.
    fn exited(&self) -> Option<String> {
        let pid = self.child.id();
        let alive = std::path::Path::new(&format!("/proc/{pid}/status")).exists();
        (!alive).then(|| format!("pid {pid} gone"))
    }

    /// Its `VmHWM`, in KiB.
    fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).context("no VmHWM in /proc/<pid>/status")?;
        Ok(line.split_whitespace().nth(1).context("VmHWM value")?.parse()?)
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Measures {
    /// Requests during convergence, all verbs.
    pub fn total_requests(&self) -> usize {
        self.requests.values().sum()
    }

    /// Requests of one verb during convergence.
    pub fn verb(&self, verb: &str) -> usize {
        of_verb(&self.requests, verb)
    }

    /// Requests of one verb to the target clusters during convergence.
    pub fn target_verb(&self, verb: &str) -> usize {
        of_verb(&self.target_requests, verb)
    }

    /// Requests of one verb on one resource (`servicesets/status`) during convergence.
    pub fn verb_on(&self, verb: &str, resource: &str) -> usize {
        self.requests.get(&(verb.to_string(), resource.to_string())).copied().unwrap_or_default()
    }

    /// The latency at quantile `q` (0..=1).
    pub fn latency(&self, q: f64) -> Duration {
        let index = ((self.latencies.len() as f64 - 1.0) * q).round() as usize;
        self.latencies.get(index).copied().unwrap_or_default()
    }
}

/// The requests in `requests` of one verb, on any resource.
fn of_verb(requests: &Requests, verb: &str) -> usize {
    requests.iter().filter(|((v, _), _)| v == verb).map(|(_, n)| n).sum()
}

/// One row of the table: the measure, ksm-adapter's cell, then per baseline its cell and the
/// ratio ksm-adapter / baseline.
struct Row {
    measure: String,
    ours: String,
    baselines: Vec<(String, String)>,
}

/// The columns of [`Report::csv_row`].
pub const CSV_HEADER: &str = "apiserver,servicesets,services,converge_s,adapter_cpu_s,server_cpu_s,requests_per_serviceset,\
     writes_per_serviceset,steady_writes,peak_rss_mib,restart_first_reconcile_s,restart_steady_s,restart_writes,restart_cpu_s,\
     restart_peak_rss_mib";

impl Report {
    /// The measures of baseline `kind`, if it ran.
    pub fn baseline(&self, kind: BaselineKind) -> Option<&Measures> {
        self.options.baselines.iter().zip(&self.baselines).find(|(b, _)| b.kind == kind).map(|(_, m)| m)
    }

    /// ksm-adapter's figures as one CSV row (see [`CSV_HEADER`]); the restart's are empty when it
    /// was not measured, the server's CPU is the simulator's or kube-apiserver's.
    pub fn csv_row(&self) -> String {
        let (o, m) = (&self.options, &self.ours);
        let n = o.service_sets as f64;
        let server_cpu = m.server_cpu.first().map_or(m.simulator_cpu, |(_, cpu)| *cpu);
        let apiserver = match o.apiserver {
            ApiServer::Simulated => "simulator",
            ApiServer::Envtest(_) => "envtest",
        };
        let restart = m.restart.as_ref().map_or_else(
            || ",,,,".to_string(),
            |r| {
                format!(
                    "{:.2},{:.2},{},{:.2},{:.1}",
                    r.first_reconcile.as_secs_f64(),
                    r.steady.as_secs_f64(),
                    r.writes,
                    r.cpu.as_secs_f64(),
                    r.peak_rss_kib as f64 / 1024.0
                )
            },
        );
        format!(
            "{apiserver},{},{},{:.2},{:.2},{:.2},{:.3},{:.3},{},{:.1},{restart}",
            o.service_sets,
            o.services,
            m.converge.as_secs_f64(),
            m.converge_cpu.as_secs_f64(),
            server_cpu.as_secs_f64(),
            m.total_requests() as f64 / n,
            writes(&m.requests) as f64 / n,
            m.steady_writes,
            m.peak_rss_kib as f64 / 1024.0,
        )
    }

    /// The baselines measured so far, with how they ran.
    fn measured(&self) -> impl Iterator<Item = (&Baseline, &Measures)> {
        self.options.baselines.iter().zip(&self.baselines)
    }

    /// The report as a Markdown table: one row per measure, a column for ksm-adapter, then per
    /// baseline measured its column and the ratio ksm-adapter / baseline.
    pub fn table(&self) -> String {
        let mut header = String::from("| measure | ksm-adapter |");
        let mut rule = String::from("|---|---|");
        for (baseline, _) in self.measured() {
            let name = baseline.kind.name();
            header.push_str(&format!(" {name} | ksm-adapter / {name} |"));
            rule.push_str("---|---|");
        }
        let mut out = format!("{header}\n{rule}\n");
        for row in self.rows() {
            out.push_str(&format!("| {} | {} |", row.measure, row.ours));
            for (cell, ratio) in &row.baselines {
                out.push_str(&format!(" {cell} | {ratio} |"));
            }
            out.push('\n');
        }
        out
    }

    /// One row per measure, verbs and their resources (but for lists and watches) included.
    fn rows(&self) -> Vec<Row> {
        /// A CPU time read from a run's measures.
        type CpuOf = Box<dyn Fn(&Measures) -> Duration>;
        let o = &self.options;
        let per = |count: usize| format!("{count} ({:.2} per ServiceSet)", count as f64 / o.service_sets as f64);
        let unconverged = |m: &Measures| !m.converged;
        let exact = |_: &Measures| false;
        let mut rows = vec![self.setup_row()];
        rows.push(self.row("time to converge", |m| m.converge.as_secs_f64(), unconverged, |m| self.converge_cell(m)));
        let mut cpu_rows: Vec<(String, CpuOf)> = vec![
            ("CPU time of the adapter while converging".into(), Box::new(|m: &Measures| m.converge_cpu)),
            (format!("CPU time of {} meanwhile", self.simulator_label()), Box::new(|m: &Measures| m.simulator_cpu)),
        ];
        for (i, (name, _)) in self.ours.server_cpu.iter().enumerate() {
            let of = move |m: &Measures| m.server_cpu.get(i).map(|(_, cpu)| *cpu).unwrap_or_default();
            cpu_rows.push((format!("CPU time of {name} meanwhile"), Box::new(of)));
        }
        for (measure, cpu) in &cpu_rows {
            let seconds = |m: &Measures| cpu(m).as_secs_f64();
            rows.push(self.row(measure, seconds, unconverged, |m| format!("{:.1} s", seconds(m))));
        }
        let total = |m: &Measures| m.total_requests();
        rows.push(self.row("API requests while converging", |m| total(m) as f64, unconverged, |m| per(total(m))));
        for verb in self.verbs() {
            rows.push(self.row(&format!("  {verb}"), |m| m.verb(&verb) as f64, unconverged, |m| per(m.verb(&verb))));
            for resource in self.resources(&verb) {
                let count = |m: &Measures| m.verb_on(&verb, &resource);
                let measure = format!("    {verb} {resource}");
                rows.push(self.row(&measure, |m| count(m) as f64, unconverged, |m| per(count(m))));
            }
        }
        if let Some(duty) = &o.health {
            rows.extend(self.target_rows(duty));
        }
        let steady = format!("writes in a {} s steady state", o.steady.as_secs());
        rows.push(self.row(&steady, |m| m.steady_writes as f64, exact, steady_cell));
        for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
            let measure = format!("spec change → HelmRelease updated, {label} ({} changes)", self.ours.latencies.len());
            let timed_out = move |m: &Measures| m.latency(q) >= CHANGE_LIMIT;
            rows.push(self.row(&measure, |m| ms(m.latency(q)), timed_out, |m| latency_cell(m, q)));
        }
        let rss = |m: &Measures| format!("{:.1} MiB", m.peak_rss_kib as f64 / 1024.0);
        rows.push(self.row("peak RSS of the adapter", |m| m.peak_rss_kib as f64, exact, rss));
        let bytes = |n: usize| format!("{n} bytes");
        let (set, release) = ("a ServiceSet as stored (JSON, managed fields included)", "a HelmRelease as stored");
        rows.push(self.row(set, |m| m.stored.service_set as f64, exact, |m| bytes(m.stored.service_set)));
        rows.push(self.row(release, |m| m.stored.helm_release as f64, exact, |m| bytes(m.stored.helm_release)));
        let blank = vec![(String::new(), String::new()); self.baselines.len()];
        rows.extend(self.ours.restart.as_ref().map_or_else(Vec::new, |r| restart_rows(r, &blank)));
        rows
    }

    /// The health duty's rows: when the unhealthy share was healed, and the requests to the target
    /// server, by verb and resource, per ServiceSet and against the fewest lists a look needs
    /// (one per kind the rules name per service namespace, one per cluster-scoped kind).
    fn target_rows(&self, duty: &HealthDuty) -> Vec<Row> {
        let o = &self.options;
        let n = o.service_sets as f64;
        let unconverged = |m: &Measures| !m.converged;
        let mut rows = Vec::new();
        let healed = |m: &Measures| m.healed_after.map_or(0.0, |d| d.as_secs_f64());
        let measure = format!("the unhealthy {} % healed at (the rest deployed)", duty.unhealthy_percent);
        rows.push(self.row(&measure, healed, |_| false, |m| format!("{:.1} s", healed(m))));
        let total = |m: &Measures| m.target_requests.values().sum::<usize>();
        let per = |count: usize| format!("{count} ({:.2} per ServiceSet)", count as f64 / n);
        rows.push(self.row("target: requests while converging", |m| total(m) as f64, unconverged, |m| per(total(m))));
        let keys: std::collections::BTreeSet<(String, String)> =
            self.all().flat_map(|m| m.target_requests.keys().cloned()).collect();
        for (verb, resource) in keys {
            let count = |m: &Measures| m.target_requests.get(&(verb.clone(), resource.clone())).copied().unwrap_or(0);
            rows.push(self.row(&format!("    {verb} {resource}"), |m| count(m) as f64, unconverged, |m| per(count(m))));
        }
        let fewest = n * targets::fewest_lists(o.services) as f64;
        let lists = |m: &Measures| m.target_verb("list") as f64;
        let measure = "target: lists per ServiceSet / the fewest one look makes";
        rows.push(self.row(measure, lists, unconverged, |m| format!("{:.2}", lists(m) / fewest)));
        rows
    }

    /// What this process runs besides Flux: the simulated API server, or only the benchmark.
    fn simulator_label(&self) -> &'static str {
        match self.options.apiserver {
            ApiServer::Simulated => "the simulator (API server, Flux)",
            ApiServer::Envtest(_) => "the benchmark (Flux, the deployed count)",
        }
    }

    /// The sizes, and how each baseline runs.
    fn setup_row(&self) -> Row {
        let o = &self.options;
        let baselines = self
            .measured()
            .map(|(b, _)| {
                let how = match b.kind {
                    BaselineKind::Floor => format!(
                        "the least any adapter must ask: a list+watch of ServiceSets and of HelmReleases, per \
                         ServiceSet a finalizer patch, a create per HelmRelease, a status patch once Ready; \
                         concurrency {}",
                        b.concurrency
                    ),
                    BaselineKind::FloorApplies => format!(
                        "the floor writing as ksm-adapter chooses to: a server-side apply per new HelmRelease, an \
                         Event per ServiceSet deployed; concurrency {}",
                        b.concurrency
                    ),
                    BaselineKind::Naive => format!(
                        "the k0rdent guide's controller: GET + UPDATE per child, status update every reconcile, \
                         requeue {} s, concurrency {}",
                        b.requeue.as_secs(),
                        b.concurrency
                    ),
                };
                (how, String::new())
            })
            .collect();
        let apiserver = match o.apiserver {
            ApiServer::Simulated => "simulated API server",
            ApiServer::Envtest(_) => "kube-apiserver v1.32 + etcd (envtest)",
        };
        let health = o.health.map_or(String::new(), |duty| {
            format!(
                "; health on: kcm's default rules, a kubeconfig Secret per ServiceSet for one target server, the \
                 {} % (spread) unhealthy until the rest are deployed, looked at again every {} s",
                duty.unhealthy_percent,
                duty.poll.as_secs()
            )
        });
        Row {
            measure: "ServiceSets × services".into(),
            ours: format!(
                "{} × {} ({} HelmReleases), {apiserver}{health}",
                o.service_sets,
                o.services,
                o.service_sets * o.services
            ),
            baselines,
        }
    }

    /// A row of measure `measure`: each adapter's `cell`, and per baseline the ratio of the
    /// `value`s, ksm-adapter / baseline, a bound when the baseline's value is one (`bound`), `?`
    /// when ksm-adapter's is.
    fn row(
        &self,
        measure: &str,
        value: impl Fn(&Measures) -> f64,
        bound: impl Fn(&Measures) -> bool,
        cell: impl Fn(&Measures) -> String,
    ) -> Row {
        let baselines = self
            .baselines
            .iter()
            .map(|b| match bound(&self.ours) {
                true => (cell(b), "?".to_string()),
                false => (cell(b), ratio(value(&self.ours), value(b), bound(b))),
            })
            .collect();
        Row { measure: measure.into(), ours: cell(&self.ours), baselines }
    }

    /// `8.2 s`, or `not converged after 60.0 s (k of N deployed)`.
    fn converge_cell(&self, m: &Measures) -> String {
        if m.converged {
            format!("{:.1} s", m.converge.as_secs_f64())
        } else {
            let n = self.options.service_sets;
            format!("not converged after {:.1} s ({} of {n} deployed)", m.converge.as_secs_f64(), m.deployed)
        }
    }

    /// Every adapter's measures.
    fn all(&self) -> impl Iterator<Item = &Measures> {
        std::iter::once(&self.ours).chain(&self.baselines)
    }

    /// The verbs to show: [`VERBS`], then any other that occurred.
    fn verbs(&self) -> Vec<String> {
        let mut verbs: Vec<String> = VERBS.iter().map(|v| v.to_string()).collect();
        for measures in self.all() {
            for (verb, _) in measures.requests.keys() {
                if !verbs.contains(verb) {
                    verbs.push(verb.clone());
                }
            }
        }
        verbs
    }

    /// The resources any adapter made `verb` requests on; none for lists and watches, which
    /// are made per kind, not per ServiceSet.
    fn resources(&self, verb: &str) -> std::collections::BTreeSet<String> {
        if matches!(verb, "list" | "watch") {
            return std::collections::BTreeSet::new();
        }
        self.all().flat_map(|m| m.requests.keys()).filter(|(v, _)| v == verb).map(|(_, r)| r.clone()).collect()
    }
}

/// The rows of a restart over the converged state (ksm-adapter's column only; `blank` the
/// baselines' cells).
fn restart_rows(r: &Restart, blank: &[(String, String)]) -> Vec<Row> {
    let row = |measure: &str, ours: String| Row { measure: measure.into(), ours, baselines: blank.to_vec() };
    vec![
        row("restart: start → first ServiceSet reconciled", format!("{:.1} s", r.first_reconcile.as_secs_f64())),
        row("restart: start → every ServiceSet reconciled (steady)", format!("{:.1} s", r.steady.as_secs_f64())),
        row("restart: writes until steady + 1 s", r.writes.to_string()),
        row("restart: requests until steady + 1 s", format!("{:?}", by_verb(&r.requests))),
        row("restart: CPU time of the adapter until steady", format!("{:.1} s", r.cpu.as_secs_f64())),
        row("restart: peak RSS of the adapter", format!("{:.1} MiB", r.peak_rss_kib as f64 / 1024.0)),
    ]
}

/// The steady-state writes, noting when the adapter had not converged.
fn steady_cell(m: &Measures) -> String {
    let note = if m.converged { "" } else { " (still converging)" };
    format!("{}{note}", m.steady_writes)
}

/// The latency at quantile `q` in ms, `≥` when it timed out, with how many did.
fn latency_cell(m: &Measures, q: f64) -> String {
    let latency = m.latency(q);
    let timeouts = match m.latency_timeouts {
        0 => String::new(),
        n => format!(" ({n} of {} timed out after {} s)", m.latencies.len(), CHANGE_LIMIT.as_secs()),
    };
    let at_least = if latency >= CHANGE_LIMIT { "≥ " } else { "" };
    format!("{at_least}{:.1} ms{timeouts}", ms(latency))
}

/// `ours / baseline`, e.g. `3.1x`; `< 3.1x` when `baseline` is a lower bound (it did not
/// converge, so its true value is higher); `0` over `0` is `—`, anything over `0` `∞`.
fn ratio(ours: f64, baseline: f64, lower_bound: bool) -> String {
    let prefix = if lower_bound { "< " } else { "" };
    if baseline == 0.0 {
        return if ours == 0.0 { "—".into() } else { "∞".into() };
    }
    let r = ours / baseline;
    if r >= 0.1 || r == 0.0 { format!("{prefix}{r:.2}x") } else { format!("{prefix}{r:.3}x") }
}

/// Milliseconds.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_ksm_adapter_over_the_baseline() {
        assert_eq!(ratio(9.0, 3.0, false), "3.00x");
        assert_eq!(ratio(3.0, 9.0, true), "< 0.33x");
        assert_eq!(ratio(1.0, 40.0, false), "0.025x");
        assert_eq!(ratio(0.0, 0.0, false), "—");
        assert_eq!(ratio(5.0, 0.0, false), "∞");
        assert_eq!(ratio(0.0, 5.0, false), "0.00x");
    }

    #[test]
    fn the_table_has_a_column_and_a_ratio_per_baseline_and_a_row_per_verb_and_resource() {
        let measures = |converge: u64, requests: &[(&str, &str, usize)]| Measures {
            converge: Duration::from_secs(converge),
            converged: true,
            deployed: 10,
            requests: requests.iter().map(|(v, r, n)| ((v.to_string(), r.to_string()), *n)).collect(),
            steady_writes: 0,
            latencies: vec![Duration::from_millis(5)],
            latency_timeouts: 0,
            peak_rss_kib: 1024,
            stored: Stored { service_set: 2000, helm_release: 1500 },
            converge_cpu: Duration::from_secs(converge),
            simulator_cpu: Duration::from_secs(1),
            server_cpu: Vec::new(),
            restart: None,
            target_requests: Requests::new(),
            healed_after: None,
            held_back: 0,
        };
        let baseline = |kind| Baseline {
            kind,
            binary: PathBuf::new(),
            timeout: None,
            concurrency: 8,
            requeue: Duration::from_secs(30),
        };
        let report = Report {
            options: Options {
                service_sets: 10,
                services: 3,
                steady: Duration::from_secs(5),
                changes: 1,
                timeout: Duration::from_secs(60),
                binary: PathBuf::new(),
                baselines: vec![baseline(BaselineKind::Floor), baseline(BaselineKind::Naive)],
                restart: false,
                apiserver: ApiServer::Simulated,
                health: None,
            },
            ours: measures(4, &[("patch", "helmreleases", 30), ("patch", "servicesets", 10)]),
            baselines: vec![
                measures(2, &[("create", "helmreleases", 30), ("patch", "servicesets", 10)]),
                measures(8, &[("get", "helmreleases", 90), ("update", "servicesets/status", 20)]),
            ],
        };
        let table = report.table();
        assert!(
            table.starts_with("| measure | ksm-adapter | floor | ksm-adapter / floor | naive | ksm-adapter / naive |")
        );
        assert!(table.contains("| time to converge | 4.0 s | 2.0 s | 2.00x | 8.0 s | 0.50x |"), "{table}");
        assert!(
            table.contains("|     patch helmreleases | 30 (3.00 per ServiceSet) | 0 (0.00 per ServiceSet) | ∞ |"),
            "{table}"
        );
        assert!(table.contains("|     get helmreleases | 0 (0.00 per ServiceSet) |"), "{table}");
        assert!(table.contains("| a HelmRelease as stored | 1500 bytes | 1500 bytes | 1.00x |"), "{table}");
        assert_eq!(report.baseline(BaselineKind::Naive).map(|m| m.verb("get")), Some(90));
        assert!(table.lines().filter(|l| !l.starts_with("|---")).all(|l| l.matches(" | ").count() == 5), "{table}");
    }
}
