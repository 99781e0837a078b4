//! Runs rounds from a [`Queue`]: the objects its triggers name, each when due, at most
//! `concurrency` at once, each on a task of its own as kube-runtime's controller runs them (in
//! this task the rounds would share one core: 1.2x the CPU and converge time at 100,000 × 3);
//! until `stop`, after which no round starts and those running finish (a second SIGTERM or
//! Ctrl-C drops them, as kube-runtime's `shutdown_on_signal` does).
//!
//! The ServiceSet controller runs on this, not on kube-runtime's `Controller`, so that its cache
//! can be its own (see [`service_set_store`](crate::controller::caches::service_set_store)).

use super::queue::{Action, Next, Queue};
use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{Instant, sleep_until};

/// Runs `round` for each object `triggers` name, when due and with at most `concurrency` at a
/// time, until `stop`; `round`'s [`Action`] queues the object's next round.
pub async fn run<K, R>(
    triggers: impl Stream<Item = K>,
    concurrency: u16,
    stop: impl Future<Output = ()>,
    round: impl Fn(K) -> R,
) where
    K: Clone + Eq + Hash + Ord + std::fmt::Debug,
    R: Future<Output = Action> + Send + 'static,
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
                    let ran = Spawned(tokio::spawn(round(key.clone())));
                    running.push(async move {
                        let then = ran.await.unwrap_or_else(|e| panicked(&key, &e));
                        (key, then)
                    });
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

/// A round's task, aborted when dropped: when the controller stops without waiting for it, or
/// its leader lost the Lease.
struct Spawned<T>(JoinHandle<T>);

impl<T> Drop for Spawned<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for Spawned<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

/// What a round that panicked asks: nothing until its object changes (the next resync pass
/// runs it again). The others go on.
fn panicked(key: &impl std::fmt::Debug, error: &JoinError) -> Action {
    tracing::error!("the round of {key:?} failed: {error}");
    Action::await_change()
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

    type Round = Pin<Box<dyn Future<Output = Action> + Send>>;

    /// Rounds that take `took` and then record their object (panicking on "panics"), and what
    /// they recorded.
    fn ending(took: Duration) -> (Arc<Mutex<Vec<&'static str>>>, impl Fn(&'static str) -> Round) {
        let ended = Arc::new(Mutex::new(vec![]));
        let record = ended.clone();
        let round = move |key| {
            let record = record.clone();
            Box::pin(async move {
                assert_ne!(key, "panics", "a defect in one round");
                tokio::time::sleep(took).await;
                record.lock().unwrap().push(key);
                Action::await_change()
            }) as Round
        };
        (ended, round)
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_that_panics_stops_no_other() {
        let (ended, round) = ending(secs(0));
        run(futures::stream::iter(["panics", "b"]), 1, tokio::time::sleep(secs(5)), round).await;
        assert_eq!(*ended.lock().unwrap(), ["b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_runner_dropped_aborts_its_rounds() {
        let (ended, round) = ending(secs(3));
        let runner = run(futures::stream::iter(["a"]), 1, std::future::pending(), round);
        assert!(tokio::time::timeout(secs(1), runner).await.is_err(), "dropped (a lost Lease)");
        tokio::time::sleep(secs(10)).await;
        assert!(ended.lock().unwrap().is_empty(), "no round writes after its controller is gone");
    }

    #[tokio::test(start_paused = true)]
    async fn after_stop_no_round_starts_and_those_running_finish() {
        let (ended, round) = ending(secs(3));
        run(futures::stream::iter(["a", "b"]), 1, tokio::time::sleep(secs(1)), round).await;
        assert_eq!(*ended.lock().unwrap(), ["a"], "a finished; b, due behind it, never started");
    }
}
