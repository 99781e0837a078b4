//! How the controller runs: the settings `ksm-adapter run` builds from its flags.

use super::plumbing::leader;
use super::remote::addresses::Allowed;
use crate::smp::AdapterIdentity;
use crate::tenancy::Tenancy;
use std::net::SocketAddr;
use std::time::Duration;

/// Who writes StateManagementProvider status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// kcm evaluates SMPs and writes their status; the host reads `status.ready`.
    Observe,
    /// No kcm: the host evaluates the SMPs naming it as adapter and writes their status.
    Manage,
}

/// AdapterPlugins loaded (fetched, compiled, validated) at once.
pub const PLUGIN_LOADS: u16 = 4;

/// Plugin instances a controller reconciling `concurrency` ServiceSets at once holds at most at
/// once: one session per reconcile and one per plugin load.
pub fn plugin_instances(concurrency: u16) -> u32 {
    u32::from(concurrency) + u32::from(PLUGIN_LOADS)
}

/// The plugin serving, when no AdapterPlugin names it, an SMP whose `spec.provisionerCRDs` list
/// the CRDs that plugin's CD tool provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultPlugin {
    /// The built-in Flux plugin, for SMPs listing Flux's HelmRelease or Kustomization CRD.
    Flux,
    /// None: every SMP needs an AdapterPlugin.
    None,
}

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The adapter Deployment this host runs as.
    pub identity: AdapterIdentity,
    /// Who writes SMP status.
    pub mode: Mode,
    /// What serves an SMP that no AdapterPlugin names.
    pub default_plugin: DefaultPlugin,
    /// The namespace k0rdent runs in (self-management ServiceSets live there).
    pub system_namespace: String,
    /// The service account Flux objects without `spec.kubeConfig` outside the system namespace
    /// run as, in their own namespace (see [`Tenancy`]).
    pub local_service_account: String,
    /// ServiceSets reconciled at the same time.
    pub concurrency: u16,
    /// Every ServiceSet is reconciled again after this long even when nothing changed.
    pub resync: Duration,
    /// `manage` mode: SMPs are re-evaluated at least this often (kcm uses 10 s).
    pub smp_interval: Duration,
    /// How often an OCI plugin with `pullPolicy: Always` checks whether its tag moved.
    pub oci_poll: Duration,
    /// How soon a service demoted by its workloads' health is looked at again.
    pub health_poll: Duration,
    /// Clients of target clusters held at most.
    pub target_clusters: usize,
    /// The addresses of other clusters allowed besides the safe ones (`https://` to a public
    /// address), and the cluster's own CIDRs ([`Allowed`]).
    pub cluster_addresses: Allowed,
    /// Where to serve `/metrics`, `/healthz` and `/readyz`; `None`: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// Label selector of the ServiceSets this process serves (sharding); `None`: all.
    pub shard_selector: Option<String>,
    /// Leader election: only the holder of this Lease runs; `None`: this process always runs.
    pub election: Option<leader::Election>,
}

impl Settings {
    /// Who Flux's objects run as, from these settings.
    pub fn tenancy(&self) -> Tenancy<'_> {
        Tenancy { system_namespace: &self.system_namespace, local_service_account: &self.local_service_account }
    }
}
