//! Scenario 9: once converged, the host writes nothing.

use std::time::Duration;

use ksm_e2e::Scenario;
use ksm_test_harness::Mode;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::flux::FluxState;
use ksm_test_harness::status::condition_message;

/// How long the host is watched for writes.
const QUIET_PERIOD: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn steady_state_has_no_writes() {
    let t = Scenario::start("steady", Mode::Observe).await;
    t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    for service in ["ingress-nginx", "cert-manager"] {
        t.set_flux("web", service, FluxState::Ready).await;
    }
    t.wait_service_set("web", "deployed, 2/2", |ss| {
        ss["status"]["deployed"] == true && condition_message(ss, "ServicesInReadyState") == "2/2"
    })
    .await;
    t.wait_converged("web").await;
    // Let the host see its own last status write come back through its watch.
    tokio::time::sleep(Duration::from_secs(1)).await;

    t.assert_no_writes(QUIET_PERIOD).await;
}
