//! ARCHITECTURE.md's arrows, checked against the code: the ```` ```arrows ```` block draws, one
//! line per top-level module of the host (plus `sdk`, the plugin SDK crate), the modules it
//! imports: `from ──► to to …`, or `from` alone when it imports none. The test fails when the
//! doc draws an arrow the code does not have, leaves out one it has, names a module that does not
//! exist or leaves one out, or draws an arrow up (to a line above: the lines are in layers,
//! dependencies pointing down only). The imports are those `layering.rs` reads
//! (`common/module_graph.rs`), tests and comments left out.

#[path = "common/module_graph.rs"]
mod module_graph;

use module_graph::{Module, edges, modules, source};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules and the top-level modules each imports.
type Arrows = BTreeMap<String, BTreeSet<String>>;

const ARROW: &str = "──►";

/// What the host's code imports, between its top-level modules (`plan`, `controller`, …) and
/// from them to the SDK (`sdk`: any path through `ksm_plugin_sdk`).
fn code_arrows(src: &Path) -> Arrows {
    let (known, edges) = edges(src);
    let top = |m: &Module| m.first().cloned();
    let mut arrows: Arrows = known.iter().filter_map(top).map(|m| (m, BTreeSet::new())).collect();
    arrows.insert("sdk".into(), BTreeSet::new());
    for (from, to) in edges.iter().flat_map(|(from, to)| to.iter().map(move |t| (from, t))) {
        if let (Some(from), Some(to)) = (top(from), top(to))
            && from != to
        {
            arrows.entry(from).or_default().insert(to);
        }
    }
    for (module, code) in modules(src) {
        if let Some(from) = top(&module).filter(|_| code.contains("ksm_plugin_sdk")) {
            arrows.entry(from).or_default().insert("sdk".into());
        }
    }
    arrows
}

/// The arrows the doc draws, its lines in order. Errors name a line that does not read.
fn doc_arrows(doc: &str) -> Result<Vec<(String, BTreeSet<String>)>, String> {
    let start = doc.find("\n```arrows\n").ok_or("no ```arrows block")? + "\n```arrows\n".len();
    let block = &doc[start..start + doc[start..].find("\n```").ok_or("the ```arrows block does not end")?];
    let mut lines = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (from, to) = line.split_once(ARROW).unwrap_or((line, ""));
        let from: Vec<&str> = from.split_whitespace().collect();
        let [from] = from[..] else { return Err(format!("not `module {ARROW} module …`: {line:?}")) };
        let to: BTreeSet<String> = to.split_whitespace().map(String::from).collect();
        if to.is_empty() && line.contains(ARROW) {
            return Err(format!("an arrow to nothing: {line:?}"));
        }
        lines.push((from.to_string(), to));
    }
    Ok(lines)
}

/// Where the doc and the code disagree, one line each; empty when the doc is true.
fn disagreements(doc: &str, code: &Arrows) -> Vec<String> {
    let lines = match doc_arrows(doc) {
        Ok(lines) => lines,
        Err(e) => return vec![e],
    };
    let mut found = Vec::new();
    let row: BTreeMap<&str, usize> = lines.iter().enumerate().map(|(i, (from, _))| (from.as_str(), i)).collect();
    if row.len() < lines.len() {
        found.push("a module has two lines".to_string());
    }
    for module in code.keys().filter(|m| !row.contains_key(m.as_str())) {
        found.push(format!("{module}: a module the doc has no line for"));
    }
    for (i, (from, to)) in lines.iter().enumerate() {
        let Some(imports) = code.get(from) else {
            found.push(format!("{from}: no such module"));
            continue;
        };
        for t in to.difference(imports) {
            found.push(format!("{from} {ARROW} {t}: drawn, but {from} does not import {t}"));
        }
        for t in imports.difference(to) {
            found.push(format!("{from} {ARROW} {t}: {from} imports {t}, but the doc does not draw it"));
        }
        for t in to.iter().filter(|t| row.get(t.as_str()).is_some_and(|&j| j <= i)) {
            found.push(format!("{from} {ARROW} {t}: points up ({t}'s line is above {from}'s)"));
        }
    }
    found
}

#[test]
fn architecture_md_draws_the_imports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let found = disagreements(&doc, &code_arrows(&source("host")));
    assert!(found.is_empty(), "ARCHITECTURE.md's ```arrows block is not the code's:\n{}", found.join("\n"));
}

#[test]
fn a_wrong_arrow_is_found() {
    let code: Arrows = [("a", vec!["b", "sdk"]), ("b", vec!["sdk"]), ("sdk", vec![])]
        .into_iter()
        .map(|(from, to)| (from.to_string(), to.into_iter().map(String::from).collect()))
        .collect();
    let doc = |block: &str| format!("# A\n\n```arrows\n{block}\n```\n");
    assert_eq!(disagreements(&doc("a ──► b sdk\nb ──► sdk\nsdk"), &code), Vec::<String>::new());
    assert_eq!(
        disagreements(&doc("a ──► sdk\nb ──► a sdk\nsdk"), &code),
        [
            "a ──► b: a imports b, but the doc does not draw it",
            "b ──► a: drawn, but b does not import a",
            "b ──► a: points up (a's line is above b's)",
        ]
    );
    assert_eq!(
        disagreements(&doc("a ──► b sdk\nb ──► sdk\nc\n"), &code),
        ["sdk: a module the doc has no line for", "c: no such module"]
    );
    assert_eq!(disagreements(&doc("a b ──► sdk"), &code), ["not `module ──► module …`: \"a b ──► sdk\""]);
}
