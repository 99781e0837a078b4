use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::common::{code, start, widget, widget_resource, widgets};

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}

#[tokio::test]
async fn config_map_crud() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let created = cms.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.namespace().as_deref(), Some("default"));
    assert_eq!(code(cms.create(&PostParams::default(), &config_map("a", &[])).await), 409);

    let mut fetched = cms.get("a").await.unwrap();
    assert_eq!(fetched.resource_version(), created.resource_version());
    fetched.data.as_mut().unwrap().insert("k".into(), "v2".into());
    let replaced = cms.replace("a", &PostParams::default(), &fetched).await.unwrap();
    let rv = |o: &ConfigMap| o.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(rv(&replaced) > rv(&created));
    assert_eq!(code(cms.replace("a", &PostParams::default(), &fetched).await), 409, "stale resourceVersion");

    let patched =
        cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"extra": "1"}}))).await.unwrap();
    assert_eq!(patched.data.unwrap().get("extra").map(String::as_str), Some("1"));
    let noop = cms.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"extra": "1"}}))).await.unwrap();
    assert_eq!(
        noop.resource_version(),
        cms.get("a").await.unwrap().resource_version(),
        "no-op keeps the resourceVersion"
    );

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(cms.get("a").await), 404);
    assert_eq!(code(cms.delete("a", &DeleteParams::default()).await), 404);
}

#[tokio::test]
async fn widget_generation_and_status_subresource() {
    let (server, client) = start().await;
    let api = widgets(&client);
    let mut w = widget("w", json!({"size": 1}));
    w.data["status"] = json!({"phase": "ignored on create"});
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.data.get("status").is_none());

    let status = json!({"spec": {"size": 99}, "status": {"phase": "Ready"}});
    let after_status = api.patch_status("w", &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    assert_eq!(after_status.data["status"]["phase"], "Ready");
    assert_eq!(after_status.data["spec"]["size"], 1, "status writes ignore spec");
    assert_eq!(after_status.metadata.generation, Some(1), "status writes keep the generation");

    let labelled = api
        .patch("w", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1), "metadata changes keep the generation");
    let mut main = labelled.clone();
    main.data["spec"]["size"] = json!(2);
    main.data["status"] = json!({"phase": "overwritten?"});
    let replaced = api.replace("w", &PostParams::default(), &main).await.unwrap();
    assert_eq!(replaced.metadata.generation, Some(2), "spec change bumps the generation");
    assert_eq!(replaced.data["status"]["phase"], "Ready", "main-resource writes keep status");

    let mut status_body = replaced.clone();
    status_body.data["status"]["phase"] = json!("Done");
    let replaced_status = api.replace_status("w", &PostParams::default(), &status_body).await.unwrap();
    assert_eq!(replaced_status.data["status"]["phase"], "Done");
    assert_eq!(code(api.replace_status("w", &PostParams::default(), &status_body).await), 409);

    let other_version: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client, "default", &widget_resource("v1beta1"));
    assert_eq!(other_version.get("w").await.unwrap().types.unwrap().api_version, "example.com/v1beta1");
    let stored = server.object("example.com/v1", "Widget", Some("default"), "w").unwrap();
    assert_eq!(stored["status"]["phase"], "Done");
}

#[tokio::test]
async fn put_object_writes_status_like_flux() {
    let (server, client) = start().await;
    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("w", json!({"size": 1}))).await.unwrap();
    let mut stored = server.object("example.com/v1", "Widget", Some("default"), "w").unwrap();
    stored["status"] = json!({"phase": "Reconciled"});
    let put = server.put_object(stored).unwrap();
    assert_eq!(put["metadata"]["generation"], 1);
    let fetched = api.get("w").await.unwrap();
    assert_eq!(fetched.data["status"]["phase"], "Reconciled");
    assert_eq!(fetched.metadata.resource_version.as_deref(), put["metadata"]["resourceVersion"].as_str());
    let new = server
        .put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}}))
        .unwrap();
    assert_eq!(new["metadata"]["generation"], 1);
    assert!(server.put_object(json!({"apiVersion": "nope/v1", "kind": "Nope", "metadata": {"name": "x"}})).is_err());
}

#[tokio::test]
async fn list_with_label_and_field_selectors() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for (name, labels) in
        [("web", vec![("app", "web")]), ("db", vec![("app", "db"), ("tier", "back")]), ("none", vec![])]
    {
        cms.create(&PostParams::default(), &config_map(name, &labels)).await.unwrap();
    }
    Api::<ConfigMap>::namespaced(client.clone(), "other")
        .create(&PostParams::default(), &config_map("web", &[("app", "web")]))
        .await
        .unwrap();
    let names = |list: kube::core::ObjectList<ConfigMap>| list.items.iter().map(|c| c.name_any()).collect::<Vec<_>>();
    let select = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(cms.list(&select("app=web")).await.unwrap()), ["web"]);
    assert_eq!(names(cms.list(&select("app in (web,db)")).await.unwrap()), ["db", "web"]);
    assert_eq!(names(cms.list(&select("app notin (web),!tier")).await.unwrap()), ["none"]);
    assert_eq!(names(cms.list(&select("app!=web,tier")).await.unwrap()), ["db"]);
    assert_eq!(names(cms.list(&ListParams::default().fields("metadata.name=db")).await.unwrap()), ["db"]);
    let all: Api<ConfigMap> = Api::all(client);
    let everywhere = all.list(&select("app=web")).await.unwrap();
    assert_eq!(everywhere.items.len(), 2);
    assert!(everywhere.metadata.resource_version.is_some_and(|rv| !rv.is_empty()));
    assert_eq!(names(all.list(&ListParams::default().fields("metadata.namespace=other")).await.unwrap()), ["web"]);
}

/// kube's watcher lists in pages of 500, as a real API server serves them: a list with `limit`
/// returns at most that many and a `continue` token, and the pages together hold every object
/// once, in order, with the label selector applied.
#[tokio::test]
async fn lists_are_paged_with_limit_and_continue() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..7 {
        let labels: &[(&str, &str)] = if i == 3 { &[] } else { &[("paged", "yes")] };
        cms.create(&PostParams::default(), &config_map(&format!("cm-{i}"), labels)).await.unwrap();
    }
    let (mut names, mut token, mut pages, mut first_rv) = (Vec::new(), None::<String>, 0, None);
    loop {
        let mut params = ListParams::default().labels("paged=yes").limit(2);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = cms.list(&params).await.unwrap();
        assert!(page.items.len() <= 2, "a page holds at most the limit");
        if pages == 0 {
            // A change between pages: a watch from the list's resourceVersion must still see it.
            cms.patch("cm-0", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "changed"}}))).await.unwrap();
            first_rv = page.metadata.resource_version.clone();
        }
        assert_eq!(page.metadata.resource_version, first_rv, "every page carries the list's resourceVersion");
        names.extend(page.items.iter().map(|cm| cm.name_any()));
        pages += 1;
        match page.metadata.continue_ {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => break,
        }
    }
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-4", "cm-5", "cm-6"]);
    assert_eq!(pages, 3);
    assert_eq!(cms.list(&ListParams::default()).await.unwrap().items.len(), 7, "no limit: one page");
}
