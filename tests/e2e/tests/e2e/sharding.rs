//! Scenario 16: two shards (`--shard-selector`) split the ServiceSets of one provider; a shard
//! never touches the other's. The chart's shards, started with the arguments Helm renders for
//! them, serve every ServiceSet exactly once.

use ksm_e2e::{Scenario, chart};
use ksm_test_harness::adapter::http_get;
use ksm_test_harness::fixtures::two_services;
use ksm_test_harness::status::has_finalizer;
use ksm_test_harness::{Adapter, Mode, WAIT};
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

/// The shards as the chart starts them (`sharding.shards` > 1, rendered by Helm through
/// `.ci/helm-check.py`; shard 0 in manage mode writes the SMP status the others read): every
/// ServiceSet — labelled for a shard, for none, for shard 0 or for a shard that does not exist —
/// is served by exactly one shard, the one its label names (else shard 0).
#[tokio::test(flavor = "multi_thread")]
async fn the_charts_shards_serve_every_service_set_exactly_once() {
    let (key, shards) = chart::sharded();
    assert!(shards.len() >= 3, "the chart's sharded render has {} shards: {shards:?}", shards.len());
    let t = Scenario::start_with("chart-shards", shards[0].mode, &shards[0].args()).await;
    let others: Vec<Adapter> =
        shards[1..].iter().map(|shard| Adapter::start_with(&t, shard.mode, &shard.args())).collect();
    let hosts: Vec<&Adapter> = std::iter::once(t.adapter()).chain(&others).collect();

    // (ServiceSet, its shard label, the shard that must serve it)
    let mut cases = vec![
        ("unlabelled".to_string(), None, 0),
        ("shard-zero".to_string(), Some("shard-0".to_string()), 0),
        ("no-such-shard".to_string(), Some(format!("shard-{}", shards.len())), 0),
    ];
    cases.extend((1..shards.len()).map(|i| (format!("for-shard-{i}"), Some(format!("shard-{i}")), i)));
    for (name, label, _) in &cases {
        let mut service_set = t.service_set_object(name, two_services());
        if let Some(value) = label {
            service_set["metadata"]["labels"][&key] = json!(value);
        }
        t.create(service_set).await;
    }
    for (name, _, _) in &cases {
        t.wait_converged(name).await;
    }
    // Each host counts the ServiceSets it serves (ksm_servicesets, from its shard's cache): the
    // counts are the cases of each shard, so no ServiceSet is served twice or by the wrong shard.
    for (shard, host) in hosts.iter().enumerate() {
        let expected = cases.iter().filter(|(_, _, s)| *s == shard).count();
        let desc = format!("shard {shard} ({}) serves {expected} ServiceSets", shards[shard].name);
        t.wait_for(&desc, WAIT, async || match served(host).await {
            n if n == expected => Ok(()),
            n => Err(json!(n)),
        })
        .await;
    }
}

/// How many ServiceSets `host` serves, by its `ksm_servicesets` gauges.
async fn served(host: &Adapter) -> usize {
    let (code, text) = http_get(&format!("{}/metrics", host.metrics_url())).await;
    assert_eq!(code, 200, "/metrics answered {code}: {text}");
    let counts = text.lines().filter(|line| line.starts_with("ksm_servicesets{"));
    counts.filter_map(|line| line.rsplit_once(' ')?.1.parse::<usize>().ok()).sum()
}
