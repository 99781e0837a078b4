//! What every registry operation shares: the client for a reference's registry, the errors it
//! turns the registry's answers into, references, retries and deadlines, and a bounded download.

use std::time::Duration;

use crate::retry;
use crate::signature;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::WASM_LAYER_MEDIA_TYPE;
use oci_client::{Client, Reference};

/// Layer media type of the CNCF wasm artifact layout.
pub const CNCF_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Config media type of the CNCF wasm artifact layout.
pub const CNCF_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

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
    pub(super) fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// The registry of `reference` (e.g. `ghcr.io`), as keyed in a `.dockerconfigjson`.
pub fn registry(reference: &str) -> Result<String, OciError> {
    Ok(parse(reference)?.registry().to_string())
}

/// `reference` pinned to `digest`: `<registry>/<repository>@<digest>` (any tag dropped).
pub fn pin(reference: &str, digest: &str) -> Result<String, OciError> {
    Ok(parse(reference)?.clone_with_digest(digest.to_string()).to_string())
}

/// `registry/repository` of `reference`: what a signature's payload names as
/// `docker-reference`, as cosign writes it.
pub fn repository(reference: &str) -> Result<String, OciError> {
    let image = parse(reference)?;
    Ok(format!("{}/{}", image.registry(), image.repository()))
}

pub(super) fn parse(reference: &str) -> Result<Reference, OciError> {
    reference.parse().map_err(|e: oci_client::ParseError| OciError::InvalidReference {
        reference: reference.into(),
        reason: e.to_string(),
    })
}

/// A client for `image`'s registry: HTTPS, or plain HTTP for a loopback registry.
pub(super) fn client(image: &Reference, reference: &str) -> Result<Client, OciError> {
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

/// `attempts`, the whole of `operation` on `reference`, given up once it runs past `deadline`.
pub(super) async fn within<T>(
    operation: &'static str,
    reference: &str,
    deadline: Duration,
    attempts: impl Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    let timed_out = |_| OciError::TimedOut { operation, reference: reference.into(), deadline };
    tokio::time::timeout(deadline, attempts).await.map_err(timed_out)?
}

/// Runs `op` until it succeeds, fails permanently, or the [`retry::REGISTRY`] retries run out.
pub(super) async fn with_retry<T, F, Fut>(reference: &str, op: F) -> Result<T, OciError>
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
pub(super) fn classify(reference: &str, error: OciDistributionError) -> OciError {
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

/// A download sink that refuses to grow past `limit` bytes.
pub(super) struct Capped {
    pub(super) bytes: Vec<u8>,
    pub(super) limit: u64,
    /// The size it would have grown to, when it refused.
    pub(super) refused: Option<u64>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::{Credentials, resolve, verify};
    use crate::signature::Policy;

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

    #[test]
    fn references() {
        assert_eq!(registry("127.0.0.1:5000/plugins/flux:v1").unwrap(), "127.0.0.1:5000");
        assert_eq!(pin("ghcr.io/k0rdent/flux:v1", "sha256:ab").unwrap(), "ghcr.io/k0rdent/flux@sha256:ab");
        assert!(matches!(registry("UPPER/Case"), Err(OciError::InvalidReference { .. })));
    }
}
