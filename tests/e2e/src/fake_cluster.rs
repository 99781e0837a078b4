//! A fake API server of another cluster that answers badly: what a broken or hostile target
//! does to the host that reads it. Plain HTTP/1.1 on loopback (the adapter under test allows
//! both, see [`ksm_test_harness::adapter`]), one task per connection, each bounded in time and bytes; the
//! server stops when dropped.
//!
//! It serves the discovery of `apps/v1` Deployments and misbehaves as asked on everything else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How a fake cluster misbehaves.
#[derive(Clone, Copy, Debug)]
pub enum Misbehaviour {
    /// Every answer begins at once, then trickles one byte a second (for at most two minutes).
    Trickles,
    /// Discovery answers; a list answers with this many bytes of valid JSON, always with a next
    /// page, sent as fast as the reader takes them.
    Huge(usize),
}

/// A running fake cluster.
pub struct FakeCluster {
    address: SocketAddr,
    sent: Arc<Sent>,
    server: JoinHandle<()>,
}

/// What the lists' answers got out before the reader stopped taking them, in body bytes.
#[derive(Default)]
struct Sent {
    /// The most one answer got out.
    largest: AtomicUsize,
    /// All answers together.
    total: AtomicUsize,
}

impl FakeCluster {
    /// Starts one on a free loopback port.
    pub async fn start(misbehaviour: Misbehaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding a loopback port");
        let address = listener.local_addr().expect("the bound address");
        let sent = Arc::new(Sent::default());
        let counted = sent.clone();
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, misbehaviour, counted.clone()));
            }
        });
        Self { address, sent, server }
    }

    /// A kubeconfig of this cluster, with a token.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
             contexts: [{{name: fake, context: {{cluster: fake, user: fake}}}}]\n\
             clusters: [{{name: fake, cluster: {{server: 'http://{}'}}}}]\n\
             users: [{{name: fake, user: {{token: fake}}}}]\n",
            self.address
        )
    }

    /// The most body bytes one answer got out before the reader stopped taking them.
    pub fn largest_sent(&self) -> usize {
        self.sent.largest.load(Ordering::Relaxed)
    }

    /// The body bytes all answers to lists got out together.
    pub fn total_sent(&self) -> usize {
        self.sent.total.load(Ordering::Relaxed)
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Answers the requests of one connection until the client closes it or an answer is cut.
async fn serve(mut stream: TcpStream, misbehaviour: Misbehaviour, sent: Arc<Sent>) {
    while let Some(path) = request_path(&mut stream).await {
        let answered = match (misbehaviour, discovery(&path)) {
            (Misbehaviour::Trickles, _) => trickle(&mut stream).await,
            (Misbehaviour::Huge(_), Some(body)) => answer(&mut stream, body.as_bytes()).await,
            (Misbehaviour::Huge(bytes), None) => huge_list(&mut stream, bytes, &sent).await,
        };
        if answered.is_err() {
            return;
        }
    }
}

/// The path of the next request on `stream` (its head read, any body ignored: a GET has none);
/// `None` at the end of the connection.
async fn request_path(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 << 10 || stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
    let target = line.split_whitespace().nth(1)?;
    Some(target.split('?').next().unwrap_or_default().to_string())
}

/// The discovery documents of a cluster serving `apps/v1` Deployments; `None` for other paths.
fn discovery(path: &str) -> Option<String> {
    let apps = json!({"groupVersion": "apps/v1", "version": "v1"});
    let body = match path {
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1",
                          "groups": [{"name": "apps", "versions": [apps], "preferredVersion": apps}]}),
        "/apis/apps/v1" => json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
                                  "resources": [{"name": "deployments", "singularName": "deployment",
                                                 "namespaced": true, "kind": "Deployment",
                                                 "verbs": ["get", "list", "watch"]}]}),
        _ => return None,
    };
    Some(body.to_string())
}

async fn answer(stream: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    stream.write_all(head(body.len()).as_bytes()).await?;
    stream.write_all(body).await
}

/// The head of a `200 OK` answer of `length` bytes of JSON.
fn head(length: usize) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n")
}

/// An answer of a million spaces, one a second, for at most two minutes; then the connection
/// ends (an error for the reader, which was promised more).
async fn trickle(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(head(1_000_000).as_bytes()).await?;
    for _ in 0..120 {
        stream.write_all(b" ").await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(std::io::ErrorKind::TimedOut.into())
}

/// A DeploymentList of no items padded with spaces to `bytes`, sent in 64 KiB writes; records
/// how much got out in `counted`.
async fn huge_list(stream: &mut TcpStream, bytes: usize, counted: &Sent) -> std::io::Result<()> {
    // Always a next page: a reader that pages stops only at its own bound.
    let start = br#"{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"continue":"more"},"items":[]"#;
    stream.write_all(head(bytes).as_bytes()).await?;
    stream.write_all(start).await?;
    let mut sent = start.len();
    let padding = vec![b' '; 64 << 10];
    let result = async {
        while sent < bytes - 1 {
            let n = padding.len().min(bytes - 1 - sent);
            stream.write_all(&padding[..n]).await?;
            sent += n;
        }
        stream.write_all(b"}").await
    }
    .await;
    counted.largest.fetch_max(sent, Ordering::Relaxed);
    counted.total.fetch_add(sent, Ordering::Relaxed);
    result
}
