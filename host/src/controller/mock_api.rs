//! A mocked API server for the I/O layer's unit tests, as kube-rs's controller-rs tests do: a
//! `tower` service behind a real [`kube::Client`] that either answers each request from a table
//! of routes and records what it was asked ([`client`]), or hands each request to the test to
//! check and answer in order ([`scenario`]).

use crate::plan::children::MANAGED_LABEL;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;

/// The requests a mocked API server received, as `METHOD path?query`.
pub type Log = Arc<Mutex<Vec<String>>>;

/// A client whose API server answers `METHOD path` (query left out) with `routes`' status and
/// JSON body, or 404 when `routes` has no answer.
pub fn client(routes: impl Fn(&str) -> Option<(u16, Value)> + Send + Sync + 'static) -> (Client, Log) {
    client_answering_after(Duration::ZERO, routes)
}

/// [`client`], its API server answering each request `delay` after it came: a remote cluster's
/// round trip.
pub fn client_answering_after(
    delay: Duration,
    routes: impl Fn(&str) -> Option<(u16, Value)> + Send + Sync + 'static,
) -> (Client, Log) {
    let (asked, routes) = (Log::default(), Arc::new(routes));
    let recorded = asked.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let line = format!("{} {}", request.method(), request.uri().path());
        recorded
            .lock()
            .unwrap()
            .push(format!("{line}{}", request.uri().query().map(|q| format!("?{q}")).unwrap_or_default()));
        let (status, body) = routes(&line).unwrap_or_else(|| (404, not_found(&line)));
        let response = respond(status, &body);
        async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok::<_, Infallible>(response)
        }
    });
    (Client::new(service, "default"), asked)
}

/// The API server's 404 Status.
pub fn not_found(what: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": format!("{what} not found"),
           "reason": "NotFound", "code": 404})
}

/// A request and where its answer goes.
type Exchange = (Request<Body>, oneshot::Sender<Response<Body>>);

/// How long a scenario waits for the round's next request before it fails the test.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long the round must stay quiet after the scenario's last expected request.
const QUIET: Duration = Duration::from_millis(300);

/// A client whose API server verifies the requests of one scenario, in order, as kube-rs
/// controller-rs's `fixtures.rs` does: the test takes each request the round makes from the
/// [`Scenario`], checks it and answers it. The caches' own requests are no part of the scenario:
/// their lists are answered at once from `held`, `(collection path, object)` pairs of what the
/// cluster holds, and their watches never answer.
pub fn scenario(held: Vec<(&str, Value)>) -> (Client, Scenario) {
    let (requests, received) = mpsc::unbounded_channel::<Exchange>();
    let held: Arc<Vec<(String, Value)>> = Arc::new(held.into_iter().map(|(p, o)| (p.to_string(), o)).collect());
    let service = tower::service_fn(move |request: Request<Body>| {
        let (answer, answered) = oneshot::channel();
        let query = request.uri().query().unwrap_or_default();
        // kube's watcher pages its lists (`limit`), then watches; the round does neither.
        let (watch, list) = (query.contains("watch=true"), query.contains("limit="));
        if list {
            let _ = answer.send(respond(200, &listed(&held, request.uri().path(), query)));
        } else if !watch {
            let _ = requests.send((request, answer));
        }
        async move {
            match answered.await {
                Ok(response) => Ok::<_, Infallible>(response),
                Err(_) => std::future::pending().await, // a watch: nothing ever changes
            }
        }
    });
    (Client::new(service, "default"), Scenario { received })
}

/// What a cache's list of `path` selecting by `query`'s `labelSelector` gets of `held`: the
/// objects with or without the managed label, as the caches select them.
fn listed(held: &[(String, Value)], path: &str, query: &str) -> Value {
    let managed = |object: &Value| object["metadata"]["labels"][MANAGED_LABEL] == "true";
    let selector = query.split('&').find_map(|p| p.strip_prefix("labelSelector=")).unwrap_or_default();
    let selected = |object: &Value| match selector {
        s if s.ends_with("%21%3Dtrue") => !managed(object),
        s if s.ends_with("%3Dtrue") => managed(object),
        _ => true,
    };
    let items: Vec<&Value> = held.iter().filter(|(at, o)| at == path && selected(o)).map(|(_, o)| o).collect();
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})
}

/// The API server of one scenario (see [`scenario`]).
pub struct Scenario {
    received: mpsc::UnboundedReceiver<Exchange>,
}

impl Scenario {
    /// The round's next request, which must be `method path`. Fails the test when the round
    /// makes another request, or none within [`PATIENCE`].
    pub async fn expect(&mut self, method: &str, path: &str) -> Asked {
        let asked = timeout(PATIENCE, self.next())
            .await
            .unwrap_or_else(|_| panic!("expected {method} {path}, the round asked nothing more"))
            .unwrap_or_else(|| panic!("expected {method} {path}, the client is gone"));
        assert_eq!(format!("{} {}", asked.method, asked.path), format!("{method} {path}"), "query: {}", asked.query);
        asked
    }

    /// The round's next request, which must be `method` and one of `paths` (taken from it): for
    /// requests the round makes in no set order.
    pub async fn expect_one_of(&mut self, method: &str, paths: &mut Vec<String>) -> Asked {
        let asked = timeout(PATIENCE, self.next())
            .await
            .unwrap_or_else(|_| panic!("expected {method} of one of {paths:?}, the round asked nothing more"))
            .unwrap_or_else(|| panic!("expected {method} of one of {paths:?}, the client is gone"));
        let at = paths.iter().position(|p| *p == asked.path && asked.method == method);
        let at =
            at.unwrap_or_else(|| panic!("expected {method} of one of {paths:?}, got {} {}", asked.method, asked.path));
        paths.remove(at);
        asked
    }

    /// Fails the test when the round makes one more request within [`QUIET`].
    pub async fn done(&mut self) {
        if let Ok(Some(asked)) = timeout(QUIET, self.next()).await {
            panic!("unexpected {} {}?{}: {}", asked.method, asked.path, asked.query, asked.body);
        }
    }

    async fn next(&mut self) -> Option<Asked> {
        let (request, answer) = self.received.recv().await?;
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        Some(Asked {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or_default().to_string(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            answer,
        })
    }
}

/// One request of a scenario, to check and answer.
pub struct Asked {
    /// Its method.
    pub method: String,
    /// Its path.
    pub path: String,
    /// Its query, as sent.
    pub query: String,
    /// Its JSON body (`null` without one).
    pub body: Value,
    answer: oneshot::Sender<Response<Body>>,
}

impl Asked {
    /// Answers with `status` and JSON `body`.
    pub fn answer(self, status: u16, body: Value) {
        let _ = self.answer.send(respond(status, &body));
    }

    /// Answers with what was sent, as a new version of the object (what an API server answers to
    /// a write that changed it).
    pub fn accept(self) {
        let mut written = self.body.clone();
        written["metadata"]["resourceVersion"] = json!("2");
        self.answer(200, written);
    }
}

fn respond(status: u16, body: &Value) -> Response<Body> {
    Response::builder().status(status).body(Body::from(body.to_string().into_bytes())).unwrap()
}
