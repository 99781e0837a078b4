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
//!
//! - [`client`]: what every operation shares: the client for a reference's registry, the
//!   errors, references, retries and deadlines;
//! - [`credentials`]: anonymous or basic auth, read from a `.dockerconfigjson`;
//! - [`pull`]: pulling a plugin and resolving a tag;
//! - [`push`]: pushing a plugin;
//! - [`signatures`]: reading and verifying a digest's cosign signatures, and adding one.

mod client;
mod credentials;
mod pull;
mod push;
mod signatures;

pub use client::{CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE, Layout, OciError, pin, registry, repository};
pub use credentials::Credentials;
pub use pull::{PullBounds, Pulled, RESOLVE_DEADLINE, pull, resolve};
pub use push::push;
pub use signatures::{SIGNATURES_DEADLINE, push_signature, verify};
