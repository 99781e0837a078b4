//! An AdapterPlugin's status, decided from how loading its current spec went, what serves for
//! it, and whether another AdapterPlugin contests a provider it names. Pure: the reconcile
//! writes what this decides.

use super::load::{Failure, Step};
use super::registry::Loaded;
use super::verify::required;
use crate::adapter_plugin::{AdapterPlugin, AdapterPluginStatus, PluginInfo};
use crate::conditions::{self, reasons, types};
use crate::serving::ServingPlugin;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;

/// The steps of a load, in order.
const STEPS: [Step; 4] = [Step::Fetch, Step::Verify, Step::Compile, Step::Validate];

/// Condition type, reason when the step succeeded, reason when it failed.
fn condition_of(step: Step) -> (&'static str, &'static str, &'static str) {
    match step {
        Step::Fetch => (types::FETCHED, reasons::FETCHED, reasons::FETCH_FAILED),
        Step::Verify => (types::VERIFIED, reasons::VERIFIED, reasons::VERIFICATION_FAILED),
        Step::Compile => (types::COMPILED, reasons::COMPILED, reasons::COMPILE_FAILED),
        Step::Validate => (types::VALIDATED, reasons::VALIDATED, reasons::VALIDATION_FAILED),
    }
}

/// The status of `plugin`: ready only when its current spec serves and no provider it names is
/// `contested`; one condition per step (those after a failed step `Unknown`; `Verified` says
/// `NotRequired` when the spec asks for no signature; `Validated` names the `unserved` CRDs the
/// plugin needs, which hold up nothing and are only warned about once in the log); the error in
/// words, saying when a previous version keeps serving.
pub fn decide(
    plugin: &AdapterPlugin,
    loaded: Option<&Loaded>,
    attempt: &Result<(), Failure>,
    contested: Vec<String>,
    unserved: &[String],
    now: &Time,
) -> AdapterPluginStatus {
    let generation = plugin.meta().generation;
    let mut status = plugin.status.clone().unwrap_or_default();
    let failed = attempt.as_ref().err();
    for step in STEPS {
        let (type_, ok, bad) = condition_of(step);
        let conditions = &mut status.conditions;
        match failed {
            Some(failure) if failure.step == step => {
                conditions::mark_false(conditions, type_, bad, &failure.message, generation, now)
            }
            Some(failure) if (failure.step as u8) < (step as u8) => {
                let why = "an earlier step failed";
                conditions::mark_unknown(conditions, type_, reasons::NOT_REACHED, why, generation, now)
            }
            _ if step == Step::Verify && required(plugin).is_none() => {
                let why = "spec.source.oci.verify is not set: no signature is checked";
                conditions::mark_true(conditions, type_, reasons::NOT_REQUIRED, why, generation, now)
            }
            _ if step == Step::Verify => {
                let current = loaded.filter(|l| l.generation == generation);
                let by = current.and_then(|l| l.verified.as_deref()).map(|v| format!("verified: {v}"));
                conditions::mark_true(conditions, type_, ok, by.as_deref().unwrap_or_default(), generation, now)
            }
            _ if step == Step::Validate && !unserved.is_empty() => {
                let why = format!("CRDs not installed (looked for every few minutes): {}", unserved.join(", "));
                conditions::mark_true(conditions, type_, ok, &why, generation, now)
            }
            _ => conditions::mark_true(conditions, type_, ok, "", generation, now),
        }
    }
    let current = loaded.is_some_and(|l| l.generation == generation);
    status.ready = attempt.is_ok() && current && contested.is_empty();
    status.sha256 = loaded.map(|l| l.fetched.sha256.clone()).unwrap_or_default();
    status.plugin = loaded.map(|l| info(&l.serving));
    status.observed_generation = generation;
    let mut errors = contested;
    if let Some(failure) = failed {
        errors.insert(
            0,
            match loaded {
                Some(l) => {
                    format!("{} (the previous version, sha256 {}, keeps serving)", failure.message, l.fetched.sha256)
                }
                None => failure.message.clone(),
            },
        );
    }
    status.error = errors.join("; ");
    status
}

fn info(serving: &ServingPlugin) -> PluginInfo {
    let metadata = serving.metadata();
    PluginInfo {
        name: metadata.name.clone(),
        version: metadata.version.clone(),
        contract_version: metadata.contract_version.clone(),
        creates: serving.kinds().map(|k| format!("{}/{} {}", k.group, k.version, k.kind)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::adapter_plugins::registry::tests::{adapter_plugin, loaded};
    use k8s_openapi::jiff::Timestamp;

    fn now() -> Time {
        Time(Timestamp::from_second(100).unwrap())
    }

    fn condition(status: &AdapterPluginStatus, type_: &str) -> (String, String) {
        let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn a_plugin_whose_spec_loaded_is_ready() {
        let plugin = adapter_plugin("flux", &["ksm-flux"], "");
        let status = decide(&plugin, Some(&loaded(&["ksm-flux"])), &Ok(()), vec![], &[], &now());
        assert!(status.ready);
        assert_eq!(status.error, "");
        assert_eq!(status.sha256, "abc");
        assert_eq!(condition(&status, "Verified").1, "NotRequired", "a built-in plugin is not signed");
        assert_eq!(status.plugin.unwrap().name, "flux");
        for type_ in ["Fetched", "Verified", "Compiled", "Validated"] {
            assert_eq!(condition(&decide(&plugin, None, &Ok(()), vec![], &[], &now()), type_).0, "True");
        }
    }

    /// Issue 47: a CRD the plugin needs that is not installed holds up nothing and is warned
    /// about once in the log; the status is where it stays named.
    #[test]
    fn the_crds_a_plugin_needs_that_are_not_installed_are_named_and_hold_up_nothing() {
        let plugin = adapter_plugin("flux", &["ksm-flux"], "");
        let unserved = ["buckets.source.toolkit.fluxcd.io".to_string()];
        let status = decide(&plugin, Some(&loaded(&["ksm-flux"])), &Ok(()), vec![], &unserved, &now());
        assert!(status.ready);
        let validated = status.conditions.iter().find(|c| c.type_ == "Validated").unwrap();
        assert_eq!((validated.status.as_str(), validated.reason.as_str()), ("True", "Validated"));
        assert_eq!(
            validated.message,
            "CRDs not installed (looked for every few minutes): buckets.source.toolkit.fluxcd.io"
        );
        let installed = AdapterPlugin { status: Some(status), ..plugin.clone() };
        let status = decide(&installed, Some(&loaded(&["ksm-flux"])), &Ok(()), vec![], &[], &now());
        let validated = status.conditions.iter().find(|c| c.type_ == "Validated").unwrap();
        assert_eq!(validated.message, "", "installed since: no longer named");
    }

    #[test]
    fn a_plugin_that_must_be_signed_says_whether_it_was() {
        let mut plugin = adapter_plugin("argocd", &["ksm-argocd"], "");
        plugin.spec.source = serde_json::from_value(serde_json::json!(
            {"oci": {"url": "r/p:1", "verify": {"keys": [{"publicKey": "PEM"}]}}}
        ))
        .unwrap();
        let verified = decide(&plugin, Some(&loaded(&["ksm-argocd"])), &Ok(()), vec![], &[], &now());
        assert_eq!(condition(&verified, "Verified"), ("True".into(), "Verified".into()));
        let failure = Err(Failure::at(Step::Verify, "AdapterPlugin \"argocd\": r/p@sha256:… is not signed"));
        let status = decide(&plugin, None, &failure, vec![], &[], &now());
        assert!(!status.ready);
        assert_eq!(condition(&status, "Fetched"), ("True".into(), "Fetched".into()));
        assert_eq!(condition(&status, "Verified"), ("False".into(), "VerificationFailed".into()));
        assert_eq!(condition(&status, "Compiled"), ("Unknown".into(), "NotReached".into()));
        assert_eq!(status.error, "AdapterPlugin \"argocd\": r/p@sha256:… is not signed");
    }

    #[test]
    fn a_failed_step_is_false_the_later_ones_unknown_and_the_previous_version_named() {
        let plugin = adapter_plugin("flux", &["ksm-flux"], "");
        let failure = Err(Failure::at(Step::Compile, "the component does not compile: bad"));
        let status = decide(&plugin, Some(&loaded(&["ksm-flux"])), &failure, vec![], &[], &now());
        assert!(!status.ready);
        assert_eq!(condition(&status, "Fetched"), ("True".into(), "Fetched".into()));
        assert_eq!(condition(&status, "Compiled"), ("False".into(), "CompileFailed".into()));
        assert_eq!(condition(&status, "Validated"), ("Unknown".into(), "NotReached".into()));
        assert_eq!(
            status.error,
            "the component does not compile: bad (the previous version, sha256 abc, keeps serving)"
        );
        assert_eq!(status.sha256, "abc", "what serves, not what failed");
    }

    #[test]
    fn a_contested_provider_or_an_older_generation_is_not_ready() {
        let plugin = adapter_plugin("flux", &["ksm-flux"], "");
        let contested = decide(&plugin, Some(&loaded(&["ksm-flux"])), &Ok(()), vec!["two name it".into()], &[], &now());
        assert!(!contested.ready);
        assert_eq!(contested.error, "two name it");
        let mut newer = plugin.clone();
        newer.metadata.generation = Some(2);
        assert!(
            !decide(&newer, Some(&loaded(&["ksm-flux"])), &Ok(()), vec![], &[], &now()).ready,
            "loaded for generation 1"
        );
    }
}
