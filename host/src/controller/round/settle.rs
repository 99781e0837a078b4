//! A short wait between a change of a ServiceSet's children and its reconcile, so that changes
//! that come together make one round: the watch echoes of the children one round applied, and
//! a CD tool updating several of them at once (Flux marks each HelmRelease Ready on its own).
//! Without it each echo or update could start a round of plugin calls of its own.

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;
use tokio::time::Instant;

/// How long a woken key waits: far below what a user notices in a status, and above the time
/// a CD tool takes to update the objects of one ServiceSet in a burst.
pub const SETTLE: Duration = Duration::from_millis(200);

/// A sender whose keys reach `out` `delay` after they were first sent; a key sent again while
/// it waits is not sent twice. Runs on a task of its own until the returned sender and its
/// clones are dropped.
pub fn settled<K>(out: UnboundedSender<K>, delay: Duration) -> UnboundedSender<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    let (tx, mut rx) = unbounded::<K>();
    tokio::spawn(async move {
        // Every key waits the same `delay`, so the queue is in order of when each is due.
        let mut due: VecDeque<(Instant, K)> = VecDeque::new();
        let mut waiting: HashSet<K> = HashSet::new();
        loop {
            let next_due = due.front().map(|(at, _)| *at);
            tokio::select! {
                sent = rx.next() => match sent {
                    Some(key) => {
                        if waiting.insert(key.clone()) {
                            due.push_back((Instant::now() + delay, key));
                        }
                    }
                    None => break,
                },
                () = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {
                    let now = Instant::now();
                    while let Some((_, key)) = due.pop_front_if(|(at, _)| *at <= now) {
                        waiting.remove(&key);
                        let _ = out.unbounded_send(key);
                    }
                }
            }
        }
        // Nothing more will come: what waits goes now rather than be lost.
        for (_, key) in due {
            let _ = out.unbounded_send(key);
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc::UnboundedReceiver;

    /// Advances the paused clock by `by` and returns what came out meanwhile.
    async fn after(by: Duration, out: &mut UnboundedReceiver<&'static str>) -> Vec<&'static str> {
        tokio::time::sleep(by).await;
        let mut came = Vec::new();
        while let Ok(key) = out.try_recv() {
            came.push(key);
        }
        came
    }

    #[tokio::test(start_paused = true)]
    async fn keys_sent_together_come_out_once_after_the_delay_in_the_order_first_sent() {
        let (out, mut received) = unbounded();
        let wake = settled(out, Duration::from_millis(100));
        for key in ["a", "b", "a", "a", "b"] {
            wake.unbounded_send(key).unwrap();
        }
        assert_eq!(after(Duration::from_millis(50), &mut received).await, Vec::<&str>::new(), "not before the delay");
        wake.unbounded_send("a").unwrap();
        assert_eq!(after(Duration::from_millis(51), &mut received).await, ["a", "b"]);
        assert_eq!(after(Duration::from_millis(200), &mut received).await, Vec::<&str>::new(), "each once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_sent_after_it_came_out_comes_out_again() {
        let (out, mut received) = unbounded();
        let wake = settled(out, Duration::from_millis(100));
        wake.unbounded_send("a").unwrap();
        assert_eq!(after(Duration::from_millis(101), &mut received).await, ["a"]);
        wake.unbounded_send("a").unwrap();
        wake.unbounded_send("c").unwrap();
        assert_eq!(after(Duration::from_millis(101), &mut received).await, ["a", "c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn what_waits_when_the_senders_go_is_not_lost() {
        let (out, mut received) = unbounded();
        let wake = settled(out, Duration::from_secs(60));
        wake.unbounded_send("a").unwrap();
        drop(wake);
        assert_eq!(after(Duration::from_millis(1), &mut received).await, ["a"]);
    }
}
