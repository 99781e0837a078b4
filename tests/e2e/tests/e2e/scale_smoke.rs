//! The scale benchmark at a small size, so that it cannot rot: it must converge, make no
//! writes in a steady state and apply spec changes.

use std::time::Duration;

use ksm_e2e::adapter::binary;
use ksm_e2e::scale::{Options, run};

#[tokio::test(flavor = "multi_thread")]
async fn the_scale_benchmark_runs_at_200_by_3() {
    if ksm_e2e::skip_on_real_cluster("the_scale_benchmark_runs_at_200_by_3", "the benchmark's own server") {
        return;
    }
    let options = Options {
        service_sets: 200,
        services: 3,
        steady: Duration::from_secs(3),
        changes: 10,
        timeout: Duration::from_secs(120),
        binary: binary(),
    };
    let report = run(options).await.expect("the benchmark runs");
    eprintln!("{}", report.table());
    assert_eq!(report.steady_writes, 0, "steady state makes no writes");
    assert_eq!(report.latencies.len(), 10);
    let patches = report.requests.get("patch").copied().unwrap_or_default();
    assert!(patches >= 200 * 3, "every HelmRelease was applied: {:?}", report.requests);
    assert!(report.peak_rss_kib > 0);
}
