//! A manifest digest's cosign signatures: read (bounded in number, size and time) and verified
//! before anything is compiled, and added to by `plugin sign`. The format and the verification
//! are [`crate::signature`]'s.

use std::time::Duration;

use super::client::{Capped, OciError, classify, client, parse, pin, with_retry, within};
use super::credentials::Credentials;
use crate::signature::{self, Policy, SIMPLE_SIGNING_MEDIA_TYPE, StoredSignature, Verified};
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

/// How long reading the signatures of a digest (their manifest and every payload) may take,
/// retries included.
pub const SIGNATURES_DEADLINE: Duration = Duration::from_secs(60);

/// Largest signature payload read: cosign's are a few hundred bytes.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
/// Most signatures read under one tag.
const MAX_SIGNATURES: usize = 32;
/// Config media type of a signature manifest, as cosign writes it.
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// Checks that manifest `digest` of `reference`'s repository is signed as `policy` requires
/// (see [`signature::verify`]); returns what verified it. Reading the signatures may take at
/// most `deadline` (e.g. [`SIGNATURES_DEADLINE`]).
pub async fn verify(
    reference: &str,
    digest: &str,
    credentials: &Credentials,
    policy: &Policy,
    deadline: Duration,
) -> Result<Verified, OciError> {
    let pinned = pin(reference, digest)?;
    let reading = signatures(reference, digest, credentials);
    let stored = within("reading the signatures of", &pinned, deadline, reading).await?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    match signature::verify(policy, digest, stored.as_deref(), i64::try_from(now).unwrap_or(i64::MAX)) {
        Ok(verified) => Ok(verified),
        Err(reason) => Err(OciError::Unverified { reference: pinned, reason }),
    }
}

/// The signature reference of manifest `digest`: `<registry>/<repository>:sha256-<hex>.sig`.
fn signature_reference(reference: &str, digest: &str) -> Result<Reference, OciError> {
    let image = parse(reference)?;
    let tag = signature::signature_tag(digest)
        .map_err(|e| OciError::InvalidReference { reference: reference.into(), reason: e.to_string() })?;
    Ok(Reference::with_tag(image.registry().into(), image.repository().into(), tag))
}

/// The signature manifest of `digest`, `None` when its tag does not exist.
async fn signature_manifest(
    client: &Client,
    image: &Reference,
    auth: &RegistryAuth,
) -> Result<Option<OciImageManifest>, OciError> {
    let reference = image.to_string();
    let pulled = with_retry(&reference, || async {
        client.pull_image_manifest(image, auth).await.map_err(|e| classify(&reference, e))
    })
    .await;
    match pulled {
        Ok((manifest, _)) => Ok(Some(manifest)),
        Err(OciError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The cosign signatures stored for manifest `digest` in `reference`'s repository (at most
/// [`MAX_SIGNATURES`]); `None` when the signature tag does not exist.
async fn signatures(
    reference: &str,
    digest: &str,
    credentials: &Credentials,
) -> Result<Option<Vec<StoredSignature>>, OciError> {
    let image = signature_reference(reference, digest)?;
    let shown = image.to_string();
    let client = client(&image, &shown)?;
    let auth = credentials.auth();
    let Some(manifest) = signature_manifest(&client, &image, &auth).await? else { return Ok(None) };
    let mut stored = Vec::new();
    for layer in manifest.layers.iter().filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE).take(MAX_SIGNATURES) {
        let too_large = |size| OciError::TooLarge { reference: shown.clone(), size, limit: MAX_PAYLOAD_BYTES };
        if u64::try_from(layer.size).unwrap_or(u64::MAX) > MAX_PAYLOAD_BYTES {
            return Err(too_large(u64::try_from(layer.size).unwrap_or(u64::MAX)));
        }
        let payload = with_retry(&shown, || async {
            let mut sink = Capped { bytes: Vec::new(), limit: MAX_PAYLOAD_BYTES, refused: None };
            let pulled = client.pull_blob(&image, layer, &mut sink).await;
            if let Some(size) = sink.refused {
                return Err(too_large(size));
            }
            pulled.map_err(|e| classify(&shown, e))?;
            Ok(sink.bytes)
        })
        .await?;
        let annotations = layer.annotations.iter().flatten();
        let annotations = annotations.filter(|(k, _)| StoredSignature::ANNOTATIONS.contains(&k.as_str()));
        stored
            .push(StoredSignature { payload, annotations: annotations.map(|(k, v)| (k.clone(), v.clone())).collect() });
    }
    Ok(Some(stored))
}

/// Adds `signature` to the signatures of manifest `digest` in `reference`'s repository, keeping
/// those already there (as cosign does; the same signature is not added twice). Returns the
/// signature reference and how many signatures it holds.
pub async fn push_signature(
    reference: &str,
    digest: &str,
    signature: &StoredSignature,
    credentials: &Credentials,
) -> Result<(String, usize), OciError> {
    let image = signature_reference(reference, digest)?;
    let shown = image.to_string();
    let client = client(&image, &shown)?;
    let auth = credentials.auth();
    client.store_auth_if_needed(image.resolve_registry(), &auth).await;
    let existing = signature_manifest(&client, &image, &auth).await?;
    let mut layers: Vec<OciDescriptor> = existing.map(|m| m.layers).unwrap_or_default();
    let payload = ImageLayer::new(signature.payload.clone(), SIMPLE_SIGNING_MEDIA_TYPE.into(), None);
    let annotations = signature.annotations.clone().into_iter().collect();
    let descriptor = OciDescriptor {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
        digest: payload.sha256_digest(),
        size: signature.payload.len() as i64,
        annotations: Some(annotations),
        ..OciDescriptor::default()
    };
    if !layers.iter().any(|l| l.digest == descriptor.digest && l.annotations == descriptor.annotations) {
        layers.push(descriptor);
    }
    // cosign's config: an empty image whose layers are the payloads.
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    let config = serde_json::json!({
        "architecture": "", "os": "", "config": {},
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    });
    let config = Config::new(config.to_string().into_bytes(), SIGNATURE_CONFIG_MEDIA_TYPE.into(), None);
    let manifest = OciImageManifest {
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: SIGNATURE_CONFIG_MEDIA_TYPE.into(),
            digest: config.sha256_digest(),
            size: config.data.len() as i64,
            ..OciDescriptor::default()
        },
        layers,
        ..OciImageManifest::default()
    };
    let body = serde_json::to_vec(&manifest).expect("a manifest serializes");
    with_retry(&shown, || async {
        let push = async {
            client.push_blob(&image, payload.data.clone(), &payload.sha256_digest()).await?;
            client.push_blob(&image, config.data.clone(), &manifest.config.digest).await?;
            let content_type = OCI_IMAGE_MEDIA_TYPE.parse().expect("a media type is a header value");
            client.push_manifest_raw(&image, body.clone(), content_type).await
        };
        push.await.map_err(|e| classify(&shown, e))
    })
    .await?;
    Ok((shown, manifest.layers.len()))
}
