//! CEL rules, compiled once per distinct rule text: an SMP's readiness rules (`readinessRule` of
//! its adapter and provisioners, with one variable, `self`, bound to the object) and the output
//! policy's validations (with `object` and the host's facts about the service).

mod lru;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, MapExpr, StructExpr};
use cel::objects::{Key, Map};
use cel::{Context, Env, Program};
use lru::Lru;
use serde_json::Value;

/// Compiled rules kept, least recently used dropped first: far more than the host's own and the
/// operators' rules together.
const MAX_PROGRAMS: usize = 1024;
/// Bytes of rule text the kept rules may hold together: a rule's compiled form takes some tens
/// of bytes per byte of text, so this bounds the cache to some tens of MiB.
const MAX_PROGRAM_BYTES: usize = 1024 * 1024;

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

/// A compilation: the rule, or CEL's message when it does not parse.
type Compiled = Result<Arc<Rule>, String>;

/// A compiled rule, with what it reads of each identifier it names (see [`Reads`]).
struct Rule {
    program: Program,
    reads: HashMap<String, Reads>,
}

/// Compiles each distinct rule text once (failures included), keeping the most recently used,
/// and evaluates rules. Shared across reconciles (`Send + Sync`).
pub struct RuleCache {
    env: Arc<Env>,
    programs: Mutex<Lru<Compiled>>,
    compiled: AtomicUsize,
}

impl Default for RuleCache {
    fn default() -> Self {
        let mut env = Env::stdlib();
        // cel-go's `ext.Strings()`, which kcm's health rules are written against.
        env.add_extension(cel::extensions::strings).expect("the strings extension declares each overload once");
        Self {
            env: Arc::new(env),
            programs: Mutex::new(Lru::new(MAX_PROGRAMS, MAX_PROGRAM_BYTES)),
            compiled: AtomicUsize::new(0),
        }
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
        let compiled = [self.rule(rule)];
        execute(rule, &compiled[0], &self.context(&compiled, &[("self", object)]))
    }

    /// The first of `rules` that does not hold with `variables` bound (converted to CEL once,
    /// for all of them): its index, and CEL's error when it gave no verdict. A blank rule holds.
    pub fn first_failing<'r>(
        &self,
        rules: impl IntoIterator<Item = &'r str>,
        variables: &[(&str, &Value)],
    ) -> Option<(usize, Option<RuleError>)> {
        let rules: Vec<&str> = rules.into_iter().collect();
        let compiled: Vec<_> = rules.iter().map(|rule| self.rule(rule)).collect();
        let context = self.context(&compiled, variables);
        rules.iter().zip(&compiled).enumerate().find_map(|(i, (rule, compiled))| {
            match execute(rule, compiled, &context) {
                Ok(true) => None,
                Ok(false) => Some((i, None)),
                Err(e) => Some((i, Some(e))),
            }
        })
    }

    /// Why `rule` does not compile, if it does not (an empty rule compiles: it holds).
    pub fn check(&self, rule: &str) -> Result<(), String> {
        self.rule(rule).map_or(Ok(()), |compiled| compiled.map(drop))
    }

    /// `variables` bound once (converted to CEL once) for `rules`, the only rules the binding
    /// serves: a variable is converted only as far as they read it.
    pub fn bind(&self, rules: &[&str], variables: &[(&str, &Value)]) -> Bound<'_> {
        let compiled: Vec<_> = rules.iter().map(|rule| self.rule(rule)).collect();
        Bound { cache: self, context: self.context(&compiled, variables) }
    }

    /// A context over the standard environment with `variables` bound, each converted to CEL
    /// only as far as `rules` read it: a variable no rule names is left out, and one whose
    /// fields they only select is converted only at those fields. Converting a whole
    /// ServiceSet that no rule reads was a tenth of the host's CPU, and whole HelmReleases for
    /// the built-in Flux rules, which read two fields, 4.4% (docs/performance.md). A rule that
    /// does not compile reads nothing: it fails to run whatever is bound.
    fn context(&self, rules: &[Option<Compiled>], variables: &[(&str, &Value)]) -> Context<'static, 'static> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        for (name, value) in variables {
            let (mut whole, mut paths) = (false, Vec::<&[String]>::new());
            let compiled = rules.iter().flatten().filter_map(|rule| rule.as_ref().ok());
            for reads in compiled.filter_map(|rule| rule.reads.get(*name)) {
                whole |= reads.whole;
                paths.extend(reads.paths.iter().map(Vec::as_slice));
            }
            if whole {
                context.add_variable_from_value(*name, to_cel(value));
            } else if !paths.is_empty() {
                context.add_variable_from_value(*name, project(value, &paths));
            }
        }
        context
    }

    /// The cached compilation of `rule`; `None` when it is empty or blank (it holds).
    fn rule(&self, rule: &str) -> Option<Compiled> {
        (!rule.trim().is_empty()).then(|| self.program(rule))
    }

    /// The cached compilation of `rule`, compiling it (and reading what it reads) on first sight.
    fn program(&self, rule: &str) -> Compiled {
        if let Some(compiled) = lock(&self.programs).get(rule) {
            return compiled;
        }
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let compiled = self
            .env
            .compile(rule)
            .map(|program| {
                let mut reads = HashMap::new();
                collect_reads(program.expression(), &mut reads);
                Arc::new(Rule { program, reads })
            })
            .map_err(|e| e.to_string());
        lock(&self.programs).insert(rule, compiled.clone());
        compiled
    }
}

/// `mutex` locked, even if a panic poisoned it (what it guards stays consistent).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Variables bound for several rules (see [`RuleCache::bind`]).
pub struct Bound<'c> {
    cache: &'c RuleCache,
    context: Context<'static, 'static>,
}

impl Bound<'_> {
    /// Whether `rule` holds; a blank rule holds.
    pub fn holds(&self, rule: &str) -> Result<bool, RuleError> {
        execute(rule, &self.cache.rule(rule), &self.context)
    }

    /// What `rule` evaluates to when it is a string; `None` when it does not compile, fails or
    /// returns something else (for messages, which are best effort).
    pub fn text(&self, rule: &str) -> Option<String> {
        match self.cache.program(rule).ok()?.program.execute(&self.context) {
            Ok(cel::Value::String(text)) => Some(text.to_string()),
            _ => None,
        }
    }
}

/// Runs `rule`, compiled as `compiled` (see [`RuleCache::rule`]), in `context`.
fn execute(rule: &str, compiled: &Option<Compiled>, context: &Context) -> Result<bool, RuleError> {
    let Some(compiled) = compiled else { return Ok(true) };
    let compiled =
        compiled.as_ref().map_err(|message| RuleError::Compile { rule: rule.to_owned(), message: message.clone() })?;
    match compiled.program.execute(context) {
        Ok(cel::Value::Bool(holds)) => Ok(holds),
        Ok(value) => Err(RuleError::NotBool { rule: rule.to_owned(), value: format!("{value:?}") }),
        Err(e) => Err(RuleError::Evaluate { rule: rule.to_owned(), message: e.to_string() }),
    }
}

/// What a rule reads of one identifier: the whole value, or only what lies at some paths of
/// field selections from it (`object.spec.kubeConfig` reads `[spec, kubeConfig]`).
#[derive(Default)]
struct Reads {
    whole: bool,
    paths: Vec<Vec<String>>,
}

/// Adds what `expr` reads of each identifier to `reads`: each longest chain of field
/// selections on an identifier is a path (`has()` is a selection too); any other use (bare,
/// indexed, as an argument or a call's target) reads the whole. A comprehension's variables
/// are identifiers too: one named like a bound variable can only add reads, never hide one.
fn collect_reads(expr: &IdedExpr, reads: &mut HashMap<String, Reads>) {
    match &expr.expr {
        Expr::Ident(ident) => reads.entry(ident.clone()).or_default().whole = true,
        Expr::Select(_) => {
            let (mut path, mut at) = (Vec::new(), expr);
            while let Expr::Select(select) = &at.expr {
                path.push(select.field.clone());
                at = &select.operand;
            }
            match &at.expr {
                Expr::Ident(ident) => {
                    path.reverse();
                    reads.entry(ident.clone()).or_default().paths.push(path);
                }
                _ => collect_reads(at, reads),
            }
        }
        Expr::Call(call) => {
            for operand in call.target.as_deref().into_iter().chain(&call.args) {
                collect_reads(operand, reads);
            }
        }
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                collect_reads(part, reads);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|element| collect_reads(element, reads)),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => {
            for entry in entries {
                match &entry.expr {
                    EntryExpr::StructField(field) => collect_reads(&field.value, reads),
                    EntryExpr::MapEntry(entry) => {
                        collect_reads(&entry.key, reads);
                        collect_reads(&entry.value, reads);
                    }
                }
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// `value` as a CEL value holding only what lies at `paths` (see [`Reads`]), and the maps on
/// the way there with only the fields the paths name: to rules that only select along those
/// paths, the same as the whole. A path that meets something other than a map takes it whole.
fn project(value: &Value, paths: &[&[String]]) -> cel::Value {
    let Value::Object(fields) = value else { return to_cel(value) };
    let mut by_field: BTreeMap<&str, Vec<&[String]>> = BTreeMap::new();
    for path in paths {
        let [field, rest @ ..] = path else { return to_cel(value) };
        by_field.entry(field.as_str()).or_default().push(rest);
    }
    let map = by_field
        .into_iter()
        .filter_map(|(field, rest)| Some((Key::from(field.to_string()), project(fields.get(field)?, &rest))))
        .collect();
    cel::Value::Map(Map { map: Arc::new(map) })
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

    /// What `rule` reads of `name`: whether the whole, and the paths, sorted.
    fn reads(rule: &str, name: &str) -> (bool, Vec<String>) {
        let rule = RuleCache::new().program(rule).unwrap();
        let Some(reads) = rule.reads.get(name) else { return (false, vec![]) };
        let mut paths: Vec<String> = reads.paths.iter().map(|p| p.join(".")).collect();
        paths.sort();
        (reads.whole, paths)
    }

    #[test]
    fn a_rule_reads_the_paths_it_selects_and_the_whole_when_it_uses_the_variable_otherwise() {
        let kubeconfig = crate::policy::FLUX_RULES[0].1;
        assert_eq!(
            reads(kubeconfig, "object"),
            (
                false,
                vec![
                    "spec.kubeConfig".into(),
                    "spec.kubeConfig.secretRef.key".into(),
                    "spec.kubeConfig.secretRef.key".into(),
                    "spec.kubeConfig.secretRef.name".into()
                ]
            )
        );
        assert_eq!(
            reads(kubeconfig, "target"),
            (false, vec!["kubeconfigSecret.key".into(), "kubeconfigSecret.name".into(), "selfManagement".into()])
        );
        assert_eq!(reads("objects.size() > 0 && my_object == 1", "object"), (false, vec![]));
        assert_eq!(
            reads("self.status.conditions.exists(c, c.type == 'Ready')", "self"),
            (false, vec!["status.conditions".into()])
        );
        assert_eq!(
            reads("[self.a, {'k': self.b}, self.c.d.size()]", "self"),
            (false, vec!["a".into(), "b".into(), "c.d".into()])
        );
        for whole in [
            "self.size() > 0",
            "self['spec'] == 1",
            "size(self) > 0",
            "self == self",
            "[1].exists(x, self.a == x) || self",
        ] {
            assert!(reads(whole, "self").0, "{whole}");
        }
    }

    #[test]
    fn a_projection_holds_the_read_paths_and_the_maps_on_the_way() {
        let object = json!({
            "metadata": {"name": "a", "managedFields": [{"manager": "x"}]},
            "spec": {"kubeConfig": {"secretRef": {"name": "k"}}, "values": {"big": [1, 2, 3]}, "list": [{"a": 1}]},
        });
        let projected = |paths: &[&[&str]]| {
            let owned: Vec<Vec<String>> = paths.iter().map(|p| p.iter().map(|f| f.to_string()).collect()).collect();
            project(&object, &owned.iter().map(Vec::as_slice).collect::<Vec<_>>())
        };
        assert_eq!(
            projected(&[&["spec", "kubeConfig"]]),
            to_cel(&json!({"spec": {"kubeConfig": {"secretRef": {"name": "k"}}}}))
        );
        assert_eq!(
            projected(&[&["spec", "absent", "x"], &["status"]]),
            to_cel(&json!({"spec": {}})),
            "maps on the way kept"
        );
        assert_eq!(
            projected(&[&["spec", "list", "a"]]),
            to_cel(&json!({"spec": {"list": [{"a": 1}]}})),
            "a list taken whole"
        );
        assert_eq!(projected(&[&["spec", "values", "big"], &["spec"]]), to_cel(&json!({"spec": object["spec"]})));
    }

    #[test]
    fn rules_give_the_same_verdicts_and_errors_on_the_projection_as_on_the_whole() {
        let cache = RuleCache::new();
        let objects = [
            json!({"spec": {"kubeConfig": {"secretRef": {"name": "k", "key": "value"}}, "serviceAccountName": "sa"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"spec": {"values": {"a": 1}}, "status": {"conditions": []}}),
            json!({"spec": "not a map", "status": {}}),
            json!({"metadata": {"name": "only"}}),
        ];
        let target = json!({"selfManagement": false, "kubeconfigSecret": {"name": "k", "key": "value"}});
        let rules = [
            crate::policy::FLUX_RULES[0].1,
            "!has(object.spec.serviceAccountName) || object.spec.serviceAccountName in ['sa']",
            "has(object.spec.kubeConfig)",
            "object.spec.kubeConfig.secretRef.name == 'k'",
            "object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
            "object.spec.values.a == 1",
            "object.spec == {'values': {'a': 1}}",
            "object.spec.size() > 0",
            "has(object.metadata) && object.metadata.name == 'only'",
            "'x' + object.spec.serviceAccountName == 'xsa'",
        ];
        for object in &objects {
            let variables = [("object", object), ("target", &target)];
            let whole = {
                let mut context = Context::with_env(Arc::clone(&cache.env));
                for (name, value) in variables {
                    context.add_variable_from_value(name, to_cel(value));
                }
                context
            };
            let all: Vec<_> = rules.iter().map(|rule| cache.rule(rule)).collect();
            let together = cache.context(&all, &variables);
            for rule in rules {
                let compiled = [cache.rule(rule)];
                let expected = execute(rule, &compiled[0], &whole);
                assert_eq!(
                    execute(rule, &compiled[0], &cache.context(&compiled, &variables)),
                    expected,
                    "{rule} on {object}"
                );
                assert_eq!(execute(rule, &compiled[0], &together), expected, "{rule} among the others, on {object}");
            }
        }
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
        let texts = [
            "obj.status.phase == 'Running'",
            "'phase ' + obj.status.phase + ': ' + obj.status.reasons.join(', ')",
            "obj.status.missing",
        ];
        let bound = rules.bind(&texts, &[("obj", &object)]);
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
    fn the_compiled_rules_kept_are_bounded_least_recently_used_first() {
        let rules = RuleCache::new();
        let rule = |i: usize| format!("self.n == {i}");
        for i in 0..MAX_PROGRAMS + 10 {
            assert_eq!(rules.evaluate(&rule(i), &json!({"n": i})), Ok(true));
            assert_eq!(rules.evaluate(&rule(0), &json!({"n": 0})), Ok(true), "kept: used most recently");
        }
        assert_eq!(lock(&rules.programs).len(), MAX_PROGRAMS);
        assert_eq!(rules.compiled(), MAX_PROGRAMS + 10);
        assert_eq!(rules.evaluate(&rule(1), &json!({"n": 1})), Ok(true));
        assert_eq!(rules.compiled(), MAX_PROGRAMS + 11, "the least recently used went and compiles again");
        let long = format!("self.s == '{}'", "x".repeat(MAX_PROGRAM_BYTES / 2));
        rules.check(&long).unwrap();
        rules.check(&format!("{long} || true")).unwrap();
        assert!(lock(&rules.programs).len() < MAX_PROGRAMS / 2, "bounded by bytes of text too");
    }

    #[test]
    fn json_numbers_keep_their_kind() {
        let rules = RuleCache::new();
        let object = json!({"i": -1, "big": u64::MAX, "f": 0.5, "s": "x", "n": null, "b": true});
        assert_eq!(rules.evaluate("self.i == -1 && self.f == 0.5 && self.s == 'x'", &object), Ok(true));
        assert_eq!(rules.evaluate("self.big == 18446744073709551615u && self.n == null && self.b", &object), Ok(true));
    }
}
