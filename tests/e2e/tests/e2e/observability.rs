//! Scenario 21: what the chart gives operators, held against a running host. The host runs with
//! the chart's default container arguments (as Helm renders them); once a ServiceSet is deployed:
//!
//! - every PromQL expression of the chart's alerting rules (`deploy/chart/files/prometheus-rules.yaml`)
//!   and Grafana dashboard (`deploy/chart/files/dashboard.json`) parses with a PromQL parser, and
//!   every metric it names is one the host's `/metrics` declares, with the labels it matches on;
//!   the dashboard shows every metric the host declares;
//! - the log is JSON (the chart's `adapter.logFormat`), one object per line; the lines logged
//!   while reconciling a ServiceSet name it, and those of an AdapterPlugin name the plugin.

use std::collections::{BTreeMap, BTreeSet};

use crate::plugins::{HOSTILE, hostile_provider, hostile_service_set, plugin_config_map};
use ksm_e2e::{Scenario, chart};
use ksm_test_harness::adapter::http_get_accepting;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::status::condition_is;
use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, VectorSelector};
use serde_json::Value;

/// Labels Prometheus attaches when it scrapes a target (the Prometheus Operator's ServiceMonitor
/// sets these): expressions may match on them though `/metrics` does not carry them.
const SCRAPE_LABELS: [&str; 7] = ["job", "instance", "namespace", "pod", "service", "endpoint", "container"];

/// The Accept header of Prometheus's scrapes (2.42): the OpenMetrics text, which the host serves
/// when asked, is what the rules and the dashboard are evaluated against.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;\
                                 q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Grafana's built-in interval variables, and a duration that stands for them in PromQL.
const GRAFANA_INTERVALS: [&str; 3] = ["$__rate_interval", "$__interval", "$__range"];

#[tokio::test(flavor = "multi_thread")]
async fn alerts_and_dashboard_name_only_metrics_the_host_exposes() {
    let t = deployed("observability").await;
    let (code, text) = http_get_accepting(&format!("{}/metrics", t.adapter().metrics_url()), PROMETHEUS_ACCEPT).await;
    assert_eq!(code, 200, "/metrics answered {code}: {text}");
    let exposed = Exposed::parse(&text);

    // (where, PromQL, whether the dashboard shows it)
    let rules = rule_expressions().into_iter().map(|(place, text)| (place, text, false));
    let panels = dashboard_expressions().into_iter().map(|(place, text)| (place, text, true));
    let expressions: Vec<_> = rules.chain(panels).collect();
    let on_dashboard = expressions.iter().filter(|(_, _, shown)| *shown).count();
    assert!(on_dashboard > 10 && expressions.len() > on_dashboard + 5, "too few expressions: {expressions:#?}");
    let mut problems = Vec::new();
    let mut shown = BTreeSet::new();
    for (place, text, on_dashboard) in &expressions {
        let expr = match parser::parse(text) {
            Ok(expr) => expr,
            Err(e) => {
                problems.push(format!("{place}: does not parse: {e}\n    {text}"));
                continue;
            }
        };
        let mut found = Vec::new();
        selectors(&expr, &mut found);
        if found.is_empty() {
            problems.push(format!("{place}: selects no metric: {text}"));
        }
        for selector in found {
            match exposed.check(selector) {
                Ok(name) if *on_dashboard => drop(shown.insert(exposed.family_of(&name))),
                Ok(_) => {}
                Err(problem) => problems.push(format!("{place}: {problem}\n    {text}")),
            }
        }
    }
    for family in exposed.families.keys().filter(|f| !shown.contains(*f)) {
        problems.push(format!("the dashboard has no panel for {family}, which /metrics declares"));
    }
    assert!(problems.is_empty(), "{} problems:\n{}\n/metrics:\n{text}", problems.len(), problems.join("\n"));
}

/// A scenario whose host runs as the chart's default Deployment, with one ServiceSet deployed
/// by Flux and one whose plugin (from a ConfigMap) traps, so that every metric has a series.
async fn deployed(test: &str) -> Scenario {
    let container = chart::default_container();
    let t = Scenario::start_with(test, container.mode, &container.args()).await;
    t.create_service_set("web", two_services()).await;
    t.create(plugin_config_map(t.namespace(), HOSTILE)).await;
    let hostile = hostile_provider(&t).await;
    hostile_service_set(&t, &hostile, "trap").await;
    t.wait_converged("web").await;
    for service in ["ingress-nginx", "cert-manager"] {
        t.set_flux("web", service, FluxState::Ready).await;
    }
    t.wait_service_set("web", "deployed", |ss| ss["status"]["deployed"] == true).await;
    t.wait_service_set("trap", "ServicesTranslated False (PluginError)", |ss| {
        condition_is(ss, "ServicesTranslated", "False", "PluginError")
    })
    .await;
    t
}

/// The `expr` of every alert in the chart's rules file, by alert.
fn rule_expressions() -> Vec<(String, String)> {
    let file = "deploy/chart/files/prometheus-rules.yaml";
    let rules: Value =
        serde_norway::from_str(&chart::file("prometheus-rules.yaml")).unwrap_or_else(|e| panic!("{file}: {e}"));
    let groups = rules["groups"].as_array().unwrap_or_else(|| panic!("{file}: no groups"));
    let alerts = groups.iter().flat_map(|g| g["rules"].as_array().into_iter().flatten());
    alerts
        .map(|rule| {
            let expr = rule["expr"].as_str().unwrap_or_else(|| panic!("{file}: a rule without expr: {rule}"));
            (format!("{file}: alert {}", rule["alert"]), expr.to_string())
        })
        .collect()
}

/// The PromQL of the chart's dashboard: every panel target's `expr`, and the metric selector of
/// each `label_values(<selector>, <label>)` variable query, with Grafana's interval variables
/// replaced by a duration.
fn dashboard_expressions() -> Vec<(String, String)> {
    let file = "deploy/chart/files/dashboard.json";
    let dashboard: Value =
        serde_json::from_str(&chart::file("dashboard.json")).unwrap_or_else(|e| panic!("{file}: {e}"));
    let promql =
        |text: &str| GRAFANA_INTERVALS.iter().fold(text.to_string(), |text, variable| text.replace(variable, "5m"));
    let mut found = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: panel {}: a target without expr", panel["title"]));
            found.push((format!("{file}: panel {} target {}", panel["title"], target["refId"]), promql(expr)));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        let query = variable["query"]["query"].as_str().or_else(|| variable["query"].as_str()).unwrap_or_default();
        if let Some(inner) = query.strip_prefix("label_values(").and_then(|q| q.strip_suffix(')')) {
            let selector = inner.rsplit_once(',').map_or(inner, |(selector, _label)| selector);
            found.push((format!("{file}: variable {}", variable["name"]), promql(selector.trim())));
        }
    }
    found
}

/// Every vector selector of `expr` (those of range vectors included).
fn selectors<'a>(expr: &'a Expr, found: &mut Vec<&'a VectorSelector>) {
    match expr {
        Expr::Aggregate(a) => {
            selectors(&a.expr, found);
            if let Some(param) = &a.param {
                selectors(param, found);
            }
        }
        Expr::Unary(u) => selectors(&u.expr, found),
        Expr::Binary(b) => {
            selectors(&b.lhs, found);
            selectors(&b.rhs, found);
        }
        Expr::Paren(p) => selectors(&p.expr, found),
        Expr::Subquery(s) => selectors(&s.expr, found),
        Expr::VectorSelector(v) => found.push(v),
        Expr::MatrixSelector(m) => found.push(&m.vs),
        Expr::Call(call) => call.args.args.iter().for_each(|arg| selectors(arg, found)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The metric a selector names: its name, or its `__name__="..."` matcher.
fn metric_name(selector: &VectorSelector) -> Option<String> {
    selector.name.clone().or_else(|| {
        let by_name = selector.matchers.matchers.iter().find(|m| m.name == "__name__");
        by_name.filter(|m| matches!(m.op, MatchOp::Equal)).map(|m| m.value.clone())
    })
}

/// What `/metrics` declares: the sample names of each family (`# TYPE` lines: a counter's
/// `_total`, a histogram's `_bucket`, `_sum` and `_count`), with the label names its samples
/// carry.
struct Exposed {
    /// Family name → its sample names.
    families: BTreeMap<String, Vec<String>>,
    /// Sample name → label names seen on it (none when the family has no sample yet).
    samples: BTreeMap<String, BTreeSet<String>>,
}

impl Exposed {
    fn parse(text: &str) -> Self {
        let mut exposed = Self { families: BTreeMap::new(), samples: BTreeMap::new() };
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(declared) = line.strip_prefix("# TYPE ") {
                let mut parts = declared.split_whitespace();
                let (family, kind) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    "summary" => &["", "_sum", "_count"],
                    _ => &[""],
                };
                let names: Vec<String> = suffixes.iter().map(|s| format!("{family}{s}")).collect();
                for name in &names {
                    exposed.samples.entry(name.clone()).or_default();
                }
                exposed.families.insert(family.to_string(), names);
            } else if !line.starts_with('#') {
                let end = line.find(['{', ' ']).unwrap_or(line.len());
                let labels = exposed.samples.entry(line[..end].to_string()).or_default();
                labels.extend(label_names(&line[end..]));
            }
        }
        exposed
    }

    /// The family a sample name belongs to (the name itself when none declares it).
    fn family_of(&self, name: &str) -> String {
        let family = self.families.iter().find(|(_, names)| names.iter().any(|n| n == name));
        family.map_or_else(|| name.to_string(), |(family, _)| family.clone())
    }

    /// The selector's metric, if `/metrics` declares it and its samples carry the labels the
    /// selector matches on (but those Prometheus attaches).
    fn check(&self, selector: &VectorSelector) -> Result<String, String> {
        let name = metric_name(selector).ok_or_else(|| format!("`{selector}` names no metric"))?;
        let declared = self.families.values().flatten().any(|n| *n == name);
        let labels =
            self.samples.get(&name).filter(|_| declared).ok_or_else(|| format!("/metrics declares no {name}"))?;
        let matched = selector.matchers.matchers.iter().map(|m| m.name.as_str());
        let missing: Vec<&str> = matched
            .filter(|l| *l != "__name__" && !SCRAPE_LABELS.contains(l) && !labels.is_empty() && !labels.contains(*l))
            .collect();
        if missing.is_empty() {
            Ok(name)
        } else {
            Err(format!("{name} has no label {missing:?} (its labels: {labels:?})"))
        }
    }
}

/// The label names of a sample line's `{name="value",...}` part (values may hold escaped quotes).
fn label_names(rest: &str) -> Vec<String> {
    let Some(inner) = rest.strip_prefix('{') else { return Vec::new() };
    let (mut names, mut chars) = (Vec::new(), inner.chars());
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let name = name.trim_start_matches(',').trim();
        if name.is_empty() || name.starts_with('}') {
            return names;
        }
        names.push(name.to_string());
        // The quoted value.
        let mut escaped = false;
        chars.next();
        for c in chars.by_ref() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => break,
                _ => escaped = false,
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_log_is_json_and_names_the_object_of_each_line() {
    let t = deployed("json-logs").await;
    let log = std::fs::read_to_string(t.adapter().log_path()).expect("the adapter's log");
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    for (n, text) in log.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(text) {
            Ok(line)
                if ["timestamp", "level", "target"].iter().all(|k| line[k].is_string())
                    && line["fields"]["message"].is_string() =>
            {
                lines.push(line)
            }
            _ => problems.push(format!(
                "line {}: not a JSON log object with timestamp, level, target and message: {text}",
                n + 1
            )),
        }
    }
    // A line about a ServiceSet — logged by the ServiceSet controller, or naming a ServiceSet as
    // the host writes it (`ServiceSet.<version>.<group>/<name>.<namespace>`) — carries it in the
    // field `serviceset` (its own, or its `reconcile` span's).
    let key = |name: &str| format!("/{name}.{}", t.namespace());
    let mut named = BTreeSet::new();
    for line in &lines {
        let message = line["fields"]["message"].as_str().unwrap_or_default();
        let serviceset = field(line, "serviceset");
        let about =
            line["target"].as_str().is_some_and(|t| t.starts_with("ksm_adapter::controller::round::service_sets"))
                || message.contains("ServiceSet.v1beta1.k0rdent.mirantis.com/");
        match serviceset {
            Some(value) => drop(named.insert(value.to_string())),
            None if about => problems.push(format!("about a ServiceSet but no `serviceset` field: {line}")),
            None => {}
        }
    }
    for name in ["web", "trap"] {
        if !named.iter().any(|value| value.ends_with(&key(name))) {
            problems.push(format!("no line names ServiceSet {name} in `serviceset`: {named:?}"));
        }
    }
    // A line about a plugin — logged by the AdapterPlugin controller or by a plugin itself, or
    // reporting a plugin's failure (`plugin "<name>": ...`) — carries the field `adapterplugin`
    // (the AdapterPlugin) or `plugin` (the component, when no AdapterPlugin is concerned).
    let mut plugins = BTreeSet::new();
    for line in &lines {
        let message = line["fields"]["message"].as_str().unwrap_or_default();
        let target = line["target"].as_str().unwrap_or_default();
        let about = target.starts_with("ksm_adapter::controller::adapter_plugins")
            || target.starts_with("ksm_adapter::runtime::guest_log")
            || message.contains("plugin \"");
        let named = field(line, "adapterplugin").or_else(|| field(line, "plugin"));
        match named {
            Some(value) => drop(plugins.insert(value.to_string())),
            None if about => problems.push(format!("about a plugin but no `adapterplugin` or `plugin` field: {line}")),
            None => {}
        }
    }
    for plugin in [format!("{}-flux", t.namespace()), format!("{}-hostile", t.namespace()), "hostile".to_string()] {
        if !plugins.contains(&plugin) {
            problems.push(format!("no line names plugin {plugin}: {plugins:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems in {}:\n{}",
        problems.len(),
        t.adapter().log_path().display(),
        problems.join("\n")
    );
    eprintln!("{} JSON lines; ServiceSets named: {named:?}; plugins named: {plugins:?}", lines.len());
}

/// A JSON log line's field `name`: its own, else its span's.
fn field<'a>(line: &'a Value, name: &str) -> Option<&'a str> {
    line["fields"][name].as_str().or_else(|| line["span"][name].as_str())
}
