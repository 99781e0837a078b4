//! `ksm-adapter plugin test`: the conformance suite. Runs a plugin against fixture cases and
//! checks the contract invariants every plugin must hold, whatever its CD tool; prints one line
//! per check per case (`PASS`/`FAIL` and why) and fails when any check fails.
//!
//! Cases:
//! - the built-in fixtures of `tests/conformance/` (compiled into the binary): translate cases
//!   with an `invariants.yaml` instead of an expected output, checked for any plugin;
//! - `--fixtures <dir>`: the plugin's own cases in the golden format of `plugins/flux/testdata`
//!   (`translate/<case>/input.yaml` + `expected.yaml`, `status/cases.yaml`), compared exactly.
//!
//! Checks of the plugin: contract version, metadata, `validate-config` (rejects an unknown field
//! naming it; accepts `{}`, `null` and the keys the host itself reads). Checks of every translate
//! case: the call stays within its limits; deterministic (twice, byte-identical);
//! `validate-config` and `translate` agree on the config; answers for exactly the ServiceSet's
//! services in spec order; only declared kinds; the host's output policy
//! ([`ksm_adapter::plan::translate`]); names; missing templates give `TemplateNotFound`;
//! `map-status` with nothing observed is not Deployed, and both it and `map-status` of the objects
//! as just created answer without error, twice identically; then the case's own expectations.
//!
//! - `suite`: the command's arguments, the run, and the checks made of each case;
//! - `fixtures`: the cases: built in, or read from the plugin's own golden directories;
//! - `checks`: the single checks and what they report;
//! - `report`: one line per check, and the summary.

mod checks;
mod fixtures;
mod report;
mod suite;

pub use suite::{TestArgs, run};
