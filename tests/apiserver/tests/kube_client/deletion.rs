use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::common::{code, start, widget, widget_resource, widgets};

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (server, client) = start().await;
    let api = widgets(&client);
    let mut w = widget("w", json!({"size": 1}));
    w.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();

    let deleting =
        api.delete("w", &DeleteParams::default()).await.unwrap().left().expect("object while finalizers remain");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(deleting.metadata.generation, Some(2));
    let still = api.get("w").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());

    api.patch("w", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    assert_eq!(code(api.get("w").await), 404);
    assert!(server.object("example.com/v1", "Widget", Some("default"), "w").is_none());
}

#[tokio::test]
async fn removing_an_owner_deletes_its_dependents() {
    let (server, client) = start().await;
    let api = widgets(&client);
    let owner = api.create(&PostParams::default(), &widget("owner", json!({}))).await.unwrap();
    let owner_ref = owner.controller_owner_ref(&widget_resource("v1")).unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let dependent = |name: &str, finalizers: Option<Vec<String>>| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(vec![owner_ref.clone()]),
            finalizers,
            ..Default::default()
        },
        ..Default::default()
    };
    let child = cms.create(&PostParams::default(), &dependent("child", None)).await.unwrap();
    cms.create(&PostParams::default(), &dependent("held", Some(vec!["x/y".into()]))).await.unwrap();
    let mut grandchild = widget("grandchild", json!({}));
    grandchild.metadata.owner_references = Some(vec![child.controller_owner_ref(&()).unwrap()]);
    api.create(&PostParams::default(), &grandchild).await.unwrap();
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta { name: Some("unrelated".into()), ..Default::default() },
            ..Default::default()
        },
    )
    .await
    .unwrap();

    api.delete("owner", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(cms.get("child").await), 404);
    assert_eq!(code(api.get("grandchild").await), 404);
    assert!(cms.get("held").await.unwrap().metadata.deletion_timestamp.is_some(), "finalizers hold dependents too");
    cms.get("unrelated").await.unwrap();

    let orphaned_owner = api.create(&PostParams::default(), &widget("owner2", json!({}))).await.unwrap();
    let mut orphan =
        ConfigMap { metadata: ObjectMeta { name: Some("orphan".into()), ..Default::default() }, ..Default::default() };
    orphan.meta_mut().owner_references =
        Some(vec![orphaned_owner.controller_owner_ref(&widget_resource("v1")).unwrap()]);
    cms.create(&PostParams::default(), &orphan).await.unwrap();
    api.delete("owner2", &DeleteParams::orphan()).await.unwrap();
    assert!(server.object("v1", "ConfigMap", Some("default"), &orphan.name_any()).is_some());
}
