//! A real control plane for the tests, as controller-runtime's *envtest* gives Go controllers:
//! etcd, kube-apiserver and kube-controller-manager from `KUBEBUILDER_ASSETS`, started once per
//! test binary on free loopback ports in a temporary directory.
//!
//! - **Authentication and authorization are real**: `--authorization-mode=RBAC`; the tests act as
//!   a `system:masters` user (a static token), and a test can run the adapter as a ServiceAccount
//!   with a token from the TokenRequest API ([`ControlPlane::service_account_kubeconfig`]).
//! - **kube-controller-manager** runs the garbage collector (children go with their owner), the
//!   namespace controller (a test's namespace really goes) and the Deployment and ReplicaSet
//!   controllers (a workload scaled to zero is `Available`, one whose pod never runs is not).
//!   There is no scheduler and no kubelet: pods never run.
//! - **Nothing is left behind**: a watchdog process, started first, holds the pids and the
//!   directory. It waits for end-of-file on its stdin, whose only writer is this process, so when
//!   the test binary ends — normally, by a panic or by a signal — it stops the control plane and
//!   removes the directory. The control plane and the watchdog run in their own process group, so
//!   a Ctrl-C in the terminal reaches only the test binary, and the watchdog still cleans up.

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// The directory holding `etcd`, `kube-apiserver` and `kube-controller-manager`.
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";
/// How long the control plane may take to become ready (a bound, far above a normal start).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// The test identity's token (the control plane listens on loopback only).
const ADMIN_TOKEN: &str = "ksm-e2e-admin";
/// The controllers kube-controller-manager runs.
const CONTROLLERS: &str = "garbagecollector,namespace,deployment,replicaset";

/// A running control plane: where it is and how to reach it. Holds no client (each test makes
/// its own in its own runtime).
pub struct ControlPlane {
    dir: PathBuf,
    url: String,
    admin_kubeconfig: PathBuf,
    /// The processes, by binary name.
    pids: Vec<(&'static str, u32)>,
    /// The watchdog's stdin: closing it (dropping this, or this process ending) stops everything.
    watchdog: Mutex<Option<ChildStdin>>,
    watchdog_process: Mutex<Child>,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager from `assets` and waits until the
    /// API server is ready.
    pub fn start(assets: &Path) -> anyhow::Result<Self> {
        for binary in ["etcd", "kube-apiserver", "kube-controller-manager"] {
            let path = assets.join(binary);
            if !path.is_file() {
                bail!(
                    "{ASSETS_VAR}={}: {binary} is missing (../shared/envtest/setup.sh prepares it)",
                    assets.display()
                );
            }
        }
        let dir = fresh_dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut watchdog = Command::new("sh")
            .args(["-c", WATCHDOG, "ksm-e2e-envtest-watchdog"])
            .arg(&dir)
            .stdin(Stdio::piped())
            .process_group(0)
            .spawn()
            .context("starting the envtest watchdog (sh)")?;
        let stdin = watchdog.stdin.take().expect("a piped stdin");
        let plane = Self {
            url: String::new(),
            admin_kubeconfig: dir.join("admin.kubeconfig"),
            dir,
            pids: Vec::new(),
            watchdog: Mutex::new(Some(stdin)),
            watchdog_process: Mutex::new(watchdog),
        };
        plane.launch(assets)
    }

    fn launch(mut self, assets: &Path) -> anyhow::Result<Self> {
        let dir = self.dir.clone();
        self.write_keys()?;
        let [etcd_client, etcd_peer, api_port] = free_ports()?;
        self.url = format!("https://127.0.0.1:{api_port}");
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        self.spawn(
            assets,
            "etcd",
            &[
                "--data-dir",
                &path_str(&dir.join("etcd")),
                "--listen-client-urls",
                &etcd_url,
                "--advertise-client-urls",
                &etcd_url,
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
                "--initial-cluster",
                &format!("default={peer_url}"),
                "--name",
                "default",
            ],
        )?;
        self.spawn(
            assets,
            "kube-apiserver",
            &[
                "--etcd-servers",
                &etcd_url,
                "--secure-port",
                &api_port.to_string(),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--cert-dir",
                &path_str(&dir.join("certs")),
                "--service-account-key-file",
                &path_str(&dir.join("sa.pub")),
                "--service-account-signing-key-file",
                &path_str(&dir.join("sa.key")),
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/12",
                "--endpoint-reconciler-type=none",
                "--token-auth-file",
                &path_str(&dir.join("tokens.csv")),
                "--authorization-mode=RBAC",
                "--audit-policy-file",
                &path_str(&dir.join("audit-policy.yaml")),
                "--audit-log-path",
                &path_str(&dir.join("audit.log")),
            ],
        )?;
        std::fs::write(&self.admin_kubeconfig, kubeconfig_yaml(&self.url, "admin", ADMIN_TOKEN))
            .with_context(|| format!("writing {}", self.admin_kubeconfig.display()))?;
        let kubeconfig = path_str(&self.admin_kubeconfig);
        self.spawn(
            assets,
            "kube-controller-manager",
            &[
                "--controllers",
                CONTROLLERS,
                "--kubeconfig",
                &kubeconfig,
                "--authentication-kubeconfig",
                &kubeconfig,
                "--authorization-kubeconfig",
                &kubeconfig,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                // etcd 3.4 cannot serve the watch-list protocol.
                "--feature-gates=WatchListClient=false",
            ],
        )?;
        Ok(self)
    }

    /// The ServiceAccount signing key, the token file of the test identity and the audit policy.
    fn write_keys(&self) -> anyhow::Result<()> {
        std::fs::write(self.dir.join("audit-policy.yaml"), AUDIT_POLICY).context("writing the audit policy")?;
        let key = self.dir.join("sa.key");
        run(Command::new("openssl").args(["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out"]).arg(&key))?;
        run(Command::new("openssl").args(["ec", "-pubout", "-in"]).arg(&key).arg("-out").arg(self.dir.join("sa.pub")))?;
        std::fs::write(
            self.dir.join("tokens.csv"),
            format!("{ADMIN_TOKEN},ksm-e2e-admin,ksm-e2e-admin,\"system:masters\"\n"),
        )
        .context("writing the token file")
    }

    /// Starts `assets/name args`, logging to `<dir>/<name>.log`, and hands its pid to the
    /// watchdog.
    fn spawn(&mut self, assets: &Path, name: &'static str, args: &[&str]) -> anyhow::Result<()> {
        let log_path = self.dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let child: Child = Command::new(assets.join(name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", assets.join(name).display()))?;
        let mut watchdog = self.watchdog.lock().expect("watchdog lock");
        let stdin = watchdog.as_mut().expect("the watchdog's stdin, open until drop");
        writeln!(stdin, "{}", child.id()).context("handing a pid to the envtest watchdog")?;
        self.pids.push((name, child.id()));
        Ok(())
    }

    /// Waits until `/readyz` answers 200 to the test identity, or fails with the API server's
    /// log tail.
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let client = crate::env::kubeconfig_client(&self.admin_kubeconfig).await?;
        let start = Instant::now();
        loop {
            let request = http::Request::get("/readyz").body(Vec::new()).expect("a request");
            let last = match client.request_text(request).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if start.elapsed() > START_TIMEOUT {
                bail!(
                    "the envtest API server at {} was not ready after {START_TIMEOUT:?}: {last}\n{}",
                    self.url,
                    self.log_tails()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The last lines of each process's log, for a failure message.
    pub fn log_tails(&self) -> String {
        ["etcd", "kube-apiserver", "kube-controller-manager"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!("----- {name}.log -----\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The pid of `etcd`, `kube-apiserver` or `kube-controller-manager`.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.pids.iter().find(|(n, _)| *n == name).map(|(_, pid)| *pid)
    }

    /// Pauses (`SIGSTOP`) or resumes (`SIGCONT`) process `name` of this control plane: a paused
    /// kube-apiserver accepts connections and answers nothing, as a cluster that hangs.
    pub fn pause(&self, name: &str, paused: bool) {
        let pid = self.pid(name).unwrap_or_else(|| panic!("no {name} in this control plane"));
        let signal = if paused { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").args([signal, &pid.to_string()]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal} {pid} ({name}) failed");
    }

    /// How many lists of `resource` (plural) of API group `group` the API server has been asked
    /// for, served or not, by anyone: its audit log records every list (see [`AUDIT_POLICY`]).
    pub fn lists(&self, group: &str, resource: &str) -> usize {
        let log = std::fs::read_to_string(self.dir.join("audit.log")).unwrap_or_default();
        log.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|event| {
                let object = &event["objectRef"];
                event["verb"] == "list"
                    && object["apiGroup"].as_str().unwrap_or_default() == group
                    && object["resource"] == resource
            })
            .count()
    }

    /// The kubeconfig of the `system:masters` test identity.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// Writes a kubeconfig to `path` for ServiceAccount `namespace/name`, with a one-hour token
    /// from the TokenRequest API (as a pod's projected token), and returns the path.
    pub async fn service_account_kubeconfig(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
        path: &Path,
    ) -> anyhow::Result<PathBuf> {
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 3600}});
        let uri = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token");
        let http_request = http::Request::post(uri)
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&request)?)
            .expect("a request");
        let answer: Value = client
            .request(http_request)
            .await
            .with_context(|| format!("requesting a token for ServiceAccount {namespace}/{name}"))?;
        let token = answer["status"]["token"].as_str().context("the TokenRequest has no status.token")?;
        std::fs::write(path, kubeconfig_yaml(&self.url, &format!("{namespace}-{name}"), token))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path.to_path_buf())
    }
}

impl Drop for ControlPlane {
    /// Stops the control plane and waits until it is gone (the watchdog exits after removing the
    /// directory), so that a next one starts on a quiet machine.
    fn drop(&mut self) {
        drop(self.watchdog.get_mut().expect("watchdog lock").take());
        let _ = self.watchdog_process.get_mut().expect("watchdog lock").wait();
    }
}

/// A directory of its own for each control plane: one test binary may run several (a test's
/// other clusters, or the scale benchmark's, beside the tests' shared one), and one must never
/// wipe or rewrite another's certificates, etcd data or kubeconfig.
fn fresh_dir() -> PathBuf {
    static STARTED: AtomicU32 = AtomicU32::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join("ksm-e2e").join(format!("envtest-{}-{n}", std::process::id()))
}

/// What kube-apiserver's audit log records: every list once it is answered (so that a test
/// counts a client's lists, answered or refused), nothing else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [list]
- level: None
";

/// The watchdog: reads pids until end-of-file (its parent is gone or dropped the pipe), then
/// stops them (TERM, then KILL after 5 s) and removes the directory `$1`.
const WATCHDOG: &str = r#"
pids=""
while read -r pid; do pids="$pids $pid"; done
[ -n "$pids" ] && kill -TERM $pids 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do
  alive=""
  for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
  [ -z "$alive" ] && break
  sleep 0.5
done
[ -n "$alive" ] && kill -KILL $alive 2>/dev/null
rm -rf "$1"
"#;

/// A kubeconfig for `server` (self-signed serving certificate: not verified) with a bearer token.
fn kubeconfig_yaml(server: &str, user: &str, token: &str) -> String {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": {"server": server, "insecure-skip-tls-verify": true}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user}}],
        "current-context": "envtest",
    });
    serde_json::to_string_pretty(&config).expect("a kubeconfig")
}

/// `N` distinct loopback ports, free right now and never handed out before in this process.
/// Their listeners are held until all are chosen (a port released at once may come back from the
/// next bind: etcd and kube-apiserver of one plane were once given the same), and planes starting
/// at the same time never share one.
fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut held = Vec::new();
    let mut ports = Vec::new();
    while ports.len() < N {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
        let port = listener.local_addr()?.port();
        if !handed_out.contains(&port) {
            ports.push(port);
            handed_out.push(port);
        }
        held.push(listener);
    }
    Ok(ports.try_into().expect("N ports"))
}

fn path_str(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs a command to completion, failing with its stderr.
fn run(command: &mut Command) -> anyhow::Result<()> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!("{command:?} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_are_distinct_within_and_across_planes() {
        let [a, b, c] = super::free_ports().unwrap();
        let [d, e, f] = super::free_ports().unwrap();
        let mut all = vec![a, b, c, d, e, f];
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6, "{all:?}");
    }
}
