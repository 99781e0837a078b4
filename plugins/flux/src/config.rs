//! The Flux provider config: a ServiceSet's `spec.provider.config`.
//!
//! Besides the Flux settings it takes the keys kcm's own adapter reads from it (kcm deprecates
//! the ServiceSet fields of the same names for them): `priority` and `stopOnConflict` (for the
//! host), `driftIgnore`, `driftExclusions` and `maxConsecutiveFailures`, in kcm's shapes.
//!
//! Every problem is reported, not just the first, each at its dotted path (list items as
//! `key[i]`). A field set to `null` counts as unset.

use crate::duration;
use ksm_plugin_sdk::contract::ConfigError;
use ksm_plugin_sdk::names;
use serde::Serialize;
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
    /// kcm's `driftIgnore`: objects left out of drift correction entirely.
    pub drift_ignore: Vec<PatchSelector>,
    /// kcm's `driftExclusions`: fields left out of drift correction.
    pub drift_exclusions: Vec<DriftExclusion>,
    /// kcm's `maxConsecutiveFailures`: failed attempts, the first included, before giving up.
    pub max_consecutive_failures: Option<i64>,
}

/// The `remediation` part of the config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remediation {
    /// Install and upgrade `remediation.retries`; negative means unlimited (as in Flux).
    pub retries: Option<i64>,
    /// Upgrade `remediation.strategy`: `rollback` or `uninstall`.
    pub strategy: Option<String>,
}

/// A Sveltos `PatchSelector` (a `driftIgnore` item, a `driftExclusions` target). It serializes
/// as the `target` of a Flux ignore rule: the same fields, matched the same way (kustomize's
/// selector, regular expressions for group, version, kind, name and namespace). An empty
/// string counts as unset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchSelector {
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_selector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotation_selector: Option<String>,
}

/// A `driftExclusions` item: JSON pointers to leave out of drift correction in the objects
/// `target` selects (all without one). It serializes as a Flux ignore rule, which has this
/// very shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DriftExclusion {
    /// JSON pointers (RFC 6901); `""` is the whole object.
    pub paths: Vec<String>,
    /// The objects the paths are left out of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<PatchSelector>,
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
            drift_ignore: Vec::new(),
            drift_exclusions: Vec::new(),
            max_consecutive_failures: None,
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
                "driftIgnore" => config.drift_ignore = list_field(path, value, selector_field)?,
                "driftExclusions" => config.drift_exclusions = list_field(path, value, drift_exclusion_field)?,
                "maxConsecutiveFailures" => {
                    config.max_consecutive_failures = Some(max_consecutive_failures_field(path, value)?);
                }
                _ => return Err(unknown(path)),
            }
            Ok(())
        });
        valid_if_no(errors, config)
    }

    /// The install and upgrade remediation of a HelmRelease. Without `remediation.retries`,
    /// `maxConsecutiveFailures` sets it: kcm counts the failed attempts, the first included,
    /// Flux the retries after the first, so `n` failures are `n - 1` retries.
    pub fn helm_remediation(&self) -> Remediation {
        let from_kcm = self.max_consecutive_failures.map(|failures| failures - 1);
        Remediation { retries: self.remediation.retries.or(from_kcm), ..self.remediation.clone() }
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

/// Parses a Sveltos `PatchSelector`.
fn selector_field(path: &str, value: &Value) -> Result<PatchSelector, Errors> {
    let mut selector = PatchSelector::default();
    let errors = visit_object(value, path, |path, key, value| {
        let field = match key {
            "group" => &mut selector.group,
            "version" => &mut selector.version,
            "kind" => &mut selector.kind,
            "name" => &mut selector.name,
            "namespace" => &mut selector.namespace,
            "labelSelector" => &mut selector.label_selector,
            "annotationSelector" => &mut selector.annotation_selector,
            _ => return Err(unknown(path)),
        };
        *field = Some(string_field(path, value)?).filter(|s| !s.is_empty()).map(str::to_string);
        Ok(())
    });
    valid_if_no(errors, selector)
}

/// Parses a `driftExclusions` item, `{paths, target}`; `paths` is required (as in kcm's CRD).
fn drift_exclusion_field(path: &str, value: &Value) -> Result<DriftExclusion, Errors> {
    let (mut paths, mut target) = (None, None);
    let mut errors = visit_object(value, path, |path, key, value| {
        match key {
            "paths" => paths = Some(list_field(path, value, json_pointer_field)?),
            "target" => target = Some(selector_field(path, value)?),
            _ => return Err(unknown(path)),
        }
        Ok(())
    });
    if value.is_object() && value.get("paths").is_none_or(Value::is_null) {
        errors.extend(error(&format!("{path}.paths"), "required: the JSON pointers to leave out"));
    }
    valid_if_no(errors, DriftExclusion { paths: paths.unwrap_or_default(), target })
}

/// A JSON pointer (RFC 6901), as Flux reads ignore-rule paths: empty (the whole object), or
/// `/`-separated tokens in which `~` only escapes (`~0`, `~1`).
fn json_pointer_field(path: &str, value: &Value) -> Result<String, Errors> {
    let pointer = string_field(path, value)?;
    let escapes_valid = pointer.split('~').skip(1).all(|after| after.starts_with(['0', '1']));
    if (pointer.is_empty() || pointer.starts_with('/')) && escapes_valid {
        Ok(pointer.to_string())
    } else {
        let rule = "\"\" for the whole object, else \"/\"-separated, ~ written ~0 and / in a key ~1";
        Err(error(path, format!("{pointer:?} is not a JSON pointer (RFC 6901): {rule}")))
    }
}

/// At least 1: the count includes the first attempt, which Flux always makes.
fn max_consecutive_failures_field(path: &str, value: &Value) -> Result<i64, Errors> {
    match int_field(path, value)? {
        failures if failures >= 1 => Ok(failures),
        _ => Err(error(path, "must be at least 1: the first attempt counts (remediation.retries: -1 retries forever)")),
    }
}

/// Parses every item of the list `value` at `path` with `item` (at `path[i]`) and collects the
/// errors; a non-list is one error at `path`.
fn list_field<T>(
    path: &str,
    value: &Value,
    item: impl Fn(&str, &Value) -> Result<T, Errors>,
) -> Result<Vec<T>, Errors> {
    let Value::Array(items) = value else {
        return Err(error(path, "expected a list"));
    };
    let (mut parsed, mut errors) = (Vec::new(), Vec::new());
    for (i, value) in items.iter().enumerate() {
        match item(&format!("{path}[{i}]"), value) {
            Ok(value) => parsed.push(value),
            Err(e) => errors.extend(e),
        }
    }
    valid_if_no(errors, parsed)
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
            "driftIgnore": [{"kind": "Secret", "name": "", "labelSelector": "app=web"}],
            "driftExclusions": [{"paths": ["", "/spec/replicas", "/metadata/annotations/a~1b"]},
                {"paths": [], "target": {"group": "apps", "version": "v1", "namespace": "web.*",
                    "annotationSelector": "x notin (y)"}}],
            "maxConsecutiveFailures": 3,
        }))
        .unwrap();
        let selector = |fields: Value| -> PatchSelector { selector_field("", &fields).unwrap() };
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
                drift_ignore: vec![PatchSelector {
                    kind: Some("Secret".into()),
                    label_selector: Some("app=web".into()),
                    ..PatchSelector::default()
                }],
                drift_exclusions: vec![
                    DriftExclusion {
                        paths: vec!["".into(), "/spec/replicas".into(), "/metadata/annotations/a~1b".into()],
                        target: None,
                    },
                    DriftExclusion {
                        paths: vec![],
                        target: Some(selector(json!({"group": "apps", "version": "v1", "namespace": "web.*",
                            "annotationSelector": "x notin (y)"}))),
                    },
                ],
                max_consecutive_failures: Some(3),
            }
        );
    }

    #[test]
    fn max_consecutive_failures_sets_retries_unless_remediation_does() {
        let retries = |config: Value| FluxConfig::from_value(&config).unwrap().helm_remediation().retries;
        assert_eq!(retries(json!({"maxConsecutiveFailures": 1})), Some(0), "one failure: no retry");
        assert_eq!(retries(json!({"maxConsecutiveFailures": 4})), Some(3));
        assert_eq!(retries(json!({"maxConsecutiveFailures": 4, "remediation": {"retries": -1}})), Some(-1));
        assert_eq!(retries(json!({"remediation": {"strategy": "rollback"}})), None);
    }

    #[test]
    fn reports_kcm_key_errors_at_their_paths() {
        assert_eq!(
            errors(json!({
                "driftIgnore": [{"kind": "Deployment", "nmae": "web"}, "Secret", {"labelSelector": 1}],
                "driftExclusions": [{"paths": ["spec/replicas", "/a~2b", "/ok", 7]}, {"target": {"kind": "Pod"}},
                    {"paths": "/spec", "targets": {}}],
                "maxConsecutiveFailures": 0,
            })),
            [
                "driftExclusions[0].paths[0]: \"spec/replicas\" is not a JSON pointer (RFC 6901): \"\" for the whole \
                 object, else \"/\"-separated, ~ written ~0 and / in a key ~1",
                "driftExclusions[0].paths[1]: \"/a~2b\" is not a JSON pointer (RFC 6901): \"\" for the whole object, \
                 else \"/\"-separated, ~ written ~0 and / in a key ~1",
                "driftExclusions[0].paths[3]: expected a string",
                "driftExclusions[1].paths: required: the JSON pointers to leave out",
                "driftExclusions[2].paths: expected a list",
                "driftExclusions[2].targets: unknown field",
                "driftIgnore[0].nmae: unknown field",
                "driftIgnore[1]: expected an object",
                "driftIgnore[2].labelSelector: expected a string",
                "maxConsecutiveFailures: must be at least 1: the first attempt counts (remediation.retries: -1 \
                 retries forever)",
            ]
        );
        assert_eq!(errors(json!({"driftIgnore": {"kind": "Secret"}})), ["driftIgnore: expected a list"]);
        assert_eq!(errors(json!({"maxConsecutiveFailures": "3"})), ["maxConsecutiveFailures: expected an integer"]);
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
