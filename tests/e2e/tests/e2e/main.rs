//! End-to-end scenarios: the real `ksm-adapter run` against a fresh simulated API server per
//! test, or a real cluster when `KSM_E2E_KUBECONFIG` is set (see the package README).
//!
//! Each test starts its own adapter in its own namespace, plays kcm (SMP status) and Flux
//! (HelmRelease status) itself, and waits at most 30 s for anything.

mod argocd;
mod bad_input;
mod changes;
mod conflicts;
mod deletion;
mod deploy;
mod envtest;
mod faults;
mod fleet;
mod health;
mod leader;
mod manage;
mod metrics;
mod observability;
mod ownership;
mod plugins;
mod provider;
mod provider_config;
mod regions;
mod schema;
mod sharding;
mod steady;
mod sveltos;
mod templates;
mod trust;
mod unserved;
