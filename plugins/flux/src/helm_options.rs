//! k0rdent `helmOptions` and their HelmRelease equivalents (`install`, `upgrade`, `uninstall`,
//! `maxHistory`, `timeout`).
//!
//! The template's `helmOptions` are the base; the service's override them field by field
//! (nested objects merge; a null or empty-string field overrides nothing, an explicit `false`
//! does).
//!
//! Options without a Flux equivalent are ignored: `enableClientCache`, `dependencyUpdate`,
//! `labels`, `description`, `installOptions.takeOwnership`, and `upgradeOptions.resetValues`,
//! `resetThenReuseValues`, `recreate`, `subNotes`, `takeOwnership`.

use crate::config::Remediation;
use crate::duration;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The merged helmOptions of a service (k0rdent field names).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelmOptions {
    wait: Option<bool>,
    wait_for_jobs: Option<bool>,
    create_namespace: Option<bool>,
    #[serde(rename = "skipCRDs")]
    skip_crds: Option<bool>,
    atomic: Option<bool>,
    disable_hooks: Option<bool>,
    #[serde(rename = "disableOpenAPIValidation")]
    disable_openapi_validation: Option<bool>,
    timeout: Option<String>,
    skip_schema_validation: Option<bool>,
    replace: Option<bool>,
    #[serde(default)]
    install_options: InstallOptions,
    #[serde(default)]
    upgrade_options: UpgradeOptions,
    #[serde(default)]
    uninstall_options: UninstallOptions,
}

/// `helmOptions.installOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstallOptions {
    create_namespace: Option<bool>,
    replace: Option<bool>,
    disable_hooks: Option<bool>,
}

/// `helmOptions.upgradeOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpgradeOptions {
    force: Option<bool>,
    reuse_values: Option<bool>,
    max_history: Option<i64>,
    cleanup_on_fail: Option<bool>,
    #[serde(rename = "upgradeCRDs")]
    upgrade_crds: Option<bool>,
    disable_hooks: Option<bool>,
}

/// `helmOptions.uninstallOptions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UninstallOptions {
    keep_history: Option<bool>,
    deletion_propagation: Option<String>,
    disable_hooks: Option<bool>,
}

impl HelmOptions {
    /// Merges the template's options (`base`) with the service's (`overrides`) and reads the
    /// result; the error says what is wrong.
    pub fn merged(base: Option<&Value>, overrides: Option<&Value>) -> Result<Self, String> {
        let mut merged = Value::Object(Map::new());
        for layer in [base, overrides].into_iter().flatten() {
            merge(&mut merged, layer);
        }
        let options: Self = serde_json::from_value(merged).map_err(|e| e.to_string())?;
        match &options.timeout {
            Some(timeout) if !duration::is_valid(timeout) => Err(format!("timeout: invalid duration {timeout:?}")),
            _ => Ok(options),
        }
    }

    /// `helmOptions.timeout`, when set.
    pub fn timeout(&self) -> Option<&str> {
        self.timeout.as_deref()
    }

    /// `upgradeOptions.maxHistory` as HelmRelease `spec.maxHistory`.
    pub fn max_history(&self) -> Option<i64> {
        self.upgrade_options.max_history
    }

    /// HelmRelease `spec.install`; `remediation` is the provider config's.
    pub fn install(&self, remediation: &Remediation) -> Install {
        Install {
            create_namespace: self.install_options.create_namespace.or(self.create_namespace).unwrap_or(true),
            replace: self.install_options.replace.or(self.replace),
            disable_hooks: self.install_options.disable_hooks.or(self.disable_hooks),
            crds: self.skip_crds.filter(|skip| *skip).map(|_| SKIP_CRDS),
            remediation: remediation.retries.map(|retries| InstallRemediation { retries }),
            shared: self.shared(),
        }
    }

    /// HelmRelease `spec.upgrade`, or none when it would be empty. `helmOptions.atomic` (Helm's
    /// "roll back a failed upgrade") becomes the `rollback` strategy, unless the provider config
    /// sets one, with `remediateLastFailure` so the last failure is rolled back too.
    pub fn upgrade(&self, remediation: &Remediation) -> Option<Upgrade> {
        let crds = if self.skip_crds == Some(true) {
            Some(SKIP_CRDS)
        } else {
            self.upgrade_options.upgrade_crds.filter(|upgrade| *upgrade).map(|_| "CreateReplace")
        };
        let atomic = self.atomic == Some(true);
        let strategy = remediation.strategy.clone().or_else(|| atomic.then(|| "rollback".to_string()));
        let remediate_last_failure = (atomic && strategy.as_deref() == Some("rollback")).then_some(true);
        let remediation =
            non_empty(UpgradeRemediation { retries: remediation.retries, strategy, remediate_last_failure });
        non_empty(Upgrade {
            force: self.upgrade_options.force,
            cleanup_on_fail: self.upgrade_options.cleanup_on_fail,
            preserve_values: self.upgrade_options.reuse_values,
            disable_hooks: self.upgrade_options.disable_hooks.or(self.disable_hooks),
            crds,
            remediation,
            shared: self.shared(),
        })
    }

    /// HelmRelease `spec.uninstall`, or none when it would be empty.
    pub fn uninstall(&self) -> Option<Uninstall> {
        non_empty(Uninstall {
            keep_history: self.uninstall_options.keep_history,
            deletion_propagation: self.uninstall_options.deletion_propagation.clone(),
            disable_hooks: self.uninstall_options.disable_hooks.or(self.disable_hooks),
        })
    }

    /// The fields install and upgrade set alike.
    fn shared(&self) -> SharedActionFields {
        let disabled_by = |enabled: Option<bool>| (enabled == Some(false)).then_some(true);
        SharedActionFields {
            disable_wait: disabled_by(self.wait),
            disable_wait_for_jobs: disabled_by(self.wait_for_jobs),
            disable_openapi_validation: self.disable_openapi_validation,
            disable_schema_validation: self.skip_schema_validation,
        }
    }
}

/// The `crds` policy that installs and upgrades no CRDs.
const SKIP_CRDS: &str = "Skip";

/// Merges `overrides` into `base`: objects field by field, anything else replaces `base`.
/// Unset values (null, empty string) of `overrides` change nothing.
fn merge(base: &mut Value, overrides: &Value) {
    let Value::Object(fields) = overrides else {
        if !is_unset(overrides) {
            *base = overrides.clone();
        }
        return;
    };
    if !base.is_object() {
        *base = Value::Object(Map::new());
    }
    if let Value::Object(base) = base {
        for (key, value) in fields.iter().filter(|(_, v)| !is_unset(v)) {
            merge(base.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

fn is_unset(value: &Value) -> bool {
    value.is_null() || value.as_str() == Some("")
}

/// `value` unless it equals its default (an empty object).
fn non_empty<T: Default + PartialEq>(value: T) -> Option<T> {
    (value != T::default()).then_some(value)
}

/// HelmRelease `spec.install`.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Install {
    create_namespace: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    replace: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_hooks: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    crds: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remediation: Option<InstallRemediation>,
    #[serde(flatten)]
    shared: SharedActionFields,
}

/// HelmRelease `spec.install.remediation`.
#[derive(Debug, Default, PartialEq, Serialize)]
struct InstallRemediation {
    retries: i64,
}

/// HelmRelease `spec.upgrade`.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Upgrade {
    #[serde(skip_serializing_if = "Option::is_none")]
    force: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cleanup_on_fail: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preserve_values: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_hooks: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    crds: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remediation: Option<UpgradeRemediation>,
    #[serde(flatten)]
    shared: SharedActionFields,
}

/// HelmRelease `spec.upgrade.remediation`.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct UpgradeRemediation {
    #[serde(skip_serializing_if = "Option::is_none")]
    retries: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remediate_last_failure: Option<bool>,
}

/// The fields of `spec.install` and `spec.upgrade` that come from the same helmOptions.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct SharedActionFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_wait: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_wait_for_jobs: Option<bool>,
    #[serde(rename = "disableOpenAPIValidation", skip_serializing_if = "Option::is_none")]
    disable_openapi_validation: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_schema_validation: Option<bool>,
}

/// HelmRelease `spec.uninstall`.
#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Uninstall {
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_history: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_propagation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    disable_hooks: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(base: Value, overrides: Value) -> Value {
        let mut merged = json!({});
        merge(&mut merged, &base);
        merge(&mut merged, &overrides);
        merged
    }

    #[test]
    fn service_options_override_template_options_field_by_field() {
        let base = json!({"wait": true, "timeout": "5m", "upgradeOptions": {"force": true, "maxHistory": 3}});
        let overrides = json!({"wait": false, "timeout": "", "atomic": null,
            "upgradeOptions": {"force": false, "cleanupOnFail": true}});
        assert_eq!(
            merged(base, overrides),
            json!({"wait": false, "timeout": "5m",
                "upgradeOptions": {"force": false, "maxHistory": 3, "cleanupOnFail": true}})
        );
    }

    #[test]
    fn nested_overrides_without_a_base_drop_unset_fields() {
        assert_eq!(
            merged(json!(null), json!({"installOptions": {"replace": null, "disableHooks": true}})),
            json!({"installOptions": {"disableHooks": true}})
        );
    }

    #[test]
    fn defaults_create_the_namespace_and_leave_the_rest_to_flux() {
        let options = HelmOptions::merged(None, None).unwrap();
        let none = Remediation::default();
        assert_eq!(serde_json::to_value(options.install(&none)).unwrap(), json!({"createNamespace": true}));
        assert_eq!(options.upgrade(&none), None);
        assert_eq!(options.uninstall(), None);
    }

    #[test]
    fn config_strategy_wins_over_atomic() {
        let options = HelmOptions::merged(Some(&json!({"atomic": true})), None).unwrap();
        let upgrade = |r: &Remediation| serde_json::to_value(options.upgrade(r)).unwrap();
        assert_eq!(
            upgrade(&Remediation::default()),
            json!({"remediation": {"strategy": "rollback", "remediateLastFailure": true}})
        );
        let config = Remediation { retries: Some(2), strategy: Some("uninstall".into()) };
        assert_eq!(upgrade(&config), json!({"remediation": {"retries": 2, "strategy": "uninstall"}}));
    }

    #[test]
    fn rejects_bad_types_and_durations() {
        assert!(HelmOptions::merged(Some(&json!({"wait": "yes"})), None).is_err());
        assert_eq!(
            HelmOptions::merged(None, Some(&json!({"timeout": "5 minutes"}))).unwrap_err(),
            "timeout: invalid duration \"5 minutes\""
        );
    }
}
