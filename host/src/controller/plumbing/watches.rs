//! The health of every watch the host runs (its own kinds and the plugins' kinds), so that a
//! wait for a cache never hangs silently: a watch that fails is logged within seconds (when its
//! error first appears or changes, and when the API server answers it again) and named on
//! `/readyz`. A kind the cluster does not serve is warned about once, however often its watch
//! retries ([`watch_retry`](super::watch_retry) spaces the retries).

use kube::runtime::watcher;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tokio::sync::watch;

/// Watches failing now: kind, and their latest error with what to do about it.
#[derive(Default)]
pub struct WatchFailures(Mutex<BTreeMap<String, Failure>>);

/// Why a watch fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The error, explained.
    pub message: String,
    /// The API server does not serve the kind (404): its CRD is not installed.
    pub absent: bool,
}

impl WatchFailures {
    /// Records what the watch of `kind` delivered: an error marks it failing, an answer of the
    /// API server (see [`answered`]) healthy.
    pub fn observe<K>(&self, kind: &str, result: &Result<watcher::Event<K>, watcher::Error>) {
        match result {
            Ok(event) if answered(event) => self.healthy(kind),
            Ok(_) => {}
            Err(error) => self.failed(kind, explain(kind, error)),
        }
    }

    fn failed(&self, kind: &str, failure: Failure) {
        let mut failing = self.lock();
        if failing.get(kind) != Some(&failure) {
            tracing::warn!(kind, "cannot watch {kind}: {}", failure.message);
            failing.insert(kind.to_string(), failure);
        }
    }

    fn healthy(&self, kind: &str) {
        if self.lock().remove(kind).is_some() {
            tracing::info!(kind, "the watch of {kind} works again");
        }
    }

    /// Why the watch of `kind` fails, if it does.
    pub fn failure(&self, kind: &str) -> Option<Failure> {
        self.lock().get(kind).cloned()
    }

    /// The failing watches that keep the host from being ready, `kind: message` each: all but
    /// those of kinds the API server does not serve (404) other than `required`. A CD tool whose
    /// CRDs are not installed (the built-in Flux plugin's, on a cluster without Flux) or the
    /// AdapterPlugin CRD leaves the rest of the host working.
    pub fn blocking(&self, required: &[&str]) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(kind, f)| !f.absent || required.contains(&kind.as_str()))
            .map(|(kind, f)| format!("{kind}: {}", f.message))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Failure>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether `event` shows the API server answering the watch: every event but `Init`, which the
/// watcher yields before each list it is about to try, the retry after an error included.
pub fn answered<K>(event: &watcher::Event<K>) -> bool {
    !matches!(event, watcher::Event::Init)
}

/// The HTTP status of a failed list or watch, if the API server answered one.
pub fn status_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// `error` with what it most likely means for the watch of `kind`.
fn explain(kind: &str, error: &watcher::Error) -> Failure {
    let absent = status_code(error) == Some(404);
    let hint = match status_code(error) {
        Some(404) => format!(" (the API server does not serve {kind}: is its CRD installed?)"),
        Some(403) => format!(" (the host's RBAC does not let it list and watch {kind}: check its ClusterRole)"),
        _ => String::new(),
    };
    Failure { message: format!("{error}{hint}"), absent }
}

/// Records what a watch of `kind` delivered: its health, and whether its cache holds a complete
/// list: at the end of a list, and also when the API server does not serve the kind at all
/// (404), which has no objects to list; the watch keeps retrying and lists the kind once its
/// CRD is installed.
pub fn observe<K>(
    failures: &WatchFailures,
    kind: &str,
    listed: &watch::Sender<bool>,
    event: &Result<watcher::Event<K>, watcher::Error>,
) {
    failures.observe(kind, event);
    let complete = match event {
        Ok(event) => matches!(event, watcher::Event::InitDone),
        Err(error) => status_code(error) == Some(404),
    };
    if complete {
        listed.send_replace(true);
    }
}

/// Waits until a cache's `listed` flag turns true (or its sender is gone).
pub async fn wait_listed(mut listed: watch::Receiver<bool>) {
    let _ = listed.wait_for(|listed| *listed).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn refused(code: u16) -> Result<watcher::Event<()>, watcher::Error> {
        let status = Status::failure("refused", "Refused").with_code(code).boxed();
        Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
    }

    #[test]
    fn a_failing_watch_is_named_with_a_hint_until_it_works_again() {
        let failures = WatchFailures::default();
        failures.observe("AdapterPlugin", &refused(404));
        failures.observe("HelmRelease", &refused(403));
        let absent = failures.failure("AdapterPlugin").unwrap();
        assert!(absent.absent && absent.message.contains("is its CRD installed?"), "{absent:?}");
        failures.observe("ServiceSet", &refused(404));
        failures.observe("Kustomization", &refused(404));
        // Only a 403, or a k0rdent kind that is not served, keeps the host from being ready.
        let blocking = failures.blocking(&["ServiceSet"]);
        assert_eq!(blocking.len(), 2, "{blocking:?}");
        assert!(blocking[0].starts_with("HelmRelease: ") && blocking[0].contains("RBAC"), "{blocking:?}");
        assert!(blocking[1].starts_with("ServiceSet: ") && blocking[1].contains("CRD installed"), "{blocking:?}");
        failures.observe("HelmRelease", &Ok(watcher::Event::<()>::InitDone));
        assert_eq!(failures.failure("HelmRelease"), None);
    }

    /// The regression: the `Init` before each retry counted as the watch working again, so a
    /// kind not served was warned about at every retry, each time after a "works again".
    #[test]
    fn the_retries_of_a_kind_not_served_leave_it_failing() {
        let failures = WatchFailures::default();
        failures.observe("Bucket", &refused(404));
        for _ in 0..3 {
            failures.observe("Bucket", &Ok(watcher::Event::<()>::Init));
            assert!(failures.failure("Bucket").is_some_and(|f| f.absent), "still failing: nothing listed");
            failures.observe("Bucket", &refused(404));
        }
        failures.observe("Bucket", &Ok(watcher::Event::<()>::InitDone));
        assert_eq!(failures.failure("Bucket"), None, "listed: it works again");
    }
}
