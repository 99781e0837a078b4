//! Events (`controller::plumbing::event_publisher`) against the simulated API server (or a real
//! cluster with `KSM_E2E_KUBECONFIG`): what the series cache decides, as the API server stores
//! it.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use ksm_adapter::controller::plumbing::event_publisher::Events;
use ksm_adapter::plan::events::Note;
use ksm_test_harness::Env;
use ksm_test_harness::env::kubeconfig_client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

/// A Normal `Deployed` note with `message`.
fn deployed(message: &str) -> Note {
    Note { warning: false, reason: "Deployed".into(), message: message.into() }
}

/// The Events of `events` regarding an object named `name`, oldest first, as
/// (metadata.name, note, series.count).
async fn regarding(events: &Api<Event>, name: &str) -> Vec<(String, String, Option<i32>)> {
    let mut listed: Vec<Event> = events.list(&Default::default()).await.expect("listing Events").items;
    listed.retain(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name));
    listed.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
    let row = |e: Event| (e.metadata.name.unwrap_or_default(), e.note.unwrap_or_default(), e.series.map(|s| s.count));
    listed.into_iter().map(row).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_are_a_series_and_a_deleted_event_is_created_again() {
    let env = Env::start("events-series").await;
    let client = kubeconfig_client(env.kubeconfig()).await.expect("a kube client");
    let config_map = ConfigMap {
        metadata: ObjectMeta { name: Some("web".into()), ..ObjectMeta::default() },
        ..ConfigMap::default()
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), env.namespace());
    let object = config_maps.create(&PostParams::default(), &config_map).await.expect("creating the ConfigMap");
    let events = Events::new(client.clone(), "ksm-adapter");
    let api: Api<Event> = Api::namespaced(client.clone(), env.namespace());

    // Three times the same note: one Event, a series of 3.
    for _ in 0..3 {
        events.publish(&object, "Reconcile", &[deployed("all 2 services deployed")]).await;
    }
    let listed = regarding(&api, "web").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let (first, note, count) = listed[0].clone();
    assert!(first.starts_with("web."), "{first}");
    assert_eq!((note.as_str(), count), ("all 2 services deployed", Some(3)));

    // Another note is another Event.
    events.publish(&object, "Reconcile", &[deployed("all 3 services deployed")]).await;
    assert_eq!(regarding(&api, "web").await.len(), 2);

    // The series' Event deleted (expired), its repeat creates a new one.
    api.delete(&first, &DeleteParams::default()).await.expect("deleting the Event");
    events.publish(&object, "Reconcile", &[deployed("all 2 services deployed")]).await;
    let listed = regarding(&api, "web").await;
    let again: Vec<_> = listed.iter().filter(|(_, note, _)| note == "all 2 services deployed").collect();
    assert_eq!(again.len(), 1, "{listed:?}");
    assert!(again[0].0 != first && again[0].2.is_none(), "a new Event, not a series: {again:?}");

    // A cluster-scoped object's Events go to `default`.
    let namespace = Api::<Namespace>::all(client.clone()).get(env.namespace()).await.expect("the test namespace");
    events.publish(&namespace, "Reconcile", &[deployed("cluster-scoped")]).await;
    let in_default = regarding(&Api::namespaced(client, "default"), env.namespace()).await;
    assert_eq!(in_default.len(), 1, "{in_default:?}");
    assert_eq!(in_default[0].1, "cluster-scoped");
}
