//! `ksm-adapter plugin test`: its arguments, and the suite run over every case.

use super::checks::{
    answer_size, check_invariants, check_metadata, check_names, compare, count, deterministic, find_observed, join,
    kib, list, missing_templates, names_field, objects_of, state_of, status_input, str_at, summary,
};
use super::fixtures::{
    BUILTIN, EXPECTED_FILE, EXPECTED_STATUS_FILE, Fixture, SYSTEM_NAMESPACE, TranslateCase, UNKNOWN_FIELD, discover,
    parse_case,
};
use super::report::Report;
use crate::cli::plugin_args::{ConfigArgs, LimitArgs, load};
use clap::Args;
use ksm_adapter::plan::{self, ServiceOutcome};
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::Plugin;
use ksm_adapter::policy::DEFAULT_OBJECTS_PER_SERVICE;
use ksm_adapter::runtime::{CONTRACT_VERSIONS, LoadError, Runtime, WasmPlugin, export_of};
use ksm_adapter::serving::ServingPlugin;
use ksm_adapter::tenancy::Tenancy;
use ksm_plugin_sdk::contract::{
    ServiceState, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
};
use ksm_plugin_sdk::status_table::StatusCase;
use ksm_plugin_sdk::{inputs, report};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct TestArgs {
    /// `builtin:flux` or the path of a `.wasm` component.
    pub(super) plugin: String,
    /// A directory of the plugin's own cases, compared exactly, in the golden format of
    /// plugins/flux/testdata: `translate/<case>/{input.yaml,expected.yaml}` and
    /// `status/cases.yaml`; also a single case directory (with `input.yaml`) or a directory of
    /// case directories. Repeatable.
    #[arg(long = "fixtures", value_name = "DIR")]
    pub(super) fixtures: Vec<PathBuf>,
    /// Writes the `expected.yaml` of every `--fixtures` translate case from the plugin's answer
    /// (then review the changes) instead of comparing.
    #[arg(long, requires = "fixtures")]
    pub(super) update: bool,
    #[command(flatten)]
    pub(super) config: ConfigArgs,
    /// A namespace, besides the ServiceSet's own, the plugin's objects may be placed in, as an
    /// AdapterPlugin's `spec.allowedNamespaces` lists (e.g. `mgmt` for the Sveltos plugin's
    /// self-management Profiles, beside kcm's `SveltosCluster mgmt/mgmt`). Repeatable.
    #[arg(long = "allowed-namespace", value_name = "NAMESPACE")]
    pub(super) allowed_namespaces: Vec<String>,
    #[command(flatten)]
    pub(super) limits: LimitArgs,
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
            let mut serving = args.config.serving(plugin.clone());
            serving.policy.allowed_namespaces = args.allowed_namespaces.clone();
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

/// The plugin under test.
pub(super) struct Suite {
    pub(super) plugin: Arc<WasmPlugin>,
    pub(super) serving: ServingPlugin,
    pub(super) limits: Limits,
    /// Write `expected.yaml` instead of comparing.
    pub(super) update: bool,
}

impl Suite {
    /// Checks of the plugin itself: contract version, metadata, `validate-config`.
    pub(super) fn check_plugin(&self, report: &mut Report) {
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

    pub(super) fn check_fixture(&self, report: &mut Report, name: &str, fixture: Result<Fixture, String>) {
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
    pub(super) fn check_translate(&self, report: &mut Report, name: &str, case: &TranslateCase) {
        let plugin = self.plugin.as_ref();
        let input = match inputs::translate_input(
            &case.service_set,
            |t| case.template(t),
            |s| case.source(s),
            SYSTEM_NAMESPACE,
        ) {
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
    pub(super) fn config_agreement(
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
    pub(super) fn check_services(
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
        let translated = plan::translate(
            &self.serving,
            None,
            &case.service_set,
            |t| case.template(t),
            |s| case.source(s),
            Tenancy { system_namespace: SYSTEM_NAMESPACE, ..Tenancy::default() },
        );
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
    pub(super) fn declared_kinds(&self, services: &[ServiceTranslation]) -> Result<String, String> {
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
    pub(super) fn status_invariants(
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
    pub(super) fn map_status_twice(&self, input: &StatusInput) -> Result<ServiceStatus, String> {
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
    pub(super) fn expected_status(
        &self,
        case: &TranslateCase,
        translated: &[plan::TranslatedService],
        expected: &Value,
    ) -> Result<String, String> {
        let mut services = Vec::new();
        let service_set = case.service_set.to_string();
        for t in translated {
            let template = case.template_of(&t.service);
            let observe = |a: &str, k: &str, ns: &str, n: &str| find_observed(&case.observed, a, k, ns, n);
            let reads = &self.plugin.metadata().reads;
            let related = |owner: &Value| plan::reads::owned_by(reads, owner, &case.observed);
            let status =
                plan::service_status(self.plugin.as_ref(), &service_set, template.as_ref(), t, observe, related)
                    .map_err(|e| e.to_string())?;
            services.push(report::status(&t.service, &status));
        }
        compare(expected, &json!({ "services": services }), EXPECTED_STATUS_FILE)
    }

    /// One row of a status table.
    pub(super) fn check_status_case(&self, case: &StatusCase) -> Result<String, String> {
        let status = self.map_status_twice(&case.input())?;
        case.compare(&status)?;
        Ok(format!("{} as expected (mapped twice identically)", state_of(&Ok(status))))
    }
}
