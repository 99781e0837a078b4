//! `ksm-adapter plugin push/pull`: the real binary against a real registry on loopback
//! (`docker-registry`, see [`ksm_test_harness::registry`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ksm_test_harness::adapter::{binary, run_command};
use ksm_test_harness::registry::Registry;
use serde_json::Value;

/// A fresh directory for one test's files.
fn workdir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("ksm-e2e").join(format!("oci-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// The YAML document a command printed.
fn printed(output: &Output) -> Value {
    serde_norway::from_slice(&output.stdout).expect("the command prints YAML")
}

/// Runs `ksm-adapter <args>` with no registry credentials from the environment, expecting it to
/// fail; returns its stderr.
fn failing(args: &[&str]) -> String {
    let output = Command::new(binary())
        .args(args)
        .env_remove("KSM_REGISTRY_USERNAME")
        .env_remove("KSM_REGISTRY_PASSWORD")
        .output()
        .expect("running ksm-adapter");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "ksm-adapter {} succeeded; stderr:\n{stderr}", args.join(" "));
    stderr
}

/// The sha256 `plugin inspect` reports for `plugin` (`builtin:flux` or a file).
fn inspected_sha256(plugin: &str) -> String {
    printed(&run_command(&["plugin", "inspect", plugin]))["component"]["sha256"].as_str().expect("a sha256").to_string()
}

/// `plugin push builtin:flux <reference> <extra>`: the pinned reference and the sha256 printed.
fn push_flux(reference: &str, extra: &[&str]) -> (String, String) {
    let out = printed(&run_command(&[&["plugin", "push", "builtin:flux", reference], extra].concat()));
    (out["reference"].as_str().expect("a reference").into(), out["sha256"].as_str().expect("a sha256").into())
}

/// `plugin pull <reference> -o <output> <extra>`: what it printed.
fn pull(reference: &str, output: &Path, extra: &[&str]) -> Value {
    let output = output.to_str().expect("a UTF-8 path");
    printed(&run_command(&[&["plugin", "pull", reference, "-o", output], extra].concat()))
}

#[test]
fn push_then_pull_by_tag_and_by_digest() {
    let registry = Registry::start();
    let dir = workdir("push-pull");
    let flux = inspected_sha256("builtin:flux");
    let tag = format!("{}/plugins/flux:v1", registry.host());

    let (pinned, sha256) = push_flux(&tag, &[]);
    assert_eq!(sha256, flux, "push reports the layer's sha256");
    assert!(pinned.starts_with(&format!("{}/plugins/flux@sha256:", registry.host())), "{pinned}");
    assert_eq!(push_flux(&tag, &[]).0, pinned, "the same bytes give the same manifest digest");

    let by_tag = dir.join("by-tag.wasm");
    let out = pull(&tag, &by_tag, &[]);
    assert_eq!(out["sha256"], flux.as_str());
    assert_eq!(out["reference"], pinned.as_str(), "pull by tag reports the manifest digest");
    assert_eq!(inspected_sha256(by_tag.to_str().unwrap()), flux, "the pulled file is the Flux plugin");

    let by_digest = dir.join("by-digest.wasm");
    let out = pull(&pinned, &by_digest, &["--sha256", &format!("sha256:{flux}")]);
    assert_eq!(out["sha256"], flux.as_str());
    assert_eq!(std::fs::read(&by_digest).unwrap(), std::fs::read(&by_tag).unwrap());
}

#[test]
fn pull_with_a_wrong_sha256_fails_naming_both_digests() {
    let registry = Registry::start();
    let output = workdir("wrong-sha256").join("flux.wasm");
    let tag = format!("{}/plugins/flux:v1", registry.host());
    let (_, sha256) = push_flux(&tag, &[]);
    let wrong = "0".repeat(64);

    let stderr = failing(&["plugin", "pull", &tag, "-o", output.to_str().unwrap(), "--sha256", &wrong]);
    assert!(stderr.contains(&format!("sha256:{wrong}")) && stderr.contains(&format!("sha256:{sha256}")), "{stderr}");
    assert!(stderr.contains(&tag), "the error names the reference: {stderr}");
    assert!(!output.exists(), "nothing is written");
}

#[test]
fn a_component_over_the_size_limit_is_refused_before_it_is_downloaded() {
    let registry = Registry::start();
    let output = workdir("too-large").join("flux.wasm");
    let tag = format!("{}/plugins/flux:v1", registry.host());
    push_flux(&tag, &[]);
    let stderr = failing(&["plugin", "pull", &tag, "-o", output.to_str().unwrap(), "--max-kib", "100"]);
    assert!(stderr.contains("over the limit of 102400 bytes for a plugin component"), "{stderr}");
    assert!(!output.exists(), "nothing is written");
}

#[test]
fn pull_of_a_missing_tag_fails_clearly() {
    let registry = Registry::start();
    let output = workdir("missing-tag").join("flux.wasm");
    let missing = format!("{}/plugins/flux:missing", registry.host());
    let stderr = failing(&["plugin", "pull", &missing, "-o", output.to_str().unwrap()]);
    assert!(stderr.contains(&format!("{missing} not found")), "{stderr}");
}

#[test]
fn registry_with_auth_requires_credentials() {
    let registry = Registry::start_with_auth("ksm", "s3cret");
    let dir = workdir("auth");
    let output = dir.join("flux.wasm");
    let output = output.to_str().unwrap();
    let tag = format!("{}/plugins/flux:v1", registry.host());
    let docker_config = registry.docker_config("ksm", "s3cret");
    let docker_config = docker_config.to_str().unwrap();

    let stderr = failing(&["plugin", "push", "builtin:flux", &tag]);
    assert!(stderr.contains(&format!("registry answered 401 for {tag}")), "{stderr}");
    let stderr = failing(&["plugin", "push", "builtin:flux", &tag, "--username", "ksm", "--password", "wrong"]);
    assert!(stderr.contains("401"), "{stderr}");

    let (pinned, sha256) = push_flux(&tag, &["--docker-config", docker_config]);
    let stderr = failing(&["plugin", "pull", &pinned, "-o", output]);
    assert!(stderr.contains(&format!("registry answered 401 for {pinned}")), "{stderr}");
    assert_eq!(pull(&pinned, Path::new(output), &["--docker-config", docker_config])["sha256"], sha256.as_str());

    let with_env = Command::new(binary())
        .args(["plugin", "pull", &tag, "-o", output])
        .env("KSM_REGISTRY_USERNAME", "ksm")
        .env("KSM_REGISTRY_PASSWORD", "s3cret")
        .output()
        .expect("running ksm-adapter");
    assert!(with_env.status.success(), "{}", String::from_utf8_lossy(&with_env.stderr));
}

#[test]
fn push_refuses_what_is_not_a_plugin_component() {
    let module = workdir("not-a-component").join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    // Refused before any registry is contacted: nothing listens on port 9.
    let stderr = failing(&["plugin", "push", module.to_str().unwrap(), "127.0.0.1:9/plugins/module:v1"]);
    assert!(stderr.contains("refusing to push") && stderr.contains("a core module"), "{stderr}");
}

/// `plugin keygen -o <dir>` with `password` in COSIGN_PASSWORD: the public key's path.
fn keygen(dir: &Path, password: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let output = Command::new(binary())
        .args(["plugin", "keygen", "-o", dir.to_str().unwrap()])
        .env("COSIGN_PASSWORD", password)
        .output()
        .expect("running ksm-adapter");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let key = std::fs::read_to_string(dir.join("cosign.key")).unwrap();
    assert!(key.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"), "cosign's format: {key}");
    dir.join("cosign.pub")
}

/// `plugin sign --key <dir>/cosign.key <reference>` with `password`: what it printed, or its stderr.
fn sign(dir: &Path, password: &str, reference: &str) -> Result<Value, String> {
    let key = dir.join("cosign.key");
    let output = Command::new(binary())
        .args(["plugin", "sign", "--key", key.to_str().unwrap(), reference])
        .env("COSIGN_PASSWORD", password)
        .output()
        .expect("running ksm-adapter");
    if output.status.success() { Ok(printed(&output)) } else { Err(String::from_utf8_lossy(&output.stderr).into()) }
}

const HOSTILE: &[u8] = include_bytes!(env!("KSM_HOSTILE_WASM"));

/// Signed with one key, verified with it; refused when unsigned, signed by another key, or
/// signed for another digest (a signature copied to another digest's tag); never written then.
#[test]
fn pull_with_verify_key_accepts_only_a_signature_of_this_digest_by_that_key() {
    let registry = Registry::start();
    let dir = workdir("signed");
    let (team, other) = (keygen(&dir.join("team"), "s3cret"), keygen(&dir.join("other"), ""));
    let stderr = failing(&["plugin", "keygen", "-o", dir.join("team").to_str().unwrap()]);
    assert!(stderr.contains("exists: refusing to overwrite a key"), "{stderr}");
    let repository = "plugins/flux";
    let (flux, _) = push_flux(&format!("{}/{repository}:v1", registry.host()), &[]);
    let hostile_file = dir.join("hostile.wasm");
    std::fs::write(&hostile_file, HOSTILE).unwrap();
    let hostile = printed(&run_command(&[
        "plugin",
        "push",
        hostile_file.to_str().unwrap(),
        &format!("{}/{repository}:v2", registry.host()),
    ]))["reference"]
        .as_str()
        .unwrap()
        .to_string();
    let (flux_digest, hostile_digest) = (flux.split_once('@').unwrap().1, hostile.split_once('@').unwrap().1);
    let output = dir.join("verified.wasm");
    let pull_verified = |reference: &str, key: &Path| {
        failing(&["plugin", "pull", reference, "-o", output.to_str().unwrap(), "--verify-key", key.to_str().unwrap()])
    };

    let stderr = pull_verified(&flux, &team);
    let tag = format!("sha256-{}.sig", &flux_digest[7..]);
    assert!(stderr.contains(&format!("{flux} is not signed by a trusted signer: no signature")), "{stderr}");
    assert!(stderr.contains(&tag), "names the tag looked up: {stderr}");

    let error = sign(&dir.join("team"), "wrong", &flux).unwrap_err();
    assert!(error.contains("is the password right?"), "{error}");
    let signed = sign(&dir.join("team"), "s3cret", &format!("{}/{repository}:v1", registry.host())).unwrap();
    assert_eq!(signed["reference"], flux.as_str(), "a tag is signed by its digest");
    assert_eq!(signed["signature"], format!("{}/{repository}:{tag}", registry.host()));
    assert_eq!(signed["signatures"], 1);
    let out = pull(&flux, &output, &["--verify-key", team.to_str().unwrap()]);
    assert_eq!(out["signedBy"], team.to_str().unwrap());
    assert_eq!(inspected_sha256(output.to_str().unwrap()), inspected_sha256("builtin:flux"));
    std::fs::remove_file(&output).unwrap();

    let stderr = pull_verified(&flux, &other);
    assert!(stderr.contains("(checked against 1 key(s)): signature 1: signed by another key"), "{stderr}");
    assert!(!output.exists(), "nothing is written");
    // A second signature is added beside the first, as cosign does: either key verifies.
    assert_eq!(sign(&dir.join("other"), "", &flux).unwrap()["signatures"], 2);
    assert_eq!(pull(&flux, &output, &["--verify-key", other.to_str().unwrap()])["signedBy"], other.to_str().unwrap());
    let keys = ["--verify-key", other.to_str().unwrap(), "--verify-key", team.to_str().unwrap()];
    assert_eq!(pull(&flux, &output, &keys)["signedBy"], team.to_str().unwrap(), "the first signature's key");
    std::fs::remove_file(&output).unwrap();

    // The valid signatures of the Flux plugin, copied to the hostile plugin's signature tag.
    registry.copy_manifest(repository, &tag, &format!("sha256-{}.sig", &hostile_digest[7..]));
    let stderr = pull_verified(&hostile, &team);
    assert!(stderr.contains(&format!("{hostile} is not signed by a trusted signer")), "{stderr}");
    assert!(stderr.contains(&format!("signed by {} for {flux_digest}, another artifact", team.display())), "{stderr}");
    assert!(!output.exists(), "nothing is written");
}
