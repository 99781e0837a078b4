//! `ksm-adapter run`: the controller, against a cluster.

use super::identity::IdentityArgs;
use super::plugin_args::LimitArgs;
use anyhow::Context;
use clap::{Args, ValueEnum};
use ipnet::IpNet;
use ksm_adapter::controller::plumbing::leader::{self, Election};
use ksm_adapter::controller::remote::addresses::{Allowed, Class};
use ksm_adapter::controller::{self, DefaultPlugin, Mode, Settings};
use ksm_adapter::metrics::{Metrics, verb_of};
use ksm_adapter::runtime::{DiskCache, Runtime};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tower::util::MapRequestLayer;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig file to use [default: $KUBECONFIG, else ~/.kube/config, else the in-cluster
    /// service account].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Who writes StateManagementProvider status.
    #[arg(long, value_enum, default_value_t = ModeArg::Observe)]
    mode: ModeArg,
    /// What serves a StateManagementProvider that names this host and that no AdapterPlugin
    /// names: `flux`, the built-in Flux plugin, when the SMP's `spec.provisionerCRDs` list
    /// Flux's HelmRelease or Kustomization CRD (an SMP for another CD tool never falls back to
    /// it); `none`: every SMP needs an AdapterPlugin.
    #[arg(long, value_enum, default_value_t = DefaultPluginArg::Flux)]
    default_plugin: DefaultPluginArg,
    /// ServiceSets reconciled concurrently; each reconcile holds one plugin instance from a pool
    /// sized from this (plus 4 for AdapterPlugin loads).
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// Seconds within which every settled ServiceSet is reconciled again even if nothing changed,
    /// spread over them a few at a time, after any change (changes are picked up at once through
    /// watches; this only bounds drift and re-checks health).
    #[arg(long, default_value_t = 600)]
    resync_seconds: u64,
    /// `manage` mode: seconds between re-evaluations of each SMP (also re-evaluated on change).
    #[arg(long, default_value_t = 10)]
    smp_interval_seconds: u64,
    /// Health verification (kcm 1.12): seconds between looks at the target-cluster workloads of
    /// a service demoted to Provisioning because one is unhealthy (no watch tells when they
    /// recover). Rules come from ConfigMaps labelled `k0rdent.mirantis.com/health-rule-target`.
    #[arg(long, default_value_t = 15)]
    health_poll_seconds: u64,
    /// Clients of other clusters held at most, for each purpose: target clusters read for
    /// service health (one per kubeconfig Secret, dropped after 10 minutes unused) and regional
    /// clusters (one per Region, with its watches, dropped after 30 minutes unused). When full,
    /// the least recently used client goes first and is made again on its next use.
    #[arg(long, default_value_t = 64)]
    max_target_clusters: usize,
    #[command(flatten)]
    other_clusters: OtherClusterArgs,
    /// How often an AdapterPlugin from OCI with `pullPolicy: Always` checks whether its tag moved,
    /// in seconds.
    #[arg(long, default_value_t = 300)]
    oci_poll_seconds: u64,
    /// Directory of precompiled plugins (keyed by sha256 and wasmtime build), so a restart does
    /// not compile them again; an emptyDir in a Pod. Without it, plugins compile at every start.
    #[arg(long, env = "KSM_PLUGIN_CACHE_DIR")]
    plugin_cache_dir: Option<PathBuf>,
    /// Address of the `/metrics` (Prometheus), `/healthz` and `/readyz` endpoint; `off` to
    /// serve none.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_bind_address: String,
    /// Serve only the ServiceSets this label selector matches (e.g. `sharding.fluxcd.io/key=shard1`),
    /// so that several Deployments split a large fleet. Claims are arbitrated within a shard:
    /// keep ServiceSets that may contend for one release in the same shard.
    #[arg(long)]
    shard_selector: Option<String>,
    /// Run only while holding a Lease in the adapter's namespace, so that one of several
    /// replicas is active (the others wait and take over within seconds of a release, or
    /// after the lease duration if the leader dies).
    #[arg(long)]
    leader_elect: bool,
    /// Name of the leader-election Lease [default: the adapter name].
    #[arg(long)]
    leader_election_id: Option<String>,
    /// How long the Lease holds after the leader's last renewal, in seconds (renewed every
    /// third of it).
    #[arg(long, default_value_t = 15)]
    leader_election_lease_seconds: u64,
    #[command(flatten)]
    tenancy: super::tenancy_args::TenancyArgs,
    #[command(flatten)]
    identity: IdentityArgs,
    /// Limits of every plugin call, unless its AdapterPlugin sets `spec.limits`.
    #[command(flatten)]
    limits: LimitArgs,
}

/// Who writes StateManagementProvider status.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    /// kcm evaluates SMPs and writes their status; the host reads `status.ready` and, when it is
    /// false, adds its own diagnosis to the ServiceSet's condition.
    Observe,
    /// No kcm: the host evaluates each SMP naming it as adapter (CEL readiness rules,
    /// provisioner CRDs, its own RBAC via SelfSubjectAccessReview) and writes the SMP status.
    Manage,
}

/// The addresses of other clusters the operator allows (`run`, and `explain`, which reaches
/// them too).
#[derive(Debug, Args)]
pub struct OtherClusterArgs {
    /// Addresses of other clusters (regions, and targets read for service health) that
    /// kubeconfig Secrets may point the host at, besides `https://` to a public address. A
    /// kubeconfig Secret is written by whoever may write Secrets in its namespace (a tenant, for a
    /// target cluster), so by default the host refuses plain `http://`, loopback (its own pod),
    /// link-local (the node's services), cloud metadata addresses (169.254.169.254,
    /// fd00:ec2::254, metadata.google.internal, ...), the cluster's own Service and Pod CIDRs
    /// (`--cluster-cidrs`) and private networks (10/8, 172.16/12, 192.168/16, 100.64/10,
    /// fc00::/7, ...); an IPv6 address standing for an IPv4 one (`::ffff:a.b.c.d`, NAT64, 6to4)
    /// is judged by it. The refusal names the Secret, key, class and the value allowing it, and
    /// lands in the ServiceSet's status like an unreachable cluster. A host name is checked by
    /// what it resolves to, at every connection. Comma-separated, e.g.
    /// `--allow-cluster-addresses http,loopback` for test clusters on the host's own machine.
    #[arg(long, value_enum, value_delimiter = ',')]
    allow_cluster_addresses: Vec<AddressArg>,
    /// The cluster's own Service and Pod CIDRs, which a kubeconfig Secret may not point the host
    /// at unless `--allow-cluster-addresses` names `cluster` (allowing `private` does not allow
    /// them). Comma-separated, e.g. `--cluster-cidrs 10.96.0.0/12,10.244.0.0/16`.
    #[arg(long, value_delimiter = ',')]
    cluster_cidrs: Vec<IpNet>,
}

impl OtherClusterArgs {
    /// The classes allowed, and the cluster's CIDRs.
    pub fn allowed(&self) -> Allowed {
        let classes: Allowed = self
            .allow_cluster_addresses
            .iter()
            .map(|address| match address {
                AddressArg::Http => Class::Http,
                AddressArg::Loopback => Class::Loopback,
                AddressArg::LinkLocal => Class::LinkLocal,
                AddressArg::Metadata => Class::Metadata,
                AddressArg::Cluster => Class::Cluster,
                AddressArg::Private => Class::Private,
            })
            .collect();
        classes.with_cluster_cidrs(self.cluster_cidrs.iter().copied())
    }
}

/// A class of address of another cluster the operator allows.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum AddressArg {
    /// `http://`: credentials and answers in clear.
    Http,
    /// 127.0.0.0/8, ::1, 0.0.0.0/8, ::, `localhost`: the host's own pod.
    Loopback,
    /// 169.254.0.0/16, fe80::/10: the node's link-local services.
    LinkLocal,
    /// Cloud instance metadata services, by address or name.
    Metadata,
    /// The cluster's own Service and Pod CIDRs (`--cluster-cidrs`).
    Cluster,
    /// Networks not routed on the internet: 10/8, 172.16/12, 192.168/16, 100.64/10,
    /// 192.0.0/24, 198.18/15, 240/4, fc00::/7, fec0::/10, 64:ff9b:1::/48.
    Private,
}

/// What serves an SMP that no AdapterPlugin names.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DefaultPluginArg {
    /// The built-in Flux plugin, for SMPs whose provisionerCRDs list Flux's CRDs.
    Flux,
    /// None.
    None,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let disk = match &args.plugin_cache_dir {
        Some(dir) => Some(DiskCache::open(dir).with_context(|| format!("--plugin-cache-dir {}", dir.display()))?),
        None => None,
    };
    let runtime = Runtime::with_options(disk, controller::plugin_instances(args.concurrency))?;
    let settings = Settings {
        identity: args.identity.identity(),
        mode: match args.mode {
            ModeArg::Observe => Mode::Observe,
            ModeArg::Manage => Mode::Manage,
        },
        default_plugin: match args.default_plugin {
            DefaultPluginArg::Flux => DefaultPlugin::Flux,
            DefaultPluginArg::None => DefaultPlugin::None,
        },
        system_namespace: args.tenancy.system_namespace.clone(),
        local_service_account: args.tenancy.local_service_account(),
        concurrency: args.concurrency,
        resync: Duration::from_secs(args.resync_seconds),
        smp_interval: Duration::from_secs(args.smp_interval_seconds),
        oci_poll: Duration::from_secs(args.oci_poll_seconds),
        health_poll: Duration::from_secs(args.health_poll_seconds),
        target_clusters: args.max_target_clusters,
        cluster_addresses: args.other_clusters.allowed(),
        shard_selector: args.shard_selector.clone(),
        election: args.leader_elect.then(|| election(&args)),
        metrics_addr: match args.metrics_bind_address.as_str() {
            "off" | "0" | "" => None,
            addr => Some(addr.parse().with_context(|| format!("--metrics-bind-address {addr:?}"))?),
        },
    };
    let metrics = Arc::new(Metrics::default());
    tracing::info!(
        adapter = %format!("{}/{}", settings.identity.namespace, settings.identity.name),
        mode = ?settings.mode,
        "starting"
    );
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    tokio.block_on(async {
        let client = client(args.kubeconfig.as_ref(), &metrics).await?;
        controller::run(client, runtime, args.limits.limits(), settings, metrics).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The Lease `--leader-election-id` (default: the adapter name) in the adapter's namespace, as
/// this process (the pod name from `HOSTNAME`, made unique per process).
fn election(args: &RunArgs) -> Election {
    let identity = args.identity.identity();
    let lease = args.leader_election_id.clone().unwrap_or_else(|| identity.name.clone());
    let pod = std::env::var("HOSTNAME").unwrap_or_else(|_| identity.name.clone());
    Election {
        lease_duration: Duration::from_secs(args.leader_election_lease_seconds),
        ..Election::new(identity.namespace, lease, leader::unique_identity(&pod))
    }
}

/// The client configuration of `--kubeconfig`, else the usual places.
pub(super) async fn kube_config(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await.context("no kubeconfig found and not running in a cluster")?,
    })
}

/// The API client, counting its requests by verb in `metrics`.
async fn client(kubeconfig: Option<&PathBuf>, metrics: &Arc<Metrics>) -> anyhow::Result<kube::Client> {
    let config = kube_config(kubeconfig).await?;
    let metrics = metrics.clone();
    let count = MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
        metrics.api_request(verb_of(&request));
        request
    });
    Ok(ClientBuilder::try_from(config)?.with_layer(&count).build())
}
