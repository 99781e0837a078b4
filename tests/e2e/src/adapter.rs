//! The `ksm-adapter run` process under test.
//!
//! Its stdout and stderr go to `adapter.log` in the test's work directory. The process is killed
//! when the [`Adapter`] is dropped; if that happens because the test panicked, the log's path and
//! last lines are printed (unless a failed wait already included them in its panic message).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::ADAPTER_NAME;
use crate::env::Env;

/// How many lines of the adapter log a failure shows.
pub const LOG_TAIL_LINES: usize = 60;

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
    /// Set once a panic message carried the log tail, so that drop does not print it again.
    reported: AtomicBool,
}

impl Adapter {
    /// Starts `ksm-adapter run` against `env` as adapter `ksm-adapter` in the test's namespace,
    /// logging at [`log_filter`].
    pub fn start(env: &Env, mode: Mode) -> Self {
        let log = env.workdir().join("adapter.log");
        let file = File::create(&log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let stderr = file.try_clone().expect("a second handle on the log");
        let child = Command::new(binary())
            .arg("run")
            .arg("--kubeconfig")
            .arg(env.kubeconfig())
            .args(["--adapter-name", ADAPTER_NAME, "--adapter-namespace", env.namespace(), "--mode", mode.flag()])
            .env("KSM_LOG", log_filter())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .spawn()
            .expect("starting ksm-adapter run");
        Self { child: Mutex::new(child), log, reported: AtomicBool::new(false) }
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
