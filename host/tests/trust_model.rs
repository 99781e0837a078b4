//! The trust model's inputs table ([`docs/security.md`](../../docs/security.md), "Inputs")
//! lists every annotation, label and ConfigMap/Secret key the host reads: this test fails when
//! the code names one the table does not.
//!
//! It reads files only. The code is every module the host's binary and library compile (from
//! `host/src/lib.rs` and `host/src/main.rs`, following `mod` declarations), the SDK's
//! (`plugins/sdk/src`) and the built-in Flux plugin's (`plugins/flux/src`, embedded in the host):
//! test modules, test-only files, comments and templates the host writes out (the scaffold) are
//! left out. From it, two kinds of string literal are keys:
//!
//! - a **qualified name**, `<prefix>/<name>` with a DNS prefix of at least two labels
//!   (`ksm.k0rdent.mirantis.com/regions`, `app.kubernetes.io/name`), `<name>` possibly empty
//!   (a reserved prefix) or a `format!` placeholder (`ksm.k0rdent.mirantis.com/{}`); not an
//!   API group and version (`helm.toolkit.fluxcd.io/v2`), which names a kind, not a key;
//! - the value of a **constant** whose name says it is a key: it contains `ANNOTATION` or
//!   `LABEL`, or ends in `_KEY` or `_KEYS` (`KUBECONFIG_KEY = "value"`, `DATA_KEY = "rules"`,
//!   every string of `DISCOVERY_LABELS`); and a literal passed to `secret_key(` (a Secret's
//!   data key, `.dockerconfigjson`).
//!
//! Each must appear, backticked, in the first column of the inputs table; a placeholder matches
//! a `<...>` part there (`ksm.k0rdent.mirantis.com/<adapter-namespace>.<adapter-name>`).
//! [`NOT_KEYS`] lists the qualified names that are not keys, each with why. A short key spelled
//! inline (`labels.get("tier")`) is not caught: name a key as a constant, as the host does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Qualified names in the code that are not annotation, label or data keys, each with why. None
/// today: API groups with their version, URLs, image references, media types and CRD names do
/// not match [`qualified`] or are excluded by [`api_version`].
const NOT_KEYS: &[(&str, &str)] = &[];

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A token of Rust source, as far as this test needs: string literals, identifiers and single
/// punctuation characters. Comments are dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Str(String),
    Ident(String),
    Punct(char),
}

/// The tokens of `source`: string literals (plain, byte, raw) with their text as written
/// (escapes left as they are: keys have none), identifiers, punctuation; comments, char
/// literals and lifetimes dropped.
fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push(Token::Str(chars[start..i.min(chars.len())].iter().collect()));
            i += 1;
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && raw_string_at(&chars, i).is_some() {
            let (start, hashes) = raw_string_at(&chars, i).unwrap();
            let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let mut j = start;
            while j < chars.len() && !chars[j..].starts_with(&closing) {
                j += 1;
            }
            out.push(Token::Str(chars[start..j.min(chars.len())].iter().collect()));
            i = j + closing.len();
        } else if c == 'b' && next == Some('"') {
            i += 1; // a byte string: the next round reads it as a string
        } else if c == '\'' {
            // A char literal ('x', '\n', '"') or a lifetime ('a): only the former has a
            // closing quote right after one (possibly escaped) character.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// Where the text of a raw string starting at `at` (`r"`, `r#"`, `br"`, ...) begins, and its
/// number of `#`; `None` when `at` starts no raw string (an identifier such as `r` or `br`).
fn raw_string_at(chars: &[char], at: usize) -> Option<(usize, usize)> {
    if at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_') {
        return None;
    }
    let mut i = at + if chars[at] == 'b' { 2 } else { 1 };
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (chars.get(i) == Some(&'"')).then_some((i + 1, hashes))
}

/// `tokens` without the items under `#[cfg(test)]` (a test module, function, `use`), and the
/// names of the modules declared in a file of their own (`mod name;`), test-only ones apart.
fn code(tokens: &[Token]) -> (Vec<Token>, Vec<String>) {
    use Token::*;
    let (mut kept, mut modules) = (Vec::new(), Vec::new());
    let mut i = 0;
    let is = |i: usize, expected: &[Token]| tokens.get(i..i + expected.len()) == Some(expected);
    let cfg_test =
        [Punct('#'), Punct('['), Ident("cfg".into()), Punct('('), Ident("test".into()), Punct(')'), Punct(']')];
    while i < tokens.len() {
        if is(i, &cfg_test) {
            // Skip the item: up to its `;` or the end of its first `{ ... }` block.
            i += cfg_test.len();
            let mut depth = 0;
            while i < tokens.len() {
                match &tokens[i] {
                    Punct(';') if depth == 0 => break,
                    Punct('{') => depth += 1,
                    Punct('}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if let (Ident(keyword), Some(Ident(name)), Some(Punct(';'))) =
            (&tokens[i], tokens.get(i + 1), tokens.get(i + 2))
            && keyword == "mod"
        {
            modules.push(name.clone());
        }
        kept.push(tokens[i].clone());
        i += 1;
    }
    (kept, modules)
}

/// The code of every module compiled from the crate roots `roots` (following `mod name;`), by
/// file.
fn crate_code(roots: &[PathBuf]) -> BTreeMap<PathBuf, Vec<Token>> {
    let mut found = BTreeMap::new();
    let mut queue: Vec<PathBuf> = roots.to_vec();
    while let Some(file) = queue.pop() {
        if found.contains_key(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (kept, modules) = code(&tokens(&text));
        // A crate root or `mod.rs` declares its children beside it; `foo.rs` in `foo/`.
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = match stem.as_str() {
            "lib" | "main" | "mod" => file.parent().unwrap().to_path_buf(),
            _ => file.parent().unwrap().join(&stem),
        };
        for module in modules {
            let flat = dir.join(format!("{module}.rs"));
            let nested = dir.join(&module).join("mod.rs");
            let child = if flat.exists() { flat } else { nested };
            assert!(child.exists(), "{}: mod {module}: neither {module}.rs nor {module}/mod.rs", file.display());
            queue.push(child);
        }
        found.insert(file, kept);
    }
    found
}

/// Whether `text` is `<prefix>/<name>`: a DNS prefix of at least two labels, and a name of
/// letters, digits, `-`, `_`, `.` and `format!` placeholders (`{}`, `{name}`), possibly empty.
fn qualified(text: &str) -> bool {
    let Some((prefix, name)) = text.split_once('/') else { return false };
    let label = |l: &str| {
        !l.is_empty()
            && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let labels: Vec<&str> = prefix.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| label(l))
        && labels.last().unwrap().chars().all(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '{' | '}'))
}

/// Whether `text` is an API group and version (`<group>/v1`, `/v1beta1`, `/v2alpha3`).
fn api_version(text: &str) -> bool {
    let Some((_, version)) = text.split_once('/') else { return false };
    let Some(rest) = version.strip_prefix('v') else { return false };
    let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    !rest.is_empty()
        && digits.len() < rest.len()
        && ["", "alpha", "beta"].iter().any(|stage| {
            digits
                .strip_prefix(stage)
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()) && (stage.is_empty() || !n.is_empty()))
        })
}

/// Where the `=` of a constant's initializer is in `tokens` (what follows its name: `: <type>
/// = ...;`); `None` for a `const` that has none (a const generic parameter).
fn initializer_at(tokens: &[Token]) -> Option<usize> {
    let mut depth = 0;
    for (at, token) in tokens.iter().enumerate() {
        match token {
            Token::Punct('[' | '(' | '<') => depth += 1,
            Token::Punct(']' | ')') => depth -= 1,
            Token::Punct('>') if depth == 0 => return None,
            Token::Punct('>') => depth -= 1,
            Token::Punct('=') if depth == 0 => return Some(at),
            Token::Punct(';' | '{' | ',') if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// Whether the name of a constant says its value is a key.
fn key_constant(name: &str) -> bool {
    name.contains("ANNOTATION") || name.contains("LABEL") || name.ends_with("_KEY") || name.ends_with("_KEYS")
}

/// The keys `tokens` name (see the module's doc), each with why it counts.
fn keys_in(tokens: &[Token]) -> Vec<(String, String)> {
    use Token::*;
    let mut keys = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if let Str(text) = token
            && qualified(text)
            && !api_version(text)
        {
            keys.push((text.clone(), "a qualified name".to_string()));
        }
        // `const NAME: <type> = <initializer>;`: every literal of the initializer.
        if let (Ident(keyword), Some(Ident(name))) = (token, tokens.get(i + 1))
            && keyword == "const"
            && key_constant(name)
            && let Some(at) = initializer_at(&tokens[i + 2..])
        {
            let rest = &tokens[i + 2..];
            let initializer = rest[at..].iter().take_while(|t| **t != Punct(';'));
            for literal in initializer.filter_map(|t| if let Str(s) = t { Some(s) } else { None }) {
                keys.push((literal.clone(), format!("constant {name}")));
            }
        }
        // `secret_key(client, &secret, "<key>", field)`: the Secret's data key, its third argument.
        if *token == Ident("secret_key".into()) && tokens.get(i + 1) == Some(&Punct('(')) {
            let (mut depth, mut argument) = (0, 0);
            for t in &tokens[i + 1..] {
                match t {
                    Punct('(' | '[' | '{') => depth += 1,
                    Punct(')' | ']' | '}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Punct(',') if depth == 1 => argument += 1,
                    Str(s) if depth == 1 && argument == 2 => {
                        keys.push((s.clone(), "a Secret key read with secret_key".to_string()))
                    }
                    _ => {}
                }
            }
        }
    }
    keys
}

/// The backticked items of the first column of the table under the heading `heading` of the
/// Markdown `doc`.
fn first_column(doc: &str, heading: &str) -> BTreeSet<String> {
    let section = doc.split_once(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("no heading {heading:?}")).1;
    let section = section.split("\n#").next().unwrap();
    let mut items = BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with('|')) {
        let cell = row.trim_start_matches('|').split(" | ").next().unwrap_or_default();
        for (n, part) in cell.split('`').enumerate() {
            if n % 2 == 1 {
                items.insert(part.to_string());
            }
        }
    }
    items
}

/// Whether `key` (from the code, possibly with `{...}` placeholders) is `listed` (from the doc,
/// possibly with `<...>` parts): equal, or equal once each placeholder stands for a `<...>`
/// sequence.
fn matches(key: &str, listed: &str) -> bool {
    if key == listed {
        return true;
    }
    if !key.contains('{') {
        return false;
    }
    let (mut key, mut listed) = (key, listed);
    loop {
        match (key.find('{'), listed.find('<')) {
            (None, None) => return key == listed,
            (Some(k), Some(l)) if key[..k] == listed[..l] => {
                key = &key[k + key[k..].find('}').map_or(key.len() - k, |e| e + 1)..];
                // A placeholder stands for one or more `<...>` parts and what joins them.
                let rest = &listed[l..];
                let end = rest.rfind('>').map_or(rest.len(), |e| e + 1);
                let next_literal = key.split('{').next().unwrap_or_default();
                let cut = if next_literal.is_empty() { end } else { rest.find(next_literal).unwrap_or(end) };
                listed = &rest[cut..];
            }
            _ => return false,
        }
    }
}

/// The keys the code names that the doc's inputs table does not list, each with where and why.
fn unlisted(code: &BTreeMap<PathBuf, Vec<Token>>, listed: &BTreeSet<String>) -> Vec<String> {
    let not_keys: BTreeSet<&str> = NOT_KEYS.iter().map(|(k, _)| *k).collect();
    let mut missing = Vec::new();
    for (file, tokens) in code {
        for (key, why) in keys_in(tokens) {
            if not_keys.contains(key.as_str()) || listed.iter().any(|l| matches(&key, l)) {
                continue;
            }
            let file = file.strip_prefix(root()).unwrap_or(file).display().to_string();
            missing.push(format!("`{key}` ({why}) in {file}"));
        }
    }
    missing.sort();
    missing.dedup();
    missing
}

/// The heading of the inputs table in docs/security.md.
const INPUTS: &str = "## Inputs";

fn host_code() -> BTreeMap<PathBuf, Vec<Token>> {
    let root = root();
    crate_code(&[
        root.join("host/src/lib.rs"),
        root.join("host/src/main.rs"),
        root.join("plugins/sdk/src/lib.rs"),
        root.join("plugins/flux/src/lib.rs"),
    ])
}

#[test]
fn every_key_the_host_reads_is_in_the_trust_models_inputs_table() {
    let doc = std::fs::read_to_string(root().join("docs/security.md")).unwrap();
    let listed = first_column(&doc, INPUTS);
    let code = host_code();
    assert!(code.len() > 100, "the host's modules were not found: {:?}", code.keys().collect::<Vec<_>>());
    let missing = unlisted(&code, &listed);
    assert!(
        missing.is_empty(),
        "docs/security.md, {INPUTS}: these keys are read by the host but not listed (a row per input: \
         input | where the host reads it | who writes it | what it may make the host do):\n{}",
        missing.join("\n")
    );
}

/// The rule catches what it is meant to, and nothing it is not.
#[test]
fn the_check_finds_a_new_key_and_ignores_groups_urls_comments_and_tests() {
    let source = r##"
        //! `doc.example.com/in-a-comment` is no key
        use x::y;
        pub const FOO_ANNOTATION: &str = "ksm.k0rdent.mirantis.com/foo";
        const BAR_KEY: &str = "bar.yaml";
        const PAIR_LABELS: [&str; 2] = ["app", "team.example.com/owner"];
        const API: &str = "helm.toolkit.fluxcd.io/v2beta1"; // an apiVersion
        const URL: &str = "https://example.com/x";
        const RAW: &str = r#"raw.example.com/key"#;
        fn f<'a>(c: char) -> &'a str { let q = '"'; secret_key(client, &s, ".dockerconfigjson", "field").await; "fmt.example.com/{}" }
        /* block.example.com/comment */
        #[cfg(test)]
        mod tests { const T_LABEL: &str = "test.example.com/only"; }
        #[cfg(test)]
        mod golden;
        mod real;
    "##;
    let (kept, modules) = code(&tokens(source));
    assert_eq!(modules, ["real"], "test-only modules are not followed");
    let found: Vec<String> = keys_in(&kept).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        found,
        [
            "ksm.k0rdent.mirantis.com/foo",
            "ksm.k0rdent.mirantis.com/foo",
            "bar.yaml",
            "app",
            "team.example.com/owner",
            "team.example.com/owner",
            "raw.example.com/key",
            ".dockerconfigjson",
            "fmt.example.com/{}",
        ]
    );
    let listed: BTreeSet<String> =
        ["ksm.k0rdent.mirantis.com/foo", "fmt.example.com/<a>.<b>"].into_iter().map(String::from).collect();
    let code = BTreeMap::from([(PathBuf::from("x.rs"), kept)]);
    let missing = unlisted(&code, &listed);
    assert!(missing.iter().any(|m| m.starts_with("`bar.yaml` (constant BAR_KEY)")), "{missing:#?}");
    assert!(!missing.iter().any(|m| m.contains("fmt.example.com")), "a placeholder matches <a>.<b>: {missing:#?}");
    assert!(!missing.iter().any(|m| m.contains("ksm.k0rdent.mirantis.com/foo")), "{missing:#?}");
}

#[test]
fn placeholders_match_angle_bracketed_parts() {
    assert!(matches("ksm.k0rdent.mirantis.com/{}", "ksm.k0rdent.mirantis.com/<adapter-namespace>.<adapter-name>"));
    assert!(matches("{name}-kubeconfig", "<cluster>-kubeconfig"));
    assert!(!matches("ksm.k0rdent.mirantis.com/{}", "k0rdent.mirantis.com/<x>"));
    assert!(!matches("a.example.com/b", "a.example.com/<b>"), "only a placeholder matches a <...> part");
    assert!(api_version("helm.toolkit.fluxcd.io/v2") && api_version("k0rdent.mirantis.com/v1beta1"));
    assert!(!api_version("ksm.k0rdent.mirantis.com/values") && !api_version("x.io/v") && !api_version("x.io/vbeta1"));
}
