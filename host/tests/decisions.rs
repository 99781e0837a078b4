//! Issue 49's rule, checked: the controller decides nothing. Every function of `plan/` a module
//! under `controller/` calls must be one the round's steps name (or the facts the round starts
//! from), listed below with the step that names it; a new call into `plan/` from the controller
//! fails here until the decision moves into the core or the list says why it is none. Types and
//! constants of `plan/` (labels, routes, notes) are data, not decisions: not listed.

// Shared with layering.rs and architecture.rs, which read the whole graph; this reads the paths.
#[allow(dead_code)]
#[path = "common/module_graph.rs"]
mod module_graph;

use module_graph::{modules, paths, source};
use std::collections::{BTreeMap, BTreeSet};

/// The functions of `plan/` the controller may call, each with what names it.
const ALLOWED: [(&str, &str); 15] = [
    ("plan::step::next", "the round asks the core for its next step"),
    ("plan::decide::decide", "Step::Decide"),
    ("plan::decide::deferred_status", "Step::DecideStatus"),
    ("plan::decide::foreign_objects", "Step::CheckNames"),
    ("plan::translate::translate", "Step::Decide's translation, warmed ahead into the memo by round/prepare.rs"),
    ("plan::claims::arbitrate", "Step::Decide's `arbitrate` input: the arbiter holds the claims"),
    ("plan::reads::owns", "Step::Decide's `related` input: the objects a child owns, for map-status"),
    ("plan::gate::gate", "Facts::gate: whether the ServiceSet is this host's"),
    ("plan::route::route", "Facts::route: where its children go"),
    ("plan::placements::placements", "Facts::placements: the regions they may be on"),
    ("plan::route::access", "Facts::placements: where each Region's kubeconfig is"),
    ("plan::step::refuses_child", "Step::CarryOut: which API answers refuse a child rather than fail the round"),
    ("plan::children::label_value", "the children's labels, encoded as the core writes them (data, not a decision)"),
    ("plan::children::recorded", "the children's labels, read as the core wrote them (data, not a decision)"),
    ("plan::events::adapter_plugin_events", "an AdapterPlugin's status transitions, which its round writes"),
];

/// Each function of `plan/` a module under `controller/` names, with the modules naming it.
fn calls_into_plan() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(&source("host"));
    let plan_modules: BTreeSet<String> =
        modules.keys().filter(|m| m.first().is_some_and(|s| s == "plan")).map(|m| m.join("::")).collect();
    let mut calls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in modules.iter().filter(|(m, _)| m.first().is_some_and(|s| s == "controller")) {
        let found = paths(code);
        // What `use crate::plan::x::{self}` (or `use crate::plan::x`) names `x` in this module.
        let aliases: BTreeMap<String, String> = found
            .iter()
            .filter_map(|p| p.strip_prefix("crate::"))
            .map(|p| p.trim_end_matches("::self"))
            .filter(|p| plan_modules.contains(*p))
            .map(|p| (p.rsplit("::").next().unwrap_or(p).to_string(), p.to_string()))
            .collect();
        for path in &found {
            let path = path.split(" as ").next().unwrap_or(path).trim_end_matches("::self");
            let path = match path.strip_prefix("crate::") {
                Some(absolute) => absolute.to_string(),
                None => match path.split_once("::") {
                    Some((head, rest)) if aliases.contains_key(head) => format!("{}::{rest}", aliases[head]),
                    _ => continue,
                },
            };
            let Some((owner, item)) = path.rsplit_once("::") else { continue };
            // A function: a lower-case item of a `plan/` module that is no module itself.
            let function = item.starts_with(|c: char| c.is_ascii_lowercase()) && !plan_modules.contains(&path);
            if plan_modules.contains(owner) && function {
                calls.entry(path.clone()).or_default().insert(module.join("::"));
            }
        }
    }
    calls
}

#[test]
fn the_controller_calls_only_the_plan_functions_the_steps_name() {
    let calls = calls_into_plan();
    let allowed: BTreeSet<&str> = ALLOWED.iter().map(|(f, _)| *f).collect();
    let extra: Vec<String> = calls
        .iter()
        .filter(|(function, _)| !allowed.contains(function.as_str()))
        .map(|(function, by)| format!("{function} (called by {})", by.iter().cloned().collect::<Vec<_>>().join(", ")))
        .collect();
    assert!(
        extra.is_empty(),
        "decisions made in the controller: move them into plan::step (a step that names them), or list \
         them in ALLOWED with what names them:\n{}",
        extra.join("\n")
    );
    let stale: Vec<&&str> = allowed.iter().filter(|f| !calls.contains_key(**f)).collect();
    assert!(stale.is_empty(), "listed in ALLOWED but no longer called: {stale:?}");
    assert!(calls.contains_key("plan::step::next"), "the check reads the round: {calls:?}");
}
