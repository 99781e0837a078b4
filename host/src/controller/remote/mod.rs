//! The clusters beside the one the host runs in: the regions children may live on and the
//! target clusters whose health is checked, reached through kubeconfig Secrets.
//!
//! - [`homes`]: the cluster a ServiceSet's children live on: management or a region;
//! - [`clusters`]: clients of other clusters, from kubeconfig Secrets, bounded;
//! - [`addresses`]: the addresses a kubeconfig may send the host to;
//! - [`bounded`]: every call to another cluster bounded in time and bytes;
//! - [`listed`]: a list answer read into no more objects than a look has left.

pub mod addresses;
pub mod bounded;
pub mod clusters;
pub mod homes;
pub mod listed;
