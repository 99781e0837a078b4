//! CEL rules, compiled once per distinct rule text: an SMP's readiness rules (`readinessRule` of
//! its adapter and provisioners, with one variable, `self`, bound to the object), the output
//! policy's validations (with `object` and the host's facts about the service) and health rules
//! (with `obj`).
//!
//! Rules are written by operators and tenants, so running one is bounded: a rule whose
//! estimated cost ([`cost`]) is over [`Limits::cost`] is not run, and one that runs past
//! [`Limits::deadline`] is given up on and never run again ([`deadline`]). Either counts as a
//! rule that failed ([`RuleError::OverBudget`]). Callers wait for evaluations, up to the
//! deadline: they run on blocking threads, never on the async executor.

mod ast;
mod cost;
mod deadline;
mod lru;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cel::common::ast::{Expr, IdedExpr};
use cel::objects::{Key, Map};
use cel::{Context, Env, Program};
use cost::Size;
use lru::Lru;
use serde_json::Value;

/// The most a rule's estimated cost may be, by default: Kubernetes' per-expression runtime limit
/// for CRD validation rules and admission policies (`PerCallLimit`). On this host's CEL
/// interpreter the costliest shapes at that limit (nested loops, `split`) still end far within
/// [`DEFAULT_DEADLINE`] (docs/performance.md); most shapes take far less.
pub const DEFAULT_COST_LIMIT: u64 = 1_000_000;
/// How long an evaluation may run by default before it is given up on: an order of magnitude
/// above what the cost limit allows, and the time limit of a plugin call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(1);
/// Compiled rules kept, least recently used dropped first: far more than the host's own and the
/// operators' rules together, and room for the chart's `--concurrency` (8) looks at once at
/// tenants' rules, each at its namespace's budget (64 rules, 128 texts with their messages),
/// beside the operator's: those are used by every look, so no wave of tenants' looks evicts them
/// (health/rule_set.rs has the test).
const MAX_PROGRAMS: usize = 2048;
/// Bytes of rule text the kept rules may hold together: a rule's compiled form takes some tens
/// of bytes per byte of text, so this bounds the cache to some tens of MiB.
const MAX_PROGRAM_BYTES: usize = 1024 * 1024;
/// The longest part of a rule's text an error quotes.
const MAX_QUOTED: usize = 100;
/// The longest rule text compiled: parsing recurses along a chain (`a + a + …`, `a.b.b…`) as
/// deep as the text is long, before the chain's depth can be checked.
const MAX_RULE_BYTES: usize = 16 * 1024;
/// The deepest a rule may nest, as cel-go's parser allows by default: running, estimating and
/// dropping a rule recurse along its depth.
const MAX_DEPTH: usize = 250;

/// What running one rule may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most its estimated cost may be.
    pub cost: u64,
    /// How long it may run.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { cost: DEFAULT_COST_LIMIT, deadline: DEFAULT_DEADLINE }
    }
}

/// Which of a rule's [`Limits`] it exceeds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Budget {
    /// Its estimated cost is over the limit: it was not run.
    #[error("its estimated cost {estimate} is over the cost limit of {limit}")]
    Cost {
        /// The estimate, for what was bound.
        estimate: u64,
        /// [`Limits::cost`].
        limit: u64,
    },
    /// It ran past the deadline once: it is not run again.
    #[error("it ran past the deadline of {0:?} and is not run again")]
    Deadline(Duration),
}

/// Why a rule gave no verdict; messages are CEL's own.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The rule does not parse, or is too long or too deep to.
    #[error("rule {:?} does not compile: {message}", quoted(.rule))]
    Compile {
        /// The rule text.
        rule: String,
        /// CEL's parse error, or which limit.
        message: String,
    },
    /// The rule failed while running, e.g. on a missing field.
    #[error("rule {:?} failed to evaluate: {message}", quoted(.rule))]
    Evaluate {
        /// The rule text.
        rule: String,
        /// CEL's execution error.
        message: String,
    },
    /// The rule ran but did not return a bool.
    #[error("rule {:?} returned {value}, not a bool", quoted(.rule))]
    NotBool {
        /// The rule text.
        rule: String,
        /// What it returned.
        value: String,
    },
    /// The rule exceeds its budget.
    #[error("rule {:?} exceeds its budget: {budget}", quoted(.rule))]
    OverBudget {
        /// The rule text.
        rule: String,
        /// Which limit.
        budget: Budget,
    },
}

/// `rule`, cut to [`MAX_QUOTED`] bytes for messages.
fn quoted(rule: &str) -> String {
    if rule.len() <= MAX_QUOTED {
        return rule.to_owned();
    }
    format!("{}…", &rule[..rule.floor_char_boundary(MAX_QUOTED)])
}

/// Why a rule does not compile. Kept with the compiled rules (and cloned out of them), so CEL's
/// parse error and the thread's are kept as their text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// CEL does not parse it.
    #[error("{0}")]
    Parse(String),
    /// Longer than [`MAX_RULE_BYTES`].
    #[error("it is {0} bytes long, over the limit of {MAX_RULE_BYTES}")]
    TooLong(usize),
    /// Deeper than [`MAX_DEPTH`].
    #[error("it nests {0} deep, deeper than {MAX_DEPTH}")]
    TooDeep(usize),
    /// No evaluator thread could be started (not kept: the next try may find one).
    #[error("no thread to compile it on: {0}")]
    NoThread(String),
    /// Parsing it panicked.
    #[error("compiling it panicked")]
    Panicked,
}

/// A compilation: the rule, or why it does not compile.
type Compiled = Result<Arc<Rule>, CompileError>;

/// A compiled rule, with what it reads of each identifier it names (see [`Reads`]).
struct Rule {
    program: Program,
    reads: HashMap<String, Reads>,
}

/// Compiles each distinct rule text once (failures included), keeping the most recently used,
/// and evaluates rules within their [`Limits`]. Shared across reconciles (`Send + Sync`).
pub struct RuleCache {
    env: Arc<Env>,
    programs: Mutex<Lru<Compiled>>,
    compiled: AtomicUsize,
    limits: Limits,
    /// The rules that ran past the deadline. Each cost a thread that ran on, so they are few;
    /// they are kept for good (the cost estimate keeps rules from getting here).
    overran: Mutex<HashSet<String>>,
    /// The host's own rules (fixed texts, tested): they run on the caller's thread, after the
    /// same budget check, without the hand-off to an evaluator thread and back, which cost
    /// more than the built-in Flux rules themselves (docs/performance.md).
    own: HashSet<&'static str>,
}

impl Default for RuleCache {
    fn default() -> Self {
        Self::with_limits(Limits::default())
    }
}

/// What one rule returned, as the evaluator thread hands it back.
enum Returned {
    Bool(bool),
    Text(String),
    Other(String),
}

/// Why a rule that ran returned nothing, as the evaluator thread hands it back.
#[derive(Debug, thiserror::Error)]
enum Stopped {
    /// CEL's error, e.g. a missing field.
    #[error("{0}")]
    Failed(#[source] cel::ExecutionError),
    /// The evaluation panicked.
    #[error("the evaluation panicked")]
    Panicked,
}

/// What the evaluator thread hands back for one rule: what it returned, or why nothing.
type Evaluated = Result<Returned, Stopped>;

/// Variables bound once (converted to CEL once) for the rules they serve, and the sizes inside
/// each (what the cost estimate counts on).
struct Binding {
    context: Arc<Context<'static, 'static>>,
    sizes: Vec<(String, Size)>,
}

impl RuleCache {
    /// An empty cache over CEL's standard environment (with `has`, `exists`, `all`, ...) and
    /// the strings extension (`join`, `split`, `lowerAscii`, ...), with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache whose rules run within `limits`.
    pub fn with_limits(limits: Limits) -> Self {
        let mut env = Env::stdlib();
        // cel-go's `ext.Strings()`, which kcm's health rules are written against.
        env.add_extension(cel::extensions::strings).expect("the strings extension declares each overload once");
        Self {
            env: Arc::new(env),
            programs: Mutex::new(Lru::new(MAX_PROGRAMS, MAX_PROGRAM_BYTES)),
            compiled: AtomicUsize::new(0),
            limits,
            overran: Mutex::default(),
            own: HashSet::new(),
        }
    }

    /// This cache, with `rules` the host's own: they run on the caller's thread.
    pub fn with_own(self, rules: impl IntoIterator<Item = &'static str>) -> Self {
        Self { own: rules.into_iter().collect(), ..self }
    }

    /// How many rule texts have been compiled so far.
    pub fn compiled(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }

    /// Evaluates `rule` with `self` = `object`. An empty or blank rule is ready (`Ok(true)`);
    /// a missing field is an [`RuleError::Evaluate`], not `false`.
    pub fn evaluate(&self, rule: &str, object: &Value) -> Result<bool, RuleError> {
        let binding = self.binding(&[rule], &[("self", object)]);
        let returned = self.run(&[rule], &binding).pop().expect("a rule runs");
        verdict(rule, returned)
    }

    /// The first of `rules` that does not hold with `variables` bound (converted to CEL once,
    /// for all of them): its index, and why when it gave no verdict. A blank rule holds.
    pub fn first_failing<'r>(
        &self,
        rules: impl IntoIterator<Item = &'r str>,
        variables: &[(&str, &Value)],
    ) -> Option<(usize, Option<RuleError>)> {
        let rules: Vec<&str> = rules.into_iter().collect();
        self.bind(&rules, variables).first_failing(&rules)
    }

    /// Why `rule` does not compile, if it does not (an empty rule compiles: it holds).
    pub fn check(&self, rule: &str) -> Result<(), CompileError> {
        self.rule(rule).map_or(Ok(()), |compiled| compiled.map(drop))
    }

    /// `variables` bound once (converted to CEL once) for `rules`, the only rules the binding
    /// serves: a variable is converted only as far as they read it.
    pub fn bind(&self, rules: &[&str], variables: &[(&str, &Value)]) -> Bound<'_> {
        Bound { cache: self, binding: self.binding(rules, variables) }
    }

    /// `variables` bound for `rules` (see [`RuleCache::context`]), with the sizes inside each.
    fn binding(&self, rules: &[&str], variables: &[(&str, &Value)]) -> Binding {
        let compiled: Vec<_> = rules.iter().map(|rule| self.rule(rule)).collect();
        let (context, sizes) = self.context(&compiled, variables);
        Binding { context: Arc::new(context), sizes }
    }

    /// A context over the standard environment with `variables` bound, each converted to CEL
    /// only as far as `rules` read it: a variable no rule names is left out, and one whose
    /// fields they only select is converted only at those fields. Converting a whole
    /// ServiceSet that no rule reads, and whole HelmReleases with their values for the built-in
    /// Flux rules, which read two fields, was a share of the host's CPU worth removing
    /// (docs/performance.md). A rule that does not compile reads nothing: it fails to run
    /// whatever is bound. Also the sizes inside what is bound, by variable.
    fn context(
        &self,
        rules: &[Option<Compiled>],
        variables: &[(&str, &Value)],
    ) -> (Context<'static, 'static>, Vec<(String, Size)>) {
        let mut context = Context::with_env(Arc::clone(&self.env));
        let mut sizes = Vec::new();
        for (name, value) in variables {
            let (mut whole, mut paths) = (false, Vec::<&[String]>::new());
            let compiled = rules.iter().flatten().filter_map(|rule| rule.as_ref().ok());
            for reads in compiled.filter_map(|rule| rule.reads.get(*name)) {
                whole |= reads.whole;
                paths.extend(reads.paths.iter().map(Vec::as_slice));
            }
            let bound = match (whole, paths.is_empty()) {
                (true, _) => to_cel(value),
                (false, false) => project(value, &paths),
                (false, true) => continue,
            };
            sizes.push((name.to_string(), Size::of(&bound)));
            context.add_variable_from_value(*name, bound);
        }
        (context, sizes)
    }

    /// What each of `rules` returns with `binding`, in order, up to the first that does not
    /// hold (included). A rule is checked against the budget first; those that pass run one
    /// after another on an evaluator thread, each waited for up to the deadline. One that
    /// overruns is remembered and never run again; its thread runs on (see [`deadline`]).
    /// When all that pass are the host's own, they run on this thread instead.
    fn run(&self, rules: &[&str], binding: &Binding) -> Vec<Result<Returned, RuleError>> {
        enum Step {
            Done(Result<Returned, RuleError>),
            Run,
        }
        let mut steps = Vec::new();
        let mut runs = Vec::new();
        let mut own = true;
        for rule in rules {
            let step = match self.admit(rule, binding) {
                Ok(Some((compiled, _))) => {
                    runs.push(compiled);
                    own &= self.own.contains(rule);
                    Step::Run
                }
                Ok(None) => Step::Done(Ok(Returned::Bool(true))),
                Err(e) => Step::Done(Err(e)),
            };
            let last = matches!(step, Step::Done(ref done) if !holds(done));
            steps.push(step);
            if last {
                break;
            }
        }
        let evaluator = (!runs.is_empty()).then(|| {
            let context = Arc::clone(&binding.context);
            if own {
                let (results, received) = std::sync::mpsc::channel();
                execute_all(&runs, &context, &results);
                return Ok(received);
            }
            deadline::start(move |results| execute_all(&runs, &context, &results))
        });
        let mut returned = Vec::new();
        for (rule, step) in rules.iter().zip(steps) {
            let outcome = match step {
                Step::Done(done) => done,
                Step::Run => self.receive(rule, evaluator.as_ref().expect("a rule to run started the evaluator")),
            };
            let last = !holds(&outcome);
            returned.push(outcome);
            if last {
                break;
            }
        }
        returned
    }

    /// `rule` compiled and within budget for `binding`, with its estimated cost; `None` when it
    /// is blank (it holds).
    fn admit(&self, rule: &str, binding: &Binding) -> Result<Option<(Arc<Rule>, u64)>, RuleError> {
        let Some(compiled) = self.rule(rule) else { return Ok(None) };
        let compiled = compiled.map_err(|e| RuleError::Compile { rule: rule.to_owned(), message: e.to_string() })?;
        let over = |budget| RuleError::OverBudget { rule: rule.to_owned(), budget };
        if lock(&self.overran).contains(rule) {
            return Err(over(Budget::Deadline(self.limits.deadline)));
        }
        let estimate = cost::estimate(compiled.program.expression(), &binding.sizes);
        if estimate > self.limits.cost {
            return Err(over(Budget::Cost { estimate, limit: self.limits.cost }));
        }
        Ok(Some((compiled, estimate)))
    }

    /// The result of the next rule the evaluator runs, `rule`, waited for up to the deadline.
    fn receive(&self, rule: &str, evaluator: &std::io::Result<Receiver<Evaluated>>) -> Result<Returned, RuleError> {
        let failed = |message: String| RuleError::Evaluate { rule: rule.to_owned(), message };
        let receiver = evaluator.as_ref().map_err(|e| failed(format!("no thread to run it on: {e}")))?;
        match receiver.recv_timeout(self.limits.deadline) {
            Ok(returned) => returned.map_err(|stopped| failed(stopped.to_string())),
            Err(RecvTimeoutError::Timeout) => {
                lock(&self.overran).insert(rule.to_owned());
                Err(RuleError::OverBudget { rule: rule.to_owned(), budget: Budget::Deadline(self.limits.deadline) })
            }
            Err(RecvTimeoutError::Disconnected) => Err(failed(Stopped::Panicked.to_string())),
        }
    }

    /// The cached compilation of `rule`; `None` when it is empty or blank (it holds).
    fn rule(&self, rule: &str) -> Option<Compiled> {
        (!rule.trim().is_empty()).then(|| self.program(rule))
    }

    /// The cached compilation of `rule`, compiling it on first sight on an evaluator thread
    /// (see [`compile`]), unless it is longer than [`MAX_RULE_BYTES`].
    fn program(&self, rule: &str) -> Compiled {
        if let Some(compiled) = lock(&self.programs).get(rule) {
            return compiled;
        }
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let compiled = if rule.len() > MAX_RULE_BYTES {
            Err(CompileError::TooLong(rule.len()))
        } else {
            let (env, text) = (Arc::clone(&self.env), rule.to_owned());
            let compiling = deadline::start(move |compiled| {
                let _ = compiled.send(compile(&env, &text));
            });
            // Not kept: the next try may find a thread.
            let compiled = compiling.map_err(|e| CompileError::NoThread(e.to_string()))?;
            // Bounded by the text's length: waited for to the end.
            compiled.recv().unwrap_or(Err(CompileError::Panicked))
        };
        lock(&self.programs).insert(rule, compiled.clone());
        compiled
    }
}

/// `rule` compiled, with what it reads, unless it nests deeper than [`MAX_DEPTH`]. On an
/// evaluator thread, whose stack is deep enough for any rule within [`MAX_RULE_BYTES`]: a
/// rule too deep is parsed, and dropped, there.
fn compile(env: &Env, rule: &str) -> Compiled {
    let program = env.compile(rule).map_err(|e| CompileError::Parse(e.to_string()))?;
    let depth = ast::depth(program.expression());
    if depth > MAX_DEPTH {
        return Err(CompileError::TooDeep(depth));
    }
    let mut reads = HashMap::new();
    collect_reads(program.expression(), &mut reads);
    Ok(Arc::new(Rule { program, reads }))
}

/// `mutex` locked, even if a panic poisoned it (what it guards stays consistent).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `outcome` is a rule that holds.
fn holds(outcome: &Result<Returned, RuleError>) -> bool {
    matches!(outcome, Ok(Returned::Bool(true)))
}

/// On an evaluator thread: runs `rules` in `context` one after another, handing each result to
/// `results`, until one does not hold or the caller stopped waiting.
fn execute_all(rules: &[Arc<Rule>], context: &Context, results: &Sender<Evaluated>) {
    for rule in rules {
        let returned = match catch_unwind(AssertUnwindSafe(|| rule.program.execute(context))) {
            Ok(Ok(cel::Value::Bool(holds))) => Ok(Returned::Bool(holds)),
            Ok(Ok(cel::Value::String(text))) => Ok(Returned::Text(text.to_string())),
            Ok(Ok(value)) => Ok(Returned::Other(format!("{value:?}"))),
            Ok(Err(e)) => Err(Stopped::Failed(e)),
            Err(_) => Err(Stopped::Panicked),
        };
        let last = !matches!(returned, Ok(Returned::Bool(true)));
        if results.send(returned).is_err() || last {
            return;
        }
    }
}

/// `rule`'s verdict from what it returned.
fn verdict(rule: &str, returned: Result<Returned, RuleError>) -> Result<bool, RuleError> {
    match returned? {
        Returned::Bool(holds) => Ok(holds),
        Returned::Text(text) => {
            Err(RuleError::NotBool { rule: rule.to_owned(), value: format!("{:?}", cel::Value::from(text)) })
        }
        Returned::Other(value) => Err(RuleError::NotBool { rule: rule.to_owned(), value }),
    }
}

/// Variables bound for several rules (see [`RuleCache::bind`]).
pub struct Bound<'c> {
    cache: &'c RuleCache,
    binding: Binding,
}

impl Bound<'_> {
    /// The first of `rules` (of those bound for) that does not hold: its index, and why when it
    /// gave no verdict. A blank rule holds.
    pub fn first_failing(&self, rules: &[&str]) -> Option<(usize, Option<RuleError>)> {
        let mut returned = self.cache.run(rules, &self.binding);
        let at = returned.len().checked_sub(1)?;
        match verdict(rules[at], returned.pop()?) {
            Ok(true) => None,
            Ok(false) => Some((at, None)),
            Err(e) => Some((at, Some(e))),
        }
    }

    /// The summed estimated cost of running `rules` with these variables: what a caller that
    /// runs rules on many bindings budgets by. A rule that would not run (blank, not compiling,
    /// over its own budget) costs nothing.
    pub fn estimate(&self, rules: &[&str]) -> u64 {
        let admitted = rules.iter().filter_map(|rule| self.cache.admit(rule, &self.binding).ok().flatten());
        admitted.fold(0, |sum, (_, estimate)| sum.saturating_add(estimate))
    }

    /// What `rule` evaluates to when it is a string; `None` when it does not compile, fails or
    /// returns something else (messages are best effort), unless it is over its budget: that
    /// is the rule's to report.
    pub fn text(&self, rule: &str) -> Result<Option<String>, RuleError> {
        match self.cache.run(&[rule], &self.binding).pop() {
            Some(Ok(Returned::Text(text))) => Ok(Some(text)),
            Some(Err(e @ RuleError::OverBudget { .. })) => Err(e),
            _ => Ok(None),
        }
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
        _ => ast::children(expr).into_iter().for_each(|child| collect_reads(child, reads)),
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
            (
                false,
                vec![
                    "kubeconfigSecret.key".into(),
                    "kubeconfigSecret.name".into(),
                    "local".into(),
                    "selfManagement".into(),
                    "selfManagement".into()
                ]
            )
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

    /// Whether `rule` holds with what `bound` binds.
    fn holds_in(bound: &Bound, rule: &str) -> Result<bool, RuleError> {
        match bound.first_failing(&[rule]) {
            None => Ok(true),
            Some((_, None)) => Ok(false),
            Some((_, Some(e))) => Err(e),
        }
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
        let run = |rule: &str, context: Context<'static, 'static>| {
            let binding = Binding { context: Arc::new(context), sizes: Vec::new() };
            verdict(rule, cache.run(&[rule], &binding).pop().unwrap())
        };
        for object in &objects {
            let variables = [("object", object), ("target", &target)];
            let whole = || {
                let mut context = Context::with_env(Arc::clone(&cache.env));
                for (name, value) in variables {
                    context.add_variable_from_value(name, to_cel(value));
                }
                context
            };
            let together = cache.bind(&rules, &variables);
            for rule in rules {
                let expected = run(rule, whole());
                let alone = cache.context(&[cache.rule(rule)], &variables).0;
                assert_eq!(run(rule, alone), expected, "{rule} on {object}");
                assert_eq!(holds_in(&together, rule), expected, "{rule} among the others, on {object}");
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
        assert_eq!(holds_in(&bound, "obj.status.phase == 'Running'"), Ok(false));
        assert_eq!(
            bound.text("'phase ' + obj.status.phase + ': ' + obj.status.reasons.join(', ')"),
            Ok(Some("phase Pending: a, b".into()))
        );
        assert_eq!(bound.text("obj.status.missing"), Ok(None), "a failing message is no message");
        assert_eq!(bound.text("1 + 1"), Ok(None), "a non-string message is no message");
        assert!(rules.check("obj.status.(").is_err());
        assert_eq!(rules.check("obj.status.phase == 'x'"), Ok(()));
    }

    /// `[1, 2, ..., n]` written out.
    fn literal(n: usize) -> String {
        format!("[{}]", (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(","))
    }

    /// `L.all(a, L.all(b, L.all(c, true)))`, `L` a literal list of `n` numbers: n³ iterations.
    fn nested(n: usize) -> String {
        format!("{0}.all(a, {0}.all(b, {0}.all(c, true)))", literal(n))
    }

    #[test]
    fn a_rule_estimated_over_the_cost_limit_is_not_run_and_the_budget_is_named() {
        let rules = RuleCache::new();
        let rule = nested(1000);
        let err = rules.evaluate(&rule, &json!({})).unwrap_err();
        let RuleError::OverBudget { budget: Budget::Cost { estimate, limit }, .. } = &err else { panic!("{err:?}") };
        assert!(*estimate > 1_000_000_000 && *limit == DEFAULT_COST_LIMIT, "{err}");
        let message = err.to_string();
        assert!(message.starts_with("rule \"[1,2,3,"), "{message}");
        assert!(message.contains("…\" exceeds its budget: its estimated cost "), "the text is cut: {message}");
        assert!(message.ends_with("over the cost limit of 1000000"), "{message}");
        let first = rules.first_failing(["true", rule.as_str(), "false"], &[]);
        assert!(matches!(first, Some((1, Some(RuleError::OverBudget { .. })))), "{first:?}");
    }

    #[test]
    fn a_binding_estimates_what_its_rules_would_cost_together() {
        let rules = RuleCache::new();
        let object = json!({"items": [1, 2, 3]});
        let (cheap, costly) = ("self.items.size() > 0", "self.items.all(i, i > 0 && i < 10)");
        let bound = rules.bind(&[cheap, costly], &[("self", &object)]);
        let (a, b) = (bound.estimate(&[cheap]), bound.estimate(&[costly]));
        assert!(0 < a && a < b, "{a} {b}");
        assert_eq!(bound.estimate(&[cheap, costly]), a + b);
        let over = nested(1000);
        assert_eq!(bound.estimate(&[cheap, " ", "self.(", &over]), a, "what would not run costs nothing");
    }

    #[test]
    fn the_cost_of_data_is_counted_from_what_is_bound() {
        let rules = RuleCache::new();
        let rule = "self.items.all(a, self.items.all(b, a != b || a == b))";
        let items = |n: usize| json!({"items": (0..n).collect::<Vec<_>>()});
        assert_eq!(rules.evaluate(rule, &items(10)), Ok(true));
        let err = rules.evaluate(rule, &items(10_000)).unwrap_err();
        assert!(matches!(err, RuleError::OverBudget { budget: Budget::Cost { .. }, .. }), "{err:?}");
        let long = json!({"items": [], "big": "x".repeat(1 << 20)});
        assert_eq!(rules.evaluate(rule, &long), Ok(true), "what a rule does not read is not bound nor counted");
    }

    #[test]
    fn a_rule_past_its_deadline_is_given_up_on_remembered_and_never_run_again() {
        let deadline = Duration::from_millis(20);
        let rules = RuleCache::with_limits(Limits { cost: u64::MAX, deadline });
        let rule = nested(150);
        let started = std::time::Instant::now();
        let err = rules.evaluate(&rule, &json!({})).unwrap_err();
        assert_eq!(err, RuleError::OverBudget { rule: rule.clone(), budget: Budget::Deadline(deadline) });
        assert!(started.elapsed() < Duration::from_secs(1), "the caller stopped waiting: {:?}", started.elapsed());
        assert!(err.to_string().ends_with("it ran past the deadline of 20ms and is not run again"), "{err}");
        assert_eq!(rules.evaluate("1 < 2", &json!({})), Ok(true), "other rules run meanwhile");
        let again = std::time::Instant::now();
        assert_eq!(rules.evaluate(&rule, &json!({})), Err(err));
        assert!(again.elapsed() < deadline, "not run, not waited for: {:?}", again.elapsed());
    }

    #[test]
    fn the_hosts_own_rules_run_on_the_callers_thread_after_the_same_budget_check() {
        let (slow, fast) = (nested(40).leak(), "1 < 2");
        // A deadline no hand-off to an evaluator thread meets: only a rule run here returns.
        let rules = RuleCache::with_limits(Limits { cost: u64::MAX, deadline: Duration::ZERO }).with_own([&*slow]);
        assert_eq!(rules.evaluate(slow, &json!({})), Ok(true));
        let err = rules.evaluate(&nested(41), &json!({})).unwrap_err();
        assert!(matches!(err, RuleError::OverBudget { budget: Budget::Deadline(_), .. }), "{err}");
        let both = rules.first_failing([&*slow, fast], &[]);
        assert!(
            matches!(both, Some((0, Some(RuleError::OverBudget { .. })))),
            "with one not the host's, all on a thread"
        );
        let limited = RuleCache::with_limits(Limits { cost: 10, deadline: DEFAULT_DEADLINE }).with_own([&*slow]);
        let err = limited.evaluate(slow, &json!({})).unwrap_err();
        assert!(matches!(err, RuleError::OverBudget { budget: Budget::Cost { .. }, .. }), "{err}");
    }

    #[test]
    fn a_rule_too_long_or_nested_too_deep_is_refused_and_never_overflows_a_stack() {
        let rules = RuleCache::new();
        // A test's own thread has a 2 MiB stack: compiling these on it overflowed and aborted.
        let chain = |link: &str, n: usize| format!("x{}", link.repeat(n));
        for link in ["+1", ".b", "[0]"] {
            let rule = chain(link, (MAX_RULE_BYTES - 1) / link.len());
            let err = rules.evaluate(&rule, &json!({})).unwrap_err();
            let RuleError::Compile { message, .. } = &err else { panic!("{err:?}") };
            assert!(message.starts_with("it nests ") && message.ends_with("deep, deeper than 250"), "{message}");
            assert!(err.to_string().len() < 300, "the rule is quoted, not copied: {err}");
        }
        let err = rules.check(&chain("+1", MAX_RULE_BYTES / 2)).unwrap_err();
        assert_eq!(err.to_string(), format!("it is {} bytes long, over the limit of 16384", 1 + MAX_RULE_BYTES));
        let deepest = format!("{}1 == {}", "1 + ".repeat(MAX_DEPTH - 2), MAX_DEPTH - 1);
        assert_eq!(rules.evaluate(&deepest, &json!({})), Ok(true), "{MAX_DEPTH} deep runs");
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
        let long = |i: usize| format!("self.s == '{}' || {i} > 0", "x".repeat(MAX_RULE_BYTES - 100));
        for i in 0..MAX_PROGRAM_BYTES / MAX_RULE_BYTES + 10 {
            rules.check(&long(i)).unwrap();
        }
        assert!(lock(&rules.programs).len() <= MAX_PROGRAM_BYTES / (MAX_RULE_BYTES - 100), "bounded by bytes too");
    }

    #[test]
    fn json_numbers_keep_their_kind() {
        let rules = RuleCache::new();
        let object = json!({"i": -1, "big": u64::MAX, "f": 0.5, "s": "x", "n": null, "b": true});
        assert_eq!(rules.evaluate("self.i == -1 && self.f == 0.5 && self.s == 'x'", &object), Ok(true));
        assert_eq!(rules.evaluate("self.big == 18446744073709551615u && self.n == null && self.b", &object), Ok(true));
    }
}
