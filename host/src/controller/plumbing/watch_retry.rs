//! When a failing watch tries again. kube-rs' `default_backoff` resets its waits on every `Ok`
//! the watcher yields, and the watcher yields `Init` before each retry of its list: the waits
//! never grew, and a kind the cluster does not serve was listed every 1.3 s forever. Here the
//! waits grow until the API server answers, and longest for a kind it does not serve.

use super::watches::{answered, status_code};
use crate::retry;
use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use std::time::Duration;

/// What a watcher yields.
type WatchEvent<K> = Result<watcher::Event<K>, watcher::Error>;

/// The consecutive failures of one watch, which decide the wait before its next try. Pure.
#[derive(Debug, Default)]
pub struct Retry {
    failures: u32,
}

impl Retry {
    /// Takes in what the watch yielded; returns how long to wait before asking it for more: after
    /// an error [`retry::UNSERVED`] when the kind is not served (404), else [`retry::WATCHES`],
    /// counting the failures since the API server last answered.
    pub fn after<K>(&mut self, event: &WatchEvent<K>) -> Option<Duration> {
        match event {
            Err(error) => {
                self.failures = self.failures.saturating_add(1);
                let policy = if status_code(error) == Some(404) { retry::UNSERVED } else { retry::WATCHES };
                Some(policy.after(self.failures))
            }
            Ok(event) if answered(event) => {
                self.failures = 0;
                None
            }
            Ok(_) => None,
        }
    }
}

/// `events`, a watcher's stream, waiting after each error as [`Retry`] decides; in place of
/// kube-rs' `default_backoff`.
pub fn backed_off<K: Send + 'static>(
    events: impl Stream<Item = WatchEvent<K>> + Send + 'static,
) -> impl Stream<Item = WatchEvent<K>> + Send + 'static {
    let start = (events.boxed(), Retry::default(), None);
    futures::stream::unfold(start, |(mut events, mut retry, wait)| async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let event = events.next().await?;
        let wait = retry.after(&event);
        Some((event, (events, retry, wait)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn refused(code: u16) -> WatchEvent<()> {
        let status = Status::failure("refused", "Refused").with_code(code).boxed();
        Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
    }

    /// The regression: the `Init` before each retry reset the waits, and a kind not served was
    /// listed every 1.3 s.
    #[test]
    fn the_init_before_a_retry_does_not_reset_the_waits() {
        let mut retry = Retry::default();
        let mut waits = Vec::new();
        for _ in 0..4 {
            assert_eq!(retry.after(&Ok(watcher::Event::<()>::Init)), None);
            waits.push(retry.after(&refused(404)).unwrap().as_secs());
        }
        assert_eq!(waits, [5, 10, 20, 40]);
        for _ in 0..10 {
            retry.after(&refused(404));
        }
        assert_eq!(retry.after(&refused(404)), Some(Duration::from_secs(300)), "at least every five minutes");
    }

    #[test]
    fn other_errors_wait_less_and_an_answer_starts_the_waits_over() {
        let mut retry = Retry::default();
        let mut millis = |event| retry.after(&event).map(|wait| wait.as_millis());
        assert_eq!(millis(refused(403)), Some(800));
        assert_eq!(millis(refused(500)), Some(1_600));
        assert_eq!(millis(Ok(watcher::Event::InitDone)), None);
        assert_eq!(millis(refused(500)), Some(800));
        assert_eq!(millis(Ok(watcher::Event::Apply(()))), None);
        assert_eq!(millis(refused(404)), Some(5_000));
    }

    /// The stream waits after an error, not before the next event of a watch that works.
    #[tokio::test(start_paused = true)]
    async fn the_stream_waits_after_an_error_only() {
        let events = futures::stream::iter([
            Ok(watcher::Event::Init),
            refused(404),
            Ok(watcher::Event::Init),
            refused(404),
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(())),
        ]);
        let started = tokio::time::Instant::now();
        let at: Vec<u64> = backed_off(events).map(|_| started.elapsed().as_secs()).collect().await;
        assert_eq!(at, [0, 0, 5, 5, 15, 15, 15]);
    }
}
