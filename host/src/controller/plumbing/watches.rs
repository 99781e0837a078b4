//! The health of every watch the host runs (its own kinds and the plugins' kinds), so that a
//! wait for a cache never hangs silently: a watch that fails is logged within seconds (when its
//! error first appears or changes, and when the API server answers it again) and named on
//! `/readyz`. A kind the cluster does not serve is warned about once, however often its watch
//! retries ([`watch_retry`](super::watch_retry) spaces the retries).

use kube::runtime::watcher;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use tokio::sync::watch;

/// Watches failing now: kind, and their latest error with what to do about it; and the kinds
/// among them the API server does not serve, for the statuses that name them.
#[derive(Default)]
pub struct WatchFailures {
    failing: Mutex<BTreeMap<String, Failure>>,
    unserved: watch::Sender<BTreeSet<String>>,
}

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
            self.note_unserved(&failing);
        }
    }

    fn healthy(&self, kind: &str) {
        let mut failing = self.lock();
        if failing.remove(kind).is_some() {
            tracing::info!(kind, "the watch of {kind} works again");
            self.note_unserved(&failing);
        }
    }

    /// Tells the subscribers of [`unserved_changes`](Self::unserved_changes) when the kinds not served change.
    fn note_unserved(&self, failing: &BTreeMap<String, Failure>) {
        let now: BTreeSet<String> = failing.iter().filter(|(_, f)| f.absent).map(|(kind, _)| kind.clone()).collect();
        self.unserved.send_if_modified(|unserved| {
            let changed = *unserved != now;
            *unserved = now;
            changed
        });
    }

    /// The kinds the API server does not serve now (their watches get 404).
    pub fn unserved(&self) -> BTreeSet<String> {
        self.unserved.borrow().clone()
    }

    /// [`unserved`](Self::unserved), as it changes.
    pub fn unserved_changes(&self) -> watch::Receiver<BTreeSet<String>> {
        self.unserved.subscribe()
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
        self.failing.lock().unwrap_or_else(|e| e.into_inner())
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

    #[test]
    fn the_kinds_not_served_are_told_as_they_change() {
        let failures = WatchFailures::default();
        let mut unserved = failures.unserved_changes();
        failures.observe("HelmRelease", &refused(403));
        assert!(!unserved.has_changed().unwrap(), "served, only refused");
        failures.observe("Bucket", &refused(404));
        failures.observe("Bucket", &Ok(watcher::Event::<()>::Init));
        assert_eq!(*unserved.borrow_and_update(), BTreeSet::from(["Bucket".to_string()]));
        failures.observe("Bucket", &refused(404));
        assert!(!unserved.has_changed().unwrap(), "the same kinds");
        failures.observe("Bucket", &Ok(watcher::Event::<()>::InitDone));
        assert!(unserved.borrow_and_update().is_empty(), "its CRD installed");
        assert!(failures.unserved().is_empty());
    }
}
