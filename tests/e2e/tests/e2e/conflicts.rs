//! Release conflicts: two ServiceSets asking for the same Helm release on the same cluster get
//! one HelmRelease between them, the loser says who won, and the release is handed over when
//! the winner goes.

use ksm_e2e::Scenario;
use ksm_test_harness::fixtures::ingress_service;
use ksm_test_harness::status::{is_deleting, service, service_note, service_state};
use ksm_test_harness::{FLUX_FINALIZER, Kind, Mode, WAIT};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn the_higher_priority_gets_the_release_and_hands_it_over_when_gone() {
    let t = Scenario::start("conflicts", Mode::Observe).await;
    let with_priority = |name: &str, priority: i64| {
        let mut object = t.service_set_object(name, json!([ingress_service()]));
        object["spec"]["cluster"] = json!("prod-eu-1"); // one target cluster for both
        object["spec"]["provider"]["config"] = json!({"priority": priority});
        object
    };

    // Throughout, at most one HelmRelease exists for the release (sampled every 20 ms).
    let never_two = async {
        loop {
            let owners = releases(&t).await;
            assert!(owners.len() <= 1, "two HelmReleases for one release: {owners:?}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        () = never_two => unreachable!(),
        () = hand_over(&t, with_priority) => {}
    }
}

async fn hand_over(t: &Scenario, with_priority: impl Fn(&str, i64) -> Value) {
    // The first ServiceSet has the release to itself.
    t.create(with_priority("team-low", 100)).await;
    t.wait_converged("team-low").await;

    // Flux holds the first HelmRelease while it uninstalls (its finalizer).
    let held = t.child_ref("team-low", "ingress-nginx").await;
    t.merge_patch(&held, json!({"metadata": {"finalizers": [FLUX_FINALIZER]}})).await;

    // A higher priority arrives: the first one gives the release up and says who won...
    t.create(with_priority("team-high", 200)).await;
    let high = t.service_set("team-high");
    let low = t
        .wait_service_set("team-low", "ingress-nginx Failed, naming the winner", |ss| {
            service_state(ss, "ingress-nginx") == Some("Failed")
        })
        .await;
    let message = service(&low, "ingress-nginx").unwrap()["failureMessage"].as_str().unwrap_or_default().to_string();
    let winner = format!(r#"conflicts with {}/team-high service "ingress-nginx" (priority 200)"#, t.namespace());
    assert!(message.starts_with(&winner), "{message:?} should start with {winner:?}");
    t.wait_object("the loser's HelmRelease being deleted", &held, WAIT, is_deleting).await;

    // ...and the winner applies nothing while the loser's HelmRelease still exists.
    let waiting = t
        .wait_service_set("team-high", "ingress-nginx Pending, waiting for the loser", |ss| {
            service_state(ss, "ingress-nginx") == Some("Pending")
                && service(ss, "ingress-nginx")
                    .is_some_and(|s| s.get("failureMessage").is_none() && service_note(s).starts_with("waiting for"))
        })
        .await;
    eprintln!("winner waits: {}", service_note(service(&waiting, "ingress-nginx").unwrap()));
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(t.children("team-high").await.is_empty(), "no second HelmRelease while the first exists");

    // Flux finishes: the winner takes the release.
    t.clear_finalizers(&held).await;
    t.wait_gone(&held, WAIT).await;
    t.wait_converged("team-high").await;
    assert_eq!(releases(t).await, ["team-high"], "one HelmRelease for the release");

    // The winner goes: once its HelmRelease is gone (Flux holds it a while), the other takes
    // over without anyone touching it.
    let high_release = t.child_ref("team-high", "ingress-nginx").await;
    t.merge_patch(&high_release, json!({"metadata": {"finalizers": [FLUX_FINALIZER]}})).await;
    t.delete(&high).await;
    t.wait_object("the winner's HelmRelease being deleted", &high_release, WAIT, is_deleting).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(t.children("team-low").await.is_empty(), "the loser waits until the winner's HelmRelease is gone");
    t.clear_finalizers(&high_release).await;
    t.wait_gone(&high, WAIT).await;
    t.wait_converged("team-low").await;
    t.wait_service_set("team-low", "ingress-nginx no longer Failed", |ss| {
        service_state(ss, "ingress-nginx").is_some_and(|s| s != "Failed")
    })
    .await;
    assert_eq!(releases(t).await, ["team-low"]);
}

/// The ServiceSets owning a HelmRelease of release `ingress-nginx` in the test namespace.
async fn releases(t: &Scenario) -> Vec<String> {
    let releases: Vec<Value> = t.list(Kind::HelmRelease, t.namespace(), "").await;
    releases
        .iter()
        .filter(|r| r["spec"]["releaseName"] == "ingress-nginx")
        .map(|r| {
            r["metadata"]["labels"]["ksm.k0rdent.mirantis.com/serviceset"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}
