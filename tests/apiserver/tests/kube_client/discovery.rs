use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use ksm_test_apiserver::TestApiServer;
use kube::api::{DeleteParams, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope, verbs};
use kube::{Api, Client, Config};
use serde_json::json;

use crate::common::{code, start, widget};

#[tokio::test]
async fn discovery_lists_builtin_and_crd_kinds() {
    let (_server, client) = start().await;
    assert_eq!(client.apiserver_version().await.unwrap().minor, "33");
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (widget, caps) = discovery.resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget")).unwrap();
    assert_eq!(widget.plural, "widgets");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.supports_operation(verbs::WATCH) && caps.supports_operation(verbs::PATCH));
    assert!(caps.subresources.iter().any(|(sub, _)| sub.plural == "status"));
    assert!(discovery.resolve_gvk(&GroupVersionKind::gvk("example.com", "v1beta1", "Widget")).is_some());
    let (crd, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"))
        .unwrap();
    assert_eq!((crd.plural.as_str(), caps.scope), ("customresourcedefinitions", Scope::Cluster));
    for (group, version, kind) in [
        ("", "v1", "ConfigMap"),
        ("", "v1", "Namespace"),
        ("apps", "v1", "Deployment"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("events.k8s.io", "v1", "Event"),
    ] {
        assert!(discovery.resolve_gvk(&GroupVersionKind::gvk(group, version, kind)).is_some(), "{kind}");
    }
}

#[tokio::test]
async fn crd_created_through_the_api_is_served_at_once_and_deleting_it_removes_objects() {
    let server = TestApiServer::start(Vec::new()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    let widgets = crate::common::widgets(&client);
    assert_eq!(code(widgets.get("w").await), 404);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .create(&PostParams::default(), &serde_json::from_value(crate::common::widget_crd()).unwrap())
        .await
        .unwrap();
    let established = crd.status.unwrap().conditions.unwrap();
    assert!(established.iter().any(|c| c.type_ == "Established" && c.status == "True"));
    widgets.create(&PostParams::default(), &widget("w", json!({"size": 1}))).await.unwrap();
    crds.delete("widgets.example.com", &DeleteParams::default()).await.unwrap();
    assert!(server.object("example.com/v1", "Widget", Some("default"), "w").is_none());
    assert_eq!(code(widgets.get("w").await), 404);
    let bad = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "wrong"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"}, "versions": [{"name": "v1", "served": true, "storage": true}]}});
    assert_eq!(code(crds.create(&PostParams::default(), &serde_json::from_value(bad).unwrap()).await), 422);
}

#[tokio::test]
async fn kubeconfig_points_a_client_at_the_server() {
    let (server, _) = start().await;
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
    assert_eq!(config.cluster_url.to_string().trim_end_matches('/'), server.url());
    let client = Client::try_from(config).unwrap();
    assert_eq!(client.default_namespace(), "default");
    client.apiserver_version().await.unwrap();
}

#[tokio::test]
async fn self_subject_access_reviews_are_allowed_unless_denied() {
    let (server, client) = start().await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client);
    let review = |verb: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some("example.com".into()),
                resource: Some("widgets".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    server.deny("delete", "example.com", "widgets");
    let allowed = reviews.create(&PostParams::default(), &review("patch")).await.unwrap();
    assert!(allowed.status.unwrap().allowed);
    let denied = reviews.create(&PostParams::default(), &review("delete")).await.unwrap();
    assert!(!denied.status.unwrap().allowed);

    // The permissions asked about are recorded, by who asked (no Impersonate-User here).
    let asked: Vec<(String, String, String, usize)> = server
        .access_reviews()
        .into_iter()
        .map(|(a, n)| (a.user, a.verb, format!("{}/{}", a.group, a.resource), n))
        .collect();
    let widgets = |verb: &str| (String::new(), verb.to_string(), "example.com/widgets".to_string(), 1);
    assert_eq!(asked, vec![widgets("delete"), widgets("patch")]);
}

#[tokio::test]
async fn dropping_the_server_closes_connections() {
    let (server, client) = start().await;
    client.apiserver_version().await.unwrap();
    drop(server);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(client.apiserver_version().await.is_err());
}
