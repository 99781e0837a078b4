//! Talking to an OCI registry from the command line: the credentials flags and a runtime per
//! operation, shared by `plugin push|pull|sign`.

use anyhow::Context;
use clap::Args;
use ksm_adapter::oci::{self, Credentials};
use std::path::PathBuf;

/// Registry credentials (anonymous without any).
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// User name for the registry's basic auth.
    #[arg(long, env = "KSM_REGISTRY_USERNAME", requires = "password")]
    username: Option<String>,
    /// Password or token for the registry's basic auth.
    #[arg(long, env = "KSM_REGISTRY_PASSWORD", hide_env_values = true, requires = "username")]
    password: Option<String>,
    /// A Docker config file holding the registry's credentials (`~/.docker/config.json`, or the
    /// `.dockerconfigjson` of a pull Secret). Used instead of --username/--password when given.
    #[arg(long, value_name = "FILE")]
    docker_config: Option<PathBuf>,
}

impl RegistryArgs {
    /// The credentials these flags give for `reference`'s registry.
    pub fn credentials(&self, reference: &str) -> anyhow::Result<Credentials> {
        if let Some(path) = &self.docker_config {
            let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            return Ok(Credentials::from_dockerconfigjson(&bytes, &oci::registry(reference)?)?);
        }
        Ok(match (&self.username, &self.password) {
            (Some(username), Some(password)) => Credentials::basic(username, password),
            _ => Credentials::anonymous(),
        })
    }
}

/// Runs a registry operation on a runtime of its own.
pub fn block_on<T>(operation: impl Future<Output = Result<T, oci::OciError>>) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(runtime.block_on(operation)?)
}
