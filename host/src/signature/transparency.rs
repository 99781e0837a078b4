//! The two transparency proofs of a keyless signature, checked offline against the keys of the
//! operator's trust root: the Rekor entry's signed entry timestamp (SET), which proves *when*
//! the signature was made and that it was logged, and the certificate's embedded SCT, which
//! proves the certificate was logged by a CT log (RFC 6962).

use super::trust_root::{Log, shown};
use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sigstore::crypto::Signature;
use x509_cert::Certificate;
use x509_cert::der::Encode;
use x509_cert::der::oid::AssociatedOid;
use x509_cert::ext::pkix::sct::{SignedCertificateTimestampList, Version};

/// cosign's `dev.sigstore.cosign/bundle`: a Rekor entry and its SET.
#[derive(Deserialize)]
struct Bundle {
    #[serde(rename = "SignedEntryTimestamp")]
    signed_entry_timestamp: String,
    #[serde(rename = "Payload")]
    payload: BundlePayload,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BundlePayload {
    body: String,
    integrated_time: i64,
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

/// A `hashedrekord` entry's body: what was logged.
#[derive(Deserialize)]
struct Entry {
    kind: String,
    spec: EntrySpec,
}

#[derive(Deserialize)]
struct EntrySpec {
    data: EntryData,
    signature: EntrySignature,
}

#[derive(Deserialize)]
struct EntryData {
    hash: EntryHash,
}

#[derive(Deserialize)]
struct EntryHash {
    algorithm: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntrySignature {
    content: String,
    public_key: EntryKey,
}

#[derive(Deserialize)]
struct EntryKey {
    content: String,
}

/// What a verified Rekor entry proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// When the log integrated the entry, Unix seconds: the signing time.
    pub at: i64,
    /// The log, as the trust root names it.
    pub log: String,
}

fn b64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text.trim()).ok()
}

/// Checks that `bundle` is an entry of one of `tlogs`, signed by its key while the key was
/// valid, logging exactly this `signature` over `payload` by certificate `leaf_der`. Returns
/// when it was logged, or why not (a message naming what does not hold).
pub fn check_bundle(
    tlogs: &[Log],
    bundle: &str,
    payload: &[u8],
    signature: &[u8],
    leaf_der: &[u8],
) -> Result<Logged, String> {
    let bundle = read(bundle)?;
    let entry = &bundle.payload;
    let id = hex::decode(&entry.log_id).map_err(|_| "the Rekor bundle's logID is not hex".to_string())?;
    let log = tlogs
        .iter()
        .find(|l| l.id[..] == id[..])
        .ok_or_else(|| format!("the Rekor entry is from log {}, which the trust root does not list", entry.log_id))?;
    // The SET signs the canonical JSON of the entry (keys sorted, no spaces), as Rekor does.
    let canonical = format!(
        r#"{{"body":{},"integratedTime":{},"logID":{},"logIndex":{}}}"#,
        serde_json::Value::from(entry.body.as_str()),
        entry.integrated_time,
        serde_json::Value::from(entry.log_id.as_str()),
        entry.log_index
    );
    let set = b64(&bundle.signed_entry_timestamp).ok_or("the Rekor bundle's SignedEntryTimestamp is not base64")?;
    log.key.verify_signature(Signature::Raw(&set), canonical.as_bytes()).map_err(|_| {
        format!("the Rekor entry's signed entry timestamp does not verify with the key of {}", log.name)
    })?;
    if !log.valid.contains(entry.integrated_time) {
        return Err(format!(
            "the Rekor entry was integrated at {}, outside the validity of {}",
            shown(entry.integrated_time),
            log.name
        ));
    }
    entry_logs(entry, payload, signature, leaf_der)?;
    Ok(Logged { at: entry.integrated_time, log: log.name.clone() })
}

fn read(bundle: &str) -> Result<Bundle, String> {
    serde_json::from_str(bundle).map_err(|_| "the Rekor bundle is not cosign's bundle JSON".to_string())
}

/// Checks that `bundle`'s entry logs exactly this `signature` over `payload` by certificate
/// `leaf_der` (its SET unchecked: for a signer attaching its own entry).
pub fn logs_exactly(bundle: &str, payload: &[u8], signature: &[u8], leaf_der: &[u8]) -> Result<(), String> {
    entry_logs(&read(bundle)?.payload, payload, signature, leaf_der)
}

fn entry_logs(entry: &BundlePayload, payload: &[u8], signature: &[u8], leaf_der: &[u8]) -> Result<(), String> {
    let body = b64(&entry.body).ok_or("the Rekor entry's body is not base64")?;
    let body: Entry =
        serde_json::from_slice(&body).map_err(|_| "the Rekor entry's body is not a hashedrekord entry".to_string())?;
    if body.kind != "hashedrekord" {
        return Err(format!("the Rekor entry is a {:?}, not a hashedrekord", body.kind));
    }
    let hash = &body.spec.data.hash;
    if hash.algorithm != "sha256" || !hash.value.eq_ignore_ascii_case(&hex::encode(Sha256::digest(payload))) {
        return Err("the Rekor entry logs another payload".into());
    }
    if b64(&body.spec.signature.content).as_deref() != Some(signature) {
        return Err("the Rekor entry logs another signature".into());
    }
    let logged_key = b64(&body.spec.signature.public_key.content).unwrap_or_default();
    if pem_certificates(&logged_key).ok().as_deref() != Some(&[leaf_der.to_vec()][..]) {
        return Err("the Rekor entry logs another certificate".into());
    }
    Ok(())
}

/// Checks that `leaf` embeds an SCT of one of `ctlogs`, signed by its key while the key was
/// valid, over the precertificate `issuer_spki` (the issuing CA's public key, DER) issued.
/// Returns the log's name, or why not.
pub fn check_sct(ctlogs: &[Log], leaf: &Certificate, issuer_spki: &[u8]) -> Result<String, String> {
    let tbs = &leaf.tbs_certificate;
    let list = tbs
        .get::<SignedCertificateTimestampList>()
        .map_err(|_| "the certificate's SCT list does not read".to_string())?
        .ok_or("the certificate embeds no SCT (it was not logged in a CT log)")?
        .1;
    let scts = list.parse_timestamps().map_err(|_| "the certificate's SCT list does not read".to_string())?;
    // The precertificate is the certificate without its SCT list, as the CA gave it to the log.
    let mut precert = tbs.clone();
    if let Some(extensions) = precert.extensions.as_mut() {
        extensions.retain(|e| e.extn_id != SignedCertificateTimestampList::OID);
    }
    let precert = precert.to_der().map_err(|_| "the certificate does not re-encode".to_string())?;
    let issuer_key_hash = Sha256::digest(issuer_spki);
    let mut reasons = Vec::new();
    for serialized in scts {
        let Ok(sct) = serialized.parse_timestamp() else {
            reasons.push("an SCT does not read".to_string());
            continue;
        };
        let Some(log) = ctlogs.iter().find(|l| l.id == sct.log_id.key_id) else {
            reasons.push(format!(
                "an SCT is from CT log {}, which the trust root does not list",
                hex::encode(sct.log_id.key_id)
            ));
            continue;
        };
        if sct.version != Version::V1 {
            reasons.push(format!("the SCT of {} is not version 1", log.name));
            continue;
        }
        // RFC 6962 §3.2: digitally-signed struct of a precert entry.
        let mut signed = vec![0u8, 0u8];
        signed.extend(sct.timestamp.to_be_bytes());
        signed.extend([0u8, 1u8]);
        signed.extend(issuer_key_hash);
        signed.extend(&u32::try_from(precert.len()).unwrap_or(u32::MAX).to_be_bytes()[1..]);
        signed.extend(&precert);
        signed.extend(&u16::try_from(sct.extensions.as_slice().len()).unwrap_or(u16::MAX).to_be_bytes());
        signed.extend(sct.extensions.as_slice());
        if log.key.verify_signature(Signature::Raw(sct.signature.signature.as_slice()), &signed).is_err() {
            reasons.push(format!("the SCT does not verify with the key of {}", log.name));
            continue;
        }
        let at = i64::try_from(sct.timestamp / 1000).unwrap_or(i64::MAX);
        if !log.valid.contains(at) {
            reasons.push(format!("the SCT was signed at {}, outside the validity of {}", shown(at), log.name));
            continue;
        }
        return Ok(log.name.clone());
    }
    Err(reasons.join("; "))
}

/// The certificates of a PEM text, DER, in order.
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let chain = Certificate::load_pem_chain(pem).map_err(|_| "not PEM certificates".to_string())?;
    chain.iter().map(|c| c.to_der().map_err(|_| "a certificate does not re-encode".to_string())).collect()
}
