//! The adapter identity flags shared by `run` and `render`.

use clap::Args;
use ksm_adapter::smp::AdapterIdentity;

/// File holding the pod's namespace, mounted in every pod with a service account token.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Which adapter Deployment this host is: an SMP's `spec.adapter.{name,namespace}` must equal it
/// for the host to serve that SMP's ServiceSets.
#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// Name of this adapter's Deployment.
    #[arg(long, env = "KSM_ADAPTER_NAME", default_value = "ksm-adapter")]
    adapter_name: String,
    /// Namespace of this adapter's Deployment [default: $POD_NAMESPACE, else the pod's service
    /// account namespace, else kcm-system].
    #[arg(long, env = "KSM_ADAPTER_NAMESPACE")]
    adapter_namespace: Option<String>,
}

impl IdentityArgs {
    /// The identity, with the namespace defaulting from the pod's environment.
    pub fn identity(&self) -> AdapterIdentity {
        let namespace = self
            .adapter_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok().filter(|ns| !ns.is_empty()))
            .or_else(|| std::fs::read_to_string(POD_NAMESPACE_FILE).ok().map(|ns| ns.trim().to_string()))
            .unwrap_or_else(|| "kcm-system".into());
        AdapterIdentity { name: self.adapter_name.clone(), namespace }
    }
}
