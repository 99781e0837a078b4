//! Scenario 14: plugins from AdapterPlugins. A plugin put into a ConfigMap serves its SMP's
//! ServiceSets without a restart; a bad update keeps the previous version serving; a new good
//! version is switched to; hostile behaviour fails only the offending ServiceSet, while the
//! built-in Flux plugin keeps serving another SMP in the same run.

use k8s_openapi::ByteString;
use ksm_e2e::{ADAPTER_PLUGIN_CRD, Scenario};
use ksm_test_harness::fixtures::{self, ingress_service};
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::{condition_is, condition_message, service};
use ksm_test_harness::{Mode, WAIT};
use serde_json::{Value, json};

pub(crate) const HOSTILE: &[u8] = include_bytes!(env!("KSM_HOSTILE_WASM"));
const HOSTILE_WASI: &[u8] = include_bytes!(env!("KSM_HOSTILE_WASI_WASM"));
const LIAR: &[u8] = include_bytes!(env!("KSM_LIAR_WASM"));
/// The ConfigMap holding the external plugin, and its key.
const PLUGIN_CONFIG_MAP: &str = "hostile-plugin";
const KEY: &str = "plugin.wasm";

/// The ConfigMap holding `bytes` as the plugin.
pub(crate) fn plugin_config_map(namespace: &str, bytes: &[u8]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PLUGIN_CONFIG_MAP, "namespace": namespace},
           "binaryData": {KEY: serde_json::to_value(ByteString(bytes.to_vec())).unwrap()}})
}

/// The SMP `<namespace>-hostile` (ready) and the AdapterPlugin serving it from the ConfigMap,
/// with tight limits; returns the SMP name.
pub(crate) async fn hostile_provider(t: &Scenario) -> String {
    let name = format!("{}-hostile", t.namespace());
    let mut smp = fixtures::smp(&name, ksm_test_harness::ADAPTER_NAME, t.namespace());
    smp["status"] = fixtures::smp_status(true);
    t.create(smp).await;
    let source = json!({"configMap": {"namespace": t.namespace(), "name": PLUGIN_CONFIG_MAP, "key": KEY}});
    let mut plugin = fixtures::adapter_plugin(&name, t.namespace(), source, &[&name]);
    plugin["spec"]["limits"] = json!({"timeoutMs": 300, "memoryMib": 32, "outputKib": 512});
    plugin["spec"]["allowedKinds"] = hostile_kinds();
    t.create(plugin).await;
    name
}

/// The kinds the hostile plugin's AdapterPlugin allows: its ConfigMaps, and the liar's Namespace,
/// so that discovery is what refuses the liar.
fn hostile_kinds() -> Value {
    json!([{"group": "", "kind": "ConfigMap"}, {"group": "", "kind": "Namespace"}])
}

/// A ServiceSet of the hostile provider whose one service has the ServiceSet's name (the
/// hostile plugin behaves by that name).
pub(crate) async fn hostile_service_set(t: &Scenario, provider: &str, behaviour: &str) {
    let services = json!([{"name": behaviour, "namespace": "apps", "template": "ingress-nginx-4-11-3"}]);
    t.create(fixtures::service_set(t.namespace(), behaviour, provider, services)).await;
}

fn adapter_plugin(name: &str) -> ObjRef {
    ObjRef::cluster(Kind::AdapterPlugin, name)
}

/// Waits until AdapterPlugin `name` exists and `holds` for it (the whole object).
async fn wait_plugin(t: &Scenario, name: &str, desc: &str, holds: impl Fn(&Value) -> bool) -> Value {
    t.wait_object(desc, &adapter_plugin(name), WAIT, holds).await
}

/// The ConfigMap child the hostile plugin makes for an honest ServiceSet `name`.
async fn wait_hostile_child(t: &Scenario, name: &str) {
    let child = ObjRef::new(Kind::ConfigMap, t.namespace(), name);
    t.wait_object("applied by the hostile plugin", &child, WAIT, |c| {
        c["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"] == name
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_map_plugin_is_loaded_hot_and_a_bad_update_keeps_the_previous_version() {
    let t = Scenario::start("cm-plugin", Mode::Observe).await;
    let provider = hostile_provider(&t).await;
    // The plugin is declared before its bytes exist: the status says what is missing.
    let missing = wait_plugin(&t, &provider, "FetchFailed: no ConfigMap yet", |p| {
        p["status"]["ready"] == false && condition_is(p, "Fetched", "False", "FetchFailed")
    })
    .await;
    assert!(missing["status"]["error"].as_str().unwrap().contains("not found"), "{:#}", missing["status"]);

    t.create(plugin_config_map(t.namespace(), HOSTILE)).await;
    let loaded = wait_plugin(&t, &provider, "ready", |p| p["status"]["ready"] == true).await;
    let first_digest = loaded["status"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(loaded["status"]["plugin"]["name"], "hostile");
    assert_eq!(loaded["status"]["plugin"]["creates"], json!(["/v1 ConfigMap"]));
    hostile_service_set(&t, &provider, "honest").await;
    wait_hostile_child(&t, "honest").await;

    // Bytes that are not a component: refused, the previous version keeps serving.
    let config_map = ObjRef::new(Kind::ConfigMap, t.namespace(), PLUGIN_CONFIG_MAP);
    t.merge_patch(&config_map, plugin_config_map(t.namespace(), b"not a component")).await;
    let refused = wait_plugin(&t, &provider, "CompileFailed, previous serving", |p| {
        condition_is(p, "Compiled", "False", "CompileFailed")
    })
    .await;
    let status = &refused["status"];
    assert_eq!((status["ready"].as_bool(), status["sha256"].as_str()), (Some(false), Some(first_digest.as_str())));
    let error = status["error"].as_str().unwrap();
    assert!(error.contains("not a WASM component") && error.contains("keeps serving"), "{error}");
    let note = t.wait_event("default", &provider, "CompileFailed").await;
    assert!(note.contains("not a WASM component"), "{note}");
    hostile_service_set(&t, &provider, "after-bad-update").await;
    wait_hostile_child(&t, "after-bad-update").await;

    // A narrower policy applies to the version serving even though the spec carrying it does
    // not load; widening it again restores the policy that version was loaded with.
    let narrow = json!({"spec": {"allowedKinds": [{"group": "example.org", "kind": "Nothing"}]}});
    t.merge_patch(&adapter_plugin(&provider), narrow).await;
    hostile_service_set(&t, &provider, "after-narrowing").await;
    let refused = ObjRef::new(Kind::ServiceSet, t.namespace(), "after-narrowing");
    t.wait_object("refused by the narrower policy", &refused, WAIT, |ss| {
        service(ss, "after-narrowing")
            .is_some_and(|s| s["failureMessage"].as_str().is_some_and(|m| m.contains("allowedKinds")))
    })
    .await;
    t.merge_patch(&adapter_plugin(&provider), json!({"spec": {"allowedKinds": hostile_kinds()}})).await;
    wait_hostile_child(&t, "after-narrowing").await;

    // Metadata that lies about its kinds: refused against discovery.
    t.merge_patch(&config_map, plugin_config_map(t.namespace(), LIAR)).await;
    let lied =
        wait_plugin(&t, &provider, "ValidationFailed", |p| condition_is(p, "Validated", "False", "ValidationFailed"))
            .await;
    let error = lied["status"]["error"].as_str().unwrap();
    assert!(error.contains("v1 Namespace as namespaced") && error.contains("cluster-scoped"), "{error}");
    assert_eq!(lied["status"]["sha256"], first_digest.as_str());

    // A new good version is switched to and serves.
    t.merge_patch(&config_map, plugin_config_map(t.namespace(), HOSTILE_WASI)).await;
    let switched = wait_plugin(&t, &provider, "ready on the new digest", |p| {
        p["status"]["ready"] == true && p["status"]["sha256"] != first_digest.as_str()
    })
    .await;
    assert!(switched["status"]["error"].as_str().is_none_or(str::is_empty), "{:#}", switched["status"]);
    hostile_service_set(&t, &provider, "after-switch").await;
    wait_hostile_child(&t, "after-switch").await;

    // The WASI build sleeps 20 s in `translate`: the sandbox's clock never blocks, so the
    // ServiceSet is served within its 300 ms call limit, not after the sleep.
    let started = std::time::Instant::now();
    hostile_service_set(&t, &provider, "sleep").await;
    wait_hostile_child(&t, "sleep").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "served after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_plugins_are_contained_and_flux_keeps_serving() {
    let t = Scenario::start("hostile", Mode::Observe).await;
    t.create(plugin_config_map(t.namespace(), HOSTILE)).await;
    let provider = hostile_provider(&t).await;
    wait_plugin(&t, &provider, "ready", |p| p["status"]["ready"] == true).await;
    // Call failures: the plugin error is the ServiceSet's condition.
    let failures = [("loop", "time limit"), ("oom", "memory limit"), ("trap", "trapped"), ("huge", "its output limit")];
    // Output the host refuses: the service fails with the rule.
    let refusals = [
        ("forbidden-kind", "ClusterRoleBinding"),
        ("cluster-scoped", "Namespace"),
        ("other-namespace", "not the ServiceSet's namespace"),
        ("owner-refs", "metadata.ownerReferences"),
        ("bad-json", "not valid JSON"),
    ];
    for (behaviour, _) in failures.iter().chain(&refusals) {
        hostile_service_set(&t, &provider, behaviour).await;
    }
    hostile_service_set(&t, &provider, "long-error").await;
    t.create_service_set("flux-served", json!([ingress_service()])).await;

    for (behaviour, words) in failures {
        let ss = t
            .wait_service_set(behaviour, "ServicesTranslated False (PluginError)", |ss| {
                condition_is(ss, "ServicesTranslated", "False", "PluginError")
            })
            .await;
        let message = condition_message(&ss, "ServicesTranslated");
        assert!(message.contains("plugin \"hostile\"") && message.contains(words), "{behaviour}: {message}");
    }
    // A message over what the API server accepts (a condition message holds 32,768 bytes) is cut,
    // so that the status is still written instead of refused on every retry.
    let ss = t
        .wait_service_set("long-error", "ServicesTranslated False (InvalidServiceSet)", |ss| {
            condition_is(ss, "ServicesTranslated", "False", "InvalidServiceSet")
        })
        .await;
    let message = condition_message(&ss, "ServicesTranslated");
    assert!(message.len() <= 32_768 && message.ends_with("(cut)"), "{} bytes: {}", message.len(), &message[..200]);
    for (behaviour, words) in refusals {
        let ss = t
            .wait_service_set(behaviour, "its service Failed", |ss| {
                service(ss, behaviour).is_some_and(|s| s["state"] == "Failed")
            })
            .await;
        let message = service(&ss, behaviour).unwrap()["failureMessage"].as_str().unwrap_or_default().to_string();
        assert!(message.contains("plugin \"hostile\" returned") && message.contains(words), "{behaviour}: {message}");
    }
    let note = t.wait_event(t.namespace(), "forbidden-kind", "ServiceFailed").await;
    assert!(note.contains("ClusterRoleBinding"), "a Warning Event names the refusal: {note}");
    // Nothing of the refused output exists.
    assert!(t.get(&ObjRef::new(Kind::ConfigMap, "kube-system", "other-namespace")).await.is_none());
    assert!(t.get(&ObjRef::new(Kind::ConfigMap, t.namespace(), "owner-refs")).await.is_none());
    assert!(t.get(&ObjRef::cluster(Kind::Namespace, "hostile")).await.is_none());

    t.wait_converged("flux-served").await;
    assert!(t.adapter_running(), "the adapter survived every hostile plugin");
    let (_, metrics) = ksm_test_harness::adapter::http_get(&format!("{}/metrics", t.adapter().metrics_url())).await;
    for kind in ["timeout", "memory", "trap", "output", "policy"] {
        let series = format!(r#"ksm_plugin_errors_total{{plugin="{provider}",kind="{kind}"}}"#);
        assert!(metrics.contains(&series), "{series} missing from /metrics:\n{metrics}");
    }
}

/// The SMP `<namespace>-<suffix>` (ready), with no AdapterPlugin, whose provisionerCRDs are
/// `crds`; returns its name.
async fn smp_without_plugin(t: &Scenario, suffix: &str, crds: Value) -> String {
    let name = format!("{}-{suffix}", t.namespace());
    let mut smp = fixtures::smp(&name, ksm_test_harness::ADAPTER_NAME, t.namespace());
    smp["spec"]["provisionerCRDs"] = crds;
    smp["status"] = fixtures::smp_status(true);
    t.create(smp).await;
    name
}

/// Creates ServiceSet `name` of `provider` and waits until it says no AdapterPlugin serves it.
async fn assert_unserved(t: &Scenario, name: &str, provider: &str) {
    t.create(fixtures::service_set(t.namespace(), name, provider, json!([ingress_service()]))).await;
    let ss = t
        .wait_service_set(name, "PluginNotReady", |ss| {
            condition_is(ss, "ServicesTranslated", "False", "PluginNotReady")
        })
        .await;
    assert!(condition_message(&ss, "ServicesTranslated").contains("no AdapterPlugin serves"), "{ss:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_without_a_plugin_or_with_two_is_reported() {
    let t = Scenario::start("no-plugin", Mode::Observe).await;
    // An SMP for another CD tool never falls back to the built-in Flux plugin.
    let argo = json!([{"group": "argoproj.io", "version": "v1alpha1", "resources": ["applications"]}]);
    let name = smp_without_plugin(&t, "orphan", argo).await;
    assert_unserved(&t, "orphan", &name).await;

    // The Flux SMP's AdapterPlugin and a second one naming the same provider.
    let flux = t.smp_name().to_string();
    t.create(fixtures::adapter_plugin(&format!("{flux}-twin"), t.namespace(), json!({"builtin": "flux"}), &[&flux]))
        .await;
    t.create_service_set("contested", json!([ingress_service()])).await;
    let ss = t
        .wait_service_set("contested", "PluginNotReady", |ss| {
            condition_is(ss, "ServicesTranslated", "False", "PluginNotReady")
        })
        .await;
    assert!(condition_message(&ss, "ServicesTranslated").contains("none serves it"), "{ss:#}");
    for plugin in [flux.clone(), format!("{flux}-twin")] {
        let reported = wait_plugin(&t, &plugin, "not ready: contested", |p| {
            p["status"]["ready"] == false && p["status"]["error"].as_str().is_some_and(|e| e.contains("none serves it"))
        })
        .await;
        assert!(reported["status"]["sha256"].as_str().is_some_and(|s| s.len() == 64), "loaded, just not serving");
    }
    // The twin goes: the Flux plugin serves again and the ServiceSet converges.
    t.delete(&adapter_plugin(&format!("{flux}-twin"))).await;
    t.wait_converged("contested").await;
    wait_plugin(&t, &flux, "ready again", |p| p["status"]["ready"] == true).await;
}

/// The same plugin pushed with `ksm-adapter plugin push` to a registry on loopback and declared
/// by digest: pulled, checked and serving; a wrong `sha256` is refused and says both digests.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_pulled_from_a_registry_by_digest_serves() {
    let registry = ksm_test_harness::registry::Registry::start();
    let t = Scenario::start("oci-plugin", Mode::Observe).await;
    let file = t.workdir().join("hostile.wasm");
    std::fs::write(&file, HOSTILE).unwrap();
    let tag = format!("{}/ksm/hostile:v1", registry.host());
    let pushed = ksm_test_harness::adapter::run_command(&["plugin", "push", file.to_str().unwrap(), &tag]);
    let pushed: Value = serde_norway::from_slice(&pushed.stdout).unwrap();
    let (pinned, sha256) = (pushed["reference"].as_str().unwrap(), pushed["sha256"].as_str().unwrap());
    assert!(pinned.contains("@sha256:"), "{pushed:#}");

    let name = format!("{}-oci", t.namespace());
    let mut smp = fixtures::smp(&name, ksm_test_harness::ADAPTER_NAME, t.namespace());
    smp["status"] = fixtures::smp_status(true);
    t.create(smp).await;
    let source = json!({"oci": {"url": pinned, "sha256": sha256}});
    // A plugin from a registry may create no kind its AdapterPlugin does not list.
    t.create(fixtures::adapter_plugin(&name, t.namespace(), source, &[&name])).await;
    let denied =
        wait_plugin(&t, &name, "ValidationFailed", |p| condition_is(p, "Validated", "False", "ValidationFailed")).await;
    let error = denied["status"]["error"].as_str().unwrap();
    assert!(error.contains("spec.allowedKinds") && error.contains("none by default"), "{error}");
    t.merge_patch(&adapter_plugin(&name), json!({"spec": {"allowedKinds": [{"group": "", "kind": "ConfigMap"}]}}))
        .await;
    let loaded = wait_plugin(&t, &name, "ready", |p| p["status"]["ready"] == true).await;
    assert_eq!(loaded["status"]["sha256"], sha256);
    hostile_service_set(&t, &name, "from-oci").await;
    wait_hostile_child(&t, "from-oci").await;

    let wrong = format!("{}-wrong", t.namespace());
    let source = json!({"oci": {"url": pinned, "sha256": "0".repeat(64)}});
    t.create(fixtures::adapter_plugin(&wrong, t.namespace(), source, &[&wrong])).await;
    let refused = wait_plugin(&t, &wrong, "FetchFailed", |p| condition_is(p, "Fetched", "False", "FetchFailed")).await;
    let error = refused["status"]["error"].as_str().unwrap();
    assert!(error.contains(sha256) && error.contains(&"0".repeat(64)), "{error}");
    assert_eq!(refused["status"]["ready"], false);
}

/// Waits until AdapterPlugin `<namespace>-<suffix>` fails verification with an error holding
/// `expected`, and checks that nothing was compiled; returns its status.
async fn refused(t: &Scenario, suffix: &str, expected: &str) -> Value {
    let name = format!("{}-{suffix}", t.namespace());
    let p = wait_plugin(t, &name, "VerificationFailed", |p| {
        condition_is(p, "Verified", "False", "VerificationFailed")
            && p["status"]["error"].as_str().is_some_and(|e| e.contains(expected))
    })
    .await;
    assert_eq!(p["status"]["ready"], false);
    assert!(condition_is(&p, "Compiled", "Unknown", "NotReached"), "nothing was compiled: {p:#}");
    p["status"].clone()
}

/// A plugin whose AdapterPlugin lists keys in `spec.source.oci.verify` loads only with a
/// signature of its manifest digest by one of them: signed by the key in a Secret of the
/// host's namespace, it serves; signed by another key, unsigned, or carrying a signature copied
/// from another digest, it is refused before compiling (`Verified=False`), naming the
/// AdapterPlugin, the digest and what is missing; a serving version stops serving once its spec
/// asks for a signature it was not verified with: an unsigned one given `verify`, a signed one
/// whose signer's key is dropped from `verify`. `explain` checks the same signature before it
/// runs a plugin.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_must_be_signed_serves_only_with_a_signature_of_its_digest() {
    use ksm_test_harness::adapter::run_command;
    let registry = ksm_test_harness::registry::Registry::start();
    // Keys from Secrets are read again every poll (issue 45: a rotated key re-verifies).
    let t = Scenario::start_with("signed-plugin", Mode::Observe, &["--oci-poll-seconds", "2"]).await;
    let push = |bytes: &[u8], tag: &str| {
        let file = t.workdir().join(format!("{tag}.wasm"));
        std::fs::write(&file, bytes).unwrap();
        let reference = format!("{}/ksm/hostile:{tag}", registry.host());
        let pushed: Value =
            serde_norway::from_slice(&run_command(&["plugin", "push", file.to_str().unwrap(), &reference]).stdout)
                .unwrap();
        pushed["reference"].as_str().unwrap().to_string()
    };
    let (signed, unsigned) = (push(HOSTILE, "signed"), push(HOSTILE_WASI, "unsigned"));
    let keygen = |name: &str| {
        let dir = t.workdir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        run_command(&["plugin", "keygen", "-o", dir.to_str().unwrap()]);
        (dir.join("cosign.key"), std::fs::read_to_string(dir.join("cosign.pub")).unwrap())
    };
    let ((team_key, team_pub), (_, other_pub)) = (keygen("team"), keygen("other"));
    run_command(&["plugin", "sign", "--key", team_key.to_str().unwrap(), &signed]);
    t.create(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plugin-signers", "namespace": t.namespace()},
                    "data": {"team.pub": serde_json::to_value(ByteString(team_pub.clone().into_bytes())).unwrap()}}),
    )
    .await;
    let team = json!({"keys": [{"secretKeyRef": {"name": "plugin-signers", "key": "team.pub"}}]});

    // One SMP and AdapterPlugin per case; `verify` None first for the unsigned one.
    let plugin = |suffix: &str, url: &str, verify: Option<&Value>| {
        let name = format!("{}-{suffix}", t.namespace());
        let mut source = json!({"oci": {"url": url}});
        if let Some(verify) = verify {
            source["oci"]["verify"] = verify.clone();
        }
        let mut plugin = fixtures::adapter_plugin(&name, t.namespace(), source, &[&name]);
        plugin["spec"]["allowedKinds"] = json!([{"group": "", "kind": "ConfigMap"}]);
        (name, plugin)
    };

    let (name, good) = plugin("team", &signed, Some(&team));
    t.create(good).await;
    let loaded = wait_plugin(&t, &name, "ready", |p| p["status"]["ready"] == true).await;
    assert!(condition_is(&loaded, "Verified", "True", "Verified"), "{loaded:#}");
    let smp = |name: &str| {
        let mut smp = fixtures::smp(name, ksm_test_harness::ADAPTER_NAME, t.namespace());
        smp["status"] = fixtures::smp_status(true);
        smp
    };
    t.create(smp(&name)).await;
    hostile_service_set(&t, &name, "signed-honest").await;
    wait_hostile_child(&t, "signed-honest").await;
    let explained = t.explain("signed-honest").await;
    assert_eq!(explained["plugin"]["servedBy"], name.as_str(), "{explained:#}");
    let signature = explained["plugin"]["signature"].as_str().unwrap_or_default();
    assert!(signature.starts_with("verified with spec.source.oci.verify.keys[0].secretKeyRef"), "{explained:#}");

    // Issue 45: the key rotated inside its Secret (another key now) re-verifies the serving
    // version, which the new key did not sign: it stops serving; the signer's key back, it serves.
    let signers = t.obj(Kind::Secret, "plugin-signers");
    let rotate = async |key: &str| {
        let data = serde_json::to_value(ByteString(key.as_bytes().to_vec())).unwrap();
        t.merge_patch(&signers, json!({"data": {"team.pub": data}})).await;
    };
    rotate(&other_pub).await;
    let status = refused(&t, "team", "signed by another key").await;
    assert!(status.get("sha256").is_none(), "the version the rotated key verified no longer serves: {status:#}");
    t.wait_service_set("signed-honest", "not served while its key is rotated", |ss| {
        condition_is(ss, "ServicesTranslated", "False", "PluginNotReady")
    })
    .await;
    rotate(&team_pub).await;
    wait_plugin(&t, &name, "ready again under the signer's key", |p| p["status"]["ready"] == true).await;

    let other = json!({"keys": [{"publicKey": other_pub}]});
    t.create(plugin("other", &signed, Some(&other)).1).await;
    let status = refused(&t, "other", "signed by another key").await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "AdapterPlugin \"{}-other\": {}@sha256:",
            t.namespace(),
            signed.split('@').next().unwrap()
        )),
        "{error}"
    );

    let (name, open) = plugin("unsigned", &unsigned, None);
    t.create(open).await;
    let serving = wait_plugin(&t, &name, "ready unsigned", |p| p["status"]["ready"] == true).await;
    assert!(condition_is(&serving, "Verified", "True", "NotRequired"), "{serving:#}");
    t.merge_patch(&adapter_plugin(&name), json!({"spec": {"source": {"oci": {"verify": team}}}})).await;
    let status = refused(&t, "unsigned", "no signature").await;
    let digest = unsigned.split_once('@').unwrap().1;
    assert!(status["error"].as_str().unwrap().contains(&tag_of(digest)), "{status:#}");
    assert!(status.get("sha256").is_none(), "the unsigned version no longer serves: {status:#}");
    // `explain` neither runs the unsigned plugin nor calls it serving: it says why.
    t.create(smp(&name)).await;
    hostile_service_set(&t, &name, "unsigned-honest").await;
    let explained = t.explain("unsigned-honest").await;
    assert!(explained["plugin"].get("servedBy").is_none(), "{explained:#}");
    let problem = explained["plugin"]["problem"].as_str().unwrap_or_default();
    assert!(problem.contains(&format!("not verified: AdapterPlugin \"{name}\"")), "{explained:#}");
    assert!(problem.contains(&format!("no signature: the repository has no tag {}", tag_of(digest))), "{explained:#}");

    // The signed plugin's signature, copied to the unsigned one's tag: signs another digest.
    let signed_digest = signed.split_once('@').unwrap().1;
    registry.copy_manifest("ksm/hostile", &tag_of(signed_digest), &tag_of(digest));
    t.create(plugin("copied", &unsigned, Some(&team)).1).await;
    refused(&t, "copied", &format!("for {signed_digest}, another artifact")).await;

    // The signer's key dropped from `verify` (another key stays): the serving version, verified
    // under the old list, stops serving, and so does its ServiceSet's service.
    let team_name = format!("{}-team", t.namespace());
    let both = json!({"keys": [team["keys"][0], other["keys"][0]]});
    t.merge_patch(&adapter_plugin(&team_name), json!({"spec": {"source": {"oci": {"verify": both}}}})).await;
    wait_plugin(&t, &team_name, "still ready under both keys", |p| {
        p["status"]["observedGeneration"] == 2 && p["status"]["ready"] == true
    })
    .await;
    t.merge_patch(&adapter_plugin(&team_name), json!({"spec": {"source": {"oci": {"verify": other}}}})).await;
    let status = refused(&t, "team", "signed by another key").await;
    assert_eq!(status["observedGeneration"], 3, "{status:#}");
    assert!(status.get("sha256").is_none(), "the version verified with the dropped key no longer serves: {status:#}");
    assert!(!status["error"].as_str().unwrap().contains("keeps serving"), "{status:#}");
    t.wait_service_set("signed-honest", "not served: its plugin stopped", |ss| {
        condition_is(ss, "ServicesTranslated", "False", "PluginNotReady")
    })
    .await;
}

/// Issue 46: a plugin signed keyless (a Fulcio-style certificate of the tests' own CA, with an
/// SCT and a Rekor entry of their own logs) by `plugin sign --certificate --rekor-bundle`, pushed
/// to a real registry in cosign's layout, serves under a rule accepting its identity and the
/// operator's trust root from a ConfigMap; another identity, another operator's trust root, no
/// trust root at all, or a signature copied from another digest refuses it, named in the
/// AdapterPlugin's status, before anything compiles; an expired leaf serves when the log proves
/// it signed inside its validity.
#[tokio::test(flavor = "multi_thread")]
async fn a_keyless_plugin_serves_only_for_an_accepted_identity_under_the_operators_trust_root() {
    use ksm_test_harness::adapter::run_command;
    use ksm_test_harness::pki::{self, LeafSpec, Pki};
    const ISSUER: &str = "https://token.actions.githubusercontent.com";
    const CI: &str = "https://github.com/acme/plugins/.github/workflows/release.yaml@refs/tags/v1";
    let registry = ksm_test_harness::registry::Registry::start();
    let t = Scenario::start("keyless-plugin", Mode::Observe).await;
    let push = |bytes: &[u8], tag: &str| {
        let file = t.workdir().join(format!("{tag}.wasm"));
        std::fs::write(&file, bytes).unwrap();
        let reference = format!("{}/ksm/hostile:{tag}", registry.host());
        let pushed: Value =
            serde_norway::from_slice(&run_command(&["plugin", "push", file.to_str().unwrap(), &reference]).stdout)
                .unwrap();
        pushed["reference"].as_str().unwrap().to_string()
    };
    let (pinned, later) = (push(HOSTILE, "keyless"), push(HOSTILE_WASI, "later"));

    // The signer's side: a leaf for the CI identity, and the Rekor entry of its signature (RFC
    // 6979 signatures are deterministic, so the entry is made before `plugin sign` pushes it).
    let (ours, theirs) = (Pki::new(), Pki::named("theirs"));
    let write = |name: &str, text: &str| {
        let path = t.workdir().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let sign = |pinned: &str, leaf: &pki::Leaf, logged_at: i64| {
        let digest = pinned.split_once('@').unwrap().1;
        let payload = pki::payload(&format!("{}/ksm/hostile", registry.host()), digest);
        let bundle = ours.bundle(leaf, &payload, &leaf.sign(&payload), logged_at);
        let (key, cert, chain, bundle) = (
            write("leaf.key", &leaf.key_pem()),
            write("leaf.pem", &leaf.pem()),
            write("chain.pem", &ours.chain_pem()),
            write("bundle.json", &bundle),
        );
        let args = ["--key", &key, "--certificate", &cert, "--certificate-chain", &chain, "--rekor-bundle", &bundle];
        run_command(&[&["plugin", "sign"][..], &args, &[pinned]].concat());
    };
    sign(&pinned, &ours.leaf(&LeafSpec::new(CI, ISSUER)), ours.now);

    for (name, pki) in [("sigstore", &ours), ("their-sigstore", &theirs)] {
        t.create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": t.namespace()},
            "data": {"trusted_root.json": pki.trusted_root().to_string()}}),
        )
        .await;
    }
    let plugin_of = |url: &str, suffix: &str, root: &str, subject: Value| {
        let name = format!("{}-{suffix}", t.namespace());
        let keyless = json!({"trustRoot": {"name": root, "key": "trusted_root.json"},
            "allOf": [{"issuer": ISSUER, "subject": subject}]});
        let source = json!({"oci": {"url": url, "verify": {"keyless": keyless}}});
        let mut plugin = fixtures::adapter_plugin(&name, t.namespace(), source, &[&name]);
        plugin["spec"]["allowedKinds"] = json!([{"group": "", "kind": "ConfigMap"}]);
        (name, plugin)
    };
    let plugin = |suffix: &str, root: &str, subject: Value| plugin_of(&pinned, suffix, root, subject);
    let (name, accepted) = plugin("ci", "sigstore", json!({"urlPrefix": "https://github.com/acme"}));
    t.create(accepted).await;
    let loaded = wait_plugin(&t, &name, "ready", |p| p["status"]["ready"] == true).await;
    assert!(condition_is(&loaded, "Verified", "True", "Verified"), "{loaded:#}");
    let why = condition_message(&loaded, "Verified");
    assert!(why.starts_with(&format!("verified: keyless.allOf[0] matched by {CI} (issuer {ISSUER})")), "{loaded:#}");

    t.create(plugin("other-subject", "sigstore", json!({"equal": "https://github.com/acme/plugins"})).1).await;
    let status = refused(&t, "other-subject", "keyless.allOf[0] is matched by no signature").await;
    assert!(
        status["error"].as_str().unwrap().contains(&format!("signature 1: subject {CI} issuer {ISSUER}")),
        "{status:#}"
    );
    t.create(plugin("other-root", "their-sigstore", json!({"urlPrefix": "https://github.com/acme/"})).1).await;
    // Another CA's trust root pins other logs too: the entry is refused first (the chain to
    // another root alone is a unit test of signature/keyless.rs).
    refused(&t, "other-root", "the Rekor entry is from log").await;
    t.create(plugin("no-root", "missing", json!({"urlPrefix": "https://github.com/acme/"})).1).await;
    refused(&t, "no-root", &format!("keyless.trustRoot: ConfigMap {}/missing not found", t.namespace())).await;

    // The signature copied to another artifact's signature tag signs the first one, not it.
    let digest_of = |pinned: &str| pinned.split_once('@').unwrap().1.to_string();
    registry.copy_manifest("ksm/hostile", &tag_of(&digest_of(&pinned)), &tag_of(&digest_of(&later)));
    let prefix = json!({"urlPrefix": "https://github.com/acme/"});
    t.create(plugin_of(&later, "copied", "sigstore", prefix.clone()).1).await;
    refused(&t, "copied", &format!("for {}, another artifact", digest_of(&pinned))).await;
    // Signed an hour ago by a leaf valid for ten minutes then, as the log proves: expired now,
    // it verifies at the time it signed.
    let expired = LeafSpec { not_before: -3600, not_after: -3000, ..LeafSpec::new(CI, ISSUER) };
    sign(&later, &ours.leaf(&expired), ours.now - 3300);
    let (name, logged) = plugin_of(&later, "expired", "sigstore", prefix);
    t.create(logged).await;
    wait_plugin(&t, &name, "ready: signed inside its validity", |p| p["status"]["ready"] == true).await;
}

/// The tag of the cosign signature of manifest `digest` (`sha256:<hex>`).
fn tag_of(digest: &str) -> String {
    format!("sha256-{}.sig", &digest[7..])
}

/// Flux's CRDs as an SMP's provisionerCRDs.
fn flux_crds() -> Value {
    json!([{"group": "helm.toolkit.fluxcd.io", "version": "v2", "resources": ["helmreleases"]}])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flux_provider_no_adapter_plugin_names_is_served_by_the_built_in_plugin_unless_turned_off() {
    let t = Scenario::start("default-plugin", Mode::Observe).await;
    let provider = smp_without_plugin(&t, "plain-flux", flux_crds()).await;
    t.create(fixtures::service_set(t.namespace(), "by-default", &provider, json!([ingress_service()]))).await;
    t.wait_converged("by-default").await;
    assert!(t.child("by-default", "ingress-nginx").await.is_some(), "the built-in plugin made the HelmRelease");

    // Turned off, the same SMP needs an AdapterPlugin.
    let off = Scenario::start_with("no-default", Mode::Observe, &["--default-plugin", "none"]).await;
    let provider = smp_without_plugin(&off, "plain-flux", flux_crds()).await;
    assert_unserved(&off, "no-default", &provider).await;
}

/// Started where the AdapterPlugin CRD is not installed, the host still serves: the built-in
/// Flux plugin serves the Flux SMP, `/readyz` is ready, and the log says what is missing.
#[tokio::test(flavor = "multi_thread")]
async fn without_the_adapter_plugin_crd_the_built_in_flux_plugin_serves() {
    let Some(t) = Scenario::start_without_crd("no-plugin-crd", ADAPTER_PLUGIN_CRD).await else { return };
    t.create_service_set("no-crd", json!([ingress_service()])).await;
    t.wait_converged("no-crd").await;
    assert!(t.child("no-crd", "ingress-nginx").await.is_some(), "the built-in plugin made the HelmRelease");
    let (status, body) = ksm_test_harness::adapter::http_get(&format!("{}/readyz", t.adapter().metrics_url())).await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let log = std::fs::read_to_string(t.adapter().log_path()).unwrap();
    assert!(log.contains("cannot watch AdapterPlugin") && log.contains("is its CRD installed?"), "{log}");
}

/// An AdapterPlugin's `spec.policy` rules refuse objects before anything is applied; the
/// ServiceSet's service fails naming the rule, and other ServiceSets are served.
#[tokio::test(flavor = "multi_thread")]
async fn an_adapter_plugins_policy_rules_refuse_objects_before_they_are_applied() {
    let t = Scenario::start("policy-rules", Mode::Observe).await;
    let rule =
        json!({"expression": "!object.metadata.name.startsWith('denied.')", "message": "no releases for denied"});
    t.merge_patch(&adapter_plugin(t.smp_name()), json!({"spec": {"policy": {"validations": [rule]}}})).await;
    wait_plugin(&t, t.smp_name(), "reloaded with the rule", |p| {
        p["status"]["observedGeneration"] == 2 && p["status"]["ready"] == true
    })
    .await;
    t.create_service_set("denied", json!([ingress_service()])).await;
    t.create_service_set("fine", json!([ingress_service()])).await;
    t.wait_converged("fine").await;
    t.wait_service_set("denied", "its service Failed by the rule", |ss| {
        service(ss, "ingress-nginx").is_some_and(|s| {
            s["state"] == "Failed"
                && s["failureMessage"]
                    .as_str()
                    .is_some_and(|m| m.contains("refused by spec.policy.validations[0]: no releases for denied"))
        })
    })
    .await;
    assert!(t.child("denied", "ingress-nginx").await.is_none(), "nothing of the refused output is applied");
}
