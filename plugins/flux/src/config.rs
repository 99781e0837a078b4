//! The Flux provider config: a ServiceSet's `spec.provider.config`.
//!
//! Every problem is reported, not just the first, each at its dotted path. A field set to
//! `null` counts as unset.

use crate::duration;
use ksm_plugin_sdk::contract::ConfigError;
use ksm_plugin_sdk::names;
use serde_json::Value;

/// Reconciliation interval of the Flux objects when the config sets none.
pub const DEFAULT_INTERVAL: &str = "10m";

/// Largest `priority` (the CRD's int32 range).
const MAX_PRIORITY: i64 = i32::MAX as i64;

/// The Flux provider config with defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FluxConfig {
    /// `spec.interval` of every Flux object (default `10m`).
    pub interval: String,
    /// `spec.timeout` of every Flux object; a HelmRelease prefers its `helmOptions.timeout`.
    pub timeout: Option<String>,
    /// Kustomization `spec.prune` (default true).
    pub prune: bool,
    /// Kustomization `spec.wait` (default true).
    pub wait: bool,
    /// `spec.suspend` of every Flux object (default false).
    pub suspend: bool,
    /// Target namespace of services whose `namespace` is empty.
    pub target_namespace: Option<String>,
    /// HelmRelease `spec.driftDetection.mode`: `enabled`, `warn` or `disabled`.
    pub drift_detection: Option<String>,
    /// HelmRelease install/upgrade remediation.
    pub remediation: Remediation,
}

/// The `remediation` part of the config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remediation {
    /// Install and upgrade `remediation.retries`; negative means unlimited (as in Flux).
    pub retries: Option<i64>,
    /// Upgrade `remediation.strategy`: `rollback` or `uninstall`.
    pub strategy: Option<String>,
}

impl Default for FluxConfig {
    fn default() -> Self {
        Self {
            interval: DEFAULT_INTERVAL.to_string(),
            timeout: None,
            prune: true,
            wait: true,
            suspend: false,
            target_namespace: None,
            drift_detection: None,
            remediation: Remediation::default(),
        }
    }
}

/// Errors of one field or object.
type Errors = Vec<ConfigError>;

impl FluxConfig {
    /// Parses the config as JSON text; `null` and blank text give the defaults.
    pub fn from_json(text: &str) -> Result<Self, Errors> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let value: Value =
            serde_json::from_str(text).map_err(|e| vec![ConfigError::new("", format!("not valid JSON: {e}"))])?;
        Self::from_value(&value)
    }

    /// Parses the config as a JSON value; `null` gives the defaults.
    pub fn from_value(value: &Value) -> Result<Self, Errors> {
        let mut config = Self::default();
        if value.is_null() {
            return Ok(config);
        }
        let errors = visit_object(value, "", |path, key, value| {
            match key {
                "interval" => config.interval = duration_field(path, value)?,
                "timeout" => config.timeout = Some(duration_field(path, value)?),
                "prune" => config.prune = bool_field(path, value)?,
                "wait" => config.wait = bool_field(path, value)?,
                "suspend" => config.suspend = bool_field(path, value)?,
                "targetNamespace" => config.target_namespace = namespace_field(path, value)?,
                // Conflict arbitration is the host's (priority, stopOnConflict): checked, not used.
                "priority" => priority_field(path, value)?,
                "stopOnConflict" => drop(bool_field(path, value)?),
                "driftDetection" => {
                    config.drift_detection = Some(one_of_field(path, value, &["enabled", "warn", "disabled"])?);
                }
                "remediation" => config.remediation = remediation_field(path, value)?,
                _ => return Err(unknown(path)),
            }
            Ok(())
        });
        valid_if_no(errors, config)
    }
}

/// Parses `remediation: {retries, strategy}`.
fn remediation_field(path: &str, value: &Value) -> Result<Remediation, Errors> {
    let mut remediation = Remediation::default();
    let errors = visit_object(value, path, |path, key, value| {
        match key {
            "retries" => remediation.retries = Some(int_field(path, value)?),
            "strategy" => {
                remediation.strategy = Some(one_of_field(path, value, &["rollback", "uninstall"])?);
            }
            _ => return Err(unknown(path)),
        }
        Ok(())
    });
    valid_if_no(errors, remediation)
}

/// Calls `field(path, key, value)` for every non-null field of the object `value` at `path`
/// and collects the errors; a non-object is one error at `path`.
fn visit_object(value: &Value, path: &str, mut field: impl FnMut(&str, &str, &Value) -> Result<(), Errors>) -> Errors {
    let Value::Object(fields) = value else {
        return error(path, "expected an object");
    };
    fields
        .iter()
        .filter(|(_, value)| !value.is_null())
        .filter_map(|(key, value)| {
            let path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            field(&path, key, value).err()
        })
        .flatten()
        .collect()
}

/// `value` when there are no `errors`.
fn valid_if_no<T>(errors: Errors, value: T) -> Result<T, Errors> {
    if errors.is_empty() { Ok(value) } else { Err(errors) }
}

fn error(path: &str, message: impl Into<String>) -> Errors {
    vec![ConfigError::new(path, message)]
}

fn unknown(path: &str) -> Errors {
    error(path, "unknown field")
}

fn string_field<'a>(path: &str, value: &'a Value) -> Result<&'a str, Errors> {
    value.as_str().ok_or_else(|| error(path, "expected a string"))
}

fn bool_field(path: &str, value: &Value) -> Result<bool, Errors> {
    value.as_bool().ok_or_else(|| error(path, "expected a boolean"))
}

fn int_field(path: &str, value: &Value) -> Result<i64, Errors> {
    value.as_i64().ok_or_else(|| error(path, "expected an integer"))
}

fn duration_field(path: &str, value: &Value) -> Result<String, Errors> {
    let text = string_field(path, value)?;
    if duration::is_valid(text) { Ok(text.to_string()) } else { Err(error(path, format!("invalid duration {text:?}"))) }
}

/// A DNS-1123 label; the empty string counts as unset.
fn namespace_field(path: &str, value: &Value) -> Result<Option<String>, Errors> {
    match string_field(path, value)? {
        "" => Ok(None),
        ns if names::is_dns1123_label(ns) => Ok(Some(ns.to_string())),
        ns => Err(error(path, format!("{ns:?} is not a valid namespace name (DNS-1123 label)"))),
    }
}

fn priority_field(path: &str, value: &Value) -> Result<(), Errors> {
    let priority = int_field(path, value)?;
    if (0..=MAX_PRIORITY).contains(&priority) {
        Ok(())
    } else {
        Err(error(path, format!("must be between 0 and {MAX_PRIORITY}")))
    }
}

fn one_of_field(path: &str, value: &Value, allowed: &[&str]) -> Result<String, Errors> {
    let text = string_field(path, value)?;
    if allowed.contains(&text) {
        Ok(text.to_string())
    } else {
        Err(error(path, format!("{text:?} is not one of {}", allowed.join(", "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(config: Value) -> Vec<String> {
        FluxConfig::from_value(&config).unwrap_err().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn null_empty_and_blank_give_defaults() {
        for text in ["null", "{}", "", "  "] {
            assert_eq!(FluxConfig::from_json(text), Ok(FluxConfig::default()), "{text:?}");
        }
        let defaults = FluxConfig::default();
        assert_eq!(defaults.interval, "10m");
        assert!(defaults.prune && defaults.wait && !defaults.suspend);
    }

    #[test]
    fn parses_every_field() {
        let config = FluxConfig::from_value(&json!({
            "interval": "1h30m", "timeout": "5m", "prune": false, "wait": false, "suspend": true,
            "targetNamespace": "apps", "priority": 2147483647, "stopOnConflict": true, "driftDetection": "warn",
            "remediation": {"retries": -1, "strategy": "uninstall"},
        }))
        .unwrap();
        assert_eq!(
            config,
            FluxConfig {
                interval: "1h30m".into(),
                timeout: Some("5m".into()),
                prune: false,
                wait: false,
                suspend: true,
                target_namespace: Some("apps".into()),
                drift_detection: Some("warn".into()),
                remediation: Remediation { retries: Some(-1), strategy: Some("uninstall".into()) },
            }
        );
    }

    #[test]
    fn null_fields_are_unset() {
        let config = FluxConfig::from_value(&json!({"interval": null, "remediation": null})).unwrap();
        assert_eq!(config, FluxConfig::default());
    }

    #[test]
    fn collects_every_error() {
        assert_eq!(
            errors(json!({"interval": "5x", "intervall": "1m", "prune": "yes"})),
            ["interval: invalid duration \"5x\"", "intervall: unknown field", "prune: expected a boolean"]
        );
    }

    #[test]
    fn reports_nested_and_range_errors() {
        assert_eq!(
            errors(json!({
                "remediation": {"retries": 1.5, "strategy": "retry", "foo": 1},
                "priority": -1, "driftDetection": "on", "targetNamespace": "Apps", "timeout": 30,
            })),
            [
                "driftDetection: \"on\" is not one of enabled, warn, disabled",
                "priority: must be between 0 and 2147483647",
                "remediation.foo: unknown field",
                "remediation.retries: expected an integer",
                "remediation.strategy: \"retry\" is not one of rollback, uninstall",
                "targetNamespace: \"Apps\" is not a valid namespace name (DNS-1123 label)",
                "timeout: expected a string",
            ]
        );
        assert_eq!(errors(json!({"remediation": []})), ["remediation: expected an object"]);
        assert_eq!(errors(json!({"priority": 2147483648_i64})), ["priority: must be between 0 and 2147483647"]);
    }

    #[test]
    fn rejects_non_objects_and_bad_json() {
        assert_eq!(FluxConfig::from_json("[1]"), Err(vec![ConfigError::new("", "expected an object")]));
        let bad = FluxConfig::from_json("{").unwrap_err();
        assert_eq!(bad[0].path, "");
        assert!(bad[0].message.starts_with("not valid JSON"), "{}", bad[0].message);
    }
}
