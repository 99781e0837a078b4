//! Watch streams: newline-delimited JSON `{"type": ..., "object": ...}` events.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::StreamBody;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::Shared;
use crate::errors::ApiError;
use crate::kinds::Kind;
use crate::selectors::Selector;
use crate::store::{EventType, StoredEvent, Subscription};

/// How often bookmarks are sent when the client asked for them.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// The streamed body of a watch response.
pub(crate) type WatchBody = StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// What one watch connection serves.
pub(crate) struct WatchRequest {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub selector: Selector,
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: the synthetic ADDED events end with a bookmark annotated `k8s.io/initial-events-end`.
    pub initial_events_end: bool,
    pub timeout: Duration,
}

impl WatchRequest {
    /// The line a watcher gets for a stored event, if any: selector transitions become ADDED/DELETED.
    fn line(&self, event: &StoredEvent) -> Option<Bytes> {
        if event.storage != self.kind.storage() || self.namespace.as_ref().is_some_and(|ns| *ns != event.namespace) {
            return None;
        }
        let now = self.selector.matches(&event.object);
        let before = event.previous.as_ref().map_or(now, |p| self.selector.matches(p));
        let event_type = match (event.event_type, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Deleted, _, true) => "DELETED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            _ => return None,
        };
        Some(encode(event_type, &crate::store::rendered(&self.kind, &event.object)))
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut object = json!({
            "apiVersion": self.kind.api_version(),
            "kind": self.kind.kind,
            "metadata": {"resourceVersion": rv.to_string()},
        });
        if initial_events_end {
            object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        encode("BOOKMARK", &object)
    }
}

/// One line of a watch stream, serialized without copying the object.
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    event_type: &'a str,
    object: &'a Value,
}

fn encode(event_type: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&Line { event_type, object }).expect("JSON values serialize");
    line.push(b'\n');
    Bytes::from(line)
}

/// A stream holding a single `ERROR` event (used for 410 Gone).
pub(crate) fn error_body(error: &ApiError) -> WatchBody {
    let line = encode("ERROR", &error.status());
    StreamBody::new(futures::stream::iter([Ok(Frame::data(line))]).boxed())
}

/// Streams the subscription's replay, then its live events, bookmarks and, on overflow, a 410 `ERROR` event.
pub(crate) fn stream_body(shared: Arc<Shared>, request: WatchRequest, subscription: Subscription) -> WatchBody {
    let Subscription { replay, mut rx, rv } = subscription;
    let (tx, out) = mpsc::channel::<Bytes>(256);
    let mut dropped = shared.drop_watches.subscribe();
    tokio::spawn(async move {
        for event in &replay {
            if let Some(line) = request.line(event)
                && tx.send(line).await.is_err()
            {
                return;
            }
        }
        if request.initial_events_end && tx.send(request.bookmark(rv, true)).await.is_err() {
            return;
        }
        let deadline = tokio::time::sleep(request.timeout);
        tokio::pin!(deadline);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_INTERVAL, BOOKMARK_INTERVAL);
        loop {
            let line = tokio::select! {
                // Checked first: once watches are dropped, nothing more is delivered on this stream.
                biased;
                _ = dropped.changed() => return,
                received = rx.recv() => match received {
                    Ok(event) => request.line(&event),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.send(encode("ERROR", &ApiError::gone("watch fell behind").status())).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticks.tick(), if request.bookmarks => {
                    let rv = shared.store.lock().expect("store lock").bookmark_rv(&rx);
                    rv.map(|rv| request.bookmark(rv, false))
                }
                _ = &mut deadline => return,
                _ = tx.closed() => return,
            };
            if let Some(line) = line
                && tx.send(line).await.is_err()
            {
                return;
            }
        }
    });
    let frames = futures::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|line| (Ok::<_, Infallible>(Frame::data(line)), out))
    });
    StreamBody::new(frames.boxed())
}
