//! The `ksm-adapter run` process under test.
//!
//! Its stdout and stderr go to `adapter.log` in the test's work directory (`adapter-<n>.log` for
//! further adapters of the same test). The process is killed when the [`Adapter`] is dropped; if
//! that happens because the test panicked, the log's path and last lines are printed (unless a
//! failed wait already included them in its panic message).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::ADAPTER_NAME;
use crate::env::Env;

/// How many lines of the adapter log a failure shows.
pub const LOG_TAIL_LINES: usize = 60;

/// What every adapter under test is started with: the tests' other clusters (regions, health
/// targets) are API servers on loopback — envtest's over https, fake ones over plain http —
/// which the host refuses by default.
pub const OTHER_CLUSTERS: [&str; 2] = ["--allow-cluster-addresses", "http,loopback"];

/// How the host treats SMP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// kcm owns SMP status; the host reads it (and explains an unready SMP).
    Observe,
    /// The host evaluates the SMPs naming it as their adapter and writes their status.
    Manage,
}

impl Mode {
    fn flag(self) -> &'static str {
        match self {
            Mode::Observe => "observe",
            Mode::Manage => "manage",
        }
    }
}

/// The `ksm-adapter` binary: `KSM_ADAPTER_BIN`, else next to the test executable's directory
/// (`target/<profile>/deps/..`). Panics with what to build when it is missing.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KSM_ADAPTER_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let path = exe.parent().and_then(Path::parent).map(|dir| dir.join("ksm-adapter")).unwrap_or_default();
    assert!(
        path.is_file(),
        "the ksm-adapter binary is missing at {}: run `cargo build -p ksm-adapter` first (or set KSM_ADAPTER_BIN)",
        path.display()
    );
    path
}

/// The adapter's `KSM_LOG`: `KSM_E2E_LOG` if set, else debug for the host and info for its
/// dependencies (a plain `debug` also logs every cranelift pass and HTTP frame: tens of
/// thousands of lines a second, which would bury the host's own lines in a failure's log tail).
pub fn log_filter() -> String {
    std::env::var("KSM_E2E_LOG").ok().filter(|f| !f.is_empty()).unwrap_or_else(|| "info,ksm_adapter=debug".into())
}

/// Runs `ksm-adapter <args>` to completion (offline commands such as `plugin translate`).
pub fn run_command(args: &[&str]) -> Output {
    let output = Command::new(binary()).args(args).output().expect("running ksm-adapter");
    assert!(
        output.status.success(),
        "ksm-adapter {} failed ({}):\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A running `ksm-adapter run`.
pub struct Adapter {
    child: Mutex<Child>,
    log: PathBuf,
    /// Where it serves `/metrics`, `/healthz` and `/readyz`.
    metrics: std::net::SocketAddr,
    /// Set once a panic message carried the log tail, so that drop does not print it again.
    reported: AtomicBool,
}

impl Adapter {
    /// Starts `ksm-adapter run` against `env` as adapter `ksm-adapter` in the test's namespace,
    /// logging at [`log_filter`].
    pub fn start(env: &Env, mode: Mode) -> Self {
        Self::start_with(env, mode, &[])
    }

    /// [`start`](Self::start) with `extra_args` after the usual ones (`--kubeconfig`,
    /// `--adapter-name`, `--adapter-namespace`, `--mode`, `--metrics-bind-address`, which
    /// `extra_args` must not repeat, and [`OTHER_CLUSTERS`]), e.g. to start several replicas
    /// with leader election.
    ///
    /// The first adapter of a test logs to `adapter.log` in its work directory, the next ones
    /// (replicas, restarts) to `adapter-2.log`, `adapter-3.log`, ...
    pub fn start_with(env: &Env, mode: Mode, extra_args: &[&str]) -> Self {
        Self::start_as(env, env.kubeconfig(), mode, extra_args)
    }

    /// [`start_with`](Self::start_with) with another identity: `kubeconfig` instead of the
    /// test's own (e.g. a ServiceAccount's token, to run under the chart's RBAC).
    pub fn start_as(env: &Env, kubeconfig: &Path, mode: Mode, extra_args: &[&str]) -> Self {
        Self::spawn(env, kubeconfig, ADAPTER_NAME, mode, extra_args)
    }

    /// [`start_with`](Self::start_with) as another adapter installation: `--adapter-name
    /// name` (in the test's namespace), which SMPs naming `ksm-adapter` do not name.
    pub fn start_named(env: &Env, name: &str, mode: Mode, extra_args: &[&str]) -> Self {
        Self::spawn(env, env.kubeconfig(), name, mode, extra_args)
    }

    fn spawn(env: &Env, kubeconfig: &Path, name: &str, mode: Mode, extra_args: &[&str]) -> Self {
        let (log, file) = new_log(env.workdir());
        let stderr = file.try_clone().expect("a second handle on the log");
        let metrics = free_port();
        let child = Command::new(binary())
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--adapter-name", name, "--adapter-namespace", env.namespace(), "--mode", mode.flag()])
            .args(["--metrics-bind-address", &metrics.to_string()])
            .args(OTHER_CLUSTERS)
            .args(extra_args)
            .env("KSM_LOG", log_filter())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .spawn()
            .expect("starting ksm-adapter run");
        Self { child: Mutex::new(child), log, metrics, reported: AtomicBool::new(false) }
    }

    /// Sends SIGTERM (a graceful shutdown, as Kubernetes does when it stops a pod) and returns
    /// at once: see [`exited`](Self::exited) for when it is done. Does nothing if the process
    /// has exited already.
    pub fn terminate(&self) {
        let mut child = self.child.lock().expect("child lock");
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("running kill -TERM {}: {e}", child.id()));
        assert!(status.success(), "kill -TERM {} failed ({status})", child.id());
    }

    /// Where its stdout and stderr go.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `http://<addr>` of its `/metrics`, `/healthz` and `/readyz` endpoint.
    pub fn metrics_url(&self) -> String {
        format!("http://{}", self.metrics)
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The exit status, if the process has exited.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.child.lock().expect("child lock").try_wait().ok().flatten()
    }

    /// The most memory the process has held resident so far (Linux's `VmHWM`), in bytes; `None`
    /// once it exited, or where `/proc` does not say.
    pub fn peak_rss(&self) -> Option<u64> {
        let pid = self.child.lock().expect("child lock").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// The log's path and tail (and the exit status, if it exited), for a panic message.
    pub fn failure_context(&self) -> String {
        self.reported.store(true, Ordering::Relaxed);
        let state = match self.exited() {
            Some(status) => format!("ksm-adapter exited ({status})"),
            None => "ksm-adapter is running".to_string(),
        };
        format!(
            "{state}; log: {}\n----- last {LOG_TAIL_LINES} lines -----\n{}\n-----",
            self.log.display(),
            self.log_tail(LOG_TAIL_LINES)
        )
    }
}

/// `GET <url>` over a plain HTTP/1.1 connection: the status code and the body.
pub async fn http_get(url: &str) -> (u16, String) {
    http_get_accepting(url, "*/*").await
}

/// [`http_get`] with the Accept header `accept` (e.g. a scraper's choice of formats).
pub async fn http_get_accepting(url: &str, accept: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = address.split_once('/').map_or((address, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap_or_else(|e| panic!("connecting to {host}: {e}"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sending the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reading the response");
    let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status line");
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

/// A new log file in `workdir`: `adapter.log`, else `adapter-2.log`, `adapter-3.log`, ...
fn new_log(workdir: &Path) -> (PathBuf, File) {
    for n in 1.. {
        let log = workdir.join(if n == 1 { "adapter.log".to_string() } else { format!("adapter-{n}.log") });
        match File::options().write(true).create_new(true).open(&log) {
            Ok(file) => return (log, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("creating {}: {e}", log.display()),
        }
    }
    unreachable!("some adapter-<n>.log is free")
}

/// A loopback address with a port free right now (tests start many adapters at once).
pub fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
    listener.local_addr().expect("the bound address")
}

impl Drop for Adapter {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.reported.load(Ordering::Relaxed) {
            eprintln!("{}", self.failure_context());
        }
        let child = self.child.get_mut().expect("child lock");
        let _ = child.kill();
        let _ = child.wait();
    }
}
