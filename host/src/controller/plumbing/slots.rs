//! Slots per key (a region, a namespace): at most `per_key` holders at once, so that one key
//! that hangs, or one writer with many objects, holds only its share of the reconcile workers.
//! [`Slots::take`] never waits: a caller without one retries shortly, without holding a worker;
//! [`Slots::wait_for`] waits a bound the caller chooses, for work that is over in moments. A slot
//! freed goes to the longest waiter first, never to a caller of `take` while one waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of every key.
pub struct Slots {
    per_key: usize,
    keys: Mutex<HashMap<String, Arc<Semaphore>>>,
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

    /// A slot of `key`, held until dropped; `None` when its slots are all taken.
    pub fn take(&self, key: &str) -> Option<OwnedSemaphorePermit> {
        self.of(key).try_acquire_owned().ok()
    }

    /// A slot of `key`, held until dropped, waiting at most `within` for one; `None` when none
    /// came free by then.
    pub async fn wait_for(&self, key: &str, within: Duration) -> Option<OwnedSemaphorePermit> {
        let slots = self.of(key);
        tokio::time::timeout(within, slots.acquire_owned()).await.ok()?.ok()
    }

    /// The slots of `key`.
    fn of(&self, key: &str) -> Arc<Semaphore> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        // A key no one holds or waits for needs no entry (regions and namespaces come and go);
        // each holder and waiter keeps its key's slots alive.
        keys.retain(|_, slots| Arc::strong_count(slots) > 1);
        keys.entry(key.to_string()).or_insert_with(|| Arc::new(Semaphore::new(self.per_key))).clone()
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
            async move { slots.wait_for("eu", Duration::from_secs(1)).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(slots.take("eu").is_none(), "the slot is held; the waiter keeps the key's entry");
        drop(held);
        assert!(slots.take("eu").is_none(), "the freed slot went to the waiter, never to a taker");
        assert!(waiting.await.unwrap(), "the freed slot goes to the waiter");
        let held = slots.take("eu").expect("free again once the waiter dropped it");
        assert!(slots.wait_for("eu", Duration::from_secs(1)).await.is_none(), "none freed within the bound");
        drop(held);
    }
}
