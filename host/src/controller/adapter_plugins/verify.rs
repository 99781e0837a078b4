//! The signature check of a plugin from an OCI registry (`spec.source.oci.verify`), between
//! fetching and compiling: nothing of a plugin that no trusted key or identity signed is ever
//! compiled.

use super::fetch::{FetchError, Fetched, SecretError, credentials, secret_key};
use crate::adapter_plugin::{AdapterPlugin, ConfigMapKeyRef, KeySource, SpecError, Verify};
use crate::k0rdent::NamespacedName;
use crate::oci::{self, OciError};
use crate::signature::keyless::Keyless;
use crate::signature::trust_root::{TrustRoot, TrustRootError};
use crate::signature::{KeyError, Policy, TrustedKey, Verified};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, ResourceExt};
use sha2::{Digest, Sha256};

/// Where the trust root is named.
const TRUST_ROOT_FIELD: &str = "spec.source.oci.verify.keyless.trustRoot";

/// Why a plugin's signature is not verified, naming the AdapterPlugin, the field or the key.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Not pulled from a registry: there is no manifest to have signed.
    #[error("AdapterPlugin {plugin:?}: no manifest digest to verify")]
    NoDigest {
        /// The AdapterPlugin.
        plugin: String,
    },
    /// The trust root cannot be read or used: keyless signatures fail closed.
    #[error(transparent)]
    TrustRoot(#[from] TrustRootUnusable),
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
    /// Nothing trusted signed the manifest, or the signatures cannot be read.
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

/// Why the trust root of `keyless` cannot be used, naming the ConfigMap and key.
#[derive(Debug, thiserror::Error)]
pub enum TrustRootUnusable {
    /// It cannot be read.
    #[error("reading {TRUST_ROOT_FIELD}: ConfigMap {config_map}: {source}")]
    Read {
        /// The ConfigMap.
        config_map: NamespacedName,
        /// Why.
        source: kube::Error,
    },
    /// It does not exist.
    #[error("{TRUST_ROOT_FIELD}: ConfigMap {0} not found")]
    NotFound(NamespacedName),
    /// It has no such key.
    #[error("{TRUST_ROOT_FIELD}: ConfigMap {config_map} has no {key} key")]
    NoKey {
        /// The ConfigMap.
        config_map: NamespacedName,
        /// The key.
        key: String,
    },
    /// What it holds is no trust root.
    #[error("{TRUST_ROOT_FIELD}: ConfigMap {config_map} key {key}: {source}")]
    Invalid {
        /// The ConfigMap.
        config_map: NamespacedName,
        /// The key.
        key: String,
        /// Why.
        source: TrustRootError,
    },
}

/// Checks that the manifest `fetched` was pulled from is signed as `plugin`'s `verify` asks
/// (Secrets and the trust root are read in `namespace`, the host's); returns what verified it,
/// or `None` when the spec asks for no signature.
pub async fn verify(
    client: &Client,
    namespace: &str,
    plugin: &AdapterPlugin,
    fetched: &Fetched,
) -> Result<Option<Verified>, VerifyError> {
    match trust(client, namespace, plugin).await? {
        Some(trust) => verify_with(client, namespace, plugin, fetched, &trust).await.map(Some),
        None => Ok(None),
    }
}

/// What an AdapterPlugin's `verify` trusts, as read now.
pub struct Trust {
    policy: Policy,
    /// What the keys and trust root say, hashed: a key rotated inside its Secret or a trust
    /// root edited changes it, so that the plugin verified before is verified again (and stops
    /// serving unless it still verifies).
    pub fingerprint: String,
}

/// What `plugin`'s `verify` trusts (Secrets and the trust root read in `namespace`), each
/// named by its field in errors; `None` when the spec asks for no signature.
pub async fn trust(client: &Client, namespace: &str, plugin: &AdapterPlugin) -> Result<Option<Trust>, VerifyError> {
    let Some(verify) = required(plugin) else { return Ok(None) };
    if verify.keys.is_empty() && verify.keyless.is_none() {
        return Err(SpecError::NothingToVerify.into());
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
    let keyless = match &verify.keyless {
        Some(keyless) => {
            let rules = keyless.rules()?;
            let json = trust_root_json(client, namespace, &keyless.trust_root).await?;
            fingerprint.update(b"keyless");
            fingerprint.update(&json);
            let root = TrustRoot::from_json(&json).map_err(|source| TrustRootUnusable::Invalid {
                config_map: NamespacedName::new(namespace, &keyless.trust_root.name),
                key: keyless.trust_root.key.clone(),
                source,
            })?;
            let (ignore_sct, ignore_tlog) = (keyless.insecure_ignore_sct, keyless.insecure_ignore_tlog);
            Some(Keyless { root, rules, ignore_sct, ignore_tlog })
        }
        None => None,
    };
    Ok(Some(Trust { policy: Policy { keys, keyless }, fingerprint: hex::encode(fingerprint.finalize()) }))
}

/// The trust root's text, from its ConfigMap key in `namespace`.
async fn trust_root_json(client: &Client, namespace: &str, at: &ConfigMapKeyRef) -> Result<Vec<u8>, TrustRootUnusable> {
    let config_map = NamespacedName::new(namespace, &at.name);
    let found = Api::<ConfigMap>::namespaced(client.clone(), namespace).get_opt(&at.name).await;
    let found = match found {
        Ok(Some(found)) => found,
        Ok(None) => return Err(TrustRootUnusable::NotFound(config_map)),
        Err(source) => return Err(TrustRootUnusable::Read { config_map, source }),
    };
    let text = found.data.and_then(|mut d| d.remove(&at.key));
    text.map(String::into_bytes).ok_or(TrustRootUnusable::NoKey { config_map, key: at.key.clone() })
}

/// Checks that the manifest `fetched` was pulled from is signed as `trust` requires; returns
/// what verified it.
pub async fn verify_with(
    client: &Client,
    namespace: &str,
    plugin: &AdapterPlugin,
    fetched: &Fetched,
    trust: &Trust,
) -> Result<Verified, VerifyError> {
    let name = plugin.name_any();
    let (Some(source), Some(pulled)) = (plugin.spec.source.oci.as_ref(), fetched.pulled.as_ref()) else {
        return Err(VerifyError::NoDigest { plugin: name });
    };
    let credentials = credentials(client, namespace, &source.url, source.pull_secret.as_deref()).await?;
    oci::verify(&source.url, &pulled.digest, &credentials, &trust.policy, oci::SIGNATURES_DEADLINE)
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
        assert_eq!(error, "spec.source.oci.verify: set keys, keyless or both");
    }

    #[tokio::test]
    async fn a_spec_without_verify_checks_nothing() {
        let (client, asked) = mock_api::client(|_| None);
        let unsigned = plugin(json!(null));
        assert_eq!(verify(&client, "kcm-system", &unsigned, &fetched()).await.unwrap(), None);
        assert!(asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_missing_or_unreadable_trust_root_fails_closed_naming_it() {
        let keyless = |trust_root: serde_json::Value| {
            plugin(json!({"keyless": {"trustRoot": trust_root,
                "allOf": [{"issuer": "https://dex.acme.example", "subject": {"equal": "ci@acme.example"}}]}}))
        };
        let at = json!({"name": "sigstore", "key": "trusted_root.json"});
        let (client, asked) = mock_api::client(|_| None);
        let error = verify(&client, "kcm-system", &keyless(at.clone()), &fetched()).await.unwrap_err().to_string();
        assert_eq!(error, "spec.source.oci.verify.keyless.trustRoot: ConfigMap kcm-system/sigstore not found");
        assert_eq!(
            *asked.lock().unwrap(),
            ["GET /api/v1/namespaces/kcm-system/configmaps/sigstore"],
            "no registry asked"
        );

        let holding = |data: serde_json::Value| {
            move |line: &str| {
                line.ends_with("/configmaps/sigstore").then(|| {
                    let meta = json!({"name": "sigstore", "namespace": "kcm-system"});
                    (200, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}))
                })
            }
        };
        let (client, _) = mock_api::client(holding(json!({"other": "{}"})));
        let error = verify(&client, "kcm-system", &keyless(at.clone()), &fetched()).await.unwrap_err().to_string();
        assert_eq!(
            error,
            "spec.source.oci.verify.keyless.trustRoot: ConfigMap kcm-system/sigstore has no trusted_root.json key"
        );
        let (client, _) = mock_api::client(holding(json!({"trusted_root.json": "{\"tlogs\": []}"})));
        let error = verify(&client, "kcm-system", &keyless(at.clone()), &fetched()).await.unwrap_err().to_string();
        assert_eq!(
            error,
            "spec.source.oci.verify.keyless.trustRoot: ConfigMap kcm-system/sigstore key trusted_root.json: \
             certificateAuthorities: lists none, so no certificate can chain to it"
        );
    }

    #[tokio::test]
    async fn keyless_rules_that_cannot_hold_are_named_by_their_field() {
        let (client, _) = mock_api::client(|_| None);
        let rules = |rules: serde_json::Value| {
            let mut keyless = json!({"trustRoot": {"name": "sigstore", "key": "root.json"}});
            keyless.as_object_mut().unwrap().extend(rules.as_object().unwrap().clone());
            plugin(json!({"keyless": keyless}))
        };
        let rule = |subject: serde_json::Value| json!({"issuer": "https://dex.acme.example", "subject": subject});
        let cases = [
            (json!({}), "spec.source.oci.verify.keyless: list the accepted identities in allOf, anyOf or both"),
            (
                json!({"allOf": [rule(json!({"equal": "a", "urlPrefix": "https://b"}))]}),
                "spec.source.oci.verify.keyless.allOf[0].subject: set exactly one of equal and urlPrefix",
            ),
            (
                json!({"anyOf": {"minimumMatches": 2, "signatures": [rule(json!({"equal": "a"}))]}}),
                "spec.source.oci.verify.keyless.anyOf.minimumMatches: 2 of 1 signatures can never match",
            ),
        ];
        for (spec, expected) in cases {
            let error = verify(&client, "kcm-system", &rules(spec), &fetched()).await.unwrap_err().to_string();
            assert_eq!(error, expected);
        }
    }
}
