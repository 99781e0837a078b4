//! `ksm-adapter plugin test`: the conformance suite. Runs a plugin against fixture cases and
//! checks the contract invariants every plugin must hold, whatever its CD tool; prints one line
//! per check per case (`PASS`/`FAIL` and why) and fails when any check fails.
//!
//! Cases:
//! - the built-in fixtures of `tests/conformance/` (compiled into the binary): translate cases
//!   with an `invariants.yaml` instead of an expected output, checked for any plugin;
//! - `--fixtures <dir>`: the plugin's own cases in the golden format of `plugins/flux/testdata`
//!   (`translate/<case>/input.yaml` + `expected.yaml`, `status/cases.yaml`), compared exactly.
//!
//! Checks of the plugin: contract version, metadata, `validate-config` (rejects an unknown field
//! naming it; accepts `{}`, `null` and the keys the host itself reads). Checks of every translate
//! case: the call stays within its limits; deterministic (twice, byte-identical);
//! `validate-config` and `translate` agree on the config; answers for exactly the ServiceSet's
//! services in spec order; only declared kinds; the host's output policy
//! ([`ksm_adapter::plan::translate`]); names; missing templates give `TemplateNotFound`;
//! `map-status` with nothing observed is not Deployed, and both it and `map-status` of the objects
//! as just created answer without error, twice identically; then the case's own expectations.

use super::json_diff::differences_summary;
use super::plugin_args::{LimitArgs, load};
use anyhow::{Context, bail};
use clap::Args;
use ksm_adapter::plan::{self, ServiceOutcome};
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::Plugin;
use ksm_adapter::policy::DEFAULT_OBJECTS_PER_SERVICE;
use ksm_adapter::runtime::{CONTRACT_VERSIONS, LoadError, Runtime, WasmPlugin, export_of};
use ksm_adapter::serving::ServingPlugin;
use ksm_plugin_sdk::contract::{
    ConfigError, ObservedObject, ServiceError, ServiceState, ServiceStatus, ServiceTranslation, StatusError,
    StatusInput, TranslateError,
};
use ksm_plugin_sdk::names::{MAX_LABEL_LEN, is_dns1123_label, is_dns1123_subdomain, is_label_key, is_label_value};
use ksm_plugin_sdk::status_table::StatusCase;
use ksm_plugin_sdk::{inputs, k0rdent, report};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// The system namespace every case runs with (as the golden cases).
const SYSTEM_NAMESPACE: &str = "kcm-system";
/// A field no plugin knows.
const UNKNOWN_FIELD: &str = "thisFieldDoesNotExist";
/// The input file of a translate case.
const INPUT_FILE: &str = "input.yaml";
/// The expected `translate` result of a case (rendered by `report::translation`).
const EXPECTED_FILE: &str = "expected.yaml";
/// The expected service states of a case whose input holds observed objects.
const EXPECTED_STATUS_FILE: &str = "expected-status.yaml";
/// Plugin-independent expectations of a case (the built-in fixtures).
const INVARIANTS_FILE: &str = "invariants.yaml";

macro_rules! builtin {
    ($name:literal) => {
        (
            concat!("conformance/", $name),
            include_str!(concat!("../../../tests/conformance/", $name, "/input.yaml")),
            include_str!(concat!("../../../tests/conformance/", $name, "/invariants.yaml")),
        )
    };
}

/// The built-in fixtures: `(name, input.yaml, invariants.yaml)`.
const BUILTIN: &[(&str, &str, &str)] =
    &[builtin!("several-services"), builtin!("self-management"), builtin!("unknown-config"), builtin!("long-names")];

#[derive(Debug, Args)]
pub struct TestArgs {
    /// `builtin:flux` or the path of a `.wasm` component.
    plugin: String,
    /// A directory of the plugin's own cases, compared exactly, in the golden format of
    /// plugins/flux/testdata: `translate/<case>/{input.yaml,expected.yaml}` and
    /// `status/cases.yaml`; also a single case directory (with `input.yaml`) or a directory of
    /// case directories. Repeatable.
    #[arg(long = "fixtures", value_name = "DIR")]
    fixtures: Vec<PathBuf>,
    /// Writes the `expected.yaml` of every `--fixtures` translate case from the plugin's answer
    /// (then review the changes) instead of comparing.
    #[arg(long, requires = "fixtures")]
    update: bool,
    /// Default provider config (JSON) merged under every case's `spec.provider.config`, as an
    /// AdapterPlugin's `spec.config` is: for plugins that need operator settings (e.g. the Argo
    /// CD plugin's `helmRepositories`).
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    config: Option<Value>,
    #[command(flatten)]
    limits: LimitArgs,
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

/// Runs the suite and prints its report; fails (exit 1) when any check fails.
pub fn run(runtime: &Runtime, args: TestArgs) -> anyhow::Result<ExitCode> {
    let mut fixtures = Vec::new();
    for dir in &args.fixtures {
        fixtures.extend(discover(dir)?);
    }
    let limits = args.limits.limits();
    let mut report = Report::default();
    match load(runtime, &args.plugin, limits) {
        Err(e) => {
            let contract = matches!(e.downcast_ref::<LoadError>(), Some(LoadError::UnsupportedContract { .. }));
            report.push("plugin", if contract { "contract version" } else { "load" }, Err(format!("{e:#}")));
        }
        Ok(plugin) => {
            let plugin = Arc::new(plugin);
            println!(
                "plugin {} {} (contract {}), {} bytes, sha256 {}",
                plugin.metadata().name,
                plugin.metadata().version,
                plugin.metadata().contract_version,
                plugin.info().size,
                plugin.info().sha256
            );
            let serving = ServingPlugin { config: args.config.clone(), ..ServingPlugin::plain(plugin.clone()) };
            let suite = Suite { serving, plugin, limits, update: args.update };
            suite.check_plugin(&mut report);
            for (name, input, invariants) in BUILTIN {
                let case = parse_case(name, input, None, None, Some(invariants));
                suite.check_fixture(&mut report, name, case.map(Fixture::Translate));
            }
            for (name, fixture) in fixtures {
                suite.check_fixture(&mut report, &name, fixture);
            }
        }
    }
    report.print()?;
    Ok(if report.failed() == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The outcome of every check.
#[derive(Default)]
struct Report {
    lines: Vec<Line>,
}

struct Line {
    passed: bool,
    case: String,
    check: &'static str,
    detail: String,
}

impl Report {
    /// Records check `check` of `case`: `Ok(what passed)` or `Err(why it failed)`.
    fn push(&mut self, case: &str, check: &'static str, result: Result<String, String>) {
        let (passed, detail) = match result {
            Ok(detail) => (true, detail),
            Err(detail) => (false, detail),
        };
        self.lines.push(Line { passed, case: case.to_string(), check, detail });
    }

    fn failed(&self) -> usize {
        self.lines.iter().filter(|l| !l.passed).count()
    }

    fn print(&self) -> anyhow::Result<()> {
        use std::io::Write;
        let width = self.lines.iter().map(|l| l.case.len()).max().unwrap_or(0).min(48);
        let mut out = std::io::stdout().lock();
        for line in &self.lines {
            let status = if line.passed { "PASS" } else { "FAIL" };
            writeln!(out, "{status}  {:width$}  {}: {}", line.case, line.check, line.detail)?;
        }
        let failed = self.failed();
        writeln!(out, "{} passed, {failed} failed", self.lines.len() - failed)?;
        out.flush()?;
        Ok(())
    }
}

/// A case to run.
enum Fixture {
    Translate(TranslateCase),
    Status(StatusCase),
}

/// A translate case: a ServiceSet, its templates, observed objects, and what to compare.
struct TranslateCase {
    /// The case's directory (cases read from disk).
    dir: Option<PathBuf>,
    service_set: Value,
    templates: Vec<Value>,
    observed: Vec<Value>,
    expected: Option<Value>,
    expected_status: Option<Value>,
    invariants: Option<Invariants>,
}

impl TranslateCase {
    fn template(&self, name: &str) -> Option<Value> {
        self.templates.iter().find(|t| t["metadata"]["name"] == name).cloned()
    }

    /// The template of service `service`, by the ServiceSet's spec.
    fn template_of(&self, service: &str) -> Option<Value> {
        let services = self.service_set["spec"]["services"].as_array()?;
        let spec = services.iter().find(|s| s["name"] == service)?;
        self.template(spec["template"].as_str()?)
    }
}

/// `invariants.yaml`: what any plugin must answer for a case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Invariants {
    translate: TranslateInvariants,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TranslateInvariants {
    /// The outcome of each service, in spec order.
    #[serde(default)]
    services: Option<Vec<ServiceInvariant>>,
    /// The ServiceSet fails with InvalidConfig naming this field.
    #[serde(default)]
    invalid_config: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceInvariant {
    service: String,
    /// `objects`, or the kind of the service error.
    outcome: String,
}

/// Reads the YAML documents of `text`.
fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut documents = Vec::new();
    for document in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| e.to_string())?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

fn parse_case(
    name: &str,
    input: &str,
    expected: Option<&str>,
    expected_status: Option<&str>,
    invariants: Option<&str>,
) -> Result<TranslateCase, String> {
    let documents = yaml_documents(input).map_err(|e| format!("{INPUT_FILE}: {e}"))?;
    let is = |d: &Value, kind: &str| d["kind"] == kind && d["apiVersion"] == k0rdent::API_VERSION;
    let mut service_sets = documents.iter().filter(|d| is(d, "ServiceSet"));
    let (Some(service_set), None) = (service_sets.next(), service_sets.next()) else {
        return Err(format!("{name}: {INPUT_FILE} must hold exactly one ServiceSet ({})", k0rdent::API_VERSION));
    };
    let parse = |file: &str, text: Option<&str>| -> Result<Option<Value>, String> {
        text.map(|t| serde_norway::from_str(t).map_err(|e| format!("{file}: {e}"))).transpose()
    };
    let invariants = invariants
        .map(|t| serde_norway::from_str::<Invariants>(t).map_err(|e| format!("{INVARIANTS_FILE}: {e}")))
        .transpose()?;
    Ok(TranslateCase {
        dir: None,
        service_set: service_set.clone(),
        templates: documents.iter().filter(|d| is(d, "ServiceTemplate")).cloned().collect(),
        observed: documents.iter().filter(|d| !is(d, "ServiceSet") && !is(d, "ServiceTemplate")).cloned().collect(),
        expected: parse(EXPECTED_FILE, expected)?,
        expected_status: parse(EXPECTED_STATUS_FILE, expected_status)?,
        invariants,
    })
}

/// Reads the translate case in `dir`.
fn read_case(dir: &Path) -> Result<TranslateCase, String> {
    let read = |file: &str| -> Result<Option<String>, String> {
        let path = dir.join(file);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    };
    let input = read(INPUT_FILE)?.ok_or_else(|| format!("{}: no {INPUT_FILE}", dir.display()))?;
    let (expected, status, invariants) = (read(EXPECTED_FILE)?, read(EXPECTED_STATUS_FILE)?, read(INVARIANTS_FILE)?);
    let case =
        parse_case(&dir.display().to_string(), &input, expected.as_deref(), status.as_deref(), invariants.as_deref())?;
    Ok(TranslateCase { dir: Some(dir.to_path_buf()), ..case })
}

/// The cases under `dir`, each named by its path: `dir` itself as a case (it has `input.yaml`),
/// or the golden layout (`translate/<case>/`, `status/cases.yaml`), or case directories.
fn discover(dir: &Path) -> anyhow::Result<Vec<(String, Result<Fixture, String>)>> {
    if !dir.is_dir() {
        bail!("--fixtures {}: not a directory", dir.display());
    }
    let translate_case = |dir: &Path| (dir.display().to_string(), read_case(dir).map(Fixture::Translate));
    if dir.join(INPUT_FILE).is_file() {
        return Ok(vec![translate_case(dir)]);
    }
    let mut cases = Vec::new();
    for cases_dir in [dir.join("translate"), dir.to_path_buf()] {
        if !cases_dir.is_dir() {
            continue;
        }
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
            .with_context(|| format!("reading {}", cases_dir.display()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        dirs.retain(|d| d.join(INPUT_FILE).is_file());
        dirs.sort();
        cases.extend(dirs.iter().map(|d| translate_case(d)));
    }
    for file in [dir.join("status").join("cases.yaml"), dir.join("cases.yaml")] {
        if file.is_file() {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            match serde_norway::from_str::<Vec<StatusCase>>(&text) {
                Ok(rows) => cases.extend(
                    rows.into_iter().map(|row| (format!("{}#{}", file.display(), row.name), Ok(Fixture::Status(row)))),
                ),
                Err(e) => cases.push((file.display().to_string(), Err(format!("{}: {e}", file.display())))),
            }
        }
    }
    if cases.is_empty() {
        bail!(
            "--fixtures {}: no cases (expected {INPUT_FILE}, translate/<case>/{INPUT_FILE}, <case>/{INPUT_FILE} or status/cases.yaml)",
            dir.display()
        );
    }
    Ok(cases)
}

/// The plugin under test.
struct Suite {
    plugin: Arc<WasmPlugin>,
    serving: ServingPlugin,
    limits: Limits,
    /// Write `expected.yaml` instead of comparing.
    update: bool,
}

impl Suite {
    /// Checks of the plugin itself: contract version, metadata, `validate-config`.
    fn check_plugin(&self, report: &mut Report) {
        let metadata = self.plugin.metadata();
        let version = &metadata.contract_version;
        let export = export_of(version);
        report.push(
            "plugin",
            "contract version",
            if !CONTRACT_VERSIONS.contains(&version.as_str()) {
                Err(format!("metadata says contract {version}, this host supports {}", CONTRACT_VERSIONS.join(", ")))
            } else if !self.plugin.info().exports.contains(&export) {
                Err(format!("the component does not export {export}"))
            } else {
                Ok(format!("exports {export} and metadata says {version}: supported by this host"))
            },
        );
        report.push("plugin", "metadata", check_metadata(metadata));
        let validate = |config: &str| self.plugin.validate_config(config).map_err(|e| e.to_string());
        let unknown = format!("{{\"{UNKNOWN_FIELD}\": 1}}");
        report.push(
            "plugin",
            "validate-config",
            match validate(&unknown) {
                Err(e) => Err(e),
                Ok(Ok(())) => Err(format!("accepts {unknown}: unknown fields must be rejected")),
                Ok(Err(errors)) if errors.iter().any(|e| names_field(e, UNKNOWN_FIELD)) => {
                    Ok(format!("rejects {unknown}: {}", join(&errors)))
                }
                Ok(Err(errors)) => Err(format!("rejects {unknown}, but no error names the field: {}", join(&errors))),
            },
        );
        let host_keys = r#"{"priority": 200, "stopOnConflict": true}"#;
        for (config, why) in [
            ("{}", ""),
            ("null", " (a ServiceSet without spec.provider.config)"),
            (host_keys, " (keys the host reads for release conflicts; kcm passes them)"),
        ] {
            report.push(
                "plugin",
                "validate-config",
                match validate(config) {
                    Err(e) => Err(e),
                    Ok(Ok(())) => Ok(format!("accepts {config}{why}")),
                    Ok(Err(errors)) => Err(format!("rejects {config}{why}: {}", join(&errors))),
                },
            );
        }
    }

    fn check_fixture(&self, report: &mut Report, name: &str, fixture: Result<Fixture, String>) {
        match fixture {
            Err(e) => report.push(name, "fixture", Err(e)),
            Ok(Fixture::Translate(case)) => {
                let service_set = self.serving.input_of(&case.service_set);
                self.check_translate(report, name, &TranslateCase { service_set, ..case })
            }
            Ok(Fixture::Status(case)) => report.push(name, "map-status", self.check_status_case(&case)),
        }
    }

    /// Every check of one translate case.
    fn check_translate(&self, report: &mut Report, name: &str, case: &TranslateCase) {
        let plugin = self.plugin.as_ref();
        let input = match inputs::translate_input(&case.service_set, |t| case.template(t), SYSTEM_NAMESPACE) {
            Ok(input) => input,
            Err(e) => return report.push(name, "fixture", Err(format!("the ServiceSet spec does not parse: {e}"))),
        };
        let started = Instant::now();
        let first = plugin.translate(&input);
        let elapsed = started.elapsed();
        let (first, second) = match (first, plugin.translate(&input)) {
            (Ok(first), Ok(second)) => (first, second),
            (Err(e), _) | (_, Err(e)) => return report.push(name, "translate", Err(e.to_string())),
        };
        report.push(
            name,
            "translate",
            Ok(format!(
                "{}; {} of the {} KiB output limit, {} ms of {} ms",
                summary(&first),
                kib(answer_size(&first)),
                self.limits.output >> 10,
                elapsed.as_millis(),
                self.limits.timeout.as_millis()
            )),
        );
        report.push(name, "deterministic", deterministic(&first, &second));
        report.push(name, "config", self.config_agreement(case, &first));
        if let Ok(services) = &first {
            self.check_services(report, name, case, &input.templates, services);
        }
        let actual = report::translation(&first);
        if let (true, Some(dir)) = (self.update, &case.dir) {
            let path = dir.join(EXPECTED_FILE);
            let written = serde_norway::to_string(&actual)
                .map_err(|e| e.to_string())
                .and_then(|text| std::fs::write(&path, text).map_err(|e| e.to_string()));
            report.push(
                name,
                "expected output",
                written.map(|()| format!("written to {} (review it)", path.display())),
            );
        } else if let Some(expected) = &case.expected {
            report.push(name, "expected output", compare(expected, &actual, EXPECTED_FILE));
        }
        if let Some(invariants) = &case.invariants {
            report.push(name, "invariants", check_invariants(&invariants.translate, &first));
        }
    }

    /// `validate-config` and `translate` agree on the ServiceSet's config.
    fn config_agreement(
        &self,
        case: &TranslateCase,
        translated: &Result<Vec<ServiceTranslation>, TranslateError>,
    ) -> Result<String, String> {
        let config = case.service_set["spec"]["provider"]["config"].to_string();
        let validated = self.plugin.validate_config(&config).map_err(|e| e.to_string())?;
        match (validated, translated) {
            (Ok(()), Err(TranslateError::InvalidConfig(errors))) => {
                Err(format!("validate-config accepts the config ({config}) but translate rejects it: {}", join(errors)))
            }
            (Err(errors), Err(TranslateError::InvalidConfig(_))) => {
                Ok(format!("validate-config and translate both reject the config: {}", join(&errors)))
            }
            (Err(errors), _) => Err(format!(
                "validate-config rejects the config ({}) but translate does not fail with InvalidConfig",
                join(&errors)
            )),
            (Ok(()), _) => Ok(format!("validate-config accepts the config ({config}) and translate agrees")),
        }
    }

    /// The checks of a translation that answered per service.
    fn check_services(
        &self,
        report: &mut Report,
        name: &str,
        case: &TranslateCase,
        templates: &[ksm_plugin_sdk::contract::Template],
        services: &[ServiceTranslation],
    ) {
        let expected = plan::service_names(&case.service_set);
        let got: Vec<String> = services.iter().map(|s| s.service.clone()).collect();
        let claiming_errors: Vec<&str> = services
            .iter()
            .filter(|s| s.outcome.is_err() && !s.claims.is_empty())
            .map(|s| s.service.as_str())
            .collect();
        report.push(
            name,
            "services",
            if got != expected {
                Err(format!(
                    "answers for {got:?}, the ServiceSet's services are {expected:?} (exactly these, in spec order)"
                ))
            } else if !claiming_errors.is_empty() {
                Err(format!(
                    "services {claiming_errors:?} failed but claim something: claims are for translated services"
                ))
            } else {
                Ok(format!("answers for exactly {expected:?}, in spec order"))
            },
        );
        report.push(name, "kinds", self.declared_kinds(services));
        let translated = plan::translate(&self.serving, &case.service_set, |t| case.template(t), SYSTEM_NAMESPACE);
        let translated = match translated {
            Ok(translated) => {
                let refused: Vec<&str> = translated
                    .iter()
                    .filter_map(|t| match &t.outcome {
                        ServiceOutcome::Refused(message) => Some(message.as_str()),
                        _ => None,
                    })
                    .collect();
                let objects: usize = translated
                    .iter()
                    .map(|t| match &t.outcome {
                        ServiceOutcome::Objects(objects) => objects.len(),
                        _ => 0,
                    })
                    .sum();
                report.push(
                    name,
                    "policy",
                    if refused.is_empty() {
                        Ok(format!(
                            "the host accepts {} (declared namespaced kinds, namespace, names, no reserved fields, at most {DEFAULT_OBJECTS_PER_SERVICE} per service)",
                            count(objects, "object")
                        ))
                    } else {
                        Err(refused.join("; "))
                    },
                );
                translated
            }
            Err(e) => return report.push(name, "policy", Err(e.to_string())),
        };
        report.push(name, "names", check_names(&case.service_set, services));
        let missing: BTreeSet<&str> =
            templates.iter().filter(|t| t.object.is_none()).map(|t| t.name.as_str()).collect();
        if !missing.is_empty() {
            report.push(name, "missing template", missing_templates(&case.service_set, &missing, services));
        }
        report.push(name, "map-status", self.status_invariants(case, &translated));
        if let Some(expected) = &case.expected_status {
            report.push(name, "expected status", self.expected_status(case, &translated, expected));
        }
    }

    /// Only kinds the metadata declares (as `creates`).
    fn declared_kinds(&self, services: &[ServiceTranslation]) -> Result<String, String> {
        let creates = &self.plugin.metadata().creates;
        let mut undeclared = BTreeSet::new();
        let mut used = BTreeSet::new();
        for (service, object) in objects_of(services) {
            let Ok(object) = serde_json::from_str::<Value>(object) else { continue };
            let (api_version, kind) = (str_at(&object, &["apiVersion"]), str_at(&object, &["kind"]));
            if creates.iter().any(|k| k.api_version() == api_version && k.kind == kind) {
                used.insert(format!("{api_version} {kind}"));
            } else {
                undeclared.insert(format!("{api_version} {kind} (service {service:?})"));
            }
        }
        if !undeclared.is_empty() {
            return Err(format!("objects of kinds the metadata does not declare in `creates`: {undeclared:?}"));
        }
        Ok(if used.is_empty() { "no objects".into() } else { format!("only declared kinds: {}", list(&used)) })
    }

    /// `map-status` of every service with objects: nothing observed gives a state other than
    /// Deployed; the objects as just created (no status) give an answer; each twice identically.
    fn status_invariants(
        &self,
        case: &TranslateCase,
        translated: &[plan::TranslatedService],
    ) -> Result<String, String> {
        let mut problems = Vec::new();
        let mut states = Vec::new();
        for t in translated {
            let ServiceOutcome::Objects(objects) = &t.outcome else { continue };
            if objects.is_empty() {
                continue;
            }
            let template = case.template_of(&t.service);
            let nothing = self.map_status_twice(&status_input(case, &t.service, template.as_ref(), objects, |_| None));
            let created =
                self.map_status_twice(&status_input(case, &t.service, template.as_ref(), objects, |o| Some(o.clone())));
            let (none_state, created_state) = (state_of(&nothing), state_of(&created));
            match nothing {
                Ok(status) if status.state == ServiceState::Deployed => problems.push(format!(
                    "service {:?}: Deployed although none of its {} objects exists",
                    t.service,
                    objects.len()
                )),
                Ok(_) => {}
                Err(e) => problems.push(format!("service {:?} with nothing observed: {e}", t.service)),
            }
            if let Err(e) = created {
                problems.push(format!("service {:?} with its objects just created (no status): {e}", t.service));
            }
            states.push(format!("{} {none_state}/{created_state}", t.service));
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        if states.is_empty() {
            return Ok("no service has objects".into());
        }
        Ok(format!(
            "nothing observed / objects just created (no status), each mapped twice identically: {}",
            states.join(", ")
        ))
    }

    /// Calls `map-status` twice: the answer, when both calls give the same one.
    fn map_status_twice(&self, input: &StatusInput) -> Result<ServiceStatus, String> {
        let call = || -> Result<ServiceStatus, String> {
            match self.plugin.map_status(input) {
                Err(e) => Err(e.to_string()),
                Ok(Err(StatusError::InvalidInput(message))) => Err(format!("StatusError InvalidInput: {message}")),
                Ok(Ok(status)) => Ok(status),
            }
        };
        let first = call()?;
        let second = call()?;
        if first != second {
            return Err(format!(
                "two calls with the same input answer differently: {} then {}",
                json!(report::status(&input.service, &first)),
                json!(report::status(&input.service, &second))
            ));
        }
        Ok(first)
    }

    /// Service states from the observed objects in the case's input, against
    /// `expected-status.yaml` (`services:` as `plugin status` prints them).
    fn expected_status(
        &self,
        case: &TranslateCase,
        translated: &[plan::TranslatedService],
        expected: &Value,
    ) -> Result<String, String> {
        let mut services = Vec::new();
        let service_set = case.service_set.to_string();
        for t in translated {
            let template = case.template_of(&t.service);
            let status =
                plan::service_status(self.plugin.as_ref(), &service_set, template.as_ref(), t, |a, k, ns, n| {
                    find_observed(&case.observed, a, k, ns, n)
                })
                .map_err(|e| e.to_string())?;
            services.push(report::status(&t.service, &status));
        }
        compare(expected, &json!({ "services": services }), EXPECTED_STATUS_FILE)
    }

    /// One row of a status table.
    fn check_status_case(&self, case: &StatusCase) -> Result<String, String> {
        let status = self.map_status_twice(&case.input())?;
        case.compare(&status)?;
        Ok(format!("{} as expected (mapped twice identically)", state_of(&Ok(status))))
    }
}

/// Plugin metadata a host can serve.
fn check_metadata(metadata: &ksm_plugin_sdk::contract::PluginMetadata) -> Result<String, String> {
    let mut problems = Vec::new();
    if !is_dns1123_label(&metadata.name) {
        problems.push(format!("name {:?} is not a DNS-1123 label", metadata.name));
    }
    if !is_semver(&metadata.version) {
        problems.push(format!("version {:?} is not semver (e.g. 1.2.3)", metadata.version));
    }
    if metadata.creates.is_empty() {
        problems.push("`creates` is empty: the plugin may return no object at all".into());
    }
    for (list, kinds) in [("creates", &metadata.creates), ("reads", &metadata.reads)] {
        for k in kinds {
            let what = format!("{list} {} {}", k.api_version(), k.kind);
            if k.version.is_empty() || k.kind.is_empty() {
                problems.push(format!("{what}: version and kind must be set"));
            }
            if !is_dns1123_label(&k.plural) {
                problems.push(format!("{what}: plural {:?} is not a lower-case resource name", k.plural));
            }
            if list == "creates" && !k.namespaced {
                problems.push(format!("{what}: cluster-scoped; the host refuses every object of such a kind"));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let kinds: Vec<String> = metadata.creates.iter().map(|k| format!("{} {}", k.api_version(), k.kind)).collect();
    Ok(format!("{} {} creates {}", metadata.name, metadata.version, kinds.join(", ")))
}

/// `MAJOR.MINOR.PATCH`, optionally with `-pre` and `+build`.
fn is_semver(version: &str) -> bool {
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a config error names `field` (at its path or in its message).
fn names_field(error: &ConfigError, field: &str) -> bool {
    error.path.split('.').any(|p| p == field) || error.message.contains(field)
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

fn list(items: &BTreeSet<String>) -> String {
    items.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// `1 object`, `2 objects`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// Every `(service, object text)` of a translation.
fn objects_of(services: &[ServiceTranslation]) -> impl Iterator<Item = (&str, &String)> {
    services
        .iter()
        .filter_map(|s| s.outcome.as_ref().ok().map(|o| (s.service.as_str(), o)))
        .flat_map(|(service, objects)| objects.iter().map(move |o| (service, o)))
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter().fold(value, |v, k| &v[*k]).as_str().unwrap_or_default()
}

/// What a translation answered, in a few words.
fn summary(result: &Result<Vec<ServiceTranslation>, TranslateError>) -> String {
    match result {
        Err(TranslateError::InvalidConfig(errors)) => format!("InvalidConfig ({})", join(errors)),
        Err(TranslateError::InvalidInput(message)) => format!("InvalidInput ({message})"),
        Ok(services) => {
            let each: Vec<String> = services
                .iter()
                .map(|s| match &s.outcome {
                    Ok(objects) => format!("{} {}", s.service, count(objects.len(), "object")),
                    Err(e) => {
                        format!("{} {}", s.service, report::service_error(e)["kind"].as_str().unwrap_or_default())
                    }
                })
                .collect();
            format!("{}: {}", count(services.len(), "service"), each.join(", "))
        }
    }
}

/// About the number of bytes of text in a translation (what the output limit counts).
fn answer_size(result: &Result<Vec<ServiceTranslation>, TranslateError>) -> usize {
    match result {
        Ok(services) => services
            .iter()
            .map(|s| {
                s.service.len()
                    + match &s.outcome {
                        Ok(objects) => objects.iter().map(String::len).sum(),
                        Err(e) => e.message().len(),
                    }
            })
            .sum(),
        Err(TranslateError::InvalidConfig(errors)) => errors.iter().map(|e| e.path.len() + e.message.len()).sum(),
        Err(TranslateError::InvalidInput(message)) => message.len(),
    }
}

/// Two translations of the same input must be byte-identical.
fn deterministic(
    first: &Result<Vec<ServiceTranslation>, TranslateError>,
    second: &Result<Vec<ServiceTranslation>, TranslateError>,
) -> Result<String, String> {
    if first == second {
        return Ok("translated twice: byte-identical".into());
    }
    let differences = differences_summary(&report::translation(first), &report::translation(second));
    if differences.is_empty() {
        return Err("translated twice: the same objects, but their JSON text differs (e.g. key order)".into());
    }
    Err(format!("translated twice, the second answer differs: {differences}"))
}

/// The names of the objects: DNS-1123 subdomains of at most 63 characters (CD tools put object
/// names into label values, e.g. Flux's `helm.toolkit.fluxcd.io/name`, Argo CD's instance
/// label), label keys and values as Kubernetes requires, and no object twice in a ServiceSet.
fn check_names(service_set: &Value, services: &[ServiceTranslation]) -> Result<String, String> {
    let namespace = str_at(service_set, &["metadata", "namespace"]);
    let mut problems = Vec::new();
    let mut seen: BTreeMap<(String, String, String, String), &str> = BTreeMap::new();
    let mut longest = 0;
    for (service, text) in objects_of(services) {
        let Ok(object) = serde_json::from_str::<Value>(text) else { continue };
        let name = str_at(&object, &["metadata", "name"]);
        let kind = str_at(&object, &["kind"]);
        let what = format!("{kind} {name:?} (service {service:?})");
        longest = longest.max(name.len());
        if !is_dns1123_subdomain(name) {
            problems.push(format!("{what}: metadata.name is not a DNS-1123 subdomain (lower-case, at most 253)"));
        } else if name.len() > MAX_LABEL_LEN {
            problems.push(format!(
                "{what}: metadata.name has {} characters, over {MAX_LABEL_LEN}: CD tools use object names as label values (shorten with a stable hash, e.g. ksm_plugin_sdk::names::service_object_name)",
                name.len()
            ));
        }
        if let Some(labels) = object["metadata"]["labels"].as_object() {
            for (key, value) in labels {
                if !is_label_key(key) {
                    problems.push(format!("{what}: label key {key:?} is not a valid qualified name"));
                }
                if !value.as_str().is_some_and(is_label_value) {
                    problems.push(format!("{what}: label {key:?} has value {value}, not a valid label value"));
                }
            }
        }
        let group = str_at(&object, &["apiVersion"]).rsplit_once('/').map_or("", |(g, _)| g).to_string();
        let object_namespace = match str_at(&object, &["metadata", "namespace"]) {
            "" => namespace,
            ns => ns,
        };
        let key = (group, kind.to_string(), object_namespace.to_string(), name.to_string());
        if let Some(other) = seen.insert(key, service) {
            problems
                .push(format!("{what}: the same object as one of service {other:?}; two services would fight over it"));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    if seen.is_empty() {
        return Ok("no objects".into());
    }
    Ok(format!("{} (all distinct), valid names of at most {longest} characters", count(seen.len(), "object")))
}

/// Services whose template is missing get `TemplateNotFound`.
fn missing_templates(
    service_set: &Value,
    missing: &BTreeSet<&str>,
    services: &[ServiceTranslation],
) -> Result<String, String> {
    let specs = service_set["spec"]["services"].as_array().cloned().unwrap_or_default();
    let mut problems = Vec::new();
    let mut good = Vec::new();
    for spec in &specs {
        let (service, template) = (str_at(spec, &["name"]), str_at(spec, &["template"]));
        if !missing.contains(template) {
            continue;
        }
        match services.iter().find(|s| s.service == service).map(|s| &s.outcome) {
            Some(Err(ServiceError::TemplateNotFound(_))) => good.push(service.to_string()),
            // Nothing to deploy (e.g. an uninstalled service) needs no template.
            Some(Ok(objects)) if objects.is_empty() => good.push(format!("{service} (no objects)")),
            Some(Err(other)) => problems.push(format!(
                "service {service:?} (template {template:?} does not exist) gets {} instead of TemplateNotFound",
                report::service_error(other)["kind"].as_str().unwrap_or_default()
            )),
            Some(Ok(_)) => problems.push(format!(
                "service {service:?} gets objects although its template {template:?} does not exist (expected TemplateNotFound)"
            )),
            None => problems.push(format!("service {service:?}: no answer")),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(format!("services whose template does not exist get TemplateNotFound or nothing: {}", good.join(", ")))
}

/// The `map-status` input of `service` with `objects` (as the host checked them) observed
/// through `observe`.
fn status_input(
    case: &TranslateCase,
    service: &str,
    template: Option<&Value>,
    objects: &[Value],
    observe: impl Fn(&Value) -> Option<Value>,
) -> StatusInput {
    StatusInput {
        service_set: case.service_set.to_string(),
        service: service.to_string(),
        template: template.map(Value::to_string),
        observed: objects
            .iter()
            .map(|o| ObservedObject {
                api_version: str_at(o, &["apiVersion"]).into(),
                kind: str_at(o, &["kind"]).into(),
                name: str_at(o, &["metadata", "name"]).into(),
                namespace: str_at(o, &["metadata", "namespace"]).into(),
                object: observe(o).map(|o| o.to_string()),
            })
            .collect(),
    }
}

fn find_observed(observed: &[Value], api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
    observed
        .iter()
        .find(|o| {
            o["apiVersion"] == api_version
                && o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"] == namespace
        })
        .cloned()
}

fn state_of(status: &Result<ServiceStatus, String>) -> &'static str {
    status.as_ref().map_or("error", |s| s.state.as_str())
}

/// The case's plugin-independent expectations.
fn check_invariants(
    invariants: &TranslateInvariants,
    result: &Result<Vec<ServiceTranslation>, TranslateError>,
) -> Result<String, String> {
    if let Some(field) = &invariants.invalid_config {
        return match result {
            Err(TranslateError::InvalidConfig(errors)) if errors.iter().any(|e| names_field(e, field)) => {
                Ok(format!("the ServiceSet fails with InvalidConfig naming {field}: {}", join(errors)))
            }
            Err(TranslateError::InvalidConfig(errors)) => {
                Err(format!("InvalidConfig, but no error names {field}: {}", join(errors)))
            }
            other => Err(format!("expected InvalidConfig naming {field}, got {}", summary(other))),
        };
    }
    let Some(expected) = &invariants.services else { return Ok("nothing to check".into()) };
    let services = match result {
        Ok(services) => services,
        Err(e) => return Err(format!("the whole ServiceSet failed ({e}); expected an answer per service")),
    };
    let mut problems = Vec::new();
    for want in expected {
        let outcome = match services.iter().find(|s| s.service == want.service).map(|s| &s.outcome) {
            None => "no answer".to_string(),
            Some(Ok(objects)) if objects.is_empty() => "no objects".to_string(),
            Some(Ok(_)) => "objects".to_string(),
            Some(Err(e)) => report::service_error(e)["kind"].as_str().unwrap_or_default().to_string(),
        };
        if outcome != want.outcome {
            let why = if want.outcome == "objects" { " (one failing service must not fail the others)" } else { "" };
            problems.push(format!("service {:?}: expected {}, got {outcome}{why}", want.service, want.outcome));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let each: Vec<String> = expected.iter().map(|s| format!("{} {}", s.service, s.outcome)).collect();
    Ok(each.join(", "))
}

/// Compares `actual` with the content of `file`.
fn compare(expected: &Value, actual: &Value, file: &str) -> Result<String, String> {
    if expected == actual {
        return Ok(format!("matches {file}"));
    }
    Err(format!("differs from {file}: {}", differences_summary(expected, actual)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_fixtures_parse() {
        for (name, input, invariants) in BUILTIN {
            let case = parse_case(name, input, None, None, Some(invariants)).unwrap();
            assert!(case.invariants.is_some(), "{name}");
            assert!(!case.templates.is_empty(), "{name}");
        }
    }

    #[test]
    fn label_rules() {
        assert!(is_label_key("app.kubernetes.io/name") && is_label_key("app"));
        assert!(!is_label_key("a/b/c") && !is_label_key("-x"));
        assert!(is_label_value("") && is_label_value("v1.2_3"));
        assert!(!is_label_value(&"a".repeat(64)) && !is_label_value("a b"));
        assert!(is_semver("0.1.0") && is_semver("1.2.3-rc.1+build") && !is_semver("1.2"));
    }
}
