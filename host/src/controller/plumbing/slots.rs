//! Slots per key (a region, a namespace): at most `per_key` holders at once, so that one key
//! that hangs, or one writer with many objects, holds only its share of the reconcile workers.
//! Taking a slot never waits: a caller without one retries shortly, without holding a worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        // A key none of whose slots is taken needs no entry (regions and namespaces come and go).
        keys.retain(|_, slots| slots.available_permits() < self.per_key);
        let slots = keys.entry(key.to_string()).or_insert_with(|| Arc::new(Semaphore::new(self.per_key)));
        slots.clone().try_acquire_owned().ok()
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
}
