//! The kinds the plugins create (the children) and read, on one cluster: their watches, their
//! caches, and the writes to the children.
//!
//! - [`child_kinds`]: the plugins' kinds: their watches, server-side apply and delete;
//! - `child_cache`: the objects of those kinds, as compact JSON by ServiceSet;
//! - `read_cache`: the objects the plugins read, by the children that own them;
//! - `listed`: what a (re)list of a kind returned, for the caches to forget the rest.

mod child_cache;
pub mod child_kinds;
mod listed;
mod read_cache;
