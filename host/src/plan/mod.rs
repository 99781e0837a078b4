//! The pure planning core: from a ServiceSet, its templates, the observed objects and a plugin,
//! decide each service's desired objects and its state. No I/O: the CLI and the controller
//! feed it objects and act on what it returns.
//!
//! [`decide`] makes one reconcile's decision, in phases; it asks the plugin through
//! [`translate`](mod@translate) (the desired objects, checked) and [`map_status`] (each
//! service's state), and writes the ServiceSet status through [`service_set_status`].

pub mod children;
pub mod claims;
pub mod decide;
pub mod events;
pub mod gate;
pub mod map_status;
pub mod memo;
pub mod placements;
pub mod reads;
pub mod route;
pub mod service_set_status;
pub mod step;
pub mod translate;

pub use map_status::{service_status, template_type};
pub use translate::{ServiceOutcome, TranslateFailure, TranslatedService, service_names, translate};
