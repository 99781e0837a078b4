//! Slots per key (a region, a namespace): at most `per_key` holders at once, so that one key
//! that hangs, or one writer with many objects, holds only its share of the reconcile workers.
//! [`Slots::take`] never waits: a caller without one retries shortly, without holding a worker;
//! [`Slots::wait_for`] waits a bound the caller chooses, for work that is over in moments. A slot
//! freed goes to a waiter, never to a caller of `take` while one waits: first to the longest
//! [`Turn::First`] waiter, then to the longest [`Turn::After`] one. An `After` waiter waits only
//! while no `First` one does, and gives way as soon as one comes, so that work that may wait
//! never holds workers that the first work needs to reach its turn.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;

/// The slots of every key.
pub struct Slots {
    per_key: usize,
    keys: Mutex<HashMap<String, Arc<Key>>>,
}

/// Whose turn a waiter's is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Before every `After` waiter, in the order they came.
    First,
    /// Only while no `First` waiter waits, in the order they came.
    After,
}

/// A slot of one key, held until dropped; then it goes to the key's next waiter, or is free.
#[derive(Debug)]
#[must_use = "a slot is given back as soon as it is dropped"]
pub struct Slot {
    /// `None` once handed on, so that it is freed once.
    key: Option<Arc<Key>>,
}

/// One key's slots: how many are held, and who waits for one.
#[derive(Debug, Default)]
struct Key {
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    held: usize,
    first: VecDeque<oneshot::Sender<Slot>>,
    after: VecDeque<oneshot::Sender<Slot>>,
}

impl Slots {
    /// `per_key` slots per key (at least one).
    pub fn new(per_key: usize) -> Self {
        Self { per_key: per_key.max(1), keys: Mutex::default() }
    }

    /// How many holders one key may have at once.
    pub fn per_key(&self) -> usize {
        self.per_key
    }

    /// A slot of `key`; `None` when its slots are all taken.
    pub fn take(&self, key: &str) -> Option<Slot> {
        let key = self.of(key);
        self.free(&key, &mut key.lock())
    }

    /// A slot of `key`, waiting at most `within` for one in `turn`; `None` when none came by
    /// then, or at once (or as soon as one comes) for an `After` waiter while a `First` one waits.
    pub async fn wait_for(&self, key: &str, within: Duration, turn: Turn) -> Option<Slot> {
        let key = self.of(key);
        let given = {
            let mut queue = key.lock();
            if let Some(slot) = self.free(&key, &mut queue) {
                return Some(slot);
            }
            // Waiters that gave up leave their place behind; they do not count as waiting.
            queue.first.retain(|waiter| !waiter.is_closed());
            let (waiter, given) = oneshot::channel();
            match turn {
                Turn::First => {
                    queue.first.push_back(waiter);
                    // Dropped, their places wake the `After` waiters empty-handed.
                    queue.after.clear();
                }
                Turn::After if queue.first.is_empty() => queue.after.push_back(waiter),
                Turn::After => return None,
            }
            given
        };
        tokio::time::timeout(within, given).await.ok()?.ok()
    }

    /// A free slot of `key`, whose `queue` is locked: none while one is waited for, as a freed
    /// slot goes to a waiter.
    fn free(&self, key: &Arc<Key>, queue: &mut Queue) -> Option<Slot> {
        (queue.held < self.per_key).then(|| {
            queue.held += 1;
            Slot { key: Some(key.clone()) }
        })
    }

    /// The slots of `key`.
    fn of(&self, key: &str) -> Arc<Key> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        // A key no one holds or waits for needs no entry (regions and namespaces come and go);
        // each holder and waiter keeps its key's slots alive.
        keys.retain(|_, slots| Arc::strong_count(slots) > 1);
        keys.entry(key.to_string()).or_default().clone()
    }
}

impl Key {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A holder's slot goes to the next waiter still waiting, or is free.
    fn hand_on(self: Arc<Self>) {
        loop {
            let waiter = {
                let mut queue = self.lock();
                match queue.first.pop_front().or_else(|| queue.after.pop_front()) {
                    Some(waiter) => waiter,
                    None => {
                        queue.held -= 1;
                        return;
                    }
                }
            };
            // A waiter that gave up since hands back what it was sent, to the next one; one that
            // gives up after it was sent drops the slot, which then comes here again.
            match waiter.send(Slot { key: Some(self.clone()) }) {
                Ok(()) => return,
                Err(mut unsent) => unsent.key = None,
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            key.hand_on();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_at_most_its_slots_and_a_dropped_one_is_free_again() {
        let slots = Slots::new(2);
        let (first, second) = (slots.take("eu"), slots.take("eu"));
        assert!(first.is_some() && second.is_some());
        assert!(slots.take("eu").is_none(), "both taken");
        assert!(slots.take("us").is_some(), "another key has slots of its own");
        drop(first);
        assert!(slots.take("eu").is_some(), "a dropped slot is free");
        assert_eq!(Slots::new(0).per_key(), 1, "at least one");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_gets_the_slot_freed_within_its_bound_before_a_taker_and_none_after() {
        let slots = Arc::new(Slots::new(1));
        let held = slots.take("eu").expect("a free slot");
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.wait_for("eu", Duration::from_secs(1), Turn::First).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(slots.take("eu").is_none(), "the slot is held; the waiter keeps the key's entry");
        drop(held);
        assert!(slots.take("eu").is_none(), "the freed slot went to the waiter, never to a taker");
        assert!(waiting.await.unwrap(), "the freed slot goes to the waiter");
        let held = slots.take("eu").expect("free again once the waiter dropped it");
        let late = slots.wait_for("eu", Duration::from_secs(1), Turn::First).await;
        assert!(late.is_none(), "none freed within the bound");
        drop(held);
        assert!(slots.take("eu").is_some(), "a waiter that gave up took nothing with it");
    }

    /// Issue 48: at 100,000 ServiceSets in one namespace, the looks again at held-back services
    /// waited in line with the first looks at new deployments and held the workers these needed.
    #[tokio::test(start_paused = true)]
    async fn a_first_waiter_goes_before_an_after_one_which_gives_way_when_one_comes() {
        let slots = Arc::new(Slots::new(1));
        let wait = |turn, order: Arc<Mutex<Vec<&'static str>>>, name| {
            let slots = slots.clone();
            tokio::spawn(async move {
                let slot = slots.wait_for("eu", Duration::from_secs(1), turn).await;
                order.lock().unwrap().push(name);
                slot.is_some()
            })
        };
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = slots.take("eu").expect("a free slot");
        let after = wait(Turn::After, order.clone(), "after");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let first = wait(Turn::First, order.clone(), "first");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!after.await.unwrap(), "a first waiter came: the after one gave way");
        assert_eq!(*order.lock().unwrap(), ["after"], "at once, not at its bound");
        let refused = slots.wait_for("eu", Duration::from_secs(1), Turn::After).await;
        assert!(refused.is_none(), "while a first one waits, an after one does not");
        drop(held);
        assert!(first.await.unwrap(), "the freed slot went to the first waiter");

        let held = slots.take("eu").expect("free again");
        let after = wait(Turn::After, order.clone(), "after, alone");
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(held);
        assert!(after.await.unwrap(), "with no first waiter, an after one gets the slot freed");
    }
}
