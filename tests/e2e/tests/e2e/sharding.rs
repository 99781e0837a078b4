//! Scenario 16: two shards (`--shard-selector`) split the ServiceSets of one provider; a shard
//! never touches the other's.

use ksm_e2e::fixtures::two_services;
use ksm_e2e::status::has_finalizer;
use ksm_e2e::{Mode, Scenario};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn two_shards_never_touch_each_others_service_sets() {
    let t = Scenario::start_with("sharding", Mode::Observe, &["--shard-selector", "shard=a"]).await;
    for (name, shard) in [("web-a", "a"), ("web-b", "b")] {
        let mut service_set = t.service_set_object(name, two_services());
        service_set["metadata"]["labels"]["shard"] = json!(shard);
        t.create(service_set).await;
    }
    t.wait_converged("web-a").await;
    // Shard a has had time to see web-b (same watch, same provider) and must leave it alone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let untouched = t.must_get(&t.service_set("web-b")).await;
    assert!(!has_finalizer(&untouched, &t.host_finalizer()), "shard a took web-b: {untouched:#}");
    assert!(untouched.get("status").is_none_or(|s| s.is_null()), "shard a wrote web-b's status: {untouched:#}");
    assert!(t.children("web-b").await.is_empty(), "shard a applied web-b's children");

    let _shard_b = t.start_another_adapter(&["--shard-selector", "shard=b"]);
    t.wait_converged("web-b").await;
    t.wait_converged("web-a").await;
}
