//! `oci::pull` and `oci::resolve` on artifacts pushed with oci-client directly to a real registry
//! on loopback: the older wasm-to-oci layout is accepted, an artifact without a WASM layer is not.
//! Skipped (with a note) when `docker-registry` is not installed; CI installs it.

use ksm_adapter::oci::{self, Credentials, OciError, PullBounds};
use ksm_test_harness::registry::{self, Registry};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{IMAGE_LAYER_MEDIA_TYPE, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};
use oci_client::secrets::RegistryAuth;

/// Starts a registry, or prints why the test is skipped.
fn start_registry(test: &str) -> Option<Registry> {
    if Registry::installed() {
        return Some(Registry::start());
    }
    eprintln!("note: {test} skipped: {} is missing (apt-get install docker-registry)", registry::BINARY);
    None
}

/// Pushes `bytes` as the one layer of `media_type` (config `application/vnd.wasm.config.v1+json`).
async fn push_layer(reference: &str, bytes: &[u8], media_type: &str) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..ClientConfig::default() });
    let layer = ImageLayer::new(bytes.to_vec(), media_type.into(), None);
    let config = Config::new(b"{}".to_vec(), WASM_CONFIG_MEDIA_TYPE.into(), None);
    client
        .push(&reference.parse().unwrap(), &[layer], config, &RegistryAuth::Anonymous, None)
        .await
        .unwrap_or_else(|e| panic!("pushing {reference}: {e}"));
}

#[tokio::test]
async fn pull_accepts_the_older_wasm_layout() {
    let Some(registry) = start_registry("pull_accepts_the_older_wasm_layout") else { return };
    let flux = ksm_adapter::builtin::get("flux").expect("the built-in Flux plugin");
    let reference = format!("{}/plugins/flux-v1-layout:v1", registry.host());
    push_layer(&reference, flux, WASM_LAYER_MEDIA_TYPE).await;

    let pulled = oci::pull(&reference, &Credentials::anonymous(), None, PullBounds::default())
        .await
        .expect("pulling the older layout");
    assert_eq!(pulled.bytes, flux);
    let digest =
        oci::resolve(&reference, &Credentials::anonymous(), oci::RESOLVE_DEADLINE).await.expect("resolving the tag");
    assert_eq!(digest, pulled.manifest_digest);

    let pinned = oci::pin(&reference, &digest).unwrap();
    let by_digest = oci::pull(&pinned, &Credentials::anonymous(), Some(&pulled.sha256), PullBounds::default())
        .await
        .expect("pulling by digest");
    assert_eq!(by_digest, pulled);
}

#[tokio::test]
async fn pull_refuses_an_artifact_without_a_wasm_layer() {
    let Some(registry) = start_registry("pull_refuses_an_artifact_without_a_wasm_layer") else { return };
    let reference = format!("{}/plugins/tarball:v1", registry.host());
    push_layer(&reference, b"not a plugin", IMAGE_LAYER_MEDIA_TYPE).await;

    let error = oci::pull(&reference, &Credentials::anonymous(), None, PullBounds::default()).await.unwrap_err();
    assert!(matches!(error, OciError::Layout { .. }), "{error}");
    assert!(error.to_string().contains(IMAGE_LAYER_MEDIA_TYPE), "{error}");
}
