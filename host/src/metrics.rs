//! Prometheus metrics of `ksm-adapter run`, and the endpoint that serves them with the health
//! probes: `/metrics`, `/healthz` (the process answers) and `/readyz` (caches listed and plugins
//! loaded).
//!
//! `/metrics` answers in the text format the scrape's Accept header prefers: OpenMetrics 1.0
//! (what prometheus-client encodes, and Prometheus asks for first), else Prometheus's classic
//! text format 0.0.4, which `promtool check metrics` and plain `curl` get. The two differ in how
//! they name a counter: OpenMetrics declares the family `ksm_reconciles` of samples
//! `ksm_reconciles_total`, the classic format the family `ksm_reconciles_total`; served under the
//! other's content type, Prometheus keeps no type or help for the counters.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `ksm_reconciles_total` | `kind`, `result` | reconciles of ServiceSets and AdapterPlugins, `ok` or `error` |
//! | `ksm_reconcile_errors_total` | `kind`, `error` | failed reconciles of ServiceSets, AdapterPlugins and (`manage` mode) SMPs, by what failed (below) |
//! | `ksm_reconcile_duration_seconds` | `kind` | histogram of reconcile durations |
//! | `ksm_plugin_call_duration_seconds` | `plugin`, `function` | histogram of plugin calls |
//! | `ksm_plugin_errors_total` | `plugin`, `kind` | `timeout`, `memory`, `trap`, `output`, `instantiate`, `policy` |
//! | `ksm_api_requests_total` | `verb` | requests to the API server: `get` (includes lists), `watch`, `create`, `update`, `patch`, `delete` |
//! | `ksm_servicesets` | `state` | served ServiceSets: `Deployed`, `Failed` (a service failed), `Progressing` |
//! | `ksm_plugin_ready` | `plugin` | 1 when the AdapterPlugin is ready |
//!
//! The `error` of a failed reconcile is its error's `metric_label`: for a ServiceSet `api`,
//! `conflict`, `plugin`, `refused`, `unreachable` or `uncached`; for an AdapterPlugin the step of
//! its load that failed (`fetch`, `verify`, `compile`, `validate`) or `api`; for an SMP `look` or
//! `api`.

use crate::plugin::{CallError, Function, Plugin};
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ksm_plugin_sdk::contract::{
    ConfigError, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
    TranslateInput,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What failed a reconcile, in one word: the `error` label of `ksm_reconcile_errors_total` (as
/// kube-rs controller-rs labels its reconcilers' errors).
pub trait MetricLabel {
    /// The label: one of a few fixed words.
    fn metric_label(&self) -> &'static str;
}

/// Labels of one kind of reconcile and its result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: String,
    result: String,
}

/// Labels of one kind of reconcile and what made it fail.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileErrorLabels {
    kind: String,
    error: String,
}

/// Labels naming a reconciled kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// Labels of a plugin call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    function: String,
}

/// Labels of a plugin error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    plugin: String,
    kind: String,
}

/// Labels of an API request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

/// Labels of a ServiceSet state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

/// Labels of what clients of other clusters are for.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PurposeLabels {
    purpose: String,
}

/// Labels naming an AdapterPlugin.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The metrics of one process.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    reconcile_duration: Histograms<KindLabels>,
    plugin_calls: Histograms<CallLabels>,
    plugin_errors: Family<ErrorLabels, Counter>,
    api_requests: Family<VerbLabels, Counter>,
    service_sets: Family<StateLabels, Gauge>,
    plugin_ready: Family<PluginLabels, Gauge>,
    cluster_clients: Family<PurposeLabels, Gauge>,
    region_watches: Gauge,
}

fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ksm");
        let metrics = Self {
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(seconds),
            plugin_calls: Family::new_with_constructor(seconds),
            plugin_errors: Family::default(),
            api_requests: Family::default(),
            service_sets: Family::default(),
            plugin_ready: Family::default(),
            cluster_clients: Family::default(),
            region_watches: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register("reconciles", "Reconciles by kind and result", metrics.reconciles.clone());
        registry.register("reconcile_errors", "Failed reconciles by kind and error", metrics.reconcile_errors.clone());
        registry.register("reconcile_duration_seconds", "Reconcile durations", metrics.reconcile_duration.clone());
        registry.register("plugin_call_duration_seconds", "Plugin call durations", metrics.plugin_calls.clone());
        registry.register("plugin_errors", "Plugin errors by kind", metrics.plugin_errors.clone());
        registry.register("api_requests", "Requests to the API server by verb", metrics.api_requests.clone());
        registry.register("servicesets", "Served ServiceSets by state", metrics.service_sets.clone());
        registry.register("plugin_ready", "1 when the AdapterPlugin is ready", metrics.plugin_ready.clone());
        registry.register(
            "cluster_clients",
            "Clients of other clusters held, by purpose (region, target)",
            metrics.cluster_clients.clone(),
        );
        registry.register(
            "region_watches",
            "Watches of CD-tool objects on the regions in use",
            metrics.region_watches.clone(),
        );
        Self { registry, ..metrics }
    }
}

impl Metrics {
    /// Records a reconcile of `kind` that took since `started`: `Ok`, or `Err` with the metric
    /// label of the error that failed it.
    pub fn reconciled(&self, kind: &str, started: Instant, outcome: Result<(), &str>) {
        let result = match outcome {
            Ok(()) => "ok",
            Err(error) => {
                self.reconcile_failed(kind, error);
                "error"
            }
        };
        self.reconciles.get_or_create(&ReconcileLabels { kind: kind.into(), result: result.into() }).inc();
        self.reconcile_duration
            .get_or_create(&KindLabels { kind: kind.into() })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Counts a failed reconcile of `kind`, by its error's metric label `error`.
    pub fn reconcile_failed(&self, kind: &str, error: &str) {
        self.reconcile_errors.get_or_create(&ReconcileErrorLabels { kind: kind.into(), error: error.into() }).inc();
    }

    /// Counts `n` plugin errors of `kind` (a [`CallError`] label or `policy`).
    pub fn plugin_errors(&self, plugin: &str, kind: &str, n: u64) {
        self.plugin_errors.get_or_create(&ErrorLabels { plugin: plugin.into(), kind: kind.into() }).inc_by(n);
    }

    /// How many reconciles of `kind` failed with an error of metric label `error`.
    #[cfg(test)]
    pub fn reconcile_errors(&self, kind: &str, error: &str) -> u64 {
        self.reconcile_errors.get_or_create(&ReconcileErrorLabels { kind: kind.into(), error: error.into() }).get()
    }

    /// Counts a request to the API server.
    pub fn api_request(&self, verb: &str) {
        self.api_requests.get_or_create(&VerbLabels { verb: verb.into() }).inc();
    }

    /// Sets the number of served ServiceSets per state.
    pub fn service_sets(&self, counts: &[(&str, i64)]) {
        for (state, count) in counts {
            self.service_sets.get_or_create(&StateLabels { state: (*state).into() }).set(*count);
        }
    }

    /// Sets the clients of other clusters held per purpose, and the watches on the regions.
    pub fn clusters(&self, clients: &[(&str, usize)], region_watches: usize) {
        for (purpose, count) in clients {
            let count = i64::try_from(*count).unwrap_or(i64::MAX);
            self.cluster_clients.get_or_create(&PurposeLabels { purpose: (*purpose).into() }).set(count);
        }
        self.region_watches.set(i64::try_from(region_watches).unwrap_or(i64::MAX));
    }

    /// Sets whether AdapterPlugin `plugin` is ready.
    pub fn plugin_ready(&self, plugin: &str, ready: bool) {
        self.plugin_ready.get_or_create(&PluginLabels { plugin: plugin.into() }).set(i64::from(ready));
    }

    /// Forgets a deleted AdapterPlugin's readiness.
    pub fn plugin_gone(&self, plugin: &str) {
        self.plugin_ready.remove(&PluginLabels { plugin: plugin.into() });
    }

    /// The metrics in `format`.
    fn encode(&self, format: Format) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        match format {
            Format::OpenMetrics => text,
            Format::Classic => classic(&text),
        }
    }
}

/// The text formats `/metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// Prometheus's classic text format 0.0.4.
    Classic,
}

impl Format {
    /// The format an Accept header prefers: the media range of the highest q-value (the first
    /// of equals) among those the host serves; ranges it does not serve (Prometheus's protobuf)
    /// are passed over, and without an acceptable one the classic format is the answer.
    fn negotiate(accept: Option<&str>) -> Self {
        let mut chosen = (Self::Classic, 0.0);
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let format = match parts.next().unwrap_or_default().to_ascii_lowercase().as_str() {
                "application/openmetrics-text" => Self::OpenMetrics,
                "text/plain" | "text/*" | "*/*" => Self::Classic,
                _ => continue,
            };
            let q = parts.find_map(|p| p.strip_prefix("q=")).map_or(Some(1.0), |q| q.parse::<f32>().ok());
            if let Some(q) = q.filter(|q| *q > chosen.1) {
                chosen = (format, q);
            }
        }
        chosen.0
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// prometheus-client's OpenMetrics text in the classic format: a counter family is named as its
/// samples are (`_total`), and there is no `# EOF` line. Everything else reads the same in both.
fn classic(openmetrics: &str) -> String {
    let counters: HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut text = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines().filter(|l| *l != "# EOF") {
        let family = ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?.split_once(' ')?)));
        match family {
            Some((prefix, (name, rest))) if counters.contains(name) => writeln!(text, "{prefix}{name}_total {rest}"),
            _ => writeln!(text, "{line}"),
        }
        .expect("writing to a String");
    }
    text
}

/// The Kubernetes verb of a request to the API server (lists count as `get`).
pub fn verb_of<B>(request: &http::Request<B>) -> &'static str {
    let watch = request.uri().query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match *request.method() {
        http::Method::GET if watch => "watch",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// A plugin whose calls are timed and whose failures are counted, under the name of its
/// AdapterPlugin.
pub struct Metered {
    plugin: Arc<dyn Plugin>,
    name: String,
    metrics: Arc<Metrics>,
}

impl Metered {
    /// Meters `plugin` as `name`.
    pub fn new(plugin: Arc<dyn Plugin>, name: &str, metrics: Arc<Metrics>) -> Self {
        Self { plugin, name: name.into(), metrics }
    }

    fn time<R>(
        &self,
        function: Function,
        call: impl FnOnce(&dyn Plugin) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let started = Instant::now();
        let result = call(self.plugin.as_ref());
        let labels = CallLabels { plugin: self.name.clone(), function: function.as_str().into() };
        self.metrics.plugin_calls.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
        if let Err(e) = &result {
            self.metrics.plugin_errors(&self.name, e.kind.label(), 1);
        }
        result
    }
}

impl Plugin for Metered {
    fn metadata(&self) -> &PluginMetadata {
        self.plugin.metadata()
    }

    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        self.time(Function::ValidateConfig, |p| p.validate_config(config))
    }

    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        self.time(Function::Translate, |p| p.translate(input))
    }

    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        self.time(Function::MapStatus, |p| p.map_status(input))
    }

    fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
        let plugin = self.plugin.clone().session();
        Arc::new(Self { plugin, name: self.name.clone(), metrics: self.metrics.clone() })
    }
}

/// Why `/healthz` fails: a reconcile has run far longer than any honest round.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the reconcile of {what} has run for {}s", .elapsed.as_secs())]
pub struct Stuck {
    /// What it reconciles, e.g. `ServiceSet team/prod`.
    pub what: String,
    /// How long it has run.
    pub elapsed: Duration,
}

/// Why `/readyz` fails.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// Not serving yet (neither standby nor leader).
    #[error("starting")]
    Starting,
    /// Caches, plugins or watches it waits for, each said.
    #[error("{}", .0.join("; "))]
    Waiting(Vec<String>),
}

/// What the endpoint asks the controller.
#[derive(Clone)]
pub struct Probes {
    /// Updates gauges computed from caches, just before each scrape.
    pub refresh: Arc<dyn Fn() + Send + Sync>,
    /// Answers `/healthz`: why the controller is stuck, if it is.
    pub healthy: Arc<dyn Fn() -> Result<(), Stuck> + Send + Sync>,
    /// Answers `/readyz`: what keeps the controller from being ready, if anything.
    pub ready: Arc<dyn Fn() -> Result<(), NotReady> + Send + Sync>,
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>, probes: Probes) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics, /healthz and /readyz");
    loop {
        let (stream, _) = listener.accept().await?;
        let (metrics, probes) = (metrics.clone(), probes.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let accept = request.headers().get(hyper::header::ACCEPT).and_then(|a| a.to_str().ok());
                let response = respond(request.uri().path(), accept, &metrics, &probes);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!("metrics connection: {e}");
            }
        });
    }
}

/// The answer to a GET of `path`, whose Accept header was `accept`.
fn respond(path: &str, accept: Option<&str>, metrics: &Metrics, probes: &Probes) -> Response<Full<Bytes>> {
    let format = Format::negotiate(accept);
    let (status, body) = match path {
        "/metrics" => {
            (probes.refresh)();
            (StatusCode::OK, metrics.encode(format))
        }
        "/healthz" => match (probes.healthy)() {
            Ok(()) => (StatusCode::OK, "ok\n".into()),
            Err(stuck) => {
                tracing::error!("/healthz: stuck: {stuck}");
                (StatusCode::SERVICE_UNAVAILABLE, format!("stuck: {stuck}\n"))
            }
        },
        "/readyz" => match (probes.ready)() {
            Ok(()) => (StatusCode::OK, "ok\n".into()),
            Err(missing) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {missing}\n")),
        },
        _ => (StatusCode::NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n".into()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if path == "/metrics" {
        let content_type = format.content_type().parse().expect("a valid header");
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, content_type);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_series_are_encoded_with_their_labels() {
        let metrics = Metrics::default();
        metrics.reconciled("ServiceSet", Instant::now(), Ok(()));
        metrics.reconciled("AdapterPlugin", Instant::now(), Err("fetch"));
        metrics.plugin_errors("flux", "timeout", 1);
        metrics.api_request("patch");
        metrics.service_sets(&[("Deployed", 3)]);
        metrics.plugin_ready("flux", true);
        let text = metrics.encode(Format::OpenMetrics);
        for series in [
            r#"ksm_reconciles_total{kind="ServiceSet",result="ok"} 1"#,
            r#"ksm_reconciles_total{kind="AdapterPlugin",result="error"} 1"#,
            r#"ksm_reconcile_errors_total{kind="AdapterPlugin",error="fetch"} 1"#,
            r#"ksm_reconcile_duration_seconds_count{kind="ServiceSet"} 1"#,
            r#"ksm_plugin_errors_total{plugin="flux",kind="timeout"} 1"#,
            r#"ksm_api_requests_total{verb="patch"} 1"#,
            r#"ksm_servicesets{state="Deployed"} 3"#,
            r#"ksm_plugin_ready{plugin="flux"} 1"#,
        ] {
            assert!(text.contains(series), "{series} missing from:\n{text}");
        }
    }

    /// A scrape of `/metrics` through [`serve`], sending `accept` (if any) as the Accept header:
    /// the Content-Type and the body.
    async fn scrape(metrics: Metrics, accept: Option<&'static str>) -> (String, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let probes = Probes { refresh: Arc::new(|| {}), healthy: Arc::new(|| Ok(())), ready: Arc::new(|| Ok(())) };
        let server = tokio::spawn(serve(listener, Arc::new(metrics), probes));
        let response = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(address).unwrap();
            let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
            write!(stream, "GET /metrics HTTP/1.1\r\nHost: {address}\r\n{accept}Connection: close\r\n\r\n").unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            response
        })
        .await
        .unwrap();
        server.abort();
        let (head, body) = response.split_once("\r\n\r\n").expect("a response with a body");
        let content_type = head
            .lines()
            .find_map(|l| l.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("content-type")))
            .map(|(_, value)| value.trim().to_string())
            .expect("a Content-Type");
        (content_type, body.to_string())
    }

    /// Metrics with a series in every family.
    fn every_family() -> Metrics {
        let metrics = Metrics::default();
        metrics.reconciled("ServiceSet", Instant::now(), Err("refused"));
        let call = CallLabels { plugin: "flux".into(), function: "translate".into() };
        metrics.plugin_calls.get_or_create(&call).observe(0.002);
        metrics.plugin_errors("flux", "trap", 2);
        metrics.api_request("watch");
        metrics.service_sets(&[("Deployed", 3), ("Failed", 1)]);
        metrics.plugin_ready("flux", true);
        metrics.clusters(&[("region", 1), ("target", 2)], 4);
        metrics
    }

    /// Runs `promtool check metrics` (Prometheus's own parser and linter of the text format) on
    /// `text`: `$KSM_PROMTOOL`, which must run (CI sets it), else `promtool` from PATH; without
    /// either the check is skipped, and says so past the output capture.
    fn promtool_check(text: &str) {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let (program, required) = match std::env::var_os("KSM_PROMTOOL") {
            Some(program) => (program, true),
            None => ("promtool".into(), false),
        };
        let spawned = Command::new(&program)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                let note = "skipped: `promtool check metrics` (promtool is not installed; KSM_PROMTOOL names it)\n";
                let _ = std::io::stderr().write_all(note.as_bytes());
                return;
            }
            spawned => spawned.unwrap_or_else(|e| panic!("running {program:?}: {e}")),
        };
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "promtool check metrics: {} {said}\n{text}", out.status);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_plain_scrape_gets_the_classic_text_format_that_promtool_accepts() {
        // Families without a series yet are left out of the text.
        for metrics in [every_family(), Metrics::default()] {
            let (content_type, text) = scrape(metrics, None).await;
            assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
            promtool_check(&text);
            assert!(!text.contains("# EOF"), "{text}");
        }
        let (content_type, text) = scrape(every_family(), Some("text/plain;version=0.0.4;q=0.5,*/*;q=0.1")).await;
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert!(text.contains("# HELP ksm_reconciles_total Reconciles by kind and result.\n"), "{text}");
        assert!(text.contains("# TYPE ksm_reconciles_total counter\nksm_reconciles_total{"), "{text}");
        promtool_check(&text);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scrape_asking_for_openmetrics_gets_it() {
        // What Prometheus 2.42 sends; Prometheus 3's default; Prometheus 3 with protobuf first
        // (native histograms), which the host does not serve.
        for accept in [
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
             text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,\
             application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,\
             text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,\
             application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,\
             application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,\
             text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
        ] {
            let (content_type, text) = scrape(every_family(), Some(accept)).await;
            assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8", "{accept}");
            assert!(text.contains("# TYPE ksm_reconciles counter\nksm_reconciles_total{"), "{text}");
            assert!(text.ends_with("# EOF\n"), "{text}");
        }
    }

    #[test]
    fn the_format_is_the_acceptable_one_of_the_highest_quality() {
        use Format::{Classic, OpenMetrics};
        for (accept, format) in [
            (None, Classic),
            (Some("*/*"), Classic),
            (Some("application/openmetrics-text"), OpenMetrics),
            (Some("Application/OpenMetrics-Text; version=1.0.0"), OpenMetrics),
            (Some("text/plain;q=0.9,application/openmetrics-text;q=0.8"), Classic),
            (Some("text/plain, application/openmetrics-text"), Classic),
            (Some("application/openmetrics-text;q=0,*/*;q=0.1"), Classic),
            (Some("application/vnd.google.protobuf;q=0.9,application/openmetrics-text;q=0.5,*/*;q=0.1"), OpenMetrics),
            (Some("application/vnd.google.protobuf"), Classic),
        ] {
            assert_eq!(Format::negotiate(accept), format, "{accept:?}");
        }
    }

    #[test]
    fn verbs_follow_kubernetes_not_http() {
        let request = |method: &str, uri: &str| http::Request::builder().method(method).uri(uri).body(()).unwrap();
        assert_eq!(verb_of(&request("GET", "/api/v1/configmaps?watch=true&resourceVersion=1")), "watch");
        assert_eq!(verb_of(&request("GET", "/api/v1/namespaces/a/configmaps")), "get");
        assert_eq!(verb_of(&request("PATCH", "/apis/x/v1/y/z")), "patch");
        assert_eq!(verb_of(&request("PUT", "/apis/x/v1/y/z/status")), "update");
    }

    #[test]
    fn endpoints_answer_by_path_health_and_readiness() {
        let metrics = Metrics::default();
        let probes = |healthy: bool, ready: bool| Probes {
            refresh: Arc::new(|| {}),
            healthy: Arc::new(move || {
                let stuck = Stuck { what: "x".into(), elapsed: Duration::from_secs(601) };
                if healthy { Ok(()) } else { Err(stuck) }
            }),
            ready: Arc::new(
                move || if ready { Ok(()) } else { Err(NotReady::Waiting(vec!["caches not listed".into()])) },
            ),
        };
        let status = |path: &str, probes: &Probes| respond(path, None, &metrics, probes).status();
        assert_eq!(status("/healthz", &probes(true, false)), StatusCode::OK);
        assert_eq!(status("/healthz", &probes(false, true)), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status("/readyz", &probes(true, false)), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status("/readyz", &probes(true, true)), StatusCode::OK);
        assert_eq!(status("/metrics", &probes(true, true)), StatusCode::OK);
        assert_eq!(status("/", &probes(true, true)), StatusCode::NOT_FOUND);
    }
}
