//! Scenario 15: after a ServiceSet is deployed, `/metrics` shows the listed series, `/readyz` says
//! ready, `/healthz` answers, and the transitions are Events on the ServiceSet.

use ksm_e2e::Scenario;
use ksm_test_harness::Mode;
use ksm_test_harness::adapter::http_get as get;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::flux::FluxState;

#[tokio::test(flavor = "multi_thread")]
async fn metrics_show_the_listed_series_after_a_run() {
    let t = Scenario::start("metrics", Mode::Observe).await;
    t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    for service in ["ingress-nginx", "cert-manager"] {
        t.set_flux("web", service, FluxState::Ready).await;
    }
    t.wait_service_set("web", "deployed", |ss| ss["status"]["deployed"] == true).await;
    // Transitions are Events on the ServiceSet.
    let note = t.wait_event(t.namespace(), "web", "Deployed").await;
    assert_eq!(note, "all 2 services deployed");
    let base = t.adapter().metrics_url();
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    assert_eq!(get(&format!("{base}/readyz")).await.0, 200);
    let (code, text) = get(&format!("{base}/metrics")).await;
    assert_eq!(code, 200);
    let plugin = t.smp_name();
    for series in [
        r#"ksm_reconciles_total{kind="ServiceSet",result="ok"}"#.to_string(),
        r#"ksm_reconciles_total{kind="AdapterPlugin",result="ok"}"#.to_string(),
        r#"ksm_reconcile_duration_seconds_count{kind="ServiceSet"}"#.to_string(),
        format!(r#"ksm_plugin_call_duration_seconds_count{{plugin="{plugin}",function="translate"}}"#),
        format!(r#"ksm_plugin_call_duration_seconds_count{{plugin="{plugin}",function="map-status"}}"#),
        r#"ksm_api_requests_total{verb="patch"}"#.to_string(),
        r#"ksm_api_requests_total{verb="watch"}"#.to_string(),
        r#"ksm_servicesets{state="Deployed"} 1"#.to_string(),
        format!(r#"ksm_plugin_ready{{plugin="{plugin}"}} 1"#),
    ] {
        assert!(text.contains(&series), "{series} missing from /metrics:\n{text}");
    }
}
