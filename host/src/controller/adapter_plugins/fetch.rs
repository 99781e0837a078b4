//! A component's bytes, from where an AdapterPlugin's `spec.source` says: built into the binary,
//! a ConfigMap, or an OCI registry. OCI `IfNotPresent` pulls a reference once; `Always` pulls
//! again only when the tag moved.

use crate::adapter_plugin::{AdapterPluginSpec, PullPolicy, Source, SpecError};
use crate::builtin::{self, UnknownBuiltin};
use crate::k0rdent::NamespacedName;
use crate::oci::{self, Credentials, OciError};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Why a component's bytes cannot be fetched, naming the field and the object.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The spec says no one source, or what its ConfigMap holds is not the component.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No built-in plugin of that name.
    #[error("spec.source.builtin: {0}")]
    Builtin(#[source] UnknownBuiltin),
    /// The ConfigMap cannot be read.
    #[error("reading ConfigMap {config_map}: {source}")]
    ReadConfigMap {
        /// The ConfigMap.
        config_map: NamespacedName,
        /// Why.
        source: kube::Error,
    },
    /// The ConfigMap does not exist.
    #[error("spec.source.configMap: ConfigMap {0} not found")]
    NoConfigMap(NamespacedName),
    /// The pull secret cannot be read.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The pull secret holds no credentials for the registry.
    #[error("spec.source.oci.pullSecret: Secret {secret}: {source}")]
    PullSecret {
        /// The Secret.
        secret: NamespacedName,
        /// Why.
        source: OciError,
    },
    /// The registry did not give the component.
    #[error(transparent)]
    Oci(#[from] OciError),
}

/// Why a Secret the spec names cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// It cannot be read.
    #[error("reading {field}: Secret {secret}: {source}")]
    Read {
        /// The field naming it.
        field: String,
        /// The Secret.
        secret: NamespacedName,
        /// Why.
        source: kube::Error,
    },
    /// It does not exist.
    #[error("{field}: Secret {secret} not found")]
    NotFound {
        /// The field naming it.
        field: String,
        /// The Secret.
        secret: NamespacedName,
    },
    /// It has no such `data` key.
    #[error("{field}: Secret {secret} has no {key} key")]
    NoKey {
        /// The field naming it.
        field: String,
        /// The Secret.
        secret: NamespacedName,
        /// The key.
        key: String,
    },
}

/// A component's bytes and where they came from.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The component.
    pub bytes: Arc<[u8]>,
    /// Hex sha256 of `bytes`.
    pub sha256: String,
    /// From OCI: what was pulled.
    pub pulled: Option<Pulled>,
}

/// An OCI reference and the manifest digest it resolved to when pulled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pulled {
    /// The reference in the spec.
    pub reference: String,
    /// The manifest digest (`sha256:...`).
    pub digest: String,
}

impl Fetched {
    fn new(bytes: Arc<[u8]>, pulled: Option<Pulled>) -> Self {
        Self { sha256: hex::encode(Sha256::digest(&bytes)), bytes, pulled }
    }
}

/// Fetches the component `spec` names; `previous` is what the AdapterPlugin serves now, reused
/// when an OCI reference has not moved. `namespace` is the host's: pull secrets live there.
pub async fn fetch(
    client: &Client,
    namespace: &str,
    spec: &AdapterPluginSpec,
    previous: Option<&Fetched>,
) -> Result<Fetched, FetchError> {
    match spec.source.get()? {
        Source::Builtin(name) => {
            builtin::lookup(name).map(|bytes| Fetched::new(Arc::from(bytes), None)).map_err(FetchError::Builtin)
        }
        Source::ConfigMap(reference) => {
            let api = Api::<ConfigMap>::namespaced(client.clone(), &reference.namespace);
            let named = NamespacedName::new(&reference.namespace, &reference.name);
            let config_map = api.get_opt(&reference.name).await;
            let config_map =
                config_map.map_err(|source| FetchError::ReadConfigMap { config_map: named.clone(), source })?;
            let config_map = config_map.ok_or(FetchError::NoConfigMap(named))?;
            Ok(Fetched::new(Arc::from(reference.bytes_in(&config_map)?), None))
        }
        Source::Oci(source) => {
            let credentials = credentials(client, namespace, &source.url, source.pull_secret.as_deref()).await?;
            let same_reference = previous.filter(|p| p.pulled.as_ref().is_some_and(|p| p.reference == source.url));
            if let Some(previous @ Fetched { pulled: Some(pulled), .. }) = same_reference {
                let unchanged = match source.pull_policy {
                    PullPolicy::IfNotPresent => true,
                    PullPolicy::Always => {
                        oci::resolve(&source.url, &credentials, oci::RESOLVE_DEADLINE).await? == pulled.digest
                    }
                };
                if unchanged && source.sha256.as_ref().is_none_or(|sha| *sha == previous.sha256) {
                    return Ok(previous.clone());
                }
            }
            let pulled =
                oci::pull(&source.url, &credentials, source.sha256.as_deref(), oci::PullBounds::default()).await?;
            let reference = Pulled { reference: source.url.clone(), digest: pulled.manifest_digest };
            Ok(Fetched::new(Arc::from(pulled.bytes), Some(reference)))
        }
    }
}

/// The registry credentials in the pull secret (a `kubernetes.io/dockerconfigjson` Secret in
/// `namespace`), or none.
pub(super) async fn credentials(
    client: &Client,
    namespace: &str,
    url: &str,
    secret: Option<&str>,
) -> Result<Credentials, FetchError> {
    let Some(secret) = secret else { return Ok(Credentials::anonymous()) };
    let named = NamespacedName::new(namespace, secret);
    let config = secret_key(client, &named, ".dockerconfigjson", "spec.source.oci.pullSecret").await?;
    let registry = oci::registry(url)?;
    Credentials::from_dockerconfigjson(&config, &registry)
        .map_err(|source| FetchError::PullSecret { secret: named, source })
}

/// The `data` key `key` of Secret `secret`; `field` is the spec's field naming it.
pub(super) async fn secret_key(
    client: &Client,
    secret: &NamespacedName,
    key: &str,
    field: &str,
) -> Result<Vec<u8>, SecretError> {
    let (field, named) = (field.to_string(), secret.clone());
    let found = Api::<Secret>::namespaced(client.clone(), &secret.namespace).get_opt(&secret.name).await;
    let found = match found {
        Ok(Some(found)) => found,
        Ok(None) => return Err(SecretError::NotFound { field, secret: named }),
        Err(source) => return Err(SecretError::Read { field, secret: named, source }),
    };
    let mut data = found.data.unwrap_or_default();
    let ByteString(bytes) =
        data.remove(key).ok_or_else(|| SecretError::NoKey { field, secret: named, key: key.into() })?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api;
    use base64::Engine as _;
    use serde_json::json;

    fn spec(source: serde_json::Value) -> AdapterPluginSpec {
        serde_json::from_value(json!({"source": source, "providers": ["ksm-flux"]})).unwrap()
    }

    fn config_map_source() -> serde_json::Value {
        json!({"configMap": {"namespace": "plugins", "name": "argocd", "key": "plugin.wasm"}})
    }

    #[tokio::test]
    async fn a_builtin_needs_no_api_server_and_is_hashed() {
        let (client, asked) = mock_api::client(|_| None);
        let fetched = fetch(&client, "kcm-system", &spec(json!({"builtin": "flux"})), None).await.unwrap();
        assert_eq!(fetched.sha256, hex::encode(Sha256::digest(builtin::FLUX)));
        assert!(fetched.pulled.is_none());
        assert!(asked.lock().unwrap().is_empty());
        let unknown =
            fetch(&client, "kcm-system", &spec(json!({"builtin": "argo"})), None).await.unwrap_err().to_string();
        assert!(unknown.starts_with("spec.source.builtin: no built-in plugin \"argo\""), "{unknown}");
    }

    #[tokio::test]
    async fn a_config_map_is_read_by_name_and_its_absence_named() {
        let bytes = b"\0asm\x0d\0\x01\0component".to_vec();
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let (client, asked) = mock_api::client(move |line| {
            (line == "GET /api/v1/namespaces/plugins/configmaps/argocd").then(|| {
                (200, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd", "namespace": "plugins"},
                             "binaryData": {"plugin.wasm": data}}))
            })
        });
        let fetched = fetch(&client, "kcm-system", &spec(config_map_source()), None).await.unwrap();
        assert_eq!(&*fetched.bytes, &bytes[..]);
        assert_eq!(*asked.lock().unwrap(), ["GET /api/v1/namespaces/plugins/configmaps/argocd"], "one read by name");

        let (client, _) = mock_api::client(|_| None);
        let missing = fetch(&client, "kcm-system", &spec(config_map_source()), None).await.unwrap_err().to_string();
        assert_eq!(missing, "spec.source.configMap: ConfigMap plugins/argocd not found");
    }

    #[tokio::test]
    async fn a_pull_secret_is_read_in_the_hosts_namespace_before_any_pull() {
        let oci = json!({"oci": {"url": "registry.example.com/plugins/argocd:1.0", "pullSecret": "registry"}});
        let (client, asked) = mock_api::client(|_| None);
        let missing = fetch(&client, "kcm-system", &spec(oci.clone()), None).await.unwrap_err().to_string();
        assert_eq!(missing, "spec.source.oci.pullSecret: Secret kcm-system/registry not found");
        assert_eq!(*asked.lock().unwrap(), ["GET /api/v1/namespaces/kcm-system/secrets/registry"]);

        let (client, _) = mock_api::client(|line| {
            line.ends_with("/secrets/registry").then(|| {
                (200, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "registry"}, "data": {}}))
            })
        });
        let no_key = fetch(&client, "kcm-system", &spec(oci), None).await.unwrap_err().to_string();
        assert!(no_key.ends_with("has no .dockerconfigjson key"), "{no_key}");
    }
}
