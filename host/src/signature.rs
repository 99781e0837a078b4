//! Cosign signatures of plugin artifacts, in the format cosign stores them: under the tag
//! `sha256-<hex>.sig` of the artifact's repository, one layer per signature whose blob is a
//! simple-signing payload naming the signed manifest digest and whose annotation
//! `dev.cosignproject.cosign/signature` is the base64 signature over that blob. A key-based
//! signature (`cosign sign --key`) is checked against the operator's public keys; a keyless one
//! also carries its certificate, chain and Rekor entry, checked in [`keyless`] against the
//! operator's trust root and matched against the accepted identities of [`identity`].
//!
//! A signature is valid when it verifies **and** its payload names the digest being loaded: a
//! valid signature copied from another artifact's tag signs that artifact, not this one. The
//! payload's `docker-reference` is not compared: the digest names the content, wherever it was
//! pushed. Pure: the registry I/O is in [`crate::oci`].

pub mod identity;
pub mod keyless;
pub mod transparency;
pub mod trust_root;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sigstore::crypto::signing_key::SigStoreKeyPair;
use sigstore::crypto::{CosignVerificationKey, SigStoreSigner, Signature, SigningScheme};
use sigstore::errors::SigstoreError;
use std::collections::BTreeMap;

/// Media type of a signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a container image signature payload.
const SIGNATURE_TYPE: &str = "cosign container image signature";

/// A digest that is no sha256 manifest digest: no signature tag can name it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{digest:?} is not a sha256 manifest digest (sha256:<64 hex digits>)")]
pub struct NotADigest {
    /// The digest given.
    pub digest: String,
}

/// The tag cosign stores the signatures of manifest `digest` (`sha256:<hex>`) under:
/// `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Result<String, NotADigest> {
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(NotADigest { digest: digest.into() });
    }
    Ok(format!("sha256-{}.sig", hex.to_ascii_lowercase()))
}

/// One stored signature: its layer's blob and annotations, as the registry holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSignature {
    /// The simple-signing payload, the bytes that were signed.
    pub payload: Vec<u8>,
    /// The layer's annotations: the base64 signature and, keyless, the certificate, chain and
    /// Rekor bundle.
    pub annotations: BTreeMap<String, String>,
}

impl StoredSignature {
    /// The annotations cosign's signatures carry, and only those: what a layer holds besides
    /// is not read.
    pub const ANNOTATIONS: [&str; 4] =
        [SIGNATURE_ANNOTATION, keyless::CERTIFICATE_ANNOTATION, keyless::CHAIN_ANNOTATION, keyless::BUNDLE_ANNOTATION];

    fn signature(&self) -> Result<Vec<u8>, Rejected> {
        let malformed = |why: String| Rejected::Malformed(why);
        let encoded = self
            .annotations
            .get(SIGNATURE_ANNOTATION)
            .ok_or_else(|| malformed(format!("no annotation {SIGNATURE_ANNOTATION}")))?;
        base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| malformed(format!("the annotation {SIGNATURE_ANNOTATION} is not base64")))
    }

    fn is_keyless(&self) -> bool {
        self.annotations.contains_key(keyless::CERTIFICATE_ANNOTATION)
    }
}

/// The simple-signing payload; fields in the order cosign writes them.
#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    type_: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Why a key cannot be read, made or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Not a PEM public key. The parser's words are left out (its source): a key may come
    /// from a Secret, whose text never reaches a status.
    #[error("{origin}: not a PEM public key (cosign's ECDSA P-256 public key, as `plugin keygen` writes it)")]
    NotAPublicKey {
        /// Where the key was listed.
        origin: String,
        /// Why it does not read.
        #[source]
        source: SigstoreError,
    },
    /// Not a PEM private key (or, encrypted, not with this password).
    #[error("not a PEM private key{}: {source}", if *.encrypted { " (is the password right?)" } else { "" })]
    NotAPrivateKey {
        /// Whether it is encrypted.
        encrypted: bool,
        /// Why it does not read.
        source: SigstoreError,
    },
    /// A private key of another algorithm.
    #[error("only ECDSA P-256 keys (cosign's default) sign plugins: {0}")]
    NotP256(#[source] SigstoreError),
    /// A new key pair could not be made.
    #[error("{0}")]
    Generate(#[source] SigstoreError),
    /// The payload could not be signed.
    #[error("signing: {0}")]
    Sign(#[source] SigstoreError),
}

/// A public key the operator trusts, named by where it was listed (for messages).
pub struct TrustedKey {
    /// Where the key was listed, e.g. `spec.source.oci.verify.keys[0]` or a file.
    pub origin: String,
    key: CosignVerificationKey,
}

impl TrustedKey {
    /// The PEM public key (`-----BEGIN PUBLIC KEY-----`, as `cosign.pub`) listed at `origin`;
    /// the algorithm (ECDSA P-256 for cosign's keys) follows from the key.
    pub fn from_pem(origin: impl Into<String>, pem: &[u8]) -> Result<Self, KeyError> {
        let origin = origin.into();
        match CosignVerificationKey::try_from_pem(pem) {
            Ok(key) => Ok(Self { origin, key }),
            Err(source) => Err(KeyError::NotAPublicKey { origin, source }),
        }
    }
}

/// What the operator requires of a plugin's signatures (`spec.source.oci.verify`): a signature
/// by one of `keys` when it lists any, and keyless signatures satisfying the rules of `keyless`
/// when it is set; both when both are.
pub struct Policy {
    /// Public keys; a signature by any one is enough.
    pub keys: Vec<TrustedKey>,
    /// The trust root and the accepted identities.
    pub keyless: Option<keyless::Keyless>,
}

/// Why one stored signature does not count.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// Not a cosign signature.
    #[error("malformed: {0}")]
    Malformed(String),
    /// Verifies against none of the keys.
    #[error("signed by another key")]
    OtherKey,
    /// No certificate: a key-based signature, where keyless ones are asked for.
    #[error("signed with a key, not keyless (no {} annotation)", keyless::CERTIFICATE_ANNOTATION)]
    NotKeyless,
    /// A keyless signature that proves no signer.
    #[error(transparent)]
    Keyless(#[from] keyless::Refused),
    /// Verified, for another manifest.
    #[error("signed by {signer} for {signed}, another artifact (a signature copied from another digest's tag)")]
    OtherDigest {
        /// The key it verified against, or the identity of its certificate.
        signer: String,
        /// The digest its payload names.
        signed: String,
    },
}

/// Why an artifact is not verified.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// The digest is not a sha256 manifest digest: no signature tag can name it.
    #[error(transparent)]
    BadDigest(#[from] NotADigest),
    /// No signature tag, or one holding no signature layer.
    #[error("no signature: the repository has no tag {tag} holding a {SIMPLE_SIGNING_MEDIA_TYPE} layer")]
    Unsigned {
        /// The signature tag looked up.
        tag: String,
    },
    /// Signatures exist, none by a listed key.
    #[error("no valid signature under tag {tag} (checked against {keys} key(s)): {}", list(.rejected))]
    Rejected {
        /// The signature tag.
        tag: String,
        /// How many keys were tried.
        keys: usize,
        /// Each signature's problem, in layer order.
        rejected: Vec<Rejected>,
    },
    /// The keyless signatures do not satisfy the rules.
    #[error("the keyless signatures under tag {tag} do not satisfy spec.source.oci.verify.keyless: {why} ({})", .signatures.join("; "))]
    Keyless {
        /// The signature tag.
        tag: String,
        /// Which rules do not hold.
        why: String,
        /// Each signature: the identity it proves, or why it proves none.
        signatures: Vec<String>,
    },
}

fn list(rejected: &[Rejected]) -> String {
    let each: Vec<String> = rejected.iter().enumerate().map(|(i, r)| format!("signature {}: {r}", i + 1)).collect();
    each.join("; ")
}

/// What verified an artifact: the key that signed it (its origin), and each keyless rule with
/// the identity that matched it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified(pub Vec<String>);

impl std::fmt::Display for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

/// Checks the signatures stored for manifest `digest` against `policy` (`now` in Unix seconds,
/// for keyless signatures whose log is ignored): returns what verified it, or why nothing did.
/// `stored` is `None` when the signature tag does not exist.
pub fn verify(
    policy: &Policy,
    digest: &str,
    stored: Option<&[StoredSignature]>,
    now: i64,
) -> Result<Verified, Unverified> {
    let tag = signature_tag(digest)?;
    let stored = stored.unwrap_or_default();
    if stored.is_empty() {
        return Err(Unverified::Unsigned { tag });
    }
    let mut verified = Vec::new();
    if !policy.keys.is_empty() {
        let mut rejected = Vec::new();
        match stored.iter().find_map(|s| check_key(&policy.keys, digest, s).map_err(|why| rejected.push(why)).ok()) {
            Some(key) => verified.push(key.origin.clone()),
            None => return Err(Unverified::Rejected { tag, keys: policy.keys.len(), rejected }),
        }
    }
    if let Some(keyless) = &policy.keyless {
        let (mut signers, mut signatures) = (Vec::new(), Vec::new());
        for (i, stored) in stored.iter().enumerate() {
            match check_keyless(keyless, digest, stored, now) {
                Ok(signer) => {
                    signatures.push(format!("signature {}: {}", i + 1, identity::describe(&signer)));
                    signers.push(signer);
                }
                Err(why) => signatures.push(format!("signature {}: {why}", i + 1)),
            }
        }
        match keyless.rules.evaluate(&signers) {
            Ok(matched) => verified.extend(matched),
            Err(why) => return Err(Unverified::Keyless { tag, why, signatures }),
        }
    }
    Ok(Verified(verified))
}

/// One key-based signature: verified first (the payload is read only once a trusted key signed
/// it), then its payload must name `digest`.
fn check_key<'k>(keys: &'k [TrustedKey], digest: &str, stored: &StoredSignature) -> Result<&'k TrustedKey, Rejected> {
    let raw = stored.signature()?;
    let key = keys
        .iter()
        .find(|k| k.key.verify_signature(Signature::Raw(&raw), &stored.payload).is_ok())
        .ok_or(Rejected::OtherKey)?;
    signed_digest(&stored.payload, digest, || key.origin.clone())?;
    Ok(key)
}

/// One keyless signature: its certificate, log entry and chain verified first, then its
/// payload must name `digest`; returns the signer with the payload's annotations.
fn check_keyless(
    keyless: &keyless::Keyless,
    digest: &str,
    stored: &StoredSignature,
    now: i64,
) -> Result<identity::Signer, Rejected> {
    if !stored.is_keyless() {
        return Err(Rejected::NotKeyless);
    }
    let raw = stored.signature()?;
    let mut signer = keyless::check(keyless, &stored.annotations, &stored.payload, &raw, now)?;
    let payload = signed_digest(&stored.payload, digest, || identity::describe(&signer))?;
    signer.annotations = payload
        .optional
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)))
        .collect();
    Ok(signer)
}

/// The payload of a verified signature, when it is cosign's and names `digest`; `signer` names
/// who signed it otherwise.
fn signed_digest(payload: &[u8], digest: &str, signer: impl FnOnce() -> String) -> Result<Payload, Rejected> {
    let malformed = |why: String| Rejected::Malformed(why);
    let payload: Payload = serde_json::from_slice(payload)
        .map_err(|e| malformed(format!("the payload is not a simple-signing document: {e}")))?;
    if payload.critical.type_ != SIGNATURE_TYPE {
        return Err(malformed(format!("the payload's type is {:?}, not {SIGNATURE_TYPE:?}", payload.critical.type_)));
    }
    let signed = &payload.critical.image.docker_manifest_digest;
    if !signed.eq_ignore_ascii_case(digest) {
        return Err(Rejected::OtherDigest { signer: signer(), signed: signed.clone() });
    }
    Ok(payload)
}

/// A private key that signs plugin artifacts: ECDSA P-256, cosign's default.
pub struct SigningKey(SigStoreSigner);

impl SigningKey {
    /// Reads cosign's encrypted private key (`cosign.key`, decrypted with `password`) or an
    /// unencrypted PKCS#8 PEM private key.
    pub fn from_pem(pem: &[u8], password: &[u8]) -> Result<Self, KeyError> {
        let encrypted = String::from_utf8_lossy(pem).contains("-----BEGIN ENCRYPTED");
        let pair =
            if encrypted { SigStoreKeyPair::from_encrypted_pem(pem, password) } else { SigStoreKeyPair::from_pem(pem) }
                .map_err(|source| KeyError::NotAPrivateKey { encrypted, source })?;
        pair.to_sigstore_signer(&SigningScheme::ECDSA_P256_SHA256_ASN1).map(Self).map_err(KeyError::NotP256)
    }

    /// A new key pair: the private key encrypted with `password` in cosign's format
    /// (`cosign.key`), and the public key PEM (`cosign.pub`).
    pub fn generate(password: &[u8]) -> Result<(String, String), KeyError> {
        let signer = SigningScheme::ECDSA_P256_SHA256_ASN1.create_signer().map_err(KeyError::Generate)?;
        let pair = signer.to_sigstore_keypair().map_err(KeyError::Generate)?;
        let private = pair.private_key_to_encrypted_pem(password).map_err(KeyError::Generate)?;
        let public = pair.public_key_to_pem().map_err(KeyError::Generate)?;
        Ok((private.to_string(), public))
    }

    /// The signature of manifest `digest` of `repository` (`registry/repository`, the payload's
    /// `docker-reference`), with `annotations` in the payload (`cosign sign -a`), as cosign
    /// makes it.
    pub fn sign(
        &self,
        repository: &str,
        digest: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StoredSignature, KeyError> {
        let optional = (!annotations.is_empty())
            .then(|| annotations.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str()))).collect());
        let payload = Payload {
            critical: Critical {
                identity: Identity { docker_reference: repository.into() },
                image: Image { docker_manifest_digest: digest.into() },
                type_: SIGNATURE_TYPE.into(),
            },
            optional,
        };
        let payload = serde_json::to_vec(&payload).expect("a payload serializes");
        let raw = self.0.sign(&payload).map_err(KeyError::Sign)?;
        let signature = base64::engine::general_purpose::STANDARD.encode(raw);
        Ok(StoredSignature { payload, annotations: BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), signature)]) })
    }
}

/// Why a certificate cannot be attached to a signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The certificate (or chain) does not read.
    #[error("{what}: {why}")]
    Unreadable {
        /// Which file or annotation.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// The certificate is for another key than the one that signed.
    #[error("the certificate is for another key than the signing key")]
    OtherKey,
    /// The Rekor bundle logs something else.
    #[error("the Rekor bundle: {0}")]
    Bundle(String),
}

impl StoredSignature {
    /// Makes this key-based signature a keyless one, as `cosign sign --certificate
    /// --certificate-chain` (and `cosign attach signature --rekor-response`) store it: the leaf
    /// certificate for the signing key, its chain (intermediates, then the root) and, when the
    /// signature was logged, the Rekor bundle that logs exactly it.
    pub fn attach_certificate(
        &mut self,
        certificate: &str,
        chain: &str,
        bundle: Option<&str>,
    ) -> Result<(), AttachError> {
        let unreadable = |what, why: String| AttachError::Unreadable { what, why };
        let leaf =
            transparency::pem_certificates(certificate.as_bytes()).map_err(|e| unreadable("the certificate", e))?;
        let [leaf] = &leaf[..] else {
            return Err(unreadable("the certificate", "holds other than one certificate".into()));
        };
        transparency::pem_certificates(chain.as_bytes()).map_err(|e| unreadable("the certificate chain", e))?;
        let raw = self.signature().map_err(|e| unreadable("the signature", e.to_string()))?;
        if !keyless::signed_by_certificate(leaf, &self.payload, &raw) {
            return Err(AttachError::OtherKey);
        }
        if let Some(bundle) = bundle {
            transparency::logs_exactly(bundle, &self.payload, &raw, leaf).map_err(AttachError::Bundle)?;
            self.annotations.insert(keyless::BUNDLE_ANNOTATION.into(), bundle.into());
        }
        self.annotations.insert(keyless::CERTIFICATE_ANNOTATION.into(), certificate.into());
        self.annotations.insert(keyless::CHAIN_ANNOTATION.into(), chain.into());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OTHER: &str = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

    /// Two key pairs (generating one runs scrypt: once per test binary).
    static PAIRS: LazyLock<[(String, String); 2]> =
        LazyLock::new(|| [SigningKey::generate(b"pw").unwrap(), SigningKey::generate(b"").unwrap()]);

    fn signer(i: usize) -> SigningKey {
        let password: &[u8] = if i == 0 { b"pw" } else { b"" };
        SigningKey::from_pem(PAIRS[i].0.as_bytes(), password).unwrap()
    }

    fn trusted(i: usize) -> TrustedKey {
        TrustedKey::from_pem(format!("key {i}"), PAIRS[i].1.as_bytes()).unwrap()
    }

    fn signed(i: usize, digest: &str) -> StoredSignature {
        signer(i).sign("registry.example.com/ksm/argocd", digest, &BTreeMap::new()).unwrap()
    }

    /// `verify` with keys `keys` only: the key's origin when verified.
    fn verify_keys(keys: &[usize], digest: &str, stored: Option<&[StoredSignature]>) -> Result<String, Unverified> {
        let policy = Policy { keys: keys.iter().map(|&i| trusted(i)).collect(), keyless: None };
        verify(&policy, digest, stored, 0).map(|v| v.to_string())
    }

    #[test]
    fn the_signature_tag_is_cosigns() {
        assert!(matches!(verify_keys(&[0], "sha512:00", None), Err(Unverified::BadDigest(_))));
        assert_eq!(signature_tag(DIGEST).unwrap(), format!("sha256-{}.sig", &DIGEST[7..]));
        for bad in [
            "sha256:abc",
            "sha512:00",
            &DIGEST[7..],
            "sha256:zz23456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(signature_tag(bad).unwrap_err().to_string().contains("not a sha256 manifest digest"), "{bad}");
        }
    }

    #[test]
    fn the_payload_is_the_simple_signing_document_cosign_writes() {
        let payload = String::from_utf8(signed(1, DIGEST).payload).unwrap();
        assert_eq!(
            payload,
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"registry.example.com/ksm/argocd"}},"image":{{"docker-manifest-digest":"{DIGEST}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
    }

    #[test]
    fn a_signature_by_a_listed_key_for_this_digest_verifies() {
        let stored = [signed(1, OTHER), signed(0, DIGEST)];
        assert_eq!(verify_keys(&[1, 0], DIGEST, Some(&stored)), Ok("key 0".into()), "any valid signature is enough");
        let upper = DIGEST.to_uppercase().replace("SHA256", "sha256");
        assert_eq!(verify_keys(&[1, 0], &upper, Some(&stored)), Ok("key 0".into()));
    }

    #[test]
    fn no_tag_or_no_layer_is_unsigned() {
        let unsigned = Unverified::Unsigned { tag: signature_tag(DIGEST).unwrap() };
        assert_eq!(verify_keys(&[0], DIGEST, None), Err(unsigned.clone()));
        assert_eq!(verify_keys(&[0], DIGEST, Some(&[])), Err(unsigned.clone()));
        assert!(unsigned.to_string().starts_with("no signature: the repository has no tag sha256-0123"), "{unsigned}");
    }

    #[test]
    fn a_signature_by_another_key_is_rejected() {
        let error = verify_keys(&[0], DIGEST, Some(&[signed(1, DIGEST)])).unwrap_err();
        assert_eq!(
            error,
            Unverified::Rejected { tag: signature_tag(DIGEST).unwrap(), keys: 1, rejected: vec![Rejected::OtherKey] }
        );
        assert!(
            error.to_string().ends_with("(checked against 1 key(s)): signature 1: signed by another key"),
            "{error}"
        );
    }

    #[test]
    fn a_signature_for_another_digest_is_rejected_naming_that_digest() {
        let error = verify_keys(&[0], DIGEST, Some(&[signed(0, OTHER)])).unwrap_err();
        let Unverified::Rejected { rejected, .. } = &error else { panic!("{error}") };
        assert_eq!(rejected, &[Rejected::OtherDigest { signer: "key 0".into(), signed: OTHER.into() }]);
        assert!(error.to_string().contains(&format!("signed by key 0 for {OTHER}, another artifact")), "{error}");
    }

    #[test]
    fn a_tampered_payload_no_longer_verifies() {
        let mut stored = signed(0, OTHER);
        stored.payload = String::from_utf8(stored.payload).unwrap().replace(OTHER, DIGEST).into_bytes();
        let error = verify_keys(&[0], DIGEST, Some(&[stored])).unwrap_err();
        assert!(
            matches!(&error, Unverified::Rejected { rejected, .. } if rejected == &[Rejected::OtherKey]),
            "{error}"
        );
    }

    #[test]
    fn malformed_signatures_say_what_is_wrong() {
        let good = signed(0, DIGEST);
        let without_annotation = StoredSignature { annotations: BTreeMap::new(), ..good.clone() };
        let annotated = |signature: String| BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), signature)]);
        let bad_base64 = StoredSignature { annotations: annotated("not base64!".into()), ..good.clone() };
        // Signed by the key, but not a payload: only then is it read.
        let sign_bytes = |payload: &[u8]| StoredSignature {
            payload: payload.to_vec(),
            annotations: annotated(
                base64::engine::general_purpose::STANDARD.encode(signer(0).0.sign(payload).unwrap()),
            ),
        };
        let not_json = sign_bytes(b"not json");
        let other_type =
            sign_bytes(String::from_utf8(good.payload.clone()).unwrap().replace("container image", "other").as_bytes());
        let cases = [
            (without_annotation, "no annotation dev.cosignproject.cosign/signature"),
            (bad_base64, "is not base64"),
            (not_json, "the payload is not a simple-signing document"),
            (other_type, "the payload's type is \"cosign other signature\""),
        ];
        for (stored, expected) in cases {
            let error = verify_keys(&[0], DIGEST, Some(&[stored])).unwrap_err();
            let Unverified::Rejected { rejected, .. } = &error else { panic!("{error}") };
            assert!(matches!(&rejected[..], [Rejected::Malformed(m)] if m.contains(expected)), "{expected}: {error}");
        }
    }

    #[test]
    fn keys_that_are_not_pem_public_keys_are_named() {
        let error =
            TrustedKey::from_pem("spec.source.oci.verify.keys[1].publicKey", b"nope").err().unwrap().to_string();
        assert!(error.starts_with("spec.source.oci.verify.keys[1].publicKey: not a PEM public key"), "{error}");
        let private = TrustedKey::from_pem("k", PAIRS[1].0.as_bytes()).err().unwrap().to_string();
        assert!(private.starts_with("k: not a PEM public key"), "{private}");
    }

    #[test]
    fn a_private_key_needs_its_password() {
        let error = SigningKey::from_pem(PAIRS[0].0.as_bytes(), b"wrong").err().unwrap().to_string();
        assert!(error.contains("is the password right?"), "{error}");
        assert!(SigningKey::from_pem(PAIRS[0].1.as_bytes(), b"").is_err(), "a public key does not sign");
    }
}
