//! Scenario 17: two replicas with `--leader-elect`: only the leader writes; when it stops
//! (SIGTERM: it finishes, releases the Lease and exits 0), the standby takes over within seconds.
//! A standby told to stop while it waits for the Lease exits 0 at once.

use ksm_e2e::Scenario;
use ksm_test_harness::adapter::Adapter;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::wait::wait_for;
use ksm_test_harness::{Mode, WAIT};
use std::time::{Duration, Instant};

const ELECT: &[&str] = &["--leader-elect", "--leader-election-lease-seconds", "3"];

/// Waits until the adapter's log contains `text` (not through the scenario's waits, which stop
/// at once when the first adapter exits: here it does on purpose).
async fn wait_log(adapter: &Adapter, text: &str) {
    wait_for(&format!("{text:?} in {}", adapter.log_path().display()), WAIT, async || {
        let log = std::fs::read_to_string(adapter.log_path()).unwrap_or_default();
        if log.contains(text) { Ok(()) } else { Err(serde_json::json!(adapter.log_tail(5))) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_leader_writes_and_the_standby_takes_over_when_it_stops() {
    let t = Scenario::start_with("leader", Mode::Observe, ELECT).await;
    wait_log(t.adapter(), "acquired").await;
    let standby = t.start_another_adapter(ELECT);
    wait_log(&standby, "waiting for leadership").await;

    t.create_service_set("web", two_services()).await;
    t.wait_converged("web").await;
    let standby_log = std::fs::read_to_string(standby.log_path()).unwrap();
    assert!(!standby_log.contains("status written"), "the standby wrote:\n{standby_log}");
    assert!(!standby_log.contains("controller started"), "the standby started its controller:\n{standby_log}");

    let stopped = Instant::now();
    t.adapter().terminate();
    let status = exit_of(t.adapter(), "the leader").await;
    assert!(status.success(), "the leader exits 0 on SIGTERM: {status}");
    let leader_log = t.adapter().log_tail(20);
    assert!(leader_log.contains("released"), "the leader released its Lease:\n{leader_log}");
    wait_log(&standby, "acquired").await;
    assert!(stopped.elapsed() < Duration::from_secs(3), "hand-over took {:?} (lease 3 s)", stopped.elapsed());

    // The new leader serves: a new ServiceSet converges through it alone.
    t.create_service_set("api", two_services()).await;
    let written_before = std::fs::read_to_string(standby.log_path()).unwrap().matches("status written").count();
    wait_for("api's status written by the new leader", WAIT, async || {
        let log = std::fs::read_to_string(standby.log_path()).unwrap_or_default();
        let written = log.matches("status written").count();
        if written > written_before { Ok(()) } else { Err(serde_json::json!(standby.log_tail(5))) }
    })
    .await;

    // A third replica waits as a standby; SIGTERM ends its wait, as Kubernetes expects of a
    // pod that is stopped: exit 0, well before the grace period.
    let third = t.start_another_adapter(ELECT);
    wait_log(&third, "waiting for leadership").await;
    let stopped = Instant::now();
    third.terminate();
    let status = exit_of(&third, "the waiting standby").await;
    assert!(status.success(), "a standby exits 0 on SIGTERM: {status}\n{}", third.log_tail(10));
    assert!(stopped.elapsed() < Duration::from_secs(3), "the standby took {:?} to exit", stopped.elapsed());
}

/// Waits until `adapter` (`who`, in messages) exits; returns its exit status.
async fn exit_of(adapter: &Adapter, who: &str) -> std::process::ExitStatus {
    wait_for(&format!("{who} to exit after SIGTERM"), WAIT, async || match adapter.exited() {
        Some(status) => Ok(status),
        None => Err(serde_json::json!("running")),
    })
    .await
}
