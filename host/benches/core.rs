//! The host's pure core, each against a baseline measured in the same run: a CEL readiness rule
//! evaluated through the rule cache (compiled once) against compiling it every time; planning one
//! ServiceSet (`plan::decide`, native Flux plugin) when nothing changed against when every
//! child must be applied; the status decision (equality and the Events diff) for an unchanged
//! status against a changed one.
//!
//! `cargo bench -p ksm-adapter --bench core [-- --iterations N]`

mod common;

use common::{BATCHES, iterations, medians, micros};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ksm_adapter::k0rdent::{ServiceSet, State, StateManagementProvider};
use ksm_adapter::manifests::Manifests;
use ksm_adapter::plan::claims::Arbitration;
use ksm_adapter::plan::decide::{Inputs, decide};
use ksm_adapter::plan::events::service_set_events;
use ksm_adapter::plugin::NativePlugin;
use ksm_adapter::rules::RuleCache;
use ksm_adapter::serving::ServingPlugin;
use ksm_adapter::tenancy::Tenancy;
use ksm_flux_plugin::FluxPlugin;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const RULE: &str = r#"self.status.conditions.exists(c, c.type == "Available" && c.status == "True")"#;

fn main() {
    let iterations = iterations(500);
    let mut rows: Vec<(&str, &str, Duration, &str, Duration)> = Vec::new();

    let deployment = json!({"status": {"conditions": [
        {"type": "Progressing", "status": "True"}, {"type": "Available", "status": "True"}]}});
    let cached = RuleCache::new();
    let [fresh, reused] = pair(
        iterations,
        || drop(black_box(RuleCache::new().evaluate(RULE, &deployment))),
        || drop(black_box(cached.evaluate(RULE, &deployment))),
    );
    rows.push(("CEL readiness rule", "compiled per call", fresh, "cached program", reused));

    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let manifests = Manifests::read(&[examples]).expect("reading examples/");
    let doc = manifests.k0rdent("ServiceSet").find(|d| d.name() == "prod-eu-1").expect("prod-eu-1");
    let service_set: ServiceSet = serde_json::from_value(doc.object.clone()).expect("a ServiceSet");
    let smp_doc = manifests.k0rdent("StateManagementProvider").next().expect("an SMP");
    let smp: StateManagementProvider = serde_json::from_value(smp_doc.object.clone()).expect("an SMP");
    let serving = ServingPlugin::plain(Arc::new(NativePlugin::<FluxPlugin>::new()));
    let template = |name: &str| manifests.template("kcm-system", name).map(|d| d.object.clone());
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let plan = |children: &[Value]| {
        let observed = Inputs {
            smp: Some(&smp),
            smp_diagnosis: None,
            template: &template,
            source: &|_| None,
            children,
            foreign: &BTreeMap::new(),
            arbitrate: &|_| Arbitration::default(),
            related: &|_| vec![],
            translations: None,
            regional: false,
            defer_status: false,
        };
        decide(&serving, &service_set, &observed, Tenancy::default(), &now).expect("a plan")
    };
    let first = plan(&[]);
    let applied: Vec<Value> = first.apply.clone();
    assert!(plan(&applied).apply.is_empty(), "with its children in place nothing is applied again");
    let [changed, unchanged] = pair(iterations, || drop(black_box(plan(&[]))), || drop(black_box(plan(&applied))));
    rows.push(("plan one ServiceSet (3 services)", "every child to apply", changed, "nothing changed", unchanged));

    let old = first.status.clone().expect("not deferred");
    let mut new = old.clone();
    new.services[0].state = State::Failed;
    new.services[0].failure_message = Some("install failed".into());
    let [differs, same] = pair(
        iterations,
        || drop(black_box((old == new, service_set_events(Some(&old), &new)))),
        || drop(black_box((old == old.clone(), service_set_events(Some(&old), &old)))),
    );
    rows.push(("status decision + Events diff", "a service failed", differs, "unchanged", same));

    println!(
        "host core, median of {BATCHES} interleaved batches x {iterations}, each against its baseline in this run"
    );
    println!("| operation | baseline | time | measured | time | ratio to baseline |");
    println!("|---|---|---|---|---|---|");
    for (operation, base_name, base, name, time) in rows {
        println!(
            "| {operation} | {base_name} | {:.2} µs | {name} | {:.2} µs | {:.2}x |",
            micros(base),
            micros(time),
            time.as_secs_f64() / base.as_secs_f64()
        );
    }
}

/// Medians of a baseline and a variant, measured in interleaved batches.
fn pair(iterations: usize, mut base: impl FnMut(), mut measured: impl FnMut()) -> [Duration; 2] {
    let times = medians(iterations, &mut [&mut base, &mut measured]);
    [times[0], times[1]]
}
