//! The host's one retry policy: waits that double from a first one up to a cap, built on
//! `backon`. Every retry in the host is one of the named [`Backoff`]s below, so that how the
//! host retries is read in one place.

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use std::future::Future;
use std::time::Duration;

/// Waits that double from `first` up to `max`, for at most `retries` retries (`None`: no end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    retries: Option<usize>,
}

/// A ServiceSet or AdapterPlugin whose round keeps failing: retried until it succeeds, at most
/// every five minutes so that a fix is picked up soon.
pub const ROUNDS: Backoff = Backoff { first: Duration::from_millis(500), max: Duration::from_secs(300), retries: None };

/// Preparing or contending for the leader-election lease: short waits, as a lease expires in
/// seconds.
pub const LEASE: Backoff = Backoff { first: Duration::from_millis(500), max: Duration::from_secs(5), retries: None };

/// A watch whose list or watch request failed: client-go's reflector waits (0.8 s doubling
/// up to 30 s), kind to an API server in trouble and quick to catch up once it is back.
pub const WATCHES: Backoff = Backoff { first: Duration::from_millis(800), max: Duration::from_secs(30), retries: None };

/// A watch of a kind the API server does not serve (404: its CRD is not installed, e.g. a CD
/// tool the cluster does not run): an installation takes minutes, so asking every few minutes
/// picks it up soon enough and costs the API server next to nothing meanwhile.
pub const UNSERVED: Backoff = Backoff { first: Duration::from_secs(5), max: Duration::from_secs(300), retries: None };

/// A registry call that failed transiently (connection, 429, 5xx): twice, then the load fails
/// and the AdapterPlugin's own backoff ([`ROUNDS`]) takes over.
pub const REGISTRY: Backoff =
    Backoff { first: Duration::from_millis(200), max: Duration::from_millis(800), retries: Some(2) };

impl Backoff {
    /// The retries this policy allows (`None`: no end).
    pub fn retries(self) -> Option<usize> {
        self.retries
    }

    /// The wait after `failures` failures in a row (the first failure waits `first`).
    pub fn after(self, failures: u32) -> Duration {
        // The cap is reached long before 64 doublings: no need to walk further.
        let index = failures.clamp(1, 64) as usize - 1;
        self.unbounded().build().nth(index).unwrap_or(self.max)
    }

    /// Runs `op` until it succeeds, fails with an error `transient` does not accept, or the
    /// retries run out; `notify` hears each error retried and the wait before the retry.
    pub async fn retry<T, E, F, Fut>(
        self,
        op: F,
        transient: impl FnMut(&E) -> bool,
        notify: impl FnMut(&E, Duration),
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        op.retry(self.builder()).when(transient).notify(notify).await
    }

    fn unbounded(self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_factor(2.0)
            .with_min_delay(self.first)
            .with_max_delay(self.max)
            .without_max_times()
    }

    fn builder(self) -> ExponentialBuilder {
        match self.retries {
            Some(n) => self.unbounded().with_max_times(n),
            None => self.unbounded(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn millis(backoff: Backoff, failures: std::ops::RangeInclusive<u32>) -> Vec<u128> {
        failures.map(|n| backoff.after(n).as_millis()).collect()
    }

    #[test]
    fn rounds_double_from_half_a_second_up_to_five_minutes() {
        assert_eq!(millis(ROUNDS, 1..=4), [500, 1000, 2000, 4000]);
        assert_eq!(ROUNDS.after(20), Duration::from_secs(300));
        assert_eq!(ROUNDS.after(u32::MAX), Duration::from_secs(300));
        assert_eq!(ROUNDS.after(0), ROUNDS.after(1), "no failure yet waits as one");
    }

    #[test]
    fn a_kind_not_served_is_asked_about_rarely_and_at_least_every_five_minutes() {
        assert_eq!(millis(UNSERVED, 1..=4), [5_000, 10_000, 20_000, 40_000]);
        assert_eq!(UNSERVED.after(7), Duration::from_secs(300));
        assert_eq!(millis(WATCHES, 1..=3), [800, 1_600, 3_200]);
        assert_eq!(WATCHES.after(10), Duration::from_secs(30));
    }

    #[test]
    fn the_lease_backs_off_to_five_seconds() {
        assert_eq!(millis(LEASE, 1..=6), [500, 1000, 2000, 4000, 5000, 5000]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_is_retried_until_the_retries_run_out() {
        let (calls, waits) = (AtomicU32::new(0), std::sync::Mutex::new(Vec::new()));
        let result: Result<(), &str> = REGISTRY
            .retry(
                || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err("unavailable")
                },
                |_| true,
                |_, wait| waits.lock().unwrap().push(wait.as_millis()),
            )
            .await;
        assert_eq!(result, Err("unavailable"));
        assert_eq!(calls.load(Ordering::SeqCst), 3, "the first call and two retries");
        assert_eq!(*waits.lock().unwrap(), [200, 400]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_error_and_a_success_end_the_retries_at_once() {
        let calls = AtomicU32::new(0);
        let permanent: Result<(), &str> = REGISTRY
            .retry(
                || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err("not found")
                },
                |e| *e != "not found",
                |_, _| {},
            )
            .await;
        assert_eq!((permanent, calls.swap(0, Ordering::SeqCst)), (Err("not found"), 1));
        let second_time = REGISTRY
            .retry(
                || async { if calls.fetch_add(1, Ordering::SeqCst) == 0 { Err("unavailable") } else { Ok(7) } },
                |_| true,
                |_, _| {},
            )
            .await;
        assert_eq!(second_time, Ok(7));
    }
}
