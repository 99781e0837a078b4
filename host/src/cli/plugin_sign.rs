//! `ksm-adapter plugin sign|keygen`, and the keys of `plugin pull --verify-key`: cosign's
//! key-based signatures of plugins in OCI registries, so that an operator can require them
//! (`spec.source.oci.verify`) without installing cosign.

use super::registry_args::{RegistryArgs, block_on};
use anyhow::{Context, anyhow, bail};
use clap::Args;
use ksm_adapter::oci;
use ksm_adapter::signature::{SigningKey, TrustedKey};
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The password of a private key, read as cosign reads it.
#[derive(Debug, Args)]
pub struct KeyPassword {
    /// The private key's password (empty when unset, as cosign's).
    #[arg(long, env = "COSIGN_PASSWORD", hide_env_values = true, default_value = "")]
    key_password: String,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The pushed plugin, e.g. `ghcr.io/acme/argocd:v1` or `ghcr.io/acme/argocd@sha256:...`: a
    /// tag is resolved to the manifest digest it points to now, and that digest is signed.
    reference: String,
    /// The private key: cosign's encrypted `cosign.key` (from `cosign generate-key-pair` or
    /// `plugin keygen`) or an unencrypted PKCS#8 PEM; ECDSA P-256.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    #[command(flatten)]
    password: KeyPassword,
    /// Signs keyless, as `cosign sign --certificate`: the leaf certificate (PEM) for `--key`,
    /// issued by your CA (Fulcio or an in-house one) for the identity to be verified.
    #[arg(long, value_name = "FILE", requires = "certificate_chain")]
    certificate: Option<PathBuf>,
    /// The certificate's chain (PEM): the intermediates, then the root.
    #[arg(long, value_name = "FILE", requires = "certificate")]
    certificate_chain: Option<PathBuf>,
    /// The Rekor bundle that logs this signature (cosign's `--rekor-response` of `cosign attach
    /// signature`: `SignedEntryTimestamp` and `Payload`); checked to log exactly it. Without
    /// one, verifiers must set `insecureIgnoreTlog`. Signatures are deterministic (RFC 6979), so
    /// the entry can be made for the signature before it is pushed.
    #[arg(long, value_name = "FILE", requires = "certificate")]
    rekor_bundle: Option<PathBuf>,
    /// An annotation of the signed payload, `key=value` (repeatable), as `cosign sign -a`; what
    /// a keyless rule's `annotations` match.
    #[arg(long = "annotation", short = 'a', value_name = "KEY=VALUE", value_parser = annotation)]
    annotations: Vec<(String, String)>,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn annotation(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// The directory to write `cosign.key` and `cosign.pub` to.
    #[arg(long, short = 'o', value_name = "DIR", default_value = ".")]
    output_dir: PathBuf,
    #[command(flatten)]
    password: KeyPassword,
}

/// `plugin sign`: signs the manifest digest `reference` resolves to and pushes the signature
/// beside it; returns the pinned reference, the signature tag and how many signatures it holds.
pub fn sign(args: SignArgs) -> anyhow::Result<Value> {
    let pem = std::fs::read(&args.key).with_context(|| format!("reading {}", args.key.display()))?;
    let key = SigningKey::from_pem(&pem, args.password.key_password.as_bytes())
        .map_err(|e| anyhow!("{}: {e}", args.key.display()))?;
    let credentials = args.registry.credentials(&args.reference)?;
    let digest = block_on(oci::resolve(&args.reference, &credentials, oci::RESOLVE_DEADLINE))?;
    let annotations = args.annotations.iter().cloned().collect();
    let mut signature =
        key.sign(&oci::repository(&args.reference)?, &digest, &annotations).map_err(|e| anyhow!("{e}"))?;
    if let (Some(certificate), Some(chain)) = (&args.certificate, &args.certificate_chain) {
        let read =
            |path: &PathBuf| std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()));
        let bundle = args.rekor_bundle.as_ref().map(read).transpose()?;
        signature
            .attach_certificate(&read(certificate)?, &read(chain)?, bundle.as_deref())
            .map_err(|e| anyhow!("{}: {e}", certificate.display()))?;
    }
    let (tag, count) = block_on(oci::push_signature(&args.reference, &digest, &signature, &credentials))?;
    Ok(json!({ "reference": oci::pin(&args.reference, &digest)?, "signature": tag, "signatures": count }))
}

/// `plugin keygen`: a new key pair, `cosign.key` (private, mode 0600) and `cosign.pub`, never
/// over existing files; returns their paths.
pub fn keygen(args: KeygenArgs) -> anyhow::Result<Value> {
    let (private, public) = SigningKey::generate(args.password.key_password.as_bytes()).map_err(|e| anyhow!("{e}"))?;
    let (private_path, public_path) = (args.output_dir.join("cosign.key"), args.output_dir.join("cosign.pub"));
    for path in [&private_path, &public_path] {
        if path.exists() {
            bail!("{} exists: refusing to overwrite a key", path.display());
        }
    }
    write_new(&private_path, private.as_bytes(), 0o600)?;
    write_new(&public_path, public.as_bytes(), 0o644)?;
    Ok(json!({ "privateKey": private_path, "publicKey": public_path }))
}

/// Writes a file that must not exist yet, with `mode`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("writing {}", path.display()))
}

/// The public keys in `paths` (PEM, as `cosign.pub`), each named by its file.
pub fn trusted_keys(paths: &[PathBuf]) -> anyhow::Result<Vec<TrustedKey>> {
    paths
        .iter()
        .map(|path| {
            let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            TrustedKey::from_pem(path.display().to_string(), &pem).map_err(|e| anyhow!("{e}"))
        })
        .collect()
}
