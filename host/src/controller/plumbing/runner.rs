//! Runs rounds from a [`Queue`]: the objects its triggers name, each when due, at most
//! `concurrency` at once, in this task as kube-runtime's controller runs them; until `stop`,
//! after which no round starts and those running finish (a second SIGTERM or Ctrl-C drops
//! them, as kube-runtime's `shutdown_on_signal` does).
//!
//! The ServiceSet controller runs on this, not on kube-runtime's `Controller`, so that its cache
//! can be its own (see [`service_set_store`](crate::controller::caches::service_set_store)).

use super::queue::{Action, Next, Queue};
use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use std::hash::Hash;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until};

/// Runs `round` for each object `triggers` name, when due and with at most `concurrency` at a
/// time, until `stop`; `round`'s [`Action`] queues the object's next round.
pub async fn run<K, R>(
    triggers: impl Stream<Item = K>,
    concurrency: u16,
    stop: impl Future<Output = ()>,
    round: impl Fn(K) -> R,
) where
    K: Clone + Eq + Hash + Ord,
    R: Future<Output = Action>,
{
    let concurrency = usize::from(concurrency.max(1));
    let mut queue = Queue::<K>::default();
    let mut running = FuturesUnordered::new();
    let mut triggers = std::pin::pin!(triggers.fuse());
    let mut stop = std::pin::pin!(stop);
    loop {
        let mut look_again = None;
        while queue.running() < concurrency {
            match queue.next(Instant::now()) {
                Next::Run(key) => {
                    let ran = round(key.clone());
                    running.push(async move { (key, ran.await) });
                }
                Next::At(at) => {
                    look_again = Some(at);
                    break;
                }
                Next::Idle => break,
            }
        }
        tokio::select! {
            Some(key) = triggers.next() => queue.schedule(key, Instant::now()),
            Some((key, then)) = running.next() => queue.finished(key, then, Instant::now()),
            () = sleep_until(look_again.unwrap_or_else(far_future)), if look_again.is_some() => {}
            () = &mut stop => break,
        }
    }
    finish(running).await;
}

/// Lets the rounds running finish, unless a second signal comes first.
async fn finish<F: Future>(mut running: FuturesUnordered<F>) {
    let forced = async {
        let Ok(mut terminate) = signal(SignalKind::terminate()) else { return std::future::pending().await };
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    tokio::select! {
        () = async { while running.next().await.is_some() {} } => {}
        () = forced => tracing::warn!("a second signal: stopping without waiting for the rounds running"),
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Runs `triggers` through rounds that take `took` and then ask `then`, until `until`;
    /// returns each round's object and start, in order of start.
    async fn rounds(
        triggers: Vec<(Duration, &'static str)>,
        concurrency: u16,
        (took, then): (Duration, Action),
        until: Duration,
    ) -> Vec<(&'static str, Duration)> {
        let start = Instant::now();
        let started = Arc::new(Mutex::new(vec![]));
        let triggers = futures::stream::iter(triggers).then(move |(at, key)| async move {
            sleep_until(start + at).await;
            key
        });
        let record = started.clone();
        run(triggers, concurrency, tokio::time::sleep(until), move |key| {
            record.lock().unwrap().push((key, start.elapsed()));
            async move {
                tokio::time::sleep(took).await;
                then
            }
        })
        .await;
        Arc::try_unwrap(started).unwrap().into_inner().unwrap()
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_concurrency_rounds_run_at_once_each_object_once() {
        let triggers = vec![(secs(0), "a"), (secs(0), "b"), (secs(0), "c"), (secs(0), "c")];
        let started = rounds(triggers, 2, (secs(1), Action::await_change()), secs(10)).await;
        assert_eq!(started, [("a", secs(0)), ("b", secs(0)), ("c", secs(1))], "c woken twice before it ran: once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_asking_to_requeue_runs_again_after_it_and_a_wake_while_running_reruns_it() {
        let requeued = rounds(vec![(secs(0), "a")], 4, (secs(1), Action::requeue(secs(5))), secs(14)).await;
        assert_eq!(requeued, [("a", secs(0)), ("a", secs(6)), ("a", secs(12))]);
        let woken = rounds(
            vec![(secs(0), "a"), (Duration::from_millis(500), "a")],
            4,
            (secs(1), Action::await_change()),
            secs(10),
        )
        .await;
        assert_eq!(woken, [("a", secs(0)), ("a", secs(1))], "not twice at once: again once its round ended");
    }

    #[tokio::test(start_paused = true)]
    async fn after_stop_no_round_starts_and_those_running_finish() {
        let ended = Arc::new(Mutex::new(vec![]));
        let record = ended.clone();
        let triggers = futures::stream::iter(["a", "b"]);
        run(triggers, 1, tokio::time::sleep(secs(1)), move |key| {
            let record = record.clone();
            async move {
                tokio::time::sleep(secs(3)).await;
                record.lock().unwrap().push(key);
                Action::await_change()
            }
        })
        .await;
        assert_eq!(*ended.lock().unwrap(), ["a"], "a finished; b, due behind it, never started");
    }
}
