//! Pulling a plugin: its one WASM layer, verified against its digests and bounded in size and
//! time; and resolving a tag to the manifest digest it points at.

use std::time::Duration;

use super::client::{CNCF_LAYER_MEDIA_TYPE, Capped, Layout, OciError, classify, client, parse, with_retry, within};
use super::credentials::Credentials;
use oci_client::manifest::{OciDescriptor, OciImageManifest, WASM_LAYER_MEDIA_TYPE};
use sha2::{Digest, Sha256};

/// What one pull may take: the size of the component (checked against the layer descriptor
/// before downloading, and again while downloading, should the registry send more) and the time
/// of the whole pull, retries included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PullBounds {
    /// Bytes of the WASM layer.
    pub size: u64,
    /// Wall time of the pull.
    pub deadline: Duration,
}

impl Default for PullBounds {
    /// The largest component the host compiles (64 MiB: interpreted languages' components run to
    /// tens of MiB) and two minutes.
    fn default() -> Self {
        Self { size: crate::runtime::MAX_COMPONENT_BYTES as u64, deadline: Duration::from_secs(120) }
    }
}

/// How long resolving a tag (to the manifest digest it points at) may take, retries included.
pub const RESOLVE_DEADLINE: Duration = Duration::from_secs(30);

/// A pulled plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pulled {
    /// The WASM layer's bytes.
    pub bytes: Vec<u8>,
    /// Hex sha256 of `bytes`.
    pub sha256: String,
    /// Digest of the manifest pulled (`sha256:...`).
    pub manifest_digest: String,
}

/// Pulls the one WASM layer of `reference` and verifies it: against the layer descriptor's
/// digest, the manifest digest when `reference` is `...@sha256:...`, and `expected_sha256` (hex,
/// optionally `sha256:`-prefixed) when given.
/// The pull is bounded by `bounds`.
pub async fn pull(
    reference: &str,
    credentials: &Credentials,
    expected_sha256: Option<&str>,
    bounds: PullBounds,
) -> Result<Pulled, OciError> {
    let image = parse(reference)?;
    let client = client(&image, reference)?;
    let auth = credentials.auth();
    let too_large = |size| OciError::TooLarge { reference: reference.into(), size, limit: bounds.size };
    let attempts = with_retry(reference, || async {
        let (manifest, manifest_digest) =
            client.pull_image_manifest(&image, &auth).await.map_err(|e| classify(reference, e))?;
        let layer = wasm_layer(&manifest).map_err(|reason| OciError::Layout { reference: reference.into(), reason })?;
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if declared > bounds.size {
            return Err(too_large(declared));
        }
        let mut sink = Capped { bytes: Vec::new(), limit: bounds.size, refused: None };
        let pulled = client.pull_blob(&image, layer, &mut sink).await;
        if let Some(size) = sink.refused {
            return Err(too_large(size));
        }
        pulled.map_err(|e| classify(reference, e))?;
        let sha256 = hex::encode(Sha256::digest(&sink.bytes));
        check_sha256(reference, "layer digest", &layer.digest, &sha256)?;
        Ok(Pulled { bytes: sink.bytes, sha256, manifest_digest })
    });
    let pulled = within("pulling", reference, bounds.deadline, attempts).await?;
    if let Some(expected) = expected_sha256 {
        check_sha256(reference, "sha256", expected, &pulled.sha256)?;
    }
    Ok(pulled)
}

/// The manifest digest (`sha256:...`) `reference` points at now, unless finding out takes
/// longer than `deadline` (e.g. [`RESOLVE_DEADLINE`]).
pub async fn resolve(reference: &str, credentials: &Credentials, deadline: Duration) -> Result<String, OciError> {
    let image = parse(reference)?;
    let client = client(&image, reference)?;
    let auth = credentials.auth();
    let attempts = with_retry(reference, || async {
        client.fetch_manifest_digest(&image, &auth).await.map_err(|e| classify(reference, e))
    });
    within("resolving", reference, deadline, attempts).await
}

/// The one layer with a WASM media type (either layout).
fn wasm_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, Layout> {
    let is_wasm =
        |layer: &&OciDescriptor| [CNCF_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE].contains(&layer.media_type.as_str());
    let wasm: Vec<&OciDescriptor> = manifest.layers.iter().filter(is_wasm).collect();
    match wasm[..] {
        [layer] => Ok(layer),
        [] => Err(Layout::NoWasmLayer {
            config: manifest.config.media_type.clone(),
            found: manifest.layers.iter().map(|l| l.media_type.clone()).collect(),
        }),
        _ => Err(Layout::SeveralWasmLayers(wasm.len())),
    }
}

/// Compares hex sha256 `actual` with `expected` (hex, optionally `sha256:`-prefixed).
fn check_sha256(reference: &str, what: &'static str, expected: &str, actual: &str) -> Result<(), OciError> {
    let bare = expected.strip_prefix("sha256:").unwrap_or(expected);
    if bare.eq_ignore_ascii_case(actual) {
        return Ok(());
    }
    Err(OciError::DigestMismatch {
        reference: reference.into(),
        what,
        expected: format!("sha256:{bare}"),
        actual: format!("sha256:{actual}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::CNCF_CONFIG_MEDIA_TYPE;

    #[tokio::test]
    async fn a_registry_that_never_answers_times_out_at_the_deadline() {
        // Connections are accepted (the listen backlog) and never answered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let reference = format!("127.0.0.1:{}/plugins/flux:v1", silent.local_addr().unwrap().port());
        let bounds = PullBounds { deadline: Duration::from_millis(500), ..PullBounds::default() };
        let started = std::time::Instant::now();
        let error = pull(&reference, &Credentials::anonymous(), None, bounds).await.unwrap_err();
        assert!(matches!(error, OciError::TimedOut { .. }), "{error}");
        assert!(error.to_string().starts_with(&format!("pulling {reference} did not finish within 500ms")), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }

    fn descriptor(media_type: &str) -> OciDescriptor {
        OciDescriptor { media_type: media_type.into(), digest: "sha256:00".into(), ..OciDescriptor::default() }
    }

    fn manifest(layers: &[&str]) -> OciImageManifest {
        OciImageManifest {
            config: descriptor(CNCF_CONFIG_MEDIA_TYPE),
            layers: layers.iter().map(|m| descriptor(m)).collect(),
            ..OciImageManifest::default()
        }
    }

    #[test]
    fn wasm_layer_accepts_both_layouts_and_exactly_one_layer() {
        for media_type in [CNCF_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE] {
            let m = manifest(&["application/vnd.example.sig", media_type]);
            assert_eq!(wasm_layer(&m).unwrap().media_type, media_type);
        }
        let none = wasm_layer(&manifest(&["application/vnd.oci.image.layer.v1.tar"])).unwrap_err().to_string();
        assert!(none.contains("application/vnd.oci.image.layer.v1.tar"), "{none}");
        let two = wasm_layer(&manifest(&[CNCF_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE])).unwrap_err().to_string();
        assert!(two.contains("2 WASM layers"), "{two}");
    }

    #[test]
    fn sha256_check_names_both_digests() {
        let sha = hex::encode(Sha256::digest(b"plugin"));
        check_sha256("r/p:1", "sha256", &sha, &sha).unwrap();
        check_sha256("r/p:1", "sha256", &format!("sha256:{}", sha.to_uppercase()), &sha).unwrap();
        let error = check_sha256("r/p:1", "sha256", "abc", &sha).unwrap_err().to_string();
        assert!(error.contains("sha256:abc") && error.contains(&sha) && error.contains("r/p:1"), "{error}");
    }

    #[tokio::test]
    async fn an_unreachable_registry_is_retried_then_reported() {
        // Nothing listens on port 9 (discard) of the loopback.
        let error = pull("127.0.0.1:9/plugins/flux:v1", &Credentials::anonymous(), None, PullBounds::default())
            .await
            .unwrap_err();
        assert!(matches!(error, OciError::Unavailable { attempts: 3, .. }), "{error}");
        assert!(error.to_string().contains("127.0.0.1:9/plugins/flux:v1"), "{error}");
    }
}
