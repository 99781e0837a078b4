//! Issue 47: a kind the cluster does not serve costs nothing. Flux's shipped CRDs have no
//! Bucket, and a cluster that runs Argo CD or Fleet has no Flux kind at all: the host once listed
//! such a kind every 1.3 s forever, warning each time after a "works again".

use std::time::{Duration, Instant};

use ksm_e2e::Scenario;
use ksm_test_harness::adapter::http_get;
use ksm_test_harness::env::report;
use ksm_test_harness::fixtures::ingress_service;
use serde_json::json;

/// How long the host is watched.
const WATCHED: Duration = Duration::from_secs(60);

/// Without the Bucket CRD the host lists Bucket a handful of times a minute (its retries grow
/// towards five minutes), warns about it once and never says it works again; the other kinds
/// and the ServiceSets keep working, and `/readyz` is ready.
#[tokio::test(flavor = "multi_thread")]
async fn a_kind_the_cluster_does_not_serve_is_listed_rarely_and_warned_about_once() {
    let Some(t) = Scenario::start_without_crd("unserved", "buckets.source.toolkit.fluxcd.io").await else { return };
    let started = Instant::now();
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    assert!(t.child("web", "ingress-nginx").await.is_some(), "the ServiceSet is served");
    let (status, body) = http_get(&format!("{}/readyz", t.adapter().metrics_url())).await;
    assert_eq!((status, body.as_str()), (200, "ok\n"), "a kind of no one's CRD keeps no one waiting");

    tokio::time::sleep(WATCHED.saturating_sub(started.elapsed())).await;
    let lists = t.lists("source.toolkit.fluxcd.io", "buckets").expect("a server of the test's own counts lists");
    let log = std::fs::read_to_string(t.adapter().log_path()).expect("the adapter's log");
    let warnings = log.lines().filter(|l| l.contains("cannot watch Bucket")).count();
    report("unserved", &format!("{lists} lists of Bucket and {warnings} warning(s) in {WATCHED:?}"));
    assert!((1..=5).contains(&lists), "{lists} lists of Bucket in {WATCHED:?}");
    assert_eq!(warnings, 1, "one warning about Bucket:\n{log}");
    assert!(log.contains("is its CRD installed?"), "the warning says what is missing:\n{log}");
    assert!(!log.contains("the watch of Bucket works again"), "nothing listed Bucket:\n{log}");
}
