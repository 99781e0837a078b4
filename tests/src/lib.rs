//! Test-only crate: see the integration tests beside this file.
