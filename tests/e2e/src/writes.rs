//! Counting the writes made while the test only watches.
//!
//! Two views, both on the simulated server, the second alone on a real cluster:
//! - the server's request counts of the write verbs (a write that changes nothing still counts);
//! - the resourceVersions of the watched objects and of every host-managed child before and
//!   after (objects appearing or disappearing count too).
//!
//! SelfSubjectAccessReviews (a question, nothing is stored) and Leases (a leader-election
//! heartbeat, not reconciliation) are not counted.

use std::collections::BTreeMap;
use std::time::Duration;

use ksm_test_harness::MANAGED_LABEL;
use ksm_test_harness::env::Env;
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::resource_version;

/// Verbs that write.
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];
/// Resources whose writes are not reconciliation writes.
const NOT_COUNTED: [&str; 2] = ["selfsubjectaccessreviews", "leases"];

/// The writes seen during a period.
#[derive(Debug, Default)]
pub struct Writes {
    /// Write requests served by the simulated server: (verb, resource, count).
    pub requests: Vec<(String, String, usize)>,
    /// Objects whose resourceVersion changed, or that appeared or disappeared.
    pub changed: Vec<String>,
}

impl Writes {
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.changed.is_empty()
    }

    /// The breakdown, one line per request kind and per changed object.
    pub fn breakdown(&self) -> String {
        let requests = self.requests.iter().map(|(verb, resource, n)| format!("  {n} x {verb} {resource}"));
        let changed = self.changed.iter().map(|c| format!("  changed: {c}"));
        requests.chain(changed).collect::<Vec<_>>().join("\n")
    }
}

/// Waits `period` and reports the writes made meanwhile to the server (simulated server only)
/// and to `watched` plus every host-managed child in the test's namespace.
pub async fn writes_during(env: &Env, watched: &[ObjRef], period: Duration) -> Writes {
    let before = versions(env, watched).await;
    if let Some(server) = env.server() {
        server.reset_counts();
    }
    tokio::time::sleep(period).await;
    let requests = env.server().map(|s| s.requests()).unwrap_or_default();
    let after = versions(env, watched).await;
    let requests = requests
        .iter()
        .filter(|(verb, resource, _)| {
            WRITE_VERBS.contains(verb) && !NOT_COUNTED.contains(&resource.split('/').next().unwrap_or_default())
        })
        .map(|(verb, resource, n)| (verb.to_string(), resource.to_string(), n))
        .collect();
    let mut changed = Vec::new();
    for (r, rv) in &before {
        match after.get(r) {
            Some(now) if now != rv => changed.push(format!("{r} (resourceVersion {rv} -> {now})")),
            None => changed.push(format!("{r} (disappeared)")),
            Some(_) => {}
        }
    }
    changed.extend(after.keys().filter(|r| !before.contains_key(*r)).map(|r| format!("{r} (appeared)")));
    Writes { requests, changed }
}

/// resourceVersions of `watched` (those that exist) and of the host-managed children.
async fn versions(env: &Env, watched: &[ObjRef]) -> BTreeMap<ObjRef, String> {
    let mut versions = BTreeMap::new();
    for r in watched {
        if let Some(object) = env.get(r).await {
            versions.insert(r.clone(), resource_version(&object).to_string());
        }
    }
    for kind in Kind::CHILDREN {
        for child in env.list(kind, env.namespace(), &format!("{MANAGED_LABEL}=true")).await {
            versions.insert(ObjRef::of(&child), resource_version(&child).to_string());
        }
    }
    versions
}
