//! The simulated API server driven by kube-rs, as the controller under test drives it.

mod apply_and_patch;
mod common;
mod crud;
mod deletion;
mod discovery;
mod faults;
mod watching;
