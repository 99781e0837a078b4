//! `ksm-adapter plugin ...`: run a plugin offline on YAML files; push, pull and sign plugins in
//! OCI registries.

use super::plugin_args::{ConfigArgs, LimitArgs, PluginArgs, load, plugin_bytes};
use super::registry_args::{RegistryArgs, block_on};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use ksm_adapter::manifests::{Document, Manifests};
use ksm_adapter::oci;
use ksm_adapter::plan::{self, ServiceOutcome, TranslateFailure, TranslatedService};
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::Plugin;
use ksm_adapter::runtime::Runtime;
use ksm_adapter::serving::ServingPlugin;
use ksm_plugin_sdk::{k0rdent, report};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Shows a plugin's metadata, contract version, imports, size and sha256.
    Inspect {
        /// `builtin:flux` or the path of a `.wasm` component.
        plugin: String,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Prints the objects a plugin would create for the ServiceSets in the files, per service.
    Translate(RunArgs),
    /// Prints each service's state, given the ServiceSets, their templates and the observed
    /// CD-tool objects (e.g. HelmReleases with status) in the files.
    Status(RunArgs),
    /// Pushes a plugin to an OCI registry, once it loads as a plugin.
    ///
    /// The artifact is a CNCF wasm artifact: config `application/vnd.wasm.config.v0+json` and one
    /// `application/wasm` layer; the same bytes always give the same manifest digest. Prints the
    /// reference pinned by that digest (`<repository>@sha256:...`, what an AdapterPlugin should
    /// name) and the layer's sha256.
    Push {
        /// `builtin:flux` or the path of a `.wasm` component.
        plugin: String,
        /// Where to push, e.g. `ghcr.io/acme/flux-plugin:v1`. Plain HTTP is used only for
        /// registries on localhost or 127.0.0.1.
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pulls a plugin from an OCI registry and writes its component to a file.
    ///
    /// Accepts the CNCF layout (layer `application/wasm`) and the older wasm-to-oci one (layer
    /// `application/vnd.wasm.content.layer.v1+wasm`). The layer is verified against its
    /// descriptor, the manifest against a `@sha256:` reference, and the bytes against `--sha256`;
    /// with `--verify-key`, the manifest digest must carry a cosign signature by one of the keys;
    /// it is written only if it loads as a plugin. Prints the manifest digest and the sha256.
    Pull {
        /// What to pull, e.g. `ghcr.io/acme/flux-plugin:v1` or `ghcr.io/acme/flux-plugin@sha256:...`.
        reference: String,
        /// The file to write the component to.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: PathBuf,
        /// The sha256 the component must have (hex, optionally `sha256:`-prefixed), as printed by
        /// `push` and `inspect`.
        #[arg(long)]
        sha256: Option<String>,
        /// Largest component to download, in KiB (checked against the manifest before
        /// downloading); the controller uses the default.
        #[arg(long, default_value_t = oci::PullBounds::default().size >> 10)]
        max_kib: u64,
        /// A public key (PEM, as `cosign.pub`; repeatable): nothing is written unless the pulled
        /// manifest digest has a signature by one of them under its `sha256-<hex>.sig` tag, as
        /// `cosign sign --key` and `plugin sign` store it. What `spec.source.oci.verify` checks.
        #[arg(long, value_name = "FILE")]
        verify_key: Vec<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Signs a pushed plugin with a private key, as `cosign sign --key` does.
    ///
    /// Signs the manifest digest the reference points to (a simple-signing payload naming it)
    /// and pushes the signature to the same repository under the tag `sha256-<hex>.sig`,
    /// beside the signatures already there. `cosign verify --key`, `plugin pull --verify-key`
    /// and an AdapterPlugin whose `spec.source.oci.verify` lists the public key accept it.
    /// With `--certificate` and `--certificate-chain` (and `--rekor-bundle`), the signature is
    /// keyless, as `cosign sign --certificate` stores it: what `spec.source.oci.verify.keyless`
    /// accepts for the certificate's identity. Prints the pinned reference, the signature tag
    /// and how many signatures it holds.
    Sign(super::plugin_sign::SignArgs),
    /// Writes a new signing key pair, as `cosign generate-key-pair` does.
    ///
    /// `cosign.key`: the ECDSA P-256 private key, encrypted with the password from
    /// `COSIGN_PASSWORD` (empty when unset), mode 0600, for `plugin sign --key`. `cosign.pub`:
    /// the public key, for `spec.source.oci.verify` and `plugin pull --verify-key`. Existing
    /// files are never overwritten.
    Keygen(super::plugin_sign::KeygenArgs),
    /// Runs the conformance suite: checks a plugin against the contract's invariants and its
    /// golden cases.
    ///
    /// Runs the plugin on the built-in, plugin-independent fixtures (tests/conformance) and on its
    /// own golden cases (`--fixtures`). Prints one line per check per case; exits non-zero when
    /// any check fails. See docs/plugins.md.
    Test(super::conformance::TestArgs),
    /// Creates a plugin project (Rust or JavaScript) that passes `plugin test` as generated.
    ///
    /// The plugin turns each service into one ConfigMap carrying its values and rejects unknown
    /// config fields: trivial, but contract-correct. See docs/plugins.md.
    New(super::scaffold::NewArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// YAML/JSON files or directories holding ServiceSets, ServiceTemplates and observed objects.
    #[arg(long = "filename", short = 'f', required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    plugin: PluginArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

pub fn run(command: PluginCommand) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::new()?;
    match command {
        PluginCommand::Inspect { plugin, limits } => {
            let plugin = load(&runtime, &plugin, limits.limits())?;
            let info = plugin.info();
            print_yaml(&json!({
                "metadata": plugin.metadata(),
                "component": {
                    "size": info.size,
                    "sha256": info.sha256,
                    "imports": info.imports,
                    "exports": info.exports,
                },
            }))?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Translate(args) => for_each_service_set(&runtime, &args, |_, _, ss, result| {
            Ok(match result {
                Ok(services) => {
                    json!({ "serviceSet": ss.key(), "services": services.iter().map(render).collect::<Vec<_>>() })
                }
                Err(failure) => json!({ "serviceSet": ss.key(), "error": failure_report(failure) }),
            })
        }),
        PluginCommand::Status(args) => for_each_service_set(&runtime, &args, |serving, manifests, ss, result| {
            let services = match result {
                Err(failure) => {
                    return Ok(json!({ "serviceSet": ss.key(), "error": failure_report(failure) }));
                }
                Ok(services) => services,
            };
            let spec: k0rdent::ServiceSetSpec = serde_json::from_value(ss.object["spec"].clone())?;
            let mut states = Vec::new();
            // As the controller does: map-status reads the config translate read.
            let json = serving.input_of(&ss.object).to_string();
            let plugin = serving.plugin.as_ref();
            for (translated, service) in services.iter().zip(&spec.services) {
                let template = manifests.template(ss.namespace(), &service.template).map(|d| &d.object);
                let observe =
                    |a: &str, k: &str, ns: &str, n: &str| manifests.find(a, k, ns, n).map(|d| d.object.clone());
                let related = |owner: &Value| {
                    plan::reads::owned_by(
                        &plugin.metadata().reads,
                        owner,
                        manifests.documents.iter().map(|d| &d.object),
                    )
                };
                let status = plan::service_status(plugin, &json, template, translated, observe, related)?;
                states.push(report::status(&translated.service, &status));
            }
            Ok(json!({ "serviceSet": ss.key(), "services": states }))
        }),
        PluginCommand::Push { plugin, reference, registry } => {
            let bytes = plugin_bytes(&plugin)?;
            let sha256 = runtime
                .load(&bytes, Limits::default())
                .with_context(|| format!("refusing to push {plugin}: it does not load as a plugin"))?
                .info()
                .sha256
                .clone();
            let digest = block_on(oci::push(&bytes, &reference, &registry.credentials(&reference)?))?;
            print_yaml(&json!({ "reference": oci::pin(&reference, &digest)?, "sha256": sha256 }))?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Pull { reference, output, sha256, max_kib, verify_key, registry } => {
            let credentials = registry.credentials(&reference)?;
            let keys = super::plugin_sign::trusted_keys(&verify_key)?;
            let bounds = oci::PullBounds { size: max_kib << 10, ..Default::default() };
            let pulled = block_on(oci::pull(&reference, &credentials, sha256.as_deref(), bounds))?;
            let verified_by = if keys.is_empty() {
                None
            } else {
                Some(block_on(oci::verify(
                    &reference,
                    &pulled.manifest_digest,
                    &credentials,
                    &ksm_adapter::signature::Policy { keys, keyless: None },
                    oci::SIGNATURES_DEADLINE,
                ))?)
            };
            runtime
                .load(&pulled.bytes, Limits::default())
                .with_context(|| format!("{reference} does not load as a plugin; nothing written"))?;
            std::fs::write(&output, &pulled.bytes).with_context(|| format!("writing {}", output.display()))?;
            let mut printed = json!({
                "reference": oci::pin(&reference, &pulled.manifest_digest)?,
                "sha256": pulled.sha256,
                "size": pulled.bytes.len(),
                "output": output,
            });
            if let Some(verified) = verified_by {
                printed["signedBy"] = json!(verified.to_string());
            }
            print_yaml(&printed)?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Sign(args) => {
            print_yaml(&super::plugin_sign::sign(args)?)?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Keygen(args) => {
            print_yaml(&super::plugin_sign::keygen(args)?)?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Test(args) => super::conformance::run(&runtime, args),
        PluginCommand::New(args) => super::scaffold::run(args),
    }
}

/// Translates every ServiceSet in the files and prints what `report` makes of each, as a YAML
/// stream. Exits non-zero when the files hold no ServiceSet.
fn for_each_service_set(
    runtime: &Runtime,
    args: &RunArgs,
    report: impl Fn(
        &ServingPlugin,
        &Manifests,
        &Document,
        Result<Vec<TranslatedService>, TranslateFailure>,
    ) -> anyhow::Result<Value>,
) -> anyhow::Result<ExitCode> {
    let plugin = args.config.serving(Arc::new(load(runtime, &args.plugin.plugin, args.plugin.limits.limits())?));
    let manifests = Manifests::read(&args.files)?;
    let mut found = false;
    for ss in manifests.k0rdent("ServiceSet") {
        found = true;
        let result = plan::translate(
            &plugin,
            None,
            &ss.object,
            |name| manifests.template(ss.namespace(), name).map(|d| d.object.clone()),
            |source| manifests.source(source),
            args.plugin.tenancy.tenancy(),
        );
        let out = report(&plugin, &manifests, ss, result)
            .with_context(|| format!("ServiceSet {} ({})", ss.key(), ss.origin))?;
        print_yaml(&out)?;
    }
    if !found {
        bail!("no ServiceSet ({}) in {:?}", k0rdent::API_VERSION, args.files);
    }
    Ok(ExitCode::SUCCESS)
}

/// Renders one service's translation as the golden files do.
fn render(t: &TranslatedService) -> Value {
    let held = |kind: &str, state: &str, message: &str| json!({ "kind": kind, "state": state, "message": message });
    let mut rendered = match &t.outcome {
        ServiceOutcome::Objects(objects) => json!({ "service": t.service, "objects": objects }),
        ServiceOutcome::Error(error) => {
            json!({ "service": t.service, "error": report::service_error(error) })
        }
        ServiceOutcome::Refused(message) => {
            json!({ "service": t.service, "error": held("Refused", "Failed", message) })
        }
        ServiceOutcome::Conflict(message) => {
            json!({ "service": t.service, "error": held("Conflict", "Failed", message) })
        }
        ServiceOutcome::Taken(message) => {
            json!({ "service": t.service, "error": held("Taken", "Failed", message) })
        }
        ServiceOutcome::Waiting(message) => {
            json!({ "service": t.service, "error": held("Waiting", "Pending", message) })
        }
    };
    if !t.claims.is_empty() {
        rendered["claims"] = json!(t.claims.iter().map(ToString::to_string).collect::<Vec<_>>());
    }
    rendered
}

fn failure_report(failure: TranslateFailure) -> Value {
    match failure {
        TranslateFailure::Rejected(error) => report::translation(&Err(error))["error"].clone(),
        other => json!({ "kind": "Failed", "message": other.to_string() }),
    }
}

/// Prints `value` as one YAML document (I/O errors such as a closed pipe are returned).
pub fn print_yaml(value: &Value) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    write!(out, "---\n{}", serde_norway::to_string(value)?)?;
    out.flush()?;
    Ok(())
}
