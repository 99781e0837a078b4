//! WASM plugins in OCI registries: pull (with sha256 verification), resolve a tag, push; and
//! their cosign signatures: read and verified before anything is compiled, pushed by `plugin
//! sign` (the format is [`crate::signature`]'s).
//!
//! Two layouts are accepted on pull: the CNCF TAG-Runtime wasm artifact (layer
//! `application/wasm`) and the older wasm-to-oci one (layer
//! `application/vnd.wasm.content.layer.v1+wasm`); push writes the CNCF one. Transient failures
//! (connection errors, 429, 5xx) are retried with backoff; plain HTTP is used only for registries
//! on `localhost` or `127.0.0.1`. Each operation a plugin load waits for (pull, resolve, reading
//! signatures) has one deadline for the whole of it, retries included: the client's timeouts
//! bound each connect and each read, and a registry that sends a byte now and then passes them.

use std::time::Duration;

use crate::retry;
use crate::signature::{self, Policy, SIMPLE_SIGNING_MEDIA_TYPE, StoredSignature, Verified};
use base64::Engine as _;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest, WASM_LAYER_MEDIA_TYPE};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Layer media type of the CNCF wasm artifact layout.
pub const CNCF_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Config media type of the CNCF wasm artifact layout.
pub const CNCF_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

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
/// How long reading the signatures of a digest (their manifest and every payload) may take,
/// retries included.
pub const SIGNATURES_DEADLINE: Duration = Duration::from_secs(60);

/// Registries reached over plain HTTP.
const PLAIN_HTTP_HOSTS: [&str; 2] = ["localhost", "127.0.0.1"];

/// What went wrong talking to a registry, naming the reference and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse.
    #[error("invalid OCI reference {reference:?}: {reason}")]
    InvalidReference { reference: String, reason: String },
    /// The `.dockerconfigjson` is malformed.
    #[error("invalid .dockerconfigjson for registry {registry}: {reason}: check the pull secret")]
    DockerConfig { registry: String, reason: String },
    /// 401 or 403.
    #[error(
        "registry answered {status} for {reference}: check the credentials (the pullSecret, or --username/--password/--docker-config)"
    )]
    Denied { reference: String, status: u16 },
    /// 404: no such repository, tag or digest.
    #[error("{reference} not found in the registry: check the repository and tag ({message})")]
    NotFound { reference: String, message: String },
    /// The artifact is not exactly one WASM layer.
    #[error("{reference} is not a WASM plugin artifact: {reason}")]
    Layout {
        reference: String,
        #[source]
        reason: Layout,
    },
    /// Content does not match its digest.
    #[error(
        "{what} mismatch for {reference}: expected {expected}, got {actual}: the artifact changed or the pinned digest is wrong"
    )]
    DigestMismatch { reference: String, what: &'static str, expected: String, actual: String },
    /// Connection error, timeout, 429 or 5xx, still failing after retries.
    #[error(
        "registry unavailable for {reference} after {attempts} attempts: {message}: check that the registry is reachable"
    )]
    Unavailable { reference: String, attempts: usize, message: String },
    /// The layer is larger than the pull may take.
    #[error("{reference} is at least {size} bytes, over the limit of {limit} bytes for a plugin component")]
    TooLarge { reference: String, size: u64, limit: u64 },
    /// An operation (pulling, resolving, reading the signatures of) did not finish in time.
    #[error(
        "{operation} {reference} did not finish within {deadline:?}: check that the registry is reachable and answers"
    )]
    TimedOut { operation: &'static str, reference: String, deadline: Duration },
    /// Any other registry error.
    #[error("registry error for {reference}: {message}")]
    Registry { reference: String, message: String },
    /// No signature by a trusted key or identity for the manifest digest.
    #[error("{reference} is not signed by a trusted signer: {reason}")]
    Unverified { reference: String, reason: signature::Unverified },
}

/// Why an artifact is not a plugin: a plugin artifact is exactly one WASM layer.
#[derive(Debug, thiserror::Error)]
pub enum Layout {
    /// No layer is WASM.
    #[error(
        "no layer of media type {CNCF_LAYER_MEDIA_TYPE} or {WASM_LAYER_MEDIA_TYPE} (config {config}; layers: {found:?})"
    )]
    NoWasmLayer {
        /// The config's media type.
        config: String,
        /// The layers' media types.
        found: Vec<String>,
    },
    /// Several layers are.
    #[error("{0} WASM layers; a plugin artifact has exactly one")]
    SeveralWasmLayers(usize),
    /// A multi-platform image.
    #[error("it is an image index (multi-platform image), not a single WASM artifact")]
    ImageIndex,
}

impl OciError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Registry credentials: anonymous or HTTP basic auth. `Debug` does not show the password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    basic: Option<(String, String)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.basic {
            Some((username, _)) => write!(f, "Credentials::Basic({username:?}, <redacted>)"),
            None => f.write_str("Credentials::Anonymous"),
        }
    }
}

impl Credentials {
    /// No credentials.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// HTTP basic auth.
    pub fn basic(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self { basic: Some((username.into(), password.into())) }
    }

    /// The credentials for `registry` (e.g. `ghcr.io`, `127.0.0.1:5000`) in the `.dockerconfigjson`
    /// of a `kubernetes.io/dockerconfigjson` Secret: `auths.<registry>.auth` (base64
    /// `user:pass`) or `username`/`password`. A registry not in the file is anonymous.
    pub fn from_dockerconfigjson(bytes: &[u8], registry: &str) -> Result<Self, OciError> {
        #[derive(Deserialize)]
        struct DockerConfig {
            #[serde(default)]
            auths: std::collections::BTreeMap<String, Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            auth: Option<String>,
            username: Option<String>,
            password: Option<String>,
        }
        let invalid = |reason: String| OciError::DockerConfig { registry: registry.to_string(), reason };
        // serde's messages quote the values they met ("invalid type: string \"hunter2\""):
        // only the kind of error and where it is may reach a status or a log.
        let config: DockerConfig = serde_json::from_slice(bytes).map_err(|e| {
            invalid(format!(
                "not a Docker config ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        let wanted = normalize_registry(registry);
        let Some(entry) = config.auths.into_iter().find_map(|(k, v)| (normalize_registry(&k) == wanted).then_some(v))
        else {
            return Ok(Self::anonymous());
        };
        if let (Some(username), Some(password)) = (entry.username, entry.password) {
            return Ok(Self::basic(username, password));
        }
        let Some(auth) = entry.auth else {
            return Err(invalid("the entry has neither `auth` nor `username` and `password`".into()));
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| invalid("`auth` is not base64".into()))?;
        let decoded = String::from_utf8(decoded).map_err(|_| invalid("`auth` is not UTF-8".into()))?;
        let (username, password) =
            decoded.split_once(':').ok_or_else(|| invalid("`auth` is not base64 of `user:password`".into()))?;
        Ok(Self::basic(username, password))
    }

    fn auth(&self) -> RegistryAuth {
        match &self.basic {
            Some((username, password)) => RegistryAuth::Basic(username.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// `auths` keys may be URLs (`https://index.docker.io/v1/`); Docker Hub has several names.
fn normalize_registry(key: &str) -> &str {
    let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    match key.split('/').next().unwrap_or(key) {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        host => host,
    }
}

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

/// The registry of `reference` (e.g. `ghcr.io`), as keyed in a `.dockerconfigjson`.
pub fn registry(reference: &str) -> Result<String, OciError> {
    Ok(parse(reference)?.registry().to_string())
}

/// `reference` pinned to `digest`: `<registry>/<repository>@<digest>` (any tag dropped).
pub fn pin(reference: &str, digest: &str) -> Result<String, OciError> {
    Ok(parse(reference)?.clone_with_digest(digest.to_string()).to_string())
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

/// A download sink that refuses to grow past `limit` bytes.
struct Capped {
    bytes: Vec<u8>,
    limit: u64,
    /// The size it would have grown to, when it refused.
    refused: Option<u64>,
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let size = self.bytes.len() as u64 + buf.len() as u64;
        if size > self.limit {
            self.refused = Some(size);
            return std::task::Poll::Ready(Err(std::io::Error::other("the layer exceeds the size limit")));
        }
        self.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
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

/// `registry/repository` of `reference`: what a signature's payload names as
/// `docker-reference`, as cosign writes it.
pub fn repository(reference: &str) -> Result<String, OciError> {
    let image = parse(reference)?;
    Ok(format!("{}/{}", image.registry(), image.repository()))
}

fn parse(reference: &str) -> Result<Reference, OciError> {
    reference.parse().map_err(|e: oci_client::ParseError| OciError::InvalidReference {
        reference: reference.into(),
        reason: e.to_string(),
    })
}

/// A client for `image`'s registry: HTTPS, or plain HTTP for a loopback registry.
fn client(image: &Reference, reference: &str) -> Result<Client, OciError> {
    // reqwest is built without a rustls crypto provider: use ring, as kube does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = image.resolve_registry();
    let host = registry.rsplit_once(':').map_or(registry, |(host, _port)| host);
    let plain_http = if PLAIN_HTTP_HOSTS.contains(&host) { vec![registry.to_string()] } else { Vec::new() };
    let config = ClientConfig {
        protocol: ClientProtocol::HttpsExcept(plain_http),
        // An image index (multi-platform image) is not a plugin: no platform resolution.
        platform_resolver: None,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|e| classify(reference, e))
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

/// `attempts`, the whole of `operation` on `reference`, given up once it runs past `deadline`.
async fn within<T>(
    operation: &'static str,
    reference: &str,
    deadline: Duration,
    attempts: impl Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    let timed_out = |_| OciError::TimedOut { operation, reference: reference.into(), deadline };
    tokio::time::timeout(deadline, attempts).await.map_err(timed_out)?
}

/// Runs `op` until it succeeds, fails permanently, or the [`retry::REGISTRY`] retries run out.
async fn with_retry<T, F, Fut>(reference: &str, op: F) -> Result<T, OciError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, OciError>>,
{
    let notify = |error: &OciError, wait| tracing::debug!(reference, %error, ?wait, "retrying a registry operation");
    match retry::REGISTRY.retry(op, OciError::is_transient, notify).await {
        Err(OciError::Unavailable { reference, message, .. }) => {
            let attempts = retry::REGISTRY.retries().unwrap_or_default() + 1;
            Err(OciError::Unavailable { reference, attempts, message })
        }
        result => result,
    }
}

/// Turns a registry client error into an [`OciError`] for `reference`.
fn classify(reference: &str, error: OciDistributionError) -> OciError {
    let reference = reference.to_string();
    let by_status = |status: u16, message: String| match status {
        401 | 403 => OciError::Denied { reference: reference.clone(), status },
        404 => OciError::NotFound { reference: reference.clone(), message },
        429 | 500..=599 => OciError::Unavailable { reference: reference.clone(), attempts: 1, message },
        _ => OciError::Registry { reference: reference.clone(), message: format!("HTTP {status}: {message}") },
    };
    match error {
        OciDistributionError::UnauthorizedError { .. } => by_status(401, String::new()),
        OciDistributionError::ServerError { code, message, .. } => by_status(code, message),
        OciDistributionError::RegistryError { envelope, .. } => {
            let status = match envelope.errors.first().map(|e| &e.code) {
                Some(OciErrorCode::Unauthorized) => 401,
                Some(OciErrorCode::Denied) => 403,
                Some(
                    OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::BlobUnknown
                    | OciErrorCode::NotFound,
                ) => 404,
                Some(OciErrorCode::Toomanyrequests) => 429,
                _ => 400,
            };
            by_status(status, envelope.to_string())
        }
        OciDistributionError::RequestError(e) => match e.status() {
            Some(status) => by_status(status.as_u16(), e.to_string()),
            // No answer: connection refused or reset, timeout, body cut short.
            None => OciError::Unavailable { reference, attempts: 1, message: with_sources(&e) },
        },
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError { expected, actual }) => {
            OciError::DigestMismatch { reference, what: "content digest", expected, actual }
        }
        OciDistributionError::ImageIndexParsingNoPlatformResolverError => {
            OciError::Layout { reference, reason: Layout::ImageIndex }
        }
        other => OciError::Registry { reference, message: other.to_string() },
    }
}

/// `error: its source: ...` (reqwest hides the cause, e.g. "connection refused", in sources).
fn with_sources(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A registry that answers every request with a header that never ends, one byte every
    /// 50 ms: each read gets something long before the client's read timeout.
    async fn trickling_registry() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut request, mut buffer) = (Vec::new(), [0; 1024]);
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match connection.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let mut sent = connection.write_all(b"HTTP/1.1 200 OK\r\nX-Trickle: ").await;
                    while sent.is_ok() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        sent = connection.write_all(b"a").await;
                    }
                });
            }
        });
        address.to_string()
    }

    #[tokio::test]
    async fn a_registry_that_trickles_is_given_up_at_the_deadline_of_each_operation() {
        let registry = trickling_registry().await;
        let reference = format!("{registry}/plugins/flux:v1");
        let digest = format!("sha256:{}", "0".repeat(64));
        let (anonymous, deadline) = (Credentials::anonymous(), Duration::from_millis(500));
        // Without a deadline of their own, both would wait as long as the registry trickles.
        let guard = Duration::from_secs(10);
        let resolved = tokio::time::timeout(guard, resolve(&reference, &anonymous, deadline)).await;
        let error = resolved.expect("resolving gives up at its deadline").unwrap_err();
        assert!(matches!(error, OciError::TimedOut { operation: "resolving", .. }), "{error}");
        assert_eq!(
            error.to_string(),
            format!(
                "resolving {reference} did not finish within 500ms: check that the registry is reachable and answers"
            )
        );
        let verified = tokio::time::timeout(
            guard,
            verify(&reference, &digest, &anonymous, &Policy { keys: vec![], keyless: None }, deadline),
        )
        .await;
        let error = verified.expect("reading the signatures gives up at its deadline").unwrap_err();
        let pinned = format!("{registry}/plugins/flux@{digest}");
        assert!(
            error.to_string().starts_with(&format!("reading the signatures of {pinned} did not finish within 500ms")),
            "{error}"
        );
    }

    #[test]
    fn a_download_sink_refuses_to_grow_past_its_limit() {
        use tokio::io::AsyncWriteExt;
        let mut sink = Capped { bytes: Vec::new(), limit: 10, refused: None };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            sink.write_all(b"0123456789").await.unwrap();
            assert!(sink.write_all(b"x").await.is_err());
        });
        assert_eq!((sink.bytes.len(), sink.refused), (10, Some(11)));
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
    fn dockerconfigjson_auth_and_username_password() {
        let auth = base64::engine::general_purpose::STANDARD.encode("bot:s3cr:et");
        let json = format!(
            r#"{{"auths": {{"https://ghcr.io/v1/": {{"auth": "{auth}"}},
                "127.0.0.1:5000": {{"username": "u", "password": "p"}},
                "https://index.docker.io/v1/": {{"auth": "{auth}"}}}}}}"#
        );
        let creds = |registry| Credentials::from_dockerconfigjson(json.as_bytes(), registry).unwrap();
        assert_eq!(creds("ghcr.io"), Credentials::basic("bot", "s3cr:et"));
        assert_eq!(creds("127.0.0.1:5000"), Credentials::basic("u", "p"));
        assert_eq!(creds("docker.io"), Credentials::basic("bot", "s3cr:et"));
        assert_eq!(creds("quay.io"), Credentials::anonymous());
        assert!(!format!("{:?}", creds("ghcr.io")).contains("s3cr"), "Debug hides the password");
    }

    #[test]
    fn dockerconfigjson_errors_name_the_registry() {
        let bad = [r#"{"auths": {"r.io": {"auth": "%%%"}}}"#, r#"{"auths": {"r.io": {}}}"#, "not json"];
        for json in bad {
            let error = Credentials::from_dockerconfigjson(json.as_bytes(), "r.io").unwrap_err();
            assert!(matches!(error, OciError::DockerConfig { .. }), "{json}: {error}");
            assert!(error.to_string().contains("r.io"), "{error}");
        }
    }

    #[test]
    fn a_malformed_dockerconfigjson_never_echoes_its_secrets() {
        let bad = [
            r#"{"auths": {"r.io": "hunter2-token"}}"#,
            r#"{"auths": {"r.io": {"auth": "hunter2-token!"}}}"#,
            r#"{"auths": {"r.io": {"auth": ["hunter2-token"]}}}"#,
            r#"{"auths": {"r.io": {"password": 7, "username": "hunter2-token"}}}"#,
            r#"{"auths": "hunter2-token"}"#,
        ];
        for json in bad {
            let error = Credentials::from_dockerconfigjson(json.as_bytes(), "r.io").unwrap_err().to_string();
            assert!(!error.contains("hunter2"), "{json}: {error}");
            assert!(error.contains("r.io"), "{error}");
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

    #[test]
    fn references() {
        assert_eq!(registry("127.0.0.1:5000/plugins/flux:v1").unwrap(), "127.0.0.1:5000");
        assert_eq!(pin("ghcr.io/k0rdent/flux:v1", "sha256:ab").unwrap(), "ghcr.io/k0rdent/flux@sha256:ab");
        assert!(matches!(registry("UPPER/Case"), Err(OciError::InvalidReference { .. })));
    }
}
