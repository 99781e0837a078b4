//! CEL rules, compiled once per distinct rule text: an SMP's readiness rules (`readinessRule` of
//! its adapter and provisioners, with one variable, `self`, bound to the object) and the output
//! policy's validations (with `object` and the host's facts about the service).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cel::objects::{Key, Map};
use cel::{Context, Env, Program};
use serde_json::Value;

/// Why a rule gave no verdict; messages are CEL's own.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The rule does not parse.
    #[error("rule {rule:?} does not compile: {message}")]
    Compile {
        /// The rule text.
        rule: String,
        /// CEL's parse error.
        message: String,
    },
    /// The rule failed while running, e.g. on a missing field.
    #[error("rule {rule:?} failed to evaluate: {message}")]
    Evaluate {
        /// The rule text.
        rule: String,
        /// CEL's execution error.
        message: String,
    },
    /// The rule ran but did not return a bool.
    #[error("rule {rule:?} returned {value}, not a bool")]
    NotBool {
        /// The rule text.
        rule: String,
        /// What it returned.
        value: String,
    },
}

/// A compilation: the program, or CEL's message when the rule does not parse.
type Compiled = Result<Arc<Program>, String>;

/// Compiles each distinct rule text once (failures included) and evaluates rules.
/// Shared across reconciles (`Send + Sync`); it keeps every distinct rule it has seen.
pub struct RuleCache {
    env: Arc<Env>,
    programs: Mutex<HashMap<String, Compiled>>,
    compiled: AtomicUsize,
}

impl Default for RuleCache {
    fn default() -> Self {
        let mut env = Env::stdlib();
        // cel-go's `ext.Strings()`, which kcm's health rules are written against.
        env.add_extension(cel::extensions::strings).expect("the strings extension declares each overload once");
        Self { env: Arc::new(env), programs: Mutex::default(), compiled: AtomicUsize::new(0) }
    }
}

impl RuleCache {
    /// An empty cache over CEL's standard environment (with `has`, `exists`, `all`, ...) and
    /// the strings extension (`join`, `split`, `lowerAscii`, ...).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many rule texts have been compiled so far.
    pub fn compiled(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }

    /// Evaluates `rule` with `self` = `object`. An empty or blank rule is ready (`Ok(true)`);
    /// a missing field is an [`RuleError::Evaluate`], not `false`.
    pub fn evaluate(&self, rule: &str, object: &Value) -> Result<bool, RuleError> {
        self.run(rule, &self.context(&[("self", object)]))
    }

    /// The first of `rules` that does not hold with `variables` bound (converted to CEL once,
    /// for all of them): its index, and CEL's error when it gave no verdict. A blank rule holds.
    /// Only the variables some rule names are converted: converting a whole ServiceSet that no
    /// rule reads was a tenth of the host's CPU (docs/performance.md).
    pub fn first_failing<'r>(
        &self,
        rules: impl IntoIterator<Item = &'r str>,
        variables: &[(&str, &Value)],
    ) -> Option<(usize, Option<RuleError>)> {
        let rules: Vec<&str> = rules.into_iter().collect();
        let named: Vec<(&str, &Value)> =
            variables.iter().filter(|(name, _)| rules.iter().any(|rule| names(rule, name))).copied().collect();
        let context = self.context(&named);
        rules.into_iter().enumerate().find_map(|(i, rule)| match self.run(rule, &context) {
            Ok(true) => None,
            Ok(false) => Some((i, None)),
            Err(e) => Some((i, Some(e))),
        })
    }

    /// Why `rule` does not compile, if it does not (an empty rule compiles: it holds).
    pub fn check(&self, rule: &str) -> Result<(), String> {
        if rule.trim().is_empty() {
            return Ok(());
        }
        self.program(rule).map(drop)
    }

    /// `variables` bound once (converted to CEL once) for several rules.
    pub fn bind(&self, variables: &[(&str, &Value)]) -> Bound<'_> {
        Bound { cache: self, context: self.context(variables) }
    }

    /// A context over the standard environment with `variables` bound.
    fn context(&self, variables: &[(&str, &Value)]) -> Context<'static, 'static> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        for (name, value) in variables {
            context.add_variable_from_value(*name, to_cel(value));
        }
        context
    }

    /// Runs `rule` in `context`; an empty or blank rule holds.
    fn run(&self, rule: &str, context: &Context) -> Result<bool, RuleError> {
        if rule.trim().is_empty() {
            return Ok(true);
        }
        let program = self.program(rule).map_err(|message| RuleError::Compile { rule: rule.to_owned(), message })?;
        match program.execute(context) {
            Ok(cel::Value::Bool(holds)) => Ok(holds),
            Ok(value) => Err(RuleError::NotBool { rule: rule.to_owned(), value: format!("{value:?}") }),
            Err(e) => Err(RuleError::Evaluate { rule: rule.to_owned(), message: e.to_string() }),
        }
    }

    /// The cached compilation of `rule`, compiling it on first sight.
    fn program(&self, rule: &str) -> Compiled {
        let mut programs = self.programs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(compiled) = programs.get(rule) {
            return compiled.clone();
        }
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let compiled = self.env.compile(rule).map(Arc::new).map_err(|e| e.to_string());
        programs.insert(rule.to_owned(), compiled.clone());
        compiled
    }
}

/// Variables bound for several rules (see [`RuleCache::bind`]).
pub struct Bound<'c> {
    cache: &'c RuleCache,
    context: Context<'static, 'static>,
}

impl Bound<'_> {
    /// Whether `rule` holds; a blank rule holds.
    pub fn holds(&self, rule: &str) -> Result<bool, RuleError> {
        self.cache.run(rule, &self.context)
    }

    /// What `rule` evaluates to when it is a string; `None` when it does not compile, fails or
    /// returns something else (for messages, which are best effort).
    pub fn text(&self, rule: &str) -> Option<String> {
        match self.cache.program(rule).ok()?.execute(&self.context) {
            Ok(cel::Value::String(text)) => Some(text.to_string()),
            _ => None,
        }
    }
}

/// Whether `rule` holds the identifier `name` (not as part of a longer identifier): a rule that
/// does not cannot read the variable.
fn names(rule: &str, name: &str) -> bool {
    let identifier = |c: char| c.is_ascii_alphanumeric() || c == '_';
    rule.match_indices(name).any(|(at, _)| {
        let before = rule[..at].chars().next_back();
        let after = rule[at + name.len()..].chars().next();
        !before.is_some_and(identifier) && !after.is_some_and(identifier)
    })
}

/// A JSON value as a CEL value: integers become `int` (`uint` only beyond `i64`), like
/// Kubernetes' int64 fields.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => number(n),
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => cel::Value::Map(Map {
            map: Arc::new(fields.iter().map(|(k, v)| (Key::from(k.clone()), to_cel(v))).collect()),
        }),
    }
}

/// A JSON number as CEL `int`, `uint` or `double`.
fn number(n: &serde_json::Number) -> cel::Value {
    match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => cel::Value::Int(i),
        (None, Some(u)) => cel::Value::UInt(u),
        _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_variables_a_rule_names_are_bound_and_the_rest_cannot_change_a_verdict() {
        assert!(names("object.spec.x == target.name", "object") && names("has(target.a)", "target"));
        assert!(!names("objects.size() > 0", "object") && !names("my_target == 1", "target"));
        assert!(!names("object.spec.x", "serviceSet"));
        let cache = RuleCache::new();
        let (object, service_set) = (json!({"spec": {"x": 1}}), json!({"unconvertible": "whatever"}));
        let variables = [("object", &object), ("serviceSet", &service_set)];
        assert_eq!(cache.first_failing(["object.spec.x == 1"], &variables), None);
        assert_eq!(
            cache.first_failing(["object.spec.x == 1", "serviceSet.unconvertible == 'no'"], &variables),
            Some((1, None))
        );
    }

    use crate::smp::flux_rules::{ADAPTER as FLUX_ADAPTER, PROVISIONER as FLUX_PROVISIONER};

    fn deployment(replicas: i64, available: i64, ready: i64, updated: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "status": {
        "replicas": replicas, "availableReplicas": available,
        "readyReplicas": ready, "updatedReplicas": updated,
        "conditions": [
            {"type": "Progressing", "status": "True"},
            {"type": "Available", "status": if available > 0 { "True" } else { "False" }},
        ]}})
    }

    #[test]
    fn cache_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RuleCache>();
    }

    #[test]
    fn flux_rules() {
        let rules = RuleCache::new();
        assert_eq!(rules.evaluate(FLUX_ADAPTER, &deployment(2, 2, 2, 2)), Ok(true));
        assert_eq!(rules.evaluate(FLUX_ADAPTER, &deployment(2, 1, 2, 2)), Ok(false));
        assert_eq!(rules.evaluate(FLUX_ADAPTER, &deployment(2, 2, 2, 1)), Ok(false));
        assert_eq!(rules.evaluate(FLUX_PROVISIONER, &deployment(1, 1, 1, 1)), Ok(true));
        assert_eq!(rules.evaluate(FLUX_PROVISIONER, &deployment(1, 1, 0, 1)), Ok(false));
        assert_eq!(rules.evaluate(FLUX_PROVISIONER, &deployment(1, 0, 0, 1)), Ok(false));
    }

    #[test]
    fn has_exists_or_not() {
        let rules = RuleCache::new();
        let up = deployment(1, 1, 1, 1);
        let down = deployment(1, 0, 0, 1);
        let available = r#"self.status.conditions.exists(c, c.type == "Available" && c.status == "True")"#;
        assert_eq!(rules.evaluate(available, &up), Ok(true));
        assert_eq!(rules.evaluate(available, &down), Ok(false));
        assert_eq!(rules.evaluate(&format!("!({available})"), &down), Ok(true));
        let guarded = "has(self.status.observedGeneration) || self.status.readyReplicas > 0";
        assert_eq!(rules.evaluate(guarded, &up), Ok(true));
        assert_eq!(rules.evaluate(guarded, &down), Ok(false));
        assert_eq!(rules.evaluate("!has(self.status.observedGeneration)", &up), Ok(true));
        let all = r#"self.status.conditions.all(c, c.status == "True")"#;
        assert_eq!(rules.evaluate(all, &up), Ok(true));
        assert_eq!(rules.evaluate(all, &down), Ok(false));
    }

    #[test]
    fn missing_field_is_an_error_not_false() {
        let rules = RuleCache::new();
        let err = rules.evaluate(FLUX_PROVISIONER, &json!({"status": {}})).unwrap_err();
        let RuleError::Evaluate { rule, message } = &err else { panic!("{err:?}") };
        assert_eq!(rule, FLUX_PROVISIONER);
        assert!(message.starts_with("No such key: "), "CEL's message kept: {message}");
        assert!(err.to_string().contains("failed to evaluate"), "{err}");
        let err = rules.evaluate("self.status.readyReplicas > 0", &json!({})).unwrap_err();
        assert!(matches!(err, RuleError::Evaluate { .. }), "{err:?}");
    }

    #[test]
    fn non_bool_result_is_an_error() {
        let rules = RuleCache::new();
        let err = rules.evaluate("self.status.replicas", &deployment(3, 3, 3, 3)).unwrap_err();
        assert!(matches!(&err, RuleError::NotBool { value, .. } if value.contains('3')), "{err:?}");
        assert!(err.to_string().ends_with("not a bool"), "{err}");
    }

    #[test]
    fn compile_error_is_typed_and_cached() {
        let rules = RuleCache::new();
        for _ in 0..2 {
            let err = rules.evaluate("self.status.(", &json!({})).unwrap_err();
            assert!(matches!(&err, RuleError::Compile { message, .. } if !message.is_empty()), "{err:?}");
            assert!(err.to_string().contains("does not compile"), "{err}");
        }
        assert_eq!(rules.compiled(), 1);
    }

    #[test]
    fn empty_rule_is_ready_without_compiling() {
        let rules = RuleCache::new();
        assert_eq!(rules.evaluate("", &json!({})), Ok(true));
        assert_eq!(rules.evaluate("  \n\t", &json!({})), Ok(true));
        assert_eq!(rules.compiled(), 0);
    }

    #[test]
    fn each_distinct_rule_compiles_once() {
        let rules = RuleCache::new();
        for available in [0, 1, 2] {
            let _ = rules.evaluate(FLUX_ADAPTER, &deployment(2, available, 2, 2));
            let _ = rules.evaluate(FLUX_PROVISIONER, &deployment(2, available, 2, 2));
        }
        assert_eq!(rules.compiled(), 2);
        std::thread::scope(|s| {
            s.spawn(|| rules.evaluate(FLUX_ADAPTER, &deployment(1, 1, 1, 1)));
        });
        assert_eq!(rules.compiled(), 2);
    }

    #[test]
    fn bound_variables_serve_several_rules_and_strings_join() {
        let rules = RuleCache::new();
        let object = json!({"status": {"phase": "Pending", "reasons": ["a", "b"]}});
        let bound = rules.bind(&[("obj", &object)]);
        assert_eq!(bound.holds("obj.status.phase == 'Running'"), Ok(false));
        assert_eq!(
            bound.text("'phase ' + obj.status.phase + ': ' + obj.status.reasons.join(', ')").as_deref(),
            Some("phase Pending: a, b")
        );
        assert_eq!(bound.text("obj.status.missing"), None, "a failing message is no message");
        assert_eq!(bound.text("1 + 1"), None, "a non-string message is no message");
        assert!(rules.check("obj.status.(").is_err());
        assert_eq!(rules.check("obj.status.phase == 'x'"), Ok(()));
    }

    #[test]
    fn json_numbers_keep_their_kind() {
        let rules = RuleCache::new();
        let object = json!({"i": -1, "big": u64::MAX, "f": 0.5, "s": "x", "n": null, "b": true});
        assert_eq!(rules.evaluate("self.i == -1 && self.f == 0.5 && self.s == 'x'", &object), Ok(true));
        assert_eq!(rules.evaluate("self.big == 18446744073709551615u && self.n == null && self.b", &object), Ok(true));
    }
}
