//! What the CLI tests share: the checkout's root and running the `ksm-adapter` binary from it.

use std::path::Path;
use std::process::{Command, Output};

/// The repository checkout (the workspace root).
#[allow(dead_code)] // not every test file uses it
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Runs `ksm-adapter <args>` from the checkout's root.
pub fn ksm_adapter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ksm-adapter"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("running ksm-adapter")
}
