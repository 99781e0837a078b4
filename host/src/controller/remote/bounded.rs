//! Every call to another cluster is bounded, once, in its client's service stack ([`Bounded`]):
//! a deadline for the whole call, the answer's last byte included (a cluster that trickles a
//! byte every few seconds passes any per-read timeout), and a cap on the bytes of an answer, so
//! that a cluster cannot make the host buffer what it likes. An error answer is read whole
//! within the deadline and cut ([`bounded_error`]) before kube sees it, so that no error text
//! from another cluster reaches a status whole.
//!
//! A watch streams by design: once its answer began (within the read deadline), its body has no
//! deadline — the per-read timeout of the client still ends a silent one — and each event, not
//! the stream, is capped. A watch's initial list is a list like any other.

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use http_body::{Body as HttpBody, Frame};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use kube::client::Body;
use kube::core::Status;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};

/// One watch event at most, in bytes: an object is at most 1.5 MiB in etcd by default; this
/// leaves room for a larger setting and for JSON's escaping.
pub const EVENT_CAP: usize = 4 << 20;
/// One error answer at most, in bytes: a Status is a few hundred.
pub const ERROR_CAP: usize = 64 << 10;
/// What the host keeps of an error answer's message, in bytes.
pub const ERROR_MESSAGE: usize = 1024;

/// The bounds of one client's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A read (get, list — a watch's initial list included —, discovery), and the start of a
    /// watch's answer.
    pub read: Duration,
    /// A write (apply, delete).
    pub write: Duration,
    /// The bytes of one successful answer (a watch: of one event, at most [`EVENT_CAP`]).
    pub answer: usize,
}

/// What a request is, for its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// A watch (`?watch=true`): streams.
    Watch,
    /// Any other GET (or HEAD).
    Read,
    /// Anything that changes the cluster.
    Write,
}

impl Call {
    /// The call `method` with the query `query` makes.
    pub fn of(method: &Method, query: Option<&str>) -> Self {
        if *method != Method::GET && *method != Method::HEAD {
            return Call::Write;
        }
        let watch = query.into_iter().flat_map(|q| q.split('&')).any(|p| p == "watch=true" || p == "watch=1");
        if watch { Call::Watch } else { Call::Read }
    }

    fn name(self) -> &'static str {
        match self {
            Call::Watch => "watch",
            Call::Read => "read",
            Call::Write => "write",
        }
    }
}

impl Limits {
    /// How long `call` may take until its answer is complete (a watch: until it begins).
    pub fn deadline(&self, call: Call) -> Duration {
        match call {
            Call::Watch | Call::Read => self.read,
            Call::Write => self.write,
        }
    }
}

/// Why the host gave up on an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// The call did not end within its deadline.
    Late(Call, Duration),
    /// The answer (or one watch event) was larger than its cap.
    TooLarge(&'static str, usize),
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cut::Late(call, deadline) => write!(
                f,
                "no complete answer within {}s, the deadline of a {} from another cluster",
                deadline.as_secs_f32(),
                call.name()
            ),
            Cut::TooLarge(what, cap) => {
                write!(f, "{what} larger than {}, the most the host reads from another cluster", size(*cap))
            }
        }
    }
}

impl std::error::Error for Cut {}

/// `bytes` in KiB or MiB.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 { format!("{} MiB", bytes >> 20) } else { format!("{} KiB", bytes >> 10) }
}

/// The layer of [`Bounded`].
#[derive(Clone, Copy, Debug)]
pub struct BoundedLayer(pub Limits);

impl<S> Layer<S> for BoundedLayer {
    type Service = Bounded<S>;

    fn layer(&self, inner: S) -> Bounded<S> {
        Bounded { inner, limits: self.0 }
    }
}

/// A service whose calls are bounded by [`Limits`].
#[derive(Clone, Debug)]
pub struct Bounded<S> {
    inner: S,
    limits: Limits,
}

/// The body of a bounded answer.
pub type BoundedBody = UnsyncBoxBody<Bytes, BoxError>;

impl<S, B> Service<Request<Body>> for Bounded<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<BoundedBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<BoundedBody>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let call = Call::of(request.method(), request.uri().query());
        let limits = self.limits;
        let late = Cut::Late(call, limits.deadline(call));
        let at = Instant::now() + limits.deadline(call);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = tokio::time::timeout_at(at, answer).await.map_err(|_| late)?.map_err(with_causes)?;
            let (parts, body) = response.into_parts();
            let body = if parts.status.is_client_error() || parts.status.is_server_error() {
                let capped = Capped::new(body, Cap::Whole("an error answer", ERROR_CAP), Some((at, late)));
                let text = capped.collect().await?.to_bytes();
                Full::new(bounded_error(&text)).map_err(|never| match never {}).boxed_unsync()
            } else if call == Call::Watch {
                Capped::new(body, Cap::Line(limits.answer.min(EVENT_CAP)), None).boxed_unsync()
            } else {
                Capped::new(body, Cap::Whole("an answer", limits.answer), Some((at, late))).boxed_unsync()
            };
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// `error` with its causes, which a client error's own text leaves out (hyper's `client error
/// (Connect)` says neither what failed to connect nor why).
fn with_causes(error: impl Into<BoxError>) -> BoxError {
    let error = error.into();
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text = format!("{text}: {next}");
        cause = next.source();
    }
    text.into()
}

/// What the host keeps of the error answer `body`: a Status with its message and reason cut to
/// [`ERROR_MESSAGE`] and its details and metadata left out (a Status's causes repeat its
/// message); the text cut, if it is not a Status.
pub fn bounded_error(body: &[u8]) -> Bytes {
    match serde_json::from_slice::<Status>(body) {
        Ok(mut status) => {
            status.message = crate::conditions::cut(&status.message, ERROR_MESSAGE);
            status.reason = crate::conditions::cut(&status.reason, ERROR_MESSAGE);
            status.details = None;
            status.metadata = None;
            Bytes::from(serde_json::to_vec(&status).unwrap_or_default())
        }
        Err(_) => Bytes::from(crate::conditions::cut(&String::from_utf8_lossy(body), ERROR_MESSAGE)),
    }
}

/// How many bytes a body may hold.
#[derive(Clone, Copy, Debug)]
enum Cap {
    /// At most this many in all; the first field names the answer in the error.
    Whole(&'static str, usize),
    /// At most this many between two newlines (a watch's events).
    Line(usize),
}

/// A body that fails once it holds more than its cap, or once its deadline passed.
struct Capped<B> {
    inner: B,
    cap: Cap,
    /// Bytes counted against the cap: all of them, or those since the last newline.
    counted: usize,
    /// When the call must have ended, and the error then.
    deadline: Option<(Pin<Box<Sleep>>, Cut)>,
}

impl<B> Capped<B> {
    fn new(inner: B, cap: Cap, deadline: Option<(Instant, Cut)>) -> Self {
        let deadline = deadline.map(|(at, late)| (Box::pin(tokio::time::sleep_until(at)), late));
        Self { inner, cap, counted: 0, deadline }
    }

    /// Counts `data`; the cap's error once it is passed.
    fn count(&mut self, data: &[u8]) -> Result<(), Cut> {
        match self.cap {
            Cap::Whole(what, cap) => {
                self.counted += data.len();
                if self.counted > cap { Err(Cut::TooLarge(what, cap)) } else { Ok(()) }
            }
            Cap::Line(cap) => {
                let too_large = Err(Cut::TooLarge("a watch event", cap));
                let mut lines = data.split(|&b| b == b'\n');
                let mut run = self.counted + lines.next().map_or(0, <[u8]>::len);
                for line in lines {
                    if run > cap {
                        return too_large;
                    }
                    run = line.len();
                }
                self.counted = run;
                if run > cap { too_large } else { Ok(()) }
            }
        }
    }
}

impl<B> HttpBody for Capped<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some((sleep, late)) = &mut this.deadline
            && sleep.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(Box::new(*late))));
        }
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            // A watch's error stays whole: kube tells a watch's normal end by its cause (EOF).
            Some(Err(e)) if matches!(this.cap, Cap::Line(_)) => return Poll::Ready(Some(Err(e.into()))),
            Some(Err(e)) => return Poll::Ready(Some(Err(with_causes(e)))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref()
            && let Err(cut) = this.count(data)
        {
            return Poll::Ready(Some(Err(Box::new(cut))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream::{BoxStream, StreamExt};
    use http_body_util::StreamBody;
    use kube::Client;
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const LIMITS: Limits = Limits { read: Duration::from_secs(10), write: Duration::from_secs(5), answer: 1 << 20 };

    type Chunks = BoxStream<'static, std::io::Result<Bytes>>;

    /// A client, bounded by [`LIMITS`], of a server that answers every request with `status`
    /// after `delay`, its body the chunks of `body()`.
    fn client(status: u16, delay: Duration, body: impl Fn() -> Chunks + Send + 'static) -> Client {
        let server = tower::service_fn(move |_: Request<Body>| {
            let frames = body().map(|chunk| chunk.map(Frame::data));
            let response = Response::builder().status(status).body(StreamBody::new(frames)).unwrap();
            async move {
                tokio::time::sleep(delay).await;
                Ok::<_, Infallible>(response)
            }
        });
        Client::new(BoundedLayer(LIMITS).layer(server), "default")
    }

    /// `chunk`, `times` times, each after `every`.
    fn trickle(chunk: impl Into<Bytes>, every: Duration, times: usize) -> Chunks {
        let chunk = chunk.into();
        futures::stream::iter(0..times)
            .then(move |_| {
                let chunk = chunk.clone();
                async move {
                    tokio::time::sleep(every).await;
                    Ok(chunk)
                }
            })
            .boxed()
    }

    fn get(path: &str) -> Request<Vec<u8>> {
        Request::get(path).body(Vec::new()).unwrap()
    }

    #[test]
    fn calls_are_told_apart_by_method_and_watch() {
        assert_eq!(Call::of(&Method::GET, Some("labelSelector=a%3Db&limit=100")), Call::Read);
        assert_eq!(Call::of(&Method::GET, None), Call::Read);
        assert_eq!(Call::of(&Method::GET, Some("resourceVersion=5&watch=true&timeoutSeconds=290")), Call::Watch);
        assert_eq!(Call::of(&Method::GET, Some("watch=1")), Call::Watch);
        assert_eq!(Call::of(&Method::GET, Some("watch=false")), Call::Read);
        for method in [Method::PATCH, Method::DELETE, Method::POST, Method::PUT] {
            assert_eq!(Call::of(&method, Some("watch=true")), Call::Write, "{method}");
        }
        assert_eq!((LIMITS.deadline(Call::Watch), LIMITS.deadline(Call::Write)), (LIMITS.read, LIMITS.write));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_that_trickles_ends_at_the_deadline_of_its_call() {
        // Headers at once, then a byte a second of a thousand: a per-read timeout never fires.
        let trickling = client(200, Duration::ZERO, || trickle(" ", Duration::from_secs(1), 1000));
        let start = Instant::now();
        let err = trickling.request_text(get("/apis")).await.unwrap_err().to_string();
        assert!(err.contains("no complete answer within 10s, the deadline of a read from another cluster"), "{err}");
        assert_eq!(start.elapsed().as_secs(), 10);

        // No answer at all to a write: its own, shorter deadline.
        let silent = client(200, Duration::from_secs(3600), || trickle("{}", Duration::ZERO, 1));
        let start = Instant::now();
        let patch = Request::patch("/apis/x/v1/namespaces/a/xs/b").body(b"{}".to_vec()).unwrap();
        let err = silent.request_text(patch).await.unwrap_err().to_string();
        assert!(err.contains("no complete answer within 5s, the deadline of a write"), "{err}");
        assert_eq!(start.elapsed().as_secs(), 5);
    }

    #[tokio::test]
    async fn an_answer_larger_than_its_cap_fails_once_the_cap_is_passed() {
        let pulled = Arc::new(AtomicUsize::new(0));
        let counted = pulled.clone();
        let endless = client(200, Duration::ZERO, move || {
            let counted = counted.clone();
            futures::stream::repeat_with(move || {
                counted.fetch_add(64 << 10, Ordering::Relaxed);
                Ok(Bytes::from(vec![b' '; 64 << 10]))
            })
            .boxed()
        });
        let err = endless.request_text(get("/apis/apps/v1/deployments")).await.unwrap_err().to_string();
        assert!(err.contains("an answer larger than 1 MiB, the most the host reads from another cluster"), "{err}");
        assert_eq!(pulled.load(Ordering::Relaxed), (1 << 20) + (64 << 10), "read up to the cap, and one chunk");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_streams_past_the_deadline_and_each_event_is_capped() {
        let events = || {
            let event = "{\"type\":\"ADDED\",\"object\":{}}\n";
            let large = format!("{}\n", " ".repeat((1 << 20) + 1));
            trickle(event, Duration::from_secs(20), 3).chain(trickle(large, Duration::ZERO, 1)).boxed()
        };
        let watching = client(200, Duration::ZERO, events);
        let request = Request::get("/apis/x/v1/xs?watch=true").body(Body::empty()).unwrap();
        let mut body = watching.send(request).await.unwrap().into_body();
        let start = Instant::now();
        let mut lines = 0;
        let err = loop {
            match body.frame().await {
                Some(Ok(frame)) => lines += frame.data_ref().map_or(0, |d| d.iter().filter(|&&b| b == b'\n').count()),
                Some(Err(e)) => break e.to_string(),
                None => panic!("the large event passed"),
            }
        };
        assert_eq!((lines, start.elapsed().as_secs()), (3, 60), "three events, the last well past the deadline");
        assert!(err.contains("a watch event larger than 1 MiB"), "{err}");
    }

    #[tokio::test]
    async fn a_watch_that_the_server_ends_early_ends_as_kube_expects() {
        // kube ends a watch quietly on an unexpected EOF, which it finds among the error's causes.
        let cut_short = client(200, Duration::ZERO, || {
            let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed");
            trickle("{\"type\":\"ADDED\",\"object\":{}}\n", Duration::ZERO, 1)
                .chain(futures::stream::iter([Err(eof)]))
                .boxed()
        });
        let request = Request::get("/apis/x/v1/xs?watch=true").body(Vec::new()).unwrap();
        let events: Vec<_> = cut_short.request_events::<serde_json::Value>(request).await.unwrap().collect().await;
        assert!(events.len() == 1 && events[0].is_ok(), "{events:?}");
    }

    #[tokio::test]
    async fn an_error_answer_is_cut_before_kube_reads_it() {
        let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "y".repeat(40 << 10), "reason": "NotFound", "code": 404,
            "details": {"causes": [{"message": "z".repeat(10 << 10)}]}});
        let answer = client(404, Duration::ZERO, move || trickle(status.to_string(), Duration::ZERO, 1));
        let Err(kube::Error::Api(status)) = answer.request_text(get("/api/v1/namespaces/a/secrets/b")).await else {
            panic!("not an API error")
        };
        assert!(status.is_not_found() && status.details.is_none(), "{status:?}");
        assert!(status.message.len() <= ERROR_MESSAGE && status.message.ends_with("(cut)"), "{}", status.message.len());

        let answer = client(500, Duration::ZERO, || trickle(vec![b'x'; ERROR_CAP - 1], Duration::ZERO, 1));
        let Err(kube::Error::Api(status)) = answer.request_text(get("/apis")).await else { panic!("not an API error") };
        assert_eq!(status.code, 500);
        assert!(status.message.len() <= ERROR_MESSAGE, "{}", status.message.len());

        let endless =
            client(500, Duration::ZERO, || futures::stream::repeat_with(|| Ok(Bytes::from_static(b"x"))).boxed());
        let err = endless.request_text(get("/apis")).await.unwrap_err().to_string();
        assert!(err.contains("an error answer larger than 64 KiB"), "{err}");
    }
}
