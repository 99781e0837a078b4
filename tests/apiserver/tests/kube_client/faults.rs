use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{start, widget, widgets};

#[tokio::test]
async fn injected_failures_then_success() {
    let (server, client) = start().await;
    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("w", json!({"size": 1}))).await.unwrap();
    server.fail_next("patch", 2, 500);
    let patch = Patch::Merge(json!({"spec": {"size": 2}}));
    for _ in 0..2 {
        match api.patch("w", &PatchParams::default(), &patch).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(
                    (status.code, status.reason.as_str(), format!("{:?}", status.status)),
                    (500, "InternalError", "Some(Failure)".into())
                );
            }
            other => panic!("expected an injected 500, got {other:?}"),
        }
    }
    assert_eq!(api.patch("w", &PatchParams::default(), &patch).await.unwrap().data["spec"]["size"], 2);
    assert_eq!(server.requests().get("patch", "widgets"), 3, "failed requests are counted too");

    server.fail_next("get", 1, 409);
    assert!(matches!(api.get("w").await, Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "Conflict"));
    api.get("w").await.unwrap();
}

#[tokio::test]
async fn too_many_requests_carry_retry_after() {
    let (server, client) = start().await;
    // kube-rs retries 429 by default: the first list fails, the retry succeeds.
    server.fail_next("list", 1, 429);
    Api::<ConfigMap>::default_namespaced(client).list(&ListParams::default()).await.unwrap();
    assert_eq!(server.requests().get("list", "configmaps"), 2);

    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    server.fail_next("list", 1, 429);
    let request = http::Request::get("/api/v1/namespaces/default/configmaps").body(Vec::new()).unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
}

#[tokio::test]
async fn requests_are_counted_by_verb_and_resource() {
    let (server, client) = start().await;
    let api = widgets(&client);
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &widget("w", json!({}))).await.unwrap();
    server.reset_counts();
    api.get("w").await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
    api.patch_status("w", &PatchParams::default(), &Patch::Merge(json!({"status": {"ok": true}}))).await.unwrap();
    let mut w = api.get("w").await.unwrap();
    w.data["status"] = json!({"ok": false});
    api.replace_status("w", &PostParams::default(), &w).await.unwrap();
    cms.create(
        &PostParams::default(),
        &ConfigMap { metadata: ObjectMeta { name: Some("c".into()), ..Default::default() }, ..Default::default() },
    )
    .await
    .unwrap();
    let counts = server.requests();
    assert_eq!(counts.get("get", "widgets"), 2);
    assert_eq!(counts.get("list", "widgets"), 1);
    assert_eq!(counts.get("patch", "widgets/status"), 1);
    assert_eq!(counts.get("update", "widgets/status"), 1);
    assert_eq!(counts.get("create", "configmaps"), 1);
    assert_eq!(counts.verb("get"), 2);
    assert_eq!(counts.iter().map(|(_, _, n)| n).sum::<usize>(), 6);
    server.reset_counts();
    assert_eq!(server.requests().iter().count(), 0);
}

#[tokio::test]
async fn accesses_are_recorded_by_impersonated_user_group_and_namespace() {
    let (server, client) = start().await;
    let mut config = kube::Config::new(server.url().parse().expect("valid URL"));
    config.auth_info.impersonate = Some("system:serviceaccount:default:ctl".into());
    let impersonating = kube::Client::try_from(config).expect("client");
    widgets(&client).create(&PostParams::default(), &widget("w", json!({}))).await.unwrap();
    server.reset_counts();

    let api = widgets(&impersonating);
    api.get("w").await.unwrap();
    api.patch_status("w", &PatchParams::default(), &Patch::Merge(json!({"status": {"ok": true}}))).await.unwrap();
    Api::<ConfigMap>::all(impersonating.clone()).list(&ListParams::default()).await.unwrap();
    widgets(&client).get("w").await.unwrap();

    let seen: Vec<_> = server
        .accesses()
        .into_iter()
        .map(|(a, n)| {
            (a.user, a.verb, a.group, a.resource, a.subresource, a.namespace, a.non_resource_path.is_some(), n)
        })
        .collect();
    let ctl = "system:serviceaccount:default:ctl";
    let row = |user: &str, verb: &str, group: &str, resource: &str, sub: Option<&str>, ns: Option<&str>| {
        let text = |s: &str| s.to_string();
        (text(user), text(verb), text(group), text(resource), sub.map(text), ns.map(text), false, 1)
    };
    assert_eq!(
        seen,
        vec![
            row("", "get", "example.com", "widgets", None, Some("default")),
            row(ctl, "get", "example.com", "widgets", None, Some("default")),
            row(ctl, "list", "", "configmaps", None, None),
            row(ctl, "patch", "example.com", "widgets", Some("status"), Some("default")),
        ]
    );
    server.reset_counts();
    assert!(server.accesses().is_empty());
}
