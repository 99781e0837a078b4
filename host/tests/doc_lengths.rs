//! The pages a newcomer reads first stay short enough to read: the README (the two commands and
//! what the project is; reference lives in docs/) and docs/performance.md (the current figures;
//! older runs live in git). A page over its bound fails here: move reference to docs/, older
//! rows to git history, rather than raise the bound.

use std::path::Path;

/// The most lines each page may have.
const BOUNDS: [(&str, usize); 2] = [("README.md", 250), ("docs/performance.md", 250)];

#[test]
fn first_pages_stay_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let over: Vec<String> = BOUNDS
        .iter()
        .filter_map(|&(page, most)| {
            let lines = std::fs::read_to_string(root.join(page)).unwrap().lines().count();
            (lines > most).then(|| format!("{page}: {lines} lines, at most {most}"))
        })
        .collect();
    assert!(over.is_empty(), "{}", over.join("\n"));
}
