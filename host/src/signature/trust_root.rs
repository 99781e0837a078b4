//! The operator's Sigstore trust root, read from the JSON Sigstore clients are configured with:
//! a `trusted_root.json` (`application/vnd.dev.sigstore.trustedroot+json`) or a ClientTrustConfig
//! holding one under `trustedRoot` (Kubewarden's `sigstoreTrustConfig`). Nothing is fetched: what
//! the operator wrote is all that is trusted. Timestamp authorities are read but not used (a
//! signing time is proven by a transparency log only; see docs/plugins.md).

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sigstore::crypto::CosignVerificationKey;

/// What the operator trusts: certificate authorities, transparency logs (Rekor) and certificate
/// transparency logs, each for the time window it was valid for.
pub struct TrustRoot {
    /// Certificate authorities (Fulcio, or a corporate CA).
    pub authorities: Vec<Authority>,
    /// Rekor logs: their keys sign the entries' signed timestamps.
    pub tlogs: Vec<Log>,
    /// CT logs: their keys sign the certificates' embedded SCTs.
    pub ctlogs: Vec<Log>,
}

/// One certificate authority: its chain, DER, the issuing certificate first and the root last.
pub struct Authority {
    /// Where it is listed, e.g. `certificateAuthorities[0]`, with its URI when given.
    pub name: String,
    /// The chain; the last certificate is the trust anchor.
    pub chain: Vec<Vec<u8>>,
    /// When a certificate it issued may have been used.
    pub valid: Window,
}

/// One log and the key its statements are signed with.
pub struct Log {
    /// Where it is listed, e.g. `tlogs[0]`, with its base URL when given.
    pub name: String,
    /// The log's id: the SHA-256 of its public key (DER).
    pub id: [u8; 32],
    /// Its public key.
    pub key: CosignVerificationKey,
    /// When its key was in use.
    pub valid: Window,
}

/// A time window in Unix seconds; an open end is unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// The first second, if bounded.
    pub start: Option<i64>,
    /// The last second, if bounded.
    pub end: Option<i64>,
}

impl Window {
    /// Whether `at` (Unix seconds) lies in the window.
    pub fn contains(&self, at: i64) -> bool {
        self.start.is_none_or(|s| s <= at) && self.end.is_none_or(|e| at <= e)
    }
}

/// A Unix time, RFC 3339.
pub fn shown(at: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(at).map(|t| t.to_string()).unwrap_or_else(|_| at.to_string())
}

/// Why a trust root cannot be used, naming the field. The document is the operator's, but its
/// parser's words are left out anyway: they may quote what was read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustRootError {
    /// Not JSON of the expected shape.
    #[error("not a Sigstore trusted_root.json or ClientTrustConfig (JSON, line {line} column {column})")]
    Shape {
        /// Where the parser stopped.
        line: usize,
        /// Where the parser stopped.
        column: usize,
    },
    /// A field that does not read.
    #[error("{field}: {why}")]
    Field {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        why: String,
    },
    /// No certificate authority: no keyless signature could ever verify.
    #[error("certificateAuthorities: lists none, so no certificate can chain to it")]
    NoAuthority,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientTrustConfig {
    trusted_root: Document,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    tlogs: Vec<LogDocument>,
    #[serde(default)]
    certificate_authorities: Vec<AuthorityDocument>,
    #[serde(default)]
    ctlogs: Vec<LogDocument>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogDocument {
    base_url: Option<String>,
    public_key: PublicKeyDocument,
    log_id: Option<LogIdDocument>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PublicKeyDocument {
    raw_bytes: String,
    valid_for: Option<WindowDocument>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogIdDocument {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthorityDocument {
    uri: Option<String>,
    cert_chain: ChainDocument,
    valid_for: Option<WindowDocument>,
}

#[derive(Deserialize)]
struct ChainDocument {
    certificates: Vec<RawBytes>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytes {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct WindowDocument {
    start: Option<String>,
    end: Option<String>,
}

impl TrustRoot {
    /// Reads a `trusted_root.json`, or a ClientTrustConfig holding one under `trustedRoot`.
    pub fn from_json(json: &[u8]) -> Result<Self, TrustRootError> {
        let shape = |e: serde_json::Error| TrustRootError::Shape { line: e.line(), column: e.column() };
        let value: serde_json::Value = serde_json::from_slice(json).map_err(shape)?;
        let document: Document = if value.get("trustedRoot").is_some() {
            serde_json::from_value::<ClientTrustConfig>(value).map(|c| c.trusted_root)
        } else {
            serde_json::from_value(value)
        }
        .map_err(|e| TrustRootError::Field { field: "trustedRoot".into(), why: schema_error(&e) })?;
        let authorities = document
            .certificate_authorities
            .iter()
            .enumerate()
            .map(|(i, a)| authority(i, a))
            .collect::<Result<Vec<_>, _>>()?;
        if authorities.is_empty() {
            return Err(TrustRootError::NoAuthority);
        }
        let logs = |list: &[LogDocument], kind: &str| -> Result<Vec<Log>, TrustRootError> {
            list.iter().enumerate().map(|(i, l)| log(&format!("{kind}[{i}]"), l)).collect()
        };
        Ok(Self { authorities, tlogs: logs(&document.tlogs, "tlogs")?, ctlogs: logs(&document.ctlogs, "ctlogs")? })
    }
}

/// A serde error's words without the value it quotes: only the shape it expected.
fn schema_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let shape = text.split(" at line ").next().unwrap_or_default();
    match shape.find(": ") {
        Some(_) if shape.starts_with("invalid type") => "a field has the wrong type".into(),
        _ if shape.starts_with("missing field") => shape.into(),
        _ => "does not have the documented shape".into(),
    }
}

fn authority(i: usize, document: &AuthorityDocument) -> Result<Authority, TrustRootError> {
    let field = format!("certificateAuthorities[{i}]");
    let chain = document
        .cert_chain
        .certificates
        .iter()
        .enumerate()
        .map(|(j, c)| base64(&format!("{field}.certChain.certificates[{j}].rawBytes"), &c.raw_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    if chain.is_empty() {
        return Err(TrustRootError::Field { field: format!("{field}.certChain"), why: "lists no certificate".into() });
    }
    let valid = window(&format!("{field}.validFor"), document.valid_for.as_ref())?;
    Ok(Authority { name: named(field, document.uri.as_deref()), chain, valid })
}

fn log(field: &str, document: &LogDocument) -> Result<Log, TrustRootError> {
    let der = base64(&format!("{field}.publicKey.rawBytes"), &document.public_key.raw_bytes)?;
    let key = CosignVerificationKey::try_from_der(&der).map_err(|_| TrustRootError::Field {
        field: format!("{field}.publicKey.rawBytes"),
        why: "not a DER public key (ECDSA, Ed25519 or RSA)".into(),
    })?;
    let computed: [u8; 32] = Sha256::digest(&der).into();
    if let Some(given) = &document.log_id {
        let given = base64(&format!("{field}.logId.keyId"), &given.key_id)?;
        if given != computed {
            let why = "is not the SHA-256 of publicKey.rawBytes, as a log's id is".into();
            return Err(TrustRootError::Field { field: format!("{field}.logId.keyId"), why });
        }
    }
    let valid = window(&format!("{field}.publicKey.validFor"), document.public_key.valid_for.as_ref())?;
    Ok(Log { name: named(field.into(), document.base_url.as_deref()), id: computed, key, valid })
}

fn named(field: String, location: Option<&str>) -> String {
    match location {
        Some(location) if !location.is_empty() => format!("{field} ({location})"),
        _ => field,
    }
}

fn base64(field: &str, text: &str) -> Result<Vec<u8>, TrustRootError> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| TrustRootError::Field { field: field.into(), why: "not base64".into() })
}

fn window(field: &str, document: Option<&WindowDocument>) -> Result<Window, TrustRootError> {
    let Some(document) = document else { return Ok(Window::default()) };
    let at = |end: &str, text: &Option<String>| -> Result<Option<i64>, TrustRootError> {
        text.as_deref()
            .map(|t| {
                t.parse::<k8s_openapi::jiff::Timestamp>().map(|t| t.as_second()).map_err(|_| TrustRootError::Field {
                    field: format!("{field}.{end}"),
                    why: "not an RFC 3339 time".into(),
                })
            })
            .transpose()
    };
    Ok(Window { start: at("start", &document.start)?, end: at("end", &document.end)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksm_test_harness::pki::Pki;
    use serde_json::json;

    #[test]
    fn a_trusted_root_and_a_client_trust_config_read_alike() {
        let pki = Pki::new();
        let root = pki.trusted_root();
        let direct = TrustRoot::from_json(root.to_string().as_bytes()).unwrap();
        let config = json!({"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
            "trustedRoot": root, "signingConfig": {}});
        let wrapped = TrustRoot::from_json(config.to_string().as_bytes()).unwrap();
        for read in [&direct, &wrapped] {
            assert_eq!(read.authorities.len(), 1);
            assert_eq!(read.authorities[0].chain.len(), 2, "intermediate, then root");
            assert_eq!((read.tlogs.len(), read.ctlogs.len()), (1, 1));
            assert!(read.authorities[0].valid.contains(pki.now) && !read.authorities[0].valid.contains(0));
        }
        assert_eq!(direct.tlogs[0].id, wrapped.tlogs[0].id);
    }

    #[test]
    fn what_does_not_read_is_named_by_its_field() {
        let pki = Pki::new();
        let with = |pointer: &str, value: serde_json::Value| {
            let mut root = pki.trusted_root();
            *root.pointer_mut(pointer).unwrap() = value;
            TrustRoot::from_json(root.to_string().as_bytes()).err().unwrap().to_string()
        };
        let cases = [
            (
                "/certificateAuthorities/0/certChain/certificates/1/rawBytes",
                json!("!!"),
                "certificateAuthorities[0].certChain.certificates[1].rawBytes: not base64",
            ),
            (
                "/tlogs/0/publicKey/rawBytes",
                json!("AAAA"),
                "tlogs[0].publicKey.rawBytes: not a DER public key (ECDSA, Ed25519 or RSA)",
            ),
            (
                "/ctlogs/0/logId/keyId",
                json!("AAAA"),
                "ctlogs[0].logId.keyId: is not the SHA-256 of publicKey.rawBytes, as a log's id is",
            ),
            (
                "/certificateAuthorities/0/validFor/start",
                json!("yesterday"),
                "certificateAuthorities[0].validFor.start: not an RFC 3339 time",
            ),
            (
                "/certificateAuthorities",
                json!([]),
                "certificateAuthorities: lists none, so no certificate can chain to it",
            ),
        ];
        for (pointer, value, expected) in cases {
            assert_eq!(with(pointer, value), expected);
        }
        let error = TrustRoot::from_json(b"{\"secret\": ").err().unwrap().to_string();
        assert!(error.starts_with("not a Sigstore trusted_root.json or ClientTrustConfig (JSON, line 1"), "{error}");
    }
}
