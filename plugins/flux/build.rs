//! Links the plugin's WASM build with an initial memory that a reconcile's calls fit in
//! (`tests/flux_wasm.rs` checks it): an instance whose memory grows costs the host two changes
//! of page protection, each a TLB shootdown across its threads (docs/performance.md). 2 MiB is
//! also what the host keeps resident of a freed instance's memory, so a warm slot is reused
//! without a page fault.

/// Bytes of linear memory: the 1 MiB stack, the data, and the heap above them.
const INITIAL_MEMORY: usize = 2 << 20;

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| arch == "wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory={INITIAL_MEMORY}");
    }
}
