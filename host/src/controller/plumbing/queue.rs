//! When each object's next round is due: what the ServiceSet controller's [`runner`] takes its
//! work from. Decides only, from the times it is given; it keeps, of kube-runtime's scheduler,
//! that an object is queued once, at its earliest time, and that an object never runs twice at
//! once: one woken while its round runs is due again when the round ends.
//!
//! [`runner`]: super::runner

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::time::Duration;
use tokio::time::Instant;

/// What a round asks of its object's next: to run again after a while, or only when woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action(Option<Duration>);

impl Action {
    /// Run again after `after`, unless woken sooner.
    pub const fn requeue(after: Duration) -> Self {
        Self(Some(after))
    }

    /// Run again only when woken.
    pub const fn await_change() -> Self {
        Self(None)
    }

    /// After how long to run again, if at all.
    pub const fn requeue_after(self) -> Option<Duration> {
        self.0
    }
}

/// The objects due, and those running.
pub struct Queue<K> {
    /// Each queued object's time.
    due: HashMap<K, Instant>,
    /// The same, in the order they are due.
    order: BTreeSet<(Instant, K)>,
    running: HashSet<K>,
}

impl<K> Default for Queue<K> {
    fn default() -> Self {
        Self { due: HashMap::new(), order: BTreeSet::new(), running: HashSet::new() }
    }
}

/// What the queue has for a worker now.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<K> {
    /// This object's round, to start now.
    Run(K),
    /// Nothing due yet: look again at this time.
    At(Instant),
    /// Nothing queued but what is running.
    Idle,
}

impl<K: Clone + Eq + Hash + Ord> Queue<K> {
    /// Queues `key` at `at`, or keeps it at the earlier time it is queued at.
    pub fn schedule(&mut self, key: K, at: Instant) {
        match self.due.get_mut(&key) {
            Some(due) if *due <= at => {}
            Some(due) => {
                self.order.remove(&(*due, key.clone()));
                *due = at;
                self.order.insert((at, key));
            }
            None => {
                self.due.insert(key.clone(), at);
                self.order.insert((at, key));
            }
        }
    }

    /// The earliest object due at `now` that is not running, taken out of the queue and marked
    /// running; else when to look again.
    pub fn next(&mut self, now: Instant) -> Next<K> {
        let Some((at, key)) = self.order.iter().find(|(_, key)| !self.running.contains(key)).cloned() else {
            return Next::Idle;
        };
        if at > now {
            return Next::At(at);
        }
        self.order.remove(&(at, key.clone()));
        self.due.remove(&key);
        self.running.insert(key.clone());
        Next::Run(key)
    }

    /// `key`'s round ended; `then`, when it asks to run again, from `now`.
    pub fn finished(&mut self, key: K, then: Action, now: Instant) {
        self.running.remove(&key);
        if let Some(after) = then.requeue_after() {
            self.schedule(key, now + after);
        }
    }

    /// How many objects are running.
    pub fn running(&self) -> usize {
        self.running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn an_object_is_queued_once_at_its_earliest_time() {
        let (start, mut queue) = (Instant::now(), Queue::default());
        queue.schedule("a", start + secs(10));
        queue.schedule("b", start + secs(5));
        queue.schedule("a", start + secs(1));
        queue.schedule("a", start + secs(20));
        assert_eq!(queue.next(start), Next::At(start + secs(1)));
        assert_eq!(queue.next(start + secs(6)), Next::Run("a"));
        assert_eq!(queue.next(start + secs(6)), Next::Run("b"));
        assert_eq!(queue.next(start + secs(60)), Next::Idle, "each ran once");
        assert_eq!(queue.running(), 2);
    }

    #[test]
    fn an_object_woken_while_running_runs_again_once_its_round_ended() {
        let (start, mut queue) = (Instant::now(), Queue::default());
        queue.schedule("a", start);
        assert_eq!(queue.next(start), Next::Run("a"));
        queue.schedule("a", start + secs(1));
        queue.schedule("b", start + secs(2));
        assert_eq!(queue.next(start + secs(3)), Next::Run("b"), "a is still running: b goes first");
        assert_eq!(queue.next(start + secs(3)), Next::Idle);
        queue.finished("a", Action::requeue(secs(30)), start + secs(3));
        assert_eq!(queue.next(start + secs(3)), Next::Run("a"), "woken while running: due at once, not in 30 s");
    }

    #[test]
    fn a_round_asks_for_its_next_or_for_none() {
        let (start, mut queue) = (Instant::now(), Queue::default());
        queue.schedule("a", start);
        queue.schedule("b", start);
        assert_eq!((queue.next(start), queue.next(start)), (Next::Run("a"), Next::Run("b")));
        queue.finished("a", Action::requeue(secs(15)), start);
        queue.finished("b", Action::await_change(), start);
        assert_eq!(queue.running(), 0);
        assert_eq!(queue.next(start), Next::At(start + secs(15)));
        assert_eq!(queue.next(start + secs(15)), Next::Run("a"));
        assert_eq!(queue.next(start + secs(600)), Next::Idle, "b waits for a change");
    }
}
