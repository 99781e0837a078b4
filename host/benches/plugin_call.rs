//! Flux plugin: WASM build, with a fresh instance per call and with one instance per ServiceSet
//! (a session, as the controller runs it), against the same crate compiled natively, on the
//! 3-service ServiceSet `prod-eu-1` of `examples/`.
//!
//! One "ServiceSet" = `translate` + `map-status` for each of its 3 services. Prints a table of
//! medians over batches and the WASM/native ratio, all measured in this run. A second table
//! times the Flux builds' calls alone, on the contract inputs the host built for that
//! ServiceSet (recorded once): without the host's own work around each call, which both builds
//! share, it shows what running the plugin in WASM adds.
//!
//! `--plugin NAME=PATH` (repeatable) adds rows for other plugins' components on the same
//! ServiceSet, e.g. the Argo CD and Fleet plugins in JavaScript and the Sveltos plugin in Python
//! (their `build.sh` write `plugins/*/dist/*.wasm`), configured with the chart repository the
//! templates name (`helmRepositories`, a key each of them reads). They observe none of their objects (the examples hold Flux's), so their `map-status`
//! maps "nothing yet"; Flux's maps live HelmReleases.
//!
//! `--flux NAME=PATH` (repeatable) adds rows for another build of the Flux plugin, fed as the
//! built-in one: two builds of the same source measured in one run, interleaved.
//!
//! `cargo bench -p ksm-adapter --bench plugin_call [-- --iterations N] [--plugin NAME=PATH]... [--flux NAME=PATH]...`

use ksm_adapter::adapter_plugin::AdapterPluginSpec;
use ksm_adapter::builtin;
use ksm_adapter::manifests::Manifests;
use ksm_adapter::plan::{self, TranslatedService};
use ksm_adapter::plugin::Limits;
use ksm_adapter::plugin::{CallError, NativePlugin, Plugin};
use ksm_adapter::runtime::Runtime;
use ksm_adapter::serving::ServingPlugin;
use ksm_adapter::tenancy::Tenancy;
use ksm_flux_plugin::FluxPlugin;
use ksm_plugin_sdk::contract::{
    ConfigError, PluginMetadata, ServiceStatus, ServiceTranslation, StatusError, StatusInput, TranslateError,
    TranslateInput,
};
use serde_json::Value;
mod common;

use common::{BATCHES, iterations, medians, micros};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The inputs of one ServiceSet: the object, its templates and the observed Flux objects.
struct Fixture {
    manifests: Manifests,
    service_set: Value,
}

impl Fixture {
    fn load() -> Self {
        let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let manifests = Manifests::read(&[examples]).expect("reading examples/");
        let service_set = manifests.k0rdent("ServiceSet").find(|d| d.name() == "prod-eu-1").unwrap().object.clone();
        Self { manifests, service_set }
    }

    fn translate(&self, plugin: &ServingPlugin) -> Vec<TranslatedService> {
        plan::translate(
            plugin,
            None,
            &self.service_set,
            |name| self.manifests.template("kcm-system", name).map(|d| d.object.clone()),
            |source| self.manifests.source(source),
            Tenancy::default(),
        )
        .expect("translation")
    }

    fn map_status(&self, plugin: &ServingPlugin, services: &[TranslatedService]) {
        let plugin = plugin.plugin.as_ref();
        let json = self.service_set.to_string();
        for (service, spec) in services.iter().zip(self.service_set["spec"]["services"].as_array().unwrap()) {
            let template = self.manifests.template("kcm-system", spec["template"].as_str().unwrap());
            let observe =
                |a: &str, k: &str, ns: &str, n: &str| self.manifests.find(a, k, ns, n).map(|d| d.object.clone());
            let status = plan::service_status(plugin, &json, template.map(|d| &d.object), service, observe, |_| vec![]);
            black_box(status.expect("map-status"));
        }
    }
}

fn main() {
    let iterations = iterations(200);

    let fixture = Fixture::load();
    let runtime = Runtime::new().expect("runtime");
    let load_started = Instant::now();
    let wasm = runtime.load(builtin::FLUX, Limits::default()).expect("loading the Flux plugin");
    let cold_load = load_started.elapsed();
    let wasm = ServingPlugin::plain(Arc::new(wasm));
    let native = ServingPlugin::plain(Arc::new(NativePlugin::<FluxPlugin>::new()));
    assert_eq!(fixture.translate(&wasm), fixture.translate(&native), "both builds must agree before they are compared");

    let fluxes: Vec<_> = components(&runtime, "--flux").map(|(name, p)| (name, ServingPlugin::plain(p))).collect();
    let spec: AdapterPluginSpec = serde_json::from_value(serde_json::json!({
        "providers": [], "source": {"builtin": "flux"},
        "config": {"helmRepositories": {"k0rdent-catalog": "https://charts.example.com/k0rdent"}},
    }))
    .expect("a valid spec");
    let others: Vec<_> = components(&runtime, "--plugin")
        .map(|(name, p)| {
            let serving = ServingPlugin::configured(&name, p, &spec);
            (name, serving)
        })
        .collect();
    // The other plugins get the ServiceSet without its provider config, which is Flux's.
    let mut plain = Fixture::load();
    plain.service_set["spec"]["provider"]["config"] = Value::Null;
    let (fixture, plain) = (&fixture, &plain);
    let mut builds = vec![
        ("native".to_string(), &native, false, fixture),
        ("wasm, fresh instance per call".to_string(), &wasm, false, fixture),
        ("wasm, one instance per ServiceSet".to_string(), &wasm, true, fixture),
    ];
    for (plugins, fixture) in [(&fluxes, fixture), (&others, plain)] {
        for (name, plugin) in plugins {
            builds.push((format!("{name} (wasm), fresh instance per call"), plugin, false, fixture));
            builds.push((format!("{name} (wasm), one instance per ServiceSet"), plugin, true, fixture));
        }
    }
    // What the host hands the plugin for this ServiceSet, for timing the calls alone.
    let (translate_input, status_inputs) = Recorder::inputs(&native, fixture);
    let (translate_input, status_inputs) = (&translate_input, &status_inputs);
    // A session per ServiceSet, as `plan::decide` opens; without one, every call is fresh.
    let session = |plugin: &ServingPlugin, per_service_set: bool| {
        if per_service_set { plugin.session() } else { plugin.clone() }
    };
    let mut translates: Vec<Box<dyn FnMut()>> = builds
        .iter()
        .map(|&(_, plugin, per_service_set, fixture)| -> Box<dyn FnMut()> {
            Box::new(move || drop(black_box(fixture.translate(&session(plugin, per_service_set)))))
        })
        .collect();
    let mut totals: Vec<Box<dyn FnMut()>> = builds
        .iter()
        .map(|&(_, plugin, per_service_set, fixture)| -> Box<dyn FnMut()> {
            Box::new(move || {
                let session = session(plugin, per_service_set);
                let translated = fixture.translate(&session);
                fixture.map_status(&session, &translated);
            })
        })
        .collect();
    let call_builds: Vec<_> = [("native".to_string(), &native), ("wasm".to_string(), &wasm)]
        .into_iter()
        .chain(fluxes.iter().map(|(name, plugin)| (format!("{name} (wasm)"), plugin)))
        .collect();
    let mut calls: Vec<Box<dyn FnMut()>> = call_builds
        .iter()
        .map(|&(_, plugin)| -> Box<dyn FnMut()> {
            Box::new(move || {
                let session = plugin.plugin.clone().session();
                black_box(session.translate(translate_input).expect("translate").expect("translated"));
                for input in status_inputs {
                    black_box(session.map_status(input).expect("map-status").expect("mapped"));
                }
            })
        })
        .collect();
    let mut all: Vec<&mut dyn FnMut()> = translates
        .iter_mut()
        .chain(totals.iter_mut())
        .chain(calls.iter_mut())
        .map(|f| &mut **f as &mut dyn FnMut())
        .collect();
    let times = medians(iterations, &mut all);
    let (translate, rest) = times.split_at(builds.len());
    let (total, calls) = rest.split_at(builds.len());
    let rows: Vec<_> = builds
        .iter()
        .zip(translate.iter().zip(total))
        .map(|((name, ..), (&translate, &total))| (name, translate, total.saturating_sub(translate), total))
        .collect();

    let base = rows[0].3.as_secs_f64();
    println!(
        "Per ServiceSet (3 services): translate + 3x map-status, median of {BATCHES} interleaved batches x {iterations}; the first three rows are the Flux plugin"
    );
    println!("| build | translate | 3x map-status (per ServiceSet − translate) | per ServiceSet | ratio to native |");
    println!("|---|---|---|---|---|");
    for (name, translate, map_status, total) in &rows {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.1} µs | {:.2}x |",
            micros(*translate),
            micros(*map_status),
            micros(*total),
            total.as_secs_f64() / base
        );
    }
    println!(
        "Flux plugin calls alone, on the inputs the host built for that ServiceSet: translate + 3x map-status in one session"
    );
    println!("| build | per ServiceSet | ratio to native | over native |");
    println!("|---|---|---|---|");
    for ((name, _), time) in call_builds.iter().zip(calls) {
        println!(
            "| {name} | {:.1} µs | {:.2}x | {:.1} µs |",
            micros(*time),
            time.as_secs_f64() / calls[0].as_secs_f64(),
            micros(*time) - micros(calls[0])
        );
    }
    println!(
        "Flux component: {} KiB; first load (compile + metadata call): {:.1} ms",
        builtin::FLUX.len() / 1024,
        cold_load.as_secs_f64() * 1e3
    );
}

/// The components of `flag NAME=PATH` (repeated), under limits roomy enough for an
/// interpreter's first call. `--plugin` ones are configured with the chart repository the
/// examples' templates name; `--flux` ones take the built-in plugin's input.
fn components(runtime: &Runtime, flag: &str) -> impl Iterator<Item = (String, Arc<dyn Plugin>)> {
    let limits = Limits { timeout: std::time::Duration::from_secs(10), ..Limits::default() };
    let args: Vec<String> = std::env::args().collect();
    let pairs: Vec<String> = args.windows(2).filter(|pair| pair[0] == flag).map(|pair| pair[1].clone()).collect();
    pairs.into_iter().map(move |pair| {
        let (name, path) = pair.split_once('=').unwrap_or_else(|| panic!("{flag} takes NAME=PATH"));
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let started = Instant::now();
        let wasm = runtime.load(&bytes, limits).unwrap_or_else(|e| panic!("loading {path}: {e}"));
        eprintln!("{name}: {} KiB; first load {:.0} ms", bytes.len() / 1024, started.elapsed().as_secs_f64() * 1e3);
        (name.to_string(), Arc::new(wasm) as Arc<dyn Plugin>)
    })
}

/// A plugin that keeps the contract inputs the host hands it and answers through another.
struct Recorder {
    plugin: Arc<dyn Plugin>,
    translates: Mutex<Vec<TranslateInput>>,
    statuses: Mutex<Vec<StatusInput>>,
}

impl Recorder {
    /// The inputs of `fixture`'s one `translate` and its `map-status` calls, as the host builds
    /// them, answered by `serving`.
    fn inputs(serving: &ServingPlugin, fixture: &Fixture) -> (TranslateInput, Vec<StatusInput>) {
        let recorder = Arc::new(Recorder {
            plugin: serving.plugin.clone(),
            translates: Mutex::default(),
            statuses: Mutex::default(),
        });
        let recording = ServingPlugin::plain(recorder.clone());
        fixture.map_status(&recording, &fixture.translate(&recording));
        let mut translates = recorder.translates.lock().unwrap();
        assert_eq!(translates.len(), 1, "one translation per ServiceSet");
        (translates.remove(0), std::mem::take(&mut *recorder.statuses.lock().unwrap()))
    }
}

impl Plugin for Recorder {
    fn metadata(&self) -> &PluginMetadata {
        self.plugin.metadata()
    }

    fn validate_config(&self, config: &str) -> Result<Result<(), Vec<ConfigError>>, CallError> {
        self.plugin.validate_config(config)
    }

    fn translate(&self, input: &TranslateInput) -> Result<Result<Vec<ServiceTranslation>, TranslateError>, CallError> {
        self.translates.lock().unwrap().push(input.clone());
        self.plugin.translate(input)
    }

    fn map_status(&self, input: &StatusInput) -> Result<Result<ServiceStatus, StatusError>, CallError> {
        self.statuses.lock().unwrap().push(input.clone());
        self.plugin.map_status(input)
    }

    fn session(self: Arc<Self>) -> Arc<dyn Plugin> {
        self
    }
}
