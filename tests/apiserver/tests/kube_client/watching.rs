use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::runtime::watcher::Event;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::common::{next, start};

fn config_map(name: &str) -> ConfigMap {
    ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
}

/// The next watcher event that is not an error (a dropped or expired watch surfaces as an error first).
async fn next_event<S>(stream: &mut S) -> Event<ConfigMap>
where
    S: futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin,
{
    loop {
        if let Ok(event) = next(stream).await {
            return event;
        }
    }
}

/// Skips the initial list (Init, InitApply*, InitDone) and returns the names it applied.
async fn initial_list<S>(stream: &mut S) -> Vec<String>
where
    S: futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin,
{
    assert!(matches!(next_event(stream).await, Event::Init), "a (re-)list starts with Init");
    let mut names = Vec::new();
    loop {
        match next_event(stream).await {
            Event::InitApply(cm) => names.push(cm.name_any()),
            Event::InitDone => return names,
            other => panic!("unexpected {other:?} during the initial list"),
        }
    }
}

#[tokio::test]
async fn watcher_sees_added_modified_deleted() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &config_map("before")).await.unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert_eq!(initial_list(&mut events).await, ["before"]);

    cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Apply(cm) if cm.name_any() == "a"));
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "v"}}))).await.unwrap();
    assert!(
        matches!(next_event(&mut events).await, Event::Apply(cm) if cm.data.as_ref().is_some_and(|d| d["k"] == "v"))
    );
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Delete(cm) if cm.name_any() == "a"));
}

#[tokio::test]
async fn label_selected_watch_turns_label_changes_into_added_and_deleted() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut events = watcher(cms.clone(), watcher::Config::default().labels("app=web")).boxed();
    assert!(initial_list(&mut events).await.is_empty());
    cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Apply(cm) if cm.name_any() == "a"));
    cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Delete(cm) if cm.name_any() == "a"));
}

#[tokio::test]
async fn expired_resource_version_makes_the_watcher_relist() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert_eq!(initial_list(&mut events).await, ["a"]);

    server.compact_history();
    assert_eq!(initial_list(&mut events).await, ["a"], "410 Gone leads to a re-list");
    assert!(server.requests().get("list", "configmaps") >= 2);

    // A raw watch from the old resourceVersion gets the 410 ERROR event.
    let mut raw = cms.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    match next(&mut raw).await.unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }

    cms.create(&PostParams::default(), &config_map("b")).await.unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Apply(cm) if cm.name_any() == "b"));
}

#[tokio::test]
async fn bookmarks_carry_the_current_resource_version() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let created = cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    let mut stream = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    assert!(matches!(next(&mut stream).await.unwrap(), WatchEvent::Added(cm) if cm.name_any() == "a"));
    match next(&mut stream).await.unwrap() {
        WatchEvent::Bookmark(b) => assert_eq!(Some(b.metadata.resource_version), created.resource_version()),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_timeout_ends_the_stream() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut stream = cms.watch(&WatchParams::default().timeout(1).disable_bookmarks(), "0").await.unwrap().boxed();
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.expect("the watch ends within 5s");
    assert!(end.is_none());
}

#[tokio::test]
async fn dropped_watches_are_resumed_by_the_watcher() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert!(initial_list(&mut events).await.is_empty());
    // The watcher only requests while polled: an event received proves its watch is open.
    cms.create(&PostParams::default(), &config_map("before-drop")).await.unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Apply(cm) if cm.name_any() == "before-drop"));
    assert_eq!(server.requests().get("watch", "configmaps"), 1);
    server.drop_watches();
    cms.create(&PostParams::default(), &config_map("after-drop")).await.unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Apply(cm) if cm.name_any() == "after-drop"));
    assert_eq!(server.requests().get("watch", "configmaps"), 2, "the watcher re-watched");
    assert_eq!(server.requests().get("list", "configmaps"), 1, "resumed from its resourceVersion, no re-list");
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_then_changes() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert_eq!(initial_list(&mut events).await, ["a"]);
    cms.create(&PostParams::default(), &config_map("b")).await.unwrap();
    assert!(matches!(next_event(&mut events).await, Event::Apply(cm) if cm.name_any() == "b"));
}

#[tokio::test]
async fn resource_versions_beyond_the_history_window_are_gone() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let created = cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    let mut stored = server.object("v1", "ConfigMap", Some("default"), "a").unwrap();
    for i in 0..10_001 {
        stored["data"] = json!({"i": i.to_string()});
        server.put_object(stored.clone()).unwrap();
    }
    let mut raw = cms.watch(&WatchParams::default(), &created.resource_version().unwrap()).await.unwrap().boxed();
    assert!(matches!(next(&mut raw).await.unwrap(), WatchEvent::Error(status) if status.code == 410));
    let recent = (created.resource_version().unwrap().parse::<u64>().unwrap() + 9_999).to_string();
    let mut raw = cms.watch(&WatchParams::default(), &recent).await.unwrap().boxed();
    assert!(
        matches!(next(&mut raw).await.unwrap(), WatchEvent::Modified(cm) if cm.data.as_ref().is_some_and(|d| d["i"] == "9999"))
    );
}

#[tokio::test]
async fn metadata_only_watcher_gets_objects() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &config_map("a")).await.unwrap();
    let metas: Api<kube::core::PartialObjectMeta<ConfigMap>> = Api::default_namespaced(client);
    let mut events = watcher(metas, watcher::Config::default()).boxed();
    assert!(matches!(next(&mut events).await.unwrap(), Event::Init));
    assert!(matches!(next(&mut events).await.unwrap(), Event::InitApply(meta) if meta.name_any() == "a"));
}
