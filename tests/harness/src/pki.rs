//! A private Sigstore: a root and an intermediate CA, Fulcio-style leaf certificates for an
//! identity (the issuer extension, the CodeSigning EKU, an embedded SCT from a CT log), and
//! Rekor-style signed entry timestamps, all under keys the test owns; and the `trusted_root.json`
//! that pins them. Keys are derived from names, so every run builds the same certificates.
//! cosign's keyless layout is produced as cosign writes it: what the host reads from a registry.

use base64::Engine as _;
use p256::ecdsa::{DerSignature, SigningKey, signature::Signer};
use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::str::FromStr;
use std::time::Duration;
use tls_codec::TlsByteVecU16;
use x509_cert::der::asn1::{BitString, GeneralizedTime, Ia5String, OctetString, Utf8StringRef};
use x509_cert::der::oid::AssociatedOid;
use x509_cert::der::{Decode, Encode, pem::LineEnding as PemLineEnding};
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::sct::{
    DigitallySigned, HashAlgorithm, LogId, SerializedSct, SignatureAlgorithm, SignatureAndHashAlgorithm,
    SignedCertificateTimestamp, SignedCertificateTimestampList, Version as SctVersion,
};
use x509_cert::ext::pkix::{BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName};
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{AlgorithmIdentifierOwned, ObjectIdentifier, SubjectPublicKeyInfoOwned};
use x509_cert::time::{Time, Validity};
use x509_cert::{Certificate, TbsCertificate};

const ECDSA_WITH_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const CODE_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
const SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");
/// Fulcio's OIDC issuer extension, v1 (the raw string) and v2 (a DER UTF8String).
const ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
const ISSUER_V2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
const SCT_LIST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");
const YEAR: i64 = 365 * 24 * 3600;

/// One private Sigstore: its CAs and logs, named by `name` (two names, two unrelated roots).
pub struct Pki {
    /// The time the certificates are made around, Unix seconds.
    pub now: i64,
    root_der: Vec<u8>,
    intermediate: SigningKey,
    intermediate_der: Vec<u8>,
    rekor: SigningKey,
    ct: SigningKey,
}

/// What a leaf certificate says.
#[derive(Clone, Debug)]
pub struct LeafSpec {
    /// The SAN: a URI, or an email when it has an `@` and no `:`.
    pub subject: String,
    /// The OIDC issuer, in the v2 extension (.1.8) or, with `issuer_v1`, the v1 one (.1.1).
    pub issuer: String,
    /// Whether the issuer is in the v1 extension.
    pub issuer_v1: bool,
    /// Validity, relative to `now`, in seconds.
    pub not_before: i64,
    /// Validity, relative to `now`, in seconds.
    pub not_after: i64,
    /// Whose CT log signs the embedded SCT (`None`: no SCT).
    pub sct_by: Option<&'static str>,
    /// The CodeSigning EKU (else ServerAuth).
    pub code_signing: bool,
}

impl LeafSpec {
    /// A leaf for `subject` from `issuer`, valid ten minutes from `now`, with an SCT of its
    /// own CA's log: what Fulcio issues.
    pub fn new(subject: &str, issuer: &str) -> Self {
        Self {
            subject: subject.into(),
            issuer: issuer.into(),
            issuer_v1: false,
            not_before: -60,
            not_after: 540,
            sct_by: Some("own"),
            code_signing: true,
        }
    }
}

/// A leaf certificate and its key.
pub struct Leaf {
    /// The key the certificate is for.
    pub key: SigningKey,
    /// The certificate, DER.
    pub der: Vec<u8>,
}

impl Leaf {
    /// The certificate, PEM.
    pub fn pem(&self) -> String {
        pem("CERTIFICATE", &self.der)
    }

    /// The private key, unencrypted PKCS#8 PEM (what `plugin sign --key` reads).
    pub fn key_pem(&self) -> String {
        self.key.to_pkcs8_pem(LineEnding::LF).expect("a key encodes").to_string()
    }

    /// The base64 DER ECDSA signature of `bytes`, as cosign's annotation holds it (RFC 6979:
    /// the same bytes give the same signature).
    pub fn sign(&self, bytes: &[u8]) -> String {
        let signature: DerSignature = self.key.sign(bytes);
        b64(signature.as_bytes())
    }
}

fn key(name: &str) -> SigningKey {
    SigningKey::from_slice(&Sha256::digest(name.as_bytes())).expect("a hash is a valid P-256 scalar")
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn pem(label: &str, der: &[u8]) -> String {
    x509_cert::der::pem::encode_string(label, PemLineEnding::LF, der).expect("PEM encodes")
}

fn spki(key: &SigningKey) -> SubjectPublicKeyInfoOwned {
    let der = key.verifying_key().to_public_key_der().expect("a key encodes");
    SubjectPublicKeyInfoOwned::from_der(der.as_bytes()).expect("an SPKI decodes")
}

fn spki_der(key: &SigningKey) -> Vec<u8> {
    key.verifying_key().to_public_key_der().expect("a key encodes").as_bytes().to_vec()
}

fn time(at: i64) -> Time {
    let at = Duration::from_secs(at.try_into().expect("a time after 1970"));
    Time::GeneralTime(GeneralizedTime::from_unix_duration(at).expect("a representable time"))
}

fn extension(oid: ObjectIdentifier, critical: bool, value: &impl Encode) -> Extension {
    let value = value.to_der().expect("an extension encodes");
    Extension { extn_id: oid, critical, extn_value: OctetString::new(value).expect("an octet string") }
}

fn rfc3339(at: i64) -> String {
    let at = x509_cert::der::DateTime::from_unix_duration(Duration::from_secs(at as u64)).expect("a time");
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minutes(),
        at.seconds()
    )
}

/// The TBS certificate `issuer` (named `issuer_name`) signs.
fn sign_tbs(tbs: TbsCertificate, issuer: &SigningKey) -> Vec<u8> {
    let signature: DerSignature = issuer.sign(&tbs.to_der().expect("a TBS encodes"));
    let certificate = Certificate {
        tbs_certificate: tbs,
        signature_algorithm: AlgorithmIdentifierOwned { oid: ECDSA_WITH_SHA256, parameters: None },
        signature: BitString::from_bytes(signature.as_bytes()).expect("a bit string"),
    };
    certificate.to_der().expect("a certificate encodes")
}

fn tbs(
    serial: u32,
    issuer: &Name,
    subject: Name,
    window: (i64, i64),
    key: &SigningKey,
    extensions: Vec<Extension>,
) -> TbsCertificate {
    TbsCertificate {
        version: x509_cert::Version::V3,
        serial_number: SerialNumber::from(serial),
        signature: AlgorithmIdentifierOwned { oid: ECDSA_WITH_SHA256, parameters: None },
        issuer: issuer.clone(),
        validity: Validity { not_before: time(window.0), not_after: time(window.1) },
        subject,
        subject_public_key_info: spki(key),
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(extensions),
    }
}

fn ca_extensions(path_len: Option<u8>) -> Vec<Extension> {
    vec![
        extension(
            <BasicConstraints as AssociatedOid>::OID,
            true,
            &BasicConstraints { ca: true, path_len_constraint: path_len },
        ),
        extension(<KeyUsage as AssociatedOid>::OID, true, &KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign)),
    ]
}

impl Pki {
    /// The private Sigstore called `name`, its certificates valid from a year ago for ten years.
    pub fn named(name: &str) -> Self {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
        let now = i64::try_from(now).expect("a time");
        let (root, intermediate) = (key(&format!("{name} root")), key(&format!("{name} intermediate")));
        let root_name = Name::from_str(&format!("CN={name} root,O=ksm tests")).expect("a name");
        let intermediate_name = Name::from_str(&format!("CN={name} intermediate,O=ksm tests")).expect("a name");
        let window = (now - YEAR, now + 10 * YEAR);
        let root_der = sign_tbs(tbs(1, &root_name, root_name.clone(), window, &root, ca_extensions(None)), &root);
        let intermediate_der =
            sign_tbs(tbs(2, &root_name, intermediate_name, window, &intermediate, ca_extensions(Some(0))), &root);
        Self {
            now,
            root_der,
            intermediate,
            intermediate_der,
            rekor: key(&format!("{name} rekor")),
            ct: key(&format!("{name} ct")),
        }
    }

    /// The tests' usual private Sigstore.
    pub fn new() -> Self {
        Self::named("ours")
    }

    /// The root certificate, DER.
    pub fn root_der(&self) -> &[u8] {
        &self.root_der
    }

    /// The chain cosign's `dev.sigstore.cosign/chain` annotation holds: intermediate, then root.
    pub fn chain_pem(&self) -> String {
        pem("CERTIFICATE", &self.intermediate_der) + &pem("CERTIFICATE", &self.root_der)
    }

    /// The `trusted_root.json` pinning this Sigstore: its CA chain (intermediate, then root),
    /// its Rekor key and its CT log key, valid from a year ago on.
    pub fn trusted_root(&self) -> Value {
        let start = rfc3339(self.now - YEAR);
        let log = |key: &SigningKey, url: &str| {
            let der = spki_der(key);
            json!({
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {"rawBytes": b64(&der), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": {"start": start}},
                "logId": {"keyId": b64(&Sha256::digest(&der))},
            })
        };
        json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(&self.rekor, "https://rekor.ksm.test")],
            "certificateAuthorities": [{
                "subject": {"organization": "ksm tests", "commonName": "root"},
                "uri": "https://fulcio.ksm.test",
                "certChain": {"certificates": [{"rawBytes": b64(&self.intermediate_der)}, {"rawBytes": b64(&self.root_der)}]},
                "validFor": {"start": start},
            }],
            "ctlogs": [log(&self.ct, "https://ctfe.ksm.test")],
            "timestampAuthorities": [],
        })
    }

    /// A leaf certificate the intermediate issues, as `spec` says; a fresh key per subject.
    pub fn leaf(&self, spec: &LeafSpec) -> Leaf {
        let key = key(&format!("leaf {} {} {}", spec.subject, spec.issuer, spec.not_before));
        let issuer_name = Certificate::from_der(&self.intermediate_der).expect("a certificate").tbs_certificate.subject;
        let san = if spec.subject.contains('@') && !spec.subject.contains(':') {
            GeneralName::Rfc822Name(Ia5String::new(&spec.subject).expect("an IA5 email"))
        } else {
            GeneralName::UniformResourceIdentifier(Ia5String::new(&spec.subject).expect("an IA5 URI"))
        };
        let eku = if spec.code_signing { CODE_SIGNING } else { SERVER_AUTH };
        let issuer_extension = if spec.issuer_v1 {
            Extension {
                extn_id: ISSUER_V1,
                critical: false,
                extn_value: OctetString::new(spec.issuer.as_bytes()).expect("an octet string"),
            }
        } else {
            extension(ISSUER_V2, false, &Utf8StringRef::new(&spec.issuer).expect("UTF-8"))
        };
        let mut extensions = vec![
            extension(<KeyUsage as AssociatedOid>::OID, true, &KeyUsage(KeyUsages::DigitalSignature.into())),
            extension(<ExtendedKeyUsage as AssociatedOid>::OID, false, &ExtendedKeyUsage(vec![eku])),
            extension(<SubjectAltName as AssociatedOid>::OID, true, &SubjectAltName(vec![san])),
            issuer_extension,
        ];
        let window = (self.now + spec.not_before, self.now + spec.not_after);
        let serial = u32::from_be_bytes(Sha256::digest(spki_der(&key))[..4].try_into().expect("4 bytes")) >> 1;
        let precert = tbs(serial, &issuer_name, Name::default(), window, &key, extensions.clone());
        if let Some(by) = spec.sct_by {
            let ct = if by == "own" { self.ct.clone() } else { Pki::named(by).ct };
            let sct = self.sct(&ct, &precert, (self.now + spec.not_before + 1) as u64 * 1000);
            extensions.push(extension(SCT_LIST, false, &sct));
        }
        let der = sign_tbs(tbs(serial, &issuer_name, Name::default(), window, &key, extensions), &self.intermediate);
        Leaf { key, der }
    }

    /// An SCT list holding one SCT by `ct` for the precertificate `precert` (issued by the
    /// intermediate), as RFC 6962 §3.2 signs it.
    fn sct(&self, ct: &SigningKey, precert: &TbsCertificate, timestamp: u64) -> SignedCertificateTimestampList {
        let tbs = precert.to_der().expect("a TBS encodes");
        let issuer_key_hash = Sha256::digest(spki_der(&self.intermediate));
        let mut signed = vec![0u8, 0u8];
        signed.extend(timestamp.to_be_bytes());
        signed.extend([0u8, 1u8]);
        signed.extend(issuer_key_hash);
        signed.extend(&(tbs.len() as u32).to_be_bytes()[1..]);
        signed.extend(&tbs);
        signed.extend([0u8, 0u8]);
        let signature: DerSignature = ct.sign(&signed);
        let sct = SignedCertificateTimestamp {
            version: SctVersion::V1,
            log_id: LogId { key_id: Sha256::digest(spki_der(ct)).into() },
            timestamp,
            extensions: TlsByteVecU16::new(vec![]),
            signature: DigitallySigned {
                algorithm: SignatureAndHashAlgorithm {
                    hash: HashAlgorithm::Sha256,
                    signature: SignatureAlgorithm::Ecdsa,
                },
                signature: TlsByteVecU16::new(signature.as_bytes().to_vec()),
            },
        };
        let serialized = SerializedSct::new(sct).expect("an SCT serializes");
        SignedCertificateTimestampList::new(&[serialized]).expect("an SCT list")
    }

    /// The Rekor bundle (`dev.sigstore.cosign/bundle`) this Sigstore's log gives a
    /// `hashedrekord` entry of `signature` (base64) over `payload` by `leaf`, integrated at
    /// `integrated_time`: the entry's body and its signed entry timestamp.
    pub fn bundle(&self, leaf: &Leaf, payload: &[u8], signature: &str, integrated_time: i64) -> String {
        let body = json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": hex(&Sha256::digest(payload))}},
                "signature": {"content": signature, "publicKey": {"content": b64(leaf.pem().as_bytes())}},
            },
        });
        let body = b64(body.to_string().as_bytes());
        let log_id = hex(&Sha256::digest(spki_der(&self.rekor)));
        let canonical =
            format!(r#"{{"body":"{body}","integratedTime":{integrated_time},"logID":"{log_id}","logIndex":7}}"#);
        let set: DerSignature = self.rekor.sign(canonical.as_bytes());
        json!({
            "SignedEntryTimestamp": b64(set.as_bytes()),
            "Payload": {"body": body, "integratedTime": integrated_time, "logIndex": 7, "logID": log_id},
        })
        .to_string()
    }

    /// cosign's keyless signature of `payload` by `leaf`: the layer annotations
    /// (`dev.cosignproject.cosign/signature`, `dev.sigstore.cosign/certificate`, `/chain` and,
    /// when logged at `logged_at`, `/bundle`).
    pub fn annotations(&self, leaf: &Leaf, payload: &[u8], logged_at: Option<i64>) -> Vec<(String, String)> {
        let signature = leaf.sign(payload);
        let mut annotations = vec![
            ("dev.sigstore.cosign/certificate".to_string(), leaf.pem()),
            ("dev.sigstore.cosign/chain".to_string(), self.chain_pem()),
        ];
        if let Some(at) = logged_at {
            annotations.push(("dev.sigstore.cosign/bundle".into(), self.bundle(leaf, payload, &signature, at)));
        }
        annotations.push(("dev.cosignproject.cosign/signature".into(), signature));
        annotations
    }
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// cosign's simple-signing payload for manifest `digest` of `repository`, byte for byte as
/// cosign (and `plugin sign`) writes it.
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{repository}"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_name_builds_the_same_sigstore() {
        assert_eq!(Pki::named("a").root_der(), Pki::named("a").root_der());
        assert_ne!(Pki::named("a").root_der(), Pki::named("b").root_der());
    }
}
