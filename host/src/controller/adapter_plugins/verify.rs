//! The signature check of a plugin from an OCI registry (`spec.source.oci.verify`), between
//! fetching and compiling: nothing of a plugin that no trusted key signed is ever compiled.

use super::fetch::{FetchError, Fetched, SecretError, credentials, secret_key};
use crate::adapter_plugin::{AdapterPlugin, KeySource, SpecError, Verify};
use crate::k0rdent::NamespacedName;
use crate::oci::{self, OciError};
use crate::signature::{KeyError, TrustedKey};
use kube::{Client, ResourceExt};
use sha2::{Digest, Sha256};

/// Why a plugin's signature is not verified, naming the AdapterPlugin, the field or the key.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Not pulled from a registry: there is no manifest to have signed.
    #[error("AdapterPlugin {plugin:?}: no manifest digest to verify")]
    NoDigest {
        /// The AdapterPlugin.
        plugin: String,
    },
    /// `verify` lists no key.
    #[error("spec.source.oci.verify.keys: list at least one public key")]
    NoKeys,
    /// A key sets none of its sources, or both.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A key is not one.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A key's Secret cannot be read.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The pull secret cannot be used.
    #[error(transparent)]
    Credentials(#[from] FetchError),
    /// No trusted key signed the manifest, or the signatures cannot be read.
    #[error("AdapterPlugin {plugin:?}: {source}")]
    Unverified {
        /// The AdapterPlugin.
        plugin: String,
        /// Why.
        source: OciError,
    },
}

/// The `verify` of `plugin`'s spec, if it asks for one.
pub fn required(plugin: &AdapterPlugin) -> Option<&Verify> {
    plugin.spec.source.oci.as_ref().and_then(|o| o.verify.as_ref())
}

/// Checks that the manifest `fetched` was pulled from is signed by one of the keys `plugin`
/// lists (Secrets are read in `namespace`, the host's); returns the key's origin, or `None`
/// when the spec asks for no signature.
pub async fn verify(
    client: &Client,
    namespace: &str,
    plugin: &AdapterPlugin,
    fetched: &Fetched,
) -> Result<Option<String>, VerifyError> {
    match keys(client, namespace, plugin).await? {
        Some(keys) => verify_with(client, namespace, plugin, fetched, &keys).await.map(Some),
        None => Ok(None),
    }
}

/// The keys an AdapterPlugin's `verify` lists, as read now.
pub struct Keys {
    keys: Vec<TrustedKey>,
    /// What they say, hashed: a key rotated inside its Secret changes it, so that the plugin the
    /// old key verified is verified again (and stops serving unless the new key signed it).
    pub fingerprint: String,
}

/// The keys `plugin`'s `verify` lists (Secrets read in `namespace`), each named by its field
/// (and Secret) in errors; `None` when the spec asks for no signature.
pub async fn keys(client: &Client, namespace: &str, plugin: &AdapterPlugin) -> Result<Option<Keys>, VerifyError> {
    let Some(verify) = required(plugin) else { return Ok(None) };
    if verify.keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let (mut keys, mut fingerprint) = (Vec::new(), Sha256::new());
    for (i, key) in verify.keys.iter().enumerate() {
        let field = format!("spec.source.oci.verify.keys[{i}]");
        let (origin, pem) = match key.get(&field)? {
            KeySource::Inline(pem) => (format!("{field}.publicKey"), pem.as_bytes().to_vec()),
            KeySource::Secret(secret) => {
                let (named, field) = (NamespacedName::new(namespace, &secret.name), format!("{field}.secretKeyRef"));
                let pem = secret_key(client, &named, &secret.key, &field).await?;
                (format!("{field}: Secret {named} key {}", secret.key), pem)
            }
        };
        fingerprint.update((pem.len() as u64).to_be_bytes());
        fingerprint.update(&pem);
        keys.push(TrustedKey::from_pem(origin, &pem)?);
    }
    Ok(Some(Keys { keys, fingerprint: hex::encode(fingerprint.finalize()) }))
}

/// Checks that the manifest `fetched` was pulled from is signed by one of `keys`; returns the
/// key's origin.
pub async fn verify_with(
    client: &Client,
    namespace: &str,
    plugin: &AdapterPlugin,
    fetched: &Fetched,
    keys: &Keys,
) -> Result<String, VerifyError> {
    let name = plugin.name_any();
    let (Some(source), Some(pulled)) = (plugin.spec.source.oci.as_ref(), fetched.pulled.as_ref()) else {
        return Err(VerifyError::NoDigest { plugin: name });
    };
    let credentials = credentials(client, namespace, &source.url, source.pull_secret.as_deref()).await?;
    oci::verify(&source.url, &pulled.digest, &credentials, &keys.keys, oci::SIGNATURES_DEADLINE)
        .await
        .map_err(|source| VerifyError::Unverified { plugin: name, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api;
    use serde_json::json;
    use std::sync::Arc;

    fn plugin(verify: serde_json::Value) -> AdapterPlugin {
        let source = json!({"oci": {"url": "127.0.0.1:9/ksm/argocd:v1", "verify": verify}});
        AdapterPlugin::new("argocd", serde_json::from_value(json!({"source": source})).unwrap())
    }

    fn fetched() -> Fetched {
        let pulled = crate::controller::adapter_plugins::fetch::Pulled {
            reference: "127.0.0.1:9/ksm/argocd:v1".into(),
            digest: format!("sha256:{}", "a".repeat(64)),
        };
        Fetched { bytes: Arc::from(&b"component"[..]), sha256: "abc".into(), pulled: Some(pulled) }
    }

    #[tokio::test]
    async fn keys_are_read_and_named_before_the_registry_is_asked() {
        let (client, asked) = mock_api::client(|_| None);
        let bad_pem = plugin(json!({"keys": [{"publicKey": "not a key"}]}));
        let error = verify(&client, "kcm-system", &bad_pem, &fetched()).await.unwrap_err().to_string();
        assert!(error.starts_with("spec.source.oci.verify.keys[0].publicKey: not a PEM public key"), "{error}");

        let in_secret = plugin(json!({"keys": [{"secretKeyRef": {"name": "signers", "key": "team.pub"}}]}));
        let error = verify(&client, "kcm-system", &in_secret, &fetched()).await.unwrap_err().to_string();
        assert_eq!(error, "spec.source.oci.verify.keys[0].secretKeyRef: Secret kcm-system/signers not found");
        assert_eq!(*asked.lock().unwrap(), ["GET /api/v1/namespaces/kcm-system/secrets/signers"]);

        let (client, _) = mock_api::client(|line| {
            line.ends_with("/secrets/signers").then(|| {
                (200, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "signers"}, "data": {}}))
            })
        });
        let error = verify(&client, "kcm-system", &in_secret, &fetched()).await.unwrap_err().to_string();
        assert!(error.ends_with("Secret kcm-system/signers has no team.pub key"), "{error}");

        let none = plugin(json!({"keys": []}));
        let error = verify(&client, "kcm-system", &none, &fetched()).await.unwrap_err().to_string();
        assert_eq!(error, "spec.source.oci.verify.keys: list at least one public key");
    }

    #[tokio::test]
    async fn a_spec_without_verify_checks_nothing() {
        let (client, asked) = mock_api::client(|_| None);
        let unsigned = plugin(json!(null));
        assert_eq!(verify(&client, "kcm-system", &unsigned, &fetched()).await.unwrap(), None);
        assert!(asked.lock().unwrap().is_empty());
    }
}
