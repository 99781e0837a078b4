//! A real OCI registry on loopback for the plugin push/pull tests: Debian's `docker-registry`
//! (the CNCF distribution registry) serving a fresh temporary directory over plain HTTP,
//! optionally behind htpasswd basic auth. The process is killed and its directory removed when
//! the [`Registry`] is dropped (its log's tail is printed first if the test panicked).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary (`apt-get install docker-registry`).
pub const BINARY: &str = "/usr/bin/docker-registry";

/// A running registry.
pub struct Registry {
    child: Child,
    host: String,
    dir: PathBuf,
}

impl Registry {
    /// Whether [`BINARY`] is installed (for tests that skip without it).
    pub fn installed() -> bool {
        Path::new(BINARY).is_file()
    }

    /// Starts an anonymous registry and waits until `/v2/` answers.
    pub fn start() -> Self {
        Self::spawn(None)
    }

    /// Starts a registry accepting only `username`/`password` (htpasswd, bcrypt from
    /// `htpasswd -nbB` of apache2-utils).
    pub fn start_with_auth(username: &str, password: &str) -> Self {
        let output = Command::new("htpasswd")
            .args(["-nbB", username, password])
            .output()
            .unwrap_or_else(|e| panic!("running htpasswd ({e}): apt-get install apache2-utils"));
        assert!(output.status.success(), "htpasswd failed: {}", String::from_utf8_lossy(&output.stderr));
        Self::spawn(Some(String::from_utf8(output.stdout).expect("an htpasswd line is UTF-8")))
    }

    /// `127.0.0.1:PORT`, the registry part of references to it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Writes a `.dockerconfigjson` holding `username`/`password` for this registry and returns
    /// its path.
    pub fn docker_config(&self, username: &str, password: &str) -> PathBuf {
        let config = serde_json::json!({ "auths": { &self.host: { "username": username, "password": password } } });
        let path = self.dir.join("config.json");
        std::fs::write(&path, config.to_string()).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }

    /// Tags the manifest `from` of `repository` as `to` as well, over the registry's HTTP API
    /// (anonymous registries only): e.g. a cosign signature copied to another digest's tag.
    pub fn copy_manifest(&self, repository: &str, from: &str, to: &str) {
        const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
        let get = format!(
            "GET /v2/{repository}/manifests/{from} HTTP/1.0\r\nHost: {}\r\nAccept: {OCI_MANIFEST}\r\n\r\n",
            self.host
        );
        let answer = self.exchange(get.as_bytes());
        let manifest = answer.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
        assert_eq!(answer.split(' ').nth(1), Some("200"), "GET {repository}:{from}:\n{answer}");
        let put = format!(
            "PUT /v2/{repository}/manifests/{to} HTTP/1.0\r\nHost: {}\r\nContent-Type: {OCI_MANIFEST}\r\nContent-Length: {}\r\n\r\n{manifest}",
            self.host,
            manifest.len()
        );
        let answer = self.exchange(put.as_bytes());
        assert_eq!(answer.split(' ').nth(1), Some("201"), "PUT {repository}:{to}:\n{answer}");
    }

    /// Sends one HTTP/1.0 request and returns the whole answer.
    fn exchange(&self, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(&self.host).unwrap_or_else(|e| panic!("connecting to {}: {e}", self.host));
        stream.write_all(request).expect("sending a request to the registry");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("reading the registry's answer");
        answer
    }

    fn spawn(htpasswd: Option<String>) -> Self {
        assert!(Self::installed(), "{BINARY} is missing: apt-get install docker-registry");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let host = format!("127.0.0.1:{port}");
        let dir = std::env::temp_dir().join("ksm-e2e").join(format!("registry-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let auth = match htpasswd {
            Some(line) => {
                std::fs::write(dir.join("htpasswd"), line).expect("writing htpasswd");
                format!("auth:\n  htpasswd:\n    realm: ksm-e2e\n    path: {}\n", dir.join("htpasswd").display())
            }
            None => String::new(),
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\n{auth}",
            dir.join("data").display()
        );
        std::fs::write(dir.join("config.yml"), config).expect("writing the registry config");
        let log = std::fs::File::create(dir.join("registry.log")).expect("creating the registry log");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a second handle on the log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {BINARY}: {e}"));
        let mut registry = Self { child, host, dir };
        registry.wait_ready();
        registry
    }

    /// Waits until `GET /v2/` gets an HTTP answer (200, or 401 behind auth).
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{BINARY} exited ({status}):\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "{BINARY} did not answer on {} in 10 s:\n{}", self.host, self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(&self.host) else { return false };
        let mut answer = String::new();
        let request = format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.host);
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut answer).is_ok()
            && answer.starts_with("HTTP/1.")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "----- registry log (last 20 lines) -----\n{}",
                lines[lines.len().saturating_sub(20)..].join("\n")
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
