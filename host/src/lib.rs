//! ksm-adapter: a k0rdent service-manager adapter host.
//!
//! The host does everything generic (watches, SMP checks, apply, status); the CD-tool-specific
//! translation lives in sandboxed WASM plugins behind the versioned contract in `wit/`.
//! ARCHITECTURE.md draws the modules and the direction of their dependencies.
//!
//! - [`adapter_plugin`]: the host's own API: which plugin serves which providers, from where;
//! - [`plugin`]: the narrow interface the host calls plugins through, and their limits;
//! - [`runtime`]: the wasmtime implementation of it;
//! - [`serving`]: which plugin serves a provider, under which rules;
//! - [`builtin`]: plugins embedded in the binary (Flux);
//! - [`conditions`]: conditions as the host writes them (typed status, bounded message);
//! - [`k0rdent`]: the k0rdent API types and their CRDs;
//! - [`plan`]: the pure core deciding desired objects and service states, with [`policy`]
//!   checking everything a plugin returns, after [`tenancy`] says who Flux's objects run as;
//! - [`manifests`]: objects read from YAML files, for the offline commands;
//! - [`oci`]: WASM plugins in OCI registries (pull with sha256 verification, resolve, push) and
//!   their cosign signatures;
//! - [`signature`]: cosign signatures of plugin artifacts: signing and verification (pure);
//! - [`metrics`]: Prometheus metrics and the /metrics, /healthz, /readyz endpoint;
//! - [`controller`]: the Kubernetes I/O of `ksm-adapter run` (watches, apply, status);
//! - [`smp`]: the pure StateManagementProvider checks (selector, CEL readiness, conditions);
//! - [`retry`]: the one retry policy (exponential backoff), named per use;
//! - [`packed`]: JSON texts kept zstd-compressed against a sibling (caches, kept translations);
//! - [`rules`]: CEL rules (SMP readiness, output policy, health), compiled once and cached;
//! - [`health`]: the pure verdict on a service's workloads on its target cluster (kcm 1.12).

pub mod adapter_plugin;
pub mod builtin;
pub mod conditions;
pub mod controller;
pub mod health;
pub mod k0rdent;
pub mod manifests;
pub mod metrics;
pub mod oci;
pub mod packed;
pub mod plan;
pub mod plugin;
pub mod policy;
pub mod retry;
pub mod rules;
pub mod runtime;
pub mod serving;
pub mod signature;
pub mod smp;
pub mod tenancy;
