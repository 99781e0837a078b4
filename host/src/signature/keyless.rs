//! Keyless signatures, as `cosign verify --certificate-identity --certificate-oidc-issuer`
//! checks them against a private trust root: the signature layer carries a short-lived leaf
//! certificate (`dev.sigstore.cosign/certificate`), its chain (`/chain`) and the Rekor entry
//! that logged it (`/bundle`). A signature proves a [`Signer`] when: it verifies with the
//! leaf's key; the Rekor entry logs exactly it and its SET verifies under a pinned log key
//! (which proves the signing time); that time lies in the leaf's validity; the leaf, for
//! digital signatures and code signing, chains to a pinned CA at that time (not now: the leaf
//! lives minutes); its embedded SCT verifies under a pinned CT log key. Only then are its
//! identity (SAN and the Fulcio issuer extension) and payload read.
//!
//! Chains are built by rustls-webpki (the X.509 path builder the host's TLS already trusts);
//! certificates and SCTs are read with x509-cert, keys and signatures with sigstore's crypto.

use super::identity::Signer;
use super::transparency::{check_bundle, check_sct, pem_certificates};
use super::trust_root::TrustRoot;
use super::trust_root::shown;
use rustls::pki_types::{CertificateDer, UnixTime};
use sigstore::crypto::{CosignVerificationKey, Signature};
use std::collections::BTreeMap;
use std::time::Duration;
use x509_cert::Certificate;
use x509_cert::der::asn1::Utf8StringRef;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{ExtendedKeyUsage, KeyUsage, SubjectAltName};

/// The leaf certificate, PEM.
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The intermediates then the root, PEM.
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
/// The Rekor bundle: the entry and its signed entry timestamp.
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";

/// id-kp-codeSigning (1.3.6.1.5.5.7.3.3), DER value bytes, as webpki takes an EKU.
const CODE_SIGNING_DER: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];
const CODE_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
/// Fulcio's OIDC issuer: v1 holds the raw string, v2 a DER UTF8String.
const ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
const ISSUER_V2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");

/// What keyless verification trusts and how strictly (cosign's `--insecure-ignore-*`).
pub struct Keyless {
    /// The trust root.
    pub root: TrustRoot,
    /// The accepted identities.
    pub rules: super::identity::Rules,
    /// Accept a leaf without an SCT of a pinned CT log.
    pub ignore_sct: bool,
    /// Accept a signature without a Rekor entry: it is then checked at the present time.
    pub ignore_tlog: bool,
}

/// Why one keyless signature proves no signer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The certificate or chain annotation does not hold what it should.
    #[error("{0}")]
    Malformed(String),
    /// The signature is not the leaf key's over the payload.
    #[error("does not verify with the key of its certificate")]
    Signature,
    /// No proof of the signing time, or one that does not verify.
    #[error("its signing time is not proven: {0}")]
    Unlogged(String),
    /// Signed outside the leaf's validity.
    #[error("signed at {at}, outside its certificate's validity ({from} to {to})")]
    Outside {
        /// The signing time.
        at: String,
        /// The leaf's notBefore.
        from: String,
        /// The leaf's notAfter.
        to: String,
    },
    /// The leaf is not for signing code.
    #[error("its certificate is not for code signing: {0}")]
    Usage(String),
    /// The leaf chains to no pinned CA.
    #[error("its certificate chains to no certificate authority of the trust root at {at}: {why}")]
    Chain {
        /// The time the chain was checked at.
        at: String,
        /// Each authority's answer.
        why: String,
    },
    /// The SCT is missing or does not verify.
    #[error("its certificate's SCT: {0}")]
    Sct(String),
}

/// Whether `signature` (raw) over `payload` verifies with the key of certificate `leaf_der`.
pub fn signed_by_certificate(leaf_der: &[u8], payload: &[u8], signature: &[u8]) -> bool {
    let key = Certificate::from_der(leaf_der)
        .ok()
        .and_then(|c| c.tbs_certificate.subject_public_key_info.to_der().ok())
        .and_then(|spki| CosignVerificationKey::try_from_der(&spki).ok());
    key.is_some_and(|k| k.verify_signature(Signature::Raw(signature), payload).is_ok())
}

/// Checks one keyless signature (`signature`, raw, over `payload`, with the layer's
/// `annotations`) against `keyless`, at `now` when the log is ignored; returns the signer's
/// identity, its annotations left for the caller (they are in the payload).
pub fn check(
    keyless: &Keyless,
    annotations: &BTreeMap<String, String>,
    payload: &[u8],
    signature: &[u8],
    now: i64,
) -> Result<Signer, Refused> {
    let malformed = |what: &str| Refused::Malformed(what.to_string());
    let leaf_pem = annotations.get(CERTIFICATE_ANNOTATION).ok_or_else(|| malformed("no certificate annotation"))?;
    let [leaf_der] = &pem_certificates(leaf_pem.as_bytes())
        .map_err(|e| Refused::Malformed(format!("the certificate annotation: {e}")))?[..]
    else {
        return Err(malformed("the certificate annotation holds other than one certificate"));
    };
    let leaf = Certificate::from_der(leaf_der).map_err(|_| malformed("the certificate does not read"))?;
    let tbs = &leaf.tbs_certificate;
    if !signed_by_certificate(leaf_der, payload, signature) {
        return Err(Refused::Signature);
    }

    let at = if keyless.ignore_tlog {
        now
    } else {
        let bundle = annotations
            .get(BUNDLE_ANNOTATION)
            .ok_or_else(|| Refused::Unlogged(format!("no Rekor bundle ({BUNDLE_ANNOTATION})")))?;
        check_bundle(&keyless.root.tlogs, bundle, payload, signature, leaf_der).map_err(Refused::Unlogged)?.at
    };
    let (from, to) = (seconds(&tbs.validity.not_before), seconds(&tbs.validity.not_after));
    if at < from || at > to {
        return Err(Refused::Outside { at: shown(at), from: shown(from), to: shown(to) });
    }
    match tbs.get::<KeyUsage>() {
        Ok(Some((_, usage))) if usage.digital_signature() => {}
        Ok(Some(_)) => return Err(Refused::Usage("its key usage lacks digitalSignature".into())),
        _ => return Err(Refused::Usage("it has no key usage extension".into())),
    }
    match tbs.get::<ExtendedKeyUsage>() {
        Ok(Some((_, usages))) if usages.0.contains(&CODE_SIGNING) => {}
        _ => return Err(Refused::Usage("it lacks the CodeSigning extended key usage".into())),
    }
    let chain = match annotations.get(CHAIN_ANNOTATION) {
        Some(pem) => {
            pem_certificates(pem.as_bytes()).map_err(|e| Refused::Malformed(format!("the chain annotation: {e}")))?
        }
        None => Vec::new(),
    };
    let issuer_spki = chain_to_root(&keyless.root, leaf_der, &chain, at)?;
    if !keyless.ignore_sct {
        check_sct(&keyless.root.ctlogs, &leaf, &issuer_spki).map_err(Refused::Sct)?;
    }
    Ok(Signer { subjects: subjects(&leaf), issuer: issuer(&leaf), annotations: BTreeMap::new(), signed_at: at })
}

/// Verifies that `leaf_der` chains, through the pinned chains and the `given` certificates, to
/// the root of an authority valid at `at`, with the CodeSigning EKU, at time `at`; returns the
/// issuing CA's public key (DER), which the SCT names.
fn chain_to_root(root: &TrustRoot, leaf_der: &[u8], given: &[Vec<u8>], at: i64) -> Result<Vec<u8>, Refused> {
    let chain_error = |why: String| Refused::Chain { at: shown(at), why };
    let leaf = CertificateDer::from(leaf_der);
    let end_entity =
        webpki::EndEntityCert::try_from(&leaf).map_err(|e| chain_error(format!("the certificate: {e}")))?;
    let time = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(at).unwrap_or(0)));
    let mut reasons = Vec::new();
    for authority in &root.authorities {
        if !authority.valid.contains(at) {
            reasons.push(format!("{} was not valid then", authority.name));
            continue;
        }
        let Some((anchor_der, pinned)) = authority.chain.split_last() else { continue };
        let anchor_cert = CertificateDer::from(anchor_der.as_slice());
        let Ok(anchor) = webpki::anchor_from_trusted_cert(&anchor_cert) else {
            reasons.push(format!("{}: its root does not read", authority.name));
            continue;
        };
        let intermediates: Vec<CertificateDer> =
            pinned.iter().chain(given).map(|der| CertificateDer::from(der.as_slice())).collect();
        let anchors = [anchor];
        let verified = end_entity.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &intermediates,
            time,
            // Every certificate of the path that restricts its uses must allow code signing;
            // the leaf is required to name it (above).
            webpki::KeyUsage::required_if_present(CODE_SIGNING_DER),
            None,
            None,
        );
        match verified {
            Ok(path) => {
                let issuer = path.intermediate_certificates().next().map(|c| c.der().as_ref().to_vec());
                let issuer = issuer.unwrap_or_else(|| anchor_der.clone());
                return Certificate::from_der(&issuer)
                    .ok()
                    .and_then(|c| c.tbs_certificate.subject_public_key_info.to_der().ok())
                    .ok_or_else(|| chain_error("the issuing certificate does not read".into()));
            }
            Err(webpki::Error::RequiredEkuNotFoundContext(_)) => {
                reasons.push(format!("{}: a certificate of the path is not for code signing", authority.name));
            }
            Err(e) => reasons.push(format!("{}: {e:?}", authority.name)),
        }
    }
    Err(chain_error(reasons.join("; ")))
}

fn seconds(time: &x509_cert::time::Time) -> i64 {
    i64::try_from(time.to_unix_duration().as_secs()).unwrap_or(i64::MAX)
}

/// The certificate's URI and email subject alternative names.
fn subjects(leaf: &Certificate) -> Vec<String> {
    let Ok(Some((_, names))) = leaf.tbs_certificate.get::<SubjectAltName>() else { return Vec::new() };
    names
        .0
        .iter()
        .filter_map(|name| match name {
            GeneralName::UniformResourceIdentifier(uri) => Some(uri.to_string()),
            GeneralName::Rfc822Name(email) => Some(email.to_string()),
            _ => None,
        })
        .collect()
}

/// The OIDC issuer the certificate names: the v2 extension, else the v1 one.
fn issuer(leaf: &Certificate) -> Option<String> {
    let extensions = leaf.tbs_certificate.extensions.as_deref().unwrap_or_default();
    let value = |oid| extensions.iter().find(|e| e.extn_id == oid).map(|e| e.extn_value.as_bytes());
    if let Some(v2) = value(ISSUER_V2) {
        return Utf8StringRef::from_der(v2).ok().map(|s| s.as_str().to_string());
    }
    value(ISSUER_V1).and_then(|v1| std::str::from_utf8(v1).ok()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::super::identity::{Rule, Rules, Subject};
    use super::super::{Policy, Rejected, StoredSignature, Unverified, verify};
    use super::*;
    use ksm_test_harness::pki::{self, LeafSpec, Pki};

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OTHER: &str = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    const REPOSITORY: &str = "registry.example.com/ksm/argocd";
    const ISSUER: &str = "https://token.actions.githubusercontent.com";
    const CI: &str = "https://github.com/acme/plugins/.github/workflows/release.yaml@refs/tags/v1";

    fn rule(name: &str, subject: Subject) -> Rule {
        Rule { name: name.into(), issuer: ISSUER.into(), subject, annotations: BTreeMap::new() }
    }

    fn policy(pki: &Pki, rules: Rules) -> Policy {
        let root = TrustRoot::from_json(pki.trusted_root().to_string().as_bytes()).unwrap();
        Policy { keys: vec![], keyless: Some(Keyless { root, rules, ignore_sct: false, ignore_tlog: false }) }
    }

    fn all_of(subject: Subject) -> Rules {
        Rules { all_of: vec![rule("keyless.allOf[0]", subject)], ..Rules::default() }
    }

    /// `leaf`'s signature of `digest`, logged by `log`'s Rekor at `logged_at` (relative to now).
    fn signed_by(pki: &Pki, log: &Pki, leaf: &pki::Leaf, digest: &str, logged_at: Option<i64>) -> StoredSignature {
        let payload = pki::payload(REPOSITORY, digest);
        let signature = leaf.sign(&payload);
        let mut annotations: BTreeMap<String, String> = pki.annotations(leaf, &payload, None).into_iter().collect();
        if let Some(at) = logged_at {
            annotations.insert(BUNDLE_ANNOTATION.into(), log.bundle(leaf, &payload, &signature, pki.now + at));
        }
        StoredSignature { payload, annotations }
    }

    fn signed(pki: &Pki, spec: &LeafSpec) -> StoredSignature {
        signed_by(pki, pki, &pki.leaf(spec), DIGEST, Some(0))
    }

    fn check(policy: &Policy, stored: StoredSignature, now: i64) -> Result<String, Unverified> {
        verify(policy, DIGEST, Some(&[stored]), now).map(|v| v.to_string())
    }

    /// The one signature's rejection.
    fn refused(policy: &Policy, stored: StoredSignature, now: i64) -> String {
        match check(policy, stored, now) {
            Err(Unverified::Keyless { signatures, .. }) => signatures.join("; "),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_fulcio_style_signature_of_an_accepted_identity_verifies() {
        let pki = Pki::new();
        let verified =
            check(&policy(&pki, all_of(Subject::Equal(CI.into()))), signed(&pki, &LeafSpec::new(CI, ISSUER)), pki.now);
        let verified = verified.unwrap();
        assert!(
            verified.starts_with(&format!("keyless.allOf[0] matched by {CI} (issuer {ISSUER}), signed at ")),
            "{verified}"
        );
        let prefix = all_of(Subject::UrlPrefix("https://github.com/acme/".into()));
        assert!(check(&policy(&pki, prefix), signed(&pki, &LeafSpec::new(CI, ISSUER)), pki.now).is_ok());
        let v1 = LeafSpec { issuer_v1: true, ..LeafSpec::new(CI, ISSUER) };
        assert!(
            check(&policy(&pki, all_of(Subject::Equal(CI.into()))), signed(&pki, &v1), pki.now).is_ok(),
            "the v1 issuer extension"
        );
        let email = LeafSpec::new("release@acme.example", ISSUER);
        assert!(
            check(&policy(&pki, all_of(Subject::Equal("release@acme.example".into()))), signed(&pki, &email), pki.now)
                .is_ok()
        );
    }

    #[test]
    fn another_subject_issuer_or_sibling_prefix_matches_no_rule() {
        let pki = Pki::new();
        let stored = || signed(&pki, &LeafSpec::new(CI, ISSUER));
        let other_subject =
            check(&policy(&pki, all_of(Subject::Equal(format!("{CI}x")))), stored(), pki.now).unwrap_err();
        let text = other_subject.to_string();
        assert!(text.contains("keyless.allOf[0] is matched by no signature"), "{text}");
        assert!(text.contains(&format!("signature 1: subject {CI} issuer {ISSUER}")), "names who did sign: {text}");
        let other_issuer = Rules {
            all_of: vec![Rule {
                issuer: "https://accounts.google.com".into(),
                ..rule("keyless.allOf[0]", Subject::Equal(CI.into()))
            }],
            ..Rules::default()
        };
        assert!(check(&policy(&pki, other_issuer), stored(), pki.now).is_err());
        let evil = signed(
            &pki,
            &LeafSpec::new("https://github.com/acme-evil/plugins/.github/workflows/x.yaml@refs/heads/main", ISSUER),
        );
        let prefix = all_of(Subject::UrlPrefix("https://github.com/acme".into()));
        assert!(check(&policy(&pki, prefix), evil, pki.now).is_err(), "a prefix without its / reaches no sibling");
    }

    #[test]
    fn a_leaf_of_another_root_does_not_chain() {
        let (pki, other) = (Pki::new(), Pki::named("theirs"));
        let stored = signed_by(&other, &pki, &other.leaf(&LeafSpec::new(CI, ISSUER)), DIGEST, Some(0));
        let why = refused(&policy(&pki, all_of(Subject::Equal(CI.into()))), stored, pki.now);
        assert!(why.contains("its certificate chains to no certificate authority of the trust root at"), "{why}");
        assert!(why.contains("certificateAuthorities[0] (https://fulcio.ksm.test)"), "{why}");
    }

    #[test]
    fn an_expired_leaf_verifies_only_with_a_logged_time_inside_its_validity() {
        let pki = Pki::new();
        let rules = || all_of(Subject::Equal(CI.into()));
        // Valid for ten minutes an hour ago: expired now, as every Fulcio leaf soon is.
        let old = LeafSpec { not_before: -3600, not_after: -3000, ..LeafSpec::new(CI, ISSUER) };
        let leaf = pki.leaf(&old);
        assert!(check(&policy(&pki, rules()), signed_by(&pki, &pki, &leaf, DIGEST, Some(-3300)), pki.now).is_ok());
        let late = refused(&policy(&pki, rules()), signed_by(&pki, &pki, &leaf, DIGEST, Some(-60)), pki.now);
        assert!(late.contains("outside its certificate's validity"), "{late}");
        let unlogged = refused(&policy(&pki, rules()), signed_by(&pki, &pki, &leaf, DIGEST, None), pki.now);
        assert!(
            unlogged.contains("its signing time is not proven: no Rekor bundle (dev.sigstore.cosign/bundle)"),
            "{unlogged}"
        );
        let mut ignoring = policy(&pki, rules());
        ignoring.keyless.as_mut().unwrap().ignore_tlog = true;
        let now = refused(&ignoring, signed_by(&pki, &pki, &leaf, DIGEST, None), pki.now);
        assert!(
            now.contains("outside its certificate's validity"),
            "without a log, the present time is checked: {now}"
        );
        assert!(
            check(&ignoring, signed(&pki, &LeafSpec::new(CI, ISSUER)), pki.now).is_ok(),
            "a current leaf then verifies"
        );
    }

    #[test]
    fn a_set_or_sct_under_another_key_is_refused() {
        let (pki, other) = (Pki::new(), Pki::named("theirs"));
        let rules = || all_of(Subject::Equal(CI.into()));
        let leaf = pki.leaf(&LeafSpec::new(CI, ISSUER));
        let foreign_log = refused(&policy(&pki, rules()), signed_by(&pki, &other, &leaf, DIGEST, Some(0)), pki.now);
        assert!(foreign_log.contains("which the trust root does not list"), "{foreign_log}");
        // The log's id named right, the SET by another key.
        let mut forged = signed_by(&pki, &other, &leaf, DIGEST, Some(0));
        let ours = signed_by(&pki, &pki, &leaf, DIGEST, Some(0));
        let (theirs, own): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(&forged.annotations[BUNDLE_ANNOTATION]).unwrap(),
            serde_json::from_str(&ours.annotations[BUNDLE_ANNOTATION]).unwrap(),
        );
        let mut bundle = own.clone();
        bundle["SignedEntryTimestamp"] = theirs["SignedEntryTimestamp"].clone();
        forged.annotations.insert(BUNDLE_ANNOTATION.into(), bundle.to_string());
        let why = refused(&policy(&pki, rules()), forged, pki.now);
        assert!(why.contains("signed entry timestamp does not verify with the key of tlogs[0]"), "{why}");

        let foreign_sct = LeafSpec { sct_by: Some("theirs"), ..LeafSpec::new(CI, ISSUER) };
        let why = refused(&policy(&pki, rules()), signed(&pki, &foreign_sct), pki.now);
        assert!(why.contains("its certificate's SCT: an SCT is from CT log"), "{why}");
        let no_sct = LeafSpec { sct_by: None, ..LeafSpec::new(CI, ISSUER) };
        let why = refused(&policy(&pki, rules()), signed(&pki, &no_sct), pki.now);
        assert!(why.contains("embeds no SCT"), "{why}");
        let mut ignoring = policy(&pki, rules());
        ignoring.keyless.as_mut().unwrap().ignore_sct = true;
        assert!(check(&ignoring, signed(&pki, &no_sct), pki.now).is_ok(), "insecureIgnoreSCT opts out");
    }

    #[test]
    fn a_signature_copied_from_another_digest_or_entry_is_refused() {
        let pki = Pki::new();
        let rules = || all_of(Subject::Equal(CI.into()));
        let leaf = pki.leaf(&LeafSpec::new(CI, ISSUER));
        let copied = refused(&policy(&pki, rules()), signed_by(&pki, &pki, &leaf, OTHER, Some(0)), pki.now);
        assert!(
            copied.contains(&format!("signed by subject {CI} issuer {ISSUER} for {OTHER}, another artifact")),
            "{copied}"
        );
        // A bundle of another signature of the same leaf, under this one.
        let mut mixed = signed_by(&pki, &pki, &leaf, DIGEST, Some(0));
        let other = signed_by(&pki, &pki, &leaf, OTHER, Some(0));
        mixed.annotations.insert(BUNDLE_ANNOTATION.into(), other.annotations[BUNDLE_ANNOTATION].clone());
        let why = refused(&policy(&pki, rules()), mixed, pki.now);
        assert!(why.contains("the Rekor entry logs another payload"), "{why}");
        let mut tampered = signed_by(&pki, &pki, &leaf, DIGEST, Some(0));
        tampered.payload = pki::payload("registry.example.com/evil", DIGEST);
        assert!(
            refused(&policy(&pki, rules()), tampered, pki.now)
                .contains("does not verify with the key of its certificate")
        );
    }

    #[test]
    fn a_leaf_without_code_signing_is_refused() {
        let pki = Pki::new();
        let tls = LeafSpec { code_signing: false, ..LeafSpec::new(CI, ISSUER) };
        let why = refused(&policy(&pki, all_of(Subject::Equal(CI.into()))), signed(&pki, &tls), pki.now);
        assert!(why.contains("not for code signing: it lacks the CodeSigning extended key usage"), "{why}");
    }

    #[test]
    fn all_of_and_any_of_count_signatures() {
        let pki = Pki::new();
        let (a, b) = ("https://ci.acme.example/a", "https://ci.acme.example/b");
        let stored = [signed(&pki, &LeafSpec::new(a, ISSUER)), signed(&pki, &LeafSpec::new(b, ISSUER))];
        let r = |name: &str, s: &str| rule(name, Subject::Equal(s.into()));
        let both = Rules { all_of: vec![r("keyless.allOf[0]", a), r("keyless.allOf[1]", b)], ..Rules::default() };
        let verified = verify(&policy(&pki, both.clone()), DIGEST, Some(&stored), pki.now).unwrap();
        assert_eq!(verified.0.len(), 2, "{verified}");
        let error = verify(&policy(&pki, both), DIGEST, Some(&stored[..1]), pki.now).unwrap_err().to_string();
        assert!(error.contains("keyless.allOf[1] is matched by no signature"), "{error}");
        let any = |minimum| Rules {
            any_of: vec![
                r("keyless.anyOf.signatures[0]", a),
                r("keyless.anyOf.signatures[1]", b),
                r("keyless.anyOf.signatures[2]", "https://ci.acme.example/c"),
            ],
            minimum,
            ..Rules::default()
        };
        assert!(verify(&policy(&pki, any(2)), DIGEST, Some(&stored), pki.now).is_ok());
        let error = verify(&policy(&pki, any(3)), DIGEST, Some(&stored), pki.now).unwrap_err().to_string();
        assert!(error.contains("keyless.anyOf: 2 of its 3 rules matched, 3 needed"), "{error}");
    }

    #[test]
    fn a_key_based_signature_is_no_keyless_one() {
        let pki = Pki::new();
        let mut stored = signed(&pki, &LeafSpec::new(CI, ISSUER));
        stored.annotations.retain(|k, _| k == super::super::SIGNATURE_ANNOTATION);
        let error =
            verify(&policy(&pki, all_of(Subject::Equal(CI.into()))), DIGEST, Some(&[stored]), pki.now).unwrap_err();
        let Unverified::Keyless { signatures, .. } = &error else { panic!("{error}") };
        assert_eq!(signatures, &[format!("signature 1: {}", Rejected::NotKeyless)]);
    }

    #[test]
    fn attaching_a_certificate_checks_it_is_the_signers_and_the_bundle_logs_it() {
        let pki = Pki::new();
        let leaf = pki.leaf(&LeafSpec::new(CI, ISSUER));
        let signing = super::super::SigningKey::from_pem(leaf.key_pem().as_bytes(), b"").unwrap();
        let mut stored = signing.sign(REPOSITORY, DIGEST, &BTreeMap::new()).unwrap();
        assert_eq!(stored.payload, pki::payload(REPOSITORY, DIGEST), "the payload is cosign's, byte for byte");
        let signature = leaf.sign(&stored.payload);
        assert_eq!(stored.annotations[super::super::SIGNATURE_ANNOTATION], signature, "RFC 6979: deterministic");
        let bundle = pki.bundle(&leaf, &stored.payload, &signature, pki.now);
        let other = pki.leaf(&LeafSpec::new("https://ci.acme.example/other", ISSUER));
        let error = stored.clone().attach_certificate(&other.pem(), &pki.chain_pem(), None).unwrap_err();
        assert_eq!(error.to_string(), "the certificate is for another key than the signing key");
        let foreign = pki.bundle(&leaf, b"another payload", &signature, pki.now);
        let error = stored.clone().attach_certificate(&leaf.pem(), &pki.chain_pem(), Some(&foreign)).unwrap_err();
        assert_eq!(error.to_string(), "the Rekor bundle: the Rekor entry logs another payload");
        stored.attach_certificate(&leaf.pem(), &pki.chain_pem(), Some(&bundle)).unwrap();
        assert!(check(&policy(&pki, all_of(Subject::Equal(CI.into()))), stored, pki.now).is_ok());
    }
}
