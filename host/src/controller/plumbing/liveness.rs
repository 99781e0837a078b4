//! Whether the controller is stuck, for `/healthz`: every reconcile registers while it runs, and
//! one that has run far longer than any honest round (plugin calls and API requests are all
//! bounded) means the process should be restarted.

use crate::metrics::Stuck;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a reconcile may run before the controller counts as stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(600);

/// The reconciles running now: what each reconciles and when it started.
#[derive(Default)]
pub struct InFlight {
    next: AtomicU64,
    running: Mutex<HashMap<u64, (String, Instant)>>,
}

impl InFlight {
    /// Registers a reconcile of `what` until the returned guard is dropped.
    pub fn enter(&self, what: String) -> Running<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (what, Instant::now()));
        Running { in_flight: self, id }
    }

    /// The longest-running reconcile, if it has run more than `after` by `now`.
    pub fn stuck(&self, now: Instant, after: Duration) -> Option<Stuck> {
        let running = self.lock();
        let (what, started) = running.values().min_by_key(|(_, started)| *started)?;
        let elapsed = now.saturating_duration_since(*started);
        (elapsed > after).then(|| Stuck { what: what.clone(), elapsed })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (String, Instant)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A reconcile registered in [`InFlight`]; unregisters when dropped (also when the reconcile's
/// future is dropped half-way).
pub struct Running<'a> {
    in_flight: &'a InFlight,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.in_flight.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_running_past_the_bound_is_stuck_until_it_ends() {
        let in_flight = InFlight::default();
        let later = |by: u64| Instant::now() + Duration::from_secs(by);
        assert_eq!(in_flight.stuck(later(1000), STUCK_AFTER), None);
        let first = in_flight.enter("ServiceSet team-a/slow".into());
        let _second = in_flight.enter("AdapterPlugin flux".into());
        assert_eq!(in_flight.stuck(later(10), STUCK_AFTER), None);
        let stuck = in_flight.stuck(later(700), STUCK_AFTER).unwrap().to_string();
        assert!(stuck.contains("ServiceSet team-a/slow") && stuck.contains("run for 70"), "{stuck}");
        drop(first);
        let stuck = in_flight.stuck(later(700), STUCK_AFTER).unwrap().to_string();
        assert!(stuck.contains("AdapterPlugin flux"), "{stuck}");
    }
}
