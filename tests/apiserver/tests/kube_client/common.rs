//! Shared set-up: a server with the test CRD and a kube-rs client for it.

use std::time::Duration;

use futures::{Stream, StreamExt};
use ksm_test_apiserver::TestApiServer;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client, Config};
use serde_json::Value;

/// The `widgets.example.com` CRD from testdata.
pub fn widget_crd() -> Value {
    serde_norway::from_str(include_str!("../../testdata/widgets.example.com.yaml")).expect("valid CRD YAML")
}

/// A server with the widget CRD and a client whose default namespace is `default`.
pub async fn start() -> (TestApiServer, Client) {
    let server = TestApiServer::start(vec![widget_crd()]).await.expect("server starts");
    let mut config = Config::new(server.url().parse().expect("valid URL"));
    config.default_namespace = "default".into();
    let client = Client::try_from(config).expect("client");
    (server, client)
}

pub fn widget_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", version, "Widget"), "widgets")
}

pub fn widgets(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &widget_resource("v1"))
}

/// A widget object with the given name and spec.
pub fn widget(name: &str, spec: Value) -> DynamicObject {
    let mut w = DynamicObject::new(name, &widget_resource("v1"));
    w.data = serde_json::json!({ "spec": spec });
    w
}

/// The API error code of a failed call.
pub fn code<T: std::fmt::Debug>(result: kube::Result<T>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The next item of a stream, failing the test after 10 s.
pub async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("stream item within 10s")
        .expect("stream open")
}
