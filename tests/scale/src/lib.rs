//! The scale benchmark of `ksm-adapter run` (`ksm-scale-bench`) and the two baselines it measures
//! it against (`ksm-naive-adapter`, `ksm-floor-adapter`):
//!
//! - [`bench`]: the benchmark, on the simulated API server or envtest;
//! - [`naive`]: the k0rdent guide's controller, the naive baseline;
//! - [`floor`]: the least any adapter must ask of the API server, the other baseline;
//! - [`health`]: kcm 1.12's service health verification, the duty both baselines take on with
//!   `--health` (rules, discovery, verdicts, and each baseline's way of looking).
//!
//! Its smoke test (`tests/scale_smoke.rs`, run by `cargo test --workspace`) runs all three at a
//! small size and guards ksm-adapter's convergence and its 0 writes in a steady state.
//!
//! A crate apart from the e2e tests, which check behaviour, because it measures: it shares with
//! them only `ksm-test-harness` (the API servers, CRDs, fixtures, Flux status, the adapter
//! binary), and neither depends on the other. Nor does it build e2e's test plugins.

pub mod bench;
pub mod floor;
pub mod health;
pub mod naive;
