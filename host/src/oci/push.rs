//! Pushing a plugin as a CNCF wasm artifact.

use super::client::{CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE, OciError, classify, client, parse, with_retry};
use super::credentials::Credentials;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use sha2::{Digest, Sha256};

/// Pushes `bytes` as a CNCF wasm artifact (config `application/vnd.wasm.config.v0+json`, one
/// `application/wasm` layer) and returns the manifest digest (`sha256:...`). The same bytes give
/// the same digest (the config has no timestamp).
pub async fn push(bytes: &[u8], reference: &str, credentials: &Credentials) -> Result<String, OciError> {
    let image = parse(reference)?;
    let client = client(&image, reference)?;
    let layer = ImageLayer::new(bytes.to_vec(), CNCF_LAYER_MEDIA_TYPE.into(), None);
    let config = serde_json::json!({ "architecture": "wasm", "os": "wasip2", "layerDigests": [layer.sha256_digest()] });
    let config = Config::new(config.to_string().into_bytes(), CNCF_CONFIG_MEDIA_TYPE.into(), None);
    let manifest = OciImageManifest {
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        ..OciImageManifest::build(std::slice::from_ref(&layer), &config, None)
    };
    let body = serde_json::to_vec(&manifest).expect("a manifest serializes");
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&body)));
    client.store_auth_if_needed(image.resolve_registry(), &credentials.auth()).await;
    with_retry(reference, || async {
        let push = async {
            client.push_blob(&image, layer.data.clone(), &manifest.layers[0].digest).await?;
            client.push_blob(&image, config.data.clone(), &manifest.config.digest).await?;
            let content_type = OCI_IMAGE_MEDIA_TYPE.parse().expect("a media type is a header value");
            client.push_manifest_raw(&image, body.clone(), content_type).await
        };
        push.await.map_err(|e| classify(reference, e))
    })
    .await?;
    Ok(digest)
}
