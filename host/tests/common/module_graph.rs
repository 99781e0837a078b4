//! The module graph of a crate, read from its sources: what `layering.rs` (no cycle) and
//! `architecture.rs` (ARCHITECTURE.md's arrows) check. Each `crate::`/`super::`/`self::` path (and
//! the binary's `ksm_adapter::`) is resolved to the module file it reaches; test modules and
//! comments are left out: a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module by its path from the crate root (`["controller", "plugins"]`); the root is `[]`.
pub type Module = Vec<String>;

/// The module of every `.rs` file under `src`, with the file's text (tests cut off).
pub fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: Module = relative.iter().map(|s| s.to_string_lossy().into_owned()).collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = match text
                    .find("#[cfg(test)]\nmod tests")
                    .or_else(|| text.find("#[cfg(test)]\npub(super) mod tests"))
                {
                    Some(at) => text[..at].to_string(),
                    None => text,
                };
                // Comments (doc links included) are not dependencies.
                let code: Vec<&str> = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
                found.insert(module, code.join("\n"));
            }
        }
    }
    found
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e`.
pub fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else { return vec![tree.to_string()] };
    let (prefix, rest) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())]);
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&rest[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&rest[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).flat_map(expand).map(|p| format!("{prefix}{p}")).collect()
}

/// The paths `code` names: every `use` tree, expanded, and every path written inline.
pub fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        // Whitespace goes but for the one in `a as b`.
        let tree = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = tree.replace(" as ", "\u{0}").replace(' ', "").replace('\u{0}', " as ");
        found.extend(expand(&tree));
    }
    // Paths written inline: `crate::a::f()`, `child::f()` (relative to the module).
    let inline = code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).filter(|t| t.contains("::"));
    found.extend(inline.map(|t| t.trim_matches(':').to_string()));
    found
}

/// The module file `path`, named from `module`, reaches: the longest known module it starts with.
pub fn resolve(module: &Module, path: &str, known: &BTreeSet<Module>) -> Option<Module> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).map(|s| s.split(" as ").next().unwrap().to_string());
    let mut at: Module = match segments.next()?.as_str() {
        "crate" | "ksm_adapter" => Vec::new(),
        "self" => module.clone(),
        "super" => module[..module.len().saturating_sub(1)].to_vec(),
        // A path relative to the module: it names a child module.
        child => [module.clone(), vec![child.to_string()]].concat(),
    };
    if !known.contains(&at) {
        return None;
    }
    for segment in segments {
        match segment.as_str() {
            "super" => {
                at.pop();
            }
            "self" | "*" => {}
            _ => {
                let mut deeper = at.clone();
                deeper.push(segment);
                if !known.contains(&deeper) {
                    break;
                }
                at = deeper;
            }
        }
    }
    Some(at)
}

/// Which modules each module under `src` reaches (test modules and comments left out).
pub fn edges(src: &Path) -> (BTreeSet<Module>, BTreeMap<Module, BTreeSet<Module>>) {
    let modules = modules(src);
    let known: BTreeSet<Module> = modules.keys().cloned().collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, code) in &modules {
        for path in paths(code) {
            if let Some(target) = resolve(module, &path, &known).filter(|t| t != module && !t.is_empty()) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    (known, edges)
}

/// The `src` directory of a workspace crate (`host`, `plugins/sdk`).
pub fn source(crate_dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(crate_dir).join("src")
}
