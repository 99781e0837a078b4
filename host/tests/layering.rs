//! The layout's rule, checked: no module cycle. Every Rust source of the host, the SDK and the
//! Flux plugin is read, each `crate::`/`super::`/`self::` path (and the binary's `ksm_adapter::`)
//! resolved to the module file it reaches, and the graph of those files must have no cycle, a
//! child reaching up into its parent's file included. Test modules and comments are left out: a
//! test may reach anywhere.

#[path = "common/module_graph.rs"]
mod module_graph;

use module_graph::{Module, edges, expand, paths, source};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The cycles among the modules under `src`: each group of modules that reach one another.
fn cycles(src: &Path) -> Vec<String> {
    let (known, edges) = edges(src);
    // Modules on a cycle together: those each reaches and is reached by (a strongly connected
    // component of more than one).
    let reach = |from: &Module| {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.clone()]);
        while let Some(at) = todo.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> = known.iter().map(|m| (m, reach(m))).collect();
    let mut found = BTreeSet::new();
    for module in &known {
        let component: Vec<String> = known
            .iter()
            .filter(|other| reached[module].contains(*other) && reached[*other].contains(module))
            .map(|m| m.join("::"))
            .collect();
        if !component.is_empty() {
            found.insert(component.join(", "));
        }
    }
    found.into_iter().collect()
}

#[test]
fn use_trees_expand() {
    let found = paths("use super::b as c;\nuse crate::{\n    d,\n};");
    assert!(found.contains(&"super::b as c".into()) && found.contains(&"crate::d".into()), "{found:?}");
    let mut paths = expand("crate::a::{b,c::{d,e},f as g}");
    paths.sort();
    assert_eq!(paths, ["crate::a::b", "crate::a::c::d", "crate::a::c::e", "crate::a::f as g"]);
}

#[test]
fn a_cycle_is_found() {
    let dir = std::env::temp_dir().join(format!("ksm-layering-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a; mod b;").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod c; pub struct S;").unwrap();
    std::fs::write(dir.join("a/c.rs"), "use super::S;").unwrap();
    std::fs::write(dir.join("b.rs"), "fn f() { crate::a::c::g() }").unwrap();
    assert_eq!(cycles(&dir), Vec::<String>::new(), "a child using its parent alone is no cycle");
    std::fs::write(dir.join("a/mod.rs"), "mod c; pub struct S; fn h() { c::g(); self::c::g() }").unwrap();
    assert_eq!(cycles(&dir), ["a, a::c"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn no_module_cycle() {
    let mut all = Vec::new();
    for crate_dir in ["host", "plugins/sdk", "plugins/flux"] {
        all.extend(cycles(&source(crate_dir)).into_iter().map(|c| format!("{crate_dir}: {c}")));
    }
    assert!(all.is_empty(), "module cycles:\n{}", all.join("\n"));
}

#[test]
fn the_pure_core_does_no_io() {
    let core = [
        "plan",
        "health",
        "smp",
        "policy",
        "tenancy",
        "serving",
        "conditions",
        "rules",
        "plugin",
        "k0rdent",
        "adapter_plugin",
        "signature",
    ];
    let io = ["controller", "runtime", "oci", "cli", "metrics", "manifests"];
    let (_, edges) = edges(&source("host"));
    let mut found = Vec::new();
    for (from, to) in edges.iter().flat_map(|(from, to)| to.iter().map(move |t| (from, t))) {
        let top = |m: &Module| m.first().cloned().unwrap_or_default();
        if core.contains(&top(from).as_str()) && io.contains(&top(to).as_str()) {
            found.push(format!("{} -> {}", from.join("::"), to.join("::")));
        }
    }
    assert!(found.is_empty(), "the core reaches the I/O layer:\n{}", found.join("\n"));
}
