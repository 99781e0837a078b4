//! A mocked API server for the I/O layer's unit tests, as kube-rs's controller-rs tests do: a
//! `tower` service that answers each request from a table of routes and records what it was
//! asked, behind a real [`kube::Client`].

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// The requests a mocked API server received, as `METHOD path?query`.
pub type Asked = Arc<Mutex<Vec<String>>>;

/// A client whose API server answers `METHOD path` (query left out) with `routes`' status and
/// JSON body, or 404 when `routes` has no answer.
pub fn client(routes: impl Fn(&str) -> Option<(u16, Value)> + Send + Sync + 'static) -> (Client, Asked) {
    let (asked, routes) = (Asked::default(), Arc::new(routes));
    let recorded = asked.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let line = format!("{} {}", request.method(), request.uri().path());
        recorded
            .lock()
            .unwrap()
            .push(format!("{line}{}", request.uri().query().map(|q| format!("?{q}")).unwrap_or_default()));
        let (status, body) = routes(&line).unwrap_or_else(|| (404, not_found(&line)));
        let response = Response::builder().status(status).body(Body::from(body.to_string().into_bytes()));
        async move { Ok::<_, Infallible>(response.unwrap()) }
    });
    (Client::new(service, "default"), asked)
}

/// The API server's 404 Status.
pub fn not_found(what: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": format!("{what} not found"),
           "reason": "NotFound", "code": 404})
}
