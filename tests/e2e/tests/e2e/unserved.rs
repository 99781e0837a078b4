//! Issue 47: a kind the cluster does not serve costs nothing. Flux's shipped CRDs have no
//! Bucket, and a cluster that runs Argo CD or Fleet has no Flux kind at all: the host once listed
//! such a kind every 1.3 s forever, warning each time after a "works again".

use std::time::{Duration, Instant};

use ksm_e2e::Scenario;
use ksm_test_harness::WAIT;
use ksm_test_harness::adapter::http_get;
use ksm_test_harness::env::report;
use ksm_test_harness::fixtures::ingress_service;
use ksm_test_harness::objects::{Kind, ObjRef};
use ksm_test_harness::status::condition_message;
use serde_json::json;

/// How long the host is watched.
const WATCHED: Duration = Duration::from_secs(60);
/// The CRD the cluster lacks at first.
const BUCKET_CRD: &str = "buckets.source.toolkit.fluxcd.io";
/// How long the host may take to find the CRD once installed: its next retry, 40 s after the
/// one before [`WATCHED`] ends, or 80 s after the one after.
const INSTALLED_WAIT: Duration = Duration::from_secs(100);

/// Without the Bucket CRD the host lists Bucket a handful of times a minute (its retries grow
/// towards five minutes), warns about it once and never says it works again; the AdapterPlugin's
/// status names the CRD; the other kinds and the ServiceSets keep working, and `/readyz` is
/// ready. Once the CRD is installed, the watch lists it and the status stops naming it.
#[tokio::test(flavor = "multi_thread")]
async fn a_kind_the_cluster_does_not_serve_is_listed_rarely_and_warned_about_once() {
    let Some(t) = Scenario::start_without_crd("unserved", BUCKET_CRD).await else { return };
    let started = Instant::now();
    t.create_service_set("web", json!([ingress_service()])).await;
    t.wait_converged("web").await;
    assert!(t.child("web", "ingress-nginx").await.is_some(), "the ServiceSet is served");
    let (status, body) = http_get(&format!("{}/readyz", t.adapter().metrics_url())).await;
    assert_eq!((status, body.as_str()), (200, "ok\n"), "a kind of no one's CRD keeps no one waiting");
    let plugin = ObjRef::cluster(Kind::AdapterPlugin, t.smp_name());
    t.wait_object("the AdapterPlugin ready, naming the missing CRD", &plugin, WAIT, |p| {
        p["status"]["ready"] == true
            && condition_message(p, "Validated")
                .ends_with(&format!("not installed (looked for every few minutes): {BUCKET_CRD}"))
    })
    .await;

    tokio::time::sleep(WATCHED.saturating_sub(started.elapsed())).await;
    let lists = t.lists("source.toolkit.fluxcd.io", "buckets").expect("a server of the test's own counts lists");
    let log = std::fs::read_to_string(t.adapter().log_path()).expect("the adapter's log");
    let warnings = log.lines().filter(|l| l.contains("cannot watch Bucket")).count();
    report("unserved", &format!("{lists} lists of Bucket and {warnings} warning(s) in {WATCHED:?}"));
    assert!((1..=5).contains(&lists), "{lists} lists of Bucket in {WATCHED:?}");
    assert_eq!(warnings, 1, "one warning about Bucket:\n{log}");
    assert!(log.contains("is its CRD installed?"), "the warning says what is missing:\n{log}");
    assert!(!log.contains("the watch of Bucket works again"), "nothing listed Bucket:\n{log}");

    // Installed now, the CRD is found at the next retry (at most a few minutes; here ~15 s).
    let crd = ksm_test_harness::env::crds().into_iter().find(|c| c["metadata"]["name"] == BUCKET_CRD);
    t.apply(crd.expect("the stand-in Bucket CRD"), "ksm-e2e").await;
    t.wait_object("the AdapterPlugin no longer naming the CRD", &plugin, INSTALLED_WAIT, |p| {
        p["status"]["ready"] == true && condition_message(p, "Validated").is_empty()
    })
    .await;
    let log = std::fs::read_to_string(t.adapter().log_path()).expect("the adapter's log");
    assert!(log.contains("the watch of Bucket works again"), "{log}");
}
