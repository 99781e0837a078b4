//! AdapterPlugins: fetching apart from loading apart from serving, as Kubewarden splits
//! fetching a policy from evaluating it. A version that fails to fetch, compile or validate
//! leaves the previous good version serving, under the narrowest of both specs' policies, and
//! the status says so.
//!
//! - [`fetch`]: a component's bytes: built in, from a ConfigMap or an OCI registry (credentials
//!   from a pull secret);
//! - [`verify`]: an OCI plugin's cosign signature by a key its spec lists, checked before
//!   compiling;
//! - [`load`]: compiling them off the async executor and validating the plugin against its
//!   spec and the API server's discovery;
//! - [`registry`]: what serves for each AdapterPlugin now, and which plugin serves an SMP;
//! - [`plugin_status`]: an AdapterPlugin's status from how its load went (pure);
//! - [`reconcile`]: one AdapterPlugin: load its spec when needed, write its status, wake the
//!   ServiceSets a change affects.

pub mod fetch;
pub mod load;
pub mod plugin_status;
pub mod reconcile;
pub mod registry;
pub mod verify;
